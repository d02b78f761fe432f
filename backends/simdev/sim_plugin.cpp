// simdev: a plugin that simulates a discrete accelerator on the CPU, so the
// ABI 1.1 device contract (memory kinds, instance_alloc/free/copy, fences,
// asynchronous execution, stream waits, workspace, in-place pairs, trace
// events, cancellation, shared constants) is exercised on every machine.
// Its device memory is a mapping the host must never touch (PROT_NONE
// outside the plugin's own calls), its queue runs on its own engine threads
// with a configurable latency, and it runs float32 Add, Relu, MatMul and
// Conv with its own kernels. Priority 0: used only when named.
#include "sim_plugin.h"

#include <chrono>
#include <cstring>
#include <map>
#include <numeric>
#include <thread>

namespace simdev {

using kiln::sdk::fail;
using kiln::sdk::Graph;
using kiln::sdk::Node;

namespace {

// Read-only properties (counters and the engine timeline) beside the options.
const char* const kStats[] = {"copies",          "copies_to_device", "copies_from_device", "copies_on_device",
                              "copies_on_host",  "copy_bytes",       "executions",         "host_operands",
                              "host_workspaces", "own_workspaces",
                              "constant_uploads", "constant_reuses", "device_constants",   "device_used_bytes",
                              "pinned_used_bytes", "timeline"};

bool is_stat(const std::string& key) {
  for (const char* s : kStats)
    if (key == s) return true;
  return false;
}

const char* engine_name(Engine e) { return e == Engine::kCompute ? "compute" : e == Engine::kCopy ? "copy" : "wait"; }

// Where a pointer said to be of `kind` must lie; "" when it does.
std::string check_kind(Device& dev, int32_t kind, const void* p, size_t bytes) {
  if (bytes == 0) return "";
  if (!p) return "is NULL";
  switch (kind) {
    case KILN_MEMORY_DEVICE:
      return dev.memory.in_block(p, bytes) ? "" : "is not inside a block of this instance's device memory";
    case KILN_MEMORY_HOST_PINNED:
      return dev.pinned.in_block(p, bytes) ? "" : "is not inside a pinned block of this instance";
    case KILN_MEMORY_HOST:
      return dev.memory.in_region(p) ? "is said to be host memory but points into device memory" : "";
    default:
      return "has memory kind " + std::to_string(kind) + ", which simdev does not have";
  }
}

int32_t kind_by_address(Device& dev, const void* p) {
  return dev.memory.in_region(p) ? KILN_MEMORY_DEVICE : KILN_MEMORY_HOST;
}

}  // namespace

// ---------------------------------------------------------------------------
// Instance
// ---------------------------------------------------------------------------

SimInstance::SimInstance(const kiln::sdk::Host& host, kiln::sdk::Options options)
    : Instance(std::move(options)), host_(&host) {
  check_options();
  device_ = std::make_shared<Device>(static_cast<size_t>(options_.get_int("memory_bytes")), options_.get_bool("guard"));
  stream_ = std::make_unique<Stream>();
  cache_options();
}

void SimInstance::cache_options() {
  latency_us_ = options_.get_int("latency_us");
  copy_latency_us_ = options_.get_int("copy_latency_us");
  fail_after_ = options_.get_int("fail_after");
}

SimInstance::~SimInstance() { stream_.reset(); }  // drains queued work while the device lives

void SimInstance::check_options() const {
  for (const char* k : {"latency_us", "copy_latency_us", "fail_after", "max_group_size"})
    if (options_.get_int(k) < 0) fail(KILN_STATUS_INVALID_ARGUMENT, std::string("option '") + k + "' must be >= 0, got " + options_.get(k));
  if (options_.get_int("memory_bytes") < 4096) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "option 'memory_bytes' must be >= 4096, got " + options_.get("memory_bytes"));
  }
}

