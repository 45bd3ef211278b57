#!/usr/bin/env bash
# Sets braid beside its peers on this machine: MPICH, Open MPI and gloo, for all-reduce,
# reduce-scatter, all-gather and broadcast, on 2 and 4 local ranks and on the emulated 2x2 fabric.
#
#   bench/compare_peers.sh [BUILD_DIR] [options]      (BUILD_DIR defaults to ./build)
#
# Installs what is missing (libgloo-dev, python3-matplotlib, MPICH, Open MPI; apt-get, as
# scripts/setup.sh does), builds (or configures, when BUILD_DIR is fresh) the braid-perf binaries,
# braid-run, braid-stream and the baselines (bench/perf/mpi_perf.c: mpi-perf-mpich and
# mpi-perf-openmpi; bench/perf/gloo_perf.cc: gloo-perf), runs braid-stream once, then, per
# placement and collective, braid and every peer one after another over the same sizes, so that
# they share the machine's state (with -r, each repeat turns the order round). It prints one table
# per collective and placement: per size braid's time and busbw (out-of-place, nccl-tests' headline
# numbers), each peer's, and braid's time / the best peer's (<1: braid is faster; MPI_Bcast has
# one buffer, so against MPICH's and Open MPI's broadcast the ratio takes braid's in-place time,
# printed in its own column "braid i.p.", and says so on the row; a reduce-scatter or
# all-gather with fewer elements than ranks, where every block is empty and MPI returns at once,
# gets no ratio). Under each table, the cache-line round trip between the first two CPUs
# (bench/micro/core_roundtrip) before and after each run: where the hypervisor put the vCPUs,
# which on a VM can move same-host times 2x between runs. Every JSON line of every run goes to
# one file, tagged with "impl", "placement" and "core_rtt_ns"; bench/compare_peers.py draws
# DIR/compare-peers.png (busbw vs size, one panel per collective x placement) and
# DIR/compare-peers-ratio.png (braid's time / the best peer's, per size).
#
# Sizes mean what braid-perf means (see its --help): all-reduce each rank's vector; reduce-scatter
# and all-gather the whole vector of n blocks; broadcast the message. busbw = algbw x 2(n-1)/n,
# (n-1)/n, (n-1)/n, 1.
#
# Placements: local N (N ranks on this host: braid-perf --ranks N, mpiexec -n N, gloo-perf under
# braid-run --file-store) and the fabric (scripts/fabric.sh run --hosts 2 --ranks-per-host 2
# --rate 1gbit: network namespaces, tbf-shaped links; braid and gloo's ranks run inside the same
# namespaces and gloo's TCP device binds to the namespace's address). MPI is not run on the fabric
# by default: with --fabric-mpich, MPICH runs there through bench/fabric_mpi.sh (one hydra proxy
# per emulated host, its own shared memory within a host, UCX held to TCP over the shaped links;
# it sees 2 hosts and its times follow the link rate), but on a 2-core machine about one run in
# three hung in MPI_Finalize (UCX's TCP teardown) after writing its results, so the run ends at
# -T and counts as failed. Open MPI is not run there at all (its shared-memory BTL takes the
# namespaces, which share one hostname, for one node, and crashed: see fabric_mpi.sh).
# gloo here is Debian's 0.0~git20220518 (TCP transport; no
# shared-memory path, which gloo gained in 2025). Its reduce-scatter is in place only; its
# out-of-place row includes copying the input (see gloo_perf.cc).
#
# On the fabric the table also gives the link bound: the fewest bytes one host's link must carry
# in one direction, divided by the link's rate R (H hosts, S = the size column; each host's ranks
# are reduced or served locally for free; links are full duplex):
#   all-reduce      2(H-1)/H x S / R  (reduce-scatter's send plus all-gather's receive: no
#                                      all-reduce without in-network reduction needs less,
#                                      Patarasuk and Yuan 2009; H = 2: each host must receive
#                                      the other's whole S, reduced or not)
#   reduce-scatter  (H-1)/H x S / R   (the host's contribution to the other hosts' blocks,
#                                      (H-1)/H x S, must leave it, at least one value per element)
#   all-gather      (H-1)/H x S / R   (each host lacks the other hosts' (H-1)/H x S)
#   broadcast       S / R             (every other host must receive the whole message)
# With iperf3 (installed with the fabric), the tables also give %tcp: the same bound at the
# goodput iperf3 --bidir reaches between two of the hosts in this run (both directions at once,
# as a collective loads them), which is the most any collective over TCP can reach there.
# The bound ignores headers (Ethernet, IP, TCP: about 4-5% at 1500-byte frames) and latency, and
# tbf's bucket (fabric.sh --burst, 16 KiB) lets a message of about that size pass faster than
# the rate, so the smallest sizes may beat it.
#
# Options:
#   -b MIN -e MAX -f F     local sizes, nccl-tests style: MIN x F^k <= MAX (default 8, 64M, 4)
#   -n ITERS -w WARMUP     timed / warm-up iterations per size (default 20 / 5)
#   -d TYPE -o OP          float|double|int32, sum|prod|min|max (default float sum)
#   -a ALGO                braid's all-reduce algorithm (default auto; with several, the fastest
#                          per size); the other collectives run auto
#   --root N               broadcast's root (default 0)
#   --ranks "2 4"          local rank counts (default "2 4"; "" for none)
#   --colls "..."          collectives (default "all_reduce reduce_scatter all_gather broadcast")
#   --peers "..."          peers (default "mpich openmpi gloo"; those not installed are left out)
#   --fabric HxM           the emulated fabric: H hosts x M ranks (default 2x2)
#   --no-fabric            local placements only
#   --fabric-mpich         run MPICH on the fabric too (see above: may hang until -T)
#   --rate RATE            the fabric's link rate, tc syntax kbit|mbit|gbit (default 1gbit)
#   --fabric-e MAX         largest fabric size (default 16M; from -b by -f like the local ones)
#   --fabric-n N --fabric-w N  fabric timed / warm-up iterations (default 5 / 2)
#   --inplace              compare the in-place columns instead of out-of-place. MPI_Bcast has
#                          one buffer (the root's input is its output): braid's in-place
#                          broadcast is the like-for-like row, which the out-of-place table
#                          takes against MPI's too; out of place braid's root (as gloo's, given
#                          an input) also copies the message into its receive buffer
#   --register             braid's buffers from its shared windows (braid-perf -R 1: the
#                          all-reduce on one host then copies nothing through its staging
#                          segment); the peers' buffers stay malloc'd
#   --out DIR              where logs, JSON and plots go (default compare-peers-<date> in the
#                          build dir)
#   --json FILE            the combined JSON lines (default DIR/all.jsonl)
#   --no-stream            skip braid-stream
#   --no-plot              skip the PNGs
#   --no-install           never apt-get; use what is installed
#   --no-build             use the binaries as they are
#   -j JOBS                build parallelism (default 2)
#   -r REPEAT              run every benchmark REPEAT times and keep each size's fastest
#                          result (default 1; more on a shared, noisy machine)
#   -T SECONDS             limit per run (default 900)
#   -h                     this text
set -u -o pipefail

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src_dir=$(cd "$script_dir/.." && pwd)

