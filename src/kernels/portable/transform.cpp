// Layout transforms: Concat, Split, Transpose, Tile, Pad, DepthToSpace,
// SpaceToDepth, Trilu, ReverseSequence. All move elements by byte size
// (strings by assignment), so each kernel serves every dtype.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/util/strided_copy.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

using layout::advance;
using layout::copy_elements;
using layout::strided_copy;

constexpr int64_t kParallelBytes = 1 << 17;

// ---------------------------------------------------------------- Concat

class ConcatKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    if (init.opset >= 4 && !init.node.has_attr("axis")) {
      return invalid_argument("attribute 'axis' is missing");
    }
    axis_ = init.attr_int("axis", 1);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, std::max<size_t>(ctx.num_inputs(), 1), ctx.num_inputs()));
    const size_t n = ctx.num_inputs();
    if (n == 0 || !ctx.has_input(0)) return invalid_argument("needs at least one input");
    const Tensor& first = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(first.rank());
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
    Shape out_shape = first.shape();
    int64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
      const Tensor& t = ctx.input(i);
      if (t.dtype() != first.dtype() || t.rank() != first.rank()) {
        return invalid_argument("input ", i, " ", dtype_name(t.dtype()),
                                t.shape().to_string(), " does not match input 0 ", dtype_name(first.dtype()),
                                first.shape().to_string());
      }
      for (int64_t d = 0; d < rank; ++d) {
        if (d != axis && t.dim(static_cast<size_t>(d)) != first.dim(static_cast<size_t>(d))) {
          return invalid_argument("input ", i, " has shape ", t.shape().to_string(),
                                  ", which differs from input 0 ", first.shape().to_string(),
                                  " outside axis ", axis);
        }
      }
      total += t.dim(static_cast<size_t>(axis));
    }
    out_shape[static_cast<size_t>(axis)] = total;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, first.dtype(), out_shape));
    if (out->numel() == 0) return Status::ok();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= first.dim(static_cast<size_t>(d));
    for (int64_t d = axis + 1; d < rank; ++d) inner *= first.dim(static_cast<size_t>(d));
    const DType dt = first.dtype();
    const int64_t out_row = total * inner;
    // Each input contributes one block of dim(axis) * inner elements per outer row.
    std::vector<int64_t> block(n), offset(n);
    int64_t acc = 0;
    for (size_t i = 0; i < n; ++i) {
      block[i] = ctx.input(i).dim(static_cast<size_t>(axis)) * inner;
      offset[i] = acc;
      acc += block[i];
    }
    if (outer == 1) {
      // One block per input: split the output range in equal pieces, each
      // copying the parts of the inputs it covers (two threads share even
      // a two-input channel concat).
      const int64_t bytes = acc * static_cast<int64_t>(dtype_size(dt));
      const int64_t grain = std::max<int64_t>(1, kParallelBytes / 4 / static_cast<int64_t>(dtype_size(dt)));
      parallel_for(bytes >= kParallelBytes ? ctx.pool() : nullptr, acc, grain, [&](int64_t b, int64_t e) {
        for (size_t i = 0; i < n; ++i) {
          const int64_t lo = std::max(b, offset[i]), hi = std::min(e, offset[i] + block[i]);
          if (lo < hi)
            copy_elements(dt, advance(out->raw_data(), lo, dt), advance(ctx.input(i).raw_data(), lo - offset[i], dt),
                          hi - lo);
        }
      });
      return Status::ok();
    }
    const int64_t row_bytes = out_row * static_cast<int64_t>(dtype_size(dt));
    ThreadPool* pool = outer * row_bytes >= kParallelBytes ? ctx.pool() : nullptr;
    parallel_for(pool, outer, std::max<int64_t>(1, kParallelBytes / 4 / std::max<int64_t>(row_bytes, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t o = b; o < e; ++o) {
                     for (size_t i = 0; i < n; ++i) {
                       copy_elements(dt, advance(out->raw_data(), o * out_row + offset[i], dt),
                                     advance(ctx.input(i).raw_data(), o * block[i], dt), block[i]);
                     }
                   }
                 });
    return Status::ok();
  }

 private:
  int64_t axis_ = 1;
};

