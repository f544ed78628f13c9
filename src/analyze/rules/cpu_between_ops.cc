// cpu_between_ops: a CPU-only program that runs no recorded op or scope on
// any thread for much of its span. Between ops the thread is in Python (building
// the next inputs, the model's own code, logging) or in work the profiler
// does not record (numpy, a C extension): the ops' tables never show it,
// and a verdict built from Self CPU reads only the ops' share. Origin:
// issue 38's fourteenth round (scoring half, after its figure): a 2020 CPU
// DLRM in the legacy autograd profiler's format ran ops 39.9% of its
// 33.5 ms; 13.2 ms of the rest was Python building each iteration's inputs
// (about 20 torch.tensor calls with ~100 us between them), and the output
// was "No findings.".
//
// Precondition: cpu_only_program (no device activity, no sign of GPU work
// issued); no Python stack (with_stack traces name their host work through
// the other rules); the program's span, first op or scope to last, at least
// kMinSpanNs; in it, the stretches of kMinGapNs or more where no CPU thread
// runs a recorded op or scope (ProfilerStep# and a scope wrapping 90% of the
// span left out: they name no part of it; time another thread fills is its
// work, which the main thread waits for) sum to at least kMinShare of it.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analyze/host_stack.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/cpu_between_ops.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A gap shorter than this is the dispatcher's own time between two ops.
constexpr std::int64_t kMinGapNs = 20'000;
// The thread's span: a few milliseconds at least.
constexpr std::int64_t kMinSpanNs = 5'000'000;
// A warning from this share of the span (kBetweenOpsMinShare makes a
// finding).
constexpr double kWarnShare = 0.50;
// A scope this long a share of the span wraps the whole run: it names no
// part of it.
constexpr double kWholeRunShare = 0.9;

}  // namespace

BetweenOps between_recorded_ops(const DiagnoseContext& c) {
  if (!c.is_torch() || !cpu_only_program(c) || has_python_stack(c)) return {};
  // What the program recorded, on every CPU thread: its ops and its scopes
  // (record_function, a DataLoader's __next__: time a name covers), not
  // ProfilerStep# (the loop itself) nor a scope wrapping the whole run.
  // Time another thread fills is no stretch: the main thread waits for it.
  std::vector<Interval> recorded;
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  for (const std::uint32_t e : c.host_ops) {
    const EventKind k = c.kind(e);
    if (k != EventKind::kCpuOp && k != EventKind::kUserAnnotation) continue;
    first = std::min(first, c.ts(e));
    last = std::max(last, c.end(e));
  }
  BetweenOps b;
  if (first >= last) return b;
  const std::int64_t span = last - first;
  if (span < kMinSpanNs) return b;
  for (const std::uint32_t e : c.host_ops) {
    const EventKind k = c.kind(e);
    if (k != EventKind::kCpuOp && k != EventKind::kUserAnnotation) continue;
    if (is_profiler_step(c.name(e))) continue;
    if (static_cast<double>(c.dur(e)) >= kWholeRunShare * static_cast<double>(span)) continue;
    recorded.push_back({c.ts(e), c.end(e)});
  }
  const std::vector<Interval> ops = merge_intervals(std::move(recorded));
  if (ops.size() < 2) return b;
  std::int64_t busiest = 0;
  for (const Interval& i : ops) sat_acc(busiest, i.end - i.start);
  std::int64_t gaps_ns = 0, largest = 0, largest_at = 0, gaps = 0;
  for (std::size_t i = 1; i < ops.size(); ++i) {
    const std::int64_t g = ops[i].start - ops[i - 1].end;
    if (g < kMinGapNs) continue;
    ++gaps;
    sat_acc(gaps_ns, g);
    if (g > largest) largest = g, largest_at = ops[i - 1].end;
  }
  b.span_ns = span;
  b.recorded_ns = busiest;
  b.gaps_ns = gaps_ns;
  b.gaps = gaps;
  b.largest_ns = largest;
  b.largest_at_ns = largest_at;
  return b;
}

void rule_cpu_between_ops(const DiagnoseContext& c, std::vector<Finding>* out) {
  const BetweenOps b = between_recorded_ops(c);
  const std::int64_t span = b.span_ns, busiest = b.recorded_ns, gaps_ns = b.gaps_ns, gaps = b.gaps;
  const std::int64_t largest = b.largest_ns, largest_at = b.largest_at_ns;
  const double share = b.share();
  if (span == 0 || share < kBetweenOpsMinShare) return;
  Finding f;
  f.id = "cpu_between_ops";
  f.severity = share >= kWarnShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = "No thread runs a recorded op or scope for " + format_pct(100.0 * share) + " of the program's span (" +
            format_ns(gaps_ns) + " of " + format_ns(span) + ", in " + std::to_string(gaps) + " stretches of " +
            format_ns(kMinGapNs) + " or more; the longest " + format_ns(largest) + ")";
  f.evidence.num("span_ns", span)
      .num("recorded_ns", busiest)
      .num("between_ops_ns", gaps_ns)
      .num("stretches", gaps)
      .num("longest_ns", largest)
      .num("longest_at_ns", largest_at - c.start_ns);
  f.advice = "Name this time before changing code (the process is in Python or in unrecorded native code): "
             "record with torch.profiler's with_stack=True (PyTorch 1.8 and later) or record_function scopes "
             "around the loop's parts; it is Python (building the next inputs, "
             "which belongs before the loop or in DataLoader workers, num_workers > 0; the model's own code between "
             "its ops, which torch.compile removes, TorchScript on an older PyTorch) or work the profiler does not "
             "record (numpy, a C extension).";
  f.impact_ns = gaps_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
