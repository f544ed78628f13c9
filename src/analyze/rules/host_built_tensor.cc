// host_built_tensor: a tensor the host computes op by op on the CPU and
// then copies to the GPU, while the GPU waits. On the launching thread, the
// top-level CPU ops between one launch call and the op that launches a
// host-to-device copy launch nothing: when at least kMinOps of them are not
// views, they hold kMinBuildNs or more, and the GPU idles at least half of
// that stretch, the copied tensor was built on the host (issue 38's sixth
// round: a speech model's relative-position buckets, 24 CPU ops of 2.9 ms
// (arange, sub, gt, log, where, ...) then a pageable copy and a
// synchronize, in the middle of a forward whose GPU idled meanwhile).
// One op is enough when it creates the tensor (a random draw, arange,
// full, ...) and holds half the stretch (issue 38's seventh round: the
// GPU-MODE lecture's torch.randn(10000, 10000) on the CPU, 650 ms a step,
// then .cuda()). The stretch starts at the previous launch call on the
// thread, or at the start of the copy's step when that is later.
// Not input loading: stretches inside a DataLoader scope are
// dataloader_bound's, and a copy with neither a launch before it nor a step
// around it (a whole run's first device work) is set-up; not an optimizer
// the program runs on the host on purpose (inside an "Optimizer.step"
// scope: CPU offload). torch traces only (the ops are aten's).
// Precondition: the pattern's GPU idle time (the largest group, by the op
// that copies) is kMinShare of the window and kMinIdleNs or more. Warning
// from kWarnShare of the window; impact: what the fix removes, its claim on
// the idle time from the stretch's start to the next launch after the copy
// (the shared causes no earlier finding, a recurring gap's, took) and the
// copies' device time.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/names.h"

