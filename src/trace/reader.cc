// The reader: bytes -> Trace.
//
//   file ──mmap──┐                      ┌─ chunk 0 ─ parse_event_elements ─
//   EventBatch ─┐ .gz ─gunzip──┴─ top level (object   ├─ chunk 1 ─ ... ├─ merge
//   (file order,
//                   or legacy array) ───┤   (parallel, event-aligned) │  ids
//                   remapped)
//                                       └─ chunk N ─ ... ┘      │
//                                          pair B/E, base time, producer,
//                                          assemble_trace (lanes, metadata,
//                                          checks; shared with capture) ─▶
//                                          Trace
//
// Chunks start at guessed event boundaries ("}, {" between array elements).
// A guess can be wrong (the pattern inside a string or a nested array), so a
// chunk is accepted only if its predecessor stopped exactly where it starts;
// otherwise that stretch is parsed again from where the predecessor stopped.
#include "tprof/read.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "src/base/hash.h"
#include "src/base/safe_text.h"
#include "src/trace/event_parser.h"
#include "src/trace/event_stream.h"
#include "src/trace/json_copy.h"
#include "src/trace/json_cursor.h"
#include "src/trace/json_value.h"
#include "src/trace/assemble.h"

namespace tprof {

namespace {

using internal::ChunkEnd;
using internal::CursorFailure;
using internal::EventBatch;
using internal::JsonCursor;
using internal::ParseContext;

struct ChunkResult {
  const char *start = nullptr;
  const char *stop_at = nullptr;
  bool after_element = false;  // `start` is just after a complete element (ChunkEnd)
  EventBatch batch;
  ChunkEnd end;
  CursorFailure failure = CursorFailure::kNone;
  Error error{ErrorCode::kParse, {}};
};

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The first element start at or after `from`: a '{' preceded (across
// whitespace) by ',' which is preceded by '}'. Returns `end` if none.
const char *find_boundary(const char *from, const char *begin, const char *end) {
  const char *p = from;
  while (p < end) {
    p = static_cast<const char *>(std::memchr(p, '{', static_cast<std::size_t>(end - p)));
    if (p == nullptr) return end;
    const char *q = p - 1;
    while (q > begin && is_ws(*q)) --q;
    if (q > begin && *q == ',') {
      --q;
      while (q > begin && is_ws(*q)) --q;
      if (q >= begin && *q == '}') return p;
    }
    ++p;
  }
  return end;
}

// Where reading may resume after damage at `from`: the next element start
// (as find_boundary) whose '{' opens an object with a key ('{' then '"'),
// after `from`. Returns `end` if none.
const char *find_resync(const char *from, const char *begin, const char *end) {
  for (const char *p = from + 1; p < end; ++p) {
    p = find_boundary(p, begin, end);
    if (p >= end) return end;
    const char *q = p + 1;
    while (q < end && is_ws(*q)) ++q;
    if (q < end && (*q == '"' || *q == '}')) return p;
  }
  return end;
}

// The last element start in [from, end) whose '{' opens an object with a
// key (as find_resync), searching back from `end`; `from` if none. A
// streamed window is parsed up to it: the element there may continue in
// the next window. A guess (the pattern may sit inside a string): an
// element that still runs into the window's end is parsed again.
const char *find_last_boundary(const char *from, const char *end) {
  const char *p = end;
  while (p > from) {
    const void *hit = memrchr(from, '{', static_cast<std::size_t>(p - from));
    if (hit == nullptr) return from;
    p = static_cast<const char *>(hit);
    const char *q = p + 1;
    while (q < end && is_ws(*q)) ++q;
    if (q < end && *q == '"') {
      const char *b = p - 1;
      while (b > from && is_ws(*b)) --b;
      if (b > from && *b == ',') {
        --b;
        while (b > from && is_ws(*b)) --b;
        if (b >= from && *b == '}') return p;
      }
    }
  }
  return from;
}

// The args of events read from a streamed .gz: copied out of each window as
// its events are merged (the window is then reused), and the trace's
// source once the read ends. realloc: glibc moves large blocks by
// remapping their pages, not by copying them.
struct ArgsArena {
  char *data = nullptr;
  std::size_t size = 0, cap = 0;
  ArgsArena() = default;
  ArgsArena(const ArgsArena &) = delete;
  ArgsArena &operator=(const ArgsArena &) = delete;
  ~ArgsArena() { std::free(data); }
  bool append(const char *p, std::size_t n) {
    if (size + n > cap) {
      const std::size_t want = std::max({cap * 2, size + n, std::size_t{1} << 20});
      char *grown = static_cast<char *>(std::realloc(data, want + 1));
      if (grown == nullptr) return false;
      data = grown;
      cap = want;
    }
    std::memcpy(data + size, p, n);
    size += n;
    return true;
  }
};

// What one event costs in the model's columns (the model limit for a
// streamed .gz counts these and the args bytes).
constexpr std::size_t kEventColumnBytes =
    sizeof(std::int64_t) * 2 + sizeof(EventColumns::phase[0]) + sizeof(EventColumns::kind[0]) +
    sizeof(EventColumns::flags[0]) + sizeof(EventColumns::external_id[0]) + sizeof(EventColumns::correlation[0]) +
    sizeof(EventColumns::args_ref[0]) + sizeof(EventColumns::src_offset[0]) + sizeof(EventColumns::name[0]) +
    sizeof(EventColumns::cat[0]) + sizeof(EventColumns::lane[0]) + sizeof(EventColumns::flow_id[0]);

// Streamed .gz: text windows, and the most a single element (an event, a
// top-level value, or a damaged stretch before the next event) may span
// across them: the tail kept for it is the only memory that grows with the
// text.
constexpr std::size_t kStreamWindowBytes = 8u << 20;
constexpr std::size_t kStreamHeadroomBytes = 1u << 20;
constexpr std::size_t kMaxStreamTailBytes = 32u << 20;

const char kNoText[1] = "";

bool only_padding(const char *p, const char *end) {
  for (; p < end; ++p) {
    if (*p != '\0' && !is_ws(*p)) return false;
  }
  return true;
}

class Reader {
 public:
  Reader(std::string_view bytes, std::string path, const ReadOptions &options, const internal::MappedFile *map)
      : bytes_(bytes), path_(std::move(path)), options_(options), map_(map), origin_(bytes.data()) {}
  // A streamed .gz: the text comes window by window from `stream`.
  Reader(internal::GunzipStream *stream, std::uint64_t compressed_size, std::string path, const ReadOptions &options)
      : bytes_(kNoText, 0),
        path_(std::move(path)),
        options_(options),
        map_(nullptr),
        stream_(stream),
        compressed_size_(compressed_size),
        origin_(kNoText),
        final_(false) {}
  ~Reader() {
    if (stream_ != nullptr) stream_->recycle(win_);
  }

  Result<Trace> run(Trace trace);
  // Streaming (read_trace_streamed): each merged batch goes to `sink`, and
  // `out` gets what run()'s model alone does not say.
  void stream_to(internal::EventStream *sink, internal::StreamedTrace *out) {
    sink_ = sink;
    out_ = out;
  }
  // Reads (and drops) what is left of a streamed .gz, so that its damage,
  // if any, is known.
  void drain();
  // The first byte range skipped after a syntax error: the error's text
  // offset and message (a streamed .gz that turns out damaged refuses it).
  bool first_skip(std::int64_t *at, std::string *why) const {
    if (skipped_.empty()) return false;
    *at = skipped_.front().at;
    *why = skipped_.front().why;
    return true;
  }

 private:
  Status parse_top_level();
  // Parses the elements of the array whose '[' was just consumed. On success
  // the cursor stands after its ']' (or at EOF when truncated).
  Status parse_array(JsonCursor *c, const ParseContext &ctx);
  // Parses (in parallel chunks) and merges the elements in [first, stop).
  // `after_element`: `first` is just after a complete element (a streamed
  // window read on from a failure where a ',' or ']' was expected).
  void parse_span(const char *first, const char *stop, const ParseContext &ctx, int threads,
                  bool after_element = false);
  Status finish_array(JsonCursor *c);
  Status parse_object(JsonCursor *c);
  // One top-level key and its value; false on a cursor failure.
  Result<bool> top_level_key(JsonCursor *c);
  void parse_chunk(ChunkResult *r, const ParseContext &ctx);
  // Streamed .gz: replaces the text before `*keep` with the next window
  // (`*keep` then points at the same text there); false at the end of the
  // stream (then final_). Fails past a limit.
  Result<bool> refill(const char **keep);
  // Skips whitespace, refilling until there is a byte to read or the end.
  Status wait_for_text(JsonCursor *c);
  Status check_model_size();
  const char *text_end() const { return bytes_.data() + bytes_.size(); }
  void report_progress(std::size_t bytes);
  // Accepts parsed chunks in file order (re-parsing misguessed ones),
  // appends them to the trace and frees them. Called by every worker after
  // each chunk; one merges at a time.
  void merge_ready(std::vector<std::unique_ptr<ChunkResult>> *guesses, const ParseContext &ctx);
  void append_batch(EventBatch *b);
  // Streaming: hands the events appended from `first` (trace-wide index
  // `first_id`) to the sink, then keeps them in the model or not.
  // `repaired`: the batch's args_store (refs with the owned bit point there).
  void stream_batch(std::uint32_t first, std::uint64_t first_id, std::span<const MemoryRecord> memory,
                    std::string_view repaired);
  // Streaming, past the model limit: keeps only the M and B events of
  // trace_.events[from, end) (trace-wide index first_id + i - from).
  void keep_structure(std::uint32_t from, std::uint64_t first_id);
  // Copies the args of trace_.events[from, end) out of a streamed .gz's
  // window into the arena.
  void own_args(std::uint32_t from);
  // Stores the repaired args of trace_.events[from, end), offsets in the
  // batch's `repaired` store, in the trace's own store.
  void own_repaired(std::uint32_t from, std::string_view repaired);
  // Streaming a mapped file: the sink read the args of [from, to) again
  // after parse_chunk released its pages; released once more.
  void release_streamed(const char *from, const char *to) {
    if (sink_ != nullptr && map_ != nullptr && to > from) {
      map_->release(static_cast<std::size_t>(from - bytes_.data()), static_cast<std::size_t>(to - from));
    }
  }
  // The trace-wide index of trace_.events[e].
  std::uint32_t global_id(std::uint32_t e) const { return dropped_ ? kept_ids_[e] : e; }
  // `total`: the text the array spans, when more than [first, end) (a
  // streamed .gz: an estimate).
  void reserve_events(const char *first, const char *end, std::size_t total = 0);
  void pair_begin_end();
  Error error_at(Error e) const { return e.with_path(path_); }
  // A string pool ran out of ids: the read stops, rather than let ids wrap
  // (2^32 would be "" again, and the names silently wrong).
  Error strings_full_error() const {
    return error_at(Error(ErrorCode::kUnsupported,
                          "more than " + std::to_string(StringPool::kMaxStrings) +
                              " distinct strings (names, categories, string ids): tprof's string ids are 32-bit",
                          {}, -1));
  }

  std::string_view bytes_;
  std::string path_;
  const ReadOptions &options_;
  const internal::MappedFile *map_;
  Trace trace_;
  // Streaming merge state: parsed_, next_merge_ and merging_ are guarded by
  // merge_mu_; the rest belongs to the one thread that holds merging_.
  std::mutex merge_mu_;
  std::condition_variable merged_cv_;  // streaming: next_merge_ moved on
  std::vector<std::uint8_t> parsed_;     // per guess: parse finished
  std::size_t next_merge_ = 0;           // next guess to accept
  bool merging_ = false;                 // a thread is merging
  ChunkEnd last_end_;                    // where the last accepted chunk stopped
  CursorFailure last_failure_ = CursorFailure::kNone;
  Error last_error_{ErrorCode::kParse, {}};
  bool stopped_ = false;                 // a failure or the array's end was accepted
  // Salvage: byte ranges [from, to) skipped after a syntax error, and why.
  struct Skipped {
    std::int64_t from = 0, to = 0;
    std::int64_t at = 0;  // the syntax error
    std::string why;
  };
  std::vector<Skipped> skipped_;
  struct LaneKeyHash {
    std::size_t operator()(const std::pair<TraceId, TraceId> &k) const;
  };
  std::unordered_map<std::pair<TraceId, TraceId>, std::uint32_t, LaneKeyHash> lane_index_;
  bool truncated_ = false;
  std::int64_t truncated_at_ = -1;
  bool saw_events_key_ = false;
  std::mutex progress_mu_;
  std::uint64_t progress_done_ = 0;
  // Merged side records (global event indices / lanes).
  std::vector<internal::MetaRecord> meta_;
  std::vector<internal::DeviceHint> hints_;
  std::vector<std::uint8_t> lane_hinted_;  // per lane: bit 0 a device hint kept, bit 1 a stream hint
  std::vector<internal::EndMarker> ends_;
  bool saw_2022_args_ = false;
  bool saw_begin_ = false;
  bool saw_tprof_ = false;
  // Streamed .gz (stream_ set): bytes_ holds the text from offset
  // bytes_.data() - origin_ (origin_ is where offset 0 would be; a text
  // offset is `p - origin_` in every mode), in the window win_ or, when the
  // tail kept outgrew the window's headroom, in big_.
  internal::GunzipStream *stream_ = nullptr;
  std::uint64_t compressed_size_ = 0;
  const char *origin_ = nullptr;
  bool final_ = true;  // no more text comes
  internal::GunzipStream::Window win_{};
  std::vector<char> big_;
  bool reserved_ = false;
  std::shared_ptr<ArgsArena> args_owner_ = std::make_shared<ArgsArena>();
  ArgsArena &args_ = *args_owner_;
  bool args_failed_ = false;  // the arena could not grow
  bool strings_full_ = false;  // a string pool ran out of 32-bit ids (StringPool::full)
  // Streaming (sink_ set).
  internal::EventStream *sink_ = nullptr;
  internal::StreamedTrace *out_ = nullptr;
  Status sink_status_;  // the sink's first error
  bool dropped_ = false;                 // past the model limit: only M and B events kept
  std::vector<std::uint32_t> kept_ids_;  // once dropped_: trace-wide index per event kept
  std::uint64_t seen_events_ = 0;        // every event merged
  std::int64_t seen_lo_ = 0, seen_hi_ = 0;  // ts range of every event (baseTimeNanoseconds' check)
  std::vector<std::uint8_t> lane_activity_;  // per lane: internal::lane_activity of every event
};

Result<bool> Reader::refill(const char **keep) {
  if (final_) return false;
  const char *end = text_end();
  const std::size_t tail = static_cast<std::size_t>(end - *keep);
  const std::uint64_t keep_off = static_cast<std::uint64_t>(*keep - origin_);
  if (tail > kMaxStreamTailBytes) {
    return error_at(Error(ErrorCode::kUnsupported,
                          "one JSON value of more than " + std::to_string(kMaxStreamTailBytes >> 20) +
                              " MiB (an event, a top-level value or a damaged "
                              "stretch) in a streamed .gz: "
                              "decompress it to a file and read that",
                          {}, static_cast<std::int64_t>(keep_off)));
  }
  internal::GunzipStream::Window w;
  if (!stream_->next(&w)) {
    final_ = true;
    if (const Error *e = stream_->end_error(); e != nullptr) return error_at(*e);
    return false;
  }
  if (tail <= stream_->headroom()) {
    char *dst = w.data - tail;
    if (tail > 0) std::memcpy(dst, *keep, tail);
    bytes_ = std::string_view(dst, tail + w.size);
    big_ = std::vector<char>();
    stream_->recycle(win_);
    win_ = w;
  } else {
    std::vector<char> joined(tail + w.size + 64, '\0');
    std::memcpy(joined.data(), *keep, tail);
    std::memcpy(joined.data() + tail, w.data, w.size);
    big_.swap(joined);
    bytes_ = std::string_view(big_.data(), tail + w.size);
    stream_->recycle(win_);
    stream_->recycle(w);
    win_ = internal::GunzipStream::Window{};
  }
  // Where text offset 0 would be: offsets stay those of the whole text.
  origin_ = reinterpret_cast<const char *>(reinterpret_cast<std::uintptr_t>(bytes_.data()) - keep_off);
  *keep = bytes_.data();
  if (options_.progress) options_.progress(stream_->compressed_done(), compressed_size_);
  return true;
}

Status Reader::wait_for_text(JsonCursor *c) {
  c->skip_ws();
  while (c->pos() >= text_end() && !final_) {
    const char *keep = text_end();
    TPROF_TRY(refill(&keep));
    *c = JsonCursor(keep, text_end(), origin_);
    c->skip_ws();
  }
  return {};
}

void Reader::drain() {
  if (stream_ == nullptr) return;
  internal::GunzipStream::Window w;
  while (!final_ && stream_->next(&w)) stream_->recycle(w);
  final_ = true;
}

Status Reader::check_model_size() {
  const std::uint64_t limit = options_.max_model_bytes > 0
                                  ? options_.max_model_bytes
                                  : static_cast<std::uint64_t>(internal::half_physical_memory());
  const std::uint64_t model = static_cast<std::uint64_t>(trace_.events.size()) * kEventColumnBytes + args_.size;
  if (model <= limit) return {};
  return error_at(Error(
      ErrorCode::kUnsupported,
      "its events and args pass " + std::to_string(limit >> 20) + " MiB (the limit: " +
          (options_.max_model_bytes > 0 ? std::string("max_model_bytes") : std::string("half the physical memory")) +
          "); a gzip bomb, or a trace larger than this machine reads",
      {}, -1));
}

void Reader::report_progress(std::size_t bytes) {
  if (!options_.progress) return;
  std::lock_guard<std::mutex> lock(progress_mu_);
  progress_done_ += bytes;
  options_.progress(progress_done_, bytes_.size());
}

void Reader::parse_chunk(ChunkResult *r, const ParseContext &ctx) {
  JsonCursor c(r->start, text_end(), origin_);
  r->end = internal::parse_event_elements(&c, r->stop_at, ctx, &r->batch, r->after_element);
  r->failure = c.failure();
  if (r->end.failed) r->error = c.error();
  if (!final_ && r->end.failed && r->failure == CursorFailure::kEof) {
    // Streamed: the text ran out inside an element that the next window
    // completes. The chunk ends before that element, whose partial reading
    // (diagnostics of fields already read) is parsed again: its start is
    // where the next window's text begins.
    const char *element = r->end.element;
    if (element == nullptr || element >= text_end()) {
      // Between elements (after_element: the next window begins with the
      // separator check).
      r->end.failed = false;
    } else {
      r->batch = EventBatch();
      ChunkEnd end;
      end.pos = element;
      if (element > r->start) {
        JsonCursor again(r->start, text_end(), origin_);
        end = internal::parse_event_elements(&again, element, ctx, &r->batch);
        if (end.failed) {  // cannot be: it read these bytes before
          r->error = again.error();
          r->failure = again.failure();
          r->end = end;
          return;
        }
      }
      r->end = end;
    }
    r->failure = CursorFailure::kNone;
  }
  const std::size_t len = static_cast<std::size_t>(r->end.pos - r->start);
  if (map_ != nullptr) map_->release(static_cast<std::size_t>(r->start - bytes_.data()), len);
  if (stream_ == nullptr) report_progress(len);
}

void Reader::reserve_events(const char *first, const char *end, std::size_t total) {
  // Reserve the columns from the event density of the first megabytes (a
  // count of "ph" keys), with headroom. Reserved but untouched memory is not
  // resident, and growing by doubling would copy gigabytes.
  const std::size_t region = std::max(static_cast<std::size_t>(end - first), total);
  const std::size_t sample = std::min<std::size_t>(static_cast<std::size_t>(end - first), 4u << 20);
  std::size_t count = 0;
  const std::string_view view(first, sample);
  for (std::size_t pos = view.find("\"ph\""); pos != std::string_view::npos; pos = view.find("\"ph\"", pos + 4)) ++count;
  const double per_byte = sample > 0 ? static_cast<double>(count) / static_cast<double>(sample) : 0.0;
  trace_.events.reserve(static_cast<std::size_t>(per_byte * static_cast<double>(region) * 1.25) + 1024);
}

Status Reader::parse_array(JsonCursor *c, const ParseContext &ctx) {
  int threads = options_.threads > 0 ? options_.threads : static_cast<int>(std::thread::hardware_concurrency());
  // More parsers than this gain nothing, and the chunk guesses scale with
  // the count (2^31 threads once meant 2^31 boundary searches).
  threads = std::clamp(threads, 1, kMaxReaderThreads);
  if (stream_ == nullptr) {
    parse_span(c->pos(), text_end(), ctx, threads);
    return finish_array(c);
  }
  // Streamed .gz: the inflater has a core of its own; each window is parsed
  // up to its last event start, and the text from there is kept for the
  // next window.
  if (options_.threads <= 0) threads = std::max(1, threads - 1);
  const char *first = c->pos();
  bool after_element = false;
  for (;;) {
    const char *stop = final_ ? text_end() : find_last_boundary(first, text_end());
    parse_span(first, stop, ctx, threads, after_element);
    if (sink_ == nullptr) TPROF_TRY(check_model_size());
    if (final_ || last_end_.array_closed || !sink_status_ || strings_full_) break;
    const char *keep = nullptr;
    after_element = last_end_.after_element;
    if (!last_end_.failed) {
      keep = last_end_.pos;
    } else if (last_failure_ == CursorFailure::kSyntax && !options_.strict) {
      // Salvage found nothing to resume at in this window: read on, keeping
      // the damaged element, and look again (after_element: the failure is
      // a missing ',' or ']', read again from there with that check first).
      keep = last_end_.element != nullptr ? last_end_.element : origin_ + last_error_.byte_offset();
      skipped_.erase(
          std::remove_if(skipped_.begin(), skipped_.end(), [&](const Skipped &k) { return k.from >= keep - origin_; }),
          skipped_.end());
    } else {
      break;  // an error that stands
    }
    TPROF_TRY(refill(&keep));
    first = keep;
  }
  return finish_array(c);
}

void Reader::parse_span(const char *first, const char *end, const ParseContext &ctx, int threads,
                        bool after_element) {
  const std::size_t region = static_cast<std::size_t>(end - first);

  // Guess chunk starts.
  std::vector<std::unique_ptr<ChunkResult>> guesses;
  auto add_guess = [&](const char *start) {
    auto r = std::make_unique<ChunkResult>();
    r->start = start;
    guesses.push_back(std::move(r));
  };
  add_guess(first);
  guesses.front()->after_element = after_element;
  // Large arrays are split even for one thread: parsed chunks release their
  // pages and batches as they are merged, which bounds peak memory.
  if (region >= options_.min_parallel_bytes) {
    const std::size_t n = std::max<std::size_t>(static_cast<std::size_t>(threads),
                                                region / std::max<std::size_t>(options_.chunk_bytes, 1));
    const std::size_t step = region / n;
    for (std::size_t i = 1; i < n; ++i) {
      const char *b = find_boundary(first + i * step, first, end);
      if (b >= end) break;
      if (b > guesses.back()->start) add_guess(b);
    }
  }
  for (std::size_t i = 0; i < guesses.size(); ++i) {
    guesses[i]->stop_at = i + 1 < guesses.size() ? guesses[i + 1]->start : end;
  }
  if (!reserved_ && sink_ == nullptr) {  // streaming keeps a batch at a time, or all: unknown
    reserved_ = true;
    if (stream_ == nullptr) {
      reserve_events(first, end);
    } else {
      // The text to come, from the compression ratio so far.
      const double done = static_cast<double>(std::max<std::uint64_t>(stream_->compressed_done(), 1));
      const double ratio = static_cast<double>(stream_->text_done()) / done;
      reserve_events(first, end, static_cast<std::size_t>(ratio * static_cast<double>(compressed_size_)));
    }
  }
  parsed_.assign(guesses.size(), 0);
  next_merge_ = 0;
  stopped_ = false;
  last_end_ = ChunkEnd{};
  last_end_.pos = first;

  // Parse (in parallel when there is more than one chunk) and merge as the
  // chunks complete in order.
  std::atomic<std::size_t> next{0};
  // Streaming, the sink is slower than the parsers: a chunk is parsed only
  // a few ahead of the merge, so parsed batches do not pile up (memory
  // would grow with the file).
  const std::size_t ahead = static_cast<std::size_t>(threads) + 2;
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < guesses.size();) {
      if (sink_ != nullptr) {
        std::unique_lock<std::mutex> lock(merge_mu_);
        merged_cv_.wait(lock, [&] { return i < next_merge_ + ahead; });
      }
      parse_chunk(guesses[i].get(), ctx);
      {
        std::lock_guard<std::mutex> lock(merge_mu_);
        parsed_[i] = 1;
      }
      merge_ready(&guesses, ctx);
    }
  };
  std::vector<std::thread> pool;
  const int helpers = std::min<int>(threads, static_cast<int>(guesses.size())) - 1;
  pool.reserve(static_cast<std::size_t>(std::max(helpers, 0)));
  for (int t = 0; t < helpers; ++t) {
    // Out of threads (a process or container limit): the ones started, and
    // this one, parse every chunk anyway. The library never throws.
    try {
      pool.emplace_back(work);
    } catch (const std::system_error &) {
      break;
    }
  }
  work();
  for (auto &t : pool) t.join();
  merge_ready(&guesses, ctx);
}

Status Reader::finish_array(JsonCursor *c) {
  const char *end = text_end();
  for (const Skipped &s : skipped_) {
    trace_.diagnostics.add(DiagnosticCode::kSkippedBytes, s.from,
                           "bytes " + std::to_string(s.from) + ".." + std::to_string(s.to) + " skipped (" +
                               std::to_string(s.to - s.from) + " bytes): " + s.why +
                               "; reading resumed at the next event (--strict refuses the file "
                               "instead)");
  }
  if (last_end_.failed) {
    const char *at = origin_ + last_error_.byte_offset();
    if (last_failure_ == CursorFailure::kEof || only_padding(at, end)) {
      truncated_ = true;
      truncated_at_ = last_error_.byte_offset();
      *c = JsonCursor(end, end, origin_);
      return {};
    }
    return error_at(last_error_);
  }
  *c = JsonCursor(last_end_.pos, end, origin_);
  return {};
}

void Reader::merge_ready(std::vector<std::unique_ptr<ChunkResult>> *guesses, const ParseContext &ctx) {
  {
    std::lock_guard<std::mutex> lock(merge_mu_);
    if (merging_) return;  // the merging thread will see what became ready
    merging_ = true;
  }
  for (;;) {
    std::unique_ptr<ChunkResult> g;
    {
      // Taking the next chunk and giving up the merger role happen under the
      // same lock that marks chunks parsed, so no ready chunk is left behind.
      std::lock_guard<std::mutex> lock(merge_mu_);
      if (next_merge_ >= guesses->size() || !parsed_[next_merge_]) {
        merging_ = false;
        return;
      }
      g = std::move((*guesses)[next_merge_++]);
      if (sink_ != nullptr) merged_cv_.notify_all();
    }
    if (stopped_) continue;  // after a failure or the array's end: discarded
    if (g->start != last_end_.pos) {
      // A misguessed start (inside a string or nested args): parse this
      // stretch again from where the previous chunk really stopped.
      auto redo = std::make_unique<ChunkResult>();
      redo->start = last_end_.pos;
      redo->after_element = last_end_.after_element;
      redo->stop_at = g->stop_at;
      g = std::move(redo);
      parse_chunk(g.get(), ctx);
    }
    append_batch(&g->batch);
    release_streamed(g->start, g->end.pos);
    last_end_ = g->end;
    last_failure_ = g->failure;
    last_error_ = g->error;
    // Salvage a syntax error: skip from the damaged element to the next one
    // the reader can resynchronise on, and read on. In merge order, so the
    // result does not depend on how the array was split.
    while (!options_.strict && last_end_.failed && last_failure_ == CursorFailure::kSyntax) {
      const char *end = text_end();
      const char *fail_at = origin_ + last_error_.byte_offset();
      const char *resume = find_resync(std::max(fail_at, last_end_.pos), bytes_.data(), end);
      if (resume >= end) break;  // nothing to resume at: the error (or truncation) stands
      const char *from = last_end_.element != nullptr ? last_end_.element : fail_at;
      skipped_.push_back({from - origin_, resume - origin_, last_error_.byte_offset(), last_error_.message()});
      if (resume >= g->stop_at) {
        // The next chunks start from here (a misguessed start is re-read).
        last_end_ = ChunkEnd{};
        last_end_.pos = resume;
        last_failure_ = CursorFailure::kNone;
        break;
      }
      auto rest = std::make_unique<ChunkResult>();
      rest->start = resume;
      rest->stop_at = g->stop_at;
      parse_chunk(rest.get(), ctx);
      append_batch(&rest->batch);
      release_streamed(rest->start, rest->end.pos);
      last_end_ = rest->end;
      last_failure_ = rest->failure;
      last_error_ = rest->error;
    }
    stopped_ = stopped_ || last_end_.failed || last_end_.array_closed;
  }
}

Status Reader::parse_top_level() {
  if (stream_ != nullptr) {
    // The first window (the BOM and the first byte need it).
    const char *keep = bytes_.data();
    TPROF_TRY(refill(&keep));
  }
  const char *begin = bytes_.data();
  const char *start = begin;
  if (bytes_.size() >= 3 && std::memcmp(begin, "\xEF\xBB\xBF", 3) == 0) start += 3;  // UTF-8 BOM
  JsonCursor c(start, text_end(), origin_);
  TPROF_TRY(wait_for_text(&c));
  const char first = c.peek();
  if (c.pos() >= text_end()) {
    const bool empty = stream_ != nullptr ? stream_->text_done() == 0 : bytes_.empty();
    return error_at(
        Error(ErrorCode::kFormat,
              empty ? "empty file, expected a JSON object or array" : "no JSON value, expected a JSON object or array",
              {}, c.offset()));
  }
  if (first == '[') {
    trace_.meta.format = TraceFormat::kLegacyArray;
    c.eat('[');
    TPROF_TRY(wait_for_text(&c));
    // torch's legacy export: an array of events without "cat".
    const char next = c.peek();
    if (next != '{' && next != ']' && c.pos() < text_end()) {
      return error_at(Error(ErrorCode::kFormat, "top-level array does not hold trace events (expected '{' or ']')", {},
                            c.offset()));
    }
    saw_events_key_ = true;
    ParseContext ctx;
    ctx.legacy_array = true;
    ctx.token_walker = options_.token_walker;
    ctx.strict = options_.strict;
    TPROF_TRY(parse_array(&c, ctx));
    // An array of objects none of which is an event (no "ph") is some other
    // JSON document, not a trace with nothing in it.
    if (trace_.events.size() == 0 && trace_.diagnostics.count(DiagnosticCode::kMissingField) > 0 && !truncated_) {
      return error_at(Error(ErrorCode::kFormat,
                            "top-level array holds objects without \"ph\": not "
                            "a Chrome/Kineto trace",
                            {}, 0));
    }
  } else if (first == '{') {
    TPROF_TRY(parse_object(&c));
    if (truncated_) return {};
  } else {
    c.fail_here("a JSON object or array (a trace)");
    return error_at(Error(ErrorCode::kFormat, c.error().message(), {}, c.offset()));
  }
  if (truncated_) return {};
  // Data after the value: whitespace and NUL padding are fine. A streamed
  // .gz is read to its end (what follows may be damaged).
  TPROF_TRY(wait_for_text(&c));
  std::int64_t junk_at = c.pos() < text_end() ? c.offset() : -1;
  for (;;) {
    if (c.pos() < text_end() && !only_padding(c.pos(), text_end())) {
      trace_.diagnostics.add(DiagnosticCode::kTrailingData, junk_at,
                             "data after the end of the top-level JSON value, ignored");
      break;
    }
    if (final_) break;
    const char *keep = text_end();
    TPROF_TRY(refill(&keep));
    c = JsonCursor(keep, text_end(), origin_);
    if (junk_at < 0) {
      TPROF_TRY(wait_for_text(&c));
      if (c.pos() < text_end()) junk_at = c.offset();
    }
  }
  while (!final_) {
    const char *keep = text_end();
    TPROF_TRY(refill(&keep));
  }
  return {};
}

Status Reader::parse_object(JsonCursor *cp) {
  JsonCursor &c = *cp;
  c.eat('{');
  TPROF_TRY(wait_for_text(&c));
  bool closed = c.eat('}');
  while (!closed) {
    TPROF_TRY(wait_for_text(&c));
    const char *key_start = c.pos();
    TPROF_TRY_ASSIGN(const bool ok, top_level_key(&c));
    if (truncated_) return {};
    if (ok) {
      TPROF_TRY(wait_for_text(&c));
      if (c.eat(',')) continue;
      if (c.expect('}', "',' or '}' at the top level")) {
        closed = true;
        break;
      }
    }
    // Streamed: a key or value that runs into the window's end is read
    // again from its start with the next window.
    if (!final_ && (c.failure() == CursorFailure::kEof || c.pos() >= text_end())) {
      const char *keep = key_start;
      TPROF_TRY(refill(&keep));
      c = JsonCursor(keep, text_end(), origin_);
      continue;
    }
    break;
  }
  if (!closed) {
    if (c.failure() == CursorFailure::kEof || only_padding(c.pos(), text_end())) {
      truncated_ = true;
      truncated_at_ = c.failure_offset();
      return {};
    }
    return error_at(c.error());
  }
  if (!saw_events_key_) {
    return error_at(Error(ErrorCode::kFormat, "JSON object without \"traceEvents\": not a Chrome/Kineto trace", {}, 0));
  }
  return {};
}

Result<bool> Reader::top_level_key(JsonCursor *c) {
  JsonCursor::Str key;
  if (!c->read_string(&key) || !c->expect(':', "':' after an object key")) return false;
  std::string k;
  if (key.escaped) {
    internal::unescape_json(key.raw, &k);
  } else {
    k.assign(key.raw);
  }
  const char *end = text_end();
  if (k == "traceEvents") {
    TPROF_TRY(wait_for_text(c));
    end = text_end();
    if (c->peek() != '[') {
      if (c->pos() >= end) {
        c->fail_here("'[' after \"traceEvents\"");  // cut after the ':':
                                                    // truncation at the cut
        return false;
      }
      return error_at(Error(ErrorCode::kFormat, "\"traceEvents\" is not an array (expected '[')", {}, c->offset()));
    }
    c->eat('[');
    saw_events_key_ = true;
    ParseContext ctx;
    ctx.token_walker = options_.token_walker;
    ctx.strict = options_.strict;
    TPROF_TRY(parse_array(c, ctx));
    return true;
  }
  c->skip_ws();
  const char *v_start = c->pos();
  if (!c->skip_value()) return false;
  // A number that runs into the cut may have lost digits (a cut
  // "baseTimeNanoseconds" would shift every event): not a value yet.
  if (c->pos() >= end && (*v_start == '-' || (*v_start >= '0' && *v_start <= '9'))) {
    c->fail_here("',' or '}' after a number");
    return false;
  }
  std::string raw(v_start, c->pos());
  // Stored as read and exported as JSON (the SQLite export's top_level,
  // json_extract), so strict JSON as args are (docs/reliability.md, "Args
  // objects"): what the lenient skip let through is re-emitted by the one
  // escaper, or null when it does not parse; --strict fails there.
  internal::JsonProblem problem;
  if (!internal::check_strict_json(v_start, c->pos(), &problem)) {
    if (options_.strict) {
      c->fail_in(problem.at, problem.what, "in a top-level value (--strict reads it as JSON)");
      return false;
    }
    std::string repaired = internal::canonical_json(raw);
    const std::string what = internal::describe_json_problem(problem, c->pos(), "the end of the value");
    const std::int64_t at = c->offset(std::min(problem.at, c->pos()));
    const std::string name = "top-level \"" + internal::safe_text(std::string_view(k).substr(0, 64)) + "\"";
    if (repaired.empty()) {
      trace_.diagnostics.add(DiagnosticCode::kMalformedValue, at, name + " is not JSON (" + what + "); stored as null");
      raw = "null";
    } else {
      trace_.diagnostics.add(DiagnosticCode::kMalformedValue, at,
                             name + " is not strict JSON (" + what +
                                 "); stored repaired: strings re-escaped, NaN and Infinity as null");
      raw = std::move(repaired);
    }
  }
  if (k == "tprof") {
    // Written by tprof's capture: how many events its buffers dropped.
    saw_tprof_ = true;
    auto value = internal::JsonValue::parse(raw, c->offset(v_start));
    const internal::JsonValue *d = value ? value->find("droppedEvents") : nullptr;
    std::int64_t n = 0;
    if (d != nullptr && d->get_int(&n) && n > 0) {
      trace_.meta.dropped_events = static_cast<std::uint64_t>(n);
      trace_.diagnostics.add(DiagnosticCode::kDroppedEvents, c->offset(v_start),
                             std::to_string(n) + " events were dropped by the recorder (full thread buffers)");
    }
    // Kept scopes without their shapes, and scopes open at the window's end.
    std::int64_t shapes = 0, unfinished = 0;
    const internal::JsonValue *ds = value ? value->find("droppedShapes") : nullptr;
    if (ds != nullptr && ds->get_int(&shapes) && shapes > 0) {
      trace_.meta.dropped_shapes = static_cast<std::uint64_t>(shapes);
      trace_.diagnostics.add(DiagnosticCode::kDroppedEvents, c->offset(v_start),
                             std::to_string(shapes) +
                                 " kept scopes lost their input shapes (the "
                                 "recorder's payload arenas were full)");
    }
    const internal::JsonValue *us = value ? value->find("unfinishedScopes") : nullptr;
    if (us != nullptr && us->get_int(&unfinished) && unfinished > 0) {
      trace_.meta.unfinished_scopes = static_cast<std::uint64_t>(unfinished);
      trace_.diagnostics.add(DiagnosticCode::kUnfinishedScopes, c->offset(v_start),
                             std::to_string(unfinished) +
                                 " scopes were still open when the "
                                 "window ended: left out of the trace");
    }
    // Why a requested activity (CUDA) was not recorded.
    const internal::JsonValue *u = value ? value->find("activityUnavailable") : nullptr;
    if (u != nullptr && u->is_array()) {
      for (const internal::JsonValue &why : u->items()) {
        if (why.is_string()) {
          trace_.diagnostics.add(DiagnosticCode::kActivityUnavailable, c->offset(v_start), why.text());
        }
      }
    }
  } else if (k == "baseTimeNanoseconds") {
    std::int64_t base = 0;
    if (internal::parse_int64(raw, &base)) {
      trace_.meta.base_time_ns = base;
    } else {
      trace_.diagnostics.add(DiagnosticCode::kBadFieldType, c->offset(v_start),
                             "\"baseTimeNanoseconds\" is not an integer, ignored");
    }
  }
  trace_.meta.top_level.emplace_back(std::move(k), std::move(raw));
  return true;
}

std::size_t Reader::LaneKeyHash::operator()(const std::pair<TraceId, TraceId> &k) const {
  // Each operand of a multiply-fold is offset by a constant: mix64(0, x) is
  // 0 for every x, which once sent every lane of pid 0 to one bucket
  // (100k threads: quadratic).
  auto h = [](const TraceId &id) {
    return id.is_str
               ? internal::mix64(id.str ^ 0x9e3779b97f4a7c15ull, 0xff51afd7ed558ccdull)
               : internal::mix64(static_cast<std::uint64_t>(id.num) ^ 0xa0761d6478bd642full, 0xc4ceb9fe1a85ec53ull);
  };
  return static_cast<std::size_t>(internal::mix64(h(k.first) ^ 0xe7037ed1a0b428dbull, h(k.second) + 1));
}

void Reader::append_batch(EventBatch *b) {
  EventColumns &out = trace_.events;
  const std::uint32_t base = static_cast<std::uint32_t>(out.size());
  // Streaming past the model limit, the model's indices are not the
  // trace's: diagnostics name trace-wide ones.
  const std::uint64_t first_id = sink_ != nullptr ? seen_events_ : base;
  std::vector<StrId> smap(b->strings.size());
  for (StrId i = 0; i < b->strings.size(); ++i) smap[i] = trace_.strings.intern(b->strings.str(i));
  if (b->strings.full() || trace_.strings.full()) {
    strings_full_ = true;  // the read fails (run()); the chunks still to merge are discarded
    stopped_ = true;
  }
  auto map_id = [&](TraceId id) {
    if (id.is_str) id.str = smap[id.str];
    return id;
  };
  std::vector<std::uint32_t> lmap(b->lanes.size());
  for (std::uint32_t i = 0; i < b->lanes.size(); ++i) {
    auto key = std::make_pair(map_id(b->lanes[i].pid), map_id(b->lanes[i].tid));
    auto [it, added] = lane_index_.try_emplace(key, static_cast<std::uint32_t>(trace_.lanes.size()));
    if (added) {
      Lane lane;
      lane.pid = key.first;
      lane.tid = key.second;
      trace_.lanes.push_back(lane);
    }
    lmap[i] = it->second;
  }
  const EventColumns &in = b->events;
  const std::size_t n = in.size();
  auto append = [](auto &dst, const auto &src) { dst.insert(dst.end(), src.begin(), src.end()); };
  append(out.ts_ns, in.ts_ns);
  append(out.dur_ns, in.dur_ns);
  append(out.phase, in.phase);
  append(out.kind, in.kind);
  append(out.flags, in.flags);
  append(out.external_id, in.external_id);
  append(out.correlation, in.correlation);
  append(out.args_ref, in.args_ref);
  append(out.src_offset, in.src_offset);
  for (std::size_t i = 0; i < n; ++i) {
    out.name.push_back(smap[in.name[i]]);
    out.cat.push_back(smap[in.cat[i]]);
    out.lane.push_back(lmap[in.lane[i]]);
    std::int64_t fid = in.flow_id[i];
    if (fid <= -2) fid = -static_cast<std::int64_t>(smap[static_cast<StrId>(-fid - 2)]) - 2;
    out.flow_id.push_back(fid);
  }
  const std::size_t memory_from = trace_.memory.size();
  for (MemoryRecord m : b->memory) {
    m.event += base;
    trace_.memory.push_back(m);
  }
  for (internal::MetaRecord m : b->meta) {
    m.event += base;
    m.text = smap[m.text];
    meta_.push_back(m);
  }
  for (internal::DeviceHint h : b->device_hints) {
    // finish_lanes takes each lane's first device and first stream: only a
    // hint that gives one the lane has no hint for yet is kept (one per
    // device activity would grow with the trace).
    h.lane = lmap[h.lane];
    if (h.lane >= lane_hinted_.size()) lane_hinted_.resize(trace_.lanes.size(), 0);
    const std::uint8_t gives = static_cast<std::uint8_t>((h.device >= 0 ? 1 : 0) |
                                                         (h.stream >= 0 && h.stream <= INT32_MAX ? 2 : 0));
    if ((gives & ~lane_hinted_[h.lane]) == 0) continue;
    lane_hinted_[h.lane] |= gives;
    hints_.push_back(h);
  }
  for (internal::EndMarker e : b->ends) {
    e.lane = lmap[e.lane];
    ends_.push_back(e);
  }
  trace_.diagnostics.merge(b->diagnostics, static_cast<std::uint32_t>(first_id));
  saw_2022_args_ |= b->saw_kineto_2022_args;
  saw_begin_ |= b->saw_begin;
  const std::string repaired = std::move(b->args_store);
  *b = EventBatch();  // free its memory now
  if (sink_ != nullptr) {
    std::vector<MemoryRecord> memory(trace_.memory.begin() + static_cast<std::ptrdiff_t>(memory_from),
                                     trace_.memory.end());
    for (MemoryRecord &m : memory) m.event = static_cast<std::uint32_t>(first_id + (m.event - base));
    stream_batch(base, first_id, memory, repaired);
    return;
  }
  if (!repaired.empty()) own_repaired(base, repaired);
  if (stream_ != nullptr) own_args(base);
}

void Reader::own_repaired(std::uint32_t from, std::string_view repaired) {
  EventColumns &ev = trace_.events;
  for (std::size_t i = from; i < ev.size(); ++i) {
    const std::uint64_t ref = ev.args_ref[i];
    if ((ref & args_ref::kOwnedBit) == 0) continue;
    const std::string_view json = internal::batch_args(ref, repaired);
    trace_.set_args_json(static_cast<std::uint32_t>(i), json);
  }
}

void Reader::own_args(std::uint32_t from) {
  // Streamed: the window goes back to the inflater, so each event's args
  // move to the trace's arena now (the model then holds them, and
  // Trace::args_json reads them there as from a source).
  EventColumns &ev = trace_.events;
  for (std::size_t i = from; i < ev.size(); ++i) {
    std::uint64_t ref = ev.args_ref[i];
    if (ref == 0 || (ref & args_ref::kOwnedBit) != 0) continue;
    const char *p = origin_ + ((ref & ~args_ref::kOwnedBit) >> args_ref::kLenBits);
    std::uint64_t len = ref & args_ref::kLenMask;
    if (len == args_ref::kLenMask) {
      JsonCursor c(p, text_end(), origin_);
      len = c.skip_value() ? static_cast<std::uint64_t>(c.pos() - p) : 0;
    }
    const std::uint64_t at = args_.size;
    ref = len > 0 && args_.append(p, len) ? args_ref::make(at, len, false) : 0;
    if (len > 0 && ref == 0) args_failed_ = true;
    ev.args_ref[i] = ref;
  }
}

void Reader::stream_batch(std::uint32_t first, std::uint64_t first_id, std::span<const MemoryRecord> memory,
                          std::string_view repaired) {
  const EventColumns &ev = trace_.events;
  const auto count = static_cast<std::uint32_t>(ev.size() - first);
  lane_activity_.resize(trace_.lanes.size(), 0);
  for (std::uint32_t e = first; e < ev.size(); ++e) {
    lane_activity_[ev.lane[e]] |= internal::lane_activity(trace_, e);
    seen_lo_ = std::min(seen_lo_, ev.ts_ns[e]);
    seen_hi_ = std::max(seen_hi_, ev.ts_ns[e] + std::max<std::int64_t>(0, ev.dur_ns[e]));
  }
  if (sink_status_) {
    const internal::StreamedBatch batch{trace_, first, count, first_id, memory, origin_, text_end(), repaired};
    sink_status_ = sink_->batch(batch);
    if (!sink_status_) stopped_ = true;  // the chunks still to merge are discarded
  }
  seen_events_ += count;
  if (!dropped_) {
    if (!repaired.empty()) own_repaired(first, repaired);
    if (stream_ != nullptr) own_args(first);
    const std::uint64_t limit = options_.max_model_bytes > 0
                                    ? options_.max_model_bytes
                                    : static_cast<std::uint64_t>(internal::half_physical_memory());
    const std::uint64_t model = static_cast<std::uint64_t>(ev.size()) * kEventColumnBytes + args_.size +
                                trace_.memory.size() * sizeof(MemoryRecord);
    if (model <= limit) return;
    // Past the limit: from now on the model keeps what finishing the read
    // needs, and the sink has the rest.
    dropped_ = true;
    kept_ids_.clear();
    trace_.memory = {};
    keep_structure(0, 0);
    trace_.events = EventColumns(trace_.events);  // a copy holds only what is left
    // No event kept has args: the arena's copies go.
    std::free(args_.data);
    args_.data = nullptr;
    args_.size = args_.cap = 0;
    return;
  }
  trace_.memory.clear();
  keep_structure(first, first_id);
}

void Reader::keep_structure(std::uint32_t from, std::uint64_t first_id) {
  EventColumns &ev = trace_.events;
  auto keep = [&](std::uint32_t e) {
    return ev.phase[e] == Phase::kMetadata || ((ev.flags[e] & kFlagFromBeginEnd) != 0 && ev.dur_ns[e] < 0);
  };
  // meta_ is in event order: its records from `from` on are renumbered as
  // their events move down.
  auto m = std::lower_bound(meta_.begin(), meta_.end(), from,
                            [](const internal::MetaRecord &r, std::uint32_t e) { return r.event < e; });
  std::uint32_t to = from;
  for (std::uint32_t e = from; e < ev.size(); ++e) {
    if (!keep(e)) continue;
    while (m != meta_.end() && m->event < e) ++m;  // cannot be: an M event is kept
    if (m != meta_.end() && m->event == e) (m++)->event = to;
    ev.copy_row(to, ev, e);
    ev.args_ref[to] = 0;  // the args are the sink's
    kept_ids_.push_back(static_cast<std::uint32_t>(first_id + (e - from)));
    ++to;
  }
  ev.resize(to);
}

void Reader::pair_begin_end() {
  if (!saw_begin_ && ends_.empty()) return;
  // Walk B events and E markers in file order with one stack per lane.
  std::vector<std::uint32_t> begins;
  for (std::uint32_t e = 0; e < trace_.events.size(); ++e) {
    if ((trace_.events.flags[e] & kFlagFromBeginEnd) && trace_.events.dur_ns[e] < 0) begins.push_back(e);
  }
  std::vector<std::vector<std::uint32_t>> stacks(trace_.lanes.size());
  std::size_t bi = 0, ei = 0;
  auto close = [&](const internal::EndMarker &m) {
    auto &st = stacks[m.lane];
    if (st.empty()) {
      trace_.diagnostics.add(DiagnosticCode::kUnmatchedEnd, static_cast<std::int64_t>(m.src_offset),
                             "\"E\" event without a matching \"B\", ignored");
      return;
    }
    const std::uint32_t b = st.back();
    st.pop_back();
    std::int64_t dur = m.ts_ns - trace_.events.ts_ns[b];
    if (dur >= (std::int64_t{1} << 62)) {
      trace_.diagnostics.add(DiagnosticCode::kOutOfRange, static_cast<std::int64_t>(m.src_offset),
                             "\"E\" more than 2^62 ns after its \"B\", kept with dur 0", global_id(b));
      dur = 0;
    } else if (dur < 0) {
      trace_.diagnostics.add(DiagnosticCode::kNegativeDuration, static_cast<std::int64_t>(m.src_offset),
                             "\"E\" before its \"B\", kept with dur 0", global_id(b));
      dur = 0;
    }
    trace_.events.dur_ns[b] = dur;
  };
  while (bi < begins.size() || ei < ends_.size()) {
    const bool take_begin =
        ei >= ends_.size() || (bi < begins.size() && trace_.events.src_offset[begins[bi]] < ends_[ei].src_offset);
    if (take_begin) {
      stacks[trace_.events.lane[begins[bi]]].push_back(begins[bi]);
      ++bi;
    } else {
      close(ends_[ei++]);
    }
  }
  for (auto &st : stacks) {
    for (std::uint32_t b : st) {
      trace_.events.dur_ns[b] = 0;
      trace_.diagnostics.add(DiagnosticCode::kUnmatchedBegin,
                             static_cast<std::int64_t>(trace_.events.src_offset[b]),
                             "\"B\" event without a matching \"E\", kept with dur 0", global_id(b));
    }
  }
}

Result<Trace> Reader::run(Trace trace) {
  trace_ = std::move(trace);
  const Status parsed = parse_top_level();
  if (!sink_status_) return sink_status_.error();  // it names its own file
  if (strings_full_) return strings_full_error();  // the read stopped there
  TPROF_TRY(parsed);
  if (stream_ != nullptr) {
    if (args_failed_) {
      return error_at(Error(ErrorCode::kUnsupported,
                            "not enough memory for the args of its " + std::to_string(trace_.events.size()) + " events",
                            {}, -1));
    }
    const ArgsArena *arena = args_owner_.get();
    trace_.attach_source(args_owner_, std::string_view(arena->data != nullptr ? arena->data : kNoText, arena->size));
  }
  const std::uint64_t events = sink_ != nullptr ? seen_events_ : trace_.events.size();
  if (truncated_ && options_.strict) {
    // A cut file is the loudest damage there is; --strict promises to
    // refuse a file it cannot read whole.
    return error_at(Error(ErrorCode::kParse,
                          "file ends early (a job killed mid-write?) after " + std::to_string(events) +
                              " complete events; --strict refuses a truncated trace",
                          {}, static_cast<std::int64_t>(truncated_at_)));
  }
  if (truncated_) {
    trace_.diagnostics.add(DiagnosticCode::kTruncated, truncated_at_,
                           "file ends early (a job killed mid-write?): loaded " + std::to_string(events) +
                               " complete events before the cut");
  }
  pair_begin_end();
  std::int64_t shift = 0;
  if (trace_.meta.base_time_ns) {
    // Applied only if every event stays within ±2^62 ns (see
    // EventSink::commit).
    const std::int64_t base = *trace_.meta.base_time_ns;
    constexpr std::int64_t kMaxTime = std::int64_t{1} << 62;
    std::int64_t lo = seen_lo_, hi = seen_hi_;  // streamed: every event but the B/E pairs' ends
    for (std::size_t e = 0; e < trace_.events.size(); ++e) {
      const std::int64_t ts = trace_.events.ts_ns[e];
      lo = std::min(lo, ts);
      hi = std::max(hi, ts + std::max<std::int64_t>(0, trace_.events.dur_ns[e]));  // its end, too
    }
    if (base > -kMaxTime && base < kMaxTime && lo + base > -kMaxTime && hi + base < kMaxTime) {
      for (auto &ts : trace_.events.ts_ns) ts += base;
      shift = base;
    } else {
      // The times stay as written, relative to nothing: a writer of this
      // trace must not subtract the base from them (the top-level key is
      // kept as it was, so a rewritten file reads back the same).
      trace_.meta.base_time_ns.reset();
      trace_.diagnostics.add(DiagnosticCode::kOutOfRange, -1,
                             "\"baseTimeNanoseconds\" would put events beyond ±2^62 ns; ignored");
    }
  }
  trace_.meta.producer = trace_.meta.format == TraceFormat::kLegacyArray ? Producer::kTorchLegacy
                         : saw_2022_args_                                 ? Producer::kKineto2022
                         : saw_tprof_                                     ? Producer::kTprof
                                                                          : Producer::kKineto;
  trace_.meta.step_range = options_.step_range;
  if (sink_ != nullptr) lane_activity_.resize(trace_.lanes.size(), 0);
  internal::assemble_trace(&trace_, meta_, hints_,
                           sink_ != nullptr ? std::span<const std::uint8_t>(lane_activity_)
                                            : std::span<const std::uint8_t>(),
                           !dropped_);
  if (trace_.strings.full()) return strings_full_error();
  if (out_ != nullptr) {
    out_->whole = !dropped_;
    out_->events = events;
    out_->ts_shift = shift;
    for (std::uint32_t e = 0; e < trace_.events.size(); ++e) {
      if (trace_.events.flags[e] & kFlagFromBeginEnd) out_->joined.emplace_back(global_id(e), trace_.events.dur_ns[e]);
    }
    out_->ids = std::move(kept_ids_);
  }
  return std::move(trace_);
}

// A mapped input cut short while it was read: what was parsed past the new
// end was zeros, so no part of the result can be trusted.
Error shrunk_error(const std::string &path) {
  return Error(ErrorCode::kIo,
               "the file shrank while it was read (is another program "
               "rewriting it?); read it again once it is "
               "complete",
               path);
}

struct OwnedBytes {
  std::unique_ptr<char[]> data;
  std::size_t size = 0;
};

// A streamed .gz. A cut stream is read as a truncated trace (every
// complete event kept). A damaged one (a CRC mismatch, an invalid block)
// may have decoded garbage before zlib noticed: a JSON error in it, or a
// stretch salvage skipped, is reported as the gzip damage, at its compressed
// offset, which is what `gzip -t` says, rather than at an offset in text
// nobody can see (salvage is for text that is right around its damage).
Result<Trace> read_gzip(std::string_view compressed, const std::string &path, const ReadOptions &options,
                        const internal::GunzipLimits &limits, internal::EventStream *sink = nullptr,
                        internal::StreamedTrace *out = nullptr) {
  // Windows sized to the stream: a small .gz (Kineto JSON inflates 10-15x)
  // gets small ones, not three 9 MiB buffers (under ASan their mapping and
  // unmapping was most of a fuzz corpus's time); a tail that outgrows the
  // headroom moves to its own buffer as before.
  const std::size_t window =
      std::clamp<std::size_t>(compressed.size() > kStreamWindowBytes / 64 ? kStreamWindowBytes : compressed.size() * 64,
                              std::size_t{64} << 10, kStreamWindowBytes);
  const std::size_t headroom = std::min(kStreamHeadroomBytes, window);
  auto started = internal::GunzipStream::start(compressed, limits, window, headroom, options.threads != 1);
  if (!started) return started.error().with_path(path);
  internal::GunzipStream &stream = **started;
  Trace trace;
  trace.meta.gzip = true;
  Reader reader(&stream, compressed.size(), path, options);
  reader.stream_to(sink, out);
  Result<Trace> result = reader.run(std::move(trace));
  reader.drain();  // a read that failed early: is the stream damaged?
  const bool damaged = stream.truncated() && !stream.cut();
  if (options.strict && stream.cut()) {
    return Error(ErrorCode::kParse,
                 "gzip stream cut at compressed byte " + std::to_string(stream.damage_offset()) +
                     "; --strict refuses a truncated trace",
                 path, stream.damage_offset());
  }
  std::int64_t text_at = -1;
  std::string why;
  if (!result && damaged && result.error().code() != ErrorCode::kUnsupported) {
    text_at = result.error().byte_offset();
    why = result.error().message();
  } else if (result && damaged) {
    reader.first_skip(&text_at, &why);
  }
  if (!why.empty() || (!result && damaged && result.error().code() != ErrorCode::kUnsupported)) {
    return Error(ErrorCode::kParse,
                 "the gzip stream is damaged (" + stream.damage() +
                     "); the JSON that decompressed before it breaks at "
                     "decompressed byte " +
                     std::to_string(text_at) + ": " + why,
                 path, stream.damage_offset());
  }
  if (!result || !stream.truncated()) return result;
  // The gzip's word first: it explains whatever the JSON says about the cut.
  const std::string where = "compressed byte " + std::to_string(stream.damage_offset());
  Diagnostics diagnostics;
  diagnostics.add(DiagnosticCode::kTruncated, stream.damage_offset(),
                  (stream.cut() ? "gzip stream cut at " + where
                                : "gzip stream damaged at " + where + " (" + stream.damage() + ")") +
                      "; reading the " + std::to_string(stream.text_done()) + " bytes that decompressed");
  diagnostics.merge(result->diagnostics);
  result->diagnostics = std::move(diagnostics);
  return result;
}

}  // namespace

