// device_activity_missing: the program issued GPU work, but the trace holds
// no device activity (no kernel, copy or set on any device). Kineto records
// the device side only with ProfilerActivity.CUDA (CUPTI/roctracer); with
// activities=[ProfilerActivity.CPU] a program that ran on the GPU looks like
// a CPU-only one: its cuDNN ops and its [memory] events on the CUDA device
// are still there, its kernels are not. Launch calls without their kernels
// are the same gap from the other side (CUPTI's buffers never delivered).
// Precondition: no device activity and no CUPTI range-profiler ranges (those
// are device work, judged apart), and at least one sign of GPU work issued:
// a kernel launch or device copy/set call, an op of a GPU library (cuDNN,
// MIOpen, cuBLAS, NCCL by name), or a [memory] record on a CUDA/HIP device.
// deviceProperties and calls such as cudaGetDeviceCount are not signs: a
// GPU host whose model runs on the CPU lists its GPU and queries it too.
// Trace health: the verdict (verdict.cc) reads the same evidence and does not
// call such a trace cpu-only.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/trace/json_value.h"
#include "src/analyze/intervals.h"
#include "src/analyze/legacy_spans.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

bool is_issue_call(std::string_view n) {
  return n.find("Launch") != std::string_view::npos || n.find("Memcpy") != std::string_view::npos ||
         n.find("Memset") != std::string_view::npos;
}

// Attention ops torch has for GPUs only: memory-efficient attention
// (CUTLASS) and FlashAttention; on the CPU, SDPA runs the math path or
// _scaled_dot_product_flash_attention_for_cpu (issue 38's sixth round: a
// GPT-2 decode through _efficient_attention_forward was called cpu-only).
bool is_gpu_attention_op(std::string_view n) {
  if (n.find("_efficient_attention") != std::string_view::npos) return true;
  return n.find("_flash_attention") != std::string_view::npos && n.find("for_cpu") == std::string_view::npos;
}

// c10::DeviceType: 1 CUDA, 6 HIP.
bool is_gpu_memory(const MemoryRecord& r) { return r.device_type == 1 || r.device_type == 6; }

// A scalar read that waited: 1 ms where a CPU tensor's read takes well under
// a µs; two of them, so one preempted call is not a device, and at least
// half of the trace's reads, since on a device every read waits (issue
// 38's thirteenth round: a CPU-only gloo pipeline rank whose 2 slow reads
// of 235, the process preempted, were taken for an unrecorded device).
constexpr std::int64_t kBlockingReadNs = 1'000'000;
constexpr std::int64_t kMinBlockingReads = 2;

// Linux's thread ids stay within pid_max (at most 2^22); macOS's are a
// 64-bit counter, in the millions soon after boot.
bool linux_thread_ids(const DiagnoseContext& c) {
  for (const Lane& lane : c.trace.lanes) {
    if (lane.kind == LaneKind::kCpu && !lane.tid.is_str && lane.tid.num > (std::int64_t{1} << 22)) return false;
  }
  return true;
}

}  // namespace

// Flag queries are no work issued (torch.backends.cudnn's
// `_get_cudnn_enabled`, which F.batch_norm reads on every call, CPU or not:
// issue 38's eighth round, a macOS CPU run called "the GPU's activity was
// not recorded" for two of them). Nor are the predicates that choose a
// path: `aten::cudnn_is_acceptable`, which an LSTM asks on the CPU too, and
// `aten::_use_cudnn_ctc_loss` (issue 38's twenty-fifth round: a CPU-only
// torch 1.13 LSTM trace called "unclear, the GPU's activity was not
// recorded" for its 3 calls of the first).
bool is_gpu_library_op(std::string_view n) {
  if (n.find("_get_") != std::string_view::npos || n.find("_enabled") != std::string_view::npos ||
      n.find("is_available") != std::string_view::npos || n.find("version") != std::string_view::npos ||
      n.find("_is_acceptable") != std::string_view::npos || n.find("_use_") != std::string_view::npos) {
    return false;
  }
  for (std::string_view lib : {"cudnn", "miopen", "cublas", "nccl"}) {
    if (n.find(lib) != std::string_view::npos) return true;
  }
  return false;
}

