// The data behind tprof report's timeline overview and CPU flame graph,
// reduced in C++ so the page stays bounded whatever the trace's size
// (docs/report.md, "Sizes"): per-lane busy intervals merged at a
// resolution, the longest events per lane with their names, the findings'
// events as marks; the host op tree aggregated by name path and pruned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/base/json_writer.h"
#include "tprof/diagnose.h"
#include "tprof/html_report.h"

namespace tprof::internal {

struct TimelineEvent {
  std::int64_t start_ns = 0;  // relative to Timeline::start_ns
  std::int64_t dur_ns = 0;
  std::string name;
};

struct TimelineLane {
  std::string label;  // lane_label(): "cpu pid 1 tid 2", "gpu 0 stream 7"
  std::string thread_name;
  bool gpu = false;
  std::size_t events = 0;
  std::int64_t busy_ns = 0;  // the union of its events
  std::int64_t merge_ns = 0;  // intervals closer than this were merged
  // [start, end) relative to Timeline::start_ns, by start, disjoint.
  std::vector<std::pair<std::int64_t, std::int64_t>> intervals;
  std::vector<TimelineEvent> top;  // the longest events, longest first
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

// "timeline": {...} and "flame": {...} members of the page's data
// (docs/report.md, "The data").
void write_timeline_json(JsonWriter& w, const Timeline& t);
void write_flame_json(JsonWriter& w, const FlameTree& f);

}  // namespace tprof::internal
