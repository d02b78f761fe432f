#include "sim_program.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "sim_stream.h"

namespace simdev {
namespace {

using kiln::sdk::fail;
using kiln::sdk::Node;
using kiln::sdk::Value;

std::string check_operands(const Node& node, size_t min_in, size_t max_in) {
  const size_t n = node.num_inputs();
  if (n < min_in || n > max_in) return node.op_type() + " with " + std::to_string(n) + " inputs";
  for (size_t i = 0; i < n; ++i) {
    Value v = node.input(i);
    if (!v) {
      if (i < min_in) return "input " + std::to_string(i) + " is omitted";
      continue;
    }
    if (v.kind() != KILN_VALUE_TENSOR) return "input '" + v.name() + "' is not a tensor";
    if (v.dtype() != KILN_DTYPE_FLOAT32) {
      return "input '" + v.name() + "' is " +
             (v.dtype() == KILN_DTYPE_UNDEFINED ? std::string("of unknown dtype") : kiln::sdk::dtype_name(v.dtype())) +
             "; simdev runs float32 only";
    }
  }
  if (node.num_outputs() != 1 || !node.output(0)) return "the node must have exactly one output";
  return "";
}

std::string conv_reason(const Node& node) {
  const std::string pad = node.attr_string("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return "Conv with auto_pad " + pad + " (simdev takes explicit pads)";
  Value x = node.input(0), w = node.input(1);
  if (x.rank() != 4 || w.rank() != 4) return "Conv that is not 2-D (simdev runs NCHW 2-D convolutions)";
  if (!x.is_static() || !w.is_static()) return "Conv input or weight shape is not static (the workspace is declared at compile)";
  return "";
}

ConvAttrs conv_attrs(const Node& node) {
  ConvAttrs a;
  a.group = node.attr_int("group", 1);
  auto ints = [&](const char* name, std::vector<int64_t> dflt) {
    kiln::sdk::Attribute at = node.find_attribute(name);
    return at && at.type() == KILN_ATTR_INTS ? at.as_ints() : dflt;
  };
  a.strides = ints("strides", {1, 1});
  a.dilations = ints("dilations", {1, 1});
  a.pads = node.attr_string("auto_pad", "NOTSET") == "VALID" ? std::vector<int64_t>{0, 0, 0, 0}
                                                              : ints("pads", {0, 0, 0, 0});
  if (a.strides.size() != 2 || a.dilations.size() != 2 || a.pads.size() != 4) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "Conv " + node.label() + ": strides, dilations or pads do not fit 2-D");
  }
  for (int64_t s : a.strides)
    if (s < 1) fail(KILN_STATUS_INVALID_ARGUMENT, "Conv " + node.label() + ": stride < 1");
  for (int64_t d : a.dilations)
    if (d < 1) fail(KILN_STATUS_INVALID_ARGUMENT, "Conv " + node.label() + ": dilation < 1");
  for (int64_t p : a.pads)
    if (p < 0) fail(KILN_STATUS_INVALID_ARGUMENT, "Conv " + node.label() + ": negative pad");
  return a;
}

ContentHash constant_hash(const Value& v, const kiln::sdk::TensorView& t, const kiln::sdk::Host& host) {
  const kiln_host_api_t& api = host.api();
  if (api.value_constant_info) {
    kiln_constant_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    kiln_status_t* st = api.value_constant_info(v.raw(), &info);
    if (!st && (info.content_hash[0] || info.content_hash[1])) return {info.content_hash[0], info.content_hash[1]};
    api.status_release(st);
  }
  return hash_tensor(t.dtype, t.dims, t.rank, t.data, t.nbytes);
}

// The in-place pairs: an output made by an elementwise op straight from a
// partition input of the same (static) shape that no later op reads.
std::vector<size_t> inplace_pairs(const Program& p, const std::vector<Dims>& static_dims) {
  std::vector<size_t> pairs;
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    for (size_t k = 0; k < p.ops.size(); ++k) {
      const Op& op = p.ops[k];
      if (op.out != p.outputs[o] || (op.kind != OpKind::kAdd && op.kind != OpKind::kRelu)) continue;
      for (int32_t s : op.in) {
        const Slot& in = p.slots[static_cast<size_t>(s)];
        if (in.kind != SlotKind::kInput || static_dims[static_cast<size_t>(s)].empty()) continue;
        if (static_dims[static_cast<size_t>(s)] != static_dims[static_cast<size_t>(op.out)]) continue;
        bool read_later = false;
        for (size_t j = k + 1; j < p.ops.size(); ++j)
          read_later |= std::count(p.ops[j].in.begin(), p.ops[j].in.end(), s) > 0;
        if (read_later) continue;
        pairs.push_back(static_cast<size_t>(in.index));
        pairs.push_back(o);
        break;
      }
    }
  }
  return pairs;
}

}  // namespace

