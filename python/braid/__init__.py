"""braid: collective communication and gradient bucketing for data-parallel training.

    import braid
    comm = braid.init()                      # torchrun / braid-run variables, mpiexec, file store
    comm.all_reduce(t, op="avg")             # in place on a CPU tensor (or numpy array, DLPack)
    work = comm.all_reduce(t, async_op=True); work.wait()

PyTorch integration lives in braid.torch (ddp_hook for DistributedDataParallel, and
DataParallel, a standalone wrapper that needs no torch.distributed process group).
Errors are braid.BraidError subclasses that name the rank (see braid.errors).
"""

import atexit
import sys
import threading
import weakref

from . import _braid
from . import errors as _errors
from ._tensors import buffer as _plain_buffer
from .errors import (BY_CODE, BraidError, BraidSystemError, BraidTimeoutError,  # noqa: F401
                     InProgressError, InternalError, InvalidArgumentError, InvalidUsageError,
                     RemoteError, UnhandledCudaError)

_braid._set_error_classes(BraidError, dict(BY_CODE))

__version__ = "0.1.0"

DataType = _braid.DataType
ReduceOp = _braid.ReduceOp
StepMetrics = _braid.StepMetrics
BucketMetrics = _braid.BucketMetrics
HAVE_CODECS = bool(_braid.HAVE_CODECS)
HAVE_BUCKETER_CODECS = bool(_braid.HAVE_BUCKETER_CODECS)
CODECS = list(_braid.CODECS)
if HAVE_CODECS:
    Codec = _braid.Codec


def _op(op):
    if isinstance(op, ReduceOp):
        return op
    try:
        return ReduceOp.__members__[str(op).lower()]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown reduce op {op!r}; valid: {', '.join(ReduceOp.__members__)}") from None


class Work:
    """An asynchronous collective. Keeps its tensors alive until it is waited for."""

    def __init__(self, work, result, keep):
        self._work = work
        self._result = result
        self._keep = keep

    def is_completed(self):
        return self._work.test()

    def wait(self, timeout=None):
        """Waits; returns the output tensor. Raises the operation's BraidError.

        timeout (seconds, or a datetime.timedelta; None or 0: the communicator's timeout, which
        bounds every operation): when the operation is not done by then, raises
        BraidTimeoutError naming the rank and the operation, and fails the communicator, as
        torch's Work.wait(timeout) aborts its process group: the peers stop waiting too, and
        the operation stops touching its tensors (within a second) before this returns.
        """
        if timeout is None:
            ms = 0
        else:
            secs = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
            ms = max(1, int(float(secs) * 1000)) if float(secs) > 0 else 0
        self._work.wait(ms)
        self._keep = None
        return self._result


