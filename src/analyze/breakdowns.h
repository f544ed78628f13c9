// The peers' breakdowns, each computed with that peer's own definition
// (docs/diagnose.md, "Breakdowns"): TraceLens' GPU timeline,
// HolisticTraceAnalysis' temporal and idle-time breakdowns, the TensorBoard
// plugin's per-step overview.
#pragma once

#include "src/analyze/diagnose_context.h"
#include "tprof/diagnose.h"

namespace tprof::internal {

Breakdowns compute_breakdowns(const DiagnoseContext& c);

}  // namespace tprof::internal
