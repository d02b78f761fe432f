// A test host for the simdev plugin through its C ABI alone: the runtime's
// host table with the 1.1 entries a test needs to observe (fences, the
// execute context: output memory kinds, cancellation, workspace, trace
// events) replaced by test versions, so plugin-level behaviour is checked
// without the runtime's device-edge planning.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../abi_test_util.h"
#include "kiln/c/backend.h"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/host.h"

namespace kiln::simdev_test {

/// A timeline fence of the test host (never a kiln_fence: the runtime owns that type).
struct TestFence {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t value = 0;
  int signals = 0;
  std::vector<uint64_t> order;  // the values, in the order they were signalled
  int32_t error_code = KILN_STATUS_OK;  // the first error signalled
  std::string error;
  kiln_fence_t* c() { return reinterpret_cast<kiln_fence_t*>(this); }
};

struct TraceEvent {
  std::string name;
  int32_t track;
  uint64_t begin_ns, end_ns;
};

class Harness;

/// One execute call's context; outputs are allocated in `output_kind`.
struct TestCtx {
  Harness* harness = nullptr;
  kiln_instance_t* instance = nullptr;
  int32_t output_kind = KILN_MEMORY_DEVICE;
  std::vector<void*> outputs;  // by index (device or host memory the test frees)
  std::vector<std::vector<int64_t>> output_dims;
  std::vector<std::vector<float>> host_outputs;  // backing of host-kind outputs
  std::vector<std::shared_ptr<std::vector<int64_t>>> dims_keep;
  std::atomic<bool> cancel{false};
  bool trace = false;
  std::mutex trace_mu;
  std::vector<TraceEvent> events;
  void* workspace = nullptr;
  size_t workspace_size = 0;
  int workspace_calls = 0;
  void* inplace_output = nullptr;  // when set, output 0 is handed this buffer (an honoured in-place pair)
  kiln_exec_context_t* c() { return reinterpret_cast<kiln_exec_context_t*>(this); }
};

/// Status text of a plugin status (takes ownership); "" for NULL.
inline std::string take(kiln_status_t* st, int32_t* code = nullptr) {
  const kiln_host_api_t* api = runtime::host_api();
  if (code) *code = st ? api->status_code(st) : KILN_STATUS_OK;
  std::string m = st ? api->status_message(st) : "";
  api->status_release(st);
  return m;
}

class Harness {
 public:
  Harness();
  ~Harness();
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  const kiln_backend_api_t& api() const { return *api_; }
  kiln_plugin_t* plugin() const { return plugin_; }

  /// A new instance (released with the harness).
  kiln_instance_t* instance(const std::vector<std::pair<std::string, std::string>>& options = {});
  /// Compiles every node of `g` as one partition: inputs are the graph's
  /// inputs, outputs its outputs (released with the harness unless released).
  kiln_compiled_t* compile(kiln_instance_t* inst, const ir::Graph& g);
  void release(kiln_compiled_t* c);
  kiln_compiled_info_t info(kiln_compiled_t* c);
  std::string property(kiln_instance_t* inst, const std::string& key);
  int64_t counter(kiln_instance_t* inst, const std::string& key) { return std::stoll(property(inst, key)); }

  void* alloc(kiln_instance_t* inst, int32_t kind, size_t bytes);
  /// Host -> device (sync) of `data`; returns the device buffer.
  void* upload(kiln_instance_t* inst, const std::vector<float>& data);
  std::vector<float> download(kiln_instance_t* inst, const void* dev, size_t count);

  static uint64_t fence_value(TestFence& f);
  /// Waits for the fence to reach `value`; the error text ("" when fine).
  static std::string wait(TestFence& f, uint64_t value, int32_t* code = nullptr);

 private:
  void* dl_ = nullptr;
  kiln_host host_ctx_;
  const kiln_backend_api_t* api_ = nullptr;
  kiln_plugin_t* plugin_ = nullptr;
  std::vector<kiln_instance_t*> instances_;
  std::vector<kiln_compiled_t*> compiled_;
  std::vector<std::pair<kiln_instance_t*, void*>> device_blocks_;
  std::vector<std::shared_ptr<ir::Graph>> graphs_;
};

/// A tensor view of `count` floats at `data` with `dims` in `kind`.
kiln_tensor_t view(void* data, const std::vector<int64_t>& dims, int32_t kind);

}  // namespace kiln::simdev_test
