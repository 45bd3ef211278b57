"""braid as a torch.distributed backend: ``init_process_group("braid")``.

    import braid.torch                       # registers the backend "braid"
    dist.init_process_group("braid")         # env:// (torchrun), or store=, rank=, world_size=
    dist.all_reduce(t); ddp = DistributedDataParallel(model)    # unchanged torch code

A :class:`ProcessGroupBraid` rendezvouses through the store torch hands it (no second port),
with torch's ``timeout`` as the deadline of every braid wait, and owns one braid communicator
and one engine thread (braid._braid.GroupEngine) that runs the group's operations in issue
order, asynchronously: each method checks its tensors on the caller's thread, queues one job
and returns a Work at once (see braid.torch._work).

Operations map onto braid's collectives; where torch asks for more than braid has, the job
composes it (each rank must issue the same operations in the same order, as with every
backend):

=====================================  ==================================================
torch                                   braid
=====================================  ==================================================
all_reduce SUM/AVG/PRODUCT/MIN/MAX      all-reduce
all_reduce BAND/BOR/BXOR (integers)     all-gather, then the bitwise reduction locally
broadcast, reduce, barrier              broadcast, reduce, barrier
all_gather(_into_tensor), coalesced     all-gather (lists through one scratch buffer)
reduce_scatter(_tensor)                 reduce-scatter (lists packed into one buffer)
all_to_all(_single) with split sizes    the largest block agreed by an all-reduce(MAX),
                                        then one all-to-all of blocks padded to it
gather / scatter                        sends to / from the root, as one p2p group
send/recv, isend/irecv                  one p2p group with the p2p operations queued beside
                                        them (tags are not matched; issue order per peer)
batch_isend_irecv                       one p2p group (all posted at once)
=====================================  ==================================================

Tensors must be dense, contiguous CPU tensors of a dtype braid carries (int8, uint8, int32,
int64, float16, bfloat16, float32, float64); anything else raises braid.InvalidArgumentError
(a ValueError) naming the rank, the operation and what to do.
"""

import datetime
import os
import sys
import weakref

import torch
import torch.distributed as dist

import braid
from .. import _braid
from .. import errors as _errors
from .._tensors import torch_dtypes
from ._work import BraidWork

_C = torch._C._distributed_c10d
_live_groups = weakref.WeakSet()  # closed before their communicators at exit (braid._close_all)

# braid::Collective values (include/braid/comm.hpp): the step kinds of the engine.
ALLREDUCE, REDUCE_SCATTER, ALLGATHER, BROADCAST, REDUCE, ALLTOALL, BARRIER, SEND, RECV = range(9)

_RO = dist.ReduceOp
_BRAID_OPS = [(_RO.SUM, braid.ReduceOp.sum), (_RO.PRODUCT, braid.ReduceOp.prod),
              (_RO.MIN, braid.ReduceOp.min), (_RO.MAX, braid.ReduceOp.max)]
if hasattr(_RO, "AVG"):
    _BRAID_OPS.append((_RO.AVG, braid.ReduceOp.avg))
_BITWISE = [(_RO.BAND, "band", torch.bitwise_and), (_RO.BOR, "bor", torch.bitwise_or),
            (_RO.BXOR, "bxor", torch.bitwise_xor)]
_INTEGER = (torch.int8, torch.uint8, torch.int32, torch.int64)

# Frames of torch's Python API (dist.*): their callers get BraidWork; any other torch frame
# calling a method means C++ is the caller (DDP, autograd), which needs torch's own Work.
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_PY_API = {os.path.abspath(dist.distributed_c10d.__file__)}
_THIS_FILE = (lambda: None).__code__.co_filename


def _reduce_op(opts):
    """The reduce op of an options object (AllreduceOptions, ...), a ReduceOp, or SUM."""
    if opts is None:
        return _RO.SUM
    return getattr(opts, "reduceOp", opts)


def _copy_blocks_out(scratch, outs, n):
    """A completion step: block i (n elements) of an all-gather's scratch into outs[i]."""
    for i, o in enumerate(outs):
        o.copy_(scratch[i * n:(i + 1) * n].view_as(o))
    return
    yield


