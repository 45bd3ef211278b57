#!/usr/bin/env bash
# A poisoned calibration cache cannot stick (label multirank): a first run of braid-perf on 2
# local ranks writes the cache; the test multiplies its latencies (α, one-way α, the segment
# hand-off) by 30, as a probe taken on a busy machine once left them; the next run must see that
# the model predicts its live 8-byte all-reduces far slower than they run, say so in one line,
# re-probe, and leave a repaired cache. On a machine so busy that the live calls run as slowly as
# the planted model says (a build on the other core), or that the re-probe is itself
# implausible, a run may keep the planted cache (saying so in the second case); the test then
# allows two more runs. Then the same for caches whose bandwidths are off (closed-loop tuning,
# below) and whose small segment copies alone are (the creation check of the segment's 8 KiB
# all-reduce), and a fresh probe of more ranks than cores must be cached as well.
#   poisoned_cache.sh BRAID_PERF [BRAID_RUN COLLECTIVES_CHECK]
set -uo pipefail
perf=$1
launcher=${2:-}
check=${3:-}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export BRAID_CALIBRATION_CACHE=$dir BRAID_TIMEOUT_MS=${BRAID_TIMEOUT_MS:-20000}
args=(--ranks 2 -T 120 -b 8 -e 64K -f 64 -n 20 -w 5)

# The value of the cache term named $1 in the model file $2.
term() { sed -n "s/.* $1=\([0-9.e+-]*\).*/\1/p" "$2"; }
alpha() { term intra_alpha_us "$dir"/fabric-*.txt; }
# Multiplies the cache's terms whose names match the regular expression $1 by $2.
scale_terms() {
  python3 - "$dir"/fabric-*.txt "$1" "$2" <<'PY'
import re, sys
path, terms, factor = sys.argv[1], sys.argv[2], float(sys.argv[3])
text = open(path).read()
text = re.sub(r"\b(" + terms + r")=([0-9.e+-]+)",
              lambda m: f"{m.group(1)}={float(m.group(2)) * factor:g}", text)
open(path, "w").write(text)
PY
}
for try in 1 2 3 4 5; do  # a probe that fails the live check on a busy machine is not cached
  "$perf" "${args[@]}" >"$dir/first.log" 2>&1 || { cat "$dir/first.log"; echo "FAIL: first run"; exit 1; }
  ls "$dir"/fabric-*.txt >/dev/null 2>&1 && break
done
ls "$dir"/fabric-*.txt >/dev/null 2>&1 || { cat "$dir/first.log"; echo "FAIL: no cache written in 5 runs"; exit 1; }
fresh=$(alpha)
scale_terms '(?:intra|inter)_alpha(?:_one_way)?_us|sync_us' 30
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
    repaired=1
    break
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
[ -n "${repaired:-}" ] || { echo "FAIL: the cache still holds the planted model after 3 runs"; exit 1; }

# Closed-loop tuning: a cache whose bandwidths (the links' β, the large copies' rates and, 30x
# too fast, γ) are 30x off either way passes the checks at creation (8 bytes; the segment's
# 8 KiB all-reduce, priced by the small-copy rate, left as probed, and γ: 30x too slow, γ alone
# makes that check fire, below); the job's own all-reduces (64 KiB-4 MiB, where the per-byte
# terms dominate) must show it at a vote (every 64 collectives here), every rank re-probes, and
# the cache is repaired. 30x too slow: the live calls run at 1/30 of their
# predictions (the vote needs under 1/4). 30x too fast: at 30x (the vote needs over 8).
rm -f "$dir"/fabric-*.txt
"$perf" "${args[@]}" >"$dir/fresh.log" 2>&1 || { cat "$dir/fresh.log"; echo "FAIL: fresh run"; exit 1; }
ls "$dir"/fabric-*.txt >/dev/null 2>&1 || { echo "SKIP closed loop: the fresh probe was not cached (a busy machine)"; echo PASS; exit 0; }
cp "$dir"/fabric-*.txt "$dir/fresh-model"
# Multiplies the links' β and the large copies' per-byte terms of the cache by $1, and γ where
# $1 < 1.
plant_bandwidth() {
  local terms='(?:intra|inter)_beta\w*_us_per_byte|copy_us_per_byte|copy_alone_us_per_byte'
  python3 -c "import sys; sys.exit(0 if float('$1') < 1 else 1)" && terms="$terms|gamma_us_per_byte"
  scale_terms "$terms" "$1"
}
beta() { term intra_beta_us_per_byte "$1"; }
freshb=$(beta "$dir/fresh-model")
for factor in 30 0.0333; do
  cp "$dir/fresh-model" "$dir"/fabric-*.txt 2>/dev/null || true
  plant_bandwidth "$factor"
  plantedb=$(beta "$dir"/fabric-*.txt)
  ok=
  for run in 1 2 3; do
    BRAID_RETUNE_INTERVAL=64 "$perf" --ranks 2 -T 120 -b 64K -e 4M -f 4 -n 40 -w 5 >"$dir/loop$run.log" 2>&1 ||
      { cat "$dir/loop$run.log"; echo "FAIL: closed-loop run $run (β x$factor)"; exit 1; }
    grep -q '^# Out of bounds values : 0 OK$' "$dir/loop$run.log" || { cat "$dir/loop$run.log"; echo "FAIL: wrong results"; exit 1; }
    nowb=$(beta "$dir"/fabric-*.txt)
    if python3 -c "import sys; r = float('$nowb') / float('$freshb'); sys.exit(0 if 1/3 < r < 3 else 1)"; then
      grep -q "calibration: live all-reduces took .* re-probed in .* cached" "$dir/loop$run.log" ||
        { cat "$dir/loop$run.log"; echo "FAIL: β x$factor: the cache was repaired without the log line"; exit 1; }
      grep -m1 "calibration: live" "$dir/loop$run.log" | sed 's/^.*WARN /detected: /'
      echo "ok: β x$factor (planted $plantedb us/B) repaired by closed-loop tuning in run $run: $nowb (fresh $freshb)"
      ok=1
      break
    fi
    [ "$nowb" = "$plantedb" ] || { echo "FAIL: β x$factor: run $run changed the cache to $nowb without repairing it"; exit 1; }
    echo "run $run: β x$factor not repaired (a busy machine?); trying again"
  done
  [ -n "$ok" ] || { echo "FAIL: β x$factor: the planted cache survived 3 closed-loop runs"; exit 1; }
