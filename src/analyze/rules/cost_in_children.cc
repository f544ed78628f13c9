// cost_in_children: a scope (a user annotation, a Python function, a module)
// whose CPU total is many times its Self CPU and whose time is spread over
// several children: names its top children and the drill-down path to where
// the time is finally self time. Origin: docs/trace-reading.md, "CPU total ≫
// Self CPU for a row: the cost lives in its children; drill down".
// Framework ops (aten::matmul over aten::mm, autograd nodes), a scope around
// one call and a path that ends in a runtime call are left out: their cost
// is trivially their implementation's, or another finding names the call.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/analyze/rules/rules.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

// "≫": CPU total at least 5× Self CPU, i.e. ≥ 80% of the row's time in its
// children.
constexpr double kTotalToSelf = 5.0;
// Only rows that matter: CPU total ≥ 10% of the Self CPU total.
constexpr double kMinShareOfCpu = 0.1;
// Drill into a child while it holds at least half of its parent's time.
constexpr double kDrillShare = 0.5;
constexpr int kMaxDrillDepth = 8;
constexpr std::size_t kTopChildren = 3;
// A GPU busy this share of the steps (compute_bound's threshold) hides the
// host's time: where the host spends it changes nothing, so the rule is
// silent.
constexpr double kGpuBoundShare = 0.8;
// A scope whose biggest child holds this share of the time in its children
// wraps one call (BatchNorm affine=False → nn.Module: BatchNorm2d_1 99.9%,
// optimizer_step → SGD.step 99%): its cost is that call's. A scope that
// splits (forward → over_arch 55%, bottom_mlp 28%; MRSGIFTask::run →
// gif_merge 94%, runInputDist 6%) says where the time goes.
constexpr double kOneCallShare = 0.95;
// A scope called once whose time is this share of the window wraps the
// recording.
constexpr double kWholeRecordingShare = 0.9;

struct ChildStat {
  std::int64_t ns = 0;
  std::int64_t count = 0;
};

std::uint64_t pair_key(StrId parent, StrId child) { return (static_cast<std::uint64_t>(parent) << 32) | child; }

// Scopes a user can act on: user annotations (record_function), Python
// functions and modules. Framework ops are left out: a dispatcher wrapper
// (aten::matmul over aten::mm, aten::linear over aten::addmm, aten::to over
// aten::_to_copy), an autograd node (evaluate_function: X over X,
// AddmmBackward0 over aten::mm) and runtime calls have their cost in their
// implementation, which names no change.
bool is_scope_name(std::string_view n) {
  if (n.find("evaluate_function:") != std::string_view::npos || n.starts_with("cuda") || n.starts_with("hip") ||
      n.starts_with("cu"))
    return false;
  // torch's own Python wrappers ("torch/utils/_contextlib.py(117):
  // decorate_context", "torch/nn/modules/module.py(1779): _call_impl") pass
  // their time through.
  if (n.find("torch/") != std::string_view::npos) return false;
  const bool has_space = n.find(' ') != std::string_view::npos;
  // "aten::mm", "op::addmm", "torch::autograd::AccumulateGrad": a namespaced
  // op ("nn.Module: X" and "file.py(12): f" have a space).
  if (n.find("::") != std::string_view::npos && !has_space) return false;
  // Autograd nodes: "AddmmBackward0", "CompiledFunctionBackward".
  std::size_t k = n.size();
  while (k > 0 && n[k - 1] >= '0' && n[k - 1] <= '9') --k;
  if (!has_space && n.substr(0, k).ends_with("Backward")) return false;
  return true;
}

// The ops that are matrix products on the CPU.
bool is_cpu_gemm_op(std::string_view n) {
  for (std::string_view g : {"aten::linear", "aten::addmm", "aten::matmul", "aten::mm", "aten::bmm", "aten::baddbmm",
                             "aten::einsum"}) {
    if (n == g) return true;
  }
  return false;
}

// Whether the ops record autograd's "Sequence number": grad mode was on and
// an input required grad, so the forward built a backward graph. A bounded
// scan of the first ops: a trace records it on its ops throughout or not.
bool records_autograd(const DiagnoseContext& c) {
  int scanned = 0;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    if (c.trace.args_json(e).find("\"Sequence number\"") != std::string_view::npos) return true;
    if (++scanned == 4096) break;
  }
  return false;
}

}  // namespace