def _py_caller():
    """Whether the process group's method was called from Python (torch's dist.* API or user
    code) rather than from torch's C++ (DDP's reducer, autograd): the first frame outside this
    module decides; none at all means a C++ thread."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename == _THIS_FILE:
        f = f.f_back
    if f is None:
        return False
    path = os.path.abspath(f.f_code.co_filename)
    return path in _PY_API or not path.startswith(_TORCH_DIR)


class ProcessGroupBraid(dist.ProcessGroup):
    """A torch.distributed process group over a braid communicator."""

    def __init__(self, store, rank, size, timeout=datetime.timedelta(minutes=30),
                 transport="", global_ranks=None):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._timeout = timeout if isinstance(timeout, datetime.timedelta) else \
            datetime.timedelta(seconds=float(timeout))
        ms = max(1, int(self._timeout.total_seconds() * 1000))
        # A group made after a braid default group (new_group, split_group, a DeviceMesh
        # dimension) is a braid subgroup of it: created by its members alone (torch calls the
        # backend on members only), on the default group's store, secret and calibrated model.
        self.parent = None if transport else _default_braid_group()
        if self.parent is not None:
            if global_ranks is None:
                global_ranks = _global_ranks(store, rank, size)
            self.comm = self.parent.comm.subgroup(list(global_ranks), timeout_ms=ms)
        else:
            # The default group (or one beside a non-braid default): torch hands each group
            # its own PrefixStore (the group's name), and braid's keys live under "braid/" in
            # it, the same on every member whatever other communicators each process created.
            self.comm = braid.Communicator.from_store(store, rank, size, transport=transport,
                                                      timeout_ms=ms, key_prefix="braid/")
        self._engine = _braid.GroupEngine(self.comm.handle)
        _live_groups.add(self)
        self._batch = None  # p2p operations between _start_coalescing and _end_coalescing
        self._store = store
        self._cuda = None  # torch 2.x, "cpu:braid,cuda:nccl": NCCL for CUDA tensors (_cuda_pg)

    # -- identity --
    def getBackendName(self):
        return "braid"

    _get_backend_name = getBackendName

    def name(self):
        return "braid"

    def __repr__(self):
        return f"<ProcessGroupBraid rank {self._rank} of {self._size}>"

    def _wait_limit_s(self):
        # Every queued operation is bounded by the timeout; a failed communicator fails the
        # rest at once. The margin covers the queue ahead of this operation.
        return self._timeout.total_seconds() * 2 + 30

    # -- argument checks --
    def _err(self, what):
        return _errors.make(_errors.InvalidArgumentError, f"braid backend: {what}", self._rank)

    def _check(self, t, op, what="tensor"):
        if not isinstance(t, torch.Tensor):
            raise self._err(f"{op}: {what} is a {type(t).__name__}, not a torch.Tensor")
        if t.layout != torch.strided:
            raise self._err(f"{op}: {what} is {t.layout}; braid reduces dense tensors only")
        if t.device.type != "cpu":
            raise self._err(f"{op}: {what} is on {t.device}; the braid backend takes CPU "
                            "tensors (CUDA ones go to NCCL when the group is made with "
                            "backend=\"cpu:braid,cuda:nccl\" on torch 2.x)")
        if not t.is_contiguous():
            raise self._err(f"{op}: {what} is not contiguous; call .contiguous() first")
        dt = torch_dtypes().get(t.dtype)
        if dt is None:
            raise self._err(f"{op}: {what} has dtype {t.dtype}, which braid does not carry "
                            "(int8, uint8, int32, int64, float16, bfloat16, float32, float64)")
        return dt

    def _one(self, tensors, op, what="tensor"):
        if len(tensors) != 1:
            raise self._err(f"{op}: expected one {what} per call, got {len(tensors)}")
        return tensors[0]

    def _same(self, ts, op, ref):
        for i, t in enumerate(ts):
            self._check(t, op, f"tensor {i}")
            if t.dtype != ref.dtype:
                raise self._err(f"{op}: tensor {i} has dtype {t.dtype}, expected {ref.dtype}")

    def _root(self, root, op):
        if not 0 <= root < self._size:
            raise self._err(f"{op}: root {root} is not a rank of this group of {self._size}")
        return root

    def _peer(self, peer, op):
        if not 0 <= peer < self._size or peer == self._rank:
            raise self._err(f"{op}: peer {peer} is not another rank of this group of "
                            f"{self._size}")
        return peer

    def _op(self, op, dtype, opname):
        for t, b in _BRAID_OPS:
            if op == t:
                return b, None
        for t, name, fn in _BITWISE:
            if op == t:
                if dtype not in _INTEGER:
                    raise self._err(f"{opname}: ReduceOp.{name.upper()} needs an integer "
                                    f"tensor, not {dtype}")
                return None, fn
        raise self._err(f"{opname}: reduce op {op} is not supported (SUM, AVG, PRODUCT, MIN, "
                        "MAX; BAND/BOR/BXOR on integers)")

    # -- submission --
    def _submit(self, name, steps, more, outputs, keep):
        w = BraidWork(self, name, outputs, keep)
        if self._batch is not None and name in ("send", "recv"):
            self._batch.append((w, steps))
            w._on_flush = self._flush_batch
        else:
            self._flush_batch()
            self._engine.submit(steps, more, w._done)
        return w if _py_caller() else w._as_cpp()

    @staticmethod
    def _step(kind, a=0, b=0, n=0, dt=braid.DataType.uint8, op=braid.ReduceOp.sum, root=0):
        return (kind, a, b, n, dt, op, root)

    # -- collectives --
    def allreduce(self, tensors, opts=None):
        op = _reduce_op(opts)
        t = self._one(tensors, "all_reduce")
        dt = self._check(t, "all_reduce")
        bop, bitwise = self._op(op, t.dtype, "all_reduce")
        if bitwise is None:
            a = t.data_ptr()
            return self._submit("all_reduce", [self._step(ALLREDUCE, a, a, t.numel(), dt, bop)],
                                None, tensors, tensors)
        steps, more, keep = self._bitwise(t, dt, bitwise, lambda r: t.copy_(r.view_as(t)))
        return self._submit("all_reduce", steps, more, tensors, (tensors, keep))

    def _bitwise(self, t, dt, fn, finish):
        # all-gather every rank's tensor, then reduce the rows locally (p x the bytes of a
        # reduction; these ops are rare and small).
        flat = t.reshape(-1).clone()
        rows = torch.empty((self._size, flat.numel()), dtype=t.dtype)
        steps = [self._step(ALLGATHER, flat.data_ptr(), rows.data_ptr(), flat.numel(), dt)]

        def more():
            r = rows[0].clone()
            for i in range(1, self._size):
                fn(r, rows[i], out=r)
            finish(r)
            return
            yield  # a generator: the engine runs this after the all-gather

        return steps, more(), (flat, rows)

    def allreduce_coalesced(self, tensors, opts=None):
        op = _reduce_op(opts)
        if not tensors:
            return self._submit("all_reduce_coalesced", [], None, [], None)
        ref = tensors[0]
        self._same(tensors, "all_reduce_coalesced", ref)
        dt = self._check(ref, "all_reduce_coalesced")
        bop, bitwise = self._op(op, ref.dtype, "all_reduce_coalesced")
        flat = torch.cat([t.reshape(-1) for t in tensors])
        if bitwise is None:
            steps = [self._step(ALLREDUCE, flat.data_ptr(), flat.data_ptr(), flat.numel(), dt,
                                bop)]
        else:
            steps = []

        def unpack(r=None):
            src = flat if r is None else r
            off = 0
            for t in tensors:
                t.copy_(src[off:off + t.numel()].view_as(t))
                off += t.numel()

        if bitwise is not None:
            steps, more, keep = self._bitwise(flat, dt, bitwise, unpack)
            return self._submit("all_reduce_coalesced", steps, more, list(tensors),
                                (tensors, flat, keep))

        def more():
            unpack()
            return
            yield

        return self._submit("all_reduce_coalesced", steps, more(), list(tensors),
                            (tensors, flat))

    def broadcast(self, tensors, opts=None):
        root = self._root(opts.rootRank if opts is not None else 0, "broadcast")
        t = self._one(tensors, "broadcast")
        dt = self._check(t, "broadcast")
        a = t.data_ptr()
        return self._submit("broadcast", [self._step(BROADCAST, a, a, t.numel(), dt, root=root)],
                            None, tensors, tensors)

    def reduce(self, tensors, opts=None):
        root = self._root(opts.rootRank if opts is not None else 0, "reduce")
        op = _reduce_op(opts)
        t = self._one(tensors, "reduce")
        dt = self._check(t, "reduce")
        bop, bitwise = self._op(op, t.dtype, "reduce")
        if bitwise is not None:
            def finish(r):
                if self._rank == root:
                    t.copy_(r.view_as(t))
            steps, more, keep = self._bitwise(t, dt, bitwise, finish)
            return self._submit("reduce", steps, more, tensors, (tensors, keep))
        a = t.data_ptr()
        out = a if self._rank == root else 0
        return self._submit("reduce", [self._step(REDUCE, a, out, t.numel(), dt, bop, root)],
                            None, tensors, tensors)

    def barrier(self, opts=None):
        return self._submit("barrier", [self._step(BARRIER)], None, [], None)

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        # braid's barrier names the rank it waited for when it times out.
        w = self.barrier()
        w = w if isinstance(w, BraidWork) else None
        if w is not None:
            w.wait(timeout if timeout is not None else self._timeout)

    def allgather(self, output_lists, inputs, opts=None):
        t = self._one(inputs, "all_gather", "input tensor")
        outs = self._one(output_lists, "all_gather", "output list")
        dt = self._check(t, "all_gather", "input")
        if len(outs) != self._size:
            raise self._err(f"all_gather: the output list has {len(outs)} tensors, the group "
                            f"{self._size} ranks")
        for i, o in enumerate(outs):
            if not isinstance(o, torch.Tensor) or o.numel() != t.numel() or o.dtype != t.dtype:
                raise self._err(f"all_gather: output {i} must have {t.numel()} elements of "
                                f"{t.dtype} like the input")
        n = t.numel()
        scratch = torch.empty(n * self._size, dtype=t.dtype)
        return self._submit("all_gather",
                            [self._step(ALLGATHER, t.data_ptr(), scratch.data_ptr(), n, dt)],
                            _copy_blocks_out(scratch, outs, n), output_lists, (inputs, scratch))

    def _allgather_base(self, output, input, opts=None):
        dt = self._check(input, "all_gather_into_tensor", "input")
        self._check(output, "all_gather_into_tensor", "output")
        if output.dtype != input.dtype or output.numel() != input.numel() * self._size:
            raise self._err(f"all_gather_into_tensor: output must have {self._size} x "
                            f"{input.numel()} elements of {input.dtype}, has {output.numel()} "
                            f"of {output.dtype}")
        return self._submit("all_gather_into_tensor",
                            [self._step(ALLGATHER, input.data_ptr(), output.data_ptr(),
                                        input.numel(), dt)], None, [output], (input, output))

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        if len(output_lists) != self._size:
            raise self._err(f"all_gather_coalesced: {len(output_lists)} output lists for "
                            f"{self._size} ranks")
        steps, keep = [], [inputs, output_lists]
        scratches = []
        for j, t in enumerate(inputs):
            dt = self._check(t, "all_gather_coalesced", f"input {j}")
            for r in range(self._size):
                o = output_lists[r][j]
                if o.numel() != t.numel() or o.dtype != t.dtype:
                    raise self._err(f"all_gather_coalesced: output [{r}][{j}] does not match "
                                    f"input {j}")
            s = torch.empty(t.numel() * self._size, dtype=t.dtype)
            scratches.append(s)
            steps.append(self._step(ALLGATHER, t.data_ptr(), s.data_ptr(), t.numel(), dt))
        keep.append(scratches)

        def more():
            for j, t in enumerate(inputs):
                n = t.numel()
                for r in range(self._size):
                    o = output_lists[r][j]
                    o.copy_(scratches[j][r * n:(r + 1) * n].view_as(o))
            return
            yield

        return self._submit("all_gather_coalesced", steps, more(),
                            [o for lst in output_lists for o in lst], keep)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        op = _reduce_op(opts)
        out = self._one(outputs, "reduce_scatter", "output")
        ins = self._one(input_lists, "reduce_scatter", "input list")
        dt = self._check(out, "reduce_scatter", "output")
        if len(ins) != self._size:
            raise self._err(f"reduce_scatter: {len(ins)} inputs for {self._size} ranks")
        for i, t in enumerate(ins):
            if not isinstance(t, torch.Tensor) or t.numel() != out.numel() or \
                    t.dtype != out.dtype:
                raise self._err(f"reduce_scatter: input {i} must have {out.numel()} elements "
                                f"of {out.dtype} like the output")
        packed = torch.cat([t.reshape(-1) for t in ins])
        return self._reduce_scatter_flat("reduce_scatter", out, packed, dt, op,
                                         (outputs, input_lists, packed))

    def _reduce_scatter_flat(self, name, out, packed, dt, op, keep):
        bop, bitwise = self._op(op, out.dtype, name)
        n = out.numel()
        if bitwise is not None:
            steps, more, k = self._bitwise(packed, dt, bitwise,
                                           lambda r: out.copy_(
                                               r[self._rank * n:(self._rank + 1) * n].view_as(out)))
            return self._submit(name, steps, more, [out], (keep, k))
        return self._submit(name, [self._step(REDUCE_SCATTER, packed.data_ptr(), out.data_ptr(),
                                              n, dt, bop)], None, [out], keep)

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _reduce_op(opts)
        dt = self._check(output, "reduce_scatter_tensor", "output")
        self._check(input, "reduce_scatter_tensor", "input")
        if output.dtype != input.dtype or input.numel() != output.numel() * self._size:
            raise self._err(f"reduce_scatter_tensor: input must have {self._size} x "
                            f"{output.numel()} elements of {output.dtype}, has "
                            f"{input.numel()} of {input.dtype}")
        return self._reduce_scatter_flat("reduce_scatter_tensor", output, input, dt, op,
                                         (output, input))

    # -- all-to-all, gather, scatter --
    def _padded_alltoall(self, name, send_blocks, recv_blocks, dtype, dt, keep):
        """send_blocks[j] (flat views) go to rank j; recv_blocks[i] (flat views) get rank i's
        block. One all-reduce(MAX) agrees on the largest block, then one all-to-all of blocks
        padded to it; the engine runs both and the copies in between."""
        largest = torch.tensor([max([b.numel() for b in send_blocks + recv_blocks] + [0])],
                               dtype=torch.int64)
        steps = [self._step(ALLREDUCE, largest.data_ptr(), largest.data_ptr(), 1,
                            braid.DataType.int64, braid.ReduceOp.max)]
        p = self._size

        def more():
            m = int(largest.item())
            src = torch.zeros(p * m, dtype=dtype)
            dst = torch.empty(p * m, dtype=dtype)
            for j, b in enumerate(send_blocks):
                src[j * m:j * m + b.numel()].copy_(b)
            yield [self._step(ALLTOALL, src.data_ptr(), dst.data_ptr(), m, dt)]
            for i, b in enumerate(recv_blocks):
                b.copy_(dst[i * m:i * m + b.numel()])

        return self._submit(name, steps, more(), keep[0], (keep, largest))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        name = "all_to_all_single"
        dt = self._check(input, name, "input")
        self._check(output, name, "output")
        if output.dtype != input.dtype:
            raise self._err(f"{name}: output dtype {output.dtype} != input dtype {input.dtype}")
        p = self._size
        if not output_split_sizes and not input_split_sizes:
            if input.numel() != output.numel() or input.numel() % p:
                raise self._err(f"{name}: without split sizes input and output need the same "
                                f"number of elements, divisible by {p} (have {input.numel()} "
                                f"and {output.numel()})")
            return self._submit(name, [self._step(ALLTOALL, input.data_ptr(), output.data_ptr(),
                                                  input.numel() // p, dt)], None, [output],
                                (input, output))

        def blocks(t, splits, what):
            rows = t.shape[0] if t.dim() > 0 else 1
            per = t.numel() // rows if rows else 0
            if not splits:
                if rows % p:
                    raise self._err(f"{name}: {what} dim 0 ({rows}) does not split into {p} "
                                    "equal parts; pass split sizes")
                splits = [rows // p] * p
            if len(splits) != p or sum(splits) != rows or min(splits) < 0:
                raise self._err(f"{name}: {what} split sizes {list(splits)} must be {p} "
                                f"non-negative sizes adding up to dim 0 ({rows})")
            flat, out, off = t.reshape(-1), [], 0
            for s in splits:
                out.append(flat[off * per:(off + s) * per])
                off += s
            return out

        send = blocks(input, input_split_sizes, "input")
        recv = blocks(output, output_split_sizes, "output")
        return self._padded_alltoall(name, send, recv, input.dtype, dt, ([output], input))

    def alltoall(self, outputs, inputs, opts=None):
        name = "all_to_all"
        p = self._size
        if len(outputs) != p or len(inputs) != p:
            raise self._err(f"{name}: {len(inputs)} inputs and {len(outputs)} outputs for "
                            f"{p} ranks")
        ref = inputs[0]
        self._same(list(inputs) + list(outputs), name, ref)
        dt = self._check(ref, name)
        send = [t.reshape(-1) for t in inputs]
        recv = [t.reshape(-1) for t in outputs]
        return self._padded_alltoall(name, send, recv, ref.dtype, dt, (list(outputs), inputs))

    def gather(self, output_lists, inputs, opts=None):
        root = self._root(opts.rootRank if opts is not None else 0, "gather")
        t = self._one(inputs, "gather", "input")
        dt = self._check(t, "gather", "input")
        outs = []
        if self._rank == root:
            outs = self._one(output_lists, "gather", "output list")
            if len(outs) != self._size:
                raise self._err(f"gather: {len(outs)} outputs for {self._size} ranks")
            for i, o in enumerate(outs):
                if o.numel() != t.numel() or o.dtype != t.dtype:
                    raise self._err(f"gather: output {i} does not match the input")
        elif output_lists and any(len(lst) for lst in output_lists):
            raise self._err("gather: only the root passes a gather_list")
        n = t.numel()
        # Every other rank sends its block to the root, which receives them in rank order: each
        # block crosses one link once (an all-gather would move p blocks to every rank).
        if self._rank != root:
            return self._submit("gather", [self._step(SEND, t.data_ptr(), 0, n, dt, root=root)],
                                None, [], (inputs, output_lists))
        steps, staged = [], []
        for r, o in enumerate(outs):
            if r == root:
                continue
            dst = o if o.is_contiguous() else torch.empty(n, dtype=t.dtype)
            if dst is not o:
                staged.append((dst, o))
            steps.append(self._step(RECV, dst.data_ptr(), 0, n, dt, root=r))

        def more():
            outs[root].copy_(t.view_as(outs[root]))
            for s, o in staged:
                o.copy_(s.view_as(o))
            return
            yield

        return self._submit("gather", steps, more(), list(outs), (inputs, output_lists, staged))

    def scatter(self, outputs, input_lists, opts=None):
        root = self._root(opts.rootRank if opts is not None else 0, "scatter")
        t = self._one(outputs, "scatter", "output")
        dt = self._check(t, "scatter", "output")
        n, p = t.numel(), self._size
        if self._rank != root:
            if input_lists and any(len(lst) for lst in input_lists):
                raise self._err("scatter: only the root passes a scatter_list")
            return self._submit("scatter", [self._step(RECV, t.data_ptr(), 0, n, dt, root=root)],
                                None, outputs, (outputs, input_lists))
        ins = self._one(input_lists, "scatter", "input list")
        if len(ins) != p:
            raise self._err(f"scatter: {len(ins)} inputs for {p} ranks")
        for i, x in enumerate(ins):
            if x.numel() != n or x.dtype != t.dtype:
                raise self._err(f"scatter: input {i} does not match the output")
        # The root sends block r to rank r, in rank order: each block crosses one link once (a
        # broadcast of all p blocks would move p blocks to every rank).
        blocks = [x.reshape(-1).contiguous() for x in ins]
        steps = [self._step(SEND, blocks[r].data_ptr(), 0, n, dt, root=r)
                 for r in range(p) if r != root]

        def more():
            t.copy_(blocks[root].view_as(t))
            return
            yield

        return self._submit("scatter", steps, more(), outputs, (outputs, input_lists, blocks))

    # -- point to point --
    def send(self, tensors, dst, tag=0):
        t = self._one(tensors, "send")
        dt = self._check(t, "send")
        peer = self._peer(dst, "send")
        return self._submit("send", [self._step(SEND, t.data_ptr(), 0, t.numel(), dt,
                                                root=peer)], None, tensors, tensors)

    def recv(self, tensors, src, tag=0):
        t = self._one(tensors, "recv")
        dt = self._check(t, "recv")
        peer = self._peer(src, "recv")
        return self._submit("recv", [self._step(RECV, t.data_ptr(), 0, t.numel(), dt,
                                                root=peer)], None, tensors, tensors)

    def recv_anysource(self, tensors, tag=0):
        raise self._err("recv from any source is not supported; name the source rank")

    # torch 1.13 calls _start_coalescing() and _end_coalescing(reqs) around batch_isend_irecv;
    # torch 2.x passes a device to both and waits on the Work _end_coalescing returns.
    def _start_coalescing(self, *args):
        self._flush_batch()
        self._batch = []

    def _end_coalescing(self, *args):
        w = BraidWork(self, "coalesced", [])
        self._flush_batch(w)
        return w if _py_caller() else w._as_cpp()

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        """torch 2.x (FSDP2): one all-gather per (output, input) pair, as one job."""
        return self._coalesced("all_gather_into_tensor_coalesced", ALLGATHER, outputs, inputs,
                               None)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        """torch 2.x (FSDP2): one reduce-scatter per (output, input) pair, as one job."""
        return self._coalesced("reduce_scatter_tensor_coalesced", REDUCE_SCATTER, outputs,
                               inputs, _reduce_op(opts))

    def _coalesced(self, name, kind, outputs, inputs, op):
        if len(outputs) != len(inputs):
            raise self._err(f"{name}: {len(outputs)} outputs for {len(inputs)} inputs")
        steps = []
        for i, (o, x) in enumerate(zip(outputs, inputs)):
            dt = self._check(x, name, f"input {i}")
            self._check(o, name, f"output {i}")
            small, big = (x, o) if kind == ALLGATHER else (o, x)
            if o.dtype != x.dtype or big.numel() != small.numel() * self._size:
                raise self._err(f"{name}: pair {i} needs {self._size} x {small.numel()} "
                                f"elements of {small.dtype} on the gathered side")
            bop = braid.ReduceOp.sum
            if op is not None:
                bop, bitwise = self._op(op, o.dtype, name)
                if bitwise is not None:
                    raise self._err(f"{name}: bitwise ops are not supported here")
            steps.append(self._step(kind, x.data_ptr(), o.data_ptr(), small.numel(), dt, bop))
        return self._submit(name, steps, None, list(outputs), (outputs, inputs))

    def _flush_batch(self, extra=None):
        """Submits the p2p operations of a batch_isend_irecv as one job, in issue order: the
        engine posts them as one point-to-point group (all at once, progressed together).
        `extra` (the Work of _end_coalescing) completes with the batch."""
        batch, self._batch = self._batch, None
        if not batch:
            if extra is not None:
                extra._done(None)
            return
        works = [w for w, _ in batch] + ([extra] if extra is not None else [])
        steps = [st for _, job in batch for st in job]

        def done(exc):
            for w in works:
                w._done(exc)

        for w in works:
            w._on_flush = None
        self._engine.submit(steps, None, done)

    # -- CUDA tensors under a device map (torch 2.x) --
    # torch 2.x takes a backend that is a ProcessGroup (as a Python one is) for the whole group
    # (distributed_c10d._new_process_group_helper returns it at once), so the map's other
    # backends are never made: under "cpu:braid,cuda:nccl" this group makes the NCCL backend
    # itself, when the first CUDA tensor arrives (every rank issues the same operations, so
    # every rank makes it at the same point), over a PrefixStore of the group's store.
    def _cuda_pg(self, op):
        if self._cuda is None:
            world = getattr(dist.distributed_c10d, "_world", None)
            config = str(getattr(world, "pg_backend_config", {}).get(self, ""))
            nccl = getattr(_C, "ProcessGroupNCCL", None)
            if "cuda:nccl" not in config.replace(" ", "") or nccl is None:
                raise self._err(f"{op}: CUDA tensors on a braid group that maps no device to "
                                f"NCCL (backend config {config or 'unknown'!r}); the braid "
                                "backend takes CPU tensors: make the group with "
                                "backend=\"cpu:braid,cuda:nccl\" (torch 2.x) for CUDA ones")
            options = nccl.Options()
            options._timeout = self._timeout
            self._cuda = nccl(_C.PrefixStore("braid-cuda-nccl/", self._store), self._rank,
                              self._size, options)
        return self._cuda

    # -- teardown --
    def _shutdown(self):
        self._flush_batch()
        self._engine.close()
        self.comm.close()


def _holds_cuda(args):
    """Whether the operation's arguments hold a CUDA tensor (the first tensor found decides:
    torch hands one device per call)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.is_cuda
        if isinstance(a, (list, tuple)) and a:
            found = _holds_cuda(a)
            if found is not None:
                return found
    return None


