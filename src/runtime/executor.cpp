// Program::run: the executor's hot loop, its planned allocator and the
// subgraph runner used by control-flow kernels.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "core/tensor_access.h"
#include "runtime/program.h"
#include "runtime/run_state.h"
#include "runtime/schedule.h"

namespace kiln::runtime {

RunState::RunState(const Program& program) {
  const ir::Graph& g = program.graph();
  slots.resize(g.values.size());
  for (const auto& [id, t] : program.constants_) slots[static_cast<size_t>(id)] = Value(t);
  if (program.device_plan()) device = std::make_unique<DeviceRun>(program.device_plan());
  observed.assign(g.values.size(), 0);
  const auto& steps = program.steps();
  for (const Step& s : steps) {
    in_begin.push_back(static_cast<uint32_t>(in_ptrs.size()));
    out_begin.push_back(static_cast<uint32_t>(out_ptrs.size()));
    for (ir::ValueId id : s.node->inputs)
      in_ptrs.push_back(id == ir::kNoValue ? nullptr : &slots[static_cast<size_t>(id)]);
    for (ir::ValueId id : s.node->outputs)
      out_ptrs.push_back(id == ir::kNoValue ? nullptr : &slots[static_cast<size_t>(id)]);
  }
  in_begin.push_back(static_cast<uint32_t>(in_ptrs.size()));
  out_begin.push_back(static_cast<uint32_t>(out_ptrs.size()));
}

RunState::~RunState() { aligned_free_bytes(arena); }

void RunState::reserve_arena(size_t bytes) {
  if (bytes <= arena_bytes) return;
  aligned_free_bytes(arena);
  arena = static_cast<uint8_t*>(aligned_alloc_bytes(bytes));
  arena_bytes = bytes;
}

namespace {

class PlannedAllocator final : public kernels::OutputAllocator {
 public:
  PlannedAllocator(RunState& state, const std::vector<int8_t>& plannable) : st_(state), plannable_(plannable) {}

  Status allocate(ir::ValueId id, DType dtype, const Shape& shape, Tensor* out) override {
    if (st_.device && st_.device->place(id, dtype, shape, out)) return Status::ok();  // device_edges.h
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
    if (id >= 0 && dtype != DType::kString && plannable_[static_cast<size_t>(id)]) {
      const auto v = static_cast<size_t>(id);
      if (st_.plan && st_.plan->offsets[v] >= 0 && bytes <= st_.plan->sizes[v]) {
        core::TensorAccess::reset_view(*out, dtype, shape, st_.arena + st_.plan->offsets[v]);
        return Status::ok();
      }
      record_miss(id, bytes);
    }
    *out = Tensor::allocate(dtype, shape);
    return Status::ok();
  }

 private:
  // Out of line: the planned path stays lean. Steps of a group may allocate
  // at once; only a miss takes the lock.
  [[gnu::noinline]] void record_miss(ir::ValueId id, size_t bytes) {
    const auto v = static_cast<size_t>(id);
    std::lock_guard<std::mutex> lock(miss_mu_);
    if (st_.observed[v] == 0) st_.missed.push_back(id);
    st_.observed[v] = std::max(st_.observed[v], std::max<size_t>(bytes, 1));
  }

  RunState& st_;
  const std::vector<int8_t>& plannable_;
  std::mutex miss_mu_;
};

class SubgraphRunnerImpl final : public kernels::SubgraphRunner {
 public:
  SubgraphRunnerImpl(const Program& program, RunState& state, ThreadPool* pool, const RunOptions* options)
      : program_(program), state_(state), pool_(pool), options_(options) {}

  Result<std::vector<Value>> run(const ir::Graph& graph, std::span<const Value> inputs) override {
    const Program* sub = program_.subprogram(&graph);
    if (!sub) return internal_error("subgraph '", graph.name, "' was not prepared");
    if (inputs.size() != graph.inputs.size()) {
      return invalid_argument("subgraph '", graph.name, "' takes ", graph.inputs.size(), " inputs, got ",
                              inputs.size());
    }
    std::vector<const Value*> outer;
    outer.reserve(sub->outer_bindings().size());
    for (ir::ValueId id : sub->outer_bindings()) outer.push_back(&state_.slots[static_cast<size_t>(id)]);
    return sub->run(inputs, outer, pool_, nullptr, options_);
  }

