// kiln conformance: run ONNX backend-test folders (model.onnx plus
// test_data_set_N/{input,output}_M.pb) and compare with the expected outputs.
//
// Each test runs in a child process (fork), one at a time, so that a crash or
// a hang in one kernel fails that test only and memory is returned after
// every model; --no-fork runs them in this process (for a debugger).
//
// Tests of nondeterministic ops (Bernoulli, Random*, Multinomial, Dropout in
// training mode with ratio > 0) run too, and pass if Kiln reproduces the
// reference (its seeded Dropout draws as numpy does); if not, they are
// SKIPped with the reason and the mismatch, never FAILed. A crash fails them.

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <system_error>

#include "cli_util.h"
#include "commands.h"
#include "compare.h"
#include "kiln/session.h"
#include "model_scan.h"
#include "value_io.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage = R"(usage: kiln conformance DIR... [options]

Runs ONNX backend tests. Each DIR is a test folder (model.onnx and
test_data_set_*/) or a folder whose subfolders are test folders. Prints
PASS/FAIL/SKIP per test and a last line "N passed, N failed, N skipped".
Tests of nondeterministic ops pass if the outputs match, else are skipped.

  --threads N           intra-op threads per session (default 1)
  --filter SUBSTR       run only tests whose name contains SUBSTR (repeatable: any)
  --expected-pass FILE  tests that must pass (one name per line, # comments):
                        exit 1 if one does not (REGRESSION lines), print NEW
                        lines for passing tests not listed
  --quiet               print only failures, regressions, new passes and the total
  --rtol X, --atol X    tolerances for floating-point outputs (default 1e-3, 1e-7)
  --timeout S           seconds before a test is stopped and failed (default 600; 0 = none)
  --no-fork             run tests in this process (a crash then ends the run)
)";

constexpr FlagSpec kFlags[] = {
    {"--threads", true, false},  {"--filter", true, true},  {"--expected-pass", true, false},
    {"--quiet", false, false},   {"--rtol", true, false},   {"--atol", true, false},
    {"--timeout", true, false},  {"--no-fork", false, false}, {"--help", false, false},
};

// Ops whose outputs depend on a random generator (ONNX spec: "nondeterministic").
constexpr const char* kRandomOps[] = {"Bernoulli",        "RandomNormal",      "RandomUniform",
                                      "RandomNormalLike", "RandomUniformLike", "Multinomial"};

struct Options {
  int threads = 1;
  Tolerance tol;
  int timeout_s = 600;
  bool fork = true;
};

struct TestCase {
  std::string name;
  fs::path dir;
};

enum class Verdict : char { kPass = 'P', kFail = 'F', kSkip = 'S' };

struct Outcome {
  Verdict verdict = Verdict::kFail;
  std::string reason;
};

Outcome pass() { return {Verdict::kPass, ""}; }
Outcome failure(std::string r) { return {Verdict::kFail, one_line(r)}; }
Outcome skip(std::string r) { return {Verdict::kSkip, one_line(r)}; }

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
Outcome run_data_set(const Session& session, const ModelScan& scan, const fs::path& set_dir, const Options& opts,
                     std::string* random) {
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
    if (!v.ok()) return failure(set_name + ": input " + std::to_string(i) + " '" + inputs[i].name + "': " + v.status().message());
    values.push_back(v->clone());
    feeds.emplace_back(inputs[i].name, std::move(v).value());
  }
  if (random->empty()) *random = nondeterminism(scan, inputs, values);

  Result<std::vector<Value>> got = session.run(feeds);
  if (!got.ok()) return failure(set_name + ": run: " + got.status().message());

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
    if (!expected.ok()) return failure(set_name + ": " + label + ": " + expected.status().message());
    std::string diff = compare_values((*got)[i], *expected, opts.tol);
    if (!diff.empty()) return failure(set_name + ": " + label + ": " + diff);
  }
  return pass();
}

Outcome run_test_unchecked(const TestCase& test, const Options& opts, std::string* random) {
  const fs::path model = test.dir / "model.onnx";
  Result<ModelScan> scan = scan_model_file(model.string());
  if (!scan.ok()) return failure("load: " + scan.status().message());
  for (const ScannedNode& n : scan->nodes) {
    if (!n.domain.empty() || !random->empty()) continue;
    for (const char* op : kRandomOps)
      if (n.op_type == op) *random = "nondeterministic op " + n.op_type;
  }
  const std::vector<fs::path> sets = numbered_entries(test.dir, "test_data_set_", "", true);
  if (sets.empty()) return failure("no test_data_set_* folders in '" + test.dir.string() + "'");

  SessionOptions so;
  so.threads = opts.threads;
  Result<std::unique_ptr<Session>> session = Session::load(model.string(), so);
  if (!session.ok()) return failure("load: " + session.status().message());
  for (const fs::path& set : sets) {
    Outcome o = run_data_set(**session, *scan, set, opts, random);
    if (o.verdict != Verdict::kPass) return o;
  }
  return pass();
}

// A test of a nondeterministic op or mode passes if Kiln reproduces the
// reference (a seeded generator may); otherwise it is skipped, not failed.
Outcome run_test(const TestCase& test, const Options& opts) {
  std::string random;
  Outcome o = run_test_unchecked(test, opts, &random);
  if (o.verdict == Verdict::kFail && !random.empty()) return skip(random + " (" + o.reason + ")");
  return o;
}

