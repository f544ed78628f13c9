// bmm_dispatch: aten::matmul on 3-D and larger inputs dispatches to
// aten::bmm, which makes more runtime calls and more cuBLAS heuristic work
// per op than aten::mm. Cheatsheet: "aten::mm (2-D) or aten::bmm (3-D and
// up: more runtime calls, more heuristic work)".
// Preconditions: device activity (on a CPU-only trace there are no runtime
// calls to count and no cuBLAS heuristics) and at least kMinBmm calls, so a
// single first call (its one-time setup) is not read as the dispatch's cost.
// When the trace also has enough aten::mm calls to compare with, bmm must
// show the mechanism: more runtime calls (or occupancy queries) per op than
// mm. A bmm that is only slower on the CPU with the same calls differs in
// shape or in its callers, which this rule cannot tell apart. A bmm with
// no measurable extra CPU per op over mm (< 1.2×) costs nothing. With
// shapes recorded, the rule fires only where an aten::matmul has a 2-D
// operand against a 3-D one (flattening applies): attention's bmm (both
// operands 3-D) cannot be flattened. Without shapes and without mm to
// compare with, no extra cost is shown: silent.
#include <algorithm>
#include <cstdio>

#include "src/trace/json_value.h"

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// Enough aten::bmm calls for a per-call figure (as many_calls' and
// kernel_variance's minimum); warning when each bmm costs the CPU this much
// more than an mm in the same trace.
constexpr std::int64_t kMinBmm = 3;
constexpr double kSlowerThanMm = 1.5;
// "More runtime calls per op": at least half a call more on average.
constexpr double kMoreCalls = 0.5;
// "Measurable extra cost": each bmm takes at least 1.2× an mm's CPU time
// (56.6 vs 55.2 µs is the same cost).
constexpr double kMeasurable = 1.2;

// The ranks of an op's first two "Input Dims" entries; {-1, -1} without.
std::pair<int, int> operand_ranks(const Trace& t, std::uint32_t e) {
  const std::string_view raw = t.args_json(e);
  if (raw.empty()) return {-1, -1};
  Result<JsonValue> args = JsonValue::parse(raw);
  if (!args.has_value() || !args->is_object()) return {-1, -1};
  const JsonValue* d = args->find("Input Dims");
  if (d == nullptr || !d->is_array() || d->items().size() < 2) return {-1, -1};
  const auto rank = [](const JsonValue& v) { return v.is_array() ? static_cast<int>(v.items().size()) : -1; };
  return {rank(d->items()[0]), rank(d->items()[1])};
}

bool is_occupancy_call(std::string_view name) {
  // cudaOccupancyMaxActiveBlocksPerMultiprocessor[WithFlags]: cuBLAS choosing
  // a kernel variant (the cheatsheet's "heavyweight, adaptively launched").
  return name.find("Occupancy") != std::string_view::npos;
}

struct OpStats {
  std::int64_t count = 0;
  std::int64_t cpu_ns = 0;
  std::int64_t runtime_calls = 0;
  std::int64_t occupancy_calls = 0;
  std::uint32_t first = kNoIndex;
  std::uint32_t slowest = kNoIndex;
  double per_op(std::int64_t v) const { return count > 0 ? static_cast<double>(v) / static_cast<double>(count) : 0; }
};

}  // namespace

