// ElementwiseChain (domain kiln.fused): a run of float32 element-wise
// nodes fused at load by the optimizer (optimizer/elementwise_chains.h).
// Input 0 is the chain value x; the other inputs are the operands of its
// binary steps. Attributes, one entry per step in order:
//   ops       "Add" | "Sub" | "Mul" | "Div" | "Relu" | "LeakyRelu" |
//             "Sigmoid" | "Tanh" | "HardSigmoid" | "HardSwish" | "Exp" |
//             "Sqrt" | "Erf"
//   operands  the input index of a binary step's other operand; -1 for the rest
//   reversed  1 when the chain value is the right operand (c - x, c / x)
//   alphas, betas  LeakyRelu's alpha, HardSigmoid's alpha and beta (else 0)
// Every step runs over a block of elements before the next, so the data
// stays in L1 and the chain is one pass over memory. Each step calls the
// float32 loop the separate node's kernel calls, so results are the same
// bit for bit. Operands have one element or x's shape (they never grow it).
#include <algorithm>

#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/util/scratch.h"
#include "kernels/registry.h"
#include "kernels/static_call.h"

namespace kiln::kernels {
namespace {

using namespace ew;

enum class StepKind : uint8_t {
  kArith, kRelu, kLeakyRelu, kSigmoid, kTanh, kHardSigmoid, kHardSwish, kExp, kSqrt, kErf
};

struct ChainStep {
  StepKind kind = StepKind::kArith;
  simd::Arith arith = simd::Arith::kAdd;
  int32_t operand = -1;
  bool reversed = false;
  float alpha = 0.f, beta = 0.f;
};

bool step_kind(const std::string& op, ChainStep* s) {
  static const std::pair<const char*, StepKind> kUnary[] = {
      {"Relu", StepKind::kRelu},   {"LeakyRelu", StepKind::kLeakyRelu}, {"Sigmoid", StepKind::kSigmoid},
      {"Tanh", StepKind::kTanh},   {"HardSigmoid", StepKind::kHardSigmoid}, {"HardSwish", StepKind::kHardSwish},
      {"Exp", StepKind::kExp},     {"Sqrt", StepKind::kSqrt},           {"Erf", StepKind::kErf}};
  static const std::pair<const char*, simd::Arith> kArith[] = {
      {"Add", simd::Arith::kAdd}, {"Sub", simd::Arith::kSub}, {"Mul", simd::Arith::kMul}, {"Div", simd::Arith::kDiv}};
  for (const auto& [name, a] : kArith)
    if (op == name) {
      s->kind = StepKind::kArith;
      s->arith = a;
      return true;
    }
  for (const auto& [name, k] : kUnary)
    if (op == name) {
      s->kind = k;
      return true;
    }
  return false;
}

// Elements per block: 4 KiB of output stays in L1 across the steps.
constexpr int64_t kBlock = 1024;

struct Operand {
  const float* data;
  int64_t step;  // 1: x's size; 0: one element
};

class ElementwiseChainKernel final : public Kernel, public StaticCallable {
 public:
  Status init(const KernelInit& init) {
    const std::vector<std::string> ops = init.attr_strings("ops");
    const std::vector<int64_t> operands = init.attr_ints("operands"), reversed = init.attr_ints("reversed");
    const std::vector<float> alphas = init.attr_floats("alphas"), betas = init.attr_floats("betas");
    const size_t k = ops.size();
    if (k == 0 || operands.size() != k || reversed.size() != k || alphas.size() != k || betas.size() != k)
      return invalid_argument("ops, operands, reversed, alphas and betas must have one entry per step");
    const auto num_inputs = static_cast<int64_t>(init.inputs.size());
    for (size_t i = 0; i < k; ++i) {
      ChainStep s;
      if (!step_kind(ops[i], &s)) return invalid_argument("step ", i, " has unknown op '", ops[i], "'");
      const bool binary = s.kind == StepKind::kArith;
      if (binary ? (operands[i] < 1 || operands[i] >= num_inputs) : operands[i] != -1)
        return invalid_argument("step ", i, " (", ops[i], ") has operand ", operands[i]);
      s.operand = static_cast<int32_t>(operands[i]);
      s.reversed = reversed[i] != 0;
      s.alpha = alphas[i];
      s.beta = betas[i];
      steps_.push_back(s);
    }
    grain_ = std::max<int64_t>(kBlock, kGrainCheap / static_cast<int64_t>(k));
    const_numel_.assign(init.inputs.size(), -1);
    for (size_t i = 1; i < init.inputs.size(); ++i)
      if (const Tensor* c = init.constant_input(i)) const_numel_[i] = c->numel();
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    if (x->dtype() != DType::kFloat32) return unsupported_dtype(0, x->dtype());
    const int64_t n = x->numel();
    // The operands' addresses and steps, once (a chain may have hundreds),
    // in this thread's table: workers only read it while this call waits.
    thread_local Scratch table;
    static_assert(sizeof(Operand) % sizeof(float) == 0 && alignof(Operand) <= kTensorAlignment);
    auto* operands = reinterpret_cast<Operand*>(
        table.get(static_cast<int64_t>(ctx.num_inputs() * sizeof(Operand) / sizeof(float))));
    for (size_t i = 1; i < ctx.num_inputs(); ++i) {
      KILN_ASSIGN_OR_RETURN(const Tensor* c, tensor_input(ctx, i));
      KILN_RETURN_IF_ERROR(check_operand(x->shape(), c->dtype(), c->shape(), i));
      operands[i] = Operand{c->data<float>(), c->numel() == n ? 1 : 0};
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, x->shape()));
    run(x->data<float>(), y->data<float>(), n, ctx.pool(), [operands](int32_t i) { return operands[i]; });
    return Status::ok();
  }

