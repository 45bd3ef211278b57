"""braid's exceptions: one BraidError subclass per braid status code.

Every exception raised by braid carries ``code`` (the braid/NCCL-compatible integer),
``code_name`` and ``rank`` (the rank that raised it; the message also starts with "rank R:").
"""


class BraidError(RuntimeError):
    """Base of every error braid raises."""

    code = -1
    code_name = "error"
    rank = -1


class UnhandledCudaError(BraidError):
    """A CUDA call failed (code 1)."""


class BraidSystemError(BraidError):
    """A system call or the network failed (code 2)."""


class InternalError(BraidError):
    """A braid bug or an inconsistent state (code 3)."""


class InvalidArgumentError(BraidError, ValueError):
    """A bad argument: null/overlapping buffers, bad dtype/op/root, ... (code 4)."""


class InvalidUsageError(BraidError):
    """Ranks disagree (count, dtype, order) or the API was misused (code 5)."""


class RemoteError(BraidError):
    """Another rank failed or went away (code 6)."""


class InProgressError(BraidError):
    """The operation has not finished (code 7)."""


class BraidTimeoutError(BraidError):
    """A wait passed BRAID_TIMEOUT_MS; the message names the rank waited for (code 8)."""


def make(cls, message, rank=-1):
    """An exception of cls with braid's conventions: "rank R: message", .rank, .code."""
    code = next((c for c, k in BY_CODE.items() if k is cls), -1)
    text = message if rank < 0 or message.startswith(f"rank {rank}") else \
        f"rank {rank}: {message}"
    e = cls(text)
    e.rank, e.code = rank, code
    e.code_name = {4: "invalid argument", 5: "invalid usage"}.get(code, cls.__name__)
    return e


BY_CODE = {
    1: UnhandledCudaError,
    2: BraidSystemError,
    3: InternalError,
    4: InvalidArgumentError,
    5: InvalidUsageError,
    6: RemoteError,
    7: InProgressError,
    8: BraidTimeoutError,
}

__all__ = ["BraidError"] + [c.__name__ for c in BY_CODE.values()]
