#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (AddressSanitizer and UBSan, every braid
# library instrumented) in ./build-fuzz (or $BRAID_FUZZ_BUILD_DIR) and fuzzes each named target
# (default: all) in turn, one job each, until --time seconds or --runs executions, whichever comes
# first. Inputs that found new coverage go to build-fuzz/corpus/<target>/ (the checked-in seeds in
# tests/fuzz/corpus/<target>/ are read, never written); a crash leaves its input in
# build-fuzz/artifacts/<target>/ and makes the script exit nonzero. Prints one line per target:
# executions, seconds, result. Installs clang and libFuzzer from Debian when they are missing.
#
# --no-build fuzzes the binaries already in the build directory as they are (several fuzz.sh runs
# side by side, one per core, while the sources change).
#
#   scripts/fuzz.sh [--time SECONDS] [--runs N] [--jobs J] [--no-build] [target...]
#   scripts/fuzz.sh --list
set -euo pipefail
cd "$(dirname "$0")/.."

time_s=60
runs=-1
jobs="$(nproc)"
build_first=1
targets=()
all=(tuning_file algo_spec tuner_rules topology_file calibration_cache store_server tcp_frames
     handshake)
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --time) time_s="$2"; shift 2 ;;
    --time=*) time_s="${1#*=}"; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --runs=*) runs="${1#*=}"; shift ;;
    --jobs) jobs="$2"; shift 2 ;;  # build jobs; fuzzing is always one process
    --jobs=*) jobs="${1#*=}"; shift ;;
    --no-build) build_first=0; shift ;;
    --list) printf '%s\n' "${all[@]}"; exit 0 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [ -f "tests/fuzz/$t.cc" ] || { echo "fuzz.sh: no target '$t' (try --list)" >&2; exit 2; }
done

# clang, and libFuzzer's runtime (libclang-rt-dev); cmake, make and GoogleTest for the configure.
packages=(clang libclang-rt-dev cmake make libgtest-dev)
scripts/apt_install_missing.sh fuzz.sh "${packages[@]}"

build="${BRAID_FUZZ_BUILD_DIR:-build-fuzz}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRAID_FUZZ=ON \
    -DBRAID_WITH_CUDA=OFF -DBRAID_WITH_NCCL=OFF -DBRAID_WITH_UCX=OFF -DBRAID_WITH_MPI=OFF \
    -DBRAID_WITH_HWLOC=OFF -DBRAID_WITH_PYTHON=OFF >/dev/null
fi
if [ $build_first -eq 1 ]; then
  cmake --build "$build" -j"$jobs" --target "${targets[@]/#/fuzz_}"
else
  for t in "${targets[@]}"; do
    [ -x "$build/tests/fuzz/fuzz_$t" ] || { echo "fuzz.sh: --no-build, but $build/tests/fuzz/fuzz_$t is not built" >&2; exit 2; }
  done
fi

status=0
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t"
  log="$build/fuzz-$t.log"
  echo "fuzz.sh: fuzzing $t (at most ${time_s} s, runs ${runs}); log $log"
  start=$(date +%s)
  rc=0
  BRAID_DEBUG_FILE=/dev/null "$build/tests/fuzz/fuzz_$t" -max_total_time="$time_s" -runs="$runs" \
    -max_len=4096 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" \
    "$build/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  secs=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    result=ok
  else
    result="FAILED (exit $rc; see $log and $build/artifacts/$t/)"
    status=1
    tail -30 "$log" >&2
  fi
  summary+=("$(printf '%-18s %12s execs %6s s  %s' "$t" "${execs:-?}" "$secs" "$result")")
done
printf '%s\n' "${summary[@]}"
exit $status
