// Recurrent ops: RNN, GRU and LSTM (opset 7 and 14: layout), forward,
// reverse and bidirectional, with sequence_lens, initial_h/initial_c,
// activations with activation_alpha/beta, clip, GRU linear_before_reset and
// LSTM peepholes and input_forget.
//
// Per direction, X * W^T (+ both biases) for every time step is one SGEMM up
// front; each step then adds H_{t-1} * R^T (a second SGEMM over the batch)
// and applies the gate equations of the ONNX spec. With batch <= 3 and
// constant R, the per-step product is one GEMV per batch row over R packed
// at load (a GEMM microkernel would compute MR rows for one). Gate math runs
// over whole gate vectors with the SIMD sigmoid/tanh/relu of
// elementwise_simd.h. The two directions of a bidirectional op run at the
// same time when the pool has two threads or more. Everything is computed in
// float32; float16 and double inputs are converted on the way in and out.
// LSTM with constant W and R and the default activations takes the sliced
// path instead (rnn_lstm_sliced.h): one parallel region per step, the GEMM
// adding onto the input projection and the whole cell fused per slice.
// Batch entries whose sequence_lens is shorter than the step stop updating:
// their Y rows are zero and Y_h/Y_c keep their last state.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/portable/rnn_lstm_sliced.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

enum class CellKind { kRnn, kGru, kLstm };

struct Activation {
  enum class Fn {
    kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu, kSoftsign,
    kSoftplus,
  };
  Fn fn = Fn::kTanh;
  float alpha = 0.f;
  float beta = 0.f;

  float operator()(float x) const {
    switch (fn) {
      case Fn::kRelu: return x > 0 ? x : 0.f;
      case Fn::kTanh: return std::tanh(x);
      case Fn::kSigmoid: return x >= 0 ? 1.f / (1.f + std::exp(-x)) : std::exp(x) / (1.f + std::exp(x));
      case Fn::kAffine: return alpha * x + beta;
      case Fn::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case Fn::kThresholdedRelu: return x > alpha ? x : 0.f;
      case Fn::kScaledTanh: return alpha * std::tanh(beta * x);
      case Fn::kHardSigmoid: return std::min(std::max(alpha * x + beta, 0.f), 1.f);
      case Fn::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.f);
      case Fn::kSoftsign: return x / (1.f + std::fabs(x));
      case Fn::kSoftplus: return x > 20.f ? x : std::log1p(std::exp(x));
    }
    return x;
  }
};

// Parses one activation name; alpha/beta come from the attribute lists in
// order of use, or the function's usual default when the lists run out.
Result<Activation> parse_activation(const std::string& name, const std::vector<float>& alphas, size_t* ai,
                                    const std::vector<float>& betas, size_t* bi) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  Activation a;
  float default_alpha = 0.f, default_beta = 0.f;
  bool uses_alpha = false, uses_beta = false;
  using Fn = Activation::Fn;
  if (n == "relu") a.fn = Fn::kRelu;
  else if (n == "tanh") a.fn = Fn::kTanh;
  else if (n == "sigmoid") a.fn = Fn::kSigmoid;
  else if (n == "affine") { a.fn = Fn::kAffine; uses_alpha = uses_beta = true; default_alpha = 1.f; }
  else if (n == "leakyrelu") { a.fn = Fn::kLeakyRelu; uses_alpha = true; default_alpha = 0.01f; }
  else if (n == "thresholdedrelu") { a.fn = Fn::kThresholdedRelu; uses_alpha = true; default_alpha = 1.f; }
  else if (n == "scaledtanh") { a.fn = Fn::kScaledTanh; uses_alpha = uses_beta = true; default_alpha = default_beta = 1.f; }
  else if (n == "hardsigmoid") { a.fn = Fn::kHardSigmoid; uses_alpha = uses_beta = true; default_alpha = 0.2f; default_beta = 0.5f; }
  else if (n == "elu") { a.fn = Fn::kElu; uses_alpha = true; default_alpha = 1.f; }
  else if (n == "softsign") a.fn = Fn::kSoftsign;
  else if (n == "softplus") a.fn = Fn::kSoftplus;
  else return invalid_argument("attribute activations has unknown function '", name, "'");
  if (uses_alpha) a.alpha = *ai < alphas.size() ? alphas[(*ai)++] : default_alpha;
  if (uses_beta) a.beta = *bi < betas.size() ? betas[(*bi)++] : default_beta;
  return a;
}

// v = act(v) over n floats; the SIMD loops for the usual functions.
void activate(const Activation& a, float* v, int64_t n) {
  switch (a.fn) {
    case Activation::Fn::kSigmoid: simd::sigmoid_f32(v, v, n); return;
    case Activation::Fn::kTanh: simd::tanh_f32(v, v, n); return;
    case Activation::Fn::kRelu: simd::relu_f32(v, v, n); return;
    default:
      for (int64_t i = 0; i < n; ++i) v[i] = a(v[i]);
  }
}

