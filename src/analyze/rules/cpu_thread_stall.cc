// cpu_thread_stall: on a CPU-only trace, ops that take whole scheduler
// ticks. A parallel op (torch's intra-op pool: matrix products, and
// elementwise ops on tensors big enough to split) returns when its last
// thread finishes; a pool with more threads than the cores the process
// gets waits for a descheduled thread, and the kernel's scheduler hands the
// core back a tick later (4 ms at Linux's usual HZ=250, 10 ms at HZ=100).
// The op then takes about a multiple of the tick whatever its work: a
// sqrt over a 400x784 weight 7.2-7.9 ms in every step where the same
// sqrt over its bias takes 3 us. Every share in such a trace is the
// stalls', not the work's.
// Origin: issue 38's twenty-fourth round (CPU traces of public programs
// recorded with torch.set_num_threads(2) on a 2-core machine shared with
// other work: 63-93% of the calls of 1.5 ms or more within a tick's
// multiple, "use the multi-tensor optimizer" first where the optimizer's
// time was three stalled sqrt calls a step).
// Precondition: a CPU-only program (cpu_only_program), at least kMinCalls
// calls from kMinCallNs to kMaxMultiple ticks and a half (ops spending most
// of their time themselves; a longer call is its op's work),
// kMinShare of them within [k*T - kBelowNs, k*T + kAboveNs] of a tick T
// (a duration spread evenly falls there 29% of the time; k up to
// kMaxMultiple), those calls of kMinOps ops or more, none holding more than
// kMaxOneOpShare of them (one op repeated at one length near a multiple is
// a coincidence, not a stall), and the
// stalled calls hold kMinBusyShare of the host's busy time. Impact: the
// stalled calls' time less what their ops take when they do not stall (the
// median of the op's calls under kMinCallNs), an upper bound.
#include "src/analyze/rules/cpu_thread_stall.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/analyze/nesting.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kTicksNs[] = {4'000'000, 10'000'000};  // HZ=250, HZ=100
constexpr std::int64_t kMinCallNs = 1'500'000;
constexpr std::int64_t kBelowNs = 800'000;   // the op's own work before the stall ends short of the tick
constexpr std::int64_t kAboveNs = 350'000;   // the op's work after the thread is back
constexpr std::size_t kMinCalls = 30;
constexpr double kMinShare = 0.55;
constexpr std::size_t kMinOps = 3;
constexpr double kMaxOneOpShare = 0.6;
constexpr std::size_t kMinOtherCalls = 20;
// An op's calls of any length judged on the ticks (calls_on_ticks).
constexpr std::size_t kMinOpCalls = 10;
// A stall is a few ticks; a call of many ticks is the op's work, and its
// length lands near a multiple by chance.
constexpr std::int64_t kMaxMultiple = 8;
constexpr double kMinBusyShare = 0.10;

// The multiple of `tick`, at most `max_multiple`, that `dur` sits on, or 0
// when it sits on none.
std::int64_t tick_multiple(std::int64_t dur, std::int64_t tick, std::int64_t max_multiple = kMaxMultiple) {
  const std::int64_t k = (dur + tick / 2) / tick;
  if (k < 1 || k > max_multiple) return 0;
  const std::int64_t off = dur - k * tick;
  return off >= -kBelowNs && off <= kAboveNs ? k : 0;
}

// An op's own call: not a scope (a legacy export files record_function
// scopes as ops too, and a scope's own time is Python's, a DataLoader's
// __next__ collating a batch, not an intra-op pool's: issue 38's
// twenty-fifth round, an LSTM's "enumerate(DataLoader)#... x3" among its
// stalled ops), and not mostly its children's time.
bool own_op_call(const DiagnoseContext& c, const Nesting& nest, std::uint32_t e) {
  return c.kind(e) == EventKind::kCpuOp && sat_mul(2, nest.child_ns[e]) < c.dur(e) &&
         c.name(e).find("::") != std::string_view::npos;
}

}  // namespace

