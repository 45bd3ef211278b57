#!/usr/bin/env bash
# fabric.sh: an emulated multi-host fabric on one machine, for tests and benchmarks.
#
#   scripts/fabric.sh run [options] -- PROGRAM [ARGS...]
#   scripts/fabric.sh check        exit 0 when network namespaces can be made here, 77 when not
#   scripts/fabric.sh cleanup [--all]
#
# `run` creates N "hosts", each a network namespace with one interface `fab0` addressed
# 198.18.0.<h>/24 (198.18.0.0/15 is reserved for benchmarking, RFC 2544). Each fab0 is one end of
# a veth pair whose other end is a port of a bridge that lives in its own "switch" namespace, so
# nothing is added to the root namespace and no traffic can leave the machine: ranks talk only to
# loopback and to those addresses. With --rate, every link is shaped in both directions with a
# token bucket (tc tbf; netem is not available in every kernel, so there is no added latency).
#
# It then starts RANKS_PER_HOST ranks of PROGRAM in every host namespace (ip netns exec), with
# torchrun-style variables: RANK (host-major: host h holds ranks (h-1)*M .. h*M-1), WORLD_SIZE,
# LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=198.18.0.1 (rank 0's host), MASTER_PORT, and
# BRAID_SOCKET_IFNAME==fab0. With --store file (the default) the ranks rendezvous through a
# BRAID_FILE_STORE directory (the file system is shared by all namespaces); with --store tcp,
# through rank 0's TCP store at MASTER_ADDR:MASTER_PORT. Each rank runs under `timeout`.
# With --per-host, PROGRAM runs once per host instead (no RANK/WORLD_SIZE; it gets FABRIC_HOST,
# FABRIC_NUM_HOSTS, FABRIC_ADDR, FABRIC_IFNAME and MASTER_ADDR).
#
# Everything made is removed when `run` ends, also when a rank fails or the script is
# interrupted (trap on EXIT, INT and TERM): the ranks and anything else left inside the
# namespaces are killed, the namespaces (and with them the veths and the bridge) deleted, the
# store and log directory removed. Names carry a unique prefix, braidfab-<pid of the run>-, so
# `cleanup` can find leftovers of runs that were killed with SIGKILL: it removes those whose run
# is no longer alive (with --all: every braidfab- namespace).
#
# Options of `run`:
#   --hosts N              number of hosts (default 2, at most 253)
#   --ranks-per-host M     ranks per host (default 1)
#   --rate RATE            shape every link with tbf at RATE (tc syntax: 1gbit, 500mbit)
#   --burst BYTES          tbf bucket (default 16kb). A real link cannot save up unused time; a
#                          bucket can, so one much larger than a message lets an algorithm whose
#                          phases alternate directions (tree: reduce, then broadcast) run one
#                          direction on tokens banked while the other was busy
#   --gso BYTES            largest packet the shaped veths build (default 8192; at most the
#                          bucket, which tbf needs to hold a whole packet)
#   --store file|tcp       rendezvous (default file)
#   --timeout SECONDS      per-rank wall-clock limit (default 600)
#   --expect-hosts H       fail unless rank 0 prints "on H host(s)" (collectives_check does)
#   --per-host             run PROGRAM once per host instead of once per rank
#   --env NAME=VALUE       extra environment for every rank (repeatable)
#   --log-dir DIR          keep rank logs in DIR (default: a temporary directory, removed)
#   -v                     print the commands that build the fabric
#
# Exit status: 0 when every rank exited 0 (and the expectation held); 1 otherwise; 2 on a usage
# error; 77 when network namespaces cannot be created here (CTest's SKIP_RETURN_CODE).
set -uo pipefail

readonly PREFIX=braidfab
readonly SKIP=77
readonly IFNAME=fab0
readonly SUBNET=198.18.0

die() { echo "fabric.sh: $*" >&2; exit 2; }
log() { [ "${verbose:-0}" = 1 ] && echo "fabric.sh: $*" >&2; return 0; }
# Runs a fabric-building command; a failure ends the run (the EXIT trap cleans up).
do_() {
  log "$*"
  local out
  if ! out=$("$@" 2>&1); then
    echo "fabric.sh: '$*' failed: $out" >&2
    exit 1
  fi
}

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

have_netns() {
  command -v ip >/dev/null 2>&1 || { echo "iproute2 (ip) is not installed"; return 1; }
  local probe="${PREFIX}-$$-probe" out
  if ! out=$(ip netns add "$probe" 2>&1); then
    echo "cannot create a network namespace ($out); run as root or with CAP_SYS_ADMIN and CAP_NET_ADMIN"
    return 1
  fi
  ip netns del "$probe" >/dev/null 2>&1
  return 0
}

# Kills whatever runs in namespace $1 (only processes inside braid's own namespaces), deletes it.
remove_ns() {
  local ns="$1" pids
  pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
      [ -z "$pids" ] && break
      sleep 0.2
    done
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  fi
  ip netns del "$ns" 2>/dev/null || true
}