  // Static calls need every operand constant (as the optimizer makes them):
  // their sizes, known at init, say which have x's size.
  bool bind_static(const StaticSignature& sig, StaticCall* out) const override {
    if (sig.inputs.size() != const_numel_.size() || sig.outputs.size() != 1) return false;
    const TensorSig &x = sig.inputs[0], &y = sig.outputs[0];
    if (x.dtype != DType::kFloat32 || y.dtype != DType::kFloat32 || x.shape != y.shape || x.shape.numel() <= 0)
      return false;
    for (size_t i = 1; i < sig.inputs.size(); ++i) {
      if (const_numel_[i] != sig.inputs[i].shape.numel()) return false;
      if (!check_operand(x.shape, sig.inputs[i].dtype, sig.inputs[i].shape, i).is_ok()) return false;
    }
    out->set_params(StaticParams{this, x.shape.numel()});
    out->fn = [](const StaticCall& call, const StaticArgs& args) {
      const auto& p = call.params_as<StaticParams>();
      const ElementwiseChainKernel& k = *p.kernel;
      k.run(static_cast<const float*>(args.inputs[0]), static_cast<float*>(args.outputs[0]), p.n, args.pool,
            [&](int32_t i) {
              const int64_t step = k.const_numel_[static_cast<size_t>(i)] == p.n ? 1 : 0;
              return Operand{static_cast<const float*>(args.inputs[i]), step};
            });
    };
    return true;
  }

 private:
  struct StaticParams {
    const ElementwiseChainKernel* kernel;
    int64_t n;
  };

  static Status check_operand(const Shape& x, DType dtype, const Shape& c, size_t i) {
    if (dtype != DType::kFloat32) return unsupported_dtype(i, dtype);
    if (c == x || (c.rank() <= x.rank() && c.numel() == 1)) return Status::ok();  // the usual operands, cheaply
    Result<Shape> b = broadcast_shapes(x, c);
    if (!b.ok() || *b != x || (c.numel() != 1 && c.numel() != x.numel()))
      return invalid_argument("input ", i, " of shape ", c.to_string(), " does not broadcast to the chain value's ",
                              x.to_string(), " without growing it");
    return Status::ok();
  }

  template <class Operands>
  void run(const float* x, float* y, int64_t n, ThreadPool* pool, const Operands& operand) const {
    parallel_for(pool, n, grain_, [&](int64_t i0, int64_t i1) {
      for (int64_t b = i0; b < i1; b += kBlock) {
        const int64_t m = std::min(kBlock, i1 - b);
        const float* src = x + b;
        float* dst = y + b;
        for (const ChainStep& s : steps_) {
          apply(s, src, dst, m, b, operand);
          src = dst;
        }
      }
    });
  }

  template <class Operands>
  static void apply(const ChainStep& s, const float* src, float* dst, int64_t m, int64_t b, const Operands& operand) {
    switch (s.kind) {
      case StepKind::kArith: {
        const Operand c = operand(s.operand);
        const float* cp = c.data + b * c.step;
        if (s.reversed) {
          simd::arith_f32(s.arith, cp, c.step, src, 1, dst, m);
        } else {
          simd::arith_f32(s.arith, src, 1, cp, c.step, dst, m);
        }
        return;
      }
      case StepKind::kRelu: return simd::relu_f32(src, dst, m);
      case StepKind::kLeakyRelu: return simd::leaky_relu_f32(src, dst, m, s.alpha);
      case StepKind::kSigmoid: return simd::sigmoid_f32(src, dst, m);
      case StepKind::kTanh: return simd::tanh_f32(src, dst, m);
      case StepKind::kHardSigmoid: return simd::hard_sigmoid_f32(src, dst, m, s.alpha, s.beta);
      case StepKind::kHardSwish: return simd::hard_swish_f32(src, dst, m);
      case StepKind::kExp: return simd::exp_f32(src, dst, m);
      case StepKind::kSqrt: return simd::sqrt_f32(src, dst, m);
      case StepKind::kErf: return simd::erf_f32(src, dst, m);
    }
  }

  std::vector<ChainStep> steps_;
  std::vector<int64_t> const_numel_;  // per input: elements of a constant operand, -1 otherwise
  int64_t grain_ = kGrainCheap;
};

}  // namespace

void register_elementwise_chain_ops(KernelRegistry& r) {
  r.add({.domain = "kiln.fused", .op_type = "ElementwiseChain", .since_version = 1, .until_version = 1000,
         .dtypes = dtype_set(DType::kFloat32), .type_input = 0, .factory = make_kernel<ElementwiseChainKernel>,
         .flags = 0});
}

}  // namespace kiln::kernels