// Batches up to this size multiply by a packed R one row at a time (the
// engine's GEMV path; its microkernel would compute MR rows for each).
constexpr int64_t kGemvMaxBatch = 3;

// With batch rows of at least this many gate values in all, the gate math
// of a step (the serial part between two recurrent GEMMs) is split over the
// pool by batch row: at 2 threads it would otherwise bound the speedup.
constexpr int64_t kParallelGateValues = 2048;

int num_gates(CellKind k) { return k == CellKind::kRnn ? 1 : k == CellKind::kGru ? 3 : 4; }
int num_activations(CellKind k) { return k == CellKind::kRnn ? 1 : k == CellKind::kGru ? 2 : 3; }

// The inputs of one direction as float32 views.
struct DirectionParams {
  const float* w = nullptr;   // [G*H, I]
  const float* r = nullptr;   // [G*H, H]
  const float* wb = nullptr;  // [G*H] or null
  const float* rb = nullptr;  // [G*H] or null
  const float* p = nullptr;   // LSTM [3*H] or null
  const Activation* act = nullptr;  // num_activations entries
  // W^T and R^T packed at load when W and R are constants (then w, r are
  // unused). For GRU without linear_before_reset, r_packed holds the z and r
  // rows and rh_packed the h rows.
  const PackedMatrix* w_packed = nullptr;
  const PackedMatrix* r_packed = nullptr;
  const PackedMatrix* rh_packed = nullptr;
};

// C[m, n] = A[m, k] * B^T where B is [n, k] row-major (`b`) or packed.
void gemm_bt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, const PackedMatrix* packed,
             float* c, int64_t ldc, ThreadPool* pool) {
  if (packed) {
    sgemm_ex(m, n, k, 1.f, GemmOperand::raw(a, lda), GemmOperand::prepacked(*packed), 0.f, c, ldc, pool);
  } else {
    sgemm(false, true, m, n, k, 1.f, a, lda, b, k, 0.f, c, ldc, pool);
  }
}

class RecurrentKernel final : public Kernel {
 public:
  explicit RecurrentKernel(CellKind kind) : kind_(kind) {}

