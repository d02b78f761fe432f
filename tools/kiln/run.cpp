// kiln run: load a model, feed it inputs from files (or random ones), print
// and optionally write its outputs.

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "backend_flags.h"
#include "cli_util.h"
#include "commands.h"
#include "kiln/session.h"
#include "onnx/tensor_proto_io.h"
#include "value_io.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage = R"(usage: kiln run MODEL [options]

Runs an ONNX model once and prints a short table of its outputs.

  --input-dir DIR     read the inputs from DIR: input_0.pb, input_1.pb, ... in
                      model-input order (ONNX backend-test layout); .npy files
                      (input_0.npy or NAME.npy) work too
  --input NAME=FILE   read input NAME from FILE (.pb TensorProto or .npy);
                      repeat for each input. With neither flag every input is
                      a deterministic random value (unknown dims are 1)
  --output-dir DIR    write the outputs to DIR as output_0.pb, output_1.pb, ...
  --threads N         intra-op threads, counting the caller (default 1; 0 = one per core)
  --seed N            seed of the random inputs (default 0)
)";  // + kBackendFlagsUsage

constexpr FlagSpec kFlags[] = {
    {"--input-dir", true, false}, {"--input", true, true}, {"--output-dir", true, false},
    {"--threads", true, false},   {"--seed", true, false}, {"--help", false, false},
};

struct InputSource {
  std::string path;  // empty: random
};

bool usable_as_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

// N for a file named input_N.pb or input_N.npy, else -1.
int64_t input_file_index(const std::string& name) {
  constexpr std::string_view kPrefix = "input_";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  const size_t dot = name.find('.', kPrefix.size());
  if (dot == std::string::npos || dot == kPrefix.size() || dot - kPrefix.size() > 9) return -1;
  const std::string ext = name.substr(dot);
  if (ext != ".pb" && ext != ".npy") return -1;
  int64_t n = 0;
  for (size_t i = kPrefix.size(); i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

// Finds the file of input `i` in `dir`, or returns an empty string.
std::string find_input_file(const fs::path& dir, size_t i, const IoInfo& info) {
  std::vector<fs::path> candidates = {dir / ("input_" + std::to_string(i) + ".pb"),
                                      dir / ("input_" + std::to_string(i) + ".npy")};
  if (usable_as_file_name(info.name)) {
    candidates.push_back(dir / (info.name + ".pb"));
    candidates.push_back(dir / (info.name + ".npy"));
  }
  std::error_code ec;
  for (const fs::path& p : candidates)
    if (fs::is_regular_file(p, ec)) return p.string();
  return "";
}

// Maps each model input to a file (or to nothing: random / absent optional).
Status resolve_input_files(const Args& args, const std::vector<IoInfo>& inputs, std::vector<InputSource>* out) {
  out->assign(inputs.size(), InputSource{});
  const auto dir_flag = args.value("--input-dir");
  const auto pairs = args.values("--input");
  if (dir_flag && !pairs.empty()) return invalid_argument("--input-dir and --input cannot be used together");

  if (dir_flag) {
    const fs::path dir(*dir_flag);
    std::error_code ec;
    if (!fs::exists(dir, ec)) return not_found("input directory '", *dir_flag, "' does not exist");
    if (!fs::is_directory(dir, ec)) return invalid_argument("--input-dir '", *dir_flag, "' is not a directory");
    for (size_t i = 0; i < inputs.size(); ++i) {
      (*out)[i].path = find_input_file(dir, i, inputs[i]);
      if ((*out)[i].path.empty() && inputs[i].kind != IoInfo::Kind::kOptional) {
        std::string names = "input_" + std::to_string(i) + ".pb or input_" + std::to_string(i) + ".npy";
        if (usable_as_file_name(inputs[i].name)) names += " or " + inputs[i].name + ".npy";
        return not_found("missing input '", inputs[i].name, "' (", inputs[i].type_string, "): no ", names,
                         " in '", *dir_flag, "'");
      }
    }
    // A file for an input the model does not have means the wrong folder or model.
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const int64_t index = input_file_index(entry.path().filename().string());
      if (index >= static_cast<int64_t>(inputs.size())) {
        return invalid_argument("'", entry.path().string(), "' has no model input to go to: the model has ",
                                inputs.size(), " input", inputs.size() == 1 ? "" : "s");
      }
    }
    return Status::ok();
  }

  for (const std::string& pair : pairs) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size()) {
      return invalid_argument("--input expects NAME=FILE, got '", pair, "'");
    }
    const std::string name = pair.substr(0, eq);
    size_t i = 0;
    while (i < inputs.size() && inputs[i].name != name) ++i;
    if (i == inputs.size()) {
      std::string names;
      for (const IoInfo& info : inputs) names += (names.empty() ? "'" : ", '") + info.name + "'";
      return invalid_argument("unknown input '", name, "' in --input; the model's inputs are ",
                              names.empty() ? std::string("none") : names);
    }
    if (!(*out)[i].path.empty()) return invalid_argument("input '", name, "' is given more than once");
    (*out)[i].path = pair.substr(eq + 1);
  }
  if (!pairs.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if ((*out)[i].path.empty() && inputs[i].kind != IoInfo::Kind::kOptional) {
        return invalid_argument("missing input '", inputs[i].name, "' (", inputs[i].type_string, "); give it with --input ",
                                inputs[i].name, "=FILE");
      }
    }
  }
  return Status::ok();
}

