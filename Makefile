# Kiln's front door. `make demo` and `make test` work on a fresh Debian 12
# machine: both install missing packages first (scripts/install-deps.sh).

BUILD ?= build
JOBS ?= $(shell nproc)
PY := /usr/bin/python3
CMAKE_ARGS ?=

.PHONY: all deps configure build demo test bench models clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/bin/kiln demo-model $(BUILD)/demo/tiny_cnn.onnx >/dev/null
	$(BUILD)/bin/kiln run $(BUILD)/demo/tiny_cnn.onnx --output-dir $(BUILD)/demo/outputs

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Exports the benchmark/test models (needs torch; installed on demand).
models: deps
	@scripts/install-deps.sh --with-torch
	$(PY) bench/models/export.py --out bench/models/out

# Kiln side by side with ONNX Runtime (not part of `make test`; ~10 minutes on
# 2 cores): exports missing models (torch on demand), installs the npm peer,
# alternates Kiln and ORT per model x threads x backends, runs kiln_microbench;
# writes bench/results/latest.json and docs/performance.md.
bench: build
	$(PY) bench/run_bench.py --kiln $(BUILD)/bin/kiln --microbench $(BUILD)/bin/kiln_microbench

clean:
	rm -rf $(BUILD)
