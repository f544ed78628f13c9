// Text, Markdown, JSON and (for two jobs) HTML forms of tprof::Comparison (tprof/compare.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <iterator>
#include <tuple>
#include <utility>
#include <vector>

#include "src/analyze/ranks_collectives.h"
#include "src/base/json_writer.h"
#include "src/base/saturate.h"
#include "src/report/html_job_page.h"
#include "src/report/kernel_names.h"
#include "src/report/py_format.h"
#include "tprof/compare.h"

namespace tprof {

namespace {

constexpr std::size_t kNameWidth = 55;

// `sign` then `s` (appending: GCC 12 warns wrongly about "x" + std::string&&).
std::string with_sign(char sign, const std::string& s) {
  std::string out(1, sign);
  out += s;
  return out;
}
// "1.234ms"; negative durations keep their sign.
std::string t(std::int64_t ns) {
  // |ns| in unsigned arithmetic: a saturated delta may be INT64_MIN.
  const std::uint64_t abs_ns = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  const std::string mag = internal::format_time_us(static_cast<double>(abs_ns) / 1000.0);
  return ns < 0 ? with_sign('-', mag) : mag;
}
// "+1.234ms", "-2.000us", "0.000us".
std::string signed_t(std::int64_t ns) { return ns > 0 ? with_sign('+', t(ns)) : t(ns); }
// The change in percent of A's median; "n/a %" when A's median is 0.
std::string pct_of(double pct, std::int64_t a_median_ns);
std::string signed_pct(double pct) {
  const std::string s = internal::fixed(pct, 1) + "%";
  return pct > 0 && s != "0.0%" ? with_sign('+', s) : s;
}
std::string pct_of(double pct, std::int64_t a_median_ns) {
  return a_median_ns == 0 ? std::string("n/a %") : signed_pct(pct);
}
// A threshold as given, without trailing zeros: 5 -> "5", 2.5 -> "2.5".
std::string plain_number(double v) {
  std::string s = internal::fixed(v, 3);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}
std::string per_step(double v) { return internal::fixed(v, 2); }

std::string_view change_mark(ChangeKind k) {
  switch (k) {
    case ChangeKind::kNew: return "new";
    case ChangeKind::kVanished: return "vanished";
    case ChangeKind::kCommon: break;
  }
  return "";
}

std::size_t shown(std::size_t n, const CompareFormat& f) { return f.top == 0 ? n : std::min(n, f.top); }

// Several runs on a side: the comparison is over runs (docs/compare.md, "Runs").
bool over_runs(const Comparison& c) { return c.a.runs.size() > 1 || c.b.runs.size() > 1; }

// "2 runs of 20, 20 steps".
std::string runs_of(const CompareSide& s) {
  std::string out = std::to_string(s.runs.size()) + (s.runs.size() == 1 ? " run of " : " runs of ");
  for (std::size_t i = 0; i < s.runs.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s.runs[i].total_steps);
  }
  return out + " steps";
}

std::string alignment_text_over_runs(const Comparison& c) {
  const std::string sides = "A " + runs_of(c.a) + ", B " + runs_of(c.b);
  switch (c.alignment) {
    case StepAlignment::kStepNumber:
      return std::to_string(c.a.steps_per_run()) + " aligned by step number in every run (" + sides + ")";
    case StepAlignment::kOrder:
      return std::to_string(c.a.steps_per_run()) + " aligned by order in every run (" + sides +
             "; step numbers differ)";
    case StepAlignment::kWholeTrace: break;
  }
  const char* who = !c.a.has_steps && !c.b.has_steps ? "runs of both sides have" : !c.a.has_steps ? "a run of A has"
                                                                                                   : "a run of B has";
  return std::string("whole traces compared, one per run (") + who + " no ProfilerStep#N events)";
}

std::string alignment_text(const Comparison& c) {
  if (over_runs(c)) return alignment_text_over_runs(c);
  const std::size_t n = c.a.dur_ns.size();
  switch (c.alignment) {
    case StepAlignment::kStepNumber:
      return std::to_string(n) + " aligned by step number (A has " + std::to_string(c.a.total_steps) + ", B has " +
             std::to_string(c.b.total_steps) + ")";
    case StepAlignment::kOrder:
      return std::to_string(n) + " aligned by order (A has " + std::to_string(c.a.total_steps) + ", B has " +
             std::to_string(c.b.total_steps) + "; step numbers differ)";
    case StepAlignment::kWholeTrace: break;
  }
  const char* who = !c.a.has_steps && !c.b.has_steps ? "neither trace has" : !c.a.has_steps ? "A has no" : "B has no";
  return std::string("whole traces compared (") + who + " ProfilerStep#N events)";
}

std::string_view metric_label(CompareMetric m) {
  switch (m) {
    case CompareMetric::kDevice: return "device time";
    case CompareMetric::kCpu: return "CPU busy";
    case CompareMetric::kSteady: return "step cost";
    case CompareMetric::kStep:
    case CompareMetric::kAuto: break;
  }
  return "step time";
}

// "+3.4% [+1.2%, +5.0%]"; "n/a %" when A's mean is 0.
std::string change_with_interval(const MetricComparison& m) {
  std::string s = pct_of(m.delta_pct, m.mean_a_ns);
  if (m.has_interval && m.mean_a_ns > 0) s += " [" + signed_pct(m.low_pct) + ", " + signed_pct(m.high_pct) + "]";
  return s;
}

// "B slower, beyond the noise": the interval of the change excludes 0.
std::string metric_verdict(const MetricComparison& m) {
  if (m.mean_b_ns == m.mean_a_ns && (!m.has_interval || (m.low_ns == 0 && m.high_ns == 0))) return "no change";
  const char* dir = m.mean_b_ns > m.mean_a_ns ? "B slower" : m.mean_b_ns < m.mean_a_ns ? "B faster" : "B even";
  if (!m.has_interval) return std::string(dir) + ", noise unknown (one step per side)";
  return std::string(dir) + (m.beyond_noise() ? ", beyond the noise" : ", within the noise");
}

// What the interval covers over runs: whose between-run noise is in it.
std::string between_runs_text(const Comparison& c) {
  const std::size_t ra = c.a.runs.size(), rb = c.b.runs.size();
  if (ra > 1 && rb > 1) return "it covers the noise between runs and between steps";
  return std::string("it covers ") + (ra > 1 ? "A" : "B") + "'s noise between runs; " + (ra > 1 ? "B" : "A") +
         " has one run, so its between-run noise is unknown";
}

std::string sampling_text(const Comparison& c) {
  const MetricComparison& m = c.metrics.front();
  if (over_runs(c)) {
    const std::size_t n = c.a.steps_per_run();
    const std::string steps = std::to_string(n) + (n == 1 ? " step" : " steps");
    if (c.paired_runs) {
      return "hierarchical bootstrap over paired runs: " + std::to_string(c.a.runs.size()) +
             " pairs (run i of A with run i of B) resampled, then " + steps + " within each" +
             (m.paired ? " (paired by number)" : "") + "; " + between_runs_text(c);
    }
    return "hierarchical bootstrap: A's " + std::to_string(c.a.runs.size()) + " and B's " +
           std::to_string(c.b.runs.size()) + (c.b.runs.size() == 1 ? " run" : " runs") +
           " resampled, then " + steps + " within each; " + between_runs_text(c);
  }
  return std::string(m.paired ? "paired" : "unpaired") + " bootstrap over " + std::to_string(m.steps) +
         (m.steps == 1 ? " step" : " steps");
}

// The environment line's note on the between-run noise.
std::string environment_note(const Comparison& c) {
  if (!over_runs(c)) return "with one run a side the between-run noise is unknown: compare several runs a side";
  return "compared over runs: " + between_runs_text(c);
}

std::string setup_text(const RunSetup& s) {
  std::string out = s.device.empty() ? (s.device_count > 0 ? "GPU (no deviceProperties)" : "no device") : s.device;
  if (s.device_count > 0) out += " ×" + std::to_string(s.device_count);
  if (s.world_size > 0) out += ", world size " + std::to_string(s.world_size);
  if (!s.dtype.empty()) out += ", " + s.dtype;
  return out;
}

std::string file_name(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A run's name: its label's file name, else "run N".
std::string run_name(const CompareSide& s, std::size_t i) {
  return s.runs[i].label.empty() ? "run " + std::to_string(i + 1) : file_name(s.runs[i].label);
}

template <class Row>
std::vector<std::string> names_with(const std::vector<Row>& rows, ChangeKind k) {
  std::vector<std::string> out;
  for (const Row& r : rows) {
    if (r.change == k) out.push_back(r.name);
  }
  return out;
}

// Kernel names as this view prints them: unique, at most the name column's
// width unless two kernels need more to differ (src/report/kernel_names.h).
internal::KernelNames kernel_names(const Comparison& c) {
  std::vector<std::string_view> names;
  for (const KernelDelta& k : c.kernels) names.push_back(k.name);
  return internal::KernelNames(names, kNameWidth);
}

// Op names the same way: the identifying start and end kept, the middle
// elided, two ops never printed alike.
internal::KernelNames op_names(const Comparison& c) {
  std::vector<std::string_view> names;
  for (const OpDelta& o : c.ops) names.push_back(o.name);
  return internal::KernelNames::plain(names, kNameWidth);
}

std::vector<std::string> view_names(std::vector<std::string> names, const internal::KernelNames& view) {
  for (std::string& n : names) n = view.get(n);
  return names;
}

// "a, b, c and 4 more" (at most `limit` names; 0: all), as given (the
// view's names: already shortened).
std::string name_list(const std::vector<std::string>& names, std::size_t limit, bool code) {
  std::string out;
  const std::size_t n = limit == 0 ? names.size() : std::min(limit, names.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    const std::string& name = names[i];
    if (code) {
      std::string escaped;
      for (const char ch : name) escaped += ch == '`' ? '\'' : ch;
      out += "`" + escaped + "`";
    } else {
      out += name;
    }
  }
  if (n < names.size()) out += " and " + std::to_string(names.size() - n) + " more";
  return out;
}

// A text table: right-aligned columns but the first (left).
void text_table(std::string* out, const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> w(head.size(), 0);
  for (std::size_t i = 0; i < head.size(); ++i) w[i] = internal::py_len(head[i]);
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], internal::py_len(r[i]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i) l += "  ";
      if (i == 0) {
        internal::append_left(&l, cells[i], w[i]);
      } else {
        internal::append_right(&l, cells[i], w[i]);
      }
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    *out += l + "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);
}

std::vector<std::vector<std::string>> op_rows(const Comparison& c, const CompareFormat& f, bool md) {
  std::vector<std::vector<std::string>> rows;
  const internal::KernelNames names = op_names(c);
  for (std::size_t i = 0; i < shown(c.ops.size(), f); ++i) {
    const OpDelta& o = c.ops[i];
    std::string name = names.get(o.name);
    if (md) name = name_list({name}, 0, true);
    // The side an op is absent from shows "-", not a time of 0.
    const bool in_a = o.change != ChangeKind::kNew, in_b = o.change != ChangeKind::kVanished;
    rows.push_back({name, std::string(change_mark(o.change)), in_a ? t(o.self_cpu_a_ns) : "-",
                    in_b ? t(o.self_cpu_b_ns) : "-", signed_t(o.self_cpu_delta_ns()),
                    in_a ? t(o.cpu_total_a_ns) : "-", in_b ? t(o.cpu_total_b_ns) : "-",
                    signed_t(o.cpu_total_delta_ns()), in_a ? per_step(o.calls_a) : "-",
                    in_b ? per_step(o.calls_b) : "-"});
  }
  return rows;
}

std::vector<std::vector<std::string>> kernel_rows(const Comparison& c, const CompareFormat& f, bool md) {
  std::vector<std::vector<std::string>> rows;
  const internal::KernelNames names = kernel_names(c);
  for (std::size_t i = 0; i < shown(c.kernels.size(), f); ++i) {
    const KernelDelta& k = c.kernels[i];
    std::string name = names.get(k.name);
    if (md) name = name_list({name}, 0, true);
    const bool in_a = k.change != ChangeKind::kNew, in_b = k.change != ChangeKind::kVanished;
    rows.push_back({name, k.category, std::string(change_mark(k.change)), in_a ? t(k.time_a_ns) : "-",
                    in_b ? t(k.time_b_ns) : "-", signed_t(k.time_delta_ns()), in_a ? per_step(k.count_a) : "-",
                    in_b ? per_step(k.count_b) : "-"});
  }
  return rows;
}

// Each run's mean per aligned step of a metric (empty when it is not measured).
std::vector<std::int64_t> run_means(const CompareSide& s, const std::vector<std::int64_t>& v) {
  std::vector<std::int64_t> out;
  const std::size_t n = s.steps_per_run();
  if (v.empty() || n == 0) return out;
  for (std::size_t r = 0; r < s.runs.size(); ++r) {
    double sum = 0;
    for (std::size_t j = 0; j < n; ++j) sum += static_cast<double>(v[r * n + j]);
    out.push_back(static_cast<std::int64_t>(std::llround(sum / static_cast<double>(n))));
  }
  return out;
}

// The runs table: per run, its steps, each measured metric's mean per
// aligned step and its verdict. `md` quotes the names as code.
std::vector<std::vector<std::string>> run_rows(const Comparison& c, bool md, std::vector<std::string>* head) {
  *head = {"Run", "Steps"};
  std::vector<const MetricComparison*> shown_metrics;
  for (const MetricComparison& m : c.metrics) {
    if (!m.available) continue;
    shown_metrics.push_back(&m);
    head->push_back(std::string(metric_label(m.metric)));
  }
  head->push_back("Verdict");
  std::vector<std::vector<std::string>> rows;
  for (const auto& [side, name] : {std::pair{&c.a, "A"}, std::pair{&c.b, "B"}}) {
    std::vector<std::vector<std::int64_t>> means;
    for (const MetricComparison* m : shown_metrics) {
      means.push_back(run_means(*side, m->metric == CompareMetric::kSteady   ? side->steady_ns
                                       : m->metric == CompareMetric::kDevice ? side->device_ns
                                       : m->metric == CompareMetric::kCpu    ? side->cpu_ns
                                                                             : side->dur_ns));
    }
    for (std::size_t r = 0; r < side->runs.size(); ++r) {
      std::string run = run_name(*side, r);
      if (md) run = name_list({run}, 0, true);
      std::vector<std::string> row = {std::string(name) + " " + run, std::to_string(side->runs[r].total_steps)};
      for (const std::vector<std::int64_t>& v : means) row.push_back(r < v.size() ? t(v[r]) : "-");
      row.push_back(std::string(verdict_name(side->runs[r].verdict)));
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

const std::vector<std::string> kOpHead = {"Op",          "Change",      "Self CPU A", "Self CPU B", "Delta",
                                          "CPU total A", "CPU total B", "Delta",      "Calls A",    "Calls B"};
const std::vector<std::string> kKernelHead = {"Device activity", "Category", "Change",  "Time A",
                                              "Time B",          "Delta",    "Count A", "Count B"};

// The metric table's rows (text): "* " marks the gate's metric.
std::vector<std::vector<std::string>> metric_rows(const Comparison& c) {
  std::vector<std::vector<std::string>> rows;
  for (const MetricComparison& m : c.metrics) {
    if (!m.available) continue;
    rows.push_back({std::string(m.metric == c.bound_metric ? "* " : "  ") + std::string(metric_label(m.metric)),
                    t(m.mean_a_ns), t(m.mean_b_ns), change_with_interval(m), metric_verdict(m)});
  }
  return rows;
}

// The Markdown summary's rows on steps and metrics: steps (with how they
// align), the median step, the spread, each metric's mean (the gate's in bold).
void md_step_rows(const Comparison& c, const std::string& alignment, std::vector<std::vector<std::string>>* rows) {
  rows->push_back({"steps", std::to_string(c.a.total_steps), std::to_string(c.b.total_steps), alignment});
  rows->push_back({"median step", t(c.a.median_step_ns), t(c.b.median_step_ns),
                   signed_t(c.delta_ns) + " (" + pct_of(c.delta_pct, c.a.median_step_ns) + ")"});
  rows->push_back({"spread (MAD)", t(c.a.mad_ns), t(c.b.mad_ns), ""});
  for (const MetricComparison& m : c.metrics) {
    if (!m.available) continue;
    const bool bound = m.metric == c.bound_metric;
    std::string change = change_with_interval(m) + ": " + metric_verdict(m);
    if (bound) change = "**" + change + "**";
    rows->push_back({"mean " + std::string(metric_label(m.metric)) + (bound ? " (the gate's metric)" : ""),
                     t(m.mean_a_ns), t(m.mean_b_ns), change});
  }
}

std::string per_what(const Comparison& c) {
  return c.alignment == StepAlignment::kWholeTrace ? "whole trace" : "median per step";
}

}  // namespace

namespace {

std::string_view gate_outcome_text(const GateResult& g) {
  return g.outcome == GateOutcome::kPass ? "PASS" : g.outcome == GateOutcome::kFail ? "FAIL" : "REFUSED";
}

// The gate's decision after its outcome: "B's mean step cost is ... (not
// slower)"; every format prints it after its own prefix.
std::string gate_reason(const GateResult& g) {
  const MetricComparison& m = g.m;
  std::string s = "B's mean " + std::string(metric_label(g.metric)) +
                  (g.metric == CompareMetric::kStep || g.metric == CompareMetric::kSteady ? "" : " per step");
  if (m.available) {
    s += " is " + change_with_interval(m) + " (" + signed_t(internal::sat_sub(m.mean_b_ns, m.mean_a_ns)) +
         ") against A's";
  }
  s += " [" + g.metric_reason + "]";
  if (m.over_runs()) {
    s += "; over runs (A " + std::to_string(m.runs_a) + ", B " + std::to_string(m.runs_b) +
         (m.paired_runs ? ", paired" : "") + ")";
  }
  if (g.outcome == GateOutcome::kRefused) return s + "; not gated: " + g.refusal;
  s += "; limit +" + plain_number(g.max_slower_pct) + "%";
  if (m.over_runs() && g.basis.rfind("fewer than", 0) != 0) {
    // Over runs, all of the interval must clear the limit.
    if (g.outcome == GateOutcome::kFail) {
      s += m.has_interval ? " (the interval's low end is above the limit: slower than the limit beyond the noise "
                            "of runs and steps)"
                          : " (slower beyond the limit; noise unknown)";
    } else if (m.mean_b_ns <= m.mean_a_ns) {
      s += " (not slower)";
    } else {
      s += !g.over_threshold ? " (within the limit)" : " (within the noise: the interval's low end is not above the limit)";
    }
  } else if (g.outcome == GateOutcome::kFail) {
    s += m.has_interval ? " (slower beyond the limit and the noise)" : " (slower beyond the limit; noise unknown)";
  } else if (m.mean_b_ns <= m.mean_a_ns) {
    s += " (not slower)";
  } else {
    s += !g.over_threshold ? " (within the limit)" : " (within the noise: the interval reaches 0)";
  }
  if (!g.basis.empty()) s += "; " + g.basis;
  return s;
}

}  // namespace

std::string format_gate_line(const GateResult& g) {
  return "compare gate: " + std::string(gate_outcome_text(g)) + ": " + gate_reason(g) + "\n";
}

std::string format_comparison_text(const Comparison& c, const CompareFormat& f, const GateResult* gate) {
  std::string out;
  if (gate != nullptr) out += "gate: " + std::string(gate_outcome_text(*gate)) + ": " + gate_reason(*gate) + "\n\n";
  const bool runs = over_runs(c);
  const auto side_label = [&](const std::string& label, const CompareSide& s) {
    return runs ? label + " (" + std::to_string(s.runs.size()) + (s.runs.size() == 1 ? " run)" : " runs)") : label;
  };
  out += "A: " + side_label(f.label_a, c.a) + "\n";
  out += "B: " + side_label(f.label_b, c.b) + "\n";
  out += "steps:        " + alignment_text(c) + "\n";
  out += "median step:  A " + t(c.a.median_step_ns) + "  B " + t(c.b.median_step_ns) + "  delta " +
         signed_t(c.delta_ns) + " (" + pct_of(c.delta_pct, c.a.median_step_ns) + ")\n";
  out += "spread:       MAD of step times A " + t(c.a.mad_ns) + ", B " + t(c.b.mad_ns) + "; range A " +
         t(c.a.min_step_ns) + ".." + t(c.a.max_step_ns) + ", B " + t(c.b.min_step_ns) + ".." + t(c.b.max_step_ns) +
         "\n";
  out += "\nPer step, mean of B against A with its 95% interval (" + sampling_text(c) + "):\n";
  text_table(&out, {"  metric", "A", "B", "change", ""}, metric_rows(c));
  out += "* the gate's metric: " + std::string(metric_label(c.bound_metric)) + ", " + c.bound_reason +
         " (--metric chooses another)\n";
  if (runs) {
    out += "\nRuns, mean per aligned step:\n";
    std::vector<std::string> head;
    const std::vector<std::vector<std::string>> rows = run_rows(c, false, &head);
    text_table(&out, head, rows);
  }
  out += "\nset-up:       A " + setup_text(c.a.setup) + "\n              B " + setup_text(c.b.setup) + "\n";
  for (const std::string& d : c.setup_differences) out += "  differs:    " + d + "\n";
  for (const std::string& d : c.setup_unknown) out += "  one side:   " + d + "\n";
  if (!c.environment_change.empty()) {
    out += "environment:  " + c.environment_change + " (" + environment_note(c) + ")\n";
  }
  out += "verdict:      A " + std::string(verdict_name(c.a.verdict)) + ", B " + std::string(verdict_name(c.b.verdict)) +
         (c.verdict_changed ? " (changed)" : " (unchanged)") + "\n";

  out += "\nHost ops, " + per_what(c) + " (" +
         (f.top == 0 || c.ops.size() <= f.top ? "all " + std::to_string(c.ops.size())
                                              : "top " + std::to_string(f.top) + " of " + std::to_string(c.ops.size())) +
         " by |Self CPU delta|):\n";
  if (c.ops.empty()) {
    out += "  none\n";
  } else {
    text_table(&out, kOpHead, op_rows(c, f, false));
  }
  const internal::KernelNames op_view = op_names(c);
  const std::vector<std::string> new_ops = view_names(names_with(c.ops, ChangeKind::kNew), op_view);
  const std::vector<std::string> gone_ops = view_names(names_with(c.ops, ChangeKind::kVanished), op_view);
  if (!new_ops.empty()) {
    out += "new ops (" + std::to_string(new_ops.size()) + "): " + name_list(new_ops, f.top, false) + "\n";
  }
  if (!gone_ops.empty()) {
    out += "vanished ops (" + std::to_string(gone_ops.size()) + "): " + name_list(gone_ops, f.top, false) + "\n";
  }

  if (c.kernels.empty()) {
    out += "\nDevice activities: none in either trace\n";
    return out;
  }
  out += "\nDevice activities, " + per_what(c) + " (" +
         (f.top == 0 || c.kernels.size() <= f.top
              ? "all " + std::to_string(c.kernels.size())
              : "top " + std::to_string(f.top) + " of " + std::to_string(c.kernels.size())) +
         " by |time delta|):\n";
  text_table(&out, kKernelHead, kernel_rows(c, f, false));
  const internal::KernelNames view = kernel_names(c);
  const std::vector<std::string> new_k = view_names(names_with(c.kernels, ChangeKind::kNew), view);
  const std::vector<std::string> gone_k = view_names(names_with(c.kernels, ChangeKind::kVanished), view);
  if (!new_k.empty()) out += "new device activities (" + std::to_string(new_k.size()) + "): " + name_list(new_k, f.top, false) + "\n";
  if (!gone_k.empty()) {
    out += "vanished device activities (" + std::to_string(gone_k.size()) + "): " + name_list(gone_k, f.top, false) + "\n";
  }
  return out;
}

namespace {

std::string md_cell(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    if (ch == '|') out += '\\';
    if (ch == '\n') {
      out += ' ';
      continue;
    }
    out += ch;
  }
  return out;
}

void md_table(std::string* out, const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
              std::size_t left_columns) {
  auto line = [&](const std::vector<std::string>& cells) {
    *out += "|";
    for (const std::string& cell : cells) {
      *out += ' ';
      *out += md_cell(cell);
      *out += " |";
    }
    *out += "\n";
  };
  line(head);
  *out += "|";
  for (std::size_t i = 0; i < head.size(); ++i) *out += i < left_columns ? "---|" : "---:|";
  *out += "\n";
  for (const auto& r : rows) line(r);
}

}  // namespace

std::string format_comparison_md(const Comparison& c, const CompareFormat& f, const GateResult* gate) {
  std::string out = "### tprof compare\n\n";
  if (gate != nullptr) out += "**Gate: " + std::string(gate_outcome_text(*gate)) + "** " + gate_reason(*gate) + "\n\n";
  const bool runs = over_runs(c);
  out += "- A: " + name_list({f.label_a}, 0, true) + "\n- B: " + name_list({f.label_b}, 0, true) + "\n\n";
  std::vector<std::vector<std::string>> summary = {
      {"trace", name_list({file_name(f.label_a)}, 0, true), name_list({file_name(f.label_b)}, 0, true), ""}};
  md_step_rows(c, alignment_text(c), &summary);
  summary.push_back({"set-up", setup_text(c.a.setup), setup_text(c.b.setup),
                     c.setup_differences.empty() ? "same" : "**differs**"});
  summary.push_back({"verdict", std::string(verdict_name(c.a.verdict)), std::string(verdict_name(c.b.verdict)),
                     c.verdict_changed ? "changed" : "unchanged"});
  if (runs) {
    summary.insert(summary.begin() + 1, {"runs", std::to_string(c.a.runs.size()), std::to_string(c.b.runs.size()),
                                         c.paired_runs ? "paired (run i of A with run i of B)" : ""});
  }
  md_table(&out, {"", "A", "B", "B vs A"}, summary, 1);
  out += "\nMeans per step with their 95% interval (" + sampling_text(c) + "); the gate reads " +
         std::string(metric_label(c.bound_metric)) + ", " + c.bound_reason + ".\n";
  for (const std::string& d : c.setup_differences) out += "- set-up differs: " + d + "\n";
  for (const std::string& d : c.setup_unknown) out += "- set-up known on one side only: " + d + "\n";
  if (!c.environment_change.empty()) {
    out += "- environment: " + c.environment_change + (runs ? " (" + environment_note(c) + ")" : "") + "\n";
  }
  if (runs) {
    out += "\n**Runs**, mean per aligned step\n\n";
    std::vector<std::string> head;
    const std::vector<std::vector<std::string>> rows = run_rows(c, true, &head);
    md_table(&out, head, rows, 1);
  }

  out += "\n**Host ops**, " + per_what(c) + ", top " + std::to_string(shown(c.ops.size(), f)) + " of " +
         std::to_string(c.ops.size()) + " by |Self CPU delta|\n\n";
  if (!c.ops.empty()) {
    md_table(&out, kOpHead, op_rows(c, f, true), 2);
  }
  const internal::KernelNames op_view = op_names(c);
  const std::vector<std::string> new_ops = view_names(names_with(c.ops, ChangeKind::kNew), op_view);
  const std::vector<std::string> gone_ops = view_names(names_with(c.ops, ChangeKind::kVanished), op_view);
  if (!new_ops.empty() || !gone_ops.empty()) out += "\n";
  if (!new_ops.empty()) out += "- new ops: " + name_list(new_ops, f.top, true) + "\n";
  if (!gone_ops.empty()) out += "- vanished ops: " + name_list(gone_ops, f.top, true) + "\n";

  if (!c.kernels.empty()) {
    out += "\n**Device activities**, " + per_what(c) + ", top " + std::to_string(shown(c.kernels.size(), f)) +
           " of " + std::to_string(c.kernels.size()) + " by |time delta|\n\n";
    md_table(&out, kKernelHead, kernel_rows(c, f, true), 3);
    const internal::KernelNames view = kernel_names(c);
    const std::vector<std::string> new_k = view_names(names_with(c.kernels, ChangeKind::kNew), view);
    const std::vector<std::string> gone_k = view_names(names_with(c.kernels, ChangeKind::kVanished), view);
    if (!new_k.empty() || !gone_k.empty()) out += "\n";
    if (!new_k.empty()) out += "- new device activities: " + name_list(new_k, f.top, true) + "\n";
    if (!gone_k.empty()) out += "- vanished device activities: " + name_list(gone_k, f.top, true) + "\n";
  }
  return out;
}

namespace {

double round_to(double v, double scale) { return std::round(v * scale) / scale; }

void write_side(internal::JsonWriter& w, const CompareSide& s, const std::string& label) {
  w.begin_object();
  w.key("trace");
  w.value_string(label);
  w.key("has_steps");
  w.value_bool(s.has_steps);
  w.key("total_steps");
  w.value_uint(s.total_steps);
  w.key("aligned_steps");
  w.value_uint(s.dur_ns.size());
  w.key("median_step_ns");
  w.value_int(s.median_step_ns);
  w.key("mad_ns");
  w.value_int(s.mad_ns);
  w.key("min_step_ns");
  w.value_int(s.min_step_ns);
  w.key("max_step_ns");
  w.value_int(s.max_step_ns);
  w.key("verdict");
  w.value_string(verdict_name(s.verdict));
  w.key("verdict_summary");
  w.value_string(s.verdict_summary);
  w.key("gpu_bound");
  w.value_bool(s.gpu_bound);
  w.key("setup");
  w.begin_object();
  w.key("device");
  w.value_string(s.setup.device);
  w.key("device_count");
  w.value_int(s.setup.device_count);
  w.key("world_size");
  w.value_int(s.setup.world_size);
  w.key("dtype");
  w.value_string(s.setup.dtype);
  w.end_object();
  w.end_object();
}

void write_metric(internal::JsonWriter& w, const MetricComparison& m) {
  w.begin_object();
  w.key("metric");
  w.value_string(compare_metric_name(m.metric));
  w.key("available");
  w.value_bool(m.available);
  w.key("steps");
  w.value_uint(m.steps);
  w.key("paired");
  w.value_bool(m.paired);
  w.key("mean_a_ns");
  w.value_int(m.mean_a_ns);
  w.key("mean_b_ns");
  w.value_int(m.mean_b_ns);
  w.key("median_a_ns");
  w.value_int(m.median_a_ns);
  w.key("median_b_ns");
  w.value_int(m.median_b_ns);
  w.key("delta_pct");
  w.value_double(round_to(m.delta_pct, 100.0));
  w.key("has_interval");
  w.value_bool(m.has_interval);
  w.key("low_pct");
  w.value_double(round_to(m.low_pct, 100.0));
  w.key("high_pct");
  w.value_double(round_to(m.high_pct, 100.0));
  w.key("low_ns");
  w.value_int(m.low_ns);
  w.key("high_ns");
  w.value_int(m.high_ns);
  w.key("beyond_noise");
  w.value_bool(m.beyond_noise());
  w.end_object();
}

// Over runs only: how the interval was drawn and each run's figures.
void write_runs(internal::JsonWriter& w, const Comparison& c) {
  w.key("runs");
  w.begin_object();
  w.key("paired");
  w.value_bool(c.paired_runs);
  w.key("interval");
  w.value_string(sampling_text(c));
  for (const auto& [side, key] : {std::pair{&c.a, "a"}, std::pair{&c.b, "b"}}) {
    w.key(key);
    w.begin_array();
    const std::size_t n = side->steps_per_run();
    const std::vector<std::int64_t> steady = run_means(*side, side->steady_ns);
    const std::vector<std::int64_t> step = run_means(*side, side->dur_ns);
    const std::vector<std::int64_t> device = run_means(*side, side->device_ns);
    const std::vector<std::int64_t> cpu = run_means(*side, side->cpu_ns);
    for (std::size_t r = 0; r < side->runs.size(); ++r) {
      const CompareRunInfo& run = side->runs[r];
      w.begin_object();
      w.key("trace");
      w.value_string(run.label.empty() ? "run " + std::to_string(r + 1) : run.label);
      w.key("has_steps");
      w.value_bool(run.has_steps);
      w.key("total_steps");
      w.value_uint(run.total_steps);
      w.key("verdict");
      w.value_string(verdict_name(run.verdict));
      // Means per aligned step; -1 when the metric is not measured.
      w.key("steady_ns");
      w.value_int(r < steady.size() ? steady[r] : -1);
      w.key("step_ns");
      w.value_int(r < step.size() ? step[r] : -1);
      w.key("device_ns");
      w.value_int(r < device.size() ? device[r] : -1);
      w.key("cpu_ns");
      w.value_int(r < cpu.size() ? cpu[r] : -1);
      w.key("aligned");
      w.begin_array();
      for (std::size_t j = 0; j < n; ++j) {
        w.begin_object();
        w.key("step");
        w.value_int(side->step[r * n + j]);
        w.key("dur_ns");
        w.value_int(side->dur_ns[r * n + j]);
        w.end_object();
      }
      w.end_array();
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
}

template <class Row>
void write_names(internal::JsonWriter& w, const std::vector<Row>& rows, ChangeKind k) {
  w.begin_array();
  for (const Row& r : rows) {
    if (r.change == k) w.value_string(r.name);
  }
  w.end_array();
}

// "steps" (the aligned pairs, when `pairs`) and "median_step".
void write_steps(internal::JsonWriter& w, const Comparison& c, bool pairs) {
  w.key("steps");
  w.begin_array();
  for (std::size_t i = 0; pairs && i < c.a.dur_ns.size() && i < c.b.dur_ns.size(); ++i) {
    w.begin_object();
    w.key("step_a");
    w.value_int(c.a.step[i]);
    w.key("step_b");
    w.value_int(c.b.step[i]);
    w.key("dur_a_ns");
    w.value_int(c.a.dur_ns[i]);
    w.key("dur_b_ns");
    w.value_int(c.b.dur_ns[i]);
    w.key("delta_ns");
    w.value_int(internal::sat_sub(c.b.dur_ns[i], c.a.dur_ns[i]));
    w.end_object();
  }
  w.end_array();
  w.key("median_step");
  w.begin_object();
  w.key("a_ns");
  w.value_int(c.a.median_step_ns);
  w.key("b_ns");
  w.value_int(c.b.median_step_ns);
  w.key("delta_ns");
  w.value_int(c.delta_ns);
  w.key("delta_pct");
  w.value_double(round_to(c.delta_pct, 100.0));
  w.key("noise_ns");
  w.value_int(c.noise_ns);
  w.key("beyond_noise");
  w.value_bool(std::llabs(c.delta_ns) > c.noise_ns);
  w.end_object();
}

void write_gate(internal::JsonWriter& w, const GateResult& g) {
  w.key("gate");
  w.begin_object();
  w.key("outcome");
  w.value_string(gate_outcome_name(g.outcome));
  w.key("metric");
  w.value_string(compare_metric_name(g.metric));
  w.key("metric_reason");
  w.value_string(g.metric_reason);
  w.key("min_steps");
  w.value_uint(g.min_steps);
  w.key("refusal");
  w.value_string(g.refusal);
  w.key("max_slower_pct");
  w.value_double(g.max_slower_pct);
  w.key("passed");
  w.value_bool(g.passed);
  w.key("over_threshold");
  w.value_bool(g.over_threshold);
  w.key("over_noise");
  w.value_bool(g.over_noise);
  w.key("basis");
  w.value_string(g.basis);
  if (g.m.over_runs()) {
    w.key("low_over_limit");
    w.value_bool(g.low_over_limit);
  }
  w.end_object();
}

}  // namespace

std::string format_comparison_json(const Comparison& c, const CompareFormat& f, const GateResult* gate) {
  std::string out;
  {
    internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
    w.begin_object();
    w.key("a");
    write_side(w, c.a, f.label_a);
    w.key("b");
    write_side(w, c.b, f.label_b);
    w.key("alignment");
    w.value_string(step_alignment_name(c.alignment));
    const bool runs = over_runs(c);
    if (runs) write_runs(w, c);
    // Over runs the steps are not paired across the sides: each run lists its own.
    write_steps(w, c, !runs);
    w.key("metrics");
    w.begin_array();
    for (const MetricComparison& m : c.metrics) write_metric(w, m);
    w.end_array();
    w.key("bound_metric");
    w.value_string(compare_metric_name(c.bound_metric));
    w.key("bound_reason");
    w.value_string(c.bound_reason);
    w.key("setup_differences");
    w.begin_array();
    for (const std::string& d : c.setup_differences) w.value_string(d);
    w.end_array();
    w.key("setup_unknown");
    w.begin_array();
    for (const std::string& d : c.setup_unknown) w.value_string(d);
    w.end_array();
    w.key("environment_change");
    w.value_string(c.environment_change);
    w.key("verdict_changed");
    w.value_bool(c.verdict_changed);
    w.key("ops");
    w.begin_array();
    for (const OpDelta& o : c.ops) {
      w.begin_object();
      w.key("name");
      w.value_string(o.name);
      w.key("change");
      w.value_string(change_kind_name(o.change));
      w.key("self_cpu_a_ns");
      w.value_int(o.self_cpu_a_ns);
      w.key("self_cpu_b_ns");
      w.value_int(o.self_cpu_b_ns);
      w.key("self_cpu_delta_ns");
      w.value_int(o.self_cpu_delta_ns());
      w.key("cpu_total_a_ns");
      w.value_int(o.cpu_total_a_ns);
      w.key("cpu_total_b_ns");
      w.value_int(o.cpu_total_b_ns);
      w.key("cpu_total_delta_ns");
      w.value_int(o.cpu_total_delta_ns());
      w.key("calls_per_step_a");
      w.value_double(round_to(o.calls_a, 1e4));
      w.key("calls_per_step_b");
      w.value_double(round_to(o.calls_b, 1e4));
      w.end_object();
    }
    w.end_array();
    w.key("kernels");
    w.begin_array();
    for (const KernelDelta& k : c.kernels) {
      w.begin_object();
      w.key("name");
      w.value_string(k.name);
      w.key("category");
      w.value_string(k.category);
      w.key("change");
      w.value_string(change_kind_name(k.change));
      w.key("time_a_ns");
      w.value_int(k.time_a_ns);
      w.key("time_b_ns");
      w.value_int(k.time_b_ns);
      w.key("time_delta_ns");
      w.value_int(k.time_delta_ns());
      w.key("count_per_step_a");
      w.value_double(round_to(k.count_a, 1e4));
      w.key("count_per_step_b");
      w.value_double(round_to(k.count_b, 1e4));
      w.end_object();
    }
    w.end_array();
    w.key("new_ops");
    write_names(w, c.ops, ChangeKind::kNew);
    w.key("vanished_ops");
    write_names(w, c.ops, ChangeKind::kVanished);
    w.key("new_kernels");
    write_names(w, c.kernels, ChangeKind::kNew);
    w.key("vanished_kernels");
    write_names(w, c.kernels, ChangeKind::kVanished);
    if (gate != nullptr) write_gate(w, *gate);
    w.end_object();
  }
  out.push_back('\n');
  return out;
}

// ---- Two jobs (docs/compare.md, "Jobs") ----

namespace {

std::string ranks_text(std::int64_t n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

// "24 aligned by step number (A has 24, B has 24); a job step is the median over its ranks".
std::string job_alignment_text(const Comparison& c) {
  const std::string median = "; a job step is the median over its ranks";
  const std::size_t n = c.a.dur_ns.size();
  switch (c.alignment) {
    case StepAlignment::kStepNumber:
      return std::to_string(n) + " aligned by step number (of the steps every rank has: A " +
             std::to_string(c.a.total_steps) + ", B " + std::to_string(c.b.total_steps) + ")" + median;
    case StepAlignment::kOrder:
      return std::to_string(n) + " aligned by order (of the steps every rank has: A " + std::to_string(c.a.total_steps) +
             ", B " + std::to_string(c.b.total_steps) + "; step numbers differ)" + median;
    case StepAlignment::kWholeTrace: break;
  }
  const char* who = !c.a.has_steps && !c.b.has_steps ? "neither job's ranks have" : !c.a.has_steps ? "A's ranks have no"
                                                                                                   : "B's ranks have no";
  return std::string("whole traces compared (") + who + " ProfilerStep#N events); a job's trace is the median over " +
         "its ranks of their spans";
}

std::string job_setup_text(const JobSide& j, const CompareSide& s) {
  std::string out = ranks_text(j.ranks);
  out += s.setup.device_count == j.ranks ? ", each with device activity"
                                         : " (" + std::to_string(s.setup.device_count) + " with device activity)";
  if (j.world_size > 0) out += ", world size " + std::to_string(j.world_size);
  return out;
}

// "8 compute-bound" or "7 compute-bound, 1 input-bound".
std::string verdicts_text(const JobSide& j) {
  std::string out;
  for (const auto& [v, n] : j.verdicts) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(verdict_name(v));
  return out.empty() ? "none" : out;
}

// A named straggler in one line: who, what it costs the others, why.
std::string straggler_text(const Straggler& s) {
  std::string out = "rank " + std::to_string(s.rank) + ": the others wait " + t(s.wait_per_step_ns) +
                    (s.steps > 0 ? " per step" : "") + " (" + internal::fixed(s.wait_pct, 1) + "% of the step) at " +
                    s.collective;
  if (!s.before.empty()) {
    out += "; before arriving, " + s.before.front().what + " " + signed_t(s.before.front().excess_per_step_ns) +
           " per step against the others";
  }
  if (s.late_at_window_start > 0) out += "; late before its window begins";
  return out;
}

std::vector<std::string> straggler_lines(const JobSide& j) {
  std::vector<std::string> out;
  for (const Straggler& s : j.stragglers) out.push_back(straggler_text(s));
  return out;
}

std::string suspects_text(const JobSide& j) {
  if (j.slow_transfer_groups == 0) return "none";
  std::string out = std::to_string(j.slow_transfer_groups) + " slow transfer group" +
                    (j.slow_transfer_groups == 1 ? "" : "s");
  if (!j.slow_link_suspects.empty()) {
    out += j.slow_link_suspects.size() == 1 ? "; suspect rank " : "; suspect ranks ";
    for (std::size_t i = 0; i < j.slow_link_suspects.size(); ++i) {
      out += (i ? ", " : "") + std::to_string(j.slow_link_suspects[i]);
    }
  }
  return out;
}

// The critical path across ranks in a few words: its length per step and
// the rank holding most of it, with that rank's largest part.
std::string path_text(const JobSide& j) {
  const CrossRankPath& p = j.critical_path;
  if (p.steps == 0 || p.per_step_ns <= 0) return "none (no collective matched)";
  const std::vector<std::pair<std::int64_t, std::int64_t>> by_rank = internal::path_by_rank(p);
  std::string out = t(p.per_step_ns) + " per step";
  // How much of those steps it covers (docs/scale.md): a short path is a partial one.
  if (p.step_pct > 0) out += " (" + internal::fixed(p.step_pct, 1) + "% of the steps)";
  if (by_rank.empty()) return out + ", all transfers";
  const auto& [top, ns] = by_rank.front();
  const double share = 100.0 * static_cast<double>(ns) / static_cast<double>(p.per_step_ns);
  out += ", rank " + std::to_string(top) + " holds " + internal::fixed(share, 1) + "%";
  for (const PathPart& x : p.parts) {
    if (x.rank == top) return out + " (most: " + x.what + " " + t(x.per_step_ns) + ")";
  }
  return out;
}

// Which stragglers appear, stay or go from A to B.
std::string straggler_change(const JobComparison& j) {
  std::vector<std::int64_t> ra, rb;
  for (const Straggler& s : j.a.stragglers) ra.push_back(s.rank);
  for (const Straggler& s : j.b.stragglers) rb.push_back(s.rank);
  std::sort(ra.begin(), ra.end());
  std::sort(rb.begin(), rb.end());
  std::vector<std::int64_t> added, gone, kept;
  std::set_difference(rb.begin(), rb.end(), ra.begin(), ra.end(), std::back_inserter(added));
  std::set_difference(ra.begin(), ra.end(), rb.begin(), rb.end(), std::back_inserter(gone));
  std::set_intersection(ra.begin(), ra.end(), rb.begin(), rb.end(), std::back_inserter(kept));
  const auto list = [](const std::vector<std::int64_t>& v) {
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
    return out;
  };
  std::vector<std::string> parts;
  if (!added.empty()) parts.push_back("new in B: rank" + std::string(added.size() == 1 ? " " : "s ") + list(added));
  if (!gone.empty()) parts.push_back("gone in B: rank" + std::string(gone.size() == 1 ? " " : "s ") + list(gone));
  if (!kept.empty()) parts.push_back("on both: rank" + std::string(kept.size() == 1 ? " " : "s ") + list(kept));
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out.empty() ? "none on either side" : out;
}

std::string rank_metric_text(const JobComparison& j) {
  return "mean " + std::string(metric_label(j.rank_metric)) + " per aligned step";
}

std::vector<std::vector<std::string>> phase_rows(const JobComparison& j) {
  std::vector<std::vector<std::string>> rows;
  for (const JobPhaseDelta& p : j.phases) {
    const std::int64_t d = internal::sat_sub(p.mean_b_ns, p.mean_a_ns);
    const double pct = p.mean_a_ns > 0 ? 100.0 * static_cast<double>(d) / static_cast<double>(p.mean_a_ns) : 0.0;
    rows.push_back({"  " + p.phase, t(p.mean_a_ns), t(p.mean_b_ns), signed_t(d), pct_of(pct, p.mean_a_ns)});
  }
  return rows;
}

std::vector<std::vector<std::string>> job_rank_rows(const JobComparison& j, const CompareFormat& f) {
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < shown(j.ranks.size(), f); ++i) {
    const JobRankDelta& r = j.ranks[i];
    const bool both = r.change == ChangeKind::kCommon;
    const double pct = both && r.mean_a_ns > 0
                           ? 100.0 * static_cast<double>(r.delta_ns()) / static_cast<double>(r.mean_a_ns)
                           : 0.0;
    rows.push_back({"  " + std::to_string(r.rank), r.change == ChangeKind::kNew ? "-" : t(r.mean_a_ns),
                    r.change == ChangeKind::kVanished ? "-" : t(r.mean_b_ns), both ? signed_t(r.delta_ns()) : "",
                    both ? pct_of(pct, r.mean_a_ns) : std::string(change_mark(r.change))});
  }
  return rows;
}

std::string job_sampling_text(const Comparison& c) {
  return sampling_text(c) + "; one job a side: the noise between jobs is unknown";
}

}  // namespace

std::string format_job_comparison_text(const JobComparison& j, const CompareFormat& f, const GateResult* gate) {
  const Comparison& c = j.c;
  std::string out;
  if (gate != nullptr) out += "gate: " + std::string(gate_outcome_text(*gate)) + ": " + gate_reason(*gate) + "\n\n";
  out += "A: " + f.label_a + " (a job of " + ranks_text(j.a.ranks) + ")\n";
  out += "B: " + f.label_b + " (a job of " + ranks_text(j.b.ranks) + ")\n";
  out += "steps:        " + job_alignment_text(c) + "\n";
  out += "median step:  A " + t(c.a.median_step_ns) + "  B " + t(c.b.median_step_ns) + "  delta " +
         signed_t(c.delta_ns) + " (" + pct_of(c.delta_pct, c.a.median_step_ns) + ")\n";
  out += "spread:       MAD of job step times A " + t(c.a.mad_ns) + ", B " + t(c.b.mad_ns) + "; range A " +
         t(c.a.min_step_ns) + ".." + t(c.a.max_step_ns) + ", B " + t(c.b.min_step_ns) + ".." + t(c.b.max_step_ns) +
         "\n";
  out += "\nPer job step, mean of B against A with its 95% interval (" + job_sampling_text(c) + "):\n";
  text_table(&out, {"  metric", "A", "B", "change", ""}, metric_rows(c));
  out += "* the gate's metric: " + std::string(metric_label(c.bound_metric)) + ", " + c.bound_reason +
         " (--metric chooses another)\n";
  if (!j.phases.empty()) {
    out += "\nPhases of the job step (the median over ranks), mean per aligned step:\n";
    text_table(&out, {"  phase", "A", "B", "delta", "change"}, phase_rows(j));
  }
  out += "\nset-up:       A " + job_setup_text(j.a, c.a) + "\n              B " + job_setup_text(j.b, c.b) + "\n";
  for (const std::string& d : c.setup_differences) out += "  differs:    " + d + "\n";
  out += "verdicts:     A " + verdicts_text(j.a) + "\n              B " + verdicts_text(j.b) + "\n";
  out += "stragglers:   " + straggler_change(j) + "\n";
  for (const auto& [side, name] : {std::pair{&j.a, "A"}, std::pair{&j.b, "B"}}) {
    for (const std::string& line : straggler_lines(*side)) out += "  " + std::string(name) + " " + line + "\n";
  }
  if (j.a.slow_transfer_groups > 0 || j.b.slow_transfer_groups > 0) {
    out += "slow links:   A " + suspects_text(j.a) + "; B " + suspects_text(j.b) + "\n";
  }
  out += "critical path across ranks: A " + path_text(j.a) + "\n                            B " + path_text(j.b) + "\n";
  out += "\nRanks, " + rank_metric_text(j) + " (" +
         (f.top == 0 || j.ranks.size() <= f.top ? "all " + std::to_string(j.ranks.size())
                                                : "top " + std::to_string(f.top) + " of " + std::to_string(j.ranks.size())) +
         " by |delta|):\n";
  text_table(&out, {"  rank", "A", "B", "delta", "change"}, job_rank_rows(j, f));
  return out;
}

std::string format_job_comparison_md(const JobComparison& j, const CompareFormat& f, const GateResult* gate) {
  const Comparison& c = j.c;
  std::string out = "### tprof compare (jobs)\n\n";
  if (gate != nullptr) out += "**Gate: " + std::string(gate_outcome_text(*gate)) + "** " + gate_reason(*gate) + "\n\n";
  out += "- A: " + name_list({f.label_a}, 0, true) + ", a job of " + ranks_text(j.a.ranks) + "\n- B: " +
         name_list({f.label_b}, 0, true) + ", a job of " + ranks_text(j.b.ranks) + "\n\n";
  std::vector<std::vector<std::string>> summary;
  md_step_rows(c, job_alignment_text(c), &summary);
  for (const std::vector<std::string>& p : phase_rows(j)) {
    summary.push_back({"mean " + p[0].substr(2), p[1], p[2], p[3] + " (" + p[4] + ")"});
  }
  summary.push_back({"set-up", job_setup_text(j.a, c.a), job_setup_text(j.b, c.b),
                     c.setup_differences.empty() ? "same" : "**differs**"});
  summary.push_back({"verdicts", verdicts_text(j.a), verdicts_text(j.b), c.verdict_changed ? "changed" : "unchanged"});
  summary.push_back({"stragglers", std::to_string(j.a.stragglers.size()), std::to_string(j.b.stragglers.size()),
                     straggler_change(j)});
  if (j.a.slow_transfer_groups > 0 || j.b.slow_transfer_groups > 0) {
    summary.push_back({"slow links", suspects_text(j.a), suspects_text(j.b), ""});
  }
  summary.push_back({"critical path across ranks", path_text(j.a), path_text(j.b), ""});
  md_table(&out, {"", "A", "B", "B vs A"}, summary, 1);
  out += "\nMeans per job step with their 95% interval (" + job_sampling_text(c) + "); the gate reads " +
         std::string(metric_label(c.bound_metric)) + ", " + c.bound_reason + ".\n";
  for (const std::string& d : c.setup_differences) out += "- set-up differs: " + d + "\n";
  for (const auto& [side, name] : {std::pair{&j.a, "A"}, std::pair{&j.b, "B"}}) {
    for (const std::string& line : straggler_lines(*side)) out += "- " + std::string(name) + "'s straggler " + line + "\n";
  }
  out += "\n**Ranks**, " + rank_metric_text(j) + ", top " + std::to_string(shown(j.ranks.size(), f)) + " of " +
         std::to_string(j.ranks.size()) + " by |delta|\n\n";
  std::vector<std::vector<std::string>> rows = job_rank_rows(j, f);
  for (std::vector<std::string>& r : rows) r[0] = r[0].substr(2);
  md_table(&out, {"rank", "A", "B", "delta", "change"}, rows, 1);
  return out;
}

namespace {

std::string esc(std::string_view s) { return internal::page_text(s); }

// `part` of `whole` in thousandths (the pair bars' viewBox is 1000 wide), 2 decimals.
std::string per_mille(std::int64_t part, std::int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f",
                whole > 0 ? 1000.0 * static_cast<double>(std::max<std::int64_t>(part, 0)) / static_cast<double>(whole) : 0.0);
  return buf;
}

// A table of text rows (the text view's rows, each cell escaped); numbers
// right-aligned from column `first_number` on. Cells of one line, cut in
// their middle when long (whole in their title); `wrap`: sentences that
// wrap instead.
std::string html_table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                       std::size_t first_number, bool wrap = false) {
  std::string out = std::string(wrap ? "<table class=\"wrap\">" : "<table>") + "<thead><tr>";
  for (std::size_t i = 0; i < head.size(); ++i) {
    out += std::string(i >= first_number ? "<th class=\"n\">" : "<th>") + esc(head[i]) + "</th>";
  }
  out += "</tr></thead><tbody>\n";
  for (const std::vector<std::string>& r : rows) {
    out += "<tr>";
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::string cell = i == 0 && r[i].starts_with("  ") ? r[i].substr(2) : r[i];
      out += std::string(i >= first_number ? "<td class=\"n\"" : "<td") +
             (wrap ? std::string(">") : " title=\"" + esc(cell) + "\">") + esc(cell) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

// A and B of one figure as two bars on one scale (max_ns), A above B.
std::string pair_svg(std::int64_t a_ns, std::int64_t b_ns, std::int64_t max_ns, const std::string& label) {
  std::string out = "<svg class=\"pair\" viewBox=\"0 0 1000 26\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"" +
                    esc(label) + "\">";
  const auto bar = [&](std::int64_t ns, const char* cls, int y, const char* side) {
    if (ns <= 0) return std::string();
    return std::string("<rect class=\"") + cls + "\" x=\"0\" y=\"" + std::to_string(y) + "\" width=\"" +
           per_mille(ns, max_ns) + "\" height=\"11\"><title>" + esc(std::string(side) + ": " + t(ns)) + "</title></rect>";
  };
  return out + bar(a_ns, "c-a", 1, "A") + bar(b_ns, "c-b", 14, "B") + "</svg>";
}

// The class of a change's text: B slower, faster, or neither.
std::string delta_class(std::int64_t d) { return d > 0 ? "slower" : d < 0 ? "faster" : "same"; }

}  // namespace

std::string format_job_comparison_html(const JobComparison& j, const CompareFormat& f, const GateResult* gate) {
  const Comparison& c = j.c;
  std::string out = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>tprof compare: " +
                    esc(f.label_b) + " against " + esc(f.label_a) + "</title>\n<style>" +
                    std::string(internal::job_page_style()) + "</style></head>\n<body data-ranks-a=\"" +
                    std::to_string(j.a.ranks) + "\" data-ranks-b=\"" + std::to_string(j.b.ranks) + "\">\n";
  out += "<h1>tprof compare: job B against job A</h1>\n<p class=\"sub\">A: " + internal::page_name(f.label_a) + ", a job of " +
         esc(ranks_text(j.a.ranks)) + ". B: " + internal::page_name(f.label_b) + ", a job of " + esc(ranks_text(j.b.ranks)) +
         ".<br>Steps: " + esc(job_alignment_text(c)) + ".</p>\n";
  if (gate != nullptr) {
    out += "<p id=\"gate\" data-outcome=\"" + std::string(gate_outcome_name(gate->outcome)) + "\"><b>Gate: " +
           esc(gate_outcome_text(*gate)) + "</b> " + esc(gate_reason(*gate)) + "</p>\n";
  }
  // The job step: the metrics with their intervals, then the phases.
  out += "<section id=\"metrics\"><h2>The job step</h2>\n<p class=\"note\">Median step: A " + esc(t(c.a.median_step_ns)) +
         ", B " + esc(t(c.b.median_step_ns)) + ", " + esc(signed_t(c.delta_ns)) + " (" +
         esc(pct_of(c.delta_pct, c.a.median_step_ns)) + "). Per job step, the mean of B against A with its 95% interval (" +
         esc(job_sampling_text(c)) + "); * marks the gate's metric: " + esc(metric_label(c.bound_metric)) + ", " +
         esc(c.bound_reason) + ".</p>\n";
  out += html_table({"metric", "A", "B", "change", ""}, metric_rows(c), 1);
  if (!j.phases.empty()) {
    std::int64_t max_ns = 0;
    for (const JobPhaseDelta& p : j.phases) max_ns = std::max({max_ns, p.mean_a_ns, p.mean_b_ns});
    out += "<h3>Phases of the job step</h3>\n<p class=\"legend\"><span><i class=\"sw c-a\"></i>A</span><span><i "
           "class=\"sw c-b\"></i>B</span> the median over ranks, mean per aligned step, on one scale</p>\n"
           "<div class=\"grid2\" id=\"phases\" data-phases=\"" +
           std::to_string(j.phases.size()) + "\">\n";
    for (const JobPhaseDelta& p : j.phases) {
      const std::int64_t d = internal::sat_sub(p.mean_b_ns, p.mean_a_ns);
      out += "<div>" + esc(p.phase) + "</div><div class=\"phase\" data-phase=\"" + esc(p.phase) + "\" data-a-ns=\"" +
             std::to_string(p.mean_a_ns) + "\" data-b-ns=\"" + std::to_string(p.mean_b_ns) + "\">" +
             pair_svg(p.mean_a_ns, p.mean_b_ns, max_ns, p.phase) + "</div><div class=\"" + delta_class(d) +
             "\">A " + esc(t(p.mean_a_ns)) + ", B " + esc(t(p.mean_b_ns)) + ": " + esc(signed_t(d)) + "</div>\n";
    }
    out += "</div>\n";
  }
  out += "</section>\n";
  // What each job's view says.
  std::vector<std::vector<std::string>> views = {
      {"set-up", job_setup_text(j.a, c.a), job_setup_text(j.b, c.b), c.setup_differences.empty() ? "same" : "differs"},
      {"verdicts", verdicts_text(j.a), verdicts_text(j.b), c.verdict_changed ? "changed" : "unchanged"},
      {"stragglers", std::to_string(j.a.stragglers.size()), std::to_string(j.b.stragglers.size()), straggler_change(j)}};
  if (j.a.slow_transfer_groups > 0 || j.b.slow_transfer_groups > 0) {
    views.push_back({"slow links", suspects_text(j.a), suspects_text(j.b), ""});
  }
  views.push_back({"critical path across ranks", path_text(j.a), path_text(j.b), ""});
  out += "<section id=\"views\" data-stragglers-a=\"" + std::to_string(j.a.stragglers.size()) + "\" data-stragglers-b=\"" +
         std::to_string(j.b.stragglers.size()) + "\"><h2>What each job's view says</h2>\n" +
         html_table({"", "A", "B", "B against A"}, views, 99, true);
  out += "<ul>\n";
  for (const std::string& d : c.setup_differences) out += "<li>The set-ups differ: " + esc(d) + ".</li>\n";
  for (const auto& [side, name] : {std::pair{&j.a, "A"}, std::pair{&j.b, "B"}}) {
    for (const std::string& line : straggler_lines(*side)) {
      out += "<li>" + std::string(name) + "'s straggler, " + esc(line) + ".</li>\n";
    }
  }
  out += "</ul>\n</section>\n";
  // Every rank, A above B on one scale, by |delta| as the text view.
  std::int64_t max_ns = 0;
  for (const JobRankDelta& r : j.ranks) max_ns = std::max({max_ns, r.mean_a_ns, r.mean_b_ns});
  out += "<section id=\"ranks\" data-ranks=\"" + std::to_string(j.ranks.size()) + "\" data-metric=\"" +
         esc(metric_label(j.rank_metric)) + "\"><h2>Ranks</h2>\n<p class=\"note\">Each rank's " +
         esc(rank_metric_text(j)) + ", A above B, every rank on one scale (the longest is " + esc(t(max_ns)) +
         "); largest change first.</p>\n";
  for (const JobRankDelta& r : j.ranks) {
    const bool both = r.change == ChangeKind::kCommon;
    const std::int64_t d = both ? r.delta_ns() : 0;
    const double pct = both && r.mean_a_ns > 0 ? 100.0 * static_cast<double>(d) / static_cast<double>(r.mean_a_ns) : 0.0;
    out += "<div class=\"rank-row\" data-rank=\"" + std::to_string(r.rank) + "\" data-change=\"" +
           std::string(r.change == ChangeKind::kNew ? "new" : r.change == ChangeKind::kVanished ? "vanished" : "common") +
           "\" data-a-ns=\"" + std::to_string(r.mean_a_ns) + "\" data-b-ns=\"" + std::to_string(r.mean_b_ns) + "\">" +
           "<div class=\"rank-label\"><b>rank " + std::to_string(r.rank) + "</b></div>" +
           pair_svg(r.mean_a_ns, r.mean_b_ns, max_ns, "rank " + std::to_string(r.rank)) + "<div class=\"rank-stats " +
           delta_class(d) + "\">" +
           (both ? "A " + esc(t(r.mean_a_ns)) + ", B " + esc(t(r.mean_b_ns)) + ": " + esc(signed_t(d)) + " (" +
                       esc(pct_of(pct, r.mean_a_ns)) + ")"
                 : r.change == ChangeKind::kNew ? "in B only: " + esc(t(r.mean_b_ns))
                                                : "in A only: " + esc(t(r.mean_a_ns))) +
           "</div></div>\n";
  }
  out += "</section>\n";
  CompareFormat all = f;
  all.top = 0;
  out += "<details id=\"text-view\"><summary>The same comparison as text (<code>tprof compare --jobs A B</code>)</summary>"
         "<pre>" +
         esc(format_job_comparison_text(j, all, gate)) + "</pre></details>\n";
  return out + internal::job_page_script() + "</body></html>\n";
}

std::string format_job_comparison_json(const JobComparison& j, const CompareFormat& f, const GateResult* gate) {
  const Comparison& c = j.c;
  std::string out;
  {
    internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
    w.begin_object();
    for (const auto& [side, job, label, key] : {std::tuple{&c.a, &j.a, &f.label_a, "a"}, std::tuple{&c.b, &j.b, &f.label_b, "b"}}) {
      w.key(key);
      write_side(w, *side, *label);
      w.key(std::string("job_") + key);
      w.begin_object();
      w.key("ranks");
      w.value_int(job->ranks);
      w.key("ranks_with_steps");
      w.value_int(job->ranks_with_steps);
      w.key("world_size");
      w.value_int(job->world_size);
      w.key("has_steady");
      w.value_bool(!side->steady_ns.empty());  // every rank's summary has steady_ns (version 3)
      w.key("verdicts");
      w.begin_object();
      for (const auto& [v, n] : job->verdicts) {
        w.key(verdict_name(v));
        w.value_int(n);
      }
      w.end_object();
      w.key("stragglers");
      w.begin_array();
      for (const Straggler& s : job->stragglers) {
        w.begin_object();
        w.key("rank");
        w.value_int(s.rank);
        w.key("collective");
        w.value_string(s.collective);
        w.key("wait_per_step_ns");
        w.value_int(s.wait_per_step_ns);
        w.key("wait_pct");
        w.value_double(s.wait_pct);
        w.key("cause");
        w.value_string(s.before.empty() ? "" : s.before.front().what);
        w.key("cause_excess_per_step_ns");
        w.value_int(s.before.empty() ? 0 : s.before.front().excess_per_step_ns);
        w.key("late_before_window");
        w.value_bool(s.late_at_window_start > 0);
        w.end_object();
      }
      w.end_array();
      w.key("slow_transfer_groups");
      w.value_int(job->slow_transfer_groups);
      w.key("slow_link_suspects");
      w.begin_array();
      for (const std::int64_t r : job->slow_link_suspects) w.value_int(r);
      w.end_array();
      w.key("critical_path_per_step_ns");
      w.value_int(job->critical_path.per_step_ns);
      w.key("critical_path");
      w.begin_array();
      for (const PathPart& x : job->critical_path.parts) {
        w.begin_object();
        w.key("rank");
        w.value_int(x.rank);
        w.key("what");
        w.value_string(x.what);
        w.key("per_step_ns");
        w.value_int(x.per_step_ns);
        w.end_object();
      }
      w.end_array();
      w.end_object();
    }
    w.key("alignment");
    w.value_string(step_alignment_name(c.alignment));
    write_steps(w, c, true);
    w.key("metrics");
    w.begin_array();
    for (const MetricComparison& m : c.metrics) write_metric(w, m);
    w.end_array();
    w.key("bound_metric");
    w.value_string(compare_metric_name(c.bound_metric));
    w.key("bound_reason");
    w.value_string(c.bound_reason);
    w.key("interval");
    w.value_string(job_sampling_text(c));
    w.key("phases");
    w.begin_array();
    for (const JobPhaseDelta& p : j.phases) {
      w.begin_object();
      w.key("phase");
      w.value_string(p.phase);
      w.key("mean_a_ns");
      w.value_int(p.mean_a_ns);
      w.key("mean_b_ns");
      w.value_int(p.mean_b_ns);
      w.end_object();
    }
    w.end_array();
    w.key("setup_differences");
    w.begin_array();
    for (const std::string& d : c.setup_differences) w.value_string(d);
    w.end_array();
    w.key("verdict_changed");
    w.value_bool(c.verdict_changed);
    w.key("rank_metric");
    w.value_string(compare_metric_name(j.rank_metric));
    w.key("ranks");
    w.begin_array();
    for (const JobRankDelta& r : j.ranks) {
      w.begin_object();
      w.key("rank");
      w.value_int(r.rank);
      w.key("change");
      w.value_string(change_kind_name(r.change));
      w.key("mean_a_ns");
      w.value_int(r.mean_a_ns);
      w.key("mean_b_ns");
      w.value_int(r.mean_b_ns);
      w.key("delta_ns");
      w.value_int(r.change == ChangeKind::kCommon ? r.delta_ns() : 0);
      w.end_object();
    }
    w.end_array();
    if (gate != nullptr) write_gate(w, *gate);
    w.end_object();
  }
  out.push_back('\n');
  return out;
}

}  // namespace tprof
