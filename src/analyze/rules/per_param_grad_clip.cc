// per_param_grad_clip: gradient clipping computes its norm one parameter at
// a time. torch.nn.utils.clip_grad_norm_ before torch 2.0 (and with
// foreach=False since) calls torch.norm on each parameter's gradient, then
// norms the stack of those norms, then scales each gradient in a second
// loop: two ops, a kernel each, per parameter tensor, every step. From
// torch 2.0 it uses the multi-tensor norm (torch._foreach_norm) and scales
// with _foreach_mul_ on CUDA tensors: a few launches for all of them.
// Origin: issue 38's fourteenth round (scoring half, after its figure): a
// BERT fp16 step of December 2020 on one GPU, 200 aten::norm a step in
// clip_grad_norm_, 120 ms of its 1.12 s with the GPU idle, unnamed beside
// the per-parameter AdamW.
//
// Precondition: device activity; on one host thread, a run of at least
// kMinNorms norms (aten::norm, aten::linalg_vector_norm) that are not inside
// another aten:: op, consecutive norms at most kMaxOpsBetween other
// outermost aten:: ops apart (the loop's detach and to), ended by an
// aten::stack within kMaxOpsBetween ops (the total norm: the clip's own
// shape, not a loop that logs norms), and not inside an Optimizer.step#
// scope (LAMB and LARS norm each parameter in their update:
// per_param_optimizer's). The clip's span runs from its first norm to the
// end of the scaling loop that follows (a run of aten::mul_ at least half as
// long, starting within kTailSearch ops), or to the stack's end without
// one. A warning when the GPU idles >= 5% of the window inside the spans.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A loop over parameters: a small model's handful of tensors is not worth a
// line, a transformer's or a ResNet's hundreds are.
constexpr std::size_t kMinNorms = 32;
// The per-parameter loop's own ops between two norms (detach, to, a view).
constexpr std::size_t kMaxOpsBetween = 4;
// Where the scaling loop may start after the stack: the total norm's ops
// (norm, add, reciprocal or div, mul, clamp, lt, is_nonzero).
constexpr std::size_t kTailSearch = 16;
constexpr double kWarningShare = 0.05;

bool is_norm(std::string_view n) { return n == "aten::norm" || n == "aten::linalg_vector_norm"; }

struct Clip {
  std::uint32_t lane;
  std::uint32_t first;  // the first norm
  std::int64_t start, end;
  std::size_t norms = 0, scales = 0;
  bool reads_back = false;  // a truth test or .item() between the norms and the scaling
  std::int64_t read_ns = 0;  // its time: the host waiting for the GPU's queue
};

}  // namespace

