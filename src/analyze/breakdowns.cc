// Each breakdown follows its peer's own definition, quirks included, so a
// user can put tprof's number next to the peer's and see the same value
// (docs/diagnose.md, "Breakdowns"). Where a definition depends on data the
// peer reads differently, the comment at that spot says what we do.
#include "src/analyze/breakdowns.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <limits>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "src/analyze/intervals.h"
#include "src/base/ascii.h"
#include "src/base/saturate.h"
#include "src/trace/json_cursor.h"  // parse_int64
#include "src/trace/json_value.h"
#include "src/trace/torch_npu.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kMaxTs = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMinTs = std::numeric_limits<std::int64_t>::min();

bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

// ---------------------------------------------------------------------------
// TraceLens: TraceLens/TreePerf/gpu_event_analyser.py (GPUEventAnalyser.
// compute_metrics_dict) fed by TreePerfAnalyzer.get_df_gpu_timeline.

bool contains_ignore_case(std::string_view s, std::string_view needle) {
  return std::search(s.begin(), s.end(), needle.begin(), needle.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != s.end();
}

// TraceLens' communication test (util.py, TraceEventUtils.
// is_communication_string): "nccl", "rccl" or its default custom collective
// "cross_device_reduce" anywhere in the name of a kernel or memset, any case.
bool tracelens_is_comm(std::string_view name) {
  return contains_ignore_case(name, "nccl") || contains_ignore_case(name, "rccl") ||
         contains_ignore_case(name, "cross_device_reduce");
}

// ROCm 7.1's copies written as kernels (TraceEventUtils.is_rocm_legacy_memcpy):
// TraceLens files them as memcpy, like ROCm 7.2's gpu_memcpy events.
bool tracelens_is_legacy_rocm_copy(std::string_view name) {
  if (name.ends_with(".kd")) name.remove_suffix(3);
  if (name == "MEMORY_COPY_HOST_TO_DEVICE" || name == "MEMORY_COPY_DEVICE_TO_HOST" ||
      name == "MEMORY_COPY_DEVICE_TO_DEVICE") {
    return true;
  }
  if (!name.starts_with("__amd_rocclr_copyBuffer")) return false;
  name.remove_prefix(std::string_view("__amd_rocclr_copyBuffer").size());
  if (name.starts_with("Rect")) name.remove_prefix(4);
  if (name.starts_with("Aligned")) name.remove_prefix(7);
  return name.empty();
}

// The device events TraceLens' call tree links to a launch
// (Trace2Tree/trace_to_tree.py, TraceToTree.add_gpu_ops_to_tree), by event:
// for each cuda_runtime / cuda_driver call, the event at the (pid, tid) of
// the ac2g flow end whose id is the call's link id, that event carrying the
// same link id (the last such event in the file); for cudaGraphLaunch /
// hipGraphLaunch, every kernel, memcpy and memset with the link id. The
// link id is the args' "correlation" when the first runtime call with
// "launch" in its name has one, else "External id". A copy or memset that
// shares its call's correlation but has no ac2g flow (ROCm's memsets) is
// not linked, so not in TraceLens' timeline.
std::vector<char> tracelens_linked(const Trace& t) {
  const EventColumns& ev = t.events;
  std::vector<char> linked(ev.size(), 0);
  const auto is_runtime_cat = [&](std::uint32_t e) {
    const std::string_view cat = t.str(ev.cat[e]);
    return cat == "cuda_runtime" || cat == "cuda_driver";
  };
  bool by_correlation = false;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (!is_runtime_cat(e)) continue;
    const std::string name = ascii_lower(t.name(e));
    if (name.find("launch") == std::string::npos) continue;
    by_correlation = ev.correlation[e] >= 0;
    break;
  }
  const auto link_id = [&](std::uint32_t e) { return by_correlation ? ev.correlation[e] : ev.external_id[e]; };
  std::unordered_map<std::int64_t, std::uint32_t> flow_start, flow_end;
  std::unordered_map<std::int64_t, std::vector<std::uint32_t>> gpu_by_id;
  struct LaneId {
    std::uint32_t lane;
    std::int64_t id;
    bool operator==(const LaneId&) const = default;
  };
  struct LaneIdHash {
    std::size_t operator()(const LaneId& k) const {
      return std::hash<std::int64_t>()(k.id) * 31 + k.lane;
    }
  };
  std::unordered_map<LaneId, std::uint32_t, LaneIdHash> by_lane_id;  // the last event wins, as in TraceLens' dict
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.kind[e] == EventKind::kFlow && t.str(ev.cat[e]) == "ac2g") {
      if (ev.phase[e] == Phase::kFlowStart) flow_start[ev.flow_id[e]] = e;
      if (ev.phase[e] == Phase::kFlowEnd) flow_end[ev.flow_id[e]] = e;
      continue;
    }
    const std::int64_t id = link_id(e);
    if (id < 0) continue;
    const EventKind k = ev.kind[e];
    if (is_device_work(k)) gpu_by_id[id].push_back(e);
    by_lane_id[{ev.lane[e], id}] = e;
  }
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (!is_runtime_cat(e)) continue;
    const std::int64_t id = link_id(e);
    const std::string_view name = t.name(e);
    if (name == "cudaGraphLaunch" || name == "hipGraphLaunch") {
      if (id < 0) continue;
      auto it = gpu_by_id.find(id);
      if (it != gpu_by_id.end()) {
        for (std::uint32_t g : it->second) linked[g] = 1;
      }
      continue;
    }
    if (id < 0 || !flow_start.count(id)) continue;
    auto f = flow_end.find(id);
    if (f == flow_end.end()) continue;
    auto out = by_lane_id.find({ev.lane[f->second], ev.flow_id[f->second]});
    if (out != by_lane_id.end()) linked[out->second] = 1;
  }
  return linked;
}

