// kiln check-backend LIB.so: the conformance kit for backend plugins. The
// checks are a library (kiln/backend_check.h); this file parses the
// arguments, runs each group in a child process (kiln/child_process.h) so a
// plugin that crashes fails that group (with the signal) instead of ending
// the run, runs the ONNX node tests through the plugin with the runner of
// `kiln conformance` (test_runner.h), each fusion probe and each --model
// (kiln/verify.h) in a process of its own, and prints the report (repeated
// failures collapsed unless --verbose).
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "kiln/backend_check.h"
#include "kiln/child_process.h"
#include "kiln/verify.h"
#include "test_runner.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using backend_check::Outcome;
using backend_check::Report;
using backend_check::Row;

struct Options {
  backend_check::Options kit;
  std::string suite;   // ONNX node tests folder ("" to skip)
  std::string filter;  // substring of test names
  std::vector<std::string> models;  // --model: real models, partition by partition
  bool verbose = false;
};

using Group = std::function<void(Report&)>;

// Runs `group` in a child process; its rows come back through a pipe as they
// are added. A child killed by a signal adds a failure naming the signal.
void run_isolated(const std::string& title, const Group& group, Report& r) {
  Result<ChildResult> child = run_in_child([&](int fd) {
    Report rows;
    rows.sink = [fd](const Row& row) { write_all(fd, backend_check::encode_row(row)); };
    group(rows);
    return 0;
  });
  if (!child.is_ok()) return r.fail(title, child.status().message());
  backend_check::decode_rows(child->output, r);
  if (child->end == ChildResult::End::kSignaled) {
    r.fail(title + " crashed", std::string("the plugin killed the process with ") + strsignal(child->signal) +
                                   " (after the checks above)");
  } else if (!child->exited_cleanly()) {
    r.fail(title + " crashed", "the check process " + child->describe());
  }
}

// The ONNX node tests whose nodes the plugin claims: through the plugin, against
// the expected outputs and portable kernels (the runner of `kiln conformance`).
void check_node_tests(const Options& o, Report& r) {
  if (o.suite.empty()) return r.skip("node tests", "--no-suite");
  std::error_code ec;
  if (!fs::is_directory(o.suite, ec)) {
    return r.skip("node tests", "no folder " + o.suite + " (apt-get install libonnx-testdata, or pass --suite DIR)");
  }
  BackendDiscovery only;
  only.paths = {o.kit.library};
  only.use_environment = false;
  only.use_default_dirs = false;
  std::shared_ptr<BackendRegistry> registry = BackendRegistry::create(only);
  const std::vector<BackendInfo> plugins = registry->backends();
  if (plugins.empty()) {
    const std::vector<BackendLoadError> errors = registry->errors();
    return r.fail("node tests", errors.empty() ? "the plugin did not load" : errors[0].message);
  }
  if (!plugins[0].available) return r.skip("node tests", "the plugin is not available here: " + plugins[0].unavailable_reason);
  NodeTestOptions with;
  with.session.backend_registry = registry;
  with.session.backends = {plugins[0].name};
  for (const auto& [k, v] : o.kit.backend_options) with.session.backend_options.push_back({plugins[0].name, k, v});
  with.tol = Tolerance{1e-3, 1e-5};
  with.reference = SessionOptions{};
  with.reference->backends = {"portable"};
  size_t nodes = 0;
  with.on_load = [&](const Session& s) -> std::optional<TestOutcome> {
    nodes = 0;
    for (const PartitionInfo& p : s.placement().partitions) nodes += p.nodes.size();
    if (nodes == 0) return TestOutcome{Verdict::kSkip, "the plugin claims none of its nodes"};
    return std::nullopt;
  };
  Result<std::vector<TestCase>> tests = discover({o.suite});
  if (!tests.is_ok()) return r.skip("node tests", tests.status().message());
  size_t tried = 0, claimed = 0, failed = 0;
  for (const TestCase& test : *tests) {
    if (!o.filter.empty() && test.name.find(o.filter) == std::string::npos) continue;
    ++tried;
    nodes = 0;
    TestOutcome out = run_node_test(test, with);
    if (out.load_failed) {  // a failure of the plugin only when portable kernels load it
      if (Session::load((test.dir / "model.onnx").string(), *with.reference).is_ok()) {
        ++failed;
        r.fail("node " + test.name, "loads on portable kernels but not with the plugin: " + out.reason);
      }
      continue;
    }
    if (nodes == 0) continue;
    ++claimed;
    if (out.verdict == Verdict::kFail) {
      ++failed;
      r.fail("node " + test.name, out.reason);
    } else if (out.verdict == Verdict::kSkip) {
      r.skip("node " + test.name, out.reason);
    } else {
      r.pass("node " + test.name, std::to_string(nodes) + " node(s) on the plugin; " +
                                      (out.reason.empty() ? "matches the expected outputs" : out.reason));
    }
  }
  if (claimed == 0) r.skip("node tests", "the plugin claims nothing in the " + std::to_string(tried) + " tests tried");
  else r.expect(failed == 0, "node tests", std::to_string(claimed) + " of " + std::to_string(tried) +
                                               " tests run through the plugin, " + std::to_string(failed) + " failed");
}

