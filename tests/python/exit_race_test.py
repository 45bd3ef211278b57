"""A process group torn down on its engine thread while the interpreter exits (CTest).

The main thread can get the GIL back while the engine thread runs a Work's completion (Python
code), go on through destroy_process_group and reach the interpreter's exit; the engine thread
then drops the last reference to the group and tears the communicator down, and rank 0's teardown
waits, through the Python store, for its peer to leave. Python ends a thread that asks for the GIL
during finalization, which used to abort rank 0 ("terminate called without an active
exception"). Here the completion is made slow and rank 1 leaves late, so every run takes that
path: both ranks must exit 0.

    python3 exit_race_test.py            # starts two ranks of itself over a FileStore

Exit 77 (skip) without torch or the braid module.
"""

import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time


def rank_main(path):
    import torch
    import torch.distributed as dist
    import braid.torch  # noqa: F401 (registers "braid")
    from braid.torch import _work
    rank = int(os.environ["RANK"])
    dist.init_process_group("braid", store=dist.FileStore(path, 2), rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=20))
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [3.0] * 5, t
    done = _work.BraidWork._done

    def slow_done(self, exc):
        done(self, exc)
        if self._name == "barrier" and rank == 0:
            time.sleep(0.3)  # the main thread destroys the group and exits meanwhile

    _work.BraidWork._done = slow_done
    dist.barrier()
    if rank == 1:
        time.sleep(2.0)  # rank 0's teardown waits for this rank to leave
    dist.destroy_process_group()
    if rank == 0:
        time.sleep(0.6)  # the completion ends here: its thread drops the last reference
    print(f"rank {rank}: exit race OK", flush=True)


def main():
    try:
        import torch  # noqa: F401
        import braid.torch  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}")
        return 77
    tmp = tempfile.mkdtemp(prefix="braid-exit-race-")
    procs = []
    for r in range(2):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE="2")
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank", os.path.join(tmp, "s")],
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    rc = 0
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        print(out.strip()[-3000:])
        if p.returncode != 0 or f"rank {r}: exit race OK" not in out:
            print(f"FAIL: rank {r} exited {p.returncode}")
            rc = 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("PASS" if rc == 0 else "FAIL")
    return rc


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank":
        rank_main(sys.argv[2])
        sys.exit(0)
    sys.exit(main())