std::optional<TracelensGpuTimeline> tracelens_gpu_timeline(const DiagnoseContext& c) {
  if (!c.has_device()) return std::nullopt;
  const Trace& t = c.trace;
  // get_df_gpu_timeline keeps only the GPU events its call tree linked to a
  // launching runtime / driver call (include_unlinked_kernels=False by
  // default). A trace where nothing links (no ac2g flows: older Kineto)
  // makes TraceLens raise "No GPU events found"; we take every device
  // activity then, so the row still says something.
  const std::vector<char> linked = tracelens_linked(t);
  bool any_linked = false;
  for (const DeviceOp& op : c.device) any_linked = any_linked || linked[op.event];

  std::vector<Interval> all, comp, comm, memcpy;
  std::int64_t first = kMaxTs, last = kMinTs;
  std::int64_t left_out = 0, left_out_ns = 0;
  for (const DeviceOp& op : c.device) {
    if (any_linked && !linked[op.event]) {
      ++left_out;
      sat_acc(left_out_ns, op.end - op.start);
      continue;
    }
    const Interval iv{op.start, op.end};
    // total_time is the span of the merged union, which still includes
    // zero-length events at its ends (merge_intervals here drops them).
    first = std::min(first, op.start);
    last = std::max(last, op.end);
    all.push_back(iv);
    const EventKind k = t.events.kind[op.event];
    if (k == EventKind::kGpuMemcpy || (k == EventKind::kKernel && tracelens_is_legacy_rocm_copy(t.name(op.event)))) {
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
  g.left_out_activities = left_out;
  g.left_out_ns = left_out_ns;
  return g;
}

// ---------------------------------------------------------------------------
// HolisticTraceAnalysis (HTA): get_temporal_breakdown and
// get_idle_time_breakdown (hta/analyzers/breakdown_analysis.py) over the
// events TraceAnalysis(trace_dir=...) keeps after its parser
// (hta/common/trace_parser.py) and its step filter (hta/common/trace.py,
// _filter_irrelevant_gpu_kernels). HTA works in the file's µs; we keep ns,
// so HTA's threshold of 30 (µs, its docstring says ns) is 30'000 ns here.

constexpr std::int64_t kUs = 1000;

// The rank HTA files a trace under: distributedInfo.rank, else 0.
std::int64_t trace_rank(const Trace& t) {
  const std::string_view info = t.meta.top_level_json("distributedInfo");
  if (info.empty()) return 0;
  Result<JsonValue> v = JsonValue::parse(info);
  if (!v || !v->is_object()) return 0;
  const JsonValue* rank = v->find("rank");
  return rank ? rank->int_or(0) : 0;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

constexpr std::int64_t kMaxInstant = (std::int64_t{1} << 62) - 1;

// HTA's times (round_down_time_stamps). When the file's ts column holds
// fractions of a µs (ns-resolution traces, pytorch#122425), HTA moves every
// event inward to whole µs: ts = ceil(ts), end = floor(ts + dur). An event
// under 1 µs that holds no whole µs then ends 1 µs before it starts; HTA
// keeps it so, and so do we. With whole-µs ts HTA leaves times alone. Our
// reader added baseTimeNanoseconds to ts, which HTA does not: we round in
// the file's own frame.
class HtaClock {
 public:
  explicit HtaClock(const Trace& t) : base_(t.meta.base_time_ns.value_or(0)) {
    for (std::size_t e = 0; e < t.events.size() && !round_; ++e) round_ = (t.events.ts_ns[e] - base_) % kUs != 0;
  }
  // Rounded times stay inside the reader's ±2^62 ns, so that gaps between
  // them fit int64 (a start rounded up past 2^62 could not).
  std::int64_t start(std::int64_t ts) const {
    return round_ ? std::min(kMaxInstant, base_ - floor_div(base_ - ts, kUs) * kUs) : ts;
  }
  std::int64_t end(std::int64_t ts, std::int64_t dur) const {
    return round_ ? std::max(-kMaxInstant, base_ + floor_div(ts + dur - base_, kUs) * kUs) : ts + dur;
  }

 private:
  std::int64_t base_ = 0;
  bool round_ = false;
};

// A number or numeric string as pandas' to_numeric(...).astype(int) reads
// it; -1 for anything else (normalize_gpu_stream_numbers).
std::int64_t hta_numeric(std::string_view text) {
  // pandas reads decimal notation only, spaces around it allowed: ROCm's
  // "0x0" on runtime calls, which strtod would read as hex 0, is -1, and
  // so are "nan" and "inf".
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  std::int64_t v = 0;
  if (parse_int64(text, &v)) return v;
  for (char ch : text) {
    if (!((ch >= '0' && ch <= '9') || ch == '.' || ch == 'e' || ch == 'E' || ch == '+' || ch == '-')) {
      return -1;
    }
  }
  const std::string s(text);
  char* stop = nullptr;
  const double d = std::strtod(s.c_str(), &stop);
  if (s.empty() || stop != s.c_str() + s.size() || !std::isfinite(d) || std::fabs(d) > 9e18) return -1;
  return static_cast<std::int64_t>(d);
}

// HTA's stream column: the event's args "stream", -1 when absent or not
// numeric (ROCm writes "0x0" on runtime calls). Kineto's tid is the stream
// on CUDA, but not on MTIA ("Stream 108" is tid 3774), so we read the arg.
std::int64_t hta_stream(const Trace& t, std::uint32_t e) {
  const std::string_view json = t.args_json(e);
  if (json.empty()) return -1;
  static constexpr std::string_view kKey[] = {"stream"};
  std::string_view v[1];
  if (!member_values(json, kKey, v) || v[0].empty()) return -1;
  if (v[0].front() == '"') {  // a string without escapes: its text
    const std::string_view text = v[0].substr(1, v[0].size() - 2);
    return text.find('\\') == std::string_view::npos ? hta_numeric(text) : -1;
  }
  return hta_numeric(v[0]);
}

// get_kernel_type(name) == COMPUTATION (hta/common/types.py patterns, used
// with Python's re.match: anchored at the start, and ".*" stops at a
// newline). COMMUNICATION is ^nccl | ^hip | ^hccl | .*ncclKernel, MEMORY
// ^(hip)?Memcpy | ^(hip)?Memset | ^dma; COMPUTATION is what matches none of
// those nor the non-compute pattern below; the rest is OTHER.
bool hta_is_computation(std::string_view name) {
  const std::string_view line = name.substr(0, name.find('\n'));
  static constexpr std::array<std::string_view, 10> kPrefixes = {
      "nccl",   "hip",    "hccl",   "Stream Wait Event", "runFunction", "job_exe",
      "packet", "pe_exe", "cpum_exe_subgraph", "collective_subgraph_execution"};
  for (std::string_view p : kPrefixes) {
    if (name.starts_with(p)) return false;
  }
  static constexpr std::array<std::string_view, 5> kInfixes = {"ncclKernel", "Memcpy", "Memset", "dma", "Sync"};
  for (std::string_view x : kInfixes) {
    if (contains(line, x)) return false;
  }
  return !(line.starts_with("cuda") && contains(line.substr(4), "LaunchKernel"));
}

// One row of HTA's trace table that its breakdowns read: an event with a
// stream (HTA's "GPU kernels"), times as HTA has them.
struct HtaOp {
  std::uint32_t event = 0;
  std::int64_t stream = -1;
  std::int64_t start = 0;  // ns, HTA's ts
  std::int64_t end = 0;    // ns, HTA's ts + dur
  bool has_launch = false;     // HTA's ts_runtime is a number (see hta_ops)
  std::int64_t launch_ts = 0;  // HTA's ts_runtime
  bool idle_cat = false;       // in get_idle_time_breakdown's categories (kernel, memcpy, memset)
  bool computation = false;
};

bool is_profiler_step_name(std::string_view n) {
  return n.size() > 13 && n.starts_with("ProfilerStep#") && n[13] >= '0' && n[13] <= '9';
}

// The ts of the first and last rows of HTA's table (hta_ops).
struct HtaSpan {
  bool any = false;
  std::int64_t first_ts = 0, last_ts = 0;  // ns, HTA's ts
};

// HTA's rows with a stream, in file order: every row of its table (below)
// whose args "stream" is not -1, whatever its category. That is Kineto's
// device activity and cuda_sync, and also host events that carry a stream:
// Inductor's Triton launches are cpu_op events with "stream": 0 (torch's
// record_function args of the launch), and HTA's breakdowns take them as
// rows like any kernel, on the host clock. The temporal and kernel-type
// breakdowns count them so (a Triton cpu_op is COMPUTATION by its name);
// the idle breakdown takes only the kernel, memcpy and memset categories.
// span, when given, gets the first and last ts of every row of the table
// (host rows too) after the step filter: Trace.get_trace_duration.
std::vector<HtaOp> hta_ops(const DiagnoseContext& c, const HtaClock& clock, bool include_last_profiler_step,
                           HtaSpan* span = nullptr) {
  const Trace& t = c.trace;
  const EventColumns& ev = t.events;
  // A row of HTA's table at all (_compress_df): an event with a dur and a
  // category, not the profiler's "Trace" span.
  auto kept = [&](std::uint32_t e) {
    return ev.phase[e] == Phase::kComplete && !(ev.flags[e] & kFlagFromBeginEnd) && ev.cat[e] != kEmptyStr &&
           ev.kind[e] != EventKind::kTraceSpan;
  };
  // The step filter: with at least two ProfilerStep#N names, HTA keeps the
  // device rows whose correlation a host row before the last step's start
  // shares, and the other rows that start before it. With
  // include_last_profiler_step, "before the last step's start" becomes "at
  // or before the latest end of a step" (its cpu_kernels["ts"] <=
  // last_profiler_end). MTIA traces ("device_type": "MTIA") get another
  // filter we do not reproduce.
  std::unordered_set<StrId> step_names;
  std::int64_t last_step_start = kMinTs, last_step_end = kMinTs;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (!kept(e) || !is_profiler_step_name(t.name(e))) continue;
    step_names.insert(ev.name[e]);
    last_step_start = std::max(last_step_start, clock.start(ev.ts_ns[e]));
    last_step_end = std::max(last_step_end, clock.end(ev.ts_ns[e], ev.dur_ns[e]));
  }
  auto in_steps = [&](std::int64_t host_ts) {
    return include_last_profiler_step ? host_ts <= last_step_end : host_ts < last_step_start;
  };
  const bool filter = step_names.size() >= 2 && t.meta.top_level_json("device_type") != "\"MTIA\"";
  // Whether the filter keeps row e (stream: HTA's stream column for it).
  auto survives = [&](std::uint32_t e, std::int64_t stream) {
    if (!filter) return true;
    const std::string_view name = t.name(e);
    const std::int64_t corr = ev.correlation[e];
    // GPUKernelFilter's rows; every other row is a host row to HTA.
    const bool device_row = (stream >= 0 && corr >= 0) || name == "Event Sync" || name == "Context Sync";
    if (!device_row) return in_steps(clock.start(ev.ts_ns[e]));
    if (corr < 0) return true;
    const std::uint32_t launch = c.launch_for_correlation(corr);
    return launch != kNoIndex && in_steps(clock.start(ev.ts_ns[launch]));
  };
  // HTA's ts_runtime comes from joining index_correlation with the table's
  // index. A row with a correlation (≥ 0) that no host row shares keeps
  // index_correlation 0 (transform_correlation_to_index), which is the
  // index of the file's first event: its ts_runtime is that event's ts when
  // the event is still a row of the table, else NaN (never host wait). The
  // first event here is the file's first one unless the reader skipped that
  // (an E event, an unknown phase, no ts), none of which HTA keeps either.
  const bool first_is_row = ev.size() > 0 && kept(0) && survives(0, hta_stream(t, 0));
  const std::int64_t first_ts = first_is_row ? clock.start(ev.ts_ns[0]) : 0;

  if (span) {
    // The stream decides only whether a row with a correlation is a device
    // row (survives), so only those rows' args are read, and only when the
    // filter applies.
    for (std::uint32_t e = 0; e < ev.size(); ++e) {
      if (!kept(e)) continue;
      const std::int64_t stream = filter && ev.correlation[e] >= 0 ? hta_stream(t, e) : -1;
      if (!survives(e, stream)) continue;
      const std::int64_t ts = clock.start(ev.ts_ns[e]);
      span->first_ts = span->any ? std::min(span->first_ts, ts) : ts;
      span->last_ts = span->any ? std::max(span->last_ts, ts) : ts;
      span->any = true;
    }
  }

  std::unordered_map<StrId, bool> computation;  // by name: classify each distinct name once
  std::vector<HtaOp> ops;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (!kept(e)) continue;
    const EventKind k = ev.kind[e];
    // Only an event whose args hold the key can have a stream; the search
    // spares parsing the args of every host event.
    if (!(is_device_kind(k) || k == EventKind::kCudaSync) && !contains(t.args_json(e), "\"stream\"")) continue;
    HtaOp op;
    op.stream = hta_stream(t, e);
    if (op.stream == -1 || !survives(e, op.stream)) continue;
    op.event = e;
    op.start = clock.start(ev.ts_ns[e]);
    op.end = clock.end(ev.ts_ns[e], ev.dur_ns[e]);
    const std::int64_t corr = ev.correlation[e];
    const std::uint32_t launch = corr >= 0 ? c.launch_for_correlation(corr) : kNoIndex;
    if (launch != kNoIndex) {
      op.has_launch = true;
      op.launch_ts = clock.start(ev.ts_ns[launch]);
    } else if (corr >= 0 && first_is_row) {
      op.has_launch = true;
      op.launch_ts = first_ts;
    }
    op.idle_cat = is_device_work(k);
    auto [it, fresh] = computation.try_emplace(ev.name[e], false);
    if (fresh) it->second = hta_is_computation(t.name(e));
    op.computation = it->second;
    ops.push_back(op);
  }
  return ops;
}

// merge_kernel_intervals (hta/utils/utils.py): rows by ts; a row opens a
// new group when its ts is after every earlier row's end; a group spans
// [its first ts, its largest end]. HTA then sums end − ts over the groups.
struct HtaMerged {
  std::int64_t first_start = 0;  // the first group's ts
  std::int64_t last_end = 0;     // the last group's end
  std::int64_t run = 0;          // Σ (end − ts) over groups
};
HtaMerged hta_merge(std::vector<Interval> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  HtaMerged m;
  if (rows.empty()) return m;
  m.first_start = rows[0].start;
  std::int64_t group_start = rows[0].start, group_end = rows[0].end, max_end = rows[0].end;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].start > max_end) {
      m.run += group_end - group_start;
      group_start = rows[i].start;
      group_end = rows[i].end;
    } else {
      group_end = std::max(group_end, rows[i].end);
    }
    max_end = std::max(max_end, rows[i].end);
  }
  m.run += group_end - group_start;
  m.last_end = group_end;
  return m;
}

