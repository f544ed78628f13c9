// Root causes: rules look at one symptom each, and several of them often see
// the same problem from different sides. An overhead-bound step shows up as
// a high CPU/GPU ratio (overhead_bound), low utilization (the TensorBoard
// plugin), the same GPU gap every step (kernel_gap), kernels shorter than
// their launch calls (HTA's launch stats) and Python time before each op
// (dispatch_gap); a reader wants one card with one fix, not five. Groups
// form only around their anchor finding, so a lone symptom (a recurring gap
// in a compute-bound trace) stays a card of its own.
#include "src/analyze/causes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "src/analyze/efficiency.h"
#include "src/analyze/host_stack.h"
#include "src/analyze/verdict.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

std::string_view text_of(const Finding& f, std::string_view key) {
  const Evidence::Field* e = f.evidence.find(key);
  return e != nullptr && e->kind == Evidence::Kind::kText ? std::string_view(e->s) : std::string_view();
}

std::int64_t int_of(const Finding& f, std::string_view key, std::int64_t fallback) {
  const Evidence::Field* e = f.evidence.find(key);
  return e != nullptr && e->kind == Evidence::Kind::kInt ? e->i : fallback;
}

// The order of the causes, in three classes: the causes with a fix; then
// a cause whose own finding says nothing needs fixing (sync_api's "No
// change needed unless the host has other work to do", evidence
// host_side: such a sync was a GPU-bound vLLM run's first cause); then the
// profiler's own artefacts (CUPTI's buffer requests, "up to 731.5 us once",
// ranked first on a GPU-bound vLLM decode); both issue 38's eleventh round.
// A slow or cold first step is in the middle class too: its fix is a
// warm-up before the recording, or judging the run by its median step, and
// a run of many steps never pays it again (issue 38's twelfth round: a
// vLLM decode's first engine step, 57 ms once, ranked above a readback
// sync that costs every step 1.2 ms).
// Findings that mark nothing of their own to act on, one cold pass told to
// profile warmed-up iterations, and a first call's one-time set-up
// (evidence first_calls) are in the middle class too.
// Before the middle class, after the other fixes: a fix the trace's
// PyTorch cannot make (evidence needs_upgrade: a CUDA graph on a PyTorch
// before 1.10, torch.compile before 2.0): an expert first makes the fixes
// this version has (issue 38's fourteenth round: a 1.8 BERT step's graph
// replay, 358 ms a step, ranked above its per-parameter AdamW, 228 ms a step
// with the multi-tensor optimizer 1.8 ships).
// Within a class, by the time each could save, severity breaking ties.
int rank_class(const Cause& c, const std::vector<Finding>& findings) {
  if (c.id == "profiler_buffer_request") return 3;
  if (c.id == "cold_start") return 2;
  if (c.anchor < findings.size()) {
    const Evidence& ev = findings[c.anchor].evidence;
    if (ev.find("needs_upgrade") != nullptr) return 1;
    const Evidence::Field* e = ev.find("host_side");
    if (e != nullptr && e->kind == Evidence::Kind::kText && e->s == "nothing to fix") return 2;
    // A finding with nothing of its own to act on (what the others leave
    // is a sliver; a kernel's slow runs a note on reading it), and one cold
    // pass told to profile warmed-up iterations: a note on the recording,
    // after the fixes (issue 38's fourteenth round: a custom LayerNorm
    // backward's one-block grid ranked under "profile several warmed-up
    // iterations").
    if (ev.find("nothing_to_act_on") != nullptr || ev.find("one_pass") != nullptr) return 2;
    // A first call's set-up, paid once (kernel_gap's gaps before their
    // pairs' usual ones, host_blocked's first graph launch): a warm-up's
    // fix, as cold_start's (issue 38's twenty-second round: both ranked
    // above a GPU-bound SGLang decode's own kernels).
    if (text_of(findings[c.anchor], "first_calls") == "yes") return 2;
    // The host's noise across steps, on its own card (not the stalls'),
    // under a fifth of the shortest step: a note on the recording, after
    // the program's own costs (issue 38's twenty-fifth round: a ResNet-50's
    // 12.7% spread ranked above its 73% in convolutions). A larger spread
    // leads: every other figure is suspect.
    if (c.id == "cpu_op_variance" && sat_mul(5, c.impact_per_step_ns) < int_of(findings[c.anchor], "shortest_step_ns", 0)) {
      return 2;
    }
  }
  return 0;
}

