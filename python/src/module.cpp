// kiln._kiln: the Python binding of Kiln's public C++ API (include/kiln/).
// kiln/__init__.py re-exports it with the errors (kiln/_errors.py) and the
// ONNX Runtime-compatible layer (kiln/_ort.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <kiln/session.h>

#include "convert.h"
#include "errors.h"
#include "placement.h"

namespace kiln::python {
namespace {

template <class T>
T take(Result<T>&& r) {
  if (!r.ok()) throw StatusError(r.status());
  return std::move(r).value();
}

// One model input or output, as Python sees it (also ORT's NodeArg).
struct PyIoInfo {
  std::string name;
  pyb::object dtype;  // numpy dtype, or None
  pyb::object shape;  // list of int | str | None, or None when the rank is unknown
  std::string type;   // ORT style: "tensor(float)"
  std::string type_string;  // Kiln style: "float32[N, 3]"
  std::string kind;   // "tensor", "sequence", "optional", "other"
};

PyIoInfo make_io_info(const IoInfo& info) {
  PyIoInfo p;
  p.name = info.name;
  p.dtype = numpy_dtype(info.dtype);
  if (info.has_shape) {
    pyb::list dims;
    for (size_t i = 0; i < info.dims.size(); ++i) {
      const std::string& param = i < info.dim_params.size() ? info.dim_params[i] : std::string();
      if (info.dims[i] >= 0) dims.append(info.dims[i]);
      else if (!param.empty()) dims.append(param);
      else dims.append(pyb::none());
    }
    p.shape = std::move(dims);
  } else {
    p.shape = pyb::none();
  }
  p.type = ort_type_string(info);
  p.type_string = info.type_string;
  static const char* kinds[] = {"tensor", "sequence", "optional", "other"};
  p.kind = kinds[static_cast<int>(info.kind)];
  return p;
}

std::vector<std::string> string_list(const pyb::object& o, const char* what) {
  std::vector<std::string> out;
  if (o.is_none()) return out;
  if (pyb::isinstance<pyb::str>(o)) {
    const std::string s = o.cast<std::string>();
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      if (comma == std::string::npos) comma = s.size();
      if (comma > start) out.push_back(s.substr(start, comma - start));
      start = comma + 1;
    }
    return out;
  }
  try {
    for (pyb::handle h : o) out.push_back(pyb::str(h).cast<std::string>());
  } catch (const pyb::error_already_set&) {
    throw_invalid(what, " must be a list of strings");
  }
  return out;
}

// backend_options: {"xnnpack.threads": 2}, {"xnnpack": {"threads": 2}} or ["xnnpack.threads=2"].
std::vector<BackendOption> backend_options(const pyb::object& o) {
  std::vector<BackendOption> out;
  if (o.is_none()) return out;
  auto add = [&](const std::string& text) { out.push_back(take(parse_backend_option(text))); };
  auto value_text = [](pyb::handle v) {
    if (pyb::isinstance<pyb::bool_>(v)) return std::string(v.cast<bool>() ? "true" : "false");
    return pyb::str(v).cast<std::string>();
  };
  if (pyb::isinstance<pyb::dict>(o)) {
    for (auto [k, v] : o.cast<pyb::dict>()) {
      const std::string key = pyb::str(k).cast<std::string>();
      if (pyb::isinstance<pyb::dict>(v)) {
        for (auto [k2, v2] : v.cast<pyb::dict>()) out.push_back({key, pyb::str(k2).cast<std::string>(), value_text(v2)});
      } else {
        add(key + "=" + value_text(v));
      }
    }
    return out;
  }
  for (const std::string& s : string_list(o, "backend_options")) add(s);
  return out;
}

// The plugins beside libkiln.so (<libdir>/kiln/backends): the install's, or
// the build tree's when the module is imported from build/python. Python's
// executable says nothing about where Kiln is, so the registry's own default
// folders (relative to the executable) miss them.
std::string plugin_dir_beside_libkiln() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&dtype_name), &info) == 0 || !info.dli_fname) return "";
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::path(info.dli_fname).parent_path() / "kiln" / "backends";
  return std::filesystem::is_directory(dir, ec) ? std::filesystem::weakly_canonical(dir, ec).string() : "";
}

