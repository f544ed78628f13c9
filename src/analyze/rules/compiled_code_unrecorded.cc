// compiled_code_unrecorded: on a CPU-only trace, time inside Inductor's
// compiled graphs (`## Call CompiledFxGraph … ##`) that no recorded op
// covers. On the CPU that is the generated C++ kernels themselves (the
// fused elementwise and reduction loops), which the profiler records only
// when Inductor is told to; on a GPU it would be the wrapper's Python and
// launches, compile_overhead's subject, so device traces are left out.
// Origin: issue 38's tenth round (scoring half, changed after it was
// scored): a vLLM CPU worker under torch.compile spent 396.5 ms (15.1% of
// Self CPU) in its compiled graphs outside any op, the second cost after
// the matrix products, and nothing said so.
// Precondition: a CPU-only program (cpu_only_program), and the compiled graphs' self time
// (torch's Self CPU of those rows) is kMinShare of Self CPU total and
// kMinNs. Impact 0: it says where to look, it saves nothing.
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/names.h"

namespace tprof::internal {

namespace {

// The compiled graphs' own time must be this share of Self CPU total and
// this much time.
constexpr double kMinShare = 0.10;
constexpr std::int64_t kMinNs = 10'000'000;

}  // namespace

void rule_compiled_code_unrecorded(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!cpu_only_program(c)) return;
  const std::int64_t total = c.self_cpu_total_ns();
  if (total <= 0) return;
  std::int64_t self = 0, calls = 0;
  std::string_view name;
  for (const StatRow& r : c.averages()) {
    if (r.is_device || !is_compiled_graph_call(r.key)) continue;
    sat_acc(self, r.self_cpu_time_total_ns);
    sat_acc(calls, r.count);
    if (name.empty()) name = r.key;
  }
  const double share = static_cast<double>(self) / static_cast<double>(total);
  if (self < kMinNs || share < kMinShare) return;
  std::uint32_t longest = kNoIndex;
  for (std::uint32_t e : c.host_ops) {
    if (is_compiled_graph_call(c.name(e)) && (longest == kNoIndex || c.dur(e) > c.dur(longest))) longest = e;
  }
  Finding f;
  f.id = "compiled_code_unrecorded";
  f.severity = FindingSeverity::kInfo;
  f.title = format_ns(self) + " (" + format_pct(100.0 * share) + " of Self CPU total) runs inside compiled graphs (" +
            std::string(name) + ", " + count_of(calls, "call") + ") with no op recorded: Inductor's generated C++ kernels";
  f.evidence.num("self_ns", self).real("share_pct", 100.0 * share).num("calls", calls);
  if (longest != kNoIndex) f.evidence.event("longest", c.ref(longest));
  f.advice = "To see which fused kernels take it, record again with torch._inductor.config.cpp.enable_kernel_profile = "
             "True (Linux): each generated kernel is then an op in the trace, and the tables and findings can name "
             "it.";
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
