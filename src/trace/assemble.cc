#include "src/trace/assemble.h"

#include <cstdint>
#include <string_view>
#include <vector>

#include "src/trace/json_cursor.h"
#include "src/trace/kineto_keys.h"
#include "src/trace/torch_npu.h"
#include "src/trace/validate.h"

namespace tprof::internal {

std::uint8_t lane_activity(const Trace& t, std::uint32_t e) {
  switch (t.events.kind[e]) {
    case EventKind::kKernel:
    case EventKind::kGpuMemcpy:
    case EventKind::kGpuMemset:
    case EventKind::kGpuUserAnnotation:
    case EventKind::kCudaSync:
    case EventKind::kProfilerRange:
      return 2;
    case EventKind::kCpuOp:
    case EventKind::kUserAnnotation:
    case EventKind::kPythonFunction:
    case EventKind::kCudaRuntime:
    case EventKind::kCudaDriver:
    case EventKind::kMemory:
    case EventKind::kOutOfMemory:
      return 1;
    case EventKind::kOther:
      // Unknown categories count as host work only under a numeric pid
      // (not "Spans", "Traces", "").
      return t.events.phase[e] == Phase::kComplete && !t.lanes[t.events.lane[e]].pid.is_str ? 1 : 0;
    default:
      return 0;
  }
}

namespace {

void finish_lanes(Trace* t, std::span<const DeviceHint> hints, std::span<const std::uint8_t> activity) {
  Trace& trace_ = *t;
  const std::size_t nl = trace_.lanes.size();
  std::vector<std::uint8_t> seen(activity.begin(), activity.end());
  if (activity.empty()) {
    seen.assign(nl, 0);
    for (std::uint32_t e = 0; e < trace_.events.size(); ++e) seen[trace_.events.lane[e]] |= lane_activity(trace_, e);
  }
  seen.resize(nl, 0);
  for (std::size_t l = 0; l < nl; ++l) {
    Lane& lane = trace_.lanes[l];
    if (seen[l] & 2) {
      lane.kind = LaneKind::kGpu;
      if (!lane.pid.is_str) lane.device = static_cast<std::int32_t>(lane.pid.num);
      // The legacy array's "CUDA functions": the current device's spans.
      if (lane.pid.is_str && trace_.strings.str(lane.pid.str) == "CUDA functions") lane.device = 0;
      if (!lane.tid.is_str) {
        lane.stream = lane.tid.num;
      } else {
        // 2021 traces: "stream 7".
        std::string_view s = trace_.strings.str(lane.tid.str);
        if (s.rfind("stream ", 0) == 0) {
          std::int64_t v = 0;
          if (parse_int64(s.substr(7), &v)) lane.stream = v;
        }
      }
    } else if (seen[l] & 1) {
      lane.kind = LaneKind::kCpu;  // also "CPU functions", the pid of torch's legacy export
    } else {
      lane.kind = LaneKind::kOther;
    }
  }
  // Kineto writes pid = device and tid = stream for device activity; the
  // args' "device"/"stream" only fill in what the ids do not say (some
  // writers put stream 0xffffffff there).
  for (const DeviceHint& h : hints) {
    Lane& lane = trace_.lanes[h.lane];
    if (lane.device < 0 && h.device >= 0) lane.device = h.device;
    if (lane.stream < 0 && h.stream >= 0 && h.stream <= INT32_MAX) lane.stream = h.stream;
  }
}

void apply_metadata(Trace* t, std::span<const MetaRecord> meta) {
  Trace& trace_ = *t;
  const auto process_name = trace_.strings.find(kineto::kProcessName);
  const auto process_labels = trace_.strings.find(kineto::kProcessLabels);
  const auto process_sort = trace_.strings.find(kineto::kProcessSortIndex);
  const auto thread_name = trace_.strings.find(kineto::kThreadName);
  const auto thread_sort = trace_.strings.find(kineto::kThreadSortIndex);
  for (const MetaRecord& m : meta) {
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

}  // namespace

void assemble_trace(Trace* trace, std::span<const MetaRecord> meta, std::span<const DeviceHint> hints,
                    std::span<const std::uint8_t> activity, bool check) {
  finish_lanes(trace, hints, activity);
  apply_metadata(trace, meta);
  // A vendor's layout onto the one model (its processes' names say which).
  normalize_torch_npu(trace);
  if (check) check_trace(trace);
}

}  // namespace tprof::internal
