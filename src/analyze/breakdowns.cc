// Each breakdown follows its peer's own definition, quirks included, so a
// user can put tprof's number next to the peer's and see the same value
// (docs/diagnose.md, "Breakdowns"). Where a definition depends on data the
// peer reads differently, the comment at that spot says what we do.
#include "src/analyze/breakdowns.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/analyze/intervals.h"
#include "src/trace/json_value.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kMaxTs = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMinTs = std::numeric_limits<std::int64_t>::min();

bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

// a ∩ b for merged, sorted interval lists.
std::vector<Interval> intersect(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  return subtract(a, subtract(a, b));
}

// ---------------------------------------------------------------------------
// TraceLens: TraceLens/TreePerf/gpu_event_analyser.py (GPUEventAnalyser.
// compute_metrics_dict) fed by TreePerfAnalyzer.get_df_gpu_timeline.

// TraceLens' communication test: the substring "nccl" or "deep_ep" in the
// name of a kernel or memset, case-sensitive.
bool tracelens_is_comm(std::string_view name) { return contains(name, "nccl") || contains(name, "deep_ep"); }

std::optional<TracelensGpuTimeline> tracelens_gpu_timeline(const DiagnoseContext& c) {
  if (!c.has_device()) return std::nullopt;
  const Trace& t = c.trace;
  // get_df_gpu_timeline keeps only the GPU events its call tree linked to a
  // launching runtime / driver call (include_unlinked_kernels=False by
  // default). A trace where nothing links would make TraceLens raise "No GPU
  // events found"; we take every device activity then, so the row still says
  // something.
  bool any_linked = false;
  for (const DeviceOp& op : c.device) any_linked = any_linked || op.launch != kNoIndex;

  std::vector<Interval> all, comp, comm, memcpy;
  std::int64_t first = kMaxTs, last = kMinTs;
  for (const DeviceOp& op : c.device) {
    if (any_linked && op.launch == kNoIndex) continue;
    const Interval iv{op.start, op.end};
    // total_time is the span of the merged union, which still includes
    // zero-length events at its ends (merge_intervals here drops them).
    first = std::min(first, op.start);
    last = std::max(last, op.end);
    all.push_back(iv);
    if (t.events.kind[op.event] == EventKind::kGpuMemcpy) {
      memcpy.push_back(iv);
    } else if (tracelens_is_comm(t.name(op.event))) {
      comm.push_back(iv);
    } else {
      // Kernels and memsets that are not communication are "computation".
      comp.push_back(iv);
    }
  }
  const std::vector<Interval> all_u = merge_intervals(std::move(all));
  const std::vector<Interval> comp_u = merge_intervals(std::move(comp));
  const std::vector<Interval> comm_u = merge_intervals(std::move(comm));
  const std::vector<Interval> memcpy_u = merge_intervals(std::move(memcpy));

  TracelensGpuTimeline g;
  g.total_time_ns = last - first;
  g.computation_time_ns = total_length(comp_u);
  g.total_comm_time_ns = total_length(comm_u);
  g.exposed_comm_time_ns = total_length(subtract(comm_u, comp_u));
  g.total_memcpy_time_ns = total_length(memcpy_u);
  g.exposed_memcpy_time_ns = total_length(subtract(subtract(memcpy_u, comp_u), comm_u));
  g.busy_time_ns = total_length(all_u);
  g.idle_time_ns = g.total_time_ns - g.busy_time_ns;
  return g;
}

// ---------------------------------------------------------------------------
// HolisticTraceAnalysis: hta/analyzers/breakdown_analysis.py and the kernel
// classes of hta/utils/utils.py.

// The rank HTA files a trace under: distributedInfo.rank, else 0.
std::int64_t trace_rank(const Trace& t) {
  const std::string_view info = t.meta.top_level_json("distributedInfo");
  if (info.empty()) return 0;
  Result<JsonValue> v = JsonValue::parse(info);
  if (!v || !v->is_object()) return 0;
  const JsonValue* rank = v->find("rank");
  return rank ? rank->int_or(0) : 0;
}

// HTA's COMPUTATION kernel type: not communication (^nccl.*Kernel), not
// memory (^Memcpy, ^Memset, ^dma), and not matched by its non-compute
// pattern (^nccl.*Kernel | .*Memcpy | ^Memset | .*Sync); the rest is OTHER.
bool hta_is_compute(std::string_view name) {
  if (name.starts_with("nccl") && contains(name.substr(4), "Kernel")) return false;
  if (name.starts_with("Memset") || name.starts_with("dma")) return false;
  if (contains(name, "Memcpy") || contains(name, "Sync")) return false;
  return true;
}

