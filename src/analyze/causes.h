// Root causes and per-thread host time, computed from a finished diagnosis
// (docs/diagnose.md, "Causes").
#pragma once

#include "src/analyze/diagnose_context.h"
#include "tprof/diagnose.h"

namespace tprof::internal {

// The order of findings and causes: the time they could save (impact_ns),
// largest first, then severity (docs/diagnose.md, "Causes").
bool by_impact(const Finding& a, const Finding& b);

// Fills d->causes from d->findings (already ordered by by_impact), and d->threads when the trace has no device activity. Called
// last by diagnose().
void add_causes(const DiagnoseContext& c, Diagnosis* d);

// Groups findings into causes; every finding lands in exactly one.
// `first_step`: the number of the trace's first ProfilerStep (-1: none).
// `launch_overhead_measured` (verdict.h): the launch overhead card forms
// around its strongest symptom even without the overhead_bound finding
// (whose CPU/GPU ratio threshold may not hold).
std::vector<Cause> group_causes(const std::vector<Finding>& findings, std::int64_t first_step,
                                bool launch_overhead_measured = false);

// Whether `f` is in the launch-overhead cause once overhead_bound anchors it
// (overhead_bound itself, or one of the symptoms that join it).
bool in_launch_overhead(const Finding& f);

// Busy time of each CPU thread over the steps (first start to last end),
// else over the whole trace; largest first.
std::vector<ThreadBusy> thread_busy(const DiagnoseContext& c);

}  // namespace tprof::internal
