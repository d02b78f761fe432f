// The backend conformance kit (kiln/backend_check.h): the ABI 1.1 device
// contract, as far as the host can observe it.
//
//  - declarations: each compiled handle's memory kinds, workspace, in-place
//    pairs and async flag pass the host's checks (read_compiled_device_info);
//  - device memory: a KILN_MEMORY_DEVICE buffer from instance_alloc is not
//    memory the host can read (else it is host memory under a device label),
//    pinned and host-visible buffers are memory it can read and write, and
//    instance_copy moves bytes host -> device -> host intact, with and
//    without a fence;
//  - each partition alone, its inputs and outputs in the declared kinds: an
//    asynchronous handle signals its fence within KILN_CHECK_FENCE_TIMEOUT_MS
//    (default 10000) of the call returning, and the outputs, read back with
//    instance_copy, match the probe graph run on portable kernels.
//
// Not observable from the host, so not checked: whether the plugin itself
// dereferences device pointers as host memory (backends/simdev guards its
// device memory with PROT_NONE for that), whether work really overlaps, and
// whether queued work obeys the instance's order.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "kiln/backend_check.h"
#include "runtime/backends/backend_check_util.h"
#include "runtime/backends/fence.h"
#include "runtime/backends/host.h"

namespace kiln::backend_check {
namespace {

int64_t fence_timeout_ms() {
  const char* env = std::getenv("KILN_CHECK_FENCE_TIMEOUT_MS");
  char* end = nullptr;
  const long long v = env && *env ? std::strtoll(env, &end, 10) : -1;
  return v > 0 && end && *end == '\0' ? v : 10000;
}

// Whether the host may read (write) one byte at `p`, asked of the kernel
// through a pipe, so an unmapped or PROT_NONE page is EFAULT, not a signal.
struct Access {
  bool read = false;
  bool write = false;
};
Access host_access(void* p) {
  Access a;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return a;
  a.read = write(fds[1], p, 1) == 1;
  if (a.read) {
    char sink;
    (void)!read(fds[0], &sink, 1);
  }
  const char byte = 0x5a;
  if (write(fds[1], &byte, 1) == 1) a.write = read(fds[0], p, 1) == 1;
  close(fds[0]);
  close(fds[1]);
  return a;
}

const char* kind_name(int32_t k) {
  switch (k) {
    case KILN_MEMORY_HOST: return "host";
    case KILN_MEMORY_HOST_PINNED: return "host-pinned";
    case KILN_MEMORY_DEVICE: return "device";
    case KILN_MEMORY_DEVICE_HOST_VISIBLE: return "device-host-visible";
    default: return "unknown";
  }
}

// The partitions of the probe program, each with its kernel.
std::vector<const runtime::PartitionKernel*> partitions(const runtime::Program& program) {
  std::vector<const runtime::PartitionKernel*> out;
  for (const runtime::Step& s : program.steps())
    if (auto* k = dynamic_cast<const runtime::PartitionKernel*>(s.kernel.get())) out.push_back(k);
  return out;
}

// The host's checks of each handle's declarations (a refused handle failed
// its compile, with the reason), and device workspace that cannot fit the
// device's memory (when the plugin says how much it has).
void check_declarations(const ProbePrograms& probe, uint64_t device_memory, Report& r) {
  std::string refused;
  for (const NodePlacement& n : probe.program->placement().nodes)
    for (const auto& [backend, reason] : n.reasons)
      if (refused.empty() && reason.find("compiled_get_info") != std::string::npos) refused = n.node + ": " + reason;
  if (!refused.empty()) return r.fail("device declarations", refused);
  size_t device = 0, async = 0, workspace = 0, inplace = 0;
  const auto parts = partitions(*probe.program);
  for (const runtime::PartitionKernel* pk : parts) {
    const runtime::CompiledDeviceInfo& d = pk->compiled().device();
    for (int32_t k : {KILN_MEMORY_DEVICE, KILN_MEMORY_DEVICE_HOST_VISIBLE}) {
      const uint64_t bytes = d.workspace_bytes[static_cast<size_t>(k)];
      if (device_memory > 0 && bytes > device_memory) {
        return r.fail("device declarations", "partition '" + pk->node()->name + "' declares " + std::to_string(bytes) +
                                                 " bytes of " + kind_name(k) + " workspace; the device has " +
                                                 std::to_string(device_memory));
      }
    }
    device += d.uses_device_memory();
    async += d.async();
    workspace += d.has_workspace();
    inplace += d.inplace.size();
  }
  if (device + async + workspace + inplace == 0) {
    return r.pass("device declarations", "none: host memory, synchronous execute (the 1.0 behaviour)");
  }
  r.pass("device declarations", std::to_string(parts.size()) + " partitions: " + std::to_string(device) +
                                    " with device memory, " + std::to_string(async) + " async, " +
                                    std::to_string(workspace) + " with workspace, " + std::to_string(inplace) +
                                    " in-place pairs; all pass the host's checks");
}

// Device buffers of one kind, freed with the instance at the end.
class Buffers {
 public:
  explicit Buffers(runtime::BackendInstance& inst) : inst_(inst) {}
  ~Buffers() {
    for (auto [kind, p] : live_) inst_.free(kind, p);
  }
  Result<void*> alloc(int32_t kind, size_t bytes) {
    KILN_ASSIGN_OR_RETURN(void* p, inst_.alloc(kind, 0, bytes == 0 ? 64 : bytes));
    live_.emplace_back(kind, p);
    return p;
  }
  Status copy(void* dst, int32_t dst_kind, const void* src, int32_t src_kind, size_t bytes, kiln_fence* fence = nullptr,
              uint64_t value = 0) {
    kiln_copy_t c{};
    c.struct_size = sizeof(c);
    c.src = src;
    c.src_kind = src_kind;
    c.dst = dst;
    c.dst_kind = dst_kind;
    c.bytes = bytes;
    return inst_.copy(&c, 1, fence, value);
  }