cmd_cleanup() {
  local all=0
  [ "${1:-}" = "--all" ] && all=1
  local ns owner n=0
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${PREFIX}-"); do
    owner=$(echo "$ns" | sed -n "s/^${PREFIX}-\([0-9][0-9]*\)-.*/\1/p")
    if [ "$all" = 0 ] && [ -n "$owner" ] && kill -0 "$owner" 2>/dev/null; then
      echo "fabric.sh: keeping $ns (its run, pid $owner, is alive; --all removes it)"
      continue
    fi
    remove_ns "$ns"
    echo "fabric.sh: removed $ns"
    n=$((n + 1))
  done
  echo "fabric.sh: cleanup removed $n namespace(s)"
}

# ---------------------------------------------------------------------------------------------
# run

run_id="${PREFIX}-$$"
namespaces=()
rank_pids=()
work_dir=""
keep_logs=0
cleaned=0

cleanup_run() {
  [ "$cleaned" = 1 ] && return
  cleaned=1
  local p
  for p in "${rank_pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  local ns
  for ns in "${namespaces[@]}"; do remove_ns "$ns"; done
  for p in "${rank_pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ -n "$work_dir" ]; then
    rm -rf "$work_dir/store"
    [ "$keep_logs" = 1 ] || rm -rf "$work_dir"
  fi
  log "cleaned up $run_id"
}

on_signal() {
  echo "fabric.sh: interrupted; cleaning up" >&2
  exit 130
}

