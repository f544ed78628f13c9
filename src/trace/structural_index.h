// Stage 1 of the fast event parser: finds every token start in a stretch of
// JSON with SIMD, 64 bytes at a time, so that stage 2 (event_parser.cc)
// walks tokens instead of bytes.
//
// A token is a structural character ({ } [ ] : ,) or a backslash outside
// strings, or an unescaped quote (opening and closing). Scalars (numbers, true, false,
// null) make no token: the walker reads them at the first non-space byte
// after a ':' or '[' or ','. Positions are written in increasing order.
//
// The index assumes valid quoting; the walker detects what does not fit
// (a raw quote inside a name, truncation) and hands that event to the
// lenient cursor parser.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tprof::internal {

class StructuralIndexer {
 public:
  enum Level { kSse2 = 0, kAvx2 = 1, kAvx512 = 2 };
  // The best level this CPU supports.
  static Level best_level();

  // Starts outside any string, with the best level (or `level`, for tests:
  // it must be supported by the CPU).
  StructuralIndexer();
  explicit StructuralIndexer(Level level) : level_(level) {}

  // Indexes [begin, end) (continuing the state of the previous call, which
  // must have ended where this one begins). Writes token offsets relative to
  // `base` to `out` and returns how many were written. `out` needs room for
  // end - begin + 72 entries (stores run up to 16 past the last token).
  std::size_t index(const char* begin, const char* end, const char* base, std::uint32_t* out);

 private:
  std::uint64_t in_string_ = 0;  // all ones when the previous block ended inside a string
  bool escape_carry_ = false;    // the previous block ended with an unescaped backslash
  Level level_ = kSse2;
};

}  // namespace tprof::internal