build_dir=./build
min_bytes=8
max_bytes=64M
factor=4
iters=20
warmup=5
dtype=float
op=sum
algo=auto
root=0
ranks_list="2 4"
colls="all_reduce reduce_scatter all_gather broadcast"
peers="mpich openmpi gloo"
fabric=2x2
fabric_mpich=0
rate=1gbit
fabric_max=16M
fabric_iters=5
fabric_warmup=2
inplace=0
register=0
out_dir=
json_out=
run_stream=1
do_plot=1
do_install=1
do_build=1
jobs=2
limit=900
repeat=1

die() { echo "compare_peers.sh: $*" >&2; exit 2; }

if [[ $# -gt 0 && $1 != -* ]]; then
  build_dir=$1
  shift
fi
while [[ $# -gt 0 ]]; do
  case $1 in
    -b) min_bytes=$2; shift 2 ;;
    -e) max_bytes=$2; shift 2 ;;
    -f) factor=$2; shift 2 ;;
    -n) iters=$2; shift 2 ;;
    -w) warmup=$2; shift 2 ;;
    -d) dtype=$2; shift 2 ;;
    -o) op=$2; shift 2 ;;
    -a) algo=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --ranks) ranks_list=$2; shift 2 ;;
    --colls) colls=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --fabric) fabric=$2; shift 2 ;;
    --no-fabric) fabric=; shift ;;
    --fabric-mpich) fabric_mpich=1; shift ;;
    --rate) rate=$2; shift 2 ;;
    --fabric-e) fabric_max=$2; shift 2 ;;
    --fabric-n) fabric_iters=$2; shift 2 ;;
    --fabric-w) fabric_warmup=$2; shift 2 ;;
    --inplace) inplace=1; shift ;;
    --register) register=1; shift ;;
    --out) out_dir=$2; shift 2 ;;
    --json) json_out=$2; shift 2 ;;
    --no-stream) run_stream=0; shift ;;
    --no-plot) do_plot=0; shift ;;
    --no-install) do_install=0; shift ;;
    --no-build) do_build=0; shift ;;
    -j) jobs=$2; shift 2 ;;
    -T) limit=$2; shift 2 ;;
    -r) repeat=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see -h)" ;;
  esac