ThreadStalls stalls_among(const DiagnoseContext& c, const std::vector<std::uint32_t>& calls, std::size_t min_calls) {
  const Nesting& nest = c.nesting();
  std::vector<std::uint32_t> long_calls;
  std::map<StrId, std::vector<std::int64_t>> short_calls;  // per op name, its calls under kMinCallNs
  for (std::uint32_t e : calls) {
    if (!own_op_call(c, nest, e)) continue;
    if (c.dur(e) >= kMinCallNs) {
      long_calls.push_back(e);
    } else {
      short_calls[c.trace.events.name[e]].push_back(c.dur(e));
    }
  }
  if (long_calls.size() < min_calls) return {};
  for (const std::int64_t tick : kTicksNs) {
    ThreadStalls out;
    // A call of more ticks than a stall lasts is its op's work: it counts
    // neither for the share nor against it (a GAN's 1.5 s transposed
    // convolutions beside 443 elementwise and norm calls of ~8 ms).
    std::size_t candidates = 0;
    for (std::uint32_t e : long_calls) {
      if (c.dur(e) > kMaxMultiple * tick + tick / 2) continue;
      ++candidates;
      const std::int64_t k = tick_multiple(c.dur(e), tick);
      if (k == 0) continue;
      out.stalled.push_back(e);
    }
    if (candidates < min_calls ||
        static_cast<double>(out.stalled.size()) < kMinShare * static_cast<double>(candidates)) {
      continue;
    }
    // Different ops, different work, the same few lengths: a stall. One
    // op repeated at one length near a multiple is a coincidence.
    std::map<StrId, std::size_t> names;
    for (std::uint32_t e : out.stalled) ++names[c.trace.events.name[e]];
    std::size_t top_name = 0;
    for (const auto& [name, n] : names) top_name = std::max(top_name, n);
    // An op that dominates is no coincidence where the others' stalls are
    // many too (an LSTM's gate addmm x44 beside its tanh x20 and more).
    const bool others_many = out.stalled.size() - top_name >= kMinOtherCalls;
    if (names.size() < kMinOps ||
        (static_cast<double>(top_name) > kMaxOneOpShare * static_cast<double>(out.stalled.size()) && !others_many)) {
      continue;
    }
    std::map<StrId, std::int64_t> typical;  // median of the op's short calls, computed once per name
    for (std::uint32_t e : out.stalled) {
      const StrId name = c.trace.events.name[e];
      sat_acc(out.stalled_ns, c.dur(e));
      auto [it, added] = typical.try_emplace(name, 0);
      if (added) {
        auto sc = short_calls.find(name);
        if (sc != short_calls.end() && !sc->second.empty()) {
          std::vector<std::int64_t>& v = sc->second;
          std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
          it->second = v[v.size() / 2];
        }
      }
      sat_acc(out.excess_ns, std::max<std::int64_t>(0, c.dur(e) - it->second));
    }
    out.tick_ns = tick;
    out.long_calls = static_cast<std::int64_t>(candidates);
    return out;
  }
  return {};
}

std::int64_t stalled_ns_at(const DiagnoseContext& c, const std::vector<std::uint32_t>& calls, std::int64_t tick) {
  const Nesting& nest = c.nesting();
  std::int64_t ns = 0;
  for (std::uint32_t e : calls) {
    if (own_op_call(c, nest, e) && c.dur(e) >= kMinCallNs && tick_multiple(c.dur(e), tick) != 0) sat_acc(ns, c.dur(e));
  }
  return ns;
}

bool CallsOnTicks::most() const {
  return calls >= static_cast<std::int64_t>(kMinOpCalls) &&
         static_cast<double>(on_ticks) >= kMinShare * static_cast<double>(calls);
}

CallsOnTicks calls_on_ticks(const DiagnoseContext& c, std::string_view op, std::int64_t tick) {
  CallsOnTicks out;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp || c.dur(e) < kMinCallNs || c.name(e) != op) continue;
    ++out.calls;
    if (tick_multiple(c.dur(e), tick, INT64_MAX) != 0) ++out.on_ticks;
  }
  return out;
}

