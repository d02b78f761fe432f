#!/usr/bin/env bash
# Regenerates tests/conformance/expected_pass_<suite>.txt: the ONNX backend
# tests Kiln passes now. Prints the counts and any test that was listed and no
# longer passes (check those before committing: they are regressions).
#   usage: tests/conformance/update_expected.sh [extra kiln conformance flags]
#   env:   KILN_BIN (default build/bin/kiln), ONNX_TEST_DATA,
#          ONNX122_TEST_DATA (default <repo>/../shared/onnx-backend-1.22/node),
#          SUITES (default: node pytorch-converted pytorch-operator simple onnx122)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kiln=${KILN_BIN:-$root/build/bin/kiln}
data=${ONNX_TEST_DATA:-/usr/include/onnx/backend/test/data}
if [ ! -x "$kiln" ]; then
  echo "update_expected.sh: no kiln binary at $kiln (build it, or set KILN_BIN)" >&2
  exit 1
fi
onnx122=${ONNX122_TEST_DATA:-$root/../shared/onnx-backend-1.22/node}
for suite in ${SUITES:-node pytorch-converted pytorch-operator simple onnx122}; do
  list=$root/tests/conformance/expected_pass_$suite.txt
  dir=$data/$suite
  if [ "$suite" = onnx122 ]; then
    dir=$onnx122
    if [ ! -d "$dir" ]; then
      echo "onnx122: $dir is missing; its list is left as it is"
      continue
    fi
  fi
  log=$(mktemp)
  # Failing tests are expected here, so the exit code is not the verdict; the summary line is.
  "$kiln" conformance "$dir" "$@" >"$log" || true
  summary=$(tail -n 1 "$log")
  if ! [[ $summary =~ ^[0-9]+\ passed,\ [0-9]+\ failed,\ [0-9]+\ skipped$ ]]; then
    echo "update_expected.sh: kiln conformance $dir did not finish; last line: $summary" >&2
    rm -f "$log"
    exit 1
  fi
  new=$(mktemp)
  grep '^PASS ' "$log" | cut -c6- | LC_ALL=C sort >"$new" || true
  if [ -f "$list" ]; then
    # (grep finds nothing in a list of comments only: not an error)
    { grep -v '^#' "$list" || true; } | sed 's/#.*//; s/[[:space:]]//g; /^$/d' | LC_ALL=C sort |
      LC_ALL=C comm -23 - "$new" | sed 's/^/no longer passes: /'
  fi
  {
    echo "# ONNX backend tests ($suite) that Kiln passes; kiln conformance fails if one of"
    echo "# these does not. Regenerate with tests/conformance/update_expected.sh."
    echo "# $summary"
    cat "$new"
  } >"$list"
  echo "$suite: $summary"
  rm -f "$log" "$new"
done