done
case $dtype in float|double|int32) ;; *)
  die "-d must be float, double or int32 (what the MPI and gloo baselines support)" ;;
esac
case $op in sum|prod|min|max) ;; *) die "-o must be sum, prod, min or max (MPI has no avg)" ;; esac
for c in $colls; do
  case $c in all_reduce|reduce_scatter|all_gather|broadcast) ;; *)
    die "--colls: '$c' is not all_reduce, reduce_scatter, all_gather or broadcast" ;;
  esac
done
for p in $peers; do
  case $p in mpich|openmpi|gloo) ;; *) die "--peers: '$p' is not mpich, openmpi or gloo" ;; esac
done
fabric_hosts=0
fabric_per_host=0
if [[ -n $fabric ]]; then
  [[ $fabric =~ ^([0-9]+)x([0-9]+)$ ]] || die "--fabric takes HOSTSxRANKS_PER_HOST, e.g. 2x2"
  fabric_hosts=${BASH_REMATCH[1]}
  fabric_per_host=${BASH_REMATCH[2]}
  # The link rate in bytes per second, for the link bound (tc: kbit = 1000 bit/s).
  [[ $rate =~ ^([0-9.]+)(kbit|mbit|gbit)$ ]] || die "--rate takes NUMBER followed by kbit, mbit or gbit"
  rate_Bps=$(awk -v v="${BASH_REMATCH[1]}" -v u="${BASH_REMATCH[2]}" \
    'BEGIN { m = u == "kbit" ? 1e3 : (u == "mbit" ? 1e6 : 1e9); printf "%.0f", v * m / 8 }')
fi

# --- Packages ----------------------------------------------------------------------------------
pkg_for() {  # the Debian packages a peer needs
  case $1 in
    mpich) echo "mpich libmpich-dev" ;;
    openmpi) echo "openmpi-bin libopenmpi-dev" ;;
    gloo) echo "libgloo-dev" ;;
  esac
}
if [[ $do_install == 1 ]]; then
  wanted=()
  for p in $peers; do
    # shellcheck disable=SC2207
    wanted+=($(pkg_for "$p"))
  done
  [[ $do_plot == 1 ]] && wanted+=(python3-matplotlib)
  [[ -n $fabric ]] && wanted+=(iperf3)
  "$src_dir/scripts/apt_install_missing.sh" compare_peers.sh "${wanted[@]}" ||
    echo "# note: installing ${wanted[*]} failed; going on with what is installed"
