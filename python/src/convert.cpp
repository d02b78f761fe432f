#include "convert.h"

#include <array>
#include <atomic>
#include <cstring>
#include <utility>

#include "errors.h"

namespace kiln::python {

namespace {

std::atomic<uint64_t> g_borrowed{0};
std::atomic<uint64_t> g_converted{0};

// Interned Python objects, created on first use with the GIL held and never
// freed (they would outlive the interpreter's teardown otherwise).
pyb::module_& numpy() {
  static auto* np = new pyb::module_(pyb::module_::import("numpy"));
  return *np;
}

// ml_dtypes.bfloat16 when installed, else None.
const pyb::object& bfloat16_dtype() {
  static auto* dt = [] {
    try {
      return new pyb::object(pyb::dtype::from_args(pyb::module_::import("ml_dtypes").attr("bfloat16")));
    } catch (const pyb::error_already_set&) {
      return new pyb::object(pyb::none());
    }
  }();
  return *dt;
}

const char* numpy_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBool: return "bool";
    case DType::kString: return "object";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
    case DType::kBFloat16: return "float32";  // without ml_dtypes
    default: return nullptr;
  }
}

// The dtype an array of Kiln dtype `t` has in Python (bfloat16: see convert.h).
const pyb::object& dtype_object(DType t) {
  static std::array<pyb::object*, kNumDTypes> table{};
  const size_t i = static_cast<size_t>(t);
  if (i >= table.size()) throw StatusError(StatusCode::kInternal, "bad dtype");
  if (!table[i]) {
    if (t == DType::kBFloat16 && !bfloat16_dtype().is_none()) {
      table[i] = new pyb::object(bfloat16_dtype());
    } else {
      const char* name = numpy_name(t);
      table[i] = new pyb::object(name ? pyb::object(pyb::dtype(name)) : pyb::object(pyb::none()));
    }
  }
  return *table[i];
}

// The Kiln dtype of a numpy dtype; kUndefined when Kiln has none.
DType kiln_dtype(const pyb::dtype& d) {
  const ssize_t n = d.itemsize();
  switch (d.kind()) {
    case 'b': return DType::kBool;
    case 'i': return n == 1 ? DType::kInt8 : n == 2 ? DType::kInt16 : n == 4 ? DType::kInt32 : n == 8 ? DType::kInt64 : DType::kUndefined;
    case 'u': return n == 1 ? DType::kUInt8 : n == 2 ? DType::kUInt16 : n == 4 ? DType::kUInt32 : n == 8 ? DType::kUInt64 : DType::kUndefined;
    case 'f': return n == 2 ? DType::kFloat16 : n == 4 ? DType::kFloat32 : n == 8 ? DType::kFloat64 : DType::kUndefined;
    case 'c': return n == 8 ? DType::kComplex64 : n == 16 ? DType::kComplex128 : DType::kUndefined;
    case 'O':
    case 'U':
    case 'S': return DType::kString;
    default: break;
  }
  if (!bfloat16_dtype().is_none() && d.is(bfloat16_dtype())) return DType::kBFloat16;
  if (!bfloat16_dtype().is_none() && d.equal(bfloat16_dtype())) return DType::kBFloat16;
  return DType::kUndefined;
}

bool native_order(const pyb::dtype& d) {
  const char b = d.byteorder();
  return b == '=' || b == '|' || (b == '<') == (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__);
}

Shape array_shape(const pyb::array& a) {
  Shape s;
  s.resize(static_cast<size_t>(a.ndim()));
  for (ssize_t i = 0; i < a.ndim(); ++i) s[static_cast<size_t>(i)] = static_cast<int64_t>(a.shape(i));
  return s;
}

std::string dtype_text(const pyb::dtype& d) { return d.attr("name").cast<std::string>(); }