// ---------------------------------------------------------------- Split

class SplitKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 0);
    opset_ = init.opset;
    has_attr_split_ = init.node.has_attr("split");
    attr_split_ = init.attr_ints("split");
    num_outputs_attr_ = init.attr_int("num_outputs", 0);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 2));
    const Tensor& in = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(in.rank());
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
    const int64_t dim = in.dim(static_cast<size_t>(axis));
    const size_t nout = ctx.num_outputs();
    if (nout == 0) return invalid_argument("has no outputs");
    std::vector<int64_t> split;
    bool given = false;
    if (opset_ >= 13 || (opset_ == 1 && ctx.has_input(1))) {
      KILN_ASSIGN_OR_RETURN(split, read_ints_input(ctx, 1, "split", &given));
      given = given && !split.empty();
    } else if (has_attr_split_) {
      split = attr_split_;
      given = true;
    }
    if (given) {
      if (split.size() != nout) {
        return invalid_argument("'split' has ", split.size(), " entries for ", nout,
                                " outputs");
      }
      int64_t sum = 0;
      for (int64_t s : split) {
        if (s < 0) return invalid_argument("'split' has a negative size ", s);
        sum += s;
      }
      if (sum != dim) {
        return invalid_argument("'split' sums to ", sum, " but axis ", axis, " has size ",
                                dim);
      }
    } else {
      const int64_t parts = static_cast<int64_t>(nout);
      if (num_outputs_attr_ > 0) {
        // Opset 18: the last chunk may be smaller.
        const int64_t chunk = (dim + parts - 1) / parts;
        for (int64_t i = 0; i < parts; ++i) split.push_back(std::clamp(dim - i * chunk, int64_t{0}, chunk));
      } else {
        if (dim % parts != 0) {
          return invalid_argument("axis ", axis, " of size ", dim,
                                  " does not split evenly into ", parts, " outputs");
        }
        split.assign(nout, dim / parts);
      }
    }
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= in.dim(static_cast<size_t>(d));
    for (int64_t d = axis + 1; d < rank; ++d) inner *= in.dim(static_cast<size_t>(d));
    const DType dt = in.dtype();
    int64_t start = 0;
    for (size_t i = 0; i < nout; ++i) {
      Shape s = in.shape();
      s[static_cast<size_t>(axis)] = split[i];
      KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(i, dt, s));
      const int64_t blk = split[i] * inner;
      if (ctx.wants_output(i) && blk > 0) {
        const int64_t dims[2] = {outer, blk};
        const int64_t dst_strides[2] = {blk, 1};
        const int64_t src_strides[2] = {dim * inner, 1};
        strided_copy(dt, out->raw_data(), dst_strides, advance(in.raw_data(), start * inner, dt), src_strides,
                     dims, ctx.pool());
      }
      start += split[i];
    }
    return Status::ok();
  }

 private:
  int64_t axis_ = 0;
  int opset_ = 13;
  bool has_attr_split_ = false;
  std::vector<int64_t> attr_split_;
  int64_t num_outputs_attr_ = 0;
};

// ---------------------------------------------------------------- Transpose

class TransposeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    has_perm_ = init.node.has_attr("perm");
    perm_ = init.attr_ints("perm");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    const Tensor& in = ctx.input(0);
    const size_t rank = in.rank();
    std::vector<int64_t> perm = perm_;
    if (!has_perm_) {
      perm.resize(rank);
      for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
    }
    if (perm.size() != rank) {
      return invalid_argument("'perm' has ", perm.size(), " entries for input of rank ",
                              rank);
    }
    std::vector<bool> seen(rank, false);
    for (int64_t& p : perm) {
      if (p < 0) p += static_cast<int64_t>(rank);
      if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)]) {
        return invalid_argument("'perm' is not a permutation of 0..", rank - 1);
      }
      seen[static_cast<size_t>(p)] = true;
    }
    Shape out_shape;
    out_shape.resize(rank);
    std::vector<int64_t> in_strides = contiguous_strides(in.shape()), src(rank);
    for (size_t i = 0; i < rank; ++i) {
      out_shape[i] = in.dim(static_cast<size_t>(perm[i]));
      src[i] = in_strides[static_cast<size_t>(perm[i])];
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), out_shape));
    strided_copy(in.dtype(), out->raw_data(), contiguous_strides(out_shape), in.raw_data(), src, out_shape.dims(),
                 ctx.pool());
    return Status::ok();
  }

 private:
  bool has_perm_ = false;
  std::vector<int64_t> perm_;
};

// ---------------------------------------------------------------- Tile

class TileKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    const Tensor& in = ctx.input(0);
    if (!ctx.has_input(1)) return invalid_argument("input 1 (repeats) is missing");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps, read_ints_input(ctx, 1, "repeats"));
    const size_t rank = in.rank();
    if (reps.size() != rank) {
      return invalid_argument("input 1 (repeats) has ", reps.size(),
                              " entries for input of rank ", rank);
    }
    Shape out_shape;
    out_shape.resize(rank);
    std::vector<int64_t> in_strides = contiguous_strides(in.shape());
    // Output viewed as [r0, d0, r1, d1, ...]: the repeat dims read with stride 0.
    std::vector<int64_t> dims(2 * rank), src(2 * rank);
    for (size_t i = 0; i < rank; ++i) {
      if (reps[i] < 0) return invalid_argument("input 1 (repeats) has a negative entry");
      if (__builtin_mul_overflow(in.dim(i), reps[i], &out_shape[i])) {
        return invalid_argument("input 1 (repeats) makes axis ", i, " overflow");
      }
      dims[2 * i] = reps[i];
      dims[2 * i + 1] = in.dim(i);
      src[2 * i] = 0;
      src[2 * i + 1] = in_strides[i];
    }
    KILN_RETURN_IF_ERROR(checked_numel(Shape(dims)).status());
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), out_shape));
    // An empty output has nothing to copy, and the strides below would
    // multiply the dims before a zero one past int64 (fuzz_session).
    if (out->numel() == 0) return Status::ok();
    std::vector<int64_t> dst(2 * rank);
    int64_t acc = 1;
    for (size_t i = 2 * rank; i-- > 0;) {
      dst[i] = acc;
      acc *= dims[i];
    }
    strided_copy(in.dtype(), out->raw_data(), dst, in.raw_data(), src, dims, ctx.pool());
    return Status::ok();
  }
};

// ---------------------------------------------------------------- Pad

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

class PadKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    opset_ = init.opset;
    const std::string mode = init.attr_string("mode", "constant");
    if (mode == "constant") {
      mode_ = PadMode::kConstant;
    } else if (mode == "reflect") {
      mode_ = PadMode::kReflect;
    } else if (mode == "edge") {
      mode_ = PadMode::kEdge;
    } else if (mode == "wrap") {
      mode_ = PadMode::kWrap;
    } else {
      return invalid_argument("unknown mode '", mode, "'");
    }
    if (opset_ < 11) {
      attr_pads_ = init.attr_ints(opset_ < 2 ? "paddings" : "pads");
      if (attr_pads_.empty() && !init.node.has_attr(opset_ < 2 ? "paddings" : "pads")) {
        return invalid_argument("attribute 'pads' is missing");
      }
      attr_value_ = init.attr_float("value", 0.f);
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, opset_ >= 11 ? 2 : 1, 4));
    const Tensor& in = ctx.input(0);
    const size_t rank = in.rank();
    const DType dt = in.dtype();
    std::vector<int64_t> begin(rank, 0), end(rank, 0);
    KILN_RETURN_IF_ERROR(read_pads(ctx, in, &begin, &end));
    Shape out_shape;
    out_shape.resize(rank);
    for (size_t i = 0; i < rank; ++i) {
      out_shape[i] = in.dim(i) + begin[i] + end[i];
      if (out_shape[i] < 0) {
        return invalid_argument("pads make axis ", i, " of size ", in.dim(i), " negative");
      }
      if (mode_ != PadMode::kConstant && in.dim(i) == 0 && out_shape[i] > 0) {
        return invalid_argument("cannot pad empty axis ", i, " in non-constant mode");
      }
    }
    KILN_RETURN_IF_ERROR(checked_numel(out_shape).status());
    // The padding value as one element of the input dtype.
    alignas(16) unsigned char value_buf[16] = {};
    std::string value_str;
    const void* value = value_buf;
    KILN_RETURN_IF_ERROR(read_pad_value(ctx, dt, value_buf, &value_str, &value));

    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dt, out_shape));
    if (out->numel() == 0) return Status::ok();
    if (rank == 0) {
      copy_elements(dt, out->raw_data(), in.raw_data(), 1);
      return Status::ok();
    }

    // maps[d][o]: the input index read for output index o along d, -1 for the pad value.
    const std::vector<std::vector<int64_t>> maps = source_maps(in.shape(), begin, out_shape);
    const std::vector<int64_t> in_strides = contiguous_strides(in.shape());
    const int64_t last_out = out_shape[rank - 1];
    const int64_t rows = out->numel() / last_out;
    const std::vector<int64_t>& last_map = maps[rank - 1];
    // The interior of the last axis: output range copied straight from the input.
    const int64_t lo = std::max<int64_t>(0, begin[rank - 1]);
    const int64_t hi = std::max(lo, std::min<int64_t>(last_out, begin[rank - 1] + in.dim(rank - 1)));
    const size_t esz = dtype_size(dt);
    ThreadPool* pool = out->numel() * static_cast<int64_t>(esz) >= kParallelBytes ? ctx.pool() : nullptr;
    parallel_for(pool, rows, std::max<int64_t>(1, 4096 / last_out), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        void* dst = advance(out->raw_data(), r * last_out, dt);
        int64_t rem = r, src_off = 0;
        bool pad_row = false;
        for (size_t d = rank - 1; d-- > 0;) {
          const int64_t o = rem % out_shape[d];
          rem /= out_shape[d];
          const int64_t i = maps[d][static_cast<size_t>(o)];
          if (i < 0) {
            pad_row = true;
            break;
          }
          src_off += i * in_strides[d];
        }
        if (pad_row) {
          layout::fill_elements(dt, dst, value, last_out);
          continue;
        }
        const void* src_row = advance(in.raw_data(), src_off, dt);
        for (int64_t o = 0; o < last_out; ++o) {
          if (o == lo && hi > lo) {
            copy_elements(dt, advance(dst, o, dt), advance(src_row, o - begin[rank - 1], dt), hi - lo);
            o = hi - 1;
            continue;
          }
          const int64_t i = last_map[static_cast<size_t>(o)];
          if (i < 0) {
            layout::fill_elements(dt, advance(dst, o, dt), value, 1);
          } else {
            copy_elements(dt, advance(dst, o, dt), advance(src_row, i, dt), 1);
          }
        }
      }
    });
    return Status::ok();
  }

 private:
  // The begin and end pads per axis from the pads attribute (opset < 11) or
  // input 1, over the axes of input 3 (opset 18) or all of them.
  Status read_pads(KernelContext& ctx, const Tensor& in, std::vector<int64_t>* begin,
                   std::vector<int64_t>* end) const {
    const size_t rank = in.rank();
    std::vector<int64_t> pads_in = attr_pads_;
    if (opset_ >= 11) {
      if (!ctx.has_input(1)) return invalid_argument("input 1 (pads) is missing");
      KILN_ASSIGN_OR_RETURN(pads_in, read_ints_input(ctx, 1, "pads"));
    }
    // Opset 18 'axes' input: pads cover only those axes.
    std::vector<int64_t> axes;
    bool has_axes = false;
    KILN_ASSIGN_OR_RETURN(axes, read_ints_input(ctx, 3, "axes", &has_axes));
    if (!has_axes) {
      axes.resize(rank);
      std::iota(axes.begin(), axes.end(), 0);
    } else {
      KILN_ASSIGN_OR_RETURN(axes, normalize_axes(axes, static_cast<int64_t>(rank)));
    }
    if (pads_in.size() != 2 * axes.size()) {
      return invalid_argument("pads has ", pads_in.size(), " entries, expected ",
                              2 * axes.size(), " for input of shape ", in.shape().to_string());
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t b = pads_in[i], e = pads_in[i + axes.size()];
      if (std::max(std::abs(b), std::abs(e)) > kMaxElements) {
        return invalid_argument("pads ", b, ", ", e, " are out of range");
      }
      (*begin)[static_cast<size_t>(axes[i])] = b;
      (*end)[static_cast<size_t>(axes[i])] = e;
    }
    return Status::ok();
  }

  // The padding value (input 2, or the value attribute before opset 11) as
  // one element of `dt` in value_buf (16 bytes), or in *value_str for
  // strings; *value points at whichever holds it.
  Status read_pad_value(KernelContext& ctx, DType dt, unsigned char* value_buf, std::string* value_str,
                        const void** value) const {
    if (dt == DType::kString) {
      if (ctx.has_input(2) && ctx.input(2).dtype() == DType::kString && ctx.input(2).numel() >= 1)
        *value_str = *ctx.input(2).data<std::string>();
      *value = value_str;
    } else if (ctx.has_input(2) && ctx.input(2).numel() >= 1) {
      if (ctx.input(2).dtype() != dt) {
        return invalid_argument("input 2 (constant_value) has dtype ",
                                dtype_name(ctx.input(2).dtype()), ", expected ", dtype_name(dt));
      }
      std::memcpy(value_buf, ctx.input(2).raw_data(), dtype_size(dt));
    } else if (opset_ < 11) {
      visit_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T>) {  // saturating: a float outside T's range is UB to cast
          T v = std::is_same_v<T, bool> ? attr_value_ != 0.f : ew::float_to_int<T>(attr_value_);
          std::memcpy(value_buf, &v, sizeof(T));
        } else if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          T v = static_cast<T>(attr_value_);
          std::memcpy(value_buf, &v, sizeof(T));
        }
      });
    }
    return Status::ok();
  }

  // maps[d][o]: the input index read for output index o along axis d (by
  // mode_), -1 for the pad value.
  std::vector<std::vector<int64_t>> source_maps(const Shape& in_shape, const std::vector<int64_t>& begin,
                                                const Shape& out_shape) const {
    const size_t rank = in_shape.size();
    std::vector<std::vector<int64_t>> maps(rank);
    for (size_t d = 0; d < rank; ++d) {
      const int64_t n = in_shape[d];
      maps[d].resize(static_cast<size_t>(out_shape[d]));
      for (int64_t o = 0; o < out_shape[d]; ++o) {
        int64_t i = o - begin[d];
        if (i < 0 || i >= n) {
          switch (mode_) {
            case PadMode::kConstant: i = -1; break;
            case PadMode::kEdge: i = std::clamp<int64_t>(i, 0, n - 1); break;
            case PadMode::kWrap: i = ((i % n) + n) % n; break;
            case PadMode::kReflect:
              if (n == 1) {
                i = 0;
              } else {
                const int64_t period = 2 * (n - 1);
                i = ((i % period) + period) % period;
                if (i >= n) i = period - i;
              }
              break;
          }
        }
        maps[d][static_cast<size_t>(o)] = i;
      }
    }
    return maps;
  }

  int opset_ = 13;
  PadMode mode_ = PadMode::kConstant;
  std::vector<int64_t> attr_pads_;
  float attr_value_ = 0.f;
};

