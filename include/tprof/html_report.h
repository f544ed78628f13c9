// tprof/html_report.h — one self-contained HTML page about a trace: the
// verdict and root causes, per-step CPU / GPU time, each step's critical
// path (its bound-type shares, and its stretches marked on the timeline), a
// timeline overview with the findings marked, a flame graph of the CPU ops,
// the duration distribution of the top kernels and torch's op table, drawn
// with the vendored uPlot (third_party/uplot) and small canvas renderers of
// our own.
// Given two traces, the page adds `tprof compare`'s A-against-B section.
//
//   tprof::Trace trace = *tprof::read_trace("run.pt.trace.json");
//   std::string html = tprof::format_report_html(trace, {.trace_file_name = "run.pt.trace.json"});
//   std::string two = tprof::format_compare_report_html(a, b, {.trace_file_name = "b.json",
//                                                              .baseline_file_name = "a.json"});
//
// The page needs no network: scripts, styles and data are inline. Its data
// is one JSON document (<script type="application/json" id="report-data">,
// every '<' written as \u003c) read by a small script that draws the charts
// and the sortable table. Sizes are bounded (docs/report.md): histograms are
// binned here, the op table and the steps are capped, the timeline is merged
// into per-lane busy intervals and the flame graph pruned.
#pragma once

#include <cstddef>
#include <string>

#include "tprof/trace.h"

namespace tprof {

struct HtmlReportOptions {
  // The trace's file name (no directory), for the title and the Perfetto UI
  // link through `tprof serve` (http://127.0.0.1:9001/<name>); "" for none.
  std::string trace_file_name{};
  std::size_t max_kernels = 5;       // kernels with a duration histogram, by total time
  int histogram_bins = 30;           // bins per histogram
  std::size_t max_op_rows = 200;     // op table rows, by CPU total or CUDA total
  std::size_t max_steps = 10000;     // steps drawn (the first ones)
  std::size_t max_causes = 20;       // root causes listed
  // Timeline: lanes drawn (the busiest, and those a cause points at), busy
  // intervals per lane and in all, adjacent intervals closer than
  // span / timeline_resolution merged (coarser when a lane has too many),
  // the longest events per lane named for the tooltips.
  std::size_t max_timeline_lanes = 64;
  std::size_t max_lane_intervals = 2000;
  std::size_t max_timeline_intervals = 40000;
  int timeline_resolution = 4000;
  std::size_t timeline_top_events = 20;
  // Op nesting on the CPU lanes (drawn when zoomed in): per CPU lane its
  // longest host events with their depth in the lane's call stack, at most
  // max_lane_nested_events per lane, max_nested_events in all, none deeper
  // than max_nest_depth.
  std::size_t max_nested_events = 4000;
  std::size_t max_lane_nested_events = 400;
  int max_nest_depth = 12;
  // Flame graph: nodes kept (the largest), and the smallest one as a
  // fraction of all the host ops' time.
  std::size_t max_flame_nodes = 2000;
  double flame_min_fraction = 0.005;
  // Critical path (src/causal): every drawn step's bound-type shares, and
  // the path's stretches marked on the timeline for the first steps, at
  // most this many stretches in all.
  std::size_t max_path_segments = 10000;
  // format_compare_report_html: trace A's file name (no directory);
  // trace_file_name is B's.
  std::string baseline_file_name{};
  std::size_t compare_top = 15;      // op and kernel delta rows shown
  std::size_t compare_names = 30;    // new / vanished names listed per list
};

// Renders the page. Never fails: a trace without steps, device activity or
// findings gets a page saying so. Reads the trace only (thread-safe for
// concurrent calls on one Trace).
std::string format_report_html(const Trace& trace, const HtmlReportOptions& options = {});

// Renders the page for trace B with a comparison against baseline A at the
// top (tprof::compare_traces: median step with the noise, verdicts, the
// largest op and kernel deltas, new and vanished names); the other sections
// show B. Never fails; reads both traces only.
std::string format_compare_report_html(const Trace& a, const Trace& b, const HtmlReportOptions& options = {});

// Escapes & < > " ' for HTML text and attribute values.
std::string html_escape(std::string_view text);

}  // namespace tprof
