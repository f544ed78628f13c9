// layout_conversion: NCHW <-> NHWC conversion kernels around convolutions.
// cuDNN's and MIOpen's fastest convolution kernels (tensor-core implicit
// GEMMs) work on NHWC tensors; a model in PyTorch's default NCHW layout pays
// a transpose of the input (and weights) before each such convolution and
// one of the output after it. With the model and its input in
// channels_last, the convolutions take the tensors as they are. Origin:
// issue 38, Why 5 (an expert's check on a CNN trace).
//
// Precondition: device activity; the layout kernels (by their own name:
// cuDNN's nchwToNhwcKernel / nhwcToNchwKernel, MIOpen's batched_transpose_*
// and transpose_NCHW2NHWC / NHWC2NCHW, which MIOpen launches around its NHWC
// convolution solvers) hold >= 5% of the compute kernels' time (device time
// less copies, memsets and collectives), at least 100 us over 3 instances,
// in the work the steps launched (the whole trace without steps); and the
// trace runs convolutions (a conv kernel by name, or a convolution op):
// a transpose without a convolution is some other layout change.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/rules/rules.h"
#include "src/causal/kernel_classes.h"

namespace tprof::internal {

namespace {

constexpr double kMinShare = 0.05;
constexpr std::int64_t kMinTimeNs = 100'000;
constexpr std::int64_t kMinCount = 3;
// Warning from 10% of the compute kernels' time.
constexpr double kWarningShare = 0.10;

// A layout conversion kernel of the convolution libraries: the
// kernel-class table's "layout conversions" family (cuDNN's nchwToNhwc /
// nhwcToNchw, MIOpen's batched_transpose).
bool is_layout_kernel(std::string_view name) {
  const KernelMatch m = match_kernel_name(name);
  return m.family != nullptr && m.family->family.starts_with("layout conversions");
}

// A convolution kernel by its own name: the table's convolution class
// (cuDNN's scudnn, implicit GEMM fprop/dgrad/wgrad, MIOpen's igemm_*).
bool is_conv_kernel_name(std::string_view name) { return match_kernel_name(name).cls == KernelClass::kConv; }

// The dimensionality of the convolution whose call launched a layout
// kernel: 1 or 3 where an enclosing op on the launching thread is
// aten::conv1d / conv_transpose1d (conv3d / conv_transpose3d), else 2 (a
// 2-D convolution or unknown). The walk back is bounded, as
// DiagnoseContext::enclosing_op's.
int conv_dims(const DiagnoseContext& c, std::uint32_t launch) {
  constexpr int kMaxWalk = 512;
  auto dims = [&](std::string_view name) {
    return name == "aten::conv1d" || name == "aten::conv_transpose1d"   ? 1
           : name == "aten::conv3d" || name == "aten::conv_transpose3d" ? 3
           : name == "aten::conv2d" || name == "aten::conv_transpose2d" ? 2
                                                                        : 0;
  };
  const std::uint32_t conv = c.innermost_enclosing(c.trace.events.lane[launch], c.ts(launch), c.end(launch), kMaxWalk,
                                                   [&](std::uint32_t e) {
                                                     return c.kind(e) == EventKind::kCpuOp && dims(c.name(e)) != 0;
                                                   });
  return conv == kNoIndex ? 2 : dims(c.name(conv));
}

}  // namespace

void rule_layout_conversion(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const bool has_steps = !c.steps.steps.empty();
  std::int64_t compute_ns = 0, kernel_ns = 0, layout_ns = 0, layout_count = 0;
  bool conv = false;
  std::vector<std::pair<std::string_view, std::int64_t>> by_name;
  // The conversions' time by the dimensionality of the convolution that
  // launched them (index 1, 2, 3).
  std::int64_t by_dims[4] = {0, 0, 0, 0};
  for (const DeviceOp& op : c.device) {
    if (op.cls != DeviceClass::kCompute && op.cls != DeviceClass::kComm) continue;
    // Work queued before the recording began is an earlier step's (issue
    // 38's nineteenth round: a ResNet-50 step's "339 conversions" held 128
    // of the step before it; its own were 211).
    if ((has_steps && op.step < 0) || op.before_recording) continue;
    const std::string_view n = c.name(op.event);
    const std::int64_t d = op.end - op.start;
    sat_acc(kernel_ns, d);  // collectives too: "of kernel time" means all of it
    if (op.cls != DeviceClass::kCompute) continue;
    sat_acc(compute_ns, d);
    if (!is_layout_kernel(n)) {
      conv = conv || is_conv_kernel_name(n);
      continue;
    }
    sat_acc(layout_ns, d);
    ++layout_count;
    sat_acc(by_dims[op.launch != kNoIndex ? conv_dims(c, op.launch) : 2], d);
    auto it = std::find_if(by_name.begin(), by_name.end(), [&](const auto& p) { return p.first == n; });
    if (it == by_name.end()) {
      by_name.emplace_back(n, d);
    } else {
      sat_acc(it->second, d);
    }
  }
  if (compute_ns <= 0 || layout_ns < kMinTimeNs || layout_count < kMinCount) return;
  const double share = static_cast<double>(layout_ns) / static_cast<double>(compute_ns);
  if (share < kMinShare) return;
  std::int64_t conv_ops = 0;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) == EventKind::kCpuOp && contains_ci(c.name(e), "convolution")) ++conv_ops;
  }
  if (!conv && conv_ops == 0) return;
  std::sort(by_name.begin(), by_name.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  const std::int64_t steps = has_steps ? static_cast<std::int64_t>(c.steps.steps.size()) : 0;

  Finding f;
  f.id = "layout_conversion";
  f.severity = share >= kWarningShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  // The share of all kernel time, and of the compute kernels' where
  // collectives hold some (the precondition's share: issue 38 review, a DDP
  // rank's "20.7% of kernel time" was 5.5% of it, 20.7% of compute).
  const double kernel_share = static_cast<double>(layout_ns) / static_cast<double>(std::max<std::int64_t>(1, kernel_ns));
  f.title = "NCHW <-> NHWC layout conversions around the convolutions: " + format_pct(100.0 * kernel_share) +
            " of kernel time" +
            (kernel_ns > compute_ns ? " (" + format_pct(100.0 * share) + " of the compute kernels, collectives aside)"
                                    : std::string()) +
            " (" + format_ns(layout_ns) + ", " + count_of(layout_count, "kernel") + ") in " +
            title_name(by_name.front().first);
  std::vector<std::string> kernels;
  for (std::size_t i = 0; i < by_name.size() && i < 3; ++i) kernels.emplace_back(by_name[i].first);
  f.evidence.real("layout_kernel_pct", 100.0 * share)
      .num("layout_ns", layout_ns)
      .num("layout_count", layout_count)
      .num("compute_kernel_ns", compute_ns)
      .num("kernel_ns", kernel_ns)
      .num("conv_ops", conv_ops)
      .texts("layout_kernels", kernels);
  const std::string what = count_of(layout_count, "conversion") + " (" + format_ns(layout_ns) +
                           (steps > 1 ? ", " + format_ns(layout_ns / steps) + " a step" : "") + ")";
  // channels_last is a 4-D layout: 1-D convolutions' 3-D tensors have none
  // (x.to(memory_format=torch.channels_last) raises on them), and 3-D
  // convolutions take channels_last_3d (issue 38's twenty-second round: a
  // diffusion policy's 1-D U-Net on an RTX 3090, 52 conversions inside its
  // conv1d calls, told to put the model in channels_last).
  const int dims = sat_mul(2, by_dims[1]) >= layout_ns ? 1 : sat_mul(2, by_dims[3]) >= layout_ns ? 3 : 2;
  if (dims != 2) f.evidence.num("conv_dims", dims);
  if (c.is_torch() && dims == 1) {
    f.advice = "Let cuDNN choose another algorithm for these 1-D convolutions (aten::conv1d: 3-D tensors, for which "
               "channels_last does not exist): torch.backends.cudnn.benchmark = True times the candidates, "
               "conversions included, for each shape; or run them as 2-D convolutions over (N, C, 1, L) (nn.Conv2d "
               "with a (1, k) kernel) with the model and input in channels_last. The " +
               what + " are cuDNN converting inside each call for the NHWC kernel it picked.";
  } else if (c.is_torch() && dims == 3) {
    f.advice = "Put the model and its input in channels_last_3d: model = "
               "model.to(memory_format=torch.channels_last_3d) and x = x.to(memory_format=torch.channels_last_3d); "
               "the " + what + " go.";
  } else if (c.is_torch()) {
    f.advice = "Put the model and its input in channels_last: model = model.to(memory_format=torch.channels_last) "
               "and x = x.to(memory_format=torch.channels_last); the " +
               what + " go.";
  } else {
    f.advice = "Keep the activations and filters in NHWC (cuDNN/MIOpen tensor descriptors with the NHWC format); "
               "the " +
               what + " go.";
  }
  if (dims != 1) f.advice += std::string(" ") + (c.is_hip() ? "MIOpen" : "cuDNN") +
              "'s fastest convolution kernels work on NHWC tensors: with NCHW tensors the library transposes the "
              "input before each convolution and the output after it.";
  f.impact_ns = layout_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
