#!/usr/bin/env bash
# A poisoned calibration cache cannot stick (label multirank): a first run of braid-perf on 2
# local ranks writes the cache; the test multiplies its latencies (α, one-way α, the segment
# hand-off) by 30, as a probe taken on a busy machine once left them; the next run must see that
# the model predicts its live 8-byte all-reduces far slower than they run, say so in one line,
# re-probe, and leave a repaired cache. On a machine so busy that the live calls run as slowly as
# the planted model says (a build on the other core), or that the re-probe is itself
# implausible, a run may keep the planted cache (saying so in the second case); the test then
# allows two more runs.
#   poisoned_cache.sh BRAID_PERF
set -uo pipefail
perf=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export BRAID_CALIBRATION_CACHE=$dir BRAID_TIMEOUT_MS=${BRAID_TIMEOUT_MS:-20000}
args=(--ranks 2 -T 120 -b 8 -e 64K -f 64 -n 20 -w 5)

alpha() { sed -n 's/.*intra_alpha_us=\([0-9.e+-]*\).*/\1/p' "$dir"/fabric-*.txt; }
for try in 1 2 3 4 5; do  # a probe that fails the live check on a busy machine is not cached
  "$perf" "${args[@]}" >"$dir/first.log" 2>&1 || { cat "$dir/first.log"; echo "FAIL: first run"; exit 1; }
  ls "$dir"/fabric-*.txt >/dev/null 2>&1 && break
done
ls "$dir"/fabric-*.txt >/dev/null 2>&1 || { cat "$dir/first.log"; echo "FAIL: no cache written in 5 runs"; exit 1; }
fresh=$(alpha)
python3 - "$dir"/fabric-*.txt <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
text = re.sub(r"\b((?:intra|inter)_alpha(?:_one_way)?_us|sync_us)=([0-9.e+-]+)",
              lambda m: f"{m.group(1)}={float(m.group(2)) * 30:g}", text)
open(path, "w").write(text)
PY
planted=$(alpha)
echo "fresh probe: intra α $fresh us; planted: $planted us"

for run in 1 2 3; do
  "$perf" "${args[@]}" >"$dir/run$run.log" 2>&1 || { cat "$dir/run$run.log"; echo "FAIL: run $run"; exit 1; }
  grep -q '^# Out of bounds values : 0 OK$' "$dir/run$run.log" || { cat "$dir/run$run.log"; echo "FAIL: wrong results"; exit 1; }
  now=$(alpha)
  if python3 -c "import sys; sys.exit(0 if float('$now') < float('$planted') / 3 else 1)"; then
    grep -q "calibration: the cached model predicts .*; re-probing" "$dir/run$run.log" ||
      { cat "$dir/run$run.log"; echo "FAIL: run $run rewrote the cache without saying why"; exit 1; }
    grep -m1 "the cached model predicts" "$dir/run$run.log" | sed 's/^.*WARN /detected: /'
    grep -m1 "re-probed in" "$dir/run$run.log" | sed 's/^.*WARN /         /'
    echo "ok: run $run repaired the cache: intra α $now us (planted $planted, fresh $fresh)"
    echo PASS
    exit 0
  fi
  [ "$now" = "$planted" ] || { echo "FAIL: run $run changed the cache to α $now without repairing it"; exit 1; }
  if grep -q "re-probing" "$dir/run$run.log"; then
    grep -q "still implausible" "$dir/run$run.log" ||
      { cat "$dir/run$run.log"; echo "FAIL: run $run re-probed but kept the planted cache without saying why"; exit 1; }
    echo "run $run: the re-probe was implausible too (a busy machine); trying again"
  else
    echo "run $run: the live calls ran as slowly as the planted model says (a busy machine); trying again"
  fi
done
echo "FAIL: the cache still holds the planted model after 3 runs"; exit 1
