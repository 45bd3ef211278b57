"""braid's errors surface as Python exceptions (braid.BraidError subclasses) naming the rank.

worker() runs on 2 ranks (launch.py); each case must raise the expected class on the expected
ranks with the rank in the message and in .rank.
"""

import os
import time

import numpy as np
import torch

import braid
import braid.torch


def expect(cls, fn, rank, mention=None):
    try:
        fn()
    except cls as e:
        msg = str(e)
        assert isinstance(e, braid.BraidError), type(e)
        assert e.rank == rank, (e.rank, msg)
        assert msg.startswith(f"rank {rank}"), msg
        if mention is not None:
            assert mention in msg, f"expected {mention!r} in: {msg}"
        return msg
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"rank {rank}: expected {cls.__name__}, got "
                             f"{type(e).__name__}: {e}") from e
    raise AssertionError(f"rank {rank}: expected {cls.__name__}, nothing was raised")


def worker(rank, world):
    comm = braid.init()
    assert (comm.rank, comm.size) == (rank, world)

    # 1. Argument errors stay local and leave the communicator usable.
    t = torch.ones(8)
    expect(braid.InvalidArgumentError, lambda: comm.broadcast(t, root=world + 3), rank)
    expect(braid.InvalidArgumentError, lambda: comm.all_reduce(torch.ones(4, 4).t()), rank)
    comm.all_reduce(t)
    assert torch.equal(t, torch.full((8,), float(world))), t
    a = np.arange(5, dtype=np.float64)
    comm.all_reduce(a, op="max")
    assert (a == np.arange(5)).all()

    # 2. Ranks that disagree: InvalidUsageError on every rank instead of a hang.
    n = 10 + rank
    msg = expect(braid.InvalidUsageError, lambda: comm.all_reduce(torch.ones(n)), rank)
    print(f"rank {rank}: mismatch -> {msg[:160]}", flush=True)
    comm.close()

    # Later communicators meet through a torch FileStore (a second bootstrap on MASTER_PORT
    # could reach rank 0's previous store while it shuts down).
    store = torch.distributed.FileStore(os.path.join(os.environ["BRAID_TEST_TMP"], "store"),
                                        world)

    # 3. A Bucketer whose ranks registered different models: named parameter, every rank.
    comm = braid.Communicator.from_store(torch.distributed.PrefixStore("b/", store), rank, world)
    b = braid.Bucketer(comm)
    b.register(0, (4, 3), name="fc.weight")
    b.register(1, 3 + rank, name="fc.bias")
    expect(braid.InvalidUsageError, b.finalize, rank, mention="fc.bias")
    b.close()
    comm.close()

    # 4. A rank that fails: the peer's collective raises RemoteError naming it; a DDP comm hook
    #    completes its future with the same error.
    comm = braid.Communicator.from_store(torch.distributed.PrefixStore("c/", store), rank, world)
    comm.all_reduce(torch.ones(3))
    # A collective can finish on one rank before the other: rank 1 fails only once rank 0 is
    # through its first one.
    if rank == 0:
        store.set("first-done", "1")
    if rank == 1:
        store.wait(["first-done"])
        comm.abort("rank 1 gives up (test)")
        expect(braid.BraidError, lambda: comm.all_reduce(torch.ones(3)), rank)
    else:
        msg = expect(braid.RemoteError, lambda: comm.all_reduce(torch.ones(1 << 16)), rank,
                     mention="rank 1")
        print(f"rank {rank}: peer failure -> {msg[:160]}", flush=True)
        hook = braid.torch.ddp_hook(comm)
        fut = hook(None, _FakeBucket(torch.ones(5)))
        try:
            fut.wait()
        except Exception as e:  # torch re-raises the future's exception
            assert "rank 0" in str(e) and "rank 1" in str(e), str(e)
        else:
            raise AssertionError("the hook's future completed without the peer's error")
        hook.close()
    comm.close()

    # 5. Work.wait(timeout): rank 1 joins 1.5 s late; rank 0's wait(0.3 s) raises
    #    BraidTimeoutError naming it and the all-reduce, well before rank 1 arrives, and fails
    #    the communicator on both ranks.
    comm = braid.Communicator.from_store(torch.distributed.PrefixStore("d/", store), rank, world)
    comm.barrier()
    if rank == 1:
        time.sleep(1.5)
    t = torch.ones(1 << 12)
    w = comm.all_reduce(t, async_op=True)
    if rank == 0:
        t0 = time.monotonic()
        msg = expect(braid.BraidTimeoutError, lambda: w.wait(timeout=0.3), rank,
                     mention="allreduce")
        assert time.monotonic() - t0 < 1.3, f"wait(timeout=0.3) took {time.monotonic() - t0} s"
        print(f"rank {rank}: wait timeout -> {msg[:160]}", flush=True)
        expect(braid.BraidTimeoutError, comm.check_health, rank)
    else:
        expect(braid.BraidError, w.wait, rank)
    comm.close()
    return 0


class _FakeBucket:
    """The part of torch.distributed.GradBucket the hook reads."""

    def __init__(self, t):
        self.t = t

    def buffer(self):
        return self.t

    def index(self):
        return 0

    def is_last(self):
        return True

    def gradients(self):
        return [self.t]


if __name__ == "__main__":
    print("run through launch.py: python3 launch.py errors_worker 2")
    os._exit(2)
