#!/usr/bin/env bash
# bench/compare_peers.sh end to end (label tools): 2 local ranks, tiny sizes, no fabric, nothing
# installed or built. The combined JSON must hold out-of-place and in-place rows of braid, MPICH,
# Open MPI and gloo for every collective, none wrong, the tables must print (the broadcast's
# against MPI with braid's in-place time), and the plots must be written. Skipped (77) where a peer's baseline or matplotlib is missing.
#   compare_peers_check.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1
build=$2
perf=$build/bench/perf
for bin in gloo-perf mpi-perf-mpich mpi-perf-openmpi; do
  [ -x "$perf/$bin" ] || { echo "SKIP: no $perf/$bin (libgloo-dev, MPICH or Open MPI missing at configure)"; exit 77; }
done
for cmd in mpiexec.mpich mpiexec.openmpi; do
  command -v "$cmd" >/dev/null || { echo "SKIP: no $cmd"; exit 77; }
done
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { echo "SKIP: no python3-matplotlib"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export BRAID_CALIBRATION_CACHE=off BRAID_TIMEOUT_MS=${BRAID_TIMEOUT_MS:-20000}

if ! bash "$src/bench/compare_peers.sh" "$build" --no-build --no-install --no-stream --no-fabric \
     --ranks 2 -b 1K -e 64K -f 64 -n 2 -w 1 -T 60 --out "$work/out" >"$work/log" 2>&1; then
  cat "$work/log"; echo "FAIL: compare_peers.sh exited nonzero"; exit 1
fi
json=$work/out/all.jsonl
for impl in braid mpich openmpi gloo; do
  for coll in all_reduce reduce_scatter all_gather broadcast; do
    for inplace in false true; do
      # 1K and 64K: two rows per implementation, collective and placement.
      n=$(grep "\"collective\":\"$coll\"" "$json" | grep "\"inplace\":$inplace" |
          grep -c "\"impl\":\"$impl\",\"placement\":\"local-2\"")
      [ "$n" -eq 2 ] || { cat "$work/log"; echo "FAIL: $n rows of $impl $coll inplace=$inplace, want 2"; exit 1; }
    done
    grep -q "^## $coll, 2 local ranks" "$work/log" || { cat "$work/log"; echo "FAIL: no $coll table"; exit 1; }
  done
done
if grep -q '"wrong":[1-9]' "$json"; then
  grep '"wrong":[1-9]' "$json" | head -3; echo "FAIL: wrong elements"; exit 1
fi
# Every run carries the core round trip from before and after it (bench/micro/core_roundtrip: where
# the vCPUs sat), and every table prints them.
if [ "$(nproc)" -ge 2 ]; then
  n=$(grep -c '"core_rtt_ns":\[[0-9][0-9]*,[0-9][0-9]*\]}$' "$json")
  [ "$n" -eq "$(grep -c '^{' "$json")" ] ||
    { grep -v '"core_rtt_ns":\[[0-9]' "$json" | head -2; echo "FAIL: rows without the core round trip"; exit 1; }
  [ "$(grep -c '^# core round trip before/after each run, ns: braid [0-9]' "$work/log")" -eq 4 ] ||
    { cat "$work/log"; echo "FAIL: a table without its core round trip line"; exit 1; }
fi
# MPI_Bcast has one buffer: the out-of-place broadcast table sets braid's in-place time beside it
# (its own column) and each row that compares with MPI says so.
bcast=$(sed -n '/^## broadcast, 2 local/,/^$/p' "$work/log")
grep -q 'braid i.p. us' <<<"$bcast" || { echo "$bcast"; echo "FAIL: no in-place braid column in the broadcast table"; exit 1; }
grep -q 'braid in place as MPI_Bcast' <<<"$bcast" || { echo "$bcast"; echo "FAIL: no broadcast row compares braid in place with MPI"; exit 1; }
for png in compare-peers.png compare-peers-ratio.png; do
  [ -s "$work/out/$png" ] || { cat "$work/log"; echo "FAIL: no $png"; exit 1; }
done
# A reduce-scatter or all-gather with fewer elements than ranks (empty blocks: MPI returns at
# once) gets no time ratio; a size with whole blocks does.
row() {  # impl bytes count time_us
  printf '{"collective":"all_gather","impl":"%s","placement":"local-4","ranks":4,"bytes":%s,"count":%s,"inplace":false,"time_us":%s,"busbw_GBps":0.1,"algo_chosen":"shm","wrong":0}\n' "$@"
}
{ row braid 8 2 3.4; row mpich 8 2 0.04; row braid 64 16 3.5; row mpich 64 16 7.0; } >"$work/empty.jsonl"
/usr/bin/python3 "$src/bench/compare_peers.py" "$work/empty.jsonl" --no-plot >"$work/empty.log" 2>&1
grep -Eq '^ +8 .*\| - \(empty blocks' "$work/empty.log" ||
  { cat "$work/empty.log"; echo "FAIL: the 8-byte all-gather over 4 ranks got a ratio"; exit 1; }
grep -Eq '^ +64 .*\| x0\.50 \(vs MPICH\)' "$work/empty.log" ||
  { cat "$work/empty.log"; echo "FAIL: the 64-byte all-gather over 4 ranks lost its ratio"; exit 1; }
sed -n '/^## all_reduce/,/^$/p' "$work/log"
echo "PASS"