void SimInstance::set_property(const std::string& key, const std::string& value) {
  if (is_stat(key)) fail(KILN_STATUS_FAILED_PRECONDITION, "property '" + key + "' is read-only");
  if (key == "memory_bytes" || key == "guard") {
    kiln::sdk::Options probe = options_;
    probe.set(key, value);  // a bad value is named as such first
    if (probe.get(key) == options_.get(key) || (key == "guard" && probe.get_bool(key) == options_.get_bool(key)) ||
        (key == "memory_bytes" && probe.get_int(key) == options_.get_int(key)))
      return;
    fail(KILN_STATUS_FAILED_PRECONDITION, "option '" + key + "' is fixed when the instance is created");
  }
  kiln::sdk::Options before = options_;
  options_.set(key, value);
  try {
    check_options();
  } catch (...) {
    options_ = std::move(before);
    throw;
  }
  cache_options();
}

std::string SimInstance::get_property(const std::string& key) {
  const Counters& c = device_->counters;
  if (key == "copies") {
    return std::to_string(c.copies_to_device + c.copies_from_device + c.copies_on_device + c.copies_on_host);
  }
  const std::map<std::string, int64_t> v = {
      {"copies_to_device", c.copies_to_device},   {"copies_from_device", c.copies_from_device},
      {"copies_on_device", c.copies_on_device},   {"copies_on_host", c.copies_on_host},
      {"copy_bytes", c.copy_bytes},               {"executions", c.executions},
      {"host_operands", c.host_operands},         {"constant_uploads", c.constant_uploads},
      {"host_workspaces", c.host_workspaces},     {"own_workspaces", c.own_workspaces},
      {"constant_reuses", c.constant_reuses},
      {"device_constants", static_cast<int64_t>(device_->num_constants())},
      {"device_used_bytes", static_cast<int64_t>(device_->memory.used())},
      {"pinned_used_bytes", static_cast<int64_t>(device_->pinned.used())}};
  auto it = v.find(key);
  if (it != v.end()) return std::to_string(it->second);
  if (key == "timeline") {  // one line per job: engine begin_ns end_ns name
    std::string s;
    for (const TimelineEntry& e : stream_->timeline())
      s += std::string(engine_name(e.engine)) + " " + std::to_string(e.begin_ns) + " " + std::to_string(e.end_ns) +
           " " + e.name + "\n";
    return s;
  }
  return options_.get(key);
}

void SimInstance::get_capability(const Graph& graph, kiln::sdk::Capability& cap) {
  const size_t n = graph.num_nodes();
  std::vector<int8_t> ok(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::string why = decline_reason(graph.node(i));
    if (why.empty()) ok[i] = 1;
    else cap.decline(i, why);
  }
  // Connected claimed nodes become one group (convexity is the host's job).
  std::vector<size_t> parent(n);
  std::iota(parent.begin(), parent.end(), size_t{0});
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  if (options_.get_bool("fuse")) {
    for (size_t i = 0; i < n; ++i) {
      if (!ok[i]) continue;
      Node node = graph.node(i);
      for (size_t k = 0; k < node.num_inputs(); ++k) {
        Node p = node.input(k) ? node.input(k).producer() : Node();
        if (p && ok[p.index()]) parent[find(i)] = find(p.index());
      }
    }
  }
  std::map<size_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < n; ++i)
    if (ok[i]) groups[find(i)].push_back(i);
  const size_t cap_size = static_cast<size_t>(options_.get_int("max_group_size"));
  for (auto& [root, nodes] : groups) {
    for (size_t start = 0; start < nodes.size();) {
      size_t len = cap_size > 0 ? std::min(cap_size, nodes.size() - start) : nodes.size() - start;
      cap.add_group(std::vector<size_t>(nodes.begin() + static_cast<std::ptrdiff_t>(start),
                                        nodes.begin() + static_cast<std::ptrdiff_t>(start + len)));
      start += len;
    }
  }
}

std::unique_ptr<kiln::sdk::Compiled> SimInstance::compile(const Graph& graph, const kiln::sdk::Partition& part) {
  return std::make_unique<SimCompiled>(*this, compile_program(graph, part, device_));
}

