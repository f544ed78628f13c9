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
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/base/json_writer.h"
#include "src/base/safe_text.h"
#include "src/base/saturate.h"
#include "src/base/url.h"
#include "src/report/event_text.h"
#include "src/report/html_assets.h"
#include "src/report/html_views.h"
#include "tprof/compare.h"
#include "tprof/diagnose.h"
#include "tprof/kernels.h"
#include "tprof/memory.h"
#include "tprof/table.h"

namespace tprof {

namespace {

using internal::DiagnoseContext;
using internal::JsonWriter;

// Evidence fields shown per cause; events per list.
constexpr std::size_t kMaxEvidenceFields = 12;

// The Perfetto UI opens a trace served by `tprof serve` (default port 9001).
constexpr std::string_view kServeBase = "http://127.0.0.1:9001/";

// The URL `tprof serve` gives the trace ("" without a file name).
std::string served_trace_url(const HtmlReportOptions& options) {
  if (options.trace_file_name.empty()) return "";
  return std::string(kServeBase) + internal::percent_encode(options.trace_file_name);
}

// The Perfetto link that opens the trace zoomed around one event and selects
// it: [ts - pad, ts + dur + pad] with pad = max(dur, 5 us), inside the
// trace's [lo, hi]. The page's script builds the same for the event under
// the cursor (perfettoLink in kScript).
std::string perfetto_event_link(const std::string& trace_url, std::int64_t ts, std::int64_t dur, std::int64_t lo,
                                std::int64_t hi) {
  const std::int64_t pad = std::max<std::int64_t>(dur, 5000);
  internal::PerfettoView v;
  v.vis_start_ns = std::max(lo, ts - pad);
  v.vis_end_ns = std::min(hi, ts + dur + pad);
  v.ts_ns = ts;
  v.dur_ns = dur;
  return internal::perfetto_link(trace_url, v);
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
  std::int64_t bin_ns = 1;  // linear bins
  // Long tails get bins of equal ratio instead: [lo·r^k, lo·r^(k+1)) with
  // r = (hi / lo)^(1 / bins), drawn on a log x axis.
  bool log_x = false;
  std::int64_t hi_ns = 0;  // log bins: the last bin's upper edge
  std::vector<std::int64_t> counts;
};

// A tail is long when linear bins would squash the bulk of the instances
// into the first few bins (p90 within the first tenth of the range) and the
// range spans a factor of 10 or more: a log axis then shows both the bulk
// and the outliers (a 157 ms GEMM among 4 ms ones).
bool long_tail(const KernelStat& k) {
  // In double: durations near 2^62 ns (hostile traces) overflow 10x in int64.
  const double lo = static_cast<double>(k.min_ns), hi = static_cast<double>(k.max_ns),
               p90 = static_cast<double>(k.p90_ns);
  return lo > 0 && hi >= 10 * lo && (p90 - lo) * 10 < hi - lo;
}

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
    h.log_x = long_tail(*h.stat);
    if (h.log_x) {
      h.hi_ns = internal::sat_add(h.stat->max_ns, 1);  // the maximum falls in the last bin
      h.counts.assign(static_cast<std::size_t>(bins), 0);
    } else {
      h.bin_ns = std::max<std::int64_t>(1, span / bins + 1);  // the maximum falls in the last bin
      h.counts.assign(static_cast<std::size_t>(std::min<std::int64_t>(bins, span / h.bin_ns + 1)), 0);
    }
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
    const std::int64_t dur = op.end - op.start;
    std::int64_t bin = 0;
    if (h.log_x) {
      // ln(dur / lo) / ln(hi / lo) of the bins; durations are whole ns, far
      // from the edges' rounding, and the ends are clamped.
      const double f = std::log(static_cast<double>(std::max(dur, h.lo_ns)) / static_cast<double>(h.lo_ns)) /
                       std::log(static_cast<double>(h.hi_ns) / static_cast<double>(h.lo_ns));
      bin = std::clamp<std::int64_t>(static_cast<std::int64_t>(f * static_cast<double>(h.counts.size())), 0,
                                     static_cast<std::int64_t>(h.counts.size()) - 1);
    } else {
      bin = (dur - h.lo_ns) / h.bin_ns;
    }
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

// New and vanished names in the data, per list: enough for tools and tests,
// bounded for pages comparing very different traces.
constexpr std::size_t kMaxCompareNamesInData = 200;

void write_compare_json(JsonWriter& w, const Comparison& cmp, const HtmlReportOptions& options) {
  w.begin_object();
  w.key("a");
  w.value_string(options.baseline_file_name);
  w.key("b");
  w.value_string(options.trace_file_name);
  w.key("alignment");
  w.value_string(step_alignment_name(cmp.alignment));
  w.key("aligned_steps");
  w.value_uint(cmp.a.dur_ns.size());
  w.key("median_a_ns");
  w.value_int(cmp.a.median_step_ns);
  w.key("median_b_ns");
  w.value_int(cmp.b.median_step_ns);
  w.key("delta_ns");
  w.value_int(cmp.delta_ns);
  w.key("delta_pct");
  w.value_double(std::round(cmp.delta_pct * 100) / 100);
  w.key("noise_ns");
  w.value_int(cmp.noise_ns);
  w.key("verdict_a");
  w.value_string(verdict_name(cmp.a.verdict));
  w.key("verdict_b");
  w.value_string(verdict_name(cmp.b.verdict));
  w.key("verdict_changed");
  w.value_bool(cmp.verdict_changed);
  auto names = [&](std::string_view key, const auto& rows, ChangeKind kind) {
    w.key(key);
    w.begin_array();
    std::size_t n = 0;
    for (const auto& r : rows) {
      if (r.change == kind && n++ < kMaxCompareNamesInData) w.value_string(r.name);
    }
    w.end_array();
  };
  names("new_ops", cmp.ops, ChangeKind::kNew);
  names("vanished_ops", cmp.ops, ChangeKind::kVanished);
  names("new_kernels", cmp.kernels, ChangeKind::kNew);
  names("vanished_kernels", cmp.kernels, ChangeKind::kVanished);
  w.end_object();
}

// The memory chart's data (docs/memory.md): per device with two records or
// more, its timeline buckets as [t_us from the trace's start, highest
// allocated, lowest, highest reserved or null, index into `ops` of the op
// that reached the highest, -1 when carried in], the peak, and the ops
// live at it. Ops are "caller > op" names, each once.
void write_memory_json(JsonWriter& w, const MemoryInput& in, const MemoryReport& r, std::int64_t start_ns) {
  std::vector<std::string> ops;
  std::unordered_map<std::string, std::size_t> op_index;
  auto op_of = [&](std::uint32_t site) -> std::int64_t {
    if (site >= in.sites.size()) return -1;
    const MemorySite& s = in.sites[site];
    const std::string name = (s.caller.empty() ? "" : s.caller + " > ") + (s.op.empty() ? "(no op)" : s.op);
    auto [it, added] = op_index.try_emplace(name, ops.size());
    if (added) ops.push_back(name);
    return static_cast<std::int64_t>(it->second);
  };
  w.begin_object();
  w.key("devices");
  w.begin_array();
  for (const MemoryDeviceView& v : r.devices) {
    if (v.records < 2) continue;
    w.begin_object();
    w.key("label");
    w.value_string(v.label);
    w.key("totals_recorded");
    w.value_bool(v.totals_recorded);
    w.key("peak_bytes");
    w.value_int(v.peak_bytes);
    w.key("peak_us");
    w.value_double(static_cast<double>(v.peak_ns - start_ns) / 1e3);
    w.key("peak_reserved_bytes");
    if (v.peak_reserved_bytes == kMemoryAbsent) {
      w.value_null();
    } else {
      w.value_int(v.peak_reserved_bytes);
    }
    w.key("live");
    w.begin_array();
    for (const MemoryGroup& g : v.live_at_peak) {
      w.begin_array();
      w.value_string((g.caller.empty() ? "" : g.caller + " > ") + (g.op.empty() ? "(no op)" : g.op));
      w.value_int(g.bytes);
      w.value_int(g.count);
      w.end_array();
    }
    w.end_array();
    // Steps: [number, start_us, high-water time_us, high-water bytes, spike bytes].
    w.key("steps");
    w.begin_array();
    for (const MemoryStepView& st : v.steps) {
      w.begin_array();
      w.value_int(st.step);
      w.value_double(static_cast<double>(st.start_ns - start_ns) / 1e3);
      w.value_double(static_cast<double>(st.high_water_ns - start_ns) / 1e3);
      w.value_int(st.high_water_bytes);
      w.value_int(st.spike_bytes);
      w.end_array();
    }
    w.end_array();
    w.key("points");
    w.begin_array();
    for (const MemoryPoint& p : v.timeline) {
      w.begin_array();
      w.value_double(static_cast<double>(p.start_ns - start_ns) / 1e3);
      w.value_int(p.max_allocated);
      w.value_int(p.min_allocated);
      if (p.max_reserved == kMemoryAbsent) {
        w.value_null();
      } else {
        w.value_int(p.max_reserved);
      }
      w.value_int(op_of(p.max_site));
      w.end_array();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.key("ops");
  w.begin_array();
  for (const std::string& o : ops) w.value_string(o);
  w.end_array();
  w.end_object();
}

std::string report_json(const Trace& trace, const DiagnoseContext& c, const Diagnosis& d,
                        const std::vector<KernelHistogram>& hists, const internal::Timeline& timeline,
                        const internal::FlameTree& flame, const internal::StepBars& bars,
                        const internal::CriticalPathView& path, const Comparison* cmp,
                        const HtmlReportOptions& options, const internal::KernelNames& names,
                        const MemoryInput& mem_in, const MemoryReport& mem) {
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

  w.key("perfetto");
  w.value_string(options.trace_file_name.empty() ? std::string() : internal::perfetto_link(served_trace_url(options)));
  w.key("steps_total");
  w.value_uint(d.steps.size());
  // The parts' ids and labels, once; each step's "parts" follow them.
  w.key("step_parts");
  internal::write_step_bars_json(w, bars);
  w.key("steps");
  w.begin_array();
  for (std::size_t i = 0; i < d.steps.size() && i < bars.steps.size(); ++i) {
    const StepVerdict& s = d.steps[i];
    const internal::StepBar& bar = bars.steps[i];
    w.begin_object();
    w.key("step");
    w.value_int(s.step);
    w.key("dur_ns");
    w.value_int(s.cpu_span_ns);
    w.key("cpu_busy_ns");
    w.value_int(s.cpu_busy_ns);
    w.key("cpu_any_busy_ns");
    w.value_int(bar.cpu_any_busy_ns);
    w.key("gpu_busy_ns");
    w.value_int(s.gpu_busy_ns);
    w.key("gpu_idle_ns");
    w.value_int(std::max<std::int64_t>(0, s.cpu_span_ns - s.gpu_busy_ns));
    w.key("gpu_work_ns");
    w.value_int(s.gpu_work_ns);
    w.key("lag_ns");
    w.value_int(bar.lag_ns);
    // The bar: the step as the device saw it (the host's span on CPU-only
    // traces), its parts summing to time_ns.
    w.key("time_ns");
    w.value_int(bar.device_dur_ns);
    w.key("parts");
    w.begin_array();
    for (const std::int64_t p : bar.device_parts) w.value_int(p);
    w.end_array();
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
    w.key("short_name");
    w.value_string(names.get(k.name));
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
    if (h.log_x) {
      w.key("log_x");
      w.value_bool(true);
      w.key("hi_ns");
      w.value_int(h.hi_ns);
    }
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
  // Kernel rows (their names are whole signatures) by row index: the one
  // short form every view uses; the page keeps the full name in a tooltip.
  w.key("ops_short");
  w.begin_object();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!names.has(rows[i]->key)) continue;
    const std::string short_name = names.get(rows[i]->key);
    if (short_name == rows[i]->key) continue;
    w.key(std::to_string(i));
    w.value_string(short_name);
  }
  w.end_object();
  w.key("timeline");
  internal::write_timeline_json(w, timeline);
  w.key("flame");
  internal::write_flame_json(w, flame);
  w.key("critical_path");
  internal::write_critical_path_json(w, path);
  w.key("memory");
  write_memory_json(w, mem_in, mem, c.start_ns);
  if (cmp != nullptr) {
    w.key("compare");
    write_compare_json(w, *cmp, options);
  }
  w.end_object();
  w.flush();
  return out;
}

// The verdict and its evidence as HTML (readable without scripts); every
// text from the trace goes through html_escape.
void append_verdict_html(std::string* out, const Trace& trace, const Diagnosis& d, const internal::KernelNames& names) {
  const internal::EventClock clock(trace, d);
  std::string& o = *out;
  o += "<section id=\"verdict\" data-verdict=\"" + html_escape(verdict_name(d.verdict)) + "\">\n";
  o += "<h2>Verdict: <span class=\"verdict\">" + html_escape(verdict_name(d.verdict)) + "</span></h2>\n";
  o += "<p class=\"summary\">" + html_escape(d.summary) + "</p>\n";
  if (!d.verdict_evidence.fields().empty()) {
    o += "<details><summary>What was measured</summary>\n<dl class=\"evidence\">\n";
    for (const Evidence::Field& f : d.verdict_evidence.fields()) {
      o += "<dt>" + html_escape(f.key) + "</dt><dd>" + html_escape(internal::evidence_value_text(f, clock, &names)) +
           "</dd>\n";
    }
    o += "</dl>\n</details>\n";
  }
  o += "</section>\n";
}

// The causes, strongest first, each with its evidence folded away.
void append_causes_html(std::string* out, const Trace& trace, const DiagnoseContext& c, const Diagnosis& d,
                        const internal::KernelNames& names, const HtmlReportOptions& options) {
  const internal::EventClock clock(trace, d);
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
      o += "<p class=\"look\">Look at: " + html_escape(clock.event_text(*cause.look_at, &names));
      if (!options.trace_file_name.empty()) {
        o += " <a class=\"perfetto\" href=\"" +
             html_escape(perfetto_event_link(served_trace_url(options), cause.look_at->ts_ns, cause.look_at->dur_ns,
                                             c.start_ns, c.end_ns)) +
             "\" target=\"_blank\" rel=\"noopener\">open in Perfetto UI</a>";
      }
      o += "</p>\n";
    }
    if (!anchor.advice.empty()) o += "<p class=\"advice\">" + html_escape(anchor.advice) + "</p>\n";
    o += "<details><summary>Evidence</summary>\n<dl class=\"evidence\">\n";
    std::size_t shown = 0;
    for (const Evidence::Field& f : anchor.evidence.fields()) {
      if (shown++ == kMaxEvidenceFields) break;
      o += "<dt>" + html_escape(f.key) + "</dt><dd>" + html_escape(internal::evidence_value_text(f, clock, &names)) +
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

// The critical path section: what it is, what was capped; the page's script
// draws the shares per step into #critical-chart and #critical-table.
void append_critical_path_html(std::string* out, const internal::CriticalPathView& v) {
  std::string& o = *out;
  o += "<section id=\"critical\">\n<h2>Critical path per step</h2>\n<p>";
  if (!v.available) {
    o += "</p>\n<p class=\"empty\">No critical path: " + html_escape(v.error) +
         "</p>\n<div id=\"critical-chart\" data-steps=\"0\"></div>\n</section>\n";
    return;
  }
  o += v.has_steps ? "For each step, the chain of work that set its time (<code>tprof critical-path</code>, "
                     "docs/critical-path.md): one bar per step, as tall as the step's time on the path (from the "
                     "previous step's end to the end of the device work the step launched), split by "
                     "HolisticTraceAnalysis' bound types."
                   : "No ProfilerSteps: the chain of work that set the trace's time, from its first event to its "
                     "last (<code>tprof critical-path</code>, docs/critical-path.md), split by "
                     "HolisticTraceAnalysis' bound types.";
  o += std::string(" The same path is marked on the timeline below. Hover a bar for its numbers; click it to zoom "
                   "the timeline to ") +
       (v.has_steps ? "the step." : "it.");
  if (v.steps_total > v.steps.size()) {
    o += " The first " + std::to_string(v.steps.size()) + " of " + std::to_string(v.steps_total) + " steps are shown.";
  }
  if (v.segments.size() < v.segments_total) {
    o += " <b class=\"capped\">The path is marked on the timeline for the first " + std::to_string(v.steps_marked) +
         " of " + std::to_string(v.steps.size()) + " steps only (" + std::to_string(v.segments.size()) + " of " +
         std::to_string(v.segments_total) + " stretches).</b>";
  }
  if (v.off_timeline > 0) {
    o += " " + std::to_string(v.off_timeline) + " of its stretches lie on lanes the timeline does not draw.";
  }
  o += "</p>\n<div id=\"critical-chart\" data-steps=\"" + std::to_string(v.steps.size()) + "\" data-segments=\"" +
       std::to_string(v.segments.size()) + "\" data-segments-total=\"" + std::to_string(v.segments_total) +
       "\" data-steps-marked=\"" + std::to_string(v.steps_marked) + "\"></div>\n";
  o += "<div id=\"critical-table\"></div>\n</section>\n";
}

// "+1.234 ms", "-56.7 us", "0 ns": a signed difference.
std::string signed_ns(std::int64_t ns) { return (ns > 0 ? "+" : "") + internal::format_ns(ns); }

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A compare metric as the page names it.
const char* metric_text(CompareMetric m) {
  return m == CompareMetric::kDevice   ? "device time / step"
         : m == CompareMetric::kSteady ? "step cost (steady state)"
         : m == CompareMetric::kCpu    ? "CPU busy / step"
                                       : "step time";
}

// tprof compare's A-against-B summary, as static HTML (every name escaped).
void append_compare_html(std::string* out, const Comparison& cmp, const HtmlReportOptions& options) {
  std::string& o = *out;
  const std::string a = html_escape(options.baseline_file_name.empty() ? "A" : options.baseline_file_name);
  const std::string b = html_escape(options.trace_file_name.empty() ? "B" : options.trace_file_name);
  o += "<section id=\"compare\" data-compare=\"1\" data-alignment=\"" +
       std::string(step_alignment_name(cmp.alignment)) + "\" data-verdict-changed=\"" +
       (cmp.verdict_changed ? "1" : "0") + "\" data-bound-metric=\"" +
       std::string(compare_metric_name(cmp.bound_metric)) + "\">\n<h2>B against A (tprof compare)</h2>\n";
  const MetricComparison& first = cmp.metrics.front();
  o += "<p>A: <code>" + a + "</code> &nbsp; B: <code>" + b +
       "</code>. The sections below this one show <b>B</b>. Steps aligned by " +
       html_escape(step_alignment_name(cmp.alignment)) + "; per step, the mean of B against A with its 95% " +
       (first.paired ? "paired" : "unpaired") + " bootstrap interval over the " +
       std::to_string(cmp.a.dur_ns.size()) + " aligned steps; ops and device activities are medians per step "
       "(docs/compare.md).</p>\n";
  o += "<table class=\"cmp\">\n<tr><th></th><th>A</th><th>B</th><th>B &minus; A</th></tr>\n";
  o += "<tr><td>steps (aligned / all)</td><td>" + std::to_string(cmp.a.dur_ns.size()) + " / " +
       std::to_string(cmp.a.total_steps) + "</td><td>" + std::to_string(cmp.b.dur_ns.size()) + " / " +
       std::to_string(cmp.b.total_steps) + "</td><td></td></tr>\n";
  o += "<tr><td>median step (MAD)</td><td>" + internal::format_ns(cmp.a.median_step_ns) + " (" +
       internal::format_ns(cmp.a.mad_ns) + ")</td><td>" + internal::format_ns(cmp.b.median_step_ns) + " (" +
       internal::format_ns(cmp.b.mad_ns) + ")</td><td>" + signed_ns(cmp.delta_ns) +
       (cmp.a.median_step_ns > 0 ? " (" + std::string(cmp.delta_pct > 0 ? "+" : "") + fixed(cmp.delta_pct, 1) + "%)"
                                 : std::string()) +
       "</td></tr>\n";
  // The metrics; the one the gate reads in bold.
  for (const MetricComparison& m : cmp.metrics) {
    if (!m.available) continue;
    const bool bound = m.metric == cmp.bound_metric;
    const char* label = metric_text(m.metric);
    std::string change = m.mean_a_ns > 0 ? (m.delta_pct > 0 ? "+" : "") + fixed(m.delta_pct, 1) + "%" : "n/a";
    if (m.has_interval && m.mean_a_ns > 0) {
      change += " [" + std::string(m.low_pct > 0 ? "+" : "") + fixed(m.low_pct, 1) + "%, " +
                (m.high_pct > 0 ? "+" : "") + fixed(m.high_pct, 1) + "%]";
    }
    const std::string verdict = !m.has_interval   ? "noise unknown"
                                : m.low_ns > 0    ? "B slower, beyond the noise"
                                : m.high_ns < 0   ? "B faster, beyond the noise"
                                : m.low_ns == 0 && m.high_ns == 0 ? "no change"
                                                  : "within the noise";
    const char* cls = m.beyond_noise() ? (m.low_ns > 0 ? "worse" : "better") : "";
    o += std::string("<tr class=\"metric\" data-metric=\"") + std::string(compare_metric_name(m.metric)) +
         "\"><td>" + (bound ? "<b>" : "") + "mean " + label + (bound ? "</b> (the gate's metric)" : "") + "</td><td>" +
         internal::format_ns(m.mean_a_ns) + "</td><td>" + internal::format_ns(m.mean_b_ns) + "</td><td class=\"" +
         cls + "\">" + change + ": " + verdict + "</td></tr>\n";
  }
  o += "<tr><td>gate reads</td><td class=\"wrap\" colspan=\"3\">" + html_escape(metric_text(cmp.bound_metric)) +
       ", " + html_escape(cmp.bound_reason) +
       " &mdash; <code>tprof compare --fail-if-slower PCT</code> gates on it</td></tr>\n";
  o += "<tr><td>verdict</td><td>" + html_escape(verdict_name(cmp.a.verdict)) + "</td><td>" +
       html_escape(verdict_name(cmp.b.verdict)) + "</td><td>" + (cmp.verdict_changed ? "<b>changed</b>" : "unchanged") +
       "</td></tr>\n";
  for (const std::string& d : cmp.setup_differences) {
    o += "<tr><td>set-up differs</td><td colspan=\"3\" class=\"worse\">" + html_escape(d) + "</td></tr>\n";
  }
  o += "</table>\n";

  // One naming rule for every list (src/report/kernel_names.h): ops keep
  // their namespace and the two ends of long names, kernels their short form.
  std::vector<std::string_view> op_list, kernel_list;
  for (const OpDelta& r : cmp.ops) op_list.push_back(r.name);
  for (const KernelDelta& r : cmp.kernels) kernel_list.push_back(r.name);
  const internal::KernelNames op_names = internal::KernelNames::plain(op_list, internal::kShortKernelName);
  const internal::KernelNames kernel_names(kernel_list);

  const std::size_t top = options.compare_top;
  o += "<h3>Host ops: the largest Self CPU deltas (per step)</h3>\n";
  o += "<div class=\"table-wrap\"><table class=\"cmp-rows\" id=\"compare-ops\">\n<tr><th>Name</th><th>change</th><th>Self CPU A</th>"
       "<th>Self CPU B</th><th>delta</th><th>CPU total A</th><th>CPU total B</th><th>calls/step A</th><th>calls/step "
       "B</th></tr>\n";
  for (std::size_t i = 0; i < cmp.ops.size() && i < top; ++i) {
    const OpDelta& r = cmp.ops[i];
    o += "<tr class=\"" + std::string(change_kind_name(r.change)) + "\"><td><div class=\"name\" title=\"" +
         html_escape(r.name) + "\">" + html_escape(op_names.get(r.name)) + "</div></td><td>" +
         std::string(change_kind_name(r.change)) + "</td><td>" +
         internal::format_ns(r.self_cpu_a_ns) + "</td><td>" + internal::format_ns(r.self_cpu_b_ns) + "</td><td>" +
         signed_ns(r.self_cpu_delta_ns()) + "</td><td>" + internal::format_ns(r.cpu_total_a_ns) + "</td><td>" +
         internal::format_ns(r.cpu_total_b_ns) + "</td><td>" + fixed(r.calls_a, 1) + "</td><td>" +
         fixed(r.calls_b, 1) + "</td></tr>\n";
  }
  o += "</table></div>\n";
  o += "<h3>Device activities: the largest time deltas (per step)</h3>\n";
  if (cmp.kernels.empty()) {
    o += "<p class=\"empty\">No device activity on either side.</p>\n";
  } else {
    o += "<div class=\"table-wrap\"><table class=\"cmp-rows\" id=\"compare-kernels\">\n<tr><th>Name</th><th>kind</th><th>change</th>"
         "<th>time A</th><th>time B</th><th>delta</th><th>count/step A</th><th>count/step B</th></tr>\n";
    for (std::size_t i = 0; i < cmp.kernels.size() && i < top; ++i) {
      const KernelDelta& r = cmp.kernels[i];
      o += "<tr class=\"" + std::string(change_kind_name(r.change)) + "\"><td><div class=\"name\" title=\"" +
           html_escape(r.name) + "\">" + html_escape(kernel_names.get(r.name)) + "</div></td><td>" + html_escape(r.category) + "</td><td>" +
           std::string(change_kind_name(r.change)) + "</td><td>" + internal::format_ns(r.time_a_ns) + "</td><td>" +
           internal::format_ns(r.time_b_ns) + "</td><td>" + signed_ns(r.time_delta_ns()) + "</td><td>" +
           fixed(r.count_a, 1) + "</td><td>" + fixed(r.count_b, 1) + "</td></tr>\n";
    }
    o += "</table></div>\n";
  }
  // Each name its own list item, drawn as a chip: names hold spaces and
  // commas ("Memcpy DtoD (Device -> Device)"), so words alone would run
  // one name into the next.
  o += "<dl class=\"changes\" id=\"compare-changes\">\n";
  auto names = [&](std::string_view title, const auto& rows, ChangeKind kind, const internal::KernelNames& view) {
    std::size_t n = 0;
    std::string list;
    for (const auto& r : rows) {
      if (r.change != kind) continue;
      if (n++ < options.compare_names) {
        list += "<li><code title=\"" + html_escape(r.name) + "\">" + html_escape(view.get(r.name)) + "</code></li>";
      }
    }
    o += "<dt>" + std::string(title) + " (" + std::to_string(n) + ")</dt><dd>";
    if (n == 0) {
      o += "none";
    } else {
      o += "<ul class=\"name-list\">" + list;
      if (n > options.compare_names) o += "<li class=\"more\">and " + std::to_string(n - options.compare_names) + " more</li>";
      o += "</ul>";
    }
    o += "</dd>\n";
  };
  names("New ops (in B only)", cmp.ops, ChangeKind::kNew, op_names);
  names("Vanished ops (in A only)", cmp.ops, ChangeKind::kVanished, op_names);
  names("New device activities", cmp.kernels, ChangeKind::kNew, kernel_names);
  names("Vanished device activities", cmp.kernels, ChangeKind::kVanished, kernel_names);
  o += "</dl>\n</section>\n";
}

constexpr std::string_view kStyle = R"CSS(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1180px; padding: 16px 24px; color: #1d1d1f; background: #fff; }
h1 { font-size: 22px; margin: 4px 0; } h2 { font-size: 18px; margin: 22px 0 8px; border-bottom: 1px solid #ddd; } h3 { font-size: 15px; margin: 6px 0; }
header p { margin: 2px 0; color: #555; }
.verdict { color: #b3261e; }
dl.evidence { display: grid; grid-template-columns: minmax(0, max-content) minmax(0, 1fr); gap: 1px 14px; margin: 6px 0; font-size: 13px; }
dl.evidence dt { color: #666; } dl.evidence dd { margin: 0; white-space: pre-line; word-break: break-word; }
.cause { border-left: 4px solid #999; padding: 4px 12px; margin: 10px 0; background: #fafafa; }
.cause.sev-critical { border-color: #b3261e; } .cause.sev-warning { border-color: #e8a317; } .cause.sev-info { border-color: #3c78c8; }
.sev { text-transform: uppercase; font-size: 11px; padding: 1px 5px; border-radius: 3px; background: #eee; }
.advice { color: #333; } .empty { color: #777; font-style: italic; }
.kernel-hist { display: inline-block; vertical-align: top; width: 540px; max-width: 100%; margin: 6px 10px 10px 0; }
.kernel-hist h3 { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; font-family: ui-monospace, monospace; font-size: 12px; }
.kernel-hist .stats { font-size: 12px; color: #444; margin: 0 0 4px; }
table.ops { border-collapse: collapse; font-size: 12px; width: 100%; }
table.ops th, table.ops td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; }
table.ops th:first-child, table.ops td:first-child { text-align: left; font-family: ui-monospace, monospace; }
table.ops th { cursor: pointer; user-select: none; background: #f3f3f3; position: sticky; top: 0; }
table.ops th[aria-sort="ascending"]::after { content: " \25B2"; } table.ops th[aria-sort="descending"]::after { content: " \25BC"; }
summary { cursor: pointer; color: #555; font-size: 13px; }
#timeline, #flame { position: relative; }
#timeline canvas, #flame canvas { display: block; cursor: crosshair; }
#flame canvas { cursor: pointer; }
/* A tip wraps between words only; a name longer than the tip's width (a
   kernel signature) breaks anywhere, a number never (its unit is joined by a
   no-break space). */
.tip { position: absolute; pointer-events: none; background: rgba(29,29,31,0.92); color: #fff; font-size: 12px; padding: 4px 7px; border-radius: 3px; max-width: min(520px, 100%); white-space: pre-line; overflow-wrap: anywhere; word-break: normal; z-index: 5; display: none; }
.marks { list-style: none; padding: 0; margin: 6px 0; font-size: 12px; }
.marks li { cursor: pointer; margin: 1px 0; } .marks li:hover { text-decoration: underline; }
.marks .sev { margin-right: 6px; }
.tl-bar { font-size: 12px; color: #555; margin: 4px 0; } .tl-bar button { font-size: 12px; margin-left: 8px; }
table.cmp, table.cmp-rows { border-collapse: collapse; font-size: 12px; margin: 6px 0 12px; }
table.cmp td, table.cmp th, table.cmp-rows td, table.cmp-rows th { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; }
table.cmp td:first-child, table.cmp-rows td:first-child, table.cmp-rows th:first-child { text-align: left; }
table.cmp-rows td:first-child { font-family: ui-monospace, monospace; }
table.cmp-rows th, table.cmp th { background: #f3f3f3; }
table.cmp-rows td, table.cmp td { white-space: nowrap; }
table.cmp td.wrap { white-space: normal; text-align: left; max-width: 60em; }
td.worse { color: #b3261e; } td.better { color: #1e7b34; }
tr.new td:first-child { color: #1e7b34; } tr.vanished td:first-child { color: #b3261e; text-decoration: line-through; }
dl.changes dt { font-weight: 600; font-size: 13px; margin-top: 6px; } dl.changes dd { margin: 2px 0 0 16px; font-size: 12px; }
ul.name-list { list-style: none; padding: 0; margin: 3px 0; display: flex; flex-wrap: wrap; gap: 4px 8px; }
ul.name-list li { background: #eef1f5; border: 1px solid #d8dde5; border-radius: 3px; padding: 0 6px; max-width: 100%; min-width: 0; }
ul.name-list li.more { background: none; border-color: transparent; color: #555; }
ul.name-list code { display: inline-block; max-width: 100%; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; vertical-align: bottom; }
footer { margin-top: 28px; color: #777; font-size: 12px; }
/* No page wider than its window: names from traces (kernel names run to
   thousands of characters) break anywhere in text, sit ellipsized in table
   cells (the full name in a title attribute; the script then cuts them in
   the middle instead, fitNames), and wide tables scroll inside their own
   box. */
main, section, header, footer { min-width: 0; }
p, li, dd, dt, h3, code, .summary { overflow-wrap: anywhere; }
.table-wrap { overflow-x: auto; max-width: 100%; }
div.name { max-width: min(460px, 45vw); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
ul.legend { list-style: none; padding: 0; margin: 4px 0 6px; font-size: 12px; display: flex; flex-wrap: wrap; gap: 2px 16px; }
ul.legend .swatch { display: inline-block; width: 12px; height: 12px; margin-right: 5px; vertical-align: -2px; border-radius: 2px; }
ul.legend .swatch.line { height: 0; border-top: 1.5px solid #1d1d1f; vertical-align: 3px; border-radius: 0; position: relative; width: 16px; }
ul.legend .swatch.line::after { content: ""; position: absolute; left: 6px; top: -3.75px; width: 4px; height: 4px; border-radius: 50%; background: #1d1d1f; }
.step-summary { font-size: 13px; margin: 4px 0 6px; }
.hist-label { position: absolute; white-space: nowrap; font-size: 11px; line-height: 14px; pointer-events: none; background: rgba(255,255,255,0.85); padding: 0 2px; }
ul.legend .swatch.tick { height: 0; border-top: 2px solid #1d1d1f; vertical-align: 3px; border-radius: 0; }
#steps-chart { position: relative; }
#steps-chart canvas { display: block; }
.tl-pick { font-size: 12px; color: #333; margin: 4px 0; min-height: 1.4em; overflow-wrap: anywhere; }
.tl-bar label { margin-left: 14px; user-select: none; } .tl-bar input { vertical-align: -2px; margin: 0 4px 0 0; }
#critical-chart { position: relative; } #critical-chart canvas { display: block; cursor: pointer; }
table.cp th { font-family: ui-monospace, monospace; font-weight: 500; } table.cp tr.total td { font-weight: 600; border-top: 1px solid #ccc; }
b.capped { color: #b3261e; font-weight: 600; }
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

  // A no-break space between a number and its unit: a line that wraps (a
  // tooltip near the window's edge) never parts "63.9" from "us".
  function fmtNs(ns) {
    var a = Math.abs(ns), S = '\u00a0';
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + S + 's';
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + S + 'ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + S + 'us';
    return Math.round(ns) + S + 'ns';
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function widthOf(node, dflt) { return Math.max(320, Math.min(dflt, node.clientWidth || dflt)); }

  // Durations for axes: the unit picked by the axis' largest value (s, ms,
  // us, ns), trailing zeros trimmed: "1.5 ms", "250 us", never "1000 ns".
  // The decimals are those the tick step needs to be exact: a step of 0.25
  // gives "22.25 | 22.5 | 22.75", where rounding to the step's first digit
  // gave the uneven "22.3 | 22.5 | 22.8".
  function unitOf(rangeNs) { return rangeNs >= 1e9 ? [1e9, 's'] : rangeNs >= 1e6 ? [1e6, 'ms'] : rangeNs >= 1e3 ? [1e3, 'us'] : [1, 'ns']; }
  function decimalsOf(st) {
    for (var d = 0; d < 9; d++) { var v = st * Math.pow(10, d), r = Math.round(v); if (r >= 1 && Math.abs(v - r) < 1e-6 * v) return d; }
    return 9;
  }
  function fmtTick(ns, stepNs, rangeNs) {
    var u = unitOf(rangeNs), v = ns / u[0], st = stepNs / u[0];
    var dec = decimalsOf(st);
    var s = v.toFixed(dec);
    if (s.indexOf('.') >= 0) s = s.replace(/0+$/, '').replace(/\.$/, '');
    if (s === '-0') s = '0';
    return s + ' ' + u[1];
  }
  // The horizontal grid lines and time labels of a bar chart's y axis
  // (from x0 to x1), their labels kept in box.dataset.ticks for the tests.
  function gridY(box, ctx, x0, x1, yOf, yStep, yMax) {
    ctx.font = '11px sans-serif'; ctx.textBaseline = 'middle'; ctx.fillStyle = '#555'; ctx.strokeStyle = '#e4e4e4'; ctx.lineWidth = 1;
    var ticks = [];
    for (var g = 0; g <= yMax + yStep / 2; g += yStep) {
      var gy = Math.round(yOf(g)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x0, gy); ctx.lineTo(x1, gy); ctx.stroke();
      var lab = fmtTick(g, yStep, yMax); ticks.push(lab);
      ctx.textAlign = 'right'; ctx.fillText(lab, x0 - 6, gy); ctx.textAlign = 'left';
    }
    box.dataset.ticks = ticks.join('|');
  }
  function niceStep(x) {
    var p = Math.pow(10, Math.floor(Math.log10(x))), m = x / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  // Where the step went: one stacked bar per step (parts from C++, summing
  // to the step as the device saw it), the CPU busy time as a tick, and the
  // launch backlog (how far the device ran behind the host) as a thin line
  // in a strip of its own: on a GPU-bound run it grows every step, and on
  // the bars' scale it would squash the device's time per step flat. A
  // canvas of our own: uPlot does not stack bars.
  //
  // One colour per part: the device's work in blues, teal and purple; each
  // idle cause its own, the host's launching in oranges, blocked calls in
  // reds, pinks and browns, waits on other work in greens, the profiler and
  // what nothing explains in greys. Picked so that any two differ by a
  // CIE76 distance of 15 or more, also as deuteranopes and protanopes see
  // them (Machado et al. 2009).
  var PART_COLORS = { compute: 'rgb(60,120,200)', exposed_comm: 'rgb(123,67,214)', exposed_copy: 'rgb(47,146,158)',
    cpu_busy: 'rgb(40,150,80)', cpu_idle: 'rgb(205,205,205)',
    idle_launching: 'rgb(232,163,23)', idle_kernel_latency: 'rgb(243,224,156)', idle_host_work: 'rgb(194,112,30)',
    idle_unrecorded: 'rgb(183,179,179)', idle_blocked_sync: 'rgb(179,38,30)', idle_blocked_copy: 'rgb(214,143,131)',
    idle_blocked_alloc: 'rgb(77,19,37)', idle_blocked_init: 'rgb(246,143,220)', idle_blocked_launch_queue: 'rgb(189,23,172)',
    idle_blocked_other: 'rgb(94,66,50)', idle_stream_wait: 'rgb(118,183,92)', idle_peers: 'rgb(104,117,60)',
    idle_profiler: 'rgb(82,81,85)', idle_outside_steps: 'rgb(224,216,197)', idle_other: 'rgb(217,217,234)' };
  function partColor(key) { return PART_COLORS[key] || 'rgb(160,140,110)'; }
  var BACKLOG_COLOR = 'rgb(29,29,31)';
  function drawSteps() {
    var box = document.getElementById('steps-chart'), steps = data.steps, P = data.step_parts;
    if (!steps.length) {
      box.appendChild(el('p', 'empty', 'No steps in this trace: mark iterations with ProfilerStep (prof.step()) or a repeated range (--step-range NAME).'));
      box.dataset.drawn = '0';
      return;
    }
    function timeOf(s) { return s.time_ns != null ? s.time_ns : s.dur_ns; }
    var used = [];
    P.keys.forEach(function (k, j) { if (steps.some(function (s) { return s.parts[j] > 0; })) used.push(j); });
    var anyLag = P.device && steps.some(function (s) { return s.lag_ns > 0; });
    // The overview in one line, as the TensorBoard plugin's "Step Time
    // Breakdown" gives it: the average step and each part's share of all.
    var total = 0, sums = P.keys.map(function () { return 0; });
    steps.forEach(function (s) { total += timeOf(s); s.parts.forEach(function (v, j) { sums[j] += v; }); });
    function pct(j) { return (100 * sums[j] / Math.max(1, total)).toFixed(1); }
    var summary = el('p', 'step-summary');
    summary.id = 'steps-summary';
    summary.appendChild(el('b', null, 'Average step: ' + fmtNs(total / steps.length) + (P.device ? ' on the device' : '')));
    var order = used.slice().sort(function (a, b) { return sums[b] - sums[a]; });
    summary.appendChild(document.createTextNode(' \u2014 ' + order.map(function (j) { return P.labels[j] + '\u00a0' + pct(j) + '%'; }).join(' \u00b7 ')));
    summary.dataset.avgNs = String(Math.round(total / steps.length));
    P.keys.forEach(function (k, j) { summary.setAttribute('data-' + k.replace(/_/g, '-') + '-pct', pct(j)); });
    box.appendChild(summary);
    var legend = el('ul', 'legend');
    used.forEach(function (j) {
      var li = el('li'), sw = el('span', 'swatch');
      li.dataset.key = P.keys[j];
      if (P.help && P.help[j]) li.title = P.help[j];
      sw.style.background = partColor(P.keys[j]);
      li.appendChild(sw); li.appendChild(document.createTextNode(P.labels[j])); legend.appendChild(li);
    });
    if (anyLag) {
      var lq = el('li'), sq = el('span', 'swatch line');
      lq.dataset.key = 'backlog';
      lq.appendChild(sq); lq.appendChild(document.createTextNode('launch backlog: how long the step\u2019s device work ran on after the step ended on the host (the strip below, on its own scale)'));
      legend.appendChild(lq);
    }
    var lt = el('li'), st = el('span', 'swatch tick');
    lt.appendChild(st); lt.appendChild(document.createTextNode(P.device ? 'CPU busy (the step\u2019s thread)' : 'CPU busy (any thread)')); legend.appendChild(lt);
    box.appendChild(legend);
    var MAIN = 290, STRIP = anyLag ? 70 : 0;
    var W = widthOf(box, 1120), H = MAIN + STRIP, L = 64, R = 8, TOP = 10, B = 34;
    var c = makeCanvas(box, W, H), ctx = c.ctx, tip = tipFor(box);
    // The scale: the bars and the CPU ticks, never the backlog.
    var maxNs = 1;
    steps.forEach(function (s) { maxNs = Math.max(maxNs, timeOf(s), P.device ? s.cpu_busy_ns : s.cpu_any_busy_ns); });
    var yStep = niceStep(maxNs / 5), yMax = Math.ceil(maxNs * 1.04 / yStep) * yStep, plotH = MAIN - TOP - B, plotW = W - L - R;
    function yOf(ns) { return TOP + plotH * (1 - ns / yMax); }
    var bw = plotW / steps.length, barW = Math.max(1, Math.min(60, bw * 0.72));
    gridY(box, ctx, L, W - R, yOf, yStep, yMax);
    box.dataset.yMaxNs = String(yMax);
    var holder = el('div', 'bar-data');
    holder.hidden = true;
    // Step numbers under the bars, every k-th so that they never overlap.
    var every = Math.max(1, Math.ceil(ctx.measureText(String(steps[steps.length - 1].step) + '  ').width / bw));
    steps.forEach(function (s, i) {
      var x0 = L + i * bw + (bw - barW) / 2, acc = 0;
      used.forEach(function (j) {
        var v = s.parts[j];
        if (v <= 0) return;
        ctx.fillStyle = partColor(P.keys[j]);
        var ya = yOf(acc), yb = yOf(acc + v);
        ctx.fillRect(x0, yb, barW, Math.max(ya - yb, 0));
        acc += v;
      });
      var busy = P.device ? s.cpu_busy_ns : s.cpu_any_busy_ns, ty = Math.round(yOf(busy)) + 0.5;
      ctx.strokeStyle = '#1d1d1f'; ctx.lineWidth = 2; ctx.setLineDash(P.device ? [] : [3, 2]);
      ctx.beginPath(); ctx.moveTo(x0 - 1, ty); ctx.lineTo(x0 + barW + 1, ty); ctx.stroke();
      ctx.setLineDash([]); ctx.lineWidth = 1;
      if (i % every === 0) { ctx.fillStyle = '#555'; ctx.textAlign = 'center'; ctx.fillText(String(s.step), L + (i + 0.5) * bw, MAIN - B + 10); ctx.textAlign = 'left'; }
      var d = el('i', 'step-bar');
      d.dataset.step = String(s.step); d.dataset.durNs = String(timeOf(s)); d.dataset.hostNs = String(s.dur_ns);
      d.dataset.sumNs = String(acc); d.dataset.lagNs = String(s.lag_ns); d.dataset.cpuBusyNs = String(busy);
      holder.appendChild(d);
    });
    ctx.fillStyle = '#555'; ctx.textAlign = 'center'; ctx.fillText('step', L + plotW / 2, MAIN - 8); ctx.textAlign = 'left';
    if (anyLag) {
      // The backlog's strip: its own scale from 0 to its largest value.
      var t0 = MAIN + 8, t1 = H - 8, lagMax = 1;
      steps.forEach(function (s) { lagMax = Math.max(lagMax, s.lag_ns); });
      var lStep = niceStep(lagMax / 2), lTop = Math.ceil(lagMax / lStep) * lStep;
      var ly = function (ns) { return t1 - (t1 - t0) * ns / lTop; };
      ctx.fillStyle = 'rgba(0,0,0,0.025)'; ctx.fillRect(L, t0, plotW, t1 - t0);
      ctx.font = '11px sans-serif'; ctx.textBaseline = 'middle'; ctx.fillStyle = '#555'; ctx.strokeStyle = '#e4e4e4';
      var lticks = [];
      [0, lTop].forEach(function (g) {
        var gy = Math.round(ly(g)) + 0.5, lab = fmtTick(g, lStep, lTop);
        ctx.beginPath(); ctx.moveTo(L, gy); ctx.lineTo(W - R, gy); ctx.stroke();
        ctx.textAlign = 'right'; ctx.fillText(lab, L - 6, gy); ctx.textAlign = 'left';
        lticks.push(lab);
      });
      ctx.fillText('launch backlog', L + 6, t0 + 8);
      ctx.strokeStyle = BACKLOG_COLOR; ctx.fillStyle = BACKLOG_COLOR; ctx.lineWidth = 1.5;
      ctx.beginPath();
      steps.forEach(function (s, i) { var x = L + (i + 0.5) * bw, y = ly(Math.max(0, s.lag_ns)); if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y); });
      ctx.stroke();
      if (bw >= 6) steps.forEach(function (s, i) { ctx.beginPath(); ctx.arc(L + (i + 0.5) * bw, ly(Math.max(0, s.lag_ns)), 2, 0, 2 * Math.PI); ctx.fill(); });
      // The last step's backlog in words, left of its point.
      var last = steps[steps.length - 1], lastText = fmtNs(Math.max(0, last.lag_ns));
      ctx.textAlign = 'right'; ctx.fillText(lastText, L + (steps.length - 0.5) * bw - 6, Math.max(t0 + 8, ly(Math.max(0, last.lag_ns)) - 8)); ctx.textAlign = 'left';
      ctx.lineWidth = 1;
      box.dataset.backlogDrawn = String(steps.length);
      box.dataset.backlogMaxNs = String(lagMax);
      box.dataset.backlogTicks = lticks.join('|');
    }
    box.appendChild(holder);
    c.cv.addEventListener('mousemove', function (ev) {
      var b = c.cv.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top, i = Math.floor((x - L) / bw);
      var s = steps[i];
      if (!s || x < L) { tip.hide(); return; }
      var t = timeOf(s), lines = ['step ' + s.step + ' (' + s.verdict + '): ' + fmtNs(t) + (P.device ? ' on the device' : '')];
      used.forEach(function (j) { var v = s.parts[j]; if (v > 0) lines.push(P.labels[j] + ': ' + fmtNs(v) + ' (' + (100 * v / Math.max(1, t)).toFixed(1) + '%)'); });
      if (P.device) {
        lines.push('the step on the host: ' + fmtNs(s.dur_ns));
        lines.push('device work it launched: ' + fmtNs(s.gpu_work_ns));
        lines.push(s.lag_ns > 0 ? 'launch backlog: its device work ran on ' + fmtNs(s.lag_ns) + ' after the step ended on the host' : 'its device work ended within the step');
        lines.push('CPU busy (the step\u2019s thread): ' + fmtNs(s.cpu_busy_ns));
      } else {
        lines.push('CPU busy: the step\u2019s thread ' + fmtNs(s.cpu_busy_ns) + ', any thread ' + fmtNs(s.cpu_any_busy_ns));
      }
      tip.show(lines.join('\n'), x, y);
    });
    c.cv.addEventListener('mouseleave', function () { tip.hide(); });
    box.dataset.drawn = String(steps.length);
  }


  // The critical path per step: one stacked bar per step, as tall as the
  // path (the step's time), split by HTA's bound types (plus the time
  // before the path's first node, when any); a table of the same below.
  var BOUND_COLORS = { cpu_bound: 'rgb(40,150,80)', gpu_compute_bound: 'rgb(60,120,200)', gpu_communication_bound: 'rgb(140,90,200)',
    kernel_launch_overhead: 'rgb(232,163,23)', kernel_kernel_overhead: 'rgb(200,80,120)', data_loading: 'rgb(214,96,40)' };
  var BOUND_WORDS = { cpu_bound: 'host work, or host time the trace does not explain', gpu_compute_bound: 'kernels, copies, memsets',
    gpu_communication_bound: 'NCCL / RCCL kernels', kernel_launch_overhead: 'launch calls and the wait from a launch to its kernel',
    kernel_kernel_overhead: 'gaps between kernels on a stream, across stream waits, a sync\u2019s return',
    data_loading: 'host work inside a DataLoader' };
  var UNEXPLAINED_COLOR = 'rgba(150,150,150,0.45)';
  function boundColor(k) { return BOUND_COLORS[k] || 'rgb(160,140,110)'; }
  var zoomTimeline = null;  // set by drawTimeline: (start ns, duration ns) relative to the first event
  function drawCritical() {
    var box = document.getElementById('critical-chart'), CP = data.critical_path;
    if (!box) return;
    if (!CP || !CP.available || !CP.steps.length) { box.dataset.drawn = '0'; return; }
    var steps = CP.steps, B = CP.bounds, nb = B.length;
    var anyUnexpl = steps.some(function (s) { return s.unexplained_ns > 0; });
    var used = [];
    B.forEach(function (k, j) { if (steps.some(function (s) { return s.bound_ns[j] > 0; })) used.push(j); });
    var legend = el('ul', 'legend');
    used.forEach(function (j) {
      var li = el('li'), sw = el('span', 'swatch');
      sw.style.background = boundColor(B[j]);
      li.appendChild(sw); li.appendChild(document.createTextNode(B[j] + ': ' + (BOUND_WORDS[B[j]] || B[j]))); legend.appendChild(li);
    });
    if (anyUnexpl) { var lu = el('li'), su = el('span', 'swatch'); su.style.background = UNEXPLAINED_COLOR; lu.appendChild(su); lu.appendChild(document.createTextNode('unexplained: before the path\u2019s first event')); legend.appendChild(lu); }
    box.appendChild(legend);
    var W = widthOf(box, 1120), H = 240, L = 64, R = 8, TOP = 10, BOT = 34;
    var c = makeCanvas(box, W, H), ctx = c.ctx, tip = tipFor(box);
    var maxNs = 1;
    steps.forEach(function (s) { maxNs = Math.max(maxNs, s.length_ns); });
    var yStep = niceStep(maxNs / 5), yMax = Math.ceil(maxNs * 1.04 / yStep) * yStep, plotH = H - TOP - BOT, plotW = W - L - R;
    function yOf(ns) { return TOP + plotH * (1 - ns / yMax); }
    var bw = plotW / steps.length, barW = Math.max(1, Math.min(60, bw * 0.72));
    gridY(box, ctx, L, W - R, yOf, yStep, yMax);
    var holder = el('div', 'bar-data');
    holder.hidden = true;
    function label(s) { return s.step >= 0 ? String(s.step) : 'all'; }
    var every = Math.max(1, Math.ceil(ctx.measureText(label(steps[steps.length - 1]) + '  ').width / bw));
    steps.forEach(function (s, i) {
      var x0 = L + i * bw + (bw - barW) / 2, acc = 0;
      function part(v, col) {
        if (v <= 0) return;
        var ya = yOf(acc), yb = yOf(acc + v);
        ctx.fillStyle = col; ctx.fillRect(x0, yb, barW, Math.max(ya - yb, 0));
        acc += v;
      }
      part(s.unexplained_ns, UNEXPLAINED_COLOR);
      for (var j = 0; j < nb; j++) part(s.bound_ns[j], boundColor(B[j]));
      if (i % every === 0) { ctx.fillStyle = '#555'; ctx.textAlign = 'center'; ctx.fillText(label(s), L + (i + 0.5) * bw, H - BOT + 10); ctx.textAlign = 'left'; }
      var d = el('i', 'cp-bar');
      d.dataset.step = String(s.step); d.dataset.lengthNs = String(s.length_ns); d.dataset.sumNs = String(acc);
      d.dataset.unexplainedNs = String(s.unexplained_ns);
      B.forEach(function (k, j) { d.setAttribute('data-' + k.replace(/_/g, '-'), String(s.bound_ns[j])); });
      holder.appendChild(d);
    });
    ctx.fillStyle = '#555'; ctx.textAlign = 'center'; ctx.fillText(CP.has_steps ? 'step' : 'the whole trace', L + plotW / 2, H - 8); ctx.textAlign = 'left';
    box.appendChild(holder);
    function at(ev) {
      var b = c.cv.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top, i = Math.floor((x - L) / bw);
      return x >= L && steps[i] ? { s: steps[i], x: x, y: y } : null;
    }
    c.cv.addEventListener('mousemove', function (ev) {
      var h = at(ev);
      if (!h) { tip.hide(); return; }
      var s = h.s, lines = [(s.step >= 0 ? 'step ' + s.step : 'the whole trace') + ': critical path ' + fmtNs(s.length_ns)];
      B.forEach(function (k, j) { var v = s.bound_ns[j]; if (v > 0) lines.push(k + ': ' + fmtNs(v) + ' (' + (100 * v / Math.max(1, s.length_ns)).toFixed(1) + '%)'); });
      if (s.unexplained_ns > 0) lines.push('unexplained: ' + fmtNs(s.unexplained_ns));
      lines.push(s.segments + (s.segments < s.segments_total ? ' of ' + s.segments_total : '') + ' stretches marked on the timeline (click to zoom there)');
      tip.show(lines.join('\n'), h.x, h.y);
    });
    c.cv.addEventListener('mouseleave', function () { tip.hide(); });
    c.cv.addEventListener('click', function (ev) {
      var h = at(ev);
      if (!h || !zoomTimeline) return;
      zoomTimeline(h.s.start_ns, h.s.length_ns);
      var tl = document.getElementById('timeline');
      if (tl && tl.scrollIntoView) tl.scrollIntoView({ block: 'nearest' });
    });
    box.dataset.drawn = String(steps.length);

    // The table: every step's shares (the first 200), then all steps together.
    var tbox = document.getElementById('critical-table');
    if (!tbox) return;
    var MAXROWS = 200, table = el('table', 'cmp-rows cp'), head = el('tr');
    var cols = ['step', 'path'].concat(B);
    if (anyUnexpl) cols.push('unexplained');
    cols.forEach(function (h, j) { var th = el('th', null, h); if (j >= 2 && BOUND_WORDS[h]) th.title = BOUND_WORDS[h]; head.appendChild(th); });
    table.appendChild(head);
    var total = { step: -2, length_ns: 0, unexplained_ns: 0, bound_ns: B.map(function () { return 0; }) };
    function row(s, cls) {
      var tr = el('tr', cls);
      tr.appendChild(el('td', null, s.step === -2 ? 'all ' + steps.length : s.step >= 0 ? String(s.step) : 'the whole trace'));
      tr.appendChild(el('td', null, fmtNs(s.length_ns)));
      function cell(v) { tr.appendChild(el('td', null, v > 0 ? fmtNs(v) + ' (' + (100 * v / Math.max(1, s.length_ns)).toFixed(1) + '%)' : '0')); }
      s.bound_ns.forEach(cell);
      if (anyUnexpl) cell(s.unexplained_ns);
      table.appendChild(tr);
    }
    steps.forEach(function (s, i) {
      total.length_ns += s.length_ns; total.unexplained_ns += s.unexplained_ns;
      s.bound_ns.forEach(function (v, j) { total.bound_ns[j] += v; });
      if (i < MAXROWS) row(s, 'cp-row');
    });
    if (steps.length > 1) row(total, 'total');
    var wrap = el('div', 'table-wrap');
    wrap.appendChild(table);
    tbox.appendChild(wrap);
    if (steps.length > MAXROWS) tbox.appendChild(el('p', 'more', MAXROWS + ' of ' + steps.length + ' steps listed; the last row sums them all (tprof critical-path lists every step).'));
    tbox.dataset.rows = String(Math.min(MAXROWS, steps.length));
  }

  // The median (solid) and mean (dashed) lines, and their labels: HTML
  // above the plot area, one row each, centred on their line but kept
  // within the plot's width, so that they never sit on the y axis' tick
  // labels (left of the plot) nor on each other. card.dataset.labels keeps
  // their boxes, relative to the plot area, for the tests.
  function marks(k, card) {
    var spans = null;
    var lines = [[k.median_ns, '#1d1d1f', [], 'median'], [k.mean_ns, '#b3261e', [6, 4], 'mean']];
    return function (u) {
      var ctx = u.ctx, r = uPlot.pxRatio || 1;
      ctx.save();
      lines.forEach(function (m) {
        var x = u.valToPos(m[0] / 1e3, 'x', true);
        ctx.strokeStyle = m[1]; ctx.lineWidth = 2 * r; ctx.setLineDash(m[2].map(function (v) { return v * r; }));
        ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
      });
      ctx.restore();
      if (!spans) {
        spans = lines.map(function (m) {
          var sp = el('span', 'hist-label', m[3] + ' ' + fmtNs(m[0]));
          sp.style.color = m[1];
          u.over.appendChild(sp);
          return sp;
        });
      }
      var W = u.over.clientWidth, boxes = [];
      lines.forEach(function (m, j) {
        var sp = spans[j], w = sp.offsetWidth, x = u.valToPos(m[0] / 1e3, 'x'), top = -30 + 15 * j;
        var left = Math.max(0, Math.min(W - w, x - w / 2));
        sp.style.left = left + 'px'; sp.style.top = top + 'px';
        boxes.push([Math.round(left), top, Math.round(left + w), top + 14]);
      });
      card.dataset.labels = JSON.stringify(boxes);
    };
  }

  // A log axis' marks: 1, 2 and 5 times a power of ten (uPlot's own start
  // at the range's low end: 3655, 10655, ...).
  function logMarks(lo, hi) {
    var out = [];
    for (var p = Math.floor(Math.log10(lo)); Math.pow(10, p) <= hi; p++) {
      [1, 2, 5].forEach(function (q) { var v = q * Math.pow(10, p); if (v >= lo && v <= hi) out.push(v); });
    }
    return out;
  }

  function drawKernels() {
    var box = document.getElementById('kernels-chart');
    var drawn = 0;
    if (!data.kernels.length) { box.appendChild(el('p', 'empty', 'No device activity in this trace.')); box.dataset.drawn = '0'; return; }
    data.kernels.forEach(function (k, idx) {
      var card = el('div', 'kernel-hist');
      card.dataset.kernel = String(idx);
      // The short name, unless it was cut at its end: then the whole name,
      // cut in the middle to fit (fitNames).
      var h = el('h3', 'fit', k.short_name && k.short_name.slice(-1) !== '\u2026' ? k.short_name : k.name);
      h.title = k.name;
      card.appendChild(h);
      card.appendChild(el('p', 'stats', k.count + ' × ' + k.category + ', total ' + fmtNs(k.total_ns) + ' · mean ' + fmtNs(k.mean_ns) +
        ' · median ' + fmtNs(k.median_ns) + ' · p90 ' + fmtNs(k.p90_ns) + ' · min ' + fmtNs(k.min_ns) + ' · max ' + fmtNs(k.max_ns) +
        (k.log_x ? ' · log scale: a long tail' : '')));
      var plot = el('div');
      card.appendChild(plot);
      box.appendChild(card);
      // Linear bins, or bins of equal ratio on a log axis for a long tail
      // (C++ decides: kernel_histograms).
      var log = !!k.log_x, n = k.counts.length, xs = [], ys = [];
      var lo = k.lo_ns / 1e3, hi = log ? k.hi_ns / 1e3 : (k.lo_ns + n * k.bin_ns) / 1e3, ratio = log ? Math.pow(hi / lo, 1 / n) : 1;
      for (var b = 0; b < n; b++) { xs.push(log ? lo * Math.pow(ratio, b + 0.5) : (k.lo_ns + (b + 0.5) * k.bin_ns) / 1e3); ys.push(k.counts[b]); }
      // Durations that (nearly) all agree, one instance alone: the axis
      // spans 5% of the value around them, not a nanosecond of ticks.
      var minW = 0.05 * hi;
      if (!log && hi - lo < minW) { var mid = (lo + hi) / 2; lo = Math.max(0, mid - minW / 2); hi = lo + minW; }
      if (log) card.dataset.logX = '1';
      new uPlot({
        width: Math.min(530, widthOf(box, 1120) - 10), height: 205, legend: { show: false }, padding: [32, null, null, null],
        scales: { x: log ? { time: false, distr: 3, log: 10, range: [lo, hi] } : { time: false, range: [lo, hi] },
                  y: { range: function (u, a, m) { return [0, m * 1.15 || 1]; } } },
        // Tick labels at least 70 px apart, in the unit of the axis' largest
        // value, with the decimals the step needs. A log axis marks 1, 2
        // and 5 times the powers of ten, each label in its own unit.
        axes: [{ label: 'duration', space: log ? 40 : 70, splits: log ? function () { return logMarks(lo, hi); } : undefined,
                 filter: log ? function (u, splits) { return splits; } : undefined,
                 values: function (u, splits) {
                   var labs;
                   if (log) {
                     labs = splits.map(function (v) { return v == null ? '' : fmtTick(v * 1e3, v * 1e3, v * 1e3); });
                   } else {
                     var stp = splits.length > 1 ? (splits[1] - splits[0]) * 1e3 : 1;
                     labs = splits.map(function (v) { return fmtTick(v * 1e3, stp, hi * 1e3); });
                   }
                   plot.dataset.ticks = labs.filter(function (l) { return l !== ''; }).join('|');
                   return labs; } },
               { label: 'instances', size: 50, space: 30 }],
        series: [{}, { label: 'instances', fill: 'rgba(60,120,200,0.6)', stroke: 'rgb(60,120,200)', paths: uPlot.paths.bars({ size: [1, 100], gap: 1 }), points: { show: false } }],
        hooks: { draw: [marks(k, card)] },
      }, [xs, ys], plot);
      drawn++;
    });
    box.dataset.drawn = String(drawn);
  }

  function drawTable() {
    var box = document.getElementById('ops-table');
    var dev = data.device_name;
    var cols = [['Name', 0, false], ['Self CPU', 1, true], ['CPU total', 2, true], ['Self ' + dev, 3, true], [dev + ' total', 4, true], ['Calls', 5, false]];
    var shortOf = data.ops_short || {};
    var rows = data.ops.map(function (r, i) { return r.concat([shortOf[String(i)] || r[0]]); });
    var table = el('table', 'ops'), thead = el('thead'), tr = el('tr'), tbody = el('tbody');
    var state = { col: -1, desc: true };
    function fill() {
      tbody.textContent = '';
      rows.forEach(function (r) {
        var row = el('tr');
        cols.forEach(function (c) {
          var td;
          if (c[1] === 0) { td = el('td'); var nm = el('div', 'name', r[6]); nm.title = r[0]; td.appendChild(nm); }
          else td = el('td', null, c[2] ? fmtNs(r[c[1]]) : String(r[c[1]]));
          row.appendChild(td);
        });
        tbody.appendChild(row);
      });
      fitNames(tbody);  // the rows are new at every sort
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
    var wrap = el('div', 'table-wrap');
    wrap.appendChild(table);
    box.appendChild(wrap);
    if (data.ops_total > rows.length) box.appendChild(el('p', 'more', rows.length + ' of ' + data.ops_total + ' rows (the ones with the most CPU or ' + dev + ' time); tprof table shows them all.'));
    sortBy(2);
    box.dataset.rows = String(rows.length);
  }

  // A canvas the size of its CSS box times the device pixel ratio.
  function makeCanvas(box, w, h) {
    var r = window.devicePixelRatio || 1, cv = el('canvas');
    cv.width = Math.round(w * r); cv.height = Math.round(h * r);
    cv.style.width = w + 'px'; cv.style.height = h + 'px';
    box.appendChild(cv);
    var ctx = cv.getContext('2d');
    ctx.setTransform(r, 0, 0, r, 0, 0);
    return { cv: cv, ctx: ctx };
  }
  // A tip is laid out at the box's left edge first, at the width its text
  // wants (up to 520 px), then moved as far left as it must to stay inside
  // the box: placed first at the pointer, near the right edge it would be
  // squeezed narrow and wrap its lines anywhere.
  function tipFor(box) {
    var tip = el('div', 'tip');
    box.appendChild(tip);
    return {
      show: function (text, x, y) {
        tip.textContent = text; tip.style.display = 'block'; tip.style.left = '0px'; tip.style.top = (y + 14) + 'px';
        tip.style.left = Math.max(0, Math.min(x + 12, box.clientWidth - tip.offsetWidth)) + 'px';
      },
      hide: function () { tip.style.display = 'none'; },
    };
  }
  // Long names keep both ends and lose their middle ("vectorized_elem…
  // <BFloat16>>"): kernels and ops that share a prefix differ at the end,
  // which CSS's ellipsis and a canvas clip would cut. Whole code points.
  function elideMiddle(s, fits) {
    if (fits(s)) return s;
    var cp = Array.from(s), lo = 0, hi = cp.length - 1;
    function cut(k) { var a = Math.ceil(k / 2); return cp.slice(0, a).join('') + '\u2026' + cp.slice(cp.length - (k - a)).join(''); }
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (fits(cut(mid))) lo = mid; else hi = mid - 1; }
    return cut(lo);
  }
  // A name drawn on a canvas, in at most w px.
  function fitText(ctx, s, w) { return elideMiddle(s, function (t) { return ctx.measureText(t).width <= w; }); }
  // Every name box on the page that overflows: its text cut in the middle
  // to fit (the whole name stays in its title). Widths are read first and
  // the text measured on a canvas, so the page is laid out once.
  function fitNames(root) {
    var mc = document.createElement('canvas').getContext('2d'), todo = [];
    Array.prototype.forEach.call((root || document).querySelectorAll('div.name, h3.fit, code[title]'), function (e) {
      if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth) {
        var cs = getComputedStyle(e);
        todo.push([e, e.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight), cs.font]);
      }
    });
    todo.forEach(function (t) {
      mc.font = t[2];
      t[0].textContent = fitText(mc, t[0].textContent, t[1] - 2);
      t[0].dataset.elided = '1';
    });
  }
  var SEV = { critical: '#b3261e', warning: '#e8a317', info: '#3c78c8' };
  // The Perfetto link for an event (start relative to the trace's first
  // event, exact ns): the page's copy of perfetto_event_link (C++, which
  // writes data.perfetto with src/base/url.h's perfetto_link): zoom to
  // [ts - pad, ts + dur + pad], pad = max(dur, 5 us), inside the trace, and
  // select the event. Absolute times in BigInt: they may pass 2^53.
  function perfettoLink(relNs, durNs) {
    var T = data.timeline;
    if (!data.perfetto) return '';
    var start = BigInt(T.start_ns_text), ts = start + BigInt(Math.round(relNs)), dur = BigInt(Math.round(durNs));
    var pad = dur > BigInt(5000) ? dur : BigInt(5000), lo = ts - pad, hi = ts + dur + pad, end = start + BigInt(T.span_ns);
    if (lo < start) lo = start;
    if (hi > end) hi = end;
    var s = data.perfetto;
    if (lo < hi) s += '&visStart=' + lo + '&visEnd=' + hi;
    return s + '&ts=' + ts + '&dur=' + dur;
  }

  // The timeline: lanes as rows, busy intervals as bars, a hand-written
  // canvas renderer (uPlot draws series over one y scale, not rows of
  // rectangles). Times are in the data's units (unit_ns each); nested
  // events, steps and marks carry exact ns.
  function drawTimeline() {
    var box = document.getElementById('timeline'), T = data.timeline;
    if (!T.lanes.length) { box.appendChild(el('p', 'empty', 'No events on CPU threads or GPU streams.')); box.dataset.drawn = '0'; return; }
    var U = T.unit_ns, spanU = Math.max(1, Math.ceil(T.span_ns / U));
    var lanes = T.lanes.map(function (l) {
      var iv = [], t = 0;
      for (var i = 0; i + 1 < l.iv.length; i += 2) { var a = t + l.iv[i], b = a + l.iv[i + 1]; iv.push(a, b); t = b; }
      return { l: l, iv: iv, nest: l.nest || [], depth: l.nest && l.nest.length ? l.max_depth + 1 : 0 };
    });
    // The steps' critical path: exact ns summed back from (gap, duration)
    // pairs, each stretch with its step.
    var CP = data.critical_path, segs = [];
    if (CP && CP.available) {
      var stepOf = [], endNs = 0;
      CP.steps.forEach(function (st) { for (var k = 0; k < st.segments; k++) stepOf.push(st.step); });
      CP.segments.forEach(function (x, k) {
        var st = endNs + x[1];
        endNs = st + x[2];
        segs.push({ lane: x[0], s: st, d: x[2], type: CP.edge_types[x[3]], bound: CP.bounds[x[4]],
          name: x[5] >= 0 ? CP.names[x[5]] : '(host time between events)', step: stepOf[k] });
      });
    }
    var showCp = segs.some(function (sg) { return sg.lane >= 0; });
    var LABEL = 190, ROW = 16, NROW = 13, AXIS = 24, W = widthOf(box, 1120);
    var bar = el('div', 'tl-bar'), reset = el('button', null, 'Reset zoom'), range = el('span');
    bar.appendChild(range); bar.appendChild(reset);
    if (showCp) {
      var cpLabel = el('label'), cpBox = el('input');
      cpBox.type = 'checkbox'; cpBox.id = 'tl-critical'; cpBox.setAttribute('checked', ''); cpBox.checked = true;
      cpBox.addEventListener('change', function () { showCp = cpBox.checked; draw(); });
      cpLabel.appendChild(cpBox); cpLabel.appendChild(document.createTextNode('critical path'));
      bar.appendChild(cpLabel);
    }
    box.appendChild(bar);
    var c = makeCanvas(box, W, AXIS + lanes.length * ROW + 6), ctx = c.ctx, tip = tipFor(box);
    var pick = el('div', 'tl-pick'), pickText = el('span', null, 'Click an event to keep it here, with a link to it in Perfetto UI.'), pickLink = el('a');
    pickLink.id = 'tl-perfetto'; pickLink.target = '_blank'; pickLink.rel = 'noopener'; pickLink.textContent = 'open in Perfetto UI at this event';
    pickLink.style.display = 'none';
    pick.appendChild(pickText); pick.appendChild(document.createTextNode(' ')); pick.appendChild(pickLink); box.appendChild(pick);
    var view = { lo: 0, hi: spanU }, drag = null, tops = [], H = 0, groups = [];
    var plotW = W - LABEL - 8;
    function xOf(u) { return LABEL + (u - view.lo) / (view.hi - view.lo) * plotW; }
    function uOf(x) { return view.lo + (x - LABEL) / plotW * (view.hi - view.lo); }
    function nested() { return (view.hi - view.lo) <= spanU / 4; }
    function layout() {
      var y = AXIS, open = nested();
      tops = lanes.map(function (ln) { var t = y; y += ROW + (open ? ln.depth * NROW : 0); return t; });
      return y + 6;
    }
    function setView(lo, hi) {
      var minW = Math.min(spanU, 20);
      if (hi - lo < minW) { var m = (lo + hi) / 2; lo = m - minW / 2; hi = m + minW / 2; }
      lo = Math.max(0, lo); hi = Math.min(spanU, hi);
      view = { lo: lo, hi: hi }; draw();
    }
    function draw() {
      var h = layout();
      if (h !== H) {
        H = h; var r = window.devicePixelRatio || 1;
        c.cv.height = Math.round(H * r); c.cv.style.height = H + 'px'; ctx.setTransform(r, 0, 0, r, 0, 0);
      }
      ctx.clearRect(0, 0, W, H);
      var rangeNs = (view.hi - view.lo) * U;
      range.textContent = 'showing ' + fmtNs(view.lo * U) + ' to ' + fmtNs(view.hi * U) + ' of ' + fmtNs(T.span_ns) + ' (from the first event)';
      ctx.font = '11px sans-serif'; ctx.textBaseline = 'middle';
      // Steps: alternate shading and a dashed line at each boundary,
      // numbered where there is room.
      var lastLabel = -1e9;
      T.steps.forEach(function (s, k) {
        var a = s[0] / U, b = (s[0] + s[1]) / U;
        if (b < view.lo || a > view.hi) return;
        var x0 = Math.max(LABEL, xOf(a)), x1 = Math.min(W - 8, xOf(b));
        if (k % 2 === 0) { ctx.fillStyle = 'rgba(60,120,200,0.05)'; ctx.fillRect(x0, AXIS, Math.max(0, x1 - x0), H - AXIS); }
        ctx.strokeStyle = 'rgba(90,90,90,0.55)'; ctx.setLineDash([4, 3]);
        [a, b].forEach(function (e) { if (e >= view.lo && e <= view.hi) { var ex = Math.round(xOf(e)) + 0.5; ctx.beginPath(); ctx.moveTo(ex, AXIS - 10); ctx.lineTo(ex, H); ctx.stroke(); } });
        ctx.setLineDash([]);
        var label = '#' + s[2], lx = Math.max(x0, xOf(a)) + 2;
        if (lx - lastLabel > ctx.measureText(label).width + 6 && x1 - x0 > ctx.measureText(label).width + 4) { ctx.fillStyle = '#666'; ctx.fillText(label, lx, AXIS - 5); lastLabel = lx; }
      });
      var stepNs = niceStep(rangeNs / 8), step = stepNs / U, ticks = [];
      ctx.fillStyle = '#555'; ctx.strokeStyle = '#e4e4e4'; ctx.lineWidth = 1;
      for (var g = Math.ceil(view.lo / step) * step; g <= view.hi; g += step) {
        var gx = Math.round(xOf(g)) + 0.5, lab = fmtTick(g * U, stepNs, rangeNs);
        ctx.beginPath(); ctx.moveTo(gx, AXIS - 14); ctx.lineTo(gx, H); ctx.stroke();
        if (gx + 3 + ctx.measureText(lab).width < W) { ctx.fillStyle = '#555'; ctx.fillText(lab, gx + 3, 7); }
        ticks.push(lab);
      }
      box.dataset.ticks = ticks.join('|');
      var open = nested();
      lanes.forEach(function (ln, row) {
        var y = tops[row], hgt = ROW + (open ? ln.depth * NROW : 0);
        if (row % 2) { ctx.fillStyle = 'rgba(0,0,0,0.03)'; ctx.fillRect(0, y, W, hgt); }
        ctx.fillStyle = '#333';
        var label = ln.l.label + (ln.l.thread ? ' ' + ln.l.thread : '');
        ctx.save(); ctx.beginPath(); ctx.rect(0, y, LABEL - 6, ROW); ctx.clip();
        ctx.fillText(fitText(ctx, label, LABEL - 10), 4, y + ROW / 2); ctx.restore();
        ctx.fillStyle = ln.l.gpu ? 'rgba(60,120,200,0.85)' : 'rgba(40,150,80,0.8)';
        var iv = ln.iv, lastX = -1;
        for (var i = 0; i < iv.length; i += 2) {
          if (iv[i + 1] < view.lo || iv[i] > view.hi) continue;
          var x0 = Math.max(LABEL, xOf(iv[i])), x1 = Math.min(W - 8, xOf(iv[i + 1]));
          if (x1 - x0 < 1) { if (Math.floor(x0) === lastX) continue; x1 = x0 + 1; }
          lastX = Math.floor(x0);
          ctx.fillRect(x0, y + 3, x1 - x0, ROW - 6);
        }
        if (!open) return;
        ln.nest.forEach(function (e) {
          var a = e[0] / U, b = (e[0] + e[1]) / U;
          if (b < view.lo || a > view.hi) return;
          var x0 = Math.max(LABEL, xOf(a)), x1 = Math.min(W - 8, xOf(b)), ny = y + ROW + e[3] * NROW;
          if (x1 - x0 < 0.5) return;
          ctx.fillStyle = 'hsl(' + (140 - 14 * (e[3] % 6)) + ',45%,' + (58 + 4 * (e[3] % 4)) + '%)';
          ctx.fillRect(x0, ny, Math.max(x1 - x0 - 0.5, 0.5), NROW - 1);
          if (x1 - x0 > 30) {
            ctx.save(); ctx.beginPath(); ctx.rect(x0, ny, x1 - x0 - 2, NROW); ctx.clip();
            ctx.fillStyle = '#1d1d1f'; ctx.font = '10px sans-serif'; ctx.fillText(fitText(ctx, T.names[e[2]], x1 - x0 - 4), x0 + 2, ny + NROW / 2); ctx.font = '11px sans-serif'; ctx.restore();
          }
        });
      });
      // The critical path: a stripe under the lane's bar, coloured by bound
      // type, and an outline around each stretch wide enough for one.
      var cpDrawn = 0;
      if (showCp) {
        segs.forEach(function (sg) {
          if (sg.lane < 0 || sg.lane >= tops.length) return;
          var a = sg.s / U, b = (sg.s + sg.d) / U;
          if (b < view.lo || a > view.hi) return;
          var x0 = Math.max(LABEL, xOf(a)), x1 = Math.min(W - 8, xOf(b)), y = tops[sg.lane];
          if (x1 - x0 < 1) x1 = x0 + 1;
          ctx.fillStyle = boundColor(sg.bound);
          ctx.fillRect(x0, y + ROW - 3, x1 - x0, 3);
          if (x1 - x0 >= 4) {
            ctx.strokeStyle = 'rgba(29,29,31,0.7)'; ctx.lineWidth = 1;
            ctx.strokeRect(Math.round(x0) + 0.5, y + 2.5, Math.max(0, Math.round(x1 - x0) - 1), ROW - 5);
          }
          cpDrawn++;
        });
      }
      box.dataset.criticalDrawn = String(cpDrawn);
      // Marks: those closer than 14 px on one row share one triangle
      // labelled with every cause number ("1,3").
      groups = [];
      var byRow = {};
      T.marks.forEach(function (m, k) {
        var u = m.ts_ns / U;
        if (u < view.lo || u > view.hi) return;
        var x = xOf(u), key = String(m.lane), gs = byRow[key] || (byRow[key] = []), last = gs[gs.length - 1];
        if (last && Math.abs(x - last.x) < 14) { last.ks.push(k); return; }
        var grp = { x: x, lane: m.lane, ks: [k] };
        gs.push(grp); groups.push(grp);
      });
      groups.forEach(function (grp) {
        var m = T.marks[grp.ks[0]], col = SEV[m.severity] || '#555';
        var y0 = grp.lane >= 0 ? tops[grp.lane] : AXIS, y1 = grp.lane >= 0 ? y0 + ROW : H;
        ctx.strokeStyle = col; ctx.fillStyle = col; ctx.lineWidth = 2;
        ctx.beginPath(); ctx.moveTo(grp.x, y0); ctx.lineTo(grp.x, y1); ctx.stroke();
        ctx.beginPath(); ctx.moveTo(grp.x - 5, y0 - 1); ctx.lineTo(grp.x + 5, y0 - 1); ctx.lineTo(grp.x, y0 + 6); ctx.closePath(); ctx.fill();
        var text = grp.ks.map(function (k) { return String(T.marks[k].cause + 1); }).join(',');
        ctx.fillStyle = 'rgba(255,255,255,0.85)'; ctx.fillRect(grp.x + 5, y0 - 1, ctx.measureText(text).width + 2, 11);
        ctx.fillStyle = col; ctx.fillText(text, grp.x + 6, y0 + 4);
        ctx.lineWidth = 1;
      });
      box.dataset.markGroups = String(groups.length);
      if (drag && Math.abs(drag.x1 - drag.x0) > 2) {
        ctx.fillStyle = 'rgba(60,120,200,0.15)';
        ctx.fillRect(Math.min(drag.x0, drag.x1), AXIS, Math.abs(drag.x1 - drag.x0), H - AXIS);
      }
    }
    function pos(ev) { var b = c.cv.getBoundingClientRect(); return { x: ev.clientX - b.left, y: ev.clientY - b.top }; }
    // What is under the pointer: {text, rel, dur} (rel, dur in exact ns when known).
    function under(p) {
      if (p.x < LABEL || p.y < AXIS) return null;
      var row = -1;
      for (var r = 0; r < tops.length; r++) if (p.y >= tops[r]) row = r;
      var u = uOf(p.x), tol = 5 / plotW * (view.hi - view.lo);
      for (var gi = 0; gi < groups.length; gi++) {
        var grp = groups[gi];
        if ((grp.lane === row || grp.lane < 0) && Math.abs(grp.x - p.x) <= 6 && (grp.lane < 0 || p.y < tops[row] + ROW)) {
          var lines = grp.ks.map(function (k) { var m = T.marks[k]; return 'cause ' + (m.cause + 1) + ' (' + m.severity + '): ' + m.title + '\nlook at: ' + m.name + '\n' + m.lane_label + ' at ' + fmtNs(m.ts_ns) + ', ' + fmtNs(m.dur_ns); });
          var m0 = T.marks[grp.ks[0]];
          return { text: lines.join('\n'), rel: m0.ts_ns, dur: m0.dur_ns, name: m0.name };
        }
      }
      var ln = lanes[row];
      if (!ln) return null;
      var base = ln.l.label + (ln.l.thread ? ' (' + ln.l.thread + ')' : '');
      // A stretch of the critical path on this lane, under the pointer.
      var seg = null;
      if (showCp) segs.forEach(function (sg) { if (sg.lane === row && sg.s / U <= u + tol && u - tol <= (sg.s + sg.d) / U && (!seg || sg.d < seg.d)) seg = sg; });
      var segText = seg ? 'critical path' + (seg.step >= 0 ? ', step ' + seg.step : '') + ': ' + seg.name + '\n' + seg.type + ' (' + seg.bound + '), ' + fmtNs(seg.d) + ' at ' + fmtNs(seg.s) : '';
      if (seg && p.y >= tops[row] + ROW - 5 && p.y < tops[row] + ROW + 1) return { text: segText + '\n' + base, rel: seg.s, dur: seg.d, name: seg.name };
      var dy = p.y - tops[row] - ROW;
      if (nested() && dy >= 0) {
        var depth = Math.floor(dy / NROW), hit = null;
        ln.nest.forEach(function (e) { if (e[3] === depth && e[0] / U <= u + tol && u - tol <= (e[0] + e[1]) / U && (!hit || e[1] < hit[1])) hit = e; });
        if (!hit) return null;
        return { text: T.names[hit[2]] + '\n' + fmtNs(hit[1]) + ' at ' + fmtNs(hit[0]) + ', depth ' + hit[3] + '\n' + base, rel: hit[0], dur: hit[1], name: T.names[hit[2]] };
      }
      var best = null;
      ln.l.top.forEach(function (e) { if (e[0] <= u + tol && u - tol <= e[0] + e[1] && (!best || e[1] < best[1])) best = e; });
      var iv = ln.iv, hitI = -1, lo = 0, hi = iv.length / 2 - 1;
      while (lo <= hi) { var mid = (lo + hi) >> 1; if (iv[2 * mid + 1] < u - tol) lo = mid + 1; else if (iv[2 * mid] > u + tol) hi = mid - 1; else { hitI = mid; break; } }
      var text = base + ': ' + ln.l.events + ' events, busy ' + fmtNs(ln.l.busy_ns);
      if (best) text += '\n' + T.names[best[2]] + ': ' + fmtNs(best[4]) + ' at ' + fmtNs(best[3]);
      if (hitI >= 0) text += '\nbusy ' + fmtNs(iv[2 * hitI] * U) + ' to ' + fmtNs(iv[2 * hitI + 1] * U);
      if (seg) text += '\n' + segText;
      return best ? { text: text, rel: best[3], dur: best[4], name: T.names[best[2]] } : { text: text };
    }
    function hover(p) {
      var h = under(p);
      if (!h) { tip.hide(); return; }
      tip.show(h.text + (h.rel != null && data.perfetto ? '\n(click to keep it below, with its Perfetto link)' : ''), p.x, p.y);
    }
    c.cv.addEventListener('wheel', function (ev) {
      ev.preventDefault();
      var p = pos(ev), u = uOf(Math.max(LABEL, p.x)), f = ev.deltaY < 0 ? 0.8 : 1.25;
      setView(u - (u - view.lo) * f, u + (view.hi - u) * f);
    }, { passive: false });
    c.cv.addEventListener('mousedown', function (ev) { var p = pos(ev); if (p.x >= LABEL) drag = { x0: p.x, x1: p.x, y: p.y }; });
    c.cv.addEventListener('mousemove', function (ev) { var p = pos(ev); if (drag) { drag.x1 = Math.max(LABEL, Math.min(W - 8, p.x)); draw(); } hover(p); });
    c.cv.addEventListener('mouseleave', function () { tip.hide(); });
    window.addEventListener('mouseup', function () {
      if (!drag) return;
      var d = drag; drag = null;
      if (Math.abs(d.x1 - d.x0) > 4) { setView(uOf(Math.min(d.x0, d.x1)), uOf(Math.max(d.x0, d.x1))); return; }
      draw();
      var h = under({ x: d.x0, y: d.y });
      if (!h || h.rel == null) return;
      pickText.textContent = h.name + ': ' + fmtNs(h.dur) + ' at ' + fmtNs(h.rel) + ' from the first event.';
      var link = perfettoLink(h.rel, h.dur);
      pickLink.style.display = link ? '' : 'none';
      if (link) pickLink.href = link;
    });
    c.cv.addEventListener('dblclick', function () { setView(0, spanU); });
    zoomTimeline = function (relNs, durNs) { var a = relNs / U, b = (relNs + durNs) / U, pad = (b - a) * 0.05; setView(a - pad, b + pad); };
    reset.addEventListener('click', function () { setView(0, spanU); });
    if (T.marks.length) {
      var list = el('ul', 'marks');
      T.marks.forEach(function (m) {
        var li = el('li');
        var sev = el('span', 'sev', m.severity);
        sev.style.color = SEV[m.severity] || '#555';
        li.appendChild(sev);
        li.appendChild(document.createTextNode((m.cause + 1) + '. ' + m.title + ': ' + m.name + ' (' + m.lane_label + ', ' + fmtNs(m.ts_ns) + ')'));
        var link = perfettoLink(m.ts_ns, m.dur_ns);
        if (link) li.dataset.perfetto = link;
        li.addEventListener('click', function () { var u = m.ts_ns / U, w = Math.max(m.dur_ns / U * 6, spanU / 200); setView(u - w / 2, u + w / 2); });
        list.appendChild(li);
      });
      box.appendChild(list);
    }
    draw();
    box.dataset.drawn = String(lanes.length);
  }

  // The flame graph (icicle): the root on top, children below their parent,
  // width proportional to total time within the node zoomed into.
  function drawFlame() {
    var box = document.getElementById('flame'), F = data.flame;
    if (!F.nodes.length) { box.appendChild(el('p', 'empty', 'No CPU ops in this trace.')); box.dataset.drawn = '0'; return; }
    var nodes = F.nodes.map(function (n) { return { parent: n[0], name: F.names[n[1]], total: n[2], calls: n[3], kids: [], depth: 0 }; });
    var maxDepth = 0;
    nodes.forEach(function (n, i) {
      if (n.parent >= 0) { nodes[n.parent].kids.push(i); n.depth = nodes[n.parent].depth + 1; maxDepth = Math.max(maxDepth, n.depth); }
    });
    nodes.forEach(function (n) { n.kids.sort(function (a, b) { return nodes[b].total - nodes[a].total; }); });
    var ROW = 18, W = widthOf(box, 1120), H = (maxDepth + 1) * ROW + 2;
    var c = makeCanvas(box, W, H), ctx = c.ctx, tip = tipFor(box), rects = [], focus = 0;
    function color(name) {
      var h = 0;
      for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
      return 'hsl(' + (15 + Math.abs(h) % 40) + ',' + (65 + Math.abs(h >> 8) % 25) + '%,' + (58 + Math.abs(h >> 16) % 18) + '%)';
    }
    function cell(i, x, w, dim) {
      var n = nodes[i], y = n.depth * ROW;
      ctx.fillStyle = dim ? '#ddd' : color(n.name);
      ctx.fillRect(x, y, Math.max(w - 1, 0.5), ROW - 1);
      rects.push([x, y, w, i]);
      if (w > 40) {
        ctx.save(); ctx.beginPath(); ctx.rect(x, y, w - 2, ROW); ctx.clip();
        ctx.fillStyle = '#1d1d1f'; ctx.fillText(fitText(ctx, n.name, w - 6), x + 3, y + ROW / 2); ctx.restore();
      }
    }
    function layout(i, x, w) {
      cell(i, x, w, false);
      var n = nodes[i], cx = x;
      n.kids.forEach(function (k) {
        var kw = n.total > 0 ? w * nodes[k].total / n.total : 0;
        if (kw >= 0.5) layout(k, cx, kw);
        cx += kw;
      });
    }
    function draw() {
      ctx.clearRect(0, 0, W, H); rects = [];
      ctx.font = '11px sans-serif'; ctx.textBaseline = 'middle';
      for (var a = nodes[focus].parent; a >= 0; a = nodes[a].parent) cell(a, 0, W, true);
      layout(focus, 0, W);
    }
    function at(ev) {
      var b = c.cv.getBoundingClientRect(), x = ev.clientX - b.left, y = ev.clientY - b.top;
      for (var k = rects.length - 1; k >= 0; k--) { var r = rects[k]; if (x >= r[0] && x < r[0] + r[2] && y >= r[1] && y < r[1] + ROW) return { i: r[3], x: x, y: y }; }
      return null;
    }
    c.cv.addEventListener('click', function (ev) {
      var h = at(ev);
      if (!h) return;
      focus = (h.i === focus && nodes[focus].parent >= 0) ? nodes[focus].parent : h.i;
      draw();
    });
    c.cv.addEventListener('mousemove', function (ev) {
      var h = at(ev);
      if (!h) { tip.hide(); return; }
      var n = nodes[h.i], p = n.parent >= 0 ? nodes[n.parent] : null;
      tip.show(n.name + '\n' + fmtNs(n.total) + ' total, ' + (100 * n.total / nodes[0].total).toFixed(1) + '% of all' +
        (p ? ', ' + (100 * n.total / p.total).toFixed(1) + '% of ' + p.name : '') + (n.parent >= 0 ? '\n' + n.calls + ' calls' : ''), h.x, h.y);
    });
    c.cv.addEventListener('mouseleave', function () { tip.hide(); });
    draw();
    box.dataset.drawn = String(nodes.length);
  }

  function fmtBytes(b) {
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], v = Math.abs(b), i = 0;
    while (v >= 1024 && i < 4) { v /= 1024; i++; }
    return (b < 0 ? '-' : '') + (i === 0 ? v.toFixed(0) : v.toFixed(1)) + ' ' + u[i];
  }

  // One chart per device: the highest and lowest allocated value of each
  // slice, reserved where recorded, the peak as a dot; the caption under
  // the chart names the op that reached the slice under the cursor.
  function drawMemory() {
    var box = document.getElementById('memory-chart');
    if (!box || !data.memory) return;
    var drawn = 0;
    data.memory.devices.forEach(function (dev, idx) {
      var card = el('div', 'memory-device');
      card.dataset.device = dev.label;
      card.appendChild(el('h3', null, dev.label + ' · peak ' + fmtBytes(dev.peak_bytes) + (dev.totals_recorded ? '' : ' (relative)')));
      var plot = el('div'), cap = el('p', 'memory-caption', 'Hover the chart for the op at each time.');
      card.appendChild(plot);
      card.appendChild(cap);
      box.appendChild(card);
      var xs = [], hi = [], lo = [], res = [], hasRes = false;
      dev.points.forEach(function (p) {
        xs.push(p[0] / 1e3); hi.push(p[1]); lo.push(p[2]); res.push(p[3]);
        if (p[3] !== null) hasRes = true;
      });
      var series = [{}, { label: 'allocated (highest)', stroke: 'rgb(60,120,200)', fill: 'rgba(60,120,200,0.15)', width: 1.5, points: { show: false }, value: function (u, v) { return v == null ? '' : fmtBytes(v); } },
                    { label: 'allocated (lowest)', stroke: 'rgba(60,120,200,0.5)', width: 1, dash: [4, 3], points: { show: false }, value: function (u, v) { return v == null ? '' : fmtBytes(v); } }];
      var cols = [xs, hi, lo];
      if (hasRes) {
        series.push({ label: 'reserved', stroke: 'rgb(200,120,40)', width: 1, points: { show: false }, value: function (u, v) { return v == null ? '' : fmtBytes(v); } });
        cols.push(res);
      }
      // Step starts as dashed lines, each step's spike (its high-water mark,
      // where it gave memory back) as an orange dot, the peak as a red one.
      var peak = function (u) {
        var ctx = u.ctx, r = uPlot.pxRatio || 1, top = u.bbox.top, bottom = u.bbox.top + u.bbox.height;
        ctx.save();
        ctx.strokeStyle = 'rgba(0,0,0,0.25)'; ctx.setLineDash([3 * r, 3 * r]); ctx.lineWidth = r;
        dev.steps.forEach(function (st) {
          var x = u.valToPos(st[1] / 1e3, 'x', true);
          ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bottom); ctx.stroke();
        });
        ctx.setLineDash([]);
        ctx.fillStyle = 'rgb(230,140,20)';
        var spikes = 0;
        dev.steps.forEach(function (st) {
          if (st[4] <= 0) return;
          spikes++;
          ctx.beginPath(); ctx.arc(u.valToPos(st[2] / 1e3, 'x', true), u.valToPos(st[3], 'y', true), 3 * r, 0, 2 * Math.PI); ctx.fill();
        });
        ctx.fillStyle = 'rgb(200,40,40)';
        ctx.beginPath(); ctx.arc(u.valToPos(dev.peak_us / 1e3, 'x', true), u.valToPos(dev.peak_bytes, 'y', true), 4 * r, 0, 2 * Math.PI); ctx.fill();
        ctx.restore();
        card.dataset.spikes = String(spikes);
      };
      new uPlot({
        width: widthOf(box, 1120) - 10, height: 220,
        scales: { x: { time: false } },
        axes: [{ label: 'ms from the trace start', space: 70 },
               { label: 'bytes', size: 80, space: 30, values: function (u, splits) { return splits.map(fmtBytes); } }],
        series: series,
        // The caption starts at the peak (once the scales are set): the op that reached it.
        hooks: { draw: [peak], ready: [function (u) {
          var i = 0;
          while (i + 1 < dev.points.length && dev.points[i + 1][0] <= dev.peak_us) i++;
          u.setCursor({ left: u.valToPos(xs[i], 'x'), top: u.valToPos(hi[i], 'y') });
        }], setCursor: [function (u) {
          var i = u.cursor.idx;
          if (i == null) return;
          // A slice without an allocation of its own holds the level an earlier one reached.
          var j = i;
          while (j > 0 && dev.points[j][4] < 0) j--;
          var p = dev.points[i], k = dev.points[j][4], op = k >= 0 ? data.memory.ops[k] : '';
          cap.textContent = (p[0] / 1e3).toFixed(3) + ' ms: up to ' + fmtBytes(p[1]) +
            (op === '' ? '' : j === i ? ', reached by ' + op : ', held since ' + op + ' at ' + (dev.points[j][0] / 1e3).toFixed(3) + ' ms');
          cap.dataset.op = op;
        }] },
      }, cols, plot);
      drawn++;
    });
    box.dataset.drawn = String(drawn);
  }

  [drawSteps, drawCritical, drawKernels, drawMemory, drawTable, drawTimeline, drawFlame, function fitAllNames() { fitNames(); }].forEach(function (f) {
    try { f(); } catch (e) { fail(f.name + ': ' + (e && e.stack ? e.stack : e)); }
  });
  // What the tests compare: the page must never be wider than its window.
  body.dataset.scrollWidth = String(document.documentElement.scrollWidth);
  body.dataset.windowWidth = String(window.innerWidth);
  body.dataset.rendered = '1';
})();
)JS";

}  // namespace

std::string html_escape(std::string_view text) { return internal::html_escape(text); }

namespace {

// The page for `trace`, with the comparison section when `cmp` is given.
std::string render_page(const Trace& trace, const HtmlReportOptions& options, const Comparison* cmp) {
  // One context for the diagnosis, the kernels, the op table, the timeline
  // and the flame graph.
  const DiagnoseContext c(trace, /*with_averages=*/true);
  const Diagnosis d = internal::diagnose(c);
  const KernelsSummary ks = internal::kernel_stats(c);
  const std::vector<KernelHistogram> hists = kernel_histograms(c, ks, options);
  const internal::Timeline timeline = internal::build_timeline(c, d, options);
  const internal::FlameTree flame = internal::build_flame_tree(c, options);
  const internal::KernelNames names(trace);
  const internal::StepBars bars = internal::build_step_bars(c, d, options);
  const internal::CriticalPathView path = internal::build_critical_path_view(c, timeline, options);
  const MemoryInput mem_in = memory_input(trace, c.steps);
  MemoryOptions mem_options;
  mem_options.buckets = 300;
  mem_options.top = 5;
  const MemoryReport mem = analyze_memory(mem_in, mem_options);
  std::size_t mem_devices = 0;
  for (const MemoryDeviceView& v : mem.devices) mem_devices += v.records >= 2 ? 1 : 0;
  const std::string json =
      report_json(trace, c, d, hists, timeline, flame, bars, path, cmp, options, names, mem_in, mem);

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
    o += "<p><a id=\"perfetto-link\" href=\"" + html_escape(internal::perfetto_link(served_trace_url(options))) +
         "\" target=\"_blank\" rel=\"noopener\">Open the trace in Perfetto UI</a> (works while <code>tprof serve "
         "DIR</code> serves the trace's folder on 127.0.0.1:9001; serve is a separate command).</p>\n";
  }
  o += "</header>\n<main>\n";
  if (cmp != nullptr) append_compare_html(&o, *cmp, options);
  append_verdict_html(&o, trace, d, names);

  const std::size_t steps_drawn = bars.steps.size();
  o += "<section id=\"where\">\n<h2>Where the step went</h2>\n<p>";
  if (bars.device) {
    o += "One bar per step, as tall as the step on the device, as TensorBoard's overview counts it: from the later "
         "of the step's start and the end of the previous step's device work, to the later of its end and the end of "
         "the device work it launched. The bar splits that time into compute, communication and copies not hidden "
         "behind compute, and the GPU's idle time by what it waited on.";
    const bool backlog =
        std::any_of(bars.steps.begin(), bars.steps.end(), [](const internal::StepBar& b) { return b.lag_ns > 0; });
    o += backlog ? " The strip under the bars, on its own scale, is the launch backlog: how long the step's device "
                   "work ran on after the step ended on the host (it grows every step when the host runs ahead of "
                   "the device)."
                 : " No step's device work ran on past the step's end on the host: no launch backlog.";
    o += " The black tick is the CPU busy time of the step's thread.";
  } else {
    o += "One bar per step, as tall as the step: the time the step's thread was busy in recorded events "
         "(ops, annotations, Python functions) and the rest. The dashed tick is the time any CPU thread was busy in "
         "the step (work handed to other threads shows there).";
  }
  o += " Hover a bar for its numbers.";
  if (d.steps.size() > steps_drawn) o += " The first " + std::to_string(steps_drawn) + " steps are drawn.";
  o += "</p>\n<div id=\"steps-chart\" data-steps=\"" + std::to_string(steps_drawn) + "\"></div>\n</section>\n";
  append_critical_path_html(&o, path);

  append_causes_html(&o, trace, c, d, names, options);

  o += "<section>\n<h2>Timeline</h2>\n<p>" + std::to_string(timeline.lanes.size()) + " of " +
       std::to_string(timeline.lanes_total) +
       " lanes (CPU threads, then GPU streams); a bar is busy time, gaps shorter than about 1/" +
       std::to_string(options.timeline_resolution) +
       " of the trace merged; dashed lines are step boundaries. Triangles mark the events the root causes point at "
       "(numbered as the causes; close ones share a triangle). Wheel to zoom, drag to zoom into a range, double-click "
       "to reset. Zoomed in to a quarter of the trace or less, the CPU lanes open into their op nesting (the " +
       std::to_string(options.max_lane_nested_events) +
       " longest events of each lane, for the tooltips and Perfetto). Hover for names; click an event to keep it "
       "below with a link that opens the trace in Perfetto UI at that event." +
       std::string(path.segments.empty()
                       ? ""
                       : " The stripes under the bars and the outlined stretches are the steps' critical path, "
                         "coloured by bound type (see \"Critical path per step\"); the \"critical path\" box "
                         "turns them off.") +
       "</p>\n";
  o += "<div id=\"timeline\" data-lanes=\"" + std::to_string(timeline.lanes.size()) + "\" data-intervals=\"" +
       std::to_string(timeline.interval_count()) + "\" data-marks=\"" + std::to_string(timeline.marks.size()) +
       "\" data-steps=\"" + std::to_string(timeline.steps.size()) + "\" data-nested=\"" +
       std::to_string(timeline.nested_count()) + "\" data-critical=\"" +
       std::to_string(path.segments.size() - path.off_timeline) + "\"></div>\n</section>\n";

  o += "<section>\n<h2>CPU flame graph (host op tree)</h2>\n<p>Ops and record_function annotations nested per "
       "thread, merged by call path; width is total time. Nodes under " +
       fixed(options.flame_min_fraction * 100, 1) + "% of the whole are left out (" +
       std::to_string(flame.nodes.size()) + " of " + std::to_string(flame.nodes_total) +
       " nodes drawn). Click a node to zoom into it, click the top row to zoom out.</p>\n";
  o += "<div id=\"flame\" data-nodes=\"" + std::to_string(flame.nodes.size()) + "\"></div>\n</section>\n";

  o += "<section>\n<h2>Kernel durations</h2>\n<p>Duration histograms of the " + std::to_string(hists.size()) +
       " device activities with the most total time (" + std::to_string(options.histogram_bins) +
       " bins each; the solid line is the median, the dashed one the mean).</p>\n";
  o += "<div id=\"kernels-chart\" data-kernels=\"" + std::to_string(hists.size()) + "\"></div>\n</section>\n";

  if (mem_devices > 0) {
    o += "<section id=\"memory\">\n<h2>Memory</h2>\n<p>Allocated memory over time per device (the highest and "
         "lowest value in each of " +
         std::to_string(mem_options.buckets) +
         " slices of time), reserved where the trace records it; the dot is the peak. Hover for the op that "
         "reached each slice's highest value. <code>tprof memory</code> has the peak's live allocations with their "
         "Python stacks, each step's spike and growth, and the leak check (docs/memory.md).</p>\n";
    for (const MemoryDeviceView& v : mem.devices) {
      if (v.records < 2) continue;
      o += "<p>" + html_escape(v.label) + ": peak " + html_escape(format_memory_bytes(v.peak_bytes)) +
           (v.totals_recorded ? "" : " (a running sum: the trace records no totals)");
      if (!v.live_at_peak.empty()) {
        const MemoryGroup& g = v.live_at_peak.front();
        o += ", held most by " + html_escape((g.caller.empty() ? "" : g.caller + " > ") + (g.op.empty() ? "(no op)" : g.op)) +
             " (" + html_escape(format_memory_bytes(g.bytes)) + ")";
      }
      o += ".</p>\n";
    }
    o += "<div id=\"memory-chart\" data-devices=\"" + std::to_string(mem_devices) + "\"></div>\n</section>\n";
  }

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

}  // namespace

std::string format_report_html(const Trace& trace, const HtmlReportOptions& options) {
  return render_page(trace, options, nullptr);
}

std::string format_compare_report_html(const Trace& a, const Trace& b, const HtmlReportOptions& options) {
  const Comparison cmp = compare_traces(a, b);
  return render_page(b, options, &cmp);
}

}  // namespace tprof
