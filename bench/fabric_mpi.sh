#!/usr/bin/env bash
# Starts an MPICH job across scripts/fabric.sh's emulated hosts, for bench/compare_peers.sh
# --fabric-mpich (off by default: about one run in three hung in MPI_Finalize here, see below).
#
#   scripts/fabric.sh run --hosts H --ranks-per-host M [--rate R] --per-host -- \
#     bench/fabric_mpi.sh launch M -- PROGRAM [ARGS...]
#
# fabric.sh --per-host runs this once in every host's namespace; on host 1 it runs mpiexec.mpich
# with one hydra proxy per host (198.18.0.1 .. 198.18.0.H, M ranks each, -iface fab0). Hydra
# starts the proxy of another host through its ssh launcher, with this script as the ssh
# (-launcher-exec): called as `fabric_mpi.sh [ssh options] HOST COMMAND...`, it runs COMMAND in the
# namespace whose fab0 is HOST (the namespace of this run's host h is braidfab-<run>-h<h>). The
# other hosts' copies of `launch` exit at once; their ranks are the proxies' children.
#
# Debian's MPICH is ch4:ucx. Ranks of one proxy are one node to MPICH (its ch4 shared memory, the
# default build's, not checked further); UCX is held to TCP over fab0 (UCX_TLS=self,tcp,
# UCX_NET_DEVICES=fab0), since it otherwise takes the namespaces, which share the machine's
# identity, for one host and moves the bytes through shared memory past the shaped links (here a
# 4 MiB all-reduce took 33 ms at 100mbit, a tenth of the link bound). mpi-perf prints how many
# hosts MPI sees (MPI_COMM_TYPE_SHARED). Measured here with the restriction (2 cores, 2x2): MPI
# sees 2 hosts, a 4 MiB all-reduce took 164 ms at 1gbit and 735 ms at 100mbit (bound 34 and 336
# ms: the bytes cross the links; slow, as MPICH's 4 local ranks on 2 cores are), and about one
# run in three hung in MPI_Finalize (a rank polling UCX's TCP endpoints while the others waited
# in PMI) after every result was printed and written.
# Open MPI is not offered: its vader BTL took ranks on different namespaces for one node (same
# hostname) and crashed, and holding it to TCP would drop its shared memory within a host.
set -uo pipefail

if [[ ${1:-} == launch ]]; then
  per_host=$2
  [[ ${3:-} == -- ]] || { echo "fabric_mpi.sh: usage: launch M -- PROGRAM [ARGS...]" >&2; exit 2; }
  shift 3
  [[ ${FABRIC_HOST:-} == 1 ]] || exit 0
  hosts=""
  for ((h = 1; h <= FABRIC_NUM_HOSTS; h++)); do hosts+="${hosts:+,}198.18.0.$h:$per_host"; done
  exec mpiexec.mpich -launcher ssh -launcher-exec "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" \
    -hosts "$hosts" -n $((FABRIC_NUM_HOSTS * per_host)) -iface "${FABRIC_IFNAME:-fab0}" \
    -genv UCX_TLS self,tcp -genv UCX_NET_DEVICES "${FABRIC_IFNAME:-fab0}" "$@"
fi

# ssh stand-in: skip ssh's options, then HOST, then the command (a remote shell would join it).
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in -o | -l | -p | -i | -F) shift 2 ;; *) shift ;; esac
done
[[ $# -ge 2 ]] || { echo "fabric_mpi.sh: usage: [ssh options] HOST COMMAND..." >&2; exit 2; }
host=$1
shift
me=$(ip netns identify $$)
[[ $me == braidfab-*-h* ]] || { echo "fabric_mpi.sh: not inside a fabric.sh host ($me)" >&2; exit 2; }
exec ip netns exec "${me%-h*}-h${host##*.}" bash -c "$*"