void* SimInstance::alloc(int32_t kind, uint32_t device_index, size_t size, size_t alignment) {
  if (device_index != 0) fail(KILN_STATUS_OUT_OF_RANGE, "simdev instances have one device; got device " + std::to_string(device_index));
  if (alignment == 0) alignment = 64;
  if ((alignment & (alignment - 1)) != 0 || alignment > 4096) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "alignment " + std::to_string(alignment) + " is not a power of two <= 4096");
  }
  void* p = nullptr;
  if (kind == KILN_MEMORY_DEVICE) {
    p = device_->memory.allocate(size, alignment);
    if (!p) {
      fail(KILN_STATUS_RESOURCE_EXHAUSTED, "simdev: out of device memory: " + std::to_string(size) + " bytes wanted, " +
                                               std::to_string(device_->memory.used()) + " of " +
                                               std::to_string(device_->memory.capacity()) + " in use");
    }
  } else if (kind == KILN_MEMORY_HOST_PINNED) {
    p = device_->pinned.allocate(size, alignment);
    if (!p) fail(KILN_STATUS_RESOURCE_EXHAUSTED, "simdev: no host memory for " + std::to_string(size) + " pinned bytes");
  } else if (kind == KILN_MEMORY_HOST) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "instance_alloc of host memory (the host allocates that itself)");
  } else {
    fail(KILN_STATUS_UNIMPLEMENTED, "simdev has no memory of kind " + std::to_string(kind) +
                                        " (it offers device and host-pinned memory)");
  }
  return p;
}

void SimInstance::free(int32_t kind, void* ptr) {
  if (!ptr) return;
  bool ok = kind == KILN_MEMORY_DEVICE ? device_->memory.release(ptr)
            : kind == KILN_MEMORY_HOST_PINNED ? device_->pinned.release(ptr) : false;
  if (!ok) host_->log(KILN_LOG_ERROR, "instance_free of a pointer that is not a live block of kind " + std::to_string(kind));
}

void SimInstance::copy_batch(const kiln_copy_t* copies, size_t n, kiln_fence_t* fence, uint64_t value) {
  if (n > 0 && !copies) fail(KILN_STATUS_INVALID_ARGUMENT, "instance_copy: copies is NULL");
  const kiln_host_api_t& api = host_->api();
  if (fence && !api.fence_signal) fail(KILN_STATUS_UNIMPLEMENTED, "instance_copy: the host has no fence_signal");
  auto job = std::make_shared<Job>();
  job->engine = Engine::kCopy;
  std::vector<kiln_copy_t> list(copies, copies + n);
  int64_t to = 0, from = 0, on_dev = 0, on_host = 0, bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const kiln_copy_t& c = list[i];
    if (c.struct_size < offsetof(kiln_copy_t, bytes) + sizeof(size_t)) {
      fail(KILN_STATUS_INVALID_ARGUMENT, "copy " + std::to_string(i) + ": struct_size " + std::to_string(c.struct_size) + " is too small");
    }
    if ((c.src_kind == KILN_MEMORY_DEVICE && c.src_device != 0) || (c.dst_kind == KILN_MEMORY_DEVICE && c.dst_device != 0)) {
      fail(KILN_STATUS_OUT_OF_RANGE, "copy " + std::to_string(i) + ": simdev instances have one device");
    }
    std::string why = check_kind(*device_, c.src_kind, c.src, c.bytes);
    if (!why.empty()) {
      why = "source " + why;
    } else {
      why = check_kind(*device_, c.dst_kind, c.dst, c.bytes);
      if (!why.empty()) why = "destination " + why;
    }
    if (!why.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, "copy " + std::to_string(i) + ": " + why);
    const bool sd = c.src_kind == KILN_MEMORY_DEVICE, dd = c.dst_kind == KILN_MEMORY_DEVICE;
    (sd && dd ? on_dev : sd ? from : dd ? to : on_host) += 1;
    bytes += static_cast<int64_t>(c.bytes);
    job->reads.push_back(range_of(c.src, c.bytes));
    job->writes.push_back(range_of(c.dst, c.bytes));
  }
  job->name = "copy x" + std::to_string(n) + " (" + std::to_string(to) + " in, " + std::to_string(from) + " out, " +
              std::to_string(on_dev) + " on device, " + std::to_string(bytes) + " bytes)";
  const int64_t latency = copy_latency_us_.load();
  Device* dev = device_.get();
  const std::string name = job->name;
  job->work = [dev, name, list = std::move(list), latency, to, from, on_dev, on_host, bytes]() -> kiln_status_t* {
    const uint64_t begin = now_ns();
    if (latency > 0) std::this_thread::sleep_for(std::chrono::microseconds(latency));
    {
      DeviceMemory::Access access(dev->memory);
      for (const kiln_copy_t& c : list)
        if (c.bytes) std::memmove(c.dst, c.src, c.bytes);
    }
    dev->trace_copy(name.c_str(), begin, now_ns());
    dev->counters.copies_to_device += to;
    dev->counters.copies_from_device += from;
    dev->counters.copies_on_device += on_dev;
    dev->counters.copies_on_host += on_host;
    dev->counters.copy_bytes += bytes;
    return nullptr;
  };
  if (fence) {
    job->done = [&api, fence, value](kiln_status_t* st) { api.fence_signal(fence, value, st); };
    job->fence = fence;
    stream_->submit(std::move(job));
    return;
  }
  host_->check(stream_->run(std::move(job)));
}

