#include "runtime/schedule.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "ir/subgraphs.h"
#include "runtime/backends/partition_kernel.h"

namespace kiln::runtime {

namespace {

std::atomic<int>& interop_flag() {
  static std::atomic<int> flag{[] {
    const char* env = std::getenv("KILN_INTEROP");
    return env && std::strcmp(env, "0") == 0 ? 0 : 1;
  }()};
  return flag;
}

// Output elements of a step when every output's shape is static, else -1.
int64_t static_output_elements(const ir::Node& n, const ir::Graph& g) {
  int64_t total = 0;
  for (ir::ValueId id : n.outputs) {
    if (id == ir::kNoValue) continue;
    const ir::ValueType& t = g.value(id).type;
    if (!t.is_tensor() || !t.is_static()) return -1;
    total += t.static_shape().numel();
  }
  return total;
}

// A step that may share a group: a portable kernel that computes its outputs
// from its inputs alone and is worth a task of its own.
bool groupable(const Step& s, const ir::Graph& g) {
  const ir::Node& n = *s.node;
  if (n.domain == kPartitionDomain || ir::has_subgraph(n)) return false;
  if (s.flags & (kernels::kNondeterministic | kernels::kAliasesInput0)) return false;
  const int64_t elements = static_output_elements(n, g);
  return elements < 0 || elements >= kMinGroupedElements;
}

}  // namespace

std::vector<uint32_t> concurrent_groups(const std::vector<Step>& steps, const ir::Graph& graph) {
  std::vector<uint32_t> begin;
  std::unordered_set<ir::ValueId> produced;  // outputs of the open group
  size_t open = 0;                           // steps in the open group
  bool open_groupable = false;
  for (size_t s = 0; s < steps.size(); ++s) {
    const ir::Node& n = *steps[s].node;
    const bool ok = groupable(steps[s], graph);
    bool joins = ok && open_groupable && open < kMaxGroupSteps;
    if (joins)
      for (ir::ValueId id : n.inputs)
        if (id != ir::kNoValue && produced.count(id)) joins = false;
    if (!joins) {
      begin.push_back(static_cast<uint32_t>(s));
      produced.clear();
      open = 0;
      open_groupable = ok;
    }
    ++open;
    for (ir::ValueId id : n.outputs)
      if (id != ir::kNoValue) produced.insert(id);
  }
  begin.push_back(static_cast<uint32_t>(steps.size()));
  return begin;
}

std::vector<int32_t> group_edges(const std::vector<uint32_t>& begin, bool last) {
  std::vector<int32_t> edge(begin.empty() ? 0 : begin.back());
  for (size_t g = 0; g + 1 < begin.size(); ++g)
    for (uint32_t s = begin[g]; s < begin[g + 1]; ++s)
      edge[s] = static_cast<int32_t>(last ? begin[g + 1] - 1 : begin[g]);
  return edge;
}

bool interop_enabled() { return interop_flag().load(std::memory_order_relaxed) != 0; }

void set_interop_enabled(bool on) { interop_flag().store(on ? 1 : 0, std::memory_order_relaxed); }

}  // namespace kiln::runtime
