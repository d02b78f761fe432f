// kiln_microbench: Google Benchmark micro-benchmarks of the runtime.
//
//   build/bin/kiln_microbench [--benchmark_filter=REGEX] [--benchmark_format=json]
//
// Benchmarks that need files (model loads) are registered at start-up from
// KILN_BENCH_MODELS (default: the source tree's bench/models/out, filled by
// `make models`).
#pragma once

namespace kiln::bench {

/// Registers BM_SessionLoadFile/<name> for every <dir>/<name>/model.onnx.
void register_model_file_benchmarks();

}  // namespace kiln::bench