  Status init(const KernelInit& init) {
    const ir::Node& node = init.node;
    // hidden_size may be omitted: it is then R's last dimension.
    hidden_ = init.attr_int("hidden_size", 0);
    if (node.has_attr("hidden_size") && hidden_ <= 0)
      return invalid_argument("attribute hidden_size must be positive, got ", hidden_);
    const std::string dir = init.attr_string("direction", "forward");
    if (dir == "forward") num_dir_ = 1;
    else if (dir == "reverse") { num_dir_ = 1; reverse_only_ = true; }
    else if (dir == "bidirectional") num_dir_ = 2;
    else return invalid_argument("attribute direction '", dir, "' is not forward, reverse or bidirectional");
    layout_ = init.attr_int("layout", 0);
    if (layout_ != 0 && layout_ != 1) return invalid_argument("attribute layout must be 0 or 1");
    if (node.has_attr("clip")) {
      clip_ = init.attr_float("clip", 0.f);
      if (!(clip_ > 0)) return invalid_argument("attribute clip must be positive");
    }
    linear_before_reset_ = init.attr_int("linear_before_reset", 0) != 0;
    input_forget_ = init.attr_int("input_forget", 0) != 0;

    const std::vector<std::string> names = init.attr_strings("activations");
    const std::vector<float> alphas = init.attr_floats("activation_alpha");
    const std::vector<float> betas = init.attr_floats("activation_beta");
    const size_t per_dir = static_cast<size_t>(num_activations(kind_));
    std::vector<std::string> list = names;
    if (list.empty()) {
      static const char* const kRnnDefault[] = {"Tanh"};
      static const char* const kGruDefault[] = {"Sigmoid", "Tanh"};
      static const char* const kLstmDefault[] = {"Sigmoid", "Tanh", "Tanh"};
      const char* const* d = kind_ == CellKind::kRnn ? kRnnDefault : kind_ == CellKind::kGru ? kGruDefault : kLstmDefault;
      for (int k = 0; k < num_dir_; ++k)
        for (size_t i = 0; i < per_dir; ++i) list.emplace_back(d[i]);
    } else if (list.size() == per_dir && num_dir_ == 2) {
      for (size_t i = 0; i < per_dir; ++i) list.push_back(list[i]);  // one list for both directions
    }
    if (list.size() != per_dir * static_cast<size_t>(num_dir_)) {
      return invalid_argument("attribute activations has ", names.size(), " functions, expected ",
                              per_dir * static_cast<size_t>(num_dir_));
    }
    size_t ai = 0, bi = 0;
    for (const std::string& n : list) {
      KILN_ASSIGN_OR_RETURN(Activation a, parse_activation(n, alphas, &ai, betas, &bi));
      acts_.push_back(a);
    }
    pack_constant_weights(init);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override;

 private:
  DirectionParams direction_params(int64_t d, bool packed, const std::vector<float>& w, const std::vector<float>& r,
                                   const std::vector<float>& b, const std::vector<float>& p, int64_t hs,
                                   int64_t in_size) const;
  void run_sliced_direction(int64_t d, int64_t hs, LstmSequence sq, const std::vector<float>& b,
                            const std::vector<float>& p, float* h, float* c, float* y, ThreadPool* pool) const;
  void run_direction(const DirectionParams& p, bool reverse, int64_t seq, int64_t batch, int64_t input_size,
                     int64_t hidden, const float* x, const int64_t* lens, float* h, float* c, float* y, int64_t dir,
                     ThreadPool* pool) const;
  std::vector<float> input_projection(const DirectionParams& p, int64_t rows, int64_t in_size, int64_t hs,
                                      const float* x, ThreadPool* pool) const;
  void gru_finish_step(const DirectionParams& p, const Activation& gfn, int64_t t, int64_t b0, int64_t b1, int64_t hs,
                       const float* xwt, float* hr, const int64_t* lens, const float* h, float* h_new) const;

  float clip(float v) const { return clip_ > 0 ? std::min(std::max(v, -clip_), clip_) : v; }

  // Packs W^T and R^T per direction when both are constants of the expected
  // shape (anything else is left to compute, which checks and reports it).
  void pack_constant_weights(const KernelInit& init) {
    const Tensor* w = init.constant_input(1);
    const Tensor* r = init.constant_input(2);
    if (!w || !r || r->rank() != 3) return;
    const int64_t hs = hidden_ > 0 ? hidden_ : r->dim(2), gh = num_gates(kind_) * hs, nd = num_dir_;
    if (!w || !r || !dtype_is_float(w->dtype()) || w->dtype() != r->dtype()) return;
    if (w->rank() != 3 || w->dim(0) != nd || w->dim(1) != gh || r->shape() != Shape{nd, gh, hs}) return;
    const int64_t in_size = w->dim(2);
    const std::vector<float> wf = to_float_vector(*w);
    const std::vector<float> rf = to_float_vector(*r);
    const bool split = kind_ == CellKind::kGru && !linear_before_reset_;
    if (lstm_default_activations()) {
      for (int64_t d = 0; d < nd; ++d)
        sliced_.push_back(pack_lstm_sliced(hs, in_size, wf.data() + d * gh * in_size, rf.data() + d * gh * hs,
                                           small_static_batch(init)));
      return;
    }
    for (int64_t d = 0; d < nd; ++d) {
      const float* wd = wf.data() + d * gh * in_size;
      const float* rd = rf.data() + d * gh * hs;
      packed_w_.push_back(PackedMatrix::pack_b(true, in_size, gh, wd, in_size));
      packed_r_.push_back(PackedMatrix::pack_b(true, hs, split ? 2 * hs : gh, rd, hs));
      if (split) packed_rh_.push_back(PackedMatrix::pack_b(true, hs, hs, rd + 2 * hs * hs, hs));
    }
  }

  // Whether X's batch dim is known at load and at most lstm_small_batch().
  bool small_static_batch(const KernelInit& init) const {
    const ir::ValueType* x = init.inputs.empty() ? nullptr : init.inputs[0].type;
    if (!x || !x->has_shape || x->dims.size() != 3) return false;
    const ir::Dim& b = x->dims[layout_ == 0 ? 1 : 0];
    return b.known() && b.value <= lstm_small_batch();
  }

  // LSTM whose every direction has the default activations (Sigmoid,
  // Tanh, Tanh): the sliced path (rnn_lstm_sliced.h) runs it.
  bool lstm_default_activations() const {
    if (kind_ != CellKind::kLstm) return false;
    using Fn = Activation::Fn;
    for (size_t i = 0; i < acts_.size(); ++i)
      if (acts_[i].fn != (i % 3 == 0 ? Fn::kSigmoid : Fn::kTanh)) return false;
    return true;
  }

  // hr[b][col0 + j] = (H_{t-1} R^T)[b][col0 + j] for j < n: the rows of R
  // from col0, or the packed part `packed` (one GEMV per batch row when the
  // batch is small).
  void recurrent_product(const DirectionParams& p, int64_t batch, int64_t hs, int64_t col0, int64_t n, const float* h,
                         int64_t ldh, const PackedMatrix* packed, float* hr, ThreadPool* pool) const {
    const int64_t gh = num_gates(kind_) * hs;
    if (packed && batch <= kGemvMaxBatch) {
      for (int64_t bb = 0; bb < batch; ++bb)
        gemm_bt(1, n, hs, h + bb * ldh, ldh, nullptr, packed, hr + bb * gh + col0, gh, nullptr);
      return;
    }
    gemm_bt(batch, n, hs, h, ldh, p.r ? p.r + col0 * hs : nullptr, packed, hr + col0, gh, pool);
  }

  void clip_all(float* v, int64_t n) const {
    if (clip_ > 0) simd::clip_f32(v, v, n, -clip_, clip_);
  }
  void lstm_gates(const DirectionParams& p, const Activation& f, const Activation& gfn, const Activation& hfn,
                  int64_t hs, const float* xr, float* a, const float* cp, float* cn, float* hn) const;

  CellKind kind_;
  int64_t hidden_ = 0;
  int num_dir_ = 1;
  bool reverse_only_ = false;
  int64_t layout_ = 0;
  float clip_ = 0.f;
  bool linear_before_reset_ = false;
  bool input_forget_ = false;
  std::vector<Activation> acts_;
  std::vector<PackedMatrix> packed_w_, packed_r_, packed_rh_;  // per direction, or empty
  std::vector<LstmSlicedWeights> sliced_;  // per direction, or empty
};

Status check_shape(const Tensor& t, size_t index, const char* name,
                   std::initializer_list<int64_t> want) {
  Shape s(want);
  if (t.shape() != s) {
    return invalid_argument(input_label(index, name), " has shape ", t.shape().to_string(),
                            ", expected ", s.to_string());
  }
  return Status::ok();
}

// Reads sequence_lens (input 4) into `lens`, which holds `seq` per batch
// entry when the input is absent.
Status read_sequence_lens(KernelContext& ctx, int64_t batch, int64_t seq, std::vector<int64_t>* lens) {
  if (!ctx.has_input(4)) return Status::ok();
  const Tensor& sl = ctx.input(4);
  if (sl.shape() != Shape{batch} || !dtype_is_integer(sl.dtype())) {
    return invalid_argument("input 4 (sequence_lens) must be int32[", batch, "], got ",
                            dtype_name(sl.dtype()), sl.shape().to_string());
  }
  KILN_ASSIGN_OR_RETURN(*lens, to_int64_vector(sl));
  for (int64_t l : *lens) {
    if (l < 0 || l > seq)
      return invalid_argument("input 4 (sequence_lens) has ", l, ", outside [0, ", seq, "]");
  }
  return Status::ok();
}

// Index of state element (d, bb, k) in the given layout (0: [nd][batch][hs],
// 1: [batch][nd][hs]).
int64_t state_index(int64_t layout, int64_t nd, int64_t batch, int64_t hs, int64_t d, int64_t bb, int64_t k) {
  return layout == 0 ? (d * batch + bb) * hs + k : (bb * nd + d) * hs + k;
}

// Loads initial_h/initial_c (input `index`, in `layout`) into `dst`, kept as
// [num_directions][batch][hidden]; leaves `dst` as is when absent.
Status load_state(KernelContext& ctx, size_t index, const char* name, int64_t layout, int64_t nd, int64_t batch,
                  int64_t hs, std::vector<float>* dst) {
  if (!ctx.has_input(index)) return Status::ok();
  const Tensor& t = ctx.input(index);
  if (layout == 0) {
    KILN_RETURN_IF_ERROR(check_shape(t, index, name, {nd, batch, hs}));
  } else {
    KILN_RETURN_IF_ERROR(check_shape(t, index, name, {batch, nd, hs}));
  }
  const std::vector<float> v = to_float_vector(t);
  for (int64_t d = 0; d < nd; ++d)
    for (int64_t bb = 0; bb < batch; ++bb)
      for (int64_t k = 0; k < hs; ++k) {
        const int64_t src = state_index(layout, nd, batch, hs, d, bb, k);
        (*dst)[static_cast<size_t>((d * batch + bb) * hs + k)] = v[static_cast<size_t>(src)];
      }
  return Status::ok();
}

// Writes the state `s` ([num_directions][batch][hidden]) to output `index`
// in `layout`, when that output is wanted.
Status store_state(KernelContext& ctx, size_t index, DType dt, int64_t layout, int64_t nd, int64_t batch, int64_t hs,
                   const std::vector<float>& s) {
  if (!ctx.wants_output(index)) return Status::ok();
  const Shape shape = layout == 0 ? Shape{nd, batch, hs} : Shape{batch, nd, hs};
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(index, dt, shape));
  std::vector<float> tmp(s.size());
  for (int64_t d = 0; d < nd; ++d)
    for (int64_t bb = 0; bb < batch; ++bb)
      for (int64_t k = 0; k < hs; ++k) {
        const int64_t dst = state_index(layout, nd, batch, hs, d, bb, k);
        tmp[static_cast<size_t>(dst)] = s[static_cast<size_t>((d * batch + bb) * hs + k)];
      }
  from_float_vector(tmp.data(), out);
  return Status::ok();
}

