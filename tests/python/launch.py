"""Test launcher: runs `worker(rank, world, *args)` (a function of a tests/python module) in
`world` real processes started by torch.multiprocessing, with torchrun-style variables and a
free MASTER_PORT, and a wall-clock limit. Exit code 0 when every rank returned 0 (and, with
--killed R, rank R died by SIGKILL), 77 (CTest's skip code) when torch or the braid module
cannot be imported.

    python3 launch.py MODULE WORLD [--killed R] [ARGS...]
"""

import importlib
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

from ports import free_port

SKIP = 77


def _entry(index, module, world, port, args, env):
    os.environ.update(env)
    os.environ.update({"RANK": str(index), "WORLD_SIZE": str(world), "LOCAL_RANK": str(index),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        rc = importlib.import_module(module).worker(index, world, *args)
    except SystemExit as e:
        rc = e.code
    except BaseException:  # noqa: BLE001 - report every failure with its rank
        print(f"rank {index}: uncaught exception\n{traceback.format_exc()}", flush=True)
        rc = 1
    sys.stdout.flush()
    os._exit(int(rc or 0))


def main():
    try:
        import torch  # noqa: F401
        import torch.multiprocessing as mp
        import braid  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e} (needs Debian's python3-torch and the braid module on PYTHONPATH)")
        return SKIP
    module, world, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    killed = None
    if args[:1] == ["--killed"]:
        killed, args = int(args[1]), args[2:]
    tmp = tempfile.mkdtemp(prefix="braid-pytest-")
    env = {"BRAID_TIMEOUT_MS": os.environ.get("BRAID_TIMEOUT_MS", "20000"),
           "OMP_NUM_THREADS": "1", "BRAID_TEST_TMP": tmp}
    ctx = mp.start_processes(_entry, args=(module, world, free_port(3), args, env),
                             nprocs=world, join=False, start_method="spawn")
    failed = []
    deadline = time.monotonic() + float(os.environ.get("BRAID_TEST_LIMIT_S", "100"))

    def over_limit():
        if time.monotonic() <= deadline:
            return False
        failed.append("ranks still running at the limit (BRAID_TEST_LIMIT_S)")
        for p in ctx.processes:
            p.kill()
        return True

    # A rank meant to die: ctx.join would terminate the others at its death, so wait for each.
    while killed is not None:
        # Poll (and so reap) every process: a dead rank left a zombie looks alive to its peers.
        codes = [p.exitcode for p in ctx.processes]
        if all(c is not None for c in codes):
            for i, p in enumerate(ctx.processes):
                want = -signal.SIGKILL if i == killed else 0
                if p.exitcode != want:
                    failed.append(f"rank {i} exited with {p.exitcode}, expected {want}")
            break
        if over_limit():
            break
        time.sleep(0.2)
    while killed is None:
        try:
            if ctx.join(timeout=1):
                break
        except Exception as e:  # ProcessExitedException: a rank exited non-zero
            failed.append(str(e))
            break
        if over_limit():
            break
    for p in ctx.processes:
        p.join(timeout=30)
        if p.exitcode is None:
            p.kill()
            failed.append(f"process {p.pid} did not exit")
        elif p.exitcode != 0 and not failed and killed is None:
            failed.append(f"process {p.pid} exited with {p.exitcode}")
    shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        print("FAILED: " + "; ".join(failed))
        return 1
    print(f"{module}: {world} ranks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
