#!/bin/sh
# Runs one libFuzzer target for a bounded time over a corpus seeded from the
# ONNX conformance data (make_seeds.sh; only when the corpus folder is empty).
# Exit status is the fuzzer's: non-zero on a crash, leak, sanitizer report or
# timeout, with the reproducer saved in ARTIFACTS. KILN (the kiln binary) is
# needed to seed fuzz_program with compiled .kiln programs.
# usage: run_fuzzer.sh FUZZER CORPUS_DIR ARTIFACTS_DIR SECONDS [KILN]
set -eu
fuzzer=$1 corpus=$2 artifacts=$3 seconds=$4 kiln=${5:-}
mkdir -p "$corpus" "$artifacts"
if [ -z "$(ls -A "$corpus")" ]; then
  sh "$(dirname "$0")/make_seeds.sh" "$(basename "$fuzzer")" "$corpus" $kiln
fi
exec "$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus"