// X ([batch][seq][input] when layout is 1) as seq-major [seq][batch][input]
// in `xs`; returns the seq-major data (x itself for layout 0).
const float* x_seq_major(const std::vector<float>& x, int64_t layout, int64_t seq, int64_t batch, int64_t in_size,
                         std::vector<float>* xs) {
  if (layout != 1) return x.data();
  xs->resize(x.size());
  for (int64_t bb = 0; bb < batch; ++bb)
    for (int64_t t = 0; t < seq; ++t)
      std::memcpy(&(*xs)[static_cast<size_t>((t * batch + bb) * in_size)],
                  &x[static_cast<size_t>((bb * seq + t) * in_size)], static_cast<size_t>(in_size) * sizeof(float));
  return xs->data();
}

// Writes Y ([seq][num_directions][batch][hidden]) to output 0 in `layout`
// ([batch][seq][num_directions][hidden] when 1), when it is wanted.
Status write_y(KernelContext& ctx, DType dt, int64_t layout, int64_t seq, int64_t nd, int64_t batch, int64_t hs,
               const std::vector<float>& y) {
  if (!ctx.wants_output(0)) return Status::ok();
  const Shape ys = layout == 0 ? Shape{seq, nd, batch, hs} : Shape{batch, seq, nd, hs};
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dt, ys));
  std::vector<float> tmp;
  const float* src = y.data();
  if (layout == 1) {
    tmp.resize(y.size());
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t d = 0; d < nd; ++d)
        for (int64_t bb = 0; bb < batch; ++bb)
          std::memcpy(&tmp[static_cast<size_t>(((bb * seq + t) * nd + d) * hs)],
                      &y[static_cast<size_t>(((t * nd + d) * batch + bb) * hs)], static_cast<size_t>(hs) * sizeof(float));
    src = tmp.data();
  }
  from_float_vector(src, out);
  return Status::ok();
}

