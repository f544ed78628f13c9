// bf16.h — bfloat16 as a uint16_t storage type: the upper half of an IEEE
// float, converted with round-to-nearest-even as torch and the hardware do.
//
//   std::uint16_t h = bf16_from_float(1.0f / 3.0f);  // 0x3eab
//   float f = float_from_bf16(h);                    // 0.333984375f
#pragma once

#include <bit>
#include <cstdint>

namespace matmul_add {

// Returns the bfloat16 nearest to `f`, ties to even. NaN stays a (quiet) NaN
// with its sign; values past the largest bf16 round to infinity.
inline std::uint16_t bf16_from_float(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    // Rounding could carry a NaN with a payload only in the low half into
    // infinity; setting the quiet bit keeps it a NaN.
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  // Adding 0x7fff plus the lowest kept bit rounds the dropped half up when it
  // is above one half, and to the even neighbour when it is exactly one half.
  const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// Returns the float with the same value (exact: bf16 is a truncated float).
inline float float_from_bf16(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

}  // namespace matmul_add
