// Kiln backend SDK, part 3: what a device plugin needs from ABI 1.1 beyond
// the compiled info (memory kinds, workspace and in-place pairs are
// Compiled's overrides, workspace and trace events ExecContext's methods):
// a fence that is always signalled exactly once, a trace scope, and tensor
// views an asynchronous execute may keep. Included by kiln/c/backend_sdk.hpp.
//
// Every call into a 1.1 host entry is guarded: on a 1.0 host (whose table
// the SDK zero-extends) the entries are NULL and these helpers do nothing.
//
// \since 1.1
#ifndef KILN_C_BACKEND_SDK_DEVICE_HPP_
#define KILN_C_BACKEND_SDK_DEVICE_HPP_

#ifndef KILN_C_BACKEND_SDK_HPP_
#error "include kiln/c/backend_sdk.hpp, not this file"
#endif

namespace kiln::sdk {

/// The completion of one asynchronous call: the host's fence and the value
/// to signal. Copies share one completion; the first signal() or fail()
/// completes it and later ones do nothing, and when the last copy goes away
/// uncompleted it fails the fence ("dropped without signalling"), so the
/// host's waiters are never left waiting on a forgotten fence. Callable from
/// any thread. \since 1.1
class Fence {
 public:
  Fence() = default;
  // Not std::make_shared: its type tag is an STB_GNU_UNIQUE symbol, which
  // would keep a plugin that exports it from ever unloading.
  Fence(const Host* host, kiln_fence_t* fence, uint64_t value) : s_(new State(host, fence, value)) {}

  /// Completes the work: the fence reaches value(). False when it was
  /// already completed (or there is no fence).
  bool signal() noexcept { return s_ && s_->complete(nullptr); }
  /// Completes the work with an error: waiters get this status.
  bool fail(kiln_status_code_t code, const std::string& message) noexcept {
    return s_ && s_->complete(s_->host->make_status(code, message.c_str()));
  }
  bool completed() const noexcept { return !s_ || s_->done.load(std::memory_order_acquire); }
  explicit operator bool() const noexcept { return s_ != nullptr; }
  kiln_fence_t* raw() const noexcept { return s_ ? s_->fence : nullptr; }
  uint64_t value() const noexcept { return s_ ? s_->value : 0; }

 private:
  friend struct Glue;
  struct State {
    State(const Host* h, kiln_fence_t* f, uint64_t v) : host(h), fence(f), value(v) {}
    ~State() {
      if (!done.load(std::memory_order_acquire)) {
        complete(host->make_status(KILN_STATUS_INTERNAL, ("the plugin dropped the fence for value " +
                                                          std::to_string(value) + " without signalling it").c_str()));
      }
    }
    bool complete(kiln_status_t* error) noexcept {
      if (done.exchange(true, std::memory_order_acq_rel)) {
        if (error) host->api().status_release(error);
        return false;
      }
      if (host->api().fence_signal) host->api().fence_signal(fence, value, error);
      else if (error) host->api().status_release(error);
      return true;
    }
    const Host* host;
    kiln_fence_t* fence;
    uint64_t value;
    std::atomic<bool> done{false};
  };
  /// The SDK's part when the plugin's call failed: nothing was queued, so
  /// the fence must not be signalled by anyone.
  void disarm() noexcept {
    if (s_) s_->done.store(true, std::memory_order_release);
  }
  std::shared_ptr<State> s_;
};

/// Records one trace slice from construction to destruction (or end()), on
/// the plugin's track `track`, when the run is traced; costs one check
/// otherwise. In asynchronous work, end() it before signalling the call's
/// fence: the context is valid only until then. \since 1.1
class TraceScope {
 public:
  TraceScope(const ExecContext& ctx, std::string name, int32_t track = 0)
      : ctx_(ctx), name_(std::move(name)), track_(track), on_(ctx.trace_enabled()),
        begin_(on_ ? ctx.host().now_ns() : 0) {}
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
  ~TraceScope() { end(); }
  void end() noexcept {
    if (!on_) return;
    on_ = false;
    try {
      ctx_.trace_event(name_, track_, begin_, ctx_.host().now_ns());
    } catch (...) {
    }
  }

 private:
  ExecContext ctx_;
  std::string name_;
  int32_t track_;
  bool on_;
  uint64_t begin_;
};

/// A tensor view that owns its dims, for work that outlives the call: the
/// host keeps an asynchronous call's input memory valid until its fence is
/// signalled, but not the view structs (Inputs). \since 1.1
struct HeldTensor {
  int32_t dtype = KILN_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  void* data = nullptr;
  size_t nbytes = 0;
  int32_t memory_kind = KILN_MEMORY_HOST;
  uint32_t device_index = 0;

  static HeldTensor of(const TensorView& v) {
    return {v.dtype, v.shape(), v.data, v.nbytes, v.memory_kind, v.device_index};
  }
  TensorView view() const {
    TensorView v;
    v.dtype = dtype;
    v.dims = dims.data();
    v.rank = dims.size();
    v.data = data;
    v.nbytes = nbytes;
    v.memory_kind = memory_kind;
    v.device_index = device_index;
    return v;
  }
};

/// Every input of `inputs` as a HeldTensor.
inline std::vector<HeldTensor> hold(const Inputs& inputs) {
  std::vector<HeldTensor> out;
  out.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) out.push_back(HeldTensor::of(inputs[i]));
  return out;
}

/// One transfer of Instance::copy (kiln_copy_t without the version field).
struct Copy {
  const void* src = nullptr;
  int32_t src_kind = KILN_MEMORY_HOST;
  uint32_t src_device = 0;
  void* dst = nullptr;
  int32_t dst_kind = KILN_MEMORY_HOST;
  uint32_t dst_device = 0;
  size_t bytes = 0;
};

}  // namespace kiln::sdk

#endif  // KILN_C_BACKEND_SDK_DEVICE_HPP_
