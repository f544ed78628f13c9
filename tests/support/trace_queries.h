// Test support: small questions tests ask of a Trace (header only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tprof/trace.h"

namespace tprof::testing {

// How many events are named `name`.
inline std::size_t count_named(const Trace& t, std::string_view name) {
  std::size_t n = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) n += t.name(e) == name ? 1 : 0;
  return n;
}

}  // namespace tprof::testing
