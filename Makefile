# The two commands of the README:
#   make demo   install what is missing, build, run the main job end to end
#   make test   install what is missing, build, run every test (and the
#               unit tests again under ASan+UBSan)
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
TPROF      := $(BUILD)/tools/tprof/tprof
EXAMPLE    := $(BUILD)/examples/matmul_add
DEMO_DIR   := traces/01_matmul_add
# fp32 by default: Debian's OpenBLAS has no bf16 GEMM, so bf16 would run as
# converted fp32 (make demo DEMO_DTYPE=bf16 shows that).
DEMO_DTYPE ?= fp32

# make fuzz: each libFuzzer target for FUZZ_SECONDS, FUZZ_JOBS at a time
# (scripts/fuzz.sh); make test runs each for FUZZ_SHORT_SECONDS.
FUZZ_SECONDS       ?= 300
FUZZ_SHORT_SECONDS ?= 10
FUZZ_JOBS          ?= 2
# The ASan+UBSan build's compiler: auto (clang when it is installed with
# its runtimes, else g++), clang or gcc.
ASAN_COMPILER ?= auto

.PHONY: all setup setup-test configure build test test-release asan-build test-asan test-fuzz test-tsan fuzz demo bench clean

all: build

setup:
	scripts/setup.sh

setup-test:
	scripts/setup.sh --test

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: setup-test test-release test-asan test-fuzz test-tsan

test-release: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The ASan+UBSan build: the libraries, the unit tests and the tprof program.
# Debug, with the libraries the tests spend their time in at -O1
# (TPROF_SANITIZE_O1_LIBS in CMakeLists.txt) and everything else at -O0.
# With clang (and libclang-rt-14-dev, which scripts/setup.sh --test installs)
# it also has the libFuzzer targets (TPROF_BUILD_LIBFUZZER: the libraries
# carry libFuzzer's coverage, tests/fuzz/CMakeLists.txt); with g++ it has
# none, and the fuzz runs say so and skip. A build directory configured with
# the other compiler is removed first (CMake cannot switch one in place).
ASAN_CLANG_OK = command -v clang++ >/dev/null 2>&1 && \
  test -f "$$(clang++ -print-file-name=libclang_rt.fuzzer-$$(uname -m).a)"
asan-build: setup
	@if [ "$(ASAN_COMPILER)" = clang ] || { [ "$(ASAN_COMPILER)" = auto ] && $(ASAN_CLANG_OK); }; then \
	  cxx=clang++; fuzzers=ON; \
	else \
	  echo "asan-build: g++ (clang++ with libclang-rt-14-dev not found, or ASAN_COMPILER=gcc): no libFuzzer targets"; \
	  cxx=g++; fuzzers=OFF; \
	fi; \
	had=$$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' $(ASAN_BUILD)/CMakeCache.txt 2>/dev/null); \
	case "$$had" in *clang*) had=clang++ ;; ?*) had=g++ ;; esac; \
	if [ -n "$$had" ] && [ "$$had" != $$cxx ]; then \
	  echo "asan-build: $(ASAN_BUILD) was built with $$had: removing it for $$cxx"; rm -rf $(ASAN_BUILD); \
	fi; \
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=$$cxx -DTPROF_BUILD_LIBFUZZER=$$fuzzers \
	  -DTPROF_SANITIZE=address,undefined -DTPROF_UNIT_TESTS_ONLY=ON -DTPROF_UNIT_TESTS_WITH_CLI=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# The unit label under ASan+UBSan, the tprof program included: hostile_cli_test
# runs every command on the hostile corpora through it, and fails on any
# sanitizer report (UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1). The
# fuzz targets' ctest replays (their seeds, regressions and mutations) are
# in the label. Beside it, the CLI's failure paths that this build has
# (tests/CMakeLists.txt), its only golden tests: export's (sql_export_test)
# and record's (record_test).
test-asan: asan-build
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -L '^(unit|golden)$$' -j $(JOBS)

# A short run of every libFuzzer target (FUZZ_SHORT_SECONDS each, two at a
# time: about a minute); a build without them (g++) says so and passes.
test-fuzz: asan-build
	scripts/fuzz.sh -b $(ASAN_BUILD) -s $(FUZZ_SHORT_SECONDS) -j $(FUZZ_JOBS) --if-built

# Every libFuzzer target for FUZZ_SECONDS (make fuzz FUZZ_SECONDS=3600);
# crashes are minimized into tests/fuzz/regressions/NAME (tests/README.md, "Fuzzing").
fuzz: asan-build
	scripts/fuzz.sh -b $(ASAN_BUILD) -s $(FUZZ_SECONDS) -j $(FUZZ_JOBS)

