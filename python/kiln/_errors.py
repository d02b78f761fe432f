"""Exceptions raised by Kiln: one KilnError subclass per runtime status code.

Each carries the runtime's one-line message (str(e)) and its code (e.code,
the kiln::StatusCode value). They also derive from the closest built-in
exception, so ``except ValueError`` catches a bad input.
"""

__all__ = [
    "KilnError", "InvalidArgument", "NotFound", "Unimplemented", "OutOfRange",
    "FailedPrecondition", "InternalError", "IoError", "BackendError",
]


class KilnError(Exception):
    """Base class of every error Kiln raises."""
    code = -1


class InvalidArgument(KilnError, ValueError):
    """Bad input from the caller or the model file."""
    code = 1


class NotFound(KilnError, LookupError):
    """A file, name, kernel or plugin is missing."""
    code = 2


class Unimplemented(KilnError, NotImplementedError):
    """Valid, but Kiln does not support it (an op, a dtype)."""
    code = 3


class OutOfRange(KilnError, IndexError):
    """An index or size outside its bounds."""
    code = 4


class FailedPrecondition(KilnError, RuntimeError):
    """Called in the wrong state."""
    code = 5


class InternalError(KilnError, RuntimeError):
    """A bug in Kiln."""
    code = 6


class IoError(KilnError, OSError):
    """Reading or writing a file failed."""
    code = 7


class BackendError(KilnError, RuntimeError):
    """A backend or a library it needs is not usable here."""
    code = 8


_BY_CODE = {cls.code: cls for cls in (InvalidArgument, NotFound, Unimplemented, OutOfRange,
                                      FailedPrecondition, InternalError, IoError, BackendError)}


def error_class(code: int) -> type:
    """The class for a kiln::StatusCode value (KilnError for unknown codes)."""
    return _BY_CODE.get(code, KilnError)
