"""torch 2.x only: what rides on a process group beyond DDP, over the braid backend (CPU).

    torchrun --standalone --nproc_per_node 2 torch2_worker.py --check devmap|fsdp2|dtensor|compile

devmap:  init_process_group("cpu:braid") and, with CUDA present, "cpu:braid,cuda:nccl":
         a CPU all_reduce goes through braid; with a GPU per rank, a CUDA all_reduce goes to
         the NCCL backend the braid group makes for the map (torch 2.x makes a Python
         ProcessGroup the whole group, so the group routes CUDA tensors itself).
fsdp2:   fully_shard (FSDP2) of a small MLP on CPU over braid vs over gloo: parameters
         bit-identical after 4 steps (2 ranks).
dtensor: a DeviceMesh of the braid group, a row-sharded DTensor, full_tensor() and a
         redistribute to Replicate against the plain tensor.
compile: torch.compile(model) under DDP over braid vs the eager DDP over gloo: the loss
         sequence and the parameters within 1e-6 (compiled kernels may round differently).
groups:  new_group, a 2-D DeviceMesh's dimension groups and split_group (where torch has it)
         are braid subgroups of the default braid group (ProcessGroupBraid.parent set), ranked
         as torch ranks them, and reduce their members' values.

Prepared for tests/gpu/python_torch2.sh (the GPU machine's torch 2.x); torch 1.13 has none of
these and the script exits 77 there. Prints "rank R: <check> OK".
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist

import braid.torch as bt  # noqa: F401 - registers "braid"


def say(msg):
    print(f"rank {dist.get_rank()}: {msg}", flush=True)


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))


def batch(rank, step):
    g = torch.Generator().manual_seed(10 * rank + step)
    return torch.randn(4, 16, generator=g), torch.randn(4, 8, generator=g)


def check_devmap():
    backend = "cpu:braid,cuda:nccl" if torch.cuda.is_available() else "cpu:braid"
    dist.init_process_group(backend)
    t = torch.full((4,), float(dist.get_rank() + 1))
    dist.all_reduce(t)
    p = dist.get_world_size()
    assert torch.equal(t, torch.full((4,), float(p * (p + 1) // 2))), t
    if torch.cuda.is_available() and torch.cuda.device_count() >= p:
        torch.cuda.set_device(dist.get_rank())
        c = torch.full((4,), float(dist.get_rank() + 1), device="cuda")
        dist.all_reduce(c)
        assert torch.equal(c.cpu(), torch.full((4,), float(p * (p + 1) // 2))), c
        say(f"devmap {backend}: a CUDA all_reduce through NCCL OK")
    elif torch.cuda.is_available():
        say(f"devmap {backend}: no CUDA all_reduce ({torch.cuda.device_count()} GPU(s) for {p} "
            "ranks; NCCL needs one each)")
    say(f"devmap {backend} OK")


def check_fsdp2():
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed.device_mesh import DeviceMesh
    dist.init_process_group("braid")
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    results = []
    for group in (dist.group.WORLD, gloo):
        mesh = DeviceMesh.from_group(group, "cpu")
        model = mlp()
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for s in range(4):
            x, y = batch(rank, s)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
        results.append([p.full_tensor().detach().clone() for p in model.parameters()])
    for a, b in zip(*results):
        assert torch.equal(a, b), (a - b).abs().max()
    say("fsdp2 fully_shard: parameters bit-identical to gloo OK")


def check_dtensor():
    from torch.distributed.device_mesh import init_device_mesh
    try:
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    except ImportError:
        from torch.distributed._tensor import Replicate, Shard, distribute_tensor
    dist.init_process_group("braid")
    p = dist.get_world_size()
    mesh = init_device_mesh("cpu", (p,))
    full = torch.arange(8.0 * p).reshape(4 * p, 2)
    d = distribute_tensor(full, mesh, [Shard(0)])
    assert torch.equal(d.full_tensor(), full)
    r = d.redistribute(mesh, [Replicate()])
    assert torch.equal(r.to_local(), full)
    s = (d * 2).sum()
    assert s.full_tensor().item() == full.sum().item() * 2
    say("dtensor on a braid DeviceMesh OK")


def check_compile():
    from torch.nn.parallel import DistributedDataParallel as DDP
    dist.init_process_group("braid")
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    eager = DDP(mlp(), process_group=gloo)
    compiled = torch.compile(DDP(mlp()))
    oe = torch.optim.SGD(eager.parameters(), lr=0.1)
    oc = torch.optim.SGD(compiled.parameters(), lr=0.1)
    for s in range(4):
        x, y = batch(rank, s)
        for m, o in ((eager, oe), (compiled, oc)):
            torch.nn.functional.mse_loss(m(x), y).backward()
            o.step()
            o.zero_grad()
    for a, b in zip(eager.parameters(), compiled.parameters()):
        assert (a - b).abs().max().item() <= 1e-6, (a - b).abs().max()
    say("torch.compile under DDP over braid OK")


def _braid_backend(pg):
    """The ProcessGroupBraid behind a torch 2.x ProcessGroup (or the group itself)."""
    if isinstance(pg, bt.ProcessGroupBraid):
        return pg
    return pg._get_backend(torch.device("cpu"))


def _check_subgroup(pg, members, what):
    b = _braid_backend(pg)
    assert isinstance(b, bt.ProcessGroupBraid), (what, type(b))
    assert b.parent is not None, f"{what}: not a braid subgroup of the default group"
    rank = dist.get_rank()
    assert (b.comm.rank, b.comm.size) == (members.index(rank), len(members)), \
        (what, b.comm.rank, b.comm.size, members)
    t = torch.full((33,), float(rank + 1))
    dist.all_reduce(t, group=pg)
    assert torch.all(t == sum(m + 1 for m in members)), (what, t[:3])


def check_groups():
    from torch.distributed.device_mesh import init_device_mesh
    dist.init_process_group("braid")
    rank, p = dist.get_rank(), dist.get_world_size()
    members = list(range(p))[::-1]
    _check_subgroup(dist.new_group(members), sorted(members), "new_group")
    rows = 2 if p % 2 == 0 else 1
    cols = p // rows
    mesh = init_device_mesh("cpu", (rows, cols), mesh_dim_names=("dp", "tp"))
    # init_device_mesh lays the ranks out row-major: tp runs along this rank's row, dp down its
    # column.
    lines = {"tp": [rank // cols * cols + j for j in range(cols)],
             "dp": [i * cols + rank % cols for i in range(rows)]}
    for dim, line in lines.items():
        _check_subgroup(mesh.get_group(dim), line, f"mesh dimension {dim}")
    if hasattr(dist, "split_group"):
        halves = [list(range(0, p, 2)), list(range(1, p, 2))]
        g = dist.split_group(split_ranks=[h for h in halves if h])
        if g is not None:
            _check_subgroup(g, [h for h in halves if rank in h][0], "split_group")
    say("braid subgroups (new_group, DeviceMesh, split_group) OK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", required=True, choices=["devmap", "fsdp2", "dtensor", "compile",
                                                           "groups"])
    a = ap.parse_args()
    if int(torch.__version__.split(".")[0]) < 2:
        print(f"SKIP: torch {torch.__version__} (torch 2.x checks)")
        return 77
    torch.set_num_threads(1)
    {"devmap": check_devmap, "fsdp2": check_fsdp2, "dtensor": check_dtensor,
     "compile": check_compile, "groups": check_groups}[a.check]()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
