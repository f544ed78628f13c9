// tprof report: one self-contained HTML page (docs/report.md).
//
// The page is static HTML for the text (verdict, causes: escaped here), one
// JSON document for the numbers (written with JsonWriter, every '<' as
// \u003c so no "</script>" or "<!--" can end or confuse the script element),
// the vendored uPlot inline, and a small script of our own that draws the
// charts and the sortable op table from the JSON. Nothing is fetched when
// the page is opened.
#include "tprof/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/base/json_writer.h"
#include "src/report/event_text.h"
#include "src/report/html_assets.h"
#include "tprof/diagnose.h"
#include "tprof/kernels.h"
#include "tprof/table.h"

namespace tprof {

namespace {

using internal::DiagnoseContext;
using internal::JsonWriter;

// Evidence fields shown per cause; events per list.
constexpr std::size_t kMaxEvidenceFields = 12;

// The Perfetto UI opens a trace served by `tprof serve` (default port 9001).
constexpr std::string_view kPerfettoPrefix = "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/";

// Percent-encodes everything but RFC 3986's unreserved characters.
std::string url_path_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// JSON text safe inside <script type="application/json">: '<' only occurs
// inside strings there, where \u003c reads back as the same character.
std::string script_safe_json(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 64);
  for (const char c : json) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

// Script text safe inside <script>: "</script" cannot occur in the vendored
// library today (checked by the tests), but a future version could carry
// it in a string; "<\/" reads the same in JavaScript strings and regexes.
std::string script_safe_code(std::string_view code) {
  std::string out(code);
  for (std::size_t p = out.find("</"); p != std::string::npos; p = out.find("</", p + 3)) out.replace(p, 2, "<\\/");
  return out;
}

struct KernelHistogram {
  const KernelStat* stat = nullptr;
  std::int64_t lo_ns = 0;
  std::int64_t bin_ns = 1;
  std::vector<std::int64_t> counts;
};

// Bins each top kernel's durations (their instances found by name id among
// the context's device activities).
std::vector<KernelHistogram> kernel_histograms(const DiagnoseContext& c, const KernelsSummary& ks,
                                               const HtmlReportOptions& options) {
  std::vector<KernelHistogram> out;
  const std::size_t n = std::min(options.max_kernels, ks.kernels.size());
  if (n == 0) return out;
  const int bins = std::max(1, options.histogram_bins);
  std::unordered_map<std::string_view, std::size_t> by_name;
  for (std::size_t k = 0; k < n; ++k) {
    KernelHistogram h;
    h.stat = &ks.kernels[k];
    h.lo_ns = h.stat->min_ns;
    const std::int64_t span = h.stat->max_ns - h.stat->min_ns;
    h.bin_ns = std::max<std::int64_t>(1, span / bins + 1);  // the maximum falls in the last bin
    h.counts.assign(static_cast<std::size_t>(std::min<std::int64_t>(bins, span / h.bin_ns + 1)), 0);
    out.push_back(std::move(h));
    by_name.emplace(ks.kernels[k].name, k);
  }
  // One hash of the name per distinct id, not per activity.
  std::unordered_map<StrId, std::size_t> by_id;
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  for (const internal::DeviceOp& op : c.device) {
    const StrId id = c.trace.events.name[op.event];
    auto [it, fresh] = by_id.emplace(id, kNone);
    if (fresh) {
      const auto found = by_name.find(c.trace.str(id));
      if (found != by_name.end()) it->second = found->second;
    }
    if (it->second == kNone) continue;
    KernelHistogram& h = out[it->second];
    const std::int64_t bin = (op.end - op.start - h.lo_ns) / h.bin_ns;
    if (bin >= 0 && bin < static_cast<std::int64_t>(h.counts.size())) ++h.counts[static_cast<std::size_t>(bin)];
  }
  return out;
}

// The op table's rows: the ones with the most time (CPU total or device
// total), at most `limit`, in that order.
std::vector<const StatRow*> top_op_rows(const std::vector<StatRow>& rows, std::size_t limit, std::size_t* total) {
  std::vector<const StatRow*> out;
  for (const StatRow& r : rows) out.push_back(&r);
  *total = out.size();
  auto weight = [](const StatRow* r) { return std::max(r->cpu_time_total_ns, r->device_time_total_ns); };
  std::stable_sort(out.begin(), out.end(), [&](const StatRow* a, const StatRow* b) { return weight(a) > weight(b); });
  if (out.size() > limit) out.resize(limit);
  return out;
}

std::string report_json(const Trace& trace, const DiagnoseContext& c, const Diagnosis& d,
                        const std::vector<KernelHistogram>& hists, const HtmlReportOptions& options) {
  std::string out;
  JsonWriter w(&out);
  w.begin_object();
  w.key("format");
  w.value_string("tprof-report/1");
  w.key("trace");
  w.value_string(options.trace_file_name);
  w.key("has_device");
  w.value_bool(c.has_device());
  w.key("device_name");
  w.value_string(device_name_of(trace));
  w.key("verdict");
  w.value_string(verdict_name(d.verdict));
  w.key("summary");
  w.value_string(d.summary);
  w.key("causes");
  w.begin_array();
  for (std::size_t i = 0; i < d.causes.size() && i < options.max_causes; ++i) {
    const Cause& cause = d.causes[i];
    w.begin_object();
    w.key("id");
    w.value_string(cause.id);
    w.key("severity");
    w.value_string(severity_name(cause.severity));
    w.key("title");
    w.value_string(cause.title);
    w.key("impact_ns");
    w.value_int(cause.impact_ns);
    w.end_object();
  }
  w.end_array();

  w.key("steps_total");
  w.value_uint(d.steps.size());
  w.key("steps");
  w.begin_array();
  for (std::size_t i = 0; i < d.steps.size() && i < options.max_steps; ++i) {
    const StepVerdict& s = d.steps[i];
    w.begin_object();
    w.key("step");
    w.value_int(s.step);
    w.key("dur_ns");
    w.value_int(s.cpu_span_ns);
    w.key("cpu_busy_ns");
    w.value_int(s.cpu_busy_ns);
    w.key("gpu_busy_ns");
    w.value_int(s.gpu_busy_ns);
    w.key("gpu_idle_ns");
    w.value_int(std::max<std::int64_t>(0, s.cpu_span_ns - s.gpu_busy_ns));
    w.key("verdict");
    w.value_string(verdict_name(s.verdict));
    w.end_object();
  }
  w.end_array();

  w.key("kernels");
  w.begin_array();
  for (const KernelHistogram& h : hists) {
    const KernelStat& k = *h.stat;
    w.begin_object();
    w.key("name");
    w.value_string(k.name);
    w.key("category");
    w.value_string(k.category);
    w.key("count");
    w.value_int(k.count);
    w.key("total_ns");
    w.value_int(k.total_ns);
    w.key("mean_ns");
    w.value_double(std::round(k.mean_ns));
    w.key("median_ns");
    w.value_int(k.median_ns);
    w.key("p90_ns");
    w.value_int(k.p90_ns);
    w.key("min_ns");
    w.value_int(k.min_ns);
    w.key("max_ns");
    w.value_int(k.max_ns);
    w.key("lo_ns");
    w.value_int(h.lo_ns);
    w.key("bin_ns");
    w.value_int(h.bin_ns);
    w.key("counts");
    w.begin_array();
    for (std::int64_t n : h.counts) w.value_int(n);
    w.end_array();
    w.end_object();
  }
  w.end_array();

  std::size_t rows_total = 0;
  const std::vector<const StatRow*> rows = top_op_rows(c.averages(), options.max_op_rows, &rows_total);
  w.key("ops_total");
  w.value_uint(rows_total);
  // Rows as arrays (name, self CPU, CPU total, self device, device total,
  // calls): the keys would double the size of a 200-row table.
  w.key("ops");
  w.begin_array();
  for (const StatRow* r : rows) {
    w.begin_array();
    w.value_string(r->key);
    w.value_int(r->self_cpu_time_total_ns);
    w.value_int(r->cpu_time_total_ns);
    w.value_int(r->self_device_time_total_ns);
    w.value_int(r->device_time_total_ns);
    w.value_int(r->count);
    w.end_array();
  }
  w.end_array();
  w.end_object();
  w.flush();
  return out;
}

// The verdict and its evidence as HTML (readable without scripts); every
// text from the trace goes through html_escape.
void append_verdict_html(std::string* out, const Trace& trace, const Diagnosis& d) {
  const internal::EventClock clock(trace);
  std::string& o = *out;
  o += "<section id=\"verdict\" data-verdict=\"" + html_escape(verdict_name(d.verdict)) + "\">\n";
  o += "<h2>Verdict: <span class=\"verdict\">" + html_escape(verdict_name(d.verdict)) + "</span></h2>\n";
  o += "<p class=\"summary\">" + html_escape(d.summary) + "</p>\n";
  if (!d.verdict_evidence.fields().empty()) {
    o += "<details><summary>What was measured</summary>\n<dl class=\"evidence\">\n";
    for (const Evidence::Field& f : d.verdict_evidence.fields()) {
      o += "<dt>" + html_escape(f.key) + "</dt><dd>" + html_escape(internal::evidence_value_text(f, clock, true)) +
           "</dd>\n";
    }
    o += "</dl>\n</details>\n";
  }
  o += "</section>\n";
}

// The causes, strongest first, each with its evidence folded away.
void append_causes_html(std::string* out, const Trace& trace, const Diagnosis& d, const HtmlReportOptions& options) {
  const internal::EventClock clock(trace);
  std::string& o = *out;
  const std::size_t n = std::min(d.causes.size(), options.max_causes);
  o += "<section id=\"causes\" data-causes=\"" + std::to_string(n) + "\">\n<h2>Root causes</h2>\n";
  if (n == 0) o += "<p class=\"empty\">No findings.</p>\n";
  for (std::size_t i = 0; i < n; ++i) {
    const Cause& cause = d.causes[i];
    const Finding& anchor = d.findings[cause.anchor];
    const std::string sev(severity_name(cause.severity));
    o += "<div class=\"cause sev-" + sev + "\" data-id=\"" + html_escape(cause.id) + "\">\n";
    o += "<h3><span class=\"sev\">" + sev + "</span> " + html_escape(cause.title) + "</h3>\n";
    if (cause.look_at) {
      o += "<p class=\"look\">Look at: " + html_escape(clock.event_text(*cause.look_at, true)) + "</p>\n";
    }
    if (!anchor.advice.empty()) o += "<p class=\"advice\">" + html_escape(anchor.advice) + "</p>\n";
    o += "<details><summary>Evidence</summary>\n<dl class=\"evidence\">\n";
    std::size_t shown = 0;
    for (const Evidence::Field& f : anchor.evidence.fields()) {
      if (shown++ == kMaxEvidenceFields) break;
      o += "<dt>" + html_escape(f.key) + "</dt><dd>" + html_escape(internal::evidence_value_text(f, clock, true)) +
           "</dd>\n";
    }
    o += "</dl>\n</details>\n";
    if (cause.findings.size() > 1) {
      o += "<p class=\"related\">Findings:";
      for (std::size_t f : cause.findings) o += " <code>" + html_escape(d.findings[f].id) + "</code>";
      o += "</p>\n";
    }
    o += "</div>\n";
  }
  if (d.causes.size() > n) {
    o += "<p class=\"more\">" + std::to_string(d.causes.size() - n) + " more (tprof diagnose)</p>\n";
  }
  o += "</section>\n";
}

constexpr std::string_view kStyle = R"CSS(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1180px; padding: 16px 24px; color: #1d1d1f; background: #fff; }
h1 { font-size: 22px; margin: 4px 0; } h2 { font-size: 18px; margin: 22px 0 8px; border-bottom: 1px solid #ddd; } h3 { font-size: 15px; margin: 6px 0; }
header p { margin: 2px 0; color: #555; }
.verdict { color: #b3261e; }
dl.evidence { display: grid; grid-template-columns: max-content 1fr; gap: 1px 14px; margin: 6px 0; font-size: 13px; }
dl.evidence dt { color: #666; } dl.evidence dd { margin: 0; white-space: pre-line; word-break: break-word; }
.cause { border-left: 4px solid #999; padding: 4px 12px; margin: 10px 0; background: #fafafa; }
.cause.sev-critical { border-color: #b3261e; } .cause.sev-warning { border-color: #e8a317; } .cause.sev-info { border-color: #3c78c8; }
.sev { text-transform: uppercase; font-size: 11px; padding: 1px 5px; border-radius: 3px; background: #eee; }
.advice { color: #333; } .empty { color: #777; font-style: italic; }
.kernel-hist { display: inline-block; vertical-align: top; width: 540px; margin: 6px 10px 10px 0; }
.kernel-hist h3 { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; font-family: ui-monospace, monospace; font-size: 12px; }
.kernel-hist .stats { font-size: 12px; color: #444; margin: 0 0 4px; }
table.ops { border-collapse: collapse; font-size: 12px; width: 100%; }
table.ops th, table.ops td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; }
table.ops th:first-child, table.ops td:first-child { text-align: left; font-family: ui-monospace, monospace; max-width: 560px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
table.ops th { cursor: pointer; user-select: none; background: #f3f3f3; position: sticky; top: 0; }
table.ops th[aria-sort="ascending"]::after { content: " \25B2"; } table.ops th[aria-sort="descending"]::after { content: " \25BC"; }
summary { cursor: pointer; color: #555; font-size: 13px; }
footer { margin-top: 28px; color: #777; font-size: 12px; }
)CSS";

// Draws the charts and the table from #report-data. Errors are kept in
// body[data-errors] (read by the headless-browser test); body[data-rendered]
// is "1" once every part was tried.
constexpr std::string_view kScript = R"JS(
(function () {
  'use strict';
  var body = document.body;
  function fail(msg) { body.dataset.errors = (body.dataset.errors ? body.dataset.errors + '\n' : '') + msg; }
  window.addEventListener('error', function (e) { fail(String(e.message || e)); });
  var data;
  try { data = JSON.parse(document.getElementById('report-data').textContent); } catch (e) { fail('data: ' + e); body.dataset.rendered = '1'; return; }

  function fmtNs(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + ' us';
    return Math.round(ns) + ' ns';
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function widthOf(node, dflt) { return Math.max(320, Math.min(dflt, node.clientWidth || dflt)); }
  var INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];

  function drawSteps() {
    var box = document.getElementById('steps-chart');
    var steps = data.steps;
    if (!steps.length) { box.appendChild(el('p', 'empty', 'No ProfilerStep events in this trace.')); box.dataset.drawn = '0'; return; }
    var xs = [], total = [], gpu = [], cpu = [];
    steps.forEach(function (s, i) { xs.push(i); total.push(s.dur_ns / 1e6); gpu.push(s.gpu_busy_ns / 1e6); cpu.push(s.cpu_busy_ns / 1e6); });
    var bars = uPlot.paths.bars({ size: [0.7, 80] });
    function at(key) { return function (u, v, si, i) { return i == null ? '-' : fmtNs(steps[i][key]); }; }
    var series = [
      { label: 'step', value: function (u, v, si, i) { return i == null ? '-' : 'step ' + steps[i].step + ' (' + steps[i].verdict + ')'; } },
      { label: data.has_device ? 'GPU idle' : 'step', fill: data.has_device ? 'rgba(232,163,23,0.45)' : 'rgba(150,150,150,0.35)',
        stroke: data.has_device ? 'rgb(232,163,23)' : 'rgb(150,150,150)', paths: bars, points: { show: false },
        value: at(data.has_device ? 'gpu_idle_ns' : 'dur_ns') },
    ];
    var cols = [xs, total];
    if (data.has_device) {
      series.push({ label: 'GPU busy', fill: 'rgba(60,120,200,0.85)', stroke: 'rgb(60,120,200)', paths: bars, points: { show: false }, value: at('gpu_busy_ns') });
      cols.push(gpu);
    }
    series.push({ label: 'CPU busy', stroke: 'rgb(40,150,80)', width: 2, points: { show: true, size: 6 }, value: at('cpu_busy_ns') });
    cols.push(cpu);
    new uPlot({
      width: widthOf(box, 1120), height: 300,
      scales: { x: { time: false, range: [-0.5, steps.length - 0.5] }, y: { range: function (u, lo, hi) { return [0, hi * 1.08 || 1]; } } },
      axes: [
        { label: 'step', incrs: INCRS, values: function (u, splits) { return splits.map(function (v) { return steps[v] ? String(steps[v].step) : ''; }); } },
        { label: 'ms', size: 60 },
      ],
      series: series,
    }, cols, box);
    box.dataset.drawn = String(steps.length);
  }

  function marks(k) {
    return function (u) {
      var ctx = u.ctx, r = uPlot.pxRatio || 1;
      ctx.save();
      [[k.median_ns, '#1d1d1f', [], 'median'], [k.mean_ns, '#b3261e', [6 * r, 4 * r], 'mean']].forEach(function (m, j) {
        var x = u.valToPos(m[0] / 1e3, 'x', true);
        ctx.strokeStyle = m[1]; ctx.fillStyle = m[1]; ctx.lineWidth = 2 * r; ctx.setLineDash(m[2]);
        ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
        ctx.font = (11 * r) + 'px sans-serif';
        ctx.fillText(m[3], x + 4 * r, u.bbox.top + (12 + 13 * j) * r);
      });
      ctx.restore();
    };
  }

  function drawKernels() {
    var box = document.getElementById('kernels-chart');
    var drawn = 0;
    if (!data.kernels.length) { box.appendChild(el('p', 'empty', 'No device activity in this trace.')); box.dataset.drawn = '0'; return; }
    data.kernels.forEach(function (k, idx) {
      var card = el('div', 'kernel-hist');
      card.dataset.kernel = String(idx);
      var h = el('h3', null, k.name);
      h.title = k.name;
      card.appendChild(h);
      card.appendChild(el('p', 'stats', k.count + ' × ' + k.category + ', total ' + fmtNs(k.total_ns) + ' · mean ' + fmtNs(k.mean_ns) +
        ' · median ' + fmtNs(k.median_ns) + ' · p90 ' + fmtNs(k.p90_ns) + ' · min ' + fmtNs(k.min_ns) + ' · max ' + fmtNs(k.max_ns)));
      var plot = el('div');
      card.appendChild(plot);
      box.appendChild(card);
      var xs = [], ys = [];
      for (var b = 0; b < k.counts.length; b++) { xs.push((k.lo_ns + (b + 0.5) * k.bin_ns) / 1e3); ys.push(k.counts[b]); }
      var lo = k.lo_ns / 1e3, hi = (k.lo_ns + k.counts.length * k.bin_ns) / 1e3;
      new uPlot({
        width: 530, height: 190, legend: { show: false },
        scales: { x: { time: false, range: [lo, hi] }, y: { range: function (u, a, m) { return [0, m * 1.15 || 1]; } } },
        axes: [{ label: 'duration (us)' }, { label: 'instances', size: 50 }],
        series: [{}, { label: 'instances', fill: 'rgba(60,120,200,0.6)', stroke: 'rgb(60,120,200)', paths: uPlot.paths.bars({ size: [1, 100], gap: 1 }), points: { show: false } }],
        hooks: { draw: [marks(k)] },
      }, [xs, ys], plot);
      drawn++;
    });
    box.dataset.drawn = String(drawn);
  }

  function drawTable() {
    var box = document.getElementById('ops-table');
    var dev = data.device_name;
    var cols = [['Name', 0, false], ['Self CPU', 1, true], ['CPU total', 2, true], ['Self ' + dev, 3, true], [dev + ' total', 4, true], ['Calls', 5, false]];
    var rows = data.ops.slice();
    var table = el('table', 'ops'), thead = el('thead'), tr = el('tr'), tbody = el('tbody');
    var state = { col: -1, desc: true };
    function fill() {
      tbody.textContent = '';
      rows.forEach(function (r) {
        var row = el('tr');
        cols.forEach(function (c) {
          var td = el('td', null, c[2] ? fmtNs(r[c[1]]) : String(r[c[1]]));
          if (c[1] === 0) td.title = r[0];
          row.appendChild(td);
        });
        tbody.appendChild(row);
      });
    }
    function sortBy(ci) {
      var desc = state.col === ci ? !state.desc : ci !== 0;
      state = { col: ci, desc: desc };
      var key = cols[ci][1];
      rows.sort(function (a, b) {
        var x = a[key], y = b[key];
        var c = typeof x === 'string' ? x.localeCompare(y) : x - y;
        return desc ? -c : c;
      });
      Array.prototype.forEach.call(tr.children, function (th, j) {
        if (j === ci) th.setAttribute('aria-sort', desc ? 'descending' : 'ascending'); else th.removeAttribute('aria-sort');
      });
      fill();
    }
    cols.forEach(function (c, ci) {
      var th = el('th', null, c[0]);
      th.addEventListener('click', function () { sortBy(ci); });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    table.appendChild(thead);
    table.appendChild(tbody);
    box.appendChild(table);
    if (data.ops_total > rows.length) box.appendChild(el('p', 'more', rows.length + ' of ' + data.ops_total + ' rows (the ones with the most CPU or ' + dev + ' time); tprof table shows them all.'));
    sortBy(2);
    box.dataset.rows = String(rows.length);
  }

  [drawSteps, drawKernels, drawTable].forEach(function (f) {
    try { f(); } catch (e) { fail(f.name + ': ' + (e && e.stack ? e.stack : e)); }
  });
  body.dataset.rendered = '1';
})();
)JS";

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format_report_html(const Trace& trace, const HtmlReportOptions& options) {
  // One context for the diagnosis, the kernels and the op table.
  const DiagnoseContext c(trace, /*with_averages=*/true);
  const Diagnosis d = internal::diagnose(c);
  const KernelsSummary ks = internal::kernel_stats(c);
  const std::vector<KernelHistogram> hists = kernel_histograms(c, ks, options);
  const std::string json = report_json(trace, c, d, hists, options);

  const std::string name = options.trace_file_name.empty() ? std::string("trace") : options.trace_file_name;
  std::string o;
  o.reserve(json.size() + internal::uplot_js().size() + 32768);
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += "<meta name=\"generator\" content=\"tprof report\">\n";
  o += "<title>tprof report: " + html_escape(name) + "</title>\n";
  o += "<style>\n";
  o += internal::uplot_css();
  o += kStyle;
  o += "</style>\n</head>\n<body>\n<header>\n<h1>tprof report: " + html_escape(name) + "</h1>\n";
  o += "<p>" + std::to_string(trace.events.size()) + " events, " + html_escape(internal::format_ns(c.end_ns - c.start_ns)) +
       " of trace, " + std::to_string(d.steps.size()) + " steps, " + std::to_string(ks.kernels.size()) +
       " device activity names.</p>\n";
  if (!options.trace_file_name.empty()) {
    o += "<p><a id=\"perfetto-link\" href=\"" + html_escape(std::string(kPerfettoPrefix) +
                                                             url_path_encode(options.trace_file_name)) +
         "\" target=\"_blank\" rel=\"noopener\">Open the trace in Perfetto UI</a> (works while <code>tprof serve "
         "DIR</code> serves the trace's folder on 127.0.0.1:9001; serve is a separate command).</p>\n";
  }
  o += "</header>\n<main>\n";
  append_verdict_html(&o, trace, d);

  const std::size_t steps_drawn = std::min(d.steps.size(), options.max_steps);
  o += "<section>\n<h2>Steps: CPU busy, GPU busy, GPU idle</h2>\n";
  o += "<p>One bar per ProfilerStep: its height is the step's duration, split into GPU busy and GPU idle; the line is "
       "the CPU busy time of the step's thread (docs/steps.md).";
  if (d.steps.size() > steps_drawn) o += " The first " + std::to_string(steps_drawn) + " steps are drawn.";
  o += "</p>\n<div id=\"steps-chart\" data-steps=\"" + std::to_string(steps_drawn) + "\"></div>\n</section>\n";

  append_causes_html(&o, trace, d, options);

  o += "<section>\n<h2>Kernel durations</h2>\n<p>Duration histograms of the " + std::to_string(hists.size()) +
       " device activities with the most total time (" + std::to_string(options.histogram_bins) +
       " bins each; the solid line is the median, the dashed one the mean).</p>\n";
  o += "<div id=\"kernels-chart\" data-kernels=\"" + std::to_string(hists.size()) + "\"></div>\n</section>\n";

  o += "<section>\n<h2>Operators (torch key_averages)</h2>\n<p>Click a column to sort.</p>\n";
  o += "<div id=\"ops-table\"></div>\n</section>\n</main>\n";
  o += "<footer>Made by tprof report. Charts by uPlot (" +
       html_escape(std::string_view(internal::uplot_version_text()).substr(
           0, internal::uplot_version_text().find('\n'))) +
       ", MIT licence), embedded in this file.</footer>\n";

  o += "<script type=\"application/json\" id=\"report-data\">";
  o += script_safe_json(json);
  o += "</script>\n<script>\n";
  o += script_safe_code(internal::uplot_js());
  o += "\n</script>\n<script>";
  o += kScript;
  o += "</script>\n</body>\n</html>\n";
  return o;
}

}  // namespace tprof
