#include "runtime/backends/host.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/backends/fence.h"
#include "runtime/backends/graph_view.h"

// A status: a code and a malloc'd message. The magic number lets the host
// tell its statuses from garbage a broken plugin might return.
struct kiln_status {
  uint64_t magic;
  kiln_status_code_t code;
  char* message;
};

namespace kiln::runtime {
namespace {

constexpr uint64_t kStatusMagic = 0x5441545354534b4cull;     // "LKSTSTAT"
constexpr size_t kMaxAlignment = 4096;

// Returned when even a status cannot be allocated; never freed.
char g_oom_message[] = "out of memory (while creating a status)";
kiln_status g_oom_status{kStatusMagic, KILN_STATUS_INTERNAL, g_oom_message};

constexpr size_t kRecentFrees = 1024;

// The largest kiln_status_code_t this host knows.
constexpr int32_t kMaxStatusCode = KILN_STATUS_RESOURCE_EXHAUSTED;

kiln_status_t* status_create(int32_t code, const char* message) noexcept {
  const char* m = message ? message : "";
  // An error status must be an error, with a code the host knows: anything
  // else is a bug in the plugin, reported with the code it passed.
  char prefix[96] = "";
  if (code <= KILN_STATUS_OK || code > kMaxStatusCode) {
    std::snprintf(prefix, sizeof(prefix), "status_create got code %d, which is not an error code; message: ",
                  static_cast<int>(code));
    code = KILN_STATUS_INTERNAL;
  }
  auto* s = static_cast<kiln_status*>(std::malloc(sizeof(kiln_status)));
  if (!s) return &g_oom_status;
  const size_t np = std::strlen(prefix), n = std::strlen(m);
  s->message = static_cast<char*>(std::malloc(np + n + 1));
  if (!s->message) {
    std::free(s);
    return &g_oom_status;
  }
  std::memcpy(s->message, prefix, np);
  std::memcpy(s->message + np, m, n + 1);
  s->magic = kStatusMagic;
  s->code = static_cast<kiln_status_code_t>(code);
  return s;
}

void status_release(kiln_status_t* s) noexcept {
  if (!s || s == &g_oom_status || s->magic != kStatusMagic) return;
  s->magic = 0;
  std::free(s->message);
  std::free(s);
}

kiln_status_code_t status_code(const kiln_status_t* s) noexcept {
  if (!s) return KILN_STATUS_OK;
  return s->magic == kStatusMagic ? s->code : KILN_STATUS_INTERNAL;
}

const char* status_message(const kiln_status_t* s) noexcept {
  if (!s) return "";
  return s->magic == kStatusMagic ? s->message : "(invalid status object)";
}

void* host_alloc(kiln_host_t* host, size_t size, size_t alignment) noexcept {
  if (size == 0 || !host) return nullptr;
  if (alignment == 0) alignment = 64;
  if ((alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) return nullptr;
  const size_t align = alignment < 64 ? 64 : alignment;
  if (size > SIZE_MAX - align) return nullptr;
  void* p = nullptr;
  if (posix_memalign(&p, align, size) != 0 || !p) return nullptr;
  try {
    std::lock_guard<std::mutex> lock(host->blocks_mu);
    host->blocks.emplace(p, size);
  } catch (...) {
    std::free(p);
    return nullptr;
  }
  host->live_blocks.fetch_add(1, std::memory_order_relaxed);
  host->live_bytes.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed);
  host->total_blocks.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void free_block(kiln_host_t* host, void* ptr) noexcept {
  if (!ptr || !host) return;
  size_t size = 0;
  bool known = false, twice = false;
  {
    std::lock_guard<std::mutex> lock(host->blocks_mu);
    auto it = host->blocks.find(ptr);
    if (it != host->blocks.end()) {
      known = true;
      size = it->second;
      host->blocks.erase(it);
      try {
        if (host->recent_frees.size() < kRecentFrees) host->recent_frees.push_back(ptr);
        else host->recent_frees[host->recent_next++ % kRecentFrees] = ptr;
      } catch (...) {
      }
    } else {
      for (const void* f : host->recent_frees) twice |= f == ptr;
    }
  }
  if (known) {
    host->live_blocks.fetch_sub(1, std::memory_order_relaxed);
    host->live_bytes.fetch_sub(static_cast<int64_t>(size), std::memory_order_relaxed);
    std::free(ptr);
  } else if (twice) {
    host->double_frees.fetch_add(1, std::memory_order_relaxed);
    host->log(KILN_LOG_ERROR, "memory freed twice (ignored)");
  } else {
    host->foreign_frees.fetch_add(1, std::memory_order_relaxed);
    host->log(KILN_LOG_ERROR, "memory not allocated with the host allocator was handed to the host (leaked, not freed)");
  }
}

// An unknown level (the ABI passes it as int32_t) logs as an error.
kiln_log_level_t log_level_of(int32_t level) {
  return level >= KILN_LOG_DEBUG && level <= KILN_LOG_ERROR ? static_cast<kiln_log_level_t>(level) : KILN_LOG_ERROR;
}

void host_log(kiln_host_t* host, int32_t level, const char* message) noexcept {
  if (!host) return;
  try {
    host->log(log_level_of(level), message ? message : "");
  } catch (...) {
  }
}

bool host_log_enabled(kiln_host_t* host, int32_t level) noexcept {
  return host && log_level_of(level) >= host->log_level;
}

int32_t exec_num_threads(kiln_exec_context_t* ctx) noexcept {
  return ctx && ctx->pool ? ctx->pool->num_threads() : 1;
}

void host_parallel_for(kiln_exec_context_t* ctx, int64_t n, int64_t grain, kiln_range_fn fn, void* user) noexcept {
  if (!fn || n <= 0) return;
  if (grain < 1) grain = 1;
  auto body = [fn, user](int64_t b, int64_t e) { fn(user, b, e); };
  kiln::parallel_for(ctx ? ctx->pool : nullptr, n, grain, body);
}

kiln_status_t* exec_allocate_output(kiln_exec_context_t* ctx, size_t index, int32_t dtype,
                                    const int64_t* dims, size_t rank, kiln_tensor_t* out) noexcept {
  try {
    if (!ctx || !ctx->outputs) return status_create(KILN_STATUS_FAILED_PRECONDITION, "allocate_output: no execute context (called outside compiled_execute)");
    if (!out) return status_create(KILN_STATUS_INVALID_ARGUMENT, "allocate_output: out_tensor is NULL");
    if (out->struct_size < offsetof(kiln_tensor_t, nbytes) + sizeof(size_t)) {
      return make_c_status(invalid_argument("allocate_output: out_tensor.struct_size ", out->struct_size,
                                            " is smaller than a 1.0 kiln_tensor_t"));
    }
    const size_t n = ctx->outputs->num_outputs();
    if (index >= n) {
      return make_c_status(make_status(StatusCode::kOutOfRange, "allocate_output: output ", index,
                                       " does not exist; the partition has ", n, " outputs"));
    }
    DType dt = dtype_from_c(dtype);
    if (dt == DType::kUndefined || dt == DType::kString) {
      return make_c_status(invalid_argument("allocate_output: output ", index, " has dtype ", dtype,
                                            ", which cannot cross the backend ABI"));
    }
    if (rank > 64) return make_c_status(invalid_argument("allocate_output: rank ", rank, " is larger than 64"));
    if (rank > 0 && !dims) return make_c_status(invalid_argument("allocate_output: dims is NULL for rank ", rank));
    Shape shape;
    shape.resize(rank);
    int64_t numel = 1;
    for (size_t i = 0; i < rank; ++i) {
      if (dims[i] < 0) {
        return make_c_status(invalid_argument("allocate_output: output ", index, " dim ", i, " is ", dims[i]));
      }
      if (dims[i] > 0 && numel > (int64_t{1} << 50) / dims[i]) {
        return make_c_status(invalid_argument("allocate_output: output ", index, " is too large"));
      }
      numel *= dims[i];
      shape[i] = dims[i];
    }
    Result<Tensor*> t = ctx->outputs->allocate(index, dt, shape);
    if (!t.is_ok()) return make_c_status(t.status());
    // Fill the caller's struct without touching its struct_size.
    const uint32_t caller_size = out->struct_size;
    Status st = tensor_view(**t, out, caller_size);
    out->struct_size = caller_size;
    // A device output's view says so (only a 1.1 caller's struct has the member).
    if (st.is_ok() && KILN_ABI_HAS(kiln_tensor_t, memory_kind, caller_size))
      out->memory_kind = ctx->outputs->memory_kind(index);
    return make_c_status(st);
  } catch (const std::bad_alloc&) {
    return status_create(KILN_STATUS_INTERNAL, "out of memory in allocate_output");
  } catch (...) {
    return status_create(KILN_STATUS_INTERNAL, "unexpected exception in allocate_output");
  }
}

bool exec_should_cancel(kiln_exec_context_t* ctx) noexcept {
  return ctx && ctx->run_options && ctx->run_options->stop_requested();
}

void* exec_workspace(kiln_exec_context_t* ctx, int32_t memory_kind, size_t* out_size) noexcept {
  const bool known = ctx && memory_kind >= 0 && memory_kind < KILN_MEMORY_KIND_COUNT;
  void* p = known ? ctx->workspace[memory_kind] : nullptr;
  if (out_size) *out_size = p ? ctx->workspace_bytes[memory_kind] : 0;
  return p;
}

bool exec_trace_enabled(kiln_exec_context_t* ctx) noexcept { return ctx && ctx->trace; }

void exec_trace_event(kiln_exec_context_t* ctx, const char* name, int32_t track, uint64_t begin_ns,
                      uint64_t end_ns) noexcept {
  if (!ctx || !ctx->trace) return;
  try {
    ctx->trace->event(name ? name : "", track, begin_ns, end_ns < begin_ns ? begin_ns : end_ns);
  } catch (...) {
  }
}

uint64_t host_trace_now_ns() noexcept { return trace_now_ns(); }

kiln_host_api_t make_table() {
  kiln_host_api_t t;
  std::memset(&t, 0, sizeof(t));
  t.header.struct_size = sizeof(kiln_host_api_t);
  t.header.abi_major = KILN_BACKEND_ABI_MAJOR;
  t.header.abi_minor = KILN_BACKEND_ABI_MINOR;
  t.status_create = &status_create;
  t.status_release = &status_release;
  t.status_code = &status_code;
  t.status_message = &status_message;
  t.alloc = &host_alloc;
  t.free = &free_block;
  t.log = &host_log;
  t.log_enabled = &host_log_enabled;
  t.exec_num_threads = &exec_num_threads;
  t.parallel_for = &host_parallel_for;
  t.exec_allocate_output = &exec_allocate_output;
  fill_graph_view_functions(t);
  t.exec_should_cancel = &exec_should_cancel;
  t.fence_signal = &fence_signal_c;
  t.fence_wait = &fence_wait_c;
  t.fence_value = &fence_value_c;
  t.exec_workspace = &exec_workspace;
  t.exec_trace_enabled = &exec_trace_enabled;
  t.exec_trace_event = &exec_trace_event;
  t.trace_now_ns = &host_trace_now_ns;
  // value_constant_info: graph_view.cpp's (fill_graph_view_functions), with the shared-weights work.
  return t;
}

}  // namespace

kiln_log_level_t default_log_level() {
  const char* e = std::getenv("KILN_LOG_LEVEL");
  if (!e) return KILN_LOG_WARNING;
  std::string v(e);
  if (v == "debug") return KILN_LOG_DEBUG;
  if (v == "info") return KILN_LOG_INFO;
  if (v == "error") return KILN_LOG_ERROR;
  return KILN_LOG_WARNING;
}

const kiln_host_api_t* host_api() {
  static const kiln_host_api_t table = make_table();
  return &table;
}

Status take_status(kiln_status_t* s, std::string_view context) {
  if (!s) return Status::ok();
  if (s != &g_oom_status && s->magic != kStatusMagic) {
    return Status(StatusCode::kInternal, std::string(context) + (context.empty() ? "" : ": ") +
                                             "the plugin returned a status that status_create did not make");
  }
  auto code = static_cast<StatusCode>(s->code);
  if (s->code < KILN_STATUS_INVALID_ARGUMENT || s->code > kMaxStatusCode) code = StatusCode::kInternal;
  std::string message = s->message;
  status_release(s);
  if (message.empty()) message = "(no message)";
  Status st(code, std::move(message));
  return context.empty() ? std::move(st) : std::move(st).with_context(context);
}

void host_free(kiln_host* host, void* ptr) { free_block(host, ptr); }

uint64_t trace_now_ns() {
  // steady_clock is CLOCK_MONOTONIC on Linux: the clock the ABI names.
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

size_t host_free_all(kiln_host* host) {
  if (!host) return 0;
  std::lock_guard<std::mutex> lock(host->blocks_mu);
  const size_t n = host->blocks.size();
  for (const auto& [p, size] : host->blocks) {
    std::free(const_cast<void*>(p));
    host->live_blocks.fetch_sub(1, std::memory_order_relaxed);
    host->live_bytes.fetch_sub(static_cast<int64_t>(size), std::memory_order_relaxed);
  }
  host->blocks.clear();
  return n;
}

size_t host_block_size(kiln_host* host, const void* ptr) {
  if (!ptr || !host) return 0;
  std::lock_guard<std::mutex> lock(host->blocks_mu);
  auto it = host->blocks.find(ptr);
  return it == host->blocks.end() ? 0 : it->second;
}

kiln_status_t* make_c_status(const Status& st) {
  if (st.is_ok()) return nullptr;
  return status_create(static_cast<kiln_status_code_t>(st.code()), st.message().c_str());
}

DType dtype_from_c(int32_t dtype) {
  if (dtype <= 0 || dtype >= kNumDTypes) return DType::kUndefined;
  return static_cast<DType>(dtype);
}

kiln_dtype_t dtype_to_c(DType dtype) { return static_cast<kiln_dtype_t>(static_cast<int>(dtype)); }

Status tensor_view(const Tensor& t, kiln_tensor_t* out, size_t capacity) {
  if (t.dtype() == DType::kString) return invalid_argument("string tensors cannot cross the backend ABI");
  out->struct_size = static_cast<uint32_t>(std::min(capacity, sizeof(kiln_tensor_t)));
  out->dtype = static_cast<int32_t>(t.dtype());
  out->rank = t.rank();
  out->dims = t.shape().data();
  out->data = const_cast<void*>(t.raw_data());
  out->nbytes = t.nbytes();
  // 1.1 members only where the caller's struct has them (a 1.0 plugin's is shorter).
  if (KILN_ABI_HAS(kiln_tensor_t, memory_kind, capacity)) out->memory_kind = KILN_MEMORY_HOST;
  if (KILN_ABI_HAS(kiln_tensor_t, device_index, capacity)) out->device_index = 0;
  return Status::ok();
}

}  // namespace kiln::runtime

void kiln_host::log(kiln_log_level_t level, const std::string& message) {
  if (level < log_level) return;
  if (sink) {
    sink(level, name, message);
    return;
  }
  static const char* const names[] = {"debug", "info", "warning", "error"};
  const char* lv = level >= KILN_LOG_DEBUG && level <= KILN_LOG_ERROR ? names[level] : "log";
  std::fprintf(stderr, "kiln: backend '%s' %s: %s\n", name.c_str(), lv, message.c_str());
}
