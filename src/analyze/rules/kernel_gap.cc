// kernel_gap: idle time between consecutive device activities of one step on
// one stream, keyed by the pair (stream, activity before, activity after) so
// the same gap can be compared across steps. A gap seen in most steps is a
// recurring one (the GPU waits on the host every step); a gap far above its
// usual size in one step is a one-off (the profiler's buffer request, a cold
// start). Cheatsheet: "A gap between two kernels inside one step that appears
// only once in 20 steps is another buffer request — the profiler, not the
// code"; the peers' "long GPU gaps" and HTA's host wait / kernel wait.
// Preconditions: a gap is GPU idle time, so only the part of it where no
// other stream of the device runs counts (a NCCL stream waiting while the
// compute stream works is not a gap); "N of M steps" counts steps (a step
// holds a hit when the pair's gap reached kMinGapNs at least once in it),
// and traces with fewer than kMinUnits steps count occurrences instead.
// A pair's one-offs are rare only when they are: long gaps of one pair in at
// least half of the steps (and 2 or more) recur, and are reported as a
// recurring pattern with a per-step saving (kRecurringOneOffShare). Host
// time in the gaps is named from the stack where the trace has one
// (host_stack.h), and the fix follows what it names.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "src/analyze/host_stack.h"
#include "src/analyze/idle.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/names.h"

