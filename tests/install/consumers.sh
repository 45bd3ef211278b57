#!/usr/bin/env bash
# consumers.sh BUILD_DIR SOURCE_DIR: braid used from its install prefix, never from the build tree.
#   1. cmake --install BUILD_DIR --prefix <BUILD_DIR>/install-test/prefix (a fresh prefix);
#   2. the installed tools run without LD_LIBRARY_PATH (RPATH $ORIGIN/../lib) and link the
#      installed libbraid.so, not the build tree's;
#   3. a CMake project (tests/install/cxx_consumer) finds braid with find_package(braid CONFIG)
#      and links braid::braid (C++ API);
#   4. a plain C program is built with `cc c_consumer.c $(pkg-config --cflags --libs braid)`;
#   5. both run on 3 ranks started by the installed braid-run, over tcp and over shm.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work="$build/install-test"
prefix="$work/prefix"
rm -rf "$work"
mkdir -p "$work"
unset LD_LIBRARY_PATH BRAID_FILE_STORE RANK WORLD_SIZE MASTER_ADDR MASTER_PORT

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/braid/braid.h include/braid/bucketer.h include/braid/comm.hpp \
         include/braid/bucketer.hpp lib/libbraid.so lib/libbraid.so.0 lib/libnccl-net-braid.so \
         lib/libnccl-tuner-braid.so lib/cmake/braid/braidConfig.cmake \
         lib/cmake/braid/braidConfigVersion.cmake lib/pkgconfig/braid.pc bin/braid-perf \
         bin/braid-run bin/braid-info share/doc/braid/README.md; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $prefix/$f was not installed"; exit 1; }
done

# Nothing installed may point into the build or source tree (other than the prefix itself,
# which this test keeps inside the build tree).
if grep -rhoE "($build|$src)[^\" ;)]*" "$prefix/lib/cmake" "$prefix/lib/pkgconfig" |
   grep -vE "^$prefix(/|\$)"; then
  echo "FAIL: the CMake package or braid.pc names the build or source tree (above)"
  exit 1
fi

echo "== installed tools resolve the installed libbraid.so"
lib_of() { ldd "$1" | awk '$1 == "libbraid.so.0" {print $3}'; }
for tool in braid-perf braid-train-bench; do
  where=$(lib_of "$prefix/bin/$tool")
  [ "$where" = "$prefix/lib/libbraid.so.0" ] || [ "$(readlink -f "$where")" = "$(readlink -f "$prefix/lib/libbraid.so.0")" ] || {
    echo "FAIL: $tool loads libbraid.so.0 from '$where', not $prefix/lib"; exit 1; }
done
readelf -d "$prefix/bin/braid-perf" | grep -E 'RPATH|RUNPATH'
# Exit status 1 when any element is wrong (its #wrong column).
BRAID_CALIBRATION_CACHE=off "$prefix/bin/braid-perf" --ranks 3 -b 8 -e 4K -f 8 -n 2 -w 1 \
  >"$work/perf.log" 2>&1 || { cat "$work/perf.log"; echo "FAIL: installed braid-perf"; exit 1; }
tail -4 "$work/perf.log"

echo "== CMake consumer (find_package(braid CONFIG), braid::braid)"
cmake -S "$src/tests/install/cxx_consumer" -B "$work/cxx" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/cxx-configure.log" || {
  cat "$work/cxx-configure.log"; exit 1; }
grep 'braid 0' "$work/cxx-configure.log"
cmake --build "$work/cxx" >"$work/cxx-build.log" || { cat "$work/cxx-build.log"; exit 1; }

echo "== C consumer (pkg-config --cflags --libs braid)"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs braid)
echo "pkg-config: $flags"
case "$flags" in *-lbraid*) ;; *) echo "FAIL: pkg-config gives no -lbraid"; exit 1 ;; esac
extra=$(sed "s#-I$prefix/include##; s#-L$prefix/lib##; s#-lbraid##" <<<"$flags" | tr -d ' ')
[ -z "$extra" ] || { echo "FAIL: pkg-config asks for more than -I, -L and -lbraid: $extra"; exit 1; }
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror -o "$work/c_consumer" "$src/tests/install/c_consumer.c" $flags

# The prefix is not a system directory: the consumers find libbraid.so through LD_LIBRARY_PATH,
# as a user of a private prefix would (the installed tools do not need it).
for transport in tcp shm; do
  for program in "$work/cxx/cxx_consumer" "$work/c_consumer"; do
    echo "== $(basename "$program") on 3 ranks ($transport)"
    where=$(LD_LIBRARY_PATH="$prefix/lib" lib_of "$program")
    [ "$(readlink -f "$where")" = "$(readlink -f "$prefix/lib/libbraid.so.0")" ] || {
      echo "FAIL: $program loads libbraid.so.0 from '$where'"; exit 1; }
    BRAID_TRANSPORT=$transport LD_LIBRARY_PATH="$prefix/lib" \
      "$prefix/bin/braid-run" -n 3 --timeout 60 -- "$program"
  done
done
echo "consumers.sh: ok"