std::string decline_reason(const Node& node) {
  const std::string op = node.op_type();
  if (!node.domain().empty()) return "domain '" + node.domain() + "' is not supported";
  if (op == "Add") {
    if (node.opset() < 7) return "Add at opset " + std::to_string(node.opset()) + " (simdev needs 7+ broadcasting)";
    return check_operands(node, 2, 2);
  }
  if (op == "Relu") {
    if (node.opset() < 6) return "Relu at opset " + std::to_string(node.opset()) + " (simdev needs 6+)";
    return check_operands(node, 1, 1);
  }
  if (op == "MatMul") {
    std::string why = check_operands(node, 2, 2);
    if (!why.empty()) return why;
    if (node.input(0).rank() == 0 || node.input(1).rank() == 0) return "MatMul of a scalar";
    return "";
  }
  if (op == "Conv") {
    std::string why = check_operands(node, 2, 3);
    return why.empty() ? conv_reason(node) : why;
  }
  return "op " + op + " is not one of Add, Relu, MatMul, Conv";
}

ProgramState::~ProgramState() {
  for (const ContentHash& h : program.constant_hashes) device->release_constant(h);
}

std::vector<Dims> Program::infer(const std::vector<Dims>& in) const {
  std::vector<Dims> d(slots.size());
  for (size_t i = 0; i < inputs.size(); ++i) d[static_cast<size_t>(inputs[i])] = in[i];
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s].kind == SlotKind::kConstant) d[s] = slots[s].dims;
  for (const Op& op : ops) {
    auto at = [&](size_t k) -> const Dims& { return d[static_cast<size_t>(op.in[k])]; };
    Dims& out = d[static_cast<size_t>(op.out)];
    try {
      switch (op.kind) {
        case OpKind::kAdd: out = broadcast_dims(at(0), at(1)); break;
        case OpKind::kRelu: out = at(0); break;
        case OpKind::kMatMul: out = matmul_dims(at(0), at(1)); break;
        case OpKind::kConv:
          out = conv_dims(at(0), at(1), op.conv);
          if (op.in.size() > 2 && op.in[2] >= 0 && at(2) != Dims{out[1]})
            fail(KILN_STATUS_INVALID_ARGUMENT, "bias must be [" + std::to_string(out[1]) + "]");
          break;
      }
    } catch (const kiln::sdk::Error& e) {
      fail(KILN_STATUS_INVALID_ARGUMENT, op.label + ": " + e.what());
    }
  }
  return d;
}

