#include "src/trace/torch_npu.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "src/trace/json_value.h"

namespace tprof::internal {

namespace {

// The process names torch_npu writes (see the header).
constexpr std::string_view kHardware = "Ascend Hardware", kHccl = "HCCL", kCann = "CANN", kPython = "Python";

std::string_view str_of(const Trace& t, StrId s) { return t.strings.str(s); }

// An integer arg of event e, written as a number or a string ("stream id":
// 4, "connection_id": 936); -1 when absent.
std::int64_t int_arg(const Trace& t, std::uint32_t e, std::string_view key) {
  const std::string_view json = t.args_json(e);
  if (json.empty()) return -1;
  const std::array<std::string_view, 1> keys{key};
  std::array<std::string_view, 1> values{};
  if (!member_values(json, keys, values) || values[0].empty()) return -1;
  std::string_view v = values[0];
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  std::int64_t out = -1;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), out);
  return r.ec == std::errc() && r.ptr == v.data() + v.size() ? out : -1;
}

// A stream's own tasks that are no work of the device: waits and
// signals between streams or devices, and the profiler's markers.
bool is_sync_task(std::string_view n) {
  for (std::string_view p : {"Notify Wait", "Notify_Wait", "Notify Record", "Notify_Record", "EVENT_WAIT", "EVENT_RECORD",
                             "Write Value", "PLACE_HOLDER", "PROFILING_ENABLE", "PROFILING_DISABLE", "STARS_"}) {
    if (n.starts_with(p)) return true;
  }
  return false;
}

// A copy task (the runtime's memcpy: MEMCPY_ASYNC, and its DMA engines).
bool is_copy_task(std::string_view n) {
  return n.starts_with("MEMCPY") || n.starts_with("Memcpy") || n == "SDMA" || n.starts_with("PCIE_DMA");
}

}  // namespace

bool is_torch_npu(const Trace& t) {
  for (const Process& p : t.processes) {
    if (str_of(t, p.name) == kHardware && str_of(t, p.labels) == "NPU") return true;
  }
  return false;
}

