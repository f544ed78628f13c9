// TPROF_CHECK / TPROF_DCHECK: invariants of tprof's own code (bugs), never input validation.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tprof::internal {
[[noreturn]] inline void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "tprof: internal check failed: %s (%s:%d)\n", expr, file, line);
  std::abort();
}
}  // namespace tprof::internal

#define TPROF_CHECK(cond) \
  ((cond) ? (void)0 : ::tprof::internal::check_failed(#cond, __FILE__, __LINE__))

#ifdef NDEBUG
#define TPROF_DCHECK(cond) ((void)0)
#else
#define TPROF_DCHECK(cond) TPROF_CHECK(cond)
#endif
