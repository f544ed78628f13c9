# The two commands of the README:
#   make demo   install what is missing, build, run the main job end to end
#   make test   install what is missing, build, run every test (and the
#               unit tests again under ASan+UBSan)
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
TPROF      := $(BUILD)/tools/tprof/tprof
DEMO_TRACE := tests/data/torch-1.13/blog/64_fp32_cold_eager.kineto.json

.PHONY: all setup setup-test configure build test test-release test-asan test-tsan demo bench clean

all: build

setup:
	scripts/setup.sh

setup-test:
	scripts/setup.sh --test

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: setup-test test-release test-asan test-tsan

test-release: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: setup
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DTPROF_SANITIZE=address,undefined -DTPROF_UNIT_TESTS_ONLY=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -L unit -j $(JOBS)

# The recorder and the parallel reader under ThreadSanitizer.
test-tsan: setup
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTPROF_SANITIZE=thread -DTPROF_UNIT_TESTS_ONLY=ON
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target capture_test reader_test
	$(TSAN_BUILD)/tests/unit/capture_test --gtest_brief=1
	$(TSAN_BUILD)/tests/unit/reader_test --gtest_brief=1

demo: build
	@echo "== tprof table (torch's key_averages().table(), from a real torch 1.13 trace)"
	$(TPROF) table $(DEMO_TRACE) --sort-by cpu_time_total --row-limit 15
	@echo "== tprof steps"
	$(TPROF) steps $(DEMO_TRACE)

bench: build
	@echo "see bench/README.md"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