// Direction d's weights, biases, peepholes and activations for run_direction
// (W and R packed at load where they were constants).
DirectionParams RecurrentKernel::direction_params(int64_t d, bool packed, const std::vector<float>& w,
                                                  const std::vector<float>& r, const std::vector<float>& b,
                                                  const std::vector<float>& p, int64_t hs, int64_t in_size) const {
  const int64_t g = num_gates(kind_);
  DirectionParams dp;
  if (packed) {
    dp.w_packed = &packed_w_[static_cast<size_t>(d)];
    dp.r_packed = &packed_r_[static_cast<size_t>(d)];
    if (!packed_rh_.empty()) dp.rh_packed = &packed_rh_[static_cast<size_t>(d)];
  } else {
    dp.w = w.data() + d * g * hs * in_size;
    dp.r = r.data() + d * g * hs * hs;
  }
  if (!b.empty()) {
    dp.wb = b.data() + d * 2 * g * hs;
    dp.rb = dp.wb + g * hs;
  }
  if (!p.empty()) dp.p = p.data() + d * 3 * hs;
  dp.act = acts_.data() + d * num_activations(kind_);
  return dp;
}

// Direction d of the sliced LSTM (rnn_lstm_sliced.h) over compute()'s
// buffers: states [num_directions][batch][hidden], Y
// [seq][num_directions][batch][hidden] at y (sq carries seq, batch,
// reverse, X, lens and Y's step).
void RecurrentKernel::run_sliced_direction(int64_t d, int64_t hs, LstmSequence sq, const std::vector<float>& b,
                                           const std::vector<float>& p, float* h, float* c, float* y,
                                           ThreadPool* pool) const {
  const int64_t g = num_gates(kind_);
  LstmCellOptions opt;
  opt.peepholes = p.empty() ? nullptr : p.data() + d * 3 * hs;
  opt.input_forget = input_forget_;
  opt.clip = clip_;
  if (!b.empty()) {
    sq.wb = b.data() + d * 2 * g * hs;
    sq.rb = sq.wb + g * hs;
  }
  sq.h = h + d * sq.batch * hs;
  sq.c = c + d * sq.batch * hs;
  sq.y = y + d * sq.batch * hs;
  run_lstm_sliced(sliced_[static_cast<size_t>(d)], opt, sq, pool);
}