// get_temporal_breakdown for the one rank a trace file holds. HTA's GPU
// events are those with a stream (kernels, memcpy, memset); kernel_time is
// the span from the first start to the last end over every stream.
HtaTemporal hta_temporal(const DiagnoseContext& c, std::int64_t rank) {
  HtaTemporal h;
  h.rank = rank;
  std::vector<Interval> all, comp;
  std::int64_t first = kMaxTs, last = kMinTs;
  for (const DeviceOp& op : c.device) {
    first = std::min(first, op.start);
    last = std::max(last, op.end);
    all.push_back({op.start, op.end});
    if (hta_is_compute(c.name(op.event))) comp.push_back({op.start, op.end});
  }
  h.kernel_time_ns = last - first;
  h.idle_time_ns = h.kernel_time_ns - union_length(std::move(all));
  h.compute_time_ns = union_length(std::move(comp));
  h.non_compute_time_ns = h.kernel_time_ns - h.compute_time_ns - h.idle_time_ns;
  return h;
}

// HTA's default consecutive_kernel_delay (TraceAnalysis.get_idle_time_breakdown).
constexpr std::int64_t kHtaKernelWaitNs = 30;

// get_idle_time_breakdown, summed over streams. Per stream (HTA keys streams
// by stream id alone), activities sorted by start: the gap before each one
// is its start minus the previous activity's end (negative when they
// overlap, and HTA sums it as is). It is host wait when the launching
// runtime call started after the previous activity ended, else kernel wait
// when the gap is under 30 ns, else other.
HtaIdle hta_idle(const DiagnoseContext& c, std::int64_t rank) {
  HtaIdle h;
  h.rank = rank;
  std::unordered_map<std::int64_t, std::int64_t> prev_end;  // stream -> end of its previous activity
  // c.device is sorted by start, so each stream's activities come in order.
  for (const DeviceOp& op : c.device) {
    auto [it, fresh] = prev_end.try_emplace(op.stream, op.end);
    if (fresh) continue;  // the first activity on a stream has no gap before it
    const std::int64_t prev = it->second;
    it->second = op.end;
    const std::int64_t gap = op.start - prev;
    if (op.launch != kNoIndex && c.ts(op.launch) > prev) {
      h.host_wait_ns += gap;
    } else if (gap < kHtaKernelWaitNs) {
      h.kernel_wait_ns += gap;
    } else {
      h.other_ns += gap;
    }
  }
  return h;
}

// ---------------------------------------------------------------------------
// The TensorBoard plugin: tb_plugin/torch_tb_profiler/profiler/
// event_parser.py (StepParser) and overall_parser.py (OverallParser).

// ProfileRole, in priority order: a moment counts for the first role active
// then (Kernel wins over Memcpy over ... over CpuOp; the rest of the step is Other).
enum TbRole : int { kTbKernel = 0, kTbMemcpy, kTbMemset, kTbComm, kTbRuntime, kTbDataLoader, kTbCpuOp, kTbRoles };

