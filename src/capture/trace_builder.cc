#include "src/capture/trace_builder.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>

#include "src/base/json_writer.h"
#include "src/trace/event_parser.h"
#include "src/trace/validate.h"
#include "tprof/record_function.h"

namespace tprof::internal {

namespace {

constexpr const char* kVersion = "0.1.0";

void append_int(std::string* out, std::int64_t v) {
  char buf[24];
  out->append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void append_uint(std::string* out, std::uint64_t v) {
  char buf[24];
  out->append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

class Builder {
 public:
  Builder(const TickConversion& clock, const CaptureInfo& info) : clock_(clock), info_(info) {}

  Trace run(const std::vector<ThreadRecords>& threads);

 private:
  std::uint32_t add_event(Phase ph, StrId name, StrId cat, std::uint32_t lane, std::int64_t ts, std::int64_t dur) {
    EventColumns& e = t_.events;
    const std::uint32_t i = static_cast<std::uint32_t>(e.size());
    e.ts_ns.push_back(ts);
    e.dur_ns.push_back(dur);
    e.name.push_back(name);
    e.cat.push_back(cat);
    e.lane.push_back(lane);
    e.phase.push_back(ph);
    e.kind.push_back(ph == Phase::kMetadata ? EventKind::kMetadata : kind_from_category(t_.str(cat)));
    e.flags.push_back(0);
    e.external_id.push_back(-1);
    e.correlation.push_back(-1);
    e.flow_id.push_back(-1);
    e.args_ref.push_back(0);
    e.src_offset.push_back(0);
    return i;
  }
  void metadata(const char* what, std::uint32_t lane, const std::string& args) {
    const std::uint32_t e = add_event(Phase::kMetadata, t_.strings.intern(what), kEmptyStr, lane, info_.window_start_ns, 0);
    t_.set_args_json(e, args);
  }
  StrId site_name(const ScopeSite* site) {
    auto [it, added] = sites_.try_emplace(site, StrId{});
    if (added) it->second = t_.strings.intern(site->name);
    return it->second;
  }
  StrId site_cat(const ScopeSite* site) {
    auto [it, added] = site_cats_.try_emplace(site, StrId{});
    if (added) it->second = t_.strings.intern(site->category != nullptr ? site->category : kUserAnnotation);
    return it->second;
  }

  const TickConversion& clock_;
  const CaptureInfo& info_;
  Trace t_;
  std::unordered_map<const ScopeSite*, StrId> sites_, site_cats_;
  std::unordered_map<std::uint32_t, std::pair<StrId, StrId>> dynamic_;
  std::string args_;
};

std::string json_string(std::string_view s) {
  std::string out;
  append_json_string(&out, s);
  return out;
}

Trace Builder::run(const std::vector<ThreadRecords>& threads) {
  t_.meta.producer = Producer::kTprof;
  std::uint64_t dropped = 0, dropped_shapes = 0;
  std::size_t total = 0;
  for (const ThreadRecords& tr : threads) {
    dropped += tr.dropped;
    dropped_shapes += tr.dropped_shapes;
    total += tr.records.size();
  }
  t_.events.reserve(total + 2 * threads.size() + 4);
  t_.meta.dropped_events = dropped;
  t_.meta.top_level.emplace_back("schemaVersion", "1");
  t_.meta.top_level.emplace_back("deviceProperties", "[]");
  std::string tprof_key = "{\"version\": \"";
  tprof_key += kVersion;
  tprof_key += "\", \"droppedEvents\": ";
  append_uint(&tprof_key, dropped);
  tprof_key += ", \"droppedShapes\": ";
  append_uint(&tprof_key, dropped_shapes);
  tprof_key += "}";
  t_.meta.top_level.emplace_back("tprof", tprof_key);

  const TraceId pid{info_.pid, kEmptyStr, false};
  const std::uint32_t process_lane = t_.lane_for(pid, TraceId{0, kEmptyStr, false}, LaneKind::kOther);
  metadata("process_name", process_lane, "{\"name\": " + json_string(info_.process_name) + "}");
  metadata("process_labels", process_lane, "{\"labels\": \"CPU\"}");
  Process& proc = t_.process_for(pid);
  proc.name = t_.strings.intern(info_.process_name);
  proc.labels = t_.strings.intern("CPU");

  // "Total Allocated" is the running sum per device over all threads, in time order.
  struct Mem {
    std::uint64_t tick;
    std::size_t thread, record;
  };
  std::vector<Mem> mems;
  for (std::size_t ti = 0; ti < threads.size(); ++ti) {
    for (std::size_t ri = 0; ri < threads[ti].records.size(); ++ri) {
      if (threads[ti].records[ri].kind == kRecordMemory) mems.push_back({threads[ti].records[ri].b, ti, ri});
    }
  }
  std::stable_sort(mems.begin(), mems.end(), [](const Mem& a, const Mem& b) { return a.tick < b.tick; });
  std::map<std::uint16_t, std::int64_t> running;
  std::unordered_map<std::uint64_t, std::int64_t> total_after;  // (thread, record) -> running total
  for (const Mem& m : mems) {
    const Record& r = threads[m.thread].records[m.record];
    running[r.e] += static_cast<std::int64_t>(r.c);
    total_after[(static_cast<std::uint64_t>(m.thread) << 40) | m.record] = running[r.e];
  }

  const StrId user_annotation = t_.strings.intern(kUserAnnotation);
  const StrId memory_name = t_.strings.intern("[memory]");
  const StrId memory_cat = t_.strings.intern("cpu_instant_event");
  std::int64_t external_id = 0;
  std::vector<std::uint32_t> order;
  for (std::size_t ti = 0; ti < threads.size(); ++ti) {
    const ThreadRecords& tr = threads[ti];
    const std::uint32_t lane = t_.lane_for(pid, TraceId{tr.tid, kEmptyStr, false}, LaneKind::kCpu);
    std::string thread_label = "thread " + std::to_string(tr.tid) + " (" + tr.name + ")";
    metadata("thread_name", lane, "{\"name\": " + json_string(thread_label) + "}");
    t_.lanes[lane].thread_name = t_.strings.intern(thread_label);
    // Records are appended when scopes end (children first): order by start,
    // longer first, as Kineto writes ops.
    order.resize(tr.records.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      const Record& x = tr.records[a];
      const Record& y = tr.records[b];
      const std::uint64_t xe = x.kind == kRecordMemory ? x.b : x.c, ye = y.kind == kRecordMemory ? y.b : y.c;
      return x.b != y.b ? x.b < y.b : xe > ye;
    });
    for (std::uint32_t ri : order) {
      const Record& r = tr.records[ri];
      if (r.kind == kRecordMemory) {
        const std::uint32_t e = add_event(Phase::kInstant, memory_name, memory_cat, lane, clock_(r.b), 0);
        t_.events.kind[e] = EventKind::kMemory;
        t_.events.flags[e] = kFlagInstantThread;
        MemoryRecord m;
        m.event = e;
        m.bytes = static_cast<std::int64_t>(r.c);
        m.addr = r.a;
        m.device_type = static_cast<std::int16_t>(r.e >> 8);
        m.device_id = static_cast<std::int16_t>(static_cast<std::int8_t>(r.e & 0xff));
        m.total_allocated = total_after[(static_cast<std::uint64_t>(ti) << 40) | ri];
        t_.memory.push_back(m);
        args_ = "{\"Device Type\": ";
        append_int(&args_, m.device_type);
        args_ += ", \"Device Id\": ";
        append_int(&args_, m.device_id);
        args_ += ", \"Addr\": ";
        append_uint(&args_, m.addr);
        args_ += ", \"Bytes\": ";
        append_int(&args_, m.bytes);
        args_ += ", \"Total Allocated\": ";
        append_int(&args_, m.total_allocated);
        args_ += ", \"Total Reserved\": 0}";
        t_.set_args_json(e, args_);
        continue;
      }
      StrId name = kEmptyStr, cat = user_annotation;
      if (r.kind == kRecordScope) {
        const auto* site = reinterpret_cast<const ScopeSite*>(static_cast<std::uintptr_t>(r.a));
        name = site_name(site);
        cat = site_cat(site);
      } else if (r.kind == kRecordDynamicScope) {
        auto [it, added] = dynamic_.try_emplace(static_cast<std::uint32_t>(r.a));
        if (added) {
          it->second = {t_.strings.intern(dynamic_name(static_cast<std::uint32_t>(r.a))),
                        t_.strings.intern(dynamic_category(static_cast<std::uint32_t>(r.a)))};
        }
        name = it->second.first;
        cat = it->second.second;
      } else if (r.kind == kRecordStep) {
        name = t_.strings.intern("ProfilerStep#" + std::to_string(static_cast<std::int64_t>(r.a)));
      } else {
        continue;
      }
      const std::int64_t ts = clock_(r.b);
      const std::uint32_t e = add_event(Phase::kComplete, name, cat, lane, ts, clock_(r.c) - ts);
      t_.events.external_id[e] = ++external_id;
      args_ = "{\"External id\": ";
      append_int(&args_, external_id);
      if (r.d != 0 && r.d - 1 < tr.payload.size()) {
        // [count][rank][dims...]...
        std::size_t w = r.d - 1;
        const std::uint64_t count = tr.payload[w++];
        args_ += ", \"Input Dims\": [";
        for (std::uint64_t s = 0; s < count && w < tr.payload.size(); ++s) {
          if (s) args_ += ", ";
          args_ += '[';
          const std::uint64_t rank = tr.payload[w++];
          for (std::uint64_t k = 0; k < rank && w < tr.payload.size(); ++k) {
            if (k) args_ += ", ";
            append_int(&args_, static_cast<std::int64_t>(tr.payload[w++]));
          }
          args_ += ']';
        }
        args_ += ']';
      }
      args_ += '}';
      t_.set_args_json(e, args_);
    }
  }
  if (dropped > 0) {
    t_.diagnostics.add(DiagnosticCode::kDroppedEvents, -1,
                       std::to_string(dropped) + " events dropped: thread buffers were full "
                                                 "(raise ProfilerOptions::buffer_events_per_thread)");
  }
  if (dropped_shapes > 0) {
    t_.diagnostics.add(DiagnosticCode::kDroppedEvents, -1,
                       std::to_string(dropped_shapes) + " events lost their input shapes: payload arenas were full "
                                                        "(raise ProfilerOptions::payload_words_per_thread)");
  }
  if (info_.cuda_requested && !info_.cuda_available) {
    t_.diagnostics.add(DiagnosticCode::kActivityUnavailable, -1,
                       "CUDA activity was requested, but this tprof was built without CUPTI: CPU only");
  }
  check_trace(&t_);
  return std::move(t_);
}

}  // namespace

Trace build_trace(const std::vector<ThreadRecords>& threads, const TickConversion& clock, const CaptureInfo& info) {
  return Builder(clock, info).run(threads);
}

}  // namespace tprof::internal