// "resnet18/model.onnx" for models named model.onnx (the ONNX test layout), else the file name.
std::string model_label(const std::string& model) {
  const fs::path p(model);
  if (p.filename() == "model.onnx" && p.has_parent_path()) return (p.parent_path().filename() / p.filename()).string();
  return p.filename().string();
}

// --model: every partition of a real model against portable (kiln/verify.h),
// bisected to the first node that differs.
void check_model(const Options& o, const std::string& model, Report& r) {
  const std::string row = "model " + model_label(model);
  BackendDiscovery only;
  only.paths = {o.kit.library};
  only.use_environment = false;
  only.use_default_dirs = false;
  VerifyOptions v;
  v.backend_registry = BackendRegistry::create(only);
  const std::vector<BackendInfo> plugins = v.backend_registry->backends();
  if (plugins.empty()) return r.fail(row, "the plugin did not load");
  if (!plugins[0].available) return r.skip(row, "the plugin is not available here: " + plugins[0].unavailable_reason);
  v.backend = plugins[0].name;
  for (const auto& [k, value] : o.kit.backend_options) v.backend_options.push_back({v.backend, k, value});
  Result<VerifyReport> rep = verify_model(model, v);
  if (!rep.is_ok()) return r.fail(row, rep.status().message());
  if (rep->partitions.empty()) return r.skip(row, "the plugin claims none of its " + std::to_string(rep->nodes_total) + " nodes");
  for (const PartitionVerdict& p : rep->partitions) {
    std::string detail = std::to_string(p.nodes.size()) + " nodes (" + p.nodes.front() +
                         (p.nodes.size() > 1 ? " .. " + p.nodes.back() : "") + ")";
    if (!p.error.empty()) detail += ": " + p.error;
    for (const ValueCheck& c : p.outputs)
      if (!c.ok) detail += "; '" + c.value + "': " + (c.problem.empty() ? describe(c.error) : c.problem);
    if (p.first_bad) {
      detail += "; first node that differs: " + p.first_bad->node;
      for (const ValueCheck& c : p.first_bad->outputs) detail += " ('" + c.value + "': " + describe(c.error) + ")";
    }
    if (!p.bisect_note.empty()) detail += "; bisection " + p.bisect_note;
    if (p.ok) detail += ": outputs match" + (p.outputs.empty() ? "" : " (" + describe(p.outputs[0].error) + ")");
    r.expect(p.ok, row + " " + p.id, detail);
  }
  for (const ValueCheck& c : rep->model_outputs)
    r.expect(c.ok, row + " output '" + c.value + "'", c.problem.empty() ? describe(c.error) : c.problem);
}