// ------------------------------------------------- DepthToSpace, SpaceToDepth

class DepthToSpaceKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    block_ = init.attr_int("blocksize", 0);
    if (block_ <= 0) return invalid_argument("attribute 'blocksize' must be positive");
    const std::string mode = init.attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return invalid_argument("unknown mode '", mode, "'");
    crd_ = mode == "CRD";
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    const Tensor& in = ctx.input(0);
    const int64_t b = block_;
    if (in.rank() != 4 || b > in.dim(1) || in.dim(1) % (b * b) != 0) {
      return invalid_argument("input 0 must be [N, C, H, W] with C divisible by ", b * b,
                              ", got ", in.shape().to_string());
    }
    const int64_t n = in.dim(0), c = in.dim(1) / (b * b), h = in.dim(2), w = in.dim(3);
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), Shape{n, c, h * b, w * b}));
    const int64_t hw = h * w;
    // Output iterated as [N, C', H, b1, W, b2].
    const int64_t dims[6] = {n, c, h, b, w, b};
    int64_t src[6];
    if (crd_) {  // input viewed as [N, C', b1, b2, H, W]
      const int64_t s[6] = {c * b * b * hw, b * b * hw, w, b * hw, 1, hw};
      std::copy(s, s + 6, src);
    } else {  // DCR: input viewed as [N, b1, b2, C', H, W]
      const int64_t s[6] = {c * b * b * hw, hw, w, b * c * hw, 1, c * hw};
      std::copy(s, s + 6, src);
    }
    const int64_t dst[6] = {c * h * b * w * b, h * b * w * b, b * w * b, w * b, b, 1};
    strided_copy(in.dtype(), out->raw_data(), dst, in.raw_data(), src, dims, ctx.pool());
    return Status::ok();
  }

 private:
  int64_t block_ = 0;
  bool crd_ = false;
};

class SpaceToDepthKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    block_ = init.attr_int("blocksize", 0);
    if (block_ <= 0) return invalid_argument("attribute 'blocksize' must be positive");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    const Tensor& in = ctx.input(0);
    const int64_t b = block_;
    if (in.rank() != 4 || b > std::max(in.dim(2), in.dim(3)) || in.dim(2) % b != 0 || in.dim(3) % b != 0) {
      return invalid_argument("input 0 must be [N, C, H, W] with H and W divisible by ", b,
                              ", got ", in.shape().to_string());
    }
    const int64_t n = in.dim(0), c = in.dim(1), h = in.dim(2) / b, w = in.dim(3) / b;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), Shape{n, c * b * b, h, w}));
    const int64_t W = in.dim(3), HW = in.dim(2) * W;
    // Output iterated as [N, b1, b2, C, H', W'] over input [N, C, H', b1, W', b2].
    const int64_t dims[6] = {n, b, b, c, h, w};
    const int64_t src[6] = {c * HW, W, 1, HW, b * W, b};
    const int64_t dst[6] = {b * b * c * h * w, b * c * h * w, c * h * w, h * w, w, 1};
    strided_copy(in.dtype(), out->raw_data(), dst, in.raw_data(), src, dims, ctx.pool());
    return Status::ok();
  }

 private:
  int64_t block_ = 0;
};

// ---------------------------------------------------------------- Trilu

class TriluKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    upper_ = init.attr_int("upper", 1) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 2));
    const Tensor& in = ctx.input(0);
    if (in.rank() < 2) {
      return invalid_argument("input 0 must have rank >= 2, got ", in.shape().to_string());
    }
    int64_t k = 0;
    if (ctx.has_input(1)) {
      KILN_ASSIGN_OR_RETURN(k, read_int_scalar(ctx, 1, "k"));
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), in.shape()));
    const int64_t rows = in.dim(in.rank() - 2), cols = in.dim(in.rank() - 1);
    k = std::clamp<int64_t>(k, -rows - 1, cols + 1);  // avoids overflow; same result
    const int64_t total_rows = rows ? in.numel() / cols : 0;
    if (cols == 0) return Status::ok();
    const DType dt = in.dtype();
    for (int64_t r = 0; r < total_rows; ++r) {
      const int64_t i = r % rows;
      const void* s = advance(in.raw_data(), r * cols, dt);
      void* d = advance(out->raw_data(), r * cols, dt);
      // Upper keeps j >= i + k; lower keeps j <= i + k.
      const int64_t cut = std::clamp<int64_t>(upper_ ? i + k : i + k + 1, 0, cols);
      if (upper_) {
        layout::zero_elements(dt, d, cut);
        copy_elements(dt, advance(d, cut, dt), advance(s, cut, dt), cols - cut);
      } else {
        copy_elements(dt, d, s, cut);
        layout::zero_elements(dt, advance(d, cut, dt), cols - cut);
      }
    }
    return Status::ok();
  }

 private:
  bool upper_ = true;
};

// ---------------------------------------------------------------- ReverseSequence

class ReverseSequenceKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    batch_axis_ = init.attr_int("batch_axis", 1);
    time_axis_ = init.attr_int("time_axis", 0);
    if (!((batch_axis_ == 0 && time_axis_ == 1) || (batch_axis_ == 1 && time_axis_ == 0))) {
      return invalid_argument("batch_axis and time_axis must be 0 and 1 in some order");
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    const Tensor& in = ctx.input(0);
    if (in.rank() < 2) {
      return invalid_argument("input 0 must have rank >= 2, got ", in.shape().to_string());
    }
    if (!ctx.has_input(1)) return invalid_argument("input 1 (sequence_lens) is missing");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> lens, read_ints_input(ctx, 1, "sequence_lens"));
    const int64_t batch = in.dim(static_cast<size_t>(batch_axis_)), steps = in.dim(static_cast<size_t>(time_axis_));
    if (static_cast<int64_t>(lens.size()) != batch) {
      return invalid_argument("input 1 (sequence_lens) has ", lens.size(),
                              " entries for batch size ", batch);
    }
    for (int64_t l : lens) {
      if (l < 0 || l > steps) {
        return invalid_argument("input 1 (sequence_lens) has ", l, ", outside [0, ", steps,
                                "]");
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), in.shape()));
    const int64_t inner = in.numel() / std::max<int64_t>(1, batch * steps);
    const DType dt = in.dtype();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t st = t < lens[static_cast<size_t>(b)] ? lens[static_cast<size_t>(b)] - 1 - t : t;
        const int64_t dst_row = time_axis_ == 0 ? t * batch + b : b * steps + t;
        const int64_t src_row = time_axis_ == 0 ? st * batch + b : b * steps + st;
        copy_elements(dt, advance(out->raw_data(), dst_row * inner, dt), advance(in.raw_data(), src_row * inner, dt),
                      inner);
      }
    }
    return Status::ok();
  }

 private:
  int64_t batch_axis_ = 1, time_axis_ = 0;
};

}  // namespace

void register_transform_ops(KernelRegistry& r) {
  auto add = [&r](const char* op, int since, KernelFactory f, DTypeSet dtypes = kAllDTypes) {
    r.add({.domain = "", .op_type = op, .since_version = since, .until_version = 1000, .dtypes = dtypes,
           .type_input = 0, .factory = f, .flags = 0});
  };
  add("Concat", 1, make_kernel<ConcatKernel>);
  add("Split", 1, make_kernel<SplitKernel>);
  add("Transpose", 1, make_kernel<TransposeKernel>);
  add("Tile", 6, make_kernel<TileKernel>);
  add("Pad", 1, make_kernel<PadKernel>);
  add("DepthToSpace", 1, make_kernel<DepthToSpaceKernel>);
  add("SpaceToDepth", 1, make_kernel<SpaceToDepthKernel>);
  add("Trilu", 14, make_kernel<TriluKernel>);
  add("ReverseSequence", 10, make_kernel<ReverseSequenceKernel>);
}

}  // namespace kiln::kernels
