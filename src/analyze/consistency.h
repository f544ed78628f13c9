// One pass over the findings and the verdict before output (issue 38, item
// 5; docs/diagnose.md, "Consistency"): the rules run independently, so two
// of them, or a rule and the verdict, can say opposite things about one
// trace. Each contradiction has one resolution here, recorded in
// Diagnosis::reconciled so the JSON says what was dropped and why.
#pragma once

#include "src/analyze/diagnose_context.h"
#include "tprof/diagnose.h"

namespace tprof::internal {

// True for the verdicts that put the bottleneck on the host: overhead-,
// host- and input-bound (the host launches, computes or waits for data
// while the GPU idles).
bool host_side_verdict(Verdict v);

// Runs after the verdict (judge) and before the causes are formed:
// - under a host-side verdict, a finding whose evidence says the host has
//   nothing to fix ("host_side": "nothing to fix": cpu_gpu_offset's queue
//   behind a busy GPU, compile_overhead's hidden wrapper, host_blocked's
//   full launch queue, sync_api's wait on a busy GPU), or that the GPU sets
//   the pace ("pace": "gpu": cpu_gpu_offset's queue where host work holds
//   part of the critical path), is dropped: the verdict measured the
//   opposite over more of the steps' time;
// - a finding that says the GPU stayed busy through its calls
//   ("gpu_during": "busy") while the idle partition has the GPU idle through
//   at least a quarter of them is dropped (a rule's claim on the idle, not
//   the GPU, was empty);
// - pageable_memcpy, when its copies (all host to device) are exactly the
//   pageable copies of a host_built_tensor finding (same count and device
//   time): that fix builds the tensor on the device, leaving nothing to pin
//   (issue 38's seventh round: both said to fix the same copy, their
//   savings over the step);
// - host_blocked's blocking copies, when every one is a pageable copy of
//   64 KiB or more and the GPU is busy through nine tenths of them
//   ("copies": "pageable, 64 KiB or more, the GPU busy") and
//   pageable_memcpy fired, are dropped: one cause (pageable memory makes the
//   copies synchronous), one fix (pin), not a second finding advising to
//   read results less often (issue 38's fourth round: an A100 copy loop);
// - a hotspot on an op another finding's time is made of (its evidence
//   "covers_ops": train_mode_in_inference's dropout masks, aten::bernoulli_)
//   is dropped: one cause, that finding's fix (issue 38's eighteenth
//   round: the mask draw told to check the intra-op threads);
// - the verdict's support loses the ids of dropped findings.
void reconcile(const DiagnoseContext& c, Diagnosis* d);

}  // namespace tprof::internal
