// The verdicts: what bounds each step and the trace, measured from the
// device's busy time and what it waited on while idle (docs/diagnose.md,
// "Verdicts"). Every verdict rests on a measured share; with none large
// enough the verdict is `unclear` and says what was measured.
#pragma once

#include <cstdint>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/analyze/intervals.h"
#include "tprof/diagnose.h"

namespace tprof::internal {

// Fills d->steps, d->verdict, d->verdict_evidence, d->summary, and
// d->support from d->findings (so it runs after the rules).
void judge(const DiagnoseContext& c, Diagnosis* d);

// Whether the measurements say launch overhead, from the context alone (the
// findings do not change them): the verdict judge() gives is
// overhead-bound, or the device phase after a lead of host work is (a trace
// without steps whose start-up outweighs the rest). There the
// launch-overhead cause forms without overhead_bound (causes.cc), and a rule
// may need to know which cause it joins.
bool launch_overhead_measured(const DiagnoseContext& c);

// The windows (host spans) of the steps the measurements call compute- or
// copy-bound, where a strict majority of the steps are and so is the
// verdict; empty otherwise. In them the host runs ahead of the device, and
// what a launch costs the host is hidden behind queued work.
std::vector<Interval> device_bound_steps(const DiagnoseContext& c);

// The trace records nothing of the program: runtime calls only, no op,
// annotation or device activity, its Python functions (if any) torch.profiler's
// own and the frames around them. Its verdict is unclear, and rules that read
// the host's time (hotspot) have nothing to say.
bool nothing_recorded(const DiagnoseContext& c);

// Each step's cost in the steady state: a step ends when its host span and
// the device work it launched are both done, and costs the time since the
// previous step's end (the first step: since its own start); never below 0.
// One figure whichever side bounds the run, and through a change of bound
// (tprof compare's "steady", a rank summary's steady_ns).
std::vector<std::int64_t> steady_costs(const std::vector<StepVerdict>& steps);

}  // namespace tprof::internal
