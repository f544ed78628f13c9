// The verdicts: what bounds each step and the trace, measured from the
// device's busy time and what it waited on while idle (docs/diagnose.md,
// "Verdicts"). Every verdict rests on a measured share; with none large
// enough the verdict is `unclear` and says what was measured.
#pragma once

#include "src/analyze/diagnose_context.h"
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

}  // namespace tprof::internal