Tensor strings_to_tensor(const std::string& name, pyb::array a) {
  if (a.dtype().kind() != 'O') a = a.attr("astype")("object");
  a = pyb::array::ensure(numpy().attr("ascontiguousarray")(a));
  Tensor t = Tensor::allocate(DType::kString, array_shape(a));
  auto* items = static_cast<PyObject* const*>(a.data());
  std::string* out = t.data<std::string>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    PyObject* o = items[i];
    if (o && PyUnicode_Check(o)) {
      Py_ssize_t len = 0;
      const char* s = PyUnicode_AsUTF8AndSize(o, &len);
      if (!s) throw pyb::error_already_set();
      out[i].assign(s, static_cast<size_t>(len));
    } else if (o && PyBytes_Check(o)) {
      out[i].assign(PyBytes_AS_STRING(o), static_cast<size_t>(PyBytes_GET_SIZE(o)));
    } else {
      throw_invalid("input '", name, "' is a string tensor; element ", i, " is ",
                    o ? Py_TYPE(o)->tp_name : "NULL", ", not str or bytes");
    }
  }
  return t;
}

// bfloat16 without ml_dtypes: uint16 arrays are raw bits, floats are rounded.
Tensor bfloat16_from(const std::string& name, const pyb::array& a, std::vector<pyb::object>& keep) {
  const char kind = a.dtype().kind();
  if (kind == 'u' && a.dtype().itemsize() == 2) {
    pyb::array c = pyb::array::ensure(numpy().attr("ascontiguousarray")(a, "uint16"));
    keep.push_back(c);
    return Tensor::borrow(DType::kBFloat16, array_shape(c), const_cast<void*>(c.data()));
  }
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b') {
    throw_invalid("input '", name, "' expects bfloat16 (float32 values or uint16 bits), got ", dtype_text(a.dtype()));
  }
  pyb::array f = pyb::array::ensure(numpy().attr("ascontiguousarray")(a, "float32"));
  Tensor t = Tensor::allocate(DType::kBFloat16, array_shape(f));
  const float* src = static_cast<const float*>(f.data());
  BFloat16* dst = t.data<BFloat16>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = BFloat16(src[i]);
  return t;
}

pyb::array as_array(pyb::handle value) {
  if (pyb::isinstance<pyb::array>(value)) return pyb::reinterpret_borrow<pyb::array>(value);
  return pyb::array::ensure(numpy().attr("asarray")(value));
}

}  // namespace

pyb::object numpy_dtype(DType t) { return dtype_object(t); }

InputStats input_stats() {
  return {g_borrowed.load(std::memory_order_relaxed), g_converted.load(std::memory_order_relaxed)};
}

std::string ort_type_string(const IoInfo& info) {
  std::string elem;
  switch (info.dtype) {
    case DType::kFloat32: elem = "float"; break;
    case DType::kFloat64: elem = "double"; break;
    case DType::kUndefined: elem = "undefined"; break;
    default: elem = dtype_name(info.dtype); break;
  }
  elem = "tensor(" + elem + ")";
  switch (info.kind) {
    case IoInfo::Kind::kTensor: return elem;
    case IoInfo::Kind::kSequence: return "seq(" + elem + ")";
    case IoInfo::Kind::kOptional: return "optional(" + elem + ")";
    default: return "unknown";
  }
}