std::shared_ptr<ProgramState> compile_program(const kiln::sdk::Graph& graph, const kiln::sdk::Partition& part,
                                              std::shared_ptr<Device> device) {
  auto state = std::make_shared<ProgramState>(device, Program{});
  Program& p = state->program;  // constants acquired so far are released with `state` on a throw
  std::map<const kiln_value_t*, int32_t> slot;
  std::vector<Dims> static_dims;
  auto new_slot = [&](const Value& v, SlotKind kind, int32_t index) {
    int32_t s = static_cast<int32_t>(p.slots.size());
    p.slots.push_back(Slot{kind, index, nullptr, {}});
    static_dims.push_back(v.is_static() ? v.dims() : Dims{});
    slot[v.raw()] = s;
    return s;
  };
  for (size_t i = 0; i < part.inputs.size(); ++i) {
    const Value& v = part.inputs[i];
    p.inputs.push_back(new_slot(v, SlotKind::kInput, static_cast<int32_t>(i)));
    p.input_dims.push_back(v.rank() >= 0 ? v.dims() : Dims{});
  }
  const kiln::sdk::Host& host = graph.host();
  for (size_t idx : part.nodes) {
    Node node = graph.node(idx);
    if (!node) fail(KILN_STATUS_OUT_OF_RANGE, "partition node " + std::to_string(idx) + " is not in the graph");
    std::string why = decline_reason(node);
    if (!why.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, "node " + node.label() + " is not one simdev runs: " + why);
    Op op;
    op.label = node.label();
    const std::string t = node.op_type();
    op.kind = t == "Add" ? OpKind::kAdd : t == "Relu" ? OpKind::kRelu : t == "MatMul" ? OpKind::kMatMul : OpKind::kConv;
    if (op.kind == OpKind::kConv) op.conv = conv_attrs(node);
    for (size_t k = 0; k < node.num_inputs(); ++k) {
      Value v = node.input(k);
      if (!v) {
        op.in.push_back(-1);
        continue;
      }
      auto it = slot.find(v.raw());
      if (it != slot.end()) {
        op.in.push_back(it->second);
      } else if (v.is_constant()) {
        kiln::sdk::TensorView c = v.constant();  // borrowed for this call: copy it to the device
        ContentHash h = constant_hash(v, c, host);
        void* dev = device->acquire_constant(h, c.data, c.nbytes);
        if (!dev) {
          fail(KILN_STATUS_RESOURCE_EXHAUSTED, "simdev: out of device memory for constant '" + v.name() + "' (" +
                                                    std::to_string(c.nbytes) + " bytes; " +
                                                    std::to_string(device->memory.used()) + " of " +
                                                    std::to_string(device->memory.capacity()) + " in use)");
        }
        p.constant_hashes.push_back(h);
        int32_t s = new_slot(v, SlotKind::kConstant, -1);
        p.slots[static_cast<size_t>(s)].device = dev;
        p.slots[static_cast<size_t>(s)].dims = c.shape();
        p.owned_constants.push_back(v.name());
        op.in.push_back(s);
      } else {
        fail(KILN_STATUS_INVALID_ARGUMENT, "node " + node.label() + " reads '" + v.name() +
                                               "', which is neither a partition input, a constant nor computed in the group");
      }
    }
    op.out = new_slot(node.output(0), SlotKind::kTemp, -1);
    if (op.kind == OpKind::kConv) {
      const size_t x = static_cast<size_t>(op.in[0]), w = static_cast<size_t>(op.in[1]);
      const Dims wd = p.slots[w].kind == SlotKind::kConstant ? p.slots[w].dims : static_dims[w];
      p.workspace_bytes = std::max<uint64_t>(p.workspace_bytes, conv_workspace_floats(static_dims[x], wd, op.conv) * 4);
    }
    p.ops.push_back(std::move(op));
  }
  for (size_t j = 0; j < part.outputs.size(); ++j) {
    auto it = slot.find(part.outputs[j].raw());
    if (it == slot.end() || p.slots[static_cast<size_t>(it->second)].kind != SlotKind::kTemp) {
      fail(KILN_STATUS_INVALID_ARGUMENT, "partition output '" + part.outputs[j].name() + "' is not computed by the group");
    }
    p.slots[static_cast<size_t>(it->second)].kind = SlotKind::kOutput;
    p.slots[static_cast<size_t>(it->second)].index = static_cast<int32_t>(j);
    p.outputs.push_back(it->second);
  }
  p.inplace = inplace_pairs(p, static_dims);
  return state;
}

namespace {

// Sleeps `us` microseconds in slices, polling cancellation; true when cancelled.
bool simulate_latency(const kiln_host_api_t& api, kiln_exec_context_t* ctx, int64_t us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (;;) {
    if (api.exec_should_cancel && api.exec_should_cancel(ctx)) return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= end) return false;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(end - now, std::chrono::milliseconds(1)));
  }
}