bool tb_is_comm_op(std::string_view name) {
  static constexpr std::array<std::string_view, 10> kNames = {
      "nccl:broadcast", "nccl:reduce", "nccl:all_reduce", "nccl:all_gather", "nccl:reduce_scatter",
      "gloo:broadcast", "gloo:reduce", "gloo:all_reduce", "gloo:all_gather", "gloo:reduce_scatter"};
  return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

struct TbStep {
  std::int64_t number = -1;
  std::int64_t start = 0;
  std::int64_t end = 0;
};

// StepParser._find_device_steps + _update_steps_duration: once any step
// launched device work, each step's span becomes [max(previous step's end,
// its start), max(its end, the end of the device work its runtime calls
// launched)], and trailing steps that launched nothing (or under 80% of the
// step before) are dropped, as the plugin does because their kernels may be
// missing from the trace.
void tb_extend_steps_to_device(const DiagnoseContext& c, std::vector<TbStep>* steps) {
  const Trace& t = c.trace;
  // Runtime nodes are cuda_runtime events only (the plugin's EventTypeMap
  // has no cuda_driver); each owns the device activities sharing its correlation.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> by_launch;  // (runtime event, index into c.device)
  for (std::uint32_t i = 0; i < c.device.size(); ++i) {
    const std::uint32_t l = c.device[i].launch;
    if (l != kNoIndex && c.kind(l) == EventKind::kCudaRuntime) by_launch.emplace_back(l, i);
  }
  std::sort(by_launch.begin(), by_launch.end());
  std::vector<std::uint32_t> runtimes;
  for (std::uint32_t e : c.runtime) {
    if (c.kind(e) == EventKind::kCudaRuntime && t.events.phase[e] == Phase::kComplete) runtimes.push_back(e);
  }  // already by ts

  const std::size_t n = steps->size();
  std::vector<std::int64_t> dev_min(n, kMaxTs), dev_max(n, kMinTs), matched_count(n, 0);
  std::vector<char> matched(c.device.size(), 0);
  bool any_matched = false;
  std::size_t si = 0, ri = 0;
  std::int64_t cur_min = kMaxTs, cur_max = kMinTs;
  while (si < n && ri < runtimes.size()) {
    const TbStep& s = (*steps)[si];
    const std::uint32_t r = runtimes[ri];
    const std::int64_t rs = c.ts(r), re = c.end(r);
    if (rs < s.start) {
      ++ri;  // before this step, or straddling its start
    } else if (re <= s.end) {
      auto it = std::lower_bound(by_launch.begin(), by_launch.end(), std::make_pair(r, std::uint32_t{0}));
      for (; it != by_launch.end() && it->first == r; ++it) {
        const DeviceOp& op = c.device[it->second];
        cur_min = std::min(cur_min, op.start);
        cur_max = std::max(cur_max, op.end);
        matched[it->second] = 1;
        any_matched = true;
        ++matched_count[si];
      }
      ++ri;
    } else if (rs < s.end) {
      ++ri;  // straddles the step's end
    } else {
      dev_min[si] = cur_min;
      dev_max[si] = cur_max;
      cur_min = kMaxTs;
      cur_max = kMinTs;
      ++si;
    }
  }
  if (si < n) {
    dev_min[si] = cur_min;
    dev_max[si] = cur_max;
  }
  if (!any_matched) return;

  std::int64_t prev_end = (*steps)[0].start;
  if (dev_min[0] != kMaxTs) {
    // Device work launched outside every step that ended before the first
    // step's device work starts pushes the first step's start later.
    for (std::size_t i = 0; i < c.device.size(); ++i) {
      if (!matched[i] && c.device[i].end < dev_min[0]) prev_end = std::max(prev_end, c.device[i].end);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    TbStep& s = (*steps)[i];
    const std::int64_t start = std::max(prev_end, s.start);
    std::int64_t end = s.end;
    if (dev_min[i] == kMaxTs) {
      end = std::max(end, start);
    } else {
      end = std::max(end, dev_max[i]);
      if (end < start) end = start;
    }
    s.start = start;
    s.end = end;
    prev_end = end;
  }
  if (n > 1) {
    std::size_t last = n;
    for (std::size_t i = n; i-- > 0;) {
      if (matched_count[i] > 0) {
        last = i;
        break;
      }
    }
    if (last != n) {
      std::size_t keep = last + 1;
      if (last > 0 && static_cast<double>(matched_count[last - 1]) * 0.8 > static_cast<double>(matched_count[last])) {
        keep = last;
      }
      steps->resize(keep);
    }
  }
}

std::vector<TbPluginStep> tb_plugin_steps(const DiagnoseContext& c) {
  const Trace& t = c.trace;
  const EventColumns& ev = t.events;
  // Communication kernels are those whose External id is a CPU-side
  // nccl:* / gloo:* collective's.
  std::unordered_set<std::int64_t> comm_ext_ids;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const EventKind k = ev.kind[e];
    if ((k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kGpuUserAnnotation) &&
        ev.phase[e] == Phase::kComplete && ev.external_id[e] >= 0 && tb_is_comm_op(t.name(e))) {
      comm_ext_ids.insert(ev.external_id[e]);
    }
  }

  std::array<std::vector<Interval>, kTbRoles> roles;
  std::int64_t cpu_min = kMaxTs, cpu_max = kMinTs;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kComplete) continue;
    const Interval iv{ev.ts_ns[e], ev.ts_ns[e] + ev.dur_ns[e]};
    const std::string_view name = t.name(e);
    switch (ev.kind[e]) {
      case EventKind::kKernel:
        roles[comm_ext_ids.count(ev.external_id[e]) ? kTbComm : kTbKernel].push_back(iv);
        break;
      case EventKind::kGpuMemcpy:
        roles[kTbMemcpy].push_back(iv);
        break;
      case EventKind::kGpuMemset:
        roles[kTbMemset].push_back(iv);
        break;
      case EventKind::kCudaRuntime:
        roles[kTbRuntime].push_back(iv);
        break;
      case EventKind::kCpuOp:
      case EventKind::kUserAnnotation:
      case EventKind::kGpuUserAnnotation:
        // The plugin maps gpu_user_annotation to the same type as
        // user_annotation, so GPU-side annotations count as CPU Exec.
        // ProfilerStep#N spans are steps, never a role; we take the steps
        // from the host's ProfilerStep events only.
        if (name.starts_with("ProfilerStep#")) break;
        if (ev.kind[e] == EventKind::kCpuOp) {
          cpu_min = std::min(cpu_min, iv.start);
          cpu_max = std::max(cpu_max, iv.end);
        }
        if (is_dataloader_scope(name)) {
          roles[kTbDataLoader].push_back(iv);
        } else if (tb_is_comm_op(name)) {
          roles[kTbComm].push_back(iv);
        } else {
          roles[kTbCpuOp].push_back(iv);
        }
        break;
      default:
        break;  // python_function, cuda_driver, cuda_sync: the plugin has no role for them
    }
  }

  std::vector<TbStep> steps;
  for (const StepStat& s : c.steps.steps) {
    steps.push_back({s.step, s.start_ns, s.start_ns + s.dur_ns});
    cpu_min = std::min(cpu_min, s.start_ns);
    cpu_max = std::max(cpu_max, s.start_ns + s.dur_ns);
  }
  if (steps.empty()) {
    // Without ProfilerStep the plugin reports one step spanning the CPU ops.
    if (cpu_min > cpu_max) return {};
    steps.push_back({-1, cpu_min, cpu_max});
  }
  tb_extend_steps_to_device(c, &steps);
  if (steps.empty()) return {};

  // OverallParser.Statistics.create_from_range: the slots start as the union
  // of the steps; each role in priority order takes what is left of the
  // slots (Kernel takes its whole range), and what no role took is Other.
  std::vector<Interval> step_spans;
  for (const TbStep& s : steps) step_spans.push_back({s.start, s.end});
  std::vector<Interval> slots = merge_intervals(std::move(step_spans));
  std::array<std::vector<Interval>, kTbRoles> taken;
  for (int r = 0; r < kTbRoles; ++r) {
    const std::vector<Interval> role = merge_intervals(std::move(roles[static_cast<std::size_t>(r)]));
    taken[static_cast<std::size_t>(r)] = r == kTbKernel ? role : intersect(slots, role);
    slots = subtract(slots, role);
  }

  std::vector<TbPluginStep> out;
  out.reserve(steps.size());
  auto us = [](std::int64_t ns) { return static_cast<double>(ns) / 1000.0; };
  for (const TbStep& s : steps) {
    auto cost = [&](const std::vector<Interval>& v) { return covered_within(v, s.start, s.end); };
    TbPluginStep o;
    o.step = s.number;
    o.kernel_us = us(cost(taken[kTbKernel]));
    o.communication_us = us(cost(taken[kTbComm]));
    o.memcpy_us = us(cost(taken[kTbMemcpy]));
    o.memset_us = us(cost(taken[kTbMemset]));
    o.runtime_us = us(cost(taken[kTbRuntime]));
    o.dataloader_us = us(cost(taken[kTbDataLoader]));
    o.cpu_exec_us = us(cost(taken[kTbCpuOp]));
    o.other_us = us(cost(slots));
    out.push_back(o);
  }
  return out;
}

}  // namespace

Breakdowns compute_breakdowns(const DiagnoseContext& c) {
  Breakdowns b;
  b.tracelens_gpu_timeline = tracelens_gpu_timeline(c);
  if (c.has_device()) {
    const std::int64_t rank = trace_rank(c.trace);
    b.hta_temporal.push_back(hta_temporal(c, rank));
    b.hta_idle.push_back(hta_idle(c, rank));
  }
  b.tb_plugin_steps = tb_plugin_steps(c);
  return b;
}

}  // namespace tprof::internal