bool legacy_export_by_torch_profiler(const DiagnoseContext& c, const GpuWorkIssued& g) {
  if (g.gpu_flows <= 0 && c.trace.meta.format != TraceFormat::kLegacyArray) return false;
  return std::any_of(c.host_ops.begin(), c.host_ops.end(), [&](std::uint32_t e) { return is_profiler_step(c.name(e)); });
}

namespace {

// Bytes of a dtype named by an op's Input type entry; 0 when unknown.
std::int64_t type_bytes(std::string_view t) {
  if (t == "double" || t == "long int" || t == "long" || t == "c10::complex<float>") return 8;
  if (t == "float" || t == "int" || t == "unsigned int") return 4;
  if (t == "c10::BFloat16" || t == "c10::Half" || t == "short int") return 2;
  if (t == "bool" || t == "signed char" || t == "unsigned char" || t.starts_with("c10::Float8")) return 1;
  return 0;
}

// An aten::copy_ that moved its bytes slower than any copy runs.
bool stalled_copy(const DiagnoseContext& c, std::uint32_t e) {
  const std::string_view raw = c.trace.args_json(e);
  if (raw.find("\"Input Dims\"") == std::string_view::npos) return false;
  const Result<JsonValue> args = JsonValue::parse(raw);
  if (!args) return false;
  const std::vector<std::vector<std::int64_t>> shapes = input_shapes(args->find("Input Dims"));
  const JsonValue* types = args->find("Input type");
  if (shapes.empty() || types == nullptr || !types->is_array() || types->items().empty() ||
      !types->items().front().is_string()) {
    return false;
  }
  std::int64_t bytes = type_bytes(types->items().front().text());
  if (bytes == 0) return false;
  for (std::int64_t d : shapes.front()) bytes = sat_mul(bytes, std::max<std::int64_t>(d, 0));
  return static_cast<double>(bytes) < kStalledCopyRate * static_cast<double>(c.dur(e)) * 1e-9;
}

}  // namespace

std::vector<std::uint32_t> unrecorded_device_waits(const DiagnoseContext& c) {
  std::vector<std::uint32_t> out;
  const GpuWorkIssued g = gpu_work_issued(c);
  if (c.has_device() || !c.ranges.empty() || !g.any() || g.reads_only()) return out;
  for (std::uint32_t e : c.runtime)
    if (c.blocks_host(e)) out.push_back(e);
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp || c.dur(e) < kStalledCopyNs) continue;
    const std::string_view n = c.name(e);
    if (n == "aten::_local_scalar_dense" || (n == "aten::copy_" && stalled_copy(c, e))) out.push_back(e);
  }
  std::sort(out.begin(), out.end(),
            [&](std::uint32_t a, std::uint32_t b) { return c.ts(a) != c.ts(b) ? c.ts(a) < c.ts(b) : a < b; });
  return out;
}

DeviceWaitShare unrecorded_device_wait_share(const DiagnoseContext& c) {
  DeviceWaitShare w;
  const std::vector<std::uint32_t> events = unrecorded_device_waits(c);
  if (events.empty()) return w;
  std::vector<Interval> spans;
  if (c.steps.steps.empty()) {
    spans.push_back({c.start_ns, c.end_ns});
  } else {
    for (const StepStat& st : c.steps.steps) spans.push_back({st.start_ns, sat_add(st.start_ns, st.dur_ns)});
  }
  spans = merge_intervals(std::move(spans));
  std::vector<Interval> list;
  for (std::uint32_t e : events) {
    const bool inside = std::any_of(spans.begin(), spans.end(), [&](const Interval& s) { return c.ts(e) < s.end && c.end(e) > s.start; });
    if (!inside) continue;
    list.push_back({c.ts(e), c.end(e)});
    ++w.calls;
    if (w.longest == kNoIndex || c.dur(e) > c.dur(w.longest)) w.longest = e;
  }
  const std::vector<Interval> waits = merge_intervals(std::move(list));
  for (const Interval& s : spans) {
    sat_acc(w.span_ns, s.end - s.start);
    sat_acc(w.waited_ns, covered_within(waits, s.start, s.end));
  }
  return w;
}

