// hidden_memcpy: a device-to-device copy right before a GEMM on the same
// stream, issued by an op the user did not write as a copy (aten::addmm
// seeding its output with the bias). Cheatsheet: "A cudaMemcpyAsync you did
// not write: often a hidden device-to-device copy, e.g. addmm seeding its
// output with the bias before the GEMM" and "Memcpy DtoD right before a GEMM:
// the addmm bias copy".
// Severity from the time at stake: the copies' device time per step against
// the step's time (the longer of its CPU span and the device work it
// launched). At 4096² bf16 the copy is ~19 µs of a GPU-bound ~190 µs step
// (~10%: the GPU runs it on the critical path, a warning); at 64² it is 1 µs
// of a ~160 µs step on a GPU idle 98% of the time (info: removing it would not
// shorten the step on the GPU; what it saves is its host-side launch, inside
// the launch overhead's idle: below).
// Precondition: copies of at least kMinSeedBytes when their size is known,
// owned by a GEMM op that seeds its output (is_seeding_gemm_op), or by no
// recorded op (a C++ program's copy under tprof record).
// The saving is the copies' device time only where the GPU runs them on the
// critical path. Where the GPU idles through most of the calls that launch
// the copies, in steps idle most of their time (the median step; a trace
// without steps: the calls alone), as in an overhead-bound step (64² bf16,
// where the copy is 780 ns on the GPU and its cudaMemcpyAsync ~8.2 µs on the
// host), removing the copy saves that host call, not GPU time: the saving is
// the launch calls' host time (median per step), and the GPU idle it
// shortens is the idle another cause holds (launch overhead; evidence
// `saving_inside_idle`, which the report names: "fix (8.2 us of host time a
// step, inside cause 1's 25.0 us)"). Review 2026-11-26, R7: "up to 780 ns a
// step" understated it 10x.
// The op named is the one that owns the copy: where the issuing op is a copy
// op nested in another op (examples/matmul_add's op::copy_ inside op::addmm,
// the bias seed), the innermost enclosing op that is not a copy ("op::addmm
// (its bias copy)"); a copy op with no such parent is one the user asked for.
#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/kernel_classes.h"

