// tprof sweep's reports: a table, JSON and a self-contained HTML chart.
#include <string>
#include <vector>

#include "src/base/json_writer.h"
#include "src/report/html_assets.h"
#include "src/report/py_format.h"
#include "tprof/html_report.h"
#include "tprof/sweep.h"

namespace tprof {

namespace {

std::string us(std::int64_t ns) { return internal::fixed(static_cast<double>(ns) / 1000.0, 1); }

}  // namespace

std::string format_sweep_text(const Sweep& s) {
  std::string out;
  const bool device = !s.points.empty() && s.points.front().device;
  // With device work the host's own time per step gets a column: a step
  // that waits for the GPU is longer than its ProfilerStep.
  std::vector<std::string> head = {"Size", "Steps", "Step (us)"};
  std::vector<std::size_t> widths = {7, 6, 12};
  if (device) {
    head.insert(head.end(), {"Host (us)", "Device (us)"});
    widths.insert(widths.end(), {12, 12});
  } else {
    head.emplace_back("Work (us)");
    widths.push_back(12);
  }
  head.insert(head.end(), {"Overhead (us)", "Work %", "Verdict"});
  widths.insert(widths.end(), {14, 7, 16});
  auto row = [&](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      internal::append_right(&out, cells[i], widths[i]);
      out.append(i + 1 < cells.size() ? "  " : "\n");
    }
  };
  row(head);
  for (const SweepPoint& p : s.points) {
    std::vector<std::string> cells = {std::to_string(p.size), std::to_string(p.steps), us(p.step_ns)};
    if (device) cells.push_back(us(p.host_ns));
    cells.insert(cells.end(), {us(p.work_ns), us(p.overhead_ns), internal::fixed(p.work_pct, 1) + "%", p.verdict});
    row(cells);
  }
  if (device) {
    out += "step: start to completion (its own end or its device work's, the later); host: the ProfilerStep's span\n";
    out += "device: device work per step (kernels, copies, memsets the step launched, wherever they ran)\n";
  } else {
    out += "work: time in leaf host ops per step (ops that call no other op: the GEMM, the add loop)\n";
  }
  // The crossover is read off the Work % column: the rule and the numbers
  // printed above it are the same.
  if (s.crossover_size) {
    out += "crossover: from size " + std::to_string(*s.crossover_size) +
           " on, every size works at least half of its step (work >= overhead)";
    out += s.points.empty() || *s.crossover_size != s.points.front().size ? "\n" : " (already at the smallest size)\n";
  } else if (!s.points.empty()) {
    out += "crossover: none up to size " + std::to_string(s.points.back().size) + ": the largest size works " +
           internal::fixed(s.points.back().work_pct, 1) + "% of its step, under half (work < overhead)\n";
  } else {
    out += "crossover: none (no sizes)\n";
  }
  return out;
}

std::string format_sweep_json(const Sweep& s) {
  std::string out;
  internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
  w.begin_object();
  w.key("points");
  w.begin_array();
  for (const SweepPoint& p : s.points) {
    w.begin_object();
    w.key("size");
    w.value_int(p.size);
    w.key("steps");
    w.value_int(p.steps);
    w.key("device");
    w.value_bool(p.device);
    w.key("step_ns");
    w.value_int(p.step_ns);
    w.key("host_ns");
    w.value_int(p.host_ns);
    w.key("work_ns");
    w.value_int(p.work_ns);
    w.key("overhead_ns");
    w.value_int(p.overhead_ns);
    w.key("work_pct");
    w.value_double(p.work_pct);
    w.key("verdict");
    w.value_string(p.verdict);
    w.end_object();
  }
  w.end_array();
  w.key("crossover_size");
  if (s.crossover_size) {
    w.value_int(*s.crossover_size);
  } else {
    w.value_null();
  }
  w.end_object();
  out += "\n";
  return out;
}

