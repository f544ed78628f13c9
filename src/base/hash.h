// Fast non-cryptographic hashing for short strings (names, categories, keys).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tprof::internal {

inline std::uint64_t mix64(std::uint64_t a, std::uint64_t b) {
  // 64x64 -> 128 multiply, folded: the mixing step of the wy/komi family.
  __uint128_t r = static_cast<__uint128_t>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

// The n < 8 bytes at p as one word, in whole loads (copying them into a
// word is n byte stores and a load that waits for them, ~15 cycles): two
// 4-byte loads that may overlap, or three single bytes; 0 when n is 0.
inline std::uint64_t load_under_8(const char* p, std::size_t n) {
  if (n >= 4) {
    std::uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + n - 4, 4);
    return (std::uint64_t{lo} << 32) | hi;
  }
  if (n == 0) return 0;
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (std::uint64_t{u[0]} << 16) | (std::uint64_t{u[n / 2]} << 8) | u[n - 1];
}

// Hashes 8 bytes at a time; the tail is read without going past the end.
// Strings over 64 bytes (C++ kernel names run to kilobytes) hash their
// length, first 32, middle 8 and last 24 bytes: equal hashes are compared
// in full anyway, and names that differ only elsewhere are rare.
inline std::uint64_t hash_bytes(const char* p, std::size_t n) {
  constexpr std::uint64_t k0 = 0xa0761d6478bd642full, k1 = 0xe7037ed1a0b428dbull;
  std::uint64_t h = k0 ^ (n * k1);
  if (n > 64) {
    std::uint64_t w[8];
    std::memcpy(w, p, 32);
    std::memcpy(w + 4, p + n / 2, 8);
    std::memcpy(w + 5, p + n - 24, 24);
    for (std::uint64_t x : w) h = mix64(h ^ x, k1);
    return mix64(h, k0);
  }
  const bool long_enough = n >= 8;
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    h = mix64(h ^ w, k1);
    p += 8;
    n -= 8;
  }
  // The tail in whole loads: the last 8 bytes, overlapping ones already
  // hashed, when the string has 8; else load_under_8.
  if (n > 0) {
    std::uint64_t w;
    if (long_enough) {
      std::memcpy(&w, p + n - 8, 8);
    } else {
      w = load_under_8(p, n);
    }
    h = mix64(h ^ w, k0 ^ n);
  }
  return mix64(h, k1);
}

inline std::uint64_t hash_str(std::string_view s) { return hash_bytes(s.data(), s.size()); }

}  // namespace tprof::internal