Status RecurrentKernel::compute(KernelContext& ctx) const {
  const ir::Node& node = ctx.node();
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2))
    return invalid_argument("inputs 0 (X), 1 (W) and 2 (R) are required");
  if (hidden_ <= 0 && ctx.input(2).rank() != 3) {
    return invalid_argument("input 2 (R) must have rank 3, got shape ",
                            ctx.input(2).shape().to_string());
  }
  const int64_t g = num_gates(kind_), hs = hidden_ > 0 ? hidden_ : ctx.input(2).dim(2), nd = num_dir_;
  const Tensor& xt = ctx.input(0);
  const DType dt = xt.dtype();
  if (!dtype_is_float(dt)) return invalid_argument("input 0 (X) must be float, got ", dtype_name(dt));
  if (xt.rank() != 3)
    return invalid_argument("input 0 (X) must have rank 3, got shape ", xt.shape().to_string());
  const int64_t seq = layout_ == 0 ? xt.dim(0) : xt.dim(1);
  const int64_t batch = layout_ == 0 ? xt.dim(1) : xt.dim(0);
  const int64_t in_size = xt.dim(2);
  KILN_RETURN_IF_ERROR(check_shape(ctx.input(1), 1, "W", {nd, g * hs, in_size}));
  KILN_RETURN_IF_ERROR(check_shape(ctx.input(2), 2, "R", {nd, g * hs, hs}));
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (i != 4 && ctx.has_input(i) && ctx.input(i).dtype() != dt) {
      return invalid_argument("input ", i, " has dtype ", dtype_name(ctx.input(i).dtype()),
                              ", expected ", dtype_name(dt), " like X");
    }
  }
  // float32 X in layout 0 is read in place; anything else is converted.
  const bool x_in_place = dt == DType::kFloat32 && layout_ == 0;
  const std::vector<float> x = x_in_place ? std::vector<float>() : to_float_vector(xt);
  const bool packed = !packed_w_.empty() || !sliced_.empty();
  const std::vector<float> w = packed ? std::vector<float>() : to_float_vector(ctx.input(1));
  const std::vector<float> r = packed ? std::vector<float>() : to_float_vector(ctx.input(2));
  std::vector<float> b, p;
  if (ctx.has_input(3)) {
    KILN_RETURN_IF_ERROR(check_shape(ctx.input(3), 3, "B", {nd, 2 * g * hs}));
    b = to_float_vector(ctx.input(3));
  }
  std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
  KILN_RETURN_IF_ERROR(read_sequence_lens(ctx, batch, seq, &lens));
  // States are kept as [num_directions][batch][hidden] whatever the layout.
  std::vector<float> h(static_cast<size_t>(nd * batch * hs), 0.f), c;
  KILN_RETURN_IF_ERROR(load_state(ctx, 5, "initial_h", layout_, nd, batch, hs, &h));
  if (kind_ == CellKind::kLstm) {
    c.assign(h.size(), 0.f);
    KILN_RETURN_IF_ERROR(load_state(ctx, 6, "initial_c", layout_, nd, batch, hs, &c));
    if (ctx.has_input(7)) {
      KILN_RETURN_IF_ERROR(check_shape(ctx.input(7), 7, "P", {nd, 3 * hs}));
      p = to_float_vector(ctx.input(7));
    }
  }

  // X as seq-major [seq][batch][input] for the step loop.
  std::vector<float> xs;
  const float* xseq = x_in_place ? xt.data<float>() : x_seq_major(x, layout_, seq, batch, in_size, &xs);
  // Y as [seq][num_directions][batch][hidden].
  // The sliced LSTM writes every element of Y: float32 Y in layout 0 is
  // then the output itself (no cleared buffer, no copy).
  float* y_out = nullptr;
  if (!sliced_.empty() && dt == DType::kFloat32 && layout_ == 0 && ctx.wants_output(0)) {
    KILN_ASSIGN_OR_RETURN(Tensor * yt, ctx.allocate_output(0, dt, Shape{seq, nd, batch, hs}));
    y_out = yt->data<float>();
  }
  std::vector<float> y(y_out ? 0 : static_cast<size_t>(seq * nd * batch * hs), 0.f);
  float* yd = y_out ? y_out : y.data();
  auto direction = [&](int64_t d, ThreadPool* pool) {
    const bool reverse = d == 1 || reverse_only_;
    if (!sliced_.empty()) {
      LstmSequence sq{seq, batch, reverse, xseq, lens.data()};
      sq.y_step = nd * batch * hs;
      run_sliced_direction(d, hs, sq, b, p, h.data(), c.data(), yd, pool);
      return;
    }
    const DirectionParams dp = direction_params(d, packed, w, r, b, p, hs, in_size);
    run_direction(dp, reverse, seq, batch, in_size, hs, xseq, lens.data(), h.data() + d * batch * hs,
                  c.empty() ? nullptr : c.data() + d * batch * hs, y.data(), d, pool);
  };
  ThreadPool* pool = ctx.pool();
  if (nd == 2 && pool && pool->num_threads() > 1) {
    // The steps of one direction are sequential and their products small:
    // the directions themselves are the useful parallel axis, a task each.
    // Threads beyond two share the directions' products (run_tasks).
    ThreadPool* inner = pool->num_threads() > 2 ? pool : nullptr;
    pool->run_tasks(2, [&](int64_t d, int64_t) { direction(d, inner); });
  } else {
    for (int64_t d = 0; d < nd; ++d) direction(d, pool);
  }

  // Outputs in the requested layout.
  if (!y_out) KILN_RETURN_IF_ERROR(write_y(ctx, dt, layout_, seq, nd, batch, hs, y));
  KILN_RETURN_IF_ERROR(store_state(ctx, 1, dt, layout_, nd, batch, hs, h));
  if (kind_ == CellKind::kLstm) {
    KILN_RETURN_IF_ERROR(store_state(ctx, 2, dt, layout_, nd, batch, hs, c));
  } else if (ctx.num_outputs() > 2 && ctx.wants_output(2)) {
    return invalid_argument(node.op_type, " has only 2 outputs (Y, Y_h)");
  }
  return Status::ok();
}