done

# The segment's small copies alone 50x too slow (a probe that timed them with the ranks out of
# step once read 0.93 GB/s where the next read 18): the 8-byte checks cannot see it, and the
# first vote comes after BRAID_RETUNE_INTERVAL calls; the creation check of the segment's 8 KiB
# all-reduce must catch it at once, re-probe and rewrite the cache. Not 20x, the poison once
# seen: a 20x plant survived three runs in a row once on the EPYC VM (the live 8 KiB calls as
# slow as it says). A likely cause, not measured for this check: while the VM's two vCPUs share
# no cache (bench/micro/core_roundtrip: 450-530 ns against 90-140) every hand-off is slower.
# Five runs, 2 s apart, as such spells last seconds to minutes.
small() { term copy_small_us_per_byte "$1"; }
cp "$dir/fresh-model" "$dir"/fabric-*.txt
scale_terms copy_small_us_per_byte 50
planteds=$(small "$dir"/fabric-*.txt)
ok=
for run in 1 2 3 4 5; do
  [ "$run" = 1 ] || sleep 2
  "$perf" "${args[@]}" >"$dir/small$run.log" 2>&1 || { cat "$dir/small$run.log"; echo "FAIL: small-copy run $run"; exit 1; }
  grep -q '^# Out of bounds values : 0 OK$' "$dir/small$run.log" || { cat "$dir/small$run.log"; echo "FAIL: wrong results"; exit 1; }
  nows=$(small "$dir"/fabric-*.txt)
  if [ "$nows" != "$planteds" ]; then
    grep -q "calibration: the cached model predicts .* for the 8192-byte .*; re-probing" "$dir/small$run.log" ||
      { cat "$dir/small$run.log"; echo "FAIL: run $run rewrote the small-copy rate without the 8 KiB check's line"; exit 1; }
    grep -m1 "the cached model predicts" "$dir/small$run.log" | sed 's/^.*WARN /detected: /'
    echo "ok: small copies x50 (planted $planteds us/B) repaired in run $run: $nows (fresh $(small "$dir/fresh-model"))"
    ok=1
    break
  fi
  [ "$nows" = "$planteds" ] || { echo "FAIL: run $run changed the small-copy rate without repairing it"; exit 1; }
  if grep -q "re-probing" "$dir/small$run.log"; then
    grep -h "re-probing\|re-probed\|not cached" "$dir/small$run.log" | sed 's/^.*WARN /flagged: /'
    echo "run $run: flagged, but the re-probe was not cached (a busy machine?); trying again"
  else
    # The 8 KiB calls ran out of step with the scheduler (8x their usual time, as the 8-byte
    # ones sometimes do right after creation): as slowly as the planted model says.
    echo "run $run: the live 8 KiB calls ran as slowly as the planted model says; trying again"
  fi
done
[ -n "$ok" ] || { echo "FAIL: the planted small-copy rate survived 5 runs"; exit 1; }

# The same with async all-reduces on the progress thread while the caller queries the selector
# (collectives_check --scenario retune: results right, the probe's model in effect at the end).
# Bandwidths 300x too slow: this scenario's 1 MiB calls share the cores with the caller's thread
# filling the next buffers, and ran at 0.14-0.24 of a 30x model's price (1664 us; braid-perf's
# calls take 140-190) and 0.10-0.18 of a 100x one's (5482 us), where the vote needs under 0.25:
# with 30x it failed three tries in a row in 3 of 4 runs at 615ed2b on the EPYC VM.
if [ -n "$check" ]; then
  cp "$dir/fresh-model" "$dir"/fabric-*.txt
  plant_bandwidth 300
  cp "$dir"/fabric-*.txt "$dir/planted-model"
  for try in 1 2 3; do
    BRAID_RETUNE_INTERVAL=32 "$launcher" -n 2 --timeout 120 -- "$check" --scenario retune >"$dir/async$try.log" 2>&1 && break
    grep -q "FAIL.*expected the cached model" "$dir/async$try.log" || { cat "$dir/async$try.log"; echo "FAIL: retune scenario"; exit 1; }
    echo "async run $try: the planted model survived (a busy machine?); trying again"
    cp "$dir/planted-model" "$dir"/fabric-*.txt  # the run may have cached a probe of its own
    try=
  done
  [ -n "$try" ] || { cat "$dir/async3.log"; echo "FAIL: the retune scenario never saw the model replaced"; exit 1; }
  grep -h -m2 "^# retune\|calibration: live" "$dir/async$try.log" | sed 's/^.*WARN /async: /'
