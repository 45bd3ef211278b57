#!/usr/bin/env bash
# rehearse_fresh.sh: runs the README's test command as a machine that has never run braid would.
#
#   scripts/rehearse_fresh.sh [--keep] [--main] [-- CTEST_ARGS...]
#
# Clones the committed HEAD of this repository (uncommitted changes are not part of a fresh
# clone: commit first) into a new temporary folder, points HOME, XDG_CACHE_HOME, XDG_DATA_HOME,
# XDG_CONFIG_HOME and TMPDIR at empty folders inside it, unsets every BRAID_* variable (so no
# calibration cache, data directory or tuning file of this machine is seen), and runs
#
#   ./scripts/setup.sh && ctest --test-dir build --output-on-failure -j2
#
# in the clone, with the time of each half. --main runs the README's first command instead
# (set-up and the all-reduce benchmark). CTEST_ARGS after -- are added to ctest's (e.g. -L unit
# for a quicker look). Debian packages that are already installed stay installed: the rehearsal
# covers what a build and test run find in $HOME, caches and the tree, not the package
# installation (scripts/setup.sh installs only what is missing). The folder is removed at the end
# unless --keep; its log is kept in any case and its path printed.
#
# Exit status: that of the command (0 = the fresh machine passes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

keep=0
mode=test
ctest_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    --main) mode=main ;;
    --) shift; ctest_extra=("$@"); break ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "rehearse_fresh.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if ! git -C "$root" diff --quiet HEAD -- 2>/dev/null; then
  echo "rehearse_fresh.sh: note: uncommitted changes in $root are not part of the clone" >&2
fi

work=$(mktemp -d /tmp/braid-fresh.XXXXXX)
log="$work.log"
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/home" "$work/cache" "$work/data" "$work/config" "$work/tmp"
git clone -q "$root" "$work/braid"
echo "rehearse_fresh.sh: clone of $(git -C "$work/braid" rev-parse --short HEAD) in $work/braid"
echo "rehearse_fresh.sh: HOME=$work/home, XDG_CACHE_HOME=$work/cache, log $log"

# Only the variables a login shell has; no BRAID_*, no caller's data or cache locations.
env_args=(env -i "PATH=$PATH" "HOME=$work/home" "USER=${USER:-root}" "LANG=${LANG:-C.UTF-8}"
          "XDG_CACHE_HOME=$work/cache" "XDG_DATA_HOME=$work/data" "XDG_CONFIG_HOME=$work/config"
          "TMPDIR=$work/tmp")
[ -n "${CI:-}" ] && env_args+=("CI=$CI")

if [ "$mode" = main ]; then
  # The README's first command, after the set-up.
  rest="./build/bench/perf/braid-perf --ranks 2 -b 8 -e 64M -f 4"
else
  rest="ctest --test-dir build --output-on-failure -j2"
  # Quoted for the eval below: a label regex such as 'unit|install' must stay one argument.
  [ ${#ctest_extra[@]} -eq 0 ] || rest+=$(printf ' %q' "${ctest_extra[@]}")
fi
echo "rehearse_fresh.sh: running: ./scripts/setup.sh && $rest"
start=$(date +%s)
set +e
(cd "$work/braid" && "${env_args[@]}" bash -c '
  s=$(date +%s); ./scripts/setup.sh; rc=$?; m=$(date +%s)
  echo "rehearse_fresh.sh: set-up took $((m - s)) s (exit $rc)"
  [ $rc -eq 0 ] || exit $rc
  eval "$1"; rc=$?; e=$(date +%s)
  echo "rehearse_fresh.sh: \"$1\" took $((e - m)) s (exit $rc)"
  exit $rc' _ "$rest") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
end=$(date +%s)
# Nothing may have been written outside the clone's build tree but into these folders: list
# what the run left in the fresh HOME and caches (expected: nothing, or pip's own cache).
leftover=$(cd "$work" && find home cache data config -mindepth 1 -maxdepth 3 2>/dev/null | head -20)
if [ -n "$leftover" ]; then
  echo "rehearse_fresh.sh: written to the fresh HOME/caches:" | tee -a "$log"
  echo "$leftover" | sed 's/^/  /' | tee -a "$log"
fi
echo "rehearse_fresh.sh: exit $rc after $((end - start)) s in all; log $log" | tee -a "$log"
exit "$rc"
