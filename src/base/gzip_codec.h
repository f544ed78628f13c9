// How src/base/gzip.cc reaches a compression library without linking one
// (issue 26, item 3): tprof::base, and so tprof::capture, links no zlib and
// no libdeflate.
//
//   - tprof::gzip (src/base/gzip_libdeflate.cc; the CLI, tprof::tprof)
//     links libdeflate and zlib and defines tprof_gzip_linked_codec(), which
//     base names as a weak symbol. The target's usage requirement
//     `-Wl,--undefined=tprof_gzip_linked_codec` pulls the definition out of
//     the static archive.
//   - Without it, zlib is loaded at run time (dlopen "libz.so.1", see
//     zlib_runtime.cc): a capture-only program still writes .json.gz
//     (tensorboard_trace_handler(..., use_gzip), export to a .gz path) and
//     reads them, through zlib; where libz.so.1 is absent, a .gz path is an
//     error naming what to install or link.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "src/base/gzip.h"

namespace tprof::internal {

// zlib's z_stream, declared here so that base needs no zlib.h: the layout
// is zlib's ABI since 1.2.0 (gzip_libdeflate.cc static_asserts it against
// zlib.h where that is present).
struct ZStream {
  const unsigned char* next_in = nullptr;
  unsigned avail_in = 0;
  unsigned long total_in = 0;
  unsigned char* next_out = nullptr;
  unsigned avail_out = 0;
  unsigned long total_out = 0;
  const char* msg = nullptr;
  void* state = nullptr;
  void* (*zalloc)(void*, unsigned, unsigned) = nullptr;
  void (*zfree)(void*, void*) = nullptr;
  void* opaque = nullptr;
  int data_type = 0;
  unsigned long adler = 0;
  unsigned long reserved = 0;
};

inline constexpr int kZOk = 0;
inline constexpr int kZStreamEnd = 1;
inline constexpr int kZBufError = -5;
inline constexpr int kZNoFlush = 0;
inline constexpr int kZFinish = 4;
inline constexpr int kZDeflated = 8;

// The zlib entry points gzip.cc uses (the *Init2_ forms are what zlib's
// inflateInit2/deflateInit2 macros call).
struct ZlibApi {
  const char* (*version)();
  int (*inflate_init2)(ZStream*, int window_bits, const char* version, int stream_size);
  int (*inflate)(ZStream*, int flush);
  int (*inflate_reset)(ZStream*);
  int (*inflate_end)(ZStream*);
  int (*deflate_init2)(ZStream*, int level, int method, int window_bits, int mem_level, int strategy,
                       const char* version, int stream_size);
  int (*deflate)(ZStream*, int flush);
  int (*deflate_end)(ZStream*);
};

// zlib loaded at run time, once per process (thread-safe). Null when
// libz.so.1 cannot be loaded; `why` (if given) then says why.
const ZlibApi* runtime_zlib(std::string* why = nullptr);

// What tprof::gzip adds: libdeflate's whole-buffer codec and a linked zlib.
struct LinkedGzip {
  enum class Whole { kOk, kTooLarge, kFallback };
  // Decompresses every member of `in` into `out` within `limit_bytes`;
  // kFallback: damaged or cut (the zlib path then salvages a prefix).
  Whole (*gunzip_whole)(std::string_view in, std::size_t limit_bytes, Inflated& out);
  Result<std::string> (*gzip)(std::string_view data, int level);
  const ZlibApi* zlib;
};

// The codecs by name, for tests: the linked one (null without tprof::gzip)
// and the run-time zlib path (what a capture-only program gets).
const LinkedGzip* linked_gzip();
Result<Inflated> gunzip_with_runtime_zlib(std::string_view compressed, const GunzipLimits& limits = {});
Result<std::string> gzip_with_runtime_zlib(std::string_view data, int level = 6);

}  // namespace tprof::internal

// Defined by tprof::gzip (gzip_libdeflate.cc); weak in base.
extern "C" const tprof::internal::LinkedGzip* tprof_gzip_linked_codec();
