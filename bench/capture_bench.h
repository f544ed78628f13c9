// Shared between capture_bench.cc and its TPROF_ENABLE=0 translation unit.
#pragma once

#include <cstdint>

namespace tprof_bench {

// Runs `n` iterations of the scope benchmarks' loop body with the scope
// compiled out (capture_bench_off.cc).
void run_compiled_out_scopes(std::int64_t n);

}  // namespace tprof_bench