// get_temporal_breakdown for the one rank a trace file holds: every row
// with a stream, all streams together.
HtaTemporal hta_temporal(const std::vector<HtaOp>& ops, std::int64_t rank) {
  std::vector<Interval> all, comp;
  for (const HtaOp& op : ops) {
    all.push_back({op.start, op.end});
    if (op.computation) comp.push_back({op.start, op.end});
  }
  const HtaMerged a = hta_merge(std::move(all));
  const std::int64_t kernel_time = a.last_end - a.first_start;
  const std::int64_t idle_time = kernel_time - a.run;
  const std::int64_t compute_time = hta_merge(std::move(comp)).run;
  const std::int64_t non_compute_time = kernel_time - compute_time - idle_time;
  // HTA's arithmetic gives a negative value only through the events its
  // rounding turns back 1 µs: alone they make a negative group (a negative
  // compute_time), and a compute group that outlasts the merged one makes
  // non_compute_time negative, where HTA's own assert fails. We report 0.
  HtaTemporal h;
  h.rank = rank;
  h.kernel_time_ns = std::max<std::int64_t>(0, kernel_time);
  h.idle_time_ns = std::max<std::int64_t>(0, idle_time);
  h.compute_time_ns = std::max<std::int64_t>(0, compute_time);
  h.non_compute_time_ns = std::max<std::int64_t>(0, non_compute_time);
  return h;
}

