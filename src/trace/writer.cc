// The one writer: Trace -> Kineto JSON object format.
//
// Layout follows libkineto's: top-level keys first, then "traceEvents" with
// one event per line. Every string goes through the one escaper and every
// time through the one µs formatter (src/base/json_writer.h); stored JSON
// (args, top-level values) is re-emitted token by token, so text that a
// lenient read accepted (raw quotes in names) comes out valid — unless it
// already is exactly what that copy would write (is_compact_json: tprof's
// own args), which is written as it is. A file is written in 256 KiB pieces by
// a second thread while the next piece is generated.
#include "tprof/write.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "src/base/json_writer.h"
#include "src/trace/json_copy.h"
#include "src/trace/kineto_keys.h"
#include "src/trace/writer.h"

namespace tprof {

namespace {

using internal::JsonWriter;

// Pieces of 256 KiB: the three in use (one being filled, two queued) stay
// in L2 and are reused; 4 MiB pieces were ~12 MiB of fresh memory to
// populate in a process's first window, for the same steady state
// (bench/README.md, "First window of a fresh process").
constexpr std::size_t kFlushBytes = 256u << 10;
constexpr std::size_t kBufferBytes = kFlushBytes + (64u << 10);  // a full buffer and the event that filled it

using internal::kineto::kArgs;
using internal::kineto::kBp;
using internal::kineto::kCat;
using internal::kineto::kDur;
using internal::kineto::kId;
using internal::kineto::kName;
using internal::kineto::kPh;
using internal::kineto::kPid;
using internal::kineto::kS;
using internal::kineto::kTid;
using internal::kineto::kTraceEvents;
using internal::kineto::kTs;

// Writes one trace. Per event, the writer formats the numbers and copies
// bytes: the members that events of one (phase, category, name, lane) share
// — `"ph": "X", "cat": ..., "name": ..., "pid": ..., "tid": ...` — are
// written by the JsonWriter once and reused ("heads"), and strings are
// checked for escaping once per id.
class DocumentWriter {
 public:
  DocumentWriter(const Trace& t, std::string* out) : t_(t), w_(out), plain_(t.strings.size(), kUnknown) {}

  // Writes the document in pieces; `flush` is called whenever the output grows large.
  template <class Flush>
  void write(Flush&& flush) {
    const std::int64_t base = t_.meta.base_time_ns.value_or(0);
    w_.begin_object();
    for (const auto& [key, raw] : t_.meta.top_level) {
      w_.break_line();
      w_.key(key);
      internal::write_stored_json(raw, &w_, &scratch_, &value_, "null");
    }
    w_.break_line();
    w_.key(kTraceEvents);
    w_.begin_array();
    for (std::uint32_t e = 0; e < t_.events.size(); ++e) {
      write_event(e, base);
      if (w_.size() >= kFlushBytes) {
        w_.flush();
        flush();
      }
    }
    w_.break_line();
    w_.end_array();
    w_.break_line();
    w_.end_object();
    w_.out()->push_back('\n');
  }

 private:
  enum : std::uint8_t { kUnknown = 0, kPlain = 1, kEscaped = 2 };
  // Heads are cached for at most this many distinct (phase, cat, name, lane);
  // traces with more (a name per event) write the rest member by member.
  static constexpr std::size_t kMaxHeads = 1u << 16;
  struct Head {
    std::uint64_t key_lo = 0;  // name | cat << 32
    std::uint32_t lane = 0;
    std::uint8_t ph = 0;       // 0: empty slot
    std::uint32_t offset = 0, len = 0;  // in heads_
  };

  void write_id(const TraceId& id, JsonWriter* w) {
    if (id.is_str) {
      write_str(id.str, w);
    } else {
      w->value_int(id.num);
    }
  }

  void write_str(StrId id, JsonWriter* w) {
    const std::string_view s = t_.str(id);
    std::uint8_t& state = plain_[id];
    if (state == kUnknown) state = internal::needs_json_escape(s) ? kEscaped : kPlain;
    if (state == kPlain) {
      w->value_plain_string(s);
    } else {
      w->value_string(s);
    }
  }

