// kiln bench: how fast a model runs. Latency quantiles over timed runs, load
// time and peak RSS; with --profile a per-node and per-op-type table; with
// --trace a Chrome trace-event file (Perfetto, chrome://tracing).

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <system_error>

#include "backend_flags.h"
#include "bench_report.h"
#include "cli_util.h"
#include "commands.h"
#include "kiln/session.h"
#include "value_io.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage = R"(usage: kiln bench MODEL [options]

Loads a model once and times Session::run: latency quantiles (p50, p90, p99),
load time and peak resident memory.

MODEL is an .onnx file or a folder in the ONNX backend-test layout
(model.onnx + test_data_set_0/input_0.pb ...). Inputs come from the folder's
test_data_set_0 when it has one, else they are deterministic random values
(floats in [-1, 1), integers in [0, 4); symbolic dims are 1).

  --runs N          timed runs (default 100)
  --warmup N        untimed runs first (default 10)
  --max-seconds S   stop the timed runs after S seconds (at least 5 runs; default: no limit)
  --threads N       intra-op threads, counting the caller (default 1; 0 = one per core)
  --seed N          seed of the random inputs (default 0)
  --profile         after the timed runs, profile some runs and print a per-node
                    table (top N) and a per-op-type table, with shares of the run
  --top N           rows of the per-node table (default 20)
  --profile-runs N  profiled runs for --profile and --trace (default 10)
  --trace FILE      write the profiled runs as Chrome trace-event JSON (open it in
                    https://ui.perfetto.dev or chrome://tracing): one slice per run,
                    enclosing one slice per node on the thread that ran it
  --json            print one JSON object instead of tables (samples included)
  --no-rewrites     load without the load-time graph rewrites (to measure what they do)

Timed runs are never profiled: profiling costs two clock reads per node.

Backends:
)";

constexpr FlagSpec kFlags[] = {
    {"--runs", true, false},       {"--warmup", true, false}, {"--max-seconds", true, false},
    {"--threads", true, false},    {"--seed", true, false},
    {"--profile", false, false},   {"--top", true, false},    {"--profile-runs", true, false},
    {"--trace", true, false},      {"--json", false, false},  {"--help", false, false},
    {"--no-rewrites", false, false},
};

struct BenchConfig {
  std::string model_arg;
  std::string model_file;
  std::string data_dir;  // "" when inputs are random
  int64_t runs = 100;
  int64_t warmup = 10;
  double max_seconds = 0;
  int threads = 1;
  SessionOptions session;  // threads and the backend flags
  uint64_t seed = 0;
  bool profile = false;
  int64_t top = 20;
  int64_t profile_runs = 10;
  std::string trace_path;
  bool json = false;
};

Result<int64_t> int_flag(const Args& args, std::string_view flag, int64_t fallback, int64_t lo, int64_t hi) {
  auto text = args.value(flag);
  if (!text) return fallback;
  return parse_int_flag(flag, *text, lo, hi);
}