// numpy's linear quantile of sorted values (pandas' describe): position
// q·(n−1), interpolated as numpy's _lerp does (from the upper value past
// the midpoint), so that the figures round as pandas' do.
double linear_quantile(const std::vector<std::int64_t>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  if (lo + 1 >= sorted.size()) return static_cast<double>(sorted[lo]);
  const double t = pos - static_cast<double>(lo);
  const auto a = static_cast<double>(sorted[lo]), b = static_cast<double>(sorted[lo + 1]);
  return t >= 0.5 ? b - (b - a) * (1 - t) : a + (b - a) * t;
}

// describe() of one category's intervals, as pandas computes each figure
// (the mean, then the squares about it, over n − 1).
void describe_intervals(std::vector<std::int64_t> v, HtaIdleCategory* out) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  out->count = static_cast<std::int64_t>(v.size());
  out->mean_ns = out->std_ns = out->min_ns = out->p25_ns = out->p50_ns = out->p75_ns = out->max_ns = kNaN;
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  const auto n = static_cast<double>(v.size());
  double sum = 0;
  for (std::int64_t x : v) sum += static_cast<double>(x);
  out->mean_ns = sum / n;
  if (v.size() > 1) {
    double sq = 0;
    for (std::int64_t x : v) sq += (static_cast<double>(x) - out->mean_ns) * (static_cast<double>(x) - out->mean_ns);
    out->std_ns = std::sqrt(sq / (n - 1));
  }
  out->min_ns = static_cast<double>(v.front());
  out->max_ns = static_cast<double>(v.back());
  out->p25_ns = linear_quantile(v, 0.25);
  out->p50_ns = linear_quantile(v, 0.5);
  out->p75_ns = linear_quantile(v, 0.75);
}