class Communicator:
    """A group of ranks running collectives on host tensors.

    Create it with :func:`init`, :meth:`from_env`, :meth:`from_store` or :meth:`from_torch`.
    Every rank must issue the same collectives in the same order; a mismatch raises
    InvalidUsageError on every rank instead of hanging.
    """

    _torch_comms = 0
    _lock = threading.Lock()

    def __init__(self, handle):
        self._c = handle
        _live.add(self)

    @classmethod
    def from_env(cls):
        """torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; under a real
        torchrun braid's store sits on MASTER_PORT + 1, see BRAID_STORE_PORT), mpiexec, or
        BRAID_FILE_STORE."""
        return cls(_braid.Comm.from_env())

    @classmethod
    def from_store(cls, store, rank, size, transport="", timeout_ms=0, key_prefix=""):
        """Rendezvous through any key-value store with set/get/add (and check or compare_set
        for bounded waits), e.g. a torch.distributed.TCPStore or FileStore. timeout_ms bounds
        every wait of the communicator (0: BRAID_TIMEOUT_MS). key_prefix: where its keys live
        in the store ("": "braid/c<N>/", N counting this process's communicators, which only
        agrees across ranks when every process creates the same ones in the same order)."""
        return cls(_braid.Comm.from_store(store, int(rank), int(size), transport,
                                          int(timeout_ms), key_prefix))

    @classmethod
    def from_torch(cls, group_store=None, transport=""):
        """Rendezvous through torch.distributed's default store (init_process_group must have
        run): no second port. Each call gets its own key prefix, in call order, which must be
        the same on every rank."""
        import torch.distributed as dist
        if not dist.is_initialized():
            raise InvalidUsageError("braid.Communicator.from_torch: torch.distributed is not "
                                    "initialized; call init_process_group or use from_env()")
        store = group_store
        if store is None:
            from torch.distributed import distributed_c10d as c10d
            store = c10d._get_default_store()
        with cls._lock:
            n = cls._torch_comms
            cls._torch_comms += 1
        store = dist.PrefixStore(f"braid/{n}/", store)
        return cls(_braid.Comm.from_store(store, dist.get_rank(), dist.get_world_size(),
                                          transport, 0, "braid/"))

    # -- identity --
    rank = property(lambda self: self._c.rank)
    size = property(lambda self: self._c.size)
    local_rank = property(lambda self: self._c.local_rank)
    local_size = property(lambda self: self._c.local_size)
    host_index = property(lambda self: self._c.host_index)
    num_hosts = property(lambda self: self._c.num_hosts)
    handle = property(lambda self: self._c, doc="the _braid.Comm (for Bucketer and codecs)")
    timeout_ms = property(lambda self: self._c.timeout_ms, doc="deadline of every wait (ms)")

    def __repr__(self):
        if self._c.closed:
            return "<braid.Communicator closed>"
        return f"<braid.Communicator rank {self.rank} of {self.size}>"

    # -- collectives --
    def all_reduce(self, tensor, op="sum", out=None, async_op=False):
        """Reduces tensor over all ranks into out (default: in place)."""
        out = tensor if out is None else out
        s, n, t = self._buf(tensor, "tensor")
        r, rn, rt = self._buf(out, "out")
        self._same(n, t, rn, rt, "all_reduce: out")
        if async_op:
            return Work(self._c.all_reduce_async(s, r, n, t, _op(op)), out, (tensor, out))
        self._c.all_reduce(s, r, n, t, _op(op))
        return out

    def reduce_scatter(self, input, output, op="sum", async_op=False):
        """output (n elements) gets this rank's block of the reduction of input (size * n)."""
        s, n, t = self._buf(input, "input")
        r, rn, rt = self._buf(output, "output")
        self._same(n, t, rn * self.size, rt, "reduce_scatter: input must be size x output")
        if async_op:
            return Work(self._c.reduce_scatter_async(s, r, rn, t, _op(op)), output,
                        (input, output))
        self._c.reduce_scatter(s, r, rn, t, _op(op))
        return output

    def all_gather(self, input, output, async_op=False):
        """output (size * n elements) gets every rank's input, in rank order."""
        s, n, t = self._buf(input, "input")
        r, rn, rt = self._buf(output, "output")
        self._same(n * self.size, t, rn, rt, "all_gather: output must be size x input")
        if async_op:
            return Work(self._c.all_gather_async(s, r, n, t), output, (input, output))
        self._c.all_gather(s, r, n, t)
        return output

    def broadcast(self, tensor, root=0, async_op=False):
        """root's tensor is copied into tensor on every rank."""
        p, n, t = self._buf(tensor, "tensor")
        if async_op:
            return Work(self._c.broadcast_async(p, p, n, t, int(root)), tensor, (tensor,))
        self._c.broadcast(p, p, n, t, int(root))
        return tensor

    def reduce(self, tensor, root=0, op="sum", out=None):
        out = tensor if out is None else out
        s, n, t = self._buf(tensor, "tensor")
        r, rn, rt = self._buf(out, "out")
        self._same(n, t, rn, rt, "reduce: out")
        self._c.reduce(s, r, n, t, _op(op), int(root))
        return out

    def all_to_all(self, input, output):
        s, n, t = self._buf(input, "input")
        r, rn, rt = self._buf(output, "output")
        self._same(n, t, rn, rt, "all_to_all: output")
        if n % self.size:
            raise _errors.make(InvalidArgumentError, f"all_to_all: {n} elements do not split "
                               f"into {self.size} equal blocks", self.rank)
        self._c.all_to_all(s, r, n // self.size, t)
        return output

    def barrier(self):
        self._c.barrier()

    def send(self, tensor, peer):
        p, n, t = self._buf(tensor, "tensor")
        self._c.send(p, n, t, int(peer))

    def recv(self, tensor, peer):
        p, n, t = self._buf(tensor, "tensor")
        self._c.recv(p, n, t, int(peer))
        return tensor

    # -- control --
    def allreduce_algorithm_for(self, nbytes):
        return self._c.allreduce_algorithm_for(int(nbytes))

    def set_allreduce_algorithm(self, name):
        self._c.set_allreduce_algorithm(name)

    def abort(self, reason="aborted by the application"):
        """Fails the communicator on every rank (peers get RemoteError naming this rank)."""
        self._c.abort(reason)

    def check_health(self):
        """Raises the error that failed the communicator, if any."""
        self._c.check_health()

    def shrink(self, excluded, abort=False):
        """A new Communicator of the ranks not in ``excluded`` (ranks of this one), renumbered
        in rank order; None on an excluded rank that calls it. Every rank that stays calls it
        with the same ranks, also after this communicator failed (the survivors of a dead rank
        exclude it): a different list raises InvalidUsageError, a rank that stays but does not
        call within timeout_ms raises BraidTimeoutError naming it. A failed communicator (or
        any, with abort=True, which fails it first on every rank) is released: threads and
        connections closed, only its error left. See README "Recovering from a lost rank"."""
        h = self._c.shrink([int(r) for r in excluded], bool(abort))
        return None if h is None else Communicator(h)

    def subgroup(self, ranks, timeout_ms=0):
        """A new Communicator of the listed ranks (ranks of this one, in the new one's order),
        created by them alone: ranks not listed do not call (like MPI_Comm_create_group). Every
        member passes the same list; a member that does not call within timeout_ms raises
        BraidTimeoutError naming it. It shares this communicator's store, secret, transport and
        calibrated model (no new probe); timeout_ms bounds its waits (0: this one's timeout)."""
        return Communicator(self._c.subgroup([int(r) for r in ranks], int(timeout_ms)))

    def close(self):
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _same(self, n, t, rn, rt, what):
        if n != rn or t != rt:
            raise _errors.make(InvalidArgumentError, f"{what} size/dtype mismatch ({n} {t.name}"
                               f" vs {rn} {rt.name})", self._c.rank)

    def _buf(self, x, what):
        try:
            return _plain_buffer(x, what)
        except BraidError as e:
            raise _errors.make(type(e), str(e), self._c.rank) from None


class Bucketer:
    """Fuses gradients into buckets and all-reduces them while backward runs (C++ engine
    thread). See include/braid/bucketer.hpp; braid.torch.DataParallel drives one for a model.

    Per step: begin_step(accumulate=False); mark_ready(id, grad) from any thread in any order;
    finish_step() -> StepMetrics.
    """

    def __init__(self, comm, bucket_cap_mb=None, first_bucket_cap_mb=None, average=True,
                 zero_copy=False, find_unused=False, rebuild_layout=True, max_in_flight=2,
                 metrics_file="", sizing=None, codec="", codec_min_bytes=0,
                 small_bucket_codec=""):
        handle = comm.handle if isinstance(comm, Communicator) else comm
        mib = 1 << 20
        if sizing is None:
            sizing = 1 if (bucket_cap_mb or first_bucket_cap_mb) else 0
        sizing = {"default": 0, "fixed": 1, "auto": 2}.get(sizing, sizing)
        self.comm = comm
        self._b = _braid.Bucketer(
            handle, sizing=int(sizing), bucket_cap_bytes=int((bucket_cap_mb or 0) * mib),
            first_bucket_cap_bytes=int((first_bucket_cap_mb or 0) * mib), average=average,
            zero_copy=zero_copy, find_unused=find_unused, rebuild_layout=rebuild_layout,
            max_in_flight=max_in_flight, metrics_file=metrics_file, codec=codec or "",
            codec_min_bytes=int(codec_min_bytes), small_bucket_codec=small_bucket_codec or "")

    def register(self, pid, tensor_or_count, dtype=DataType.float32, name=""):
        """Registers parameter pid by a tensor (its shape and dtype; codecs such as PowerSGD
        view it as dim0 x rest), a shape tuple, or an element count."""
        if isinstance(tensor_or_count, int):
            self._b.register_param(pid, tensor_or_count, dtype, name)
        elif isinstance(tensor_or_count, (tuple, list)):
            self._b.register_param_shaped(pid, [int(d) for d in tensor_or_count], dtype, name)
        else:
            from ._tensors import as_host_array, torch_dtypes
            x = as_host_array(tensor_or_count)
            dt = torch_dtypes().get(getattr(x, "dtype", None))
            if dt is None:
                _, n, dt = _plain_buffer(x)
            self._b.register_param_shaped(pid, [int(d) for d in x.shape], dt, name)

    def finalize(self):
        self._b.finalize()

    def begin_step(self, accumulate=False):
        self._b.begin_step(accumulate)

    def mark_ready(self, pid, grad=None):
        """grad: a tensor/array or an address (copy mode: read from now on, written back by
        finish_step); zero-copy mode: None."""
        if grad is None:
            addr = 0
        elif isinstance(grad, int):
            addr = grad
        else:
            addr = _plain_buffer(grad, "grad")[0]
        self._b.mark_ready(pid, addr)

    def mark_unused(self, pid):
        self._b.mark_unused(pid)

    def finish_step(self):
        return self._b.finish_step()

    def gradient_buffer(self, pid):
        return self._b.gradient_buffer(pid)

    def result(self, pid):
        return self._b.result(pid)

    def zero_gradients(self):
        self._b.zero_gradients()

    def globally_unused(self, pid):
        return self._b.globally_unused(pid)

    layout_version = property(lambda self: self._b.layout_version)
    bucket_count = property(lambda self: self._b.bucket_count)

    def bucket_layout(self):
        return self._b.bucket_layout()

    def close(self):
        self._b.close()


def metrics_dict(m):
    """A StepMetrics as a plain dict (buckets as a list of dicts)."""
    keys = ["step", "communicated", "rebuilt", "step_ms", "compute_ms", "comm_ms", "exposed_ms",
            "eta", "overlap", "bytes", "wire_bytes", "max_skew_ms", "slowest_rank", "skew_clock",
            "tail_by_caller"]
    d = {k: getattr(m, k) for k in keys}
    d["buckets"] = [{k: getattr(b, k) for k in ("bytes", "wire_bytes", "params", "ready_ms", "start_ms",
                                                 "done_ms", "skew_ms", "slowest_rank")}
                    for b in m.buckets]
    return d


_default = None
_live = weakref.WeakSet()


def init():
    """The process's default communicator, created from the environment on first call."""
    global _default
    if _default is None or _default._c.closed:
        _default = Communicator.from_env()
    return _default


def default_communicator():
    return _default


def _set_default(comm):
    global _default
    _default = comm


@atexit.register
def _close_all():
    # Engines and communicators own threads that may take the GIL: stop them before the
    # interpreter goes away.
    bt = sys.modules.get(__name__ + ".torch")
    for hook in list(getattr(bt, "_live_hooks", ())):
        hook.close()
    backend = sys.modules.get(__name__ + ".torch.backend")
    for group in list(getattr(backend, "_live_groups", ())):
        group._shutdown()
    for comm in list(_live):
        comm.close()
