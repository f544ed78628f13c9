// kernel_variance: the same kernel name taking different times across steps.
// Definitions as tprof kernels (include/tprof/kernels.h): median by nearest
// rank, cv = population stddev / mean, an outlier is slower than 1.5x the
// median or faster than half of it (names with at least 3 instances).
// Cheatsheet: "The same kernel taking different times across identical steps
// (...) Report median and spread, not only the mean; name the outlier steps."
// Precondition: the same work in identical steps. Instances are grouped by
// name, launch shape (Kineto's grid and block args, when present) and their
// place in the step (the k-th launch of that name and shape in each step),
// and a group needs 3 steps: within one pass the same kernel at one grid
// serves different layers (alexnet's two FC layers, K 9216 and 4096; BERT's
// GEMMs; batch norm per channel count), whose times differ by design. So
// traces without steps, or with fewer than 5, get no finding; 3 or 4
// samples with one outlier are an anecdote, not a spread. Only compute
// kernels: copies (their time follows their bytes) and collectives (their
// time follows the slowest peer) are left out.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// The outliers must move at least this much time, absolute and as a share of
// the name's total, so a 1 µs memset taking 1.3 µs once is not reported.
constexpr std::int64_t kMinExcessNs = 5'000;
constexpr double kMinExcessShare = 0.05;
// Ours: and the slow outliers' excess (the time steady runs would save; fast
// outliers save nothing) must be material: at least 20 µs and 1% of the
// steps' time. A few µs of one elementwise kernel is not worth a line.
constexpr std::int64_t kMinSavingNs = 20'000;
constexpr double kMinSavingShare = 0.01;
// Warning when the mean misleads: it is at least 10% away from the median
// (the post: mean ~1084 µs against ~580 µs per step), and the slow runs cost
// at least 5% of the steps' time (the post: 1.9 ms of 20 ms).
constexpr double kMeanSkew = 0.10;
constexpr double kWarningSavingShare = 0.05;
// One finding per kernel name, at most this many (largest excess first).
constexpr std::size_t kMaxFindings = 5;
// Outlier instances and steps listed in the evidence (the counts stay exact).
constexpr std::size_t kMaxListed = 10;
constexpr std::size_t kMaxSteps = 100;
// Identical steps to compare: the blog's pattern is one step out of several.
constexpr std::size_t kMinSteps = 5;
// Slow runs that cost under this share of the steps' time are a note on
// how to read the kernel, not a cause to fix first: no card of their own
// after the first (issue 38's fourteenth round: a laptop GPU's convolution
// slow in two of ten steps, 1.3% of the steps, ranked second).
constexpr double kCardSavingShare = 0.02;
// A slow call's neighbours "kept their times" when the step's other
// kernels take within this share of their time in the usual steps.
constexpr double kNeighbourSpread = 0.05;

}  // namespace