// get_idle_time_breakdown (_analyze_idle_time_for_stream) for the trace's
// rank: one entry per stream, in the order the streams first appear in
// the file. Per stream, rows by ts: the gap before each row but the first
// is its ts minus the previous row's end. It is host wait when the row's
// runtime call started after that end, else kernel wait when the gap is
// under consecutive_kernel_delay, else other; the first row is other.
std::vector<HtaIdleStream> hta_idle_streams(const std::vector<HtaOp>& ops, const HtaOptions& options) {
  std::vector<std::int64_t> streams;
  std::unordered_map<std::int64_t, std::vector<const HtaOp*>> by_stream;
  for (const HtaOp& op : ops) {
    if (!op.idle_cat) continue;
    auto [it, fresh] = by_stream.try_emplace(op.stream);
    if (fresh) streams.push_back(op.stream);
    it->second.push_back(&op);
  }
  std::vector<HtaIdleStream> out;
  std::array<std::vector<std::int64_t>, 3> intervals;
  for (std::int64_t s : streams) {
    std::vector<const HtaOp*>& rows = by_stream[s];
    std::stable_sort(rows.begin(), rows.end(), [](const HtaOp* a, const HtaOp* b) { return a->start < b->start; });
    HtaIdleStream h;
    h.stream = s;
    h.categories[kHtaOtherWait].rows = 1;  // the first row
    for (std::vector<std::int64_t>& v : intervals) v.clear();
    for (std::size_t i = 1; i < rows.size(); ++i) {
      const std::int64_t prev_end = rows[i - 1]->end;
      // Negative when a row starts inside the previous one (HTA keeps
      // those): rows nested in one long row add up past any span.
      const std::int64_t gap = rows[i]->start - prev_end;
      const HtaIdleType type = rows[i]->has_launch && rows[i]->launch_ts > prev_end ? kHtaHostWait
                               : gap < options.consecutive_kernel_delay_ns           ? kHtaKernelWait
                                                                                     : kHtaOtherWait;
      HtaIdleCategory& cat = h.categories[type];
      ++cat.rows;
      sat_acc(cat.sum_ns, gap);
      if (options.idle_interval_stats) intervals[type].push_back(gap);
    }
    if (options.idle_interval_stats) {
      for (std::size_t k = 0; k < intervals.size(); ++k) describe_intervals(std::move(intervals[k]), &h.categories[k]);
    }
    out.push_back(h);
  }
  return out;
}

// The idle breakdown with HTA's defaults, as Breakdowns holds it. HTA sums
// the gaps as they come, so rows that overlap on one stream (negative
// gaps) lower a category's total, even below 0. We keep its sums and
// report a negative one as 0: time a stream waited is never negative.
std::vector<HtaIdle> hta_idle(const std::vector<HtaOp>& ops, std::int64_t rank) {
  std::vector<HtaIdle> out;
  for (const HtaIdleStream& s : hta_idle_streams(ops, HtaOptions{})) {
    HtaIdle h;
    h.rank = rank;
    h.stream = s.stream;
    h.host_wait_ns = std::max<std::int64_t>(0, s.categories[kHtaHostWait].sum_ns);
    h.kernel_wait_ns = std::max<std::int64_t>(0, s.categories[kHtaKernelWait].sum_ns);
    h.other_ns = std::max<std::int64_t>(0, s.categories[kHtaOtherWait].sum_ns);
    out.push_back(h);
  }
  return out;
}

