// first_call_setup: a recording without steps that is mostly first calls:
// ops whose first call takes many times their later calls (a library
// creating its handles and searching algorithms, the CUDA context, a
// module loading, the first allocation). The trace is one cold pass; its
// time says what the first pass costs, not the loop's. Origin: issue 38's
// fifteenth round: a watermarking network's legacy trace, 2.914 s of its
// 3.464 s in first calls (the first inverse 840 ms, the first bmm 649 ms,
// the first cuDNN convolution 1.121 s; later calls under 4 ms), and a
// Jetson's VoteNet whose first cudnn_convolution took 2.336 s.
// A later call is the same work as the first only where what the trace
// records of both agrees: the input shapes (record_shapes) and the
// innermost nn.Module holding them (with_stack); issue 38's sixteenth
// round: a CPU CNN's one aten::linear in Linear_0 (14.4 s, a 2.41 GB
// weight) against the one in Linear_1 (a 25x1 layer) was "one cold pass".
//
// Precondition: no ProfilerStep, not even as empty markers (cold_start
// judges steps; markers say a schedule ran before the recording) and no device
// activity (with it, a first call's time can be a wait for the device: a
// decode's first aten::copy_, 463 ms behind a queue; host_blocked names
// initialisation there); per op name, the
// outermost calls on their thread, at least one later call doing the same
// work as the first (above): the first is the longest of those,
// kMinFirstNs or more and kFirstFactor times the later calls' median or
// more. Those first calls' union holds kMinShare of the window or more.
// Warning from kWarnShare. Impact: that union, less the later median per
// call (what a warm pass would still take).
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/analyze/host_stack.h"
#include "src/analyze/intervals.h"
#include "src/analyze/nesting.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kMinFirstNs = 10'000'000;
constexpr std::int64_t kFirstFactor = 10;
constexpr double kMinShare = 0.25;
constexpr double kWarnShare = 0.5;
constexpr std::size_t kNamed = 3;

}  // namespace

void rule_first_call_setup(const DiagnoseContext& c, std::vector<Finding>* out) {
  // ProfilerStep#N markers (a legacy export's empty steps) say a profiler
  // schedule ran: the recorded calls are no first pass (issue 38's
  // eighteenth round: a 33 ms all-reduce after schedule(wait=1, warmup=1)
  // had run six, "one cold pass, warm up before recording").
  if (!c.steps.steps.empty() || c.steps.empty_markers > 0 || c.has_device()) return;
  const std::int64_t window = c.window_ns();
  if (window <= 0) return;
  // Outermost CPU ops per thread, by name in start order.
  std::map<std::uint32_t, std::int64_t> open_end;  // lane -> the open outermost op's end
  std::map<StrId, std::vector<std::uint32_t>> calls;
  for (const std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    const std::uint32_t lane = c.trace.events.lane[e];
    auto [it, added] = open_end.try_emplace(lane, INT64_MIN);
    if (c.ts(e) < it->second) continue;
    it->second = c.end(e);
    calls[c.trace.events.name[e]].push_back(e);
  }
  struct First {
    std::uint32_t event;
    std::int64_t later_median;
  };
  // What the trace records of a call's work: its input shapes and the
  // nn.Module holding it, where recorded. Calls with the same key do the
  // same work as far as the trace can tell.
  const bool shapes = records_shapes(c), stack = has_python_stack(c);
  auto work_key = [&](std::uint32_t e) {
    StrId module = kEmptyStr;
    if (stack) {
      const std::uint32_t m = enclosing_module(c.trace, c.nesting(), e);
      if (m != kNoIndex) module = c.trace.events.name[m];
    }
    return std::make_pair(shapes ? input_dims_text(c.trace, e) : std::string(), module);
  };
  std::vector<First> firsts;
  std::vector<Interval> spans;
  for (const auto& [name, v] : calls) {
    const std::int64_t first = c.dur(v.front());
    if (v.size() < 2 || first < kMinFirstNs) continue;
    std::vector<std::int64_t> later;
    std::int64_t longest = 0;
    const auto first_key = work_key(v.front());
    for (std::size_t i = 1; i < v.size(); ++i) {
      if (work_key(v[i]) != first_key) continue;
      later.push_back(c.dur(v[i]));
      longest = std::max(longest, c.dur(v[i]));
    }
    if (later.empty()) continue;
    const std::int64_t median = mean_median(later);
    if (first < longest || first < sat_mul(kFirstFactor, median)) continue;
    firsts.push_back({v.front(), median});
    spans.push_back({c.ts(v.front()), c.end(v.front())});
  }
  if (firsts.empty()) return;
  const std::int64_t held = total_length(merge_intervals(std::move(spans)));
  const double share = static_cast<double>(held) / static_cast<double>(window);
  if (share < kMinShare) return;
  std::sort(firsts.begin(), firsts.end(),
            [&](const First& a, const First& b) { return c.dur(a.event) > c.dur(b.event); });
  std::int64_t warm = 0;
  for (const First& f : firsts) sat_acc(warm, f.later_median);
  std::string named;
  for (std::size_t i = 0; i < firsts.size() && i < kNamed; ++i) {
    named += (i ? ", " : "") + std::string(c.name(firsts[i].event)) + " " + format_ns(c.dur(firsts[i].event)) +
             " (later calls " + format_ns(firsts[i].later_median) + ")";
  }
  if (firsts.size() > kNamed) named += ", ...";
  Finding f;
  f.id = "first_call_setup";
  f.severity = share >= kWarnShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = "One cold pass: first calls hold " + format_pct(100.0 * share) + " of the trace (" + format_ns(held) +
            " of " + format_ns(window) + "), " + std::to_string(firsts.size()) + " op" +
            (firsts.size() == 1 ? "" : "s") + " whose first call takes " + std::to_string(kFirstFactor) +
            "x their later ones or more: " + named;
  f.evidence.num("first_calls_ns", held)
      .num("window_ns", window)
      .num("ops", static_cast<std::int64_t>(firsts.size()))
      .event("longest_first_call", c.ref(firsts.front().event));
  // The GPU's set-up is a candidate only where the trace shows GPU work
  // issued (cpu_only_program: runtime calls, a GPU library's ops such as a
  // legacy trace's cudnn_convolution). On the CPU alone (issue 38's
  // sixteenth round's review) it is the first allocations and a library's
  // lazy set-up.
  const bool gpu = !cpu_only_program(c);
  f.advice = "Warm up before recording: run the model once (or a few iterations) before the profiler starts, or "
             "record several iterations with torch.profiler.schedule(wait=1, warmup=1, active=N): " +
             format_ns(held) + " of this trace is first calls, one-time set-up (" +
             (gpu ? "a GPU library's handles and algorithm search, the CUDA context, modules loading, the first "
                    "allocations"
                  : "the first allocations and page faults, a library's lazy set-up such as oneDNN creating its "
                    "primitives, modules loading") +
             ") that the loop does not pay again, so its times say little about the steady state.";
  f.impact_ns = std::max<std::int64_t>(0, sat_sub(held, warm));
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