bool waits_for_unrecorded_device(const DiagnoseContext& c) {
  const DeviceWaitShare w = unrecorded_device_wait_share(c);
  return w.span_ns > 0 && static_cast<double>(w.waited_ns) >= kDeviceWaitShare * static_cast<double>(w.span_ns);
}

GpuWorkIssued gpu_work_issued(const DiagnoseContext& c) {
  GpuWorkIssued g;
  // The legacy profiler's device spans are the device's activity, coarse
  // (legacy_device_spans reads them).
  if (c.has_device() || !c.ranges.empty() || c.legacy_spans().any()) return g;
  // A runtime call (cudaLaunchKernel, hipLaunchKernel) wraps a driver call
  // (cuLaunchKernelEx): count the runtime's where the trace has them, so
  // one launch counts once.
  std::int64_t runtime_calls = 0, driver_calls = 0;
  std::uint32_t first_runtime = kNoIndex, first_driver = kNoIndex;
  for (std::uint32_t e : c.runtime) {
    const std::string_view n = c.name(e);
    if (!is_issue_call(n)) continue;
    const bool runtime_api = n.starts_with("cuda") || n.starts_with("hip");
    (runtime_api ? runtime_calls : driver_calls) += 1;
    std::uint32_t& first = runtime_api ? first_runtime : first_driver;
    if (first == kNoIndex) first = e;
  }
  g.issue_calls = runtime_calls > 0 ? runtime_calls : driver_calls;
  g.first_call = runtime_calls > 0 ? first_runtime : first_driver;
  for (std::uint32_t e : c.host_ops) {
    const bool library = is_gpu_library_op(c.name(e));
    if (!library && !is_gpu_attention_op(c.name(e))) continue;
    if (g.first_op == kNoIndex) g.first_op = e;
    ++(library ? g.library_ops : g.attention_ops);
  }
  for (const MemoryRecord& r : c.trace.memory) {
    if (is_gpu_memory(r)) ++g.gpu_memory_records;
  }
  // The legacy autograd profiler's export (a bare array) of a build without
  // Kineto keeps its cpu_to_cuda flow starts and drops the CUDA events they
  // point at (issue 38's twelfth round: a compiled interpolation on CUDA,
  // 29 flows and a Triton kernel a call, was called cpu-only). Kineto's
  // ac2g flows are not counted: their launch calls are, and it also starts
  // one at a cudaDeviceSynchronize, which issues no work (a CPU model on a
  // GPU host, tests/data's particle_transformer CPU run).
  if (const std::optional<StrId> id = c.trace.strings.find("cpu_to_cuda")) {
    const EventColumns& ev = c.trace.events;
    for (std::uint32_t e = 0; e < ev.size(); ++e) {
      if (ev.cat[e] == *id && ev.phase[e] == Phase::kFlowStart) ++g.gpu_flows;
    }
  }
  // Autograd's device threads (issue 38's thirteenth round: a VAE trained
  // on a laptop GPU, recorded without any device event, was called
  // cpu-only; its backward ran on "pt_autograd_0").
  for (const Lane& lane : c.trace.lanes) {
    const std::string_view thread = c.trace.strings.str(lane.thread_name);
    if (lane.kind == LaneKind::kCpu && thread.find("pt_autograd_") != std::string_view::npos) ++g.autograd_device_threads;
  }
  g.gpu_listed = c.trace.meta.top_level_json("deviceProperties").find("\"name\"") != std::string_view::npos;
  std::int64_t all_reads = 0, reads = 0, read_ns = 0;
  std::uint32_t longest = kNoIndex;
  std::vector<std::size_t> slow;  // the slow reads' places in host_ops
  for (std::size_t i = 0; i < c.host_ops.size(); ++i) {
    const std::uint32_t e = c.host_ops[i];
    if (c.kind(e) == EventKind::kCpuOp && c.name(e).starts_with("triton_")) {
      if (g.first_op == kNoIndex) g.first_op = e;
      ++g.triton_ops;
    }
    if (c.name(e) != "aten::_local_scalar_dense") continue;
    ++all_reads;
    if (c.dur(e) < kBlockingReadNs) continue;
    ++reads;
    slow.push_back(i);
    sat_acc(read_ns, c.dur(e));
    if (longest == kNoIndex || c.dur(e) > c.dur(longest)) longest = e;
  }
  if (reads >= kMinBlockingReads && 2 * reads >= all_reads) {
    g.blocking_reads = reads;
    g.blocking_read_ns = read_ns;
    g.longest_read = longest;
  } else if (reads >= kMinBlockingReads && !linux_thread_ids(c)) {
    // A macOS host (thread ids beyond Linux's pid_max) whose slow reads
    // copy through aten::empty_like, as an MPS tensor's read does (a CPU
    // tensor's reads nothing): the model ran on Apple's GPU, which
    // torch.profiler never records (issue 38's fifteenth round: an MoE
    // trained on a Mac, 5 of 196 reads waiting 5-28 ms, called cpu-only).
    std::int64_t device_reads = 0, device_ns = 0;
    std::uint32_t device_longest = kNoIndex;
    for (const std::size_t i : slow) {
      const std::uint32_t e = c.host_ops[i];
      bool copies = false;
      for (std::size_t k = i + 1; k < c.host_ops.size() && c.ts(c.host_ops[k]) < c.end(e); ++k) {
        const std::uint32_t o = c.host_ops[k];
        copies |= c.trace.events.lane[o] == c.trace.events.lane[e] && c.name(o) == "aten::empty_like";
      }
      if (!copies) continue;
      ++device_reads;
      sat_acc(device_ns, c.dur(e));
      if (device_longest == kNoIndex || c.dur(e) > c.dur(device_longest)) device_longest = e;
    }
    if (device_reads >= kMinBlockingReads) {
      g.blocking_reads = device_reads;
      g.blocking_read_ns = device_ns;
      g.longest_read = device_longest;
    }
  }
  return g;
}

