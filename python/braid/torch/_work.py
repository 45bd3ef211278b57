"""The Work objects of braid's torch.distributed backend.

Every operation of a braid process group is one job of its engine (braid._braid.GroupEngine:
one thread per group, issue order). The job completes a :class:`BraidWork`, which offers
torch's Work API with its full meaning: ``wait(timeout)`` (raises the operation's error, or a
timeout error when ``timeout`` passes first), ``is_completed()``, ``is_success()``,
``exception()``, ``result()`` and ``get_future()``.

torch 1.13's C++ callers (DDP's reducer, ``_broadcast_coalesced``, the parameter-shape check)
cannot call a Work written in Python: C++ waits on the base class and never reaches Python.
They get the C++ Work that torch makes from the same future
(``_create_work_from_future``); its wait() ignores a timeout and does not raise, but the
future's value() (what DDP's reducer reads) raises the operation's error.
"""

import datetime
import threading

import torch
import torch.distributed as dist

_C = torch._C._distributed_c10d
_WorkBase = getattr(dist, "Work", None) or _C.Work


def _seconds(timeout):
    if timeout is None:
        return 0.0
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


class BraidWork(_WorkBase):
    """One operation of a braid process group (returned to Python callers)."""

    def __init__(self, group, name, outputs, keep=None):
        super().__init__()
        self._group = group
        self._name = name
        self._outputs = outputs
        self._keep = keep  # inputs and scratch buffers, alive until the operation ends
        self._event = threading.Event()
        self._exc = None
        self._future = torch.futures.Future()
        self._cpp = None
        self._on_flush = None

    # -- completion (engine thread, with the GIL) --
    def _done(self, exc):
        self._exc = exc
        self._keep = None
        self._event.set()
        if exc is None:
            self._future.set_result(self._outputs)
        else:
            self._future.set_exception(exc)

    def _flush(self):
        # A p2p operation inside a batch is submitted when the batch ends (_end_coalescing).
        f, self._on_flush = self._on_flush, None
        if f is not None:
            f()

    # -- torch's Work API --
    def is_completed(self):
        self._flush()
        return self._event.is_set()

    def is_success(self):
        """True once completed without error (False while running)."""
        return self._event.is_set() and self._exc is None

    def exception(self):
        """The operation's error (a braid.BraidError naming the rank), or None."""
        return self._exc

    def wait(self, timeout=datetime.timedelta(0)):
        """Waits for the operation; raises its error. timeout (timedelta or seconds, 0 = the
        group's timeout, which bounds every operation): raises a RuntimeError naming the rank
        and the operation when it passes first (the operation keeps running)."""
        self._flush()
        secs = _seconds(timeout)
        limit = secs if secs > 0 else self._group._wait_limit_s()
        if not self._event.wait(limit):
            from .. import errors
            raise errors.make(errors.BraidTimeoutError,
                              f"braid {self._name} did not complete within {limit:.3f} s "
                              f"(Work.wait timeout); {self._group._engine.pending()} "
                              "operation(s) of the group are still pending", self._group._rank)
        if self._exc is not None:
            raise self._exc
        return True

    def result(self):
        self.wait()
        return self._outputs

    def get_future(self):
        """A torch.futures.Future completed with the output tensors (or the error)."""
        self._flush()
        return self._future

    def synchronize(self):
        """CPU operations need no stream synchronization."""

    def source_rank(self):
        raise RuntimeError("braid backend: recv from any source is not supported, so a Work "
                           "has no source rank")

    _source_rank = source_rank

    def abort(self):
        self._group.comm.abort(f"Work.abort() of {self._name}")

    def _as_cpp(self):
        """The C++ Work over the same future (for callers in torch's C++)."""
        self._flush()
        if self._cpp is None:
            self._cpp = _C._create_work_from_future(self._future)
        return self._cpp

    def __repr__(self):
        state = ("failed" if self._exc is not None else "done") if self._event.is_set() \
            else "pending"
        return f"<braid.torch.BraidWork {self._name} {state}>"
