// cpu_op_variance: on a CPU-only trace, the same op on the same shapes at
// the same place in each step taking very different times: the machine's
// noise (other processes on its cores, CPU frequency and thermal limits,
// threads oversubscribed), not the code, so no time in the trace can be
// trusted to one figure. kernel_variance's counterpart for host work.
// Origin: issue 38's ninth round (scoring half, after its held-out figure):
// a Llama-3.2 block on a laptop's CPU, three steps of 117 to 240 ms, one
// matrix product at 3.8 ms in one step and 35.1 ms in another; the review
// said first that the timings were too noisy to judge.
// Precondition: a CPU-only program (cpu_only_program: device traces have
// kernel_variance; a GPU run without its device side waits on the GPU),
// three steps or more (the first left out: its first calls' set-up is
// cold_start's), and a pattern across ops, not one op's anecdote: at least
// kMinGroups ops (those spending most of their time themselves; name,
// Input Dims where recorded, and the k-th call of that name and shape in
// the step) in two later steps or more whose slowest call is kMinRatio x
// their fastest and 1 ms or more above it. Warning when
// the steps themselves differ by kWarnStepRatio or more. Impact: the
// unstable calls' time over their group's fastest, what a quiet machine
// gives back in the recorded steps.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "src/analyze/nesting.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

constexpr double kMinRatio = 2.0;
constexpr std::int64_t kMinSpreadNs = 1'000'000;
constexpr std::size_t kMinGroups = 3;
constexpr double kWarnStepRatio = 1.5;

}  // namespace

void rule_cpu_op_variance(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (c.steps.steps.size() < 3 || !cpu_only_program(c)) return;
  const Trace& t = c.trace;
  const std::vector<StepStat>& steps = c.steps.steps;
  // Per step, the k-th call of each (name, shapes): host_ops are in start
  // order, so counting as they come gives each call its place.
  // Ops that spend most of their time themselves, not in ops nested in
  // them: a matmul's spread is its mm's, named once where the time is spent
  // (an mm's resolve_conj children take microseconds).
  const Nesting& nest = c.nesting();
  using Key = std::tuple<StrId, std::string, std::int64_t>;  // name, Input Dims, k
  std::map<Key, std::vector<std::uint32_t>> groups;
  std::map<std::tuple<std::int64_t, StrId, std::string>, std::int64_t> seen;
  bool shapes = false;  // some op records its Input Dims
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    // The first step's calls are left out: a first call's set-up (lazy
    // initialisation, the allocator's first blocks, a DataLoader's
    // workers) is cold_start's, not noise (a VAE's first step: one mm at
    // 3.8 ms against 63 us later).
    const int s = c.step_index_at(c.ts(e));  // the steps are in start order
    if (s <= 0) continue;
    const std::string dims = input_dims_text(t, e);
    shapes = shapes || !dims.empty();
    // Every call counts for its place, the ones left out below too: a
    // whole-µs export nests a 3 us add_ in another call's rounded span in
    // one step and not the next, and a count of the kept calls only paired
    // a bias's add_ (3 us) with a weight's (7.978 ms) as "the same place"
    // (issue 38's twenty-fourth round: a VAE's Adam step, legacy export).
    const std::int64_t k = seen[{s, t.events.name[e], dims}]++;
    if (sat_mul(2, nest.child_ns[e]) >= c.dur(e)) continue;
    groups[{t.events.name[e], dims, k}].push_back(e);
  }
  struct Spread {
    std::uint32_t fast, slow;
    double ratio;
  };
  std::vector<Spread> unstable;
  // The unstable calls' time over their group's fastest: what the noise
  // cost the recorded steps (the first left out).
  std::int64_t excess_ns = 0;
  for (const auto& [key, calls] : groups) {
    if (calls.size() < 2) continue;
    const auto [lo, hi] = std::minmax_element(calls.begin(), calls.end(),
                                              [&](std::uint32_t a, std::uint32_t b) { return c.dur(a) < c.dur(b); });
    const std::int64_t fast = std::max<std::int64_t>(1, c.dur(*lo)), slow = c.dur(*hi);
    if (slow - fast < kMinSpreadNs || static_cast<double>(slow) < kMinRatio * static_cast<double>(fast)) continue;
    unstable.push_back({*lo, *hi, static_cast<double>(slow) / static_cast<double>(fast)});
    for (std::uint32_t e : calls) sat_acc(excess_ns, std::max<std::int64_t>(0, c.dur(e) - c.dur(*lo)));
  }
  if (unstable.size() < kMinGroups) return;
  const Spread& top = *std::max_element(unstable.begin(), unstable.end(), [&](const Spread& a, const Spread& b) {
    return c.dur(a.slow) - c.dur(a.fast) < c.dur(b.slow) - c.dur(b.fast);
  });
  std::int64_t shortest = INT64_MAX, longest = 0;
  for (const StepStat& s : steps) {
    shortest = std::min(shortest, s.dur_ns);
    longest = std::max(longest, s.dur_ns);
  }
  const double step_ratio = static_cast<double>(longest) / static_cast<double>(std::max<std::int64_t>(1, shortest));
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.1fx", top.ratio);
  const std::string dims = input_dims_text(t, top.slow);
  Finding f;
  f.id = "cpu_op_variance";
  f.severity = step_ratio >= kWarnStepRatio ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = "Timings differ widely across identical steps: steps take " + format_ns(shortest) + " to " +
            format_ns(longest) + ", and " + std::to_string(unstable.size()) +
            (shapes ? " ops on the same shapes at the same place in the step differ 2x or more"
                    : " ops at the same place in the step differ 2x or more") +
            // The first step is left out (its first calls' set-up): said,
            // since the steps' range counts it (issue 38's twenty-fourth
            // round: "5.001 to 12.339 ms" where step 1's call took 2.433).
            " in steps " + std::to_string(steps[1].step) + "-" + std::to_string(steps.back().step) +
            (shapes ? " (" : " (no shapes recorded; ") +
            std::string(c.name(top.slow)) +
            (dims.empty() ? std::string() : " " + dims) + ": " + format_ns(c.dur(top.fast)) + " to " +
            format_ns(c.dur(top.slow)) + ", " + ratio + ")";
  f.evidence.num("steps", static_cast<std::int64_t>(steps.size()))
      .num("shortest_step_ns", shortest)
      .num("longest_step_ns", longest)
      .num("unstable_ops", static_cast<std::int64_t>(unstable.size()))
      .real("ratio", top.ratio)
      .event("slowest_call", c.ref(top.slow))
      .event("fastest_call", c.ref(top.fast));
  f.advice = "Give torch no more threads than the cores free to it (torch.set_num_threads or OMP_NUM_THREADS; taskset "
             "to pin them), stop other load and record more steps before acting on these times: the same op on the "
             "same work should take about the same time in every step, so a spread this wide is the machine (other "
             "processes on its cores, CPU frequency or thermal limits, more threads than free cores), not the code. "
             "Every time in this trace is one run's; compare medians.";
  // A quiet machine gives the excess back: ranked by it, not as a note
  // (issue 38's twenty-fourth round: a VAE's noise, ~129 of 194 ms, ranked
  // under a per-parameter optimizer worth 0.9 ms a step).
  f.evidence.num("excess_ns", excess_ns);
  f.impact_ns = excess_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
