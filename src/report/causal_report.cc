// tprof critical-path and tprof whatif output (include/tprof/causal_report.h).
#include "tprof/causal_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/base/json_writer.h"
#include "src/base/safe_text.h"

namespace tprof {
namespace {

using internal::format_ns;
constexpr int kBounds = static_cast<int>(BoundType::kCount_);

std::string pct(std::int64_t part, std::int64_t whole) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return b;
}

std::string signed_pct(std::int64_t now, std::int64_t was) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", was > 0 ? 100.0 * static_cast<double>(now - was) / static_cast<double>(was) : 0.0);
  return b;
}

std::string pad(std::string s, std::size_t w, bool right = true) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

std::string cut(std::string_view s, std::size_t n) {
  std::string out = internal::safe_text(s);
  if (out.size() > n) out = out.substr(0, n - 3) + "...";
  return out;
}

// Time on the paths per (event name, edge type), largest first.
struct Top {
  std::string name;
  EdgeType type;
  std::int64_t ns;
};
std::vector<Top> top_events(const Trace& t, const std::vector<const CriticalPath*>& paths, std::size_t n) {
  std::map<std::pair<std::string, int>, std::int64_t> by;
  for (const CriticalPath* p : paths)
    for (const PathSegment& s : p->segments) {
      const std::string name = s.event == kNoIndex ? "(no event: host time between events)" : std::string(t.name(s.event));
      by[{name, static_cast<int>(s.type)}] += s.dur_ns;
    }
  std::vector<Top> out;
  for (const auto& [k, v] : by) out.push_back({k.first, static_cast<EdgeType>(k.second), v});
  std::sort(out.begin(), out.end(), [](const Top& a, const Top& b) { return a.ns != b.ns ? a.ns > b.ns : a.name < b.name; });
  if (out.size() > n) out.resize(n);
  return out;
}

struct Totals {
  std::array<std::int64_t, kBounds> bound{};
  std::int64_t unexplained = 0, length = 0;
};
Totals totals(const std::vector<const CriticalPath*>& paths) {
  Totals x;
  for (const CriticalPath* p : paths) {
    for (int b = 0; b < kBounds; ++b) x.bound[static_cast<std::size_t>(b)] += p->bound_ns[static_cast<std::size_t>(b)];
    x.unexplained += p->unexplained_ns;
    x.length += p->length_ns();
  }
  return x;
}

std::vector<const CriticalPath*> chosen(const CausalResult& r, const CausalReportOptions& o) {
  std::vector<const CriticalPath*> v;
  if (o.window) {
    v.push_back(&*o.window);
  } else if (o.step) {
    v.push_back(&r.steps[*o.step].path);
  } else {
    for (const StepTime& s : r.steps) v.push_back(&s.path);
  }
  return v;
}

std::string step_label(const CausalResult& r, std::size_t i) {
  return r.steps[i].step >= 0 ? std::to_string(r.steps[i].step) : r.has_steps ? "?" : "window";
}

