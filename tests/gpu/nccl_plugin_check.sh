#!/usr/bin/env bash
# GPU check of the NCCL plugins (issue #4). Needs a GPU, nvcc and NCCL; skips cleanly (exit 0,
# saying why) without them. Run by tests/gpu/run_device_checks.sh, or by hand:
#   BRAID_BUILD_DIR=build tests/gpu/nccl_plugin_check.sh
# 1. builds tests/gpu/nccl_allreduce_check.cu with nvcc against the system NCCL;
# 2. one rank: NCCL_NET_PLUGIN/NCCL_TUNER_PLUGIN = the built libraries, NCCL_DEBUG=INFO; checks
#    the all-reduce result and that NCCL loaded the net plugin and the tuner at the versions its
#    own version binds (net v11 / tuner v5 up to 2.29, v12 / v6 from 2.30.3: ABI doc §9), that
#    braid-info nccl --nccl-log reads the same from the log, and that braid's own lines
#    (NET/braid devices, TUNER/braid decisions) came through NCCL's logger;
# 3. tries two processes on the one GPU with different NCCL_HOSTID values, so that NCCL sees two
#    nodes and routes through NET: reported (with whether "via NET/braid" appeared), but only a
#    wrong result fails the check, since NCCL may refuse the setup (ABI doc §6: unverified).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BRAID_BUILD_DIR:-build}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
net_so="$build/plugin/libnccl-net-braid.so"
tuner_so="$build/plugin/libnccl-tuner-braid.so"

skip() { echo "nccl_plugin_check: SKIPPED: $*"; exit 0; }
fail() { echo "nccl_plugin_check: FAILED: $*"; exit 1; }

command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 || skip "no GPU (nvidia-smi -L failed)"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || skip "no nvcc"
nccl_inc="" nccl_lib=""
# NCCL_HOME, the CUDA toolkit, the system, then the nvidia-nccl wheel of the machine's python3
# (nvidia/nccl/{include,lib}; the wheel ships libnccl.so.2 without the unversioned link).
pip_nccl=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2>/dev/null || true)
for d in ${NCCL_HOME:+$NCCL_HOME/include} /usr/local/cuda/include /usr/include /usr/local/include \
    ${pip_nccl:+$pip_nccl/include}; do
  [ -f "$d/nccl.h" ] && { nccl_inc=$d; break; }
done
for d in ${NCCL_HOME:+$NCCL_HOME/lib} /usr/local/cuda/lib /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu \
    /usr/local/lib ${pip_nccl:+$pip_nccl/lib}; do
  ls "$d"/libnccl.so* >/dev/null 2>&1 && { nccl_lib=$d; break; }
done
[ -n "$nccl_inc" ] && [ -n "$nccl_lib" ] || skip "NCCL headers or library not found (set NCCL_HOME)"
[ -f "$net_so" ] && [ -f "$tuner_so" ] || fail "plugins not built: $net_so, $tuner_so"
# The versions this NCCL binds: the first of net v12..v6 / tuner v6..v2 it searches for.
nccl_code=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v[$2]=$3} END{print v["NCCL_MAJOR"]*10000+v["NCCL_MINOR"]*100+v["NCCL_PATCH"]}' "$nccl_inc/nccl.h")
if [ "$nccl_code" -ge 23003 ]; then want_net=v12 want_tuner=v6; else want_net=v11 want_tuner=v5; fi

