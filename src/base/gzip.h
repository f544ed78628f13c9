// gzip: whole-buffer decompression (libdeflate) with a zlib salvage path for
// damaged or cut files, and compression for .json.gz output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tprof/status.h"

namespace tprof::internal {

inline bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

struct Inflated {
  std::unique_ptr<char[]> data;
  std::size_t size = 0;
  // The stream ended early or was damaged: `data` holds what decoded before
  // that point; `damage_offset` is the compressed byte where decoding stopped.
  bool truncated = false;
  std::int64_t damage_offset = -1;
  // Cut (the input ended mid-stream) or damaged (zlib's reason: "incorrect
  // data check" for a CRC mismatch, "invalid block type", ...).
  bool cut = false;
  std::string damage;
  std::string_view bytes() const { return {data.get(), size}; }
};

// How far a stream may inflate: the smaller of `max_output` bytes (0: half
// the physical memory) and `max_ratio` times its compressed size (0: no
// ratio; at least 4 KiB of input is assumed, so tiny files are not
// refused). Real traces compress 7-28:1, bombs up to DEFLATE's ~1030:1.
struct GunzipLimits {
  std::size_t max_output = 0;
  double max_ratio = 0;
};

// Decompresses all gzip members of `compressed`. Fails when not even the
// gzip header decodes, when nothing decompresses before the stream is cut,
// and when the output would pass the limits, naming the one it hit (a gzip
// bomb is an error, not an abort); later damage yields a truncated prefix.
Result<Inflated> gunzip(std::string_view compressed, const GunzipLimits& limits = {});

// Compresses `data` as one gzip member.
Result<std::string> gzip(std::string_view data, int level = 6);

}  // namespace tprof::internal
