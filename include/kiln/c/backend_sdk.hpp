// Kiln backend SDK: a header-only C++17 face over the plugin ABI
// (kiln/c/backend.h) for plugin authors.
//
//   class MyInstance : public kiln::sdk::Instance { ... };   // capability, compile
//   class MyPlugin : public kiln::sdk::Plugin { ... };       // info, options, create_instance
//   KILN_BACKEND_PLUGIN(MyPlugin)                             // exports the entry symbol
//
// Derive, override what you support, throw kiln::sdk::Error (or anything) on
// failure: every trampoline catches every exception and returns a status to
// the host, so nothing throws across the ABI. Objects the SDK hands to the
// host (plugin, instance and compiled holders, and every returned array) are
// allocated with the host's allocator, so a host that tracks its allocator
// sees each create/release pair balance.
//
// Version handling: the SDK copies the host's function table into a zeroed
// table of this header's size, so host functions newer than the host are
// NULL; the SDK checks them before calling (log, parallel_for fall back to
// no-op / inline). Optional plugin entries are set to NULL when the plugin
// does not override them (export/import when supports_export() is false).
//
// 1.1 helpers: execute's inputs checked against the partition before your
// execute runs (backend_sdk_inputs.hpp), Plugin::validate_options,
// Capability::decline_unsupported / add_connected_groups, and for device
// plugins the Compiled declarations (memory kinds, workspace, in-place pairs,
// is_async + execute_async with a Fence), ExecContext::workspace /
// trace_event, Instance::allocate / deallocate / copy (backend_sdk_device.hpp).
// Each calls a 1.1 host entry only when the host has it, so a plugin built
// with this SDK still runs on a 1.0 host.
//
// \since 1.0
#ifndef KILN_C_BACKEND_SDK_HPP_
#define KILN_C_BACKEND_SDK_HPP_

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kiln/c/backend.h"

namespace kiln::sdk {

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Throw from any override; the SDK turns it into a status with this code.
class Error : public std::runtime_error {
 public:
  Error(kiln_status_code_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  kiln_status_code_t code() const { return code_; }

 private:
  kiln_status_code_t code_;
};

[[noreturn]] inline void fail(kiln_status_code_t code, const std::string& message) { throw Error(code, message); }

// ---------------------------------------------------------------------------
// dtypes
// ---------------------------------------------------------------------------

/// Bytes per element (0 for UNDEFINED, STRING and unknown values).
inline size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case KILN_DTYPE_FLOAT32: case KILN_DTYPE_INT32: case KILN_DTYPE_UINT32: return 4;
    case KILN_DTYPE_UINT8: case KILN_DTYPE_INT8: case KILN_DTYPE_BOOL: return 1;
    case KILN_DTYPE_UINT16: case KILN_DTYPE_INT16: case KILN_DTYPE_FLOAT16: case KILN_DTYPE_BFLOAT16: return 2;
    case KILN_DTYPE_INT64: case KILN_DTYPE_FLOAT64: case KILN_DTYPE_UINT64: case KILN_DTYPE_COMPLEX64: return 8;
    case KILN_DTYPE_COMPLEX128: return 16;
    default: return 0;
  }
}

/// ONNX-style lower-case name ("float32"), "dtype(N)" for unknown values.
inline std::string dtype_name(int32_t dtype) {
  static const char* const names[] = {"undefined", "float32", "uint8",   "int8",      "uint16",     "int16",
                                      "int32",     "int64",   "string",  "bool",      "float16",    "float64",
                                      "uint32",    "uint64",  "complex64", "complex128", "bfloat16"};
  if (dtype >= 0 && dtype <= 16) return names[dtype];
  return "dtype(" + std::to_string(dtype) + ")";
}

/// "host", "host-pinned", "device", "device-host-visible", "memory kind N". \since 1.1
inline std::string memory_kind_name(int32_t kind) {
  switch (kind) {
    case KILN_MEMORY_HOST: return "host";
    case KILN_MEMORY_HOST_PINNED: return "host-pinned";
    case KILN_MEMORY_DEVICE: return "device";
    case KILN_MEMORY_DEVICE_HOST_VISIBLE: return "device-host-visible";
    default: return "memory kind " + std::to_string(kind);
  }
}

