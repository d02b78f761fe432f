#!/bin/sh
# Fills an empty corpus folder with seeds for one libFuzzer target, made from
# the conformance data on this machine (nothing is checked in): Debian's
# libonnx-testdata (ONNX 1.12) and ../shared/onnx-backend-1.22/node beside the
# source tree. Seeds are named by content hash, so duplicates collapse.
#   fuzz_import, fuzz_session: the model.onnx files (under 256 KiB)
#   fuzz_tensor_proto: the input_N.pb / output_N.pb files (under 64 KiB)
#   fuzz_npy: those .pb tensors saved as .npy by numpy (/usr/bin/python3)
#   fuzz_program: a sample of the models compiled by KILN to .kiln, with
#                 portable kernels and with the template plugin
#   fuzz_options: settings lines for the template, xnnpack and oneDNN plugins
# usage: make_seeds.sh TARGET CORPUS_DIR [KILN]
set -eu
target=$1 corpus=$2 kiln=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
dirs=""
for d in /usr/share/libonnx-testdata/data /usr/include/onnx/backend/test/data "$here/../../../shared/onnx-backend-1.22/node"; do
  [ -d "$d" ] && dirs="$dirs $(cd "$d" && pwd -P)"
done
dirs=$(printf '%s\n' $dirs | sort -u)
mkdir -p "$corpus"

# copy_hashed EXT: stdin lists files; each is copied as CORPUS/<sha1>.EXT.
copy_hashed() {
  while read -r f; do
    h=$(sha1sum "$f" | cut -c1-40)
    cp "$f" "$corpus/$h.$1"
  done
}

case $(basename "$target") in
  fuzz_import|fuzz_session)
    for d in $dirs; do find -L "$d" -name model.onnx -size -256k; done | copy_hashed onnx ;;
  fuzz_tensor_proto)
    for d in $dirs; do find -L "$d" -name '*put_*.pb' -size -64k; done | copy_hashed pb ;;
  fuzz_npy)
    for d in $dirs; do find -L "$d" -name '*put_*.pb' -size -64k; done |
      /usr/bin/python3 "$here/pb_to_npy.py" "$corpus" ;;
  fuzz_program)
    [ -n "$kiln" ] || { echo "make_seeds.sh: fuzz_program needs the kiln binary" >&2; exit 2; }
    # Every 12th small model (about 200), then the template plugin's ops.
    n=0
    for d in $dirs; do find -L "$d" -name model.onnx -size -256k; done | sort | while read -r m; do
      n=$((n + 1))
      [ $((n % 12)) -eq 0 ] || continue
      "$kiln" compile "$m" -o "$corpus/$n.kiln" --backends portable >/dev/null 2>&1 || true
    done
    for d in $dirs; do find -L "$d" -path '*node/test_*' -name model.onnx; done |
      grep -E '/test_(add|mul|relu|matmul)[^/]*/model.onnx$' | while read -r m; do
        n=$(basename "$(dirname "$m")")
        "$kiln" compile "$m" -o "$corpus/template_$n.kiln" --backends template >/dev/null 2>&1 || true
      done ;;
  fuzz_options)
    printf 'template.max_group_size=2\n' >"$corpus/group2"
    printf 'template.fuse=false\ntemplate.serial=true\n' >"$corpus/nofuse"
    printf 'backends=template,portable\nfallback=require\ntemplate.verbose=off\n' >"$corpus/require"
    printf 'template.device=0\ntemplate.max_group_size=0\n' >"$corpus/device"
    printf 'template.max_group_size=-1\n' >"$corpus/negative"
    printf 'template.unknown=1\nportable.x=1\n' >"$corpus/unknown"
    printf 'backends=xnnpack,template\nxnnpack.threads=2\nxnnpack.dense_groups=true\n' >"$corpus/xnnpack"
    printf 'backends=onednn\nonednn.winograd=on\nonednn.verbose=0\n' >"$corpus/onednn" ;;
  *) echo "make_seeds.sh: no seeds for $target" >&2 ;;
esac
echo "make_seeds.sh: $(ls "$corpus" | wc -l) seeds for $(basename "$target") in $corpus"
