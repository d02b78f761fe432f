#!/bin/sh
# install.prefix: `cmake --install` into a scratch prefix, then check what a
# user gets: only public headers, each compiling on its own; libkiln.so with
# its soname and no internal symbols exported; an application built out of
# tree with find_package(Kiln) and with pkg-config, run on the demo model by
# the installed `kiln`; libkiln_runtime.so and kiln-run-program running a
# compiled program; kiln.pc and the KilnBackend version file.
#
#   install_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
p="$work/prefix"
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --prefix "$p" >/dev/null

# Headers: exactly the public ones.
(cd "$src/include" && find kiln -name '*.h' -o -name '*.hpp' | sort) >"$work/want"
(cd "$p/include" && find . -type f | sed 's|^\./||' | sort) >"$work/got"
diff -u "$work/want" "$work/got" || fail "installed headers differ from include/kiln"
cxx=${CXX:-c++}
n=0
# backend_sdk_*.hpp (glue, inputs, device) are parts of backend_sdk.hpp (they #error alone).
for h in $(grep -v 'backend_sdk_[a-z]*\.hpp$' "$work/got"); do
  printf '#include <%s>\n#include <%s>\n' "$h" "$h" >"$work/one.cpp"
  $cxx -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I"$p/include" "$work/one.cpp" || fail "$h does not compile alone"
  n=$((n + 1))
done
printf '#include <kiln/c/backend.h>\n' >"$work/one.c"
${CC:-cc} -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$p/include" "$work/one.c" || fail "kiln/c/backend.h is not C11"
echo "ok: $n headers compile alone"

# The library: versioned soname; the public API exported, internals not.
lib=$(ls "$p"/lib/libkiln.so.*.* | head -n 1)
readelf -d "$lib" | grep -q 'SONAME.*libkiln\.so\.[0-9]' || fail "libkiln has no versioned soname"
nm -D --defined-only "$lib" | c++filt >"$work/syms"
grep -q 'kiln::Session::load(' "$work/syms" || fail "kiln::Session::load is not exported"
if grep -E 'onnx::|google::|kiln::(runtime|ir|kernels|onnx)::|kiln::ThreadPool' "$work/syms"; then
  fail "libkiln exports internal symbols (above)"
fi
echo "ok: $(wc -l <"$work/syms") symbols exported, no internals"

"$p/bin/kiln" demo-model "$work/demo.onnx" >/dev/null

# libkiln_runtime.so and kiln-run-program (runtime component): versioned
# soname, no internals beyond the kernel interface exported, and the
# installed runner runs a program compiled by the installed kiln, finding
# the library in the prefix by itself.
rlib=$(ls "$p"/lib/libkiln_runtime.so.*.* | head -n 1)
readelf -d "$rlib" | grep -q 'SONAME.*libkiln_runtime\.so\.[0-9]' || fail "libkiln_runtime has no versioned soname"
test -L "$p/lib/libkiln_runtime.so" || fail "no lib/libkiln_runtime.so to link with"
nm -D --defined-only "$rlib" | c++filt >"$work/rsyms"
grep -q 'kiln::Session::load(' "$work/rsyms" || fail "libkiln_runtime does not export kiln::Session::load"
if grep -E 'onnx::|google::|kiln::(runtime|program|api|onnx)::' "$work/rsyms"; then
  fail "libkiln_runtime exports internal symbols (above)"
fi
"$p/bin/kiln" compile "$work/demo.onnx" -o "$work/demo.kiln" --backends portable >/dev/null || fail "kiln compile"
ldd "$p/bin/kiln-run-program" | grep -q "libkiln_runtime\.so.* => $p/" || fail "kiln-run-program does not find libkiln_runtime in the prefix"
env -u LD_LIBRARY_PATH "$p/bin/kiln-run-program" "$work/demo.kiln" --seed 1 >"$work/out-run" || fail "kiln-run-program failed"
grep -q '^probabilities: float32\[1, 10\]$' "$work/out-run" || fail "kiln-run-program printed: $(cat "$work/out-run")"
echo "ok: libkiln_runtime ($(wc -l <"$work/rsyms") symbols) and kiln-run-program run a compiled program from the prefix"

# find_package(Kiln)
generator=""
if command -v ninja >/dev/null 2>&1; then generator="-G Ninja"; fi
# shellcheck disable=SC2086
cmake -S "$src/tests/install/app" -B "$work/app-cmake" $generator -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$p" >"$work/log" 2>&1 || { cat "$work/log"; fail "configure with find_package(Kiln)"; }
cmake --build "$work/app-cmake" >"$work/log" 2>&1 || { cat "$work/log"; fail "build with Kiln::kiln"; }
if grep -rq -- "$src/include" "$work/app-cmake" 2>/dev/null; then fail "the app build used $src/include"; fi
"$work/app-cmake/kiln_app" "$work/demo.onnx" >"$work/out-cmake" || fail "kiln_app (CMake) failed"
cat "$work/out-cmake"

# pkg-config kiln
flags=$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --cflags --libs kiln) || fail "pkg-config kiln"
test "$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --modversion kiln)" = "$(sed -n 's/^Version: //p' "$p/lib/pkgconfig/kiln.pc")"
# shellcheck disable=SC2086
$cxx -std=c++20 -O1 "$src/tests/install/app/main.cpp" -o "$work/app-pc" $flags || fail "build with pkg-config"
LD_LIBRARY_PATH="$p/lib" "$work/app-pc" "$work/demo.onnx" >"$work/out-pc" || fail "kiln_app (pkg-config) failed"
cmp "$work/out-cmake" "$work/out-pc" || fail "the two builds print different outputs"

# The plugin author's start: the SDK's version file and the template's sources.
test -f "$p/share/kiln/backend-template/CMakeLists.txt" || fail "no template sources in share/kiln"
mkdir "$work/ver"
cat >"$work/ver/CMakeLists.txt" <<EOT
cmake_minimum_required(VERSION 3.16)
project(ver NONE)
find_package(KilnBackend 1.0 CONFIG REQUIRED)
find_package(KilnBackend 2.0 CONFIG QUIET)
if(KilnBackend_FOUND)
  message(FATAL_ERROR "KilnBackend 2.0 must not match ABI 1.x")
endif()
EOT
cmake -S "$work/ver" -B "$work/ver/b" -DCMAKE_PREFIX_PATH="$p" >"$work/log" 2>&1 || { cat "$work/log"; fail "find_package(KilnBackend 1.0)"; }
echo "ok: find_package(KilnBackend 1.0) matches, 2.0 does not"
echo "ok: installed Kiln links with CMake and pkg-config"
