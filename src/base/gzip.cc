// gzip in tprof::base without a compression library at link time
// (src/base/gzip_codec.h): libdeflate's whole-buffer codec when tprof::gzip
// is linked, zlib (linked, or loaded at run time) for streams, damaged and
// cut files, and compression when libdeflate is absent.
#include "src/base/gzip.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "src/base/file.h"
#include "src/base/gzip_codec.h"

// Weak: null unless tprof::gzip's object is linked in (its usage
// requirement -Wl,--undefined=tprof_gzip_linked_codec pulls it in).
extern "C" __attribute__((weak)) const tprof::internal::LinkedGzip *tprof_gzip_linked_codec();

namespace tprof::internal {

namespace {

// The output bound and what set it, for the message.
struct Limit {
  std::size_t bytes;
  std::string what;
};

Error too_large(const Limit &limit) {
  return Error(ErrorCode::kUnsupported,
               "decompresses to more than " + std::to_string(limit.bytes >> 20) + " MiB (the limit: " + limit.what +
                   "); a gzip bomb, or decompress it to a file and read that",
               {}, -1);
}

// Streams through zlib to keep everything that decodes before damage.
Result<Inflated> gunzip_salvage(std::string_view in, const Limit &limit, const ZlibApi &z) {
  ZStream zs{};
  if (z.inflate_init2(&zs, 15 + 32, z.version(), static_cast<int>(sizeof(ZStream))) != kZOk) {
    return Error(ErrorCode::kInternal, "zlib init failed");
  }
  struct End {
    const ZlibApi &z;
    ZStream *zs;
    ~End() { z.inflate_end(zs); }  // on every way out, a bad_alloc included
  } end_guard{z, &zs};
  std::vector<char> out;
  out.resize(std::min(limit.bytes, in.size() * 4 + (1 << 16)));
  std::size_t produced = 0;
  zs.next_in = reinterpret_cast<const unsigned char *>(in.data());
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
    zs.next_out = reinterpret_cast<unsigned char *>(out.data() + produced);
    std::size_t room = out.size() - produced;
    zs.avail_out = static_cast<unsigned>(room > 0xffffffffu ? 0xffffffffu : room);
    const unsigned before_out = zs.avail_out;
    int rc = z.inflate(&zs, kZNoFlush);
    produced += before_out - zs.avail_out;
    if (zs.avail_in == 0 && fed < in.size()) {
      std::size_t more = in.size() - fed;
      if (more > 0xffffffffu) more = 0xffffffffu;
      zs.next_in = reinterpret_cast<const unsigned char *>(in.data()) + fed;
      zs.avail_in = static_cast<unsigned>(more);
      fed += more;
    }
    if (rc == kZStreamEnd) {
      const std::size_t consumed = fed - zs.avail_in;
      // Another member may follow (concatenated gzip); trailing zeros are
      // padding.
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

Limit gunzip_limit(std::size_t in_size, const GunzipLimits &limits) {
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
Result<Inflated> gunzip_impl(std::string_view in, const GunzipLimits &limits, const LinkedGzip *linked) {
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
    const ZlibApi *z = runtime_zlib(&why);
    if (z == nullptr) {
      return Error(ErrorCode::kUnsupported, "reading a .gz trace needs zlib, loaded at run time: " + why +
                                                " (install zlib, Debian: zlib1g; or link tprof::gzip)");
    }
    return gunzip_salvage(in, limit, *z);
  } catch (const std::bad_alloc &) {
    return Error(ErrorCode::kUnsupported,
                 "not enough memory to decompress its " + std::to_string(in.size()) +
                     " compressed bytes; decompress it to a file and read that",
                 {}, -1);
  }
}

// One gzip member through zlib's deflate (windowBits 15 + 16: a gzip
// header and trailer).
Result<std::string> zlib_gzip(std::string_view data, int level, const ZlibApi &z) {
  ZStream zs{};
  if (z.deflate_init2(&zs, level, kZDeflated, 15 + 16, 8, 0, z.version(), static_cast<int>(sizeof(ZStream))) !=
      kZOk) {
    return Error(ErrorCode::kInternal, "zlib deflate init failed");
  }
  struct End {
    const ZlibApi &z;
    ZStream *zs;
    ~End() { z.deflate_end(zs); }
  } end_guard{z, &zs};
  std::string out;
  out.resize(data.size() / 2 + 64);
  std::size_t produced = 0, fed = 0;
  for (;;) {
    if (zs.avail_in == 0 && fed < data.size()) {
      const std::size_t more = std::min<std::size_t>(data.size() - fed, 0x40000000u);
      zs.next_in = reinterpret_cast<const unsigned char *>(data.data()) + fed;
      zs.avail_in = static_cast<unsigned>(more);
      fed += more;
    }
    if (produced == out.size()) out.resize(out.size() * 2);
    const std::size_t room = std::min<std::size_t>(out.size() - produced, 0x40000000u);
    zs.next_out = reinterpret_cast<unsigned char *>(out.data() + produced);
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

// The streaming inflater: zlib's inflate (libdeflate has no streaming API)
// into kSlots window buffers; the producer fills free ones ahead of the
// reader, which holds at most two (the one it parses and the next, into
// whose headroom it copies the tail it kept).
struct GunzipStream::State {
  static constexpr int kSlots = 3;
  std::string_view in;
  Limit limit{0, {}};
  const ZlibApi *z = nullptr;
  ZStream zs{};
  bool z_open = false;
  std::size_t window = 0, headroom = 0;
  std::unique_ptr<char[]> buf[kSlots];

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Window> filled;
  std::vector<int> free_slots;
  bool ended = false;  // the producer pushed its last window
  bool stop = false;   // the reader is going away
  std::thread thread;

  // Inflate state (the producer's).
  std::size_t fed = 0;
  std::uint64_t produced = 0;
  bool finished = false;
  std::optional<Error> error;
  bool truncated = false, cut = false;
  std::int64_t damage = -1;
  std::string reason;
  std::atomic<std::uint64_t> c_done{0}, t_done{0};

  ~State() {
    if (z_open) z->inflate_end(&zs);
  }

  void feed() {
    if (zs.avail_in == 0 && fed < in.size()) {
      const std::size_t more = std::min<std::size_t>(in.size() - fed, 0x40000000u);
      zs.next_in = reinterpret_cast<const unsigned char *>(in.data()) + fed;
      zs.avail_in = static_cast<unsigned>(more);
      fed += more;
    }
  }

  // Inflates into `w` (its slot set) until the window is full or the stream
  // ends (then `finished`, with the error or damage recorded).
  void fill(Window *w) {
    char *out = buf[w->slot].get() + headroom;
    w->data = out;
    w->offset = produced;
    std::size_t got = 0;
    while (!finished && got < window) {
      feed();
      // One byte past the limit is what tells "more than" from "exactly".
      std::uint64_t avail = window - got;
      avail = std::min<std::uint64_t>({avail, limit.bytes + 1 - produced, 0x40000000u});
      zs.next_out = reinterpret_cast<unsigned char *>(out + got);
      zs.avail_out = static_cast<unsigned>(avail);
      const unsigned before = zs.avail_out;
      const int rc = z->inflate(&zs, kZNoFlush);
      const std::size_t n = before - zs.avail_out;
      got += n;
      produced += n;
      c_done.store(fed - zs.avail_in, std::memory_order_relaxed);
      t_done.store(produced, std::memory_order_relaxed);
      if (produced > limit.bytes) {
        error = too_large(limit);
        finished = true;
        break;
      }
      if (rc == kZStreamEnd) {
        // Another member may follow (concatenated gzip); trailing zeros are
        // padding.
        std::size_t rest = fed - zs.avail_in;
        while (rest < in.size() && in[rest] == 0) ++rest;
        if (rest >= in.size()) {
          finished = true;
          break;
        }
        if (!is_gzip(in.substr(rest))) {
          truncated = true;
          damage = static_cast<std::int64_t>(rest);
          finished = true;
          break;
        }
        z->inflate_reset(&zs);
        zs.next_in = reinterpret_cast<const unsigned char *>(in.data()) + rest;
        zs.avail_in = 0;
        fed = rest;
        continue;
      }
      if (rc == kZOk) continue;
      if (rc == kZBufError) {
        feed();
        if (zs.avail_out == 0 || zs.avail_in > 0) continue;  // room or input was just added
        truncated = cut = true;                              // input exhausted mid-stream
        damage = static_cast<std::int64_t>(in.size());
        finished = true;
        break;
      }
      truncated = true;  // Z_DATA_ERROR and friends
      damage = static_cast<std::int64_t>(fed - zs.avail_in);
      reason = zs.msg != nullptr ? zs.msg : "invalid compressed data";
      finished = true;
    }
    w->size = got;
    if (finished && !error && produced == 0 && truncated) {
      if (damage <= 18) {
        error = Error(ErrorCode::kParse, "not a readable gzip stream (damaged header)", {}, damage);
      } else {
        error = Error(ErrorCode::kParse,
                      cut ? "the gzip stream is cut before any data decompressed"
                          : "the gzip stream is damaged (" + reason + ") before any data decompressed",
                      {}, damage);
      }
    }
  }

  void run() {
    for (;;) {
      Window w;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !free_slots.empty(); });
        if (stop) return;
        w.slot = free_slots.back();
        free_slots.pop_back();
      }
      fill(&w);
      std::lock_guard<std::mutex> lock(mu);
      if (w.size > 0) {
        filled.push_back(w);
      } else {
        free_slots.push_back(w.slot);
      }
      if (finished) ended = true;
      cv.notify_all();
      if (finished) return;
    }
  }
};

GunzipStream::GunzipStream(std::unique_ptr<State> s) : s_(std::move(s)) {}

GunzipStream::~GunzipStream() {
  if (s_->thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      s_->stop = true;
    }
    s_->cv.notify_all();
    s_->thread.join();
  }
}

Result<std::unique_ptr<GunzipStream>> GunzipStream::start(std::string_view compressed, const GunzipLimits &limits,
                                                          std::size_t window_bytes, std::size_t headroom,
                                                          bool threaded) {
  if (!is_gzip(compressed)) return Error(ErrorCode::kParse, "expected a gzip header (1f 8b)", {}, 0);
  auto s = std::make_unique<State>();
  s->in = compressed;
  s->limit = gunzip_limit(compressed.size(), limits);
  const LinkedGzip *linked = linked_gzip();
  std::string why;
  s->z = linked != nullptr ? linked->zlib : runtime_zlib(&why);
  if (s->z == nullptr) {
    return Error(ErrorCode::kUnsupported, "reading a .gz trace needs zlib, loaded at run time: " + why +
                                              " (install zlib, Debian: zlib1g; or link tprof::gzip)");
  }
  if (s->z->inflate_init2(&s->zs, 15 + 32, s->z->version(), static_cast<int>(sizeof(ZStream))) != kZOk) {
    return Error(ErrorCode::kInternal, "zlib init failed");
  }
  s->z_open = true;
  s->window = std::max<std::size_t>(window_bytes, 4096);
  s->headroom = headroom;
  try {
    for (int i = 0; i < State::kSlots; ++i) {
      s->buf[i] = std::make_unique_for_overwrite<char[]>(s->headroom + s->window + 64);
      std::memset(s->buf[i].get() + s->headroom + s->window, 0, 64);
      s->free_slots.push_back(State::kSlots - 1 - i);
    }
  } catch (const std::bad_alloc &) {
    return Error(ErrorCode::kUnsupported, "not enough memory for the gzip stream's windows", {}, -1);
  }
  State *raw = s.get();
  if (threaded) {
    try {
      s->thread = std::thread([raw] { raw->run(); });
    } catch (const std::system_error &) {
      // Out of threads: the reader inflates each window itself.
    }
  }
  return std::unique_ptr<GunzipStream>(new GunzipStream(std::move(s)));
}

bool GunzipStream::next(Window *w) {
  State &s = *s_;
  if (!s.thread.joinable()) {
    for (;;) {
      if (s.finished || s.free_slots.empty()) return false;
      Window got;
      got.slot = s.free_slots.back();
      s.free_slots.pop_back();
      s.fill(&got);
      if (got.size > 0) {
        *w = got;
        return true;
      }
      s.free_slots.push_back(got.slot);
    }
  }
  std::unique_lock<std::mutex> lock(s.mu);
  s.cv.wait(lock, [&] { return !s.filled.empty() || s.ended; });
  if (s.filled.empty()) return false;
  *w = s.filled.front();
  s.filled.pop_front();
  return true;
}

void GunzipStream::recycle(const Window &w) {
  if (w.slot < 0) return;
  std::lock_guard<std::mutex> lock(s_->mu);
  s_->free_slots.push_back(w.slot);
  s_->cv.notify_all();
}

std::size_t GunzipStream::headroom() const { return s_->headroom; }
// The producer wrote these before it set `ended` (under the mutex, which
// the reader's last next() took) or, unthreaded, on the reader's thread.
const Error *GunzipStream::end_error() const { return s_->error ? &*s_->error : nullptr; }
bool GunzipStream::truncated() const { return s_->truncated; }
bool GunzipStream::cut() const { return s_->cut; }
std::int64_t GunzipStream::damage_offset() const { return s_->damage; }
const std::string &GunzipStream::damage() const { return s_->reason; }
std::uint64_t GunzipStream::compressed_done() const { return s_->c_done.load(std::memory_order_relaxed); }
std::uint64_t GunzipStream::text_done() const { return s_->t_done.load(std::memory_order_relaxed); }

const LinkedGzip *linked_gzip() { return tprof_gzip_linked_codec != nullptr ? tprof_gzip_linked_codec() : nullptr; }

Result<Inflated> gunzip(std::string_view in, const GunzipLimits &limits) {
  return gunzip_impl(in, limits, linked_gzip());
}

Result<Inflated> gunzip_with_runtime_zlib(std::string_view in, const GunzipLimits &limits) {
  return gunzip_impl(in, limits, nullptr);
}

Result<std::string> gzip(std::string_view data, int level) {
  if (const LinkedGzip *linked = linked_gzip(); linked != nullptr) return linked->gzip(data, level);
  return gzip_with_runtime_zlib(data, level);
}

Result<std::string> gzip_with_runtime_zlib(std::string_view data, int level) {
  std::string why;
  const ZlibApi *z = runtime_zlib(&why);
  if (z == nullptr) {
    return Error(ErrorCode::kUnsupported, "writing .json.gz needs zlib, loaded at run time: " + why +
                                              " (install zlib, Debian: zlib1g; or link tprof::gzip)");
  }
  return zlib_gzip(data, level, *z);
}

}  // namespace tprof::internal