namespace tprof::internal {

namespace {

// Below this share of the step a GPU-bound step's copies are not worth a
// line (issue 38's nineteenth round: 0.2% of a saturated H100's step was
// the first cause, ahead of the verdict); host-bound copies are judged by
// the host time their calls cost instead.
constexpr double kMinShare = 0.01;
// Warning when the copies take at least this share of the step: the post's
// 4096² bf16 copy is ~33 µs next to a ~580 µs GEMM (5.4%), an extra pass over
// the output that an epilogue bias would not need.
constexpr double kWarnShare = 0.05;
// How far back the enclosing-op search walks the host ops (sorted by start)
// when the trace has no External id on the copy: bounded so the rule stays
// linear on traces with millions of events.
constexpr int kMaxWalk = 256;
// How many copies are listed as events in the evidence.
constexpr std::size_t kMaxListed = 5;

// GEMM kernels by the kernel-class table (src/causal/kernel_classes.h):
// by their own name, else their template arguments (cutlass::Kernel2<…gemm…>).
bool is_gemm_kernel(std::string_view name) { return classify_kernel(name, "").cls == KernelClass::kGemm; }

bool is_dtod(std::string_view name) { return contains_ci(name, "dtod") || contains_ci(name, "device -> device"); }

// Copy ops (aten::copy_, op::copy_, to, clone, ...): at the top level, a
// copy the user asked for, whose DtoD copy is not hidden.
bool is_user_copy_op(std::string_view name) {
  const std::string_view b = after_namespaces(name);
  return b == "copy_" || b == "_to_copy" || b == "to" || b == "clone" || b == "contiguous" || b == "_copy_from";
}

// GEMM ops that compute C = A·B + C in place after copying their addend
// into the output (aten::addmm, baddbmm, addbmm, _addmm_activation, linear
// with a bias; examples/matmul_add's op::addmm).
bool is_seeding_gemm_op(std::string_view name) {
  const std::string_view b = after_namespaces(name);
  return b == "addmm" || b == "addmm_" || b == "baddbmm" || b == "baddbmm_" || b == "addbmm" || b == "addbmm_" ||
         b == "_addmm_activation" || b == "linear";
}

// The op that owns copy op `op`: the innermost cpu_op on its thread around
// it that is not itself a copy op (to -> _to_copy -> copy_ is one copy), or
// kNoIndex at the top level.
std::uint32_t owning_op(const DiagnoseContext& c, std::uint32_t op) {
  const auto& ops = c.host_ops;
  auto it = std::lower_bound(ops.begin(), ops.end(), c.ts(op), [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
  // Ops that start with it sort around it: step past them to those that started before.
  while (it != ops.end() && c.ts(*it) == c.ts(op)) ++it;
  for (int walked = 0; it != ops.begin() && walked < kMaxWalk; ++walked) {
    --it;
    const std::uint32_t e = *it;
    if (e == op || c.trace.events.lane[e] != c.trace.events.lane[op] || c.kind(e) != EventKind::kCpuOp) continue;
    if (c.end(e) < c.end(op) || (c.ts(e) == c.ts(op) && c.dur(e) <= c.dur(op))) continue;
    if (!is_user_copy_op(c.name(e))) return e;
  }
  return kNoIndex;
}

// The innermost cpu_op on `lane` that contains ts: the latest-starting one.
std::uint32_t enclosing_op(const DiagnoseContext& c, std::uint32_t lane, std::int64_t ts) {
  const auto& ops = c.host_ops;
  auto it = std::upper_bound(ops.begin(), ops.end(), ts, [&](std::int64_t v, std::uint32_t e) { return v < c.ts(e); });
  for (int walked = 0; it != ops.begin() && walked < kMaxWalk; ++walked) {
    --it;
    const std::uint32_t e = *it;
    if (c.trace.events.lane[e] == lane && c.kind(e) == EventKind::kCpuOp && c.end(e) >= ts) return e;
  }
  return kNoIndex;
}

std::string format_bytes(std::int64_t b) {
  char buf[48];
  if (b >= (1 << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  } else if (b >= (1 << 10)) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / (1 << 10));
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  }
  return buf;
}

// Copies whose "bytes" arg is read (total_bytes covers these).
constexpr std::int64_t kMaxBytesRead = 4096;
// A bias seed fills the GEMM's output (M×N elements); a copy of a few bytes
// (a scalar for aten::resize_ or a pointer-mode alpha) is not one.
constexpr std::int64_t kMinSeedBytes = 256;
// The copies' launch calls run while the GPU idles when the device is idle
// through at least this share of their host time, in steps idle at least
// this share of their time: the host, not the GPU, sets the pace there
// (overhead_bound's "GPU idle >= 50%").
constexpr double kHostBoundIdleShare = 0.5;

struct Pair {
  std::size_t copy;  // index into c.device
  std::size_t gemm;
};

}  // namespace

void rule_hidden_memcpy(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  // One pass in start order: per stream, the last DtoD copy still waiting
  // for the next compute kernel (memsets in between, e.g. cuBLASLt zeroing
  // a workspace flag, do not break the pair).
  std::vector<std::size_t> pending(t.lanes.size(), SIZE_MAX);
  std::vector<Pair> pairs;
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    std::size_t& p = pending[op.lane];
    if (op.cls == DeviceClass::kMemset) continue;
    if (op.cls == DeviceClass::kMemcpy) {
      p = is_dtod(c.name(op.event)) ? i : SIZE_MAX;
      continue;
    }
    if (p != SIZE_MAX && op.cls == DeviceClass::kCompute && is_gemm_kernel(c.name(op.event))) pairs.push_back({p, i});
    p = SIZE_MAX;
  }
  if (pairs.empty()) return;