void run_op(const Op& op, RunArgs& a, float* workspace) {
  auto f = [&](size_t k) { return static_cast<float*>(a.ptrs[static_cast<size_t>(op.in[k])]); };
  auto d = [&](size_t k) -> const Dims& { return a.dims[static_cast<size_t>(op.in[k])]; };
  float* out = static_cast<float*>(a.ptrs[static_cast<size_t>(op.out)]);
  const Dims& od = a.dims[static_cast<size_t>(op.out)];
  switch (op.kind) {
    case OpKind::kAdd: add(f(0), d(0), f(1), d(1), out, od); break;
    case OpKind::kRelu: relu(f(0), out, numel(od)); break;
    case OpKind::kMatMul: matmul(f(0), d(0), f(1), d(1), out, od); break;
    case OpKind::kConv:
      conv(f(0), d(0), f(1), d(1), op.in.size() > 2 && op.in[2] >= 0 ? f(2) : nullptr, out, od, op.conv, workspace);
      break;
  }
}

}  // namespace

void reserve_run_memory(ProgramState& state, RunArgs& a) {
  Device& dev = *state.device;
  const Program& p = state.program;
  auto grab = [&](size_t bytes, const std::string& what) -> void* {
    void* t = dev.memory.allocate(bytes, 64);
    if (!t) {
      const std::string why = "simdev: out of device memory for " + what + " (" + std::to_string(bytes) + " bytes; " +
                              std::to_string(dev.memory.used()) + " of " + std::to_string(dev.memory.capacity()) +
                              " in use)";
      release_run_memory(state, a);
      fail(KILN_STATUS_RESOURCE_EXHAUSTED, why);
    }
    a.temps.push_back(t);
    return t;
  };
  for (size_t s = 0; s < p.slots.size(); ++s)
    if (p.slots[s].kind == SlotKind::kTemp) a.ptrs[s] = grab(static_cast<size_t>(numel(a.dims[s])) * 4, "an intermediate");
  size_t need = 0;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kConv)
      need = std::max(need, conv_workspace_floats(a.dims[static_cast<size_t>(op.in[0])],
                                                  a.dims[static_cast<size_t>(op.in[1])], op.conv) * 4);
  if (need && (!a.workspace || a.workspace_size < need)) {
    a.workspace = grab(need, "the Conv workspace");
    a.workspace_size = need;
    dev.counters.own_workspaces += 1;
  } else if (need) {
    dev.counters.host_workspaces += 1;
  }
}

void release_run_memory(ProgramState& state, RunArgs& a) {
  for (void* t : a.temps) state.device->memory.release(t);
  a.temps.clear();
}

kiln_status_t* run_program(const kiln::sdk::Host& host, ProgramState& state, RunArgs& a) {
  const kiln_host_api_t& api = host.api();
  Device& dev = *state.device;
  const Program& p = state.program;
  auto finish = [&](kiln_status_t* st) {  // every way out: the trace window closes before the fence is signalled
    if (a.traced) dev.end_trace(a.ctx);
    release_run_memory(state, a);
    return st;
  };
  if (a.fail_oom) {
    return finish(host.make_status(KILN_STATUS_RESOURCE_EXHAUSTED, "simdev: out of device memory (fail_after)"));
  }
  try {
    for (const Op& op : p.ops) {
      const uint64_t t0 = now_ns();  // the slice covers the simulated time and the kernel
      if (simulate_latency(api, a.ctx, a.latency_us)) fail(KILN_STATUS_CANCELLED, "simdev: cancelled before " + op.label);
      {
        DeviceMemory::Access access(dev.memory);
        run_op(op, a, static_cast<float*>(a.workspace));
      }
      if (a.traced) api.exec_trace_event(a.ctx, op.label.c_str(), 0, t0, now_ns());
    }
  } catch (const kiln::sdk::Error& e) {
    return finish(host.make_status(e.code(), e.what()));
  } catch (const std::exception& e) {
    return finish(host.make_status(KILN_STATUS_INTERNAL, e.what()));
  }
  return finish(nullptr);
}

}  // namespace simdev
