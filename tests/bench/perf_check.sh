#!/usr/bin/env bash
# Every braid-perf binary on real local ranks (label multirank): 3 ranks (odd, not a power of
# two) and 4, out of place and in place, two dtypes, a root other than 0 for the rooted ones, a
# size that is not a multiple of the rank count. Each run must exit 0 with 0 wrong elements and
# write one JSON line per size and placement naming its collective; all_reduce -a all must list
# and run every algorithm of the table available here, the double binary tree among them.
#   perf_check.sh BIN_DIR
set -euo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export BRAID_CALIBRATION_CACHE=off BRAID_TIMEOUT_MS=${BRAID_TIMEOUT_MS:-20000}

run() {  # run NAME COLLECTIVE RANKS ARGS...
  local name=$1 coll=$2 ranks=$3
  shift 3
  local log=$work/$name-$ranks.log json=$work/$name-$ranks.jsonl
  if ! "$bin/$name" --ranks "$ranks" -T 120 -n 2 -w 1 -J "$json" "$@" >"$log" 2>&1; then
    cat "$log"; echo "FAIL: $name --ranks $ranks $*"; exit 1
  fi
  grep -q '^# Out of bounds values : 0 OK$' "$log" || { cat "$log"; echo "FAIL: $name: wrong elements"; exit 1; }
  local rows lines
  rows=$(grep -c '^ *[0-9]' "$log")
  lines=$(grep -c "\"collective\":\"$coll\"" "$json")
  [ "$lines" -eq $((2 * rows)) ] && [ "$rows" -gt 0 ] ||
    { cat "$log"; echo "FAIL: $name: $rows rows but $lines JSON lines for $coll"; exit 1; }
  # One host, several ranks: every row carries the ceiling measured in the same run.
  if grep -qE '"ceiling_us":(-1|0\.000),' "$json" || ! grep -q '"ceiling_us"' "$json"; then
    grep -m3 . "$json"; echo "FAIL: $name: rows without a ceiling"; exit 1
  fi
  echo "ok: $name --ranks $ranks $* ($rows rows)"
}

for ranks in 3 4; do
  run braid-perf all_reduce $ranks -b 8 -e 1M -f 32 -d float
  run braid-perf all_reduce $ranks -b 12 -e 100K -f 25 -d int64 -o max
  run braid-perf-reducescatter reduce_scatter $ranks -b 96 -e 1M -f 32 -d bf16
  run braid-perf-allgather all_gather $ranks -b 96 -e 1M -f 32 -d int8
  run braid-perf-broadcast broadcast $ranks -b 8 -e 1M -f 32 -r 2 -d double
  run braid-perf-reduce reduce $ranks -b 8 -e 1M -f 32 -r 2 -o prod -d int32
  run braid-perf-alltoall all_to_all $ranks -b 96 -e 1M -f 32 -d half
  run braid-perf-alltoall all_to_all $ranks -b 100 -e 100 -d uint8  # 100 B: not a multiple of n
done

# -a all: every available all-reduce algorithm has rows, double_binary_tree included.
run braid-perf all_reduce 3 -b 8 -e 64K -f 64 -a all
log=$work/braid-perf-3.log
avail=$(sed -n 's/^# algorithms : available \(.*\); running .*/\1/p' "$log")
case " $avail " in *" double_binary_tree "*) ;; *) cat "$log"; echo "FAIL: -a all lacks double_binary_tree"; exit 1 ;; esac
for a in $avail; do
  grep -q "^ *[0-9].* $a " "$log" || { cat "$log"; echo "FAIL: -a all ran no $a rows"; exit 1; }
done
echo "ok: -a all ran $avail and auto"

# The ceiling reads the other ranks' memory in a shared window: with the tcp transport forced
# there is no segment, so no ceiling, and the header says why.
log=$work/tcp.log
if ! "$bin/braid-perf" --ranks 2 -T 60 --transport tcp -b 64K -e 64K -n 2 -w 1 -J "$work/tcp.jsonl" \
    >"$log" 2>&1; then
  cat "$log"; echo "FAIL: braid-perf --transport tcp"; exit 1
fi
grep -q '^# ceiling    : none (no shared-memory segment' "$log" &&
  grep -q '"ceiling_us":-1.000,' "$work/tcp.jsonl" ||
  { cat "$log" "$work/tcp.jsonl"; echo "FAIL: tcp forced: a ceiling without a shared segment"; exit 1; }
echo "ok: no ceiling with the tcp transport forced"

# Usage errors exit 2 and say why.
expect_usage() {  # expect_usage TEXT ARGS...
  local text=$1 out code=0
  shift
  out=$("$@" 2>&1) || code=$?
  [ "$code" -eq 2 ] && grep -qF -- "$text" <<<"$out" ||
    { echo "$out"; echo "FAIL: '$*' should exit 2 saying '$text' (exit $code)"; exit 1; }
  echo "ok: '$*' -> $(head -1 <<<"$out")"
}
expect_usage "is not a rank of 2" "$bin/braid-perf-broadcast" --ranks 2 -T 60 -r 5 -b 8 -e 8
expect_usage "-n needs an integer" "$bin/braid-perf-alltoall" -n 0
expect_usage "unknown alltoall algorithm 'ring'; valid: pairwise" "$bin/braid-perf-alltoall" --ranks 2 -T 60 -a ring -b 8 -e 8
echo "PASS"