def _route_cuda(name, method):
    """The data operation `name`: CUDA tensors to the group's NCCL backend (_cuda_pg), the
    rest to braid."""
    def op(self, *args, **kwargs):
        if _holds_cuda(args):
            return getattr(self._cuda_pg(name), name)(*args, **kwargs)
        return method(self, *args, **kwargs)
    op.__name__, op.__qualname__, op.__doc__ = method.__name__, method.__qualname__, method.__doc__
    return op


for _name in ("allreduce", "allreduce_coalesced", "broadcast", "reduce", "allgather",
              "_allgather_base", "allgather_coalesced", "reduce_scatter", "_reduce_scatter_base",
              "alltoall_base", "alltoall", "gather", "scatter", "send", "recv",
              "allgather_into_tensor_coalesced", "reduce_scatter_tensor_coalesced"):
    setattr(ProcessGroupBraid, _name, _route_cuda(_name, getattr(ProcessGroupBraid, _name)))
del _name


def _default_braid_group():
    """The default group's braid process group, or None (no default group yet: this is it; or
    the default is another backend)."""
    try:
        if not dist.is_initialized():
            return None
        pg = dist.distributed_c10d._get_default_group()
    except (RuntimeError, AttributeError):
        return None
    if isinstance(pg, ProcessGroupBraid):
        return pg
    get = getattr(pg, "_get_backend", None)  # torch 2.x: a ProcessGroup of device backends
    if get is not None:
        try:
            backend = get(torch.device("cpu"))
        except (RuntimeError, ValueError):
            return None
        if isinstance(backend, ProcessGroupBraid):
            return backend
    return None


