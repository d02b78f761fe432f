#!/usr/bin/env bash
# Installs, with apt-get, every Debian package Kiln needs to build and test.
# Idempotent: packages already present are skipped, so `make test` can call it
# every time. Heavy optional packages (python3-torch) are installed on demand
# by the targets that need them (`make bench`, `make models`), not here.
#
# Usage: scripts/install-deps.sh [--with-torch]
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata python3-onnx
  libflatbuffers-dev flatbuffers-compiler
  libre2-dev libjpeg-dev libpng-dev
  libxnnpack-dev libpthreadpool-dev libcpuinfo-dev
  libdnnl-dev libdnnl2
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-dev python3-numpy python3-pytest
  clang-14 libclang-rt-14-dev
)
if [[ "${1:-}" == "--with-torch" ]]; then
  pkgs+=(python3-torch python3-torchvision)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