fi

# --- Build -------------------------------------------------------------------------------------
braid_bin() {  # the braid-perf binary of a collective
  case $1 in
    all_reduce) echo braid-perf ;;
    reduce_scatter) echo braid-perf-reducescatter ;;
    all_gather) echo braid-perf-allgather ;;
    broadcast) echo braid-perf-broadcast ;;
  esac
}
if [[ ! -f $build_dir/CMakeCache.txt ]]; then
  [[ $do_build == 0 ]] && die "$build_dir is not a configured build directory"
  echo "# configuring $build_dir (RelWithDebInfo)"
  cmake -S "$src_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build_dir.configure.log" 2>&1 ||
    { echo "compare_peers.sh: cmake configure failed, see $build_dir.configure.log" >&2; exit 1; }
fi
build_dir=$(cd "$build_dir" && pwd)
perf_dir=$build_dir/bench/perf
if [[ $do_build == 1 ]]; then
  # A gloo installed after the last configure is found by configuring again.
  if [[ " $peers " == *" gloo "* ]] && grep -q '^BRAID_GLOO_LIBRARY:FILEPATH=.*NOTFOUND' "$build_dir/CMakeCache.txt" &&
     [[ -f /usr/include/gloo/allreduce.h ]]; then
    cmake "$build_dir" >/dev/null 2>&1
  fi
  targets=(braid-run braid-stream core_roundtrip)
  for c in $colls; do targets+=("$(braid_bin "$c")"); done
  echo "# building ${targets[*]} (-j$jobs)"
  cmake --build "$build_dir" -j"$jobs" --target "${targets[@]}" >/dev/null ||
    { echo "compare_peers.sh: build failed (cmake --build $build_dir --target ${targets[*]})" >&2; exit 1; }
  for p in $peers; do
    t=$([[ $p == gloo ]] && echo gloo-perf || echo "mpi-perf-$p")
    cmake --build "$build_dir" -j"$jobs" --target "$t" >/dev/null 2>&1 ||
      echo "# note: $t not built (no /usr/bin/mpicc.$p, BRAID_WITH_MPI=OFF, or no libgloo-dev)"
  done
fi
for c in $colls; do
  [[ -x $perf_dir/$(braid_bin "$c") ]] || { echo "compare_peers.sh: no $perf_dir/$(braid_bin "$c")" >&2; exit 1; }
done
braid_run=$build_dir/tools/braid-run

[[ -n $out_dir ]] || out_dir=$build_dir/compare-peers-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
[[ -n $json_out ]] || json_out=$out_dir/all.jsonl
: >"$json_out"
failures=0

# The cache-line round trip between the first two usable CPUs in ns (bench/micro/core_roundtrip,
# 20000 round trips: ~2-10 ms), or null: where the hypervisor put the vCPUs. On the EPYC VM it
# switches between ~110 and ~500 ns every few seconds to minutes, and same-host times move with it
# (up to 2x), so every run carries the figure from before and after it.
core_rtt() {
  local v
  v=$("$build_dir/bench/micro/core_roundtrip" --ops 20000 2>/dev/null | awk '!/^#/ && $3 ~ /^[0-9]+$/ { print $3; exit }')
  echo "${v:-null}"
}

