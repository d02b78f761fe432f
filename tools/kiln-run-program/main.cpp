// kiln-run-program: the minimal runner of .kiln programs, linked against
// libkiln_runtime (no ONNX importer, no protobuf) and a portable kernel
// library: every portable kernel, or a selective build's (docs/architecture.md).
//
//   kiln-run-program MODEL.kiln [--input NAME=FILE.npy ...] [--output-dir DIR]
//                    [--threads N] [--backends A,B,...] [--backend-path PATH]
//                    [--seed N]
//
// Inputs not given are random (uniform in [-1, 1) for floats, 0..9 for
// integers; unknown dims are 1). Outputs are written as DIR/output_<i>.npy.
// Any error is one line on stderr and exit status 1; usage errors exit 2.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/float16.h"
#include "kiln/kernels.h"
#include "kiln/npy.h"
#include "kiln/session.h"

namespace {

constexpr const char* kUsage =
    "usage: kiln-run-program MODEL.kiln [--input NAME=FILE.npy ...] [--output-dir DIR]\n"
    "                        [--threads N] [--backends A,B,...] [--backend-path PATH] [--seed N]\n";

struct Args {
  std::string model;
  std::vector<std::pair<std::string, std::string>> inputs;  // name, .npy path
  std::string output_dir;
  kiln::SessionOptions options;
  uint64_t seed = 0;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "kiln-run-program: %s\n", message.c_str());
  return 1;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const size_t end = comma == std::string::npos ? s.size() : comma;
    if (end > start) out.push_back(s.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool parse_number(const std::string& text, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Parses argv into `a`; returns an error message, or "" when fine.
std::string parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg.rfind("--", 0) != 0) {
      if (!a->model.empty()) return "more than one model given ('" + a->model + "' and '" + arg + "')";
      a->model = arg;
      continue;
    }
    if (!has_value) return "option " + arg + " needs a value";
    const std::string value = argv[++i];
    long long n = 0;
    if (arg == "--input") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0) return "--input expects NAME=FILE.npy, got '" + value + "'";
      a->inputs.emplace_back(value.substr(0, eq), value.substr(eq + 1));
    } else if (arg == "--output-dir") {
      a->output_dir = value;
    } else if (arg == "--threads") {
      if (!parse_number(value, 0, 1024, &n)) return "--threads expects a number from 0 to 1024, got '" + value + "'";
      a->options.threads = static_cast<int>(n);
    } else if (arg == "--backends") {
      a->options.backends = split_commas(value);
    } else if (arg == "--backend-path") {
      a->options.backend_paths.push_back(value);
    } else if (arg == "--seed") {
      if (!parse_number(value, 0, INT64_MAX, &n)) return "--seed expects a non-negative number, got '" + value + "'";
      a->seed = static_cast<uint64_t>(n);
    } else {
      return "unknown option '" + arg + "'";
    }
  }
  if (a->model.empty()) return "no program given";
  return "";
}

template <class T, class Dist>
void fill(kiln::Tensor& t, std::mt19937_64& rng, Dist dist) {
  T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(dist(rng));
}

// A random tensor for a declared input (unknown dims are 1).
kiln::Result<kiln::Tensor> random_input(const kiln::IoInfo& info, uint64_t seed) {
  using kiln::DType;
  if (info.kind != kiln::IoInfo::Kind::kTensor)
    return kiln::invalid_argument("input '", info.name, "' is ", info.type_string, "; give it with --input");
  std::vector<int64_t> dims;
  for (int64_t d : info.dims) dims.push_back(d < 0 ? 1 : d);
  kiln::Tensor t = kiln::Tensor::allocate(info.dtype, kiln::Shape(dims));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  std::uniform_int_distribution<int> small(0, 9);
  switch (info.dtype) {
    case DType::kFloat32: fill<float>(t, rng, real); break;
    case DType::kFloat64: fill<double>(t, rng, real); break;
    case DType::kFloat16: fill<kiln::Float16>(t, rng, real); break;
    case DType::kInt64: fill<int64_t>(t, rng, small); break;
    case DType::kInt32: fill<int32_t>(t, rng, small); break;
    case DType::kInt8: fill<int8_t>(t, rng, small); break;
    case DType::kUInt8: fill<uint8_t>(t, rng, small); break;
    case DType::kBool: fill<bool>(t, rng, std::bernoulli_distribution(0.5)); break;
    default:
      return kiln::invalid_argument("input '", info.name, "' has dtype ", kiln::dtype_name(info.dtype),
                                    ", which has no random values; give it with --input");
  }
  return t;
}

// The inputs in session order: from --input files, else random.
kiln::Result<std::vector<kiln::NamedValue>> make_inputs(const kiln::Session& session, const Args& a) {
  std::vector<kiln::NamedValue> feeds;
  for (const auto& [name, path] : a.inputs) {
    KILN_ASSIGN_OR_RETURN(kiln::Tensor t, kiln::read_npy_file(path));
    feeds.emplace_back(name, kiln::Value(std::move(t)));
  }
  const std::vector<kiln::IoInfo>& infos = session.inputs();
  for (size_t i = 0; i < infos.size(); ++i) {
    bool given = false;
    for (const auto& f : feeds) given = given || f.first == infos[i].name;
    if (given || infos[i].kind == kiln::IoInfo::Kind::kOptional) continue;
    KILN_ASSIGN_OR_RETURN(kiln::Tensor t, random_input(infos[i], a.seed + i * 0x9e3779b97f4a7c15ull));
    feeds.emplace_back(infos[i].name, kiln::Value(std::move(t)));
  }
  return feeds;
}

std::string describe(const kiln::Value& v) {
  if (!v.is_tensor()) return "(not a tensor)";
  return std::string(kiln::dtype_name(v.tensor().dtype())) + v.tensor().shape().to_string();
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (std::string why = parse_args(argc, argv, &a); !why.empty()) {
    std::fprintf(stderr, "kiln-run-program: %s\n%s", why.c_str(), kUsage);
    return 2;
  }
  kiln::register_portable_kernels();
  auto session = kiln::Session::load(a.model, a.options);
  if (!session.is_ok()) return fail("cannot load '" + a.model + "': " + session.status().message());
  auto feeds = make_inputs(**session, a);
  if (!feeds.is_ok()) return fail(feeds.status().message());
  auto outputs = (*session)->run(std::span<const kiln::NamedValue>(feeds->data(), feeds->size()));
  if (!outputs.is_ok()) return fail("running '" + a.model + "' failed: " + outputs.status().message());
  if (!a.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(a.output_dir, ec);
    if (ec) return fail("cannot create output directory '" + a.output_dir + "': " + ec.message());
  }
  const std::vector<kiln::IoInfo>& infos = (*session)->outputs();
  for (size_t i = 0; i < outputs->size(); ++i) {
    const kiln::Value& v = (*outputs)[i];
    const std::string name = i < infos.size() ? infos[i].name : "#" + std::to_string(i);
    std::printf("%s: %s\n", name.c_str(), describe(v).c_str());
    if (a.output_dir.empty()) continue;
    if (!v.is_tensor()) return fail("output '" + name + "' is not a tensor; only tensors can be written as .npy");
    const std::string path = (std::filesystem::path(a.output_dir) / ("output_" + std::to_string(i) + ".npy")).string();
    if (kiln::Status s = kiln::write_npy_file(path, v.tensor()); !s.is_ok())
      return fail("cannot write output '" + name + "' to '" + path + "': " + s.message());
  }
  return 0;
}
