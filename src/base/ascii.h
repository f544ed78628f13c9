// ASCII case folding for names from a trace (op names, kernel names, HTTP
// header names): locale-free, bytes outside A-Z unchanged (UTF-8 passes
// through as it is).
#pragma once

#include <string>
#include <string_view>

namespace tprof::internal {

inline char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

}  // namespace tprof::internal