 private:
  runtime::BackendInstance& inst_;
  std::vector<std::pair<int32_t, void*>> live_;
};

std::set<int32_t> declared_kinds(const std::vector<const runtime::PartitionKernel*>& parts) {
  std::set<int32_t> kinds{KILN_MEMORY_DEVICE, KILN_MEMORY_HOST_PINNED};  // what the host asks of any device plugin
  for (const runtime::PartitionKernel* pk : parts) {
    const runtime::CompiledDeviceInfo& d = pk->compiled().device();
    for (int32_t k : d.input_kinds) kinds.insert(k);
    for (int32_t k : d.output_kinds) kinds.insert(k);
  }
  kinds.erase(KILN_MEMORY_HOST);
  return kinds;
}

void check_memory(runtime::BackendInstance& inst, const std::set<int32_t>& kinds, Report& r) {
  if (!inst.has_memory()) {
    r.skip("device memory is not host memory", "the plugin has no instance_alloc: host memory only");
    return r.skip("instance_copy round trip", "the plugin has no instance_copy");
  }
  std::string problems, seen;
  Buffers bufs(inst);
  for (int32_t kind : kinds) {
    auto p = bufs.alloc(kind, 4096);
    if (!p.is_ok()) {
      problems += std::string(problems.empty() ? "" : "; ") + "instance_alloc(" + kind_name(kind) + "): " + p.status().message();
      continue;
    }
    const Access a = host_access(*p);
    seen += std::string(seen.empty() ? "" : ", ") + kind_name(kind) + (a.read ? " host-readable" : " not host-readable");
    if (kind == KILN_MEMORY_DEVICE && a.read) {
      problems += std::string(problems.empty() ? "" : "; ") +
                  "instance_alloc(device) returned memory the host can read: that is host memory under a device "
                  "label (declare host-pinned or device-host-visible for memory the host may touch)";
    } else if (kind != KILN_MEMORY_DEVICE && !(a.read && a.write)) {
      problems += std::string(problems.empty() ? "" : "; ") + "instance_alloc(" + kind_name(kind) +
                  ") returned memory the host cannot " + (a.read ? "write" : "read");
    }
  }
  r.expect(problems.empty(), "device memory is not host memory", problems.empty() ? seen : problems);

  // host -> device -> host, then the same with a fence.
  std::vector<uint8_t> src(4096), back(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  auto dev = bufs.alloc(KILN_MEMORY_DEVICE, src.size());
  std::string trip;
  if (!dev.is_ok()) {
    trip = "instance_alloc(device): " + dev.status().message();
  } else if (Status s = bufs.copy(*dev, KILN_MEMORY_DEVICE, src.data(), KILN_MEMORY_HOST, src.size()); !s.is_ok()) {
    trip = "copy in: " + s.message();
  } else if (Status s2 = bufs.copy(back.data(), KILN_MEMORY_HOST, *dev, KILN_MEMORY_DEVICE, back.size()); !s2.is_ok()) {
    trip = "copy out: " + s2.message();
  } else if (back != src) {
    trip = "the bytes read back differ from those written";
  } else {
    kiln_fence fence;
    std::fill(back.begin(), back.end(), 0);
    Status s3 = bufs.copy(back.data(), KILN_MEMORY_HOST, *dev, KILN_MEMORY_DEVICE, back.size(), &fence, 1);
    if (!s3.is_ok()) trip = "fenced copy: " + s3.message();
    else if (Status w = fence.wait(1, static_cast<uint64_t>(fence_timeout_ms()) * 1000000u); !w.is_ok())
      trip = "fenced copy: its fence " + std::string(w.code() == StatusCode::kDeadlineExceeded
                                                          ? "was not signalled within " + std::to_string(fence_timeout_ms()) + " ms"
                                                          : "failed: " + w.message());
    else if (back != src) trip = "the bytes of the fenced copy differ from those written";
  }
  r.expect(trip.empty(), "instance_copy round trip",
           trip.empty() ? "4096 bytes host -> device -> host, unfenced and fenced: intact" : trip);
}

// Outputs of a partition run alone: host kinds in host memory, the others
// from the plugin's instance_alloc (as the host's plan would hand them out).
class KindOutputs final : public runtime::ExecOutputs {
 public:
  KindOutputs(const runtime::CompiledDeviceInfo& d, size_t n, Buffers& b) : d_(d), bufs_(b), t_(n) {}
  size_t num_outputs() const override { return t_.size(); }
  int32_t memory_kind(size_t i) const override { return d_.output_kind(i); }
  Result<Tensor*> allocate(size_t i, DType dt, const Shape& s) override {
    const int32_t kind = d_.output_kind(i);
    if (kind == KILN_MEMORY_HOST) {
      t_[i] = Tensor::allocate(dt, s);
    } else {
      KILN_ASSIGN_OR_RETURN(void* p, bufs_.alloc(kind, static_cast<size_t>(s.numel()) * dtype_size(dt)));
      t_[i] = Tensor::borrow(dt, s, p);
    }
    return &t_[i];
  }
  const runtime::CompiledDeviceInfo& d_;
  Buffers& bufs_;
  std::vector<Tensor> t_;
};

// What one partition run alone holds while the plugin may use it.
struct RunState {
  PartitionInputs in;
  Buffers bufs;
  KindOutputs outs;
  kiln_exec_context ctx;
  std::vector<std::vector<uint8_t>> host_ws;
  kiln_fence fence;
  RunState(runtime::BackendInstance& i, const runtime::CompiledDeviceInfo& d, size_t n) : bufs(i), outs(d, n, bufs) {}
};

// Objects a plugin that never signalled its fence may still use: kept
// reachable (so leak checkers do not count them) and never freed; the
// group's process ends soon after.
struct Kept {
  std::vector<std::unique_ptr<RunState>> runs;
  std::unique_ptr<LogCapture> capture;
  std::unique_ptr<Loaded> loaded;
  ProbePrograms probe;
};
Kept& kept() {
  static Kept* k = new Kept;
  return *k;
}

// One partition alone, on random inputs in its declared kinds: "" when it
// ran, signalled its fence in time (async) and produced every output, else
// the problem. *hung is set when its fence was never signalled; then the
// run's state is left allocated, since the plugin may still write into it.
std::string run_alone(const runtime::Program& program, const runtime::PartitionKernel& pk, bool* hung) {
  const runtime::CompiledPartition& cp = pk.compiled();
  const runtime::CompiledDeviceInfo& d = cp.device();
  runtime::BackendInstance& inst = cp.instance();
  auto st = std::make_unique<RunState>(inst, d, pk.node()->outputs.size());
  st->in = inputs_for(program, pk);
  for (size_t i = 0; i < st->in.views.size(); ++i) {
    const int32_t kind = d.input_kind(i);
    if (kind == KILN_MEMORY_HOST) continue;
    kiln_tensor_t& v = st->in.views[i];
    auto p = st->bufs.alloc(kind, v.nbytes);
    if (!p.is_ok()) return "instance_alloc(" + std::string(kind_name(kind)) + ") for input " + std::to_string(i) + ": " + p.status().message();
    if (Status c = st->bufs.copy(*p, kind, v.data, KILN_MEMORY_HOST, v.nbytes); !c.is_ok()) return "copy of input " + std::to_string(i) + ": " + c.message();
    v.data = *p;
    v.memory_kind = kind;
  }
  st->ctx.outputs = &st->outs;
  for (int32_t k = 0; k < KILN_MEMORY_KIND_COUNT; ++k) {
    const size_t bytes = static_cast<size_t>(d.workspace_bytes[static_cast<size_t>(k)]);
    if (bytes == 0) continue;
    void* p = nullptr;
    if (k == KILN_MEMORY_HOST) {
      p = st->host_ws.emplace_back(bytes).data();
    } else {
      auto a = st->bufs.alloc(k, bytes);
      if (!a.is_ok()) return "instance_alloc(" + std::string(kind_name(k)) + ") for the workspace: " + a.status().message();
      p = *a;
    }
    st->ctx.workspace[k] = p;
    st->ctx.workspace_bytes[k] = bytes;
  }
  std::vector<const kiln_tensor_t*> ptrs;
  for (const kiln_tensor_t& v : st->in.views) ptrs.push_back(&v);
  if (d.async()) {
    Status call = cp.execute_async(&st->ctx, ptrs.data(), ptrs.size(), &st->fence, 1);
    if (!call.is_ok()) return "compiled_execute_async: " + call.message();
    Status w = st->fence.wait(1, static_cast<uint64_t>(fence_timeout_ms()) * 1000000u);
    if (w.code() == StatusCode::kDeadlineExceeded) {
      *hung = true;
      kept().runs.push_back(std::move(st));  // the plugin may still use the context and buffers
      return "compiled_execute_async returned OK but never signalled its fence (value 1) within " +
             std::to_string(fence_timeout_ms()) + " ms";
    }
    if (!w.is_ok()) return "the fence was signalled with an error: " + w.message();
  } else if (Status call = cp.execute(&st->ctx, ptrs.data(), ptrs.size()); !call.is_ok()) {
    return "compiled_execute: " + call.message();
  }
  for (size_t i = 0; i < st->outs.t_.size(); ++i) {
    Tensor& t = st->outs.t_[i];
    if (!t.defined()) return "output " + std::to_string(i) + " was not allocated";
    const int32_t kind = d.output_kind(i);
    if (kind == KILN_MEMORY_HOST) continue;
    Tensor host = Tensor::allocate(t.dtype(), t.shape());
    if (Status c = st->bufs.copy(host.raw_data(), KILN_MEMORY_HOST, t.raw_data(), kind, t.nbytes()); !c.is_ok())
      return "copy of output " + std::to_string(i) + " back to the host: " + c.message();
  }
  return "";
}

void check_partitions(const ProbePrograms& probe, Report& r, bool* hung) {
  const auto parts = partitions(*probe.program);
  std::string failed_fence, failed_run;
  size_t async = 0;
  for (const runtime::PartitionKernel* pk : parts) {
    bool h = false;
    const std::string problem = run_alone(*probe.program, *pk, &h);
    async += pk->compiled().device().async();
    const std::string line = "partition '" + pk->node()->name + "': " + problem;
    if (h && failed_fence.empty()) failed_fence = line;
    else if (!h && !problem.empty() && failed_run.empty()) failed_run = line;
    *hung |= h;
  }
  if (async == 0) r.skip("fences signalled", "no partition declares KILN_COMPILED_ASYNC");
  else r.expect(failed_fence.empty(), "fences signalled", failed_fence.empty() ? std::to_string(async) + " async partitions signalled their fences" : failed_fence);
  r.expect(failed_run.empty(), "partitions alone in their memory kinds",
           failed_run.empty() ? std::to_string(parts.size()) + " partitions ran on inputs in their declared kinds; every output "
                                                               "allocated and read back"
                              : failed_run);
}

}  // namespace

void check_device(const Options& o, Report& r) {
  auto capture = std::make_unique<LogCapture>();
  auto l = std::make_unique<Loaded>();
  if (!load_usable(o, *capture, r, "device declarations", l.get())) return;
  auto probe = build_probe(o, *l);
  if (!probe.is_ok()) return r.fail("device declarations", probe.status().message());
  const std::vector<BackendDeviceInfo>& devices = l->plugin->info().devices;
  check_declarations(*probe, devices.empty() ? 0 : devices[0].memory_bytes, r);
  const auto parts = partitions(*probe->program);
  if (parts.empty()) {
    for (const char* c : {"device memory is not host memory", "instance_copy round trip", "fences signalled",
                          "partitions alone in their memory kinds"})
      r.skip(c, "the plugin claims none of the probe graph's nodes");
    return;
  }
  check_memory(parts[0]->compiled().instance(), declared_kinds(parts), r);
  bool hung = false;
  check_partitions(*probe, r, &hung);
  if (hung) {  // a thread of the plugin may still hold a context: keep everything
    kept().probe = std::move(*probe);
    kept().loaded = std::move(l);
    kept().capture = std::move(capture);
  }
}

bool fences_signalled(const Report& device_rows) {
  for (const Row& row : device_rows.rows())
    if (row.outcome == Outcome::kFail && row.check == "fences signalled") return false;
  return true;
}

}  // namespace kiln::backend_check
