# Kiln's front door. `make demo` and `make test` work on a fresh Debian 12
# machine: both install missing packages first (scripts/install-deps.sh).

BUILD ?= build
JOBS ?= $(shell nproc)
PY := /usr/bin/python3
CMAKE_ARGS ?=

.PHONY: all deps configure build demo test san-build test-sanitize tsan-build test-tsan bench models models-extra package clean

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

# ctest runs unit.layering too: scripts/check_layering.py fails when a file
# includes a header of a layer above its own.
test: build san-build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@echo "== the same suites under ASan/UBSan (clang-14) =="
	@cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -LE 'models|perf|fuzz'

# The concurrency suite runs in all three builds (plain, ASan, make test-tsan).
# Its loads fork the ONNX shape-inference child while other threads run, and
# clang-14's ASan allocator is not fork-safe (a child forked while another
# thread holds its lock never returns), so an ASan build infers types
# in-process whenever other threads run (fork_is_safe() in kiln/child_process.h).
#
# The same suites built with clang-14 under AddressSanitizer and
# UndefinedBehaviorSanitizer (LeakSanitizer included). `make test` runs them
# after the plain build; `make test-sanitize` adds the libFuzzer targets
# (fuzz.import, fuzz.session, fuzz.program, fuzz.tensor_proto, fuzz.npy,
# fuzz.options; corpora seeded by tests/fuzz/make_seeds.sh) for FUZZ_SECONDS
# each. Fuzzing is not part of
# `make test`: it explores new inputs each run, so it would make CI flaky;
# what it finds becomes a regression test.
SAN_BUILD ?= build-san
FUZZ_SECONDS ?= 60
SAN_ENV = ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp

san-build: deps
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DKILN_SANITIZE=address,undefined -DKILN_FUZZ=ON \
	  -DKILN_FUZZ_SECONDS=$(FUZZ_SECONDS) -DKILN_WERROR=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)

test-sanitize: san-build
	@cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -LE 'models|perf'

# The concurrency suite (ctest label `concurrency`: tests/concurrency) built
# with clang-14 under ThreadSanitizer. Not part of `make test` (a third full
# build is too slow for CI); only the targets that suite needs are built.
# Every suppression is in tests/sanitizers/tsan.supp with its reason.
TSAN_BUILD ?= build-tsan
TSAN_ENV = TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/sanitizers/tsan.supp"

tsan-build: deps
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DKILN_SANITIZE=thread -DKILN_WERROR=ON $(CMAKE_ARGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target concurrency_tests

test-tsan: tsan-build
	@cd $(TSAN_BUILD) && $(TSAN_ENV) ctest --output-on-failure -L concurrency

# Debian packages (CPack): kiln, kiln-dev, python3-kiln, kiln-backend-<name>
# per plugin, in $(BUILD)/packages.
package: build
	@cd $(BUILD) && cpack -G DEB

# Exports the benchmark/test models (needs torch; installed on demand).
models: deps
	@scripts/install-deps.sh --with-torch
	$(PY) bench/models/export.py --out bench/models/out

# The extra models of the families beyond the benchmark set (export.py
# EXTRA_MODELS; ctest models.torch_extra checks them when present).
models-extra: deps
	@scripts/install-deps.sh --with-torch
	$(PY) bench/models/export.py --extra --out bench/models/extra

# Kiln side by side with ONNX Runtime (not part of `make test`; ~10 minutes on
# 2 cores): exports missing models (torch on demand), installs the npm peer,
# alternates Kiln and ORT per model x threads x backends, runs kiln_microbench;
# writes bench/results/latest.json and docs/performance.md; then the per-call
# overhead of kiln.Session.run from Python vs the C++ call on op_chain_500
# (python/tools/overhead.py -> bench/results/python_overhead.json).
bench: build
	$(PY) bench/run_bench.py --kiln $(BUILD)/bin/kiln --microbench $(BUILD)/bin/kiln_microbench
	PYTHONPATH=$(BUILD)/python $(PY) python/tools/overhead.py --kiln $(BUILD)/bin/kiln \
	  --model bench/models/out/op_chain_500 --json-out bench/results/python_overhead.json

clean:
	rm -rf $(BUILD)