std::string GpuWorkIssued::text() const {
  std::vector<std::string> parts;
  if (issue_calls > 0) parts.push_back(std::to_string(issue_calls) + " kernel launch or copy calls");
  if (library_ops > 0) parts.push_back(std::to_string(library_ops) + " cuDNN/MIOpen/cuBLAS/NCCL ops");
  if (attention_ops > 0) {
    parts.push_back(std::to_string(attention_ops) + " attention ops torch runs on a GPU only (memory-efficient or flash)");
  }
  if (gpu_memory_records > 0) parts.push_back(std::to_string(gpu_memory_records) + " memory events on a GPU");
  if (gpu_flows > 0) parts.push_back(std::to_string(gpu_flows) + " CPU-to-GPU flow links");
  if (triton_ops > 0) parts.push_back(std::to_string(triton_ops) + " Triton kernels (Inductor's GPU code)");
  if (autograd_device_threads > 0) {
    parts.push_back("torch's autograd thread for a device (pt_autograd_N), which runs backward only for a device's "
                    "tensors");
  }
  if (blocking_reads > 0) {
    parts.push_back(std::to_string(blocking_reads) + " scalar reads (.item()) that wait " + format_ns(blocking_read_ns) +
                    " in all (a CPU tensor's read takes under a microsecond)");
  }
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return s;
}