void json_path(internal::JsonWriter& w, const Trace& t, const CriticalPath& p, bool segments) {
  w.begin_object();
  w.key("start_ns");
  w.value_int(p.start_ns);
  w.key("length_ns");
  w.value_int(p.length_ns());
  w.key("unexplained_ns");
  w.value_int(p.unexplained_ns);
  w.key("bound_ns");
  w.begin_object();
  for (int b = 0; b < kBounds; ++b) {
    w.key(bound_type_name(static_cast<BoundType>(b)));
    w.value_int(p.bound_ns[static_cast<std::size_t>(b)]);
  }
  w.end_object();
  if (segments) {
    w.key("segments");
    w.begin_array();
    for (const PathSegment& s : p.segments) {
      w.begin_object();
      w.key("event");
      if (s.event == kNoIndex) w.value_null(); else w.value_string(t.name(s.event));
      w.key("type");
      w.value_string(edge_type_name(s.type));
      w.key("bound");
      w.value_string(bound_type_name(s.bound));
      w.key("start_ns");
      w.value_int(s.start_ns);
      w.key("dur_ns");
      w.value_int(s.dur_ns);
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
}

// A step's times and path: {"step", "measured_ns", "replayed_ns"
// [, "predicted_ns"], "path"}.
void json_step(internal::JsonWriter& w, const Trace& t, const StepTime& s, bool predicted, bool segments) {
  w.begin_object();
  w.key("step");
  w.value_int(s.step);
  w.key("measured_ns");
  w.value_int(s.measured_ns);
  w.key("replayed_ns");
  w.value_int(s.replayed_ns);
  if (predicted) {
    w.key("predicted_ns");
    w.value_int(s.predicted_ns);
  }
  w.key("path");
  json_path(w, t, s.path, segments);
  w.end_object();
}

void json_graph(internal::JsonWriter& w, const CausalGraph& g) {
  w.key("graph");
  w.begin_object();
  w.key("nodes");
  w.value_uint(g.nodes());
  w.key("edges");
  w.value_uint(g.edges.size());
  w.key("edges_by_type");
  w.begin_object();
  for (int e = 0; e < static_cast<int>(EdgeType::kCount_); ++e) {
    w.key(edge_type_name(static_cast<EdgeType>(e)));
    w.value_uint(g.edges_by_type[static_cast<std::size_t>(e)]);
  }
  w.end_object();
  w.key("skipped_edges");
  w.value_uint(g.skipped_edges);
  w.key("launch_latency_ns");
  w.value_int(g.launch_latency_ns);
  w.key("stream_gap_ns");
  w.value_int(g.stream_gap_ns);
  w.key("sync_return_ns");
  w.value_int(g.sync_return_ns);
  w.end_object();
}

void json_top(internal::JsonWriter& w, const std::vector<Top>& top) {
  w.key("top_events");
  w.begin_array();
  for (const Top& x : top) {
    w.begin_object();
    w.key("name");
    w.value_string(x.name);
    w.key("type");
    w.value_string(edge_type_name(x.type));
    w.key("ns");
    w.value_int(x.ns);
    w.end_object();
  }
  w.end_array();
}

// The shares table and the top events, as text or Markdown lines.
void shares_text(std::string& out, const Trace& t, const std::vector<const CriticalPath*>& paths, std::size_t top_n,
                 bool md) {
  const Totals x = totals(paths);
  if (md) {
    out += "| bound type | time | share |\n|---|---:|---:|\n";
  } else {
    out += "  " + pad("bound type", 26, false) + pad("time", 12) + pad("share", 9) + "\n";
  }
  for (int b = 0; b < kBounds; ++b) {
    const std::int64_t v = x.bound[static_cast<std::size_t>(b)];
    const std::string name(bound_type_name(static_cast<BoundType>(b)));
    if (md) out += "| " + name + " | " + format_ns(v) + " | " + pct(v, x.length) + " |\n";
    else out += "  " + pad(name, 26, false) + pad(format_ns(v), 12) + pad(pct(v, x.length), 9) + "\n";
  }
  if (x.unexplained > 0) {
    const std::string name = "unexplained";
    if (md) out += "| " + name + " | " + format_ns(x.unexplained) + " | " + pct(x.unexplained, x.length) + " |\n";
    else out += "  " + pad(name, 26, false) + pad(format_ns(x.unexplained), 12) + pad(pct(x.unexplained, x.length), 9) + "\n";
  }
  const std::vector<Top> top = top_events(t, paths, top_n);
  if (top.empty()) return;
  out += md ? "\n**Events with most time on the path**\n\n| event | edge | time | share |\n|---|---|---:|---:|\n"
            : "\n  Events with most time on the path:\n";
  for (const Top& e : top) {
    if (md) {
      std::string n = internal::safe_text(e.name);
      std::string esc;
      for (char c : n) esc += c == '|' ? std::string("\\|") : std::string(1, c);
      out += "| " + esc + " | " + std::string(edge_type_name(e.type)) + " | " + format_ns(e.ns) + " | " +
             pct(e.ns, x.length) + " |\n";
    } else {
      out += "  " + pad(cut(e.name, 60), 62, false) + pad(std::string(edge_type_name(e.type)), 12, false) +
             pad(format_ns(e.ns), 12) + pad(pct(e.ns, x.length), 8) + "\n";
    }
  }
}

}  // namespace

std::string format_critical_path(const Trace& t, const CausalResult& r, const CausalReportOptions& o) {
  const std::vector<const CriticalPath*> paths = chosen(r, o);
  const bool detail = o.step.has_value() || o.window.has_value();
  std::string out;
  if (o.format == "json") {
    internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
    w.begin_object();
    if (o.window) {
      w.key("window");
      w.value_string(o.window_label);
      w.key("path");
      json_path(w, t, *o.window, true);
    } else {
      w.key("steps");
      w.begin_array();
      for (std::size_t i = 0; i < r.steps.size(); ++i) {
        if (o.step && *o.step != i) continue;
        json_step(w, t, r.steps[i], false, detail);
      }
      w.end_array();
    }
    json_top(w, top_events(t, paths, o.top));
    json_graph(w, *r.graph);
    w.end_object();
    out += "\n";
    return out;
  }
  const bool md = o.format == "md";
  const Totals x = totals(paths);
  std::string what = o.window ? o.window_label
                     : o.step ? "step " + step_label(r, *o.step)
                     : r.has_steps ? std::to_string(r.steps.size()) + " steps"
                                   : "the whole trace (no steps)";
  out += (md ? "## Critical path: " : "Critical path: ") + what + ", " + format_ns(x.length) + "\n\n";
  if (!detail && r.has_steps) {
    if (md) {
      out += "| step | time | cpu | gpu compute | gpu comm | launch | kernel-kernel | data loading |\n"
             "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    } else {
      out += "  " + pad("step", 8) + pad("time", 12) + pad("cpu", 8) + pad("gpu", 8) + pad("comm", 8) + pad("launch", 8) +
             pad("k-k", 8) + pad("data", 8) + "\n";
    }
    for (std::size_t i = 0; i < r.steps.size(); ++i) {
      const CriticalPath& p = r.steps[i].path;
      std::vector<std::string> cells = {step_label(r, i), format_ns(p.length_ns())};
      for (int b = 0; b < kBounds; ++b) cells.push_back(pct(p.bound_ns[static_cast<std::size_t>(b)], p.length_ns()));
      if (md) {
        out += "|";
        for (const std::string& c : cells) out += " " + c + " |";
        out += "\n";
      } else {
        out += "  " + pad(cells[0], 8) + pad(cells[1], 12);
        for (std::size_t c = 2; c < cells.size(); ++c) out += pad(cells[c], 8);
        out += "\n";
      }
    }
    out += "\n";
  }
  shares_text(out, t, paths, o.top, md);
  if (detail) {
    const CriticalPath& p = *paths.front();
    out += md ? "\n**The path, oldest first** (long stretches)\n\n" : "\n  The path, oldest first (stretches of 1% or more):\n";
    for (const PathSegment& s : p.segments) {
      if (s.dur_ns * 100 < p.length_ns()) continue;
      const std::string name = s.event == kNoIndex ? "(host time between events)" : cut(t.name(s.event), 60);
      out += (md ? "- " : "    ") + pad(format_ns(s.start_ns - p.start_ns), 11) + "  +" + pad(format_ns(s.dur_ns), 11, false) +
             " " + pad(std::string(edge_type_name(s.type)), 12, false) + name + "\n";
    }
  }
  const CausalGraph& g = *r.graph;
  out += std::string(md ? "\n" : "\n  ") + "Graph: " + std::to_string(g.nodes()) + " nodes, " +
         std::to_string(g.edges.size()) + " edges";
  if (g.skipped_edges > 0) out += ", " + std::to_string(g.skipped_edges) + " left out (source after target: clock skew)";
  out += "\n";
  return out;
}

std::string format_whatif(const Trace& t, const CausalResult& r, const CausalReportOptions& o) {
  std::string out;
  if (o.format == "json") {
    internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
    w.begin_object();
    w.key("steps");
    w.begin_array();
    for (const StepTime& s : r.steps) json_step(w, t, s, true, false);
    w.end_array();
    w.key("total");
    w.begin_object();
    w.key("measured_ns");
    w.value_int(r.measured_ns);
    w.key("replayed_ns");
    w.value_int(r.replayed_ns);
    w.key("predicted_ns");
    w.value_int(r.predicted_ns);
    w.end_object();
    w.key("matched");
    w.begin_array();
    for (std::uint64_t m : r.matched) w.value_uint(m);
    w.end_array();
    std::vector<const CriticalPath*> paths;
    for (const StepTime& s : r.steps) paths.push_back(&s.path);
    json_top(w, top_events(t, paths, o.top));
    json_graph(w, *r.graph);
    w.end_object();
    out += "\n";
    return out;
  }
  const bool md = o.format == "md";
  out += md ? "## What if\n\n" : "What if\n\n";
  if (md) {
    out += "| step | measured | replayed | predicted | change |\n|---:|---:|---:|---:|---:|\n";
  } else {
    out += "  " + pad("step", 8) + pad("measured", 13) + pad("replayed", 13) + pad("predicted", 13) + pad("change", 9) + "\n";
  }
  auto row = [&](const std::string& label, std::int64_t m, std::int64_t rp, std::int64_t p) {
    if (md) out += "| " + label + " | " + format_ns(m) + " | " + format_ns(rp) + " | " + format_ns(p) + " | " + signed_pct(p, rp) + " |\n";
    else out += "  " + pad(label, 8) + pad(format_ns(m), 13) + pad(format_ns(rp), 13) + pad(format_ns(p), 13) + pad(signed_pct(p, rp), 9) + "\n";
  };
  for (std::size_t i = 0; i < r.steps.size(); ++i)
    row(step_label(r, i), r.steps[i].measured_ns, r.steps[i].replayed_ns, r.steps[i].predicted_ns);
  row("total", r.measured_ns, r.replayed_ns, r.predicted_ns);
  // How far the unedited replay is from the trace.
  std::vector<double> err;
  for (const StepTime& s : r.steps)
    if (s.measured_ns > 0)
      err.push_back(100.0 * std::abs(static_cast<double>(s.replayed_ns - s.measured_ns)) / static_cast<double>(s.measured_ns));
  std::sort(err.begin(), err.end());
  if (!err.empty()) {
    char b[128];
    std::snprintf(b, sizeof b, "replay error without edits: median %.2f%%, max %.2f%% per step", err[err.size() / 2],
                  err.back());
    out += std::string(md ? "\n" : "\n  ") + b + "\n";
  }
  out += md ? "\n### Critical path after the edits\n\n" : "\n  Critical path after the edits:\n";
  std::vector<const CriticalPath*> paths;
  for (const StepTime& s : r.steps) paths.push_back(&s.path);
  shares_text(out, t, paths, o.top, md);
  return out;
}

}  // namespace tprof