# run NAME IMPL PLACEMENT COMMAND...: runs one benchmark under the time limit (with -J appended),
# keeps its output, and adds its JSON lines, tagged (implementation, placement, the core round
# trip before and after), to the combined file.
run() {
  local name=$1 impl=$2 placement=$3 json=$out_dir/$1.jsonl rtt0 rtt1
  shift 3
  echo "# running $name: $*"
  rtt0=$(core_rtt)
  timeout -k 10 "$limit" "$@" -J "$json" >"$out_dir/$name.txt" 2>&1
  local rc=$?
  rtt1=$(core_rtt)
  if [[ $rc != 0 ]]; then
    echo "# $name FAILED (exit $rc); last lines of $out_dir/$name.txt:"
    tail -n 5 "$out_dir/$name.txt" | sed 's/^/#   /'
    failures=$((failures + 1))
  fi
  [[ -f $json ]] && sed "s/}\$/,\"impl\":\"$impl\",\"placement\":\"$placement\",\"core_rtt_ns\":[$rtt0,$rtt1]}/" \
    "$json" >>"$json_out"
  return 0
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# --- Memory bandwidth --------------------------------------------------------------------------
stream_summary="not measured"
if [[ $run_stream == 1 && -x $perf_dir/braid-stream ]]; then
  echo "# running braid-stream"
  if timeout -k 10 "$limit" "$perf_dir/braid-stream" -J "$out_dir/stream.jsonl" >"$out_dir/stream.txt" 2>&1; then
    sed 's/}$/,"impl":"stream","placement":"local"}/' "$out_dir/stream.jsonl" >>"$json_out"
    stream_summary=$(awk '!/^#/ {
        if ($1 != last) { printf "%s%s thread%s:", (last == "" ? "" : "; "), $1, ($1 > 1 ? "s" : ""); sep = " " }
        printf "%s%s %.1f", sep, $2, $3; sep = ", "; last = $1 }
      END { if (last != "") printf " GB/s (best of runs)" }' \
      "$out_dir/stream.txt")
  else
    echo "# braid-stream FAILED; see $out_dir/stream.txt"
    failures=$((failures + 1))
  fi
fi

# --- Which peers can run -----------------------------------------------------------------------
have_mpich=0 have_ompi=0 have_gloo=0
[[ " $peers " == *" mpich "* && -x $perf_dir/mpi-perf-mpich ]] && command -v mpiexec.mpich >/dev/null &&
  have_mpich=1
# Open MPI in a container: CMA single copy may be forbidden (ptrace); fall back to none.
ompi_args=()
if [[ " $peers " == *" openmpi "* && -x $perf_dir/mpi-perf-openmpi ]] && command -v mpiexec.openmpi >/dev/null; then
  have_ompi=1
  ompi_args=(--oversubscribe --bind-to none)
  [[ $(id -u) == 0 ]] && ompi_args=(--allow-run-as-root "${ompi_args[@]}")
  if [[ -z ${OMPI_MCA_btl_vader_single_copy_mechanism:-} ]]; then
    probe=$(timeout -k 5 60 mpiexec.openmpi "${ompi_args[@]}" -n 2 "$perf_dir/mpi-perf-openmpi" \
      -b 1M -e 1M -n 1 -w 0 2>&1)
    if [[ $? != 0 ]] || grep -qiE 'process_vm|single.copy|Read -1' <<<"$probe"; then
      echo "# Open MPI: CMA single copy unusable here; using OMPI_MCA_btl_vader_single_copy_mechanism=none"
      export OMPI_MCA_btl_vader_single_copy_mechanism=none
    fi
  fi
fi
[[ " $peers " == *" gloo "* && -x $perf_dir/gloo-perf && -x $braid_run ]] && have_gloo=1
for p in $peers; do
  case $p in
    mpich) [[ $have_mpich == 1 ]] || echo "# note: MPICH left out (no mpi-perf-mpich or mpiexec.mpich)" ;;
    openmpi) [[ $have_ompi == 1 ]] || echo "# note: Open MPI left out (no mpi-perf-openmpi or mpiexec.openmpi)" ;;
    gloo) [[ $have_gloo == 1 ]] || echo "# note: gloo left out (no gloo-perf: libgloo-dev missing at configure?)" ;;
  esac
done
fabric_ok=0
if [[ -n $fabric ]]; then
  if why=$("$src_dir/scripts/fabric.sh" check 2>&1); then
    fabric_ok=1
  else
    echo "# note: no fabric runs: $why"
  fi