void rule_device_activity_missing(const DiagnoseContext& c, std::vector<Finding>* out) {
  const GpuWorkIssued g = gpu_work_issued(c);
  if (!g.any()) return;
  Finding f;
  f.id = "device_activity_missing";
  f.severity = FindingSeverity::kWarning;
  f.title = std::string(g.reads_only() ? "the device's" : "the GPU's") + " activity was not recorded: the trace shows " + g.text() + " but no kernel, copy or memset";
  f.evidence.num("launch_calls", g.issue_calls).num("gpu_library_ops", g.library_ops).num("gpu_memory_events", g.gpu_memory_records);
  if (g.attention_ops > 0) f.evidence.num("gpu_attention_ops", g.attention_ops);
  if (g.gpu_flows > 0) f.evidence.num("gpu_flows", g.gpu_flows);
  if (g.triton_ops > 0) f.evidence.num("triton_ops", g.triton_ops);
  if (g.autograd_device_threads > 0) f.evidence.num("autograd_device_threads", g.autograd_device_threads);
  if (g.blocking_reads > 0) {
    f.evidence.num("blocking_scalar_reads", g.blocking_reads)
        .num("blocking_scalar_read_ns", g.blocking_read_ns)
        .event("longest_scalar_read", c.ref(g.longest_read));
  }
  // Only waiting reads, no CUDA/HIP sign: a device torch.profiler cannot
  // record (issue 38's fifth round: an Apple MPS training step, macOS
  // thread ids, 5-28 ms .item() calls, was called cpu-only).
  const bool reads_only = g.reads_only();
  if (g.first_call != kNoIndex) f.evidence.event("first_call", c.ref(g.first_call));
  if (g.first_op != kNoIndex) f.evidence.event("first_gpu_op", c.ref(g.first_op));
  // Runtime calls come from CUPTI's (roctracer's) callbacks: where the trace
  // has them the device side was asked for, and only its activity records
  // never arrived (issue 38 review: a torch.square loop on an RTX 4060 with
  // 41 cuda_runtime events and CUPTI's overhead records, no kernel; "profile
  // again with ProfilerActivity.CUDA" asked for what was already on).
  const bool asked = g.issue_calls > 0 && !c.runtime.empty();
  f.evidence.text("device_side_requested", asked ? "yes: runtime calls recorded" : "no runtime call recorded");
  // The legacy autograd profiler's export (cpu_to_cuda flows): what a
  // PyTorch build without Kineto falls back to, which writes no GPU events
  // whatever activities are asked for (issue 38's twelfth round, the
  // after-review: "profile again with ProfilerActivity.CUDA" repeated what
  // the script already asked).
  // The legacy array without flows too: use_cuda=False, the CPU side only
  // (issue 38's fifteenth round: a Jetson's VoteNet told of CUPTI under WSL).
  const bool legacy = g.gpu_flows > 0 || c.trace.meta.format == TraceFormat::kLegacyArray;
  // (issue 38's eighteenth round: a CS336 DDP benchmark on torch 2.x,
  // already asking for CUDA.)
  const bool stepped = legacy_export_by_torch_profiler(c, g);
  // (issue 38's twenty-first round: a Windows resnet34 run whose notebook
  // asked for ProfilerActivity.CUDA was told to ask for it.)
  const std::string windows = windows_sign(c);
  if (!windows.empty()) f.evidence.text("windows", windows);
  const std::string wsl = wsl_sign(c);
  if (!wsl.empty()) f.evidence.text("wsl", wsl);
  f.advice =
      stepped
          ? "Profile with a PyTorch build that has Kineto (torch.autograd.kineto_available() returns True; the "
            "official wheels have it): this trace's ProfilerStep#N markers say torch.profiler.profile wrote it, and a "
            "build without Kineto falls back to the legacy autograd profiler's export, which records no kernel "
            "whatever activities are asked for. Until then the trace cannot say whether the GPU or the host is the "
            "bottleneck, and its CPU times include waits on the GPU."
      : legacy
          ? "Profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) "
            "(PyTorch 1.8.1 and later): this trace is the legacy autograd profiler's export (torch.autograd.profiler."
            "profile without use_kineto=True, its default, or a build without Kineto), which records no "
            "kernel, and without use_cuda=True no device time at all. Until then the trace cannot say whether the GPU "
            "or the host is the bottleneck, and its CPU times include waits on the GPU."
      : reads_only
          ? "Profile the device the program runs on with its own tool: " +
                (g.blocking_reads > 0
                     ? std::to_string(g.blocking_reads) + " .item() calls wait " + format_ns(g.blocking_read_ns) +
                           ", so the tensors live on an asynchronous device"
                     : std::string("backward ran on torch's autograd thread for a device, so the tensors live on a "
                                   "device")) +
                " the trace does not record. On Apple MPS "
                "torch.profiler records no device activity at all (torch.mps.profiler with Instruments' Metal System "
                "Trace shows it); on a GPU, add ProfilerActivity.CUDA. Until then the CPU times include waits on "
                "the device."
      : asked && c.profiler_event_timing()
          ? "Profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) (or "
            "torch.autograd.profiler.profile(use_cuda=True, use_kineto=True)): this profiler timed each op with a pair "
            "of CUDA events (cudaEventRecord around every op, views included), torch.autograd.profiler's use_cuda=True "
            "without use_kineto=True (its default) or without CUPTI's CUDA activity, which records no kernel "
            "or copy; those events' calls are the profiler's, not the program's."
      : asked ? "Find why the device records were lost: the trace has the runtime calls, so the CUDA activity was on, "
              "but CUPTI (roctracer on ROCm) delivered no kernel or copy record. Usual causes: a platform where CUPTI's "
              "activity API does not work (WSL 2 with an older driver, a vGPU or container without the profiling "
              "capability), a CUPTI older than the driver, or another profiler (Nsight Systems, DCGM profiling) holding "
              "it. Check with a one-kernel script; until then the trace cannot say whether the GPU or the host is the "
              "bottleneck, and its CPU times include waits on the GPU."
      : !wsl.empty()
          ? "Record the GPU side on native Linux, or with Nsight Systems, or time the work with CUDA events: this trace "
            "was recorded under WSL 2 (" + wsl + "), where CUPTI often delivers no kernel or copy record even with "
            "ProfilerActivity.CUDA asked for, so profiling again there changes nothing. Until then the trace cannot say "
            "whether the GPU or the host is the bottleneck, and its CPU times include waits on the GPU."
      : !windows.empty()
          ? "Record the GPU side on Linux, or with Nsight Systems (nsys profile) on Windows: this trace was recorded on "
            "native Windows (" + windows + "), where torch.profiler often records no CUDA activity even with "
            "ProfilerActivity.CUDA asked for (pytorch/kineto#762), so profiling again there changes nothing. Until then "
            "the trace cannot say whether the GPU or the host is the bottleneck, and its CPU times include waits on "
            "the GPU."
            : "Profile again with the device side recorded: torch.profiler.profile(activities=[ProfilerActivity.CPU, "
              "ProfilerActivity.CUDA]) (CUDA covers ROCm too); if it was already asked for, CUPTI recorded nothing on "
              "this platform (WSL 2 with an older driver, a container without the profiling capability, another "
              "profiler holding it). Without it the trace cannot say whether the GPU or the host is the bottleneck, and "
              "its CPU times include waits on the GPU.";
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

std::string windows_sign(const DiagnoseContext& c) {
  if (const std::string_view host = trace_host_name(c.trace); host.starts_with("DESKTOP-") || host.starts_with("LAPTOP-")) {
    return "host " + std::string(host);
  }
  // A bounded number of ops' args: the dtype names MSVC gives int64_t.
  std::size_t read = 0;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    if (read++ >= 4096) break;
    if (c.trace.args_json(e).find("__int64") != std::string_view::npos) return "MSVC's __int64 in its input types";
  }
  return "";
}

std::string wsl_sign(const DiagnoseContext& c) {
  const std::string_view name = trace_name(c.trace);
  if (name.size() < 7 || !name.starts_with("/mnt/") || name[5] < 'a' || name[5] > 'z' || name[6] != '/') return "";
  return "its trace path " + std::string(name.substr(0, 7)) + "…";
}

bool cpu_only_program(const DiagnoseContext& c) {
  // (The legacy profiler's use_cuda spans are the device's work, op by op.)
  return !c.has_device() && c.ranges.empty() && !gpu_work_issued(c).any() && !c.legacy_spans().any();
}

}  // namespace tprof::internal
