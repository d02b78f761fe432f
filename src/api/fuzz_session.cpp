// libFuzzer entry point over the whole path a user's model takes: import,
// kernel selection, constant folding, and a run with generated inputs. Any
// bytes must load and run or fail with a Status; never crash, hang or leak.
// Built only with -DKILN_FUZZ=ON and clang.
//
// libonnx 1.12's shape inference is off (infer_shapes = false): it crashes on
// some malformed models inside libonnx itself (see src/onnx/fuzz_import.cpp).
#include <cstddef>
#include <cstdint>

#include "core/tensor_access.h"
#include "kiln/session.h"

namespace {

// Inputs of the declared types; unknown dims are 1. Returns false when the
// model's inputs are not plain tensors of small static size.
bool make_inputs(const kiln::Session& s, std::vector<kiln::NamedValue>* out) {
  for (const kiln::IoInfo& info : s.inputs()) {
    if (info.kind != kiln::IoInfo::Kind::kTensor || info.dtype == kiln::DType::kUndefined) return false;
    kiln::Shape shape;
    int64_t n = 1;
    for (int64_t d : info.dims) {
      d = d < 0 ? 1 : d;
      if (d > 256) return false;
      n *= d;
      shape.push_back(d);
    }
    if (n > (1 << 16)) return false;
    kiln::Tensor t = kiln::Tensor::zeros(info.dtype, shape);
    if (info.dtype == kiln::DType::kFloat32)
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i % 7) - 3.f;
    out->emplace_back(info.name, kiln::Value(std::move(t)));
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Refuse absurd tensors before they reach malloc (libFuzzer's malloc limit
  // would report them as crashes).
  kiln::core::set_tensor_byte_limit(size_t{64} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::SessionOptions options;
  options.infer_shapes = false;
  options.backends = {"portable"};  // no plugin scan (dlopen) per input
  auto session = kiln::Session::load_from_bytes({data, size}, options, "/nonexistent-kiln-fuzz");
  if (!session.is_ok()) return 0;
  std::vector<kiln::NamedValue> inputs;
  if (!make_inputs(**session, &inputs)) return 0;
  auto outputs = (*session)->run(inputs);
  (void)outputs.is_ok();
  return 0;
}