  // The op that issued each copy: External id (Kineto puts the issuing
  // cpu_op's id on the runtime call and the device activity), else the
  // innermost cpu_op around the launch call on its thread.
  // Only the ids of the copies found, as a sorted vector (16 bytes an id):
  // a hash map of every cpu_op would cost ~100 bytes an op on multi-GB traces.
  std::vector<std::pair<std::int64_t, std::uint32_t>> op_by_ext;
  for (const Pair& pr : pairs) {
    const DeviceOp& op = c.device[pr.copy];
    for (std::uint32_t e : {op.event, op.launch}) {
      if (e != kNoIndex && t.events.external_id[e] >= 0) op_by_ext.emplace_back(t.events.external_id[e], kNoIndex);
    }
  }
  std::sort(op_by_ext.begin(), op_by_ext.end());
  op_by_ext.erase(std::unique(op_by_ext.begin(), op_by_ext.end()), op_by_ext.end());
  auto find_ext = [&](std::int64_t x) {
    auto it = std::lower_bound(op_by_ext.begin(), op_by_ext.end(), std::make_pair(x, std::uint32_t{0}));
    return it != op_by_ext.end() && it->first == x ? it : op_by_ext.end();
  };
  for (std::uint32_t e : c.host_ops) {
    const std::int64_t x = t.events.external_id[e];
    if (x < 0 || c.kind(e) != EventKind::kCpuOp) continue;
    auto it = find_ext(x);
    if (it != op_by_ext.end() && it->second == kNoIndex) it->second = e;
  }
  auto issuing_op = [&](const DeviceOp& op) -> std::uint32_t {
    for (std::uint32_t e : {op.event, op.launch}) {
      if (e == kNoIndex) continue;
      auto it = find_ext(t.events.external_id[e]);
      if (t.events.external_id[e] >= 0 && it != op_by_ext.end() && it->second != kNoIndex) return it->second;
    }
    if (op.launch != kNoIndex) return enclosing_op(c, t.events.lane[op.launch], c.ts(op.launch));
    return kNoIndex;
  };

  std::int64_t read = 0, count = 0, copy_ns = 0, gemm_ns = 0, bytes_total = 0, bytes_first = -1, bytes_min = -1,
               bytes_max = -1;
  std::set<std::int64_t> steps;
  // The ops that issued the copies, with how many each and their first
  // copy's events.
  struct Issuer {
    std::string name;
    std::int64_t count = 0;
    std::uint32_t op = kNoIndex, launch = kNoIndex, gemm = kNoIndex, copy_op = kNoIndex;
  };
  std::vector<Issuer> issuers;
  std::unordered_map<std::string_view, std::int64_t> gemm_names;
  std::vector<EventRef> copies;
  // The calls that launched the copies: their host time, per step.
  std::vector<Interval> launch_iv;
  std::unordered_map<std::int32_t, std::int64_t> launch_by_step;
  std::unordered_map<std::string_view, std::int64_t> launch_names;
  for (const Pair& pr : pairs) {
    const DeviceOp& cp = c.device[pr.copy];
    const DeviceOp& gm = c.device[pr.gemm];
    const std::uint32_t issuer = issuing_op(cp);
    std::uint32_t op = issuer;
    if (issuer != kNoIndex && is_user_copy_op(c.name(issuer))) {
      op = owning_op(c, issuer);
      if (op == kNoIndex) continue;  // a copy the user asked for
    }
    // Only a GEMM op that seeds its output with its addend makes the
    // cheatsheet's copy: a copy from slice_backward, cat or index_put that
    // happens to precede a GEMM on the stream is that op's own work, not an
    // addmm's bias (issue 38: "a copy made by slice_backward blamed on addmm").
    if (op != kNoIndex && !is_seeding_gemm_op(c.name(op))) continue;
    // Args are read from the source bytes: only for the first copies, so a
    // trace with millions of them does not page in the whole file.
    const std::int64_t b = ++read <= kMaxBytesRead ? c.int_arg(cp.event, "bytes") : -1;
    if (b >= 0 && b < kMinSeedBytes) continue;
    ++count;
    sat_acc(copy_ns, cp.end - cp.start);
    sat_acc(gemm_ns, gm.end - gm.start);
    if (b >= 0) {
      sat_acc(bytes_total, b);
      if (bytes_first < 0) bytes_first = b;
      bytes_min = bytes_min < 0 ? b : std::min(bytes_min, b);
      bytes_max = std::max(bytes_max, b);
    }
    if (cp.step >= 0) steps.insert(c.step_number(cp.step));
    // Without an op (tprof record of a program: CUDA calls, no ATen ops), the call that launched it.
    // Launched before the recording: its op is not in the trace.
    const std::string op_name = op != kNoIndex          ? std::string(c.name(op))
                                : cp.launch != kNoIndex ? std::string(c.name(cp.launch)) + " (no op recorded)"
                                : cp.before_recording   ? std::string("(launched before the recording)")
                                                        : std::string("(no op recorded)");
    auto named = std::find_if(issuers.begin(), issuers.end(), [&](const Issuer& x) { return x.name == op_name; });
    if (named == issuers.end()) {
      issuers.push_back({op_name, 0, op, cp.launch, gm.event, op != issuer ? issuer : kNoIndex});
      named = issuers.end() - 1;
    }
    ++named->count;
    ++gemm_names[c.name(gm.event)];
    if (copies.size() < kMaxListed) copies.push_back(c.ref(cp.event));
    if (cp.launch != kNoIndex) {
      launch_iv.push_back({c.ts(cp.launch), c.end(cp.launch)});
      sat_acc(launch_by_step[cp.step], c.dur(cp.launch));
      ++launch_names[c.name(cp.launch)];
    }
  }
  if (count == 0) return;
  // The op that issued the most copies first, the rest in count order; the
  // text names the first one the trace recorded (the copies launched before
  // the recording have no op of their own: issue 38's nineteenth round, 30
  // of modded-nanogpt's 75 were named for the 45 aten::baddbmm issued).
  std::stable_sort(issuers.begin(), issuers.end(), [](const Issuer& a, const Issuer& b) { return a.count > b.count; });
  std::vector<std::string> op_names;
  for (const Issuer& x : issuers) op_names.push_back(x.name);
  const auto recorded = std::find_if(issuers.begin(), issuers.end(), [](const Issuer& x) { return x.op != kNoIndex; });
  const Issuer& named = recorded != issuers.end() ? *recorded : issuers.front();
  const std::uint32_t first_op = named.op, first_launch = named.launch, first_gemm = named.gemm,
                      first_copy_op = named.copy_op;

