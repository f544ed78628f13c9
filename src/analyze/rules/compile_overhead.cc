// compile_overhead: what torch.compile's wrapper costs the CPU per step
// (Dynamo's guard check, the compiled region, AOTDispatcher's prologue, the
// CompiledFxGraph call) next to the aten ops it ends up running.
// Cheatsheet: "Torch-Compiled Region: K/M", "TorchDynamo Cache Lookup every
// step", "AOTDispatcher Runtime Wrapper Prologue even without gradients",
// "Per-step CPU time higher compiled than eager for a tiny function (...)
// the Dynamo → AOTAutograd → Inductor stack only pays off over many ops."
// Precondition: the wrapper is what runs in a region before its compiled
// code starts and after it ends. The compiled code (the `## Call
// CompiledFxGraph` span, Inductor's generated wrapper calling its Triton
// launchers and aten ops, the runtime calls they make) is the work, not
// compilation, even where the profiler records none of its Python.
// The saving: where the GPU waits through the wrapper and another finding
// (overhead_bound's launch overhead) already holds most of that idle, the
// fix saves the wrapper's host time (60.5 µs a step on the blog's 64²
// warm compile), not the GPU idle residue no one claimed (457 ns: review
// 2026-11-26, R7); evidence `saving_inside_idle` names the idle it is part
// of, which the report turns into "inside cause 1's 201.3 us". Elsewhere the
// GPU idle inside the wrapper's time that no earlier finding claims; none
// when the GPU work hides the wrapper.
#include <algorithm>
#include <set>

#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// Warning when the wrapper costs at least as much CPU per step as the ops it
// runs (the post: 0.07 → 0.1 ms per step for one matmul + add) and the GPU
// work of a step is shorter than the compiled region's CPU time, so nothing
// hides it. Otherwise the finding is informational.
constexpr double kWrapperVsOps = 1.0;
// ... and the wrapper holds at least this share of the window (the steps, or
// the trace): a 1.4 ms wrapper in a 13 s step is not what to fix first.
constexpr double kWarnShareOfWindow = 0.05;
// Silent when the wrapper is under 0.5% of the window and less than the
// compiled code it wraps (52.9 µs of an 87 ms trace: noise). A wrapper
// larger than its code (HTA's triton example: 1.29 ms around 95.8 µs) is
// still worth an info line however small the share.
constexpr double kMinShareOfWindow = 0.005;
// A stretch with no event this long, in a region whose Python frames are
// recorded, is not the wrapper's.
constexpr std::int64_t kUnrecordedNs = 100'000;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Markers of the wrapper itself, recorded inside the region.
bool is_wrapper_marker(std::string_view n) {
  return starts_with(n, "Torch-Compiled Region") || n == "TorchDynamo Cache Lookup" ||
         n == "AOTDispatcher Runtime Wrapper Prologue" || n == "AOTDispatcher Runtime Wrapper Epilogue" ||
         n == "Pregraph bytecode" || starts_with(n, "ProfilerStep#");
}

}  // namespace

