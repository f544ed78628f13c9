// compute_bound: the host keeps the GPU fed: Self CPU ≈ Self CUDA, both
// large, and the GPU busy most of the time. Good news only when the GPU's
// time is mostly efficient math: the title says what the GPU is busy with
// (kernel classes, the GEMMs' achieved TFLOP/s against the device's peak,
// src/analyze/efficiency.h), and a GPU busy mostly with memory-bound
// kernels is told to fuse them. Origin: docs/trace-reading.md, "Self CPU ≈
// Self CUDA, both in ms: compute-bound — usually what you want".
#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/host_stack.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/names.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

// The three kernels (not collectives) holding the most GPU time, with their
// shares: "fused_moe_kernel 27.0%, …".
struct TopKernels {
  std::vector<std::string> names;  // full names
  std::string text;                // "fused_moe_kernel 27.2%, …"
  bool all_conv = true;            // every one a convolution library's
};
TopKernels top_kernels(const Efficiency& eff) {
  TopKernels top;
  for (const KernelEfficiency& k : eff.kernels) {
    if (top.names.size() == 3 || eff.total_ns <= 0) break;
    // A collective's kernel spins while it waits for the other ranks:
    // its time is comm_exposed's, not a kernel to tune (issue 38's
    // thirteenth round: a vLLM decode's ReduceScatter, 16.5% of GPU time,
    // was sent to Nsight Compute).
    if (k.cls == KernelClass::kComm) continue;
    top.names.push_back(k.name);
    top.all_conv = top.all_conv && k.cls == KernelClass::kConv;
    top.text += (top.text.empty() ? "" : ", ") + title_name(k.name) + " " +
                format_pct(100.0 * static_cast<double>(k.time_ns) / static_cast<double>(eff.total_ns));
  }
  return top;
}

// "≈": Self CPU at most twice Self CUDA (the post's 4096² run: 4.908 ms vs
// 4.495 ms; the H100 ones 4.0 vs 4.0 ms). More device time than CPU time
// counts too: the GPU is then even more clearly the bottleneck.
constexpr double kMaxCpuToDevice = 2.0;
// "both in ms": the device total must reach a millisecond, so a tiny trace
// with one long kernel is not called compute-bound.
constexpr std::int64_t kMinDeviceTotalNs = 1'000'000;
// "GPU busy most of the time": the step verdict's compute share (80%).
constexpr double kBusyShare = 0.8;
// "Mostly memory-bound": elementwise and reduction kernels hold half the
// device time or more.
constexpr double kMemoryBoundShare = 0.5;
// "Efficient math": GEMMs at half their dense peak or more.
constexpr double kEfficientGemm = 0.5;
// The GEMMs' measured rate judges the GPU's work from this share of its time.
constexpr double kGemmJudgedShare = 0.2;
// Memory-bound kernels measured below this share of the HBM bandwidth (on
// half their time or more) are not at the memory ceiling: their time is
// not the traffic alone (issue 38, fifth round: kernels called memory-bound
// by class while they moved a few GB/s).
constexpr double kFarBelowCeiling = 0.25;

}  // namespace

