// recompilation: the "## Call CompiledFxGraph <hash> ##" op names the
// Inductor graph a compiled region runs. The same hash every step is a cache
// hit (silent); a hash first seen in a later step means the frame was
// compiled again. Several hashes within one step are the frame's pieces.
// Cheatsheet: "## Call CompiledFxGraph <hash> with the same hash each step:
// cache hits; a changing hash means recompilation."
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

constexpr std::string_view kCallPrefix = "## Call CompiledFxGraph ";
constexpr std::string_view kRegionPrefix = "Torch-Compiled Region: ";
// Critical when the graph changes in at least this share of the steps that
// run it: recompiling every other step is the dynamic-shape thrash the
// recompile limit (torch._dynamo.config.recompile_limit, 8) exists for.
constexpr double kCriticalShare = 0.5;
// How far back (host ops by start) the search for the enclosing region walks.
constexpr int kMaxWalk = 256;

std::string_view graph_hash(std::string_view name) {
  std::string_view h = name.substr(kCallPrefix.size());
  if (h.size() >= 3 && h.substr(h.size() - 3) == " ##") h.remove_suffix(3);
  return h;
}

// The frame K of the enclosing "Torch-Compiled Region: K/M" ("" when none):
// each frame has its own sequence of graphs.
std::string_view frame_of(const DiagnoseContext& c, std::uint32_t call) {
  const auto& ops = c.host_ops;
  const std::uint32_t lane = c.trace.events.lane[call];
  auto it = std::upper_bound(ops.begin(), ops.end(), c.ts(call), [&](std::int64_t v, std::uint32_t e) { return v < c.ts(e); });
  for (int walked = 0; it != ops.begin() && walked < kMaxWalk; ++walked) {
    --it;
    const std::uint32_t e = *it;
    if (c.trace.events.lane[e] != lane || c.end(e) < c.end(call)) continue;
    const std::string_view n = c.name(e);
    if (n.substr(0, kRegionPrefix.size()) == kRegionPrefix) {
      std::string_view km = n.substr(kRegionPrefix.size());
      return km.substr(0, km.find('/'));
    }
  }
  return {};
}

}  // namespace

void rule_recompilation(const DiagnoseContext& c, std::vector<Finding>* out) {
  std::vector<std::uint32_t> calls;
  for (std::uint32_t e : c.host_ops) {
    const std::string_view n = c.name(e);
    if (n.size() > kCallPrefix.size() && n[0] == '#' && n.substr(0, kCallPrefix.size()) == kCallPrefix) calls.push_back(e);
  }
  if (calls.size() < 2) return;

  // Per frame, the graphs its earlier steps ran. A graph first seen in a
  // later step is a recompilation; several graphs within one step are the
  // frame's pieces (graph breaks, vLLM's piecewise graphs), and a graph an
  // earlier step already ran is a cache hit. Calls outside any step cannot be
  // placed in that order and are not judged.
  struct Frame {
    std::int64_t step = -1;                   // the step of the frame's latest call
    std::set<std::string_view> before;        // graphs run in steps before `step`
    std::set<std::string_view> in_step;       // graphs run in `step`
  };
  std::map<std::string_view, Frame> frames;
  std::vector<std::uint32_t> changes;  // calls that run a graph new to their frame after its first step
  std::set<std::string_view> hashes;
  std::set<std::int64_t> call_steps;
  std::int64_t new_graphs = 0;
  for (std::uint32_t e : calls) {
    const std::int64_t step = c.step_number_at(c.ts(e));
    if (step < 0) continue;
    const std::string_view h = graph_hash(c.name(e));
    hashes.insert(h);
    call_steps.insert(step);
    Frame& fr = frames[frame_of(c, e)];
    if (step != fr.step) {
      fr.before.insert(fr.in_step.begin(), fr.in_step.end());
      fr.in_step.clear();
      fr.step = step;
    }
    if (!fr.before.empty() && !fr.before.count(h) && !fr.in_step.count(h)) {
      changes.push_back(e);
      ++new_graphs;
    }
    fr.in_step.insert(h);
  }
  if (changes.empty()) return;

  std::vector<std::int64_t> durs;
  for (std::uint32_t e : calls) durs.push_back(c.dur(e));
  std::nth_element(durs.begin(), durs.begin() + static_cast<std::ptrdiff_t>(durs.size() / 2), durs.end());
  const std::int64_t median = durs[durs.size() / 2];
  std::vector<std::int64_t> steps;
  std::vector<EventRef> refs;
  std::int64_t excess = 0;
  for (std::uint32_t e : changes) {
    steps.push_back(c.step_number_at(c.ts(e)));
    refs.push_back(c.ref(e));
    sat_acc(excess, std::max<std::int64_t>(0, c.dur(e) - median));
  }
  const double share = static_cast<double>(changes.size()) / static_cast<double>(std::max<std::size_t>(1, call_steps.size()));
  std::vector<std::string> hash_list(hashes.begin(), hashes.end());

  Finding f;
  f.id = "recompilation";
  f.severity = share >= kCriticalShare ? FindingSeverity::kCritical : FindingSeverity::kWarning;
  f.title = "A new CompiledFxGraph hash appears " + std::to_string(changes.size()) + " times after the first step, over " +
            std::to_string(calls.size()) + " calls (" + std::to_string(hashes.size()) + " distinct graphs): recompilation";
  f.evidence.num("changes", static_cast<std::int64_t>(changes.size()))
      .num("calls", static_cast<std::int64_t>(calls.size()))
      .num("distinct_graphs", static_cast<std::int64_t>(hashes.size()))
      .num("new_graphs", new_graphs)
      .texts("hashes", hash_list)
      .ints("change_steps", steps)
      .num("median_call_ns", median)
      .events("changed_calls", std::move(refs));
  std::string step_list;
  for (std::size_t i = 0; i < steps.size() && i < 5; ++i) step_list += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > 5) step_list += ", ...";
  f.advice = "Run with TORCH_LOGS=recompiles to name the guard that failed, then mark the changing dimension dynamic "
             "(torch._dynamo.mark_dynamic, or torch.compile(dynamic=True)), pad inputs to a few fixed shapes, or pass "
             "changing Python scalars as tensors: the graph changed " + std::to_string(changes.size()) +
             " times (step" + (steps.size() == 1 ? " " : "s ") + step_list + "), those calls " + format_ns(excess) +
             " longer than the median call (" + format_ns(median) +
             "). A new graph hash means Dynamo's guards failed and the frame was compiled again.";
  f.impact_ns = excess;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
