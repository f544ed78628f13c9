// per_param_optimizer: the optimizer launches its update parameter by
// parameter. A for-loop optimizer (torch's default before 2.0, foreach=False
// since) launches a few small elementwise kernels per parameter tensor
// (add_, mul_, addcmul_, lerp_, sqrt, div...): hundreds a step for a ResNet
// or a transformer, each a launch call on the host and a few microseconds
// of mostly fixed cost on the GPU. The multi-tensor (foreach) optimizer
// updates a list of tensors per launch (multi_tensor_apply), the fused one
// the whole update in one kernel. Origin: issue 38, Why 5.
//
// Precondition: device activity; `Optimizer.step#...` scopes (torch's
// record_function around every optimizer.step) whose calls launch >= 100
// kernels each on average (>= 32 where the calls hold 5% of the window or
// more on the host), none of them a multi-tensor or fused kernel
// (multi_tensor_apply, fused_adam, FusedAdam, fused_sgd...): those already
// batch the update, and the hundreds of add_ ops of a fused optimizer's
// step counters run on the CPU, launching nothing.
#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/analyze/rules/cpu_thread_stall.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// An optimizer's own stalls: 10 long calls or more (a GAN's two Adam
// steps: 26 calls of 7.7-7.95 ms where the same ops take 2 ms in the last).
constexpr std::size_t kMinStalledOptimizerCalls = 10;
// "Hundreds per step": 100 kernels per optimizer.step call on average.
constexpr std::int64_t kMinKernelsPerCall = 100;
// Fewer, from this many a call, where the calls hold at least
// kWarningShare of the window on the host: a small model's loop that
// still costs the step (issue 38's seventh round: TorchRec DLRM's Adagrad,
// 64 kernels for 16 tensors, 1.4 ms of a 14.5 ms step).
constexpr std::int64_t kMinKernelsPerCallWhenLong = 32;
// Warning when the GPU idles in the calls >= 5% of the window, or their
// kernels take >= 5% of it.
constexpr double kWarningShare = 0.05;

bool is_optimizer_step(std::string_view name) { return name.starts_with("Optimizer.step#"); }

// A kernel that updates many tensors at once: torch's foreach kernels
// (multi_tensor_apply_kernel), fused Adam/AdamW/SGD (fused_adam, FusedAdam,
// fused_sgd), apex's multi_tensor kernels.
bool is_batched_update_kernel(std::string_view name) {
  return contains_ci(name, "multi_tensor") || contains_ci(name, "fused_adam") || contains_ci(name, "fusedadam") ||
         contains_ci(name, "fused_sgd") || contains_ci(name, "_fused_") || contains_ci(name, "foreach");
}

// "SGD" from "Optimizer.step#SGD.step".
std::string optimizer_name(std::string_view scope) {
  std::string_view n = scope.substr(std::string_view("Optimizer.step#").size());
  if (const std::size_t dot = n.find('.'); dot != std::string_view::npos) n = n.substr(0, dot);
  return std::string(n);
}

struct Span {
  std::int64_t start, end;
  std::uint32_t lane, event;
};

// The advice's first clause: torch.optim's multi-tensor or fused form, or
// the foreach ops for a class of the program's own.
std::string use_batched(const std::string& opt, bool cpu) {
  const bool adam = contains_ci(opt, "adam");
  // torch.optim's own classes take foreach=; a class of the program's own
  // (CustomAdam, issue 38 fifth round) does not: torch.optim.CustomAdam is no API.
  static constexpr std::string_view kTorchOptim[] = {"Adam",    "AdamW", "SGD",   "RMSprop", "Adagrad", "Adadelta",
                                                     "Adamax",  "NAdam", "RAdam", "ASGD",    "Rprop",   "SparseAdam",
                                                     "Adafactor"};
  const bool torch_optim = std::find(std::begin(kTorchOptim), std::end(kTorchOptim), opt) != std::end(kTorchOptim);
  const bool fused = adam || opt == "SGD";
  return torch_optim ? "Use the multi-tensor optimizer: torch.optim." + opt + "(..., foreach=True)" +
                           (fused ? std::string(", or fused=True") + (cpu ? " (on the CPU from torch 2.4)" : "")
                                  : std::string()) +
                           " (torch before 1.12: torch.optim._multi_tensor." + opt + ")"
                     : opt + " is not one of torch.optim's optimizers: write its update with the multi-tensor ops "
                             "(torch._foreach_mul_, _foreach_addcmul_, _foreach_sqrt, ... over the parameter list), or, "
                             "if it is " + (adam ? std::string("Adam") : std::string("a standard update")) + ", use " +
                             (adam ? std::string("torch.optim.Adam(..., fused=True)")
                                   : std::string("its torch.optim class with foreach=True"));
}