void rule_kernel_variance(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  // Compute kernels by name, then by launch shape. Args are parsed only for
  // names whose spread could hold an outlier at all (max > 1.5x min, which
  // any outlier of a subgroup implies).
  std::unordered_map<StrId, std::vector<const DeviceOp*>> by_name;
  for (const DeviceOp& op : c.device) {
    if (op.cls == DeviceClass::kCompute && op.step >= 0) by_name[t.events.name[op.event]].push_back(&op);
  }
  // Names whose spread could hold an outlier at all, and their instances'
  // launch shapes read in file order (by event): args are paged in from
  // the source as they are read, and a pass per name paged the file in
  // once per name (a third of diagnose on a 200 MB trace). Shapes are
  // interned to small ids: the maps compare integers, not strings; groups
  // are still visited in (shape text, call) order.
  // A name is skipped, unread, when even its largest possible saving is
  // below the bar a finding must pass: a group's median is at least the
  // name's fastest instance, so no grouping's slow excess exceeds the sum
  // of every instance's time over that fastest one.
  std::int64_t steps_ns = 0;
  for (const StepStat& s : c.steps.steps) sat_acc(steps_ns, s.dur_ns);
  const double min_saving =
      std::max(static_cast<double>(kMinSavingNs), kMinSavingShare * static_cast<double>(steps_ns));
  std::vector<const std::vector<const DeviceOp*>*> spread;
  std::vector<const DeviceOp*> wanted;
  for (const auto& [name, ops] : by_name) {
    if (ops.size() < 3) continue;
    std::int64_t lo = INT64_MAX, hi = 0;
    for (const DeviceOp* op : ops) {
      lo = std::min(lo, op->end - op->start);
      hi = std::max(hi, op->end - op->start);
    }
    if (static_cast<double>(hi) <= 1.5 * static_cast<double>(lo)) continue;
    std::int64_t over_fastest = 0;
    for (const DeviceOp* op : ops) sat_acc(over_fastest, op->end - op->start - lo);
    if (static_cast<double>(over_fastest) < min_saving) continue;
    spread.push_back(&ops);
    wanted.insert(wanted.end(), ops.begin(), ops.end());
  }
  std::sort(wanted.begin(), wanted.end(), [](const DeviceOp* a, const DeviceOp* b) { return a->event < b->event; });
  std::vector<int> shape_of(c.device.size(), -1);  // by index in c.device
  std::vector<std::string> shape_text;
  std::unordered_map<std::string, int> shape_id;
  for (const DeviceOp* op : wanted) {
    auto [it, fresh] = shape_id.try_emplace(c.launch_shape(op->event), static_cast<int>(shape_text.size()));
    if (fresh) shape_text.push_back(it->first);
    shape_of[static_cast<std::size_t>(op - c.device.data())] = it->second;
  }
  std::vector<KernelStat> groups;
  std::vector<std::vector<const DeviceOp*>> group_ops;
  std::vector<std::string> shapes;
  std::vector<std::int64_t> calls;  // 1-based place in the step
  for (const std::vector<const DeviceOp*>* named : spread) {
    const std::vector<const DeviceOp*>& ops = *named;
    const StrId name = t.events.name[ops.front()->event];
    // (shape, k-th launch of it in the step) -> one instance per step. ops
    // are by start; within a step that is launch order on one stream.
    // Keys packed in 64 bits (shape and step are non-negative 32-bit ids).
    const auto pack = [](int a, std::int64_t b) {
      return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
    };
    std::unordered_map<std::uint64_t, std::vector<const DeviceOp*>> by_call;
    std::unordered_map<std::uint64_t, int> seen;  // (shape, step) -> launches so far
    for (const DeviceOp* op : ops) {
      const int shape = shape_of[static_cast<std::size_t>(op - c.device.data())];
      const int k = seen[pack(shape, op->step)]++;
      by_call[pack(shape, k)].push_back(op);
    }
    std::vector<std::pair<int, int>> order;  // (shape, k)
    for (const auto& [call, group] : by_call) {
      order.emplace_back(static_cast<int>(call >> 32), static_cast<int>(call & 0xffffffffu));
    }
    std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
      return std::tie(shape_text[static_cast<std::size_t>(a.first)], a.second) <
             std::tie(shape_text[static_cast<std::size_t>(b.first)], b.second);
    });
    for (const auto& call : order) {
      const std::vector<const DeviceOp*>& group = by_call[pack(call.first, call.second)];
      if (group.size() < kMinSteps) continue;
      groups.push_back(kernel_stat(c, std::string(t.str(name)), "kernel", group));
      group_ops.push_back(group);
      shapes.push_back(shape_text[static_cast<std::size_t>(call.first)]);
      calls.push_back(call.second + 1);
    }
  }
  // Each step's compute-kernel time: whether a slow call's neighbours in
  // its step slowed with it.
  std::unordered_map<std::int32_t, std::int64_t> step_compute;
  for (const DeviceOp& op : c.device) {
    if (op.cls == DeviceClass::kCompute && op.step >= 0) sat_acc(step_compute[op.step], op.end - op.start);
  }
  std::vector<Finding> found;
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const KernelStat& k = groups[gi];
    const std::string& shape = shapes[gi];
    if (k.outliers.empty()) continue;
    const double mean = k.mean_ns;
    const std::int64_t median = k.median_ns;
    std::int64_t excess = 0;
    std::vector<std::int64_t> steps, slow_steps;
    std::vector<EventRef> refs;
    std::int64_t slow = 0, fast = 0, slow_excess = 0;
    for (const KernelOutlier& o : k.outliers) {
      ++(o.dur_ns > median ? slow : fast);
      if (o.dur_ns > median) sat_acc(slow_excess, o.dur_ns - median);
      sat_acc(excess, o.dur_ns > median ? o.dur_ns - median : median - o.dur_ns);
      if (o.step >= 0 && steps.size() < kMaxSteps && std::find(steps.begin(), steps.end(), o.step) == steps.end()) {
        steps.push_back(o.step);
      }
      // The fix names the slow ones (issue 38's eighth round: "slow in
      // steps 16, 17, 18" listed the fastest calls' steps beside them).
      if (o.dur_ns > median && o.step >= 0 && slow_steps.size() < kMaxSteps &&
          std::find(slow_steps.begin(), slow_steps.end(), o.step) == slow_steps.end()) {
        slow_steps.push_back(o.step);
      }
      if (refs.size() < kMaxListed) refs.push_back(c.ref(o.event));
    }
    if (excess < kMinExcessNs || static_cast<double>(excess) < kMinExcessShare * static_cast<double>(k.total_ns)) continue;
    if (slow_excess < kMinSavingNs || static_cast<double>(slow_excess) < kMinSavingShare * static_cast<double>(steps_ns)) {
      continue;
    }
    const double skew = median > 0 ? std::abs(mean - static_cast<double>(median)) / static_cast<double>(median) : 0;
    char cvbuf[32];
    std::snprintf(cvbuf, sizeof cvbuf, "%.2f", k.cv);
    Finding f;
    f.id = "kernel_variance";
    f.severity = skew >= kMeanSkew && static_cast<double>(slow_excess) >= kWarningSavingShare * static_cast<double>(steps_ns) ? FindingSeverity::kWarning : FindingSeverity::kInfo;
    // Outliers in half the calls or more: no typical time, a median to judge
    // by misleads (issue 38's eighth round: an MI300X replay's convolution
    // at 0.11-2.56 ms in identical steps, 7 of 10 "outliers").
    const bool no_typical = 2 * (slow + fast) >= k.count;
    if (no_typical) {
      f.title = title_name(k.name) + ": " + format_ns(k.min_ns) + " to " + format_ns(k.max_ns) + " across " +
                std::to_string(k.count) + " identical calls (cv " + cvbuf + "), " + std::to_string(slow + fast) +
                " of them over 1.5x or under half the median " + format_ns(median) +
                (shape.empty() ? "" : " at " + shape);
    } else {
      f.title = title_name(k.name) + ": mean " + format_ns(static_cast<std::int64_t>(mean)) + " vs median " +
                format_ns(median) + " (cv " + cvbuf + "), " + std::to_string(slow + fast) + " outlier" +
                (slow + fast == 1 ? "" : "s") + " of " + std::to_string(k.count) +
                (shape.empty() ? "" : " at " + shape);
    }
    f.evidence.text("kernel", k.name);
    if (!shape.empty()) {
      const std::size_t block = shape.find(" block ");
      f.evidence.text("grid", shape.substr(5, block - 5)).text("block", shape.substr(block + 7));
    }
    f.evidence.num("call_in_step", calls[gi]).num("count", k.count)
        .num("mean_ns", static_cast<std::int64_t>(mean))
        .num("median_ns", median)
        .num("min_ns", k.min_ns)
        .num("max_ns", k.max_ns)
        .real("cv", k.cv)
        .num("slow_outliers", slow)
        .num("fast_outliers", fast)
        .num("outlier_excess_ns", excess)
        .num("slow_excess_ns", slow_excess);
    f.evidence.ints("outlier_steps", steps);
    f.evidence.events("outliers", std::move(refs));
    std::sort(slow_steps.begin(), slow_steps.end());
    std::string step_list;
    for (std::size_t i = 0; i < slow_steps.size() && i < 5; ++i) {
      step_list += (i ? ", " : "") + std::to_string(slow_steps[i]);
    }
    if (slow_steps.size() > 5) step_list += ", ...";
    const std::string lock = c.is_hip() ? "rocm-smi --setperfdeterminism" : "nvidia-smi -lgc";
    if (no_typical) {
      f.advice = "Lock the GPU clocks (" + lock + ") and record more steps before judging this kernel: identical " +
                 "calls take " + format_ns(k.min_ns) + " to " + format_ns(k.max_ns) +
                 " with no typical time (slow in step" + (slow_steps.size() == 1 ? " " : "s ") + step_list +
                 "), which points at the GPU's state (clocks, power, heat, another process on it) or the profiler, "
                 "not at the kernel; time it again on an idle GPU at fixed clocks.";
      f.impact_ns = slow_excess;
      found.push_back(std::move(f));
      continue;
    }
    // The other kernels of each slow call's step against their time in the
    // steps without a slow call (medians): within kNeighbourSpread, the
    // kernel slowed alone, which clocks, heat or power would not do (issue
    // 38's eleventh round: in identical CUDA-graph replays on a GeForce
    // card, one GEMM at 469 us against 222 us while the other 35 kernels
    // kept their times within 2%, was told to lock the clocks).
    std::vector<std::int64_t> others_slow, others_usual;
    for (const DeviceOp* op : group_ops[gi]) {
      const auto it = step_compute.find(op->step);
      if (it == step_compute.end()) continue;
      const std::int64_t others = it->second - (op->end - op->start);
      // Slow: one of KernelStat's outliers, above the median.
      const bool is_slow = std::any_of(k.outliers.begin(), k.outliers.end(), [&](const KernelOutlier& o) {
        return o.event == op->event && o.dur_ns > median;
      });
      (is_slow ? others_slow : others_usual).push_back(others);
    }
    bool alone = false;
    double neighbours = 0;
    if (!others_slow.empty() && others_usual.size() >= 2) {
      const double usual = static_cast<double>(mean_median(others_usual));
      double worst = 0;
      for (const std::int64_t o : others_slow) {
        const double d = usual > 0 ? (static_cast<double>(o) - usual) / usual : 0;
        if (std::abs(d) > std::abs(worst)) worst = d;
      }
      neighbours = worst;
      alone = usual > 0 && std::abs(worst) <= kNeighbourSpread;
      f.evidence.real("neighbours_change_pct", 100.0 * worst);
    }
    const std::string in_steps =
        step_list.empty() ? std::string() : " in step" + std::string(slow_steps.size() == 1 ? " " : "s ") + step_list;
    if (alone) {
      f.advice = "Judge this kernel by its median " + format_ns(median) + ", not its mean: it slowed alone" + in_steps +
                 " (the step's other kernels kept their times, within " + format_pct(100.0 * std::abs(neighbours)) +
                 "), which points at another context time-slicing the GPU (a display, another process: nvidia-smi "
                 "lists them) or the profiler, not at clocks, heat or power, which would slow its neighbours too. "
                 "Record more steps on a GPU nothing else uses to see whether " +
                 (slow_steps.size() == 1 ? "it repeats." : "they repeat.");
    } else {
      f.advice = "Lock the GPU clocks (" + lock + ") and record more steps to see whether the slow run" +
                 (slow_steps.size() == 1 ? "" : "s") + in_steps +
                 (slow_steps.size() == 1 ? " repeats" : " repeat") + "; judge this kernel by its median " +
                 format_ns(median) +
                 ", not its mean. Identical steps should run a kernel in the same time: outliers come from clocks, "
                 "heat, power management, driver housekeeping or the profiler itself.";
    }
    f.impact_ns = slow_excess;
    if (static_cast<double>(slow_excess) < kCardSavingShare * static_cast<double>(steps_ns)) {
      f.evidence.num("nothing_to_act_on", 1);
    }
    found.push_back(std::move(f));
  }
  std::sort(found.begin(), found.end(), [](const Finding& a, const Finding& b) {
    return a.impact_ns != b.impact_ns ? a.impact_ns > b.impact_ns : a.title < b.title;
  });
  if (found.size() > kMaxFindings) found.resize(kMaxFindings);
  for (Finding& f : found) out->push_back(std::move(f));
}

}  // namespace tprof::internal