constexpr const char* kUsage = R"(usage: kiln check-backend LIB.so [options]

Loads a backend plugin and checks its contract: table sizes and versions,
info, devices and option schema, create/release pairs under a tracking
allocator, error paths (bad options, unknown properties, compiling a group it
did not claim, executing with wrong inputs), every ONNX node test whose nodes
the plugin claims (through the plugin and through portable kernels,
compared), export/import, concurrent execute under the declared concurrency,
and unload -> reload. Each group runs in its own process: a crash fails it.

  --suite DIR         ONNX node tests to run (default: the libonnx-testdata
                      node tests, /usr/include/onnx/backend/test/data/node)
  --no-suite          skip the node tests
  --filter TEXT       only node tests whose name contains TEXT
  --model M.onnx      also run every partition the plugin makes of model M
                      against portable kernels (kiln verify); repeatable
  --backend-option KEY=VALUE
                      an option for the plugin's instances; repeatable
  --verbose           every row and every detail in full (by default,
                      failures and skips with the same detail collapse into
                      one line with a count, and details are cut at 160)

Fusion probes (chains, a residual, a diamond, an intermediate read inside and
outside a group, a CNN head, and a chain of the elementwise ops the plugin
claims) run through the plugin and portable kernels; every partition also
runs alone with its outputs between guard bytes, so a plugin that writes
past an output buffer is named with its op and output.
)";

constexpr FlagSpec kFlags[] = {{"--suite", true, false},
                               {"--no-suite", false, false},
                               {"--filter", true, false},
                               {"--model", true, true},
                               {"--backend-option", true, true},
                               {"--verbose", false, false},
                               {"--help", false, false}};

const char* outcome_name(Outcome o) {
  return o == Outcome::kPass ? "pass" : o == Outcome::kFail ? "FAIL" : "skip";
}

// Prints the rows and the totals; true when nothing failed. Unless
// `verbose`, failures and skips whose detail is the same collapse into the
// first of them, with a count, and details are cut at 160 characters.
bool print_report(const Report& r, bool verbose) {
  std::vector<std::vector<std::string>> rows{{"CHECK", "RESULT", "DETAIL"}};
  size_t passed = 0, failed = 0, skipped = 0;
  std::vector<std::vector<std::string>> same(r.rows().size());  // per row: checks of later rows collapsed into it
  std::vector<int8_t> hidden(r.rows().size(), 0);
  for (size_t i = 0; i < r.rows().size() && !verbose; ++i) {
    const Row& a = r.rows()[i];
    if (hidden[i] || a.outcome == Outcome::kPass || a.detail.empty()) continue;
    for (size_t j = i + 1; j < r.rows().size(); ++j) {
      const Row& b = r.rows()[j];
      if (!hidden[j] && b.outcome == a.outcome && b.detail == a.detail) {
        hidden[j] = 1;
        same[i].push_back(b.check);
      }
    }
  }
  for (size_t i = 0; i < r.rows().size(); ++i) {
    const Row& row = r.rows()[i];
    passed += row.outcome == Outcome::kPass;
    failed += row.outcome == Outcome::kFail;
    skipped += row.outcome == Outcome::kSkip;
    if (hidden[i]) continue;
    std::string check = row.check;
    if (!same[i].empty()) check += " (and " + std::to_string(same[i].size()) + " more like it)";
    std::string detail = row.detail;
    if (!verbose && detail.size() > 160) detail = detail.substr(0, 157) + "...";
    if (!same[i].empty()) {  // name the first few collapsed checks
      std::string also;
      for (size_t k = 0; k < same[i].size() && k < 4; ++k) also += (k ? ", " : "") + same[i][k];
      if (same[i].size() > 4) also += ", ...";
      detail += " [also: " + also + "]";
    }
    rows.push_back({check, outcome_name(row.outcome), detail});
  }
  print_table(rows);
  std::cout << passed << " passed, " << failed << " failed";
  if (skipped) std::cout << ", " << skipped << " skipped";
  std::cout << "\n";
  return failed == 0;
}

}  // namespace

