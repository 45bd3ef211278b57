#!/bin/sh
# Usage: check_exports.sh NM NET_SO TUNER_SO. Fails unless each library's dynamic symbol table
# defines exactly the plugin tables it is meant to export, and needs no optional library.
set -u
nm=$1 net=$2 tuner=$3
tuner_syms="ncclTunerPlugin_v2 ncclTunerPlugin_v3 ncclTunerPlugin_v4 ncclTunerPlugin_v5"
tuner_syms="$tuner_syms ncclTunerPlugin_v6"
net_syms="ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v12 ncclNetPlugin_v9 $tuner_syms"
status=0
check() {
  lib=$1; shift
  want=$(printf '%s\n' "$@" | sort | tr '\n' ' ')
  have=$("$nm" -D --defined-only "$lib" | awk '{print $3}' | sort | tr '\n' ' ')
  if [ "$want" != "$have" ]; then
    echo "FAIL $lib exports: $have"
    echo "     expected:     $want"
    status=1
  else
    echo "ok   $lib exports: $have"
  fi
  # Each table is a data object (D), not a function.
  if "$nm" -D --defined-only "$lib" | awk '{print $2}' | grep -qv '^[DR]$'; then
    echo "FAIL $lib: an export is not a data object"; status=1
  fi
  if command -v readelf >/dev/null && readelf -d "$lib" | grep NEEDED | grep -Eq 'mpi|ucx|cuda|nccl'; then
    echo "FAIL $lib needs an optional library:"; readelf -d "$lib" | grep NEEDED; status=1
  fi
}
check "$net" $net_syms
check "$tuner" $tuner_syms
exit $status