void SimInstance::stream_wait(kiln_fence_t* fence, uint64_t value) {
  const kiln_host_api_t& api = host_->api();
  if (!fence) fail(KILN_STATUS_INVALID_ARGUMENT, "instance_stream_wait: fence is NULL");
  if (!api.fence_wait) fail(KILN_STATUS_UNIMPLEMENTED, "instance_stream_wait: the host has no fence_wait");
  auto job = std::make_shared<Job>();
  job->engine = Engine::kWait;
  job->name = "wait for fence value " + std::to_string(value);
  Stream* stream = stream_.get();
  job->work = [&api, fence, value, stream]() -> kiln_status_t* {
    for (;;) {  // in slices, so that an instance released meanwhile stops waiting
      kiln_status_t* st = api.fence_wait(fence, value, 10'000'000);
      if (st && api.status_code(st) == KILN_STATUS_DEADLINE_EXCEEDED && !stream->closing()) {
        api.status_release(st);
        continue;
      }
      // A failed producer: its own fence carries the error; later work runs.
      api.status_release(st);
      return nullptr;
    }
  };
  stream_->submit(std::move(job));
}

// ---------------------------------------------------------------------------
// Compiled
// ---------------------------------------------------------------------------

SimCompiled::SimCompiled(SimInstance& instance, std::shared_ptr<ProgramState> state)
    : instance_(instance), state_(std::move(state)), async_(instance.options().get_bool("async")) {
  input_kinds_.assign(num_inputs(), KILN_MEMORY_DEVICE);
  output_kinds_.assign(num_outputs(), KILN_MEMORY_DEVICE);
  if (instance.options().get_bool("own_constants"))
    for (const std::string& s : state_->program.owned_constants) owned_.push_back(s.c_str());
}