  // ph, cat, name, pid, tid of a non-metadata event, in Kineto's order.
  void write_head(std::uint32_t e, JsonWriter* w) {
    const EventColumns& ev = t_.events;
    const Lane& lane = t_.lanes[ev.lane[e]];
    const Phase ph = ev.phase[e];
    const char ph_text[1] = {static_cast<char>(ph)};
    w->key(kPh);
    w->value_string(std::string_view(ph_text, 1));
    if (ev.flow_id[e] != -1 && (ph == Phase::kFlowStart || ph == Phase::kFlowStep || ph == Phase::kFlowEnd)) {
      w->key(kId);
      if (ev.flow_id[e] <= -2) {
        write_str(static_cast<StrId>(-ev.flow_id[e] - 2), w);
      } else {
        w->value_int(ev.flow_id[e]);
      }
    }
    if (ev.cat[e] != kEmptyStr) {
      w->key(kCat);
      write_str(ev.cat[e], w);
    }
    w->key(kName);
    write_str(ev.name[e], w);
    w->key(kPid);
    write_id(lane.pid, w);
    w->key(kTid);
    write_id(lane.tid, w);
  }

  // The cached head of event e, written on first use; empty if not cacheable.
  std::string_view cached_head(std::uint32_t e) {
    const EventColumns& ev = t_.events;
    const Phase ph = ev.phase[e];
    if (ph == Phase::kFlowStart || ph == Phase::kFlowStep || ph == Phase::kFlowEnd) return {};  // ids differ
    const std::uint64_t key = ev.name[e] | static_cast<std::uint64_t>(ev.cat[e]) << 32;
    const std::uint32_t lane = ev.lane[e];
    const auto ph_byte = static_cast<std::uint8_t>(ph);
    if (heads_.empty()) heads_.resize(64);
    std::size_t mask = heads_.size() - 1;
    const std::uint64_t h = (key ^ (static_cast<std::uint64_t>(lane) << 8 | ph_byte) * 0xff51afd7ed558ccdull) *
                            0x9e3779b97f4a7c15ull;
    std::size_t i = static_cast<std::size_t>(h >> 40) & mask;
    for (; heads_[i].ph != 0; i = (i + 1) & mask) {
      const Head& x = heads_[i];
      if (x.key_lo == key && x.lane == lane && x.ph == ph_byte) {
        return std::string_view(head_text_).substr(x.offset, x.len);
      }
    }
    if (head_count_ >= kMaxHeads) return {};
    if ((head_count_ + 1) * 2 > heads_.size()) {
      std::vector<Head> bigger(heads_.size() * 2);
      for (const Head& x : heads_) {
        if (x.ph == 0) continue;
        const std::uint64_t hx = (x.key_lo ^ (static_cast<std::uint64_t>(x.lane) << 8 | x.ph) * 0xff51afd7ed558ccdull) *
                                 0x9e3779b97f4a7c15ull;
        std::size_t j = static_cast<std::size_t>(hx >> 40) & (bigger.size() - 1);
        while (bigger[j].ph != 0) j = (j + 1) & (bigger.size() - 1);
        bigger[j] = x;
      }
      heads_.swap(bigger);
      mask = heads_.size() - 1;
      i = static_cast<std::size_t>(h >> 40) & mask;
      while (heads_[i].ph != 0) i = (i + 1) & mask;
    }
    // The members as this writer writes them: an object's text without its braces.
    std::string object;
    {
      JsonWriter w(&object);
      w.begin_object();
      write_head(e, &w);
      w.end_object();
    }
    Head& added = heads_[i];
    added.key_lo = key;
    added.lane = lane;
    added.ph = ph_byte;
    added.offset = static_cast<std::uint32_t>(head_text_.size());
    added.len = static_cast<std::uint32_t>(object.size() - 2);
    head_text_.append(object, 1, object.size() - 2);
    ++head_count_;
    return std::string_view(head_text_).substr(added.offset, added.len);
  }

