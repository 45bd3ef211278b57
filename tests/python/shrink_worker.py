"""Recovery of braid.torch.DataParallel from a lost rank, as README's "Recovering from a lost
rank" recipe does it: 4 ranks train a small model; rank 2 is killed (SIGKILL) in the middle of
step 3; the survivors catch the error, shrink the communicator, rebuild the wrapper over the new
one (3 ranks, averaging over 3), agree on the step and finish. Their parameters must be equal at
the end, and the new communicator must average over its own size.

launch.py shrink_worker 4 --killed 2 (the launcher expects rank 2 to die by SIGKILL).
"""

import os
import subprocess
import time

import torch

import braid
import braid.torch

VICTIM = 2
KILL_STEP = 3
STEPS = 8


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(32, 16, generator=g), torch.randn(32, 4, generator=g)


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(5))

    def forward(self, k):
        return (self.w * k).sum()


def worker(rank, world):
    comm = braid.init()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    model = braid.torch.DataParallel(net, comm=comm)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    step, recovered = 0, False
    while step < STEPS:
        x, y = batch(step, comm.rank)
        try:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            if rank == VICTIM and step == KILL_STEP:
                # kill -9 from outside, between this rank's forward and backward, while the
                # others wait in the step's all-reduces; the sleep keeps a fast machine from
                # finishing the run first.
                subprocess.Popen(["sh", "-c", f"sleep 0.01; kill -9 {os.getpid()}"])
                time.sleep(60)
            loss.backward()
            opt.step()
            step += 1
        except braid.BraidError as e:  # what the recipe catches (backward raises it as is)
            assert not recovered, f"rank {rank}: a second failure: {e}"
            assert f"rank {VICTIM}" in str(e), f"rank {rank}: the error does not name rank " \
                                                f"{VICTIM}: {e}"
            print(f"rank {rank}: step {step} failed: {str(e)[:200]}", flush=True)
            # -- the recipe --
            model.close()                       # the old wrapper's Bucketer and gradient views
            new = comm.shrink([VICTIM])         # every survivor passes the same list
            comm.close()                        # the failed one (already released by shrink)
            comm = new
            model = braid.torch.DataParallel(net, comm=comm)  # broadcasts new rank 0's weights
            s = torch.tensor([step], dtype=torch.int64)
            comm.broadcast(s, 0)                # a survivor may have finished the failed step
            step = int(s)
            recovered = True
    assert recovered, f"rank {rank}: no failure seen"
    assert (comm.size, comm.rank) == (world - 1, rank - (rank > VICTIM)), (comm.size, comm.rank)

    # Averaging over the new size: one more backward with the gradient of a sum being the rank.
    scale = Scale()
    probe = braid.torch.DataParallel(scale, comm=comm)
    probe(float(comm.rank)).backward()
    want = sum(range(comm.size)) / comm.size
    assert torch.allclose(scale.w.grad, torch.full((5,), want)), (scale.w.grad, want)
    probe.close()

    flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
    every = torch.zeros(comm.size * flat.numel())
    comm.all_gather(flat, every)
    for i in range(comm.size):
        assert torch.equal(every[i * flat.numel():(i + 1) * flat.numel()], flat), \
            f"rank {comm.rank}: parameters differ from new rank {i}'s"
    print(f"rank {rank} -> {comm.rank} of {comm.size}: {STEPS} steps, parameters equal",
          flush=True)
    model.close()
    comm.close()
    return 0
