#!/bin/sh
# ctest models.torch: runs `kiln conformance` on the models exported by
# bench/models/export.py (make models), or skips (exit 77) when there are none.
#   usage: torch_models.sh KILN_BIN MODELS_DIR
# Whole models accumulate float rounding over thousands of dot products, so
# the absolute tolerance is 1e-4 (outputs are O(0.01..10)); rtol stays 1e-3.
kiln=$1
dir=$2
if [ ! -d "$dir" ] || [ -z "$(ls -A "$dir" 2>/dev/null)" ]; then
  echo "SKIP: no exported models in $dir; make them with 'make models'" \
       "(or /usr/bin/python3 bench/models/export.py)"
  exit 77
fi
exec "$kiln" conformance "$dir" --atol 1e-4 --rtol 1e-3