auto cause_order(const std::vector<Finding>& findings) {
  return [&findings](const Cause& a, const Cause& b) {
    const int ra = rank_class(a, findings), rb = rank_class(b, findings);
    if (ra != rb) return ra < rb;
    if (a.impact_ns != b.impact_ns) return a.impact_ns > b.impact_ns;
    return a.severity > b.severity;
  };
}

double real_of(const Finding& f, std::string_view key) {
  const Evidence::Field* e = f.evidence.find(key);
  return e != nullptr && e->kind == Evidence::Kind::kReal ? e->d : 0.0;
}

// The first entry of the finding's "steps" list, or -1.
std::int64_t first_listed_step(const Finding& f) {
  const Evidence::Field* e = f.evidence.find("steps");
  return e != nullptr && e->kind == Evidence::Kind::kInts && !e->ints.empty() ? e->ints.front() : -1;
}

struct Group {
  std::string_view id;
  std::string_view anchor;  // the finding the group forms around
  bool (*member)(const Finding& f, std::int64_t cold_step);
};

// A recurring gap between compute kernels is host wait; one next to a
// collective is waiting on peers, another cause.
bool launch_overhead_member(const Finding& f, std::int64_t) {
  if (f.id == "low_gpu_utilization") return true;
  // A gap the stack puts in a DataLoader's __next__ is the input's wait
  // (dataloader_member; issue 38's sixteenth round: a training loop's
  // launch-overhead card shown by its gap before each batch's copy, 82% of
  // it the __next__).
  if (f.id == "kernel_gap") {
    return text_of(f, "pattern") == "recurring" && !is_comm_kernel(text_of(f, "before")) &&
           !is_comm_kernel(text_of(f, "after")) && text_of(f, "host_work_kind") != "dataloader";
  }
  // HTA's finding also fires on launch outliers alone; only short kernels
  // (launching costs more than running) are this cause.
  if (f.id == "kernel_launch_stats") return real_of(f, "short_pct") >= 50.0;
  if (f.id == "dispatch_gap") return text_of(f, "pattern") == "recurring";
  // The launch calls counted: the same host cost, and the same fix with a
  // smaller saving beside the group's (issue 38's fourteenth round: a
  // Mamba-3 decode step's "cudaLaunchKernel called 350 times, up to 393 us a
  // step" under "Launch overhead ... 1.894 ms a step in the replay").
  if (f.id == "many_calls") return text_of(f, "key").find("LaunchKernel") != std::string_view::npos;
  return false;
}

// What happens once, in the first recorded step.
bool cold_start_member(const Finding& f, std::int64_t cold_step) {
  if (f.id == "dispatch_gap") return text_of(f, "pattern") == "first_call" && first_listed_step(f) == cold_step;
  if (f.id == "kernel_gap") return text_of(f, "pattern") == "one-off" && first_listed_step(f) == cold_step;
  if (f.id == "cpu_gpu_offset") return text_of(f, "pattern") == "start_offset" && int_of(f, "first_step", -1) == cold_step;
  return false;
}

// The GPU is the bottleneck: where its time goes, and the host queue that
// backs up behind it.
bool compute_member(const Finding& f, std::int64_t) {
  if (f.id == "hotspot") return text_of(f, "column") == "self_cuda";
  if (f.id == "cpu_gpu_offset") return text_of(f, "pattern") == "queue_backed_up";
  return false;
}

// addmm_fusion counts the same DtoD copies under aten::addmm that
// hidden_memcpy finds in front of the GEMM.
bool hidden_copy_member(const Finding& f, std::int64_t) {
  return f.id == "addmm_fusion" && int_of(f, "dtod_count", 0) > 0;
}

// A CPU run's time in its collectives: the hotspot that names one of them
// (gloo:all_reduce's self time) is the same wait.
bool cpu_comm_member(const Finding& f, std::int64_t) {
  if (f.id != "hotspot" || text_of(f, "column") != "self_cpu") return false;
  const std::string_view key = text_of(f, "key");
  return key.starts_with("gloo:") || key.starts_with("c10d::");
}