  std::string_view gemm_name;
  std::int64_t best = 0;
  for (const auto& [n, k] : gemm_names) {
    if (k > best || (k == best && n < gemm_name)) {
      best = k;
      gemm_name = n;
    }
  }
  const std::int64_t nsteps = steps.empty() ? 1 : static_cast<std::int64_t>(steps.size());
  const std::int64_t per_step = copy_ns / nsteps;
  const double share =
      static_cast<double>(copy_ns) / static_cast<double>(std::max<std::int64_t>(1, sat_add(copy_ns, gemm_ns)));

  // The step's time: per step the longer of its span and the union of the
  // device work it launched (a GPU-bound step runs past its CPU span);
  // without steps, the trace.
  std::int64_t step_ns = c.end_ns - c.start_ns;
  if (!c.steps.steps.empty()) {
    std::vector<std::vector<Interval>> work(c.steps.steps.size());
    for (const DeviceOp& op : c.device) {
      if (op.step >= 0) work[static_cast<std::size_t>(op.step)].push_back({op.start, op.end});
    }
    std::vector<std::int64_t> per;
    for (std::size_t i = 0; i < work.size(); ++i) {
      per.push_back(std::max(c.steps.steps[i].dur_ns, union_length(std::move(work[i]))));
    }
    step_ns = upper_median(std::move(per));
  }
  const double step_share = static_cast<double>(per_step) / static_cast<double>(std::max<std::int64_t>(1, step_ns));

