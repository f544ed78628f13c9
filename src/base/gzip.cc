#include "src/base/gzip.h"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "src/base/file.h"

namespace tprof::internal {

namespace {

std::uint32_t le32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// The output bound and what set it, for the message.
struct Limit {
  std::size_t bytes;
  std::string what;
};

Error too_large(const Limit& limit) {
  return Error(ErrorCode::kUnsupported,
               "decompresses to more than " + std::to_string(limit.bytes >> 20) + " MiB (the limit: " + limit.what +
                   "); a gzip bomb, or decompress it to a file and read that",
               {}, -1);
}

// Streams through zlib to keep everything that decodes before damage.
Result<Inflated> gunzip_salvage(std::string_view in, const Limit& limit) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return Error(ErrorCode::kInternal, "zlib init failed");
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }  // on every way out, a bad_alloc included
  } end_guard{&zs};
  std::vector<char> out;
  out.resize(std::min(limit.bytes, in.size() * 4 + (1 << 16)));
  std::size_t produced = 0;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size() > 0xffffffffu ? 0xffffffffu : in.size());
  std::size_t fed = zs.avail_in;
  bool truncated = false, cut = false;
  std::int64_t damage = -1;
  std::string reason;
  for (;;) {
    if (produced == out.size()) {
      if (out.size() >= limit.bytes) return too_large(limit);
      out.resize(std::min(limit.bytes, out.size() * 2));
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    std::size_t room = out.size() - produced;
    zs.avail_out = static_cast<uInt>(room > 0xffffffffu ? 0xffffffffu : room);
    const uInt before_out = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    produced += before_out - zs.avail_out;
    if (zs.avail_in == 0 && fed < in.size()) {
      std::size_t more = in.size() - fed;
      if (more > 0xffffffffu) more = 0xffffffffu;
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()) + fed);
      zs.avail_in = static_cast<uInt>(more);
      fed += more;
    }
    if (rc == Z_STREAM_END) {
      const std::size_t consumed = fed - zs.avail_in;
      // Another member may follow (concatenated gzip); trailing zeros are padding.
      std::size_t rest = consumed;
      while (rest < in.size() && in[rest] == 0) ++rest;
      if (rest >= in.size()) break;
      if (!is_gzip(in.substr(rest))) {
        truncated = true;
        damage = static_cast<std::int64_t>(rest);
        break;
      }
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR) {
      if (zs.avail_out == 0 || zs.avail_in > 0) continue;  // room or input was just added
      truncated = cut = true;                              // input exhausted mid-stream
      damage = static_cast<std::int64_t>(in.size());
      break;
    }
    truncated = true;  // Z_DATA_ERROR and friends
    damage = static_cast<std::int64_t>(fed - zs.avail_in);
    reason = zs.msg != nullptr ? zs.msg : "invalid compressed data";
    break;
  }
  if (produced == 0 && truncated && damage <= 18) {
    return Error(ErrorCode::kParse, "not a readable gzip stream (damaged header)", {}, damage);
  }
  if (produced == 0 && truncated) {
    return Error(ErrorCode::kParse,
                 cut ? "the gzip stream is cut before any data decompressed"
                     : "the gzip stream is damaged (" + reason + ") before any data decompressed",
                 {}, damage);
  }
  Inflated r;
  r.data = std::make_unique_for_overwrite<char[]>(produced + 1);
  if (produced > 0) std::memcpy(r.data.get(), out.data(), produced);
  r.size = produced;
  r.truncated = truncated;
  r.damage_offset = damage;
  r.cut = cut;
  r.damage = std::move(reason);
  return r;
}

Result<Inflated> gunzip_whole(std::string_view in, const Limit& limit) {
  if (!is_gzip(in)) return Error(ErrorCode::kParse, "expected a gzip header (1f 8b)", {}, 0);
  // ISIZE (the last member's size mod 2^32) is a good first guess for one member.
  std::size_t capacity = in.size() >= 18 ? le32(reinterpret_cast<const unsigned char*>(in.data()) + in.size() - 4) : 0;
  if (capacity < in.size()) capacity = in.size() * 4;
  // A cut or damaged file's ISIZE is any 4 bytes; deflate expands at most
  // 1032:1, so a larger guess would only allocate (up to 4 GiB) for nothing.
  capacity = std::min({capacity, in.size() * 1032, limit.bytes});
  // Freed on every way out, a bad_alloc from the buffers included.
  const std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> d(
      libdeflate_alloc_decompressor(), libdeflate_free_decompressor);
  if (d == nullptr) return Error(ErrorCode::kInternal, "libdeflate allocation failed");
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
      return r;
    }
    if (rc != LIBDEFLATE_INSUFFICIENT_SPACE) break;
    if (capacity >= limit.bytes) return too_large(limit);
    capacity = std::min(limit.bytes, capacity * 2);  // multi-member or > 4 GiB: ISIZE was not the whole story
  }
  return gunzip_salvage(in, limit);
}

}  // namespace

Result<Inflated> gunzip(std::string_view in, const GunzipLimits& limits) {
  Limit limit{half_physical_memory(), "half the physical memory"};
  if (limits.max_output > 0) limit = {limits.max_output, "max_inflated_bytes, --max-inflated-mib"};
  if (limits.max_ratio > 0) {
    const double by_ratio = limits.max_ratio * static_cast<double>(std::max<std::size_t>(in.size(), 4096));
    if (by_ratio < static_cast<double>(limit.bytes)) {
      std::string ratio = std::to_string(limits.max_ratio);
      ratio.erase(ratio.find_last_not_of('0') + 1);
      if (!ratio.empty() && ratio.back() == '.') ratio.pop_back();
      limit = {static_cast<std::size_t>(by_ratio),
               ratio + " times the " + std::to_string(in.size()) + " compressed bytes (max_inflate_ratio, --max-inflate-ratio)"};
    }
  }
  // A process under an address-space limit (ulimit -v) can fail below our
  // own limit: that is an error with the size, not an abort.
  try {
    return gunzip_whole(in, limit);
  } catch (const std::bad_alloc&) {
    return Error(ErrorCode::kUnsupported,
                 "not enough memory to decompress its " + std::to_string(in.size()) +
                     " compressed bytes; decompress it to a file and read that",
                 {}, -1);
  }
}

Result<std::string> gzip(std::string_view data, int level) {
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

}  // namespace tprof::internal