namespace tprof::internal {

namespace {

constexpr std::size_t kMinOps = 4;
constexpr std::int64_t kMinBuildNs = 500'000;
constexpr std::int64_t kMinIdleNs = 500'000;
constexpr double kMinShare = 0.01;
constexpr double kWarnShare = 0.02;

// An op that creates a tensor: a random draw or a factory (the
// dispatcher's top-level names).
bool is_factory_op(std::string_view n) {
  for (std::string_view k : {"aten::randn", "aten::rand", "aten::randint", "aten::randperm", "aten::randn_like",
                             "aten::rand_like", "aten::normal", "aten::normal_", "aten::uniform_", "aten::bernoulli",
                             "aten::arange", "aten::linspace", "aten::full", "aten::ones", "aten::zeros"}) {
    if (n == k) return true;
  }
  return false;
}

bool is_random_op(std::string_view n) {
  return n.starts_with("aten::rand") || n.starts_with("aten::normal") || n.starts_with("aten::uniform") ||
         n.starts_with("aten::bernoulli");
}

struct Build {
  Interval stretch;                // from the previous launch call (or the step's start) to the copy's launch
  std::int64_t claim_end = 0;      // the next launch call after the copy's op (its step's end at most): what goes with it
  std::int64_t copy_ns = 0;        // the copy's device time
  std::uint32_t first = kNoIndex;  // the first top-level op of the stretch
  std::uint32_t copy_op = kNoIndex;  // the top-level op that launches the copy
  std::size_t device = 0;          // index into c.device: the copy
  std::int64_t ops = 0;            // top-level ops in the stretch, views included
  std::int64_t build_ns = 0;       // their time
  std::int64_t idle_ns = 0;        // the GPU idle from the previous launch call to the copy's launch
  bool sync_after = false;         // the copy's op synchronizes after it
  bool first_work = false;         // the trace's first device work (no launch before it, no step around it)
  bool from_device = false;        // the launch call the stretch starts at copied device memory to the host
  std::string_view factory;        // the op that creates the tensor and holds half the stretch, "" when none
  std::vector<std::pair<std::string_view, std::int64_t>> names;  // the stretch's ops but views, with their time
};


// Whether a Python frame of a module's parameter initialisation
// (reset_parameters, torch/nn/init.py) encloses `op` on its thread
// (with_stack; a bounded walk back over the host ops).
bool in_parameter_init(const DiagnoseContext& c, std::uint32_t op) {
  if (op == kNoIndex) return false;
  constexpr int kMaxWalk = 4096;
  return c.innermost_enclosing(c.trace.events.lane[op], c.ts(op), c.end(op), kMaxWalk, [&](std::uint32_t e) {
    if (c.kind(e) != EventKind::kPythonFunction) return false;
    const std::string_view name = c.name(e);
    return name.ends_with(": reset_parameters") || name.find("torch/nn/init.py") != std::string_view::npos;
  }) != kNoIndex;
}

// Whether the stretch's first random draw (an op on the first op's thread)
// runs inside a module's parameter initialisation.
bool random_in_parameter_init(const DiagnoseContext& c, const Build& b) {
  if (b.first == kNoIndex) return false;
  constexpr int kMaxScan = 100'000;
  const std::uint32_t lane = c.trace.events.lane[b.first];
  auto it = std::lower_bound(c.host_ops.begin(), c.host_ops.end(), b.stretch.start,
                             [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
  for (int n = 0; it != c.host_ops.end() && c.ts(*it) < b.stretch.end && n < kMaxScan; ++it, ++n) {
    const std::uint32_t e = *it;
    if (c.trace.events.lane[e] != lane || c.kind(e) != EventKind::kCpuOp || !is_random_op(c.name(e))) continue;
    return in_parameter_init(c, e);
  }
  return false;
}
}  // namespace

void rule_host_built_tensor(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.is_torch() || c.device.empty()) return;
  const Trace& t = c.trace;
  const EventColumns& ev = t.events;
  // Per thread: its top-level CPU ops (ProfilerStep#N aside), the scopes
  // that exclude a stretch, and its launch calls' (start, end).
  const std::size_t lanes = t.lanes.size();
  std::vector<std::vector<std::uint32_t>> top(lanes);
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> excluded(lanes);
  std::vector<std::int64_t> top_end(lanes, INT64_MIN);
  for (std::uint32_t o : c.host_ops) {
    const std::string_view n = c.name(o);
    const std::uint32_t lane = ev.lane[o];
    if (c.kind(o) == EventKind::kUserAnnotation) {
      if (is_dataloader_scope(n) || n.starts_with("Optimizer.")) excluded[lane].emplace_back(c.ts(o), c.end(o));
      continue;
    }
    if (c.kind(o) != EventKind::kCpuOp || is_profiler_step(n)) continue;
    if (is_dataloader_scope(n)) excluded[lane].emplace_back(c.ts(o), c.end(o));
    if (c.ts(o) < top_end[lane]) continue;
    top[lane].push_back(o);
    top_end[lane] = c.end(o);
  }
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> launches(lanes), to_host(lanes);
  for (const DeviceOp& d : c.device) {
    if (d.launch == kNoIndex) continue;
    launches[ev.lane[d.launch]].emplace_back(c.ts(d.launch), c.end(d.launch));
    if (d.cls == DeviceClass::kMemcpy && copy_kind(c.name(d.event)).direction == CopyDirection::kDtoH) {
      to_host[ev.lane[d.launch]].emplace_back(c.ts(d.launch), c.end(d.launch));
    }
  }
  for (auto* v : {&launches, &to_host}) {
    for (auto& l : *v) {
      std::sort(l.begin(), l.end());
      l.erase(std::unique(l.begin(), l.end()), l.end());
    }
  }

  std::vector<Build> builds;
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& d = c.device[i];
    if (d.cls != DeviceClass::kMemcpy || d.launch == kNoIndex || copy_kind(c.name(d.event)).direction != CopyDirection::kHtoD) {
      continue;
    }
    const std::uint32_t lane = ev.lane[d.launch];
    const std::vector<std::uint32_t>& ops = top[lane];
    const std::int64_t at = c.ts(d.launch);
    // The top-level op that launches the copy.
    auto it = std::upper_bound(ops.begin(), ops.end(), at, [&](std::int64_t v, std::uint32_t o) { return v < c.ts(o); });
    if (it == ops.begin()) continue;
    const std::uint32_t copy_op = *std::prev(it);
    if (c.end(copy_op) < c.end(d.launch)) continue;
    const auto in_scope = [&](std::int64_t ts) {
      return std::any_of(excluded[lane].begin(), excluded[lane].end(),
                         [&](const auto& s) { return s.first <= ts && ts <= s.second; });
    };
    if (in_scope(c.ts(copy_op))) continue;
    // The launch call before the copy's op: none is the trace's first
    // device work (set-up).
    const auto& calls = launches[lane];
    auto p = std::lower_bound(calls.begin(), calls.end(), std::make_pair(c.ts(copy_op), INT64_MIN));
    const int step = c.step_index_at(c.ts(copy_op));
    const bool first_work = p == calls.begin() && step < 0;
    std::int64_t from = p == calls.begin() ? INT64_MIN : std::prev(p)->second;
    if (step >= 0) from = std::max(from, c.steps.steps[static_cast<std::size_t>(step)].start_ns);
    Build b;
    b.copy_op = copy_op;
    b.device = i;
    std::int64_t built_by = INT64_MIN;  // the end of the last op of the build
    for (auto o = std::prev(it); o != ops.begin();) {
      --o;
      if (c.ts(*o) < from) break;
      b.first = *o;
      built_by = std::max(built_by, c.end(*o));
      ++b.ops;
      sat_acc(b.build_ns, c.dur(*o));
      if (!is_view_op(c.name(*o))) b.names.emplace_back(c.name(*o), c.dur(*o));
    }
    if (b.first == kNoIndex || b.build_ns < kMinBuildNs || in_scope(c.ts(b.first))) continue;
    // Enough ops, or one that creates the tensor holding half the stretch.
    const auto factory = std::find_if(b.names.begin(), b.names.end(), [&](const auto& x) {
      return is_factory_op(x.first) && sat_add(x.second, x.second) >= b.build_ns;
    });
    if (b.names.size() < kMinOps && factory == b.names.end()) continue;
    if (factory != b.names.end()) b.factory = factory->first;
    // The first device work's stretch is everything the thread ran before
    // it: it starts at its first op.
    b.first_work = first_work;
    b.from_device = p != calls.begin() && std::binary_search(to_host[lane].begin(), to_host[lane].end(), *std::prev(p));
    if (first_work) {
      if (factory == b.names.end()) continue;
      from = c.ts(b.first);
    }
    b.stretch = {from, at};
    b.copy_ns = sat_sub(d.end, d.start);
    {
      auto next = std::lower_bound(calls.begin(), calls.end(), std::make_pair(c.end(copy_op), INT64_MIN));
      b.claim_end = next != calls.end() ? next->first : c.end(copy_op);
      if (step >= 0) {
        const StepStat& st = c.steps.steps[static_cast<std::size_t>(step)];
        b.claim_end = std::min(b.claim_end, sat_add(st.start_ns, st.dur_ns));
      }
      b.claim_end = std::max(b.claim_end, at);
    }
    // The first device work's idle ends with its build: what its copy's op
    // does before the copy (the device's first allocation, its context) is
    // no part of building on the CPU (issue 38's nineteenth round: an MLU's
    // 6.07 s start-up inside the first aten::to counted as a 776 us
    // torch.randn's).
    const std::int64_t until = first_work ? std::min(at, std::max(built_by, from)) : at;
    if (first_work) b.stretch = {from, until};
    const std::int64_t span = sat_sub(until, from);
    b.idle_ns = sat_sub(span, c.device_busy_ns(d.device, from, until));
    if (sat_add(b.idle_ns, b.idle_ns) < span) continue;
    for (std::uint32_t r : c.runtime) {
      if (ev.lane[r] != lane || c.ts(r) <= at || c.ts(r) > c.end(copy_op)) continue;
      if (contains_ci(c.name(r), "synchronize")) b.sync_after = true;
    }
    std::reverse(b.names.begin(), b.names.end());
    builds.push_back(std::move(b));
  }
  // The trace's first device work is set-up, unless the same draw and copy
  // come back at least twice after it: then it is the loop's first pass
  // (issue 38's fifteenth round: GPU MODE lecture 1's ten CPU draws of
  // torch.randn, "9 times", the first left out as set-up).
  // (Decided before any is erased: the test reads the other builds.)
  std::vector<bool> set_up(builds.size(), false);
  for (std::size_t i = 0; i < builds.size(); ++i) {
    const Build& b = builds[i];
    if (!b.first_work) continue;
    std::size_t same = 0;
    for (const Build& o : builds) {
      same += !o.first_work && ev.lane[o.copy_op] == ev.lane[b.copy_op] && c.name(o.copy_op) == c.name(b.copy_op) &&
              o.factory == b.factory;
    }
    set_up[i] = same < 2;
  }
  for (std::size_t i = builds.size(); i-- > 0;) {
    if (set_up[i]) builds.erase(builds.begin() + static_cast<std::ptrdiff_t>(i));
  }
  if (builds.empty()) return;

