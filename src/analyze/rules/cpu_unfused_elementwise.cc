// cpu_unfused_elementwise: on a CPU-only trace, chains of elementwise,
// reduction and cast ops run one after another in eager mode (an RMSNorm
// written as to, pow, mean, add, rsqrt, mul, to, mul; silu then mul), each
// a full pass over its tensor. Fused, a chain is one loop over the data:
// about the time of its longest op. Memory_bound_elementwise's counterpart
// for host math.
// Origin: issue 38's tenth round (scoring half, changed after it was
// scored): a vLLM CPU worker run eager, its RMSNorm and SiluAndMul in
// native ops, 576 ms of 2.393 s of Self CPU, reported only as "make the
// matrix products cheaper"; the review: compile the model or turn on the
// fused ops first.
// Precondition: a CPU-only program (cpu_only_program: no device activity,
// which the kernel rules read, and no sign of GPU work issued),
// a torch trace, chains of two or more consecutive top-level ops of the
// set below on one thread (an op nested in another op is that op's work;
// ops inside a compiled region, `Torch-Compiled Region` or `## Call
// CompiledFxGraph`, are already Inductor's), and what fusing would save
// (each chain's time less its longest op) at least kMinShare of Self CPU
// total and kMinSavingNs. Dropout is train_mode_in_inference's and is not
// in the set; an optimizer's per-parameter ops (inside `Optimizer.step#…`)
// are per_param_optimizer's (foreach or fused, not compiling the model).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/host_stack.h"
#include "src/analyze/nesting.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/names.h"

