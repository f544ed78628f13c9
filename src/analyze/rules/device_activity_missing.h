// The signs that a trace without device activity issued GPU work
// (device_activity_missing.cc): the rule and the verdict (verdict.cc) read
// them, so a trace the rule flags is never called cpu-only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "tprof/diagnose.h"

namespace tprof::internal {

struct GpuWorkIssued {
  std::int64_t issue_calls = 0;         // kernel launch, copy and set calls (runtime API where present)
  std::int64_t library_ops = 0;         // cuDNN, MIOpen, cuBLAS, NCCL ops
  std::int64_t attention_ops = 0;       // memory-efficient and flash attention ops (torch has no CPU kernel of them)
  std::int64_t gpu_memory_records = 0;  // [memory] on a CUDA/HIP device
  // Flow starts that link a CPU op to CUDA work (the legacy profiler's
  // "cpu_to_cuda"), and Inductor's Triton kernels recorded as ops
  // ("triton_..."; its CPU code is "cpp_..."): a GPU ran them.
  std::int64_t gpu_flows = 0;
  std::int64_t triton_ops = 0;
  // Scalar reads (aten::_local_scalar_dense: .item()) of 1 ms or more, when
  // at least kMinBlockingReads: a CPU tensor's read is a load; milliseconds
  // are a wait for an asynchronous device (Apple MPS, which Kineto never
  // records; a GPU recorded without its device side).
  std::int64_t blocking_reads = 0;
  // Threads torch's autograd engine starts for a device ("pt_autograd_0"):
  // it runs backward on one only for a device's tensors (a CPU backward
  // runs on the calling thread).
  std::int64_t autograd_device_threads = 0;
  bool gpu_listed = false;  // deviceProperties names a GPU
  std::int64_t blocking_read_ns = 0;
  std::uint32_t first_call = kNoIndex;
  std::uint32_t first_op = kNoIndex;
  std::uint32_t longest_read = kNoIndex;
  bool any() const {
    return issue_calls + library_ops + attention_ops + gpu_memory_records + gpu_flows + triton_ops + blocking_reads +
               autograd_device_threads >
           0;
  }
  // Only waiting reads: a device that may not be a GPU torch.profiler can record (Apple MPS).
  // Or only autograd's device thread in a trace that lists no GPU.
  bool reads_only() const {
    return (blocking_reads > 0 || (autograd_device_threads > 0 && !gpu_listed)) &&
           issue_calls + library_ops + attention_ops + gpu_memory_records + gpu_flows + triton_ops == 0;
  }
  // "20 kernel launch or copy calls and 22 memory events on a GPU"
  std::string text() const;
};

// All zero when the trace has device activity or range-profiler ranges.
GpuWorkIssued gpu_work_issued(const DiagnoseContext& c);

// Whether the trace is the legacy autograd profiler's export (a bare array,
// or cpu_to_cuda flows) holding ProfilerStep#N events: torch.profiler.profile
// wrote it (the legacy profiler has no step()), on a build without Kineto,
// so asking for ProfilerActivity.CUDA again changes nothing (issue 38's
// eighteenth round). The rule's fix and the verdict's summary both read it.
bool legacy_export_by_torch_profiler(const DiagnoseContext& c, const GpuWorkIssued& g);

// Native Windows, where the trace shows it: the host name in its
// traceName (tensorboard_trace_handler writes HOST_PID.…: Windows' default
// names "DESKTOP-…", "LAPTOP-…"), or MSVC's `__int64` in an op's Input type.
// torch.profiler on native Windows often records no CUDA activity with
// ProfilerActivity.CUDA asked for (pytorch/kineto#762), so asking again
// changes nothing. "host DESKTOP-VR1IOQL", "MSVC's __int64 in its input
// types", or "" where nothing says Windows.
std::string windows_sign(const DiagnoseContext& c);
// WSL 2, where the trace shows it: its traceName a path on a Windows drive
// mounted under /mnt ("/mnt/d/Projects/…"). CUPTI under WSL 2 often
// delivers no activity record (issue 38's twenty-third round: a training
// step on a laptop RTX 5080, told to add ProfilerActivity.CUDA, which its
// script already asked for). "its trace path /mnt/d/…", or "".
std::string wsl_sign(const DiagnoseContext& c);

// The host waits for the unrecorded device most of the time: the trace has
// launch calls but no device activity, and synchronizing calls and
// blocking copies (DiagnoseContext::host_waits) hold kDeviceWaitShare or
// more of the steps (the trace without steps). Those waits are the
// device's work as the host saw it (issue 38's twenty-third round: a
// student's attention kernel on a WSL 2 laptop, each launch followed by a
// cudaDeviceSynchronize of 40-98 ms, 99% of its steps, was "unclear" and
// told to move the sync). The verdict calls it compute-bound; sync_api and
// hotspot say the wait is the work's time.
inline constexpr double kDeviceWaitShare = 0.5;
bool waits_for_unrecorded_device(const DiagnoseContext& c);
// Their time within the steps (the trace without steps), and that span.
struct DeviceWaitShare {
  std::int64_t waited_ns = 0, span_ns = 0;
  std::int64_t calls = 0;             // the waits inside the span
  std::uint32_t longest = kNoIndex;   // the longest of them
};
DeviceWaitShare unrecorded_device_wait_share(const DiagnoseContext& c);
// The waits it counts, by start: blocking runtime calls
// (DiagnoseContext::blocks_host) and, with no device activity and GPU work
// issued, stalled host ops: an aten::copy_ of kStalledCopyNs or more whose
// bytes (its first input's shape and dtype) moved at under kStalledCopyRate
// (no bus or memcpy is that slow: the copy waited for the device's queue;
// the twenty-third round's training step, 516 KB in 1.055 s), or an
// aten::_local_scalar_dense (.item()) of that length. Empty where the trace
// has device activity or shows no GPU work (or only an MPS-like device's
// reads). By start (then index).
inline constexpr std::int64_t kStalledCopyNs = 1'000'000;
inline constexpr double kStalledCopyRate = 10e6;  // bytes per second
std::vector<std::uint32_t> unrecorded_device_waits(const DiagnoseContext& c);

// An op of a GPU library by name (cudnn, miopen, cublas, nccl), flag and
// version queries aside: work issued to a GPU.
bool is_gpu_library_op(std::string_view n);

// The program ran on the CPU alone: no device activity, no CUPTI
// range-profiler ranges (device work measured by counters), no legacy
// use_cuda spans (each op's device span) and no sign of GPU work issued. The CPU-only rules' precondition: a GPU run recorded without
// its device side spends its host time launching and waiting (an
// aten::nonzero's milliseconds are a wait for the GPU), so CPU advice,
// fusing on the CPU or pinning threads, would be wrong for it (issue 38's
// eleventh round: a MoE decode on an A6000 recorded with the CPU activity
// only).
bool cpu_only_program(const DiagnoseContext& c);

void rule_device_activity_missing(const DiagnoseContext& c, std::vector<Finding>* out);

}  // namespace tprof::internal
