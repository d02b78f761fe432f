#include "simdev_harness.h"

#include <time.h>

#include <chrono>

namespace kiln::simdev_test {
namespace {

TestCtx* ctx_of(kiln_exec_context_t* c) { return reinterpret_cast<TestCtx*>(c); }
TestFence* fence_of(const kiln_fence_t* f) { return reinterpret_cast<TestFence*>(const_cast<kiln_fence_t*>(f)); }

kiln_status_t* allocate_output(kiln_exec_context_t* c, size_t index, int32_t dtype, const int64_t* dims, size_t rank,
                               kiln_tensor_t* out) {
  TestCtx* ctx = ctx_of(c);
  const kiln_host_api_t* api = runtime::host_api();
  if (dtype != KILN_DTYPE_FLOAT32) return api->status_create(KILN_STATUS_INVALID_ARGUMENT, "test host: float32 only");
  int64_t n = 1;
  for (size_t i = 0; i < rank; ++i) n *= dims[i];
  if (ctx->outputs.size() <= index) {
    ctx->outputs.resize(index + 1, nullptr);
    ctx->output_dims.resize(index + 1);
    ctx->host_outputs.resize(index + 1);
  }
  ctx->output_dims[index].assign(dims, dims + rank);
  auto keep = std::make_shared<std::vector<int64_t>>(dims, dims + rank);
  ctx->dims_keep.push_back(keep);
  void* data = nullptr;
  if (index == 0 && ctx->inplace_output) {
    data = ctx->inplace_output;
  } else if (ctx->output_kind == KILN_MEMORY_HOST) {
    ctx->host_outputs[index].assign(static_cast<size_t>(n), -7.f);
    data = ctx->host_outputs[index].data();
  } else {
    data = ctx->harness->alloc(ctx->instance, ctx->output_kind, static_cast<size_t>(n) * 4);
  }
  ctx->outputs[index] = data;
  *out = view(data, *keep, ctx->inplace_output && index == 0 ? KILN_MEMORY_DEVICE : ctx->output_kind);
  out->dims = keep->data();
  return nullptr;
}

bool should_cancel(kiln_exec_context_t* c) { return c && ctx_of(c)->cancel.load(); }
int32_t num_threads(kiln_exec_context_t*) { return 1; }
void parallel_for(kiln_exec_context_t*, int64_t n, int64_t, kiln_range_fn fn, void* user) {
  if (n > 0) fn(user, 0, n);
}

void fence_signal(kiln_fence_t* f, uint64_t value, kiln_status_t* error) {
  TestFence* fence = fence_of(f);
  int32_t code = KILN_STATUS_OK;
  std::string message = take(error, &code);
  std::lock_guard<std::mutex> lock(fence->mu);
  ++fence->signals;
  fence->order.push_back(value);
  if (code != KILN_STATUS_OK && fence->error_code == KILN_STATUS_OK) {
    fence->error_code = code;
    fence->error = message;
  }
  if (value > fence->value) fence->value = value;
  fence->cv.notify_all();
}

kiln_status_t* fence_wait(kiln_fence_t* f, uint64_t value, uint64_t timeout_ns) {
  TestFence* fence = fence_of(f);
  std::unique_lock<std::mutex> lock(fence->mu);
  auto ready = [&] { return fence->value >= value; };
  if (timeout_ns == UINT64_MAX) {
    fence->cv.wait(lock, ready);
  } else if (!fence->cv.wait_for(lock, std::chrono::nanoseconds(timeout_ns), ready)) {
    return runtime::host_api()->status_create(KILN_STATUS_DEADLINE_EXCEEDED, "test fence: timeout");
  }
  if (fence->error_code != KILN_STATUS_OK) return runtime::host_api()->status_create(fence->error_code, fence->error.c_str());
  return nullptr;
}

uint64_t fence_value_fn(const kiln_fence_t* f) {
  if (!f) return 0;
  TestFence* fence = fence_of(f);
  std::lock_guard<std::mutex> lock(fence->mu);
  return fence->value;
}

void* exec_workspace(kiln_exec_context_t* c, int32_t kind, size_t* out_size) {
  TestCtx* ctx = ctx_of(c);
  ++ctx->workspace_calls;
  *out_size = kind == KILN_MEMORY_DEVICE && ctx->workspace ? ctx->workspace_size : 0;
  return kind == KILN_MEMORY_DEVICE ? ctx->workspace : nullptr;
}

bool trace_enabled(kiln_exec_context_t* c) { return c && ctx_of(c)->trace; }
void trace_event(kiln_exec_context_t* c, const char* name, int32_t track, uint64_t b, uint64_t e) {
  TestCtx* ctx = ctx_of(c);
  std::lock_guard<std::mutex> lock(ctx->trace_mu);
  ctx->events.push_back({name, track, b, e});
}
uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

const kiln_host_api_t* test_host_api() {
  static const kiln_host_api_t table = [] {
    kiln_host_api_t t = *runtime::host_api();
    t.exec_allocate_output = &allocate_output;
    t.exec_should_cancel = &should_cancel;
    t.exec_num_threads = &num_threads;
    t.parallel_for = &parallel_for;
    t.fence_signal = &fence_signal;
    t.fence_wait = &fence_wait;
    t.fence_value = &fence_value_fn;
    t.exec_workspace = &exec_workspace;
    t.exec_trace_enabled = &trace_enabled;
    t.exec_trace_event = &trace_event;
    t.trace_now_ns = &now_ns;
    return t;
  }();
  return &table;
}

}  // namespace

kiln_tensor_t view(void* data, const std::vector<int64_t>& dims, int32_t kind) {
  kiln_tensor_t t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.dtype = KILN_DTYPE_FLOAT32;
  t.rank = dims.size();
  t.dims = dims.data();
  t.data = data;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  t.nbytes = static_cast<size_t>(n) * 4;
  t.memory_kind = kind;
  return t;
}

Harness::Harness() {
  host_ctx_.name = "simdev";
  dl_ = dlopen(KILN_SIMDEV_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (!dl_) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  auto entry = reinterpret_cast<kiln_backend_entry_fn>(dlsym(dl_, KILN_BACKEND_ENTRY_SYMBOL));
  if (!entry) throw std::runtime_error("no entry symbol");
  kiln_backend_entry_args_t args{sizeof(args), 1, 0, KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR, test_host_api(),
                                 &host_ctx_};
  std::string err = take(entry(&args, &api_, &plugin_));
  if (!err.empty()) throw std::runtime_error("entry: " + err);
}

Harness::~Harness() {
  for (kiln_compiled_t* c : compiled_) api_->compiled_release(c);
  for (auto& [inst, p] : device_blocks_) api_->instance_free(inst, KILN_MEMORY_DEVICE, p);
  for (kiln_instance_t* i : instances_) api_->instance_release(i);
  api_->plugin_release(plugin_);
  dlclose(dl_);
}

kiln_instance_t* Harness::instance(const std::vector<std::pair<std::string, std::string>>& options) {
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : options) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  kiln_instance_t* inst = nullptr;
  std::string err = take(api_->instance_create(plugin_, 0, keys.data(), values.data(), keys.size(), &inst));
  if (!err.empty()) throw std::runtime_error("instance_create: " + err);
  instances_.push_back(inst);
  return inst;
}

kiln_compiled_t* Harness::compile(kiln_instance_t* inst, const ir::Graph& g) {
  auto keep = std::make_shared<ir::Graph>(g);
  graphs_.push_back(keep);
  std::vector<int32_t> offered;
  for (size_t i = 0; i < keep->nodes.size(); ++i) offered.push_back(static_cast<int32_t>(i));
  std::unique_ptr<kiln_graph> v = runtime::make_graph_view(*keep, nullptr, offered, {});
  std::vector<size_t> nodes(offered.begin(), offered.end());
  std::vector<const kiln_value_t*> ins, outs;
  for (ir::ValueId id : keep->inputs) ins.push_back(&v->values[static_cast<size_t>(id)]);
  for (ir::ValueId id : keep->outputs) outs.push_back(&v->values[static_cast<size_t>(id)]);
  kiln_partition_t part{sizeof(part), "test", nodes.size(), nodes.data(), ins.size(), ins.data(), outs.size(), outs.data()};
  kiln_compiled_t* c = nullptr;
  std::string err = take(api_->instance_compile(inst, v.get(), &part, &c));
  if (!err.empty()) throw std::runtime_error("compile: " + err);
  compiled_.push_back(c);
  return c;
}

void Harness::release(kiln_compiled_t* c) {
  compiled_.erase(std::find(compiled_.begin(), compiled_.end(), c));
  api_->compiled_release(c);
}

kiln_compiled_info_t Harness::info(kiln_compiled_t* c) {
  kiln_compiled_info_t i;
  std::memset(&i, 0, sizeof(i));
  i.struct_size = sizeof(i);
  std::string err = take(api_->compiled_get_info(c, &i));
  if (!err.empty()) throw std::runtime_error("compiled_get_info: " + err);
  return i;
}

std::string Harness::property(kiln_instance_t* inst, const std::string& key) {
  char* v = nullptr;
  std::string err = take(api_->instance_get_property(inst, key.c_str(), &v));
  if (!err.empty()) throw std::runtime_error("get_property: " + err);
  std::string s = v;
  runtime::host_free(&host_ctx_, v);
  return s;
}

void* Harness::alloc(kiln_instance_t* inst, int32_t kind, size_t bytes) {
  void* p = nullptr;
  std::string err = take(api_->instance_alloc(inst, kind, 0, bytes, 0, &p));
  if (!err.empty()) throw std::runtime_error("instance_alloc: " + err);
  if (kind == KILN_MEMORY_DEVICE) device_blocks_.emplace_back(inst, p);
  return p;
}

void* Harness::upload(kiln_instance_t* inst, const std::vector<float>& data) {
  void* dev = alloc(inst, KILN_MEMORY_DEVICE, data.size() * 4);
  kiln_copy_t c{sizeof(c), data.data(), KILN_MEMORY_HOST, 0, dev, KILN_MEMORY_DEVICE, 0, data.size() * 4};
  std::string err = take(api_->instance_copy(inst, &c, 1, nullptr, 0));
  if (!err.empty()) throw std::runtime_error("instance_copy: " + err);
  return dev;
}

std::vector<float> Harness::download(kiln_instance_t* inst, const void* dev, size_t count) {
  std::vector<float> out(count);
  kiln_copy_t c{sizeof(c), dev, KILN_MEMORY_DEVICE, 0, out.data(), KILN_MEMORY_HOST, 0, count * 4};
  std::string err = take(api_->instance_copy(inst, &c, 1, nullptr, 0));
  if (!err.empty()) throw std::runtime_error("instance_copy: " + err);
  return out;
}

uint64_t Harness::fence_value(TestFence& f) { return fence_value_fn(f.c()); }

std::string Harness::wait(TestFence& f, uint64_t value, int32_t* code) {
  return take(fence_wait(f.c(), value, UINT64_MAX), code);
}

}  // namespace kiln::simdev_test
