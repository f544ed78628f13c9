// The data behind tprof report's timeline overview, CPU flame graph and
// critical path, reduced in C++ so the page stays bounded whatever the
// trace's size (docs/report.md, "Sizes"): per-lane busy intervals merged at
// a resolution, the longest events per lane with their names, the findings'
// events as marks; the host op tree aggregated by name path and pruned; each
// step's critical path as bound-type shares and capped stretches on lanes.
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/base/json_writer.h"
#include "tprof/causal.h"
#include "tprof/diagnose.h"
#include "tprof/html_report.h"

namespace tprof::internal {

struct TimelineEvent {
  std::int64_t start_ns = 0;  // relative to Timeline::start_ns
  std::int64_t dur_ns = 0;
  std::string name;
};

// A host event with its depth in its lane's call stack (0: outermost).
struct NestedEvent {
  std::int64_t start_ns = 0;  // relative to Timeline::start_ns, exact
  std::int64_t dur_ns = 0;
  int depth = 0;
  std::string name;
};

struct TimelineLane {
  std::uint32_t trace_lane = 0;  // index into Trace::lanes
  std::string label;  // lane_label(): "cpu pid 1 tid 2", "gpu 0 stream 7"
  std::string thread_name;
  bool gpu = false;
  std::size_t events = 0;
  std::int64_t busy_ns = 0;  // the union of its events
  std::int64_t merge_ns = 0;  // intervals closer than this were merged
  // [start, end) relative to Timeline::start_ns, by start, disjoint.
  std::vector<std::pair<std::int64_t, std::int64_t>> intervals;
  std::vector<TimelineEvent> top;  // the longest events, longest first
  // CPU lanes: the longest host events with their depth, by start (bounded
  // by the options' max_*nested_events and max_nest_depth).
  std::vector<NestedEvent> nested;
  int max_depth = -1;  // the deepest nesting in `nested`; -1: none
};

// A ProfilerStep on the timeline: [start, start + dur) relative to
// Timeline::start_ns.
struct TimelineStep {
  std::int64_t step = -1;
  std::int64_t start_ns = 0;
  std::int64_t dur_ns = 0;
};

struct TimelineMark {
  int lane = -1;  // index into Timeline::lanes; -1: its lane is not drawn
  std::int64_t ts_ns = 0;  // relative
  std::int64_t dur_ns = 0;
  std::size_t cause = 0;  // index into Diagnosis::causes
  std::string name, lane_label, title, severity;
};

struct Timeline {
  std::int64_t start_ns = 0;  // absolute: the trace's first event
  std::int64_t span_ns = 0;
  std::size_t lanes_total = 0;  // CPU and GPU lanes with events, drawn or not
  std::vector<TimelineLane> lanes;  // CPU lanes, then GPU lanes
  std::vector<TimelineMark> marks;
  std::vector<TimelineStep> steps;  // the first max_steps steps, by start
  std::size_t nested_count() const;
  std::size_t interval_count() const;
};

// Per CPU lane its host events (ops, annotations, Python functions, runtime
// calls), per GPU lane its device activities; the `max_timeline_lanes` with
// the most busy time (lanes with a mark first); the findings' look_at
// events of the first `max_causes` causes as marks.
Timeline build_timeline(const DiagnoseContext& c, const Diagnosis& d, const HtmlReportOptions& options);

struct FlameNode {
  int parent = -1;  // index into FlameTree::nodes, smaller than this node's; -1 for the root
  std::string name;
  std::int64_t total_ns = 0;
  std::int64_t calls = 0;
};

struct FlameTree {
  std::size_t nodes_total = 0;   // nodes before pruning
  std::vector<FlameNode> nodes;  // nodes[0] is the root ("all threads") when not empty
};

// The host op tree (cpu_op and user_annotation events nested per CPU
// thread, a child inside its parent's span) aggregated by name path under
// root → thread; ProfilerStep#N read as "ProfilerStep#*". Keeps nodes of at
// least `flame_min_fraction` of the root's time, at most `max_flame_nodes`,
// the largest first (a parent always before its children).
FlameTree build_flame_tree(const DiagnoseContext& c, const HtmlReportOptions& options);

// Where each step's time went (docs/report.md, "Where the step went"):
// parts that sum to the step's duration exactly, and how far the device
// work it launched runs past its end.
//
// With device activity the parts are TraceLens' split of the device's busy
// time inside the step (computation: kernels and memsets that are not
// communication; exposed communication: communication not overlapped by
// computation; exposed copies: memcpy overlapped by neither), then the
// device's idle time in the step by IdleCause (StepVerdict::idle_by_cause).
// Without device activity: the step thread's busy time (tprof steps' CPU
// busy) and the rest of the step.
//
// The same split over the step as the device sees it (`device_parts`) is
// what the page draws: on a run whose device falls behind, the host's step
// is only the time to enqueue work, and the device's time per step is in
// no host window.
struct StepBar {
  std::int64_t step = -1;
  std::int64_t start_ns = 0;  // absolute
  std::int64_t dur_ns = 0;    // the step's span on the host
  std::vector<std::int64_t> parts;  // by StepBars::keys; sums to dur_ns
  // The step on the device, as the TensorBoard plugin's overview reads it:
  // from the later of its start and the previous step's device end, to the
  // later of its end and the end of the device work it launched. Traces
  // with device activity; the host step's span otherwise.
  std::int64_t device_start_ns = 0;  // absolute
  std::int64_t device_dur_ns = 0;
  std::vector<std::int64_t> device_parts;  // by StepBars::keys; sums to device_dur_ns
  // The end of the device work the step launched (kernels, copies, memsets
  // whose launch call ran in it, wherever they ran), absolute; 0 without.
  std::int64_t work_end_ns = 0;
  // work_end_ns − the step's end, when positive: the queue depth (how far
  // the device runs behind the host), 0 when the work ended in the step.
  std::int64_t lag_ns = 0;
  std::int64_t cpu_busy_ns = 0;      // the step's thread (tprof steps' CPU busy)
  std::int64_t cpu_any_busy_ns = 0;  // any CPU thread (host events, not ProfilerStep#N itself)
  std::string verdict;
};

struct StepBars {
  bool device = false;
  std::vector<std::string> keys;    // stable ids: "compute", "exposed_comm", "idle_launching", ...
  std::vector<std::string> labels;  // the same in plain words, for the page
  std::vector<std::string> help;    // what each one means, longer
  std::vector<StepBar> steps;       // the first max_steps steps
};

StepBars build_step_bars(const DiagnoseContext& c, const Diagnosis& d, const HtmlReportOptions& options);

// The plain-words label of an idle cause on the page ("waiting on the host
// to launch", ...).
std::string_view idle_cause_label(IdleCause cause);

// What an idle cause means, for the legend's tooltip (the label stays
// short and true of any slice of it a step holds).
std::string_view idle_cause_help(IdleCause cause);

// Each step's critical path (src/causal, docs/critical-path.md) for the
// page: the bound-type shares of every step drawn, and the path's stretches
// on the timeline's lanes for the first steps, at most max_path_segments in
// all (stretches of 0 ns left out).
struct PathStretch {
  int lane = -1;  // index into Timeline::lanes; -1: its lane is not drawn
  std::int64_t start_ns = 0;  // relative to Timeline::start_ns, on the replayed timeline
  std::int64_t dur_ns = 0;
  EdgeType type = EdgeType::kHost;
  BoundType bound = BoundType::kCpu;
  std::string name;  // the event whose time it is; "" for host time between events
};

struct PathStep {
  std::int64_t step = -1;      // N of ProfilerStep#N; -1: the whole trace (no steps)
  std::int64_t start_ns = 0;   // relative to Timeline::start_ns
  std::int64_t length_ns = 0;  // the step's time: the path's length
  std::int64_t unexplained_ns = 0;
  std::array<std::int64_t, static_cast<int>(BoundType::kCount_)> bound_ns{};  // by BoundType
  std::size_t segments = 0;        // its stretches in CriticalPathView::segments
  std::size_t segments_total = 0;  // its stretches of more than 0 ns
};

struct CriticalPathView {
  bool available = false;
  std::string error;  // why not, when !available
  bool has_steps = false;
  std::size_t steps_total = 0;       // steps of the causal model
  std::vector<PathStep> steps;       // the first max_steps
  std::vector<PathStretch> segments; // of steps[0], steps[1], ... in path order
  std::size_t segments_total = 0;    // over `steps`
  std::size_t steps_marked = 0;      // the leading steps whose stretches are all in `segments`
  std::size_t off_timeline = 0;      // stretches in `segments` whose lane is not drawn
};

// The context's causal model (c.causal(), shared with diagnose); stretches
// placed on `t`'s lanes.
CriticalPathView build_critical_path_view(const DiagnoseContext& c, const Timeline& t,
                                          const HtmlReportOptions& options);

// "critical_path": {...} member of the page's data (docs/report.md).
void write_critical_path_json(JsonWriter& w, const CriticalPathView& v);

// "steps": {...} member of the page's data.
void write_step_bars_json(JsonWriter& w, const StepBars& b);

// "timeline": {...} and "flame": {...} members of the page's data
// (docs/report.md, "The data").
void write_timeline_json(JsonWriter& w, const Timeline& t);
void write_flame_json(JsonWriter& w, const FlameTree& f);

}  // namespace tprof::internal
