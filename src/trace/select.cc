#include "src/trace/select.h"

namespace tprof::internal {

Trace select_window(const Trace& t, std::int64_t start_ns, std::int64_t end_ns) {
  const EventColumns& in = t.events;
  std::vector<std::uint8_t> keep(in.size(), 0);
  for (std::uint32_t e = 0; e < in.size(); ++e) {
    keep[e] = in.phase[e] == Phase::kMetadata || (in.ts_ns[e] <= end_ns && in.ts_ns[e] + in.dur_ns[e] >= start_ns);
  }
  return select_events(t, keep);
}

Trace select_events(const Trace& t, const std::vector<std::uint8_t>& keep) {
  Trace out;
  // Interned in id order into a fresh pool, every string gets its old id.
  for (StrId id = 1; id < t.strings.size(); ++id) out.strings.intern(t.str(id));
  out.processes = t.processes;
  out.meta = t.meta;
  const EventColumns& in = t.events;
  std::vector<std::uint32_t> new_index(in.size(), kNoIndex);
  std::uint32_t n = 0;
  for (std::uint32_t e = 0; e < in.size(); ++e) {
    if (keep[e]) new_index[e] = n++;
  }
  // Lanes that still hold events, in order of first use: the lanes a
  // reader of the written window would make.
  std::vector<std::uint32_t> new_lane(t.lanes.size(), kNoIndex);
  EventColumns& c = out.events;
  c.resize(n);
  for (std::uint32_t e = 0; e < in.size(); ++e) {
    const std::uint32_t k = new_index[e];
    if (k == kNoIndex) continue;
    c.copy_row(k, in, e);
    std::uint32_t& lane = new_lane[in.lane[e]];
    if (lane == kNoIndex) {
      lane = static_cast<std::uint32_t>(out.lanes.size());
      out.lanes.push_back(t.lanes[in.lane[e]]);
    }
    c.lane[k] = lane;
    out.set_args_json(k, t.args_json(e));  // the args move to the new trace
  }
  for (MemoryRecord m : t.memory) {
    if (new_index[m.event] == kNoIndex) continue;
    m.event = new_index[m.event];
    out.memory.push_back(m);
  }
  for (const Diagnostic& d : t.diagnostics.items()) {
    // Kept, without an event reference the window may have dropped.
    const std::uint32_t event = d.event < new_index.size() ? new_index[d.event] : kNoIndex;
    out.diagnostics.add(d.code, d.byte_offset, d.message, event);
  }
  return out;
}

}  // namespace tprof::internal
