"""PyTorch integration: the torch.distributed backend "braid", a DDP comm hook and a
standalone data-parallel wrapper.

The backend (importing this module registers it; see braid.torch.backend):

    import braid.torch
    dist.init_process_group("braid")                # env:// under torchrun, or store=...
    ddp = torch.nn.parallel.DistributedDataParallel(model)   # over braid, no hook needed

DistributedDataParallel with braid's all-reduce (DDP keeps its own buckets; braid reduces them):

    hook = braid.torch.ddp_hook(codec="fp16")       # codec=None: plain all-reduce
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp.register_comm_hook(None, hook)
    ...; hook.metrics()                             # last step: buckets, bytes, comm/exposed ms

Without any torch.distributed process group:

    model = braid.torch.DataParallel(model)         # broadcasts rank 0's state, hooks gradients
    loss = model(x).sum(); loss.backward()          # buckets reduced while backward runs
    opt.step(); model.metrics                       # braid.StepMetrics of the last step
    with model.no_sync(): ...                       # accumulate locally, reduce next step

Both average gradients over ranks like DDP (average=False sums).
"""

import contextlib
import weakref

import torch

import braid
from .. import _braid
from .._tensors import buffer as _buffer
from .._tensors import torch_dtypes, torch_view
from ..errors import InvalidArgumentError, InvalidUsageError
from .backend import ProcessGroupBraid, register, registration  # noqa: F401
from ._work import BraidWork  # noqa: F401

register()

_live_hooks = weakref.WeakSet()


def _communicator(comm):
    """comm, else the process default: from torch.distributed's store when a process group
    exists (no extra port), else from the environment."""
    if comm is not None:
        return comm
    c = braid.default_communicator()
    if c is not None and not c.handle.closed:
        return c
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        c = braid.Communicator.from_torch()
    else:
        c = braid.Communicator.from_env()
    braid._set_default(c)
    return c