ThreadStalls thread_stalls(const DiagnoseContext& c) {
  if (!cpu_only_program(c)) return {};
  ThreadStalls out = stalls_among(c, c.host_ops, kMinCalls);
  if (!out.found()) return {};
  // The host's busy time: the steps' span, else the trace's window.
  const std::int64_t busy = std::max<std::int64_t>(1, c.window_ns());
  if (static_cast<double>(out.stalled_ns) < kMinBusyShare * static_cast<double>(busy)) return {};
  out.busy_ns = busy;
  return out;
}

void rule_cpu_thread_stall(const DiagnoseContext& c, std::vector<Finding>* out) {
  const ThreadStalls st = thread_stalls(c);
  if (!st.found()) return;
  std::map<StrId, std::pair<std::int64_t, std::int64_t>> by_op;  // name -> (calls, time)
  for (std::uint32_t e : st.stalled) {
    auto& [calls, ns] = by_op[c.trace.events.name[e]];
    ++calls;
    sat_acc(ns, c.dur(e));
  }
  // The ops holding the most stalled time, for the title.
  std::vector<std::pair<std::int64_t, StrId>> ops;
  for (const auto& [name, v] : by_op) ops.emplace_back(v.second, name);
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string top;
  for (std::size_t i = 0; i < ops.size() && i < 3; ++i) {
    top += (i ? ", " : "") + std::string(c.trace.str(ops[i].second)) + " x" + std::to_string(by_op[ops[i].second].first);
  }
  std::uint32_t example = st.stalled.front();
  for (std::uint32_t e : st.stalled) {
    if (c.trace.events.name[e] == ops.front().second) {
      example = e;
      break;
    }
  }
  const std::string tick_text = format_ns(st.tick_ns);
  Finding f;
  f.id = "cpu_thread_stall";
  f.severity = FindingSeverity::kWarning;
  f.title = "Ops stall for whole scheduler ticks: " + std::to_string(st.stalled.size()) + " of " +
            std::to_string(st.long_calls) + " calls of " + format_ns(kMinCallNs) + " to " +
            format_ns(kMaxMultiple * st.tick_ns + st.tick_ns / 2) + " take a multiple of " +
            tick_text + " (" + top + "), " + format_ns(st.stalled_ns) + ", " +
            format_pct(100.0 * static_cast<double>(st.stalled_ns) / static_cast<double>(st.busy_ns)) +
            (c.steps.steps.empty() ? " of the trace" : " of the steps");
  std::set<std::int64_t> multiples;
  for (std::uint32_t e : st.stalled) multiples.insert(tick_multiple(c.dur(e), st.tick_ns));
  const std::vector<std::int64_t> multiples_seen(multiples.begin(), multiples.end());
  f.evidence.num("tick_ns", st.tick_ns)
      .num("long_calls", st.long_calls)
      .num("stalled_calls", static_cast<std::int64_t>(st.stalled.size()))
      .num("stalled_ns", st.stalled_ns)
      .num("excess_ns", st.excess_ns)
      .ints("multiples", multiples_seen)
      .event("example", c.ref(example));
  // Profiling again on a quiet machine is in the first sentence, which the
  // default page shows (issue 38's twenty-fifth round: "fewer threads"
  // alone rejected where the stalls came and went with other load and the
  // script's threads already matched the cores).
  f.advice = "Give torch's intra-op pool no more threads than the cores this process really gets, or stop the other "
             "load on them, and profile again: a parallel op returns when its last thread does, and a thread without "
             "a core, the calling one too, waits for the scheduler's next tick (" +
             tick_text +
             "), whatever the op's work. Set torch.set_num_threads (or OMP_NUM_THREADS; OPENBLAS_NUM_THREADS where "
             "torch's BLAS is OpenBLAS with its own pool) to no more than the cores free to it "
             "(os.sched_getaffinity(0), the container's CPU quota, other processes and DataLoader workers on the "
             "same cores): every share in this trace is inflated by the stalls.";
  f.impact_ns = st.excess_ns;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