// A recurring gap that ends in a host-to-device copy, the host at work
// before it, is the host-built tensor's draw (issue 38's fifteenth round:
// GPU MODE lecture 1's torch.randn on the CPU, 470 ms before each copy,
// ranked first as "move the host work ... with_stack=True would", and the
// finding that names aten::randn on the Also line).
// The gap after that copy with nothing recorded on the host is the host
// tensor's release (its pages unmapped once the copy is done: the
// lecture's 400 MB, 30 ms a draw), which drawing on the device removes too.
bool host_built_member(const Finding& f, std::int64_t) {
  if (f.id != "kernel_gap" || text_of(f, "pattern") != "recurring") return false;
  const std::string_view cause = text_of(f, "idle_cause");
  return (cause == "host_work" && text_of(f, "after").starts_with("Memcpy HtoD")) ||
         (cause == "unrecorded" && text_of(f, "before").starts_with("Memcpy HtoD"));
}

// A hotspot whose time is its op's first call is the cold pass's.
bool first_call_member(const Finding& f, std::int64_t) {
  return f.id == "hotspot" && f.evidence.find("first_call_ns") != nullptr;
}

// A GPU gap the stack puts inside a DataLoader's __next__ is the input
// pipeline's wait that dataloader_bound measures (issue 38's sixteenth
// round: a MONAI pipeline's 5.39 s wait mid-run, a "one-off GPU gap" with
// its own fix beside the DataLoader's card).
bool dataloader_member(const Finding& f, std::int64_t) {
  return f.id == "kernel_gap" && text_of(f, "host_work_kind") == "dataloader";
}

// The optimizer step whose time is in its children is the per-parameter
// loop per_param_optimizer measures (issue 38's twenty-fourth round: a VAE's
// Adam step, "the cost is in aten::add_ ... see what the scope calls that it
// need not" as a second cause beside "use the multi-tensor optimizer").
bool optimizer_scope_member(const Finding& f, std::int64_t) {
  return f.id == "cost_in_children" && text_of(f, "key").starts_with("Optimizer.step#");
}

// A CPU run whose ops stall for whole scheduler ticks: the same op's
// spread across steps is those stalls (one tick against two), not a
// second cause (issue 38's twenty-fourth round).
bool thread_stall_member(const Finding& f, std::int64_t) { return f.id == "cpu_op_variance"; }

constexpr Group kGroups[] = {
    {"launch_overhead", "overhead_bound", launch_overhead_member},
    {"cold_start", "cold_start", cold_start_member},
    {"compute_bound", "compute_bound", compute_member},
    {"hidden_memcpy", "hidden_memcpy", hidden_copy_member},
    {"cpu_collectives", "cpu_collectives", cpu_comm_member},
    {"host_built_tensor", "host_built_tensor", host_built_member},
    {"first_call_setup", "first_call_setup", first_call_member},
    {"input_pipeline", "dataloader_bound", dataloader_member},
    {"per_param_optimizer", "per_param_optimizer", optimizer_scope_member},
    {"cpu_thread_stall", "cpu_thread_stall", thread_stall_member},
};

std::string group_title(std::string_view id, const Finding& anchor) {
  if (id == "launch_overhead") {
    // "Overhead-bound: Self CPU ... (21x), GPU idle 95.2% of the steps"
    std::string_view rest = anchor.title;
    if (const std::size_t colon = rest.find(": "); colon != std::string_view::npos) rest.remove_prefix(colon + 2);
    return "Launch overhead: the GPU waits for the CPU; " + std::string(rest);
  }
  if (id == "cold_start") {
    // The width of the first step; the one-time calls stay in the evidence.
    const std::size_t semi = anchor.title.find("; ");
    return anchor.title.substr(0, semi);
  }
  return anchor.title;
}

// The first event of the finding, in evidence order.
std::optional<EventRef> first_event(const Finding& f) {
  for (const Evidence::Field& e : f.evidence.fields()) {
    if ((e.kind == Evidence::Kind::kEvent || e.kind == Evidence::Kind::kEvents) && !e.events.empty()) {
      return e.events.front();
    }
  }
  return std::nullopt;
}

