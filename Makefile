# Kiln's front door. `make demo` and `make test` work on a fresh Debian 12
# machine: both install missing packages first (scripts/install-deps.sh).

BUILD ?= build
JOBS ?= $(shell nproc)
PY := /usr/bin/python3
CMAKE_ARGS ?=

.PHONY: all deps configure build demo test test-sanitize bench models clean

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

# The same suites built with clang-14 under AddressSanitizer and
# UndefinedBehaviorSanitizer, plus the libFuzzer targets (fuzz.import,
# fuzz.session) for FUZZ_SECONDS each. Slower than `make test` (an ASan build
# of everything), so CI runs `make test` and this runs before a release.
SAN_BUILD ?= build-san
FUZZ_SECONDS ?= 60
test-sanitize: deps
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DKILN_SANITIZE=address,undefined -DKILN_FUZZ=ON \
	  -DKILN_FUZZ_SECONDS=$(FUZZ_SECONDS) -DKILN_WERROR=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)
	@cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp \
	  ctest --output-on-failure -j $(JOBS) -LE 'models|perf'

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
