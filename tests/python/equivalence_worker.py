"""One rank of the equivalence check: DDP over gloo vs DDP with braid's comm hook vs
braid.torch.DataParallel, same initial weights and data, N SGD steps; every parameter must be
bit-identical (world size 2: a + b is commutative, and averaging by 2 is exact).

Run by launch.py through torch.multiprocessing (worker(): braid rendezvous through torch's own
store) or as a script by torchrun (main(): braid.init() from torchrun's variables, braid's store
on MASTER_PORT + 1).
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import braid
import braid.torch


class Net(torch.nn.Module):
    """An MLP with an optional branch that only some ranks use (unused-parameter case)."""

    def __init__(self, with_branch):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 32)
        self.fc3 = torch.nn.Linear(32, 4)
        self.branch = torch.nn.Linear(32, 4) if with_branch else None

    def forward(self, x, use_branch=False):
        h = torch.relu(self.fc1(x))
        h = torch.relu(self.fc2(h))
        y = self.fc3(h)
        if self.branch is not None and use_branch:
            y = y + self.branch(h)
        return y


def batches(rank, steps, micro):
    g = torch.Generator().manual_seed(1000 + rank)
    return [[(torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g))
             for _ in range(micro)] for _ in range(steps)]


def train(model, data, rank, sync_ctx, use_branch_on, opt_lr=0.05):
    opt = torch.optim.SGD(model.parameters(), lr=opt_lr, momentum=0.9)
    for step, micro in enumerate(data):
        opt.zero_grad()
        for k, (x, y) in enumerate(micro):
            last = k == len(micro) - 1
            ctx = sync_ctx(model) if not last else _null()
            with ctx:
                out = model(x, use_branch=(rank in use_branch_on and step % 2 == 0))
                loss = torch.nn.functional.mse_loss(out, y)
                loss.backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def run(rank, world, variant, steps, comm):
    with_branch = variant == "unused"
    micro = 2 if variant == "no_sync" else 1
    use_branch_on = {0} if with_branch else set()
    data = batches(rank, steps, micro)

    def fresh():
        torch.manual_seed(7)
        return Net(with_branch)

    results = {}
    ddp_kw = {"find_unused_parameters": with_branch}
    ref = DDP(fresh(), **ddp_kw)
    results["ddp-gloo"] = train(ref, data, rank, lambda m: m.no_sync(), use_branch_on)

    hooked = DDP(fresh(), **ddp_kw)
    hook = braid.torch.ddp_hook(comm)
    hooked.register_comm_hook(None, hook)
    results["ddp-braid-hook"] = train(hooked, data, rank, lambda m: m.no_sync(), use_branch_on)
    m = hook.metrics()
    assert m["buckets"] >= 1 and m["bytes"] > 0, m
    hook.close()

    for zero_copy in (True, False):
        dp = braid.torch.DataParallel(fresh(), comm=comm, find_unused_parameters=with_branch,
                                      zero_copy=zero_copy, bucket_cap_mb=0.004,
                                      first_bucket_cap_mb=0.001)
        name = f"braid-DataParallel(zero_copy={zero_copy})"
        results[name] = train(dp, data, rank, lambda m: m.no_sync(), use_branch_on)
        assert dp.metrics is not None and dp.metrics.communicated
        assert dp.bucketer.bucket_count > 1, dp.bucketer.bucket_layout()
        assert dp.bucketer.layout_version >= 2, "the layout was never rebuilt"
        dp.close()

    bad = []
    for name, params in results.items():
        for i, (a, b) in enumerate(zip(results["ddp-gloo"], params)):
            if not torch.equal(a, b):
                bad.append(f"{name}: parameter {i} differs by up to "
                           f"{(a - b).abs().max().item():.3e}")
    # The ranks agree with each other too.
    flat = torch.cat([p.flatten() for p in results["ddp-gloo"]])
    other = flat.clone()
    comm.broadcast(other, root=0)
    if not torch.equal(flat, other):
        bad.append("ranks hold different parameters")
    if bad:
        print(f"rank {rank} [{variant}] MISMATCH:\n  " + "\n  ".join(bad), flush=True)
        return 1
    print(f"rank {rank} [{variant}]: {len(results)} ways bit-identical after {steps} steps",
          flush=True)
    return 0


def worker(rank, world, variants="plain,no_sync,unused", steps="6"):
    """launch.py entry: a gloo group from the launcher's variables, braid through its store."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    comm = braid.Communicator.from_torch()  # through torch's store: no second port
    assert comm.rank == rank and comm.size == world
    rc = 0
    for v in variants.split(","):
        rc |= run(rank, world, v, int(steps), comm)
    dist.barrier()
    comm.close()
    dist.destroy_process_group()
    return rc


def main():
    """torchrun entry: everything from the environment; braid's store on MASTER_PORT + 1."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="plain,no_sync,unused")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    comm = braid.init()  # torchrun variables; braid's store on MASTER_PORT + 1
    assert comm.rank == rank and comm.size == dist.get_world_size()
    if os.environ.get("TORCHELASTIC_RUN_ID"):
        # braid moved next to torch's store instead of fighting it for MASTER_PORT.
        store_port = int(os.environ["MASTER_PORT"]) + 1
        print(f"rank {rank}: torchrun on MASTER_PORT {os.environ['MASTER_PORT']}, braid's "
              f"store on {store_port}", flush=True)
    rc = 0
    for v in a.variants.split(","):
        rc |= run(rank, comm.size, v, a.steps, comm)
    dist.barrier()
    comm.close()
    dist.destroy_process_group()
    return rc


if __name__ == "__main__":
    sys.exit(main())
