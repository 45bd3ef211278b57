"""The torch.distributed backend "braid" against gloo, one torchrun worker per rank.

    torchrun --nproc_per_node N backend_worker.py --suite ops|ddp|dp|store

ops:   every operation on braid (the default group) and on a gloo group of the same ranks, with
       the same inputs: bit-identical for integers, for min/max/broadcast/gathers/all-to-all and
       for float sums of exactly representable values (any summation order gives the same
       bits); random float sums within |braid - gloo| <= 8 * p * eps * sum|x|. Also a braid
       subgroup (new_group) against a gloo subgroup, Work semantics (issue order,
       wait(timeout), futures), and clear errors for bad tensors.
ddp:   DistributedDataParallel over braid vs over gloo (no comm hook): parameters AND buffers
       bit-identical after N steps (plain, no_sync, find_unused_parameters, static_graph).
dp:    braid.torch.DataParallel vs DDP over gloo: parameters and BatchNorm buffers
       bit-identical on every rank.
store: init_process_group("braid", store=TCPStore|FileStore, rank, world_size) and a
       one-rank HashStore group.

Every rank prints "rank R: <suite> OK" at the end; any mismatch raises (exit 1).
"""

import argparse
import datetime
import faulthandler
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import braid
import braid.torch as bt

R = dist.ReduceOp
CHECKS = [0]


def say(msg):
    print(f"rank {dist.get_rank()}: {msg}", flush=True)


def same(a, b, what):
    CHECKS[0] += 1
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{what}: {len(a)} vs {len(b)} tensors"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{what}[{i}]")
        return
    if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
        diff = (a.double() - b.double()).abs().max().item() if a.shape == b.shape else "shape"
        raise AssertionError(f"rank {dist.get_rank()}: {what}: braid != gloo (max |diff| "
                             f"{diff})\n braid {a.flatten()[:8]}\n gloo  {b.flatten()[:8]}")


def close(a, b, bound, what):
    CHECKS[0] += 1
    d = (a.double() - b.double()).abs().max().item()
    assert d <= bound, f"rank {dist.get_rank()}: {what}: |braid - gloo| = {d} > {bound}"


def inputs(dtype, n, rank, exact=True, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + 17 * n + salt)
    if dtype in (torch.int8, torch.uint8):
        return torch.randint(0, 5, (n,), generator=g).to(dtype)
    if dtype in (torch.int32, torch.int64):
        return torch.randint(-1000, 1000, (n,), generator=g).to(dtype)
    if exact:  # multiples of 1/8 in [-4, 4]: exact in every float type and in any sum order
        return (torch.randint(-32, 33, (n,), generator=g).double() / 8).to(dtype)
    return torch.randn(n, generator=g, dtype=torch.float64).to(dtype)


def both(fn, gloo, braid_group=None):
    """Runs fn(group) on braid and gloo; returns (braid result, gloo result)."""
    return fn(braid_group), fn(gloo)


