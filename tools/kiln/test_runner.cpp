#include "test_runner.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "cli_util.h"
#include "kiln/child_process.h"
#include "model_scan.h"
#include "value_io.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

// Ops whose outputs depend on a random generator (ONNX spec: "nondeterministic").
// Ops whose outputs depend on a random generator (ONNX spec: "nondeterministic").
constexpr const char* kRandomOps[] = {"Bernoulli",        "RandomNormal",      "RandomUniform",
                                      "RandomNormalLike", "RandomUniformLike", "Multinomial"};

TestOutcome pass() { return {Verdict::kPass, ""}; }
TestOutcome failure(std::string r) { return {Verdict::kFail, one_line(r)}; }
TestOutcome skip(std::string r) { return {Verdict::kSkip, one_line(r)}; }

// The number at the end of "test_data_set_12" or "input_3.pb" (-1 if none).
int64_t trailing_number(const std::string& stem) {
  size_t i = stem.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(stem[i - 1]))) --i;
  if (i == stem.size() || stem.size() - i > 9) return -1;
  return std::stoll(stem.substr(i));
}

// Entries of `dir` named PREFIX<N>SUFFIX, sorted by N.
std::vector<fs::path> numbered_entries(const fs::path& dir, const std::string& prefix, const std::string& suffix,
                                       bool want_dirs) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + suffix.size()) continue;
    if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (e.is_directory(ec) != want_dirs) continue;
    const int64_t n = trailing_number(name.substr(0, name.size() - suffix.size()));
    if (n >= 0 && name.size() - suffix.size() - prefix.size() == std::to_string(n).size()) found.emplace_back(n, e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

}  // namespace

Result<std::vector<TestCase>> discover(const std::vector<std::string>& roots) {
  std::vector<TestCase> tests;
  for (const std::string& root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) return not_found("'", root, "' is not a directory");
    const fs::path dir(root);
    if (fs::exists(dir / "model.onnx", ec)) {
      fs::path full = fs::absolute(dir, ec).lexically_normal();
      if (full.filename().empty()) full = full.parent_path();  // "dir/" -> "dir"
      tests.push_back({full.filename().string(), dir});
      continue;
    }
    std::vector<TestCase> found;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_directory(ec) && fs::exists(e.path() / "model.onnx", ec)) {
        found.push_back({e.path().filename().string(), e.path()});
      }
    }
    if (found.empty()) return not_found("no tests under '", root, "' (no model.onnx in it or its subfolders)");
    std::sort(found.begin(), found.end(), [](const TestCase& a, const TestCase& b) { return a.name < b.name; });
    tests.insert(tests.end(), found.begin(), found.end());
  }
  return tests;
}

namespace {

// A one-element tensor input as double, if it is one.
std::optional<double> scalar_of(const Value& v) {
  if (!v.is_tensor() || v.tensor().numel() != 1) return std::nullopt;
  std::optional<double> out;
  visit_dtype(v.tensor().dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) {
      out = static_cast<double>(v.tensor().data<T>()[0]);
    } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      out = static_cast<double>(static_cast<float>(v.tensor().data<T>()[0]));
    }
  });
  return out;
}

// Why the outputs of this model with these inputs cannot be predicted, or "".
std::string nondeterminism(const ModelScan& scan, const std::vector<IoInfo>& infos, const std::vector<Value>& values) {
  auto input_value = [&](const std::string& name) -> const Value* {
    for (size_t i = 0; i < infos.size() && i < values.size(); ++i)
      if (infos[i].name == name) return &values[i];
    return nullptr;
  };
  for (const ScannedNode& n : scan.nodes) {
    if (!n.domain.empty()) continue;
    for (const char* op : kRandomOps)
      if (n.op_type == op) return "nondeterministic op " + n.op_type;
    if (n.op_type != "Dropout") continue;
    if (scan.onnx_opset() > 0 && scan.onnx_opset() < 7) {  // Dropout-1/6: is_test attribute, default 0 (training)
      const auto it = n.ints.find("is_test");
      const auto r = n.floats.find("ratio");
      if ((it == n.ints.end() || it->second == 0) && (r == n.floats.end() || r->second > 0)) {
        return "Dropout in training mode (is_test=0) is nondeterministic";
      }
      continue;
    }
    if (n.inputs.size() < 3 || n.inputs[2].empty()) continue;  // no training_mode: inference
    const Value* mode = input_value(n.inputs[2]);
    const std::optional<double> training = mode ? scalar_of(*mode) : std::nullopt;
    if (!training) return "Dropout training_mode '" + n.inputs[2] + "' is not a model input; cannot tell it is off";
    if (*training == 0) continue;
    std::optional<double> ratio = 0.5;
    if (n.inputs.size() >= 2 && !n.inputs[1].empty()) {
      const Value* r = input_value(n.inputs[1]);
      ratio = r ? scalar_of(*r) : std::nullopt;
    }
    if (!ratio || *ratio > 0) return "Dropout in training mode with ratio > 0 is nondeterministic";
  }
  return "";
}

