// The main of kiln_microbench: registers the file-driven benchmarks, then
// runs what the command line selects.
#include <benchmark/benchmark.h>

#include "micro.h"

int main(int argc, char** argv) {
  kiln::bench::register_model_file_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