// get_kernel_type (hta/utils/utils.py): COMMUNICATION, then MEMORY, then
// COMPUTATION, else OTHER. HTA's communication pattern takes every name
// starting with "hip", so hipMemcpy is COMMUNICATION to HTA; so it is here.
enum HtaKernelType : int { kHtaComputation = 1, kHtaCommunication = 2, kHtaMemory = 4, kHtaOther = 0 };
int hta_kernel_type(std::string_view name, bool computation) {
  const std::string_view line = name.substr(0, name.find('\n'));
  if (name.starts_with("nccl") || name.starts_with("hip") || name.starts_with("hccl") || contains(line, "ncclKernel")) {
    return kHtaCommunication;
  }
  if (name.starts_with("Memcpy") || name.starts_with("Memset") || name.starts_with("dma")) return kHtaMemory;
  return computation ? kHtaComputation : kHtaOther;
}

// merge_kernel_intervals' groups themselves (hta_merge sums them): rows by
// ts, a group spans [its first ts, its largest end]. A group can end before
// it starts (HtaClock's rounding), as in HTA.
std::vector<Interval> hta_groups(std::vector<Interval> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> groups;
  std::int64_t max_end = kMinTs;
  for (const Interval& r : rows) {
    if (groups.empty() || r.start > max_end) {
      groups.push_back(r);
    } else {
      groups.back().end = std::max(groups.back().end, r.end);
    }
    max_end = std::max(max_end, r.end);
  }
  return groups;
}