// xw[t][b][gate*H] = X_t W^T + Wb (+ Rb, except GRU's h gate with
// linear_before_reset, where Rb_h sits inside the reset product), for the
// `rows` = seq * batch rows of x.
std::vector<float> RecurrentKernel::input_projection(const DirectionParams& p, int64_t rows, int64_t in_size,
                                                     int64_t hs, const float* x, ThreadPool* pool) const {
  const int64_t gh = num_gates(kind_) * hs;
  std::vector<float> xw(static_cast<size_t>(rows * gh));
  gemm_bt(rows, gh, in_size, x, in_size, p.w, p.w_packed, xw.data(), gh, pool);
  if (p.wb) {
    std::vector<float> bias(static_cast<size_t>(gh));
    for (int64_t k = 0; k < gh; ++k) {
      const bool rb_inside = kind_ == CellKind::kGru && k >= 2 * hs;
      bias[static_cast<size_t>(k)] = p.wb[k] + (rb_inside ? 0.f : p.rb[k]);
    }
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t k = 0; k < gh; ++k) xw[static_cast<size_t>(row * gh + k)] += bias[static_cast<size_t>(k)];
  }
  return xw;
}

// GRU's last part of step t: the h gate (from hr, with linear_before_reset
// already activated there) and H_t = (1 - z) (.) h + z (.) H_{t-1} into
// h_new, for the batch rows [b0, b1) still running.
void RecurrentKernel::gru_finish_step(const DirectionParams& p, const Activation& gfn, int64_t t, int64_t b0,
                                      int64_t b1, int64_t hs, const float* xwt, float* hr, const int64_t* lens,
                                      const float* h, float* h_new) const {
  const int64_t gh = 3 * hs;
  for (int64_t bb = b0; bb < b1; ++bb) {
    if (t >= lens[bb]) continue;
    const float* xr = xwt + bb * gh;
    float* a = hr + bb * gh;
    float* ht = a + 2 * hs;
    const float* hp = h + bb * hs;
    float* hn = h_new + bb * hs;
    if (!linear_before_reset_) {
      for (int64_t k = 0; k < hs; ++k) ht[k] = xr[2 * hs + k] + ht[k] + (p.rb ? p.rb[2 * hs + k] : 0.f);
      clip_all(ht, hs);
      activate(gfn, ht, hs);
    }
    for (int64_t k = 0; k < hs; ++k) hn[k] = (1.f - a[k]) * ht[k] + a[k] * hp[k];
  }
}

// One LSTM step of one batch row: `a` holds H_{t-1} R^T (gates i, o, f, c),
// overwritten with the gate values; writes C_t to cn and H_t to hn.
void RecurrentKernel::lstm_gates(const DirectionParams& p, const Activation& f, const Activation& gfn,
                                 const Activation& hfn, int64_t hs, const float* xr, float* a, const float* cp,
                                 float* cn, float* hn) const {
  float* gi = a;
  float* go = a + hs;
  float* gf = a + 2 * hs;
  float* gc = a + 3 * hs;
  simd::arith_f32(simd::Arith::kAdd, a, 1, xr, 1, a, 4 * hs);
  if (p.p) {
    for (int64_t k = 0; k < hs; ++k) {
      gi[k] += p.p[k] * cp[k];
      gf[k] += p.p[2 * hs + k] * cp[k];
    }
    clip_all(gi, hs);
    clip_all(gf, 2 * hs);  // f and c
    activate(f, gi, hs);
    if (!input_forget_) activate(f, gf, hs);
  } else {
    clip_all(a, 4 * hs);
    activate(f, a, input_forget_ ? 2 * hs : 3 * hs);  // i, o (and f)
  }
  if (input_forget_)
    for (int64_t k = 0; k < hs; ++k) gf[k] = 1.f - gi[k];
  activate(gfn, gc, hs);
  for (int64_t k = 0; k < hs; ++k) cn[k] = gf[k] * cp[k] + gi[k] * gc[k];
  if (p.p) {
    // o sees C_t through its peephole.
    for (int64_t k = 0; k < hs; ++k) go[k] += p.p[hs + k] * cn[k];
    clip_all(go, hs);
    activate(f, go, hs);
  }
  std::copy_n(cn, hs, hn);
  activate(hfn, hn, hs);
  for (int64_t k = 0; k < hs; ++k) hn[k] *= go[k];
}

