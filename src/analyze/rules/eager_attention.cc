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
// attention) at least 100 us over 3 instances, in the work the steps
// launched (the whole trace without steps); the trace has GEMM ops around
// them (aten::bmm, matmul, baddbmm, einsum: the two matmuls of attention);
// no fused attention kernel runs (flash, fmha, SDPA, efficient attention):
// a model that already uses SDPA somewhere has its softmax elsewhere; and
// either the softmax kernels hold >= 35% of the compute kernels' time
// (device time less copies, memsets and collectives), or attention written
// out does, over 3 chains or more: on one thread a matmul op, then only
// elementwise, mask and view ops, an aten::softmax, the same again (a
// dropout), and the next matmul op; the kernels launched from the first
// matmul's start to the second's end are the chain's (issue 38, fifth
// round: bmm, div, softmax, bmm held 70% of a trace whose softmax alone
// held 16%).
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/analyze/rules/rules.h"
#include "src/causal/kernel_classes.h"
#include "src/causal/names.h"

namespace tprof::internal {

namespace {

constexpr double kMinShare = 0.35;
constexpr std::int64_t kMinTimeNs = 100'000;
constexpr std::int64_t kMinCount = 3;
// What the fused kernel saves: the softmax's own pass over the score
// matrix (its read and write), at least; the GEMMs' writes of the scores
// and the scaling kernels go too, so this is the floor of the saving.
constexpr double kSavedFraction = 1.0;
// How far a chain is looked for from its softmax, in ops of its thread
// either way: a chain's glue is a few ops and their views.
constexpr std::ptrdiff_t kMaxChainOps = 256;

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

bool is_softmax_op(std::string_view name) { return name == "aten::softmax" || name == "aten::_softmax"; }

// What sits between attention's matmuls and its softmax: scaling, the
// mask (made and applied), dtype casts, dropout, views and allocations.
// Anything else (a linear layer, a norm, top-k) is no attention chain: a
// router's linear, softmax, top-k is a gate.
bool is_attention_glue_op(std::string_view name) {
  if (is_view_op(name) || is_softmax_op(name)) return true;
  for (std::string_view k :
       {"aten::div", "aten::div_", "aten::mul", "aten::mul_", "aten::add", "aten::add_", "aten::sub", "aten::rsub",
        "aten::masked_fill", "aten::masked_fill_", "aten::where", "aten::to", "aten::_to_copy", "aten::type_as",
        "aten::float", "aten::half", "aten::bfloat16", "aten::copy_", "aten::clone", "aten::_unsafe_view",
        "aten::empty_like", "aten::new_empty", "aten::new_ones", "aten::new_zeros", "aten::new_full", "aten::zeros",
        "aten::ones", "aten::full", "aten::fill_", "aten::zero_", "aten::tril", "aten::triu", "aten::bitwise_not",
        "aten::logical_not", "aten::eq", "aten::ne", "aten::lt", "aten::gt", "aten::scalar_tensor",
        "aten::lift_fresh", "aten::dropout", "aten::native_dropout", "aten::feature_dropout", "aten::bernoulli_",
        "aten::exp", "aten::sqrt", "aten::rsqrt", "aten::neg", "aten::clamp", "aten::maximum"}) {
    if (name == k) return true;
  }
  return false;
}

// Attention written out, per thread: each (outermost) softmax op with a
// matmul op before and after it and only glue between; the time of the
// kernels launched from the first matmul's start to the second's end (the
// chain), and of those launched outside the two matmuls (the softmax, the
// scaling and the mask: what a fused kernel removes).
struct Chains {
  std::int64_t count = 0;
  std::int64_t ns = 0;
  std::int64_t outside_matmuls_ns = 0;
};

Chains attention_chains(const DiagnoseContext& c, bool has_steps) {
  Chains out;
  std::map<std::uint32_t, std::vector<std::uint32_t>> ops;  // lane -> its CPU ops, by start (the outer first)
  for (const std::uint32_t e : c.host_ops) {
    if (c.kind(e) == EventKind::kCpuOp) ops[c.trace.events.lane[e]].push_back(e);
  }
  // Kernels by lane of their launch: (launch ts, duration).
  std::map<std::uint32_t, std::vector<std::pair<std::int64_t, std::int64_t>>> launched;
  for (const DeviceOp& op : c.device) {
    if (op.cls != DeviceClass::kCompute || op.launch == kNoIndex || (has_steps && op.step < 0)) continue;
    launched[c.trace.events.lane[op.launch]].emplace_back(c.ts(op.launch), op.end - op.start);
  }
  for (auto& [lane, k] : launched) std::sort(k.begin(), k.end());
  auto kernels_ns = [&](std::uint32_t lane, std::int64_t lo, std::int64_t hi) {
    std::int64_t ns = 0;
    const auto at = launched.find(lane);
    if (at == launched.end()) return ns;
    const auto& k = at->second;
    for (auto it = std::lower_bound(k.begin(), k.end(), std::pair{lo, std::int64_t{0}});
         it != k.end() && it->first <= hi; ++it) {
      sat_acc(ns, it->second);
    }
    return ns;
  };
  for (auto& [lane, l] : ops) {
    std::stable_sort(l.begin(), l.end(), [&](std::uint32_t a, std::uint32_t b) {
      return c.ts(a) < c.ts(b) || (c.ts(a) == c.ts(b) && c.dur(a) > c.dur(b));
    });
    std::int64_t taken_until = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < l.size(); ++i) {
      const std::uint32_t s = l[i];
      if (!is_softmax_op(c.name(s)) || c.ts(s) < taken_until) continue;
      // Back: ops that start after the matmul's end are glue (and what
      // they enclose); the first op that ends by the softmax's start and is
      // no glue must be the matmul.
      std::ptrdiff_t m1 = -1;
      for (std::ptrdiff_t j = static_cast<std::ptrdiff_t>(i) - 1; j >= 0 && j >= static_cast<std::ptrdiff_t>(i) - kMaxChainOps; --j) {
        const std::uint32_t e = l[static_cast<std::size_t>(j)];
        if (c.end(e) > c.ts(s)) continue;  // encloses the softmax
        const std::string_view n = c.name(e);
        if (is_attention_matmul_op(n)) {
          m1 = j;
          break;
        }
        if (!is_attention_glue_op(n)) {
          // A glue op's own children need not be glue (inside a clone, a
          // copy_): skip what an already-seen glue op encloses.
          bool inside = false;
          for (std::size_t q = static_cast<std::size_t>(j) + 1; q < i && !inside; ++q) {
            const std::uint32_t g = l[q];
            inside = c.ts(g) <= c.ts(e) && c.end(e) <= c.end(g) && is_attention_glue_op(c.name(g));
          }
          if (!inside) break;
        }
      }
      if (m1 < 0) continue;
      // Forward: glue until the next matmul op, outermost ops only.
      std::int64_t last_end = c.end(s);
      std::uint32_t m2 = kNoIndex;
      for (std::size_t j = i + 1; j < l.size() && j <= i + static_cast<std::size_t>(kMaxChainOps); ++j) {
        const std::uint32_t e = l[j];
        if (c.ts(e) < last_end) continue;  // inside the softmax or a glue op
        const std::string_view n = c.name(e);
        if (is_attention_matmul_op(n)) {
          m2 = e;
          break;
        }
        if (!is_attention_glue_op(n)) break;
        last_end = std::max(last_end, c.end(e));
      }
      if (m2 == kNoIndex) continue;
      const std::uint32_t first = l[static_cast<std::size_t>(m1)];
      const std::int64_t chain = kernels_ns(lane, c.ts(first), c.end(m2));
      const std::int64_t matmuls = sat_add(kernels_ns(lane, c.ts(first), c.end(first)), kernels_ns(lane, c.ts(m2), c.end(m2)));
      ++out.count;
      sat_acc(out.ns, chain);
      sat_acc(out.outside_matmuls_ns, std::max<std::int64_t>(0, chain - matmuls));
      taken_until = c.end(m2);
    }
  }
  return out;
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
  const Chains chains = attention_chains(c, has_steps);
  const double chain_share = static_cast<double>(chains.ns) / static_cast<double>(compute_ns);
  const bool by_chain = share < kMinShare;
  if (by_chain && (chains.count < kMinCount || chain_share < kMinShare)) return;
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
  if (by_chain) {
    f.title = "Eager attention: " + ops_text + ", softmax and " + ops_text + " written out hold " +
              format_pct(100.0 * chain_share) + " of kernel time (" + format_ns(chains.ns) + "; the softmax " +
              format_pct(100.0 * share) + "), no fused attention kernel";
  } else {
    f.title = "Eager attention: softmax kernels hold " + format_pct(100.0 * share) + " of kernel time (" +
              format_ns(softmax_ns) + ") between " + ops_text + ", no fused attention kernel";
  }
  std::vector<std::string> kernels;
  for (std::size_t i = 0; i < by_name.size() && i < 3; ++i) kernels.emplace_back(by_name[i].first);
  f.evidence.real("softmax_kernel_pct", 100.0 * share)
      .num("softmax_ns", softmax_ns)
      .num("softmax_count", softmax_count)
      .num("compute_kernel_ns", compute_ns)
      .num("softmax_ops", softmax_ops)
      .num("matmul_ops", matmul_ops)
      .texts("matmul_op_names", matmul_names)
      .texts("softmax_kernels", kernels)
      .num("attention_chains", chains.count)
      .num("attention_chain_ns", chains.ns)
      .real("attention_chain_pct", 100.0 * chain_share)
      .num("attention_chain_outside_matmuls_ns", chains.outside_matmuls_ns);
  f.advice = std::string("Compute attention with torch.nn.functional.scaled_dot_product_attention (Hugging Face: "
                         "attn_implementation=\"sdpa\" or \"flash_attention_2\") instead of ") +
             ops_text + " and softmax: " + count_of(softmax_count, "softmax kernel") + " (" + format_ns(softmax_ns) +
             (steps > 1 ? ", " + format_ns(softmax_ns / steps) + " a step" : "") +
             ") go into one fused kernel. Written out, attention stores the sequence x sequence score matrix in "
             "memory and reads it back in the softmax and the next matmul; the fused kernel keeps it on chip. Where "
             "the attention needs a mask or bias SDPA takes it as attn_mask.";
  // The floor of the saving: the softmax's pass; where the chains show
  // more launched outside their matmuls (the scaling, the mask), that.
  f.impact_ns = std::max(static_cast<std::int64_t>(kSavedFraction * static_cast<double>(softmax_ns)),
                         chains.outside_matmuls_ns);
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
