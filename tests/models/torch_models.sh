#!/bin/sh
# ctest models.torch: runs `kiln conformance` on the models exported by
# bench/models/export.py (make models), or skips (exit 77) when there are none.
#   usage: torch_models.sh KILN_BIN MODELS_DIR
# Whole models accumulate float rounding over thousands of dot products in an
# order that differs from torch's. At the backend tests' atol 1e-7 a few
# outputs near zero differ (resnet18 1/1000, mobilenet_v2 4/1000, the encoder
# 7/32768; worst absolute error ~3e-6); all pass at 1e-6. The test uses 1e-5
# for margin across CPUs (AVX2 vs AVX-512 kernels); rtol stays 1e-3.
#
# Two passes: with the installed plugins (the xnnpack plugin, when built and
# available, runs most of each CNN: checked with `kiln inspect`), then on
# portable kernels alone (KILN_XNNPACK_LIB at a missing file makes the
# xnnpack plugin unavailable).
kiln=$1
dir=$2
if [ ! -d "$dir" ] || [ -z "$(ls -A "$dir" 2>/dev/null)" ]; then
  echo "SKIP: no exported models in $dir; make them with 'make models'" \
       "(or /usr/bin/python3 bench/models/export.py)"
  exit 77
fi
status=0
if "$kiln" backends | grep -A2 '^xnnpack ' | grep -q 'available:   yes'; then
  for m in resnet18 mobilenet_v2 squeezenet1_1; do
    [ -f "$dir/$m/model.onnx" ] || continue
    if ! "$kiln" inspect "$dir/$m/model.onnx" | grep -q '  xnnpack:'; then
      echo "FAIL $m: no xnnpack partition"
      status=1
    fi
  done
  echo "== with plugins (xnnpack)"
  "$kiln" conformance "$dir" --atol 1e-5 --rtol 1e-3 || status=1
fi
echo "== portable kernels only"
KILN_XNNPACK_LIB=/nonexistent/libXNNPACK.so.0 "$kiln" conformance "$dir" --atol 1e-5 --rtol 1e-3 || status=1
exit $status