// One discovery for every session and kiln.backends() of this process.
// Made with the GIL held (so only once); the registry is thread-safe.
const std::shared_ptr<BackendRegistry>& process_registry() {
  static auto* registry = [] {
    auto* r = new std::shared_ptr<BackendRegistry>(BackendRegistry::create());
    const std::string dir = plugin_dir_beside_libkiln();
    std::vector<std::string> searched = (*r)->search_dirs();
    std::error_code ec;
    for (std::string& d : searched) d = std::filesystem::weakly_canonical(d, ec).string();
    if (!dir.empty() && std::getenv("KILN_BACKEND_PATH") == nullptr &&
        std::find(searched.begin(), searched.end(), dir) == searched.end()) {
      std::vector<std::string> files;
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        if (e.path().extension() == ".so") files.push_back(e.path().string());
      }
      std::sort(files.begin(), files.end());
      for (const std::string& f : files) (void)(*r)->load(f);
    }
    return r;
  }();
  return *registry;
}

class PySession {
 public:
  PySession(const pyb::object& model, const pyb::object& backends, const pyb::object& options,
            const pyb::object& threads, const std::string& fallback, const pyb::object& backend_paths) {
    SessionOptions o;
    o.backends = string_list(backends, "backends");
    o.backend_options = backend_options(options);
    o.backend_paths = string_list(backend_paths, "backend_paths");
    if (!threads.is_none()) {
      const int n = threads.cast<int>();
      if (n < 0) throw_invalid("threads must be >= 0 (0: one per core), got ", n);
      o.threads = n;
    }
    o.fallback = take(parse_fallback_policy(fallback));
    if (o.backend_paths.empty()) o.backend_registry = process_registry();
    if (pyb::isinstance<pyb::bytes>(model) || pyb::isinstance<pyb::bytearray>(model) ||
        pyb::isinstance<pyb::memoryview>(model)) {
      const auto as_bytes = pyb::reinterpret_steal<pyb::object>(PyBytes_FromObject(model.ptr()));
      if (!as_bytes) throw pyb::error_already_set();
      const std::string bytes = as_bytes.cast<std::string>();
      model_ = "<bytes>";
      pyb::gil_scoped_release unlocked;
      session_ = take(Session::load_from_bytes(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), o));
    } else {
      try {
        model_ = pyb::module_::import("os").attr("fspath")(model).cast<std::string>();
      } catch (const pyb::error_already_set&) {
        throw_invalid("model must be a path (str or os.PathLike) or the model's bytes, got ",
                      Py_TYPE(model.ptr())->tp_name);
      }
      pyb::gil_scoped_release unlocked;
      session_ = take(Session::load(model_, o));
    }
    for (const IoInfo& i : session_->inputs()) {
      input_index_.emplace(i.name, inputs_.size());
      inputs_.push_back(make_io_info(i));
    }
    for (const IoInfo& i : session_->outputs()) {
      output_index_.emplace(i.name, outputs_.size());
      outputs_.push_back(make_io_info(i));
    }
  }

  const std::vector<PyIoInfo>& inputs() const { return inputs_; }
  const std::vector<PyIoInfo>& outputs() const { return outputs_; }
  const std::string& model() const { return model_; }
  size_t num_nodes() const { return session_->num_nodes(); }
  pyb::dict placement() const { return placement_dict(model_, session_->placement()); }

  // Runs with the GIL released; the outputs in outputs() order.
  std::vector<Value> run_values(const pyb::handle& feeds) const {
    if (!pyb::isinstance<pyb::dict>(feeds)) {
      throw_invalid("feeds must be a dict of input name -> numpy array, got ", Py_TYPE(feeds.ptr())->tp_name);
    }
    std::vector<pyb::object> keep;
    std::vector<NamedValue> named;
    named.reserve(inputs_.size());
    for (auto [k, v] : pyb::reinterpret_borrow<pyb::dict>(feeds)) {
      if (!pyb::isinstance<pyb::str>(k)) throw_invalid("feed names must be str, got ", Py_TYPE(k.ptr())->tp_name);
      std::string name = k.cast<std::string>();
      auto it = input_index_.find(name);
      if (it == input_index_.end()) throw_invalid("unknown input '", name, "'; the model's inputs are: ", names(inputs_));
      const DType want = session_->inputs()[it->second].dtype;
      Tensor t = feed_to_tensor(name, v, want, keep);
      named.emplace_back(std::move(name), Value(std::move(t)));
    }
    Result<std::vector<Value>> r = [&] {
      pyb::gil_scoped_release unlocked;
      return session_->run(std::span<const NamedValue>(named));
    }();
    return take(std::move(r));
  }

  pyb::dict run(const pyb::handle& feeds, const pyb::object& output_names) const {
    std::vector<Value> values = run_values(feeds);
    pyb::dict out;
    if (output_names.is_none()) {
      for (size_t i = 0; i < values.size(); ++i) out[pyb::str(outputs_[i].name)] = value_to_python(std::move(values[i]));
      return out;
    }
    for (const std::string& n : string_list(output_names, "outputs")) out[pyb::str(n)] = value_to_python(std::move(values[output(n)]));
    return out;
  }

  // ONNX Runtime's order: a list, in output_names order (None: all outputs).
  pyb::list run_list(const pyb::object& output_names, const pyb::handle& feeds) const {
    std::vector<size_t> which;
    if (output_names.is_none()) {
      for (size_t i = 0; i < outputs_.size(); ++i) which.push_back(i);
    } else {
      for (const std::string& n : string_list(output_names, "output_names")) which.push_back(output(n));
    }
    std::vector<Value> values = run_values(feeds);
    pyb::list out;
    std::vector<bool> taken(values.size(), false);
    for (size_t i : which) {
      // An output named twice: the second gets a copy.
      out.append(value_to_python(taken[i] ? values[i].clone() : std::move(values[i])));
      taken[i] = true;
    }
    return out;
  }

 private:
  size_t output(const std::string& name) const {
    auto it = output_index_.find(name);
    if (it == output_index_.end()) throw_invalid("unknown output '", name, "'; the model's outputs are: ", names(outputs_));
    return it->second;
  }
  static std::string names(const std::vector<PyIoInfo>& v) {
    std::string s;
    for (const PyIoInfo& i : v) s += (s.empty() ? "" : ", ") + i.name;
    return s.empty() ? "(none)" : s;
  }

  std::string model_;
  std::unique_ptr<Session> session_;
  std::vector<PyIoInfo> inputs_, outputs_;
  std::unordered_map<std::string, size_t> input_index_, output_index_;
};