namespace tprof::internal {

namespace {

// What fusing saves must be this share of Self CPU total and this much
// time; a warning from kWarnShare.
constexpr double kMinShare = 0.05;
constexpr std::int64_t kMinSavingNs = 10'000'000;
constexpr double kWarnShare = 0.10;
// Python frames looked back at for the one around an op.
constexpr int kMaxFrameScan = 256;
// Groups named in the title.
constexpr std::size_t kGroupsNamed = 3;
// Ops of a chain named in its text.
constexpr std::int64_t kMaxOpsNamed = 8;

struct Chain {
  std::uint32_t first = kNoIndex, last = kNoIndex;
  std::int64_t ops = 0, total_ns = 0, longest_ns = 0;
  std::string ops_text;  // "to, pow, mean, add, rsqrt, mul, to, mul"
};

}  // namespace

void rule_cpu_unfused_elementwise(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.is_torch() || !cpu_only_program(c)) return;
  const std::int64_t self_total = c.self_cpu_total_ns();
  if (self_total <= 0) return;
  const Trace& t = c.trace;
  const Nesting& nest = c.nesting();
  // Top-level ops per lane in start order (host_ops are by ts); a chain is
  // a run of consecutive elementwise ones.
  auto top_level = [&](std::uint32_t e) {
    for (std::uint32_t p = nest.parent[e]; p != kNoIndex; p = nest.parent[p]) {
      if (c.kind(p) == EventKind::kCpuOp) return false;
      if (is_compiled_scope(c.name(p)) || c.name(p).starts_with("Optimizer.")) return false;
    }
    return true;
  };
  // The innermost Python frame around an op that is the program's (not
  // torch's or a built-in), where the lane has a stack: chains end where it
  // changes (an RMSNorm's ops and the residual add after it are two).
  std::map<std::uint32_t, std::vector<std::uint32_t>> frames;  // lane -> python_function events by ts
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) == EventKind::kPythonFunction) frames[t.events.lane[e]].push_back(e);
  }
  auto owner = [&](std::uint32_t e) -> std::uint32_t {
    const auto it = frames.find(t.events.lane[e]);
    if (it == frames.end()) return kNoIndex;
    const std::vector<std::uint32_t>& fs = it->second;
    auto pos = std::upper_bound(fs.begin(), fs.end(), c.ts(e), [&](std::int64_t v, std::uint32_t x) { return v < c.ts(x); });
    std::uint32_t f = kNoIndex;
    for (int k = 0; pos != fs.begin() && k < kMaxFrameScan; ++k) {
      --pos;
      if (c.end(*pos) >= c.end(e)) {
        f = *pos;
        break;
      }
    }
    while (f != kNoIndex && (c.name(f).starts_with("<") || c.name(f).starts_with("torch/"))) f = nest.parent[f];
    return f;
  };
  struct Open {
    Chain chain;
    std::uint32_t frame = kNoIndex;
  };
  std::map<std::uint32_t, Open> open;  // by lane
  std::vector<Chain> chains;
  std::vector<std::uint32_t> chain_frames;
  auto close = [&](std::uint32_t lane) {
    auto it = open.find(lane);
    if (it == open.end()) return;
    if (it->second.chain.ops >= 2) {
      chains.push_back(std::move(it->second.chain));
      chain_frames.push_back(it->second.frame);
    }
    open.erase(it);
  };
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp || !top_level(e)) continue;
    const std::string_view n = c.name(e);
    if (is_view_op(n)) continue;  // a view reads nothing: a slice between silu and mul
    const std::uint32_t lane = t.events.lane[e];
    if (!is_elementwise_op(n)) {
      close(lane);
      continue;
    }
    const std::uint32_t frame = owner(e);
    auto it = open.find(lane);
    if (it != open.end() && it->second.frame != frame) close(lane);
    Open& o = open[lane];
    Chain& ch = o.chain;
    if (ch.first == kNoIndex) {
      ch.first = e;
      o.frame = frame;
    }
    ch.last = e;
    ++ch.ops;
    sat_acc(ch.total_ns, c.dur(e));
    ch.longest_ns = std::max(ch.longest_ns, c.dur(e));
    if (ch.ops <= kMaxOpsNamed) ch.ops_text += (ch.ops_text.empty() ? "" : ", ") + std::string(n.substr(6));
    if (ch.ops == kMaxOpsNamed + 1) ch.ops_text += ", ...";
  }
  while (!open.empty()) close(open.begin()->first);
  std::int64_t saving = 0, ops = 0, ops_ns = 0;
  for (const Chain& ch : chains) {
    sat_acc(saving, ch.total_ns - ch.longest_ns);
    ops += ch.ops;
    sat_acc(ops_ns, ch.total_ns);
  }
  if (saving < kMinSavingNs || static_cast<double>(saving) < kMinShare * static_cast<double>(self_total)) return;

  // Grouped by their frame where the trace has a stack, else by their ops.
  struct Group {
    std::int64_t chains = 0, saving_ns = 0, total_ns = 0;
    std::uint32_t example = kNoIndex;
  };
  std::map<std::string, Group> groups;
  for (std::size_t i = 0; i < chains.size(); ++i) {
    const Chain& ch = chains[i];
    std::string key = chain_frames[i] == kNoIndex ? std::string() : std::string(c.name(chain_frames[i]));
    if (key.empty()) key = "ops " + ch.ops_text;
    Group& g = groups[key];
    ++g.chains;
    sat_acc(g.saving_ns, ch.total_ns - ch.longest_ns);
    sat_acc(g.total_ns, ch.total_ns);
    if (g.example == kNoIndex || ch.total_ns > c.dur(g.example)) g.example = ch.first;
  }
  std::vector<std::pair<std::string, Group>> ranked(groups.begin(), groups.end());
  // By the time the title gives them (issue 38's tenth round: ranked by
  // saving, a 156 ms group was named before a 177 ms one).
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  std::string where;
  for (std::size_t i = 0; i < ranked.size() && i < kGroupsNamed; ++i) {
    const auto& [key, g] = ranked[i];
    where += std::string(i == 0 ? "" : "; ") + key + ": " + count_of(g.chains, "chain") +
             ", " + format_ns(g.total_ns);
  }
  const double share = static_cast<double>(ops_ns) / static_cast<double>(self_total);
  const bool vllm = runs_vllm(c);
  Finding f;
  f.id = "cpu_unfused_elementwise";
  f.severity = static_cast<double>(saving) >= kWarnShare * static_cast<double>(self_total) ? FindingSeverity::kWarning
                                                                                          : FindingSeverity::kInfo;
  f.title = "Unfused elementwise ops on the CPU: " + count_of(ops, "op") + " in " +
            count_of(static_cast<std::int64_t>(chains.size()), "chain") + ", each a pass over its tensor, take " +
            format_ns(ops_ns) + " (" + format_pct(100.0 * share) + " of Self CPU total); mostly " + where;
  f.evidence.num("chains", static_cast<std::int64_t>(chains.size()))
      .num("ops", ops)
      .num("ops_ns", ops_ns)
      .real("ops_pct", 100.0 * share)
      .num("saving_ns", saving)
      .text("top", ranked.front().first)
      .event("example", c.ref(ranked.front().second.example));
  // torch.compile is the fix; a PyTorch older than it needs the upgrade
  // first (causes.cc ranks the fixes it can make before this one).
  if (c.torch_before_compile()) f.evidence.text("needs_upgrade", "PyTorch 2.0 (torch.compile)");
  // A program that compiles part of itself already runs these chains
  // outside its compiled regions: the fix extends them (issue 38's
  // twenty-second round: a simulator told to "compile the model" whose
  // physics function ran compiled, its eager tail 31% of the run).
  bool compiles = false;
  for (std::uint32_t e : c.host_ops) {
    if (c.name(e).starts_with("Torch-Compiled Region")) {
      compiles = true;
      break;
    }
  }
  if (compiles) f.evidence.text("compiled_regions", "yes");
  f.advice = compiles ? "Fuse each chain into one pass: these ops run eager, though the program compiles other code "
                        "(its torch.compile regions); extend torch.compile over the code that runs them (the caller, or the chains' "
                        "functions themselves; Inductor's C++ backend turns a chain of elementwise ops into one "
                        "vectorized loop and keeps the intermediates out of memory), or write them in place (mul_, "
                        "div_) where the intermediates are not needed. A fused chain takes about as long as its "
                        "longest op: " + format_ns(saving) + " less (an estimate from the ops' times)."
           : "Fuse each chain into one pass: compile the model (torch.compile" +
             std::string(c.torch_before_compile() ? ", from PyTorch 2.0: this trace's PyTorch is older by its date" : "") +
             "; Inductor's C++ backend turns a chain of elementwise ops into one vectorized loop and keeps the "
             "intermediates, casts included, out of memory)" +
             std::string(vllm ? "; on vLLM's CPU backend, leave enforce_eager off so that it compiles the model" : "") +
             ". A fused chain takes about as long as its longest op: " + format_ns(saving) +
             " less (an estimate from the ops' times).";
  f.impact_ns = saving;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
