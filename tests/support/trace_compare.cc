#include "tests/support/trace_compare.h"

#include <sstream>

#include "src/trace/json_copy.h"

namespace tprof::testing {

namespace {

std::string id_text(const Trace& t, const TraceId& id) {
  return id.is_str ? "\"" + std::string(t.str(id.str)) + "\"" : std::to_string(id.num);
}

std::string flow_text(const Trace& t, std::int64_t id) {
  return id <= -2 ? "\"" + std::string(t.str(static_cast<StrId>(-id - 2))) + "\"" : std::to_string(id);
}

}  // namespace

std::string diff_traces(const Trace& a, const Trace& b) {
  std::ostringstream out;
  int n = 0;
  auto diff = [&](const std::string& what) {
    if (n++ < 8) out << what << "\n";
  };
  if (a.events.size() != b.events.size()) {
    diff("event count " + std::to_string(a.events.size()) + " vs " + std::to_string(b.events.size()));
    return out.str();
  }
  const EventColumns& x = a.events;
  const EventColumns& y = b.events;
  for (std::uint32_t e = 0; e < x.size() && n < 8; ++e) {
    const std::string at = "event " + std::to_string(e) + " ('" + std::string(a.name(e)) + "'): ";
    if (x.ts_ns[e] != y.ts_ns[e]) diff(at + "ts " + std::to_string(x.ts_ns[e]) + " vs " + std::to_string(y.ts_ns[e]));
    if (x.dur_ns[e] != y.dur_ns[e]) diff(at + "dur " + std::to_string(x.dur_ns[e]) + " vs " + std::to_string(y.dur_ns[e]));
    if (a.name(e) != b.name(e)) diff(at + "name vs '" + std::string(b.name(e)) + "'");
    if (a.cat(e) != b.cat(e)) diff(at + "cat '" + std::string(a.cat(e)) + "' vs '" + std::string(b.cat(e)) + "'");
    if (x.phase[e] != y.phase[e]) diff(at + "phase");
    if (x.kind[e] != y.kind[e]) diff(at + "kind");
    if ((x.flags[e] & ~kFlagFromBeginEnd) != (y.flags[e] & ~kFlagFromBeginEnd)) diff(at + "flags");
    if (x.external_id[e] != y.external_id[e]) diff(at + "external_id");
    if (x.correlation[e] != y.correlation[e]) diff(at + "correlation");
    if (flow_text(a, x.flow_id[e]) != flow_text(b, y.flow_id[e])) diff(at + "flow id");
    const Lane& la = a.lanes[x.lane[e]];
    const Lane& lb = b.lanes[y.lane[e]];
    if (id_text(a, la.pid) != id_text(b, lb.pid) || id_text(a, la.tid) != id_text(b, lb.tid)) {
      diff(at + "lane (" + id_text(a, la.pid) + "," + id_text(a, la.tid) + ") vs (" + id_text(b, lb.pid) + "," +
           id_text(b, lb.tid) + ")");
    }
    const std::string ja = internal::canonical_json(a.args_json(e));
    const std::string jb = internal::canonical_json(b.args_json(e));
    if (ja != jb) diff(at + "args " + ja.substr(0, 200) + " vs " + jb.substr(0, 200));
  }
  if (a.lanes.size() != b.lanes.size()) {
    diff("lane count " + std::to_string(a.lanes.size()) + " vs " + std::to_string(b.lanes.size()));
  } else {
    for (std::size_t l = 0; l < a.lanes.size(); ++l) {
      const Lane& la = a.lanes[l];
      const Lane& lb = b.lanes[l];
      const std::string at = "lane " + std::to_string(l) + ": ";
      if (la.kind != lb.kind) diff(at + "kind");
      if (la.device != lb.device || la.stream != lb.stream) diff(at + "device/stream");
      if (a.str(la.thread_name) != b.str(lb.thread_name)) diff(at + "thread name");
      if (la.sort_index != lb.sort_index) diff(at + "sort index");
    }
  }
  if (a.processes.size() != b.processes.size()) {
    diff("process count");
  } else {
    for (std::size_t p = 0; p < a.processes.size(); ++p) {
      const Process& pa = a.processes[p];
      const Process& pb = b.processes[p];
      if (id_text(a, pa.pid) != id_text(b, pb.pid) || a.str(pa.name) != b.str(pb.name) ||
          a.str(pa.labels) != b.str(pb.labels) || pa.sort_index != pb.sort_index) {
        diff("process " + std::to_string(p));
      }
    }
  }
  if (a.memory.size() != b.memory.size()) {
    diff("memory record count");
  } else {
    for (std::size_t m = 0; m < a.memory.size(); ++m) {
      const MemoryRecord& ma = a.memory[m];
      const MemoryRecord& mb = b.memory[m];
      if (ma.event != mb.event || ma.bytes != mb.bytes || ma.total_allocated != mb.total_allocated ||
          ma.total_reserved != mb.total_reserved || ma.addr != mb.addr || ma.device_type != mb.device_type ||
          ma.device_id != mb.device_id) {
        diff("memory record " + std::to_string(m));
      }
    }
  }
  if (a.meta.base_time_ns != b.meta.base_time_ns) diff("baseTimeNanoseconds");
  if (a.meta.top_level.size() != b.meta.top_level.size()) {
    diff("top-level key count");
  } else {
    for (std::size_t k = 0; k < a.meta.top_level.size(); ++k) {
      if (a.meta.top_level[k].first != b.meta.top_level[k].first ||
          internal::canonical_json(a.meta.top_level[k].second) != internal::canonical_json(b.meta.top_level[k].second)) {
        diff("top-level key " + a.meta.top_level[k].first);
      }
    }
  }
  return out.str();
}

}  // namespace tprof::testing
