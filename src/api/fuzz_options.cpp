// libFuzzer entry point over backend-option strings: the `--backends`
// list, `--fallback` and `--backend-option NAME.KEY=VALUE` parsers
// (kiln/backends.h), backend selection, the host's check of each option
// against a plugin's schema, and the plugin's own parsing and use of the
// values (the template plugin: group size, fusion, serial execution) while
// it compiles and runs a small model. Input: one setting a line,
// "backends=LIST", "fallback=POLICY" or an option; lines that do not parse
// are skipped after the parser refused them. Any text must load and run or
// fail with a Status, never crash, hang or leak; a run that succeeds must
// match the portable kernels.
// Built only with -DKILN_FUZZ=ON and clang; needs the template plugin in the
// build tree's lib/kiln/backends (found next to bin/).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "kiln/backends.h"
#include "kiln/session.h"

namespace {

// Y = sigmoid((relu(X + X) @ W)^2) + X, X float32[2, 4]: Add, Relu, MatMul
// and Mul go to the template plugin, Sigmoid to portable. Generated with the
// onnx Python package (opset 13) and checked by onnx.checker.
const uint8_t kModel[] = {
    0x08, 0x08, 0x12, 0x00, 0x3a, 0xdc, 0x01, 0x0a, 0x0e, 0x0a, 0x01, 0x58, 0x0a, 0x01, 0x58, 0x12,
    0x01, 0x61, 0x22, 0x03, 0x41, 0x64, 0x64, 0x0a, 0x0c, 0x0a, 0x01, 0x61, 0x12, 0x01, 0x62, 0x22,
    0x04, 0x52, 0x65, 0x6c, 0x75, 0x0a, 0x11, 0x0a, 0x01, 0x62, 0x0a, 0x01, 0x57, 0x12, 0x01, 0x63,
    0x22, 0x06, 0x4d, 0x61, 0x74, 0x4d, 0x75, 0x6c, 0x0a, 0x0e, 0x0a, 0x01, 0x63, 0x0a, 0x01, 0x63,
    0x12, 0x01, 0x64, 0x22, 0x03, 0x4d, 0x75, 0x6c, 0x0a, 0x0f, 0x0a, 0x01, 0x64, 0x12, 0x01, 0x65,
    0x22, 0x07, 0x53, 0x69, 0x67, 0x6d, 0x6f, 0x69, 0x64, 0x0a, 0x0e, 0x0a, 0x01, 0x65, 0x0a, 0x01,
    0x58, 0x12, 0x01, 0x59, 0x22, 0x03, 0x41, 0x64, 0x64, 0x12, 0x01, 0x67, 0x2a, 0x4b, 0x08, 0x04,
    0x08, 0x04, 0x10, 0x01, 0x42, 0x01, 0x57, 0x4a, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
    0x3d, 0x00, 0x00, 0x00, 0x3e, 0x00, 0x00, 0x40, 0x3e, 0x00, 0x00, 0x80, 0x3e, 0x00, 0x00, 0xa0,
    0x3e, 0x00, 0x00, 0xc0, 0x3e, 0x00, 0x00, 0xe0, 0x3e, 0x00, 0x00, 0x00, 0x3f, 0x00, 0x00, 0x10,
    0x3f, 0x00, 0x00, 0x20, 0x3f, 0x00, 0x00, 0x30, 0x3f, 0x00, 0x00, 0x40, 0x3f, 0x00, 0x00, 0x50,
    0x3f, 0x00, 0x00, 0x60, 0x3f, 0x00, 0x00, 0x70, 0x3f, 0x5a, 0x13, 0x0a, 0x01, 0x58, 0x12, 0x0e,
    0x0a, 0x0c, 0x08, 0x01, 0x12, 0x08, 0x0a, 0x02, 0x08, 0x02, 0x0a, 0x02, 0x08, 0x04, 0x62, 0x13,
    0x0a, 0x01, 0x59, 0x12, 0x0e, 0x0a, 0x0c, 0x08, 0x01, 0x12, 0x08, 0x0a, 0x02, 0x08, 0x02, 0x0a,
    0x02, 0x08, 0x04, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0d
};

std::shared_ptr<kiln::BackendRegistry>& registry() {
  static std::shared_ptr<kiln::BackendRegistry> r;
  return r;
}

kiln::Result<std::vector<kiln::Value>> run(const kiln::SessionOptions& options) {
  KILN_ASSIGN_OR_RETURN(auto session, kiln::Session::load_from_bytes({kModel, sizeof(kModel)}, options));
  kiln::Tensor x = kiln::Tensor::zeros(kiln::DType::kFloat32, kiln::Shape{2, 4});
  for (int i = 0; i < 8; ++i) x.data<float>()[i] = static_cast<float>(i % 5) - 2.f;
  return session->run({{"X", kiln::Value(std::move(x))}});
}

const kiln::Tensor& reference() {
  static const kiln::Tensor ref = [] {
    kiln::SessionOptions o;
    o.backends = {"portable"};
    auto r = run(o);
    if (!r.ok()) std::abort();
    return (*r)[0].tensor();
  }();
  return ref;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln::BackendDiscovery discovery;
  discovery.use_environment = false;
  registry() = kiln::BackendRegistry::create(discovery);
  if (!registry()->find("template").ok()) {
    std::fprintf(stderr, "fuzz_options: the template plugin is not in the build tree's lib/kiln/backends\n");
    std::abort();
  }
  (void)reference();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::SessionOptions options;
  options.backends = {"template"};
  options.backend_registry = registry();
  options.infer_shapes = false;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.starts_with("backends=")) {
      if (auto r = kiln::parse_backend_list(line.substr(9)); r.ok()) options.backends = std::move(*r);
    } else if (line.starts_with("fallback=")) {
      if (auto r = kiln::parse_fallback_policy(line.substr(9)); r.ok()) options.fallback = *r;
    } else if (auto r = kiln::parse_backend_option(line); r.ok()) {
      options.backend_options.push_back(std::move(*r));
    }
  }
  auto out = run(options);
  if (!out.ok()) return 0;
  // Options choose where nodes run, never what they compute.
  const kiln::Tensor& ref = reference();
  const kiln::Tensor& y = (*out)[0].tensor();
  if (y.dtype() != ref.dtype() || !(y.shape() == ref.shape())) std::abort();
  for (int64_t i = 0; i < ref.numel(); ++i)
    if (!(std::fabs(y.data<float>()[i] - ref.data<float>()[i]) <= 1e-4f + 1e-3f * std::fabs(ref.data<float>()[i])))
      std::abort();
  return 0;
}