 private:
  const Program& program_;
  RunState& state_;
  ThreadPool* pool_;
  const RunOptions* options_;
};

// Outputs handed to the caller must own memory nobody else writes: arena
// views and tensors shared with constants or inputs are copied.
Value detach(Value v) {
  if (v.is_tensor()) {
    const Tensor& t = v.tensor();
    if (!t.owns_memory() || core::TensorAccess::holder(t).use_count() > 1) return Value(t.clone());
    return v;
  }
  if (v.is_sequence()) {
    for (Tensor& t : v.sequence_items())
      if (!t.owns_memory() || core::TensorAccess::holder(t).use_count() > 1) t = t.clone();
  }
  return v;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t thread_number() {
  static std::atomic<uint64_t> next{1};
  thread_local uint64_t id = next++;
  return id;
}

// Records the chunks pool workers run for the current step of a profiled run.
class WorkerChunkLog final : public ChunkRecorder {
 public:
  WorkerChunkLog(RunProfile& profile, int64_t run_start) : profile_(profile), run_start_(run_start) {}
  void set_step(const ir::Node* node) { node_ = node; }
  void chunk(int64_t start_ns, int64_t end_ns) override { record(*node_, start_ns, end_ns); }
  void record(const ir::Node& n, int64_t start_ns, int64_t end_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    profile_.worker_chunks.push_back(NodeEvent{n.name.empty() ? n.op_type : n.name, n.op_type, n.domain,
                                               start_ns - run_start_, end_ns - start_ns, thread_number()});
  }

 private:
  RunProfile& profile_;
  const int64_t run_start_;
  const ir::Node* node_ = nullptr;
  std::mutex mu_;
};

// The chunk recorder of one step of a group run at once (the steps' chunks
// interleave on the workers, so each step names its own node).
class StepChunkLog final : public ChunkRecorder {
 public:
  StepChunkLog(WorkerChunkLog& log, const ir::Node& node) : log_(log), node_(node) {}
  void chunk(int64_t start_ns, int64_t end_ns) override { log_.record(node_, start_ns, end_ns); }

 private:
  WorkerChunkLog& log_;
  const ir::Node& node_;
};

NodeEvent node_event(const ir::Node& n, int64_t start, int64_t end) {
  return NodeEvent{n.name.empty() ? n.op_type : n.name, n.op_type, n.domain, start, end - start, thread_number()};
}

// The step loop of Program::run. `profile` and `chunk_log` are both null or
// both set.
struct StepLoop {
  const Program& program;
  RunState& st;
  PlannedAllocator& alloc;
  SubgraphRunnerImpl& subgraphs;
  ThreadPool* pool;
  const RunOptions* options;
  RunProfile* profile;
  WorkerChunkLog* chunk_log;
  int64_t run_start;
  // Static steps of this run (runtime/static_steps.h): null when the run's
  // plan is not the one they were bound under. `fast` turns false for the
  // rest of the run when a slot operand disagrees with its bound shape.
  const StaticSteps* statics = nullptr;
  bool fast = false;

  // Fills the addresses of a static step's slot operands; false when one
  // does not hold a tensor of the bound dtype and shape.
  bool take_slot_inputs(const StaticStep& ss) {
    for (size_t k = 0; k < ss.slot_inputs.size(); ++k) {
      const BoundValue& b = ss.slot_inputs[k];
      const Value& v = st.slots[static_cast<size_t>(b.id)];
      if (!slot_matches(v, b)) return false;
      st.statics.in[ss.slot_input_pos[k]] = v.tensor().raw_data();
    }
    return true;
  }

  // Leaves static calls before step s: every static output made before s
  // and read from s on goes into its slot, for compute() to read.
  [[gnu::noinline]] void leave_static(size_t s) {
    fast = false;
    const auto step = static_cast<int32_t>(s);
    for (const StaticSteps::Produced& p : statics->produced())
      if (p.producer < step && p.last_read >= step)
        put_view(st.slots[static_cast<size_t>(p.value.id)], p.value, st.arena + p.value.offset);
  }

  // Runs static step `ss` (program step s); false when it must run through
  // compute() instead (the run has left static calls).
  [[gnu::always_inline]] bool run_static(size_t s, const StaticStep& ss, NodeEvent* event) {
    if (!ss.slot_inputs.empty() && !take_slot_inputs(ss)) [[unlikely]] {
      leave_static(s);
      return false;
    }
    const int64_t t0 = event ? now_ns() : 0;
    const kernels::StaticArgs args{st.statics.in.data() + ss.in_begin, st.statics.out.data() + ss.out_begin, pool};
    ss.call.fn(ss.call, args);
    if (event) *event = node_event(*program.steps()[s].node, t0 - run_start, now_ns() - run_start);
    for (const BoundValue& v : ss.views) put_view(st.slots[static_cast<size_t>(v.id)], v, st.arena + v.offset);
    return true;
  }

  // Runs step s; with `event`, stores its profile event there. False with
  // `*error` set when it fails (one Status on the OK path: the hot loop).
  [[gnu::always_inline]] bool run_step(size_t s, NodeEvent* event, Status* error) {
    const Step& step = program.steps()[s];
    if (options && options->stop_requested()) {  // between nodes: cancel flag, deadline
      *error = options->check().with_context("before node " + step.node->label());
      if (!error->is_ok()) return false;
    }
    if (fast) {
      const StaticStep* ss = statics->step(s);
      if (ss && run_static(s, *ss, event)) return true;
    }
    if (st.device) [[unlikely]] {  // device plugins: wait for host copies this step reads (device_edges.h)
      *error = st.device->before_step(s);
      if (!error->is_ok()) {
        *error = std::move(*error).with_context("node " + step.node->label());
        return false;
      }
    }
    const DeviceRunScope device_scope(st.device.get());
    const uint32_t ib = st.in_begin[s], ob = st.out_begin[s];
    kernels::KernelContext ctx(*step.node, st.in_ptrs.data() + ib, st.in_begin[s + 1] - ib, st.out_ptrs.data() + ob,
                               st.out_begin[s + 1] - ob, &alloc, pool, &subgraphs);
    ctx.set_run_options(options);
    const int64_t t0 = event ? now_ns() : 0;
    Status status = compute_guarded(*step.kernel, ctx);
    if (event) *event = node_event(*step.node, t0 - run_start, now_ns() - run_start);
    if (status.is_ok()) [[likely]]
      return true;
    *error = std::move(status).with_context("node " + step.node->label());
    return false;
  }

  void release(size_t s) {
    for (ir::ValueId id : fast ? statics->release(s) : program.steps()[s].release) {
      Value& v = st.slots[static_cast<size_t>(id)];
      if (!v.is_none()) v.reset();  // values only static steps read were never put in their slots
    }
  }

  // Steps [b, e) of one group, each a task of its own; the first error in
  // step order wins, as in the sequential order.
  Status run_group(size_t b, size_t e) {
    Status statuses[kMaxGroupSteps];
    NodeEvent events[kMaxGroupSteps];
    pool->run_tasks(static_cast<int64_t>(e - b), [&](int64_t i, int64_t) {
      const auto k = static_cast<size_t>(i);
      if (!profile) {
        run_step(b + k, nullptr, &statuses[k]);
        return;
      }
      StepChunkLog log(*chunk_log, *program.steps()[b + k].node);
      const ScopedChunkRecorder recorder(&log);
      run_step(b + k, &events[k], &statuses[k]);
    });
    if (profile)
      for (size_t k = 0; k < e - b; ++k)
        if (events[k].thread_id != 0) profile->events.push_back(std::move(events[k]));
    for (size_t k = 0; k < e - b; ++k)
      if (!statuses[k].is_ok()) return std::move(statuses[k]);
    for (size_t s = b; s < e; ++s) release(s);
    return Status::ok();
  }

  // Steps [b, e) one after the other.
  Status run_range(size_t b, size_t e) {
    Status error;
    if (!profile) {
      for (size_t s = b; s < e; ++s) {
        if (!run_step(s, nullptr, &error)) return error;
        release(s);
      }
      return error;
    }
    for (size_t s = b; s < e; ++s) {
      chunk_log->set_step(program.steps()[s].node);
      NodeEvent event;
      const bool ok = run_step(s, &event, &error);
      if (event.thread_id != 0) profile->events.push_back(std::move(event));  // 0: cancelled before it ran
      if (!ok) return error;
      release(s);
    }
    return error;
  }

  Status run() {
    const ThreadPool::RunScope run_scope(pool);  // workers spin between this run's nodes
    const std::vector<uint32_t>& groups = program.groups();
    const size_t n = program.num_steps();
    // One thread, or no group of two steps: the plain loop.
    // A run with device partitions stays sequential: DeviceRun's waits and
    // scope belong to the calling thread (device_edges.h).
    if (!pool || pool->num_threads() <= 1 || !interop_enabled() || groups.size() == n + 1 || st.device)
      return run_range(0, n);
    for (size_t g = 0; g + 1 < groups.size(); ++g) {
      const size_t b = groups[g], e = groups[g + 1];
      KILN_RETURN_IF_ERROR(e - b > 1 ? run_group(b, e) : run_range(b, e));
    }
    return Status::ok();
  }
};

// A profiled run's steps, with the worker-chunk recorder installed; out of
// line so the profiling set-up leaves the unprofiled path as it was compiled.
[[gnu::noinline]] Status run_profiled(StepLoop loop, RunProfile& profile) {
  profile.events.clear();
  profile.events.reserve(loop.program.num_steps());
  profile.worker_chunks.clear();
  profile.plugin_events.clear();
  profile.start_ns = loop.run_start;
  WorkerChunkLog chunk_log(profile, loop.run_start);
  const ScopedChunkRecorder recorder(&chunk_log);
  loop.profile = &profile;
  loop.chunk_log = &chunk_log;
  return loop.run();
}

}  // namespace

Status compute_guarded(const kernels::Kernel& kernel, kernels::KernelContext& ctx) {
  // Kiln code does not throw, but the standard library can (bad_alloc,
  // length_error on absurd sizes a model asks for); turn that into a status.
  try {
    return kernel.compute(ctx);
  } catch (const std::bad_alloc&) {
    return make_status(StatusCode::kOutOfRange, "out of memory");
  } catch (const std::exception& e) {
    return internal_error("unexpected exception: ", e.what());
  }
}

Result<std::vector<Value>> Program::run(std::span<const Value> inputs, std::span<const Value* const> outer,
                                        ThreadPool* pool, RunProfile* profile, const RunOptions* options) const {
  const ir::Graph& g = *graph_;
  if (inputs.size() != g.inputs.size())
    return invalid_argument("expected ", g.inputs.size(), " inputs, got ", inputs.size());

  // Take a run state and the plan for this input-shape signature.
  const std::string sig = signature(inputs);
  std::unique_ptr<RunState> st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_states_.empty()) {
      st = std::move(idle_states_.back());
      idle_states_.pop_back();
    }
    auto it = plans_.find(sig);
    if (it == plans_.end()) {
      if (plans_.size() >= 64) plans_.clear();  // bound the cache for ever-changing shapes
      it = plans_.emplace(sig, PlanEntry{}).first;
    }
    if (!st) st = std::make_unique<RunState>(*this);
    st->plan = it->second.plan;
  }
  if (st->plan) st->reserve_arena(st->plan->arena_bytes);