std::string format_sweep_html(const Sweep& s, const std::string& title) {
  // The data as JSON inside a <script> element: '<' is written \u003c, so
  // no string in it can close the element.
  std::string data;
  for (const char c : format_sweep_json(s)) {
    if (c == '<') {
      data += "\\u003c";
    } else {
      data += c;
    }
  }
  const bool device = !s.points.empty() && s.points.front().device;
  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
  html += html_escape(title);
  html += "</title>\n<style>\n";
  html += internal::uplot_css();
  html += R"CSS(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #222; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin-top: 16px; }
td, th { padding: 3px 10px; text-align: right; border-bottom: 1px solid #ddd; }
.note { color: #555; }
)CSS";
  html += "</style>\n</head>\n<body>\n<h1>";
  html += html_escape(title);
  html += "</h1>\n<p class=\"note\">Per step, median over the steps of each run: the step, the ";
  html += device ? "device work it launched (kernels, copies, memsets)"
                 : "time in leaf host ops (where the arithmetic is)";
  html += " and the overhead around it. Where the work line crosses the overhead line the run turns from "
          "overhead-bound to compute-bound.</p>\n<p id=\"crossover\">";
  html += s.crossover_size ? "Crossover: from size " + std::to_string(*s.crossover_size) +
                                 " on, every size works at least half of its step."
                           : std::string("No crossover in this range: the largest size works under half of its step.");
  html += "</p>\n<div id=\"sweep-chart\" data-points=\"" + std::to_string(s.points.size()) + "\"></div>\n";
  html += "<table id=\"sweep-table\"><tr><th>size</th><th>step (us)</th>";
  html += device ? "<th>host (us)</th><th>device (us)</th>" : "<th>work (us)</th>";
  html += "<th>overhead (us)</th><th>work %</th><th>verdict</th></tr>\n";
  for (const SweepPoint& p : s.points) {
    html += "<tr><td>" + std::to_string(p.size) + "</td><td>" + us(p.step_ns) + "</td><td>";
    if (device) html += us(p.host_ns) + "</td><td>";
    html += us(p.work_ns) + "</td><td>" + us(p.overhead_ns) + "</td><td>" + internal::fixed(p.work_pct, 1) +
            "%</td><td>" + html_escape(p.verdict) + "</td></tr>\n";
  }
  html += "</table>\n<script type=\"application/json\" id=\"sweep-data\">";
  html += data;
  html += "</script>\n<script>\n";
  html += internal::uplot_js();
  html += R"JS(
</script>
<script>
(function () {
  const body = document.body;
  try {
    const d = JSON.parse(document.getElementById('sweep-data').textContent);
    const x = d.points.map(p => p.size);
    const us = k => d.points.map(p => Math.max(p[k] / 1000, 0.001));
    const el = document.getElementById('sweep-chart');
    // x is a size, not a time: uPlot's default time scale would print the
    // sizes as dates ("1/1/70"). The labels are kept in data-xticks for
    // the tests.
    const xticks = (u, splits) => {
      const labels = splits.map(v => (v == null ? '' : String(Math.round(v))));
      el.dataset.xticks = labels.join('|');
      return labels;
    };
    new uPlot({
      width: Math.min(900, window.innerWidth - 48), height: 420,
      scales: { x: { time: false, distr: 3 }, y: { distr: 3 } },
      // One tick per size swept, each labelled (the log scale's own ticks
      // fall between the sizes, most of them unlabelled).
      axes: [{ label: 'size (N of N x N)', splits: () => x, filter: (u, splits) => splits, values: xticks },
             { label: 'us per step' }],
      series: [{ label: 'size' },
               { label: 'step', stroke: '#444', width: 2 },
               { label: 'work', stroke: '#2a7ab9', width: 2 },
               { label: 'overhead', stroke: '#d98c00', width: 2 }],
    }, [x, us('step_ns'), us('work_ns'), us('overhead_ns')], el);
    el.dataset.drawn = String(x.length);
    body.dataset.scrollWidth = String(document.documentElement.scrollWidth);
    body.dataset.windowWidth = String(window.innerWidth);
    body.dataset.rendered = '1';
  } catch (e) {
    body.dataset.errors = String(e);
  }
})();
</script>
</body>
</html>
)JS";
  return html;
}

}  // namespace tprof
