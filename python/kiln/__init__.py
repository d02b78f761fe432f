"""Kiln: an ONNX inference runtime.

    import kiln
    s = kiln.Session("model.onnx")
    print(s.run({"x": x}))

kiln.Session is Kiln's own API; kiln.InferenceSession / SessionOptions are
the ONNX Runtime calls (``import kiln as ort`` runs most ORT scripts).
kiln.backends() lists the backend plugins. Errors are kiln.KilnError
subclasses carrying the runtime's message.
"""

from ._errors import (BackendError, FailedPrecondition, InternalError, InvalidArgument, IoError,
                      KilnError, NotFound, OutOfRange, Unimplemented)
from ._kiln import BackendInfo, IoInfo, Session, backend_errors, backends
from ._ort import (PROVIDER_TO_BACKEND, ExecutionMode, GraphOptimizationLevel, InferenceSession, RunOptions,
                   SessionOptions, get_all_providers, get_available_providers, get_device)

__version__ = "@PROJECT_VERSION@"

__all__ = [
    "Session", "IoInfo", "BackendInfo", "backends", "backend_errors",
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode", "get_available_providers",
    "get_all_providers", "get_device", "PROVIDER_TO_BACKEND",
    "KilnError", "InvalidArgument", "NotFound", "Unimplemented", "OutOfRange",
    "FailedPrecondition", "InternalError", "IoError", "BackendError",
]