void SimCompiled::fill_info(kiln_compiled_info_t* out) const {
  auto has = [&](size_t end) { return end <= out->struct_size; };
#define SIMDEV_SET(member, value) \
  if (has(offsetof(kiln_compiled_info_t, member) + sizeof(out->member))) out->member = (value)
  SIMDEV_SET(concurrency, static_cast<int32_t>(concurrency()));
  SIMDEV_SET(num_inputs, num_inputs());
  SIMDEV_SET(num_outputs, num_outputs());
  SIMDEV_SET(flags, async_ ? uint32_t{KILN_COMPILED_ASYNC} : uint32_t{0});
  SIMDEV_SET(input_memory_kinds, input_kinds_.empty() ? nullptr : input_kinds_.data());
  SIMDEV_SET(output_memory_kinds, output_kinds_.empty() ? nullptr : output_kinds_.data());
  if (has(offsetof(kiln_compiled_info_t, workspace_bytes) + sizeof(out->workspace_bytes))) {
    for (uint64_t& w : out->workspace_bytes) w = 0;
    out->workspace_bytes[KILN_MEMORY_DEVICE] = state_->program.workspace_bytes;
  }
  SIMDEV_SET(num_inplace, state_->program.inplace.size() / 2);
  SIMDEV_SET(inplace_pairs, state_->program.inplace.empty() ? nullptr : state_->program.inplace.data());
  SIMDEV_SET(num_owned_constants, owned_.size());
  SIMDEV_SET(owned_constants, owned_.empty() ? nullptr : owned_.data());
#undef SIMDEV_SET
}

void SimCompiled::execute(kiln::sdk::ExecContext& ctx, const kiln::sdk::Inputs& inputs) {
  std::vector<kiln_tensor_t> views(inputs.size());
  std::vector<const kiln_tensor_t*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    kiln::sdk::TensorView v = inputs[i];
    views[i] = kiln_tensor_t{sizeof(kiln_tensor_t), v.dtype, v.rank, v.dims, v.data, v.nbytes,
                             kind_by_address(instance_.device(), v.data), 0};
    ptrs.push_back(&views[i]);
  }
  enqueue(ctx.raw(), ptrs.data(), ptrs.size(), nullptr, 0);
}

namespace {

// The dims of an execute operand, checked (float32, non-negative, nbytes).
Dims operand_dims(const kiln_tensor_t* t, const std::string& what) {
  if (!t) fail(KILN_STATUS_INVALID_ARGUMENT, what + " is NULL");
  if (t->struct_size < offsetof(kiln_tensor_t, nbytes) + sizeof(size_t)) {
    fail(KILN_STATUS_INVALID_ARGUMENT, what + ": struct_size " + std::to_string(t->struct_size) + " is too small");
  }
  if (t->dtype != KILN_DTYPE_FLOAT32) {
    fail(KILN_STATUS_INVALID_ARGUMENT, what + " is " + kiln::sdk::dtype_name(t->dtype) + "; simdev runs float32 only");
  }
  if (t->rank > 0 && !t->dims) fail(KILN_STATUS_INVALID_ARGUMENT, what + " has rank > 0 and no dims");
  Dims d(t->dims, t->dims + t->rank);
  for (int64_t x : d)
    if (x < 0) fail(KILN_STATUS_INVALID_ARGUMENT, what + " has a negative dim");
  if (static_cast<size_t>(numel(d)) * 4 != t->nbytes) {
    fail(KILN_STATUS_INVALID_ARGUMENT, what + " holds " + std::to_string(t->nbytes) + " bytes, not " +
                                           std::to_string(numel(d) * 4) + " for " + kiln::sdk::dims_string(d.data(), d.size()));
  }
  return d;
}

int32_t kind_of(const kiln_tensor_t* t) {
  return KILN_ABI_HAS(kiln_tensor_t, memory_kind, t->struct_size) ? t->memory_kind : int32_t{KILN_MEMORY_HOST};
}

std::string job_name(const Program& p) {
  if (p.ops.empty()) return "execute (no ops)";
  return "execute " + p.ops.front().label + (p.ops.size() > 1 ? " +" + std::to_string(p.ops.size() - 1) + " ops" : "");
}

}  // namespace

