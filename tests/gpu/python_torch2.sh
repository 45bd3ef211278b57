#!/usr/bin/env bash
# torch 2.x check of the Python package (issue #7), for the lent GPU machine (torch 2.x on its
# own python3, nothing installed there). Host tensors only: the point is that the package works
# unchanged with torch 2.x (post-accumulate-grad hooks, zero_grad(set_to_none=True) by default,
# torch 2's torchrun), not device memory. Skips cleanly (exit 0, saying why) without torch,
# Python.h or pybind11. Run by tests/gpu/run_device_checks.sh (its own step), or by hand:
#   BRAID_BUILD_DIR=build-gpu tests/gpu/python_torch2.sh
# 1. configures BRAID_BUILD_DIR with the Python module for that python3: pybind11 from its
#    pybind11 package, else the copy torch ships in torch/include; builds target braid_python;
# 2. runs the tests/python suites: api (3 ranks), DDP equivalence (bit-exact, 2 ranks), errors,
#    torchrun (static and --standalone rendezvous);
#    then the torch.distributed backend "braid" (issue #15): tests/python/backend_test.py's ops
#    (2 and 3 ranks), DDP, DataParallel, store and killed-rank suites, and torch2_worker.py's
#    torch 2.x checks: "cpu:braid(,cuda:nccl)" device maps, FSDP2 fully_shard on CPU, a DTensor
#    on a braid DeviceMesh, torch.compile under DDP over braid, braid subgroups from new_group,
#    a 2-D DeviceMesh and split_group (prepared on a machine without
#    torch 2.x: first run on the GPU machine pending);
# 3. prints the step-time benchmark (examples/bench_ddp_step.py, 2 ranks, MLP and CNN) as
#    information only: DDP over torch 2.x's gloo (with its shared-memory all-reduce) is the
#    CPU peer to read the braid paths against.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BRAID_BUILD_DIR:-build-gpu}
case "$build" in /*) ;; *) build="$root/$build" ;; esac
py=${BRAID_PYTHON:-$(command -v python3)}

skip() { echo "python_torch2: SKIPPED: $*"; exit 0; }
fail() { echo "python_torch2: FAILED: $*"; exit 1; }

[ -n "$py" ] || skip "no python3"
"$py" -c "import torch" 2>/dev/null || skip "$py cannot import torch"
echo "python_torch2: $py ($("$py" -V 2>&1)), torch $("$py" -c 'import torch; print(torch.__version__)')"
inc=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
[ -f "$inc/Python.h" ] || skip "no Python.h in $inc (the interpreter's development files)"
pyb=""
if ! "$py" -c "import pybind11" 2>/dev/null && [ ! -d /usr/lib/cmake/pybind11 ]; then
  pyb=$("$py" -c "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'include'))")
  [ -f "$pyb/pybind11/pybind11.h" ] || skip "no pybind11 (package, CMake config or torch/include)"
  echo "python_torch2: pybind11 headers from $pyb"
fi
mkdir -p "$build"
cmake -S "$root" -B "$build" -DBRAID_WITH_PYTHON=ON -DPython3_EXECUTABLE="$py" \
  ${pyb:+-DBRAID_PYBIND11_INCLUDE_DIR="$pyb"} >"$build/python-configure.log" 2>&1 ||
  fail "configure (see $build/python-configure.log)"
cmake --build "$build" --target braid_python -j"$(nproc)" >"$build/python-build.log" 2>&1 ||
  { tail -30 "$build/python-build.log"; fail "build of braid_python"; }

export PYTHONPATH="$build/python" BRAID_TIMEOUT_MS=20000 OMP_NUM_THREADS=1
status=0
cd "$root/tests/python"
for t in "api_worker 3" "equivalence_worker 2" "errors_worker 2"; do
  if timeout 120 "$py" launch.py $t; then
    echo "python_torch2: ${t% *}: passed"
  else
    echo "python_torch2: ${t% *}: FAILED"
    status=1
  fi
done
if timeout 150 "$py" torchrun_test.py; then
  echo "python_torch2: torchrun: passed"
else
  echo "python_torch2: torchrun: FAILED"
  status=1
fi
for t in "torchrun ops 2" "torchrun ops 3" "torchrun ddp 2 --steps 8" "torchrun dp 2 --steps 12" \
         "store tcp 2" "store file 2" "store hash 1" "killed 3"; do
  if timeout 460 "$py" backend_test.py $t; then
    echo "python_torch2: backend $t: passed"
  else
    echo "python_torch2: backend $t: FAILED"
    status=1
  fi
done
for c in devmap fsdp2 dtensor compile groups; do
  if timeout 300 "$py" -m torch.distributed.run --standalone --nproc_per_node 2 \
      torch2_worker.py --check "$c"; then
    echo "python_torch2: torch 2 $c: passed"
  else
    echo "python_torch2: torch 2 $c: FAILED"
    status=1
  fi
done
cd "$root"
echo "python_torch2: benchmark (information only)"
for m in mlp cnn; do
  timeout 200 "$py" -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 1 \
    --tee 1 examples/bench_ddp_step.py --model "$m" --steps 10 --rounds 3 2>&1 |
    grep -v "^\*\|OMP_NUM_THREADS\|^WARNING" || true
done
exit $status
