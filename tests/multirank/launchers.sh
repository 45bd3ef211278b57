#!/usr/bin/env bash
# Launchers that clusters use, without MPI: 4 local background processes of braid-perf started
# with the variables srun (Slurm), Open MPI's mpirun and a PMI launcher (MPICH's Hydra) would
# set, each compared with braid-perf --ranks 4 over the same sizes: every run reports 0 wrong
# results, the same world size, the same algorithms per size and the launcher it was started by
# (the JSON's "launch" field). Then the errors: a malformed SLURM_JOB_NODELIST and RANK that
# contradicts SLURM_PROCID make braid-perf and braid-info launch fail at once, naming them.
#
#   launchers.sh BRAID_PERF BRAID_INFO
set -uo pipefail
perf=$1
info=$2
ports_py="$(cd "$(dirname "${BASH_SOURCE[0]}")/../python" && pwd)/ports.py"
work=$(mktemp -d /tmp/braid-launchers-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# Nothing inherited from a launcher this test may itself run under.
for v in $(compgen -e | grep -E '^(SLURM_|OMPI_|PMI_|PMIX_|MPI_LOCAL|PET_)'); do unset "$v"; done
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT \
  TORCHELASTIC_RUN_ID BRAID_FILE_STORE BRAID_BOOTSTRAP BRAID_STORE_PORT BRAID_PERF_LAUNCHER
# The default cost model, not a probe of this (busy) machine: every run then picks the same
# algorithm for a size, so that the runs can be compared.
export BRAID_CALIBRATION=off
args=(-b 8 -e 64K -f 8 -n 2 -w 1)
ranks=4
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

# A port nothing listens on now, below the kernel's ephemeral range (tests/python/ports.py: a
# port from that range can become another test's outgoing connection before it is bound).
free_port() {
  python3 "$ports_py" 2
}
# A SLURM_JOB_ID whose derived store port (20000 + id % 9000) is free on IPv4 and IPv6.
free_slurm_job_id() {
  python3 - <<'PY'
import random, socket
for _ in range(200):
    port = random.randrange(20000, 29000)
    try:
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            try:
                s = socket.socket(family)
            except OSError:
                continue
            with s:
                s.bind((host, port))
    except OSError:
        continue
    print(9000 * 4711 + port - 20000)
    break
PY
}

# run_ranks NAME: starts $ranks processes of braid-perf, rank r with the variables that
# env_NAME r prints (one NAME=VALUE a line), and waits for all (each bounded by timeout).
run_ranks() {
  local name=$1 r i rc=0
  pids=()
  for ((r = 0; r < ranks; r++)); do
    mapfile -t vars < <("env_$name" "$r")
    env "${vars[@]}" timeout -k 5 120 "$perf" "${args[@]}" -J "$work/$name.json" \
      >"$work/$name.$r.out" 2>"$work/$name.$r.err" &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    local code=$?
    if [ "$code" != 0 ]; then
      fail "$name: rank $i exited with $code"
      sed 's/^/    /' "$work/$name.$i.err" | tail -20
      rc=1
    fi
  done
  pids=()
  return $rc
}

slurm_job=$(free_slurm_job_id)
env_slurm() {
  echo "SLURM_PROCID=$1"
  echo "SLURM_NTASKS=$ranks"
  echo "SLURM_LOCALID=$1"
  echo "SLURM_NODEID=0"
  echo "SLURM_STEP_TASKS_PER_NODE=$ranks"
  echo "SLURM_JOB_NODELIST=localhost,node[02-04]"
  echo "SLURM_JOB_ID=$slurm_job"
}
ompi_port=$(free_port)
env_ompi() {
  echo "OMPI_COMM_WORLD_RANK=$1"
  echo "OMPI_COMM_WORLD_SIZE=$ranks"
  echo "OMPI_COMM_WORLD_LOCAL_RANK=$1"
  echo "OMPI_COMM_WORLD_LOCAL_SIZE=$ranks"
  echo "MASTER_ADDR=127.0.0.1"
  echo "MASTER_PORT=$ompi_port"
}
pmi_port=$(free_port)
env_pmi() {
  echo "PMI_RANK=$1"
  echo "PMI_SIZE=$ranks"
  echo "MPI_LOCALRANKID=$1"
  echo "MPI_LOCALNRANKS=$ranks"
  echo "MASTER_ADDR=127.0.0.1"
  echo "MASTER_PORT=$pmi_port"
}

timeout -k 5 120 "$perf" --ranks "$ranks" "${args[@]}" -J "$work/ref.json" >"$work/ref.out" 2>&1 ||
  fail "braid-perf --ranks $ranks exited with $? ($(tail -5 "$work/ref.out"))"
for name in slurm ompi pmi; do
  run_ranks "$name" || continue
  # What rank 0 printed: the launcher in its header.
  grep -q "started by $name (" "$work/$name.0.out" ||
    fail "$name: rank 0 does not say it was started by $name: $(grep 'started by' "$work/$name.0.out")"
done

python3 - "$work" "$ranks" slurm ompi pmi <<'PY' || failed=1
import json, os, sys
work, ranks, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name):
    path = os.path.join(work, name + ".json")
    if not os.path.exists(path):
        return None
    return [json.loads(line) for line in open(path) if line.strip()]