  // Host-bound copies: the GPU idles through most of their launch calls.
  std::int64_t launch_ns = 0, launch_idle_ns = 0, launch_step_ns = 0;
  std::string_view launch_name;
  IdleCause inside = IdleCause::kLaunching;
  if (!launch_iv.empty()) {
    const std::vector<Interval> merged = merge_intervals(std::move(launch_iv));
    launch_ns = total_length(merged);
    const IdlePartition::Totals idle = idle_by_cause(c.idle(), merged);
    for (const std::int64_t v : idle) sat_acc(launch_idle_ns, v);
    inside = dominant_cause(idle);
    std::vector<std::int64_t> per;
    for (const auto& [step, ns] : launch_by_step) {
      if (step >= 0) per.push_back(ns);
    }
    // Per step: the median step's calls (a cold first call is one step's).
    launch_step_ns = per.empty() ? launch_ns : mean_median(std::move(per));
    std::int64_t most = 0;
    for (const auto& [n, k] : launch_names) {
      if (k > most || (k == most && n < launch_name)) {
        most = k;
        launch_name = n;
      }
    }
  }
  // ... in steps the host holds: the median step idles at least that share
  // of its time (the 4096² runs' copies launch at a step's start while the
  // GPU idles briefly, 20-41% of the calls, in GPU-bound steps).
  const std::int64_t median_idle = c.median_step_idle_ns();
  const bool idle_steps = c.steps.steps.empty() ||
                          static_cast<double>(median_idle) >= kHostBoundIdleShare * static_cast<double>(step_ns);
  const bool host_bound = idle_steps && launch_ns > 0 &&
                          static_cast<double>(launch_idle_ns) >= kHostBoundIdleShare * static_cast<double>(launch_ns);

  if (!host_bound && step_share < kMinShare) return;

