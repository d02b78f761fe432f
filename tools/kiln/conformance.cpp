// kiln conformance: run ONNX backend-test folders (model.onnx plus
// test_data_set_N/{input,output}_M.pb) and compare with the expected outputs.
//
// Each test runs in a child process (fork), one at a time, so that a crash or
// a hang in one kernel fails that test only and memory is returned after
// every model; --no-fork runs them in this process (for a debugger). The
// runner itself (and the handling of nondeterministic ops) is test_runner.h.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "cli_util.h"
#include "commands.h"
#include "test_runner.h"

namespace kiln::cli {

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
  if (!parsed.is_ok()) return fail(parsed.status().message(), kExitUsage);
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (args.positionals().empty()) return fail("kiln conformance needs at least one DIR (see kiln conformance --help)", kExitUsage);

  NodeTestOptions opts;
  opts.session.threads = 1;
  const bool fork = !args.has("--no-fork");
  if (auto t = args.value("--threads")) {
    Result<int64_t> n = parse_int_flag("--threads", *t, 0, 1024);
    if (!n.is_ok()) return fail(n.status().message(), kExitUsage);
    opts.session.threads = static_cast<int>(*n);
  }
  if (auto t = args.value("--timeout")) {
    Result<int64_t> n = parse_int_flag("--timeout", *t, 0, 86400);
    if (!n.is_ok()) return fail(n.status().message(), kExitUsage);
    opts.timeout_s = static_cast<int>(*n);
  }
  for (const char* flag : {"--rtol", "--atol"}) {
    if (auto t = args.value(flag)) {
      Result<double> x = parse_double_flag(flag, *t);
      if (!x.is_ok()) return fail(x.status().message(), kExitUsage);
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
    if (!names.is_ok()) return fail(names.status().message(), kExitUsage);
    expected = std::move(names).value();
  }

  Result<std::vector<TestCase>> tests = discover(args.positionals());
  if (!tests.is_ok()) return fail(tests.status().message(), kExitUsage);

  size_t passed = 0, failed = 0, skipped = 0;
  std::map<std::string, TestOutcome> outcomes;
  for (const TestCase& test : *tests) {
    if (!selected(test.name)) continue;
    TestOutcome o = fork ? run_node_test_isolated(test, opts) : run_node_test(test, opts);
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