#!/usr/bin/env bash
# fabric.sh leaves nothing behind: after a passing run, a failing rank, a rank that outlives its
# timeout, and a run interrupted with SIGTERM, no namespace of that run exists. Exit 77 (skip)
# where network namespaces cannot be created.
#   cleanup_test.sh PATH/TO/fabric.sh
set -uo pipefail
fabric="$1"
"$fabric" check >/dev/null 2>&1
rc=$?
[ "$rc" = 77 ] && { echo "SKIP: network namespaces are not available here"; exit 77; }
failures=0

# Runs fabric.sh with the given arguments; checks its status and that its namespaces are gone.
expect_clean() {
  local want="$1"; shift
  local out rc id
  out=$(timeout 120 "$fabric" run "$@" 2>&1)
  rc=$?
  id=$(echo "$out" | sed -n 's/.*namespaces \(braidfab-[0-9]*\)-\*.*/\1/p' | head -1)
  if [ -z "$id" ]; then
    echo "FAIL: no fabric was built for '$*': $out"; failures=$((failures + 1)); return
  fi
  if [ "$rc" != "$want" ]; then
    echo "FAIL: '$*' exited $rc, expected $want: $out"; failures=$((failures + 1))
  fi
  if ip netns list | grep -q "^${id}-"; then
    echo "FAIL: '$*' left namespaces: $(ip netns list | grep "^${id}-" | tr '\n' ' ')"
    failures=$((failures + 1))
  else
    echo "ok: '$*' -> $rc, nothing left of $id"
  fi
}

expect_clean 0 --hosts 2 -- /bin/true
expect_clean 1 --hosts 3 --ranks-per-host 2 -- /bin/sh -c 'exit $((RANK == 3))'
expect_clean 1 --hosts 2 --timeout 1 -- /bin/sleep 30
# Every rank can reach every host address through fab0, and the rank variables are right.
expect_clean 0 --hosts 3 --ranks-per-host 2 --rate 1gbit -- /bin/sh -c \
  'test "$WORLD_SIZE" = 6 && test "$FABRIC_ADDR" = "198.18.0.$FABRIC_HOST" &&
   test "$RANK" = $(( (FABRIC_HOST - 1) * 2 + LOCAL_RANK )) &&
   for h in 1 2 3; do timeout 2 bash -c "echo > /dev/tcp/198.18.0.$h/9" 2>&1 | grep -q refused || exit 1; done'

# Interrupted: SIGTERM to the script while ranks run.
"$fabric" run --hosts 2 -- /bin/sleep 60 >/tmp/braid-fabric-term.$$ 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  grep -q namespaces /tmp/braid-fabric-term.$$ 2>/dev/null && break
  sleep 0.1
done
kill -TERM "$pid"
wait "$pid"
rc=$?
rm -f /tmp/braid-fabric-term.$$
if ip netns list | grep -q "^braidfab-${pid}-"; then
  echo "FAIL: SIGTERM left namespaces of braidfab-${pid}"; failures=$((failures + 1))
else
  echo "ok: SIGTERM -> $rc, nothing left of braidfab-${pid}"
fi

# cleanup removes leftovers of a dead run (simulated: a namespace named for a pid that is gone).
ip netns add "braidfab-999999999-h1"
"$fabric" cleanup >/dev/null
if ip netns list | grep -q "^braidfab-999999999-"; then
  echo "FAIL: cleanup kept a dead run's namespace"; failures=$((failures + 1))
  ip netns del braidfab-999999999-h1
else
  echo "ok: cleanup removed a dead run's namespace"
fi

[ "$failures" = 0 ] && echo "PASS" && exit 0
echo "$failures failure(s)"
exit 1
