// train_mode_in_inference: a model left in training mode in a forward-only
// pass: dropout that draws its mask, batch norm that normalises with the
// batch's statistics and overwrites its running ones.
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
// Batch norm in training mode (issue 38's fourth round: three CNN inference
// traces, the expert's first remark): aten::batch_norm's `training` argument
// True (Concrete Inputs, with record_shapes), cuDNN's training kernels
// (bn_fw_tr_*), PyTorch's batch_norm_collect_statistics kernels or MIOpen's
// forward-training ones, or the num_batches_tracked update nn.BatchNorm makes
// in training mode: an aten::add_ (torch 1.10: an aten::add of a 0-dim long
// tensor) just before each aten::batch_norm, with no op between them. In eval mode batch norm uses its running statistics: the
// outputs stop depending on the batch and the running stats stop changing.
// Precondition: the trace records CPU ops, none of them backward (or a
// device activity named backward: DiagnoseContext::forward_only); a dropout
// call draws a mask (at any cost: the outputs are wrong for inference), or
// a batch norm call runs in training mode. Warning from 5% of the window in
// dropout, or with batch norm, else info; impact: the dropout calls' time,
// the num_batches_tracked updates' and, for batch norm on the CPU, half of
// its time (the statistics pass eval mode skips); on the GPU, what the
// replay saves with its training kernels at two thirds of their time.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"
#include "src/trace/json_value.h"