// HTA's running-status sweep: each group adds its type's bit at its ts and
// takes it back at its end; boundaries by time, and a stretch between two
// boundaries gets the running value after the first. HTA sorts ties in no
// set order, which changes only stretches of length 0, so the sums agree.
// Calls visit(running, length) for every stretch of positive length.
template <typename Visit>
void hta_sweep(const std::array<std::vector<Interval>, 3>& groups, Visit visit) {
  std::vector<std::pair<std::int64_t, int>> edges;
  for (std::size_t t = 0; t < groups.size(); ++t) {
    const int bit = 1 << t;
    for (const Interval& g : groups[t]) {
      edges.emplace_back(g.start, bit);
      edges.emplace_back(g.end, -bit);
    }
  }
  std::sort(edges.begin(), edges.end());
  int running = 0;
  for (std::size_t i = 0; i < edges.size();) {
    const std::int64_t at = edges[i].first;
    for (; i < edges.size() && edges[i].first == at; ++i) running += edges[i].second;
    if (i < edges.size() && edges[i].first > at) visit(running, edges[i].first - at);
  }
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

// The plugin's DataLoader role (event_parser.py, StepParser._parse_step):
// an operator or user annotation named "enumerate(DataLoader)#….__next__"
// or "enumerate(DataPipe)#…". The plugin's own rule, kept here so that no
// change to tprof's own name rules moves the plugin's numbers.
bool tb_dataloader_role(std::string_view name) {
  return (name.starts_with("enumerate(DataLoader)#") && name.ends_with(".__next__")) ||
         name.starts_with("enumerate(DataPipe)#");
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
        // ProfilerStep#N spans are steps (below), never a role.
        if (name.starts_with("ProfilerStep#")) break;
        if (ev.kind[e] == EventKind::kCpuOp) {
          cpu_min = std::min(cpu_min, iv.start);
          cpu_max = std::max(cpu_max, iv.end);
        }
        if (tb_dataloader_role(name)) {
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

  // The plugin's steps (StepParser): every complete event it parses as a
  // ProfilerStepEvent, i.e. named ProfilerStep#N with a category it maps to
  // an operator or a user annotation: cpu_op, user_annotation and
  // gpu_user_annotation, on any lane. Recent Kineto traces give each step a
  // gpu_user_annotation copy on the GPU lane, later than the host's; the
  // plugin takes it as one more step (its own rules then give it what is
  // left of the device time, often nothing), and so do we. Steps come in the
  // plugin's order: its events sorted by ts (a stable sort of file order).
  std::vector<std::uint32_t> step_events;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const EventKind k = ev.kind[e];
    if (ev.phase[e] == Phase::kComplete && !(ev.flags[e] & kFlagFromBeginEnd) &&
        (k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kGpuUserAnnotation) &&
        t.name(e).starts_with("ProfilerStep#")) {
      step_events.push_back(e);
    }
  }
  std::stable_sort(step_events.begin(), step_events.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return ev.ts_ns[a] < ev.ts_ns[b]; });
  std::vector<TbStep> steps;
  for (std::uint32_t e : step_events) {
    std::int64_t number = -1;
    const std::string_view digits = t.name(e).substr(13);
    if (!parse_int64(digits, &number) || number < 0) number = -1;
    steps.push_back({number, ev.ts_ns[e], ev.ts_ns[e] + ev.dur_ns[e]});
    cpu_min = std::min(cpu_min, ev.ts_ns[e]);
    cpu_max = std::max(cpu_max, ev.ts_ns[e] + ev.dur_ns[e]);
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

bool tracelens_counts_as_comm(std::string_view name) { return tracelens_is_comm(name); }

Breakdowns compute_breakdowns(const DiagnoseContext& c) {
  Breakdowns b;
  // The peers read Kineto's GPU events by their own rules; none reads
  // torch_npu's layout, which tprof maps onto its model (issue 38's
  // seventeenth round: TraceLens' rules on an NPU step gave "exposed comm
  // 0 ns" beside a communication-bound verdict).
  if (is_torch_npu(c.trace)) return b;
  b.tracelens_gpu_timeline = tracelens_gpu_timeline(c);
  const std::vector<HtaOp> hta = hta_ops(c, HtaClock(c.trace), /*include_last_profiler_step=*/false);
  if (!hta.empty()) {
    // HTA fails on a rank without rows with a stream; we give no entry.
    const std::int64_t rank = trace_rank(c.trace);
    b.hta_temporal.push_back(hta_temporal(hta, rank));
    b.hta_idle = hta_idle(hta, rank);
  }
  b.tb_plugin_steps = tb_plugin_steps(c);
  return b;
}

}  // namespace tprof::internal

namespace tprof::internal {

namespace {

constexpr std::array<std::string_view, 3> kHtaTypeNames = {"COMPUTATION", "COMMUNICATION", "MEMORY"};

// The type of each row as an index into kHtaTypeNames (the bit
// _get_gpu_kernel_type_time gives it: COMPUTATION 1, COMMUNICATION 2,
// MEMORY 4), or -1 for OTHER and, without include_memory_kernels, MEMORY.
std::vector<int> hta_row_types(const Trace& t, const std::vector<HtaOp>& ops, bool include_memory_kernels) {
  std::vector<int> types;
  types.reserve(ops.size());
  for (const HtaOp& op : ops) {
    const int type = hta_kernel_type(t.name(op.event), op.computation);
    types.push_back(type == kHtaOther || (type == kHtaMemory && !include_memory_kernels)
                        ? -1
                        : std::countr_zero(static_cast<unsigned>(type)));
  }
  return types;
}

HtaKernelTypes hta_kernel_types(const DiagnoseContext& c, const std::vector<HtaOp>& ops,
                                const std::vector<int>& types) {
  HtaKernelTypes out;
  const std::string_view info = c.trace.meta.top_level_json("distributedInfo");
  if (!info.empty()) {
    Result<JsonValue> v = JsonValue::parse(info);
    const JsonValue* rank = v && v->is_object() ? v->find("rank") : nullptr;
    std::int64_t r = 0;
    out.has_rank = rank != nullptr && rank->get_int(&r) && r >= 0;
    if (out.has_rank) out.rank = r;
  }
  std::array<std::vector<Interval>, 3> rows;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (types[i] >= 0) rows[static_cast<std::size_t>(types[i])].push_back({ops[i].start, ops[i].end});
  }
  std::array<std::vector<Interval>, 3> groups;
  for (std::size_t i = 0; i < rows.size(); ++i) groups[i] = hta_groups(std::move(rows[i]));
  for (const Interval& g : groups[1]) out.comm_ns += g.end - g.start;

  std::array<std::int64_t, 8> by_running{};
  hta_sweep(groups, [&](int running, std::int64_t len) {
    if (running > 0 && running < 8) by_running[static_cast<std::size_t>(running)] += len;
  });
  // get_comm_comp_overlap sweeps communication and computation alone.
  hta_sweep({groups[0], groups[1], {}}, [&](int running, std::int64_t len) {
    if (running == 3) out.comm_comp_overlap_ns += len;
  });
  for (std::size_t r = 1; r < by_running.size(); ++r) {
    if (by_running[r] == 0) continue;
    std::string label;
    for (std::size_t b = 0; b < kHtaTypeNames.size(); ++b) {
      if ((r & (std::size_t{1} << b)) == 0) continue;
      if (!label.empty()) label += " overlapping ";
      label += kHtaTypeNames[b];
    }
    out.kernel_types.emplace_back(std::move(label), by_running[r]);
  }
  std::sort(out.kernel_types.begin(), out.kernel_types.end());
  return out;
}

// _aggr_gpu_kernel_time's groupby("name")["dur"].agg(["sum", "max", "min",
// "mean", "std"]) per type, over the same rows and types as the type table.
std::vector<HtaKernel> hta_kernels(const Trace& t, const std::vector<HtaOp>& ops, const std::vector<int>& types) {
  struct Acc {
    std::int64_t n = 0, sum = 0, min = 0, max = 0;
    double mean = 0, m2 = 0;  // Welford's running mean and Σ squared deviations
  };
  std::unordered_map<std::uint64_t, Acc> by;  // (type, name id)
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (types[i] < 0) continue;
    const std::uint64_t key = (static_cast<std::uint64_t>(types[i]) << 32) | t.events.name[ops[i].event];
    Acc& a = by[key];
    const std::int64_t d = ops[i].end - ops[i].start;
    a.min = a.n == 0 ? d : std::min(a.min, d);
    a.max = a.n == 0 ? d : std::max(a.max, d);
    sat_acc(a.sum, d);
    ++a.n;
    const double delta = static_cast<double>(d) - a.mean;
    a.mean += delta / static_cast<double>(a.n);
    a.m2 += delta * (static_cast<double>(d) - a.mean);
  }
  std::vector<HtaKernel> out;
  out.reserve(by.size());
  for (const auto& [key, a] : by) {
    HtaKernel k;
    k.kernel_type = kHtaTypeNames[key >> 32];
    k.name = static_cast<StrId>(key & 0xffffffffu);
    k.count = a.n;
    k.sum_ns = a.sum;
    k.min_ns = a.min;
    k.max_ns = a.max;
    k.mean_ns = static_cast<double>(a.sum) / static_cast<double>(a.n);
    k.std_ns = a.n > 1 ? std::sqrt(a.m2 / static_cast<double>(a.n - 1)) : 0;
    out.push_back(k);
  }
  std::sort(out.begin(), out.end(), [&](const HtaKernel& a, const HtaKernel& b) {
    return a.kernel_type != b.kernel_type ? a.kernel_type < b.kernel_type : t.str(a.name) < t.str(b.name);
  });
  return out;
}

// The runtime calls HTA's queue length counts as enqueuing work
// (TraceSymbolTable.get_runtime_launch_events_mask).
bool hta_launch_call(std::string_view name) {
  static const std::unordered_set<std::string_view> kNames = {
      "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaMemcpyAsync",
      "cudaMemsetAsync", "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel",
      "hipExtModuleLaunchKernel", "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream"};
  return kNames.count(name) != 0;
}

// HTA's queue length (TraceCounters._get_queue_length_time_series_for_rank)
// over its rows: per stream (the rows' args "stream", as every other HTA
// figure keys streams), +1 when a launch call whose activity is a row
// starts, -1 when that activity starts; the running sum after each. Times
// are the trace's exact ns; ties put the launch first (HTA's sort leaves
// them in no set order).
std::vector<HtaQueuePoint> hta_queue(const DiagnoseContext& c, const std::vector<HtaOp>& ops) {
  const EventColumns& ev = c.trace.events;
  struct Edge {
    std::int64_t ts;
    int delta;
    std::uint32_t event;
  };
  std::map<std::int64_t, std::vector<Edge>> by_stream;
  for (const HtaOp& op : ops) {
    const std::int64_t corr = ev.correlation[op.event];
    const std::uint32_t launch = corr >= 0 ? c.launch_for_correlation(corr) : kNoIndex;
    if (launch == kNoIndex || !hta_launch_call(c.name(launch))) continue;
    std::vector<Edge>& edges = by_stream[op.stream];
    edges.push_back({ev.ts_ns[launch], +1, op.event});
    edges.push_back({ev.ts_ns[op.event], -1, op.event});
  }
  std::vector<HtaQueuePoint> out;
  for (auto& [stream, edges] : by_stream) {
    std::stable_sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.delta > b.delta;
    });
    std::int64_t q = 0;
    for (const Edge& e : edges) {
      q += e.delta;
      out.push_back({e.ts, e.event, stream, q});
    }
  }
  return out;
}