void RecurrentKernel::run_direction(const DirectionParams& p, bool reverse, int64_t seq, int64_t batch,
                                    int64_t in_size, int64_t hs, const float* x, const int64_t* lens, float* h,
                                    float* c, float* y, int64_t dir, ThreadPool* pool) const {
  const int64_t g = num_gates(kind_), gh = g * hs;
  const int64_t nd = num_dir_;
  const std::vector<float> xw = input_projection(p, seq * batch, in_size, hs, x, pool);
  std::vector<float> hr(static_cast<size_t>(batch * gh));  // H_{t-1} R^T
  std::vector<float> rh(kind_ == CellKind::kGru ? static_cast<size_t>(batch * hs) : 0);  // r (.) H_{t-1}
  std::vector<float> h_new(static_cast<size_t>(batch * hs)), c_new(c ? static_cast<size_t>(batch * hs) : 0);
  const Activation& f = p.act[0];
  const Activation& gfn = p.act[kind_ == CellKind::kRnn ? 0 : 1];
  const Activation& hfn = p.act[kind_ == CellKind::kLstm ? 2 : 0];
  const bool gru_split = kind_ == CellKind::kGru && !linear_before_reset_;
  // The per-row gate math of a step, over the pool when the rows are many
  // and long enough (rows are independent: each writes its own hr, rh,
  // h_new and c_new row).
  ThreadPool* row_pool = batch > 1 && batch * gh >= kParallelGateValues ? pool : nullptr;
  auto for_rows = [&](auto&& body) {
    if (row_pool) parallel_for(row_pool, batch, 1, body);
    else body(int64_t{0}, batch);
  };
  for (int64_t step = 0; step < seq; ++step) {
    const int64_t t = reverse ? seq - 1 - step : step;
    const float* xwt = xw.data() + t * batch * gh;
    float* yt = y + (t * nd + dir) * batch * hs;
    // GRU without linear_before_reset: z and r need H R^T; h needs
    // (r (.) H) Rh^T, computed after r.
    recurrent_product(p, batch, hs, 0, gru_split ? 2 * hs : gh, h, hs, p.r_packed, hr.data(), pool);
    for_rows([&](int64_t b0, int64_t b1) {
      for (int64_t bb = b0; bb < b1; ++bb) {
        if (t >= lens[bb]) continue;
        const float* xr = xwt + bb * gh;
        float* a = hr.data() + bb * gh;  // gate pre-activations, in place
        const float* hp = h + bb * hs;
        float* hn = h_new.data() + bb * hs;
        switch (kind_) {
          case CellKind::kRnn:
            simd::arith_f32(simd::Arith::kAdd, a, 1, xr, 1, hn, hs);
            clip_all(hn, hs);
            activate(f, hn, hs);
            break;
          case CellKind::kGru:
            simd::arith_f32(simd::Arith::kAdd, a, 1, xr, 1, a, 2 * hs);
            clip_all(a, 2 * hs);
            activate(f, a, 2 * hs);  // z, r
            if (linear_before_reset_) {
              float* ht = a + 2 * hs;
              for (int64_t k = 0; k < hs; ++k)
                ht[k] = xr[2 * hs + k] + a[hs + k] * (ht[k] + (p.rb ? p.rb[2 * hs + k] : 0.f));
              clip_all(ht, hs);
              activate(gfn, ht, hs);
            } else {
              float* rhb = rh.data() + bb * hs;
              for (int64_t k = 0; k < hs; ++k) rhb[k] = a[hs + k] * hp[k];
            }
            break;
          case CellKind::kLstm:
            lstm_gates(p, f, gfn, hfn, hs, xr, a, c + bb * hs, c_new.data() + bb * hs, hn);
            break;
        }
      }
    });
    if (kind_ == CellKind::kGru) {
      // h gate: (r (.) H_{t-1}) Rh^T, into the h columns of hr (Rbh is added
      // in gru_finish_step).
      if (gru_split) recurrent_product(p, batch, hs, 2 * hs, hs, rh.data(), hs, p.rh_packed, hr.data(), pool);
      for_rows([&](int64_t b0, int64_t b1) {
        gru_finish_step(p, gfn, t, b0, b1, hs, xwt, hr.data(), lens, h, h_new.data());
      });
    }
    for (int64_t bb = 0; bb < batch; ++bb) {
      if (t >= lens[bb]) continue;  // Y stays zero, the state is kept
      std::memcpy(h + bb * hs, h_new.data() + bb * hs, static_cast<size_t>(hs) * sizeof(float));
      if (c) std::memcpy(c + bb * hs, c_new.data() + bb * hs, static_cast<size_t>(hs) * sizeof(float));
      std::memcpy(yt + bb * hs, h_new.data() + bb * hs, static_cast<size_t>(hs) * sizeof(float));
    }
  }
}

template <CellKind K>
Result<std::unique_ptr<Kernel>> make_recurrent(const KernelInit& init) {
  return init_kernel(std::make_unique<RecurrentKernel>(K), init);
}

}  // namespace

void register_rnn_ops(KernelRegistry& r) {
  constexpr DTypeSet kTypes = dtype_set(DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16);
  r.add({.domain = "", .op_type = "RNN", .since_version = 7, .until_version = 1000, .dtypes = kTypes, .type_input = 0,
         .factory = make_recurrent<CellKind::kRnn>, .flags = 0});
  r.add({.domain = "", .op_type = "GRU", .since_version = 7, .until_version = 1000, .dtypes = kTypes, .type_input = 0,
         .factory = make_recurrent<CellKind::kGru>, .flags = 0});
  r.add({.domain = "", .op_type = "LSTM", .since_version = 7, .until_version = 1000, .dtypes = kTypes, .type_input = 0,
         .factory = make_recurrent<CellKind::kLstm>, .flags = 0});
}

}  // namespace kiln::kernels
