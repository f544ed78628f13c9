// tprof/html_report.h — one self-contained HTML page about a trace: the
// verdict and root causes, per-step CPU / GPU time, the duration
// distribution of the top kernels and torch's op table, drawn with the
// vendored uPlot (third_party/uplot) embedded in the page.
//
//   tprof::Trace trace = *tprof::read_trace("run.pt.trace.json");
//   std::string html = tprof::format_report_html(trace, {.trace_file_name = "run.pt.trace.json"});
//
// The page needs no network: scripts, styles and data are inline. Its data
// is one JSON document (<script type="application/json" id="report-data">,
// every '<' written as \u003c) read by a small script that draws the charts
// and the sortable table. Sizes are bounded (docs/report.md): histograms are
// binned here, the op table and the steps are capped.
#pragma once

#include <cstddef>
#include <string>

#include "tprof/trace.h"

namespace tprof {

struct HtmlReportOptions {
  // The trace's file name (no directory), for the title and the Perfetto UI
  // link through `tprof serve` (http://127.0.0.1:9001/<name>); "" for none.
  std::string trace_file_name;
  std::size_t max_kernels = 5;       // kernels with a duration histogram, by total time
  int histogram_bins = 30;           // bins per histogram
  std::size_t max_op_rows = 200;     // op table rows, by CPU total or CUDA total
  std::size_t max_steps = 10000;     // steps drawn (the first ones)
  std::size_t max_causes = 20;       // root causes listed
};

// Renders the page. Never fails: a trace without steps, device activity or
// findings gets a page saying so. Reads the trace only (thread-safe for
// concurrent calls on one Trace).
std::string format_report_html(const Trace& trace, const HtmlReportOptions& options = {});

// Escapes & < > " ' for HTML text and attribute values.
std::string html_escape(std::string_view text);

}  // namespace tprof
