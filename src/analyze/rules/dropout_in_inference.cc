// dropout_in_inference: dropout that draws its mask in a forward-only pass.
// In eval mode nn.Dropout is the identity (aten::dropout returns its input
// and calls nothing); an aten::bernoulli_, aten::native_dropout or
// aten::_fused_dropout call means the module is in training mode. In a trace
// with no backward (no autograd backward op, "*Backward*" or
// "autograd::engine::evaluate_function", and no optimizer step) that is
// inference with model.eval() never called: the output is randomly masked
// (wrong) as well as slower. Origin: issue 38 review, tuning trace 08: ParT's
// forward on the CPU spends 693 ms (15.8% of self time) in aten::bernoulli_.
// A forward-only benchmark of training mode (PARAM's alexnet) looks the
// same, so the fix is conditional.
// Precondition: the trace records CPU ops, none of them backward; the
// outermost dropout calls that draw a mask take >= 1% of the window and
// >= 100 µs. Warning from 5% of the window, else info; impact: their time
// (eval mode removes it).
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

constexpr double kMinShare = 0.01;
constexpr double kWarningShare = 0.05;
constexpr std::int64_t kMinNs = 100'000;

// The ops that draw a dropout mask (training mode): the one under
// aten::dropout, or the fused CUDA form.
bool draws_mask(std::string_view n) {
  return n == "aten::bernoulli_" || n == "aten::native_dropout" || n == "aten::_fused_dropout" ||
         n == "aten::fused_dropout";
}

bool is_dropout_scope(std::string_view n) {
  return n == "aten::dropout" || n == "aten::feature_dropout" || n == "aten::alpha_dropout" ||
         n == "aten::feature_alpha_dropout";
}

}  // namespace

void rule_dropout_in_inference(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.forward_only()) return;
  const Trace& t = c.trace;
  std::int64_t masks = 0, ns = 0, scopes = 0, cpu_ops = 0;
  std::vector<std::int64_t> open_end(t.lanes.size(), INT64_MIN);  // the outermost dropout call's end per lane
  std::vector<std::uint32_t> open(t.lanes.size(), kNoIndex);
  std::uint32_t longest = kNoIndex;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    ++cpu_ops;
    const std::string_view n = c.name(e);
    const bool scope = is_dropout_scope(n);
    if (!scope && !draws_mask(n)) continue;
    const std::uint32_t lane = t.events.lane[e];
    if (c.ts(e) < open_end[lane]) {  // inside a dropout call already counted or pending
      if (draws_mask(n) && open[lane] != kNoIndex) {
        // The scope around it draws a mask: count the scope's time once.
        ++masks;
        sat_acc(ns, c.dur(open[lane]));
        if (longest == kNoIndex || c.dur(open[lane]) > c.dur(longest)) longest = open[lane];
        open[lane] = kNoIndex;
      }
      continue;
    }
    open_end[lane] = c.end(e);
    if (scope) {
      ++scopes;
      open[lane] = e;  // counted once a mask is drawn inside it
    } else {
      // A mask outside a dropout call: aten::bernoulli_ there is sampling,
      // not dropout; native_dropout and _fused_dropout are dropout itself.
      if (n == "aten::bernoulli_") {
        open_end[lane] = INT64_MIN;
        continue;
      }
      open[lane] = kNoIndex;
      ++masks;
      sat_acc(ns, c.dur(e));
      if (longest == kNoIndex || c.dur(e) > c.dur(longest)) longest = e;
    }
  }
  if (masks == 0 || cpu_ops == 0) return;
  const std::int64_t window = c.window_ns();
  if (window <= 0 || ns < kMinNs || static_cast<double>(ns) < kMinShare * static_cast<double>(window)) return;
  const double share = static_cast<double>(ns) / static_cast<double>(window);
  Finding f;
  f.id = "dropout_in_inference";
  f.severity = share >= kWarningShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = "Dropout draws a random mask in a forward-only pass: " + std::to_string(masks) + " call" +
            (masks == 1 ? "" : "s") + ", " + format_ns(ns) + " (" + format_pct(100.0 * share) + " of the " +
            (c.steps.steps.empty() ? "trace" : "steps") + "), and no backward in the trace";
  f.evidence.num("mask_calls", masks)
      .num("dropout_ns", ns)
      .num("dropout_scopes", scopes)
      .num("window_ns", window)
      .real("dropout_pct", 100.0 * share)
      .event("longest", c.ref(longest));
  f.advice = "If this is inference, call model.eval() (and run it under torch.inference_mode()): in eval mode "
             "dropout is the identity, so these " + format_ns(ns) +
             " go, and the outputs stop being randomly masked. A forward-only benchmark of training mode is the "
             "one case where the mask belongs.";
  f.impact_ns = ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
