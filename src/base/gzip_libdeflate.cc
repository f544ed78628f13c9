// tprof::gzip: libdeflate's whole-buffer codec and a linked zlib, for the
// CLI and analysis programs (src/base/gzip_codec.h). tprof::base finds it
// through the weak symbol tprof_gzip_linked_codec; a program that links only
// tprof::capture loads zlib at run time instead.
#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <memory>

#include "src/base/gzip_codec.h"

namespace tprof::internal {

// base declares z_stream itself (no zlib.h there): hold it to zlib's.
static_assert(sizeof(ZStream) == sizeof(z_stream));
static_assert(offsetof(ZStream, avail_in) == offsetof(z_stream, avail_in));
static_assert(offsetof(ZStream, next_out) == offsetof(z_stream, next_out));
static_assert(offsetof(ZStream, avail_out) == offsetof(z_stream, avail_out));
static_assert(offsetof(ZStream, msg) == offsetof(z_stream, msg));
static_assert(offsetof(ZStream, opaque) == offsetof(z_stream, opaque));
static_assert(offsetof(ZStream, reserved) == offsetof(z_stream, reserved));
static_assert(Z_OK == kZOk && Z_STREAM_END == kZStreamEnd && Z_BUF_ERROR == kZBufError &&
              Z_NO_FLUSH == kZNoFlush && Z_FINISH == kZFinish && Z_DEFLATED == kZDeflated);

namespace {

z_stream* zs(ZStream* s) { return reinterpret_cast<z_stream*>(s); }

const ZlibApi kLinkedZlib{
    [] { return zlibVersion(); },
    [](ZStream* s, int bits, const char* v, int size) { return inflateInit2_(zs(s), bits, v, size); },
    [](ZStream* s, int flush) { return inflate(zs(s), flush); },
    [](ZStream* s) { return inflateReset(zs(s)); },
    [](ZStream* s) { return inflateEnd(zs(s)); },
    [](ZStream* s, int level, int method, int bits, int mem, int strategy, const char* v, int size) {
      return deflateInit2_(zs(s), level, method, bits, mem, strategy, v, size);
    },
    [](ZStream* s, int flush) { return deflate(zs(s), flush); },
    [](ZStream* s) { return deflateEnd(zs(s)); },
};

std::uint32_t le32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

LinkedGzip::Whole gunzip_whole(std::string_view in, std::size_t limit_bytes, Inflated& out) {
  // ISIZE (the last member's size mod 2^32) is a good first guess for one member.
  std::size_t capacity = in.size() >= 18 ? le32(reinterpret_cast<const unsigned char*>(in.data()) + in.size() - 4) : 0;
  if (capacity < in.size()) capacity = in.size() * 4;
  // A cut or damaged file's ISIZE is any 4 bytes; deflate expands at most
  // 1032:1, so a larger guess would only allocate (up to 4 GiB) for nothing.
  capacity = std::min({capacity, in.size() * 1032, limit_bytes});
  // Freed on every way out, a bad_alloc from the buffers included.
  const std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> d(
      libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
  if (d == nullptr) return LinkedGzip::Whole::kFallback;
  for (int attempt = 0; attempt < 8; ++attempt) {
    Inflated r;
    r.data = std::make_unique_for_overwrite<char[]>(capacity + 1);
    std::size_t in_pos = 0, out_pos = 0;
    libdeflate_result rc = LIBDEFLATE_SUCCESS;
    while (in_pos < in.size()) {
      std::size_t in_used = 0, out_used = 0;
      rc = libdeflate_gzip_decompress_ex(d.get(), in.data() + in_pos, in.size() - in_pos,
                                         r.data.get() + out_pos, capacity - out_pos, &in_used, &out_used);
      if (rc != LIBDEFLATE_SUCCESS) break;
      in_pos += in_used;
      out_pos += out_used;
      while (in_pos < in.size() && in[in_pos] == 0) ++in_pos;  // padding after the last member
    }
    if (rc == LIBDEFLATE_SUCCESS) {
      r.size = out_pos;
      out = std::move(r);
      return LinkedGzip::Whole::kOk;
    }
    if (rc != LIBDEFLATE_INSUFFICIENT_SPACE) break;
    if (capacity >= limit_bytes) return LinkedGzip::Whole::kTooLarge;
    capacity = std::min(limit_bytes, capacity * 2);  // multi-member or > 4 GiB: ISIZE was not the whole story
  }
  return LinkedGzip::Whole::kFallback;
}

Result<std::string> gzip_libdeflate(std::string_view data, int level) {
  libdeflate_compressor* c = libdeflate_alloc_compressor(level);
  if (c == nullptr) return Error(ErrorCode::kInternal, "libdeflate allocation failed");
  std::string out;
  out.resize(libdeflate_gzip_compress_bound(c, data.size()));
  std::size_t n = libdeflate_gzip_compress(c, data.data(), data.size(), out.data(), out.size());
  libdeflate_free_compressor(c);
  if (n == 0) return Error(ErrorCode::kInternal, "gzip compression failed");
  out.resize(n);
  return out;
}

const LinkedGzip kLinked{gunzip_whole, gzip_libdeflate, &kLinkedZlib};

}  // namespace

}  // namespace tprof::internal

extern "C" const tprof::internal::LinkedGzip* tprof_gzip_linked_codec() { return &tprof::internal::kLinked; }
