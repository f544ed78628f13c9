// torch_npu's profiler (the Ascend PyTorch Profiler) writes its
// trace_view.json in Chrome's trace format with Kineto's host events
// (cpu_op, python_function, user_annotation) and its own processes for the
// rest, each labelled "CPU" or "NPU" by process_labels:
//
//   "Ascend Hardware" (NPU)  the tasks each NPU stream ran ("Stream N"):
//                            operators' AI Core/Vector tasks, copies, and
//                            the stream's sync tasks (Notify Wait, event
//                            record/wait, Write Value)
//   "HCCL" (NPU)             collectives: a "Group ... Communication"
//                            thread of whole operations (hcom_allReduce_...)
//                            and "Plane N" threads of their tasks
//   "CANN" (CPU)             the host's AscendCL and runtime calls
//                            (AscendCL@..., Node@launch), on the threads of
//                            the Python process
//   others (NPU)             counters and derived tracks (HBM, LLC, AI Core
//                            Freq, QoS, "Overlap Analysis")
//
// A HostToDevice flow runs from the call that launched a task to the task
// (and, from 2024, both carry an args "connection_id").
// normalize_torch_npu maps this onto the one model: tasks become device
// activities on GPU lanes (device 0, stream N); whole collectives become
// communication on their own lane, labelled with the stream their tasks
// ran on, whose tasks there (and every stream's sync tasks) are left out
// as the collective's own; CANN calls become runtime calls on their
// Python thread's lane, linked to their tasks by the flows (the
// connection ids where there are none); the derived tracks are left out
// (LaneKind::kOther). A trace without an "Ascend Hardware" process is
// left as it is.
#pragma once

#include "tprof/trace.h"

namespace tprof::internal {

// Whether `t` was written by torch_npu's profiler (an "Ascend Hardware"
// process labelled "NPU").
bool is_torch_npu(const Trace& t);

// Maps a torch_npu trace onto the model as above; a no-op on other traces.
// Runs after the lanes and metadata are assembled (assemble_trace).
void normalize_torch_npu(Trace* t);

}  // namespace tprof::internal
