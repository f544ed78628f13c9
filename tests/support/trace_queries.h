// Test support: small questions tests ask of a Trace (header only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/trace/json_value.h"
#include "tprof/trace.h"

namespace tprof::testing {

// How many events are named `name`.
inline std::size_t count_named(const Trace& t, std::string_view name) {
  std::size_t n = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) n += t.name(e) == name ? 1 : 0;
  return n;
}

// Event e's args value of `key` as text: a string's text, a number's
// digits; "<none>" when the key is absent.
inline std::string arg_text(const Trace& t, std::uint32_t e, std::string_view key) {
  auto v = internal::JsonValue::parse(t.args_json(e), 0);
  const internal::JsonValue* a = v ? v->find(key) : nullptr;
  if (a == nullptr) return "<none>";
  return a->is_string() ? a->text() : std::to_string(a->int_or(-1));
}

}  // namespace tprof::testing