// Runs one data set. Sets *random (if empty) when these inputs make the
// outputs nondeterministic; the data set still runs.
// With `reference`, the outputs are also compared with that session's.
TestOutcome run_data_set(const Session& session, const ModelScan& scan, const fs::path& set_dir,
                         const NodeTestOptions& opts, std::string* random, const Session* reference) {
  const std::vector<IoInfo>& inputs = session.inputs();
  const std::vector<IoInfo>& outputs = session.outputs();
  const std::string set_name = set_dir.filename().string();

  const std::vector<fs::path> input_files = numbered_entries(set_dir, "input_", ".pb", false);
  if (input_files.size() > inputs.size()) {
    return failure(set_name + ": " + std::to_string(input_files.size()) + " input files, but the model has " +
                   std::to_string(inputs.size()) + " inputs");
  }
  std::vector<Value> values;
  std::vector<NamedValue> feeds;
  for (size_t i = 0; i < input_files.size(); ++i) {
    if (trailing_number(input_files[i].stem().string()) != static_cast<int64_t>(i)) {
      return failure(set_name + ": input files are not numbered 0.." + std::to_string(input_files.size() - 1));
    }
    Result<Value> v = read_value_for(input_files[i].string(), inputs[i]);
    if (!v.is_ok()) return failure(set_name + ": input " + std::to_string(i) + " '" + inputs[i].name + "': " + v.status().message());
    values.push_back(v->clone());
    feeds.emplace_back(inputs[i].name, std::move(v).value());
  }
  if (random->empty()) *random = nondeterminism(scan, inputs, values);

  Result<std::vector<Value>> got = session.run(feeds);
  if (!got.is_ok()) return failure(set_name + ": run: " + got.status().message());

  const std::vector<fs::path> output_files = numbered_entries(set_dir, "output_", ".pb", false);
  if (output_files.size() != got->size()) {
    return failure(set_name + ": the model gave " + std::to_string(got->size()) + " outputs, the test expects " +
                   std::to_string(output_files.size()));
  }
  for (size_t i = 0; i < output_files.size(); ++i) {
    const IoInfo* info = i < outputs.size() ? &outputs[i] : nullptr;
    const std::string label = "output " + std::to_string(i) + (info ? " '" + info->name + "'" : std::string());
    IoInfo fallback;
    Result<Value> expected = read_value_for(output_files[i].string(), info ? *info : fallback);
    if (!expected.is_ok()) return failure(set_name + ": " + label + ": " + expected.status().message());
    std::string diff = compare_values((*got)[i], *expected, opts.tol);
    if (!diff.empty()) return failure(set_name + ": " + label + ": " + diff);
  }
  if (!reference) return pass();
  Result<std::vector<Value>> want = reference->run(feeds);
  if (!want.is_ok()) return pass();  // the reference cannot run it: the expected outputs decide
  for (size_t i = 0; i < got->size() && i < want->size(); ++i) {
    std::string diff = compare_values((*got)[i], (*want)[i], opts.tol);
    if (!diff.empty()) return failure(set_name + ": output " + std::to_string(i) + " differs from the reference: " + diff);
  }
  return {Verdict::kPass, "matches the expected outputs and the reference"};
}

TestOutcome run_test_unchecked(const TestCase& test, const NodeTestOptions& opts, std::string* random) {
  const fs::path model = test.dir / "model.onnx";
  Result<ModelScan> scan = scan_model_file(model.string());
  if (!scan.is_ok()) return failure("load: " + scan.status().message());
  for (const ScannedNode& n : scan->nodes) {
    if (!n.domain.empty() || !random->empty()) continue;
    for (const char* op : kRandomOps)
      if (n.op_type == op) *random = "nondeterministic op " + n.op_type;
  }
  const std::vector<fs::path> sets = numbered_entries(test.dir, "test_data_set_", "", true);
  if (sets.empty()) return failure("no test_data_set_* folders in '" + test.dir.string() + "'");

  Result<std::unique_ptr<Session>> session = Session::load(model.string(), opts.session);
  if (!session.is_ok()) {
    TestOutcome o = failure("load: " + session.status().message());
    o.load_failed = true;
    return o;
  }
  if (opts.on_load)
    if (std::optional<TestOutcome> o = opts.on_load(**session)) return std::move(*o);
  std::unique_ptr<Session> reference;
  if (opts.reference) {
    Result<std::unique_ptr<Session>> r = Session::load(model.string(), *opts.reference);
    if (r.is_ok()) reference = std::move(r).value();
  }
  TestOutcome o = pass();
  for (const fs::path& set : sets) {
    o = run_data_set(**session, *scan, set, opts, random, reference.get());
    if (o.verdict != Verdict::kPass) return o;
  }
  return o;
}

}  // namespace

// A test of a nondeterministic op or mode passes if Kiln reproduces the
// reference (a seeded generator may); otherwise it is skipped, not failed.
TestOutcome run_node_test(const TestCase& test, const NodeTestOptions& opts) {
  std::string random;
  TestOutcome o = run_test_unchecked(test, opts, &random);
  if (o.verdict == Verdict::kFail && !random.empty()) return skip(random + " (" + o.reason + ")");
  return o;
}

TestOutcome run_node_test_isolated(const TestCase& test, const NodeTestOptions& opts) {
  Result<ChildResult> child = run_in_child(
      [&](int fd) {
        TestOutcome o = run_node_test(test, opts);
        write_all(fd, std::string(1, static_cast<char>(o.verdict)) + o.reason);
        return 0;
      },
      opts.timeout_s);
  if (!child.is_ok()) return failure(child.status().message());
  const std::string& msg = child->output;
  if (child->end == ChildResult::End::kTimedOut) return failure(child->describe(opts.timeout_s));
  if (child->end == ChildResult::End::kSignaled) {
    return failure(std::string("crashed (signal ") + std::to_string(child->signal) + ", " + strsignal(child->signal) + ")");
  }
  if (msg.empty()) return failure("the test process " + child->describe() + " and no result");
  const auto v = static_cast<Verdict>(msg[0]);
  if (v != Verdict::kPass && v != Verdict::kFail && v != Verdict::kSkip) return failure("garbled result from the test process");
  return {v, msg.substr(1)};
}

}  // namespace kiln::cli