def suite_ops(gloo, args):
    rank, p = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() in ("braid", "BRAID"), dist.get_backend()
    pg = dist.distributed_c10d._get_default_group()
    assert isinstance(pg, bt.ProcessGroupBraid), type(pg)
    counts = [0, 1, 7, 1000, 65537]
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.uint8, torch.int32, torch.int64]

    # all_reduce: every op and dtype.
    for dtype in dtypes:
        for n in counts:
            ops = [R.SUM, R.MIN, R.MAX]
            if n <= 7 and dtype not in (torch.float16, torch.bfloat16):
                ops.append(R.PRODUCT)  # exact: at most 4 factors of 6 significant bits
            if dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
                ops += [R.BAND, R.BOR, R.BXOR]
            for op in ops:
                x = inputs(dtype, n, rank)
                a, b = x.clone(), x.clone()
                dist.all_reduce(a)  if op == R.SUM else dist.all_reduce(a, op=op)
                try:
                    dist.all_reduce(b, op=op, group=gloo)
                except RuntimeError as e:  # gloo lacks some dtypes (bfloat16): local reference
                    if "Unsupported" not in str(e) and "not supported" not in str(e) and \
                            "Invalid" not in str(e):
                        raise
                    b = reference_reduce(dtype, n, p, op)
                same(a, b, f"all_reduce({dtype}, n={n}, {op})")
        # random floats: a stated bound
        if dtype.is_floating_point and dtype != torch.bfloat16:
            x = inputs(dtype, 4099, rank, exact=False)
            a, b = x.clone(), x.clone()
            dist.all_reduce(a)
            dist.all_reduce(b, group=gloo)
            absum = x.double().abs()
            dist.all_reduce(absum, group=gloo)
            eps = torch.finfo(dtype).eps
            close(a, b, 8 * p * eps * absum.max().item(), f"all_reduce random {dtype}")
            if p in (2,):
                same(a, b, f"all_reduce random {dtype} at 2 ranks (a + b = b + a)")
    # AVG: gloo on 1.13 has none; braid's average vs gloo's sum / p.
    if hasattr(R, "AVG"):
        x = inputs(torch.float32, 1001, rank, exact=False)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a, op=R.AVG)
        dist.all_reduce(b, group=gloo)
        close(a, b / p, 4 * p * torch.finfo(torch.float32).eps * b.abs().max().item(),
              "all_reduce AVG vs gloo SUM / p")
    say("all_reduce OK")

    # broadcast, reduce
    for root in sorted({0, p - 1}):
        for dtype in (torch.float32, torch.int64, torch.uint8):
            x = inputs(dtype, 1031, rank)
            a, b = x.clone(), x.clone()
            dist.broadcast(a, root)
            dist.broadcast(b, root, group=gloo)
            same(a, b, f"broadcast(root={root}, {dtype})")
            for op in (R.SUM, R.MAX):
                a, b = x.clone(), x.clone()
                dist.reduce(a, root, op=op)
                dist.reduce(b, root, op=op, group=gloo)
                if rank == root:
                    same(a, b, f"reduce(root={root}, {dtype}, {op})")
                else:
                    same(a, x, f"reduce(root={root}) leaves a non-root's tensor as it was")
    say("broadcast/reduce OK")

    # all_gather (list, into tensor, coalesced), object collectives
    for dtype in (torch.float32, torch.int32, torch.float16):
        # n = 0: braid only (Debian's gloo divides by zero on an empty all-gather: SIGFPE)
        e = [torch.ones(0, dtype=dtype) for _ in range(p)]
        dist.all_gather(e, torch.empty(0, dtype=dtype))
        dist.all_gather_into_tensor(torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype))
        for n in (1, 999):
            x = inputs(dtype, n, rank).reshape(-1, 1)
            la = [torch.empty_like(x) for _ in range(p)]
            lb = [torch.empty_like(x) for _ in range(p)]
            dist.all_gather(la, x)
            dist.all_gather(lb, x, group=gloo)
            same(la, lb, f"all_gather({dtype}, n={n})")
            ta = torch.empty((p * x.numel(),), dtype=dtype)
            dist.all_gather_into_tensor(ta, x.reshape(-1))
            # gloo 1.13 has no _allgather_base: its list all_gather, concatenated
            same(ta, torch.cat([t.reshape(-1) for t in lb]), f"all_gather_into_tensor({dtype}, "
                 f"n={n}) vs gloo's all_gather")
    ins = [inputs(torch.float32, 5, rank), inputs(torch.float32, 3, rank, salt=1)]
    oa = [[torch.empty_like(t) for t in ins] for _ in range(p)]
    ob = [[torch.empty_like(t) for t in ins] for _ in range(p)]
    dist.all_gather_coalesced(oa, ins)
    dist.all_gather_coalesced(ob, ins, group=gloo)
    same([t for l in oa for t in l], [t for l in ob for t in l], "all_gather_coalesced")
    obj = {"rank": rank, "text": "x" * (rank * 7), "list": list(range(rank))}
    ga, gb = [None] * p, [None] * p
    dist.all_gather_object(ga, obj)
    dist.all_gather_object(gb, obj, group=gloo)
    assert ga == gb and ga[p - 1]["rank"] == p - 1, (ga, gb)
    la = [obj, rank] if True else None
    lb = list(la)
    dist.broadcast_object_list(la, src=p - 1)
    dist.broadcast_object_list(lb, src=p - 1, group=gloo)
    assert la == lb and la[1] == p - 1, (la, lb)
    CHECKS[0] += 2
    say("all_gather/objects OK")

    # reduce_scatter (gloo 1.13 has none: gloo's all_reduce, sliced, is the reference)
    for dtype in (torch.float32, torch.int64):
        for n in (1, 257):
            full = inputs(dtype, n * p, rank)
            ref = full.clone()
            dist.all_reduce(ref, group=gloo)
            mine = ref[rank * n:(rank + 1) * n]
            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter(out, list(full.chunk(p)))
            same(out, mine, f"reduce_scatter list({dtype}, n={n})")
            out2 = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(out2, full)
            same(out2, mine, f"reduce_scatter_tensor({dtype}, n={n})")
            if dtype == torch.int64:
                refx = full.clone()
                dist.all_reduce(refx, op=R.BXOR, group=gloo)
                out3 = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out3, full, op=R.BXOR)
                same(out3, refx[rank * n:(rank + 1) * n], "reduce_scatter_tensor BXOR")
    say("reduce_scatter OK")

    # all_to_all_single (equal and uneven splits), all_to_all (lists)
    for dtype in (torch.float32, torch.int32):
        x = inputs(dtype, 6 * p, rank).reshape(2 * p, 3)
        a, b = torch.empty_like(x), torch.empty_like(x)
        dist.all_to_all_single(a, x)
        dist.all_to_all_single(b, x, group=gloo)
        same(a, b, f"all_to_all_single equal ({dtype})")
        # uneven: rank r sends (r + j) % 3 rows to rank j (some empty blocks)
        ins_s = [(rank + j) % 3 for j in range(p)]
        outs_s = [(i + rank) % 3 for i in range(p)]
        x = inputs(dtype, sum(ins_s) * 2, rank).reshape(-1, 2)
        a = torch.empty((sum(outs_s), 2), dtype=dtype)
        b = torch.empty_like(a)
        dist.all_to_all_single(a, x, outs_s, ins_s)
        dist.all_to_all_single(b, x, outs_s, ins_s, group=gloo)
        same(a, b, f"all_to_all_single uneven ({dtype})")
    ins_l = [inputs(torch.float32, 1 + (rank + j) % 4, rank, salt=j) for j in range(p)]
    outs_a = [torch.empty(1 + (i + rank) % 4) for i in range(p)]
    dist.all_to_all(outs_a, ins_l)
    expect = [inputs(torch.float32, 1 + (i + rank) % 4, i, salt=rank) for i in range(p)]
    try:
        outs_b = [torch.empty(1 + (i + rank) % 4) for i in range(p)]
        dist.all_to_all(outs_b, ins_l, group=gloo)
        same(outs_a, outs_b, "all_to_all lists vs gloo")
    except RuntimeError:  # gloo 1.13 has no list all-to-all: each rank's known inputs
        same(outs_a, expect, "all_to_all lists vs the senders' inputs")
    say("all_to_all OK")

    # gather, scatter
    for root in sorted({0, p - 1}):
        x = inputs(torch.float64, 33, rank)
        la = [torch.empty_like(x) for _ in range(p)] if rank == root else None
        lb = [torch.empty_like(x) for _ in range(p)] if rank == root else None
        dist.gather(x, la, dst=root)
        dist.gather(x, lb, dst=root, group=gloo)
        if rank == root:
            same(la, lb, f"gather(root={root})")
        src = [inputs(torch.int64, 9, rank, salt=j) for j in range(p)] if rank == root else None
        a, b = torch.empty(9, dtype=torch.int64), torch.empty(9, dtype=torch.int64)
        dist.scatter(a, src, src=root)
        dist.scatter(b, src, src=root, group=gloo)
        same(a, b, f"scatter(root={root})")
        # Non-contiguous outputs (the columns of one matrix) and inputs (its rows' strides).
        grid = torch.zeros(33, p, dtype=torch.float64) if rank == root else None
        dist.gather(x, [grid[:, q] for q in range(p)] if rank == root else None, dst=root)
        if rank == root:
            same(list(grid.t()), lb, f"gather(root={root}) into columns")
        cols = torch.stack(src, dim=1) if rank == root else None  # 9 x p: column j is src[j]
        c = torch.empty(9, dtype=torch.int64)
        dist.scatter(c, [cols[:, j] for j in range(p)] if rank == root else None, src=root)
        same(c, b, f"scatter(root={root}) from columns")
    say("gather/scatter OK")

    # send/recv, isend/irecv, batch_isend_irecv (a ring; a swap), barrier
    nxt, prv = (rank + 1) % p, (rank - 1) % p
    x = inputs(torch.float32, 100003, rank)  # large: no eager buffering to hide an order bug
    got = torch.empty_like(x)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, nxt),
                                   dist.P2POp(dist.irecv, got, prv)])
    for q in reqs:
        q.wait()
    same(got, inputs(torch.float32, 100003, prv), "batch_isend_irecv ring")
    if p % 2 == 0:
        peer = rank ^ 1
        got2 = torch.empty_like(x)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, got2, peer),
                                       dist.P2POp(dist.isend, x, peer)])
        for q in reqs:
            q.wait()
        same(got2, inputs(torch.float32, 100003, peer), "batch_isend_irecv swap")
    if rank == 0:
        dist.send(x[:10].clone(), 1)
        w = dist.irecv(got[:10], 1)
        w.wait()
        same(got[:10].clone(), inputs(torch.float32, 100003, 1)[:10], "send/irecv")
    elif rank == 1:
        t = torch.empty(10)
        dist.recv(t, 0)
        same(t, inputs(torch.float32, 100003, 0)[:10], "recv")
        dist.isend(x[:10].clone(), 0).wait()
    # isend before irecv on every rank, outside batch_isend_irecv, 4 MiB (more than any
    # transport buffers): the engine's p2p group posts both; run one after the other, every
    # rank's send would wait for a receive its peer posts only after its own send.
    big = inputs(torch.float32, 1 << 20, rank)
    got3 = torch.empty_like(big)
    reqs = [dist.isend(big, nxt), dist.irecv(got3, prv)]
    for q in reqs:
        q.wait(timeout=datetime.timedelta(seconds=60))
    same(got3, inputs(torch.float32, 1 << 20, prv), "isend/irecv ring, no batch")
    # A p2p Work completes when its own operation has, not when its group ends: rank 0 waits
    # for its isend (while its irecv is in the same group) before it tells rank 1 (over gloo)
    # to send what that irecv expects.
    if rank in (0, 1):
        flag = torch.zeros(1)
        if rank == 0:
            t = torch.empty(7)
            w1, w2 = dist.isend(big, 1), dist.irecv(t, 1)
            w1.wait(timeout=datetime.timedelta(seconds=60))
            dist.send(flag, 1, group=gloo)
            w2.wait(timeout=datetime.timedelta(seconds=60))
            same(t, inputs(torch.float32, 7, 1), "isend completes before its group")
        else:
            time.sleep(0.5)  # rank 0's irecv joins the group while its isend waits for us
            dist.recv(got3, 0)
            dist.recv(flag, 0, group=gloo)
            dist.send(inputs(torch.float32, 7, 1), 0)
            same(got3, inputs(torch.float32, 1 << 20, 0), "recv before a gloo hand-off")
    dist.barrier()
    say("p2p/barrier OK")

    work_semantics(rank, p, gloo)
    subgroups(rank, p)
    bad_input(rank, p)


