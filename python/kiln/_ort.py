"""The ONNX Runtime calls people already write, on Kiln.

    import kiln as ort          # instead of: import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    (y,) = sess.run(None, {name: x})

Same names and semantics as onnxruntime for this subset: InferenceSession
(get_inputs, get_outputs, run, get_providers, get_provider_options,
get_session_options), SessionOptions.intra_op_num_threads,
get_available_providers, get_device. Providers map to Kiln backends
(PROVIDER_TO_BACKEND); a provider Kiln does not know is an error naming the
available ones, and a known one whose plugin is not installed is skipped
with a warning, as onnxruntime does.
"""

import enum
import warnings

from . import _kiln
from ._errors import InvalidArgument

__all__ = ["InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode",
           "get_available_providers",
           "get_all_providers", "get_device", "PROVIDER_TO_BACKEND"]

#: ONNX Runtime execution provider -> Kiln backend.
PROVIDER_TO_BACKEND = {
    "XnnpackExecutionProvider": "xnnpack",
    "DnnlExecutionProvider": "onednn",
    "CPUExecutionProvider": "portable",
}
_BACKEND_TO_PROVIDER = {b: p for p, b in PROVIDER_TO_BACKEND.items()}


def _provider_name(backend):
    return _BACKEND_TO_PROVIDER.get(backend, backend)


def get_all_providers():
    """Every provider name this layer maps (available or not)."""
    return list(PROVIDER_TO_BACKEND)


def get_available_providers():
    """Providers whose Kiln backend is installed and usable here, by priority."""
    found = sorted((b for b in _kiln.backends() if b.available), key=lambda b: -b.priority)
    return [_provider_name(b.name) for b in found] + ["CPUExecutionProvider"]


def get_device():
    """'CPU': Kiln's backends here run on the CPU."""
    return "CPU"


class GraphOptimizationLevel(enum.IntEnum):
    """onnxruntime.GraphOptimizationLevel: accepted; Kiln always folds constants and plans memory."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """onnxruntime.ExecutionMode: accepted; Kiln runs nodes in order, in parallel inside each."""
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """onnxruntime.SessionOptions: Kiln uses intra_op_num_threads (0: one per
    core, onnxruntime's default); the other attributes are accepted and kept."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.enable_profiling = False
        self.optimized_model_filepath = ""


class RunOptions:
    """onnxruntime.RunOptions: accepted; Kiln has no per-run options yet."""

    def __init__(self):
        self.log_severity_level = 2
        self.run_tag = ""


def _split_providers(providers, provider_options):
    """[(provider name, options dict)] from onnxruntime's two accepted forms."""
    if providers is None:
        return None
    if isinstance(providers, str):
        providers = [providers]
    out = []
    for i, p in enumerate(providers):
        if isinstance(p, (tuple, list)):
            name, opts = p[0], dict(p[1]) if len(p) > 1 else {}
        else:
            name, opts = p, {}
        if provider_options is not None and i < len(provider_options):
            opts.update(provider_options[i])
        out.append((name, opts))
    return out


def _backends_for(providers, provider_options):
    """Kiln backend list and backend options for the requested providers."""
    wanted = _split_providers(providers, provider_options)
    if wanted is None:
        return None, {}
    loaded = {b.name: b for b in _kiln.backends()}
    backends, options = [], {}
    for name, opts in wanted:
        backend = PROVIDER_TO_BACKEND.get(name, name if name in loaded else None)
        if backend is None:
            raise InvalidArgument(
                f"unknown provider '{name}'; available providers: {', '.join(get_available_providers())}")
        if backend != "portable" and not (backend in loaded and loaded[backend].available):
            why = loaded[backend].reason if backend in loaded else "its plugin is not installed"
            warnings.warn(f"provider '{name}' is not available ({why}); skipping it", RuntimeWarning,
                          stacklevel=3)
            continue
        backends.append(backend)
        for key, value in opts.items():
            options[f"{backend}.{key}"] = value
    if "portable" not in backends:
        backends.append("portable")
    return backends, options


class InferenceSession:
    """onnxruntime.InferenceSession on a kiln.Session.

    InferenceSession(path_or_bytes, sess_options=None, providers=None,
    provider_options=None). providers: names or (name, options) tuples,
    mapped by PROVIDER_TO_BACKEND; None uses every available backend.
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        backends, options = _backends_for(providers, provider_options)
        threads = getattr(self._sess_options, "intra_op_num_threads", 0)
        self._session = _kiln.Session(path_or_bytes, backends=backends, backend_options=options or None,
                                      threads=int(threads or 0))
        self._backend_options = options
        # The run call goes straight to C++ (no Python frame per call).
        self._run = self._session._run_list

    def get_inputs(self):
        """The inputs: objects with .name, .type ('tensor(float)'), .shape."""
        return list(self._session.inputs)

    def get_outputs(self):
        """The outputs: objects with .name, .type, .shape."""
        return list(self._session.outputs)

    def get_overridable_initializers(self):
        """Kiln does not override initializers: always []."""
        return []

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: a list of arrays in output_names order (None: all)."""
        return self._run(output_names, input_feed)

    def get_providers(self):
        """The providers this session uses, in order (ending with CPUExecutionProvider)."""
        return [_provider_name(b) for b in self._session.placement()["backends"]]

    def get_provider_options(self):
        """Options per provider name, as given."""
        out = {p: {} for p in self.get_providers()}
        for key, value in self._backend_options.items():
            backend, _, option = key.partition(".")
            out.setdefault(_provider_name(backend), {})[option] = str(value)
        return out

    def get_session_options(self):
        return self._sess_options

    def get_modelmeta(self):
        raise NotImplementedError("kiln.InferenceSession.get_modelmeta is not part of Kiln's ORT subset")

    def end_profiling(self):
        return ""
