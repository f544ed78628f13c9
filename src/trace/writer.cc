// The one writer: Trace -> Kineto JSON object format.
//
// Layout follows libkineto's: top-level keys first, then "traceEvents" with
// one event per line. Every string goes through the one escaper and every
// time through the one µs formatter (src/base/json_writer.h); stored JSON
// (args, top-level values) is re-emitted token by token, so text that a
// lenient read accepted (raw quotes in names) comes out valid.
#include "tprof/write.h"

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "src/base/json_writer.h"
#include "src/trace/json_copy.h"
#include "src/trace/json_cursor.h"

namespace tprof {

namespace {

using internal::JsonCursor;
using internal::JsonWriter;

constexpr std::size_t kFlushBytes = 4u << 20;

void write_id(const Trace& t, const TraceId& id, JsonWriter* w) {
  if (id.is_str) {
    w->value_string(t.str(id.str));
  } else {
    w->value_int(id.num);
  }
}

void write_event(const Trace& t, std::uint32_t e, std::int64_t base, JsonWriter* w, std::string* scratch) {
  const EventColumns& ev = t.events;
  const Phase ph = ev.phase[e];
  const Lane& lane = t.lanes[ev.lane[e]];
  const char ph_text[2] = {static_cast<char>(ph), 0};
  w->break_line();
  w->begin_object();
  if (ph == Phase::kMetadata) {
    w->key("name");
    w->value_string(t.name(e));
    w->key("ph");
    w->value_string(ph_text);
    w->key("ts");
    w->value_us(ev.ts_ns[e] - base);
    w->key("pid");
    write_id(t, lane.pid, w);
    w->key("tid");
    write_id(t, lane.tid, w);
  } else {
    w->key("ph");
    w->value_string(ph_text);
    if (ev.flow_id[e] != -1 && (ph == Phase::kFlowStart || ph == Phase::kFlowStep || ph == Phase::kFlowEnd)) {
      w->key("id");
      if (ev.flow_id[e] <= -2) {
        w->value_string(t.str(static_cast<StrId>(-ev.flow_id[e] - 2)));
      } else {
        w->value_int(ev.flow_id[e]);
      }
    }
    if (ev.cat[e] != kEmptyStr) {
      w->key("cat");
      w->value_string(t.cat(e));
    }
    w->key("name");
    w->value_string(t.name(e));
    w->key("pid");
    write_id(t, lane.pid, w);
    w->key("tid");
    write_id(t, lane.tid, w);
    w->key("ts");
    w->value_us(ev.ts_ns[e] - base);
    if (ph == Phase::kComplete) {
      w->key("dur");
      w->value_us(ev.dur_ns[e]);
    }
    const std::uint8_t f = ev.flags[e];
    if (ph == Phase::kInstant && (f & (kFlagInstantGlobal | kFlagInstantProcess | kFlagInstantThread))) {
      w->key("s");
      w->value_string((f & kFlagInstantGlobal) ? "g" : (f & kFlagInstantProcess) ? "p" : "t");
    }
    if (f & kFlagBindEnclosing) {
      w->key("bp");
      w->value_string("e");
    }
  }
  const std::string_view args = t.args_json(e);
  if (!args.empty()) {
    w->key("args");
    internal::write_stored_json(args, w, scratch, "{}");
  }
  w->end_object();
}

}  // namespace

namespace {

// Writes the document in pieces; `flush` is called whenever `out` grows large.
template <class Flush>
void write_document(const Trace& t, std::string* out, Flush&& flush) {
  JsonWriter w(out);
  std::string scratch;
  const std::int64_t base = t.meta.base_time_ns.value_or(0);
  w.begin_object();
  for (const auto& [key, raw] : t.meta.top_level) {
    w.break_line();
    w.key(key);
    internal::write_stored_json(raw, &w, &scratch, "null");
  }
  w.break_line();
  w.key("traceEvents");
  w.begin_array();
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    write_event(t, e, base, &w, &scratch);
    if (out->size() >= kFlushBytes) flush();
  }
  w.break_line();
  w.end_array();
  w.break_line();
  w.end_object();
  out->push_back('\n');
}

}  // namespace

void write_trace_json(const Trace& trace, std::string* out) {
  write_document(trace, out, [] {});
}

Status write_trace(const Trace& trace, const std::string& path, const WriteOptions& options) {
  const bool gz = options.compression == Compression::kGzip ||
                  (options.compression == Compression::kAuto && path.size() > 3 &&
                   path.compare(path.size() - 3, 3, ".gz") == 0);
  TPROF_TRY_ASSIGN(auto file, internal::AtomicFileWriter::create(path));
  std::string buffer;
  if (gz) {
    write_trace_json(trace, &buffer);
    TPROF_TRY_ASSIGN(std::string compressed, internal::gzip(buffer, options.gzip_level));
    TPROF_TRY(file->write(compressed));
    return file->commit();
  }
  Status status;
  write_document(trace, &buffer, [&] {
    if (status) status = file->write(buffer);
    buffer.clear();
  });
  if (status) status = file->write(buffer);
  TPROF_TRY(status);
  return file->commit();
}

}  // namespace tprof