/// "[1, 3, 224, 224]"
inline std::string dims_string(const int64_t* dims, size_t rank) {
  std::string s = "[";
  for (size_t i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// ---------------------------------------------------------------------------
// Host
// ---------------------------------------------------------------------------

/// The host's function table (zero-extended to this header's size) and context.
class Host {
 public:
  Host(const kiln_host_api_t* api, kiln_host_t* context) : context_(context) {
    std::memset(&api_, 0, sizeof(api_));
    size_t n = api->header.struct_size < sizeof(api_) ? api->header.struct_size : sizeof(api_);
    std::memcpy(&api_, api, n);
  }

  const kiln_host_api_t& api() const { return api_; }
  kiln_host_t* context() const { return context_; }

  /// A status for the host. Never throws; never returns NULL.
  kiln_status_t* make_status(kiln_status_code_t code, const char* message) const noexcept {
    return api_.status_create(code == KILN_STATUS_OK ? KILN_STATUS_INTERNAL : code, message);
  }

  /// Host memory; throws std::bad_alloc when the host has none.
  void* alloc(size_t size, size_t alignment = 64) const {
    if (size == 0) size = 1;
    void* p = api_.alloc(context_, size, alignment);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void free(void* p) const noexcept {
    if (p) api_.free(context_, p);
  }
  template <class T>
  T* alloc_array(size_t n) const {
    return static_cast<T*>(alloc(n * sizeof(T), alignof(T) > 64 ? alignof(T) : 64));
  }
  /// A host-allocated NUL-terminated copy.
  char* strdup(const std::string& s) const {
    char* p = alloc_array<char>(s.size() + 1);
    std::memcpy(p, s.c_str(), s.size() + 1);
    return p;
  }

  bool log_enabled(kiln_log_level_t level) const noexcept {
    if (KILN_ABI_HAS(kiln_host_api_t, log_enabled, sizeof(api_)) && api_.log_enabled)
      return api_.log_enabled(context_, level);
    return api_.log != nullptr;
  }
  void log(kiln_log_level_t level, const std::string& message) const noexcept {
    if (api_.log) api_.log(context_, level, message.c_str());
  }

  /// The host's clock for trace events (CLOCK_MONOTONIC nanoseconds); the
  /// same clock read directly on a 1.0 host. \since 1.1
  uint64_t now_ns() const noexcept {
    if (api_.trace_now_ns) return api_.trace_now_ns();
    // steady_clock is CLOCK_MONOTONIC with libstdc++ and libc++ on Linux.
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  }

  /// Converts a host status into an Error (throws) and frees it; no-op for NULL.
  void check(kiln_status_t* status) const {
    if (!status) return;
    kiln_status_code_t code = api_.status_code(status);
    std::string message = api_.status_message(status);
    api_.status_release(status);
    throw Error(code, message);
  }

 private:
  kiln_host_api_t api_;
  kiln_host_t* context_;
};

// ---------------------------------------------------------------------------
// Tensor views
// ---------------------------------------------------------------------------

/// A borrowed tensor: dtype, dims, data. Never owns anything.
struct TensorView {
  int32_t dtype = KILN_DTYPE_UNDEFINED;
  const int64_t* dims = nullptr;
  size_t rank = 0;
  void* data = nullptr;
  size_t nbytes = 0;
  /// \since 1.1: where `data` lives (a kiln_memory_kind_t; HOST from a 1.0
  /// host, whose views end before this member) and on which device.
  int32_t memory_kind = KILN_MEMORY_HOST;
  uint32_t device_index = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (size_t i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
  std::vector<int64_t> shape() const { return std::vector<int64_t>(dims, dims + rank); }
  template <class T>
  T* as() const { return static_cast<T*>(data); }

  static TensorView from_c(const kiln_tensor_t* t) {
    if (!t) fail(KILN_STATUS_INVALID_ARGUMENT, "tensor view is NULL");
    if (t->struct_size < offsetof(kiln_tensor_t, nbytes) + sizeof(size_t))
      fail(KILN_STATUS_INVALID_ARGUMENT, "tensor view struct_size " + std::to_string(t->struct_size) + " is too small");
    TensorView v;
    v.dtype = t->dtype;
    v.dims = t->dims;
    v.rank = t->rank;
    v.data = t->data;
    v.nbytes = t->nbytes;
    if (KILN_ABI_HAS(kiln_tensor_t, memory_kind, t->struct_size)) v.memory_kind = t->memory_kind;
    if (KILN_ABI_HAS(kiln_tensor_t, device_index, t->struct_size)) v.device_index = t->device_index;
    if (v.rank > 0 && !v.dims) fail(KILN_STATUS_INVALID_ARGUMENT, "tensor view has rank > 0 and no dims");
    return v;
  }
};

// ---------------------------------------------------------------------------
// Graph view wrappers (borrowed; valid for the call that received the graph)
// ---------------------------------------------------------------------------

class Node;

class Value {
 public:
  Value() = default;
  Value(const Host* host, const kiln_value_t* v) : h_(host), v_(v) {}
  explicit operator bool() const { return v_ != nullptr; }
  const kiln_value_t* raw() const { return v_; }

  std::string name() const { return api().value_name(v_); }
  kiln_value_kind_t kind() const { return api().value_kind(v_); }
  kiln_dtype_t dtype() const { return api().value_dtype(v_); }
  /// -1 when unknown.
  int64_t rank() const { return api().value_rank(v_); }
  /// -1 for an unknown or symbolic dim.
  int64_t dim(size_t i) const { return api().value_dim(v_, i, nullptr); }
  std::vector<int64_t> dims() const {
    std::vector<int64_t> d;
    for (int64_t i = 0; i < rank(); ++i) d.push_back(dim(static_cast<size_t>(i)));
    return d;
  }
  /// True when rank and every dim are known.
  bool is_static() const {
    if (rank() < 0) return false;
    for (int64_t i = 0; i < rank(); ++i)
      if (dim(static_cast<size_t>(i)) < 0) return false;
    return true;
  }
  bool is_constant() const { return api().value_is_constant(v_); }
  /// The constant's data (throws when not constant); valid for the call.
  TensorView constant() const {
    kiln_tensor_t t;
    std::memset(&t, 0, sizeof(t));
    t.struct_size = sizeof(t);
    h_->check(api().value_constant(v_, &t));
    return TensorView::from_c(&t);
  }
  bool is_graph_input() const { return api().value_is_graph_input(v_); }
  bool is_graph_output() const { return api().value_is_graph_output(v_); }
  bool has_outside_consumers() const { return api().value_has_outside_consumers(v_); }
  inline Node producer() const;
  inline std::vector<Node> consumers() const;

 private:
  const kiln_host_api_t& api() const { return h_->api(); }
  const Host* h_ = nullptr;
  const kiln_value_t* v_ = nullptr;
};

class Attribute {
 public:
  Attribute() = default;
  Attribute(const Host* host, const kiln_attribute_t* a) : h_(host), a_(a) {}
  explicit operator bool() const { return a_ != nullptr; }
  const kiln_attribute_t* raw() const { return a_; }
  std::string name() const { return h_->api().attribute_name(a_); }
  kiln_attr_type_t type() const { return h_->api().attribute_type(a_); }
  size_t count() const { return h_->api().attribute_count(a_); }
  int64_t as_int() const { return h_->api().attribute_int(a_); }
  float as_float() const { return h_->api().attribute_float(a_); }
  std::string as_string(size_t i = 0) const {
    size_t n = 0;
    const char* s = h_->api().attribute_string(a_, i, &n);
    return s ? std::string(s, n) : std::string();
  }
  std::vector<int64_t> as_ints() const {
    size_t n = 0;
    const int64_t* p = h_->api().attribute_ints(a_, &n);
    return p ? std::vector<int64_t>(p, p + n) : std::vector<int64_t>();
  }
  std::vector<float> as_floats() const {
    size_t n = 0;
    const float* p = h_->api().attribute_floats(a_, &n);
    return p ? std::vector<float>(p, p + n) : std::vector<float>();
  }
  TensorView as_tensor(size_t i = 0) const {
    kiln_tensor_t t;
    std::memset(&t, 0, sizeof(t));
    t.struct_size = sizeof(t);
    h_->check(h_->api().attribute_tensor(a_, i, &t));
    return TensorView::from_c(&t);
  }

 private:
  const Host* h_ = nullptr;
  const kiln_attribute_t* a_ = nullptr;
};

class Node {
 public:
  Node() = default;
  Node(const Host* host, const kiln_node_t* n) : h_(host), n_(n) {}
  explicit operator bool() const { return n_ != nullptr; }
  const kiln_node_t* raw() const { return n_; }

  std::string name() const { return api().node_name(n_); }
  std::string op_type() const { return api().node_op_type(n_); }
  std::string domain() const { return api().node_domain(n_); }
  int64_t opset() const { return api().node_opset(n_); }
  size_t index() const { return api().node_index(n_); }
  size_t num_inputs() const { return api().node_num_inputs(n_); }
  /// Falsy for an omitted optional input.
  Value input(size_t i) const { return Value(h_, api().node_input(n_, i)); }
  size_t num_outputs() const { return api().node_num_outputs(n_); }
  Value output(size_t i) const { return Value(h_, api().node_output(n_, i)); }
  size_t num_attributes() const { return api().node_num_attributes(n_); }
  Attribute attribute(size_t i) const { return Attribute(h_, api().node_attribute(n_, i)); }
  Attribute find_attribute(const std::string& name) const {
    return Attribute(h_, api().node_find_attribute(n_, name.c_str()));
  }
  int64_t attr_int(const std::string& name, int64_t dflt) const {
    Attribute a = find_attribute(name);
    return a && a.type() == KILN_ATTR_INT ? a.as_int() : dflt;
  }
  float attr_float(const std::string& name, float dflt) const {
    Attribute a = find_attribute(name);
    return a && a.type() == KILN_ATTR_FLOAT ? a.as_float() : dflt;
  }
  std::string attr_string(const std::string& name, const std::string& dflt) const {
    Attribute a = find_attribute(name);
    return a && a.type() == KILN_ATTR_STRING ? a.as_string() : dflt;
  }
  /// "Add 'add_1'" for messages.
  std::string label() const { return op_type() + " '" + name() + "'"; }

 private:
  const kiln_host_api_t& api() const { return h_->api(); }
  const Host* h_ = nullptr;
  const kiln_node_t* n_ = nullptr;
};

inline Node Value::producer() const { return Node(h_, api().value_producer(v_)); }
inline std::vector<Node> Value::consumers() const {
  std::vector<Node> out;
  size_t n = api().value_num_consumers(v_);
  for (size_t i = 0; i < n; ++i) out.emplace_back(h_, api().value_consumer(v_, i));
  return out;
}

class Graph {
 public:
  Graph(const Host* host, const kiln_graph_t* g) : h_(host), g_(g) {}
  const kiln_graph_t* raw() const { return g_; }
  const Host& host() const { return *h_; }
  std::string name() const { return h_->api().graph_name(g_); }
  size_t num_nodes() const { return h_->api().graph_num_nodes(g_); }
  Node node(size_t i) const { return Node(h_, h_->api().graph_node(g_, i)); }
  size_t num_inputs() const { return h_->api().graph_num_inputs(g_); }
  Value input(size_t i) const { return Value(h_, h_->api().graph_input(g_, i)); }
  size_t num_outputs() const { return h_->api().graph_num_outputs(g_); }
  Value output(size_t i) const { return Value(h_, h_->api().graph_output(g_, i)); }
  Value find_value(const std::string& name) const { return Value(h_, h_->api().graph_find_value(g_, name.c_str())); }
  int64_t opset(const std::string& domain) const { return h_->api().graph_opset(g_, domain.c_str()); }

 private:
  const Host* h_;
  const kiln_graph_t* g_;
};

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

struct OptionSpec {
  std::string name;
  kiln_option_type_t type = KILN_OPTION_STRING;
  std::string default_value;
  std::string doc;
};

inline const char* option_type_name(int32_t t) {
  switch (t) {
    case KILN_OPTION_BOOL: return "bool";
    case KILN_OPTION_INT: return "int";
    case KILN_OPTION_FLOAT: return "float";
    case KILN_OPTION_STRING: return "string";
    default: return "unknown";
  }
}

inline bool parse_bool(const std::string& s, bool* out) {
  if (s == "true" || s == "1" || s == "on" || s == "yes") return *out = true, true;
  if (s == "false" || s == "0" || s == "off" || s == "no") return *out = false, true;
  return false;
}
inline bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = static_cast<int64_t>(v);
  return true;
}
inline bool parse_float(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

/// Option values checked against a schema; every key of the schema has a value.
class Options {
 public:
  Options() = default;
  explicit Options(std::vector<OptionSpec> schema) : schema_(std::move(schema)) {
    for (const OptionSpec& s : schema_) values_.push_back(s.default_value);
  }

  /// Sets one value; unknown keys and values that do not parse are errors.
  void set(const std::string& key, const std::string& value) {
    size_t i = find(key);
    check_value(schema_[i], value);
    values_[i] = value;
  }
  std::string get(const std::string& key) const { return values_[find(key)]; }
  bool get_bool(const std::string& key) const {
    bool b = false;
    parse_bool(get(key), &b);
    return b;
  }
  int64_t get_int(const std::string& key) const {
    int64_t v = 0;
    parse_int(get(key), &v);
    return v;
  }
  double get_float(const std::string& key) const {
    double v = 0;
    parse_float(get(key), &v);
    return v;
  }
  const std::vector<OptionSpec>& schema() const { return schema_; }

  /// "max_group_size (int), verbose (bool)" or "none".
  std::string known_keys() const {
    std::string s;
    for (const OptionSpec& o : schema_) s += (s.empty() ? "" : ", ") + o.name + " (" + option_type_name(o.type) + ")";
    return s.empty() ? "none" : s;
  }

  static void check_value(const OptionSpec& spec, const std::string& value) {
    bool ok = true;
    bool b;
    int64_t i;
    double d;
    switch (spec.type) {
      case KILN_OPTION_BOOL: ok = parse_bool(value, &b); break;
      case KILN_OPTION_INT: ok = parse_int(value, &i); break;
      case KILN_OPTION_FLOAT: ok = parse_float(value, &d); break;
      default: break;
    }
    if (!ok) {
      fail(KILN_STATUS_INVALID_ARGUMENT, "option '" + spec.name + "' must be " + option_type_name(spec.type) +
                                             ", got '" + value + "'");
    }
  }

 private:
  size_t find(const std::string& key) const {
    for (size_t i = 0; i < schema_.size(); ++i)
      if (schema_[i].name == key) return i;
    fail(KILN_STATUS_INVALID_ARGUMENT, "unknown option '" + key + "'; known options: " + known_keys());
  }
  std::vector<OptionSpec> schema_;
  std::vector<std::string> values_;
};

// ---------------------------------------------------------------------------
// Capability, partition, execution
// ---------------------------------------------------------------------------

/// Claimed nodes of `graph` (claimed[i] for node i) joined into connected
/// groups: two claimed nodes are connected when one reads a value the other
/// produces. Each group lists its nodes in topological order; a group larger
/// than `max_size` (0: no limit) is cut into consecutive runs of at most
/// `max_size` nodes of that order. Groups come in the order of their first
/// node. Convexity is the host's job (it splits a group that is not convex).
/// \since 1.1
inline std::vector<std::vector<size_t>> connected_groups(const Graph& graph, const std::vector<bool>& claimed,
                                                         size_t max_size = 0) {
  const size_t n = graph.num_nodes() < claimed.size() ? graph.num_nodes() : claimed.size();
  std::vector<size_t> parent(n);
  for (size_t i = 0; i < n; ++i) parent[i] = i;
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t i = 0; i < n; ++i) {
    if (!claimed[i]) continue;
    Node node = graph.node(i);
    for (size_t k = 0; k < node.num_inputs(); ++k) {
      Value v = node.input(k);
      Node p = v ? v.producer() : Node();
      if (!p) continue;
      size_t j = p.index();
      if (j < n && claimed[j]) parent[find(i)] = find(j);
    }
  }
  std::vector<std::vector<size_t>> by_root(n), out;
  for (size_t i = 0; i < n; ++i)
    if (claimed[i]) by_root[find(i)].push_back(i);
  std::vector<size_t> order;  // roots in the order of their first node
  std::vector<bool> seen(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (!claimed[i] || seen[find(i)]) continue;
    seen[find(i)] = true;
    order.push_back(find(i));
  }
  for (size_t root : order) {
    const std::vector<size_t>& nodes = by_root[root];
    const size_t step = max_size > 0 ? max_size : nodes.size();
    for (size_t start = 0; start < nodes.size(); start += step) {
      size_t end = start + step < nodes.size() ? start + step : nodes.size();
      out.emplace_back(nodes.begin() + static_cast<std::ptrdiff_t>(start),
                       nodes.begin() + static_cast<std::ptrdiff_t>(end));
    }
  }
  return out;
}

/// What get_capability fills: groups to fuse and declined nodes with reasons.
class Capability {
 public:
  void add_group(std::vector<size_t> nodes) {
    if (!nodes.empty()) groups_.push_back(std::move(nodes));
  }
  /// Claims `node` as a group of its own (a partition of one node). \since 1.1
  void add_single_node_group(size_t node) { groups_.push_back({node}); }
  /// The 1.0 name of add_single_node_group: it never joined a larger group.
  [[deprecated("add_node makes a one-node group: call add_single_node_group")]] void add_node(size_t node) {
    add_single_node_group(node);
  }
  void decline(size_t node, std::string reason) { declined_.emplace_back(node, std::move(reason)); }

  /// Asks `why_not(node)` (a std::string: "" to claim) of every node of
  /// `graph`; declines each node with a non-empty answer, with that answer
  /// as its reason. Returns which nodes are claimable, for
  /// add_connected_groups or your own grouping. \since 1.1
  template <class F>
  std::vector<bool> decline_unsupported(const Graph& graph, F&& why_not) {
    std::vector<bool> ok(graph.num_nodes(), false);
    for (size_t i = 0; i < ok.size(); ++i) {
      std::string reason = why_not(graph.node(i));
      if (reason.empty()) ok[i] = true;
      else decline(i, std::move(reason));
    }
    return ok;
  }
  /// Claims the connected groups of `claimed` (see connected_groups); with
  /// `fuse` false, each claimed node as a group of its own. Returns the
  /// number of groups added. \since 1.1
  size_t add_connected_groups(const Graph& graph, const std::vector<bool>& claimed, size_t max_size = 0,
                              bool fuse = true) {
    const size_t before = groups_.size();
    if (!fuse) {
      for (size_t i = 0; i < claimed.size(); ++i)
        if (claimed[i]) add_single_node_group(i);
    } else {
      for (std::vector<size_t>& g : connected_groups(graph, claimed, max_size)) add_group(std::move(g));
    }
    return groups_.size() - before;
  }
  const std::vector<std::vector<size_t>>& groups() const { return groups_; }
  const std::vector<std::pair<size_t, std::string>>& declined() const { return declined_; }

 private:
  std::vector<std::vector<size_t>> groups_;
  std::vector<std::pair<size_t, std::string>> declined_;
};

/// A group to compile, with the host-chosen boundary.
struct Partition {
  std::string id;
  std::vector<size_t> nodes;  // topological order
  std::vector<Value> inputs;  // execute input order (non-constant values)
  std::vector<Value> outputs; // execute output order
};

/// One compiled_execute call: output allocation and the host's threads.
class ExecContext {
 public:
  ExecContext(const Host* host, kiln_exec_context_t* ctx) : h_(host), ctx_(ctx) {}

  /// Allocates output `index` in host memory and returns its view.
  TensorView allocate_output(size_t index, kiln_dtype_t dtype, const int64_t* dims, size_t rank) {
    kiln_tensor_t t;
    std::memset(&t, 0, sizeof(t));
    t.struct_size = sizeof(t);
    h_->check(h_->api().exec_allocate_output(ctx_, index, dtype, dims, rank, &t));
    return TensorView::from_c(&t);
  }
  TensorView allocate_output(size_t index, kiln_dtype_t dtype, const std::vector<int64_t>& dims) {
    return allocate_output(index, dtype, dims.data(), dims.size());
  }

  int num_threads() const {
    return h_->api().exec_num_threads ? h_->api().exec_num_threads(ctx_) : 1;
  }

  /// True when the run was cancelled or its deadline passed (\since 1.1;
  /// always false on a 1.0 host). Poll it between units of work.
  bool should_cancel() const {
    return h_->api().exec_should_cancel && h_->api().exec_should_cancel(ctx_);
  }
  /// Throws KILN_STATUS_CANCELLED when should_cancel() (the host reports why).
  void check_cancel() const {
    if (should_cancel()) fail(KILN_STATUS_CANCELLED, "cancelled");
  }

  /// Runs f(begin, end) over [0, n) on the host's pool; rethrows the first exception.
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& f) {
    if (n <= 0) return;
    if (!h_->api().parallel_for) {
      f(int64_t{0}, n);
      return;
    }
    struct Call {
      F* f;
      std::mutex mu;
      std::exception_ptr error;
    } call{&f, {}, nullptr};
    h_->api().parallel_for(
        ctx_, n, grain,
        [](void* user, int64_t b, int64_t e) {
          auto* c = static_cast<Call*>(user);
          try {
            (*c->f)(b, e);
          } catch (...) {
            std::lock_guard<std::mutex> lock(c->mu);
            if (!c->error) c->error = std::current_exception();
          }
        },
        &call);
    if (call.error) std::rethrow_exception(call.error);
  }

  /// The scratch the compiled handle declared for `kind`
  /// (Compiled::workspace_bytes), valid until the call's fence is signalled
  /// (a synchronous call: until it returns). {nullptr, 0} when none was
  /// declared, and always on a 1.0 host: then allocate it yourself. \since 1.1
  struct Span {
    void* data = nullptr;
    size_t size = 0;
  };
  Span workspace(kiln_memory_kind_t kind) const {
    Span s;
    if (h_->api().exec_workspace) s.data = h_->api().exec_workspace(ctx_, kind, &s.size);
    if (!s.data) s.size = 0;
    return s;
  }

  /// True when the run is traced (`kiln bench --trace`); false on a 1.0 host. \since 1.1
  bool trace_enabled() const {
    return h_->api().exec_trace_enabled && h_->api().exec_trace_event && h_->api().exec_trace_enabled(ctx_);
  }
  /// Records a slice on the plugin's track `track` (0 compute, 1 copies, ...)
  /// from begin_ns to end_ns on the host's clock (host().now_ns()); nothing
  /// when the run is not traced. Callable from any thread until the call's
  /// fence is signalled. \since 1.1
  void trace_event(const std::string& name, int32_t track, uint64_t begin_ns, uint64_t end_ns) const {
    if (trace_enabled()) h_->api().exec_trace_event(ctx_, name.c_str(), track, begin_ns, end_ns);
  }

  const Host& host() const { return *h_; }
  kiln_exec_context_t* raw() const { return ctx_; }

 private:
  const Host* h_;
  kiln_exec_context_t* ctx_;
};

/// Inputs of one execute call (views built on access; nothing allocated).
class Inputs {
 public:
  Inputs(const kiln_tensor_t* const* t, size_t n) : t_(t), n_(n) {}
  size_t size() const { return n_; }
  TensorView operator[](size_t i) const {
    if (i >= n_) fail(KILN_STATUS_OUT_OF_RANGE, "input " + std::to_string(i) + " of " + std::to_string(n_));
    return TensorView::from_c(t_[i]);
  }

 private:
  const kiln_tensor_t* const* t_;
  size_t n_;
};

}  // namespace kiln::sdk

// InputSpec, check_input: what the SDK checks execute's inputs against.
#include "kiln/c/backend_sdk_inputs.hpp"  // IWYU pragma: export
// Fence, TraceScope, HeldTensor, Copy: the 1.1 device helpers.
#include "kiln/c/backend_sdk_device.hpp"  // IWYU pragma: export

namespace kiln::sdk {

// ---------------------------------------------------------------------------
// The classes a plugin derives from
// ---------------------------------------------------------------------------

class Compiled {
 public:
  virtual ~Compiled() = default;
  /// Runs on `inputs` (partition input order); allocates outputs via ctx.
  /// The SDK has already checked the inputs against input_specs().
  virtual void execute(ExecContext& ctx, const Inputs& inputs) = 0;
  virtual size_t num_inputs() const = 0;
  virtual size_t num_outputs() const = 0;
  /// SERIAL unless overridden: the host then never calls execute concurrently.
  virtual kiln_concurrency_t concurrency() const { return KILN_CONCURRENCY_SERIAL; }
  /// Serialized form (when the plugin supports export).
  virtual std::vector<uint8_t> export_bytes() const {
    fail(KILN_STATUS_UNIMPLEMENTED, "this backend does not export compiled partitions");
  }

  /// What the SDK checks every execute input against (check_input) before
  /// calling execute: recorded from the partition after compile() unless
  /// compile() set them itself. A handle from import_compiled has none (only
  /// the count and each view's own consistency are checked) until
  /// import_compiled calls set_input_specs. \since 1.1
  const std::vector<InputSpec>& input_specs() const { return input_specs_; }
  void set_input_specs(std::vector<InputSpec> specs) {
    input_specs_ = std::move(specs);
    has_input_specs_ = true;
  }
  bool has_input_specs() const { return has_input_specs_; }

  // --- device plugins (\since 1.1; every default is the 1.0 behaviour) ----
  /// Per input (num_inputs() entries) the memory kind execute wants it in;
  /// empty: all host.
  virtual std::vector<kiln_memory_kind_t> input_memory_kinds() const { return {}; }
  /// Per output (num_outputs() entries) the kind allocate_output hands out;
  /// empty: all host.
  virtual std::vector<kiln_memory_kind_t> output_memory_kinds() const { return {}; }
  /// Scratch per call, bytes per memory kind (ExecContext::workspace).
  virtual std::array<uint64_t, KILN_MEMORY_KIND_COUNT> workspace_bytes() const { return {}; }
  /// (input index, output index) pairs whose buffers may be one.
  virtual std::vector<std::pair<size_t, size_t>> inplace_pairs() const { return {}; }
  /// Constants (value names) copied into memory of the handle's own.
  virtual std::vector<std::string> owned_constants() const { return {}; }
  /// True: the host may call execute_async (KILN_COMPILED_ASYNC).
  virtual bool is_async() const { return false; }
  /// Queues the work and returns; signals `done` (done.signal(), or
  /// done.fail(...)) once every output is written. Obtain every output
  /// (ctx.allocate_output) before returning. `ctx` and the inputs' memory
  /// stay valid until `done` completes, the Inputs views only during the
  /// call: keep hold(inputs). Throw only before handing `done` to queued
  /// work: a throw means nothing was queued. The default runs execute() and
  /// signals.
  virtual void execute_async(ExecContext& ctx, const Inputs& inputs, Fence done) {
    execute(ctx, inputs);
    done.signal();
  }

 private:
  std::vector<InputSpec> input_specs_;
  bool has_input_specs_ = false;
};

class Instance {
 public:
  explicit Instance(Options options) : options_(std::move(options)) {}
  virtual ~Instance() = default;

  /// Fill `cap` with the groups to claim and reasons for declined nodes.
  virtual void get_capability(const Graph& graph, Capability& cap) = 0;
  /// Compile a group; throw for one it would not claim.
  virtual std::unique_ptr<Compiled> compile(const Graph& graph, const Partition& partition) = 0;
  /// Rebuild from export_bytes() (when the plugin supports export).
  virtual std::unique_ptr<Compiled> import_compiled(const uint8_t*, size_t) {
    fail(KILN_STATUS_UNIMPLEMENTED, "this backend does not import compiled partitions");
  }
  /// Called after Plugin::validate_options accepted the new value of an
  /// option of the schema (a failed validation changes nothing), and for
  /// keys outside the schema, which are errors unless you override this.
  virtual void set_property(const std::string& key, const std::string& value) { options_.set(key, value); }
  virtual std::string get_property(const std::string& key) { return options_.get(key); }

  // --- device memory (\since 1.1; published when Plugin::device_memory()) --
  /// `size` bytes of `kind` (never HOST) on device `device`, aligned to
  /// `alignment` (a power of two). Throw RESOURCE_EXHAUSTED when out of memory.
  virtual void* allocate(kiln_memory_kind_t kind, uint32_t device, size_t size, size_t alignment) {
    (void)kind, (void)device, (void)size, (void)alignment;
    fail(KILN_STATUS_UNIMPLEMENTED, "this backend allocates no device memory");
  }
  /// Frees memory from allocate (never NULL).
  virtual void deallocate(kiln_memory_kind_t kind, void* ptr) noexcept { (void)kind, (void)ptr; }
  /// Performs the copies; with an empty `done` before returning, otherwise
  /// it may queue them and signal `done` when all are done (in order with
  /// the instance's executions).
  virtual void copy(const std::vector<Copy>& copies, Fence done) {
    (void)copies, (void)done;
    fail(KILN_STATUS_UNIMPLEMENTED, "this backend copies no device memory");
  }

  const Options& options() const { return options_; }

 protected:
  Options options_;
};

class Plugin {
 public:
  struct Info {
    std::string name;
    std::string version;
    std::string vendor;
    std::string vendor_sdk_version;
    std::string description;
    int32_t priority = 0;
  };
  struct Device {
    std::string name;
    kiln_device_kind_t kind = KILN_DEVICE_CPU;
    std::string description;
    // \since 1.1; 0 / all-zero / "" mean unknown.
    uint32_t vendor_id = 0;
    uint32_t device_id = 0;
    std::array<uint8_t, 16> uuid{};
    uint64_t memory_bytes = 0;
    std::string driver_version{};
  };
  struct CustomOp {
    std::string domain;
    std::string op_type;
    int32_t since_version = 1;
    std::string doc;
  };

  virtual ~Plugin() = default;
  /// Called once, inside the entry call (every time the library is loaded,
  /// also by `kiln backends`, before the host asks unavailable_reason()):
  /// keep it cheap and never initialize a device here.
  virtual Info info() const = 0;
  /// "" when the plugin can run here; otherwise why not and what to install.
  virtual std::string unavailable_reason() { return {}; }
  /// Called once, when the host first asks for devices, which it does after
  /// unavailable_reason(): devices() may use a vendor library that
  /// unavailable_reason() loaded (\since 1.1; 1.0 called it at entry).
  virtual std::vector<Device> devices() const { return {{"cpu", KILN_DEVICE_CPU, "the host CPU"}}; }
  virtual std::vector<OptionSpec> option_schema() const { return {}; }
  virtual std::vector<CustomOp> custom_ops() const { return {}; }
  /// Options are already checked against option_schema() and validate_options().
  virtual std::unique_ptr<Instance> create_instance(size_t device_index, Options options) = 0;
  /// Throw (INVALID_ARGUMENT, naming the option) when option values that each
  /// parse as their type are still unacceptable (a range, a combination).
  /// The SDK calls it before create_instance and, on the would-be options,
  /// before set_property changes anything, so no rollback is needed. \since 1.1
  virtual void validate_options(const Options& options) const { (void)options; }
  /// True: publish instance_alloc / instance_free / instance_copy
  /// (Instance::allocate, deallocate, copy). \since 1.1
  virtual bool device_memory() const { return false; }
  /// Return true and override check_compiled and Compiled::export_bytes /
  /// Instance::import_compiled to support export/import.
  virtual bool supports_export() const { return false; }
  /// Throws when `bytes` cannot be imported here; must not touch a device.
  virtual void check_compiled(const uint8_t*, size_t) const {
    fail(KILN_STATUS_UNIMPLEMENTED, "this backend does not import compiled partitions");
  }
  /// Return true when the plugin (or a vendor library it loads) keeps threads
  /// or callbacks alive after it is released: the host then never unloads
  /// the library (KILN_PLUGIN_NO_UNLOAD). \since 1.1
  virtual bool no_unload() const { return false; }
  /// Return true when instances may be shared by several sessions of one
  /// registry (KILN_PLUGIN_SHARED_INSTANCES: instance-level calls come from
  /// several threads, never at once). \since 1.1
  virtual bool shared_instances() const { return false; }

  /// The host (valid from construction's end until destruction).
  const Host& host() const { return *host_; }

 private:
  template <class P>
  friend struct PluginEntry;
  friend struct Glue;
  const Host* host_ = nullptr;
};

}  // namespace kiln::sdk

// The trampolines behind KILN_BACKEND_PLUGIN.
#include "kiln/c/backend_sdk_glue.hpp"  // IWYU pragma: export

/// Exports the plugin entry for `PluginClass` (default-constructible, derived
/// from kiln::sdk::Plugin). Use once per shared library.
#define KILN_BACKEND_PLUGIN(PluginClass)                                                                 \
  extern "C" KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(                                      \
      const kiln_backend_entry_args_t* args, const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) { \
    return ::kiln::sdk::PluginEntry<PluginClass>::entry(args, out_api, out_plugin);                      \
  }

/// Defines a non-exported entry function `fn_name` (a kiln_backend_entry_fn)
/// for `PluginClass`, for plugins linked into the host (tests, built-ins).
#define KILN_BACKEND_DEFINE_ENTRY(fn_name, PluginClass)                                                 \
  static kiln_status_t* fn_name(const kiln_backend_entry_args_t* args, const kiln_backend_api_t** out_api, \
                                kiln_plugin_t** out_plugin) {                                           \
    return ::kiln::sdk::PluginEntry<PluginClass>::entry(args, out_api, out_plugin);                     \
  }

#endif  // KILN_C_BACKEND_SDK_HPP_
