// Micro-benchmarks of a Session: the per-node cost of running op_chain models
// (dispatch, bookkeeping and a 64-element Add/Mul kernel per node) and the
// time to load a model.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/session.h"
#include "micro.h"
#include "op_chain.h"

namespace kiln::bench {

namespace {

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Runs op_chain with `pairs` Add/Mul pairs; the per_node counter is the time
// of one run divided by the nodes it executes.
void BM_OpChainRun(benchmark::State& state) {
  const int pairs = static_cast<int>(state.range(0));
  SessionOptions options;
  options.threads = static_cast<int>(state.range(1));
  const std::string model = op_chain_model(pairs);
  Result<std::unique_ptr<Session>> session = Session::load_from_bytes(as_bytes(model), options);
  if (!session.ok()) {
    state.SkipWithError(("cannot load op_chain: " + session.status().message()).c_str());
    return;
  }
  Tensor x = Tensor::allocate(DType::kFloat32, Shape{1, 64});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i) / 64.0f - 0.5f;
  const std::vector<NamedValue> feeds = {{"input", Value(std::move(x))}};
  for (auto _ : state) {
    Result<std::vector<Value>> out = (*session)->run(feeds);
    if (!out.ok()) {
      state.SkipWithError(("op_chain run failed: " + out.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(out->data());
  }
  const auto nodes = static_cast<double>((*session)->num_nodes());
  state.counters["nodes"] = nodes;
  state.counters["per_node"] =
      benchmark::Counter(nodes, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_OpChainRun)
    ->ArgNames({"pairs", "threads"})
    ->ArgsProduct({{1, 50, 250}, {1, 2}})
    ->Unit(benchmark::kMicrosecond);

// Loads op_chain_500 from bytes: import, shape inference, kernel choice,
// constant handling and the memory plan.
void BM_SessionLoadOpChain500(benchmark::State& state) {
  const std::string model = op_chain_model(250);
  for (auto _ : state) {
    Result<std::unique_ptr<Session>> session = Session::load_from_bytes(as_bytes(model));
    if (!session.ok()) {
      state.SkipWithError(("cannot load op_chain_500: " + session.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(session->get());
  }
}
BENCHMARK(BM_SessionLoadOpChain500)->Unit(benchmark::kMillisecond);

// Loads a model file (the file is in the page cache after the first load).
void session_load_file(benchmark::State& state, const std::string& path) {
  for (auto _ : state) {
    Result<std::unique_ptr<Session>> session = Session::load(path);
    if (!session.ok()) {
      state.SkipWithError(("cannot load " + path + ": " + session.status().message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(session->get());
  }
}

}  // namespace

void register_model_file_benchmarks() {
  const char* env = std::getenv("KILN_BENCH_MODELS");
  const std::filesystem::path dir = env && *env ? env : KILN_BENCH_MODELS_DIR;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (std::filesystem::is_regular_file(entry.path() / "model.onnx", ec)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = (dir / name / "model.onnx").string();
    benchmark::RegisterBenchmark(("BM_SessionLoadFile/" + name).c_str(),
                                 [path](benchmark::State& state) { session_load_file(state, path); })
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace kiln::bench
