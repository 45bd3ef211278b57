"""The Python API on 3 ranks: every collective on torch tensors, numpy arrays and a DLPack
producer, async work, a subgroup made by its members alone, the Bucketer driven by hand (copy
mode), and the comm hook with each codec (the result is close to the exact average; "none" is
exact).
"""

import numpy as np
import torch

import braid
import braid.torch


def check_collectives(comm, rank, world):
    for dt in (torch.float32, torch.float64, torch.int32, torch.int64, torch.float16,
               torch.bfloat16, torch.uint8):
        n = 37
        x = (torch.arange(n) % 5 + rank).to(dt)
        want = sum((torch.arange(n) % 5 + r).to(torch.float64) for r in range(world))
        got = comm.all_reduce(x.clone())
        assert torch.equal(got.to(torch.float64), want), (dt, got, want)
        mx = comm.all_reduce(x.clone(), op="max")
        assert torch.equal(mx.to(torch.float64), (torch.arange(n) % 5 + world - 1).double()), dt
    # Out of place, reduce-scatter, all-gather, broadcast, reduce, all-to-all.
    x = torch.full((6,), float(rank + 1))
    out = torch.empty(6)
    comm.all_reduce(x, out=out, op="avg")
    assert torch.allclose(out, torch.full((6,), (world + 1) / 2)), out
    big = torch.arange(world * 4, dtype=torch.float32) * (rank + 1)
    rs = comm.reduce_scatter(big, torch.empty(4))
    tot = sum(range(1, world + 1))
    assert torch.equal(rs, torch.arange(rank * 4, rank * 4 + 4, dtype=torch.float32) * tot), rs
    ag = comm.all_gather(torch.full((3,), float(rank)), torch.empty(3 * world))
    assert torch.equal(ag, torch.arange(world).float().repeat_interleave(3)), ag
    b = comm.broadcast(torch.full((5,), float(rank)), root=world - 1)
    assert torch.equal(b, torch.full((5,), float(world - 1)))
    r = comm.reduce(torch.ones(4), root=0)
    if rank == 0:
        assert torch.equal(r, torch.full((4,), float(world)))
    a2a = comm.all_to_all(torch.arange(world, dtype=torch.int64) + 10 * rank,
                          torch.empty(world, dtype=torch.int64))
    assert torch.equal(a2a, torch.arange(world) * 10 + rank), a2a
    # Async, with several in flight; numpy and DLPack inputs.
    works = [comm.all_reduce(torch.full((1000,), float(i)), async_op=True) for i in range(4)]
    for i, w in enumerate(works):
        assert torch.equal(w.wait(), torch.full((1000,), float(i * world)))
    a = np.full(7, rank, dtype=np.int32)
    comm.all_reduce(a)
    assert (a == sum(range(world))).all()
    d = torch.full((9,), 2.0)
    comm.all_reduce(_DLPackOnly(d))  # reduced in place through the DLPack import
    assert torch.equal(d, torch.full((9,), 2.0 * world)), d
    comm.barrier()


class _DLPackOnly:
    """An object that offers nothing but the DLPack protocol."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def check_bucketer(comm, rank, world):
    b = braid.Bucketer(comm, bucket_cap_mb=0.0002, first_bucket_cap_mb=0.0001, average=False)
    shapes = [(16, 8), (8,), (30,), (5, 5)]
    for i, s in enumerate(shapes):
        b.register(i, s, name=f"p{i}")
    b.finalize()
    assert b.bucket_count >= 2, b.bucket_layout()
    for step in range(3):
        grads = [torch.full(s, float(rank + step)) for s in shapes]
        b.begin_step()
        for i in reversed(range(len(shapes))):
            b.mark_ready(i, grads[i])
        m = b.finish_step()
        want = float(sum(r + step for r in range(world)))
        for g in grads:
            assert torch.equal(g, torch.full_like(g, want)), (step, g)
        assert m.communicated and m.bytes == sum(g.numel() * 4 for g in grads), braid.metrics_dict(m)
    d = braid.metrics_dict(m)
    assert d["buckets"] and d["step_ms"] >= 0 and 0 <= d["eta"] <= 1, d
    b.close()


def check_hook_codecs(comm, rank, world):
    codecs = ["none"] + ([c for c in braid.CODECS if c != "none"] if braid.HAVE_CODECS else [])
    for codec in codecs:
        hook = braid.torch.ddp_hook(comm, codec=codec)
        g = torch.Generator().manual_seed(rank)
        grads = [torch.randn(64, 32, generator=g), torch.randn(32, generator=g)]
        flat = torch.cat([x.flatten() for x in grads])
        want = flat.clone()
        comm.all_reduce(want, op="avg")
        for step in range(2):
            buf = flat.clone()
            fut = hook(None, _Bucket(buf, grads, last=True))
            res = fut.wait()
        m = hook.metrics()
        err = ((res - want).norm() / want.norm()).item()
        limit = {"none": 0.0, "fp16": 1e-3, "bf16": 1e-2}.get(codec, 1.5)
        assert err <= limit, (codec, err)
        assert m["buckets"] == 1 and m["codec"] == codec, m
        if codec in ("fp16", "bf16", "topk", "int8", "sign"):
            assert m["wire_bytes"] < m["bytes"], (codec, m)
        if rank == 0:
            print(f"hook codec {codec:>8}: relative error {err:.2e}, wire {m['wire_bytes']} of "
                  f"{m['bytes']} bytes", flush=True)
        hook.close()


class _Bucket:
    def __init__(self, buf, grads, last):
        self.buf, self.grads, self.last = buf, grads, last

    def buffer(self):
        return self.buf

    def index(self):
        return 0

    def is_last(self):
        return self.last

    def gradients(self):
        return self.grads


def check_subgroup(comm, rank, world):
    """subgroup: made by the listed ranks alone (the last rank stays out when there are more
    than two), ranked in list order; a list without the caller is InvalidUsageError at once."""
    members = list(range(world - 1 if world > 2 else world))[::-1]
    try:
        comm.subgroup([(rank + 1) % world] if world > 1 else [1])
        raise AssertionError("subgroup without the caller did not raise")
    except (braid.InvalidUsageError, braid.InvalidArgumentError) as e:
        assert f"rank {rank}" in str(e), str(e)
    if rank in members:
        with comm.subgroup(members) as sub:
            assert (sub.rank, sub.size) == (members.index(rank), len(members)), (sub.rank, sub.size)
            x = np.full(100, rank + 1, dtype=np.float64)
            sub.all_reduce(x)
            assert np.all(x == sum(m + 1 for m in members)), x[:4]
    comm.barrier()


def worker(rank, world):
    comm = braid.init()
    assert (comm.rank, comm.size) == (rank, world), (comm.rank, comm.size)
    check_collectives(comm, rank, world)
    check_subgroup(comm, rank, world)
    check_bucketer(comm, rank, world)
    check_hook_codecs(comm, rank, world)
    comm.close()
    return 0