int check_backend_command(std::span<const std::string> argv) {
  Result<Args> parsed = Args::parse(argv, kFlags, "check-backend");
  if (!parsed.is_ok()) return cli::fail(parsed.status().message(), kExitUsage);
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (args.positionals().size() != 1) return cli::fail("kiln check-backend needs one LIB.so (see --help)", kExitUsage);
  Options o;
  std::string& library = o.kit.library;
  library = args.positionals()[0];
  std::error_code ec;
  if (!fs::exists(library, ec)) return cli::fail("plugin file '" + library + "' does not exist");
  library = fs::absolute(library, ec).string();
  o.suite = args.value("--suite").value_or("/usr/include/onnx/backend/test/data/node");
  if (args.has("--no-suite")) o.suite.clear();
  o.filter = args.value("--filter").value_or("");
  o.verbose = args.has("--verbose");
  for (const std::string& m : args.values("--model")) {
    if (!fs::is_regular_file(m, ec)) return cli::fail("model file '" + m + "' does not exist", kExitUsage);
    o.models.push_back(m);
  }
  for (const std::string& kv : args.values("--backend-option")) {
    // KEY=VALUE, or NAME.KEY=VALUE as for kiln run (the NAME is dropped).
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return cli::fail("--backend-option must look like KEY=VALUE, got '" + kv + "'", kExitUsage);
    }
    std::string key = kv.substr(0, eq);
    if (const size_t dot = key.find('.'); dot != std::string::npos) key = key.substr(dot + 1);
    o.kit.backend_options.emplace_back(key, kv.substr(eq + 1));
  }

  std::cout << "kiln check-backend " << library << "\n";
  Report r;
  run_isolated("abi", [&](Report& rows) { backend_check::check_abi(o.kit, rows); }, r);
  const bool loads = backend_check::loads(r);  // later groups need a plugin the host can load at all
  // "device" runs before the groups that execute through the executor: a
  // fence the plugin never signals would make them wait for ever.
  const std::pair<const char*, Group> groups[] = {
      {"lifecycle", [&](Report& rows) { backend_check::check_lifecycle(o.kit, rows); }},
      {"capability", [&](Report& rows) { backend_check::check_capability(o.kit, rows); }},
      {"device", [&](Report& rows) { backend_check::check_device(o.kit, rows); }},
      {"execute", [&](Report& rows) { backend_check::check_execute(o.kit, rows); }},
      {"node tests", [&](Report& rows) { check_node_tests(o, rows); }},
      {"unload", [&](Report& rows) { backend_check::check_unload(o.kit, rows); }}};
  const std::string execute_groups = "execute|node tests";
  for (const auto& [title, group] : groups) {
    if (!loads) r.skip(title, "the plugin does not load (see above)");
    else if (execute_groups.find(title) != std::string::npos && !backend_check::fences_signalled(r))
      r.skip(title, "not run: the plugin does not signal its fences (see above)");
    else run_isolated(title, group, r);
  }
  // Each fusion probe and each model in a process of its own: a plugin whose
  // fused groups crash fails that probe, named, and the others still run.
  std::vector<std::pair<std::string, Group>> more;
  for (const std::string& probe : backend_check::fusion_probes())
    more.emplace_back("fusion " + probe, [&o, probe](Report& rows) { backend_check::check_fusion(o.kit, probe, rows); });
  for (const std::string& model : o.models)
    more.emplace_back("model " + model_label(model),
                      [&o, model](Report& rows) { check_model(o, model, rows); });
  for (const auto& [title, group] : more) {
    if (!loads) r.skip(title, "the plugin does not load (see above)");
    else if (!backend_check::fences_signalled(r)) r.skip(title, "not run: the plugin does not signal its fences (see above)");
    else run_isolated(title, group, r);
  }
  return print_report(r, o.verbose) ? kExitOk : kExitFailure;
}

}  // namespace kiln::cli