void rule_compile_overhead(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  std::vector<std::uint32_t> regions;
  std::vector<std::string> region_names;
  std::int64_t lookup_n = 0, lookup_ns = 0, prologue_n = 0, prologue_ns = 0;
  std::uint32_t first_lookup = kNoIndex, first_prologue = kNoIndex;
  for (std::uint32_t e : c.host_ops) {
    const std::string_view n = c.name(e);
    if (n.empty() || (n[0] != 'T' && n[0] != 'A')) continue;  // cheap filter over millions of ops
    if (starts_with(n, "Torch-Compiled Region")) {
      regions.push_back(e);
      if (std::find(region_names.begin(), region_names.end(), n) == region_names.end()) region_names.emplace_back(n);
    } else if (n == "TorchDynamo Cache Lookup") {
      ++lookup_n;
      sat_acc(lookup_ns, c.dur(e));
      if (first_lookup == kNoIndex) first_lookup = e;
    } else if (n == "AOTDispatcher Runtime Wrapper Prologue") {
      ++prologue_n;
      sat_acc(prologue_ns, c.dur(e));
      if (first_prologue == kNoIndex) first_prologue = e;
    }
  }
  if (regions.empty()) return;

  // The ops a region runs: the outermost aten:: ops inside it on its thread.
  // Regions nested in regions (a compiled function calling another) count once.
  std::int64_t region_ns = 0, ops_ns = 0, code_ns = 0, nested_end = INT64_MIN, outer_regions = 0, unrecorded_ns = 0;
  // The trace records Python frames inside the regions (with_stack).
  bool stack_in_region = false;
  {
    std::vector<Interval> region_spans;
    for (std::uint32_t r : regions) region_spans.push_back({c.ts(r), c.end(r)});
    region_spans = merge_intervals(std::move(region_spans));
    for (std::uint32_t e : c.host_ops) {
      if (c.kind(e) == EventKind::kPythonFunction && covered_within(region_spans, c.ts(e), c.ts(e) + 1) > 0 &&
          c.end(e) <= std::upper_bound(region_spans.begin(), region_spans.end(), c.ts(e),
                                       [](std::int64_t v, const Interval& iv) { return v < iv.end; })->end) {
        stack_in_region = true;
        break;
      }
    }
  }
  std::uint32_t nested_lane = kNoIndex;
  std::set<int> steps;
  std::uint32_t slowest = regions.front();
  std::vector<Interval> wrapper_iv;  // region time outside its compiled code, and the cache lookups
  // Per region: Inductor's generated module's calls (their Python frames)
  // and the C++ kernels it runs on the CPU ("<built-in function kernel>").
  std::vector<Interval> module_calls;
  std::vector<std::int64_t> cpp_kernels;
  for (std::uint32_t r : regions) {
    const std::uint32_t lane = t.events.lane[r];
    if (lane == nested_lane && c.ts(r) < nested_end) continue;
    ++outer_regions;
    nested_lane = lane;
    nested_end = c.end(r);
    sat_acc(region_ns, c.dur(r));
    if (c.dur(r) > c.dur(slowest)) slowest = r;
    const int si = c.step_index_at(c.ts(r));
    if (si >= 0) steps.insert(si);
    auto it = std::lower_bound(c.host_ops.begin(), c.host_ops.end(), c.ts(r),
                               [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
    std::int64_t covered_to = INT64_MIN, code_start = INT64_MAX, code_end = INT64_MIN;
    std::int64_t graph_start = INT64_MAX, graph_end = INT64_MIN;  // "## Call CompiledFxGraph" spans
    for (; it != c.host_ops.end() && c.ts(*it) < c.end(r); ++it) {
      const std::uint32_t e = *it;
      if (t.events.lane[e] != lane || e == r) continue;
      // Inductor's generated module's call (its Python frame, with_stack:
      // "/tmp/torchinductor_<user>/…/c….py(N): call"): on the CPU its C++
      // kernels run inside it as "<built-in function kernel>", with no op
      // recorded (issue 38's twenty-second round: 212.989 ms of them read as
      // "4.1 us of compiled code" around a 78.389 ms wrapper).
      const std::string_view en = c.name(e);
      if (starts_with(en, "## Call CompiledFxGraph")) {
        graph_start = std::min(graph_start, c.ts(e));
        graph_end = std::max(graph_end, std::min(c.end(e), c.end(r)));
      } else if (c.kind(e) == EventKind::kPythonFunction) {
        if (en.find("torchinductor_") != std::string_view::npos && en.ends_with("): call")) {
          module_calls.push_back({c.ts(e), std::min(c.end(e), c.end(r))});
        } else if (en == "<built-in function kernel>") {
          cpp_kernels.push_back(c.ts(e));
        }
      }
      // The compiled code: from its first recorded event to its last. A
      // Python frame is Dynamo's, AOTAutograd's or the caller's as often
      // as the generated code's (issue 38's seventeenth round: with_stack
      // frames made a region's 135 us of wrappers "compiled code").
      if (!is_wrapper_marker(c.name(e)) && c.kind(e) != EventKind::kPythonFunction) {
        code_start = std::min(code_start, c.ts(e));
        code_end = std::max(code_end, std::min(c.end(e), c.end(r)));
      }
      if (c.kind(e) != EventKind::kCpuOp || c.ts(e) < covered_to) continue;
      if (!starts_with(c.name(e), "aten::")) continue;
      const std::int64_t end = std::min(c.end(e), c.end(r));
      sat_acc(ops_ns, end - c.ts(e));
      covered_to = end;
    }
    // A generated module's call that runs C++ kernels is a compiled graph's
    // call too (where the GPU's launches already mark the code, its frame
    // adds only the launchers' Python).
    for (const Interval& call : module_calls) {
      const bool runs_kernel = std::any_of(cpp_kernels.begin(), cpp_kernels.end(),
                                           [&](std::int64_t k) { return k >= call.start && k < call.end; });
      if (!runs_kernel) continue;
      graph_start = std::min(graph_start, call.start);
      graph_end = std::max(graph_end, call.end);
    }
    module_calls.clear();
    cpp_kernels.clear();
    // The compiled graph's call, where torch marks it, is the compiled code.
    if (graph_end > graph_start) code_start = graph_start, code_end = graph_end;
    std::vector<Interval> outside;
    if (code_end > code_start) {
      sat_acc(code_ns, code_end - code_start);
      outside = {{c.ts(r), code_start}, {code_end, c.end(r)}};
    } else {
      outside = {{c.ts(r), c.end(r)}};
    }
    // With the Python stack recorded, the wrapper's Python is in frames: a
    // stretch of the region outside its compiled code where the thread
    // records nothing but the compiled function's own frame is not the
    // wrapper's (issue 38's twenty-second round: 21 ms with no event after a
    // simulator's last compiled call, as its large tensors were freed, read
    // as "torch.compile wrapper: 21.473 ms CPU per call").
    if (stack_in_region) {
      std::vector<Interval> recorded;
      auto e_it = std::lower_bound(c.host_ops.begin(), c.host_ops.end(), c.ts(r),
                                   [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
      for (; e_it != c.host_ops.end() && c.ts(*e_it) < c.end(r); ++e_it) {
        const std::uint32_t e = *e_it;
        if (t.events.lane[e] != lane || e == r) continue;
        // The compiled function's own frame (the program's file, around its
        // compiled code) covers what its body does outside the graphs, not
        // the wrapper (its locals freed as it returns: 3.6 ms of the 21).
        const std::string_view en = c.name(e);
        if (c.kind(e) == EventKind::kPythonFunction && code_end > code_start && c.ts(e) <= code_start &&
            c.end(e) >= code_end && !en.starts_with("torch/") && en.find("/torch/") == std::string_view::npos &&
            !en.starts_with("<built-in")) {
          continue;
        }
        recorded.push_back({c.ts(e), std::min(c.end(e), c.end(r))});
      }
      recorded = merge_intervals(std::move(recorded));
      for (const Interval& gap : subtract(merge_intervals(std::vector<Interval>(outside)), recorded)) {
        if (sat_sub(gap.end, gap.start) >= kUnrecordedNs) {
          sat_acc(unrecorded_ns, sat_sub(gap.end, gap.start));
          outside = subtract(merge_intervals(std::move(outside)), {gap});
        }
      }
    }
    for (const Interval& iv : outside) wrapper_iv.push_back(iv);
  }
  // Regions outside every recorded step (a warm-up call before the loop)
  // cost the steps nothing.
  if (steps.empty() && !c.steps.steps.empty()) return;
  // Without steps a call is an outermost region: one nested in another (a
  // graph break's resumption inside the compiled caller) is part of its call.
  const std::int64_t nsteps = steps.empty() ? outer_regions : static_cast<std::int64_t>(steps.size());
  // Cache lookups run just before the region (outside it): part of the wrapper.
  const std::int64_t wrapper_ns = sat_add(std::max<std::int64_t>(0, region_ns - code_ns - unrecorded_ns), lookup_ns);
  const std::int64_t wrapper_step = wrapper_ns / std::max<std::int64_t>(1, nsteps);
  const std::int64_t ops_step = ops_ns / std::max<std::int64_t>(1, nsteps);
  const std::int64_t code_step = code_ns / std::max<std::int64_t>(1, nsteps);
  const std::int64_t region_step = region_ns / std::max<std::int64_t>(1, nsteps);
  // The device work the compiled code launched per step (per region without
  // steps): when it outlasts the wrapper, the GPU hides the wrapper's time.
  std::vector<Interval> region_iv;
  for (std::uint32_t r : regions) region_iv.push_back({c.ts(r), c.end(r)});
  region_iv = merge_intervals(std::move(region_iv));
  std::int64_t gpu_ns = 0, region_launches = 0, generated = 0;
  std::string extern_op;  // an op whose kernel the compiled code launched (aten::addmm's GEMM)
  for (const DeviceOp& op : c.device) {
    // Launched from inside a compiled region (not the whole trace's work).
    if (op.launch != kNoIndex && covered_within(region_iv, c.ts(op.launch), c.ts(op.launch) + 1) > 0) {
      ++region_launches;
      // A kernel Inductor generated is launched by its compiled code, not
      // inside an aten op (an extern kernel: cuBLAS through aten::addmm).
      const std::uint32_t in = c.enclosing_op(op.launch, false);
      if (in == kNoIndex || !c.name(in).starts_with("aten::")) {
        ++generated;
      } else if (extern_op.empty()) {
        extern_op = std::string(c.name(in));
      }
    }
    const bool counted =
        steps.empty() ? op.launch != kNoIndex && covered_within(region_iv, c.ts(op.launch), c.ts(op.launch) + 1) > 0
                      : op.step >= 0 && steps.count(op.step) > 0;
    if (counted) sat_acc(gpu_ns, op.end - op.start);
  }
  const std::int64_t gpu_step = gpu_ns / std::max<std::int64_t>(1, nsteps);
  const bool exposed = gpu_step < sat_add(region_step, lookup_ns / std::max<std::int64_t>(1, nsteps));
  const bool heavy = static_cast<double>(wrapper_step) >= kWrapperVsOps * static_cast<double>(code_step);
  const std::int64_t window_ns = c.window_ns();
  const double window_share = window_ns > 0 ? static_cast<double>(wrapper_ns) / static_cast<double>(window_ns) : 0;
  const bool matters = window_share >= kWarnShareOfWindow;
  if (window_share < kMinShareOfWindow && wrapper_step < code_step) return;
  // The GPU idle inside the wrapper's time that no earlier finding claims:
  // overhead_bound's launch overhead already holds the idle of a step the
  // host dispatches, the wrapper included; counting it again would add up
  // past the step.
  for (std::uint32_t e : c.host_ops) {
    if (c.name(e) == "TorchDynamo Cache Lookup") wrapper_iv.push_back({c.ts(e), c.end(e)});
  }
  wrapper_iv = merge_intervals(std::move(wrapper_iv));
  std::int64_t wrapper_idle_ns = 0, wrapper_unclaimed_ns = 0;
  std::vector<Interval> unclaimed;
  if (c.has_device()) {
    const std::vector<Finding> none;
    wrapper_idle_ns = total_length(claimable_idle(c.idle(), kAllCauses, &wrapper_iv, none));
    unclaimed = claimable_idle(c.idle(), kAllCauses, &wrapper_iv, *out);
    wrapper_unclaimed_ns = total_length(unclaimed);
  }
  const std::int64_t claimed_elsewhere = wrapper_idle_ns - wrapper_unclaimed_ns;
  // Another cause holds most of the GPU idle in the wrapper's time: the
  // host, not the GPU, sets the pace there, and the wrapper's host time is
  // what the fix saves (at most a median step's idle per step).
  const bool held_elsewhere = exposed && claimed_elsewhere > 0 && sat_mul(2, claimed_elsewhere) >= wrapper_idle_ns;
  const std::int64_t median_idle = c.median_step_idle_ns();
  const std::int64_t host_step = median_idle > 0 ? std::min(wrapper_step, median_idle) : wrapper_step;

  Finding f;
  f.id = "compile_overhead";
  f.severity = heavy && exposed && matters ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  // Without steps each region's call is the unit (issue 38's seventeenth
  // round: "per step" in a trace with none, six calls of 18 us of GPU work
  // each behind 121 us of host time, the compiled code's included).
  const std::string unit = c.steps.steps.empty() ? "call" : "step";
  f.title = "torch.compile wrapper: " + format_ns(wrapper_step) + " CPU per " + unit + " around " +
            (code_step > 0 ? format_ns(code_step) + " of compiled code" : std::string("no recorded compiled code")) + " (" +
            format_pct(100.0 * window_share) + (c.steps.steps.empty() ? " of the trace, " : " of the steps, ") +
            count_of(static_cast<std::int64_t>(regions.size()), "compiled region") + ", Dynamo cache lookup " +
            format_ns(lookup_n > 0 ? lookup_ns / lookup_n : 0) + " each)";
  // The host time of a call against the device work it launches, where the
  // device work is a fifth of it or less: the compiled code is host
  // overhead too then, not work.
  if (gpu_step > 0 && sat_mul(5, gpu_step) <= region_step) {
    f.title += "; each " + unit + " spends " +
               format_ns(sat_add(region_step, lookup_ns / std::max<std::int64_t>(1, nsteps))) +
               " of host time in its regions for " + format_ns(gpu_step) + " of GPU work";
  }
  f.evidence.num("regions", static_cast<std::int64_t>(regions.size()))
      .texts("region_names", region_names)
      .num("steps", nsteps)
      .num("wrapper_per_step_ns", wrapper_step)
      .num("compiled_code_per_step_ns", code_step)
      .num("ops_per_step_ns", ops_step)
      .num("region_per_step_ns", region_step)
      .num("gpu_per_step_ns", gpu_step)
      .num("window_ns", window_ns)
      .real("window_share_pct", 100.0 * window_share)
      .num("region_total_ns", region_ns)
      .num("ops_total_ns", ops_ns)
      .num("cache_lookup_count", lookup_n)
      .num("cache_lookup_total_ns", lookup_ns)
      .num("aot_prologue_count", prologue_n)
      .num("aot_prologue_total_ns", prologue_ns)
      .event("slowest_region", c.ref(slowest));
  if (first_lookup != kNoIndex) f.evidence.event("cache_lookup", c.ref(first_lookup));
  if (first_prologue != kNoIndex) f.evidence.event("aot_prologue", c.ref(first_prologue));
  const std::int64_t launches = region_launches / std::max<std::int64_t>(1, nsteps);
  f.evidence.num("region_launches", region_launches)
      .num("wrapper_idle_ns", wrapper_idle_ns)
      .num("wrapper_idle_claimed_elsewhere_ns", claimed_elsewhere);
  // A note that the host needs no change: the consistency pass drops it
  // under a host-side verdict (src/analyze/consistency.h).
  if (!exposed) f.evidence.text("host_side", "nothing to fix");
  if (held_elsewhere) {
    f.evidence.text("saving_inside_idle",
                    std::string(idle_cause_id(dominant_cause(idle_by_cause(c.idle(), wrapper_iv)))));
  }
  const std::int64_t per_step = static_cast<std::int64_t>(regions.size()) / std::max<std::int64_t>(1, nsteps);
  if (unrecorded_ns > 0) f.evidence.num("unrecorded_in_regions_ns", unrecorded_ns);
  // Regions nested in a compiled call: graph breaks split it, each piece
  // paying its own guard check and wrapper (the simulator: one call, four
  // regions).
  const bool breaks = outer_regions < static_cast<std::int64_t>(regions.size());
  // Compiled code that launches no kernel of its own: every device op is an
  // aten op's (the compiled graph fused nothing), so compiling buys nothing
  // on the device and costs the wrapper on the host (issue 38's twenty-third
  // round: the blog's compiled 1024 matmul_add, aten::addmm's GEMM and its
  // bias copy, 121 us a step where its eager run takes 47; "compile a larger
  // region" where the function is the whole workload).
  const bool nothing_generated = region_launches > 0 && generated == 0;
  if (nothing_generated) f.evidence.num("generated_kernels", 0).text("extern_op", extern_op);
  f.advice = (exposed && nothing_generated
                  ? "Keep this function eager: its compiled code launches no kernel Inductor generated (every "
                    "device launch is an aten op's, " + extern_op + "), so the compiled graph fuses nothing into a "
                    "kernel of its own while each call pays the wrapper's " +
                        format_ns(wrapper_step) + " of CPU " + (c.steps.steps.empty() ? "per call" : "a step") +
                        "; compile a larger region only where it holds ops to fuse. "
              : exposed && breaks
                  ? "Remove the graph breaks that split each call into " + std::to_string(per_step) +
                        " compiled regions (TORCH_LOGS=\"graph_breaks\" names them; a Python branch on a tensor's "
                        "value, .item(), is a common one): each region pays its own guard check and wrapper, and the "
                        "code between them runs eager. "
              : exposed ? "Compile a larger region (the whole model or training step" +
                            (per_step > 1 ? ", one call per step instead of " + std::to_string(per_step) : std::string()) +
                            ")" +
                            // No launch recorded (the device side missing, or a CPU
                            // program): no graph to replay them in (issue 38's twelfth
                            // round: "replay its 0 device launches per call").
                            (launches > 0 ? " or use torch.compile(mode=\"reduce-overhead\") to replay its " +
                                                count_of(launches, "device launch") +
                                                " per " + unit + " as one CUDA graph"
                                          : std::string()) +
                            "; keep tiny functions eager. "
                      : std::string("Nothing to change while the GPU is busy: the step's device work (") + format_ns(gpu_step) +
                            ") hides the wrapper's CPU time. ") +
              (unrecorded_ns > 0 ? "Left out: " + format_ns(unrecorded_ns) +
                                       " in the regions with no event on their thread but the compiled function's own "
                                       "frame (not the wrapper's Python, which the stack records). "
                                 : std::string()) +
              "Every call of a compiled function pays Dynamo's guard check (TorchDynamo Cache Lookup), the compiled "
              "region and AOTDispatcher's prologue before its compiled code runs; that pays off when the region holds "
              "many ops to fuse, and costs more CPU than eager for a handful.";
  if (held_elsewhere) {
    f.advice += " The GPU waits on the host through the wrapper: the saving is its " + format_ns(wrapper_step) +
                " of CPU " + (c.steps.steps.empty() ? "per call" : "a step") +
                ", part of the GPU idle the launch-overhead cause counts (" + format_ns(claimed_elsewhere) +
                " of it is the wrapper's), not added to it again.";
  } else if (exposed && claimed_elsewhere > 0) {
    f.advice += " Of the GPU idle the launch-overhead cause counts, " + format_ns(claimed_elsewhere) +
                " is this wrapper's time (not added again here).";
  }
  // A wrapper the GPU hides saves nothing; one whose idle another cause
  // holds saves its host time; otherwise the GPU idle in the wrapper's time
  // that no earlier finding claims (on a CPU-only trace, the wrapper's time).
  f.impact_ns = !exposed         ? 0
                : held_elsewhere ? wrapper_ns
                : c.has_device() ? std::min(wrapper_ns, wrapper_unclaimed_ns)
                                 : wrapper_ns;
  if (held_elsewhere) f.impact_per_step_ns = c.steps.steps.empty() ? wrapper_ns : host_step;
  if (exposed && c.has_device()) set_idle_claim(f, unclaimed);
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
