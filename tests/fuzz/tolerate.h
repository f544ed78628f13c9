// An exploratory fuzz run may look past a property that a known, tracked
// defect breaks, so that libFuzzer spends its time elsewhere instead of
// stopping at that defect in the first second:
//
//   TPROF_FUZZ_TOLERATE=sqlite-utf8,args-json build-asan/tests/fuzz/sqlite_libfuzzer ...
//
// Each such property names itself (tolerated("sqlite-utf8")); the names are
// listed with the targets in tests/README.md ("Fuzzing"). ctest, make test
// and make fuzz set nothing: every property holds there.
#pragma once

#include <cstdlib>
#include <string_view>

namespace tprof::testing {

inline bool tolerated(std::string_view property) {
  const char* env = std::getenv("TPROF_FUZZ_TOLERATE");
  if (env == nullptr) return false;
  for (std::string_view list(env); !list.empty();) {
    const std::size_t comma = list.find(',');
    if (list.substr(0, comma) == property) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace tprof::testing
