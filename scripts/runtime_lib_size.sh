#!/bin/sh
# Stripped sizes of libkiln_runtime.so, kiln-run-program (all portable
# kernels) and kiln-run-program-demo (selected for the demo model), beside
# libkiln.so, the parts of libkiln_runtime.so by layer and source file (from
# its link map; scripts/runtime_lib_parts.py) and its largest symbols (issue
# 12's size goal; docs/program-format.md).
# usage: scripts/runtime_lib_size.sh [BUILD_DIR]
set -eu
build=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-28s %10s %10s\n' file bytes stripped
for f in lib/libkiln_runtime.so lib/libkiln.so bin/kiln-run-program bin/kiln-run-program-demo; do
  if [ ! -e "$build/$f" ]; then
    printf '%-28s %10s\n' "$f" "(not built)"
    continue
  fi
  cp -L "$build/$f" "$work/x"
  before=$(wc -c <"$work/x")
  strip "$work/x"
  printf '%-28s %10d %10d\n' "$f" "$before" "$(wc -c <"$work/x")"
done
echo
if [ -e "$build/lib/libkiln_runtime.so.map" ]; then
  /usr/bin/python3 "$(dirname "$0")/runtime_lib_parts.py" "$build/lib/libkiln_runtime.so.map"
  echo
fi
echo "largest symbols of libkiln_runtime.so (bytes, name):"
nm -C -S --size-sort --defined-only "$build/lib/libkiln_runtime.so" | awk '!seen[$1]++' | tail -n 15 |
  while read -r _ size _ name; do printf '%8d  %.110s\n' "$((0x$size))" "$name"; done