void rule_cost_in_children(const DiagnoseContext& c, std::vector<Finding>* out) {
  const std::int64_t cpu_total = c.self_cpu_total_ns();
  if (cpu_total <= 0) return;
  if (c.has_device()) {
    const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
    if (w.span_ns > 0 && static_cast<double>(w.busy_ns) >= kGpuBoundShare * static_cast<double>(w.span_ns)) return;
  }
  // Candidates: scopes with most of their time in children, the most time
  // in children first.
  const std::int64_t window = c.window_ns();
  std::vector<const StatRow*> cands;
  for (const StatRow& r : c.averages()) {
    if (r.is_device || is_profiler_step(r.key) || r.cpu_time_total_ns <= 0) continue;
    if (static_cast<double>(r.cpu_time_total_ns) < kTotalToSelf * static_cast<double>(r.self_cpu_time_total_ns))
      continue;
    if (static_cast<double>(r.cpu_time_total_ns) < kMinShareOfCpu * static_cast<double>(cpu_total)) continue;
    cands.push_back(&r);
  }
  std::stable_sort(cands.begin(), cands.end(), [](const StatRow* a, const StatRow* b) {
    return sat_sub(a->cpu_time_total_ns, a->self_cpu_time_total_ns) >
           sat_sub(b->cpu_time_total_ns, b->self_cpu_time_total_ns);
  });
  std::unordered_set<StrId> cand_ids;
  for (const StatRow* r : cands) {
    if (const std::optional<StrId> id = c.trace.strings.find(r->key)) cand_ids.insert(*id);
  }
  if (cand_ids.empty()) return;

  // One pass over host ops and runtime calls (both sorted by ts), merged,
  // with a stack per CPU lane: each event's parent is the innermost open
  // event on its lane that contains it. Children are aggregated by
  // (parent name, child name); durations per name give each node's total.
  // A call nested in a call of the same name (aten::copy_ inside
  // aten::copy_) is recursion, not a child: its time is already in the outer
  // call's, so it adds to neither the name's total nor its children, and its
  // own children count as the outer call's. (torch's CPU total adds both.)
  const EventColumns& ev = c.trace.events;
  std::vector<std::vector<std::uint32_t>> stacks(c.trace.lanes.size());
  std::unordered_map<std::uint64_t, ChildStat> children;
  std::unordered_map<StrId, std::int64_t> name_total;
  std::unordered_map<StrId, std::vector<std::uint32_t>> instances_of;
  std::unordered_set<StrId> runtime_names;
  for (std::uint32_t e : c.runtime) runtime_names.insert(ev.name[e]);
  // Names recorded as user annotations or Python functions: scopes.
  std::unordered_set<StrId> scope_cat;
  const std::optional<StrId> ua = c.trace.strings.find("user_annotation");
  const std::optional<StrId> pf = c.trace.strings.find("python_function");
  // How many calls of each (lane, name) are open on the lane's stack: a
  // call is recursive when its name is already open, found in O(1) however
  // deep the nesting (walking the stack made 100,000 levels take 5 s).
  std::unordered_map<std::uint64_t, std::uint32_t> open_calls;
  auto open_key = [&](std::uint32_t e) { return pair_key(ev.lane[e], ev.name[e]); };
  c.for_each_host_event([&](std::uint32_t e) {
    std::vector<std::uint32_t>& st = stacks[ev.lane[e]];
    while (!st.empty() && !(c.ts(st.back()) <= c.ts(e) && c.end(e) <= c.end(st.back()))) {
      auto it = open_calls.find(open_key(st.back()));
      if (--it->second == 0) open_calls.erase(it);
      st.pop_back();
    }
    const StrId name = ev.name[e];
    if ((ua && ev.cat[e] == *ua) || (pf && ev.cat[e] == *pf)) scope_cat.insert(name);
    std::uint32_t& open = open_calls[open_key(e)];
    const bool recursive = open > 0;
    ++open;
    if (!recursive) name_total[name] = sat_add(name_total[name], c.dur(e));
    if (!st.empty() && ev.name[st.back()] != name) {
      ChildStat& cs = children[pair_key(ev.name[st.back()], name)];
      cs.ns = sat_add(cs.ns, c.dur(e));
      ++cs.count;
    }
    if (!recursive && cand_ids.count(name) != 0) instances_of[name].push_back(e);
    st.push_back(e);
  });

  // Children of one name, biggest first (indexed by parent once: scanning
  // every pair per call was quadratic in distinct names).
  std::unordered_map<StrId, std::vector<std::pair<StrId, ChildStat>>> by_parent;
  for (const auto& [k, cs] : children) {
    by_parent[static_cast<StrId>(k >> 32)].emplace_back(static_cast<StrId>(k & 0xffffffffu), cs);
  }
  auto children_of = [&](StrId parent) {
    auto it = by_parent.find(parent);
    std::vector<std::pair<StrId, ChildStat>> v = it == by_parent.end() ? std::vector<std::pair<StrId, ChildStat>>{}
                                                                       : it->second;
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.second.ns != b.second.ns ? a.second.ns > b.second.ns : a.first < b.first;
    });
    return v;
  };
  // The drill-down path from a row: follow the biggest child while it holds
  // most of its parent's time.
  auto drill_from = [&](StrId from, const std::string& key) {
    std::vector<std::string> p{key};
    std::unordered_set<StrId> seen{from};
    StrId cur = from;
    for (int depth = 0; depth < kMaxDrillDepth; ++depth) {
      const auto kids = children_of(cur);
      if (kids.empty() || seen.count(kids[0].first) != 0) break;
      const double parent_ns = static_cast<double>(std::max<std::int64_t>(1, name_total[cur]));
      if (static_cast<double>(kids[0].second.ns) < kDrillShare * parent_ns) break;
      cur = kids[0].first;
      seen.insert(cur);
      p.emplace_back(c.trace.str(cur));
    }
    return std::make_pair(std::move(p), cur);
  };

  // A scope: a user annotation or Python function (by category, or by name
  // in traces without one), not a framework op nor torch's own wrapper.
  auto is_scope = [&](StrId id) {
    const std::string_view n = c.trace.str(id);
    if (!is_scope_name(n)) return false;
    return scope_cat.count(id) != 0 || n.find(' ') != std::string_view::npos || n.find("::") == std::string_view::npos;
  };
  // The first candidate that tells the user something: a scope whose time
  // is spread over its children (none holds half of it) or lands in a
  // narrower scope (forward → over_arch) that holds < 95% of it, and whose drill path does not end
  // in a runtime call (cudaMalloc, hipLaunchKernel,
  // cudaDeviceGetStreamPriorityRange: the runtime findings name those). A
  // scope around one op (matmul_add → aten::matmul) has that op's cost,
  // which the op's own row already shows.
  const StatRow* best = nullptr;
  StrId best_id = 0;
  std::vector<std::pair<StrId, ChildStat>> top;
  std::vector<std::string> path;
  for (const StatRow* r : cands) {
    const std::optional<StrId> id = c.trace.strings.find(r->key);
    if (!id || !is_scope(*id)) continue;
    auto kids = children_of(*id);
    if (kids.empty()) continue;
    const double total_ns = static_cast<double>(std::max<std::int64_t>(1, name_total[*id]));
    if (static_cast<double>(kids[0].second.ns) >= kDrillShare * total_ns && !is_scope(kids[0].first)) continue;
    std::int64_t kids_ns = 0;
    for (const auto& k : kids) kids_ns = sat_add(kids_ns, k.second.ns);
    if (static_cast<double>(kids[0].second.ns) >= kOneCallShare * static_cast<double>(kids_ns)) continue;
    // One call that wraps the recording, its biggest child another scope of
    // the program's: the next level of its own outline, which names no part
    // of the run (issue 38's fourteenth round: an H200 attention call's
    // "research_attention_profiling", 6.4 of 7.0 ms, "the cost is in
    // iteration_0"; a B200 training_step "spread over forward, backward,
    // optimizer_step"). Over ops it still says which (a CPU forward's
    // linears under model_inference).
    if (r->count == 1 && window > 0 && is_scope(kids[0].first) &&
        static_cast<double>(r->cpu_time_total_ns) >= kWholeRecordingShare * static_cast<double>(window)) {
      continue;
    }
    auto [p, leaf] = drill_from(*id, r->key);
    if (runtime_names.count(leaf) != 0) continue;
    best = r;
    best_id = *id;
    top = std::move(kids);
    path = std::move(p);
    break;
  }
  if (best == nullptr) return;
  const std::int64_t best_total_dur = std::max<std::int64_t>(1, name_total[best_id]);
  std::vector<std::string> child_texts;
  for (std::size_t k = 0; k < top.size() && k < kTopChildren; ++k) {
    child_texts.push_back(
        std::string(c.trace.str(top[k].first)) + " " + format_ns(top[k].second.ns) + " (" +
        format_pct(100.0 * static_cast<double>(top[k].second.ns) / static_cast<double>(best_total_dur)) + ", " +
        std::to_string(top[k].second.count) + " calls)");
  }
  const std::vector<std::uint32_t>& instances = instances_of[best_id];
  std::vector<std::int64_t> steps;
  for (std::uint32_t e : instances) {
    const std::int64_t s = c.step_number_at(c.ts(e));
    if (s >= 0 && (steps.empty() || steps.back() != s)) steps.push_back(s);
  }

  // The row's time counted once: its outermost calls. torch's CPU total adds
  // nested calls of the same name again (926 ms of aten::copy_ in a 474 ms
  // trace); the rule weighs and prints the outermost time.
  const std::int64_t total =
      std::min(best->cpu_time_total_ns, name_total[best_id] > 0 ? name_total[best_id] : best->cpu_time_total_ns);
  const bool nested = total < best->cpu_time_total_ns;
  const std::int64_t self = best->self_cpu_time_total_ns;
  if (self > 0 && static_cast<double>(total) < kTotalToSelf * static_cast<double>(self)) return;
  const std::int64_t in_children = total - std::max<std::int64_t>(0, self);
  Finding f;
  f.id = "cost_in_children";
  f.severity = FindingSeverity::kInfo;
  // torch's legacy self times can be < 0 (children's times add up past their
  // parent's): then all of the row's time is in its children, and the
  // negative figure is torch's, named as such rather than printed as a time.
  const bool has_self = self > 0;
  const double ratio = has_self ? static_cast<double>(total) / static_cast<double>(self) : 0;
  char r[32];
  std::snprintf(r, sizeof r, "%.1fx", ratio);
  f.title = best->key + ": CPU total " + format_ns(total) + (nested ? " (outermost calls)" : "");
  if (has_self) {
    f.title += " vs Self CPU " + format_ns(self) + " (" + r + ")";
  } else if (self < 0) {
    f.title += ", all in its children (torch's table shows Self CPU " + format_ns(self) + ")";
  } else {
    f.title += ", all in its children";
  }
  f.title += "; the cost is in " + std::string(c.trace.str(top[0].first));
  f.evidence.text("key", best->key)
      .num("cpu_total_ns", total)
      .num("self_cpu_ns", best->self_cpu_time_total_ns)
      .num("children_ns", in_children)
      .num("count", best->count)
      .texts("top_children", std::move(child_texts))
      .num("top_child_ns", top[0].second.ns)
      .texts("drill_path", path);
  if (nested) f.evidence.num("torch_cpu_total_ns", best->cpu_time_total_ns);
  if (has_self) f.evidence.real("total_to_self_ratio", ratio);
  if (!instances.empty()) {
    const std::uint32_t longest = *std::max_element(
        instances.begin(), instances.end(), [&](std::uint32_t a, std::uint32_t b) { return c.dur(a) < c.dur(b); });
    f.evidence.event("longest", c.ref(longest));
  }
  if (!steps.empty()) add_steps(f.evidence, std::move(steps));
  std::string drill;
  for (const std::string& p : path) drill += (drill.empty() ? "" : " → ") + p;
  if (path.size() > 1) {
    f.advice = "Look for the time in " + path.back() + " (" + drill + "), not in " + best->key +
               " itself: its child " + std::string(c.trace.str(top[0].first)) + " takes " +
               format_ns(top[0].second.ns) + " of its " + format_ns(total) + ".";
  } else {
    std::string kids;
    for (std::size_t k = 0; k < top.size() && k < kTopChildren; ++k) {
      kids += (kids.empty() ? "" : ", ") + std::string(c.trace.str(top[k].first)) + " " + format_ns(top[k].second.ns);
    }
    const std::string biggest(c.trace.str(top[0].first));
    if (!c.has_device() && c.forward_only() && is_cpu_gemm_op(biggest)) {
      // A forward on the CPU whose biggest child is its matrix products:
      // the remedies for CPU inference, not "see what it calls that it need
      // not" (issue 38's eighth round: a Transformer's 97 aten::linear calls
      // of 14-18 rows, 48% of its forward, and autograd recording).
      const std::int64_t calls = top[0].second.count;
      f.advice = best->key + "'s " + format_ns(total) + " is spread over its children (" + kids +
                 "); the biggest are its matrix products, " + biggest + " (" + std::to_string(calls) + " call" +
                 (calls == 1 ? "" : "s") + " at " + format_ns(top[0].second.ns / std::max<std::int64_t>(1, calls)) +
                 " each): for inference on the CPU run them in int8 (torch.ao.quantization.quantize_dynamic on "
                 "nn.Linear) or bf16, and put more rows in each call (a larger batch)" +
                 (records_autograd(c) ? "; run it under " + c.inference_mode_how() +
                                            ": its ops carry autograd sequence numbers, so the forward records a "
                                            "backward graph it never uses"
                                      : std::string()) +
                 ".";
    } else if (best->count == 1 && window > 0 &&
               static_cast<double>(best->cpu_time_total_ns) >= kWholeRecordingShare * static_cast<double>(window)) {
      // One call wrapping the recording with nothing to say of its
      // children: every run's wrapper is mostly its children (issue 38's
      // fifteenth round: a ResNet-18's model_inference told to "start with
      // aten::conv2d", 45% of it).
      return;
    } else {
      f.advice = best->key + "'s " + format_ns(total) + " is spread over its children (" + kids +
                 "): no one call holds it, so start with the biggest, " + biggest +
                 ", and see what the scope calls that it need not.";
    }
  }
  // A drill path, not a saving: no impact.
  f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