  Finding f;
  f.id = "hidden_memcpy";
  f.severity = step_share >= kWarnShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  // A nested copy op is named through its owner: a GEMM op's is its bias
  // seed.
  std::vector<std::string> notes;
  if (first_copy_op != kNoIndex) {
    const std::string_view b = after_namespaces(named.name);
    notes.push_back(b.find("bmm") != std::string_view::npos       ? "its addend copy"
                    : b.find("addmm") != std::string_view::npos ||
                              b.find("linear") != std::string_view::npos
                        ? "its bias copy"
                        : "its " + std::string(after_namespaces(c.name(first_copy_op))));
  }
  if (named.count < count) notes.push_back(std::to_string(named.count) + " of them");
  std::string owner_note;
  for (const std::string& n : notes) owner_note += (owner_note.empty() ? " (" : "; ") + n;
  if (!owner_note.empty()) owner_note += ")";
  const std::string copies_text = count == 1 ? std::string("1 copy") : std::to_string(count) + " copies";
  // Their size, or its range where they differ (a Muon step's 288 B and
  // 9 MiB copies were "75 copies of 288 B").
  const std::string size_text = bytes_first < 0          ? std::string()
                                : bytes_min == bytes_max ? " of " + format_bytes(bytes_first)
                                                         : " of " + format_bytes(bytes_min) + " to " + format_bytes(bytes_max);
  f.title = "Hidden Memcpy DtoD before the GEMM: " + copies_text + size_text + " from " + named.name + owner_note + ", " +
            format_ns(per_step) +
            (c.steps.steps.empty() ? " in all (" + format_pct(100.0 * step_share) + " of the trace, "
                                   : " per step (" + format_pct(100.0 * step_share) + " of the step, ") +
            format_pct(100.0 * share) + " of copy + GEMM time)";
  // Per step only where there are steps: without them the time is the
  // trace's, which total_ns holds (a "per_step" equal to it misleads).
  f.evidence.num("count", count).num("total_ns", copy_ns);
  if (!c.steps.steps.empty()) f.evidence.num("per_step_ns", per_step);
  f.evidence.num("mean_ns", copy_ns / count);
  if (bytes_first >= 0) f.evidence.num("bytes", bytes_first).num("total_bytes", bytes_total);
  f.evidence.texts("issued_by", op_names)
      .text("gemm_kernel", std::string(gemm_name))
      .num("gemm_total_ns", gemm_ns)
      .real("copy_share_pct", 100.0 * share)
      .num("step_ns", step_ns)
      .real("step_share_pct", 100.0 * step_share)
      .ints("steps", std::vector<std::int64_t>(steps.begin(), steps.end()))
      .events("copies", std::move(copies));
  if (first_launch != kNoIndex) f.evidence.event("launch", c.ref(first_launch));
  if (first_op != kNoIndex) f.evidence.event("issuing_op", c.ref(first_op));
  if (first_copy_op != kNoIndex) {
    f.evidence.text("copy_op", std::string(c.name(first_copy_op))).event("copy_op_event", c.ref(first_copy_op));
  }
  f.evidence.event("gemm", c.ref(first_gemm));
  if (launch_ns > 0) {
    f.evidence.text("launch_call", std::string(launch_name))
        .num("launch_call_total_ns", launch_ns)
        .real("launch_call_gpu_idle_pct",
              100.0 * static_cast<double>(launch_idle_ns) / static_cast<double>(launch_ns));
    if (!c.steps.steps.empty()) f.evidence.num("launch_call_per_step_ns", launch_step_ns);
  }
  // The host saving per step, at most what a median step idles (no fix
  // shortens a step by more than the GPU waits in it).
  const std::int64_t host_step = c.steps.steps.empty() ? launch_ns
                                 : median_idle > 0     ? std::min(launch_step_ns, median_idle)
                                                       : launch_step_ns;
  if (host_bound) f.evidence.text("saving_inside_idle", std::string(idle_cause_id(inside)));
  const std::string amount = copies_text + size_text;
  const std::string unit = c.steps.steps.empty() ? " in all" : " per step";
  // Host-bound: the copies and their launch calls, the saving the calls'.
  const std::string drops =
      host_bound ? amount + " and their " + std::string(launch_name) + " calls (" + format_ns(host_step) +
                       " of host time" + unit + " while the GPU waits)"
                 : amount + " (" + format_ns(per_step) + unit + ")";
  const std::string_view named_base = after_namespaces(named.name);
  if (c.is_torch() && first_op != kNoIndex && (named_base.starts_with("baddbmm") || named_base.starts_with("addbmm"))) {
    // A batched GEMM's addend is a whole matrix (Muon's polar-express
    // iteration, X = a·X + X·(b·A + c·A·A)): no bias epilogue takes it, but
    // the GEMM accumulates into its output where the output is the addend.
    f.advice = "Where the addend is not needed after the call, accumulate into it in place (x." + std::string(named_base) +
               (named_base.ends_with("_") ? "" : "_") + "(a, b, beta=…, alpha=…), or out=x): " + named.name +
               " then adds the product to it where it lies and drops the " + drops +
               "; or let torch.compile(mode=\"max-autotune\") take the add into a GEMM template's epilogue. The copy is "
               "not in your code: " + named.name + " copies its addend into a new output before the batched GEMM computes "
               "C = A·B + C in place, an extra pass over the output on every call.";
  } else if (c.is_torch()) {
    f.advice = "Let torch.compile(mode=\"max-autotune\") fuse the add into the GEMM's epilogue, or, where the addend "
               "is a bias vector broadcast over the rows, pass it 1-D so " +
               (first_op != kNoIndex ? named.name : std::string("the addmm")) +
               " takes cuBLASLt's bias epilogue: either drops the " + drops +
               ". The copy is not in your code: aten::addmm (and nn.Linear with a "
               "2-D bias) copies the addend into the output before cuBLAS computes C = A·B + C in place, an extra pass "
               "over the output on every call.";
  } else {
    // A C++ program calls the GEMM library itself: the epilogue is its call.
    f.advice = std::string("Give the addend to the GEMM instead of copying it into the output first: ") +
               (c.is_hip() ? "hipBLASLt" : "cuBLASLt") +
               "'s D = A·B + C with C as its own input (or its bias epilogue, where the addend is a vector broadcast "
               "over the rows) drops the " + drops + ". " +
               (first_op != kNoIndex ? named.name : std::string("The program")) +
               " copies the addend into the output so the GEMM can compute C = A·B + C in place, an extra pass over "
               "the output on every call.";
  }
  f.impact_ns = host_bound ? launch_ns : copy_ns;
  f.impact_per_step_ns = host_bound ? host_step : per_step;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