void rule_compute_bound(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  // Torch's totals, or the steps' own where they are a host range (a whole
  // program's trace, start-up and exit in its totals).
  const DiagnoseContext::HostVsDevice& hd = c.host_vs_device();
  const std::int64_t cpu = hd.cpu_ns;
  const std::int64_t dev = hd.device_ns;
  if (dev < kMinDeviceTotalNs) return;
  const double ratio = static_cast<double>(cpu) / static_cast<double>(dev);
  if (ratio > kMaxCpuToDevice) return;

  const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
  const std::int64_t span = w.span_ns, busy = w.busy_ns;
  std::vector<std::int64_t> busy_steps;
  for (const StepStat& st : c.steps.steps) {
    const std::int64_t b = std::min(st.gpu_busy_ns, st.dur_ns);
    if (st.dur_ns > 0 && static_cast<double>(b) >= kBusyShare * static_cast<double>(st.dur_ns)) {
      busy_steps.push_back(st.step);
    }
  }
  if (span <= 0) return;
  const double busy_share = static_cast<double>(busy) / static_cast<double>(span);
  if (busy_share < kBusyShare) return;

  const Efficiency& eff = c.efficiency();
  // Communication holding the largest share of the GPU time is the
  // comm_exposed rule's state (a GPU busy in collectives waits on the link
  // or on other ranks), not compute-bound; unless compute overlaps most of
  // it (issue 38's nineteenth round: DeepEP's dispatch and combine, 46.5%
  // of an H800 rank's summed GPU time on a side stream, 4 ms of 113 ms
  // exposed, under a compute-bound verdict).
  const double comm_share = c.comm_overlap().mostly_overlapped() ? 0.0 : eff.share(KernelClass::kComm);
  for (int k = 0; k < kKernelClassCount; ++k) {
    if (static_cast<KernelClass>(k) != KernelClass::kComm && eff.share(static_cast<KernelClass>(k)) > comm_share) break;
    if (k == kKernelClassCount - 1 && comm_share > 0) return;
  }
  // Busy with copies and memsets (the copy-bound verdict): no kernel to
  // profile or fuse; the copies' own findings (pageable_memcpy,
  // hidden_memcpy) say what to change (issue 38's fourth round: an A100
  // copy loop got Nsight Compute advice for its memcpys).
  if (eff.share(KernelClass::kCopy) >= 0.5) return;

  Finding f;
  f.id = "compute_bound";
  f.severity = FindingSeverity::kInfo;
  char r[32];
  std::snprintf(r, sizeof r, "%.2f", ratio);
  // Memory-bound: elementwise and reduction kernels hold half the GPU time,
  // or more of it than the GEMMs (fusion is then the larger lever).
  double largest_other = 0;  // the largest class that is not memory-bound
  for (int k = 0; k < kKernelClassCount; ++k) {
    const KernelClass kc = static_cast<KernelClass>(k);
    if (kc != KernelClass::kElementwise && kc != KernelClass::kReduction) largest_other = std::max(largest_other, eff.share(kc));
  }
  const bool memory_bound = memory_bound_share(eff) >= kMemoryBoundShare ||
                            (memory_bound_share(eff) > 0 && memory_bound_share(eff) > largest_other);
  // The memory-bound kernels, largest first (at most 3); the ops that
  // launch them, largest first (at most 6): what a user sees in the model's
  // code; and their bandwidth, over the instances whose shapes are known.
  std::vector<std::string> mem_kernels, mem_ops;
  double mem_bytes = 0;
  std::int64_t mem_sized_ns = 0, mem_ns = 0;
  for (const KernelEfficiency& k : eff.kernels) {
    if (k.cls != KernelClass::kElementwise && k.cls != KernelClass::kReduction) continue;
    if (mem_kernels.size() < 3) mem_kernels.push_back(k.name);
    if (!k.op.empty() && mem_ops.size() < 6 && std::find(mem_ops.begin(), mem_ops.end(), k.op) == mem_ops.end()) {
      mem_ops.push_back(k.op);
    }
    sat_acc(mem_ns, k.time_ns);
    if (k.sized_time_ns <= 0 || k.bytes <= 0) continue;
    mem_bytes += k.bytes;
    sat_acc(mem_sized_ns, k.sized_time_ns);
  }
  const double mem_gbps = mem_sized_ns > 0 ? mem_bytes / static_cast<double>(mem_sized_ns) : 0;
  const bool mem_measured = eff.peak != nullptr && mem_gbps > 0 && sat_mul(2, mem_sized_ns) >= mem_ns;
  const bool far_below = memory_bound && mem_measured && mem_gbps < kFarBelowCeiling * eff.peak->hbm_gbps;
  GemmRate gemm = gemm_rate(eff);
  // A rate above the peak is a wrong join of shapes to kernels: unmeasured.
  if (gemm.implausible) gemm = GemmRate{};
  // What a quoted GEMM rate is measured on, where not all GEMM time.
  const std::int64_t gemm_ns = eff.class_ns[static_cast<std::size_t>(KernelClass::kGemm)];
  const std::string measured_on =
      gemm.measured_ns > 0 && gemm.measured_ns < gemm_ns
          ? " (measured on the " +
                format_pct(100.0 * static_cast<double>(gemm.measured_ns) / static_cast<double>(eff.total_ns)) +
                " of GPU time whose shapes are known)"
          : std::string();
  // Most of the measured GEMM time below the ridge point: judged on bytes.
  // TF32 GEMMs replayed from graphs, told to autocast to bf16: half their
  // time (bf16 tensor cores run at twice TF32's peak).
  std::int64_t tf32_saving_ns = 0;
  const bool bandwidth_bound = eff.peak != nullptr && gemm.bw_time_ns > 0 && sat_mul(2, gemm.bw_time_ns) >= gemm.measured_ns;
  // The GEMMs' rate speaks for the GPU only where they hold a good part of
  // its time (issue 38's twentieth round: a VGG13 step's classifier GEMMs,
  // 2.1% of the GPU time at 77% of the fp32 peak, made "the GEMMs run near
  // the peak: do less work" the fix of a step that is 42% convolutions and
  // 20% layout conversions).
  const bool gemm_matters = eff.share(KernelClass::kGemm) >= kGemmJudgedShare;
  const std::string mix = efficiency_text(eff);
  // A host that spends most of its Self CPU waiting for the device says so:
  // the ratio is the waits', not the host's work (issue 38's seventeenth
  // round: 441.8 ms of 456.3 ms in cudaStreamSynchronize, "ratio 1.00").
  std::string waiting;
  {
    const std::int64_t wait_ns = c.covered_in_host_window(c.host_waits());
    if (cpu > 0 && sat_mul(2, wait_ns) >= cpu) {
      waiting = " (" + format_ns(std::min(wait_ns, cpu)) + " of it waiting for the GPU in synchronizing calls)";
    }
  }
  f.title = std::string(far_below      ? "GPU-bound on elementwise and reduction kernels far below the memory ceiling"
                        : memory_bound ? "GPU-bound on memory-bound kernels"
                                       : "Compute-bound") +
            ": GPU busy " +
            format_pct(100.0 * busy_share) + (c.steps.steps.empty() ? " of the trace" : w.queued_ahead ? " of the steps and the work they queued" : " of the steps") +
            (mix.empty() ? "" : "; " + mix) + (hd.within_steps ? "; Self CPU in the steps " : "; Self CPU ") +
            format_ns(cpu) + waiting + (hd.within_steps ? " vs their device time " : " vs Self CUDA ") + format_ns(dev) +
            " (ratio " + r + ")";
  f.evidence.num(hd.within_steps ? "self_cpu_in_steps_ns" : "self_cpu_total_ns", cpu)
      .num(hd.within_steps ? "device_in_steps_ns" : "self_device_total_ns", dev)
      .real("cpu_to_device_ratio", ratio)
      .real("gpu_busy_pct", 100.0 * busy_share)
      .num("window_ns", span)
      .num("gpu_busy_ns", busy)
      .text("window", c.steps.steps.empty() ? "trace" : "steps");
  if (!c.steps.steps.empty()) {
    f.evidence.num("steps_total", static_cast<std::int64_t>(c.steps.steps.size()));
    add_steps(f.evidence, std::move(busy_steps));
  }
  for (int k = 0; k < kKernelClassCount; ++k) {
    const double s = eff.share(static_cast<KernelClass>(k));
    if (s > 0) f.evidence.real("gpu_time_pct_" + std::string(kernel_class_name(static_cast<KernelClass>(k))), 100.0 * s);
  }
  if (gemm.tflops > 0) f.evidence.real("gemm_tflops", gemm.tflops);
  if (gemm.peak_tflops > 0) f.evidence.real("gemm_peak_tflops", gemm.peak_tflops).text("gemm_dtype", gemm.dtype);
  if (gemm.measured_ns > 0) {
    f.evidence.num("gemm_measured_ns", gemm.measured_ns).real("gemm_dtype_share_pct", 100.0 * gemm.dtype_share);
  }
  if (gemm.bw_time_ns > 0) f.evidence.num("gemm_bandwidth_bound_ns", gemm.bw_time_ns).real("gemm_bandwidth_bound_gbps", gemm.bw_gbps);
  if (!eff.device_name.empty()) f.evidence.text("device", eff.device_name);
  if (memory_bound) {
    f.evidence.texts("memory_bound_kernels", mem_kernels);
    if (mem_measured) {
      f.evidence.real("memory_bound_gbps", mem_gbps)
          .real("memory_bound_pct_of_peak", 100.0 * mem_gbps / eff.peak->hbm_gbps)
          .real("memory_bound_measured_pct", 100.0 * static_cast<double>(mem_sized_ns) / static_cast<double>(mem_ns));
    }
    if (!mem_ops.empty()) f.evidence.texts("memory_bound_ops", mem_ops);
    std::string names;
    for (std::size_t i = 0; i < mem_kernels.size(); ++i) names += (i ? ", " : "") + title_name(mem_kernels[i]);
    std::string ops;
    for (const std::string& o : mem_ops) ops += (ops.empty() ? "" : ", ") + o;
    // The ops say which blocks are unfused, each named only where its whole
    // pattern is there: a norm (rsqrt after a pow or mean; a CNN's global
    // average pool is a mean alone), an activation (silu/gelu), rotary
    // embeddings (neg and cat together; a CNN concatenates without
    // negating), batch norm (its ops or kernels: a trace without ops,
    // TraceLens' MI210 gpu_only trace). Over every memory-bound kernel, not
    // only the six ops named: an RMSNorm's rsqrt may rank below them (issue
    // 38, fifth round: "fused RoPE kernels" for a ResNet).
    bool rsqrt = false, pow_mean = false, act = false, neg = false, cat = false, bn = false;
    for (const KernelEfficiency& k : eff.kernels) {
      if (k.cls != KernelClass::kElementwise && k.cls != KernelClass::kReduction) continue;
      const std::string& o = k.op;
      rsqrt = rsqrt || o == "aten::rsqrt";
      pow_mean = pow_mean || o == "aten::pow" || o == "aten::mean" || o == "aten::var_mean";
      act = act || o == "aten::silu" || o == "aten::gelu";
      neg = neg || o == "aten::neg";
      cat = cat || o == "aten::cat";
      bn = bn || o.find("batch_norm") != std::string::npos || k.name.find("batch_norm") != std::string::npos ||
           k.name.starts_with("bn_fw") || k.name.starts_with("bn_bw");
    }
    const bool norm = rsqrt && pow_mean, rope = neg && cat;
    // A training step's batch norm needs the batch's statistics: no kernel
    // folds it into the convolution (Inductor fuses it with the activation,
    // cuDNN's convolution stays its own), and its backward reads the
    // activations again (issue 38's nineteenth round: "fused convolution +
    // batch norm + activation kernels" for a ResNet-50 training step).
    const bool training = !c.forward_only();
    std::string fused;
    if (bn) fused += training ? "batch norm + activation" : "convolution + batch norm + activation";
    if (norm) fused += std::string(fused.empty() ? "" : ", ") + "RMSNorm/LayerNorm";
    if (rope) fused += std::string(fused.empty() ? "" : ", ") + "RoPE";
    if (act) fused += std::string(fused.empty() ? "" : ", ") + "SwiGLU/GELU";
    // Mostly fp32 tensors on a GPU with 16-bit tensor cores: mixed precision
    // halves their bytes and doubles the convolutions' and GEMMs' rate, the
    // expert's first lever (the same ResNet-50 step: TF32 convolutions and
    // fp32 batch norms on an RTX 3060 Ti).
    // The optimizer's kernels stay fp32 under autocast (its master weights
    // and states): the model's own must hold half the memory-bound time; and
    // a step whose GEMMs or convolutions already run in 16 bits has autocast
    // on.
    std::int64_t fp32_ns = 0, typed_ns = 0, model_ns = 0;
    bool sixteen_bit_math = false;
    for (const KernelEfficiency& k : eff.kernels) {
      if ((k.cls == KernelClass::kGemm || k.cls == KernelClass::kConv || k.cls == KernelClass::kAttention) &&
          (k.dtype == "bf16" || k.dtype == "fp16" || k.dtype == "fp16/bf16")) {
        sixteen_bit_math = true;
      }
      if (k.cls != KernelClass::kElementwise && k.cls != KernelClass::kReduction) continue;
      if (k.name.find("multi_tensor_apply") != std::string::npos || k.op.starts_with("aten::_foreach_") ||
          k.op.starts_with("aten::_fused_")) {
        continue;
      }
      sat_acc(model_ns, k.time_ns);
      if (!k.dtype.empty()) sat_acc(typed_ns, k.time_ns);
      if (k.dtype == "fp32") sat_acc(fp32_ns, k.time_ns);
    }
    const TensorCores tc = tensor_cores(c.trace);
    const bool amp = c.is_torch() && tc.fp16 && !sixteen_bit_math && typed_ns > 0 && sat_mul(2, fp32_ns) >= model_ns &&
                     sat_mul(2, model_ns) >= mem_ns;
    if (amp) f.evidence.num("memory_bound_fp32_ns", fp32_ns);
    const std::string amp_first =
        !amp ? std::string()
             : std::string("Run the step in mixed precision first (torch.autocast(\"cuda\", dtype=") +
                   (tc.bf16 ? "torch.bfloat16" : "torch.float16, with a GradScaler") + "): " +
                   format_pct(100.0 * static_cast<double>(fp32_ns) / static_cast<double>(std::max<std::int64_t>(1, model_ns))) +
                   " of the memory-bound kernels' time outside the optimizer moves fp32 tensors, whose bytes halve, and "
                   "the tensor cores' "
                   "rate for the convolutions and GEMMs at least doubles. Then f";
    f.advice = (amp_first.empty() ? std::string("F") : amp_first) + "use the memory-bound kernels (" + names +
               (ops.empty() ? std::string() : "; ops " + ops) + ") " +
               (c.is_torch() ? "with " + c.compile_how() + " or fused " + (fused.empty() ? std::string("ops") : fused + " kernels")
                             : "into the kernels around them (" + c.fuse_how() + ")") + ": " +
               format_pct(100.0 * memory_bound_share(eff)) +
               (far_below
                    ? " of the GPU time is elementwise and reduction kernels, moving " +
                          format_pct(100.0 * mem_gbps / eff.peak->hbm_gbps) + " of the " + std::string(eff.peak->name) +
                          "'s HBM bandwidth (on the " +
                          format_pct(100.0 * static_cast<double>(mem_sized_ns) / static_cast<double>(mem_ns)) +
                          " of their time whose shapes are known): far below the ceiling, so their time is not the "
                          "traffic alone; small launches (a launch's fixed cost), strided inputs or a GPU below its "
                          "clocks (nvidia-smi -q -d CLOCK,PERFORMANCE: power and thermal limits) take it too. Fusing "
                          "removes their launches and round trips either way."
                    : " of the GPU time is elementwise and reduction kernels, whose time is memory traffic, not math; "
                      "a busy GPU is not an efficient one here.") +
               (bn ? std::string(" For inference, fold batch norm into the convolution (model.eval(), then ") +
                         (c.torch_before_compile() ? "torch.jit.freeze" : "torch.compile with freezing") +
                         ", or torch.nn.utils.fusion.fuse_conv_bn_eval)."
                   : std::string());
  } else if (gemm_matters && bandwidth_bound) {
    // Below the ridge point: the GEMMs wait on their operands' bytes, not
    // on the tensor cores (decode-sized batches against whole weights).
    f.advice = "The GEMMs are bandwidth-bound: " + format_pct(100.0 * static_cast<double>(gemm.bw_time_ns) /
                                                              static_cast<double>(eff.total_ns)) +
               " of the GPU time is GEMMs whose arithmetic intensity is below the " + std::string(eff.peak->name) +
               "'s ridge point, moving " + format_pct(100.0 * gemm.bw_gbps / eff.peak->hbm_gbps) +
               " of its HBM bandwidth" + measured_on + ". Batch more rows per weight read (larger batches, more requests per step) or "
               "read fewer bytes (fp8/int4 weights); their TFLOP/s against the peak is not the measure.";
  } else if (gemm_matters && gemm.peak_tflops > 0 && gemm.tflops >= kEfficientGemm * gemm.peak_tflops) {
    f.advice = "The GPU is the bottleneck and its GEMMs run at " + format_pct(100.0 * gemm.tflops / gemm.peak_tflops) +
               " of the peak" + measured_on + ": speed-ups now come from doing less work (fusing the remaining memory-bound kernels, "
               "lower precision where it is safe), not from the host.";
  } else if (gemm_matters && gemm.peak_tflops > 0 && gemm.tflops > 0) {
    // No shape advice: the GEMMs' dimensions are not judged here, and most
    // slow GEMMs have aligned ones (tile choice, wave quantisation, small K).
    f.advice = "The GEMMs run at " + format_pct(100.0 * gemm.tflops / gemm.peak_tflops) + " of the dense " + gemm.dtype +
               " peak" + measured_on + ": profile the largest with " + (c.is_hip() ? "rocprof (Omniperf)" : "Nsight Compute") +
               " to see what limits it (tile and wave quantisation on its shape, "
               "split-K). The host keeps the GPU fed, so speed-ups come from the kernels.";
  } else if (gemm.tflops <= 0 && eff.share(KernelClass::kGemm) >= kMemoryBoundShare) {
    // The recorder's setting: tprof record sees CUDA calls and no op, so no shapes.
    const bool ops = std::any_of(c.host_ops.begin(), c.host_ops.end(),
                                 [&](std::uint32_t e) { return c.kind(e) == EventKind::kCpuOp; });
    // A trace without ops (CPU activity off) has nothing to carry shapes:
    // recording shapes alone adds none (issue 38's seventeenth round: a
    // serving engine's GPU-only capture told to record shapes), and GEMMs
    // a C++ engine calls itself get none either way.
    const std::string how =
        !c.by_tprof() && !ops
            ? std::string("Record the CPU side with shapes (torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                          "ProfilerActivity.CUDA], record_shapes=True); this trace holds no op, and a GEMM the engine "
                          "calls from C++ outside PyTorch's ops gets no shapes either way)")
        : !c.by_tprof() ? "Record shapes (torch.profiler.profile(record_shapes=True))"
        : ops         ? "Record shapes (tprof::ProfilerOptions{.record_shapes = true})"
                      : std::string("Record the ops with their shapes (") +
                            (c.is_torch() ? "torch.profiler.profile(record_shapes=True)"
                                          : "tprof's capture API with .record_shapes = true") +
                            "; tprof record sees CUDA calls, not ops)";
    // Why the GEMMs have no shapes: shapes off, or on (ops carry Input
    // Dims) while the GEMMs replay inside CUDA graphs or are launched by
    // ops that record none (issue 38's eleventh round: "record shapes" on
    // three vLLM and graph-replay traces that had record_shapes on).
    const bool shapes_on = records_shapes(c);
    std::unordered_set<std::string_view> in_graphs;
    for (const DeviceOp& op : c.device) {
      if (op.launch != kNoIndex && is_graph_launch(c.name(op.launch))) in_graphs.insert(c.name(op.event));
    }
    std::int64_t listed_gemm_ns = 0, graph_gemm_ns = 0, tf32_ns = 0;
    for (const KernelEfficiency& k : eff.kernels) {
      if (k.cls != KernelClass::kGemm) continue;
      sat_acc(listed_gemm_ns, k.time_ns);
      if (in_graphs.count(k.name) != 0) sat_acc(graph_gemm_ns, k.time_ns);
      if (tf32_math(k.name)) sat_acc(tf32_ns, k.time_ns);
    }
    // GEMMs whose names say fp32 on TF32 tensor cores: what they run in is
    // known without shapes, and bf16 doubles the peak on half the bytes
    // (issue 38's eleventh round: an RTX 5080's graph replays, 76% of the
    // GPU time in cutlass s1688 GEMMs at 80-99% of the TF32 peak, were only
    // told to re-profile without graphs).
    const bool tf32 = c.is_torch() && listed_gemm_ns > 0 && sat_mul(2, tf32_ns) >= listed_gemm_ns;
    if (tf32) f.evidence.num("gemm_tf32_ns", tf32_ns);
    const std::string share = format_pct(100.0 * eff.share(KernelClass::kGemm));
    // Decode-sized GEMMs stream whole weights: bandwidth, not TFLOP/s. One
    // sentence with the action, which the default page prints whole.
    const bool vllm = runs_vllm(c);
    const std::string decode = !vllm ? std::string(".") :
        "; where a step decodes a few tokens per request, its GEMMs read whole weights for a few rows each and are "
        "bandwidth-bound: judge them by the weight bytes read per step against the HBM bandwidth, and the levers are "
        "more requests per step and lower-precision weights, not kernel tuning.";
    const std::string without_graphs =
        std::string(" a step without graphs (") +
        (vllm ? "enforce_eager=True" : "torch.compile's mode=\"default\" or the eager step, not the captured graph") +
        ") with record_shapes=True";
    if (listed_gemm_ns > 0 && graph_gemm_ns >= listed_gemm_ns - graph_gemm_ns) {
      const std::string what =
          "The GEMMs (" + share + " of the GPU time, " +
          format_pct(100.0 * static_cast<double>(graph_gemm_ns) / static_cast<double>(std::max<std::int64_t>(1, listed_gemm_ns))) +
          " of it replayed from CUDA graphs, whose kernels have no op to carry shapes" +
          (shapes_on ? ", though shapes were recorded" : std::string()) + ")";
      f.evidence.num("gemm_in_graphs_ns", graph_gemm_ns);
      if (tf32) {
        tf32_saving_ns = tf32_ns / 2;
        f.advice = what + " run fp32 inputs on TF32 tensor cores, as their names say (" +
                   format_pct(100.0 * static_cast<double>(tf32_ns) / static_cast<double>(listed_gemm_ns)) +
                   " of the GEMM time): where the model tolerates it, torch.autocast(\"cuda\", dtype=torch.bfloat16) "
                   "runs them on bf16 tensor cores, twice TF32's peak on half the bytes; to measure them against the "
                   "peak, profile" + without_graphs + decode;
      } else {
        // Where the GPU time goes first (the default page prints one
        // sentence): the kernels, then why their rate is unknown (issue 38's
        // twenty-second round: SGLang's DeepSeek-R1 decode on an H200, its
        // fused MoE kernel 27% of GPU time, read only "cannot be measured").
        const std::string names = top_kernels(eff).text;
        f.advice = (names.empty() ? std::string() : "Start at the kernels that hold the GPU time (" + names + "). ") +
                   what + " cannot be measured against the peak here: profile" + without_graphs + " to measure them" +
                   decode;
      }
    } else if (shapes_on) {
      f.advice = "The GEMMs (" + share + " of the GPU time) carry no shapes, though shapes were recorded (the ops that "
                 "launch them, custom or compiled, record no Input Dims): Nsight Compute on the largest gives its rate "
                 "and its limit" + decode;
    } else {
      f.advice = how + " so the GEMMs (" + share +
                 " of the GPU time) can be measured against the peak: without their shapes their TFLOP/s is unknown, "
                 "and with the host keeping the GPU fed, any speed-up is in them.";
    }
  } else {
    // No measured rate to judge by: name where the GPU time goes.
    const TopKernels tk = top_kernels(eff);
    const std::vector<std::string>& top = tk.names;
    const std::string& names = tk.text;
    const bool all_conv = tk.all_conv;
    f.evidence.texts("top_kernels", top);
    // A convolution library's kernels fuse with nothing: their time is the
    // algorithm the library chose (issue 38's eighth round: an MI300X
    // replay's two Winograd kernels of one 1x1 convolution_backward were
    // told to "fuse the memory-bound ones").
    const std::string then =
        all_conv && !top.empty()
            ? std::string(" to see whether each is limited by memory or math, and let the library search for a faster "
                          "algorithm for these shapes (") +
                  (c.is_hip() ? "MIOPEN_FIND_MODE=NORMAL, or MIOPEN_FIND_ENFORCE=SEARCH" : "torch.backends.cudnn.benchmark = True") +
                  ", or channels_last)"
            : std::string(" to see whether each is limited by memory or math, and fuse the memory-bound ones");
    f.advice = "Start at the kernels that hold the GPU time (" + names +
               "): profile them with " + std::string(c.is_hip() ? "rocprof (Omniperf)" : "Nsight Compute") + then +
               "; the host keeps the GPU fed, so speed-ups come from the kernels themselves.";
  }
  // The time it could save, not the state's size: the memory-bound kernels'
  // time it says to fuse (fusion can remove at most all of it); the GEMMs'
  // time above what their FLOPs take at the dense peak when they run below
  // half of it; nothing for an efficient GPU (good news) or an unmeasured
  // one. Other findings (memory_bound_elementwise, fp32_math) name their own
  // savings.
  if (memory_bound) {
    // Over the work the recording launched: what a step queued before it
    // began is another step's (issue 38's nineteenth round: a ResNet-50
    // step's "100.268 ms a step" held 1.9 iterations' kernels; its own were
    // 53.7 ms).
    f.impact_ns = sat_add(eff.own_class_ns[static_cast<std::size_t>(KernelClass::kElementwise)],
                          eff.own_class_ns[static_cast<std::size_t>(KernelClass::kReduction)]);
  } else if (bandwidth_bound && gemm.bw_gbps < eff.peak->hbm_gbps) {
    const double at_hbm = static_cast<double>(gemm.bw_time_ns) * gemm.bw_gbps / eff.peak->hbm_gbps;
    f.impact_ns = gemm.bw_time_ns - static_cast<std::int64_t>(at_hbm);
  } else if (!bandwidth_bound && gemm.peak_tflops > 0 && gemm.tflops > 0 && gemm.tflops < kEfficientGemm * gemm.peak_tflops) {
    const double at_peak = static_cast<double>(gemm.time_ns) * gemm.tflops / gemm.peak_tflops;
    f.impact_ns = gemm.time_ns - static_cast<std::int64_t>(at_peak);
  } else if (tf32_saving_ns > 0) {
    f.impact_ns = tf32_saving_ns;
  }
  f.evidence.num("saving_ns", f.impact_ns)
      .text("saving_basis", memory_bound       ? "memory-bound kernels' time (fusion)"
                            : tf32_saving_ns > 0 && f.impact_ns == tf32_saving_ns ? "half the TF32 GEMMs' time (bf16 autocast)"
                            : f.impact_ns > 0 && bandwidth_bound ? "bandwidth-bound GEMM time above the HBM ceiling"
                            : f.impact_ns > 0  ? "GEMM time above the dense peak"
                                               : "none: the state, not a saving");
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