// The event to open first. Launch overhead: the kernel after the recurring
// gap (the gap is where the GPU waits); a cold start: its first op, whose
// wide dispatch gap shows the slow step; otherwise the strongest finding's
// first event.
std::optional<EventRef> pick_look_at(std::string_view id, const std::vector<Finding>& findings,
                                     const std::vector<std::size_t>& members) {
  auto keyed = [&](std::string_view finding_id, std::string_view key) -> std::optional<EventRef> {
    for (std::size_t i : members) {
      if (findings[i].id != finding_id) continue;
      const Evidence::Field* e = findings[i].evidence.find(key);
      if (e != nullptr && !e->events.empty()) return e->events.front();
    }
    return std::nullopt;
  };
  std::optional<EventRef> r;
  if (id == "launch_overhead") r = keyed("kernel_gap", "kernel_after");
  if (id == "cold_start" && !r) r = keyed("cold_start", "first_op_event");
  if (id == "hidden_memcpy" && !r) r = keyed("hidden_memcpy", "copies");
  for (std::size_t i = 0; i < members.size() && !r; ++i) r = first_event(findings[members[i]]);
  return r;
}

// `name` as an ECMAScript pattern that matches it alone.
std::string exact_pattern(std::string_view name) {
  std::string out = "^";
  for (char ch : name) {
    if (std::string_view("\\^$.|?*+()[]{}").find(ch) != std::string_view::npos) out += '\\';
    out += ch;
  }
  return out + "$";
}

std::string event_name_of(const Finding& f, std::string_view key) {
  const Evidence::Field* e = f.evidence.find(key);
  return e != nullptr && e->kind == Evidence::Kind::kEvent && !e->events.empty() ? e->events.front().name : std::string();
}