std::string plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// The values to feed: random (seeded) when no input files are given, else
// read and checked against the model's inputs; one table row per input.
Status gather_feeds(const Args& args, const std::vector<IoInfo>& inputs, const std::vector<InputSource>& sources,
                    uint64_t seed, std::vector<NamedValue>* feeds, std::vector<std::vector<std::string>>* rows) {
  const bool random = !args.has("--input-dir") && !args.has("--input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IoInfo& info = inputs[i];
    if (random) {
      KILN_ASSIGN_OR_RETURN(Value v, make_random_value(info, seed + i * 0x9e3779b97f4a7c15ull));
      rows->push_back({info.name, describe_type(v), "random"});
      feeds->emplace_back(info.name, std::move(v));
      continue;
    }
    if (sources[i].path.empty()) continue;  // an absent optional input
    Result<Value> v = read_value_for(sources[i].path, info);
    if (!v.is_ok()) return invalid_argument("cannot read input '", info.name, "': ", v.status().message());
    KILN_RETURN_IF_ERROR(check_value_for(info, *v, sources[i].path));
    rows->push_back({info.name, describe_type(*v), sources[i].path});
    feeds->emplace_back(info.name, std::move(v).value());
  }
  return Status::ok();
}

// Writes the outputs as output_<i>.pb into `dir`; returns the line to print.
Result<std::string> write_outputs(const std::string& dir, const std::vector<Value>& result,
                                  const std::vector<IoInfo>& outputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return invalid_argument("cannot create output directory '", dir, "': ", ec ? ec.message() : "not a directory");
  }
  for (size_t i = 0; i < result.size(); ++i) {
    const std::string path = (fs::path(dir) / ("output_" + std::to_string(i) + ".pb")).string();
    const std::string name = i < outputs.size() ? outputs[i].name : "";
    if (Status s = importer::write_value_file(path, result[i], name); !s.is_ok()) {
      return invalid_argument("cannot write output '", name, "' to '", path, "': ", s.message());
    }
  }
  return "wrote " + plural(result.size(), "file") + " to " + dir;
}

}  // namespace

int run_command(std::span<const std::string> argv) {
  const std::vector<FlagSpec> specs = with_backend_flags(kFlags);
  Result<Args> parsed = Args::parse(argv, specs, "run");
  if (!parsed.is_ok()) return fail(parsed.status().message(), kExitUsage);
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::cout << kUsage << kBackendFlagsUsage;
    return kExitOk;
  }
  if (args.positionals().empty()) return fail("kiln run needs a MODEL file (see kiln run --help)", kExitUsage);
  if (args.positionals().size() > 1) {
    return fail("kiln run takes one MODEL, got also '" + args.positionals()[1] + "'", kExitUsage);
  }
  const std::string& model_path = args.positionals()[0];

  SessionOptions options;
  if (auto t = args.value("--threads")) {
    Result<int64_t> n = parse_int_flag("--threads", *t, 0, 1024);
    if (!n.is_ok()) return fail(n.status().message(), kExitUsage);
    options.threads = static_cast<int>(*n);
  }
  if (Status s = apply_backend_flags(args, &options); !s.is_ok()) return fail(s.message(), kExitUsage);
  uint64_t seed = 0;
  if (auto s = args.value("--seed")) {
    Result<int64_t> n = parse_int_flag("--seed", *s, 0, INT64_MAX);
    if (!n.is_ok()) return fail(n.status().message(), kExitUsage);
    seed = static_cast<uint64_t>(*n);
  }

  std::error_code ec;
  if (!fs::exists(model_path, ec)) return fail("model file '" + model_path + "' does not exist");
  if (fs::is_directory(model_path, ec)) return fail("model '" + model_path + "' is a directory, not an ONNX file");
  Result<std::unique_ptr<Session>> session = Session::load(model_path, options);
  if (!session.is_ok()) return fail("cannot load model '" + model_path + "': " + session.status().message());
  for (const std::string& w : (*session)->placement().warnings) std::cerr << "warning: " << w << "\n";
  const std::vector<IoInfo>& inputs = (*session)->inputs();
  const std::vector<IoInfo>& outputs = (*session)->outputs();

  std::vector<InputSource> sources;
  if (Status s = resolve_input_files(args, inputs, &sources); !s.is_ok()) return fail(s.message());

  std::vector<NamedValue> feeds;
  std::vector<std::vector<std::string>> input_rows;
  if (Status s = gather_feeds(args, inputs, sources, seed, &feeds, &input_rows); !s.is_ok()) return fail(s.message());

  const auto start = std::chrono::steady_clock::now();
  Result<std::vector<Value>> result = (*session)->run(feeds);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!result.is_ok()) return fail("running '" + model_path + "' failed: " + result.status().message());

  std::string written;
  if (auto dir = args.value("--output-dir")) {
    Result<std::string> w = write_outputs(*dir, *result, outputs);
    if (!w.is_ok()) return fail(w.status().message());
    written = *w;
  }

  std::cout << "model " << model_path << ": " << plural((*session)->num_nodes(), "node") << ", "
            << plural(inputs.size(), "input") << ", " << plural(outputs.size(), "output") << "\n";
  if (std::string b = placement_summary((*session)->placement()); !b.empty()) std::cout << "backends: " << b << "\n";
  if (!input_rows.empty()) {
    input_rows.insert(input_rows.begin(), {"input", "type", "from"});
    print_table(input_rows);
  }
  char ms_text[32];
  std::snprintf(ms_text, sizeof(ms_text), "%.3f", ms);
  std::cout << "ran in " << ms_text << " ms\n";
  std::vector<std::vector<std::string>> rows = {{"output", "type", "values"}};
  for (size_t i = 0; i < result->size(); ++i) {
    rows.push_back({i < outputs.size() ? outputs[i].name : "#" + std::to_string(i), describe_type((*result)[i]),
                    preview_values((*result)[i])});
  }
  print_table(rows);
  if (!written.empty()) std::cout << written << "\n";
  return kExitOk;
}

}  // namespace kiln::cli