fi

# More ranks than cores (2 per core, 4 to 8): a fresh probe is cached there too. Two defects kept
# every such model out of the cache: the creation check timed single 8-byte calls, and a rank
# that arrives last returns at once (0.45 us where a stream runs at 4 us a call with 4 ranks on
# 2 cores), so the true model looked 9x too slow; and the ranks left out of the link probe
# yielded beside it, so its latency looked unsteady with 8 ranks.
crowd=$(( $(nproc) * 2 ))
[ "$crowd" -lt 4 ] && crowd=4
[ "$crowd" -gt 8 ] && crowd=8
# Five runs 2 s apart: an unsteady probe is rightly not cached, and once in ~25 runs of this
# test (stop 42's rehearsal) all of three back-to-back probes were unsteady (one-way α 8.98 us
# against 0.43 exchanged), on a VM whose vCPUs change placement every few seconds.
rm -f "$dir"/fabric-*.txt
for try in 1 2 3 4 5; do
  [ "$try" = 1 ] || sleep 2
  "$perf" --ranks "$crowd" -T 120 -b 8 -e 8 -n 20 -w 5 >"$dir/crowd$try.log" 2>&1 ||
    { cat "$dir/crowd$try.log"; echo "FAIL: $crowd-rank run"; exit 1; }
  ls "$dir"/fabric-*.txt >/dev/null 2>&1 && break
  grep -h "calibration" "$dir/crowd$try.log" | sed 's/^.*WARN /not cached: /'
done
ls "$dir"/fabric-*.txt >/dev/null 2>&1 ||
  { cat "$dir/crowd5.log"; echo "FAIL: $crowd ranks on $(nproc) cores: no fresh probe cached in 5 runs"; exit 1; }
echo "ok: $crowd ranks on $(nproc) cores cached their probe (run $try)"
# ... and the next run takes it as it is (before the fix, every run re-probed it: "predicts
# 7.90 us ..., 19x the 0.41 us it takes"). Two tries: a busy moment may mislead one run.
for try in 1 2; do
  "$perf" --ranks "$crowd" -T 120 -b 8 -e 8 -n 20 -w 5 >"$dir/crowd-again$try.log" 2>&1 ||
    { cat "$dir/crowd-again$try.log"; echo "FAIL: $crowd-rank run with the cache"; exit 1; }
  grep -q "re-probing" "$dir/crowd-again$try.log" || break
  grep -h "re-probing" "$dir/crowd-again$try.log" | sed 's/^.*WARN /rejected: /'
  try=
done
[ -n "$try" ] || { echo "FAIL: $crowd ranks rejected their own fresh cached probe twice"; exit 1; }
echo "ok: the next $crowd-rank run used the cached model"

# A cached reduction rate no sound probe measures beside its copy rate: 20x too slow, as an
# ASan+UBSan build measures it (16x its memcpy's time per byte; a 3-rank model this VM once
# cached). With the ranks outnumbering the cores no live call at creation prices it, so the cache
# itself must be refused: the next run says so, re-probes, and leaves a sound γ (three runs: a
# crowded re-probe may be unsteady, and then not cached).
gamma() { term gamma_us_per_byte "$dir"/fabric-*.txt; }
sound=$(gamma)
scale_terms gamma_us_per_byte 20
for try in 1 2 3; do
  "$perf" --ranks "$crowd" -T 120 -b 8 -e 8 -n 20 -w 5 >"$dir/gamma$try.log" 2>&1 ||
    { cat "$dir/gamma$try.log"; echo "FAIL: $crowd-rank run with a planted γ"; exit 1; }
  grep -q "calibration: the cached model's reduction .* re-probing" "$dir/gamma$try.log" ||
    { cat "$dir/gamma$try.log"; echo "FAIL: a cached γ 20x too slow was used (run $try)"; exit 1; }
  grep -m1 -h "cached model's reduction" "$dir/gamma$try.log" | sed 's/^.*WARN /detected: /'
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 4 * float(sys.argv[2]) else 1)" \
    "$(gamma)" "$sound" && break
  try=
done
[ -n "$try" ] || { echo "FAIL: the planted γ is still cached after 3 runs ($(gamma) us/B)"; exit 1; }
echo "ok: a cached γ 20x too slow was refused and repaired (run $try): $(gamma) us/B"
echo PASS