def reference_reduce(dtype, n, p, op):
    xs = [inputs(dtype, n, r) for r in range(p)]
    acc = xs[0].clone()
    for x in xs[1:]:
        if op == R.SUM:
            acc = acc + x
        elif op == R.PRODUCT:
            acc = acc * x
        elif op == R.MIN:
            acc = torch.minimum(acc, x)
        elif op == R.MAX:
            acc = torch.maximum(acc, x)
    return acc.to(dtype)


def work_semantics(rank, p, gloo):
    # Issue order and async: 20 all-reduces in flight, waited for in reverse.
    ts = [torch.full((1000,), float(rank + i)) for i in range(20)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    assert all(isinstance(w, bt.BraidWork) for w in works), type(works[0])
    for i in reversed(range(20)):
        assert works[i].wait(datetime.timedelta(seconds=60))
        assert works[i].is_completed() and works[i].is_success() and works[i].exception() is None
        same(ts[i], torch.full((1000,), float(sum(r + i for r in range(p)))), f"async #{i}")
    f = dist.all_reduce(torch.ones(3), async_op=True).get_future()
    assert isinstance(f, torch.futures.Future)
    v = f.wait()
    same(v[0], torch.full((3,), float(p)), "get_future value")
    chained = dist.all_reduce(torch.ones(2), async_op=True).get_future().then(
        lambda fut: fut.value()[0] * 2)
    same(chained.wait(), torch.full((2,), 2.0 * p), "future.then")
    # wait(timeout) that passes first: rank 1 sends 1.5 s late.
    if rank == 0:
        t = torch.empty(4)
        w = dist.irecv(t, 1)
        t0 = time.monotonic()
        try:
            w.wait(datetime.timedelta(milliseconds=200))
            raise AssertionError("wait(200 ms) returned before the late send")
        except braid.BraidTimeoutError as e:
            assert "rank 0" in str(e) and "recv" in str(e), str(e)
            assert time.monotonic() - t0 < 1.0, "wait(timeout) overran"
        assert not w.is_completed()
        assert w.wait()
        same(t, torch.arange(4.0), "recv after a timed-out wait")
    elif rank == 1:
        time.sleep(1.5)
        dist.send(torch.arange(4.0), 0)
    dist.barrier()
    CHECKS[0] += 6
    say("work semantics OK")


def subgroups(rank, p):
    ranks = list(range(1, p)) if p > 2 else [0, 1]
    sb = dist.new_group(ranks)  # the default backend: braid
    sg = dist.new_group(ranks, backend="gloo")
    if rank in ranks:
        assert isinstance(sb, bt.ProcessGroupBraid), type(sb)
        # A braid subgroup of the default braid group, not a communicator of its own.
        assert sb.parent is dist.distributed_c10d._get_default_group(), sb.parent
        assert sb.comm.size == len(ranks) and sb.comm.rank == ranks.index(rank), \
            (sb.comm.rank, sb.comm.size)
        x = inputs(torch.float32, 517, rank)
        a, b = x.clone(), x.clone()
        dist.all_reduce(a, group=sb)
        dist.all_reduce(b, group=sg)
        same(a, b, "subgroup all_reduce")
        root = ranks[-1]
        a, b = x.clone(), x.clone()
        dist.broadcast(a, root, group=sb)
        dist.broadcast(b, root, group=sg)
        same(a, b, "subgroup broadcast (global root rank)")
        la = [torch.empty_like(x) for _ in ranks]
        lb = [torch.empty_like(x) for _ in ranks]
        dist.all_gather(la, x, group=sb)
        dist.all_gather(lb, x, group=sg)
        same(la, lb, "subgroup all_gather")
    dist.barrier()
    say("subgroups OK")


def bad_input(rank, p):
    def expect(fn, words):
        try:
            fn()
        except ValueError as e:
            msg = str(e)
            assert all(w in msg for w in words) and f"rank {rank}" in msg, msg
            CHECKS[0] += 1
            return
        raise AssertionError(f"no error for {words}")

    expect(lambda: dist.all_reduce(torch.ones(4, 4).t()), ["contiguous"])
    expect(lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool)), ["torch.bool"])
    expect(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)), ["torch.int16"])
    # (complex tensors reach the backend as their real view: torch.view_as_real, supported)
    expect(lambda: dist.all_reduce(torch.ones(3), op=R.BAND), ["BAND", "integer"])
    expect(lambda: dist.all_reduce(torch.ones(2).to_sparse()), ["sparse"])
    expect(lambda: dist.all_reduce(torch.ones(3, device="meta")),
           ["is on meta", "cpu:braid,cuda:nccl"])
    # CUDA tensors (none here) go to NCCL only under a device map that names it (torch 2.x).
    pg = dist.distributed_c10d._get_default_group()
    if not isinstance(pg, braid.torch.backend.ProcessGroupBraid):
        pg = pg._get_backend(torch.device("cpu"))
    expect(lambda: pg._cuda_pg("all_reduce"), ["maps no device to NCCL", "cpu:braid,cuda:nccl"])
    # A count mismatch across ranks fails (naming the ranks) instead of hanging: on a
    # separate braid group, since a failed communicator stays failed.
    g = dist.new_group(list(range(p)), backend="braid")
    t = torch.ones(10 + rank)
    try:
        dist.all_reduce(t, group=g)
        raise AssertionError("mismatched counts did not fail")
    except braid.BraidError as e:
        assert "rank" in str(e), str(e)
        CHECKS[0] += 1
    say("bad input OK")