def _global_ranks(store, rank, size):
    """The default-group ranks of a subgroup's members, in group rank order, through the
    group's own store (torch 1.13 does not hand them to the backend); each get is bounded by
    the store's timeout."""
    store.set(f"braid/member/{rank}", str(dist.get_rank()))
    return [int(store.get(f"braid/member/{r}")) for r in range(size)]


def _create(store, rank, world_size, timeout):
    return ProcessGroupBraid(store, rank, world_size, timeout)


def _create_extended(opts):
    # torch >= 2.x extended API: _DistributedBackendOptions, which lists the members
    ranks = getattr(opts, "global_ranks_in_group", None)
    return ProcessGroupBraid(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                             global_ranks=list(ranks) if ranks else None)


def register():
    """Registers "braid" with torch.distributed (idempotent); True when it is registered."""
    name = "braid"
    if hasattr(dist.Backend, "_plugins") and name.upper() in dist.Backend._plugins:
        return True
    try:
        try:
            dist.Backend.register_backend(name, _create, devices=["cpu"])
        except TypeError:
            dist.Backend.register_backend(name, _create)
    except (RuntimeError, ValueError, AttributeError) as e:
        if "already" in str(e):
            return True
        raise
    return True


def registration():
    """What torch.distributed knows about "braid": a dict for braid.torch.info."""
    plugins = getattr(dist.Backend, "_plugins", {})
    plugin = plugins.get("BRAID")
    devices = getattr(dist.Backend, "backend_capability", {}).get("braid")
    return {"registered": plugin is not None,
            "creator": getattr(getattr(plugin, "creator_fn", None), "__qualname__", None),
            "extended_api": getattr(plugin, "extended_api", None),
            "devices": devices, "torch": torch.__version__}
