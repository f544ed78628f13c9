// The reader: bytes -> Trace.
//
//   file ──mmap──┐                      ┌─ chunk 0 ─ parse_event_elements ─ EventBatch ─┐
//   .gz ─gunzip──┴─ top level (object   ├─ chunk 1 ─ ...                                ├─ merge (file order,
//                   or legacy array) ───┤   (parallel, event-aligned)                   │  ids remapped)
//                                       └─ chunk N ─ ...                                ┘      │
//                                                                   pair B/E, base time, lanes, metadata,
//                                                                   producer, check_trace ─▶ Trace
//
// Chunks start at guessed event boundaries ("}, {" between array elements).
// A guess can be wrong (the pattern inside a string or a nested array), so a
// chunk is accepted only if its predecessor stopped exactly where it starts;
// otherwise that stretch is parsed again from where the predecessor stopped.
#include "tprof/read.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "src/base/hash.h"
#include "src/trace/event_parser.h"
#include "src/trace/json_cursor.h"
#include "src/trace/validate.h"

namespace tprof {

namespace {

using internal::ChunkEnd;
using internal::CursorFailure;
using internal::EventBatch;
using internal::JsonCursor;
using internal::ParseContext;

struct ChunkResult {
  const char* start = nullptr;
  const char* stop_at = nullptr;
  EventBatch batch;
  ChunkEnd end;
  CursorFailure failure = CursorFailure::kNone;
  Error error{ErrorCode::kParse, {}};
};

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The first element start at or after `from`: a '{' preceded (across
// whitespace) by ',' which is preceded by '}'. Returns `end` if none.
const char* find_boundary(const char* from, const char* begin, const char* end) {
  const char* p = from;
  while (p < end) {
    p = static_cast<const char*>(std::memchr(p, '{', static_cast<std::size_t>(end - p)));
    if (p == nullptr) return end;
    const char* q = p - 1;
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

bool only_padding(const char* p, const char* end) {
  for (; p < end; ++p) {
    if (*p != '\0' && !is_ws(*p)) return false;
  }
  return true;
}

class Reader {
 public:
  Reader(std::string_view bytes, std::string path, const ReadOptions& options,
         const internal::MappedFile* map)
      : bytes_(bytes), path_(std::move(path)), options_(options), map_(map) {}

  Result<Trace> run(Trace trace);

 private:
  Status parse_top_level();
  // Parses the elements of the array whose '[' was just consumed. On success
  // the cursor stands after its ']' (or at EOF when truncated).
  Status parse_array(JsonCursor* c, const ParseContext& ctx);
  void parse_chunk(ChunkResult* r, const ParseContext& ctx);
  void report_progress(std::size_t bytes);
  void merge();
  void pair_begin_end();
  void finish_lanes();
  void apply_metadata();
  Error error_at(Error e) const { return e.with_path(path_); }

  std::string_view bytes_;
  std::string path_;
  const ReadOptions& options_;
  const internal::MappedFile* map_;
  Trace trace_;
  std::vector<std::unique_ptr<ChunkResult>> chunks_;  // accepted, in file order
  bool truncated_ = false;
  std::int64_t truncated_at_ = -1;
  bool saw_events_key_ = false;
  std::mutex progress_mu_;
  std::uint64_t progress_done_ = 0;
  // Merged side records (global event indices / lanes).
  std::vector<internal::MetaRecord> meta_;
  std::vector<internal::DeviceHint> hints_;
  std::vector<internal::EndMarker> ends_;
  bool saw_2022_args_ = false;
  bool saw_begin_ = false;
};

void Reader::report_progress(std::size_t bytes) {
  if (!options_.progress) return;
  std::lock_guard<std::mutex> lock(progress_mu_);
  progress_done_ += bytes;
  options_.progress(progress_done_, bytes_.size());
}

void Reader::parse_chunk(ChunkResult* r, const ParseContext& ctx) {
  JsonCursor c(r->start, bytes_.data() + bytes_.size(), bytes_.data());
  r->end = internal::parse_event_elements(&c, r->stop_at, ctx, &r->batch);
  r->failure = c.failure();
  if (r->end.failed) r->error = c.error();
  const std::size_t len = static_cast<std::size_t>(r->end.pos - r->start);
  if (map_ != nullptr) map_->release(static_cast<std::size_t>(r->start - bytes_.data()), len);
  report_progress(len);
}

Status Reader::parse_array(JsonCursor* c, const ParseContext& ctx) {
  const char* first = c->pos();
  const char* end = bytes_.data() + bytes_.size();
  const std::size_t region = static_cast<std::size_t>(end - first);
  int threads = options_.threads > 0 ? options_.threads : static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;

  // Guess chunk starts.
  std::vector<std::unique_ptr<ChunkResult>> guesses;
  auto add_guess = [&](const char* start) {
    auto r = std::make_unique<ChunkResult>();
    r->start = start;
    guesses.push_back(std::move(r));
  };
  add_guess(first);
  if (threads > 1 && region >= options_.min_parallel_bytes) {
    const std::size_t n = std::max<std::size_t>(static_cast<std::size_t>(threads),
                                                region / std::max<std::size_t>(options_.chunk_bytes, 1));
    const std::size_t step = region / n;
    for (std::size_t i = 1; i < n; ++i) {
      const char* b = find_boundary(first + i * step, first, end);
      if (b >= end) break;
      if (b > guesses.back()->start) add_guess(b);
    }
  }
  for (std::size_t i = 0; i < guesses.size(); ++i) {
    guesses[i]->stop_at = i + 1 < guesses.size() ? guesses[i + 1]->start : end;
  }

  // Parse them, in parallel when there is more than one.
  if (guesses.size() == 1) {
    parse_chunk(guesses[0].get(), ctx);
  } else {
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < guesses.size();) parse_chunk(guesses[i].get(), ctx);
    };
    std::vector<std::thread> pool;
    const int helpers = std::min<int>(threads, static_cast<int>(guesses.size())) - 1;
    pool.reserve(static_cast<std::size_t>(helpers));
    for (int t = 0; t < helpers; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
  }

  // Accept chunks whose predecessor ended where they start; re-parse the rest.
  chunks_.push_back(std::move(guesses[0]));
  for (std::size_t i = 1; i < guesses.size(); ++i) {
    const ChunkResult& prev = *chunks_.back();
    if (prev.end.failed || prev.end.array_closed) break;
    if (guesses[i]->start == prev.end.pos) {
      chunks_.push_back(std::move(guesses[i]));
      continue;
    }
    auto redo = std::make_unique<ChunkResult>();
    redo->start = prev.end.pos;
    redo->stop_at = guesses[i]->stop_at;
    parse_chunk(redo.get(), ctx);
    chunks_.push_back(std::move(redo));
  }
  const ChunkResult& last = *chunks_.back();
  if (last.end.failed) {
    const char* at = bytes_.data() + last.error.byte_offset();
    if (last.failure == CursorFailure::kEof || only_padding(at, end)) {
      truncated_ = true;
      truncated_at_ = last.error.byte_offset();
      c->set_pos(end);
      return {};
    }
    return error_at(last.error);
  }
  c->set_pos(last.end.pos);
  return {};
}

Status Reader::parse_top_level() {
  const char* begin = bytes_.data();
  const char* end = begin + bytes_.size();
  const char* start = begin;
  if (bytes_.size() >= 3 && std::memcmp(begin, "\xEF\xBB\xBF", 3) == 0) start += 3;  // UTF-8 BOM
  JsonCursor c(start, end, begin);
  const char first = c.peek();
  if (c.pos() >= end) {
    return error_at(Error(ErrorCode::kFormat,
                          bytes_.empty() ? "empty file, expected a JSON object or array"
                                         : "no JSON value, expected a JSON object or array",
                          {}, c.offset()));
  }
  if (first == '[') {
    trace_.meta.format = TraceFormat::kLegacyArray;
    c.eat('[');
    // torch's legacy export: an array of events without "cat".
    const char next = c.peek();
    if (next != '{' && next != ']' && c.pos() < end) {
      return error_at(Error(ErrorCode::kFormat,
                            "top-level array does not hold trace events (expected '{' or ']')", {}, c.offset()));
    }
    saw_events_key_ = true;
    ParseContext ctx;
    ctx.legacy_array = true;
    TPROF_TRY(parse_array(&c, ctx));
  } else if (first == '{') {
    c.eat('{');
    bool closed = c.eat('}');
    while (!closed) {
      JsonCursor::Str key;
      if (!c.read_string(&key) || !c.expect(':', "':' after an object key")) break;
      std::string k;
      if (key.escaped) {
        internal::unescape_json(key.raw, &k);
      } else {
        k.assign(key.raw);
      }
      if (k == "traceEvents") {
        if (c.peek() != '[') {
          if (c.pos() >= end) break;
          return error_at(Error(ErrorCode::kFormat, "\"traceEvents\" is not an array (expected '[')", {},
                                c.offset()));
        }
        c.eat('[');
        saw_events_key_ = true;
        TPROF_TRY(parse_array(&c, ParseContext{}));
        if (truncated_) return {};
      } else {
        c.skip_ws();
        const char* v = c.pos();
        if (!c.skip_value()) break;
        std::string raw(v, c.pos());
        if (k == "baseTimeNanoseconds") {
          std::int64_t base = 0;
          if (internal::parse_int64(raw, &base)) {
            trace_.meta.base_time_ns = base;
          } else {
            trace_.diagnostics.add(DiagnosticCode::kBadFieldType, c.offset(v),
                                   "\"baseTimeNanoseconds\" is not an integer, ignored");
          }
        }
        trace_.meta.top_level.emplace_back(std::move(k), std::move(raw));
      }
      if (c.eat(',')) continue;
      if (!c.expect('}', "',' or '}' at the top level")) break;
      closed = true;
    }
    if (!closed) {
      if (c.failure() == CursorFailure::kEof || only_padding(c.pos(), end)) {
        truncated_ = true;
        truncated_at_ = c.failure_offset();
        return {};
      }
      return error_at(c.error());
    }
    if (!saw_events_key_) {
      return error_at(Error(ErrorCode::kFormat,
                            "JSON object without \"traceEvents\": not a Chrome/Kineto trace", {}, 0));
    }
  } else {
    c.fail_here("a JSON object or array (a trace)");
    return error_at(Error(ErrorCode::kFormat, c.error().message(), {}, c.offset()));
  }
  c.skip_ws();
  if (c.pos() < end && !only_padding(c.pos(), end)) {
    trace_.diagnostics.add(DiagnosticCode::kTrailingData, c.offset(),
                           "data after the end of the top-level JSON value, ignored");
  }
  return {};
}

void Reader::merge() {
  std::size_t total = 0;
  for (const auto& ch : chunks_) total += ch->batch.events.size();
  EventColumns& out = trace_.events;
  out.reserve(total);

  struct LaneKeyHash {
    std::size_t operator()(const std::pair<TraceId, TraceId>& k) const {
      auto h = [](const TraceId& id) {
        return id.is_str ? internal::mix64(id.str + 0x9e37ull, 0xff51afd7ed558ccdull)
                         : internal::mix64(static_cast<std::uint64_t>(id.num), 0xc4ceb9fe1a85ec53ull);
      };
      return static_cast<std::size_t>(internal::mix64(h(k.first), h(k.second) + 1));
    }
  };
  std::unordered_map<std::pair<TraceId, TraceId>, std::uint32_t, LaneKeyHash> lane_index;

  for (const auto& ch : chunks_) {
    const EventBatch& b = ch->batch;
    const std::uint32_t base = static_cast<std::uint32_t>(out.size());
    std::vector<StrId> smap(b.strings.size());
    for (StrId i = 0; i < b.strings.size(); ++i) smap[i] = trace_.strings.intern(b.strings.str(i));
    auto map_id = [&](TraceId id) {
      if (id.is_str) id.str = smap[id.str];
      return id;
    };
    std::vector<std::uint32_t> lmap(b.lanes.size());
    for (std::uint32_t i = 0; i < b.lanes.size(); ++i) {
      auto key = std::make_pair(map_id(b.lanes[i].pid), map_id(b.lanes[i].tid));
      auto [it, added] = lane_index.try_emplace(key, static_cast<std::uint32_t>(trace_.lanes.size()));
      if (added) {
        Lane lane;
        lane.pid = key.first;
        lane.tid = key.second;
        trace_.lanes.push_back(lane);
      }
      lmap[i] = it->second;
    }
    const EventColumns& in = b.events;
    const std::size_t n = in.size();
    auto append = [](auto& dst, const auto& src) { dst.insert(dst.end(), src.begin(), src.end()); };
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
    for (MemoryRecord m : b.memory) {
      m.event += base;
      trace_.memory.push_back(m);
    }
    for (internal::MetaRecord m : b.meta) {
      m.event += base;
      m.text = smap[m.text];
      meta_.push_back(m);
    }
    for (internal::DeviceHint h : b.device_hints) {
      h.lane = lmap[h.lane];
      hints_.push_back(h);
    }
    for (internal::EndMarker e : b.ends) {
      e.lane = lmap[e.lane];
      ends_.push_back(e);
    }
    trace_.diagnostics.merge(b.diagnostics, base);
    saw_2022_args_ |= b.saw_kineto_2022_args;
    saw_begin_ |= b.saw_begin;
  }
  chunks_.clear();
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
  auto close = [&](const internal::EndMarker& m) {
    auto& st = stacks[m.lane];
    if (st.empty()) {
      trace_.diagnostics.add(DiagnosticCode::kUnmatchedEnd, static_cast<std::int64_t>(m.src_offset),
                             "\"E\" event without a matching \"B\", ignored");
      return;
    }
    const std::uint32_t b = st.back();
    st.pop_back();
    std::int64_t dur = m.ts_ns - trace_.events.ts_ns[b];
    if (dur < 0) {
      trace_.diagnostics.add(DiagnosticCode::kNegativeDuration, static_cast<std::int64_t>(m.src_offset),
                             "\"E\" before its \"B\", kept with dur 0", b);
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
  for (auto& st : stacks) {
    for (std::uint32_t b : st) {
      trace_.events.dur_ns[b] = 0;
      trace_.diagnostics.add(DiagnosticCode::kUnmatchedBegin,
                             static_cast<std::int64_t>(trace_.events.src_offset[b]),
                             "\"B\" event without a matching \"E\", kept with dur 0", b);
    }
  }
}

void Reader::finish_lanes() {
  const std::size_t nl = trace_.lanes.size();
  std::vector<std::uint8_t> seen(nl, 0);  // bit 0: host activity, bit 1: device activity
  for (std::size_t e = 0; e < trace_.events.size(); ++e) {
    const EventKind k = trace_.events.kind[e];
    std::uint8_t bit = 0;
    switch (k) {
      case EventKind::kKernel:
      case EventKind::kGpuMemcpy:
      case EventKind::kGpuMemset:
      case EventKind::kGpuUserAnnotation:
      case EventKind::kCudaSync:
        bit = 2;
        break;
      case EventKind::kCpuOp:
      case EventKind::kUserAnnotation:
      case EventKind::kPythonFunction:
      case EventKind::kCudaRuntime:
      case EventKind::kCudaDriver:
      case EventKind::kMemory:
      case EventKind::kOutOfMemory:
        bit = 1;
        break;
      case EventKind::kOther:
        // Unknown categories count as host work only under a numeric pid
        // (not "Spans", "Traces", "").
        bit = trace_.events.phase[e] == Phase::kComplete && !trace_.lanes[trace_.events.lane[e]].pid.is_str ? 1 : 0;
        break;
      default:
        break;
    }
    seen[trace_.events.lane[e]] |= bit;
  }
  for (std::size_t l = 0; l < nl; ++l) {
    Lane& lane = trace_.lanes[l];
    if (seen[l] & 2) {
      lane.kind = LaneKind::kGpu;
      if (!lane.pid.is_str) lane.device = static_cast<std::int32_t>(lane.pid.num);
      if (!lane.tid.is_str) {
        lane.stream = lane.tid.num;
      } else {
        // 2021 traces: "stream 7".
        std::string_view s = trace_.strings.str(lane.tid.str);
        if (s.rfind("stream ", 0) == 0) {
          std::int64_t v = 0;
          if (internal::parse_int64(s.substr(7), &v)) lane.stream = v;
        }
      }
    } else if (seen[l] & 1) {
      lane.kind = LaneKind::kCpu;  // also "CPU functions", the pid of torch's legacy export
    } else {
      lane.kind = LaneKind::kOther;
    }
  }
  for (const internal::DeviceHint& h : hints_) {
    Lane& lane = trace_.lanes[h.lane];
    if (h.device >= 0) lane.device = h.device;
    if (h.stream >= 0) lane.stream = h.stream;
  }
}

void Reader::apply_metadata() {
  const auto process_name = trace_.strings.find("process_name");
  const auto process_labels = trace_.strings.find("process_labels");
  const auto process_sort = trace_.strings.find("process_sort_index");
  const auto thread_name = trace_.strings.find("thread_name");
  const auto thread_sort = trace_.strings.find("thread_sort_index");
  for (const internal::MetaRecord& m : meta_) {
    const StrId name = trace_.events.name[m.event];
    Lane& lane = trace_.lanes[trace_.events.lane[m.event]];
    if (name == process_name) {
      trace_.process_for(lane.pid).name = m.text;
    } else if (name == process_labels) {
      trace_.process_for(lane.pid).labels = m.text;
    } else if (name == process_sort && m.has_number) {
      trace_.process_for(lane.pid).sort_index = m.number;
    } else if (name == thread_name) {
      lane.thread_name = m.text;
    } else if (name == thread_sort && m.has_number) {
      lane.sort_index = m.number;
    }
  }
}

Result<Trace> Reader::run(Trace trace) {
  trace_ = std::move(trace);
  TPROF_TRY(parse_top_level());
  merge();
  if (truncated_) {
    trace_.diagnostics.add(DiagnosticCode::kTruncated, truncated_at_,
                           "file ends early (a job killed mid-write?): loaded " +
                               std::to_string(trace_.events.size()) + " complete events before the cut");
  }
  pair_begin_end();
  if (trace_.meta.base_time_ns) {
    const std::int64_t base = *trace_.meta.base_time_ns;
    for (auto& ts : trace_.events.ts_ns) ts += base;
  }
  finish_lanes();
  apply_metadata();
  trace_.meta.producer = trace_.meta.format == TraceFormat::kLegacyArray ? Producer::kTorchLegacy
                         : saw_2022_args_                                 ? Producer::kKineto2022
                                                                          : Producer::kKineto;
  internal::check_trace(&trace_);
  return std::move(trace_);
}

struct OwnedBytes {
  std::unique_ptr<char[]> data;
  std::size_t size = 0;
};

}  // namespace

Result<Trace> read_trace(const std::string& path, const ReadOptions& options) {
  TPROF_TRY_ASSIGN(internal::MappedFile map, internal::MappedFile::open(path));
  Trace trace;
  if (internal::is_gzip(map.bytes())) {
    auto inflated = internal::gunzip(map.bytes());
    if (!inflated) return inflated.error().with_path(path);
    auto owned = std::make_shared<internal::Inflated>(std::move(inflated).value());
    trace.meta.gzip = true;
    if (owned->truncated) {
      trace.diagnostics.add(DiagnosticCode::kTruncated, owned->damage_offset,
                            "gzip stream ends early or is damaged at compressed byte " +
                                std::to_string(owned->damage_offset) + "; reading the " +
                                std::to_string(owned->size) + " bytes that decompressed");
    }
    trace.attach_source(owned, owned->bytes());
    Reader reader(owned->bytes(), path, options, nullptr);
    return reader.run(std::move(trace));
  }
  auto shared_map = std::make_shared<internal::MappedFile>(std::move(map));
  trace.attach_source(shared_map, shared_map->bytes());
  Reader reader(shared_map->bytes(), path, options, shared_map.get());
  return reader.run(std::move(trace));
}

Result<Trace> read_trace_bytes(std::string_view bytes, const std::string& name, const ReadOptions& options) {
  Trace trace;
  if (internal::is_gzip(bytes)) {
    auto inflated = internal::gunzip(bytes);
    if (!inflated) return inflated.error().with_path(name);
    auto owned = std::make_shared<internal::Inflated>(std::move(inflated).value());
    trace.meta.gzip = true;
    if (owned->truncated) {
      trace.diagnostics.add(DiagnosticCode::kTruncated, owned->damage_offset,
                            "gzip stream ends early or is damaged; reading what decompressed");
    }
    trace.attach_source(owned, owned->bytes());
    Reader reader(owned->bytes(), name, options, nullptr);
    return reader.run(std::move(trace));
  }
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
