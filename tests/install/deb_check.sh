#!/usr/bin/env bash
# deb_check.sh BUILD_DIR: the Debian package, installed as a user installs it.
#   cpack -G DEB (into BUILD_DIR/deb-test), the package's Depends (Debian runtime packages, no
#   -dev), apt-get install ./braid_<version>_amd64.deb, then from a clean environment outside the
#   build tree: NCCL_NET_PLUGIN=braid NCCL_TUNER_PLUGIN=braid braid-info nccl loads both plugins
#   by name (as NCCL's dlopen does, no LD_LIBRARY_PATH), braid-perf runs on 2 ranks with
#   /usr/lib/libbraid.so.0; apt-get remove braid leaves none of the package's files and no
#   braid library in the loader's cache.
# Root only (apt-get); exit 77 (skipped) when not root, without apt-get/dpkg-shlibdeps, or when a
# braid package is already installed (a user's installation is never replaced or removed).
set -euo pipefail
build=$(cd "$1" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root for apt-get install"
for t in apt-get dpkg-deb dpkg-shlibdeps cpack; do
  command -v "$t" >/dev/null || skip "$t not found (scripts/setup.sh installs dpkg-dev)"
done
if dpkg-query -W -f='${Status}' braid 2>/dev/null | grep -q 'install ok installed'; then
  skip "a braid package is installed already ($(dpkg-query -W -f='${Version}' braid)); not touching it"
fi
work="$build/deb-test"
rm -rf "$work"
mkdir -p "$work"
installed=0
cleanup() {
  if [ "$installed" = 1 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq braid >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

echo "== cpack -G DEB"
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work") >"$work/cpack.log" 2>&1 || {
  tail -30 "$work/cpack.log"; echo "FAIL: cpack"; exit 1; }
deb=$(ls "$work"/braid_*_amd64.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "FAIL: no braid_*_amd64.deb in $work"; ls "$work"; exit 1; }
echo "package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
[ -n "$depends" ] || { echo "FAIL: the package declares no dependencies"; exit 1; }
if grep -qE '(^|[ ,])[a-z0-9.+-]+-dev([ ,(]|$)' <<<"$depends"; then
  echo "FAIL: the package depends on -dev packages"; exit 1
fi
contents=$(dpkg-deb -c "$deb")
for lib in usr/lib/libbraid.so.0 usr/lib/libnccl-net-braid.so usr/lib/libnccl-tuner-braid.so \
           usr/bin/braid-info usr/bin/braid-perf usr/include/braid/braid.h \
           usr/lib/cmake/braid/braidConfig.cmake usr/lib/pkgconfig/braid.pc; do
  grep -q " \./$lib\( \|$\)" <<<"$contents" || { echo "FAIL: $lib is not in the package"; exit 1; }
done

echo "== apt-get install $deb"
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" \
  >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; echo "FAIL: apt-get install"; exit 1; }
files=$(dpkg -L braid)

# A clean environment, outside the build tree, as on a machine that never had one.
clean=(env -i PATH=/usr/bin:/bin HOME="$work" BRAID_CALIBRATION_CACHE=off BRAID_NET_IFNAME=lo)
echo "== NCCL_NET_PLUGIN=braid NCCL_TUNER_PLUGIN=braid braid-info nccl"
(cd / && "${clean[@]}" NCCL_NET_PLUGIN=braid NCCL_TUNER_PLUGIN=braid /usr/bin/braid-info nccl) \
  >"$work/info.log" 2>&1 || { cat "$work/info.log"; echo "FAIL: braid-info nccl"; exit 1; }
grep -E 'dlopen\(|no problems' "$work/info.log"
for name in libnccl-net-braid.so libnccl-tuner-braid.so; do
  grep -q "dlopen(\"$name\"): loaded" "$work/info.log" || {
    cat "$work/info.log"; echo "FAIL: $name was not loaded by name"; exit 1; }
done
grep -q 'no problems found' "$work/info.log" || { cat "$work/info.log"; exit 1; }
where=$(ldd /usr/bin/braid-perf | awk '$1 == "libbraid.so.0" {print $3}')
[ "$(readlink -f "$where")" = "$(readlink -f /usr/lib/libbraid.so.0)" ] || {
  echo "FAIL: /usr/bin/braid-perf loads libbraid.so.0 from '$where'"; exit 1; }
(cd / && "${clean[@]}" /usr/bin/braid-perf --ranks 2 -b 8 -e 1K -f 32 -n 2 -w 1) >"$work/perf.log" 2>&1 || {
  cat "$work/perf.log"; echo "FAIL: /usr/bin/braid-perf"; exit 1; }
tail -3 "$work/perf.log"

echo "== apt-get remove braid"
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq braid >"$work/remove.log" 2>&1 || {
  cat "$work/remove.log"; echo "FAIL: apt-get remove"; exit 1; }
installed=0
left=0
while IFS= read -r f; do
  # Directories the package shares with the system (/usr, /usr/lib, ...) stay; its own go.
  if [ -e "$f" ] && { [ ! -d "$f" ] || [[ "$f" == */braid ]]; }; then
    echo "left behind: $f"; left=1
  fi
done <<<"$files"
if ldconfig -p | grep -q 'braid'; then
  echo "FAIL: the loader's cache still lists braid libraries:"; ldconfig -p | grep braid; exit 1
fi
[ "$left" = 0 ] || { echo "FAIL: apt-get remove left files behind"; exit 1; }
echo "deb_check.sh: ok ($(wc -l <<<"$files") paths installed and removed)"
