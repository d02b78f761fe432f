#!/bin/sh
# abi.out_of_tree: installs Kiln into a temporary prefix, copies the template
# plugin's sources out of the tree, builds them against the installed headers
# only (find_package(KilnBackend)), and runs `kiln check-backend` on the result.
#
#   out_of_tree.sh BUILD_DIR SOURCE_DIR KILN_BIN
set -eu
build=$1
src=$2
kiln=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
for h in kiln/c/backend.h kiln/c/backend_sdk.hpp; do
  test -f "$work/prefix/include/$h" || { echo "FAIL: $h was not installed"; exit 1; }
done
test -f "$work/prefix/lib/cmake/KilnBackend/KilnBackendConfig.cmake" || { echo "FAIL: no KilnBackendConfig.cmake"; exit 1; }

# From the install alone: the template sources under share/kiln.
cp -r "$work/prefix/share/kiln/backend-template" "$work/template"
generator=""
if command -v ninja >/dev/null 2>&1; then generator="-G Ninja"; fi
# shellcheck disable=SC2086
cmake -S "$work/template" -B "$work/build" $generator -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
# The build must not have read Kiln's source tree.
if grep -rq -- "$src/include" "$work/build" 2>/dev/null; then
  echo "FAIL: the out-of-tree build used $src/include"
  exit 1
fi
lib="$work/build/libkiln_template.so"
test -f "$lib" || { echo "FAIL: $lib was not built"; exit 1; }
echo "built $lib against $work/prefix/include"
"$kiln" check-backend "$lib" --filter test_matmul