namespace {

internal::GunzipLimits gunzip_limits(const ReadOptions &options) {
  return {static_cast<std::size_t>(options.max_inflated_bytes), options.max_inflate_ratio};
}

// A ratio that no comparison can hold (NaN: every `by_ratio < limit` is
// false) would lift the gzip limit as silently as 0 does on purpose; a
// negative or infinite one means nothing. Refused before any byte is read.
Status check_options(const ReadOptions &options, const std::string &path) {
  const double r = options.max_inflate_ratio;
  if (std::isfinite(r) && r >= 0) return Status();
  const std::string text = std::isnan(r) ? "nan" : std::isinf(r) ? (r > 0 ? "inf" : "-inf") : std::to_string(r);
  return Error(ErrorCode::kInvalidArgument,
               "the gzip ratio limit (max_inflate_ratio, --max-inflate-ratio) is " + text +
                   ": give a finite number >= 0 (0: no ratio limit)",
               path);
}

Result<Trace> read_any(const std::string &path, const ReadOptions &options, internal::EventStream *sink,
                        internal::StreamedTrace *out) {
  TPROF_TRY(check_options(options, path));
  TPROF_TRY_ASSIGN(internal::MappedFile map, internal::MappedFile::open(path));
  Trace trace;
  if (internal::is_gzip(map.bytes())) {
    Result<Trace> result = read_gzip(map.bytes(), path, options, gunzip_limits(options), sink, out);
    if (map.shrunk()) return shrunk_error(path);
    return result;
  }
  auto shared_map = std::make_shared<internal::MappedFile>(std::move(map));
  internal::MappedFile *m = shared_map.get();
  trace.attach_source(shared_map, shared_map->bytes(),
                      [m](std::size_t offset, std::size_t len) { m->release(offset, len); });
  Reader reader(shared_map->bytes(), path, options, shared_map.get());
  reader.stream_to(sink, out);
  Result<Trace> result = reader.run(std::move(trace));
  if (shared_map->shrunk()) return shrunk_error(path);
  return result;
}

}  // namespace