Result<BenchConfig> parse_config(const Args& args) {
  BenchConfig c;
  if (args.positionals().empty()) return invalid_argument("kiln bench needs a MODEL (see kiln bench --help)");
  if (args.positionals().size() > 1)
    return invalid_argument("kiln bench takes one MODEL, got also '", args.positionals()[1], "'");
  c.model_arg = args.positionals()[0];
  KILN_ASSIGN_OR_RETURN(c.runs, int_flag(args, "--runs", 100, 1, 100000000));
  KILN_ASSIGN_OR_RETURN(c.warmup, int_flag(args, "--warmup", 10, 0, 100000000));
  KILN_ASSIGN_OR_RETURN(int64_t threads, int_flag(args, "--threads", 1, 0, 1024));
  c.threads = static_cast<int>(threads);
  KILN_ASSIGN_OR_RETURN(int64_t seed, int_flag(args, "--seed", 0, 0, INT64_MAX));
  c.seed = static_cast<uint64_t>(seed);
  KILN_ASSIGN_OR_RETURN(c.top, int_flag(args, "--top", 20, 1, 1000000));
  KILN_ASSIGN_OR_RETURN(c.profile_runs, int_flag(args, "--profile-runs", 10, 1, 1000000));
  if (auto s = args.value("--max-seconds")) {
    char* end = nullptr;
    c.max_seconds = std::strtod(s->c_str(), &end);
    if (s->empty() || end != s->c_str() + s->size() || !(c.max_seconds >= 0) || c.max_seconds > 1e6)
      return invalid_argument("--max-seconds expects a number of seconds in [0, 1e6], got '", *s, "'");
  }
  c.session.threads = c.threads;
  KILN_RETURN_IF_ERROR(apply_backend_flags(args, &c.session));
  c.profile = args.has("--profile");
  if (auto t = args.value("--trace")) {
    if (t->empty()) return invalid_argument("--trace needs a file name");
    c.trace_path = *t;
  }
  c.json = args.has("--json");
  c.session.rewrite_graph = !args.has("--no-rewrites");

  // MODEL: a file, or a backend-test folder.
  std::error_code ec;
  const fs::path model(c.model_arg);
  if (!fs::exists(model, ec)) return not_found("model '", c.model_arg, "' does not exist");
  if (fs::is_directory(model, ec)) {
    c.model_file = (model / "model.onnx").string();
    if (!fs::is_regular_file(c.model_file, ec))
      return not_found("folder '", c.model_arg, "' has no model.onnx (expected the ONNX backend-test layout)");
    const fs::path data = model / "test_data_set_0";
    if (fs::is_directory(data, ec)) c.data_dir = data.string();
  } else {
    c.model_file = c.model_arg;
  }
  return c;
}

// Resident set size now, in MiB (from /proc/self/statm; 0 if unreadable).
double current_rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long long size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return static_cast<double>(resident_pages) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// The high-water mark of the resident set, in MiB (getrusage; KiB on Linux).
double peak_rss_mib() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

Result<std::vector<NamedValue>> make_feeds(const Session& session, const BenchConfig& c) {
  std::vector<NamedValue> feeds;
  const std::vector<IoInfo>& inputs = session.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const IoInfo& info = inputs[i];
    if (c.data_dir.empty()) {
      // The same seeds as `kiln run`, so both see the same random inputs.
      KILN_ASSIGN_OR_RETURN(Value v, make_random_value(info, c.seed + i * 0x9e3779b97f4a7c15ull));
      feeds.emplace_back(info.name, std::move(v));
      continue;
    }
    const fs::path file = fs::path(c.data_dir) / ("input_" + std::to_string(i) + ".pb");
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) {
      if (info.kind == IoInfo::Kind::kOptional) continue;
      return not_found("missing input '", info.name, "' (", info.type_string, "): no ", file.string());
    }
    Result<Value> v = read_value_for(file.string(), info);
    if (!v.is_ok()) return Status(v.status().code(), "cannot read input '" + info.name + "': " + v.status().message());
    KILN_RETURN_IF_ERROR(check_value_for(info, *v, file.string()));
    feeds.emplace_back(info.name, std::move(v).value());
  }
  return feeds;
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

// Where the nodes went, also when only portable kernels ran.
std::string placement_text(const PlacementReport& p) {
  std::string text = placement_summary(p);
  return text.empty() ? "portable: " + std::to_string(p.num_fallback()) + " nodes" : text;
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, value);
  return buf;
}

