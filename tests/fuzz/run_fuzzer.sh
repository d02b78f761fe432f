#!/bin/sh
# Runs one libFuzzer target for a bounded time over a corpus seeded with the
# ONNX backend-test models. Exit status is the fuzzer's: non-zero on a crash,
# leak, sanitizer report or timeout, with the reproducer saved in ARTIFACTS.
# With KILN (the kiln binary) the seeds are those models compiled to .kiln
# programs (for fuzz_program).
# usage: run_fuzzer.sh FUZZER CORPUS_DIR ARTIFACTS_DIR SECONDS [KILN]
set -eu
fuzzer=$1 corpus=$2 artifacts=$3 seconds=$4 kiln=${5:-}
data=/usr/include/onnx/backend/test/data
mkdir -p "$corpus" "$artifacts"
if [ -n "$kiln" ] && [ -z "$(ls -A "$corpus")" ] && [ -d "$data" ]; then
  for m in "$data"/node/test_*/model.onnx "$data"/pytorch-converted/*/model.onnx; do
    name=$(basename "$(dirname "$m")")
    "$kiln" compile "$m" -o "$corpus/$name.kiln" --backends portable >/dev/null 2>&1 || true
  done
elif [ -z "$(ls -A "$corpus")" ] && [ -d "$data" ]; then
  for m in "$data"/*/*/model.onnx; do
    name=$(basename "$(dirname "$m")")
    cp "$m" "$corpus/$name.onnx"
  done
fi
exec "$fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus"