// Runs `test` in a child process; a crash, an uncaught exception or a timeout fails it.
Outcome run_test_isolated(const TestCase& test, const Options& opts) {
  int fds[2];
  if (pipe(fds) != 0) return failure(std::string("cannot create a pipe: ") + std::strerror(errno));
  std::cout.flush();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return failure(std::string("cannot fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    Outcome o = run_test(test, opts);
    std::string msg(1, static_cast<char>(o.verdict));
    msg += o.reason;
    size_t off = 0;
    while (off < msg.size()) {
      const ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(opts.timeout_s);
  for (;;) {
    int wait_ms = -1;
    if (opts.timeout_s > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1000 * 60));
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, wait_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    msg.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return failure("timed out after " + std::to_string(opts.timeout_s) + " s");
  if (WIFSIGNALED(status)) {
    return failure(std::string("crashed (signal ") + std::to_string(WTERMSIG(status)) + ", " +
                   strsignal(WTERMSIG(status)) + ")");
  }
  if (msg.empty()) return failure("the test process exited with status " + std::to_string(WEXITSTATUS(status)) + " and no result");
  const auto v = static_cast<Verdict>(msg[0]);
  if (v != Verdict::kPass && v != Verdict::kFail && v != Verdict::kSkip) return failure("garbled result from the test process");
  return {v, msg.substr(1)};
}

Result<std::vector<std::string>> read_name_list(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_status(StatusCode::kIo, "cannot read --expected-pass file '", path, "': ", std::strerror(errno));
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    const size_t e = line.find_last_not_of(" \t\r");
    names.push_back(line.substr(b, e - b + 1));
  }
  return names;
}

Result<double> parse_double_flag(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0) || std::isinf(v)) {
    return invalid_argument(flag, " expects a non-negative number, got '", text, "'");
  }
  return v;
}

}  // namespace

int conformance_command(std::span<const std::string> argv) {
  Result<Args> parsed = Args::parse(argv, kFlags, "conformance");
  if (!parsed.ok()) return fail(parsed.status().message(), kExitUsage);
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (args.positionals().empty()) return fail("kiln conformance needs at least one DIR (see kiln conformance --help)", kExitUsage);

  Options opts;
  opts.fork = !args.has("--no-fork");
  if (auto t = args.value("--threads")) {
    Result<int64_t> n = parse_int_flag("--threads", *t, 0, 1024);
    if (!n.ok()) return fail(n.status().message(), kExitUsage);
    opts.threads = static_cast<int>(*n);
  }
  if (auto t = args.value("--timeout")) {
    Result<int64_t> n = parse_int_flag("--timeout", *t, 0, 86400);
    if (!n.ok()) return fail(n.status().message(), kExitUsage);
    opts.timeout_s = static_cast<int>(*n);
  }
  for (const char* flag : {"--rtol", "--atol"}) {
    if (auto t = args.value(flag)) {
      Result<double> x = parse_double_flag(flag, *t);
      if (!x.ok()) return fail(x.status().message(), kExitUsage);
      (std::string(flag) == "--rtol" ? opts.tol.rtol : opts.tol.atol) = *x;
    }
  }
  const bool quiet = args.has("--quiet");
  const std::vector<std::string> filters = args.values("--filter");
  auto selected = [&](const std::string& name) {
    if (filters.empty()) return true;
    return std::any_of(filters.begin(), filters.end(), [&](const std::string& f) { return name.find(f) != std::string::npos; });
  };

  std::optional<std::vector<std::string>> expected;
  if (auto path = args.value("--expected-pass")) {
    Result<std::vector<std::string>> names = read_name_list(*path);
    if (!names.ok()) return fail(names.status().message(), kExitUsage);
    expected = std::move(names).value();
  }

  Result<std::vector<TestCase>> tests = discover(args.positionals());
  if (!tests.ok()) return fail(tests.status().message(), kExitUsage);

  size_t passed = 0, failed = 0, skipped = 0;
  std::map<std::string, Outcome> outcomes;
  for (const TestCase& test : *tests) {
    if (!selected(test.name)) continue;
    Outcome o = opts.fork ? run_test_isolated(test, opts) : run_test(test, opts);
    switch (o.verdict) {
      case Verdict::kPass:
        ++passed;
        if (!quiet) std::cout << "PASS " << test.name << std::endl;
        break;
      case Verdict::kFail:
        ++failed;
        std::cout << "FAIL " << test.name << ": " << o.reason << std::endl;
        break;
      case Verdict::kSkip:
        ++skipped;
        if (!quiet) std::cout << "SKIP " << test.name << ": " << o.reason << std::endl;
        break;
    }
    outcomes.emplace(test.name, std::move(o));
  }

  int exit_code = failed > 0 ? kExitFailure : kExitOk;
  if (expected) {
    exit_code = kExitOk;
    std::set<std::string> listed(expected->begin(), expected->end());
    for (const std::string& name : listed) {
      if (!selected(name)) continue;
      auto it = outcomes.find(name);
      if (it == outcomes.end()) {
        std::cout << "REGRESSION " << name << ": not found under the given directories" << std::endl;
        exit_code = kExitFailure;
      } else if (it->second.verdict != Verdict::kPass) {
        std::cout << "REGRESSION " << name << ": " << (it->second.verdict == Verdict::kSkip ? "skipped: " : "")
                  << it->second.reason << std::endl;
        exit_code = kExitFailure;
      }
    }
    for (const auto& [name, o] : outcomes) {
      if (o.verdict == Verdict::kPass && !listed.count(name)) std::cout << "NEW " << name << std::endl;
    }
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped" << std::endl;
  return exit_code;
}

}  // namespace kiln::cli