void SimCompiled::enqueue(kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs, size_t n, kiln_fence_t* fence,
                          uint64_t value) {
  const Program& p = state_->program;
  const kiln::sdk::Host& host = instance_.host();
  const kiln_host_api_t& api = host.api();
  Device& dev = instance_.device();
  if (n != p.inputs.size()) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "execute got " + std::to_string(n) + " inputs, the partition takes " +
                                           std::to_string(p.inputs.size()));
  }
  if (n > 0 && !inputs) fail(KILN_STATUS_INVALID_ARGUMENT, "execute: inputs is NULL");
  if (fence && !api.fence_signal) fail(KILN_STATUS_UNIMPLEMENTED, "execute_async: the host has no fence_signal");
  auto job = std::make_shared<Job>();
  auto args = std::make_shared<RunArgs>();
  args->ptrs.assign(p.slots.size(), nullptr);
  std::vector<Dims> in_dims(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string what = "input " + std::to_string(i);
    in_dims[i] = operand_dims(inputs[i], what);
    const int32_t kind = kind_of(inputs[i]);
    std::string why = check_kind(dev, kind, inputs[i]->data, inputs[i]->nbytes);
    if (!why.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, what + " " + why);
    if (kind != KILN_MEMORY_DEVICE) dev.counters.host_operands += 1;
    args->ptrs[static_cast<size_t>(p.inputs[i])] = inputs[i]->data;
    job->reads.push_back(range_of(inputs[i]->data, inputs[i]->nbytes));
  }
  args->dims = p.infer(in_dims);
  for (size_t s = 0; s < p.slots.size(); ++s)
    if (p.slots[s].kind == SlotKind::kConstant) args->ptrs[s] = p.slots[s].device;
  for (size_t j = 0; j < p.outputs.size(); ++j) {
    const Dims& d = args->dims[static_cast<size_t>(p.outputs[j])];
    kiln_tensor_t t;
    std::memset(&t, 0, sizeof(t));
    t.struct_size = sizeof(t);
    host.check(api.exec_allocate_output(ctx, j, KILN_DTYPE_FLOAT32, d.data(), d.size(), &t));
    const std::string what = "output " + std::to_string(j);
    (void)operand_dims(&t, what + " from exec_allocate_output");
    std::string why = check_kind(dev, kind_of(&t), t.data, t.nbytes);
    if (!why.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, what + " from exec_allocate_output " + why);
    if (kind_of(&t) != KILN_MEMORY_DEVICE) dev.counters.host_operands += 1;
    args->ptrs[static_cast<size_t>(p.outputs[j])] = t.data;
    job->writes.push_back(range_of(t.data, t.nbytes));
  }
  if (p.workspace_bytes && api.exec_workspace) {
    size_t size = 0;
    void* ws = api.exec_workspace(ctx, KILN_MEMORY_DEVICE, &size);
    if (ws && !dev.memory.in_block(ws, size)) {
      fail(KILN_STATUS_INVALID_ARGUMENT, "exec_workspace gave device scratch outside this instance's device memory");
    }
    args->workspace = ws;
    args->workspace_size = ws ? size : 0;
    if (ws) job->writes.push_back(range_of(ws, size));
  }
  reserve_run_memory(*state_, *args);  // throws RESOURCE_EXHAUSTED with nothing queued
  args->ctx = ctx;
  args->latency_us = instance_.latency_us();
  const int64_t fail_after = instance_.fail_after();
  const int64_t count = dev.counters.executions.fetch_add(1) + 1;
  args->fail_oom = fail_after > 0 && count > fail_after;
  job->engine = Engine::kCompute;
  job->name = job_name(p);
  const kiln::sdk::Host* hp = &host;
  std::shared_ptr<ProgramState> state = state_;
  job->work = [hp, state, args]() { return run_program(*hp, *state, *args); };
  args->traced = api.exec_trace_enabled && api.exec_trace_event && api.exec_trace_enabled(ctx);
  if (args->traced) dev.begin_trace(&api, ctx);  // from here on the job runs and ends the window
  if (fence) {
    job->done = [&api, fence, value](kiln_status_t* st) { api.fence_signal(fence, value, st); };
    job->fence = fence;
    instance_.stream().submit(std::move(job));
    return;
  }
  host.check(instance_.stream().run(std::move(job)));
}

}  // namespace simdev
