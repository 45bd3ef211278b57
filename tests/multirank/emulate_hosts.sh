#!/usr/bin/env bash
# emulate_hosts.sh LAYOUT -- PROGRAM [ARGS...]
# Runs PROGRAM as one rank of a job whose ranks are grouped into emulated hosts on this machine,
# without network namespaces: LAYOUT gives the ranks per host in rank order (2,2 = ranks 0-1 on
# host 0, 2-3 on host 1; 3,1 = ranks 0-2 and rank 3), and the rank (RANK, set by braid-run) gets
# BRAID_HOST_ID=emulated-host-<h>. braid then connects ranks of one host over shm (and maps their
# intra-host segment) and ranks of different hosts over tcp on loopback.
set -euo pipefail
[ $# -ge 3 ] && [ "$2" = "--" ] || { echo "usage: emulate_hosts.sh LAYOUT -- PROGRAM [ARGS...]" >&2; exit 2; }
layout="$1"
shift 2
rank="${RANK:?emulate_hosts.sh: RANK is not set (start it under braid-run)}"
IFS=, read -ra per_host <<< "$layout"
host=0
first=0
for n in "${per_host[@]}"; do
  [ "$rank" -lt $((first + n)) ] && break
  first=$((first + n))
  host=$((host + 1))
done
if [ "$host" -ge "${#per_host[@]}" ]; then
  echo "emulate_hosts.sh: rank $rank is outside layout $layout" >&2
  exit 2
fi
export BRAID_HOST_ID="emulated-host-${host}"
exec "$@"