void print_json(const BenchConfig& c, const Session& session, double load_ms, const std::vector<double>& samples,
                const LatencyStats& st, double baseline_rss, double peak_rss, const ProfileSummary* profile) {
  std::ostringstream o;
  o << "{\"runtime\":\"kiln\",\"version\":\"" KILN_VERSION "\",\"model\":" << json_string(c.model_arg)
    << ",\"threads\":" << c.threads << ",\"backends\":[";
  const std::vector<std::string>& tried = session.placement().backends;
  for (size_t i = 0; i < tried.size(); ++i) o << (i ? "," : "") << json_string(tried[i]);
  o << "],\"placement\":" << json_string(placement_text(session.placement()))
    << ",\"nodes\":" << session.num_nodes()
    << ",\"inputs\":" << json_string(c.data_dir.empty() ? "random" : c.data_dir)
    << ",\"load_ms\":" << json_number(load_ms) << ",\"warmup\":" << c.warmup << ",\"runs\":" << st.runs
    << ",\"p50_ms\":" << json_number(st.p50_ms) << ",\"p90_ms\":" << json_number(st.p90_ms)
    << ",\"p99_ms\":" << json_number(st.p99_ms) << ",\"mean_ms\":" << json_number(st.mean_ms)
    << ",\"min_ms\":" << json_number(st.min_ms) << ",\"max_ms\":" << json_number(st.max_ms)
    << ",\"baseline_rss_mb\":" << json_number(baseline_rss) << ",\"peak_rss_mb\":" << json_number(peak_rss);
  if (profile) {
    auto rows = [&](const std::vector<ProfileRow>& list, size_t limit) {
      o << "[";
      for (size_t i = 0; i < list.size() && i < limit; ++i) {
        const ProfileRow& r = list[i];
        o << (i ? "," : "") << "{\"name\":" << json_string(r.name) << ",\"op_type\":" << json_string(r.op_type)
          << ",\"count\":" << r.count << ",\"mean_ms\":" << json_number(r.mean_ms)
          << ",\"share\":" << json_number(r.share) << "}";
      }
      o << "]";
    };
    o << ",\"profile\":{\"runs\":" << profile->runs << ",\"events_per_run\":" << profile->events_per_run
      << ",\"mean_run_ms\":" << json_number(profile->mean_run_ms)
      << ",\"mean_nodes_ms\":" << json_number(profile->mean_nodes_ms)
      << ",\"between_nodes_ms\":" << json_number(profile->between_nodes_ms()) << ",\"nodes\":";
    rows(profile->nodes, static_cast<size_t>(c.top));
    o << ",\"op_types\":";
    rows(profile->op_types, profile->op_types.size());
    o << "}";
  }
  o << ",\"samples_ms\":[";
  for (size_t i = 0; i < samples.size(); ++i) o << (i ? "," : "") << json_number(samples[i]);
  o << "]}\n";
  std::cout << o.str();
}

}  // namespace

// Writes the profiled runs as a Chrome trace to c.trace_path.
static Status write_trace(const BenchConfig& c, const Session& session, const std::vector<RunProfile>& profiles) {
  std::ofstream trace(c.trace_path, std::ios::binary | std::ios::trunc);
  if (!trace) return make_status(StatusCode::kIo, "cannot write trace file '", c.trace_path, "': ", std::strerror(errno));
  write_chrome_trace(trace, profiles, "kiln " + fs::path(c.model_file).filename().string(),
                     {{"model", c.model_file},
                      {"threads", std::to_string(c.threads)},
                      {"backends", join(session.placement().backends, ",")},
                      {"placement", placement_text(session.placement())},
                      {"nodes", std::to_string(session.num_nodes())},
                      {"runs", std::to_string(profiles.size())}});
  trace.close();
  if (!trace) return make_status(StatusCode::kIo, "cannot write trace file '", c.trace_path, "': ", std::strerror(errno));
  return Status::ok();
}