# The recorder, the parallel reader (and its streaming back-pressure),
# diagnose's threads (context, rules, breakdowns) and serve's event loop and
# workers under ThreadSanitizer.
test-tsan: setup
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTPROF_SANITIZE=thread -DTPROF_UNIT_TESTS_ONLY=ON
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target capture_test capture_events_test capture_load_test capture_spill_test reader_test rules_peers_test rules_cheatsheet_a_test diagnose_threads_test serve_test sqlite_stream_test
	$(TSAN_BUILD)/tests/unit/capture_test --gtest_brief=1
	$(TSAN_BUILD)/tests/unit/capture_events_test --gtest_brief=1
	$(TSAN_BUILD)/tests/unit/capture_load_test --gtest_brief=1
	$(TSAN_BUILD)/tests/unit/capture_spill_test --gtest_brief=1
	$(TSAN_BUILD)/tests/unit/reader_test --gtest_brief=1
	$(TSAN_BUILD)/tests/unit/rules_peers_test --gtest_brief=1
	$(TSAN_BUILD)/tests/unit/rules_cheatsheet_a_test --gtest_brief=1
	$(TSAN_BUILD)/tests/unit/diagnose_threads_test --gtest_brief=1 --gtest_filter=DiagnoseThreads.*
	$(TSAN_BUILD)/tests/unit/serve_test --gtest_brief=1
	$(TSAN_BUILD)/tests/unit/sqlite_stream_test --gtest_brief=1 --gtest_filter=SqliteStream.WhatTheReadFinishesAfterTheEvents

# The blog's experiment on the CPU (examples/README.md): 64x64 (overhead-bound)
# and 1024x1024 (GEMM-bound), cold and warm, eager and compiled, into
# $(DEMO_DIR); then tprof reads back the warm runs.
demo: build
	@test -x $(EXAMPLE) || { echo "demo: $(EXAMPLE) was not built: OpenBLAS was missing at configure time (make setup installs it)"; exit 1; }
	@for size in 64 1024; do \
	  for start in cold warm; do \
	    for mode in eager compile; do \
	      flags="--size $$size --dtype $(DEMO_DTYPE)"; \
	      if [ $$start = warm ]; then flags="$$flags --warmup"; fi; \
	      if [ $$mode = compile ]; then flags="$$flags --compile"; fi; \
	      echo "== matmul_add $$flags"; \
	      $(EXAMPLE) $$flags --trace-dir $(DEMO_DIR) || exit 1; \
	    done; \
	  done; \
	done
	@for run in 64_$(DEMO_DTYPE)_warm_eager 1024_$(DEMO_DTYPE)_warm_eager; do \
	  echo; echo "== tprof table $(DEMO_DIR)/$$run.json"; \
	  $(TPROF) table $(DEMO_DIR)/$$run.json --sort-by cpu_time_total --row-limit 15 || exit 1; \
	  echo; echo "== tprof steps $(DEMO_DIR)/$$run.json"; \
	  $(TPROF) steps $(DEMO_DIR)/$$run.json || exit 1; \
	done
	@echo; echo "== tprof table $(DEMO_DIR)/64_$(DEMO_DTYPE)_warm_compile.json (fused: addmm = bias copy + one GEMM)"
	@$(TPROF) table $(DEMO_DIR)/64_$(DEMO_DTYPE)_warm_compile.json --sort-by cpu_time_total --row-limit 15
	@# On a machine with an NVIDIA GPU: the blog's GPU runs (bf16, 64 and 4096,
	@# cold and warm, eager, compile and fused) and what tprof reads in them.
	@if nvidia-smi -L >/dev/null 2>&1; then \
	  for size in 64 4096; do \
	    for start in cold warm; do \
	      for mode in eager compile fused; do \
	        flags="--device cuda --size $$size --dtype bf16"; \
	        if [ $$start = warm ]; then flags="$$flags --warmup"; fi; \
	        if [ $$mode != eager ]; then flags="$$flags --$$mode"; fi; \
	        echo "== matmul_add $$flags"; \
	        $(EXAMPLE) $$flags --trace-dir $(DEMO_DIR)_cuda || exit 1; \
	      done; \
	    done; \
	  done; \
	  for run in 64_bf16_warm_eager 4096_bf16_warm_eager 64_bf16_warm_compile; do \
	    echo; echo "== tprof diagnose $(DEMO_DIR)_cuda/$$run.json"; \
	    $(TPROF) diagnose $(DEMO_DIR)_cuda/$$run.json | head -20 || exit 1; \
	  done; \
	else \
	  echo; echo "demo: no NVIDIA GPU here (nvidia-smi): skipping matmul_add --device cuda"; \
	fi

bench: build
	@echo "see bench/README.md"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
