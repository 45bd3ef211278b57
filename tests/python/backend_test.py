"""Drives backend_worker.py (braid's torch.distributed backend against gloo) and the killed-rank
check, for CTest.

    python3 backend_test.py torchrun SUITE WORLD [worker args...]   # real torchrun (c10d rdzv)
    python3 backend_test.py store tcp|file|hash WORLD                # explicit store= groups
    python3 backend_test.py killed WORLD                             # one rank dies mid-run

The killed-rank check starts the ranks itself (env:// variables, like torchrun's workers):
torchrun's agent tears every worker down as soon as one exits, which would hide what the
survivors report. Rank WORLD-1 kills itself (SIGKILL) after a few all-reduces; every survivor
must raise within the group's timeout (5 s) plus a margin, with an error that names the dead
rank, and must not hang.

Exit 77 (skip) without torch or the braid module.
"""

import os
import signal
import subprocess
import sys
import shutil
import tempfile
import time

from ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "backend_worker.py")


def env():
    e = dict(os.environ, OMP_NUM_THREADS="1")
    e.pop("BRAID_STORE_PORT", None)
    return e


def run(cmd, limit, expect_ok_lines, what):
    p = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        print(out[-6000:])
        print(f"FAIL: {what}: still running after {limit} s")
        return 1
    ok = sum(1 for line in out.splitlines() if line.rstrip().endswith(" OK")
             or " OK (" in line or "bit-identical" in line)
    keep = [line for line in out.splitlines() if " OK" in line or "bit-identical" in line
            or "Error" in line or "FAIL" in line]
    print("\n".join(keep))
    if p.returncode != 0 or ok < expect_ok_lines:
        print(out[-8000:])
        print(f"FAIL: {what}: exit {p.returncode}, {ok} of {expect_ok_lines} OK lines")
        return 1
    print(f"PASS: {what}")
    return 0


def torchrun(suite, world, extra):
    # What --standalone does, on a free port: its fixed localhost:29400 would make two of
    # these tests (ctest -j) share one rendezvous.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--rdzv_backend",
           "c10d", "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id",
           f"braid-{os.getpid()}", "--nproc_per_node", str(world), "--redirects", "1", "--tee",
           "1", "--monitor_interval", "1", WORKER, "--suite", suite] + extra
    return run(cmd, 420, world, f"torchrun {suite} x{world}")


def store(kind, world):
    if kind == "hash":
        return run([sys.executable, WORKER, "--suite", "hash"], 120, 1, "HashStore, one rank")
    port = free_port(3)
    tmp = tempfile.mkdtemp(prefix="braid-store-")
    procs = []
    for r in range(world):
        e = env()
        e.update(RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, WORKER, "--suite", "store", "--store",
                                       kind, "--file", os.path.join(tmp, "store")], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    rc = 0
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        print(out.strip()[-3000:])
        if p.returncode != 0 or f"store {kind} OK" not in out:
            rc = 1
    print(("PASS" if rc == 0 else "FAIL") + f": {kind} store x{world}")
    shutil.rmtree(tmp, ignore_errors=True)
    return rc


KILLED = r'''
import datetime, os, signal, sys, time
import torch, torch.distributed as dist
import braid.torch
dist.init_process_group("braid", timeout=datetime.timedelta(seconds=5))
rank, p = dist.get_rank(), dist.get_world_size()
t = torch.ones(1 << 16)
for _ in range(5):
    dist.all_reduce(t)
if rank == p - 1:
    os.kill(os.getpid(), signal.SIGKILL)
t0 = time.monotonic()
try:
    for _ in range(1000):
        dist.all_reduce(t)
        time.sleep(0.01)
    print(f"rank {rank}: FAIL: no error after the death of rank {p - 1}", flush=True)
    sys.exit(1)
except RuntimeError as e:
    dt = time.monotonic() - t0
    print(f"rank {rank}: error after {dt:.2f} s: {type(e).__name__}: {e}", flush=True)
    named = f"rank {p - 1}" in str(e)
    print(f"rank {rank}: " + ("names the dead rank OK" if named else "FAIL: rank not named"),
          flush=True)
    sys.exit(0 if named and dt < 5 + 10 else 1)
'''


def killed(world):
    port = free_port(3)
    procs = []
    t0 = time.monotonic()
    for r in range(world):
        e = env()
        e.update(RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, "-c", KILLED], env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    rc = 0
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            print(f"rank {r}: FAIL: hung (killed by the test)")
            rc = 1
        lines = [l for l in out.splitlines() if l.startswith(f"rank {r}:") or "Error" in l]
        print("\n".join(lines[-6:]))
        if r == world - 1:
            if p.returncode != -signal.SIGKILL:
                print(f"rank {r}: FAIL: expected to die by SIGKILL, exit {p.returncode}")
                rc = 1
        elif p.returncode != 0 or "names the dead rank OK" not in out:
            print(out[-3000:])
            rc = 1
    print(("PASS" if rc == 0 else "FAIL") + f": killed rank x{world} "
          f"({time.monotonic() - t0:.1f} s)")
    return rc


def main():
    try:
        import torch  # noqa: F401
        import torch.distributed.run  # noqa: F401
        import braid.torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    mode = sys.argv[1]
    if mode == "torchrun":
        return torchrun(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    if mode == "store":
        return store(sys.argv[2], int(sys.argv[3]))
    if mode == "killed":
        return killed(int(sys.argv[2]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