  void write_event(std::uint32_t e, std::int64_t base) {
    const EventColumns& ev = t_.events;
    const Phase ph = ev.phase[e];
    w_.break_line();
    w_.begin_object();
    if (ph == Phase::kMetadata) {
      const Lane& lane = t_.lanes[ev.lane[e]];
      w_.key(kName);
      write_str(ev.name[e], &w_);
      w_.key(kPh);
      w_.value_string("M");
      w_.key(kTs);
      w_.value_us(ev.ts_ns[e] - base);
      w_.key(kPid);
      write_id(lane.pid, &w_);
      w_.key(kTid);
      write_id(lane.tid, &w_);
    } else {
      const std::string_view head = head_text_.size() < (std::size_t{1} << 31) ? cached_head(e) : std::string_view();
      if (head.empty()) {
        write_head(e, &w_);
      } else {
        w_.members_raw(head);
      }
      w_.key(kTs);
      w_.value_us(ev.ts_ns[e] - base);
      if (ph == Phase::kComplete) {
        w_.key(kDur);
        w_.value_us(ev.dur_ns[e]);
      }
      const std::uint8_t f = ev.flags[e];
      if (ph == Phase::kInstant && (f & (kFlagInstantGlobal | kFlagInstantProcess | kFlagInstantThread))) {
        w_.key(kS);
        w_.value_string((f & kFlagInstantGlobal) ? "g" : (f & kFlagInstantProcess) ? "p" : "t");
      }
      if (f & kFlagBindEnclosing) {
        w_.key(kBp);
        w_.value_string("e");
      }
    }
    const std::string_view args = t_.args_json(e);
    if (!args.empty()) {
      w_.key(kArgs);
      internal::write_stored_json(args, &w_, &scratch_, &value_, "{}");
    }
    w_.end_object();
  }

  const Trace& t_;
  JsonWriter w_;
  std::vector<std::uint8_t> plain_;  // per string id: kUnknown, kPlain, kEscaped
  std::vector<Head> heads_;          // open addressing
  std::size_t head_count_ = 0;
  std::string head_text_;
  std::string scratch_, value_;
};

}  // namespace

void write_trace_json(const Trace& trace, std::string* out) {
  DocumentWriter(trace, out).write([] {});
}

namespace {

// Writes full buffers to the file on a second thread, in order, while the
// caller fills the next one: the kernel's copy into the page cache (about
// as long as generating the JSON) overlaps the generation. Started only
// when a document outgrows one buffer.
class BackgroundWriter {
 public:
  explicit BackgroundWriter(internal::AtomicFileWriter* file) : file_(file) {}
  ~BackgroundWriter() { static_cast<void>(finish()); }

  // Queues `*buffer` for writing and gives back an empty buffer in its
  // place; waits while kInFlight buffers are queued.
  void submit(std::string* buffer) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    queue_.push_back(std::move(*buffer));
    cv_.notify_all();
    cv_.wait(lock, [&] { return queue_.size() < kInFlight || !status_; });
    if (!spare_.empty()) {
      *buffer = std::move(spare_.back());
      spare_.pop_back();
      buffer->clear();
    } else {
      *buffer = std::string();
      buffer->reserve(kBufferBytes);
      internal::prefault_for_writing(buffer->data(), kBufferBytes);
    }
  }

  // Waits for the queue to be written; returns the first write error.
  Status finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
    return status_;
  }

 private:
  static constexpr std::size_t kInFlight = 2;

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !queue_.empty() || done_; });
      if (queue_.empty()) return;
      std::string buffer = std::move(queue_.front());
      queue_.pop_front();
      const bool ok = static_cast<bool>(status_);
      lock.unlock();
      Status s = ok ? file_->write(buffer) : Status();
      lock.lock();
      if (!s) status_ = std::move(s);
      spare_.push_back(std::move(buffer));
      cv_.notify_all();
    }
  }

  internal::AtomicFileWriter* file_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::vector<std::string> spare_;
  Status status_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

namespace internal {

Status write_trace_to(const Trace& trace, AtomicFileWriter* file, bool compress, int gzip_level) {
  std::string buffer;
  if (compress) {
    write_trace_json(trace, &buffer);
    TPROF_TRY_ASSIGN(std::string compressed, internal::gzip(buffer, gzip_level));
    return file->write(compressed);
  }
  buffer.reserve(kBufferBytes);
  // As much of it as the document will use (about 160 bytes an event): a
  // small trace does not pay for populating the whole buffer.
  internal::prefault_for_writing(buffer.data(), std::min<std::size_t>(kBufferBytes, 160 * trace.events.size()));
  BackgroundWriter background(file);
  DocumentWriter(trace, &buffer).write([&] { background.submit(&buffer); });
  TPROF_TRY(background.finish());
  return file->write(buffer);
}

}  // namespace internal

Status write_trace(const Trace& trace, const std::string& path, const WriteOptions& options) {
  const bool gz = options.compression == Compression::kGzip ||
                  (options.compression == Compression::kAuto && path.size() > 3 &&
                   path.compare(path.size() - 3, 3, ".gz") == 0);
  TPROF_TRY_ASSIGN(auto file, internal::AtomicFileWriter::create(path));
  TPROF_TRY(internal::write_trace_to(trace, file.get(), gz, options.gzip_level));
  return file->commit();
}

}  // namespace tprof