cmd_run() {
  local hosts=2 per_host=1 rate="" burst=16kb gso=8192 store=file timeout_s=600 expect="" one_per_host=0
  local log_dir="" extra_env=()
  verbose=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --hosts) hosts="$2"; shift 2 ;;
      --ranks-per-host) per_host="$2"; shift 2 ;;
      --rate) rate="$2"; shift 2 ;;
      --burst) burst="$2"; shift 2 ;;
      --gso) gso="$2"; shift 2 ;;
      --store) store="$2"; shift 2 ;;
      --timeout) timeout_s="$2"; shift 2 ;;
      --expect-hosts) expect="$2"; shift 2 ;;
      --per-host) one_per_host=1; shift ;;
      --env) extra_env+=("$2"); shift 2 ;;
      --log-dir) log_dir="$2"; shift 2 ;;
      -v) verbose=1; shift ;;
      --) shift; break ;;
      *) die "unknown option '$1' (see fabric.sh --help)" ;;
    esac
  done
  [ $# -gt 0 ] || die "no program given (fabric.sh run [options] -- PROGRAM [ARGS...])"
  [[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] && [ "$hosts" -le 253 ] ||
    die "--hosts must be 1..253"
  [[ "$per_host" =~ ^[0-9]+$ ]] && [ "$per_host" -ge 1 ] || die "--ranks-per-host must be >= 1"
  [[ "$timeout_s" =~ ^[0-9]+$ ]] || die "--timeout takes whole seconds"
  [ "$store" = file ] || [ "$store" = tcp ] || die "--store is file or tcp"
  [ -x "$1" ] || command -v "$1" >/dev/null 2>&1 || die "program '$1' not found"
  local why
  if ! why=$(have_netns); then
    echo "fabric.sh: SKIP: $why" >&2
    exit "$SKIP"
  fi

  trap cleanup_run EXIT
  trap on_signal INT TERM

  if [ -n "$log_dir" ]; then
    mkdir -p "$log_dir" || die "cannot create $log_dir"
    work_dir=$(cd "$log_dir" && pwd)
    keep_logs=1
  else
    work_dir=$(mktemp -d "${TMPDIR:-/tmp}/${run_id}.XXXXXX") || die "mktemp failed"
  fi

  # The switch: a bridge in its own namespace.
  local sw="${run_id}-sw"
  namespaces+=("$sw")
  do_ ip netns add "$sw"
  do_ ip -n "$sw" link set lo up
  do_ ip -n "$sw" link add br0 type bridge
  do_ ip -n "$sw" link set br0 up
  local h ns
  for ((h = 1; h <= hosts; h++)); do
    ns="${run_id}-h${h}"
    namespaces+=("$ns")
    do_ ip netns add "$ns"
    do_ ip -n "$ns" link set lo up
    do_ ip -n "$sw" link add "p${h}" type veth peer name "$IFNAME" netns "$ns"
    do_ ip -n "$sw" link set "p${h}" master br0
    do_ ip -n "$sw" link set "p${h}" up
    do_ ip -n "$ns" addr add "${SUBNET}.${h}/24" dev "$IFNAME"
    do_ ip -n "$ns" link set "$IFNAME" up
    if [ -n "$rate" ]; then
      # Packets no larger than the bucket: veth hands tbf GSO packets of up to 64 KiB, which a
      # small bucket would drop.
      do_ ip -n "$ns" link set dev "$IFNAME" gso_max_size "$gso"
      do_ ip -n "$sw" link set dev "p${h}" gso_max_size "$gso"
      # Both directions: the host's egress on fab0, its ingress as the switch port's egress.
      do_ tc -n "$ns" qdisc add dev "$IFNAME" root tbf rate "$rate" burst "$burst" latency 100ms
      do_ tc -n "$sw" qdisc add dev "p${h}" root tbf rate "$rate" burst "$burst" latency 100ms
    fi
  done
  # Every host reaches rank 0's host before anything starts (bounded).
  for ((h = 2; h <= hosts; h++)); do
    local ok=0
    for _ in $(seq 1 50); do
      # A refused connection to an unused port proves the path (no ping needed).
      local probe
      probe=$(ip netns exec "${run_id}-h${h}" timeout 2 bash -c \
                "echo > /dev/tcp/${SUBNET}.1/9" 2>&1)
      if [[ "$probe" == *refused* ]]; then
        ok=1
        break
      fi
      sleep 0.1
    done
    [ "$ok" = 1 ] || { echo "fabric.sh: host $h cannot reach ${SUBNET}.1" >&2; exit 1; }
  done
  echo "fabric.sh: ${hosts} host(s) x ${per_host} rank(s) on ${SUBNET}.1-${hosts}/24" \
       "(${rate:-unshaped}), store ${store}, namespaces ${run_id}-*"

  local world=$((hosts * per_host))
  [ "$one_per_host" = 1 ] && world="$hosts"
  local port=29500
  mkdir -p "$work_dir/store"
  local base_env=(
    "MASTER_ADDR=${SUBNET}.1" "MASTER_PORT=${port}"
    "BRAID_SOCKET_IFNAME==${IFNAME}"
    "BRAID_TIMEOUT_MS=${BRAID_TIMEOUT_MS:-60000}"
    "FABRIC_NUM_HOSTS=${hosts}" "FABRIC_IFNAME=${IFNAME}"
  )
  local unset_env=(-u BRAID_FILE_STORE -u BRAID_HOST_ID -u RANK -u WORLD_SIZE -u LOCAL_RANK
                   -u LOCAL_WORLD_SIZE -u BRAID_BOOTSTRAP)
  [ "$store" = file ] && base_env+=("BRAID_FILE_STORE=${work_dir}/store")

  local r=0 l labels=()
  for ((h = 1; h <= hosts; h++)); do
    local n_local="$per_host"
    [ "$one_per_host" = 1 ] && n_local=1
    for ((l = 0; l < n_local; l++)); do
      local env_r=("${base_env[@]}" "FABRIC_HOST=${h}" "FABRIC_ADDR=${SUBNET}.${h}")
      if [ "$one_per_host" = 0 ]; then
        env_r+=("RANK=${r}" "WORLD_SIZE=${world}" "LOCAL_RANK=${l}" "LOCAL_WORLD_SIZE=${per_host}")
      fi
      env_r+=("${extra_env[@]}")
      timeout -k 5 "$timeout_s" ip netns exec "${run_id}-h${h}" \
        env "${unset_env[@]}" "${env_r[@]}" "$@" \
        >"$work_dir/rank${r}.out" 2>"$work_dir/rank${r}.err" &
      rank_pids+=($!)
      labels+=("rank ${r} on host ${h}")
      r=$((r + 1))
    done
  done

  local failed=0 i rc
  local codes=()
  for i in "${!rank_pids[@]}"; do
    wait "${rank_pids[$i]}"
    codes[$i]=$?
  done
  rank_pids=()
  for i in "${!codes[@]}"; do
    rc="${codes[$i]}"
    if [ "$rc" != 0 ]; then
      failed=1
      if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "fabric.sh: ${labels[$i]} timed out after ${timeout_s}s" >&2
      else
        echo "fabric.sh: ${labels[$i]} exited with ${rc}" >&2
      fi
    fi
  done
  # Rank 0's output in full; the others' stderr, labelled (errors name their rank and peer).
  cat "$work_dir/rank0.out"
  for i in "${!labels[@]}"; do
    if [ -s "$work_dir/rank${i}.err" ]; then
      sed "s/^/[${labels[$i]}] /" "$work_dir/rank${i}.err" | tail -n 40 >&2
    fi
  done
  if [ -n "$expect" ] && [ "$one_per_host" = 0 ]; then
    if ! grep -q "on ${expect} host(s)" "$work_dir/rank0.out"; then
      echo "fabric.sh: FAIL: rank 0 did not report 'on ${expect} host(s)'" >&2
      failed=1
    fi
  fi
  [ "$keep_logs" = 1 ] && echo "fabric.sh: logs in $work_dir"
  if [ "$failed" = 0 ]; then
    echo "fabric.sh: PASS (${r} rank(s) on ${hosts} host(s))"
    return 0
  fi
  echo "fabric.sh: FAIL" >&2
  return 1
}

case "${1:-}" in
  run) shift; cmd_run "$@"; exit $? ;;
  cleanup) shift; cmd_cleanup "$@" ;;
  check)
    if why=$(have_netns); then echo "fabric.sh: network namespaces available"; exit 0; fi
    echo "fabric.sh: SKIP: $why" >&2
    exit "$SKIP"
    ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