  for (size_t i = 0; i < inputs.size(); ++i) st->slots[static_cast<size_t>(g.inputs[i])] = inputs[i];
  for (size_t i = 0; i < outer.size() && i < g.outer_refs.size(); ++i)
    st->slots[static_cast<size_t>(g.outer_refs[i])] = *outer[i];

  PlannedAllocator alloc(*st, plannable_);
  SubgraphRunnerImpl subgraphs(*this, *st, pool, options);
  const int64_t run_start = profile ? now_ns() : 0;
  if (st->device && profile) st->device->start_trace(run_start);
  // Static calls only under the plan they were bound for (static_steps.h).
  const StaticSteps* statics =
      static_steps_ && st->plan.get() == static_steps_->plan() && !st->device ? static_steps_.get() : nullptr;
  if (statics) st->statics.resolve(*statics, st->arena);
  StepLoop loop{*this, *st, alloc, subgraphs, pool, options, nullptr, nullptr, run_start, statics, statics != nullptr};
  Status status = profile ? run_profiled(loop, *profile) : loop.run();
  if (st->device) {  // device plugins: wait for work in flight; its errors are the run's
    status = st->device->finish(std::move(status));
    if (profile) st->device->take_trace(&profile->plugin_events);
  }

  std::vector<Value> outputs;
  if (status.is_ok()) {
    outputs.reserve(g.outputs.size());
    for (ir::ValueId id : g.outputs) outputs.push_back(detach(std::move(st->slots[static_cast<size_t>(id)])));
  }
  // Leave the state clean for the next run: drop everything but constants.
  for (ir::ValueId id : step_outputs_) {
    Value& v = st->slots[static_cast<size_t>(id)];
    if (!v.is_none()) v.reset();
  }
  for (ir::ValueId id : g.inputs) st->slots[static_cast<size_t>(id)].reset();
  for (ir::ValueId id : g.outer_refs) st->slots[static_cast<size_t>(id)].reset();

  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!st->missed.empty()) {
      // Values that missed the plan (unknown or larger shapes): plan again with
      // what was observed. A few tries; data-dependent shapes then stay on the heap.
      PlanEntry& e = plans_[sig];
      if (e.replans < 4) {
        if (e.sizes.empty()) e.sizes.assign(g.values.size(), 0);
        for (ir::ValueId id : st->missed) {
          auto v = static_cast<size_t>(id);
          e.sizes[v] = std::max(e.sizes[v], st->observed[v]);
        }
        e.plan = std::make_shared<const MemoryPlan>(plan_memory(e.sizes, lifetimes_));
        ++e.replans;
      }
    }
    for (ir::ValueId id : st->missed) st->observed[static_cast<size_t>(id)] = 0;
    st->missed.clear();
    st->plan.reset();
    idle_states_.push_back(std::move(st));
  }
  if (profile) profile->total_ns = now_ns() - run_start;
  if (!status.is_ok()) return status;
  return outputs;
}

}  // namespace kiln::runtime