fi

# The TCP ceiling on the fabric: iperf3 --bidir between hosts 1 and 2 (both directions at
# once, as a collective loads them), the goodput per direction that TCP itself reaches over the
# shaped links: headers, ACKs of the other direction's data and tbf's drops cost what no
# collective over TCP can win back.
tcp_Bps=
tcp_text="not measured"
if [[ $fabric_ok == 1 ]] && command -v iperf3 >/dev/null; then
  iperf_dir=$(mktemp -d)
  # shellcheck disable=SC2016  # expanded per host by fabric.sh's bash
  iperf_host='if [ "$FABRIC_HOST" = 1 ]; then timeout 30 iperf3 -s -1 -B "$FABRIC_ADDR" >/dev/null 2>&1;
    elif [ "$FABRIC_HOST" = 2 ]; then sleep 1; iperf3 -c "$MASTER_ADDR" -B "$FABRIC_ADDR" --bidir -t 6 -J > "$0"; fi'
  if "$src_dir/scripts/fabric.sh" run --hosts "$fabric_hosts" --ranks-per-host 1 --per-host \
       --rate "$rate" --store file --timeout 60 -- bash -c "$iperf_host" "$iperf_dir/iperf.json" \
       >"$iperf_dir/log" 2>&1; then
    tcp_Bps=$(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["end"]
print("%.0f" % (min(d["sum_received"]["bits_per_second"],
                    d["sum_received_bidir_reverse"]["bits_per_second"]) / 8))' \
      "$iperf_dir/iperf.json" 2>/dev/null) || tcp_Bps=
  fi
  if [[ -n $tcp_Bps ]]; then
    tcp_text=$(awk -v t="$tcp_Bps" -v r="$rate_Bps" \
      'BEGIN { printf "%.0f Mbit/s per direction (%.1f%% of the link rate)", t * 8 / 1e6, 100 * t / r }')
  else
    tcp_text="iperf3 failed (see $iperf_dir/log)"
  fi
  echo "# TCP ceiling (iperf3 --bidir, hosts 1 and 2, 6 s): $tcp_text"
fi

# --- Runs --------------------------------------------------------------------------------------
# Per placement and collective every implementation sweeps the same sizes, one after another;
# repeats turn the order round, so that a burst of foreign load hits each of them alike.
local_common=(-b "$min_bytes" -e "$max_bytes" -f "$factor" -n "$iters" -w "$warmup" -d "$dtype" -o "$op")
fabric_common=(-b "$min_bytes" -e "$fabric_max" -f "$factor" -n "$fabric_iters" -w "$fabric_warmup"
               -d "$dtype" -o "$op")
fabric_run=("$src_dir/scripts/fabric.sh" run --hosts "$fabric_hosts" --ranks-per-host "$fabric_per_host"
            --rate "$rate" --store file --timeout "$limit")

# run_one IMPL PLACEMENT COLL SUFFIX: one implementation's sweep of one collective.
run_one() {
  local impl=$1 placement=$2 coll=$3 sfx=$4 n
  local name="$impl-$placement-$coll$sfx" braid_algo=()
  [[ $coll == all_reduce ]] && braid_algo=(-a "$algo")
  [[ $register == 1 ]] && braid_algo+=(-R 1)
  if [[ $placement == local-* ]]; then
    n=${placement#local-}
    case $impl in
      braid) run "$name" braid "$placement" "$perf_dir/$(braid_bin "$coll")" --ranks "$n" \
               "${braid_algo[@]}" -r "$root" "${local_common[@]}" ;;
      mpich) run "$name" mpich "$placement" mpiexec.mpich -n "$n" "$perf_dir/mpi-perf-mpich" \
               -C "$coll" -r "$root" "${local_common[@]}" ;;
      openmpi) run "$name" openmpi "$placement" mpiexec.openmpi "${ompi_args[@]}" -n "$n" \
                 "$perf_dir/mpi-perf-openmpi" -C "$coll" -r "$root" "${local_common[@]}" ;;
      gloo) run "$name" gloo "$placement" "$braid_run" -n "$n" --file-store --timeout "$limit" -- \
              "$perf_dir/gloo-perf" -C "$coll" -r "$root" "${local_common[@]}" ;;
    esac
  else
    case $impl in
      braid) run "$name" braid "$placement" "${fabric_run[@]}" -- "$perf_dir/$(braid_bin "$coll")" \
               "${braid_algo[@]}" -r "$root" "${fabric_common[@]}" ;;
      mpich) run "$name" mpich "$placement" "${fabric_run[@]}" --per-host -- \
               "$script_dir/fabric_mpi.sh" launch "$fabric_per_host" -- "$perf_dir/mpi-perf-mpich" \
               -C "$coll" -r "$root" "${fabric_common[@]}" ;;
      gloo) run "$name" gloo "$placement" "${fabric_run[@]}" -- "$perf_dir/gloo-perf" -C "$coll" \
              -r "$root" "${fabric_common[@]}" ;;
    esac
  fi
}