ref = load("ref")
ok = ref is not None and len(ref) > 0
if not ok:
    print("FAIL: braid-perf --ranks wrote no JSON")
    sys.exit(1)
def key(rows):
    return [(r["bytes"], r["algo"], r["algo_chosen"]) for r in rows]
for r in ref:
    if r["wrong"] != 0 or r["ranks"] != ranks:
        print(f"FAIL: ref: {r['bytes']} B: wrong {r['wrong']}, ranks {r['ranks']}"); ok = False
for name in names:
    rows = load(name)
    if rows is None:
        print(f"FAIL: {name}: no JSON"); ok = False; continue
    for r in rows:
        if r["wrong"] != 0:
            print(f"FAIL: {name}: {r['bytes']} B: {r['wrong']} wrong"); ok = False
        if r["ranks"] != ranks:
            print(f"FAIL: {name}: world size {r['ranks']}, not {ranks}"); ok = False
        if not r["launch"].startswith(name + " ("):
            print(f"FAIL: {name}: launch is '{r['launch']}'"); ok = False
    if key(rows) != key(ref):
        print(f"FAIL: {name}: sizes/algorithms {key(rows)} differ from --ranks' {key(ref)}")
        ok = False
    else:
        print(f"ok: {name}: {len(rows)} sizes, algorithms as --ranks {ranks}, "
              f"launch '{rows[0]['launch']}'")
sys.exit(0 if ok else 1)
PY

# expect_error NAME WORDS... -- COMMAND: COMMAND must fail within 10 s, its output naming WORDS.
expect_error() {
  local name=$1 words=() start end out code
  shift
  while [ "$1" != "--" ]; do
    words+=("$1")
    shift
  done
  shift
  start=$(date +%s)
  out=$(timeout -k 2 30 "$@" 2>&1)
  code=$?
  end=$(date +%s)
  if [ "$code" = 0 ]; then
    fail "$name: '$*' succeeded"
  elif [ "$code" = 124 ] || [ $((end - start)) -gt 10 ]; then
    fail "$name: '$*' took $((end - start)) s (exit $code)"
  fi
  for w in "${words[@]}"; do
    grep -qF -- "$w" <<<"$out" || fail "$name: the error does not name '$w': $out"
  done
  [ "$failed" = 0 ] && echo "ok: $name fails at once: $(grep -m1 -F -- "${words[0]}" <<<"$out" | cut -c1-160)"
}

bad_list=(SLURM_PROCID=0 SLURM_NTASKS=1 'SLURM_JOB_NODELIST=node[01-' SLURM_JOB_ID=7)
expect_error "malformed nodelist (braid-perf)" SLURM_JOB_NODELIST 'node[01-' -- \
  env "${bad_list[@]}" "$perf" "${args[@]}"
expect_error "malformed nodelist (braid-info)" SLURM_JOB_NODELIST 'node[01-' -- \
  env "${bad_list[@]}" "$info" launch
conflict=(SLURM_PROCID=1 SLURM_NTASKS=4 SLURM_JOB_NODELIST=localhost SLURM_JOB_ID=7 RANK=2
          WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 "MASTER_PORT=$(free_port)")
expect_error "RANK vs SLURM_PROCID (braid-perf)" SLURM_PROCID=1 RANK=2 -- \
  env "${conflict[@]}" "$perf" "${args[@]}"
expect_error "RANK vs SLURM_PROCID (braid-info)" SLURM_PROCID=1 RANK=2 -- \
  env "${conflict[@]}" "$info" launch

if [ "$failed" = 0 ]; then
  echo "launchers: all passed"
fi
exit "$failed"
