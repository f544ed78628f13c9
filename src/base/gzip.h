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
Result<Inflated> gunzip(std::string_view compressed, const GunzipLimits &limits = {});

// Inflates every gzip member of `compressed` in windows of text, on a thread
// of its own when `threaded` (it overlaps with a parser on another core),
// for a reader that parses as the text arrives: memory is a few windows, not
// the inflated size (issue 27). Limits as gunzip(), on the text streamed
// (they bound the time a bomb takes, no longer its memory). Damage and cuts
// end the stream with what decoded before them, as gunzip() does. zlib
// (linked with tprof::gzip, else loaded at run time); the caller keeps
// `compressed` alive until the stream is destroyed.
class GunzipStream {
 public:
  // A window of text: `size` bytes at `data`, text offset `offset`; the
  // `headroom` bytes before `data` and 64 after its end are the caller's
  // (to prepend what it kept of the previous window).
  struct Window {
    char *data = nullptr;
    std::size_t size = 0;
    std::uint64_t offset = 0;
    int slot = -1;
  };
  static Result<std::unique_ptr<GunzipStream>> start(std::string_view compressed, const GunzipLimits &limits,
                                                     std::size_t window_bytes, std::size_t headroom, bool threaded);
  ~GunzipStream();
  GunzipStream(const GunzipStream &) = delete;
  GunzipStream &operator=(const GunzipStream &) = delete;

  // Blocks for the next window; false at the end of the stream (then see
  // end_error() and damage()). Each window is the caller's until recycle().
  bool next(Window *w);
  void recycle(const Window &w);
  std::size_t headroom() const;
  // The error that ended the stream (past a limit, or nothing decoded
  // before damage), if any; valid once next() returned false.
  const Error *end_error() const;
  // Damage or a cut (what gunzip() reports in Inflated); once next() returned
  // false.
  bool truncated() const;
  bool cut() const;
  std::int64_t damage_offset() const;
  const std::string &damage() const;
  // Compressed bytes consumed and text bytes produced so far (any thread).
  std::uint64_t compressed_done() const;
  std::uint64_t text_done() const;

  struct State;

 private:
  explicit GunzipStream(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// Compresses `data` as one gzip member.
Result<std::string> gzip(std::string_view data, int level = 6);

}  // namespace tprof::internal
