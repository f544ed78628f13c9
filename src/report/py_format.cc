#include "src/report/py_format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tprof::internal {

namespace {
inline bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }
}  // namespace

std::size_t py_len(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += is_continuation(c) ? 0 : 1;
  return n;
}

std::string_view py_head(std::string_view s, std::size_t n) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (is_continuation(s[i])) continue;
    if (seen == n) return s.substr(0, i);
    ++seen;
  }
  return s;
}

std::string_view py_tail(std::string_view s, std::size_t n) {
  const std::size_t len = py_len(s);
  if (n >= len) return s;
  std::size_t skip = len - n;
  std::size_t i = 0;
  for (; i < s.size(); ++i) {
    if (is_continuation(s[i])) continue;
    if (skip == 0) break;
    --skip;
  }
  return s.substr(i);
}

void append_right(std::string* out, std::string_view s, std::size_t w) {
  const std::size_t len = py_len(s);
  if (len < w) out->append(w - len, ' ');
  out->append(s);
}

void append_left(std::string* out, std::string_view s, std::size_t w) {
  const std::size_t len = py_len(s);
  out->append(s);
  if (len < w) out->append(w - len, ' ');
}

std::string fixed(double v, int decimals) {
  // glibc's printf rounds the exact binary value correctly, as Python does.
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  if (n < 0) return "nan";
  if (static_cast<std::size_t>(n) >= sizeof buf) {
    std::string big(static_cast<std::size_t>(n) + 1, '\0');
    std::snprintf(big.data(), big.size(), "%.*f", decimals, v);
    big.resize(static_cast<std::size_t>(n));
    return big;
  }
  return std::string(buf, static_cast<std::size_t>(n));
}

std::string format_time_us(double us) {
  if (us >= 1000.0 * 1000.0) return fixed(us / (1000.0 * 1000.0), 3) + "s";
  if (us >= 1000.0) return fixed(us / 1000.0, 3) + "ms";
  return fixed(us, 3) + "us";
}

std::string format_share(double part, double total) {
  if (total == 0) return "NaN";
  return fixed(part * 100.0 / total, 2) + "%";
}

std::string format_memory(std::int64_t bytes) {
  constexpr std::int64_t kKb = 1024, kMb = 1024 * kKb, kGb = 1024 * kMb;
  // Unsigned: -INT64_MIN (a "Bytes" field of a crafted trace) does not fit.
  const std::uint64_t mag = bytes < 0 ? 0 - static_cast<std::uint64_t>(bytes) : static_cast<std::uint64_t>(bytes);
  const double b = static_cast<double>(bytes);
  if (mag >= static_cast<std::uint64_t>(kGb)) return fixed(b * 1.0 / static_cast<double>(kGb), 2) + " Gb";
  if (mag >= static_cast<std::uint64_t>(kMb)) return fixed(b * 1.0 / static_cast<double>(kMb), 2) + " Mb";
  if (mag >= static_cast<std::uint64_t>(kKb)) return fixed(b * 1.0 / static_cast<double>(kKb), 2) + " Kb";
  return std::to_string(bytes) + " b";
}

}  // namespace tprof::internal