// get_memory_kernel_type (hta/utils/utils.py): "Memset", the first 11
// characters of a "Memcpy ..." name ("Memcpy DtoH"), else "Memcpy Unknown".
std::string_view hta_memory_kind(std::string_view name) {
  if (name.starts_with("Memset")) return "Memset";
  if (!name.starts_with("Memcpy")) return "Memcpy Unknown";
  return name.substr(0, 11);
}

// HTA's memory bandwidth series (_get_memory_bw_time_series_for_rank): its
// MEMORY rows (get_kernel_type), each +bw at its ts and -bw at ts + dur (a
// dur of 0 as 1 µs), bw being the row's "memory bandwidth (GB/s)" arg (0
// when absent, HTA's default); the points by ts (stably: the starts in row
// order, then the ends, which is HTA's sort where its order is set), then
// per kind (kinds by name, as groupby sorts them) the running sum, added
// up in that order as pandas' cumsum adds.
std::vector<HtaMemoryBwPoint> hta_memory_bw(const Trace& t, const std::vector<HtaOp>& ops) {
  static constexpr std::string_view kKey[] = {"memory bandwidth (GB/s)"};
  std::vector<HtaMemoryBwPoint> starts, ends;
  for (const HtaOp& op : ops) {
    const std::string_view name = t.name(op.event);
    if (hta_kernel_type(name, op.computation) != kHtaMemory) continue;
    double bw = 0;
    std::string_view v[1];
    const std::string_view json = t.args_json(op.event);
    if (!json.empty() && member_values(json, kKey, v) && !v[0].empty() && v[0].front() != '"') {
      const std::string text(v[0]);
      char* stop = nullptr;
      const double d = std::strtod(text.c_str(), &stop);
      if (stop == text.c_str() + text.size()) bw = d;
    }
    const std::int64_t end = op.end == op.start ? op.start + 1000 : op.end;
    starts.push_back({op.start, op.event, hta_memory_kind(name), bw});
    ends.push_back({end, op.event, hta_memory_kind(name), -bw});
  }
  starts.insert(starts.end(), ends.begin(), ends.end());
  std::stable_sort(starts.begin(), starts.end(), [](const HtaMemoryBwPoint& a, const HtaMemoryBwPoint& b) {
    return a.kind != b.kind ? a.kind < b.kind : a.ts_ns < b.ts_ns;
  });
  double run = 0;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    if (i == 0 || starts[i].kind != starts[i - 1].kind) run = 0;
    run += starts[i].memory_bw_gbps;
    starts[i].memory_bw_gbps = run;
  }
  return starts;
}

}  // namespace

HtaKernelTypes compute_hta_kernel_types(const DiagnoseContext& c) {
  const std::vector<HtaOp> ops = hta_ops(c, HtaClock(c.trace), /*include_last_profiler_step=*/false);
  return hta_kernel_types(c, ops, hta_row_types(c.trace, ops, /*include_memory_kernels=*/true));
}

HtaFigures compute_hta(const DiagnoseContext& c, const HtaOptions& options) {
  HtaFigures f;
  HtaSpan span;
  const std::vector<HtaOp> ops = hta_ops(c, HtaClock(c.trace), options.include_last_profiler_step, &span);
  // Rounded starts lie within ±2^62 ns (HtaClock), so the difference fits.
  f.trace_duration_ns = span.last_ts - span.first_ts;
  const std::vector<int> types = hta_row_types(c.trace, ops, options.include_memory_kernels);
  f.kernel_types = hta_kernel_types(c, ops, types);
  f.kernels = hta_kernels(c.trace, ops, types);
  if (!ops.empty()) {
    f.temporal = hta_temporal(ops, trace_rank(c.trace));
    f.idle = hta_idle_streams(ops, options);
  }
  f.queue = hta_queue(c, ops);
  f.memory_bw = hta_memory_bw(c.trace, ops);
  return f;
}

}  // namespace tprof::internal
