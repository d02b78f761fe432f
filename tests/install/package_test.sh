#!/bin/sh
# install.package: builds the .deb files of `make package` from this build
# (cpack reuses it; nothing is recompiled), checks each package's files and
# dependencies with dpkg-deb, unpacks them all into a scratch root (dpkg -x)
# and runs what they installed: the kiln CLI on the demo model, plugins found
# beside it, kiln-run-program on the compiled demo model, and the Python module.
#
#   package_test.sh BUILD_DIR PYTHON
set -eu
build=$1
python=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/debs" >"$work/log" 2>&1 || { cat "$work/log"; fail "cpack"; }
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
ls "$work/debs"/*.deb >/dev/null 2>&1 || fail "cpack made no .deb"

deb() { ls "$work/debs"/"$1"_*.deb 2>/dev/null | head -n 1; }
field() { dpkg-deb -f "$1" "$2" 2>/dev/null || true; }
has_file() { dpkg-deb -c "$1" | awk '{print $6}' | grep -qx "$2" || fail "$(basename "$1") lacks $2"; }
lacks_file() { if dpkg-deb -c "$1" | awk '{print $6}' | grep -q "$2"; then fail "$(basename "$1") has $2"; fi; }
depends_on() { field "$1" Depends | tr ',' '\n' | grep -q "$2" || fail "$(basename "$1") does not depend on $2 ($(field "$1" Depends))"; }

runtime=$(deb kiln); dev=$(deb kiln-dev); py=$(deb python3-kiln)
test -n "$runtime" || fail "no kiln_*.deb"
test -n "$dev" || fail "no kiln-dev_*.deb"
has_file "$runtime" ./usr/bin/kiln
dpkg-deb -c "$runtime" | grep -q './usr/lib/libkiln\.so\.[0-9]' || fail "kiln lacks libkiln.so.X.Y"
has_file "$runtime" ./usr/bin/kiln-run-program
dpkg-deb -c "$runtime" | grep -q './usr/lib/libkiln_runtime\.so\.[0-9]' || fail "kiln lacks libkiln_runtime.so.X.Y"
lacks_file "$runtime" './usr/include/'
depends_on "$runtime" libprotobuf
depends_on "$runtime" libonnx
has_file "$dev" ./usr/include/kiln/session.h
has_file "$dev" ./usr/include/kiln/c/backend.h
has_file "$dev" ./usr/lib/cmake/Kiln/KilnConfig.cmake
has_file "$dev" ./usr/lib/cmake/Kiln/KilnConfigVersion.cmake
has_file "$dev" ./usr/lib/cmake/KilnBackend/KilnBackendConfigVersion.cmake
has_file "$dev" ./usr/lib/pkgconfig/kiln.pc
has_file "$dev" ./usr/share/kiln/backend-template/CMakeLists.txt
has_file "$dev" ./usr/lib/libkiln.so
has_file "$dev" ./usr/lib/libkiln_runtime.so
depends_on "$dev" "kiln (= $version)"
if [ -n "$py" ]; then
  has_file "$py" ./usr/lib/python3/dist-packages/kiln/__init__.py
  has_file "$py" ./usr/lib/python3/dist-packages/kiln/__init__.pyi
  dpkg-deb -c "$py" | grep -q './usr/lib/python3/dist-packages/kiln/_kiln.*\.so' || fail "python3-kiln lacks _kiln*.so"
  depends_on "$py" "kiln (= $version)"
  depends_on "$py" python3-numpy
fi
# Plugins: one package each, depending on kiln; vendor libraries by name.
plugins=0
for p in "$work/debs"/kiln-backend-*.deb; do
  [ -e "$p" ] || continue
  plugins=$((plugins + 1))
  name=$(field "$p" Package)
  dpkg-deb -c "$p" | awk '{print $6}' | grep -v '/$' | grep -qv '^\./usr/lib/kiln/backends/' &&
    fail "$name installs outside /usr/lib/kiln/backends"
  depends_on "$p" "kiln (= $version)"
  case "$name" in
    *xnnpack*) field "$p" Depends | grep -q libxnnpack0 || field "$p" Recommends | grep -q libxnnpack0 || fail "$name: no libxnnpack0" ;;
    *onednn*|*dnnl*) field "$p" Depends | grep -q libdnnl2 || field "$p" Recommends | grep -q libdnnl2 || fail "$name: no libdnnl2" ;;
  esac
  echo "ok: $name: $(dpkg-deb -c "$p" | awk '{print $6}' | grep '\.so$' | tr '\n' ' ')"
done
test "$plugins" -gt 0 || fail "no kiln-backend-* package (the template plugin should make one)"

# Unpack everything into a scratch root and run it from there.
root="$work/root"
for d in "$work/debs"/*.deb; do dpkg -x "$d" "$root"; done
export LD_LIBRARY_PATH="$root/usr/lib"
unset KILN_BACKEND_PATH
"$root/usr/bin/kiln" demo-model "$work/demo.onnx" >/dev/null
"$root/usr/bin/kiln" run "$work/demo.onnx" --output-dir "$work/out" >/dev/null || fail "installed kiln run"
"$root/usr/bin/kiln" backends >"$work/backends" || fail "installed kiln backends"
grep -q "$root/usr/lib/kiln/backends" "$work/backends" || { cat "$work/backends"; fail "kiln does not find the packaged plugins"; }
"$root/usr/bin/kiln" compile "$work/demo.onnx" -o "$work/demo.kiln" --backends portable >/dev/null || fail "installed kiln compile"
"$root/usr/bin/kiln-run-program" "$work/demo.kiln" --seed 1 | grep -q '^label: int64\[1\]$' || fail "packaged kiln-run-program"
echo "ok: the packaged kiln runs the demo model and finds its plugins; kiln-run-program runs it compiled"
if [ -n "$py" ]; then
  PYTHONPATH="$root/usr/lib/python3/dist-packages" "$python" - "$work/demo.onnx" "$root" <<'EOP' || fail "packaged python module"
import sys, numpy as np, kiln
assert kiln.__file__.startswith(sys.argv[2]), kiln.__file__
s = kiln.Session(sys.argv[1])
out = s.run({"image": np.zeros((1, 1, 28, 28), np.float32)})
assert out["probabilities"].shape == (1, 10)
assert any(b.path.startswith(sys.argv[2]) for b in kiln.backends()), kiln.backends()
print("ok: python3-kiln imports, runs and finds the packaged plugins")
EOP
fi
ls "$work/debs"/*.deb | xargs -n 1 basename