// The what-if edit (tprof/causal.h) that expresses a cause's fix, or ""
// where none does (docs/diagnose.md, "Causes"): launch overhead and
// recurring dispatch gaps are per-op host cost, which a graph replay
// removes; a synchronizing call's fix is not to wait (drop-sync); an
// allocator call's is to allocate once (remove); a blocking copy's is not
// to wait for it (drop-sync: pinned memory makes it asynchronous); a
// DataLoader's is to load off the main thread (overlap); a hidden bias
// copy's is to fuse it into the GEMM (remove the copies).
std::string whatif_for(const DiagnoseContext& c, const Cause& cause, const std::vector<Finding>& findings) {
  const Finding& a = findings[cause.anchor];
  if (cause.id == "launch_overhead" || a.id == "overhead_bound") {
    // One cold pass: no loop for a graph to replay (overhead_bound's one_pass).
    if (a.evidence.find("one_pass") != nullptr) return "";
    return "graph";
  }
  if (a.id == "sync_api") {
    // Graph capture's warm-up syncs are one-time; a sync behind work that
    // waits on a dependency is fixed at the dependency, not at the call.
    if (a.evidence.find("graph_captures") != nullptr) return "";
    // A loop of one-value reads: its fix is one read, not reads that do
    // not wait (the reads' ops, less one, estimated by sync_api).
    if (a.evidence.find("read_ops_ns") != nullptr) return "";
    const std::int64_t idle = int_of(a, "gpu_idle_during_sync_ns", 0);
    const std::int64_t queued = int_of(a, "gpu_idle_queued_ns", 0);
    if (real_of(a, "gpu_busy_pct") < 50.0 && queued > idle - queued) return "";
    const Evidence::Field* by_name = a.evidence.find("by_name");  // "cudaStreamSynchronize x20 1.2 ms"
    if (by_name == nullptr || by_name->texts.empty()) return "";
    // The calls the causal graph gives a sync edge: by name, and an Async
    // copy whose copy goes to pageable host memory (the graph's edge is
    // there only for those, so dropping the name drops just their waits).
    std::vector<std::string> names;
    for (const std::string& t : by_name->texts) {
      const std::size_t x = t.rfind(" x");
      if (x == std::string::npos || x == 0) continue;
      const std::string n = t.substr(0, x);
      const bool async_copy = n.find("Memcpy") != std::string::npos && n.find("Async") != std::string::npos;
      if (is_sync_call(n) || is_blocking_memcpy(n) || async_copy) names.push_back(n);
    }
    if (names.empty()) return "";
    if (names.size() == 1) return "drop-sync:" + names.front();
    std::string p = "drop-sync:";
    for (std::size_t i = 0; i < names.size(); ++i) p += (i ? "|" : "") + exact_pattern(names[i]);
    return p;
  }
  if (a.id == "host_blocked") {
    const std::string call = event_name_of(a, "longest");
    if (call.empty()) return "";
    const std::string_view kind = text_of(a, "kind");
    // A fix for the calls of every step: a trace without steps is one
    // window whose longest call is often start-up (HTA's alexnet: a 6 s
    // cudaFree in the warm-up), and after a marked warm-up the fix is for
    // the calls after it alone, which no name tells apart.
    if (a.evidence.find("steps") == nullptr || a.evidence.find("after_warmup_gpu_idle_ns") != nullptr) return "";
    if (kind == "blocked_alloc") return "remove:" + call;
    if (kind == "blocked_copy") return "drop-sync:" + call;
    return "";
  }
  if (a.id == "fp32_math") {
    // Tensor cores at the least speed-up fp32_math assumes (2x), on every
    // fp32 kernel it counted: the replay says what of that reaches the
    // step, where the kernel time alone is no saving when the host or
    // copies set the pace (issue 38's twenty-second round: an A100's fp32
    // GEMMs, 129 ms beside a 54 ms tail of pageable copies the host
    // blocks in, ranked above pinning the copies).
    std::string p;
    for (const KernelEfficiency& k : c.efficiency().kernels) {
      if (fp32_math(k) != Fp32Math::kNo) p += (p.empty() ? "" : "|") + exact_pattern(k.name);
    }
    return p.empty() ? "" : "scale:" + p + "=0.5";
  }
  if (a.id == "dataloader_bound") {
    const std::string scope = event_name_of(a, "longest_dataloader");
    return scope.empty() ? "" : "overlap:" + scope;
  }
  if (cause.id == "hidden_memcpy") {
    // Fusing the bias into the GEMM drops the copy and its launch: remove
    // the launch call by name where that name is these copies' alone, else
    // the copies by their name where that is theirs alone; a name shared
    // with other copies (input uploads) would remove those too.
    const Finding& f = findings[cause.anchor];
    const std::int64_t count = int_of(f, "count", -1);
    const Evidence::Field* copies = f.evidence.find("copies");
    const std::string launch = event_name_of(f, "launch");
    const std::string copy = copies != nullptr && !copies->events.empty() ? copies->events.front().name : "";
    auto named = [&](const std::string& name) {
      std::int64_t n = 0;
      const auto id = c.trace.strings.find(name);
      if (!id) return n;
      for (std::uint32_t e = 0; e < c.trace.events.size(); ++e) n += c.trace.events.name[e] == *id ? 1 : 0;
      return n;
    };
    if (!launch.empty() && named(launch) == count) return "remove:" + launch;
    if (!copy.empty() && named(copy) == count) return "remove:" + copy;
  }
  return "";
}

}  // namespace

bool in_launch_overhead(const Finding& f) { return f.id == "overhead_bound" || launch_overhead_member(f, -1); }