int bench_command(std::span<const std::string> argv) {
  const std::vector<FlagSpec> specs = with_backend_flags(kFlags);
  Result<Args> parsed = Args::parse(argv, specs, "bench");
  if (!parsed.is_ok()) return fail(parsed.status().message(), kExitUsage);
  if (parsed->has("--help")) {
    std::cout << kUsage << kBackendFlagsUsage;
    return kExitOk;
  }
  Result<BenchConfig> config = parse_config(*parsed);
  if (!config.is_ok()) {
    const bool usage = config.status().code() == StatusCode::kInvalidArgument;
    return fail(config.status().message(), usage ? kExitUsage : kExitFailure);
  }
  const BenchConfig& c = *config;

  const SessionOptions& options = c.session;
  const double baseline_rss = current_rss_mib();
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  const Clock::time_point load_start = Clock::now();
  Result<std::unique_ptr<Session>> loaded = Session::load(c.model_file, options);
  const double load_ms = ms_since(load_start);
  if (!loaded.is_ok()) return fail("cannot load model '" + c.model_file + "': " + loaded.status().message());
  const Session& session = **loaded;

  Result<std::vector<NamedValue>> feeds = make_feeds(session, c);
  if (!feeds.is_ok()) return fail(feeds.status().message());

  auto run_once = [&](RunProfile* profile) -> Status {
    Result<std::vector<Value>> out = session.run(*feeds, profile);
    if (!out.is_ok()) {
      return Status(out.status().code(), "running '" + c.model_file + "' failed: " + out.status().message());
    }
    return Status::ok();
  };
  for (int64_t i = 0; i < c.warmup; ++i) {
    if (Status s = run_once(nullptr); !s.is_ok()) return fail(s.message());
  }
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(std::min<int64_t>(c.runs, 1 << 20)));
  const Clock::time_point timed_start = Clock::now();
  const int64_t min_runs = std::min<int64_t>(c.runs, 5);
  for (int64_t i = 0; i < c.runs; ++i) {
    const Clock::time_point t0 = Clock::now();
    if (Status s = run_once(nullptr); !s.is_ok()) return fail(s.message());
    samples.push_back(ms_since(t0));
    if (c.max_seconds > 0 && static_cast<int64_t>(samples.size()) >= min_runs &&
        ms_since(timed_start) >= c.max_seconds * 1e3)
      break;
  }
  const LatencyStats stats = latency_stats(samples);

  std::vector<RunProfile> profiles;
  if (c.profile || !c.trace_path.empty()) {
    profiles.resize(static_cast<size_t>(c.profile_runs));
    for (RunProfile& p : profiles) {
      if (Status s = run_once(&p); !s.is_ok()) return fail(s.message());
    }
  }
  const double peak_rss = peak_rss_mib();
  const double end_rss = current_rss_mib();  // what the session holds once loaded and warm
  const ProfileSummary summary = summarize_profiles(profiles);

  if (!c.trace_path.empty()) {
    if (Status st = write_trace(c, session, profiles); !st.is_ok()) return fail(st.message());
  }

  if (c.json) {
    print_json(c, session, load_ms, samples, stats, baseline_rss, peak_rss, c.profile ? &summary : nullptr);
    return kExitOk;
  }
  const size_t steps = session.num_nodes();
  std::cout << "model " << c.model_file << ": " << steps << (steps == 1 ? " step" : " steps") << ", threads "
            << c.threads << ", inputs " << (c.data_dir.empty() ? std::string("random") : c.data_dir) << "\n";
  std::cout.flush();
  print_table({
      {"backends", join(session.placement().backends, ", ") + " (" + placement_text(session.placement()) + ")"},
      {"load", fixed(load_ms, 2) + " ms"},
      {"latency", "p50 " + ms_text(stats.p50_ms) + " ms, p90 " + ms_text(stats.p90_ms) + " ms, p99 " +
                      ms_text(stats.p99_ms) + " ms, mean " + ms_text(stats.mean_ms) + " ms, min " +
                      ms_text(stats.min_ms) + " ms"},
      {"runs", std::to_string(stats.runs) + " timed after " + std::to_string(c.warmup) + " warmup"},
      {"peak RSS", fixed(peak_rss, 1) + " MiB (" + fixed(baseline_rss, 1) + " MiB before load, " +
                       fixed(end_rss, 1) + " MiB after the runs)"},
  });
  if (c.profile) print_profile(summary, static_cast<size_t>(c.top));
  if (!c.trace_path.empty()) {
    std::cout << "trace: " << c.trace_path << " (" << profiles.size() << " runs; open in https://ui.perfetto.dev)\n";
  }
  return kExitOk;
}

}  // namespace kiln::cli