namespace tprof::internal {

namespace {

constexpr double kWarningShare = 0.05;
// A batch norm call past this many times its shape's median is stalled by
// the host (the hotspot's spread factor).
constexpr std::int64_t kStallFactor = 5;

// The ops that draw a dropout mask (training mode): the one under
// aten::dropout, or the fused CUDA form.
bool draws_mask(std::string_view n) {
  return n == "aten::bernoulli_" || n == "aten::native_dropout" || n == "aten::_fused_dropout" ||
         n == "aten::fused_dropout";
}

// Kernels that compute a batch's statistics: batch norm in training mode
// (cuDNN's, PyTorch's own, MIOpen's), by a part of their name.
constexpr std::string_view kBnTrainKernels[] = {"bn_fw_tr", "batch_norm_collect_statistics", "BatchNormFwdTrain"};

bool is_bn_train_kernel(std::string_view n) {
  return std::any_of(std::begin(kBnTrainKernels), std::end(kBnTrainKernels),
                     [&](std::string_view k) { return n.find(k) != std::string_view::npos; });
}

// The whatif edit that runs those kernels at `factor` of their time.
std::string bn_train_kernels_scaled(std::string_view factor) {
  std::string edit = "scale:";
  for (std::string_view k : kBnTrainKernels) edit += std::string(edit.size() > 6 ? "|" : "") + std::string(k);
  return edit + "=" + std::string(factor);
}

bool is_dropout_scope(std::string_view n) {
  return n == "aten::dropout" || n == "aten::feature_dropout" || n == "aten::alpha_dropout" ||
         n == "aten::feature_alpha_dropout";
}

// Item `i` of an op's "Concrete Inputs" (a string), "" when not recorded.
std::string concrete_input(const DiagnoseContext& c, std::uint32_t e, std::size_t i) {
  const std::string_view json = c.trace.args_json(e);
  if (json.find("Concrete Inputs") == std::string_view::npos) return {};
  const Result<JsonValue> parsed = JsonValue::parse(json);
  if (!parsed) return {};
  const JsonValue* v = parsed->find("Concrete Inputs");
  if (v == nullptr || !v->is_array() || v->items().size() <= i || !v->items()[i].is_string()) return {};
  return v->items()[i].text();
}

// The num_batches_tracked update nn.BatchNorm makes in training mode:
// `num_batches_tracked.add_(1)`, or in older torch `num_batches_tracked + 1`,
// an aten::add of a 0-dim long tensor (torch 1.10, issue 38's eighth round:
// a ResNet-18 forward on the CPU whose 20 batch norms each followed one).
bool is_tracked_update(const DiagnoseContext& c, std::uint32_t e) {
  const std::string_view n = c.name(e);
  if (n == "aten::add_") return true;
  if (n != "aten::add") return false;
  const std::string_view json = c.trace.args_json(e);
  if (json.find("long int") == std::string_view::npos) return false;
  const Result<JsonValue> parsed = JsonValue::parse(json);
  if (!parsed) return false;
  const JsonValue* dims = parsed->find("Input Dims");
  const JsonValue* types = parsed->find("Input type");
  if (dims == nullptr || types == nullptr || !dims->is_array() || !types->is_array() || dims->items().empty() ||
      types->items().empty())
    return false;
  const JsonValue& d0 = dims->items()[0];
  const JsonValue& t0 = types->items()[0];
  return d0.is_array() && d0.items().empty() && t0.is_string() && t0.text() == "long int";
}

// Batch norm calls in training mode: by their `training` argument, else by
// the num_batches_tracked update before them; and the updates' time.
struct BatchNormUse {
  std::int64_t calls = 0;          // outermost aten::batch_norm calls
  std::int64_t training = 0;       // of them, in training mode by their argument or their update
  std::int64_t eval = 0;           // of them, training=False by their argument
  std::int64_t tracked_adds = 0;   // num_batches_tracked updates (aten::add_ just before)
  std::int64_t tracked_ns = 0;
  std::int64_t train_kernels = 0;  // statistics kernels on the device
  std::int64_t train_kernel_ns = 0;
  std::int64_t ns = 0;             // the outermost calls' time
  // ... each capped at kStallFactor x its shape's median (shapes of 3 calls
  // or more, with record_shapes): a call stalled by the host is no part of
  // what eval mode saves (issue 38's twenty-first round: a container's
  // ResNet-18, three batch norms of one layer at 300-427 ms where it takes
  // 24.5 ms, tripled the estimate).
  std::int64_t capped_ns = 0;
  std::uint32_t longest = kNoIndex;
};

// The autograd graph nodes the recorded ops created: the dispatcher
// records the next node's sequence number on every op, and the number
// advances only when a node is made, so under no_grad or inference mode
// the ops share one or carry none. 0 where fewer than two differ.
std::int64_t autograd_nodes(const DiagnoseContext& c) {
  static constexpr std::string_view kKeys[] = {"Sequence number"};
  std::set<std::int64_t> seen;
  std::size_t read = 0;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    if (read++ >= 200'000) break;
    std::string_view v[1];
    if (!member_values(c.trace.args_json(e), kKeys, v) || v[0].empty()) continue;
    std::int64_t n = 0;  // out of range or negative: not a node's number
    const auto r = std::from_chars(v[0].data(), v[0].data() + v[0].size(), n);
    if (r.ec == std::errc() && n >= 0) seen.insert(n);
  }
  return seen.size() >= 2 ? static_cast<std::int64_t>(seen.size()) : 0;
}

BatchNormUse batch_norm_use(const DiagnoseContext& c) {
  BatchNormUse u;
  std::vector<std::uint32_t> calls;
  std::int64_t bare_adds = 0, bare_ns = 0;
  const Trace& t = c.trace;
  // Per lane: the open ops (their ends), to find each op's previous sibling.
  std::vector<std::vector<std::uint32_t>> open(t.lanes.size());
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    std::vector<std::uint32_t>& stack = open[t.events.lane[e]];
    std::uint32_t prev = kNoIndex;  // the op that closed last before e, at e's depth
    while (!stack.empty() && c.end(stack.back()) <= c.ts(e)) {
      prev = stack.back();
      stack.pop_back();
    }
    const bool nested_bn = std::any_of(stack.begin(), stack.end(), [&](std::uint32_t o) {
      return c.name(o) == "aten::batch_norm";
    });
    stack.push_back(e);
    if (c.name(e) != "aten::batch_norm" || nested_bn) continue;
    ++u.calls;
    sat_acc(u.ns, c.dur(e));
    calls.push_back(e);
    if (u.longest == kNoIndex || c.dur(e) > c.dur(u.longest)) u.longest = e;
    // aten::batch_norm(input, weight, bias, running_mean, running_var,
    // training, momentum, eps, cudnn_enabled): Concrete Inputs' sixth item
    // is "True" or "False" where the trace records it.
    const std::string training = concrete_input(c, e, 5);
    if (training == "False") ++u.eval;
    const bool tracked = prev != kNoIndex && is_tracked_update(c, prev);
    if (tracked) {
      ++u.tracked_adds;
      sat_acc(u.tracked_ns, c.dur(prev));
    }
    if (training == "True" || (training.empty() && tracked)) ++u.training;
    // Without shapes an aten::add cannot be told a 0-dim long one: it
    // counts where every batch norm has one just before it (below).
    if (!tracked && training.empty() && prev != kNoIndex && c.name(prev) == "aten::add" &&
        c.trace.args_json(prev).find("Input Dims") == std::string_view::npos) {
      ++bare_adds;
      sat_acc(bare_ns, c.dur(prev));
    }
  }
  // The legacy profiler without record_shapes (torch 1.8: a ResNet-18's 20
  // batch norms, each right after an aten::add of no recorded shape, in a
  // forward-only pass; issue 38's fifteenth round): every call having one
  // is the pattern, not a residual add that happens to come first.
  if (u.tracked_adds == 0 && u.calls >= 2 && bare_adds == u.calls) {
    u.tracked_adds = bare_adds;
    u.tracked_ns = bare_ns;
    u.training += bare_adds;
  }
  for (const DeviceOp& op : c.device) {
    if (is_bn_train_kernel(c.name(op.event))) {
      ++u.train_kernels;
      sat_acc(u.train_kernel_ns, c.dur(op.event));
    }
  }
  // Each call capped at kStallFactor x its shape's median (each call's
  // shapes read once).
  std::map<std::string, std::vector<std::int64_t>> by_shape;
  std::vector<const std::string*> shape_of;
  shape_of.reserve(calls.size());
  for (std::uint32_t e : calls) {
    const auto it = by_shape.try_emplace(input_dims_text(c.trace, e)).first;
    it->second.push_back(c.dur(e));
    shape_of.push_back(&it->first);
  }
  std::map<std::string_view, std::int64_t> cap;
  for (const auto& [dims, ns] : by_shape) {
    if (dims.empty() || ns.size() < 3) continue;
    cap[dims] = sat_mul(kStallFactor, lower_median(ns));
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const std::int64_t d = c.dur(calls[i]);
    const auto it = cap.find(*shape_of[i]);
    sat_acc(u.capped_ns, it == cap.end() ? d : std::min(d, it->second));
  }
  return u;
}

}  // namespace