void rule_per_param_grad_clip(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const Trace& t = c.trace;
  // Outermost aten:: ops per thread, in order; Optimizer.step# scopes.
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> ops;
  std::unordered_map<std::uint32_t, std::int64_t> outer_end;
  struct Span {
    std::uint32_t lane;
    std::int64_t start, end;
  };
  std::vector<Span> optimizer;
  for (const std::uint32_t e : c.host_ops) {
    const std::string_view n = c.name(e);
    const std::uint32_t lane = t.events.lane[e];
    if (n.starts_with("Optimizer.step#")) optimizer.push_back({lane, c.ts(e), c.end(e)});
    if (c.kind(e) != EventKind::kCpuOp || !n.starts_with("aten::")) continue;
    auto [it, fresh] = outer_end.try_emplace(lane, INT64_MIN);
    if (c.ts(e) < it->second) continue;  // inside an aten:: op already listed
    it->second = c.end(e);
    ops[lane].push_back(e);
  }
  const auto in_optimizer = [&](std::uint32_t lane, std::int64_t ts) {
    return std::any_of(optimizer.begin(), optimizer.end(),
                       [&](const Span& s) { return s.lane == lane && s.start <= ts && ts < s.end; });
  };
  std::vector<Clip> clips;
  for (auto& [lane, list] : ops) {
    std::size_t i = 0;
    while (i < list.size()) {
      if (!is_norm(c.name(list[i]))) {
        ++i;
        continue;
      }
      // The run of norms from i: the next norm within kMaxOpsBetween ops.
      // The run ends at the stack of the norms (the total norm follows it).
      std::size_t last = i, norms = 1, stack = list.size();
      for (std::size_t j = i + 1; j < list.size() && j - last <= kMaxOpsBetween + 1; ++j) {
        const std::string_view n = c.name(list[j]);
        if (n == "aten::stack") {
          stack = j;
          break;
        }
        if (is_norm(n)) last = j, ++norms;
      }
      const std::size_t first = i;
      i = last + 1;
      if (stack == list.size() || norms < kMinNorms || in_optimizer(lane, c.ts(list[first]))) continue;
      Clip clip{lane, list[first], c.ts(list[first]), c.end(list[stack]), norms, 0, false};
      // The scaling loop: mul_ by mul_, the same shape as the norms' loop.
      std::size_t tail = list.size();
      for (std::size_t j = stack + 1; j < list.size() && j <= stack + kTailSearch; ++j) {
        const std::string_view n = c.name(list[j]);
        if (in_optimizer(lane, c.ts(list[j]))) break;
        if (n == "aten::mul_") {
          tail = j;
          break;
        }
        if (n == "aten::is_nonzero" || is_scalar_read(n)) {
          clip.reads_back = true;
          sat_acc(clip.read_ns, c.dur(list[j]));
        }
      }
      if (tail < list.size()) {
        std::size_t tail_last = tail, scales = 1;
        // One scaling per norm at most, and none inside the optimizer's step
        // that follows (its update multiplies too).
        for (std::size_t j = tail + 1;
             j < list.size() && j - tail_last <= kMaxOpsBetween + 1 && scales < norms && !in_optimizer(lane, c.ts(list[j]));
             ++j) {
          if (c.name(list[j]) == "aten::mul_") tail_last = j, ++scales;
        }
        if (2 * scales >= norms) {
          clip.scales = scales;
          clip.end = c.end(list[tail_last]);
          i = tail_last + 1;
        } else {
          clip.reads_back = false;  // not the clip's read: no scaling loop follows it
          clip.read_ns = 0;
        }
      } else {
        clip.reads_back = false;
        clip.read_ns = 0;
      }
      clips.push_back(clip);
    }
  }
  if (clips.empty()) return;
  std::sort(clips.begin(), clips.end(), [](const Clip& a, const Clip& b) { return a.start < b.start; });
  std::int64_t span_ns = 0, idle_ns = 0, read_ns = 0;
  std::size_t norms = 0, scales = 0, reads = 0;
  for (const Clip& k : clips) {
    sat_acc(span_ns, k.end - k.start);
    sat_acc(idle_ns, sat_sub(k.end - k.start, c.device_busy_ns(-1, k.start, k.end)));
    norms += k.norms;
    scales += k.scales;
    reads += k.reads_back ? 1 : 0;
    sat_acc(read_ns, k.read_ns);
  }
  const auto calls = static_cast<std::int64_t>(clips.size());
  const std::int64_t window = c.window_ns();
  Finding f;
  f.id = "per_param_grad_clip";
  f.severity = window > 0 && static_cast<double>(idle_ns) >= kWarningShare * static_cast<double>(window)
                   ? FindingSeverity::kWarning
                   : FindingSeverity::kInfo;
  const std::int64_t per_call = static_cast<std::int64_t>(norms) / calls;
  f.title = "Gradient clipping norms the gradients one parameter at a time: " + std::to_string(per_call) +
            " norms per clip (" + std::to_string(calls) + " clip" + (calls == 1 ? "" : "s") + "), " +
            format_ns(span_ns / calls) + " a clip on the host" +
            (read_ns > 0 ? " (" + format_ns(read_ns / calls) + " of it waiting for the GPU to read the total norm back)"
                         : std::string()) +
            ", the GPU idle " + format_ns(idle_ns / calls) + " of it";
  f.evidence.num("clips", calls)
      .num("norms", static_cast<std::int64_t>(norms))
      .num("norms_per_clip", per_call)
      .num("scales", static_cast<std::int64_t>(scales))
      .num("clip_ns", span_ns)
      .num("gpu_idle_in_clip_ns", idle_ns)
      .num("reads_back", static_cast<std::int64_t>(reads))
      .num("read_back_ns", read_ns);
  std::vector<EventRef> refs;
  for (std::size_t i = 0; i < clips.size() && i < 10; ++i) refs.push_back(c.ref(clips[i].first));
  f.evidence.events("first_norm", std::move(refs));
  f.advice = "Clip with the multi-tensor norm: torch.nn.utils.clip_grad_norm_(parameters, max_norm, foreach=True) "
             "(torch 2.0 and later, where it is the default for CUDA tensors) computes the " +
             std::to_string(per_call) + " norms and scales the gradients in a few launches; on an older torch, "
             "apex's apex.contrib.clip_grad.clip_grad_norm_ does the same with its multi-tensor kernels. Here each "
             "parameter costs a norm" + std::string(scales > 0 ? " and a scaling" : "") +
             " call on the host while the GPU idles " + format_ns(idle_ns / calls) + " of the " +
             format_ns(span_ns / calls) + " a clip takes" +
             (reads > 0 ? "; and the clip reads the total norm back to the host (`if clip_coef < 1`, a synchronize) "
                          "before it scales, which a newer torch's clamp on the device avoids."
                        : ".");
  f.impact_ns = idle_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
