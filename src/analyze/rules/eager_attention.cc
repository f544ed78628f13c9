// eager_attention: attention written out as matmul, softmax, matmul. The
// score matrix (sequence x sequence per head) is written by one GEMM, read
// and written again by the softmax and read by the next GEMM: at long
// sequences the softmax alone holds a third or more of the kernel time.
// torch.nn.functional.scaled_dot_product_attention (flash / memory-efficient
// kernels) computes the softmax on the fly in one fused kernel, and never
// writes the score matrix to memory. Origin: issue 38, Why 5 (an expert's
// first check on a transformer trace: "softmax >= 35% of kernel time").
//
// Precondition: device activity; softmax kernels (by their own name, not a
// log-softmax: that is a classifier's loss over the vocabulary, not
// attention) hold >= 35% of the compute kernels' time (device time less
// copies, memsets and collectives), at least 100 us over 3 instances, in
// the work the steps launched (the whole trace without steps); the trace
// has GEMM ops around them (aten::bmm, matmul, baddbmm, einsum: the two
// matmuls of attention); and no fused attention kernel runs (flash, fmha,
// SDPA, efficient attention): a model that already uses SDPA somewhere has
// its softmax elsewhere.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/rules/rules.h"
#include "src/causal/kernel_classes.h"

namespace tprof::internal {

namespace {

constexpr double kMinShare = 0.35;
constexpr std::int64_t kMinTimeNs = 100'000;
constexpr std::int64_t kMinCount = 3;
// What the fused kernel saves: the softmax's own pass over the score
// matrix (its read and write), at least; the GEMMs' writes of the scores
// and the scaling kernels go too, so this is the floor of the saving.
constexpr double kSavedFraction = 1.0;

// A softmax kernel: the kernel-class table's "softmax" family (cuDNN/ATen's
// cunn_SoftMaxForward, softmax_warp_forward, MIOpen's, Triton's fused
// "_softmax" reductions, and their backward: the gradient reads the score
// matrix again). A log-softmax is its own family (a loss), and a fused
// attention kernel that names its softmax is attention already.
bool is_softmax_kernel(std::string_view name) {
  const KernelMatch m = match_kernel_name(name);
  return m.family != nullptr && m.family->family == "softmax";
}

// A fused attention kernel: the table's attention class (FlashAttention,
// fmha, cuDNN SDPA, Triton attn_fwd, paged attention, FlashInfer).
bool is_fused_attention_kernel(std::string_view name) { return match_kernel_name(name).cls == KernelClass::kAttention; }

// The GEMM ops of attention written out: QK^T and PV.
bool is_attention_matmul_op(std::string_view name) {
  return name == "aten::bmm" || name == "aten::matmul" || name == "aten::baddbmm" || name == "aten::einsum";
}

}  // namespace

void rule_eager_attention(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const bool has_steps = !c.steps.steps.empty();
  std::int64_t compute_ns = 0, softmax_ns = 0, softmax_count = 0;
  std::vector<std::pair<std::string_view, std::int64_t>> by_name;  // softmax kernel -> time
  for (const DeviceOp& op : c.device) {
    if (op.cls != DeviceClass::kCompute) continue;
    const std::string_view n = c.name(op.event);
    if (is_fused_attention_kernel(n)) return;  // SDPA already runs
    if (has_steps && op.step < 0) continue;
    const std::int64_t d = op.end - op.start;
    sat_acc(compute_ns, d);
    if (!is_softmax_kernel(n)) continue;
    sat_acc(softmax_ns, d);
    ++softmax_count;
    auto it = std::find_if(by_name.begin(), by_name.end(), [&](const auto& p) { return p.first == n; });
    if (it == by_name.end()) {
      by_name.emplace_back(n, d);
    } else {
      sat_acc(it->second, d);
    }
  }
  if (compute_ns <= 0 || softmax_ns < kMinTimeNs || softmax_count < kMinCount) return;
  const double share = static_cast<double>(softmax_ns) / static_cast<double>(compute_ns);
  if (share < kMinShare) return;
  // The ops: softmax calls and the matmuls around them.
  std::int64_t softmax_ops = 0, matmul_ops = 0;
  std::vector<std::string> matmul_names;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    if (has_steps && c.step_index_at(c.ts(e)) < 0) continue;
    const std::string_view n = c.name(e);
    if (n == "aten::softmax") {
      ++softmax_ops;
    } else if (is_attention_matmul_op(n)) {
      ++matmul_ops;
      if (std::find(matmul_names.begin(), matmul_names.end(), n) == matmul_names.end()) matmul_names.emplace_back(n);
    }
  }
  // Without the matmul ops the softmax may be anything (a classifier head,
  // a gating network): no attention to fuse. A trace without ops (a
  // GPU-only trace) cannot show them either.
  if (matmul_ops == 0) return;
  std::sort(by_name.begin(), by_name.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  const std::int64_t steps = has_steps ? static_cast<std::int64_t>(c.steps.steps.size()) : 0;

  Finding f;
  f.id = "eager_attention";
  f.severity = FindingSeverity::kWarning;
  std::string ops_text;
  for (const std::string& m : matmul_names) ops_text += (ops_text.empty() ? "" : ", ") + m;
  f.title = "Eager attention: softmax kernels hold " + format_pct(100.0 * share) + " of kernel time (" +
            format_ns(softmax_ns) + ") between " + ops_text + ", no fused attention kernel";
  std::vector<std::string> kernels;
  for (std::size_t i = 0; i < by_name.size() && i < 3; ++i) kernels.emplace_back(by_name[i].first);
  f.evidence.real("softmax_kernel_pct", 100.0 * share)
      .num("softmax_ns", softmax_ns)
      .num("softmax_count", softmax_count)
      .num("compute_kernel_ns", compute_ns)
      .num("softmax_ops", softmax_ops)
      .num("matmul_ops", matmul_ops)
      .texts("matmul_op_names", matmul_names)
      .texts("softmax_kernels", kernels);
  f.advice = std::string("Compute attention with torch.nn.functional.scaled_dot_product_attention (Hugging Face: "
                         "attn_implementation=\"sdpa\" or \"flash_attention_2\") instead of ") +
             ops_text + " and softmax: " + count_of(softmax_count, "softmax kernel") + " (" + format_ns(softmax_ns) +
             (steps > 1 ? ", " + format_ns(softmax_ns / steps) + " a step" : "") +
             ") go into one fused kernel. Written out, attention stores the sequence x sequence score matrix in "
             "memory and reads it back in the softmax and the next matmul; the fused kernel keeps it on chip. Where "
             "the attention needs a mask or bias SDPA takes it as attn_mask.";
  f.impact_ns = static_cast<std::int64_t>(kSavedFraction * static_cast<double>(softmax_ns));
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