std::vector<Cause> group_causes(const std::vector<Finding>& findings, std::int64_t first_step,
                                bool launch_overhead_measured) {
  std::vector<Cause> causes;
  std::vector<bool> taken(findings.size(), false);
  for (const Group& g : kGroups) {
    std::size_t anchor = findings.size();
    for (std::size_t i = 0; i < findings.size(); ++i) {
      if (!taken[i] && findings[i].id == g.anchor) {
        anchor = i;
        break;
      }
    }
    const bool measured = g.id == "launch_overhead" && launch_overhead_measured;
    if (anchor == findings.size() && measured) {
      // The measurements say overhead-bound: its strongest symptom anchors.
      for (std::size_t i = 0; i < findings.size(); ++i) {
        if (!taken[i] && g.member(findings[i], first_step)) {
          anchor = i;
          break;
        }
      }
    }
    if (anchor == findings.size()) continue;
    const std::int64_t cold_step = g.id == "cold_start" ? int_of(findings[anchor], "first_step", first_step) : first_step;
    Cause c;
    c.id = std::string(g.id);
    c.title = findings[anchor].id == g.anchor || g.id != "launch_overhead"
                  ? group_title(g.id, findings[anchor])
                  : "Launch overhead: the GPU waits for the CPU; " + findings[anchor].title;
    c.anchor = anchor;
    for (std::size_t i = 0; i < findings.size(); ++i) {
      if (taken[i] || (i != anchor && !g.member(findings[i], cold_step))) continue;
      taken[i] = true;
      c.findings.push_back(i);  // findings are ordered by impact, then severity: strongest first
    }
    causes.push_back(std::move(c));
  }
  for (std::size_t i = 0; i < findings.size(); ++i) {
    if (taken[i]) continue;
    Cause c;
    c.id = findings[i].id;
    c.title = findings[i].title;
    c.anchor = i;
    c.findings.push_back(i);
    causes.push_back(std::move(c));
  }
  for (Cause& c : causes) {
    // Symptoms of one cause measure the same lost time from different
    // sides: the cause weighs as its largest, never their sum.
    for (std::size_t i : c.findings) {
      c.severity = std::max(c.severity, findings[i].severity);
      c.impact_ns = std::max(c.impact_ns, findings[i].impact_ns);
      c.impact_per_step_ns = std::max(c.impact_per_step_ns, findings[i].impact_per_step_ns);
    }
    c.look_at = pick_look_at(c.id, findings, c.findings);
  }
  // By the time each could save; severity breaks ties (the notes without a
  // saving: trace health first); "no change needed" and the profiler's own
  // artefacts last, whatever their time (cause_order).
  std::stable_sort(causes.begin(), causes.end(), cause_order(findings));
  return causes;
}

std::vector<ThreadBusy> thread_busy(const DiagnoseContext& c) {
  const Trace& t = c.trace;
  std::int64_t lo = c.start_ns, hi = c.end_ns;
  if (!c.steps.steps.empty()) {
    lo = c.steps.steps.front().start_ns;
    hi = lo;
    for (const StepStat& s : c.steps.steps) {
      lo = std::min(lo, s.start_ns);
      hi = std::max(hi, s.start_ns + s.dur_ns);
    }
  }
  // Per thread: every event, and the time it waits: inside a wait frame (a
  // lock's acquire, a queue's get, a sleep: is_wait_frame) and not inside an
  // event of its own below it. A thread blocked for the whole trace is not
  // busy (issue 38's eighth round: DataLoader queue feeder threads, blocked
  // in threading's wait, listed "100.0%" busy). Work inside a wait frame's
  // span is a call that is not mostly a wait itself: Kineto's Python tracer
  // can put two threads on one lane (tid 0: tqdm's monitor in threading's
  // wait, vLLM's death-pipe monitor from _bootstrap down to a connection's
  // _recv), and the second thread's frames around its own wait are not work
  // (issue 38's tenth round: "2.408 s (100.0%)"), while a call that takes a
  // lock for a microsecond on its way is. A multi-process DataLoader's
  // __next__ scope waits for its workers: its own time is a wait, what runs
  // inside it (unpickling a batch) is work (the tenth round's review: 8.19 s
  // of a main thread's waits for its workers counted busy).
  struct Lane {
    std::vector<Interval> all, waits, working_in_waits;
    std::vector<std::int64_t> open_waits;  // ends of the wait frames open at the current event
  };
  std::map<std::uint32_t, Lane> by_lane;
  c.for_each_host_event([&](std::uint32_t e) {
    const std::uint32_t lane = t.events.lane[e];
    if (lane >= t.lanes.size() || t.lanes[lane].kind != LaneKind::kCpu) return;
    // ProfilerStep#N wraps the step; counted, it made the steps' thread 100%
    // busy whatever it did (tprof steps leaves it out of CPU busy too).
    if (is_profiler_step(c.name(e))) return;
    const std::int64_t a = std::max(c.ts(e), lo), b = std::min(c.end(e), hi);
    if (b <= a) return;
    Lane& l = by_lane[lane];
    l.all.push_back({a, b});
    while (!l.open_waits.empty() && l.open_waits.back() <= c.ts(e)) l.open_waits.pop_back();
    const bool wait = (c.kind(e) == EventKind::kPythonFunction && is_wait_frame(c.name(e))) ||
                      (is_dataloader_scope(c.name(e)) &&
                       c.name(e).find("_MultiProcessingDataLoaderIter") != std::string_view::npos);
    if (wait) {
      l.waits.push_back({a, b});
      l.open_waits.push_back(c.end(e));
    } else if (!l.open_waits.empty() && c.end(e) <= l.open_waits.back() &&
               !(c.kind(e) == EventKind::kPythonFunction && c.name(e).starts_with("<built-in"))) {
      // (A built-in inside a wait frame is its blocking call: a kqueue's
      // control under selectors' select.)
      l.working_in_waits.push_back({a, b});
    }
  });
  for (auto& entry : by_lane) {
    Lane& l = entry.second;  // (not a structured binding: clang before 16 cannot capture one)
    if (l.working_in_waits.empty()) continue;
    std::sort(l.waits.begin(), l.waits.end(), [](const Interval& x, const Interval& y) { return x.start < y.start; });
    // Dropped: a call that waits half its time or more in the wait frames
    // inside it.
    std::erase_if(l.working_in_waits, [&](const Interval& w) {
      auto it = std::lower_bound(l.waits.begin(), l.waits.end(), w.start,
                                 [](const Interval& x, std::int64_t at) { return x.start < at; });
      std::int64_t covered = 0, reach = w.start;
      for (; it != l.waits.end() && it->start < w.end; ++it) {
        if (it->end > w.end || it->end <= reach) continue;
        sat_acc(covered, it->end - std::max(it->start, reach));
        reach = it->end;
      }
      return covered >= w.end - w.start - covered;
    });
  }
  std::vector<ThreadBusy> out;
  const std::int64_t window = std::max<std::int64_t>(0, hi - lo);
  for (auto& [lane, l] : by_lane) {
    ThreadBusy b;
    b.lane = c.lane_label(lane);
    b.thread_name = std::string(t.str(t.lanes[lane].thread_name));
    const std::int64_t waiting =
        std::max<std::int64_t>(0, union_length(std::move(l.waits)) - union_length(std::move(l.working_in_waits)));
    const std::int64_t all = union_length(std::move(l.all));
    b.busy_ns = std::max<std::int64_t>(0, all - waiting);
    b.waiting_ns = all - b.busy_ns;
    b.window_ns = window;
    b.busy_pct = window > 0 ? 100.0 * static_cast<double>(b.busy_ns) / static_cast<double>(window) : 0.0;
    out.push_back(std::move(b));
  }
  std::stable_sort(out.begin(), out.end(), [](const ThreadBusy& a, const ThreadBusy& b) { return a.busy_ns > b.busy_ns; });
  return out;
}

