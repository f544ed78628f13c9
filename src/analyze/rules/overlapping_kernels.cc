// overlapping_kernels: device activities that overlap on one stream
// (DiagnosticCode::kOverlappingKernels, found by the reader's validator).
// A stream runs its work in order, so an overlap means the timestamps are
// off (CUPTI clock conversion, a merged or edited trace). tprof keeps both
// events; some viewers nest or drop one of them silently, so the trace a
// person looks at can disagree with the numbers. Trace health; the pair
// shown is the earliest one the reader kept. Silent when the overlap is not
// material (kMinOverlapNs and kMinOverlapShare of the window: 2 µs in a
// 744 ms window changes no figure), when every overlap is under kJitterNs
// (timestamps rounded at kernel boundaries), and on sm90+ NVIDIA GPUs when every
// overlap is a short tail (≤ kPdlMaxNs): programmatic dependent launch
// starts the next kernel on the stream before the previous one ends.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/rules/rules.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

// Material: at least 1 µs of overlap in all and 0.1% of the window (2 µs
// in a 744 ms window, 112 ns in another, change no figure).
constexpr std::int64_t kMinOverlapNs = 1'000;
constexpr double kMinOverlapShare = 0.001;
// Programmatic dependent launch (sm90+): the next kernel's prologue starts
// while the previous kernel's tail runs, a few µs.
constexpr std::int64_t kPdlMaxNs = 5'000;
// Jitter: every overlap under 1 µs is the two activities' timestamps
// rounded at a kernel boundary (an RTX 3090's compiled MAE step: 291
// overlaps of at most 384 ns, 23.7 µs in all, reported first among its
// causes; issue 38's fourteenth round). No viewer hides a kernel over it
// and no figure moves.
constexpr std::int64_t kJitterNs = 1'000;

}  // namespace

void rule_overlapping_kernels(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  const std::uint64_t count = t.diagnostics.count(DiagnosticCode::kOverlappingKernels);
  if (count == 0) return;
  // The earliest flagged activity among the kept diagnostics, and the lanes.
  std::uint32_t second = kNoIndex;
  std::vector<std::uint32_t> lanes;
  for (const Diagnostic& d : t.diagnostics.items()) {
    if (d.code != DiagnosticCode::kOverlappingKernels || d.event == kNoIndex) continue;
    if (second == kNoIndex || c.ts(d.event) < c.ts(second)) second = d.event;
    const std::uint32_t lane = t.events.lane[d.event];
    if (std::find(lanes.begin(), lanes.end(), lane) == lanes.end()) lanes.push_back(lane);
  }
  // Its partner: the activity on the same stream that started first and is
  // still running when it starts (the one reaching furthest, as the validator
  // tracks it).
  std::uint32_t first = kNoIndex;
  if (second != kNoIndex) {
    const std::uint32_t lane = t.events.lane[second];
    for (const DeviceOp& op : c.device) {
      if (op.start > c.ts(second)) break;
      if (op.event == second || op.lane != lane || op.end <= c.ts(second)) continue;
      if (op.start == c.ts(second) && op.event > second) continue;
      if (first == kNoIndex || op.end > c.end(first)) first = op.event;
    }
  }
  // The overlap in all, per stream in start order: each activity against
  // the furthest end before it on its stream.
  std::int64_t overlap_total = 0, overlap_max = 0;
  {
    // By lane index: linear in the activities however many lanes there are.
    std::vector<std::int64_t> furthest(c.trace.lanes.size(), INT64_MIN);  // lane → end so far
    for (const DeviceOp& op : c.device) {
      std::int64_t& end = furthest[op.lane];
      if (end != INT64_MIN && op.start < end) {
        const std::int64_t o = sat_sub(std::min(end, op.end), op.start);
        sat_acc(overlap_total, o);
        overlap_max = std::max(overlap_max, o);
      }
      end = std::max(end, op.end);
    }
  }
  const std::int64_t window = c.window_ns();
  if (overlap_total < kMinOverlapNs || static_cast<double>(overlap_total) < kMinOverlapShare * static_cast<double>(window))
    return;
  if (overlap_max < kJitterNs) return;
  const TensorCores tc = tensor_cores(t);
  if (tc.known && !tc.amd && !c.is_hip() && tc.major >= 9 && overlap_max <= kPdlMaxNs) return;
  std::vector<std::string> lane_labels;
  for (std::uint32_t l : lanes) lane_labels.push_back(c.lane_label(l));

  Finding f;
  f.id = "overlapping_kernels";
  f.severity = FindingSeverity::kWarning;
  f.title = std::to_string(count) + " device activities overlap an earlier one on the same stream";
  f.title += ", " + format_ns(overlap_total) + " in all";
  f.evidence.num("overlaps", static_cast<std::int64_t>(count))
      .num("overlap_total_ns", overlap_total)
      .num("overlap_max_ns", overlap_max)
      .texts("lanes", lane_labels);
  if (first != kNoIndex && second != kNoIndex) {
    f.evidence.num("overlap_ns", std::min(c.end(first), c.end(second)) - c.ts(second))
        .event("first", c.ref(first))
        .event("second", c.ref(second));
  } else if (second != kNoIndex) {
    f.evidence.event("second", c.ref(second));
  }
  std::string lanes_text;
  for (std::size_t i = 0; i < lane_labels.size() && i < 3; ++i) lanes_text += (i ? ", " : "") + lane_labels[i];
  if (lane_labels.size() > 3) lanes_text += ", ...";
  f.advice = "Take busy times on " + lanes_text +
             " from tprof, not from a viewer (Perfetto and chrome://tracing may nest or hide one of the pair), and "
             "re-capture with a current PyTorch/Kineto if the figures matter. A stream runs one activity at a time, "
             "so overlapping activities mean the timestamps are off (clock conversion, a merged or edited trace).";
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