placements=()
for n in $ranks_list; do placements+=("local-$n"); done
[[ $fabric_ok == 1 ]] && placements+=("fabric-$fabric")
for ((rep = 1; rep <= repeat; rep++)); do
  sfx=$([[ $repeat -gt 1 ]] && echo ".$rep" || true)
  for placement in "${placements[@]}"; do
    impls=(braid)
    [[ $have_mpich == 1 && ($placement == local-* || $fabric_mpich == 1) ]] && impls+=(mpich)
    [[ $have_ompi == 1 && $placement == local-* ]] && impls+=(openmpi)
    [[ $have_gloo == 1 ]] && impls+=(gloo)
    # Repeat k starts with implementation k (mod their number).
    shift_by=$(((rep - 1) % ${#impls[@]}))
    order=("${impls[@]:shift_by}" "${impls[@]:0:shift_by}")
    for coll in $colls; do
      for impl in "${order[@]}"; do run_one "$impl" "$placement" "$coll" "$sfx"; done
    done
  done
done

# --- Tables and plots --------------------------------------------------------------------------
machine=$(grep -h -m1 '^# machine' "$out_dir"/braid-*.txt 2>/dev/null | head -n1 | sed 's/^# machine *: //')
[[ -n $machine ]] || machine="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs, host $(hostname)"
placement_text=$([[ $inplace == 1 ]] && echo in-place || echo out-of-place)
echo
echo "# braid vs MPICH, Open MPI, gloo — $dtype $op, $placement_text, local -n $iters -w $warmup," \
     "fabric -n $fabric_iters -w $fabric_warmup, all-reduce algo $algo, best of $repeat run(s)," \
     "braid's buffers $([[ $register == 1 ]] && echo "in shared windows (-R 1)" || echo "malloc'd")"
echo "# load average: $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end, on $(nproc) CPUs"
echo "# machine: $machine"
echo "# memory copy bandwidth (braid-stream, read+write): $stream_summary"
[[ $fabric_ok == 1 ]] && echo "# TCP ceiling on the fabric (iperf3 --bidir): $tcp_text"
report=(/usr/bin/python3 "$script_dir/compare_peers.py" "$json_out" --out "$out_dir")
[[ $inplace == 1 ]] && report+=(--inplace)
[[ $fabric_ok == 1 ]] && report+=(--rate-Bps "$rate_Bps" --rate-text "$rate")
[[ -n $tcp_Bps ]] && report+=(--tcp-Bps "$tcp_Bps")
[[ $do_plot == 0 ]] && report+=(--no-plot)
"${report[@]}" || { echo "# compare_peers.py failed"; failures=$((failures + 1)); }
echo
echo "# logs: $out_dir; JSON lines: $json_out"
if [[ $failures -gt 0 ]]; then
  echo "# $failures run(s) failed"
  exit 1
fi
