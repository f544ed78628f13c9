// gzip in tprof::base without a compression library at link time
// (src/base/gzip_codec.h): libdeflate's whole-buffer codec when tprof::gzip
// is linked, zlib (linked, or loaded at run time) for streams, damaged and
// cut files, and compression when libdeflate is absent.
#include "src/base/gzip.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "src/base/file.h"
#include "src/base/gzip_codec.h"

// Weak: null unless tprof::gzip's object is linked in (its usage
// requirement -Wl,--undefined=tprof_gzip_linked_codec pulls it in).
extern "C" __attribute__((weak)) const tprof::internal::LinkedGzip* tprof_gzip_linked_codec();

namespace tprof::internal {

namespace {

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
Result<Inflated> gunzip_salvage(std::string_view in, const Limit& limit, const ZlibApi& z) {
  ZStream zs{};
  if (z.inflate_init2(&zs, 15 + 32, z.version(), static_cast<int>(sizeof(ZStream))) != kZOk) {
    return Error(ErrorCode::kInternal, "zlib init failed");
  }
  struct End {
    const ZlibApi& z;
    ZStream* zs;
    ~End() { z.inflate_end(zs); }  // on every way out, a bad_alloc included
  } end_guard{z, &zs};
  std::vector<char> out;
  out.resize(std::min(limit.bytes, in.size() * 4 + (1 << 16)));
  std::size_t produced = 0;
  zs.next_in = reinterpret_cast<const unsigned char*>(in.data());
  zs.avail_in = static_cast<unsigned>(in.size() > 0xffffffffu ? 0xffffffffu : in.size());
  std::size_t fed = zs.avail_in;
  bool truncated = false, cut = false;
  std::int64_t damage = -1;
  std::string reason;
  for (;;) {
    if (produced == out.size()) {
      if (out.size() >= limit.bytes) return too_large(limit);
      out.resize(std::min(limit.bytes, out.size() * 2));
    }
    zs.next_out = reinterpret_cast<unsigned char*>(out.data() + produced);
    std::size_t room = out.size() - produced;
    zs.avail_out = static_cast<unsigned>(room > 0xffffffffu ? 0xffffffffu : room);
    const unsigned before_out = zs.avail_out;
    int rc = z.inflate(&zs, kZNoFlush);
    produced += before_out - zs.avail_out;
    if (zs.avail_in == 0 && fed < in.size()) {
      std::size_t more = in.size() - fed;
      if (more > 0xffffffffu) more = 0xffffffffu;
      zs.next_in = reinterpret_cast<const unsigned char*>(in.data()) + fed;
      zs.avail_in = static_cast<unsigned>(more);
      fed += more;
    }
    if (rc == kZStreamEnd) {
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
      z.inflate_reset(&zs);
      continue;
    }
    if (rc == kZOk) continue;
    if (rc == kZBufError) {
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

Limit gunzip_limit(std::size_t in_size, const GunzipLimits& limits) {
  Limit limit{half_physical_memory(), "half the physical memory"};
  if (limits.max_output > 0) limit = {limits.max_output, "max_inflated_bytes, --max-inflated-mib"};
  if (limits.max_ratio > 0) {
    const double by_ratio = limits.max_ratio * static_cast<double>(std::max<std::size_t>(in_size, 4096));
    if (by_ratio < static_cast<double>(limit.bytes)) {
      std::string ratio = std::to_string(limits.max_ratio);
      ratio.erase(ratio.find_last_not_of('0') + 1);
      if (!ratio.empty() && ratio.back() == '.') ratio.pop_back();
      limit = {static_cast<std::size_t>(by_ratio),
               ratio + " times the " + std::to_string(in_size) + " compressed bytes (max_inflate_ratio, --max-inflate-ratio)"};
    }
  }
  return limit;
}

// `linked` null: zlib alone (streamed), as a capture-only program reads.
Result<Inflated> gunzip_impl(std::string_view in, const GunzipLimits& limits, const LinkedGzip* linked) {
  if (!is_gzip(in)) return Error(ErrorCode::kParse, "expected a gzip header (1f 8b)", {}, 0);
  const Limit limit = gunzip_limit(in.size(), limits);
  // A process under an address-space limit (ulimit -v) can fail below our
  // own limit: that is an error with the size, not an abort.
  try {
    if (linked != nullptr) {
      Inflated r;
      switch (linked->gunzip_whole(in, limit.bytes, r)) {
        case LinkedGzip::Whole::kOk:
          return r;
        case LinkedGzip::Whole::kTooLarge:
          return too_large(limit);
        case LinkedGzip::Whole::kFallback:
          break;
      }
      return gunzip_salvage(in, limit, *linked->zlib);
    }
    std::string why;
    const ZlibApi* z = runtime_zlib(&why);
    if (z == nullptr) {
      return Error(ErrorCode::kUnsupported, "reading a .gz trace needs zlib, loaded at run time: " + why +
                                                " (install zlib, Debian: zlib1g; or link tprof::gzip)");
    }
    return gunzip_salvage(in, limit, *z);
  } catch (const std::bad_alloc&) {
    return Error(ErrorCode::kUnsupported,
                 "not enough memory to decompress its " + std::to_string(in.size()) +
                     " compressed bytes; decompress it to a file and read that",
                 {}, -1);
  }
}

// One gzip member through zlib's deflate (windowBits 15 + 16: a gzip
// header and trailer).
Result<std::string> zlib_gzip(std::string_view data, int level, const ZlibApi& z) {
  ZStream zs{};
  if (z.deflate_init2(&zs, level, kZDeflated, 15 + 16, 8, 0, z.version(), static_cast<int>(sizeof(ZStream))) !=
      kZOk) {
    return Error(ErrorCode::kInternal, "zlib deflate init failed");
  }
  struct End {
    const ZlibApi& z;
    ZStream* zs;
    ~End() { z.deflate_end(zs); }
  } end_guard{z, &zs};
  std::string out;
  out.resize(data.size() / 2 + 64);
  std::size_t produced = 0, fed = 0;
  for (;;) {
    if (zs.avail_in == 0 && fed < data.size()) {
      const std::size_t more = std::min<std::size_t>(data.size() - fed, 0x40000000u);
      zs.next_in = reinterpret_cast<const unsigned char*>(data.data()) + fed;
      zs.avail_in = static_cast<unsigned>(more);
      fed += more;
    }
    if (produced == out.size()) out.resize(out.size() * 2);
    const std::size_t room = std::min<std::size_t>(out.size() - produced, 0x40000000u);
    zs.next_out = reinterpret_cast<unsigned char*>(out.data() + produced);
    zs.avail_out = static_cast<unsigned>(room);
    const int rc = z.deflate(&zs, fed == data.size() ? kZFinish : kZNoFlush);
    produced += room - zs.avail_out;
    if (rc == kZStreamEnd) break;
    if (rc != kZOk && rc != kZBufError) return Error(ErrorCode::kInternal, "gzip compression failed (zlib)");
  }
  out.resize(produced);
  return out;
}

}  // namespace

const LinkedGzip* linked_gzip() {
  return tprof_gzip_linked_codec != nullptr ? tprof_gzip_linked_codec() : nullptr;
}

Result<Inflated> gunzip(std::string_view in, const GunzipLimits& limits) {
  return gunzip_impl(in, limits, linked_gzip());
}

Result<Inflated> gunzip_with_runtime_zlib(std::string_view in, const GunzipLimits& limits) {
  return gunzip_impl(in, limits, nullptr);
}

Result<std::string> gzip(std::string_view data, int level) {
  if (const LinkedGzip* linked = linked_gzip(); linked != nullptr) return linked->gzip(data, level);
  return gzip_with_runtime_zlib(data, level);
}

Result<std::string> gzip_with_runtime_zlib(std::string_view data, int level) {
  std::string why;
  const ZlibApi* z = runtime_zlib(&why);
  if (z == nullptr) {
    return Error(ErrorCode::kUnsupported, "writing .json.gz needs zlib, loaded at run time: " + why +
                                              " (install zlib, Debian: zlib1g; or link tprof::gzip)");
  }
  return zlib_gzip(data, level, *z);
}

}  // namespace tprof::internal