Tensor feed_to_tensor(const std::string& name, pyb::handle value, DType want, std::vector<pyb::object>& keep) {
  if (value.is_none()) throw_invalid("input '", name, "' is None; pass a numpy array");
  pyb::array a = as_array(value);
  const pyb::dtype d = a.dtype();
  const DType have = kiln_dtype(d);
  if (want == DType::kUndefined) want = have;
  if (want == DType::kUndefined) throw_invalid("input '", name, "': Kiln has no dtype for numpy ", dtype_text(d));
  if (want == DType::kString) {
    if (have != DType::kString) throw_invalid("input '", name, "' expects strings, got ", dtype_text(d));
    return strings_to_tensor(name, a);
  }
  if (have == DType::kString) throw_invalid("input '", name, "' expects ", dtype_name(want), ", got strings");
  // The zero-copy path: the declared dtype, C order, aligned, native order.
  if (have == want && native_order(d) && (a.flags() & pyb::array::c_style) &&
      (a.flags() & pyb::detail::npy_api::NPY_ARRAY_ALIGNED_)) {
    keep.push_back(a);
    g_borrowed.fetch_add(1, std::memory_order_relaxed);
    return Tensor::borrow(want, array_shape(a), const_cast<void*>(a.data()));
  }
  g_converted.fetch_add(1, std::memory_order_relaxed);
  if (want == DType::kBFloat16 && bfloat16_dtype().is_none()) return bfloat16_from(name, a, keep);
  const pyb::object& target = dtype_object(want);
  if (have != want && !numpy().attr("can_cast")(d, target, "same_kind").cast<bool>()) {
    throw_invalid("input '", name, "' expects ", dtype_name(want), ", got ", dtype_text(d),
                  " (numpy does not convert it within its kind; use .astype)");
  }
  pyb::array c = pyb::array::ensure(numpy().attr("ascontiguousarray")(a, target));
  if (!c) throw pyb::error_already_set();
  keep.push_back(c);
  return Tensor::borrow(want, array_shape(c), const_cast<void*>(c.data()));
}

namespace {

std::vector<ssize_t> numpy_shape(const Tensor& t) {
  std::vector<ssize_t> s;
  for (int64_t d : t.shape()) s.push_back(static_cast<ssize_t>(d));
  return s;
}

pyb::object strings_to_numpy(const Tensor& t) {
  pyb::array a(pyb::dtype("object"), numpy_shape(t));
  auto** items = static_cast<PyObject**>(a.mutable_data());
  const std::string* s = t.data<std::string>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    PyObject* o = PyUnicode_DecodeUTF8(s[i].data(), static_cast<Py_ssize_t>(s[i].size()), "surrogateescape");
    if (!o) throw pyb::error_already_set();
    PyObject* old = items[i];
    items[i] = o;
    Py_XDECREF(old);
  }
  return a;
}

pyb::object bfloat16_to_float32(const Tensor& t) {
  pyb::array_t<float> a(numpy_shape(t));
  float* dst = a.mutable_data();
  const BFloat16* src = t.data<BFloat16>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = src[i];
  return a;
}

pyb::object tensor_to_numpy(Tensor&& t) {
  if (t.dtype() == DType::kString) return strings_to_numpy(t);
  if (t.dtype() == DType::kBFloat16 && bfloat16_dtype().is_none()) return bfloat16_to_float32(t);
  const pyb::object& dt = dtype_object(t.dtype());
  if (dt.is_none()) throw StatusError(StatusCode::kUnimplemented, std::string("no numpy dtype for ") + dtype_name(t.dtype()));
  const pyb::dtype d = pyb::reinterpret_borrow<pyb::dtype>(dt);
  // Zero copy when this tensor alone owns its buffer; a buffer shared with
  // the session (a constant) or with another output is copied, so writing
  // into the array never changes anything else.
  if (t.numel() > 0 && t.owns_memory_exclusively()) {
    auto* keep = new std::shared_ptr<void>(t.memory_owner());
    pyb::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
    return pyb::array(d, numpy_shape(t), {}, t.raw_data(), base);
  }
  pyb::array a(d, numpy_shape(t));
  if (t.nbytes() > 0) std::memcpy(a.mutable_data(), t.raw_data(), t.nbytes());
  return a;
}

}  // namespace

pyb::object value_to_python(Value&& value) {
  if (value.is_tensor()) return tensor_to_numpy(std::move(value.tensor()));
  if (value.is_sequence()) {
    pyb::list items;
    for (Tensor& t : value.sequence_items()) items.append(tensor_to_numpy(std::move(t)));
    return items;
  }
  return pyb::none();
}

}  // namespace kiln::python
