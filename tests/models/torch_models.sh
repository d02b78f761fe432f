#!/bin/sh
# ctest models.torch: runs `kiln conformance` on the models exported by
# bench/models/export.py (make models), or skips (exit 77) when there are none.
#   usage: torch_models.sh KILN_BIN MODELS_DIR [ATOL]
# Whole models accumulate float rounding over thousands of dot products in an
# order that differs from torch's. At the backend tests' atol 1e-7 a few
# outputs near zero differ (resnet18 1/1000, mobilenet_v2 4/1000, the encoder
# 7/32768; worst absolute error ~3e-6); all pass at 1e-6. The test uses 1e-5
# for margin across CPUs (AVX2 vs AVX-512 kernels) unless ATOL says otherwise
# (the extra models: deeper nets); rtol stays 1e-3.
#
# Three passes: each available plugin alone ahead of portable kernels (the
# other hidden with its library-path variable; each must run most of each CNN,
# checked with `kiln inspect`), then portable kernels alone.
kiln=$1
dir=$2
atol=${3:-1e-5}
if [ ! -d "$dir" ] || [ -z "$(ls -A "$dir" 2>/dev/null)" ]; then
  echo "SKIP: no exported models in $dir; make them with 'make models'" \
       "(or /usr/bin/python3 bench/models/export.py)"
  exit 77
fi
no_xnnpack=KILN_XNNPACK_LIB=/nonexistent/libXNNPACK.so.0
no_onednn=KILN_ONEDNN_LIBRARY=/nonexistent/libdnnl.so.2
status=0
for plugin in xnnpack onednn; do
  if [ "$plugin" = xnnpack ]; then hide=$no_onednn; else hide=$no_xnnpack; fi
  "$kiln" backends | grep -A2 "^$plugin " | grep -q 'available:   yes' || continue
  for m in resnet18 mobilenet_v2 squeezenet1_1; do
    [ -f "$dir/$m/model.onnx" ] || continue
    if ! env $hide "$kiln" inspect "$dir/$m/model.onnx" | grep -q "  $plugin:"; then
      echo "FAIL $m: no $plugin partition"
      status=1
    fi
  done
  echo "== with the $plugin plugin"
  env $hide "$kiln" conformance "$dir" --atol "$atol" --rtol 1e-3 || status=1
done
echo "== portable kernels only"
env $no_xnnpack $no_onednn "$kiln" conformance "$dir" --atol "$atol" --rtol 1e-3 || status=1
exit $status
