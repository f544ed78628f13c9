// The compiled-out case of capture_bench: this translation unit is built with
// TPROF_ENABLE=0 (bench/CMakeLists.txt), so the macros below expand to
// nothing and the loop is the same body as the other scope benchmarks minus
// the scope.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "bench/capture_bench.h"
#include "tprof/record_function.h"

#if TPROF_ENABLE
#error "capture_bench_off.cc must be compiled with TPROF_ENABLE=0"
#endif

namespace tprof_bench {

void run_compiled_out_scopes(std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    TPROF_RECORD_FUNCTION("bench::scope");
    benchmark::ClobberMemory();
  }
}

}  // namespace tprof_bench
