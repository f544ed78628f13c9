// diagnose output: text (verdict first, findings by impact), JSON (the
// stable contract of docs/diagnose.md), Markdown.
#include <cmath>
#include <cstdio>
#include <string>

#include "src/analyze/diagnose_context.h"
#include "src/base/json_writer.h"
#include "tprof/diagnose.h"

namespace tprof {

namespace {

using internal::format_ns;
using internal::format_pct;
using internal::JsonWriter;

double round2(double v) { return std::round(v * 100.0) / 100.0; }

std::string us_text(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", us);
  return buf;
}

void write_event(JsonWriter& w, const EventRef& e) {
  w.begin_object();
  w.key("name");
  w.value_string(e.name);
  w.key("lane");
  w.value_string(e.lane);
  w.key("ts_ns");
  w.value_int(e.ts_ns);
  w.key("dur_ns");
  w.value_int(e.dur_ns);
  if (e.step >= 0) {
    w.key("step");
    w.value_int(e.step);
  }
  w.end_object();
}

void write_evidence(JsonWriter& w, const Evidence& ev) {
  w.begin_object();
  for (const Evidence::Field& f : ev.fields()) {
    w.key(f.key);
    switch (f.kind) {
      case Evidence::Kind::kInt: w.value_int(f.i); break;
      case Evidence::Kind::kReal: w.value_double(std::isfinite(f.d) ? std::round(f.d * 1e4) / 1e4 : 0.0); break;
      case Evidence::Kind::kText: w.value_string(f.s); break;
      case Evidence::Kind::kEvent: write_event(w, f.events.front()); break;
      case Evidence::Kind::kEvents:
        w.begin_array();
        for (const EventRef& e : f.events) write_event(w, e);
        w.end_array();
        break;
      case Evidence::Kind::kInts:
        w.begin_array();
        for (std::int64_t v : f.ints) w.value_int(v);
        w.end_array();
        break;
      case Evidence::Kind::kTexts:
        w.begin_array();
        for (const std::string& s : f.texts) w.value_string(s);
        w.end_array();
        break;
    }
  }
  w.end_object();
}

// One evidence value in a line of text.
std::string evidence_value_text(const Evidence::Field& f) {
  auto ev_text = [](const EventRef& e) {
    std::string s = e.name + " @ " + e.lane + ", ts " + us_text(static_cast<double>(e.ts_ns) / 1e3) + " us";
    if (e.dur_ns > 0) s += ", " + format_ns(e.dur_ns);
    if (e.step >= 0) s += ", step " + std::to_string(e.step);
    return s;
  };
  switch (f.kind) {
    case Evidence::Kind::kInt: {
      auto ends = [&](std::string_view suffix) {
        return f.key.size() >= suffix.size() && f.key.compare(f.key.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      // Absolute times print as trace timestamps (µs, as Perfetto shows them), durations with a unit.
      if (ends("ts_ns") || ends("start_ns") || ends("end_ns")) return us_text(static_cast<double>(f.i) / 1e3) + " us";
      if (ends("_ns")) return format_ns(f.i);
      return std::to_string(f.i);
    }
    case Evidence::Kind::kReal: {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.4g", f.d);
      return buf;
    }
    case Evidence::Kind::kText: return f.s;
    case Evidence::Kind::kEvent: return ev_text(f.events.front());
    case Evidence::Kind::kEvents: {
      std::string s;
      for (std::size_t i = 0; i < f.events.size() && i < 5; ++i) s += "\n      - " + ev_text(f.events[i]);
      if (f.events.size() > 5) s += "\n      - ... " + std::to_string(f.events.size() - 5) + " more";
      return s;
    }
    case Evidence::Kind::kInts: {
      std::string s = "[";
      for (std::size_t i = 0; i < f.ints.size(); ++i) s += (i ? ", " : "") + std::to_string(f.ints[i]);
      return s + "]";
    }
    case Evidence::Kind::kTexts: {
      std::string s;
      for (std::size_t i = 0; i < f.texts.size(); ++i) s += (i ? ", " : "") + f.texts[i];
      return s;
    }
  }
  return "";
}

std::string offset_text(const std::optional<std::int64_t>& v) { return v ? format_ns(*v) : std::string("-"); }

}  // namespace

std::string format_diagnosis_text(const Trace& trace, const Diagnosis& d) {
  (void)trace;
  std::string out;
  out += "Verdict: " + std::string(verdict_name(d.verdict)) + "\n";
  out += "  " + d.summary + "\n";
  if (!d.support.empty()) {
    out += "  supported by:";
    for (std::size_t i = 0; i < d.support.size(); ++i) out += (i ? ", " : " ") + d.support[i];
    out += "\n";
  }
  if (!d.steps.empty()) {
    char line[256];
    out += "\nSteps\n";
    std::snprintf(line, sizeof line, "  %6s  %12s  %12s  %12s  %8s  %14s  %s\n", "step", "CPU span", "GPU busy", "GPU work",
                  "GPU idle", "launch->kernel", "verdict");
    out += line;
    for (const StepVerdict& v : d.steps) {
      std::snprintf(line, sizeof line, "  %6lld  %12s  %12s  %12s  %8s  %14s  %s\n", static_cast<long long>(v.step),
                    format_ns(v.cpu_span_ns).c_str(), format_ns(v.gpu_busy_ns).c_str(), format_ns(v.gpu_work_ns).c_str(),
                    format_pct(v.gpu_idle_pct).c_str(), offset_text(v.launch_offset_ns).c_str(),
                    std::string(verdict_name(v.verdict)).c_str());
      out += line;
    }
  }
  out += "\nFindings (" + std::to_string(d.findings.size()) + ", by impact)\n";
  if (d.findings.empty()) out += "  none\n";
  for (const Finding& f : d.findings) {
    out += "\n  [" + std::string(severity_name(f.severity)) + "] " + f.id + ": " + f.title + "\n";
    for (const Evidence::Field& e : f.evidence.fields()) out += "    " + e.key + ": " + evidence_value_text(e) + "\n";
    if (!f.advice.empty()) out += "    advice: " + f.advice + "\n";
  }
  const Breakdowns& b = d.breakdowns;
  if (b.tracelens_gpu_timeline) {
    const TracelensGpuTimeline& g = *b.tracelens_gpu_timeline;
    const double total = static_cast<double>(std::max<std::int64_t>(1, g.total_time_ns));
    auto pct = [&](std::int64_t v) { return format_pct(100.0 * static_cast<double>(v) / total); };
    out += "\nGPU timeline (TraceLens)\n";
    out += "  computation " + format_ns(g.computation_time_ns) + " (" + pct(g.computation_time_ns) + "), exposed comm " +
           format_ns(g.exposed_comm_time_ns) + " (" + pct(g.exposed_comm_time_ns) + "), exposed memcpy " +
           format_ns(g.exposed_memcpy_time_ns) + " (" + pct(g.exposed_memcpy_time_ns) + "), idle " +
           format_ns(g.idle_time_ns) + " (" + pct(g.idle_time_ns) + ") of " + format_ns(g.total_time_ns) + "\n";
  }
  // One line per rank: HTA's per-stream rows summed (JSON has each stream).
  for (std::size_t i = 0; i < b.hta_idle.size();) {
    const std::int64_t rank = b.hta_idle[i].rank;
    std::int64_t host = 0, kernel = 0, other = 0, streams = 0;
    for (; i < b.hta_idle.size() && b.hta_idle[i].rank == rank; ++i, ++streams) {
      host += b.hta_idle[i].host_wait_ns;
      kernel += b.hta_idle[i].kernel_wait_ns;
      other += b.hta_idle[i].other_ns;
    }
    out += "GPU idle causes (HTA), rank " + std::to_string(rank) + ", " + std::to_string(streams) +
           (streams == 1 ? " stream" : " streams") + ": host wait " + format_ns(host) + ", kernel wait " +
           format_ns(kernel) + ", other " + format_ns(other) + "\n";
  }
  return out;
}

std::string format_diagnosis_json(const Trace& trace, const Diagnosis& d) {
  (void)trace;
  std::string out;
  {
    JsonWriter w(&out, JsonWriter::kPretty);
    w.begin_object();
    w.key("verdict");
    w.value_string(verdict_name(d.verdict));
    w.key("summary");
    w.value_string(d.summary);
    w.key("verdict_evidence");
    write_evidence(w, d.verdict_evidence);
    w.key("support");
    w.begin_array();
    for (const std::string& id : d.support) w.value_string(id);
    w.end_array();
    w.key("steps");
    w.begin_array();
    for (const StepVerdict& v : d.steps) {
      w.begin_object();
      w.key("step");
      w.value_int(v.step);
      w.key("start_ns");
      w.value_int(v.start_ns);
      w.key("cpu_span_ns");
      w.value_int(v.cpu_span_ns);
      w.key("cpu_busy_ns");
      w.value_int(v.cpu_busy_ns);
      w.key("gpu_busy_ns");
      w.value_int(v.gpu_busy_ns);
      w.key("gpu_work_ns");
      w.value_int(v.gpu_work_ns);
      w.key("gpu_idle_pct");
      w.value_double(round2(v.gpu_idle_pct));
      w.key("launch_offset_ns");
      if (v.launch_offset_ns) {
        w.value_int(*v.launch_offset_ns);
      } else {
        w.value_null();
      }
      w.key("dataloader_ns");
      w.value_int(v.dataloader_ns);
      w.key("sync_ns");
      w.value_int(v.sync_ns);
      w.key("exposed_comm_ns");
      w.value_int(v.exposed_comm_ns);
      w.key("idle_launch_ns");
      w.value_int(v.idle_launch_ns);
      w.key("idle_host_ns");
      w.value_int(v.idle_host_ns);
      w.key("idle_queued_ns");
      w.value_int(v.idle_queued_ns);
      w.key("verdict");
      w.value_string(verdict_name(v.verdict));
      w.end_object();
    }
    w.end_array();
    w.key("findings");
    w.begin_array();
    for (const Finding& f : d.findings) {
      w.begin_object();
      w.key("id");
      w.value_string(f.id);
      w.key("severity");
      w.value_string(severity_name(f.severity));
      w.key("title");
      w.value_string(f.title);
      w.key("impact_ns");
      w.value_int(f.impact_ns);
      w.key("evidence");
      write_evidence(w, f.evidence);
      w.key("advice");
      w.value_string(f.advice);
      w.end_object();
    }
    w.end_array();
    w.key("breakdowns");
    w.begin_object();
    const Breakdowns& b = d.breakdowns;
    if (b.tracelens_gpu_timeline) {
      const TracelensGpuTimeline& g = *b.tracelens_gpu_timeline;
      w.key("tracelens_gpu_timeline");
      w.begin_object();
      const std::pair<const char*, std::int64_t> rows[] = {
          {"computation_time_ns", g.computation_time_ns}, {"exposed_comm_time_ns", g.exposed_comm_time_ns},
          {"exposed_memcpy_time_ns", g.exposed_memcpy_time_ns}, {"busy_time_ns", g.busy_time_ns},
          {"idle_time_ns", g.idle_time_ns}, {"total_time_ns", g.total_time_ns},
          {"total_comm_time_ns", g.total_comm_time_ns}, {"total_memcpy_time_ns", g.total_memcpy_time_ns}};
      for (const auto& [k, v] : rows) {
        w.key(k);
        w.value_int(v);
      }
      w.end_object();
    }
    w.key("hta_temporal");
    w.begin_array();
    for (const HtaTemporal& h : b.hta_temporal) {
      w.begin_object();
      w.key("rank");
      w.value_int(h.rank);
      w.key("kernel_time_ns");
      w.value_int(h.kernel_time_ns);
      w.key("idle_time_ns");
      w.value_int(h.idle_time_ns);
      w.key("compute_time_ns");
      w.value_int(h.compute_time_ns);
      w.key("non_compute_time_ns");
      w.value_int(h.non_compute_time_ns);
      w.end_object();
    }
    w.end_array();
    w.key("hta_idle");
    w.begin_array();
    for (const HtaIdle& h : b.hta_idle) {
      w.begin_object();
      w.key("rank");
      w.value_int(h.rank);
      w.key("stream");
      w.value_int(h.stream);
      w.key("host_wait_ns");
      w.value_int(h.host_wait_ns);
      w.key("kernel_wait_ns");
      w.value_int(h.kernel_wait_ns);
      w.key("other_ns");
      w.value_int(h.other_ns);
      w.end_object();
    }
    w.end_array();
    w.key("tb_plugin_steps");
    w.begin_array();
    for (const TbPluginStep& s : b.tb_plugin_steps) {
      w.begin_object();
      w.key("step");
      w.value_int(s.step);
      const std::pair<const char*, double> rows[] = {{"kernel_us", s.kernel_us},         {"memcpy_us", s.memcpy_us},
                                                     {"memset_us", s.memset_us},         {"runtime_us", s.runtime_us},
                                                     {"dataloader_us", s.dataloader_us}, {"cpu_exec_us", s.cpu_exec_us},
                                                     {"other_us", s.other_us},                 {"communication_us", s.communication_us}};
      for (const auto& [k, v] : rows) {
        w.key(k);
        w.value_double(std::round(v * 1000.0) / 1000.0);
      }
      w.end_object();
    }
    w.end_array();
    w.end_object();
    w.end_object();
  }
  out.push_back('\n');
  return out;
}

std::string format_diagnosis_md(const Trace& trace, const Diagnosis& d) {
  (void)trace;
  std::string out = "# tprof diagnose\n\n**Verdict: " + std::string(verdict_name(d.verdict)) + "** — " + d.summary + "\n";
  if (!d.steps.empty()) {
    out += "\n## Steps\n\n| step | CPU span | GPU busy | GPU work | GPU idle | launch→kernel | verdict |\n";
    out += "|---:|---:|---:|---:|---:|---:|---|\n";
    for (const StepVerdict& v : d.steps) {
      out += "| " + std::to_string(v.step) + " | " + format_ns(v.cpu_span_ns) + " | " + format_ns(v.gpu_busy_ns) + " | " +
             format_ns(v.gpu_work_ns) + " | " + format_pct(v.gpu_idle_pct) + " | " + offset_text(v.launch_offset_ns) +
             " | " + std::string(verdict_name(v.verdict)) + " |\n";
    }
  }
  out += "\n## Findings\n";
  if (d.findings.empty()) out += "\nNone.\n";
  for (const Finding& f : d.findings) {
    out += "\n### `" + f.id + "` (" + std::string(severity_name(f.severity)) + "): " + f.title + "\n\n";
    for (const Evidence::Field& e : f.evidence.fields()) {
      std::string v = evidence_value_text(e);
      for (std::size_t p = v.find("\n      - "); p != std::string::npos; p = v.find("\n      - ", p)) {
        v.replace(p, 9, "\n  - ");
      }
      out += "- " + e.key + ": " + v + "\n";
    }
    if (!f.advice.empty()) out += "\n" + f.advice + "\n";
  }
  return out;
}

}  // namespace tprof
