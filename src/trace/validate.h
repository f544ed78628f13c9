// Trace health checks run after every load (and after capture): oddities are
// recorded as diagnostics on the trace, never fixed or dropped.
#pragma once

#include "tprof/trace.h"

namespace tprof::internal {

// Adds `overlapping_kernels` (device activities overlapping on one GPU lane;
// both are kept) and `unmatched_flow` (flow starts without an end and the
// reverse) diagnostics. Lone flows Kineto writes on runtime calls that
// launch nothing (an ac2g end on cudaFuncSetAttribute) are expected, not
// diagnosed (validate.cc, drop_expected_lone_flows).
void check_trace(Trace* trace);

}  // namespace tprof::internal