void rule_train_mode_in_inference(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.forward_only()) return;
  const Trace& t = c.trace;
  std::int64_t masks = 0, ns = 0, scopes = 0, cpu_ops = 0;
  std::vector<std::int64_t> open_end(t.lanes.size(), INT64_MIN);  // the outermost dropout call's end per lane
  std::vector<std::uint32_t> open(t.lanes.size(), kNoIndex);
  std::uint32_t longest = kNoIndex;
  std::vector<std::string> covers;  // the ops whose time the dropout count holds
  auto cover = [&](std::string_view n) {
    if (std::find(covers.begin(), covers.end(), n) == covers.end()) covers.emplace_back(n);
  };
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
        cover(n);
        cover(c.name(open[lane]));
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
      cover(n);
      ++masks;
      sat_acc(ns, c.dur(e));
      if (longest == kNoIndex || c.dur(e) > c.dur(longest)) longest = e;
    }
  }
  if (cpu_ops == 0) return;
  const std::int64_t window = c.window_ns();
  if (window <= 0) return;
  // Any mask drawn in a forward-only pass: the outputs are randomly
  // masked, a wrong answer for inference whatever it costs (issue 38's
  // ninth round: a cold AlexNet forward whose two dropouts took 0.1 ms of
  // 1.5 s went unmentioned). Its time sets the severity.
  const bool dropout = masks > 0;
  const BatchNormUse bn = batch_norm_use(c);
  // Batch norm in training mode: a call says so (its argument or its
  // num_batches_tracked update), or the device ran statistics kernels, and
  // no call says training=False.
  const bool batch_norm = bn.eval == 0 && (bn.training > 0 || (bn.calls > 0 && bn.train_kernels > 0));
  if (!dropout && !batch_norm) return;
  const double share = static_cast<double>(ns) / static_cast<double>(window);
  const std::string where = c.steps.steps.empty() ? "trace" : "steps";
  Finding f;
  f.id = "train_mode_in_inference";
  f.severity = batch_norm || share >= kWarningShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  // "32 calls, 998.046 ms (20.6% of the trace)"; "6 calls, 1.2 ms, 6
  // training kernels on the device".
  const std::string dropout_counts = std::to_string(masks) + " call" + (masks == 1 ? "" : "s") + ", " + format_ns(ns) +
                                     " (" + format_pct(100.0 * share) + " of the " + where + ")";
  const std::int64_t bn_calls = std::max(bn.training, bn.calls);
  const std::string bn_counts =
      std::to_string(bn_calls) + " call" + (bn_calls == 1 ? "" : "s") + ", " + format_ns(bn.ns) +
      (bn.train_kernels > 0 ? ", " + std::to_string(bn.train_kernels) + " training kernels on the device" : std::string()) +
      (bn.tracked_adds > 0 ? ", each after its num_batches_tracked update" : std::string());
  if (dropout && batch_norm) {
    f.title = "The model runs in training mode in a forward-only pass: dropout draws random masks (" +
              std::to_string(masks) + " call" + (masks == 1 ? "" : "s") + ", " + format_ns(ns) + ", " +
              format_pct(100.0 * share) + " of the " + where + ") and batch norm normalises with each batch's statistics (" + bn_counts + ")";
  } else if (dropout) {
    f.title = "Dropout draws a random mask in a forward-only pass: " + dropout_counts;
  } else {
    f.title = "Batch norm runs in training mode in a forward-only pass, normalising with each batch's statistics: " +
              bn_counts;
  }
  f.title += ", and no backward in the trace";
  if (dropout) {
    f.evidence.texts("covers_ops", covers);
    f.evidence.num("mask_calls", masks)
        .num("dropout_ns", ns)
        .num("dropout_scopes", scopes)
        .real("dropout_pct", 100.0 * share)
        .event("longest", c.ref(longest));
  }
  if (batch_norm) {
    f.evidence.num("batch_norm_calls", bn.calls)
        .num("batch_norm_training_calls", bn.training)
        .num("batch_norm_ns", bn.ns)
        .num("batch_norm_train_kernels", bn.train_kernels)
        .num("num_batches_tracked_updates", bn.tracked_adds)
        .num("num_batches_tracked_ns", bn.tracked_ns);
    if (bn.longest != kNoIndex) f.evidence.event("longest_batch_norm", c.ref(bn.longest));
  }
  f.evidence.num("window_ns", window);
  std::string effect;
  if (dropout) {
    effect += "dropout is the identity, so its " + format_ns(ns) + " go and the outputs stop being randomly masked";
  }
  // Batch norm on the CPU in training mode makes two passes over its
  // input (the batch's mean and variance, then the normalisation); eval
  // mode makes the second only. The trace times the call as a whole, so
  // half of it is the estimate (issue 38's ninth round: a ResNet-34's 360
  // batch norms, 110 ms on a laptop's CPU, were credited with the 3.3 ms
  // of their counter updates only).
  // Only on the CPU: a GPU program recorded without its device activity
  // runs its batch norm in kernels the trace does not hold, and the host's
  // calls only launch them (issue 38's twenty-first round: a Windows CUDA
  // run's 360 cuDNN batch norms, 24.4 ms of host time, credited half of it).
  const bool bn_on_host = !c.has_device() && cpu_only_program(c);
  const std::int64_t bn_stats_ns = batch_norm && bn_on_host ? bn.capped_ns / 2 : 0;
  const std::int64_t bn_stalled_ns = sat_sub(bn.ns, bn.capped_ns);
  // On the device a training kernel reads its input twice (the batch's
  // statistics, then the normalisation) and writes once; an inference
  // kernel reads once and writes once: about two thirds of the time. What
  // that shortens is the replay's (nothing where they are off the critical
  // path: a GPU that waits on the host).
  std::int64_t bn_device_ns = 0;
  if (batch_norm && bn.train_kernels > 0) {
    if (const Result<WhatIfEdit> edit = parse_whatif_edit(bn_train_kernels_scaled("0.667"))) {
      if (const auto saving = c.replayed_saving({*edit})) bn_device_ns = saving->total_ns;
    }
  }
  if (batch_norm) {
    effect += std::string(dropout ? "; " : "") +
              "batch norm uses its running statistics, so the outputs stop depending on the batch and the running "
              "statistics stop being overwritten" +
              (bn.tracked_adds > 0 ? " (and the " + std::to_string(bn.tracked_adds) + " num_batches_tracked updates go)"
                                   : std::string());
    if (bn_stats_ns > 0) {
      effect += "; on the CPU it then skips the pass that computes each batch's statistics, about half of its " +
                format_ns(bn.capped_ns) + " (an estimate: the trace times each call as a whole" +
                (bn_stalled_ns > 0 ? "; " + format_ns(bn_stalled_ns) + " of calls stalled past " +
                                         std::to_string(kStallFactor) + "x their shape's median left out"
                                   : std::string()) +
                "), and freezing the model (" +
                (c.torch_before_compile() ? "torch.jit.freeze" : "torch.jit.freeze, or torch.compile") +
                ") folds the rest into the convolutions: up to all of it";
    } else if (bn.train_kernels > 0) {
      effect += "; on the GPU its " + std::to_string(bn.train_kernels) + " training kernels (" + format_ns(bn.train_kernel_ns) +
                ") become inference kernels that skip the statistics pass, about a third of their time, which " +
                (bn_device_ns > 0 ? "shortens the run by " + format_ns(bn_device_ns) + " in the replay"
                                  : "shortens nothing here in the replay: they are off the critical path");
    } else if (!c.has_device() && !bn_on_host) {
      effect += "; its kernels run on the GPU, whose activity this trace does not record, so what skipping the "
                "statistics pass saves there cannot be measured from it";
    }
  }
  f.advice = "If this is inference, call model.eval() (and run it under " + c.inference_mode_how() + "): in eval mode " +
             effect + ".";
  // Grad mode on too (issue 38's twenty-first round: every review of the
  // DTU ResNet forwards named autograd recording, 70 nodes a pass, their
  // saved activations freed between passes; the fix only named
  // inference_mode).
  if (const std::int64_t nodes = autograd_nodes(c); nodes > 0) {
    f.evidence.num("autograd_nodes", nodes);
    f.advice += " Under " + c.inference_mode_how() + " autograd stops recording as well: these ops built " +
                std::to_string(nodes) + " graph nodes (their sequence numbers advance) and kept their inputs alive "
                "for a backward that never runs.";
  }
  f.advice += " A forward-only benchmark of training mode is the one case where this belongs.";
  // On the CPU the fix's upper bound is the batch norm's whole (capped)
  // time: eval mode skips the statistics pass, about half, and freezing
  // folds the rest into the convolutions (issue 38's twenty-first round:
  // with half as its "up to", a correctness fix ranked below a max
  // pooling's 80 ms, where eval mode measured 0.12x the training calls).
  const std::int64_t bn_fold_ns = bn_stats_ns > 0 ? bn.capped_ns : 0;
  if (bn_fold_ns > 0) f.evidence.num("batch_norm_fold_bound_ns", bn_fold_ns);
  f.impact_ns = (dropout ? ns : 0) + (batch_norm ? bn.tracked_ns + (bn_fold_ns > 0 ? bn_fold_ns : bn_stats_ns) + bn_device_ns : 0);
  if (bn_stats_ns > 0) f.evidence.num("batch_norm_statistics_estimate_ns", bn_stats_ns);
  if (bn_stats_ns > 0 && bn_stalled_ns > 0) f.evidence.num("batch_norm_stalled_ns", bn_stalled_ns);
  if (bn.train_kernels > 0 && batch_norm) {
    f.evidence.num("batch_norm_train_kernel_ns", bn.train_kernel_ns).num("batch_norm_device_saving_ns", bn_device_ns);
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