void normalize_torch_npu(Trace* trace) {
  Trace& t = *trace;
  if (!is_torch_npu(t)) return;
  // The processes by name.
  TraceId hardware, hccl, cann, python;
  bool has_hccl = false, has_cann = false, has_python = false;
  std::vector<TraceId> derived;  // the other NPU-labelled processes
  for (const Process& p : t.processes) {
    const std::string_view name = str_of(t, p.name);
    if (name == kHardware) {
      hardware = p.pid;
    } else if (name == kHccl) {
      hccl = p.pid, has_hccl = true;
    } else if (name == kCann) {
      cann = p.pid, has_cann = true;
    } else if (name == kPython) {
      python = p.pid, has_python = true;
    } else if (str_of(t, p.labels) == "NPU") {
      derived.push_back(p.pid);
    }
  }
  EventColumns& ev = t.events;
  const std::size_t nlanes = t.lanes.size();
  // The streams a collective's tasks run on (HCCL's "Plane" tasks carry
  // them): their tasks are the collective's, counted once, as it.
  std::set<std::int64_t> comm_streams;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const Lane& lane = t.lanes[ev.lane[e]];
    if (!has_hccl || lane.pid != hccl || ev.phase[e] != Phase::kComplete) continue;
    if (!str_of(t, lane.thread_name).starts_with("Plane")) continue;
    const std::int64_t s = int_arg(t, e, "stream id");
    if (s >= 0) comm_streams.insert(s);
  }
  // Lanes: the hardware's streams and HCCL's whole operations are device
  // lanes; HCCL's planes and the derived tracks are neither host nor
  // device.
  std::int64_t max_stream = -1;
  for (std::size_t l = 0; l < nlanes; ++l) {
    if (t.lanes[l].pid == hardware && !t.lanes[l].tid.is_str) max_stream = std::max(max_stream, t.lanes[l].tid.num);
  }
  // Lanes holding complete events (a process's tid 0 often holds only
  // its labels).
  std::vector<std::uint8_t> used(nlanes, 0);
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] == Phase::kComplete) used[ev.lane[e]] = 1;
  }
  enum class Role : std::uint8_t { kKeep, kStream, kCollectives, kLeftOut, kCann };
  std::vector<Role> role(nlanes, Role::kKeep);
  for (std::size_t l = 0; l < nlanes; ++l) {
    Lane& lane = t.lanes[l];
    const bool is_derived = std::find(derived.begin(), derived.end(), lane.pid) != derived.end();
    if (lane.pid == hardware && !used[l]) {
      lane.kind = LaneKind::kOther;
    } else if (lane.pid == hardware) {
      role[l] = Role::kStream;
      lane.kind = LaneKind::kGpu;
      lane.device = 0;
      lane.stream = lane.tid.is_str ? -1 : lane.tid.num;
    } else if (has_hccl && lane.pid == hccl) {
      const bool plane = str_of(t, lane.thread_name).starts_with("Plane");
      role[l] = plane ? Role::kLeftOut : Role::kCollectives;
      lane.kind = plane ? LaneKind::kOther : LaneKind::kGpu;
      if (!plane) {
        // The stream the collective's tasks ran on, where there is one
        // (its own tasks there are left out); else one no NPU stream has.
        lane.device = 0;
        lane.stream = comm_streams.size() == 1 ? *comm_streams.begin()
                                               : max_stream + 1 + (lane.tid.is_str ? 0 : lane.tid.num);
      }
    } else if (is_derived) {
      role[l] = Role::kLeftOut;
      lane.kind = LaneKind::kOther;
    } else if (has_cann && lane.pid == cann) {
      role[l] = Role::kCann;
    }
  }
  // A CANN call already on its Python thread (a trace tprof wrote back:
  // its calls keep their names and args, and the legacy array's category,
  // "cpu_op", or none).
  const auto cann_call = [&](std::uint32_t e) {
    const std::string_view n = t.name(e), cat = str_of(t, ev.cat[e]);
    return has_python && t.lanes[ev.lane[e]].pid == python && (cat.empty() || cat == "cpu_op") &&
           (n.starts_with("AscendCL@") || n.starts_with("Node@"));
  };
  // Events.
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const std::uint32_t l = ev.lane[e];
    const bool complete = ev.phase[e] == Phase::kComplete;
    switch (role[l]) {
      case Role::kKeep:
        if (complete && cann_call(e)) {
          ev.kind[e] = EventKind::kCudaRuntime;
          ev.correlation[e] = int_arg(t, e, "connection_id");
        }
        break;
      case Role::kStream: {
        if (!complete) break;
        const std::string_view n = t.name(e);
        const Lane& lane = t.lanes[l];
        if (is_sync_task(n) || comm_streams.count(lane.stream) != 0) {
          ev.kind[e] = EventKind::kOther;
        } else {
          ev.kind[e] = is_copy_task(n) ? EventKind::kGpuMemcpy : EventKind::kKernel;
        }
        break;
      }
      case Role::kCollectives:
        if (complete) ev.kind[e] = EventKind::kKernel;
        break;
      case Role::kLeftOut:
        ev.kind[e] = EventKind::kOther;
        break;
      case Role::kCann: {
        if (!complete) break;
        ev.kind[e] = EventKind::kCudaRuntime;
        ev.correlation[e] = int_arg(t, e, "connection_id");
        // On its thread's lane in the Python process, where its op runs.
        if (has_python) {
          const TraceId tid = t.lanes[l].tid;
          ev.lane[e] = t.lane_for(python, tid, LaneKind::kCpu);
        }
        break;
      }
    }
  }
  // A task's launch: the HostToDevice flow from the CANN call (its start
  // inside the call) to the task (its end at the task's start), which
  // every torch_npu version writes; the connection ids above are 2024's
  // and later only. The call and its tasks share the call's correlation.
  {
    const auto hd = t.strings.find("HostToDevice");
    std::vector<std::vector<std::uint32_t>> calls(t.lanes.size()), tasks(t.lanes.size());
    std::vector<std::uint32_t> starts, ends;
    for (std::uint32_t e = 0; e < ev.size(); ++e) {
      const bool flow = hd && ev.cat[e] == *hd;
      if (flow && ev.phase[e] == Phase::kFlowStart) starts.push_back(e);
      if (flow && ev.phase[e] == Phase::kFlowEnd) ends.push_back(e);
      if (ev.phase[e] != Phase::kComplete) continue;
      if (ev.kind[e] == EventKind::kCudaRuntime) calls[ev.lane[e]].push_back(e);
      if (ev.kind[e] == EventKind::kKernel || ev.kind[e] == EventKind::kGpuMemcpy) tasks[ev.lane[e]].push_back(e);
    }
    const auto by_ts = [&](std::uint32_t a, std::uint32_t b) { return ev.ts_ns[a] < ev.ts_ns[b]; };
    for (auto& v : calls) std::sort(v.begin(), v.end(), by_ts);
    for (auto& v : tasks) std::sort(v.begin(), v.end(), by_ts);
    // The flow's start on the CANN thread: its lane now is the Python
    // thread's, where the calls moved.
    std::map<std::int64_t, std::uint32_t> call_of;
    for (const std::uint32_t s : starts) {
      std::uint32_t lane = ev.lane[s];
      if (has_python && lane < role.size() && role[lane] == Role::kCann) {
        lane = t.lane_for(python, t.lanes[lane].tid, LaneKind::kCpu);
      }
      if (lane >= calls.size()) continue;
      const std::vector<std::uint32_t>& v = calls[lane];
      // The innermost call holding the start: the latest to start at or before it that ends after it.
      auto it = std::upper_bound(v.begin(), v.end(), ev.ts_ns[s],
                                 [&](std::int64_t x, std::uint32_t e) { return x < ev.ts_ns[e]; });
      while (it != v.begin()) {
        --it;
        if (ev.ts_ns[*it] + ev.dur_ns[*it] >= ev.ts_ns[s]) {
          // An op compiled at run time is a blocking call, not a launch:
          // the host waits for its compilation (its tasks stay unlinked).
          if (t.name(*it) != "AscendCL@aclopCompileAndExecute") call_of[ev.flow_id[s]] = *it;
          break;
        }
        if (ev.ts_ns[s] - ev.ts_ns[*it] > 10'000'000) break;  // (no call that long)
      }
    }
    for (const std::uint32_t f : ends) {
      const auto c = call_of.find(ev.flow_id[f]);
      if (c == call_of.end() || ev.lane[f] >= tasks.size()) continue;
      const std::vector<std::uint32_t>& v = tasks[ev.lane[f]];
      auto it = std::lower_bound(v.begin(), v.end(), ev.ts_ns[f],
                                 [&](std::uint32_t e, std::int64_t x) { return ev.ts_ns[e] < x; });
      if (it == v.end() || ev.ts_ns[*it] != ev.ts_ns[f]) continue;
      std::int64_t& id = ev.correlation[c->second];
      if (id < 0) id = ev.flow_id[f];
      ev.correlation[*it] = id;
    }
    // No flows: the tasks' connection ids name their calls.
    if (call_of.empty()) {
      for (const auto& v : tasks) {
        for (const std::uint32_t e : v) ev.correlation[e] = int_arg(t, e, "connection_id");
      }
    }
  }
  // The CANN process's own lanes are empty now (their events moved).
  if (has_python) {
    for (std::size_t l = 0; l < nlanes; ++l) {
      if (role[l] == Role::kCann) t.lanes[l].kind = LaneKind::kOther;
    }
  }
}

}  // namespace tprof::internal