def _matrix_shape(t):
    """How a codec (PowerSGD) views a gradient: dim0 x rest; 1-D tensors as n x 1."""
    if t.dim() <= 1:
        return (t.numel(), 1)
    return (t.shape[0], t.numel() // t.shape[0])


class BraidCommHook:
    """A DDP comm hook (register with ``ddp.register_comm_hook(None, hook)``).

    Each call hands DDP's bucket to braid's engine thread and returns an uncompleted
    torch.futures.Future; the engine thread, the only thread that issues this hook's
    collectives, reduces the bucket in place (or through the codec) and completes the future.
    """

    def __init__(self, comm=None, codec=None, average=True):
        self.comm = _communicator(comm)
        self.codec = codec or "none"
        self._engine = _braid.HookEngine(self.comm.handle, "" if codec in (None, "none")
                                         else codec, average)
        self._needs_shapes = self.codec.split(":")[0] == "powersgd"
        self._shapes = {}
        self.__name__ = self.__qualname__ = "braid_comm_hook"  # DDP reads both
        _live_hooks.add(self)

    def __call__(self, state, bucket):
        buf = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
        addr, n, dt = _buffer(buf, "DDP bucket")
        index = bucket.index()
        shapes = []
        if self._needs_shapes:
            key = (index, n)
            shapes = self._shapes.get(key)
            if shapes is None:
                shapes = [_matrix_shape(g) for g in bucket.gradients()]
                self._shapes[key] = shapes
        fut = torch.futures.Future()
        # Bucket identity for codec state: index and size (DDP rebuilds its buckets once).
        self._engine.submit(fut, buf, addr, n, dt, (index << 40) ^ n, shapes, bucket.is_last())
        return fut

    def metrics(self):
        """The last completed step: buckets, bytes, wire_bytes, comm_ms, exposed_ms, span_ms,
        eta, codec."""
        return self._engine.last_step()

    def drain(self):
        self._engine.drain()

    def close(self):
        self._engine.close()


def ddp_hook(comm=None, codec=None, average=True):
    """A comm hook for torch.nn.parallel.DistributedDataParallel.register_comm_hook.

    comm: a braid.Communicator (default: one made through torch.distributed's store).
    codec: None/"none", or a codec spec such as "fp16", "bf16", "powersgd:rank=4",
    "topk:ratio=0.01", "int8", "sign" (see braid.CODECS).
    average: divide by the world size like DDP's default (else sum).
    """
    if codec not in (None, "none") and not braid.HAVE_CODECS:
        raise InvalidArgumentError(f"codec {codec!r}: this braid was built without codecs")
    return BraidCommHook(comm, codec, average)


class DataParallel(torch.nn.Module):
    """Data parallelism over braid without a torch.distributed process group.

    Registers one gradient hook per parameter (post-accumulate-grad hooks on torch >= 2.1,
    hooks on the AccumulateGrad nodes before), drives a braid Bucketer from them, and finishes
    the step in an autograd end-of-backward callback, so gradients are averaged (or summed)
    when backward() returns.

    zero_copy (default): each parameter's .grad is a view into the Bucketer's bucket storage,
    like DDP's gradient_as_bucket_view; gradients set to None (zero_grad(set_to_none=True))
    are copied in once and the view is restored. Views are rebound when the layout is rebuilt.
    find_unused_parameters: parameters without a gradient in a step contribute zero instead of
    raising; a parameter no rank used keeps .grad None.
    no_sync(): accumulate gradients locally; the next synchronized step reduces the sum.
    broadcast_buffers (default): rank 0's buffers (BatchNorm statistics, ...) are broadcast in
    one fused message before every forward that follows a synchronized forward, like DDP.
    codec: a codec spec for float32 buckets ("fp16", "powersgd:rank=4", ...; None = none,
    "" = BRAID_CODEC), buckets below codec_min_bytes stay uncompressed.
    """

    def __init__(self, module, comm=None, bucket_cap_mb=None, first_bucket_cap_mb=None,
                 average=True, find_unused_parameters=False, zero_copy=True,
                 rebuild_layout=True, broadcast_buffers=True, metrics_file="", codec=None,
                 codec_min_bytes=0):
        super().__init__()
        self.module = module
        self.comm = _communicator(comm)
        if codec not in (None, "", "none") and not braid.HAVE_BUCKETER_CODECS:
            raise InvalidArgumentError(
                "DataParallel: codecs go through the Bucketer, which does not take one in this "
                "build; use ddp_hook(codec=...) or codec=None")
        self.find_unused_parameters = find_unused_parameters
        self.broadcast_buffers = broadcast_buffers
        self.require_backward_grad_sync = True
        self._zero_copy = zero_copy
        seen = set()
        self._params = []
        self._names = []
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self._params.append(p)
                self._names.append(name)
        self._require_forward_param_sync = True
        self._sync_module_state()
        self._bucketer = braid.Bucketer(
            self.comm, bucket_cap_mb=bucket_cap_mb, first_bucket_cap_mb=first_bucket_cap_mb,
            average=average, zero_copy=zero_copy, find_unused=find_unused_parameters,
            rebuild_layout=rebuild_layout, metrics_file=metrics_file,
            codec="none" if codec is None else codec, codec_min_bytes=codec_min_bytes)
        dtypes = torch_dtypes()
        for i, (p, name) in enumerate(zip(self._params, self._names)):
            if p.device.type != "cpu":
                raise InvalidArgumentError(f"DataParallel: parameter {name} is on {p.device}; "
                                           "this braid module reduces host memory only")
            if p.dtype not in dtypes:
                raise InvalidArgumentError(f"DataParallel: parameter {name} has dtype {p.dtype}")
            shape = tuple(p.shape) if p.dim() > 0 else p.numel()
            self._bucketer.register(i, shape, dtypes[p.dtype], name)
        self._bucketer.finalize()
        self._views = [None] * len(self._params)
        self._layout = -1
        if zero_copy:
            self._bind_views()
        self._step_open = False
        self._accumulating = False
        self._marked = [False] * len(self._params)
        self._callback_queued = False
        self._error = None
        self.metrics = None
        self._hooks = []
        self._install_hooks()

    # -- setup --
    def _sync_module_state(self):
        if self.comm.size == 1:
            return
        with torch.no_grad():
            for p in self._params:
                self.comm.broadcast(p.data if p.is_contiguous() else p.data.contiguous(), 0)
        if self.broadcast_buffers:
            self._sync_buffers()

    def _sync_buffers(self):
        """One broadcast of rank 0's buffers, every dtype packed as bytes (DDP broadcasts them
        coalesced too), so that every rank holds rank 0's running statistics."""
        bufs = list(self.module.buffers())
        if not bufs or self.comm.size == 1:
            return
        with torch.no_grad():
            flat = torch.cat([b.detach().reshape(-1).view(torch.uint8) for b in bufs])
            self.comm.broadcast(flat, 0)
            if self.comm.rank == 0:
                return
            off = 0
            for b in bufs:
                nbytes = b.numel() * b.element_size()
                b.copy_(flat[off:off + nbytes].clone().view(b.dtype).view_as(b))
                off += nbytes

    def _bind_views(self):
        version = self._bucketer.layout_version
        if version == self._layout:
            return
        for i, p in enumerate(self._params):
            view = torch_view(self._bucketer.gradient_buffer(i), p.numel(), p.dtype, p.shape)
            old = self._views[i]
            if p.grad is not None:
                # A gradient in the previous layout's storage was carried over by the Bucketer
                # (and that storage is freed now: never read it); any other one is copied in.
                stale = old is not None and p.grad.data_ptr() == old.data_ptr()
                if not stale and p.grad.data_ptr() != view.data_ptr():
                    view.copy_(p.grad)
                p.grad = view
            self._views[i] = view
        self._layout = version

    def _install_hooks(self):
        post_acc = hasattr(torch.Tensor, "register_post_accumulate_grad_hook")
        for i, p in enumerate(self._params):
            if post_acc:
                self._hooks.append(p.register_post_accumulate_grad_hook(
                    lambda param, i=i: self._on_grad(i)))
            else:
                # The AccumulateGrad node of p: a hook on it runs once p.grad holds the new
                # (accumulated) gradient. Keep the node alive, or the hook goes with it.
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                self._hooks.append((acc, acc.register_hook(
                    lambda grad_in, grad_out, i=i: self._on_grad(i))))

    # -- steps --
    def forward(self, *args, **kwargs):
        # Buffers as DDP does (broadcast_buffers=True): rank 0's before every forward that
        # follows a synchronized training forward (not after a no_sync() or no-grad one).
        if self.broadcast_buffers and self._require_forward_param_sync:
            self._sync_buffers()
        if torch.is_grad_enabled() and self.training:
            self._begin_step()
        out = self.module(*args, **kwargs)
        self._require_forward_param_sync = torch.is_grad_enabled() and \
            self.require_backward_grad_sync
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of backward passes inside accumulate locally, without communication."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _begin_step(self):
        accumulate = not self.require_backward_grad_sync
        if accumulate and not self._zero_copy:
            # Copy mode: torch accumulates into .grad by itself and the synchronized step
            # hands the Bucketer the sum; the Bucketer's own accumulation (which adds every
            # markReady) would count earlier micro-steps twice.
            return
        if self._step_open:
            if any(self._marked):
                raise InvalidUsageError(
                    f"rank {self.comm.rank}: forward() during an unfinished backward; run "
                    "backward() over the previous forward's output first")
            if accumulate == self._accumulating:
                return  # a second forward before backward: same step
            self._bucketer.finish_step()
        self._bucketer.begin_step(accumulate)
        self._step_open = True
        self._accumulating = accumulate
        self._marked = [False] * len(self._params)
        self._callback_queued = False

    def _on_grad(self, i):
        if not self._step_open:
            return  # a backward without a forward through this wrapper (e.g. eval path)
        if not self._callback_queued:
            torch.autograd.Variable._execution_engine.queue_callback(self._finish)
            self._callback_queued = True
        if self._marked[i]:
            return  # reentrant/second use in one backward: the grad is already accumulated
        self._marked[i] = True
        p = self._params[i]
        if self._zero_copy:
            view = self._views[i]
            if p.grad is not view:
                if p.grad is None:
                    view.zero_()
                elif p.grad.data_ptr() != view.data_ptr():
                    view.copy_(p.grad)
                p.grad = view
            self._bucketer.mark_ready(i, None)
        else:
            self._bucketer.mark_ready(i, p.grad)

    def _finish(self):
        if not self._step_open:
            return
        unused = []
        if not self._accumulating:
            for i, done in enumerate(self._marked):
                if not done:
                    unused.append(i)
                    if self.find_unused_parameters:
                        if self._zero_copy:
                            g = self._params[i].grad
                            if g is None or g.data_ptr() != self._views[i].data_ptr():
                                self._views[i].zero_()
                        self._bucketer.mark_unused(i)
        self._step_open = False
        self.metrics = self._bucketer.finish_step()  # raises (naming the rank) on failure
        if self._accumulating:
            return
        if self._zero_copy:
            self._bind_views()
            for i in unused:
                if not self._bucketer.globally_unused(i):
                    self._params[i].grad = self._views[i]
        elif unused:
            # Copy mode: locally unused parameters still receive the reduced gradient.
            for i in unused:
                if self._bucketer.globally_unused(i):
                    continue
                p = self._params[i]
                res = torch_view(self._bucketer.result(i), p.numel(), p.dtype, p.shape)
                if p.grad is None:
                    p.grad = res.clone()
                else:
                    p.grad.copy_(res)

    # -- teardown --
    def close(self):
        """Detaches gradients from bucket storage (clones) and stops the Bucketer."""
        if self._bucketer is None:
            return
        if self._zero_copy:
            for p, v in zip(self._params, self._views):
                if p.grad is not None and v is not None and p.grad.data_ptr() == v.data_ptr():
                    p.grad = p.grad.clone()
        for h in self._hooks:
            (h[1] if isinstance(h, tuple) else h).remove()
        self._hooks = []
        self._bucketer.close()
        self._bucketer = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to report to
            pass

    @property
    def bucketer(self):
        return self._bucketer