  // Grouped by the thread and the op that copies: the pattern that recurs.
  std::map<std::tuple<std::uint32_t, std::string_view>, std::vector<const Build*>> groups;
  for (const Build& b : builds) groups[{ev.lane[b.copy_op], c.name(b.copy_op)}].push_back(&b);
  const std::vector<const Build*>* best = nullptr;
  std::int64_t best_idle = 0;
  for (const auto& [key, g] : groups) {
    std::int64_t idle = 0;
    for (const Build* b : g) sat_acc(idle, b->idle_ns);
    if (idle > best_idle) {
      best_idle = idle;
      best = &g;
    }
  }
  const std::int64_t window = c.window_ns();
  if (best == nullptr || window <= 0 || best_idle < kMinIdleNs ||
      static_cast<double>(best_idle) < kMinShare * static_cast<double>(window)) {
    return;
  }
  const std::vector<const Build*>& g = *best;
  const Build& top_build = **std::max_element(g.begin(), g.end(), [](const Build* a, const Build* b) {
    return a->idle_ns < b->idle_ns;
  });
  std::int64_t build_ns = 0, ops = 0, copies_ns = 0, pageable = 0, pageable_ns = 0;
  bool sync = false;
  std::vector<std::int64_t> steps;
  std::map<std::string_view, std::int64_t> ns_by_name;
  for (const Build* b : g) {
    sat_acc(build_ns, b->build_ns);
    // Counted as the title counts them: views aside (issue 38's
    // seventeenth round: "25 CPU ops" beside "cpu_ops 40").
    ops += static_cast<std::int64_t>(b->names.size());
    sync = sync || b->sync_after;
    sat_acc(copies_ns, b->copy_ns);
    if (copy_kind(c.name(c.device[b->device].event)).pageable()) {
      ++pageable;
      sat_acc(pageable_ns, b->copy_ns);
    }
    const std::int64_t s = c.step_number(c.device[b->device].step);
    if (s >= 0 && std::find(steps.begin(), steps.end(), s) == steps.end()) steps.push_back(s);
    for (const auto& [n, ns] : b->names) sat_acc(ns_by_name[n], ns);
  }
  // The ops holding the most of the stretches' time.
  std::vector<std::pair<std::string_view, std::int64_t>> by_time(ns_by_name.begin(), ns_by_name.end());
  std::stable_sort(by_time.begin(), by_time.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> names;
  for (std::size_t i = 0; i < by_time.size() && i < 6; ++i) names.push_back(std::string(by_time[i].first));
  std::string listed;
  for (std::size_t i = 0; i < names.size(); ++i) listed += (i ? ", " : "") + names[i];
  if (by_time.size() > names.size()) listed += ", ...";

  const std::size_t nsteps = c.steps.steps.size();
  const std::string where =
      nsteps >= 2 && !steps.empty() ? " in " + std::to_string(steps.size()) + " of " + std::to_string(nsteps) + " steps"
      : g.size() > 1               ? ", " + std::to_string(g.size()) + " times"
                                   : "";
  const std::string copy = title_name(c.name(c.device[top_build.device].event));
  Finding f;
  f.id = "host_built_tensor";
  f.severity = static_cast<double>(best_idle) >= kWarnShare * static_cast<double>(window) ? FindingSeverity::kWarning
                                                                                          : FindingSeverity::kInfo;
  // A round trip: the stretch starts at a copy of device memory to the
  // host, and the host does math on it (matrix products, softmax) before
  // copying the result back: computation moved off the GPU, not a tensor
  // built from scratch (issue 38's seventeenth round: a decode's attention
  // run on the CPU from a KV cache copied out, aten::bmm twice, then the
  // output copied back, told to build it with torch.arange(device=...)).
  const bool round_trip = std::all_of(g.begin(), g.end(), [](const Build* b) { return b->from_device; });
  std::vector<std::string> math;
  for (const auto& [n, ns] : by_time) {
    if (is_matrix_product_op(n) || contains_ci(n, "softmax")) math.emplace_back(n);
  }
  const bool computed = round_trip && !math.empty();
  bool random = false;
  for (const auto& [n, ns] : by_time) random = random || (is_random_op(n) && sat_add(ns, ns) >= build_ns);
  const bool param_init = !computed && random && random_in_parameter_init(c, top_build);
  f.title = (computed     ? "Computed on the CPU between copies from and to the GPU"
             : param_init ? "A module's parameters initialised on the CPU and copied to the GPU"
                          : "A tensor built on the CPU and copied to the GPU") +
            where + ": " + count_of(static_cast<std::int64_t>(top_build.names.size()), "CPU op") + " (" +
            format_ns(top_build.build_ns) + ": " + listed + ") launching nothing" +
            (computed ? " after a copy from the device" : "") + ", then " + title_name(c.name(top_build.copy_op)) +
            " copies (" + copy + "), the GPU idle " + format_ns(best_idle) + (g.size() > 1 ? " in all" : "");
  f.evidence.num("occurrences", static_cast<std::int64_t>(g.size()))
      .num("cpu_ops", ops)
      .num("build_ns", build_ns)
      .num("gpu_idle_ns", best_idle)
      .texts("ops", names)
      .text("copy_op", std::string(c.name(top_build.copy_op)))
      .event("copy", c.ref(c.device[top_build.device].event))
      .event("first_op", c.ref(top_build.first));
  if (!steps.empty()) add_steps(f.evidence, steps);
  if (sync) f.evidence.text("sync_after_copy", "yes");
  // Its pageable copies, for the consistency pass: pageable_memcpy's fix
  // (pinning) is moot when these are all its copies.
  if (pageable > 0) f.evidence.num("pageable_copies", pageable).num("pageable_copy_ns", pageable_ns);
  const std::string from_pageable = pageable > 0 ? " from pageable memory" : "";
  if (computed) {
    std::string ops_text;
    for (std::size_t i = 0; i < math.size() && i < 3; ++i) ops_text += (i ? ", " : "") + math[i];
    f.evidence.text("round_trip", "yes").texts("cpu_math", math);
    f.advice = "Run " + ops_text + " on the GPU, on the device tensors: the host copies device data out, computes on it "
               "op by op while the GPU idles, then copies the result back" + from_pageable +
               ". Where the work must stay on the host (a CPU offload), overlap it with the GPU's: copy to pinned "
               "memory with non_blocking=True and run the host math while the GPU works on something else.";
  } else if (param_init) {
    // A module's parameters initialised on the CPU (reset_parameters,
    // torch.nn.init), then moved: the module is built on the wrong device
    // (issue 38's twenty-second round: an MLP built inside the profiled
    // call, nn.Linear's kaiming_uniform_ on the CPU, told to draw with
    // torch.randn(device=...), which it never called).
    f.evidence.text("parameter_init", "yes");
    f.advice = "Build the module on the device: its parameters are initialised on the CPU (torch.nn.init inside the "
               "layers' reset_parameters) and then copied" + from_pageable +
               "; construct it under `with torch.device(\"cuda\"):` or pass device= to the layers, or build it "
               "once, outside the code that runs every step.";
  } else if (random) {
    f.advice = "Draw the random tensor on the device: torch.randn(..., device=x.device) (or the generator's device): "
               "the host's draw and the copy" + from_pageable +
               " both go away, and the GPU draws it in a fraction of the time while the host moves on.";
  } else {
    f.advice = "Build the tensor on the GPU, or once: create its inputs on the device (torch.arange(..., "
               "device=x.device), and the ops after it run as kernels), or compute it once and keep it on the device "
               "(cached per shape, a registered buffer). The host computes it op by op while the GPU idles, then "
               "copies it" + from_pageable + (sync ? " and waits for the copy" : "") +
               "; CPU tensors and a synchronize inside the forward also keep it out of a CUDA graph "
               "(torch.compile(mode=\"reduce-overhead\") skips graphs that hold them).";
  }
  // Its impact is what the fix removes: its claim on the idle time from each
  // stretch's start to the next launch after the copy (the host freeing the
  // tensor included; the shared causes no earlier finding took, so
  // low_gpu_utilization after it accounts for the rest) and the copies
  // (issue 38's seventh round: the saving left out the copy and the gap after it).
  std::vector<Interval> ranges;
  // (The first device work's claim is its build alone: see `until`.)
  for (const Build* b : g) ranges.push_back({b->stretch.start, b->first_work ? b->stretch.end : b->claim_end});
  ranges = merge_intervals(std::move(ranges));
  set_idle_claim(f, claimable_idle(c.idle(), kAllCauses & ~kReservedCauses, &ranges, *out));
  f.evidence.num("copy_ns", copies_ns);
  f.impact_ns = sat_add(f.idle_ns, copies_ns);
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
