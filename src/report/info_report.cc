#include <array>
#include <string>

#include "src/base/json_writer.h"
#include "src/report/py_format.h"
#include "tprof/info.h"

namespace tprof {

std::string_view event_kind_name(EventKind k) {
  switch (k) {
    case EventKind::kOther: return "other";
    case EventKind::kCpuOp: return "cpu_op";
    case EventKind::kUserAnnotation: return "user_annotation";
    case EventKind::kPythonFunction: return "python_function";
    case EventKind::kCudaRuntime: return "cuda_runtime";
    case EventKind::kCudaDriver: return "cuda_driver";
    case EventKind::kKernel: return "kernel";
    case EventKind::kGpuMemcpy: return "gpu_memcpy";
    case EventKind::kGpuMemset: return "gpu_memset";
    case EventKind::kGpuUserAnnotation: return "gpu_user_annotation";
    case EventKind::kCudaSync: return "cuda_sync";
    case EventKind::kMemory: return "memory";
    case EventKind::kOutOfMemory: return "out_of_memory";
    case EventKind::kTraceSpan: return "trace_span";
    case EventKind::kFlow: return "flow";
    case EventKind::kMetadata: return "metadata";
    case EventKind::kOverhead: return "overhead";
    case EventKind::kProfilerRange: return "cuda_profiler_range";
    case EventKind::kCount_: break;
  }
  return "unknown";
}

std::string_view lane_kind_name(LaneKind k) {
  switch (k) {
    case LaneKind::kCpu: return "cpu";
    case LaneKind::kGpu: return "gpu";
    case LaneKind::kOther: return "other";
  }
  return "unknown";
}

std::string_view producer_name(Producer p) {
  switch (p) {
    case Producer::kUnknown: return "unknown";
    case Producer::kTorchLegacy: return "torch-legacy-array";
    case Producer::kKineto2022: return "kineto-2022";
    case Producer::kKineto: return "kineto";
    case Producer::kTprof: return "tprof";
  }
  return "unknown";
}

namespace {

constexpr int kKinds = static_cast<int>(EventKind::kCount_);

std::array<std::uint64_t, kKinds> count_kinds(const Trace& t) {
  std::array<std::uint64_t, kKinds> n{};
  for (EventKind k : t.events.kind) ++n[static_cast<int>(k)];
  return n;
}

std::string id_text(const Trace& t, const TraceId& id) {
  return id.is_str ? std::string(t.str(id.str)) : std::to_string(id.num);
}

void write_id(const Trace& t, const TraceId& id, internal::JsonWriter* w) {
  if (id.is_str) {
    w->value_string(t.str(id.str));
  } else {
    w->value_int(id.num);
  }
}

}  // namespace

std::string format_info_text(const Trace& t) {
  std::string out;
  out += "format:      ";
  out += t.meta.format == TraceFormat::kLegacyArray ? "torch legacy JSON array" : "Kineto JSON object";
  if (t.meta.gzip) out += " (gzip)";
  out += "\nproducer:    " + std::string(producer_name(t.meta.producer)) + "\n";
  out += "events:      " + std::to_string(t.events.size()) + "\n";
  const auto kinds = count_kinds(t);
  for (int k = 0; k < kKinds; ++k) {
    if (kinds[k] == 0) continue;
    std::string name(event_kind_name(static_cast<EventKind>(k)));
    out += "  " + name + std::string(name.size() < 20 ? 20 - name.size() : 1, ' ') + std::to_string(kinds[k]) + "\n";
  }
  const std::int64_t span = t.end_ns() - t.start_ns();
  out += "span:        " + internal::format_time_us(static_cast<double>(span) / 1000.0) + "\n";
  // The lanes listed: CPU threads and GPU streams (the others hold only
  // metadata or profiler spans, counted apart).
  std::size_t other_lanes = 0;
  for (const Lane& l : t.lanes) other_lanes += l.kind == LaneKind::kOther ? 1 : 0;
  out += "lanes:       " + std::to_string(t.lanes.size() - other_lanes);
  if (other_lanes > 0) {
    out += " (and " + std::to_string(other_lanes) + " holding only metadata or profiler spans, not listed)";
  }
  out += "\n";
  for (const Lane& l : t.lanes) {
    if (l.kind == LaneKind::kOther) continue;
    out += "  " + std::string(lane_kind_name(l.kind)) + "  pid " + id_text(t, l.pid) + "  tid " + id_text(t, l.tid);
    if (l.kind == LaneKind::kGpu) out += "  (device " + std::to_string(l.device) + ", stream " + std::to_string(l.stream) + ")";
    if (l.thread_name != kEmptyStr) out += "  " + std::string(t.str(l.thread_name));
    out += "\n";
  }
  if (t.meta.producer == Producer::kTprof) {
    // What tprof's recorder could not keep (the "tprof" key): zeros included,
    // so "nothing lost" is said, not implied.
    out += "capture:     " + std::to_string(t.meta.dropped_events) + " events dropped, " +
           std::to_string(t.meta.dropped_shapes) + " kept scopes without their shapes, " +
           std::to_string(t.meta.unfinished_scopes) + " scopes unfinished at the window's end\n";
  }
  out += "diagnostics: " + std::to_string(t.diagnostics.total()) + "\n";
  for (int c = 0; c < static_cast<int>(DiagnosticCode::kCount_); ++c) {
    const auto code = static_cast<DiagnosticCode>(c);
    if (t.diagnostics.count(code) == 0) continue;
    out += "  " + std::string(diagnostic_code_name(code)) + ": " + std::to_string(t.diagnostics.count(code)) + "\n";
    std::uint64_t shown = 0;
    for (const Diagnostic& d : t.diagnostics.items()) {
      if (d.code != code) continue;
      out += "    byte " + std::to_string(d.byte_offset) + ": " + d.message + "\n";
      ++shown;
    }
    if (shown < t.diagnostics.count(code)) {
      out += "    ... and " + std::to_string(t.diagnostics.count(code) - shown) + " more\n";
    }
  }
  return out;
}

std::string format_info_json(const Trace& t) {
  std::string out;
  internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
  w.begin_object();
  w.key("format");
  w.value_string(t.meta.format == TraceFormat::kLegacyArray ? "legacy_array" : "kineto_object");
  w.key("gzip");
  w.value_bool(t.meta.gzip);
  w.key("producer");
  w.value_string(producer_name(t.meta.producer));
  w.key("events");
  w.value_uint(t.events.size());
  w.key("events_by_kind");
  w.begin_object();
  const auto kinds = count_kinds(t);
  for (int k = 0; k < kKinds; ++k) {
    if (kinds[k] == 0) continue;
    w.key(event_kind_name(static_cast<EventKind>(k)));
    w.value_uint(kinds[k]);
  }
  w.end_object();
  w.key("memory_records");
  w.value_uint(t.memory.size());
  w.key("start_ns");
  w.value_int(t.start_ns());
  w.key("end_ns");
  w.value_int(t.end_ns());
  if (t.meta.producer == Producer::kTprof) {
    w.key("capture");
    w.begin_object();
    w.key("dropped_events");
    w.value_uint(t.meta.dropped_events);
    w.key("dropped_shapes");
    w.value_uint(t.meta.dropped_shapes);
    w.key("unfinished_scopes");
    w.value_uint(t.meta.unfinished_scopes);
    w.end_object();
  }
  std::array<std::uint64_t, 3> lane_counts{};
  for (const Lane& l : t.lanes) ++lane_counts[static_cast<int>(l.kind)];
  w.key("lanes_by_kind");
  w.begin_object();
  for (int k = 0; k < 3; ++k) {
    w.key(lane_kind_name(static_cast<LaneKind>(k)));
    w.value_uint(lane_counts[static_cast<std::size_t>(k)]);
  }
  w.end_object();
  w.key("lanes");
  w.begin_array();
  for (const Lane& l : t.lanes) {
    if (l.kind == LaneKind::kOther) continue;
    w.begin_object();
    w.key("kind");
    w.value_string(lane_kind_name(l.kind));
    w.key("pid");
    write_id(t, l.pid, &w);
    w.key("tid");
    write_id(t, l.tid, &w);
    if (l.kind == LaneKind::kGpu) {
      w.key("device");
      w.value_int(l.device);
      w.key("stream");
      w.value_int(l.stream);
    }
    if (l.thread_name != kEmptyStr) {
      w.key("thread_name");
      w.value_string(t.str(l.thread_name));
    }
    w.end_object();
  }
  w.end_array();
  w.key("diagnostic_counts");
  w.begin_object();
  for (int c = 0; c < static_cast<int>(DiagnosticCode::kCount_); ++c) {
    const auto code = static_cast<DiagnosticCode>(c);
    if (t.diagnostics.count(code) == 0) continue;
    w.key(diagnostic_code_name(code));
    w.value_uint(t.diagnostics.count(code));
  }
  w.end_object();
  w.key("diagnostics");
  w.begin_array();
  for (const Diagnostic& d : t.diagnostics.items()) {
    w.begin_object();
    w.key("code");
    w.value_string(diagnostic_code_name(d.code));
    w.key("severity");
    w.value_string(d.severity == Severity::kInfo ? "info" : d.severity == Severity::kWarning ? "warning" : "error");
    w.key("byte_offset");
    w.value_int(d.byte_offset);
    if (d.event != kNoIndex) {
      w.key("event");
      w.value_uint(d.event);
    }
    w.key("message");
    w.value_string(d.message);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  out.push_back('\n');
  return out;
}

std::string format_diagnostics_note(const Trace& trace, const std::string& path) {
  if (trace.diagnostics.empty()) return {};
  std::string line = "tprof: note: " + path + ":";
  for (int c = 0; c < static_cast<int>(DiagnosticCode::kCount_); ++c) {
    const auto code = static_cast<DiagnosticCode>(c);
    const std::uint64_t n = trace.diagnostics.count(code);
    if (n == 0) continue;
    line.append(" ").append(diagnostic_code_name(code)).append("=").append(std::to_string(n));
    // The diagnostics count messages; what was lost is counted in events.
    if (code == DiagnosticCode::kDroppedEvents && trace.meta.dropped_events > 0) {
      line.append(" (").append(std::to_string(trace.meta.dropped_events)).append(" events dropped)");
    }
    if (code == DiagnosticCode::kUnfinishedScopes && trace.meta.unfinished_scopes > 0) {
      line.append(" (").append(std::to_string(trace.meta.unfinished_scopes)).append(" scopes)");
    }
  }
  if (trace.meta.dropped_shapes > 0) {
    line.append(" shapes_missing=").append(std::to_string(trace.meta.dropped_shapes));
  }
  line += " (details: tprof info)";
  return line + "\n";
}

}  // namespace tprof