work=$(mktemp -d /tmp/braid-nccl-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
nccl_so=$(ls "$nccl_lib"/libnccl.so "$nccl_lib"/libnccl.so.[0-9]* 2>/dev/null | head -1)
echo "nccl_plugin_check: nvcc $("$nvcc" --version | tail -1); NCCL from $nccl_lib; plugins in $build/plugin"
"$nvcc" -O2 -std=c++17 -I"$nccl_inc" -L"$nccl_lib" -Xlinker -rpath="$nccl_lib" \
  "$root/tests/gpu/nccl_allreduce_check.cu" -Xlinker "$nccl_so" -o "$work/allreduce" ||
  fail "could not build the all-reduce program"

export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING,ENV
export NCCL_NET_PLUGIN="$net_so" NCCL_TUNER_PLUGIN="$tuner_so"
export BRAID_TIMEOUT_MS=30000

# --- 1. one rank ------------------------------------------------------------------------------
log="$work/one-rank.log"
timeout 60 "$work/allreduce" 0 1 "$work/id1" >"$log" 2>&1
rc=$?
grep -E "braid|plugin|Plugin|TUNER" "$log" | head -40
[ $rc -eq 0 ] || { tail -30 "$log"; fail "one-rank all-reduce exited $rc"; }
grep -q "nccl_allreduce_check: ok" "$log" || fail "one-rank all-reduce gave no ok line"
problems=0
echo "NCCL version code $nccl_code: expecting net $want_net, tuner $want_tuner"
if grep -iE "net.*plugin|plugin.*net" "$log" | grep -i "braid" | grep -q "$want_net"; then
  echo "ok: NCCL loaded the braid net plugin at $want_net"
else
  echo "MISSING: no line saying the braid net plugin was loaded at $want_net"; problems=1
fi
if grep -i "tuner" "$log" | grep -i "braid" | grep -q "$want_tuner"; then
  echo "ok: NCCL loaded the braid tuner at $want_tuner"
else
  echo "MISSING: no line saying the braid tuner was loaded at $want_tuner"; problems=1
fi
if [ -x "$build/tools/braid-info" ]; then
  info=$("$build/tools/braid-info" nccl --net none --tuner none --nccl-log "$log")
  echo "$info" | grep "NCCL bound"
  echo "$info" | grep -q "NCCL bound net $want_net" && echo "$info" | grep -q "NCCL bound tuner $want_tuner" &&
    echo "ok: braid-info nccl --nccl-log reads net $want_net, tuner $want_tuner" ||
    { echo "MISSING: braid-info nccl --nccl-log did not read net $want_net / tuner $want_tuner"; problems=1; }
fi
grep -q "NET/braid: device" "$log" && echo "ok: braid's net lines came through NCCL's logger" ||
  { echo "MISSING: no 'NET/braid: device' line"; problems=1; }
grep -q "TUNER/braid:" "$log" && echo "ok: braid's tuner lines came through NCCL's logger" ||
  { echo "MISSING: no 'TUNER/braid:' line"; problems=1; }

# --- 2. two processes, two fake hosts -----------------------------------------------------------
export BRAID_NET_IFNAME=${BRAID_NET_IFNAME:-lo}
NCCL_HOSTID=braid-host-a timeout 60 "$work/allreduce" 0 2 "$work/id2" >"$work/r0.log" 2>&1 &
p0=$!
NCCL_HOSTID=braid-host-b timeout 60 "$work/allreduce" 1 2 "$work/id2" >"$work/r1.log" 2>&1 &
p1=$!
wait $p0; rc0=$?
wait $p1; rc1=$?
echo "two processes: exit codes $rc0 $rc1"
if [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ]; then
  if grep -q "via NET/braid" "$work/r0.log" "$work/r1.log"; then
    echo "ok: two processes reduced through NET/braid"
  else
    echo "note: two processes passed but no 'via NET/braid' line (NCCL took another path)"
    grep -h "via" "$work/r0.log" | head -5
  fi
elif grep -q "element .* is" "$work/r0.log" "$work/r1.log"; then
  tail -20 "$work/r0.log" "$work/r1.log"
  fail "two-process all-reduce gave a wrong result"
else
  echo "note: NCCL did not run two processes on one GPU (see below); data path not exercised"
  grep -hE "WARN|rror" "$work/r0.log" "$work/r1.log" | head -10
fi

[ $problems -eq 0 ] || fail "plugins not confirmed at the expected versions (log above)"
echo "nccl_plugin_check: passed"