# -- DDP --
class Net(torch.nn.Module):
    """A small CNN with BatchNorm and an embedding, plus a branch used only on some steps."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.emb = torch.nn.Embedding(10, 4)
        self.fc = torch.nn.Linear(4 * 8 * 8 + 4, 10)
        self.side = torch.nn.Linear(10, 10)

    def forward(self, x, idx, use_side=False):
        h = torch.relu(self.bn(self.conv(x))).flatten(1)
        h = torch.cat([h, self.emb(idx)], 1)
        out = self.fc(h)
        return self.side(out) if use_side else out


def data(rank, step):
    g = torch.Generator().manual_seed(100 * rank + step)
    return (torch.randn(4, 1, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g),
            torch.randint(0, 10, (4,), generator=g))


def train(model, steps, rank, variant):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for s in range(steps):
        x, idx, y = data(rank, s)
        use_side = s % 2 == 0 if variant == "unused" else True
        if variant == "no_sync" and s % 3 != 2:
            with model.no_sync():
                torch.nn.functional.cross_entropy(model(x, idx, use_side), y).backward()
            continue
        loss = torch.nn.functional.cross_entropy(model(x, idx, use_side), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return model


def state(m):
    m = getattr(m, "module", m)
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def compare_states(a, b, what):
    assert a.keys() == b.keys()
    for k in a:
        same(a[k], b[k], f"{what}: {k}")


def suite_ddp(gloo, args):
    rank = dist.get_rank()
    braid_pg = dist.distributed_c10d._get_default_group()
    DDP = torch.nn.parallel.DistributedDataParallel
    for variant in args.variants.split(","):
        torch.manual_seed(1234 + rank)  # different on purpose: DDP broadcasts rank 0's state
        base = Net()
        ma, mb = Net(), Net()
        ma.load_state_dict(base.state_dict())
        mb.load_state_dict(base.state_dict())
        kw = {}
        if variant == "unused":
            kw["find_unused_parameters"] = True
        if variant == "static":
            kw["static_graph"] = True
        da = DDP(ma, process_group=braid_pg, **kw)
        db = DDP(mb, process_group=gloo, **kw)
        train(da, args.steps, rank, variant)
        train(db, args.steps, rank, variant)
        sa, sb = state(da), state(db)
        compare_states(sa, sb, f"DDP {variant}")
        assert sb["bn.num_batches_tracked"].item() > 0
        say(f"DDP {variant}: parameters and buffers bit-identical to gloo after {args.steps} "
            "steps")


def suite_dp(gloo, args):
    rank = dist.get_rank()
    DDP = torch.nn.parallel.DistributedDataParallel
    torch.manual_seed(99 + rank)
    base = Net()
    ma, mb = Net(), Net()
    ma.load_state_dict(base.state_dict())
    mb.load_state_dict(base.state_dict())
    dp = bt.DataParallel(ma)
    db = DDP(mb, process_group=gloo)
    train(dp, args.steps, rank, "plain")
    train(db, args.steps, rank, "plain")
    sa, sb = state(dp), state(db)
    compare_states(sa, sb, "DataParallel vs DDP")
    # Each training forward updates the statistics locally after the broadcast, so ranks differ
    # now (under DDP too); the next forward (eval, no grad: no update) first broadcasts rank
    # 0's buffers, after which every rank holds rank 0's statistics, with DataParallel as DDP.
    x, idx, _ = data(rank, 999)
    for m in (dp, db):
        m.eval()
        with torch.no_grad():
            m(x, idx, True)
    sa, sb = state(dp), state(db)
    compare_states(sa, sb, "DataParallel vs DDP after an eval forward")
    for k in ("bn.running_mean", "bn.running_var", "bn.num_batches_tracked"):
        r0 = sa[k].clone()
        dist.broadcast(r0, 0, group=gloo)
        same(sa[k], r0, f"rank 0's {k} on every rank")
    dp.close()
    say(f"DataParallel: parameters and buffers bit-identical to DDP over gloo after "
        f"{args.steps} steps")


def suite_store(args):
    """Not under the default env:// group: explicit stores."""
    rank, p = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    kind = args.store
    if kind == "tcp":
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 2,
                              p, rank == 0, timeout=datetime.timedelta(seconds=30))
    elif kind == "file":
        store = dist.FileStore(args.file, p)
    else:
        raise SystemExit(f"unknown store {kind}")
    dist.init_process_group("braid", store=store, rank=rank, world_size=p,
                            timeout=datetime.timedelta(seconds=20))
    assert dist.distributed_c10d._get_default_group().comm.timeout_ms == 20000
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    same(t, torch.full((5,), float(p * (p + 1) // 2)), f"all_reduce over a {kind} store")
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: store {kind} OK", flush=True)


def hash_store():
    dist.init_process_group("braid", store=dist.HashStore(), rank=0, world_size=1)
    t = torch.arange(5.0)
    dist.all_reduce(t)
    same(t, torch.arange(5.0), "one-rank all_reduce over a HashStore")
    dist.destroy_process_group()
    print("rank 0: store hash OK", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", required=True, choices=["ops", "ddp", "dp", "store", "hash"])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--variants", default="plain,no_sync,unused,static")
    ap.add_argument("--store", default="tcp")
    ap.add_argument("--file", default="")
    ap.add_argument("--limit", type=float, default=360,
                    help="seconds before every thread's stack is printed and the rank exits")
    args = ap.parse_args()
    faulthandler.dump_traceback_later(args.limit, exit=True)
    torch.set_num_threads(1)
    if args.suite == "store":
        suite_store(args)
        return 0
    if args.suite == "hash":
        hash_store()
        return 0
    dist.init_process_group("braid", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    {"ops": suite_ops, "ddp": suite_ddp, "dp": suite_dp}[args.suite](gloo, args)
    dist.barrier(group=gloo)
    say(f"{args.suite} OK ({CHECKS[0]} checks)")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