Result<Trace> read_trace(const std::string &path, const ReadOptions &options) {
  return read_any(path, options, nullptr, nullptr);
}

namespace internal {

std::string_view batch_args(std::uint64_t ref, std::string_view store) {
  const std::uint64_t offset = (ref & ~args_ref::kOwnedBit) >> args_ref::kLenBits;
  std::uint64_t len = ref & args_ref::kLenMask;
  if (offset >= store.size()) return {};
  if (len == args_ref::kLenMask) {
    // Longer than the length field holds: measure it again (it is JSON).
    JsonCursor c(store.data() + offset, store.data() + store.size(), store.data());
    if (!c.skip_value()) return {};
    len = static_cast<std::uint64_t>(c.pos() - (store.data() + offset));
  }
  return store.substr(offset, len);
}

std::string_view StreamedBatch::args(std::uint32_t e) const {
  const std::uint64_t ref = trace.events.args_ref[e];
  if (ref == 0) return {};
  if ((ref & args_ref::kOwnedBit) != 0) return batch_args(ref, repaired);
  const char *p = origin + ((ref & ~args_ref::kOwnedBit) >> args_ref::kLenBits);
  std::uint64_t len = ref & args_ref::kLenMask;
  if (len == args_ref::kLenMask) {
    // Longer than the length field holds: measure it again.
    JsonCursor c(p, text_end, origin);
    if (!c.skip_value()) return {};
    len = static_cast<std::uint64_t>(c.pos() - p);
  }
  return {p, static_cast<std::size_t>(len)};
}

Result<StreamedTrace> read_trace_streamed(const std::string &path, const ReadOptions &options, EventStream *sink) {
  StreamedTrace out;
  TPROF_TRY_ASSIGN(out.trace, read_any(path, options, sink, &out));
  return out;
}

}  // namespace internal

Result<Trace> read_trace_bytes(std::string_view bytes, const std::string &name, const ReadOptions &options) {
  TPROF_TRY(check_options(options, name));
  Trace trace;
  if (internal::is_gzip(bytes)) return read_gzip(bytes, name, options, gunzip_limits(options));
  auto owned = std::make_shared<OwnedBytes>();
  owned->data = std::make_unique_for_overwrite<char[]>(bytes.size() + 1);
  if (!bytes.empty()) std::memcpy(owned->data.get(), bytes.data(), bytes.size());
  owned->size = bytes.size();
  const std::string_view view(owned->data.get(), owned->size);
  trace.attach_source(owned, view);
  Reader reader(view, name, options, nullptr);
  return reader.run(std::move(trace));
}

}  // namespace tprof