namespace {

// Each cause's saving from the replay of the edit that expresses its fix
// (whatif_for), its findings' largest estimate where no edit does; then the
// causes by that saving.
void replay_savings(const DiagnoseContext& c, Diagnosis* d) {
  for (Cause& cause : d->causes) {
    Finding& anchor = d->findings[cause.anchor];
    const std::string text = whatif_for(c, cause, d->findings);
    std::optional<DiagnoseContext::ReplayedSaving> saving;
    if (!text.empty()) {
      if (Result<WhatIfEdit> edit = parse_whatif_edit(text)) saving = c.replayed_saving({*edit});
    }
    if (saving) {
      // The model's saving, never below zero (an edit the replay finds no
      // faster saves nothing).
      cause.impact_ns = std::max<std::int64_t>(0, saving->total_ns);
      cause.impact_per_step_ns = cause.impact_ns > 0 ? std::max<std::int64_t>(0, saving->per_step_ns) : 0;
      cause.saving_from = "replay";
      cause.whatif = text;
      anchor.evidence.text("saving_from", "replay").text("whatif", text).num("replayed_saving_ns", cause.impact_ns);
    } else if (cause.impact_ns > 0) {
      cause.saving_from = "estimate";
      anchor.evidence.text("saving_from", "estimate");
    }
  }
  std::stable_sort(d->causes.begin(), d->causes.end(), cause_order(d->findings));
}

}  // namespace

void add_causes(const DiagnoseContext& c, Diagnosis* d) {
  d->causes =
      group_causes(d->findings, c.steps.steps.empty() ? -1 : c.steps.steps.front().step, launch_overhead_measured(c));
  if (c.has_device()) replay_savings(c, d);
  if (!c.has_device()) d->threads = thread_busy(c);
}

}  // namespace tprof::internal
