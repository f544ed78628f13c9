// Trace health checks run after every load (and after capture): oddities are
// recorded as diagnostics on the trace, never fixed or dropped.
#pragma once

#include <string_view>

#include "tprof/trace.h"

namespace tprof::internal {

// Adds `overlapping_kernels` (device activities overlapping on one GPU lane;
// both are kept) and `unmatched_flow` (flow starts without an end and the
// reverse) diagnostics. Lone flows Kineto writes on runtime calls that
// launch nothing (an ac2g end on cudaFuncSetAttribute) are expected, not
// diagnosed (validate.cc, drop_expected_lone_flows).
void check_trace(Trace* trace);

// A runtime or driver call that Kineto links to device activity with an
// ac2g flow: cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch,
// hipLaunchKernel, cudaMemcpyAsync, cudaMemsetAsync, cudaMemcpy...
bool launches_device_work(std::string_view name);

}  // namespace tprof::internal