// On a CPU-only trace the loop shows as ops, not kernels: the outermost ops
// inside each optimizer.step, a handful per parameter (add_, mul_, lerp_,
// addcmul_, sqrt, div, item), and the Python between them (issue 38's
// eighth round: a VAE's single-tensor Adam, 90 ops for 10 tensors, 32% of
// each step on the CPU). The kernels' thresholds, counted in ops; none of
// the ops a foreach or fused one. The saving: the calls' time outside
// their ops, the per-parameter Python loop that the batched forms remove.
void on_the_cpu(const DiagnoseContext& c, const std::vector<Span>& spans, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  std::int64_t ops = 0, ops_ns = 0, span_ns = 0;
  std::unordered_map<std::string_view, std::int64_t> by_name, last_by_name;
  std::vector<std::int64_t> loop_ns;  // per call: its time outside its ops
  std::vector<std::uint32_t> inside;  // every CPU op inside the calls, nested ones too: the stall test's
  for (const Span& s : spans) {
    sat_acc(span_ns, s.end - s.start);
    std::int64_t call_ops_ns = 0;
    last_by_name.clear();
    auto it = std::lower_bound(c.host_ops.begin(), c.host_ops.end(), s.start,
                               [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
    std::int64_t outer_end = INT64_MIN;
    for (; it != c.host_ops.end() && c.ts(*it) < s.end; ++it) {
      const std::uint32_t e = *it;
      if (e == s.event || t.events.lane[e] != s.lane || c.kind(e) != EventKind::kCpuOp || c.end(e) > s.end) continue;
      inside.push_back(e);
      if (is_optimizer_step(c.name(e))) continue;  // the scope's Operator copy
      if (c.ts(e) < outer_end) continue;           // inside an op already counted
      outer_end = c.end(e);
      const std::string_view n = c.name(e);
      if (n.find("_foreach_") != std::string_view::npos || n.find("_fused_") != std::string_view::npos) return;
      ++ops;
      sat_acc(ops_ns, c.dur(e));
      sat_acc(call_ops_ns, c.dur(e));
      ++by_name[n];
      ++last_by_name[n];
    }
    loop_ns.push_back(std::max<std::int64_t>(0, sat_sub(sat_sub(s.end, s.start), call_ops_ns)));
  }
  const auto calls = static_cast<std::int64_t>(spans.size());
  const std::int64_t window = c.window_ns();
  const bool long_calls = window > 0 && static_cast<double>(span_ns) >= kWarningShare * static_cast<double>(window);
  if (ops < kMinKernelsPerCall * calls && !(long_calls && ops >= kMinKernelsPerCallWhenLong * calls)) return;
  // A fused optimizer (apex's or DeepSpeed's FusedAdam) whose kernels were
  // not recorded leaves only its step counters on the CPU, one add_ per
  // tensor (HTA's non-GPU rank: 257 of 259 ops): no per-parameter math.
  const std::string opt_name = optimizer_name(c.name(spans.front().event));
  if (contains_ci(opt_name, "fused")) return;
  const auto adds = by_name.find("aten::add_");
  if (adds != by_name.end() && 10 * adds->second >= 9 * ops) return;
  // The op mix of the last call: the first one also creates the state
  // (momentum buffers: a clone and a detach per parameter), which no later
  // call repeats (issue 38's thirteenth round: "aten::clone x11" per step
  // of an SGD whose later steps clone nothing).
  std::vector<std::pair<std::string_view, std::int64_t>> top(last_by_name.begin(), last_by_name.end());
  std::sort(top.begin(), top.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  std::string names;
  for (std::size_t i = 0; i < top.size() && i < 4; ++i) {
    names += (i ? ", " : "") + std::string(top[i].first) + " x" + std::to_string(top[i].second);
  }
  const std::string& opt = opt_name;
  std::int64_t python_ns = std::max<std::int64_t>(0, span_ns - ops_ns);
  // The saving is the loop's time in a typical call: a first call whose
  // loop takes 3x the later ones' also creates the state and warms up
  // (the same pipeline rank: 16.1 of an "up to 18.7 ms" in the first of
  // three calls), which the batched forms do not remove.
  std::int64_t first_extra_ns = 0;
  if (loop_ns.size() >= 2) {
    const std::int64_t later = mean_median(std::vector<std::int64_t>(loop_ns.begin() + 1, loop_ns.end()));
    if (loop_ns.front() > sat_mul(std::max<std::int64_t>(1, later), 3)) {
      first_extra_ns = loop_ns.front() - later;
      python_ns = sat_mul(later, calls);
    }
  }
  const bool costly = window > 0 && static_cast<double>(python_ns) >= kWarningShare * static_cast<double>(window);
  Finding f;
  f.id = "per_param_optimizer";
  // A warning when the loop the fix removes costs the run, not the math.
  f.severity = costly ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  // A device the trace does not record (Apple MPS, a GPU recorded without
  // its device side) runs the ops: no "on the CPU" (issue 38's fifteenth
  // round: an MoE trained on a Mac).
  const bool unrecorded_device = gpu_work_issued(c).any();
  f.title = "The " + opt + " optimizer updates parameter by parameter" +
            (unrecorded_device ? std::string(" (its device side not recorded)") : std::string(" on the CPU")) + ": " +
            std::to_string(ops / calls) +
            " ops per optimizer.step (" + names + ", ...), " + format_ns(span_ns / calls) + " a call" +
            (window > 0 ? ", " + format_pct(100.0 * static_cast<double>(span_ns) / static_cast<double>(window)) +
                              " of the " + (c.steps.steps.empty() ? "trace" : "steps")
                        : std::string()) +
            ", no multi-tensor op";
  f.evidence.num("optimizer_steps", calls)
      .num("ops", ops)
      .num("ops_per_step", ops / calls)
      .num("ops_ns", ops_ns)
      .num("optimizer_step_ns", span_ns)
      .num("python_between_ops_ns", python_ns)
      .num("first_call_extra_ns", first_extra_ns)
      .text("top_op", top.empty() ? std::string() : std::string(top.front().first));
  // Its ops' time that is thread stalls (cpu_thread_stall): no batched
  // form removes it, so it is not the loop's cost (issue 38's twenty-fourth
  // round: a VAE's Adam step, 148 ms a call of which 146 ms stalled sqrt,
  // add_ and mul_ calls, ranked first as "use the multi-tensor optimizer").
  // The optimizer's own ops are tested, whatever the rest of the program
  // does (a GAN's Adam steps: 151 of 785 ops at 7.9 ms, its convolutions'
  // long calls no tick's multiple).
  std::int64_t stalled_ns = 0;
  if (!unrecorded_device && cpu_only_program(c)) {
    stalled_ns = stalls_among(c, inside, kMinStalledOptimizerCalls).stalled_ns;
    // Where the whole program stalls, its tick is known and the
    // optimizer's own calls on it need no witnesses of their own (issue
    // 38's twenty-fifth round: an LSTM's Adadelta, 22.7 ms a call, nearly
    // all of it a few stalled sqrt_ calls, too few to test alone).
    if (stalled_ns == 0) {
      if (const ThreadStalls p = thread_stalls(c); p.found()) stalled_ns = stalled_ns_at(c, inside, p.tick_ns);
    }
  }
  const bool mostly_stalled = sat_mul(2, stalled_ns) >= ops_ns && stalled_ns > 0;
  if (mostly_stalled) f.evidence.num("stalled_ns", stalled_ns).text("nothing_to_act_on", "stalls");
  // On the CPU a foreach op loops over its tensors inside (issue 38's
  // twenty-fifth round: "its 115 ops per step become a few" rejected for an
  // Adadelta on the CPU, where foreach=True makes the calls fewer, not the
  // per-tensor work).
  f.advice = use_batched(opt, /*cpu=*/!unrecorded_device) + "; its " + std::to_string(ops / calls) +
             (unrecorded_device ? std::string(" ops per step become a few")
                                : std::string(" ops a step, each called from Python, become one call per kind of op "
                                              "(on the CPU a foreach op still goes over the tensors one by one inside "
                                              "it)")) +
             ". Of the " + format_ns(span_ns / calls) + " each optimizer.step takes, " +
             format_ns(python_ns / calls) + " is the Python loop between the ops, which the batched forms remove; " +
             (mostly_stalled ? format_ns(stalled_ns / calls) +
                                   " is its ops stalled for whole scheduler ticks (more threads than free cores), which "
                                   "they do not remove: fix the threads first."
                             : std::string("the ops' own math stays.")) +
             (first_extra_ns > 0 ? " The first call's loop takes " + format_ns(first_extra_ns) +
                                       " more (it creates the optimizer's state), once."
                                 : std::string());
  f.impact_ns = python_ns;
  out->push_back(std::move(f));
}

}  // namespace

void rule_per_param_optimizer(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  std::vector<Span> spans;
  for (std::uint32_t e : c.host_ops) {
    const EventKind k = c.kind(e);
    if ((k == EventKind::kUserAnnotation || k == EventKind::kCpuOp) && is_optimizer_step(c.name(e))) {
      // A scope recorded twice (an Operator and its user_annotation copy)
      // counts once.
      if (!spans.empty() && spans.back().start == c.ts(e) && spans.back().lane == t.events.lane[e]) continue;
      spans.push_back({c.ts(e), c.end(e), t.events.lane[e], e});
    }
  }
  if (spans.empty()) return;
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  if (!c.has_device()) {
    on_the_cpu(c, spans, out);
    return;
  }
  auto span_of = [&](std::uint32_t launch) -> const Span* {
    const std::int64_t ts = c.ts(launch);
    auto it = std::upper_bound(spans.begin(), spans.end(), ts, [](std::int64_t v, const Span& s) { return v < s.start; });
    // Scopes on other threads may start in between: look a few back.
    for (int k = 0; k < 8 && it != spans.begin(); ++k) {
      --it;
      if (ts < it->end && it->lane == t.events.lane[launch]) return &*it;
    }
    return nullptr;
  };
  std::int64_t kernels = 0, kernel_ns = 0, launch_ns = 0;
  std::unordered_map<std::string_view, std::int64_t> by_name;
  std::vector<std::uint32_t> launches;
  for (const DeviceOp& op : c.device) {
    if (op.cls != DeviceClass::kCompute || op.launch == kNoIndex) continue;
    if (span_of(op.launch) == nullptr) continue;
    const std::string_view n = c.name(op.event);
    if (is_batched_update_kernel(n)) return;  // foreach / fused already
    ++kernels;
    sat_acc(kernel_ns, op.end - op.start);
    ++by_name[n];
    launches.push_back(op.launch);
  }
  const auto calls = static_cast<std::int64_t>(spans.size());
  if (kernels < kMinKernelsPerCallWhenLong * calls) return;
  // The GPU idle inside the calls: what fewer launches give back to the GPU.
  std::int64_t span_ns = 0, idle_ns = 0;
  for (const Span& s : spans) {
    sat_acc(span_ns, s.end - s.start);
    sat_acc(idle_ns, (s.end - s.start) - c.device_busy_ns(-1, s.start, s.end));
  }
  const std::int64_t window = c.window_ns();
  const bool long_calls = window > 0 && static_cast<double>(span_ns) >= kWarningShare * static_cast<double>(window);
  if (kernels < kMinKernelsPerCall * calls && !long_calls) return;
  std::sort(launches.begin(), launches.end());
  launches.erase(std::unique(launches.begin(), launches.end()), launches.end());
  for (std::uint32_t l : launches) sat_acc(launch_ns, c.dur(l));
  std::string top;
  std::int64_t top_n = 0;
  for (const auto& [n, k] : by_name) {
    if (k > top_n || (k == top_n && n < top)) top = std::string(n), top_n = k;
  }
  const std::string opt = optimizer_name(c.name(spans.front().event));

  Finding f;
  f.id = "per_param_optimizer";
  f.severity = window > 0 && (static_cast<double>(idle_ns) >= kWarningShare * static_cast<double>(window) ||
                              static_cast<double>(kernel_ns) >= kWarningShare * static_cast<double>(window))
                   ? FindingSeverity::kWarning
                   : FindingSeverity::kInfo;
  f.title = "The " + opt + " optimizer updates parameter by parameter: " + std::to_string(kernels / calls) +
            " kernels per optimizer.step (" + format_ns(kernel_ns / calls) + " of GPU time, " +
            format_ns(launch_ns / calls) + " of launch calls), no multi-tensor kernel";
  f.evidence.num("optimizer_steps", calls)
      .num("kernels", kernels)
      .num("kernels_per_step", kernels / calls)
      .num("kernel_ns", kernel_ns)
      .num("launch_call_ns", launch_ns)
      .num("optimizer_step_ns", span_ns)
      .num("gpu_idle_in_step_ns", idle_ns)
      .text("top_kernel", top)
      .num("top_kernel_count", top_n);
  const std::string use = use_batched(opt, /*cpu=*/false);
  f.advice = use + "; its " + std::to_string(kernels / calls) + " launches per step become a few. Each per-parameter " +
             "kernel costs a launch call (" + format_ns(launch_ns / std::max<std::int64_t>(1, kernels)) +
             " each here) and a few microseconds of fixed cost on the GPU; the GPU idles " + format_ns(idle_ns / calls) +
             " of the " + format_ns(span_ns / calls) + " optimizer.step takes on the host.";
  // The saving: the GPU idle inside the calls (the host launching them);
  // the kernels' own time shrinks too, but by how much the trace cannot say.
  f.impact_ns = idle_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