pyb::list list_backends(const pyb::object& paths) {
  BackendDiscovery d;
  d.paths = string_list(paths, "paths");
  std::shared_ptr<BackendRegistry> registry = d.paths.empty() ? process_registry() : BackendRegistry::create(d);
  pyb::list out;
  for (const BackendInfo& b : registry->backends()) out.append(pyb::cast(b));
  return out;
}

pyb::list backend_errors(const pyb::object& paths) {
  BackendDiscovery d;
  d.paths = string_list(paths, "paths");
  std::shared_ptr<BackendRegistry> registry = d.paths.empty() ? process_registry() : BackendRegistry::create(d);
  pyb::list out;
  for (const BackendLoadError& e : registry->errors()) out.append(pyb::make_tuple(e.path, e.message));
  return out;
}

}  // namespace
}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  namespace pyb = pybind11;
  using namespace kiln::python;
  m.doc() = "Kiln's C++ runtime (kiln._kiln); use it through the kiln package.";
  register_error_translator();
  register_placement_types(m);

  pyb::class_<PyIoInfo>(m, "IoInfo", "A model input or output: name, dtype, shape (ORT's NodeArg too).")
      .def_readonly("name", &PyIoInfo::name, "The name to feed or fetch.")
      .def_readonly("dtype", &PyIoInfo::dtype, "numpy dtype of the elements (None when undeclared).")
      .def_readonly("shape", &PyIoInfo::shape,
                    "Dims: int when known, str for a symbolic dim ('N'), None when unknown; None when the rank is unknown.")
      .def_readonly("type", &PyIoInfo::type, "ONNX Runtime's type name, e.g. 'tensor(float)'.")
      .def_readonly("type_string", &PyIoInfo::type_string, "Kiln's type, e.g. 'float32[N, 3]'.")
      .def_readonly("kind", &PyIoInfo::kind, "'tensor', 'sequence', 'optional' or 'other'.")
      .def("__repr__", [](const PyIoInfo& i) { return "<kiln.IoInfo " + i.name + ": " + i.type_string + ">"; });

  pyb::class_<PySession>(m, "Session", R"(A loaded ONNX model, ready to run.

Session(model, backends=None, backend_options=None, threads=None, fallback="allow", backend_paths=None)

model: a path (str or os.PathLike) or the model's bytes.
backends: backend names to try in order, e.g. ["xnnpack", "portable"]
  (None: every available plugin by priority, then portable).
backend_options: {"xnnpack.threads": 2}, {"xnnpack": {"threads": 2}} or
  ["xnnpack.threads=2"]; checked against each plugin's options.
threads: intra-op threads counting the caller (0: one per core; None: 1).
fallback: "allow" (unclaimed nodes run on portable kernels) or "require"
  (loading fails naming each node no selected backend takes).
backend_paths: plugin files or folders to load first.

run() may be called from several threads at once; it releases the GIL.
Errors raise kiln.KilnError subclasses with the runtime's message.)")
      .def(pyb::init<const pyb::object&, const pyb::object&, const pyb::object&, const pyb::object&,
                     const std::string&, const pyb::object&>(),
           pyb::arg("model"), pyb::arg("backends") = pyb::none(), pyb::arg("backend_options") = pyb::none(),
           pyb::arg("threads") = pyb::none(), pyb::arg("fallback") = "allow",
           pyb::arg("backend_paths") = pyb::none())
      .def_property_readonly("inputs", &PySession::inputs, "The model's inputs (list of IoInfo).")
      .def_property_readonly("outputs", &PySession::outputs, "The model's outputs (list of IoInfo).")
      .def_property_readonly("model", &PySession::model, "The model's path, or '<bytes>'.")
      .def_property_readonly("num_nodes", &PySession::num_nodes, "Nodes the executor runs (after folding).")
      .def("run", &PySession::run, pyb::arg("feeds"), pyb::arg("outputs") = pyb::none(),
           R"(run(feeds, outputs=None) -> dict[str, numpy.ndarray]

feeds: {input name: array}. Arrays that are C-contiguous and of the
declared dtype are used without a copy; others are converted within
their kind (float64 -> float32, lists, scalars), else InvalidArgument.
Strings: object arrays of str or bytes. outputs: names to return (None:
all). Sequence outputs come as lists of arrays, empty optionals as None.
The GIL is released while the model runs. Ctrl-C is not seen until the
run returns (cancellation needs plugin ABI 1.1).)")
      .def("_run_list", &PySession::run_list, pyb::arg("output_names"), pyb::arg("feeds"),
           "ONNX Runtime order: run(output_names, feeds) -> list.")
      .def("placement", &PySession::placement,
           "Where each node went (partitions per backend, portable nodes and why): the dict `kiln inspect --json` prints.")
      .def("__repr__", [](const PySession& s) {
        return "<kiln.Session " + s.model() + ": " + std::to_string(s.inputs().size()) + " inputs, " +
               std::to_string(s.outputs().size()) + " outputs>";
      });

  m.def("backends", &list_backends, pyb::arg("paths") = pyb::none(),
        "The backend plugins Kiln finds (KILN_BACKEND_PATH, the install's lib/kiln/backends, `paths`): a list of BackendInfo.");
  m.def("_input_stats", [] {
    const InputStats s = input_stats();
    return pyb::make_tuple(s.borrowed, s.converted);
  }, "(feeds used in place, feeds converted) since import: for tests of the zero-copy path.");
  m.def("backend_errors", &backend_errors, pyb::arg("paths") = pyb::none(),
        "Plugins that failed to load: a list of (path, message).");
}