void rule_bmm_dispatch(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  if (!c.has_device()) return;
  const auto bmm_id = t.strings.find("aten::bmm");
  if (!bmm_id) return;
  const auto mm_id = t.strings.find("aten::mm");
  const auto matmul_id = t.strings.find("aten::matmul");
  OpStats bmm, mm;
  bool shapes = false;          // a bmm or matmul with Input Dims
  std::int64_t flattenable = 0;  // matmuls with a 2-D operand against a 3-D+ one
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    const StrId n = t.events.name[e];
    if ((matmul_id && n == *matmul_id) || n == *bmm_id) {
      const auto [a, b] = operand_ranks(t, e);
      if (a >= 0 && b >= 0) {
        shapes = true;
        if (n != *bmm_id && ((a == 2 && b >= 3) || (b == 2 && a >= 3))) ++flattenable;
      }
    }
    OpStats* s = n == *bmm_id ? &bmm : (mm_id && n == *mm_id) ? &mm : nullptr;
    if (s == nullptr) continue;
    ++s->count;
    sat_acc(s->cpu_ns, c.dur(e));
    if (s->first == kNoIndex) s->first = e;
    if (s->slowest == kNoIndex || c.dur(e) > c.dur(s->slowest)) s->slowest = e;
    // Runtime calls made while the op ran on its thread (runtime is sorted by
    // ts).
    c.for_each_runtime_in(e, [&](std::uint32_t r) {
      ++s->runtime_calls;
      if (is_occupancy_call(c.name(r))) ++s->occupancy_calls;
    });
  }
  if (bmm.count < kMinBmm) return;

  const double rt_bmm = bmm.per_op(bmm.runtime_calls), rt_mm = mm.per_op(mm.runtime_calls);
  const double cpu_bmm = bmm.per_op(bmm.cpu_ns), cpu_mm = mm.per_op(mm.cpu_ns);
  const bool compared = mm.count >= kMinBmm;
  const double occ_bmm = bmm.per_op(bmm.occupancy_calls), occ_mm = mm.per_op(mm.occupancy_calls);
  if (compared && rt_bmm < rt_mm + kMoreCalls && occ_bmm < occ_mm + kMoreCalls) return;
  // No measurable extra cost: the same CPU per op as mm, or no mm to
  // compare with and no shapes to say the bmm could be an mm.
  if (compared && cpu_bmm < kMeasurable * cpu_mm) return;
  if (!compared && !shapes) return;
  // Shapes recorded and no matmul with a 2-D operand: attention-style bmm
  // (both operands 3-D), which no reshape turns into an mm.
  if (shapes && flattenable == 0) return;
  const bool slower = compared && cpu_bmm >= kSlowerThanMm * cpu_mm;
  char buf[64];
  Finding f;
  f.id = "bmm_dispatch";
  f.severity = slower ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  std::snprintf(buf, sizeof buf, "%.1f", rt_bmm);
  f.title = "aten::bmm x" + std::to_string(bmm.count) + " (3-D matmul): " + buf + " runtime calls per bmm";
  if (mm.count > 0) {
    std::snprintf(buf, sizeof buf, "%.1f", rt_mm);
    f.title += std::string(" vs ") + buf + " per mm, " + format_ns(static_cast<std::int64_t>(cpu_bmm)) + " vs " +
               format_ns(static_cast<std::int64_t>(cpu_mm)) + " CPU per op";
  }
  f.evidence.num("bmm_count", bmm.count)
      .num("mm_count", mm.count)
      .real("runtime_calls_per_bmm", rt_bmm)
      .real("runtime_calls_per_mm", rt_mm)
      .real("occupancy_calls_per_bmm", occ_bmm)
      .real("occupancy_calls_per_mm", occ_mm)
      .num("bmm_total_cpu_ns", bmm.cpu_ns)
      .num("bmm_mean_cpu_ns", static_cast<std::int64_t>(cpu_bmm));
  if (shapes) f.evidence.num("flattenable_matmuls", flattenable);
  if (mm.count > 0) f.evidence.num("mm_mean_cpu_ns", static_cast<std::int64_t>(cpu_mm));
  f.evidence.event("slowest_bmm", c.ref(bmm.slowest));
  if (mm.first != kNoIndex) f.evidence.event("first_mm", c.ref(mm.first));
  {
    char per[32];
    std::snprintf(per, sizeof per, "%.1f", rt_bmm);
    f.advice = std::string(shapes ? std::to_string(flattenable) + " aten::matmul calls have a 2-D operand against a "
                                                                   "3-D one: flatten the batched side "
                                    : "Where one operand is 2-D, flatten the batched side ") +
               "(x.reshape(-1, k) @ w) so aten::matmul runs one aten::mm instead of aten::bmm. The " + std::to_string(bmm.count) + " bmm calls make " + per +
               " runtime calls each (" + format_ns(static_cast<std::int64_t>(cpu_bmm)) +
               " of CPU per call): aten::bmm does more runtime calls and cuBLAS heuristic work per op than aten::mm.";
  }
  f.impact_ns = mm.count > 0 ? std::max<std::int64_t>(
                                   0, static_cast<std::int64_t>((cpu_bmm - cpu_mm) * static_cast<double>(bmm.count)))
                             : bmm.cpu_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