namespace tprof::internal {

namespace {

// A launch on an idle GPU costs ~5–10 µs (the post's later steps: ~4–6 µs
// between annotation and op; HTA calls shorter waits "kernel wait"). A gap
// at least this long is GPU time lost to something else.
constexpr std::int64_t kMinGapNs = 10'000;
// Recurring: the pair's gap is at least kMinGapNs in this share of the steps
// (or instances, without steps) where the pair occurs, over at least
// kMinUnits of them.
constexpr double kRecurringShare = 0.5;
constexpr std::size_t kMinUnits = 3;
// One-off: at least this many times the pair's median gap, in at most
// kOneOffShare of the steps (at least one): "once in 20 steps".
constexpr double kOneOffFactor = 3.0;
constexpr double kExtremeFactor = 100.0;
constexpr std::size_t kExtremeMinGaps = 10;  // fewer: one long gap of few is no rarity
constexpr double kOneOffShare = 0.1;
// A pair's one-offs are rare only when they are: found in at least this
// share of the trace's steps, and in at least kRecurringOneOffMinSteps of
// them, they recur (3 of 3 steps, 6 of 6), and the finding is a recurring
// pattern with its per-step saving, not "one-off" or "rare".
constexpr double kRecurringOneOffShare = 0.5;
constexpr std::size_t kRecurringOneOffMinSteps = 2;
// A host stall: the launching thread records nothing for at least
// kMinStallNs inside an op whose median duration over the trace is at most
// 1/kStallFactor of it, and such stalls hold a quarter of the gaps or more
// (the rest is often silence between ops, which without a stack may be
// Python).
constexpr std::int64_t kMinStallNs = 500'000;
// Recurring gaps before one activity after different ones are one pattern
// where their long gaps' medians are kMinStallNs or more and within this
// factor of each other.
constexpr double kSameCostFactor = 1.5;
constexpr double kStallShare = 0.25;
constexpr std::int64_t kStallFactor = 5;
constexpr std::size_t kStallLookBack = 4096;  // events scanned back for those still open
// Findings and listed events are capped (largest first).
constexpr std::size_t kMaxRecurring = 3;
constexpr std::size_t kMaxListed = 5;

// Warning once the GPU idle time a finding accounts for (its claim on the
// idle partition) reaches this share of the window: a gap pattern worth the
// reader's time, not "a recurring gap of 1 ns".
constexpr double kWarnShare = 0.01;
// A pattern (its gaps, or a one-off's excess) below this share of the window
// is not reported.
constexpr double kMinShare = 0.01;

struct Gap {
  std::int64_t ns = 0;
  std::int32_t step = -1;  // index into steps
  std::size_t before = 0, after = 0;  // indices into c.device
  Interval range;          // [end of the activity before, start of the one after)
  // The stream's own gap (start after - end before), other streams' work
  // not subtracted: a stream that waits every step idles the GPU only in
  // the steps where nothing else runs meanwhile.
  std::int64_t stream_ns = 0;
};

// Whether the one-offs that are their pairs' first calls hold at least two
// thirds of the one-offs' time.
bool first_calls_hold_most(const std::vector<std::pair<std::int64_t, bool>>& v) {
  std::int64_t first = 0, all = 0;
  for (const auto& [ns, early] : v) {
    sat_acc(all, ns);
    if (early) sat_acc(first, ns);
  }
  return all > 0 && 3 * static_cast<double>(first) >= 2 * static_cast<double>(all);
}

// The idle ranges of `gaps` (those of kMinGapNs or more) that the finding
// can claim: shared causes only (blocked_* and profiler belong to their own
// rules), minus what earlier findings claimed.
std::vector<Interval> gap_claim(const DiagnoseContext& c, const std::vector<const Gap*>& gaps,
                                const std::vector<Finding>& earlier) {
  std::vector<Interval> ranges;
  for (const Gap* g : gaps) {
    if (g->ns >= kMinGapNs) ranges.push_back(g->range);
  }
  ranges = merge_intervals(std::move(ranges));
  return claimable_idle(c.idle(), place_causes(c), &ranges, earlier);
}

// The partition's view of the gaps: their idle time by cause, as evidence,
// and the cause holding most of it.
IdleCause add_idle_evidence(const DiagnoseContext& c, const std::vector<const Gap*>& gaps, Finding& f) {
  std::vector<Interval> ranges;
  for (const Gap* g : gaps) {
    if (g->ns >= kMinGapNs) ranges.push_back(g->range);
  }
  const IdlePartition::Totals t = idle_by_cause(c.idle(), merge_intervals(std::move(ranges)));
  std::vector<std::string> parts;
  for (int k = 0; k < kIdleCauseCount; ++k) {
    if (t[static_cast<std::size_t>(k)] > 0) {
      parts.push_back(std::string(idle_cause_id(static_cast<IdleCause>(k))) + " " + format_ns(t[static_cast<std::size_t>(k)]));
    }
  }
  const IdleCause top = dominant_cause(t);
  f.evidence.text("idle_cause", std::string(idle_cause_id(top))).texts("idle_by_cause", parts).num("gpu_idle_ns", f.idle_ns);
  return top;
}

// Gaps whose idle is mostly launched work waiting where the trace shows
// nothing to wait for (place_causes): the device held from outside the
// program, low_gpu_utilization's cause, not a gap to fix between two
// kernels.
// So are gaps whose idle is mostly a replayed graph's own latency between
// its nodes (issue 38's thirteenth round: a vLLM decode's "37.6 us gap"
// before each all-gather was 28 bubbles of 1-5 us inside one graph, told
// to find the late rank).
bool not_a_gap_to_fix(const DiagnoseContext& c, IdleCause cause) {
  return (cause == IdleCause::kStreamWait && !c.dependency_visible()) ||
         (cause == IdleCause::kKernelLatency && c.graph_launches() > 0);
}

// What the advice can name about a gap beyond the two activities.
struct GapContext {
  std::string site;     // where the activity after the gap was launched (call_sites), "" when unknown
  bool compiled = false;  // launched from code torch.compile already compiled (CompiledFunction in the stack)
  bool copy = false;      // the activity after is a copy (a memcpy, aten::copy_ or clone)
  bool readback = false;  // the activity before is a device→host copy
  std::string awaited;  // the work on another stream the activity after waited for, "" when none
  bool awaited_comm = false;
  HostFrame frame;        // the function (with_stack) or annotation holding most of the gaps on the launching thread
  bool ask_stack = false;  // no Python stack in the trace, and this finding asks for one (host_stack.h)
  // The activity after is a memset or copy that an op makes before its own
  // kernel (cuBLASLt's workspace memset in aten::addmm): that op (the
  // innermost around the launch) and its kernel; "" otherwise. The gap is
  // then the host's way up to that op, with no op between to fuse.
  std::string setup_of;
  std::string setup_kernel;  // as the trace names it (evidence: the views shorten it)
  // The launching thread sat still inside an op through most of the gaps
  // (find_host_stall): off the CPU, not running code to move.
  std::uint32_t stall_op = kNoIndex;  // the op open through the longest stall
  std::int64_t stall_ns = 0;          // that stall
  std::int64_t stall_typical_ns = 0;  // the op's median duration over the trace
  std::int64_t stall_total_ns = 0;    // the stalls inside ops over the gaps
  std::int64_t stall_gaps_ns = 0;     // the gaps searched
  // Without a frame naming it: the outermost CPU op on the launching
  // thread whose calls hold more than half of the gaps' host work
  // (host_op_in_gaps), kNoIndex when none does.
  std::uint32_t host_op = kNoIndex;
  std::int64_t host_op_ns = 0;
  std::int64_t host_op_range_ns = 0;  // the gaps' ranges it was measured in (kernel end to kernel start)
  bool host_op_creates = false;  // it makes a tensor on the CPU (randn, zeros, arange, ...) and launches nothing
};

// torch.compile's compiled code as the trace records it: the region Dynamo
// runs or Inductor's graph call (is_compiled_scope), or the compiled
// autograd function.
bool is_compiled_code_op(std::string_view n) { return is_compiled_scope(n) || n.starts_with("CompiledFunction"); }

// How many different steps `v` holds (sorts it).
std::size_t distinct_steps(std::vector<std::int32_t>& v) {
  std::sort(v.begin(), v.end());
  return static_cast<std::size_t>(std::unique(v.begin(), v.end()) - v.begin());
}

bool is_memset_or_copy(const DeviceOp& op) { return op.cls == DeviceClass::kMemset || op.cls == DeviceClass::kMemcpy; }

bool is_readback(std::string_view name) { return copy_kind(name).direction == CopyDirection::kDtoH; }

// The fix for gaps the launching thread spent sitting still inside ops
// (issue 38's thirteenth round: a T4 Colab MLP's threads sat 1.6 ms in
// aten::linear between its t and addmm, 2 ms in a scalar's empty_strided,
// every step; two reviewers: off-CPU stalls, the DataLoader workers and the
// pin-memory thread contending for a small VM's cores).
std::string stall_advice(const DiagnoseContext& c, const GapContext& x, bool one) {
  std::string s = "The launching thread was off the CPU or blocked, not running code to move: it sat " +
                  format_ns(x.stall_ns) + " inside " + title_name(c.name(x.stall_op)) + " (" +
                  format_ns(x.stall_typical_ns) + " elsewhere in the trace) with nothing recorded under it";
  if (x.stall_total_ns > x.stall_ns) {
    s += " (such stalls: " + format_ns(x.stall_total_ns) + " of " + (one ? "the gap's " : "the gaps' ") +
         format_ns(x.stall_gaps_ns) + ")";
  }
  return s + ". Most often the CPU is oversubscribed (" +
         std::string(c.is_torch() ? "DataLoader workers, the pin-memory thread, " : "worker threads, ") +
         "other processes on too few cores: a small or shared VM): check the CPU load while it runs and keep the "
         "workers below the cores" +
         (c.is_torch() ? std::string(" (num_workers at most the cores less one, torch.set_num_threads)") : "") +
         "; a Python stack would not show it.";
}

// Where the launching thread of each gap (of kMinGapNs or more) sat still:
// the stretches inside the gap's length before the launch, with no event of its
// lane beginning or ending, and the innermost op open through each. A
// stall counts when it reaches kMinStallNs and kStallFactor times the op's
// median duration (a 2 ms aten::mm that takes 68 us elsewhere); the stalls
// are reported when they hold kStallShare of the gaps' time or more.
void find_host_stall(const DiagnoseContext& c, const std::vector<const Gap*>& gaps, GapContext& x) {
  const Trace& t = c.trace;
  const auto& ops = c.host_ops;
  std::int64_t gaps_ns = 0, total = 0, longest = 0;
  std::uint32_t longest_op = kNoIndex;
  std::int64_t longest_typical = 0;
  std::map<StrId, std::int64_t> typical;  // name → median duration
  auto median_of = [&](StrId name) {
    const auto it = typical.find(name);
    if (it != typical.end()) return it->second;
    std::vector<std::int64_t> d;
    for (std::uint32_t e : ops)
      if (t.events.name[e] == name) d.push_back(c.dur(e));
    return typical[name] = lower_median(std::move(d));
  };
  // A first call's set-up shows in its runtime calls (module loading:
  // vLLM's first aten::sort sat 11.5 ms, then spent 3 ms in each
  // cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags as its kernels
  // loaded): an op holding a call of kMinStallNs or more is cold, not stalled.
  auto holds_long_call = [&](std::uint32_t op) {
    bool held = false;
    c.for_each_runtime_in(op, [&](std::uint32_t r) { held = held || c.dur(r) >= kMinStallNs; });
    return held;
  };
  auto first_at = [&](std::int64_t ts) {
    return std::lower_bound(ops.begin(), ops.end(), ts, [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
  };
  for (const Gap* g : gaps) {
    if (g->ns < kMinGapNs) continue;
    sat_acc(gaps_ns, g->ns);
    const std::uint32_t launch = c.device[g->after].launch;
    if (launch == kNoIndex) continue;
    const std::uint32_t lane = t.events.lane[launch];
    // The gap's length, ending at the launch: the host's side of it, also
    // where the device clock runs apart from the host's (a T4's ran 0.35 ms
    // behind, its memset "starting" before its launch).
    const std::int64_t hi = c.ts(launch), lo = hi - (g->range.end - g->range.start);
    if (hi - lo < kMinStallNs) continue;
    std::vector<std::int64_t> marks{lo, hi};
    auto mark = [&](std::int64_t v) {
      if (v > lo && v < hi) marks.push_back(v);
    };
    const auto from = first_at(lo);
    for (auto it = from; it != ops.end() && c.ts(*it) < hi; ++it) {
      if (t.events.lane[*it] != lane) continue;
      mark(c.ts(*it));
      mark(c.end(*it));
    }
    std::size_t back = 0;
    for (auto it = from; it != ops.begin() && back < kStallLookBack; ++back) {
      --it;
      if (t.events.lane[*it] == lane) mark(c.end(*it));
    }
    const auto rt_from = std::lower_bound(c.runtime.begin(), c.runtime.end(), lo,
                                          [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
    for (auto it = rt_from; it != c.runtime.end() && c.ts(*it) < hi; ++it) {
      if (t.events.lane[*it] != lane) continue;
      mark(c.ts(*it));
      mark(c.end(*it));
    }
    if (rt_from != c.runtime.begin() && t.events.lane[*(rt_from - 1)] == lane) mark(c.end(*(rt_from - 1)));
    std::sort(marks.begin(), marks.end());
    for (std::size_t i = 1; i < marks.size(); ++i) {
      const std::int64_t s_lo = marks[i - 1], s_hi = marks[i];
      if (s_hi - s_lo < kMinStallNs) continue;
      // The innermost event open through the stretch: an op (not a step,
      // an annotation or a Python frame, whose own time is the program's).
      std::uint32_t open = kNoIndex;
      back = 0;
      for (auto it = first_at(s_lo + 1); it != ops.begin() && back < kStallLookBack; ++back) {
        --it;
        if (t.events.lane[*it] != lane || c.end(*it) < s_hi) continue;
        open = *it;
        break;
      }
      if (open == kNoIndex || c.kind(open) != EventKind::kCpuOp || holds_long_call(open)) continue;
      const std::int64_t typ = median_of(t.events.name[open]);
      if (typ <= 0 || s_hi - s_lo < kStallFactor * typ) continue;
      sat_acc(total, s_hi - s_lo);
      if (s_hi - s_lo > longest) longest = s_hi - s_lo, longest_op = open, longest_typical = typ;
    }
  }
  if (longest_op == kNoIndex || kStallShare * static_cast<double>(gaps_ns) > static_cast<double>(total)) return;
  x.stall_op = longest_op;
  x.stall_ns = longest;
  x.stall_typical_ns = longest_typical;
  x.stall_total_ns = total;
  x.stall_gaps_ns = gaps_ns;
}

// An op that copies a tensor between devices (or dtypes): .to(), copy_.
bool is_copy_op(std::string_view n) {
  return n == "aten::to" || n == "aten::_to_copy" || n == "aten::copy_" || n == "aten::_copy_from";
}

// In the program's API (DiagnoseContext::is_torch, api).
std::string gap_advice(const DiagnoseContext& c, IdleCause cause, bool comm, const std::string& before,
                       const std::string& after, const GapContext& x) {
  const bool graphs = c.graph_launches() > 0;
  const std::string_view api = c.api();
  const bool torch = c.is_torch();
  const std::string rt = c.is_hip() ? "hip" : "cuda";
  const std::string launched = x.site.empty() ? std::string() : " (launched by " + x.site + ")";
  const std::string readback_note =
      x.readback ? " The device-to-host copy " + before +
                       " before it is a readback the host waits on (a sync): the host computes on the value before it "
                       "launches what follows, so " +
                       (torch ? std::string("copy into pinned memory with non_blocking=True and consume the value "
                                            "later, or pipeline the next batch's input (TorchRec TrainPipelineSparseDist).")
                              : "copy into pinned memory with " + rt + "MemcpyAsync and consume the value later.")
                 : std::string();
  if (comm) {
    return "Find the rank that reaches this collective last (tprof diagnose on the job's trace directory names it) "
           "and fix what it does before it; this rank's GPU waits for its peers (or for the host to launch the "
           "collective), which no change on this rank removes.";
  }
  if (cause == IdleCause::kPeers || (cause == IdleCause::kStreamWait && !x.awaited.empty())) {
    if (!x.awaited.empty() && x.awaited_comm) {
      return after + launched + " waits on " + x.awaited + ", which waits for its peers: find the rank that reaches it last (tprof diagnose on "
             "the job's trace directory) and fix what it does before it, or start it earlier so the wait overlaps "
             "compute." + readback_note;
    }
    if (!x.awaited.empty()) {
      return "Start earlier, or split, " + x.awaited + ", which " + after + launched +
             " waits for (the event behind a " + rt + "StreamWaitEvent), so the wait overlaps compute. "
             "The kernel was launched in time and waited on the device, not on the host.";
    }
    return after + launched + " waits, through another stream, on work that waits for peers: find the rank that "
           "reaches the collectives last (tprof diagnose on the job's trace directory) and fix what it does before "
           "them." + readback_note;
  }
  const bool host_side = cause == IdleCause::kLaunching || cause == IdleCause::kHostWork ||
                         cause == IdleCause::kUnrecorded || (cause_bit(cause) & kBlockedCauses) != 0;
  if (host_side && x.stall_op != kNoIndex) return stall_advice(c, x, false);
  // The stack names the host work in the gaps as something the advice
  // knows (preprocessing, Inductor's wrapper, DDP's buffer broadcast, a
  // DataLoader): its fix, not a guess from the kernels around the gap (a
  // scipy zoom inside the DataLoader is no round trip).
  if (host_side && cause != IdleCause::kUnrecorded && x.frame.found() && x.frame.kind != HostWorkKind::kOther) {
    return host_frame_remedy(c, x.frame) + " The gaps between " + before + " and " + after + " are host time, mostly " +
           host_frame_text(x.frame) + ".";
  }
  // A scalar read whose copy and wait the trace does not record (no
  // runtime call inside it: IBM Spyre's aten::item, 10.6 ms a call while
  // its kernels ran; issue 38's twenty-third round, "runs on the CPU,
  // launching nothing", then "replay the step as a CUDA graph"). It waits
  // for the device; nothing is launched until it returns.
  if (host_side && cause != IdleCause::kUnrecorded && x.host_op != kNoIndex &&
      is_scalar_read(c.name(x.host_op))) {
    return "Read the value less often: " + std::string(c.name(x.host_op)) +
           " (.item()) copies a device value to the host and first waits for the device's queued work; it holds " +
           format_ns(x.host_op_ns) + " of the host time from " + before + " to " + after + launched +
           ", and nothing is launched until it returns. Keep the value on the device and read it once after the "
           "loop, or every few steps.";
  }
  // Copies to the device fill the gaps (the launching ones too: a copy's
  // host side between two launches): what does not change between
  // iterations belongs on the device once, before the loop.
  if (host_side && cause != IdleCause::kUnrecorded && x.host_op != kNoIndex && is_copy_op(c.name(x.host_op))) {
    return "Move the copies out of the loop: " + std::string(c.name(x.host_op)) + " holds " + format_ns(x.host_op_ns) +
           " of the " + format_ns(x.host_op_range_ns) + " from " + before + " to " + after + launched +
           ", the host copying tensors to the device while it idles. Put what does not change between iterations "
           "(weights, constants) on the device once, before the loop, and bring inputs over ahead of use (pinned "
           "memory, non_blocking=True, a prefetching loader).";
  }
  const std::string in_frame =
      x.frame.found() ? " Most of the host time in the gaps is " + host_frame_text(x.frame) + "." : std::string();
  if (x.readback && host_side) {
    return "Take the host round trip out of the step: the host reads back " + before +
           " (a device-to-host copy, which waits for the device), computes on the value and only then launches " +
           after + launched + ". A data-dependent round trip cannot be replayed as a graph or fused: keep the value "
           "on the device, " +
           (torch ? std::string("copy it into pinned memory with non_blocking=True and use it a step later, or pipeline "
                                "the input distribution (TorchRec TrainPipelineSparseDist) so the round trip overlaps "
                                "compute.")
                  : "copy it into pinned memory with " + rt + "MemcpyAsync and use it a step later, so the round trip "
                    "overlaps compute.") +
           in_frame;
  }
  if (host_side && x.site.find("zero_grad") != std::string::npos) {
    // Gradients zeroed one fill kernel per parameter, launched op after op.
    return "Call optimizer.zero_grad(set_to_none=True) (the default since torch 2.0): the per-parameter fills" +
           launched + " and the gaps between them go away, and the next backward writes fresh gradients. Each fill is a "
           "tiny kernel the host launches one by one, slower than the GPU runs them.";
  }
  switch (cause) {
    case IdleCause::kStreamWait:
      return "Start earlier, or split, the work " + after + launched +
             " waits for on another stream (the event behind a " + rt + "StreamWaitEvent), so the wait overlaps compute. "
             "The kernel was launched in time and waited on the device, not on the host.";
    case IdleCause::kBlockedSync:
    case IdleCause::kBlockedCopy:
    case IdleCause::kBlockedAlloc:
    case IdleCause::kBlockedInit:
    case IdleCause::kBlockedLaunchQueue:
    case IdleCause::kBlockedOther:
      return "Remove the blocking call the host sits in between " + before + " and " + after +
             " (sync_api and host_blocked name it and where it runs). The next kernel is launched only when it "
             "returns.";
    case IdleCause::kHostWork:
      if (x.host_op != kNoIndex && x.host_op_creates) {
        const std::string_view op = c.name(x.host_op);
        // torch.randn(..., device=x.device); an in-place fill (normal_,
        // uniform_) on a tensor made on the device.
        const std::string how = op.ends_with("_") ? "fill a tensor made there: torch.empty(..., device=x.device)." +
                                                        std::string(op.substr(6))
                                                  : "torch." + std::string(op.substr(6)) + "(..., device=x.device)";
        return "Create the tensor on the device (" + how + "): the host makes it on the CPU for " + format_ns(x.host_op_ns) +
               " of the gaps between " + before + " and " + after + launched + ", and then copies it over.";
      }
      if (x.host_op != kNoIndex && is_compiled_code_op(c.name(x.host_op))) {
        // torch.compile's compiled code holds the host time: its own launch
        // path, which no step can do without (issue 38's nineteenth round:
        // 2.2 ms before every launch of modded-nanogpt's user-defined
        // Triton kernel, "move it out of the step").
        // The op that launched it: the site's last frame ("Region > kernel_0
        // in \"## Call CompiledFxGraph …\"").
        std::string_view launcher = x.site;
        launcher = launcher.substr(0, launcher.find(" in \""));
        if (const std::size_t last = launcher.rfind(" > "); last != std::string_view::npos) {
          launcher.remove_prefix(last + 3);
        }
        const bool user_triton = !after.starts_with("triton_") && launcher.size() > after.size() + 1 &&
                                 launcher.starts_with(after + "_") &&
                                 launcher.find_first_not_of("0123456789", after.size() + 1) == std::string_view::npos;
        return "Find the host work inside " + std::string(c.name(x.host_op)) + " before " + after + launched + ": " +
               (user_triton ? after + " is a user-defined Triton kernel, and its Python launch path (grid and argument "
                              "set-up, host-side tensor descriptors, autotuning) "
                            : std::string("the compiled code ")) +
               "runs " + format_ns(x.host_op_ns) + " of the gaps on the CPU, launching nothing" +
               (x.frame.found() ? ", inside " + host_frame_text(x.frame) : std::string()) +
               ". Record with_stack=True (or py-spy) to name it, then build once what it rebuilds on every call, or "
               "capture the region in a " + std::string(c.api()) + " graph (mode=\"reduce-overhead\"); it is the "
               "launch path, not work to move out of the step.";
      }
      if (x.host_op != kNoIndex) {
        return "Make " + std::string(c.name(x.host_op)) + " cheaper or move it out of the step: it runs on the CPU, "
               "launching nothing, for " + format_ns(x.host_op_ns) + " of the gaps between " + before + " and " + after +
               launched + (x.frame.found() ? ", inside " + host_frame_text(x.frame) : std::string()) + ".";
      }
      if (x.frame.found()) {
        return "Move the host work between " + before + " and " + after + launched + ", mostly " +
               host_frame_text(x.frame) + ", out of the step or overlap it with device work. The host runs 1 ms or "
               "more without launching anything.";
      }
      return "Move the host work between " + before + " and " + after + launched +
             " out of the step or overlap it with device work (" +
             (torch ? "DataLoader workers, prefetching, a side thread" : "prefetching, a side thread") +
             (x.ask_stack ? "; the trace records no Python stack to name that work, with_stack=True would" : "") +
             "). The host runs 1 ms or more without launching anything.";
    case IdleCause::kUnrecorded:
      return std::string("Record the host side that feeds this GPU (other threads, ") +
             (torch ? "the Python stack, " : "") +
             "the producing process): nothing is recorded on the host while the GPU waits, so the cause lies outside "
             "this trace.";
    default:
      break;
  }
  if (x.compiled) {
    return "Launch " + after + launched + " without the host: the step already runs code torch.compile compiled, "
           "so compile it with mode=\"reduce-overhead\" (" + std::string(api) + " graphs)" +
           (x.copy ? ", and find why the compiled code copies (input mutation or aliasing makes AOTAutograd clone "
                     "inputs; graph breaks split the graph)"
                   : std::string()) +
           ". The host launches op after op slower than the GPU runs them.";
  }
  const std::string blocker = graphs ? std::string() : c.graph_blocker();
  if (!x.setup_of.empty()) {
    // Nothing between the two activities to fuse: the op after the gap
    // starts with its own set-up (a library's memset or copy).
    const std::string why = "the gaps are the host's way up to " + x.site + ", whose first device activity is " +
                            after + ", set-up before its kernel " + title_name(x.setup_kernel) +
                            ", so there is no op between " + before + " and it to fuse";
    // A step that waits for the GPU mid-way cannot be a graph yet: say so
    // instead of leading with one.
    if (!blocker.empty()) {
      return "The host launches op after op slower than the GPU runs them: " + why + ". " + blocker;
    }
    return (graphs ? "Move " + x.site + " into the graph the step already replays"
                   : "Replay the step as a " + std::string(api) + " graph (" + c.graph_how() + ")") +
           ": " + why + ". The host launches op after op slower than the GPU runs them.";
  }
  if (!blocker.empty()) {
    return "Fuse the ops between " + before + " and " + after + launched + " (" + c.fuse_how() +
           "). The host launches op after op slower than the GPU runs them, so " + after + " starts late. " + blocker;
  }
  return (graphs ? std::string("Move the ops between ") + before + " and " + after + launched +
                       " into the graph the step already replays, or fuse them (" + c.fuse_how() + ")"
                 : "Replay the step as a " + std::string(api) + " graph (" + c.graph_how() + ") or fuse the ops between " +
                       before + " and " + after + launched + " (" + c.fuse_how() + ")") +
         ". The host launches op after op slower than the GPU runs them, so " + after + " starts late.";
}

// The context of the gap `g`: where its second activity was launched, and
// the work on another stream of its device that ended last inside the gap
// (what it waited for).
GapContext gap_context(const DiagnoseContext& c, const Gap& g) {
  GapContext x;
  const DeviceOp& before = c.device[g.before];
  const DeviceOp& after = c.device[g.after];
  x.readback = is_readback(c.name(before.event));
  std::vector<std::uint32_t> events;
  if (after.launch != kNoIndex) events.push_back(after.launch);
  const DeviceOp* awaited = nullptr;
  for (const DeviceOp& op : c.device) {
    if (op.start >= after.start) break;
    if (op.device != after.device || op.lane == after.lane) continue;
    if (op.end <= g.range.start || op.end > after.start) continue;
    // The last work to end before it started: on HTA's trace_diff the
    // permute after a lengths readback starts the very µs the embedding
    // backward on the compute stream ends.
    if (awaited == nullptr || op.end > awaited->end) awaited = &op;
  }
  if (awaited != nullptr && awaited->launch != kNoIndex) events.push_back(awaited->launch);
  const auto sites = call_sites(c, events);
  if (after.launch != kNoIndex) {
    const auto it = sites.find(after.launch);
    if (it != sites.end()) x.site = it->second;
    x.compiled = x.site.find("CompiledFunction") != std::string::npos ||
                 x.site.find("Torch-Compiled Region") != std::string::npos;
    x.copy = c.name(after.event).find("Memcpy") != std::string_view::npos ||
             x.site.find("copy_") != std::string::npos || x.site.find("clone") != std::string::npos;
  }
  // A library's set-up activity: the op that launched it also launches the
  // next activity on its stream (issue 38, sixth round: the Memset before
  // each attention out-projection's GEMM is aten::addmm's, not an op to fuse).
  if (after.launch != kNoIndex && is_memset_or_copy(after)) {
    const std::uint32_t owner = c.enclosing_op(after.launch, /*skip_views=*/false);
    const DeviceOp* next = nullptr;
    for (std::size_t i = g.after + 1; i < c.device.size() && i < g.after + 4096; ++i) {
      if (c.device[i].lane == after.lane) {
        next = &c.device[i];
        break;
      }
    }
    if (owner != kNoIndex && next != nullptr && next->launch != kNoIndex &&
        !is_memset_or_copy(*next) && c.ts(next->launch) >= c.ts(owner) &&
        c.end(next->launch) <= c.end(owner)) {
      x.setup_of = title_name(c.name(owner));
      x.setup_kernel = std::string(c.name(next->event));
    }
  }
  if (awaited != nullptr) {
    x.awaited = title_name(c.name(awaited->event));
    x.awaited_comm = awaited->cls == DeviceClass::kComm;
    if (awaited->launch != kNoIndex) {
      const auto it = sites.find(awaited->launch);
      if (it != sites.end() && !it->second.empty()) x.awaited += " (in " + it->second + ")";
    }
    x.awaited += " on " + c.lane_label(awaited->lane);
  }
  return x;
}

// A CPU op that makes a tensor: a random draw, a constant fill, a range
// (what torch.randn(..., device=...) would make on the device instead).
bool creates_tensor(std::string_view n) {
  for (std::string_view k : {"aten::randn", "aten::rand", "aten::randint", "aten::randperm", "aten::normal",
                             "aten::uniform", "aten::zeros", "aten::ones", "aten::full", "aten::arange",
                             "aten::linspace", "aten::eye", "aten::bernoulli"}) {
    if (n.starts_with(k)) return true;
  }
  return false;
}

// The outermost CPU op on `lane` whose calls hold more than half of
// `ranges` (merged): x.host_op. Where the gaps' host work is one op's
// (issue 38's nineteenth round: torch.randn on the CPU, 940 ms of each
// 988 ms gap before its copy to a Cambricon MLU, was "host work ... the
// trace records no Python stack to name it").
void host_op_in_gaps(const DiagnoseContext& c, std::uint32_t lane, const std::vector<Interval>& ranges,
                     GapContext& x) {
  const std::int64_t total = total_length(ranges);
  if (total <= 0 || lane == kNoIndex) return;
  std::map<StrId, std::pair<std::int64_t, std::uint32_t>> held;  // name -> (time in ranges, longest call)
  std::int64_t open_end = INT64_MIN;
  for (const std::uint32_t e : c.host_ops) {
    if (c.trace.events.lane[e] != lane || c.kind(e) != EventKind::kCpuOp || c.ts(e) < open_end) continue;
    open_end = c.end(e);
    const std::int64_t in = covered_within(ranges, c.ts(e), c.end(e));
    if (in <= 0) continue;
    auto& [ns, longest] = held[c.trace.events.name[e]];
    sat_acc(ns, in);
    if (longest == 0 || c.dur(e) > c.dur(longest)) longest = e;
  }
  for (const auto& [name, v] : held) {
    if (sat_mul(2, v.first) > total && v.first > x.host_op_ns) {
      x.host_op = v.second;
      x.host_op_ns = v.first;
      x.host_op_range_ns = total;
    }
  }
  if (x.host_op == kNoIndex) return;
  // Its own device work: a launch inside it makes it no CPU-only op.
  bool launches = false;
  c.for_each_runtime_in(x.host_op, [&](std::uint32_t) { launches = true; });
  x.host_op_creates = !launches && creates_tensor(c.name(x.host_op));
}

// Names the host work in `gaps` (those of kMinGapNs or more) from the stack
// (host_stack.h), on the thread that launched most of the activities after
// them: x.frame, with evidence host_frame, host_frame_ns, host_work_kind.
// Host work no frame names in a trace without a Python stack: the evidence
// says so, and the first such finding asks for one (x.ask_stack).
void name_host_work(const DiagnoseContext& c, const std::vector<const Gap*>& gaps, IdleCause cause,
                    const std::vector<Finding>& earlier, Finding& f, GapContext& x) {
  std::vector<Interval> ranges;
  std::map<std::uint32_t, std::size_t> lanes;
  for (const Gap* g : gaps) {
    if (g->ns < kMinGapNs) continue;
    ranges.push_back(g->range);
    const std::uint32_t launch = c.device[g->after].launch;
    if (launch != kNoIndex) ++lanes[c.trace.events.lane[launch]];
  }
  std::uint32_t lane = kNoIndex;
  std::size_t most = 0;
  for (const auto& [l, n] : lanes) {
    if (n > most) {
      lane = l;
      most = n;
    }
  }
  if (lane == kNoIndex) lane = launching_lane(c);
  const std::vector<Interval> merged = merge_intervals(std::move(ranges));
  // A launch recorded on no CPU thread (a PrivateUse1 backend's driver
  // calls on the device's own row): the CPU thread whose ops hold most of
  // the gaps (issue 38's twenty-third round: an IBM Spyre benchmark's 125 ms
  // gaps, three weight uploads in aten::to each, "the trace records no
  // Python stack to name that work").
  if (lane == kNoIndex || lane >= c.trace.lanes.size() || c.trace.lanes[lane].kind != LaneKind::kCpu) {
    std::map<std::uint32_t, std::int64_t> held;
    for (const std::uint32_t e : c.host_ops) {
      if (c.kind(e) == EventKind::kCpuOp) sat_acc(held[c.trace.events.lane[e]], covered_within(merged, c.ts(e), c.end(e)));
    }
    std::int64_t best = 0;
    for (const auto& [l, ns] : held) {
      if (ns > best) {
        best = ns;
        lane = l;
      }
    }
  }
  x.frame = host_frame(c, lane, merged);
  // Gaps of per-op launch overhead (launching) lie inside whatever launches
  // the ops: the frame says no more than "launched by", unless it is a kind
  // the advice knows (Inductor's wrapper). Host work (1 ms or more without a
  // launch) is named by its frame, whatever it is.
  const bool host_side = cause == IdleCause::kLaunching || cause == IdleCause::kHostWork ||
                         (cause_bit(cause) & kBlockedCauses) != 0;
  if (!host_side || (cause != IdleCause::kHostWork && x.frame.kind == HostWorkKind::kOther)) x.frame = HostFrame{};
  if (host_side || cause == IdleCause::kUnrecorded) {
    find_host_stall(c, gaps, x);
    if (x.stall_op != kNoIndex) {
      f.evidence.event("host_stall_in", c.ref(x.stall_op))
          .num("host_stall_ns", x.stall_ns)
          .num("host_stall_op_median_ns", x.stall_typical_ns)
          .num("host_stalls_ns", x.stall_total_ns);
    }
  }
  if (x.frame.found()) {
    f.evidence.text("host_frame", x.frame.name)
        .num("host_frame_ns", x.frame.held_ns)
        .text("host_work_kind", host_work_kind_id(x.frame.kind))
        .event("host_frame_event", c.ref(x.frame.event));
    // An annotation of no kind the advice knows (a module's forward) says
    // where, not what: the op inside it holding the gaps says what.
    if (cause == IdleCause::kHostWork && x.frame.annotation && x.frame.kind == HostWorkKind::kOther) {
      host_op_in_gaps(c, lane, merged, x);
      if (x.host_op != kNoIndex) f.evidence.event("host_op", c.ref(x.host_op)).num("host_op_ns", x.host_op_ns);
    }
  } else if (cause == IdleCause::kHostWork) {
    host_op_in_gaps(c, lane, merged, x);
    if (x.host_op != kNoIndex) {
      f.evidence.event("host_op", c.ref(x.host_op)).num("host_op_ns", x.host_op_ns);
    } else if (!has_python_stack(c)) {
      x.ask_stack = note_no_stack(c, earlier, f);
    }
  } else if (cause == IdleCause::kLaunching) {
    // Launch gaps that a copy op or a scalar read holds most of (a copy's
    // host side between launches; a read that waits for the device):
    // named only then.
    host_op_in_gaps(c, lane, merged, x);
    if (x.host_op != kNoIndex && !is_copy_op(c.name(x.host_op)) && !is_scalar_read(c.name(x.host_op))) {
      x.host_op = kNoIndex;
    }
    if (x.host_op != kNoIndex) f.evidence.event("host_op", c.ref(x.host_op)).num("host_op_ns", x.host_op_ns);
  }
}

// The activity after a gap as a title names it: "Memset (Device) of
// aten::addmm" for an op's set-up activity.
std::string after_text(const std::string& after, const GapContext& x) {
  return x.setup_of.empty() ? after : after + " of " + x.setup_of;
}

void add_setup_evidence(Finding& f, const GapContext& x) {
  if (!x.setup_of.empty()) f.evidence.text("after_is_setup_of", x.setup_of).text("setup_kernel", x.setup_kernel);
}

}  // namespace

void rule_kernel_gap(const DiagnoseContext& c, std::vector<Finding>* out) {
  // A trace of graph capture holds the eager warm-up runs before each
  // capture: their gaps are start-up, and graphs are what it is making
  // (sync_api says so and points at the replay).
  if (c.graph_captures() > 0) return;
  const Trace& t = c.trace;
  const bool has_steps = !c.steps.steps.empty();
  const bool by_step = c.steps.steps.size() >= kMinUnits;
  // One pass in start order: the previous activity on each stream.
  std::vector<std::size_t> prev(t.lanes.size(), SIZE_MAX);
  std::vector<std::int64_t> prev_end(t.lanes.size(), INT64_MIN);
  using Key = std::tuple<std::uint32_t, StrId, StrId>;
  std::map<Key, std::vector<Gap>> pairs;
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    const std::size_t p = prev[op.lane];
    // Only gaps inside one step (both launched by it), or anywhere without steps.
    if (p != SIZE_MAX && (!has_steps || (op.step >= 0 && c.device[p].step == op.step))) {
      const std::int64_t gap =
          op.start - prev_end[op.lane] - c.device_busy_ns(op.device, prev_end[op.lane], op.start);
      // Gaps between two collectives are the collectives' schedule: the
      // stream waits for the next one to be launched or for the peers (the
      // partition's peers cause), not a gap between kernels.
      const bool both_comm = op.cls == DeviceClass::kComm && c.device[p].cls == DeviceClass::kComm;
      if (gap > 0 && !both_comm) {
        pairs[{op.lane, t.events.name[c.device[p].event], t.events.name[op.event]}].push_back(
            {gap, op.step, p, i, {prev_end[op.lane], op.start}, op.start - prev_end[op.lane]});
      }
    }
    if (p == SIZE_MAX || op.end >= prev_end[op.lane]) {
      prev[op.lane] = i;
      prev_end[op.lane] = op.end;
    }
  }

  struct Recurring {
    const Key* key;
    std::int64_t median, total, long_median;
    std::size_t hits, units;
    std::vector<const Gap*> gaps;  // the pair's gaps less its one-offs (the one-off finding reports those)
    // A pair's long gaps that recur (kRecurringOneOffShare): `gaps` are
    // those only, `median` the pair's usual gap.
    bool spikes = false;
    // Pairs merged into this one: the gaps before one activity after
    // several different ones (key's `before` is the pair with the most).
    std::size_t befores = 1;
  };
  const std::size_t nsteps = c.steps.steps.size();
  std::vector<Recurring> recurring;
  std::vector<std::pair<Gap, std::int64_t>> one_offs;  // gap, the pair's median
  // Per one-off: its size, and whether its pair's gaps before it are long
  // too (the pair's first calls).
  std::vector<std::pair<std::int64_t, bool>> first_calls;
  // One-offs of the GPU whose stream waits as long in most steps.
  struct Exposed {
    Gap gap;
    std::int64_t median, stream_median;
    std::size_t steps;
  };
  std::vector<Exposed> exposed;
  for (const auto& [key, gaps] : pairs) {
    if (gaps.size() < kMinUnits) continue;
    std::vector<std::int64_t> ns;
    for (const Gap& g : gaps) ns.push_back(g.ns);
    const std::int64_t med = lower_median(ns);
    // As reported: the mean of the two middle values for an even count (issue
    // 38's sixth round: "102.2 us (median)" of 24 gaps whose median is
    // 106.5 us); `med`, one of the gaps, sets the one-off threshold.
    const std::int64_t shown_med = mean_median(ns);
    std::size_t hits = 0;
    std::int64_t total = 0;
    std::vector<const Gap*> outliers;
    for (const Gap& g : gaps) {
      if (g.ns >= kMinGapNs && static_cast<double>(g.ns) >= kOneOffFactor * static_cast<double>(med)) outliers.push_back(&g);
    }
    const double max_one_offs = std::max(1.0, kOneOffShare * static_cast<double>(gaps.size()));
    // Too many gaps 3x the median (a pair whose gaps alternate short and
    // long): the rare ones are then those kExtremeFactor times it (issue
    // 38's thirteenth round: one 334 ms gap, nothing recorded, among 18 of
    // 43-639 us made a readback pattern's "up to 337.6 ms").
    if (static_cast<double>(outliers.size()) > max_one_offs && gaps.size() >= kExtremeMinGaps) {
      std::vector<const Gap*> extreme;
      for (const Gap* g : outliers) {
        if (static_cast<double>(g->ns) >= kExtremeFactor * static_cast<double>(std::max<std::int64_t>(1, med))) {
          extreme.push_back(g);
        }
      }
      if (!extreme.empty() && static_cast<double>(extreme.size()) <= max_one_offs) outliers = std::move(extreme);
    }
    const bool has_one_offs = !outliers.empty() && static_cast<double>(outliers.size()) <= max_one_offs;
    // Rare for the pair, yet back in most steps: a per-step cause, not a
    // one-off (a stall once a step between the same two kernels).
    std::vector<std::int32_t> spike_steps;
    for (const Gap* g : outliers) spike_steps.push_back(g->step);
    std::sort(spike_steps.begin(), spike_steps.end());
    spike_steps.erase(std::unique(spike_steps.begin(), spike_steps.end()), spike_steps.end());
    const bool spikes_recur = has_one_offs && has_steps && spike_steps.size() >= kRecurringOneOffMinSteps &&
                              static_cast<double>(spike_steps.size()) >= kRecurringOneOffShare * static_cast<double>(nsteps);
    std::vector<std::int32_t> hit_steps, all_steps;
    std::vector<std::int64_t> long_gaps;
    std::vector<const Gap*> kept;
    for (const Gap& g : gaps) {
      all_steps.push_back(g.step);
      // A one-off is the one-off finding's: not counted in the pattern too.
      if (has_one_offs && std::find(outliers.begin(), outliers.end(), &g) != outliers.end()) continue;
      kept.push_back(&g);
      if (g.ns >= kMinGapNs) {
        ++hits;
        sat_acc(total, g.ns);
        hit_steps.push_back(g.step);
        long_gaps.push_back(g.ns);
      }
    }
    std::size_t units = gaps.size();
    if (by_step) {
      hits = distinct_steps(hit_steps);
      units = distinct_steps(all_steps);
    }
    if (units >= kMinUnits && static_cast<double>(hits) >= kRecurringShare * static_cast<double>(units)) {
      recurring.push_back({&key, shown_med, total, mean_median(std::move(long_gaps)), hits, units, std::move(kept)});
    }
    if (spikes_recur) {
      std::vector<std::int64_t> spike_ns;
      std::int64_t spike_total = 0;
      for (const Gap* g : outliers) {
        spike_ns.push_back(g->ns);
        sat_acc(spike_total, g->ns);
      }
      recurring.push_back({&key, shown_med, spike_total, mean_median(std::move(spike_ns)), spike_steps.size(), nsteps,
                           outliers, true});
    } else if (has_one_offs) {
      // The stream waits about as long at this place in most steps, and
      // other streams' work covers the wait in the others (issue 38
      // review: DDP's mul -> DtoD copy waits ~2 ms in each of 3 steps,
      // hidden by the allreduce in two): a per-step wait this step
      // exposed, not a one-off to record more steps for. Per outlier: the
      // pair's gaps whose stream gap is at least half its own (and
      // kMinGapNs), their steps and median. Those are a prefix of the
      // gaps by stream gap, longest first, so outliers taken by falling
      // threshold extend one prefix (no scan of the pair per outlier).
      std::vector<std::size_t> waiting_steps(outliers.size(), 0);
      std::vector<std::int64_t> waiting_median(outliers.size(), 0);
      if (has_steps) {
        std::vector<std::int64_t> by_wait;
        for (const Gap& o : gaps) by_wait.push_back(o.stream_ns);
        std::vector<std::size_t> order(gaps.size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return by_wait[a] > by_wait[b]; });
        const auto threshold = [](const Gap* g) { return std::max(kMinGapNs, g->stream_ns / 2); };
        std::vector<std::size_t> by_threshold(outliers.size());
        for (std::size_t i = 0; i < by_threshold.size(); ++i) by_threshold[i] = i;
        std::sort(by_threshold.begin(), by_threshold.end(),
                  [&](std::size_t a, std::size_t b) { return threshold(outliers[a]) > threshold(outliers[b]); });
        std::vector<char> seen(nsteps + 1, 0);  // by step index + 1 (-1: outside the steps)
        std::size_t prefix = 0, distinct = 0;
        for (const std::size_t k : by_threshold) {
          const std::int64_t at_least = threshold(outliers[k]);
          for (; prefix < order.size() && by_wait[order[prefix]] >= at_least; ++prefix) {
            char& s = seen[static_cast<std::size_t>(gaps[order[prefix]].step + 1)];
            distinct += s == 0;
            s = 1;
          }
          waiting_steps[k] = distinct;
          // lower_median of the prefix: ascending index (prefix-1)/2.
          if (prefix > 0) waiting_median[k] = by_wait[order[prefix - 1 - (prefix - 1) / 2]];
        }
      }
      for (std::size_t k = 0; k < outliers.size(); ++k) {
        const Gap* g = outliers[k];
        if (has_steps && waiting_steps[k] >= kRecurringOneOffMinSteps &&
            static_cast<double>(waiting_steps[k]) >= kRecurringOneOffShare * static_cast<double>(nsteps)) {
          exposed.push_back({*g, shown_med, waiting_median[k], waiting_steps[k]});
        } else {
          one_offs.push_back({*g, shown_med});
          // Before the pair's usual gaps: only long ones of the pair precede it.
          bool early = true;
          for (const Gap& before : gaps) {
            if (&before == g) break;
            early = early && std::find(outliers.begin(), outliers.end(), &before) != outliers.end();
          }
          first_calls.emplace_back(g->ns, early);
        }
      }
    }
  }

  // One activity after the gaps, several before: the gaps are before that
  // activity, whatever ran before it (its launch path costs the same each
  // time). Merged into one pattern (issue 38's nineteenth round: a
  // user-defined Triton kernel after three different kernels, 2.2 ms
  // before each of its 84 launches, was three findings naming the kernels
  // before it).
  {
    std::map<std::pair<std::uint32_t, StrId>, std::vector<std::size_t>> by_after;
    for (std::size_t i = 0; i < recurring.size(); ++i) {
      const auto& [lane, before, after] = *recurring[i].key;
      if (!recurring[i].spikes && !is_comm_kernel(t.str(after))) by_after[{lane, after}].push_back(i);
    }
    std::vector<char> merged_away(recurring.size(), 0);
    for (const auto& [where, all_members] : by_after) {
      if (all_members.size() < 2) continue;
      std::size_t lead = all_members.front();
      for (const std::size_t i : all_members) {
        if (recurring[i].total > recurring[lead].total) lead = i;
      }
      // A stall of kMinStallNs or more before one activity: its launch path.
      // Shorter gaps are the host's ordinary work between two ops, which
      // the pair says more about.
      if (recurring[lead].long_median < kMinStallNs) continue;
      // Gaps of about the same length as the lead pair's: one cost paid
      // before the activity, not different host work after each kernel.
      std::vector<std::size_t> members;
      for (const std::size_t i : all_members) {
        const double a = static_cast<double>(recurring[i].long_median);
        const double b = static_cast<double>(recurring[lead].long_median);
        if (a * kSameCostFactor >= b && b * kSameCostFactor >= a) members.push_back(i);
      }
      if (members.size() < 2) continue;
      Recurring m = recurring[lead];
      m.gaps.clear();
      m.total = 0;
      m.befores = members.size();
      std::vector<std::int64_t> all_ns, long_ns;
      std::vector<std::int32_t> hit_steps, all_steps;
      for (const std::size_t i : members) {
        for (const Gap* g : recurring[i].gaps) {
          m.gaps.push_back(g);
          all_ns.push_back(g->ns);
          all_steps.push_back(g->step);
          if (g->ns >= kMinGapNs) {
            long_ns.push_back(g->ns);
            hit_steps.push_back(g->step);
            sat_acc(m.total, g->ns);
          }
        }
        if (i != lead) merged_away[i] = 1;
      }
      std::sort(m.gaps.begin(), m.gaps.end(), [](const Gap* a, const Gap* b) { return a->after < b->after; });
      m.median = mean_median(std::move(all_ns));
      m.long_median = mean_median(std::move(long_ns));
      if (by_step) {
        m.hits = distinct_steps(hit_steps);
        m.units = std::max(m.units, distinct_steps(all_steps));
      } else {
        m.hits = hit_steps.size();
        m.units = all_steps.size();
      }
      recurring[lead] = std::move(m);
    }
    std::size_t k = 0;
    for (std::size_t i = 0; i < recurring.size(); ++i) {
      if (merged_away[i]) continue;
      if (k != i) recurring[k] = std::move(recurring[i]);  // (a self-move would empty its gaps)
      ++k;
    }
    recurring.resize(k);
  }

  const char* unit = by_step ? "steps" : "occurrences";
  const std::int64_t window = c.window_ns();
  // Precondition (impact): the pattern's gaps add up to kMinShare of the
  // window; a recurring 30 µs gap in a 10 ms step is not worth a line.
  std::erase_if(recurring, [&](const Recurring& r) {
    return static_cast<double>(r.total) < kMinShare * static_cast<double>(window);
  });
  std::sort(recurring.begin(), recurring.end(), [](const Recurring& a, const Recurring& b) { return a.total > b.total; });
  if (recurring.size() > kMaxRecurring) recurring.resize(kMaxRecurring);
  for (const Recurring& r : recurring) {
    const auto& [lane, before, after] = *r.key;
    std::vector<EventRef> refs;
    std::vector<std::int64_t> sizes;
    const Gap* largest = r.gaps.front();
    for (const Gap* g : r.gaps) {
      if (g->ns > largest->ns) largest = g;
      if (sizes.size() < 100) sizes.push_back(g->ns);
    }
    const std::vector<const Gap*>& listed = r.gaps;
    Finding f;
    f.id = "kernel_gap";
    set_idle_claim(f, gap_claim(c, listed, *out));
    // What it prints as impact (its claim, after earlier findings) meets
    // the same minimum as its gaps.
    if (static_cast<double>(f.idle_ns) < kMinShare * static_cast<double>(window)) continue;
    f.severity = static_cast<double>(f.idle_ns) >= kWarnShare * static_cast<double>(window) ? FindingSeverity::kWarning
                                                                                            : FindingSeverity::kInfo;
    // The title quotes the gaps the finding is about (those of kMinGapNs or
    // more): a pair that is back to back but for one long gap a step is not
    // "a recurring gap of 1 ns". It is set once the context below names the
    // activity after; names, not the structured bindings, go into the
    // lambda (clang 14 refuses to capture a binding).
    const std::string before_name =
        r.befores > 1 ? "any of " + std::to_string(r.befores) + " kernels" : title_name(t.str(before));
    const std::string lane_name = c.lane_label(lane);
    auto recurring_title = [&](const std::string& after_text) {
      if (r.spikes) {
        // Far above the pair's usual gap, but in most steps: what a step
        // loses each time, not a one-off.
        return "Recurring GPU gap of " + format_ns(r.long_median) + " (median) between " + before_name +
               " and " + after_text + " in " + std::to_string(r.hits) + " of " + std::to_string(r.units) + " steps" +
               (r.hits != r.gaps.size() ? ", " + std::to_string(r.gaps.size()) + " gaps" : "") + ", usually " +
               format_ns(r.median) + " (" + lane_name + ")";
      }
      return "Recurring GPU gap of " + format_ns(r.long_median) + " (median) " +
             (r.befores > 1 ? "before " + after_text + ", after " + before_name + ","
                            : "between " + before_name + " and " + after_text) +
             " in " + std::to_string(r.hits) + " of " + std::to_string(r.units) + " " + unit +
             (r.units != r.gaps.size() ? ", " + std::to_string(r.gaps.size()) + " gaps" : "") + " (" +
             lane_name + ")";
    };
    f.evidence.text("pattern", "recurring")
        .text("lane", c.lane_label(lane))
        .text("before", std::string(t.str(before)))
        .text("after", std::string(t.str(after)))
        .num("kernels_before", static_cast<std::int64_t>(r.befores))
        .num("median_gap_ns", r.median)
        .num("median_long_gap_ns", r.long_median)
        .num("max_gap_ns", largest->ns)
        .num("total_gap_ns", r.total)
        .num("occurrences", static_cast<std::int64_t>(r.hits))
        .num("units", static_cast<std::int64_t>(r.units))
        .text("unit", r.spikes ? "steps" : unit)
        .num("gaps", static_cast<std::int64_t>(r.gaps.size()))
        .ints("gaps_ns", sizes)
        .event("kernel_before", c.ref(c.device[largest->before].event))
        .event("kernel_after", c.ref(c.device[largest->after].event));
    if (c.device[largest->after].launch != kNoIndex) f.evidence.event("launch_after", c.ref(c.device[largest->after].launch));
    if (r.spikes) f.evidence.text("shape", "long_gap_in_most_steps").num("usual_gap_ns", r.median);
    const bool comm = is_comm_kernel(t.str(before)) || is_comm_kernel(t.str(after));
    // The advice speaks of where most of the pattern's gap time is
    // launched, not of its largest gap: resnet50's 962 Fill -> Fill gaps
    // are 160 zero_grad fills a step and one backward seed
    // (aten::ones_like > aten::fill_), whose gap is the largest (review
    // round 5, S1).
    const Gap* typical = largest;
    std::int64_t typical_gaps = 0;
    {
      std::vector<std::uint32_t> launches;
      for (const Gap* g : r.gaps) {
        if (c.device[g->after].launch != kNoIndex) launches.push_back(c.device[g->after].launch);
      }
      const auto sites = call_sites(c, std::move(launches));
      struct Site {
        std::int64_t total = 0, gaps = 0;
        const Gap* largest = nullptr;
      };
      std::map<std::string, Site> by_site;  // ordered: ties go to the first site by name
      for (const Gap* g : r.gaps) {
        const auto it = sites.find(c.device[g->after].launch);
        if (it == sites.end() || it->second.empty()) continue;
        Site& s = by_site[it->second];
        sat_acc(s.total, g->ns);
        ++s.gaps;
        if (s.largest == nullptr || g->ns > s.largest->ns) s.largest = g;
      }
      const Site* most = nullptr;
      for (const auto& [site, s] : by_site) {
        if (most == nullptr || s.total > most->total) most = &s;
      }
      if (most != nullptr) {
        typical = most->largest;
        typical_gaps = most->gaps;
      }
    }
    GapContext x = gap_context(c, *typical);
    if (!x.site.empty()) {
      f.evidence.text("launched_by", x.site);
      if (typical_gaps > 0) f.evidence.num("gaps_launched_there", typical_gaps);
    }
    add_setup_evidence(f, x);
    f.title = recurring_title(after_text(title_name(t.str(after)), x));
    if (!x.awaited.empty()) {
      f.evidence.text("awaited", x.awaited);
      // The claim that it waits on another stream, against the causal
      // graph: the stream-wait edge into the activity after the gap.
      add_waits_for(c, f.evidence, c.device[typical->after].event, EdgeType::kStreamWait);
    }
    const IdleCause cause = add_idle_evidence(c, listed, f);
    if (not_a_gap_to_fix(c, cause)) continue;
    // Nor is a pattern whose usual gaps (up to twice the median) are: one
    // large gap among them (a start-up stall, the profiler's buffer
    // request) can hold most of the time while every other occurrence is a
    // graph's latency between its nodes (issue 38's twenty-second round:
    // SGLang's decode on an H200, "a recurring gap of 168.2 us" on a side
    // stream, nine of ten the sub-microsecond bubbles of the replay running
    // meanwhile, the tenth the first replay's upload).
    if (!r.spikes) {
      std::vector<Interval> usual;
      for (const Gap* g : listed) {
        if (g->ns >= kMinGapNs && g->ns <= sat_mul(2, r.median)) usual.push_back(g->range);
      }
      if (!usual.empty() &&
          not_a_gap_to_fix(c, dominant_cause(idle_by_cause(c.idle(), merge_intervals(std::move(usual)))))) {
        continue;
      }
    }
    name_host_work(c, listed, cause, *out, f, x);
    std::int64_t compiling_ns = -1;  // the compile frames' part of the gaps, where it is not nearly all
    if (x.frame.found() && (x.frame.kind == HostWorkKind::kCompile || x.frame.kind == HostWorkKind::kJitCompile)) {
      // Gaps that recur inside one compilation (Inductor's pattern matcher
      // tracing example tensors: 23 copies, issue 38's sixth round; Triton
      // compiling a MoE kernel twice, the eighth) are compile time, not a
      // per-step pattern.
      const bool jit = x.frame.kind == HostWorkKind::kJitCompile;
      f.title = std::string(jit ? "GPU gaps while Triton compiles kernels: " : "GPU gaps while torch.compile compiles: ") +
                std::to_string(r.gaps.size()) + " of " +
                format_ns(r.long_median) + " (median) between " + title_name(t.str(before)) + " and " +
                title_name(t.str(after)) + ", " + format_ns(r.total) + " in all";
      // The compile frames' own share of the gaps: what leaving the
      // compilation out of the recording removes (issue 38's eighth round:
      // 336 ms of SGLang's 412 ms of gaps, four of its six gaps none).
      compiling_ns = std::min(r.total, x.frame.held_ns);
      if (static_cast<double>(compiling_ns) < 0.9 * static_cast<double>(r.total)) {
        f.title += ", " + format_ns(compiling_ns) + " of it while " + (jit ? "Triton compiles" : "it compiles");
      } else {
        compiling_ns = -1;
      }
      f.title += " (" + c.lane_label(lane) + ")";
      f.evidence.text("during", jit ? "jit_compile" : "compile");
    }
    f.advice = gap_advice(c, cause, comm, before_name, title_name(t.str(after)), x);
    f.impact_ns = compiling_ns >= 0 ? std::min(f.idle_ns, compiling_ns) : f.idle_ns;
    out->push_back(std::move(f));
  }

  std::sort(exposed.begin(), exposed.end(), [](const Exposed& a, const Exposed& b) { return a.gap.ns > b.gap.ns; });
  if (exposed.size() > kMaxRecurring) exposed.resize(kMaxRecurring);
  for (const Exposed& w : exposed) {
    const Gap& g = w.gap;
    Finding f;
    f.id = "kernel_gap";
    set_idle_claim(f, gap_claim(c, {&g}, *out));
    if (static_cast<double>(f.idle_ns) < kMinShare * static_cast<double>(window)) continue;
    f.severity = static_cast<double>(f.idle_ns) >= kWarnShare * static_cast<double>(window) ? FindingSeverity::kWarning
                                                                                            : FindingSeverity::kInfo;
    const std::string before = title_name(c.name(c.device[g.before].event));
    const std::string after = title_name(c.name(c.device[g.after].event));
    const std::string lane = c.lane_label(c.device[g.after].lane);
    f.title = "GPU gap of " + format_ns(g.ns) + " in step " + std::to_string(c.step_number(g.step)) + " between " +
              before + " and " + after + ": the stream waits there in " + std::to_string(w.steps) + " of " +
              std::to_string(nsteps) + " steps (median " + format_ns(w.stream_median) +
              "), other streams' work covering it in the rest (" + lane + ")";
    f.evidence.text("pattern", "per_step_wait")
        .text("lane", lane)
        .num("gap_ns", g.ns)
        .num("stream_gap_ns", g.stream_ns)
        .num("median_stream_gap_ns", w.stream_median)
        .num("usual_gap_ns", w.median)
        .num("steps_waiting", static_cast<std::int64_t>(w.steps))
        .num("steps", static_cast<std::int64_t>(nsteps))
        .num("step", c.step_number(g.step))
        .event("kernel_before", c.ref(c.device[g.before].event))
        .event("kernel_after", c.ref(c.device[g.after].event));
    GapContext x = gap_context(c, g);
    if (!x.site.empty()) f.evidence.text("launched_by", x.site);
    add_setup_evidence(f, x);
    const IdleCause cause = add_idle_evidence(c, {&g}, f);
    if (not_a_gap_to_fix(c, cause)) continue;
    name_host_work(c, {&g}, cause, *out, f, x);
    const bool comm = is_comm_kernel(c.name(c.device[g.before].event)) || is_comm_kernel(c.name(c.device[g.after].event));
    f.advice = "A per-step wait, not a one-off: " + after + " starts about " + format_ns(w.stream_median) +
               " after " + before + " on its stream in " + std::to_string(w.steps) + " of " + std::to_string(nsteps) +
               " steps; in the others another stream's work runs meanwhile, in this step the GPU idled. " +
               gap_advice(c, cause, comm, before, after, x);
    f.impact_ns = f.idle_ns;
    out->push_back(std::move(f));
  }

  if (one_offs.empty()) return;
  std::sort(one_offs.begin(), one_offs.end(), [](const auto& a, const auto& b) { return a.first.ns > b.first.ns; });
  std::int64_t excess = 0;
  std::vector<std::int64_t> steps, sizes;
  std::vector<EventRef> befores, afters;
  for (const auto& [g, med] : one_offs) {
    sat_acc(excess, g.ns - med);
    const std::int64_t s = c.step_number(g.step);
    if (std::find(steps.begin(), steps.end(), s) == steps.end() && steps.size() < 100) steps.push_back(s);
    if (befores.size() < kMaxListed) {
      sizes.push_back(g.ns);
      befores.push_back(c.ref(c.device[g.before].event));
      afters.push_back(c.ref(c.device[g.after].event));
    }
  }
  // Precondition (impact): their excess over the usual gaps is kMinShare
  // of the window.
  if (static_cast<double>(excess) < kMinShare * static_cast<double>(window)) return;
  const Gap& top = one_offs.front().first;
  std::vector<const Gap*> listed;
  for (const auto& [g, med] : one_offs) listed.push_back(&g);
  Finding f;
  f.id = "kernel_gap";
  f.severity = FindingSeverity::kInfo;
  set_idle_claim(f, gap_claim(c, listed, *out));
  // One gap is a one-off; several are rare gaps, each far above its pair's
  // usual one (review 2026-11-26, round 8: "One-off ... 194 more" on PARAM
  // linear, whose 195 such gaps spread over a second).
  const std::string where = (has_steps ? " in step " + std::to_string(c.step_number(top.step)) : "") + " between " +
                            title_name(c.name(c.device[top.before].event)) + " and " +
                            title_name(c.name(c.device[top.after].event)) + " (usually " +
                            format_ns(one_offs.front().second) + ")";
  const std::string factor = std::to_string(static_cast<int>(kOneOffFactor)) + "x";
  f.title = one_offs.size() == 1 ? "One-off GPU gap of " + format_ns(top.ns) + where
                                 : std::to_string(one_offs.size()) + " rare GPU gaps, each " + factor +
                                       " or more its pair's usual gap; the longest " + format_ns(top.ns) + where;
  f.evidence.text("pattern", "one-off")
      .num("gap_ns", top.ns)
      .num("usual_gap_ns", one_offs.front().second)
      .num("count", static_cast<std::int64_t>(one_offs.size()))
      .num("excess_ns", excess)
      .ints("steps", steps)
      .ints("gaps_ns", sizes)
      .events("kernels_before", std::move(befores))
      .events("kernels_after", std::move(afters));
  const IdleCause cause = add_idle_evidence(c, listed, f);
  if (not_a_gap_to_fix(c, cause)) return;
  GapContext x;
  name_host_work(c, listed, cause, *out, f, x);
  const bool host_side = cause == IdleCause::kLaunching || cause == IdleCause::kHostWork ||
                         (cause_bit(cause) & kBlockedCauses) != 0;
  const bool one = one_offs.size() == 1;
  if (one && x.frame.kind == HostWorkKind::kDataLoader) {
    // A gap the stack puts inside a DataLoader's __next__ is once for its
    // kernel pair, not for the loader: the loader's calls say whether
    // such a wait comes back, the workers falling behind each time the
    // prefetched batches run out (issue 38's sixteenth round: a MONAI
    // pipeline's 5.39 s wait mid-run, "one-off" beside an 8.27 s first
    // batch, two of its 13 calls).
    const std::int64_t half = top.ns / 2;
    std::int64_t calls = 0, waits = 0;
    for (std::uint32_t e : c.host_ops) {
      if (!is_dataloader_scope(c.name(e))) continue;
      ++calls;
      if (c.dur(e) >= half) ++waits;
    }
    if (waits >= 2) {
      f.title = "GPU gap of " + format_ns(top.ns) + where + ", in one of the DataLoader's " + std::to_string(waits) +
                " waits of " + format_ns(half) + " or more (" + std::to_string(calls) + " calls)";
      f.evidence.num("dataloader_waits", waits).num("dataloader_calls", calls);
    }
  }
  bool unrecorded = false;
  if (host_side && x.frame.found() && x.frame.kind != HostWorkKind::kOther) {
    // The stack says what the host did: that is the code, whatever the
    // profiler did meanwhile.
    f.advice = host_frame_remedy(c, x.frame) + (one ? " The gap is" : " The gaps are") + " host time, mostly " +
               host_frame_text(x.frame) + ".";
  } else if (x.stall_op != kNoIndex) {
    f.advice = stall_advice(c, x, one);
  } else if (has_steps && steps.size() == 1) {
    // In one step only (one gap, or several pairs' long gaps in the same step).
    f.advice = one ? "Record more steps and leave this gap out of the step time if it does not come back. A gap in one "
                     "step only is rarely the code: the profiler allocating a buffer (Activity Buffer Request), a cold "
                     "start in the first step, or host-side housekeeping."
                   : "Record more steps and leave these gaps out of the step time if they do not come back. Gaps in one "
                     "step only are rarely the code: the profiler allocating a buffer (Activity Buffer Request), a cold "
                     "start in the first step, or host-side housekeeping.";
  } else if (has_steps) {
    // Several pairs, each with its long gap in fewer than half the steps
    // (kRecurringOneOffShare): rare for its pair, not one step's.
    f.advice =
        "Record more steps and leave these gaps out of the step time if they do not come back. Each is far above the "
        "usual gap between its two kernels in fewer than half the steps, which is rarely the code: the profiler "
        "allocating a buffer (Activity Buffer Request), a cold start in the first step, or host-side housekeeping.";
  } else if (const std::uint32_t range = measured_range(c, top.range.start, top.range.end); range != kNoIndex) {
    // No steps to leave it out of, and the gap lies outside the range that
    // holds the measured work: the program's set-up, warm-up or exit (the
    // first call of an op, lazy loading), paid once.
    const std::string name(c.name(range));
    f.evidence.event("measured_range", c.ref(range));
    f.advice = (c.by_tprof() ? "Record only the measured range (tprof record --nvtx-range " + name + ")"
                             : "Profile only the measured range (start torch.profiler around \"" + name + "\")") +
               ": the gap lies outside \"" + name +
               "\", the range that holds the measured work. Outside it the program sets up, warms up or exits "
               "(the first call of an op, lazy loading): a one-time cost.";
  } else if (cause != IdleCause::kLaunching && first_calls_hold_most(first_calls)) {
    // No steps, but most of the gaps' time comes before their pairs' usual
    // ones, and the host was not merely launching through it (blocked in
    // initialisation or other calls, or working): the pairs' first calls,
    // set-up paid once (a backward pass whose first add waits 82 us on
    // launches, TraceLens' MI210 trace, is not). Issue 38's twelfth round: a
    // vLLM decode's sampler loading its sort kernels in the first engine
    // step, and a compiled ResNet's first iteration, were told to mark
    // steps to see whether the gaps come back; the trace already shows
    // they do not).
    f.evidence.text("first_calls", "yes");
    f.advice = std::string("Warm up before recording (run the workload once untimed): ") +
               (one ? "the gap comes before its kernel pair's usual, short gaps later in the trace"
                    : "most of the gaps' time is in gaps that come before their pairs' usual, short gaps later in the "
                      "trace") +
               ", so it is a first call's set-up (lazy module loading, first-use allocation, autotuning), paid once, "
               "not the code's pace.";
  } else if (cause == IdleCause::kUnrecorded) {
    // Nothing recorded on the host through most of it: what the program
    // did is not in the trace, and neither is a fix or its saving (issue
    // 38's thirteenth round: a 334 ms stretch with no event at all, at the
    // end of a MoE dispatch run, was "up to 337.6 ms" of a readback's).
    f.advice = std::string(one ? "Nothing is recorded on the host through most of this gap"
                               : "Nothing is recorded on the host through most of these gaps") +
               ": the program did something the profiler did not see (another thread or process, I/O, a sleep, a "
               "wait outside the traced code). Record the host side that feeds this GPU (other threads, " +
               (c.is_torch() ? "the Python stack, " : "") + "the producing process) before judging " +
               (one ? "it." : "them.");
    unrecorded = true;
  } else {
    // No steps and nothing marks the measured work: whether it comes back
    // needs iterations marked as steps.
    f.advice = std::string("Mark each iteration as a step (") +
               (c.by_tprof() ? "tprof::Profiler's step()" : "torch.profiler's prof.step()") +
               ") and record several to see whether this gap comes back: a trace without steps has no step time to "
               "leave it out of. A gap seen once is rarely the code: the profiler allocating a buffer (Activity Buffer "
               "Request), a first call, or host-side housekeeping.";
  }
  if (host_side && x.frame.found() && x.frame.kind == HostWorkKind::kOther) {
    f.advice += " Most of the host time in " + std::string(one ? "it" : "them") + " is " + host_frame_text(x.frame) + ".";
  }
  // What it accounts for, at most its excess over the usual gaps; below
  // the minimum once earlier findings took their part: silent.
  f.impact_ns = std::min(excess, f.idle_ns);
  if (static_cast<double>(f.impact_ns) < kMinShare * static_cast<double>(window)) return;
  // Unrecorded: where the time went, not a saving.
  if (unrecorded) f.impact_ns = 0;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
