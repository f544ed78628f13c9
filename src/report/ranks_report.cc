// The job view as text, JSON and Markdown, and the rank summary file
// (written with JsonWriter, read back with JsonValue).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "src/analyze/diagnose_context.h"
#include "src/analyze/ranks_collectives.h"
#include "src/base/json_writer.h"
#include "src/base/saturate.h"
#include "src/report/py_format.h"
#include "src/trace/json_value.h"
#include "tprof/ranks.h"

namespace tprof {

namespace {

using internal::JsonValue;
using internal::JsonWriter;

constexpr const char* kNoiseRule = "max(3 x the ranks' MAD, 3 x its own step MAD, 2% of the job median)";

std::string pct_text(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f%%", decimals, v);
  return buf;
}

std::string header_line(const JobView& v) {
  std::size_t traces = 0;
  for (const RankRow& r : v.ranks) traces += r.windows.size();
  std::string s = std::to_string(v.ranks.size()) + (v.ranks.size() == 1 ? " rank" : " ranks") + " (";
  if (traces > v.ranks.size()) s += "from " + std::to_string(traces) + " traces, one process's windows one rank; ";
  s += std::string("numbered by ") +
                  (v.ranks_from_file_names ? "file name order: a trace has no distributedInfo.rank" : "distributedInfo.rank") +
                  ")";
  if (v.world_size > 0 && v.world_size != static_cast<std::int64_t>(v.ranks.size())) {
    s += " of " + std::to_string(v.world_size) + " in the job (distributedInfo.world_size)";
  }
  s += ", " + std::to_string(v.ranks_with_steps) + " with steps";
  if (v.ranks_with_steps > 0) {
    s += "; job median step " + internal::format_ns(v.median_step_ns) + ", ranks' MAD " + internal::format_ns(v.ranks_mad_ns);
  }
  return s;
}

std::string slow_rank_line(const SlowRank& s) {
  return "rank " + std::to_string(s.rank) + ": median step " + internal::format_ns(s.median_step_ns) + ", +" +
         internal::format_ns(s.excess_ns) + " (+" + pct_text(s.excess_pct, 1) + ") over the job median (noise " +
         internal::format_ns(s.noise_ns) + "); slow in " + s.phase + ": " + (s.phase_excess_ns >= 0 ? "+" : "") +
         internal::format_ns(s.phase_excess_ns) + " per step over the ranks' median";
}

std::string signed_ns(std::int64_t ns) { return (ns >= 0 ? "+" : "-") + internal::format_ns(ns >= 0 ? ns : internal::sat_sub(0, ns)); }

std::string per_step_text(const Straggler& s) { return s.steps > 0 ? " per step" : " over the traced collectives"; }

// "96.1 ms over 8 steps; 61.0% of the job median step"
std::string share_text(const Straggler& s) {
  if (s.steps == 0) return pct_text(s.wait_pct, 1) + " of the traced collectives' span";
  return internal::format_ns(s.wait_ns) + " over " + std::to_string(s.steps) + (s.steps == 1 ? " step" : " steps") +
         "; " + pct_text(s.wait_pct, 1) + " of the job median step";
}

// "rank 5: last at 8 of 8 collectives it joins (16 ranks each); the others wait ..."
std::string straggler_line(const Straggler& s) {
  return "rank " + std::to_string(s.rank) + ": last at " + std::to_string(s.last_at) + " of " +
         std::to_string(s.collectives) + " matched collectives it joins" +
         (s.last_on.empty() ? std::string() : " on " + s.last_on) + " (" + std::to_string(s.ranks) +
         " traced ranks each" + internal::group_traced_text(s) + "); the others wait " + internal::format_ns(s.wait_per_step_ns) + per_step_text(s) + " for it (" +
         share_text(s) + "), most at " + s.collective + " (" + s.on + "); it arrives " + internal::format_ns(s.lead_ns) +
         " after the next-latest rank and its collectives end " + internal::format_ns(s.after_arrival_ns) +
         " after it arrives (medians)";
}

// "fix (up to 15.001 ms a step): ": the others' wait is what it could save.
std::string fix_label(const Straggler& s) {
  return "fix (up to " + internal::format_ns(s.wait_per_step_ns) + (s.steps > 0 ? " a step" : " in the window") + "): ";
}

std::string before_line(const Straggler& s) {
  if (s.compared == 0) {
    if (s.late_at_window_start > 0) return "before arriving: " + internal::window_late_text(s);
    return "before arriving: not comparable (at none of its late collectives does the stretch since the previous "
           "collective start together on every rank)";
  }
  const std::string window = s.late_at_window_start > 0 ? "; " + internal::window_late_text(s) : "";
  std::string out = "before arriving, beyond the other ranks' median" + per_step_text(s);
  if (s.compared < s.last_at) {
    out += " (at " + std::to_string(s.compared) + " of its " + std::to_string(s.last_at) +
           " late collectives: where the stretch since the previous collective starts together on every rank)";
  }
  out += ":";
  if (s.before.empty()) return out + " nothing" + window;
  for (std::size_t i = 0; i < s.before.size(); ++i) {
    const ArrivalCause& a = s.before[i];
    out += (i == 0 ? " " : ", ") + a.what + " +" + internal::format_ns(a.excess_per_step_ns);
    if (!a.top.empty()) out += " (longest: " + internal::title_name(a.top) + ")";
  }
  return out + window;
}

// Why the latest rank is no straggler: each threshold it misses.
std::string why_not(const Straggler& s) {
  std::string out;
  auto add = [&out](const std::string& r) { out += (out.empty() ? "" : "; ") + r; };
  if (s.last_at < internal::kStragglerMinLate) {
    add("last at fewer than " + std::to_string(internal::kStragglerMinLate) + " collectives");
  }
  if (static_cast<double>(s.last_at) < s.share_needed * static_cast<double>(s.collectives)) {
    add("last at under " + pct_text(100.0 * s.share_needed, 0) + " of the collectives it joins");
  }
  if (s.wait_pct < internal::kStragglerMinWaitPct) {
    // Late beyond chance: a smaller wait suffices.
    if (!internal::late_beyond_chance(s)) {
      add("the others wait under " + pct_text(internal::kStragglerMinWaitPct, 0) + " of a step for it");
    } else if (s.wait_pct < internal::kStragglerSignificantWaitPct) {
      add("the others wait under " + pct_text(internal::kStragglerSignificantWaitPct, 1) + " of a step for it");
    }
  }
  return out;
}

// Nearly a straggler (it misses one threshold of three, or two but makes
// the others wait long): the whole story; otherwise one line.
std::string latest_line(const Straggler& s, const std::string& indent) {
  const bool close = s.last_at >= internal::kStragglerMinLate || s.wait_pct >= internal::kStragglerMinWaitPct;
  if (!close) {
    return "Stragglers: none (no rank arrives last repeatedly: the most often last, rank " + std::to_string(s.rank) +
           ", is last at " + std::to_string(s.last_at) + " of " + std::to_string(s.collectives) +
           " matched collectives, and the others wait " + internal::format_ns(s.wait_per_step_ns) + per_step_text(s) +
           " for it)";
  }
  return "Stragglers: none that arrives last repeatedly (" + why_not(s) + "); the rank the others wait for most:\n" +
         indent + straggler_line(s) + "\n" + indent + before_line(s);
}

std::string alignment_line(const JobView& v) {
  const CollectiveAlignment& a = v.alignment;
  if (a.matched == 0) return "Collectives: none matched across ranks (" + a.note + ")";
  std::string how = std::to_string(a.groups) + (a.groups == 1 ? " kernel" : " kernels");
  if (a.matched_by_seq == a.matched) {
    how += " by process group and sequence number";
  } else {
    how += " by process group or stream";
    if (a.matched_by_seq > 0) how += ", " + std::to_string(a.matched_by_seq) + " collectives by sequence number";
  }
  std::string out = "Collectives: " + std::to_string(a.matched) + " matched (" + how + ") across " +
                    std::to_string(a.ranks_aligned) + " ranks; clocks aligned on their ends, which agree within " +
                    internal::format_ns(a.end_spread_ns) + " (median); largest clock offset " +
                    signed_ns(a.max_offset_ns) + " (rank " + std::to_string(a.max_offset_rank) + ")";
  if (a.ranks_with_collectives > a.ranks_aligned) {
    const std::int64_t left = a.ranks_with_collectives - a.ranks_aligned;
    out += "; " + std::to_string(left) + (left == 1 ? " rank" : " ranks") + " not aligned (fewer than 2 collectives' ends agree with the others)";
  }
  if (a.unmatched > 0) {
    out += "; " + std::to_string(a.unmatched) + (a.unmatched == 1 ? " collective kernel" : " collective kernels") +
           " whose end agrees with no other rank's, left out";
  }
  if (v.world_size > static_cast<std::int64_t>(v.ranks.size())) {
    out += "; " + std::to_string(v.ranks.size()) + " of " + std::to_string(v.world_size) +
           " ranks traced: the latest traced rank may itself wait for an untraced one";
  }
  return out;
}

// "rank 0: 3 windows of 2 + 2 + 2 steps, in time order: a.1.pt.trace.json, a.2.pt.trace.json, a.3.pt.trace.json",
// one line per rank merged from several traces; none when every rank is one trace.
std::vector<std::string> window_lines(const JobView& v) {
  std::vector<std::string> out;
  for (const RankRow& r : v.ranks) {
    if (r.windows.size() < 2) continue;
    std::string line = "rank " + std::to_string(r.rank) + ": " + std::to_string(r.windows.size()) + " windows of ";
    for (std::size_t i = 0; i < r.window_steps.size(); ++i) line += (i == 0 ? "" : " + ") + std::to_string(r.window_steps[i]);
    line += " steps, in time order:";
    for (std::size_t i = 0; i < r.windows.size(); ++i) line += (i == 0 ? " " : ", ") + r.windows[i];
    out.push_back(line);
  }
  return out;
}

std::string verdict_text(const RankRow& r) {
  if (!r.waiting_for) return std::string(verdict_name(r.verdict));
  return "waiting for rank " + std::to_string(r.waiting_for->rank) + " at " + r.waiting_for->collective;
}

std::string overlap_text(const CommCompOverlap& o) {
  return "rank " + std::to_string(o.rank) + " " + (o.overlap_pct ? pct_text(*o.overlap_pct, 2) : std::string("n/a"));
}

// A rank's step MAD, "-" where it has fewer than two steps: one step has no
// spread to measure, and "0 ns" would say its steps agree.
std::string mad_text(const RankRow& r) { return r.steps < 2 ? std::string("-") : internal::format_ns(r.step_mad_ns); }

// The critical path across ranks in words: how it was walked (`rule`), its
// figure, then one line per rank on it (its stretches by cause), the rest
// of the ranks together, the transfers, and where the rest of the steps is.
// Empty lines when no collective matched.
constexpr std::size_t kPathRanksShown = 4;
// Below this share of its steps the path says where the rest is.
constexpr double kPathCoveredPct = 90.0;

struct PathText {
  std::string rule, figure;
  std::vector<std::string> lines;
};

PathText path_text(const JobView& v) {
  const CrossRankPath& p = v.critical_path;
  PathText out;
  if (p.steps == 0) return out;
  out.rule = "from each step's last collective back, through the rank that arrives last at each; " +
             std::to_string(p.steps) + (p.steps == 1 ? " step, " : " steps, ") + internal::fixed(p.hops_per_step, 1) +
             " collectives a step; each rank's stretch split " +
             (p.along_rank_paths ? "along its own critical path" : "by what its device did (summaries before version 5)");
  out.figure = internal::format_ns(p.per_step_ns) + " per step";
  if (p.step_pct > 0) out.figure += ", " + pct_text(p.step_pct, 1) + " of those steps";
  const auto share = [&](std::int64_t ns) {
    return p.per_step_ns > 0 ? pct_text(std::round(1000.0 * static_cast<double>(ns) / static_cast<double>(p.per_step_ns)) / 10.0, 1)
                             : std::string("-");
  };
  const std::vector<std::pair<std::int64_t, std::int64_t>> ranks = internal::path_by_rank(p);
  std::int64_t rest = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto& [rank, ns] = ranks[i];
    if (i >= kPathRanksShown) {
      rest += ns;
      continue;
    }
    // Its parts, largest first (as p.parts are).
    std::string parts;
    for (const PathPart& x : p.parts) {
      if (x.rank == rank) parts += (parts.empty() ? "" : ", ") + x.what + " " + internal::format_ns(x.per_step_ns);
    }
    for (const PathTop& t : p.tops) {
      if (t.rank == rank) parts += "; most in " + t.name + " (" + internal::format_ns(t.per_step_ns) + ")";
    }
    // Mostly unexplained: say what its device ran meanwhile.
    std::int64_t unexplained = 0;
    for (const PathPart& x : p.parts) unexplained += x.rank == rank && x.what == "unexplained" ? x.per_step_ns : 0;
    if (p.along_rank_paths && 2 * unexplained >= ns) {
      std::string ran;
      for (const PathPart& x : p.activity) {
        if (x.rank == rank) ran += (ran.empty() ? "" : ", ") + x.what + " " + internal::format_ns(x.per_step_ns);
      }
      parts += "; unexplained: waits its trace does not record (a kernel that started long after its launch and "
               "its stream's previous kernel) or time before its first recorded event" +
               (ran.empty() ? std::string() : "; meanwhile its device did: " + ran);
    }
    out.lines.push_back("rank " + std::to_string(rank) + ": " + internal::format_ns(ns) + " (" + share(ns) + "): " + parts);
  }
  if (ranks.size() > kPathRanksShown) {
    const std::size_t n = ranks.size() - kPathRanksShown;
    out.lines.push_back(std::to_string(n) + (n == 1 ? " other rank: " : " other ranks: ") + internal::format_ns(rest) +
                        " (" + share(rest) + ")");
  }
  std::int64_t transfers = 0;
  for (const PathPart& x : p.parts) transfers += x.rank < 0 ? x.per_step_ns : 0;
  if (transfers > 0) {
    const auto traced = static_cast<std::int64_t>(v.ranks.size());
    out.lines.push_back("transfers: " + internal::format_ns(transfers) + " (" + share(transfers) +
                        (v.world_size > traced ? "; with " + std::to_string(traced) + " of " +
                                                     std::to_string(v.world_size) +
                                                     " ranks traced, they hold the wait for untraced ranks too)"
                                               : ")"));
  }
  if (p.step_pct > 0 && p.step_pct < kPathCoveredPct) {
    const std::int64_t unmatched = v.alignment.unmatched;
    out.lines.push_back("the other " + pct_text(std::round(10.0 * (100.0 - p.step_pct)) / 10.0, 1) +
                        " of those steps is off the path: after their last collective, or before its first stretch, " +
                        (unmatched > 0 ? "where the walk stopped at a collective that is not matched (" +
                                             std::to_string(unmatched) +
                                             (unmatched == 1 ? " collective kernel matches" : " collective kernels match") +
                                             " no other rank's)"
                                       : std::string("which starts at its rank's step start (a rank that begins its "
                                                     "steps late, before the recorded step, leaves that wait out)")));
  }
  return out;
}

}  // namespace

std::string format_job_text(const JobView& v) {
  std::string out = header_line(v) + "\n\n";
  char buf[512];
  int width = 20;
  for (const RankRow& r : v.ranks) width = std::max(width, static_cast<int>(verdict_text(r).size()));
  std::snprintf(buf, sizeof buf, "%6s %6s %12s %11s %12s %14s %12s  %-*s %s\n", "rank", "steps", "median step",
                "step MAD", "computation", "communication", "idle", width, "verdict", "file");
  out += buf;
  for (const RankRow& r : v.ranks) {
    std::snprintf(buf, sizeof buf, "%6lld %6lld %12s %11s %12s %14s %12s  ", static_cast<long long>(r.rank),
                  static_cast<long long>(r.steps), internal::format_ns(r.median_step_ns).c_str(),
                  mad_text(r).c_str(), internal::format_ns(r.median_computation_ns).c_str(),
                  internal::format_ns(r.median_communication_ns).c_str(), internal::format_ns(r.median_idle_ns).c_str());
    std::string verdict = verdict_text(r);
    verdict.resize(static_cast<std::size_t>(width), ' ');
    out += buf + verdict + " " + r.source + "\n";
  }
  out += "(per-rank medians over its steps; the phases split each step: docs/scale.md)\n";
  for (const std::string& line : window_lines(v)) out += line + "\n";
  out += "\n";
  if (!v.stragglers.empty()) {
    out += "Stragglers (the rank that arrives last at the collectives, clocks aligned on their common ends):\n";
    for (const Straggler& s : v.stragglers) {
      out += "  " + straggler_line(s) + "\n    " + before_line(s) + "\n    " + fix_label(s) + s.advice + "\n";
    }
  } else if (v.latest) {
    out += latest_line(*v.latest, "  ") + "\n";
  } else if (!v.network.followers.empty() || !v.network.suspects.empty()) {
    out += "Stragglers: none of their own (the ranks that arrive last do so because a transfer ran slow: below)\n";
  } else if (v.alignment.matched > 0) {
    out += "Stragglers: none (no rank arrives last at a matched collective by more than the spread of its ends)\n";
  } else {
    out += "Stragglers: none (" + v.alignment.note + ")\n";
  }
  if (!v.network.groups.empty()) {
    out += std::string("Slow transfers (") + internal::kSlowTransferRule + "):\n";
    for (const SlowTransfer& t : v.network.groups) out += "  " + internal::slow_transfer_text(t) + "\n";
    out += "  " + internal::network_who_text(v.network) + "\n  fix: " + v.network.advice + "\n";
  }
  const PathText path = path_text(v);
  if (!path.rule.empty()) {
    out += "Critical path across ranks (" + path.rule + "): " + path.figure + ":\n";
    for (const std::string& line : path.lines) out += "  " + line + "\n";
  }
  out += alignment_line(v) + "\n";
  if (v.slow_ranks.empty()) {
    out += std::string("Slow ranks: none (median step over the job median by more than ") + kNoiseRule + ")\n";
  } else {
    out += std::string("Slow ranks (median step over the job median by more than ") + kNoiseRule + "):\n";
    for (const SlowRank& s : v.slow_ranks) out += "  " + slow_rank_line(s) + "\n";
  }
  out += "\nBreakdowns (HolisticTraceAnalysis)\n  comm/comp overlap:";
  if (v.comm_comp_overlap.empty()) out += " none";
  for (std::size_t i = 0; i < v.comm_comp_overlap.size(); ++i) {
    out += (i == 0 ? " " : ", ") + overlap_text(v.comm_comp_overlap[i]);
  }
  out += "\n  kernel types, all ranks:";
  if (v.kernel_types.empty()) out += " none";
  for (std::size_t i = 0; i < v.kernel_types.size(); ++i) {
    const KernelTypeRow& k = v.kernel_types[i];
    out += (i == 0 ? " " : ", ") + k.kernel_type + " " + internal::format_ns(k.ns) + " (" + pct_text(k.pct, 1) + ")";
  }
  out += "\n";
  return out;
}

std::string format_job_md(const JobView& v) {
  std::string out = "# tprof diagnose: " + header_line(v) + "\n\n";
  out += "| rank | steps | median step | step MAD | computation | communication | idle | verdict | file |\n";
  out += "|---:|---:|---:|---:|---:|---:|---:|---|---|\n";
  for (const RankRow& r : v.ranks) {
    out += "| " + std::to_string(r.rank) + " | " + std::to_string(r.steps) + " | " + internal::format_ns(r.median_step_ns) +
           " | " + mad_text(r) + " | " + internal::format_ns(r.median_computation_ns) + " | " +
           internal::format_ns(r.median_communication_ns) + " | " + internal::format_ns(r.median_idle_ns) + " | " +
           verdict_text(r) + " | `" + r.source + "` |\n";
  }
  const std::vector<std::string> windows = window_lines(v);
  if (!windows.empty()) out += "\n";
  for (const std::string& line : windows) out += "- " + line + "\n";
  out += "\n## Stragglers\n\nThe rank that arrives last at the collectives, clocks aligned on their common ends.\n\n";
  if (!v.stragglers.empty()) {
    for (const Straggler& s : v.stragglers) {
      out += "- " + straggler_line(s) + "\n  - " + before_line(s) + "\n  - " + fix_label(s) + s.advice + "\n";
    }
  } else if (v.latest) {
    out += latest_line(*v.latest, "- ") + "\n";
  } else if (!v.network.followers.empty() || !v.network.suspects.empty()) {
    out += "None of their own: the ranks that arrive last do so because a transfer ran slow (Slow transfers).\n";
  } else if (v.alignment.matched > 0) {
    out += "None: no rank arrives last at a matched collective by more than the spread of its ends.\n";
  } else {
    out += "None: " + v.alignment.note + ".\n";
  }
  if (!v.network.groups.empty()) {
    out += std::string("\n## Slow transfers\n\n") + internal::capitalized(internal::kSlowTransferRule) + ".\n\n";
    for (const SlowTransfer& t : v.network.groups) out += "- " + internal::slow_transfer_text(t) + "\n";
    out += "- " + internal::network_who_text(v.network) + "\n- fix: " + v.network.advice + "\n";
  }
  const PathText path = path_text(v);
  if (!path.rule.empty()) {
    out += "\n## Critical path across ranks\n\n" + internal::capitalized(path.rule) + ": " + path.figure + ".\n\n";
    for (const std::string& line : path.lines) out += "- " + line + "\n";
  }
  out += "\n" + alignment_line(v) + ".\n";
  out += std::string("\n## Slow ranks\n\nMedian step over the job median by more than ") + kNoiseRule + ".\n\n";
  if (v.slow_ranks.empty()) out += "None.\n";
  for (const SlowRank& s : v.slow_ranks) out += "- " + slow_rank_line(s) + "\n";
  out += "\n## Breakdowns (HolisticTraceAnalysis)\n\n| rank | comm/comp overlap |\n|---:|---:|\n";
  for (const CommCompOverlap& o : v.comm_comp_overlap) {
    out += "| " + std::to_string(o.rank) + " | " + (o.overlap_pct ? pct_text(*o.overlap_pct, 2) : std::string("n/a")) + " |\n";
  }
  out += "\n| kernel type (all ranks) | time | share |\n|---|---:|---:|\n";
  for (const KernelTypeRow& k : v.kernel_types) {
    out += "| " + k.kernel_type + " | " + internal::format_ns(k.ns) + " | " + pct_text(k.pct, 1) + " |\n";
  }
  return out;
}

std::string format_job_json(const JobView& v) {
  std::string out;
  {
    JsonWriter w(&out, JsonWriter::kPretty);
    w.begin_object();
    w.key("ranks_from_file_names");
    w.value_bool(v.ranks_from_file_names);
    w.key("ranks");
    w.begin_array();
    for (const RankRow& r : v.ranks) {
      w.begin_object();
      w.key("rank"); w.value_int(r.rank);
      w.key("source"); w.value_string(r.source);
      w.key("verdict"); w.value_string(verdict_name(r.verdict));
      w.key("waiting_for");
      if (r.waiting_for) {
        w.begin_object();
        w.key("rank"); w.value_int(r.waiting_for->rank);
        w.key("collective"); w.value_string(r.waiting_for->collective);
        w.key("wait_per_step_ns"); w.value_int(r.waiting_for->wait_per_step_ns);
        w.key("wait_pct"); w.value_double(r.waiting_for->wait_pct);
        w.end_object();
      } else {
        w.value_null();
      }
      w.key("collectives"); w.value_int(r.collectives);
      w.key("last_at"); w.value_int(r.last_at);
      w.key("steps"); w.value_int(r.steps);
      w.key("median_step_ns"); w.value_int(r.median_step_ns);
      w.key("step_mad_ns"); w.value_int(r.step_mad_ns);
      w.key("median_computation_ns"); w.value_int(r.median_computation_ns);
      w.key("median_communication_ns"); w.value_int(r.median_communication_ns);
      w.key("median_idle_ns"); w.value_int(r.median_idle_ns);
      w.key("windows");
      w.begin_array();
      for (const std::string& f : r.windows) w.value_string(f);
      w.end_array();
      w.end_object();
    }
    w.end_array();
    w.key("job");
    w.begin_object();
    w.key("ranks_with_steps"); w.value_int(v.ranks_with_steps);
    w.key("median_step_ns"); w.value_int(v.median_step_ns);
    w.key("ranks_mad_ns"); w.value_int(v.ranks_mad_ns);
    w.key("world_size"); w.value_int(v.world_size);
    w.end_object();
    const CollectiveAlignment& a = v.alignment;
    w.key("collectives");
    w.begin_object();
    w.key("ranks_with_collectives"); w.value_int(a.ranks_with_collectives);
    w.key("ranks_aligned"); w.value_int(a.ranks_aligned);
    w.key("groups"); w.value_int(a.groups);
    w.key("matched"); w.value_int(a.matched);
    w.key("matched_by_seq"); w.value_int(a.matched_by_seq);
    w.key("unmatched"); w.value_int(a.unmatched);
    w.key("max_offset_ns"); w.value_int(a.max_offset_ns);
    w.key("max_offset_rank"); w.value_int(a.max_offset_rank);
    w.key("end_spread_ns"); w.value_int(a.end_spread_ns);
    w.key("note"); w.value_string(a.note);
    w.end_object();
    auto straggler = [&w](const Straggler& s) {
      w.begin_object();
      w.key("rank"); w.value_int(s.rank);
      w.key("named"); w.value_bool(s.named);
      w.key("collectives"); w.value_int(s.collectives);
      w.key("last_at"); w.value_int(s.last_at);
      w.key("ranks"); w.value_int(s.ranks);
      w.key("group_size"); w.value_int(s.group_size);
      w.key("collective"); w.value_string(s.collective);
      w.key("on"); w.value_string(s.on);
      w.key("last_on"); w.value_string(s.last_on);
      w.key("follows"); w.value_int(s.follows);
      w.key("chance"); w.value_double(s.chance);
      w.key("lateness_z"); w.value_double(std::round(s.lateness_z * 100) / 100);
      w.key("steps"); w.value_int(s.steps);
      w.key("wait_ns"); w.value_int(s.wait_ns);
      w.key("wait_per_step_ns"); w.value_int(s.wait_per_step_ns);
      w.key("wait_pct"); w.value_double(s.wait_pct);
      w.key("lead_ns"); w.value_int(s.lead_ns);
      w.key("after_arrival_ns"); w.value_int(s.after_arrival_ns);
      w.key("compared"); w.value_int(s.compared);
      w.key("late_at_window_start"); w.value_int(s.late_at_window_start);
      w.key("window_start_late_ns"); w.value_int(s.window_start_late_ns);
      w.key("late_from_previous"); w.value_int(s.late_from_previous);
      w.key("before");
      w.begin_array();
      for (const ArrivalCause& c : s.before) {
        w.begin_object();
        w.key("what"); w.value_string(c.what);
        w.key("excess_per_step_ns"); w.value_int(c.excess_per_step_ns);
        w.key("top"); w.value_string(c.top);
        w.end_object();
      }
      w.end_array();
      w.key("advice"); w.value_string(s.advice);
      w.end_object();
    };
    w.key("stragglers");
    w.begin_array();
    for (const Straggler& s : v.stragglers) straggler(s);
    w.end_array();
    w.key("latest");
    if (v.latest) {
      straggler(*v.latest);
    } else {
      w.value_null();
    }
    auto ranks = [&w](const char* key, const std::vector<std::int64_t>& list) {
      w.key(key);
      w.begin_array();
      for (const std::int64_t r : list) w.value_int(r);
      w.end_array();
    };
    w.key("slow_transfers");
    w.begin_object();
    w.key("groups");
    w.begin_array();
    for (const SlowTransfer& t : v.network.groups) {
      w.begin_object();
      w.key("group"); w.value_string(t.group);
      w.key("collective"); w.value_string(t.collective);
      ranks("members", t.members);
      w.key("collectives"); w.value_int(t.collectives);
      w.key("transfer_ns"); w.value_int(t.transfer_ns);
      w.key("peers"); w.value_int(t.peers);
      w.key("peers_ns"); w.value_int(t.peers_ns);
      w.key("excess_per_step_ns"); w.value_int(t.excess_per_step_ns);
      w.end_object();
    }
    w.end_array();
    ranks("suspects", v.network.suspects);
    ranks("followers", v.network.followers);
    w.key("advice"); w.value_string(v.network.advice);
    w.end_object();
    w.key("critical_path");
    w.begin_object();
    w.key("steps"); w.value_int(v.critical_path.steps);
    w.key("per_step_ns"); w.value_int(v.critical_path.per_step_ns);
    w.key("step_pct"); w.value_double(v.critical_path.step_pct);
    w.key("hops_per_step"); w.value_double(std::round(v.critical_path.hops_per_step * 100.0) / 100.0);
    w.key("split"); w.value_string(v.critical_path.along_rank_paths ? "rank_critical_path" : "device_activity");
    const auto path_parts = [&w](const char* key, const std::vector<PathPart>& parts) {
      w.key(key);
      w.begin_array();
      for (const PathPart& x : parts) {
        w.begin_object();
        w.key("rank"); w.value_int(x.rank);
        w.key("what"); w.value_string(x.what);
        w.key("per_step_ns"); w.value_int(x.per_step_ns);
        w.end_object();
      }
      w.end_array();
    };
    path_parts("parts", v.critical_path.parts);
    path_parts("activity", v.critical_path.activity);
    w.key("tops");
    w.begin_array();
    for (const PathTop& x : v.critical_path.tops) {
      w.begin_object();
      w.key("rank"); w.value_int(x.rank);
      w.key("name"); w.value_string(x.name);
      w.key("per_step_ns"); w.value_int(x.per_step_ns);
      w.end_object();
    }
    w.end_array();
    w.end_object();
    w.key("slow_ranks");
    w.begin_array();
    for (const SlowRank& s : v.slow_ranks) {
      w.begin_object();
      w.key("rank"); w.value_int(s.rank);
      w.key("median_step_ns"); w.value_int(s.median_step_ns);
      w.key("excess_ns"); w.value_int(s.excess_ns);
      w.key("excess_pct"); w.value_double(s.excess_pct);
      w.key("noise_ns"); w.value_int(s.noise_ns);
      w.key("phase"); w.value_string(s.phase);
      w.key("phase_excess_ns"); w.value_int(s.phase_excess_ns);
      w.end_object();
    }
    w.end_array();
    w.key("breakdowns");
    w.begin_object();
    w.key("hta_comm_comp_overlap");
    w.begin_array();
    for (const CommCompOverlap& o : v.comm_comp_overlap) {
      w.begin_object();
      w.key("rank"); w.value_int(o.rank);
      w.key("overlap_pct");
      if (o.overlap_pct) {
        w.value_double(*o.overlap_pct);
      } else {
        w.value_null();
      }
      w.end_object();
    }
    w.end_array();
    w.key("hta_kernel_types");
    w.begin_array();
    for (const KernelTypeRow& k : v.kernel_types) {
      w.begin_object();
      w.key("kernel_type"); w.value_string(k.kernel_type);
      w.key("ns"); w.value_int(k.ns);
      w.key("pct"); w.value_double(k.pct);
      w.end_object();
    }
    w.end_array();
    w.end_object();
    w.end_object();
  }
  out += "\n";
  return out;
}

namespace {

constexpr const char* kCollectiveFields[] = {"group",          "step",       "start_ns",      "end_ns",
                                             "before_ns",      "computation_ns", "communication_ns", "input_ns",
                                             "top_kernel",     "top_kernel_ns",  "top_comm",     "top_comm_ns",
                                             "top_host",       "top_host_ns",    "seq",
                                             // Version 5: the stretch along the rank's critical path
                                             // (path_unexplained -1: none).
                                             "path_cpu_bound", "path_gpu_compute_bound",
                                             "path_gpu_communication_bound", "path_kernel_launch_overhead",
                                             "path_kernel_kernel_overhead", "path_data_loading",
                                             "path_unexplained", "path_top", "path_top_ns"};
// Where the version-5 fields start, and their count before the top.
constexpr std::size_t kPathField = 15;
constexpr std::size_t kPathBounds = static_cast<std::size_t>(BoundType::kCount_);
static_assert(kPathField + kPathBounds + 3 == sizeof kCollectiveFields / sizeof kCollectiveFields[0]);
constexpr std::size_t kCollectiveFieldCount = sizeof kCollectiveFields / sizeof kCollectiveFields[0];

// Starts and ends relative to the rank's first collective: shorter lines
// than epoch ns.
void write_collectives(JsonWriter& w, const RankSummary& r) {
  std::int64_t base = 0;
  if (!r.collectives.empty()) {
    base = r.collectives[0].start_ns;
    for (const RankCollective& c : r.collectives) base = std::min(base, c.start_ns);
  }
  w.key("collective_groups");
  w.begin_array();
  for (const CollectiveGroup& g : r.collective_groups) {
    w.begin_object();
    w.key("on"); w.value_string(g.on);
    w.key("kernel"); w.value_string(g.kernel);
    w.key("size"); w.value_int(g.size);
    w.end_object();
  }
  w.end_array();
  w.key("names");
  w.begin_array();
  for (const std::string& n : r.names) w.value_string(n);
  w.end_array();
  w.key("time_base_ns"); w.value_int(base);
  w.key("collectives");
  w.begin_array();
  for (const RankCollective& c : r.collectives) {
    std::string line;
    {
      JsonWriter l(&line);
      l.begin_array();
      for (const std::int64_t f : {std::int64_t{c.group}, c.step, internal::sat_sub(c.start_ns, base),
                                   internal::sat_sub(c.end_ns, base), c.before_ns,
                                   c.computation_ns, c.communication_ns, c.input_ns, std::int64_t{c.top_kernel},
                                   c.top_kernel_ns, std::int64_t{c.top_comm}, c.top_comm_ns, std::int64_t{c.top_host},
                                   c.top_host_ns, c.seq}) {
        l.value_int(f);
      }
      for (const std::int64_t ns : c.path_ns) l.value_int(c.has_path ? ns : 0);
      l.value_int(c.has_path ? c.path_unexplained_ns : -1);
      l.value_int(c.has_path ? c.path_top : -1);
      l.value_int(c.has_path ? c.path_top_ns : 0);
      l.end_array();
    }
    w.value_raw(line);
  }
  w.end_array();
  w.key("collective_fields");
  w.begin_array();
  for (const char* f : kCollectiveFields) w.value_string(f);
  w.end_array();
}

}  // namespace

std::string format_rank_summary_json(const JobSummary& job) {
  std::string out;
  {
    JsonWriter w(&out, JsonWriter::kPretty);
    w.begin_object();
    w.key("format"); w.value_string(kRankSummaryFormat);
    w.key("version"); w.value_int(kRankSummaryVersion);
    w.key("ranks");
    w.begin_array();
    for (const RankSummary& r : job.ranks) {
      w.begin_object();
      w.key("rank"); w.value_int(r.rank);
      w.key("source"); w.value_string(r.source);
      w.key("verdict"); w.value_string(verdict_name(r.verdict));
      w.key("has_device"); w.value_bool(r.has_device);
      w.key("world_size"); w.value_int(r.world_size);
      w.key("worker"); w.value_string(r.worker);
      w.key("pid"); w.value_int(r.pid);
      w.key("start_ns"); w.value_int(r.start_ns);
      w.key("end_ns"); w.value_int(r.end_ns);
      // One compact line per step: a summary of thousands of steps stays readable.
      w.key("steps");
      w.begin_array();
      for (const RankStep& s : r.steps) {
        std::string line;
        {
          JsonWriter l(&line);
          l.begin_array();
          l.value_int(s.step);
          l.value_int(s.dur_ns);
          l.value_int(s.computation_ns);
          l.value_int(s.communication_ns);
          l.value_int(s.idle_ns);
          l.value_int(s.steady_ns);
          l.value_int(s.device_ns);
          l.value_int(s.cpu_ns);
          l.end_array();
        }
        w.value_raw(line);
      }
      w.end_array();
      w.key("step_fields");
      w.begin_array();
      for (const char* f : {"step", "dur_ns", "computation_ns", "communication_ns", "idle_ns", "steady_ns", "device_ns",
                            "cpu_ns"}) {
        w.value_string(f);
      }
      w.end_array();
      w.key("hta_comm_comp_overlap");
      w.begin_object();
      w.key("overlap_ns"); w.value_int(r.comm_comp_overlap_ns);
      w.key("comm_ns"); w.value_int(r.comm_ns);
      w.end_object();
      w.key("hta_kernel_types");
      w.begin_array();
      for (const KernelTypeTime& k : r.kernel_types) {
        w.begin_object();
        w.key("kernel_type"); w.value_string(k.kernel_type);
        w.key("ns"); w.value_int(k.ns);
        w.end_object();
      }
      w.end_array();
      // A summary of version 1, merged into this one, has no collectives: it
      // keeps none here either.
      if (r.has_collectives) write_collectives(w, r);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  out += "\n";
  return out;
}

namespace {

Error bad(const std::string& where, const std::string& what) {
  return Error(ErrorCode::kFormat, "not a tprof rank summary: " + where + ": " + what);
}

// The member `key` of object `o` as an int64, or an error naming it.
Result<std::int64_t> get_int(const JsonValue& o, const std::string& where, std::string_view key) {
  const JsonValue* v = o.find(key);
  std::int64_t out = 0;
  if (v == nullptr || !v->is_number() || !v->get_int(&out)) {
    return bad(where, "\"" + std::string(key) + "\" is missing or not an integer");
  }
  return out;
}

Result<std::string> get_string(const JsonValue& o, const std::string& where, std::string_view key) {
  const JsonValue* v = o.find(key);
  if (v == nullptr || !v->is_string()) return bad(where, "\"" + std::string(key) + "\" is missing or not a string");
  return v->text();
}

Result<const JsonValue*> get_array(const JsonValue& o, const std::string& where, std::string_view key) {
  const JsonValue* v = o.find(key);
  if (v == nullptr || !v->is_array()) return bad(where, "\"" + std::string(key) + "\" is missing or not an array");
  return v;
}

// The collectives of a version-2 summary: every index in range, every time
// non-negative, the stretch before each split into parts that fit in it.
Status parse_collectives(const JsonValue& o, const std::string& where, std::int64_t version, RankSummary* r) {
  const JsonValue* groups = nullptr;
  TPROF_TRY_ASSIGN(groups, get_array(o, where, "collective_groups"));
  for (std::size_t i = 0; i < groups->items().size(); ++i) {
    const JsonValue& g = groups->items()[i];
    const std::string at = where + ".collective_groups[" + std::to_string(i) + "]";
    if (!g.is_object()) return bad(at, "not an object");
    CollectiveGroup cg;
    TPROF_TRY_ASSIGN(cg.on, get_string(g, at, "on"));
    TPROF_TRY_ASSIGN(cg.kernel, get_string(g, at, "kernel"));
    // "size" (version 4): the group's ranks in the job, -1 unknown.
    if (const JsonValue* size = g.find("size"); size != nullptr) {
      if (!size->is_number() || !size->get_int(&cg.size) || cg.size < -1) return bad(at, "\"size\" is not an integer of -1 or more");
    }
    r->collective_groups.push_back(std::move(cg));
  }
  const JsonValue* names = nullptr;
  TPROF_TRY_ASSIGN(names, get_array(o, where, "names"));
  for (std::size_t i = 0; i < names->items().size(); ++i) {
    if (!names->items()[i].is_string()) return bad(where + ".names[" + std::to_string(i) + "]", "not a string");
    r->names.push_back(names->items()[i].text());
  }
  std::int64_t base = 0;
  TPROF_TRY_ASSIGN(base, get_int(o, where, "time_base_ns"));
  const JsonValue* colls = nullptr;
  TPROF_TRY_ASSIGN(colls, get_array(o, where, "collectives"));
  const auto n_groups = static_cast<std::int64_t>(r->collective_groups.size());
  const auto n_names = static_cast<std::int64_t>(r->names.size());
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < colls->items().size(); ++i) {
    const JsonValue& c = colls->items()[i];
    const std::string at = where + ".collectives[" + std::to_string(i) + "]";
    // Version 4 adds "seq" (-1: none; before it, collectives have none),
    // version 5 the stretch along the rank's critical path.
    const std::size_t fields = version >= 5 ? kCollectiveFieldCount : version >= 4 ? kPathField : kPathField - 1;
    const std::string shape = "not an array of " + std::to_string(fields) + " integers";
    std::int64_t f[kCollectiveFieldCount] = {};
    f[14] = -1;
    f[kPathField + kPathBounds] = -1;
    f[kPathField + kPathBounds + 1] = -1;
    if (!c.is_array() || c.items().size() != fields) return bad(at, shape);
    for (std::size_t j = 0; j < fields; ++j) {
      if (!c.items()[j].is_number() || !c.items()[j].get_int(&f[j])) return bad(at, shape);
    }
    if (f[0] < 0 || f[0] >= n_groups) return bad(at, "\"group\" is not an index into \"collective_groups\"");
    for (const std::size_t j : {8, 10, 12}) {
      if (f[j] < -1 || f[j] >= n_names) return bad(at, "\"" + std::string(kCollectiveFields[j]) + "\" is not an index into \"names\" or -1");
    }
    for (const std::size_t j : {2, 3, 4, 5, 6, 7, 9, 11, 13}) {
      if (f[j] < 0) return bad(at, "\"" + std::string(kCollectiveFields[j]) + "\" is negative");
    }
    if (f[14] < -1) return bad(at, "\"seq\" is below -1");
    const std::int64_t unexplained = f[kPathField + kPathBounds], top = f[kPathField + kPathBounds + 1],
                       top_ns = f[kPathField + kPathBounds + 2];
    if (unexplained < 0) {
      bool empty = unexplained == -1 && top == -1 && top_ns == 0;
      for (std::size_t j = kPathField; j < kPathField + kPathBounds; ++j) empty = empty && f[j] == 0;
      if (!empty) return bad(at, "\"path_unexplained\" is -1 (no path) but the other path fields are not empty");
    } else {
      // The path spans the stretch: its parts sum to "before_ns" exactly
      // (checked without overflowing).
      std::int64_t left = f[4];
      for (std::size_t j = kPathField; j <= kPathField + kPathBounds; ++j) {
        if (f[j] < 0 || f[j] > left) return bad(at, "the path's parts do not sum to \"before_ns\"");
        left -= f[j];
      }
      if (left != 0) return bad(at, "the path's parts do not sum to \"before_ns\"");
      if (top < -1 || top >= n_names) return bad(at, "\"path_top\" is not an index into \"names\" or -1");
      if (top_ns < 0 || top_ns > f[4] || (top == -1 && top_ns != 0)) {
        return bad(at, "\"path_top_ns\" is negative, beyond \"before_ns\", or set without \"path_top\"");
      }
    }
    // base + start and base + end must not overflow; end >= start; the
    // parts fit in the stretch, checked without adding them.
    if (f[3] < f[2] || (base > 0 && f[3] > kMax - base) || (base < 0 && f[3] + base < -kMax)) {
      return bad(at, "\"end_ns\" is before \"start_ns\" or out of range");
    }
    if (f[5] > f[4] || f[6] > f[4] - f[5] || f[7] > f[4] - f[5] - f[6]) {
      return bad(at, "the parts of \"before_ns\" do not fit in it");
    }
    RankCollective rc;
    rc.group = static_cast<std::int32_t>(f[0]);
    rc.step = f[1];
    rc.start_ns = base + f[2];
    rc.end_ns = base + f[3];
    rc.before_ns = f[4];
    rc.computation_ns = f[5];
    rc.communication_ns = f[6];
    rc.input_ns = f[7];
    rc.top_kernel = static_cast<std::int32_t>(f[8]);
    rc.top_kernel_ns = f[9];
    rc.top_comm = static_cast<std::int32_t>(f[10]);
    rc.top_comm_ns = f[11];
    rc.top_host = static_cast<std::int32_t>(f[12]);
    rc.top_host_ns = f[13];
    rc.seq = f[14];
    rc.has_path = unexplained >= 0;
    if (rc.has_path) {
      for (std::size_t j = 0; j < kPathBounds; ++j) rc.path_ns[j] = f[kPathField + j];
      rc.path_unexplained_ns = unexplained;
      rc.path_top = static_cast<std::int32_t>(top);
      rc.path_top_ns = top_ns;
    }
    r->collectives.push_back(rc);
  }
  return Status();
}

Result<RankSummary> parse_rank(const JsonValue& o, const std::string& where, std::int64_t version) {
  if (!o.is_object()) return bad(where, "not an object");
  RankSummary r;
  TPROF_TRY_ASSIGN(r.rank, get_int(o, where, "rank"));
  if (r.rank < -1) return bad(where, "\"rank\" is below -1");
  TPROF_TRY_ASSIGN(r.source, get_string(o, where, "source"));
  std::string verdict;
  TPROF_TRY_ASSIGN(verdict, get_string(o, where, "verdict"));
  bool known = false;
  for (int i = 0; i < kVerdictCount && !known; ++i) {
    if (verdict_name(static_cast<Verdict>(i)) == verdict) {
      r.verdict = static_cast<Verdict>(i);
      known = true;
    }
  }
  if (!known) return bad(where, "unknown verdict \"" + verdict + "\"");
  const JsonValue* dev = o.find("has_device");
  if (dev == nullptr || !dev->is_bool()) return bad(where, "\"has_device\" is missing or not true/false");
  r.has_device = dev->as_bool();
  const JsonValue* steps = nullptr;
  TPROF_TRY_ASSIGN(steps, get_array(o, where, "steps"));
  for (std::size_t i = 0; i < steps->items().size(); ++i) {
    const JsonValue& s = steps->items()[i];
    const std::string at = where + ".steps[" + std::to_string(i) + "]";
    // Version 3 adds steady_ns, device_ns and cpu_ns (-1: unknown, a step
    // merged from an older summary).
    const std::size_t fields = version >= 3 ? 8 : 5;
    const std::string shape = "not an array of " + std::to_string(fields) + " integers";
    std::int64_t f[8] = {0, 0, 0, 0, 0, -1, -1, -1};
    if (!s.is_array() || s.items().size() != fields) return bad(at, shape);
    for (std::size_t j = 0; j < fields; ++j) {
      if (!s.items()[j].is_number() || !s.items()[j].get_int(&f[j])) return bad(at, shape);
    }
    // f[2] + f[3] + f[4] == f[1], without the sum (it could overflow).
    if (f[1] < 0 || f[2] < 0 || f[3] < 0 || f[4] < 0 || f[2] > f[1] || f[3] > f[1] - f[2] ||
        f[4] != f[1] - f[2] - f[3]) {
      return bad(at, "the phases are negative or do not sum to the step");
    }
    if (f[5] < -1 || f[6] < -1 || f[7] < -1) return bad(at, "steady_ns, device_ns or cpu_ns is below -1");
    r.steps.push_back({f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]});
  }
  const JsonValue* overlap = o.find("hta_comm_comp_overlap");
  if (overlap == nullptr || !overlap->is_object()) return bad(where, "\"hta_comm_comp_overlap\" is missing or not an object");
  TPROF_TRY_ASSIGN(r.comm_comp_overlap_ns, get_int(*overlap, where + ".hta_comm_comp_overlap", "overlap_ns"));
  TPROF_TRY_ASSIGN(r.comm_ns, get_int(*overlap, where + ".hta_comm_comp_overlap", "comm_ns"));
  const JsonValue* types = nullptr;
  TPROF_TRY_ASSIGN(types, get_array(o, where, "hta_kernel_types"));
  for (std::size_t i = 0; i < types->items().size(); ++i) {
    const JsonValue& k = types->items()[i];
    const std::string at = where + ".hta_kernel_types[" + std::to_string(i) + "]";
    if (!k.is_object()) return bad(at, "not an object");
    KernelTypeTime t;
    TPROF_TRY_ASSIGN(t.kernel_type, get_string(k, at, "kernel_type"));
    TPROF_TRY_ASSIGN(t.ns, get_int(k, at, "ns"));
    r.kernel_types.push_back(std::move(t));
  }
  if (const JsonValue* ws = o.find("world_size"); ws != nullptr) {
    if (!ws->is_number() || !ws->get_int(&r.world_size)) return bad(where, "\"world_size\" is not an integer");
  }
  // Which process and when (optional: summaries written before tprof kept
  // them have neither; their ranks never group as windows).
  if (const JsonValue* worker = o.find("worker"); worker != nullptr) {
    if (!worker->is_string()) return bad(where, "\"worker\" is not a string");
    r.worker = worker->text();
  }
  for (auto [key, field] : {std::pair{"pid", &r.pid}, std::pair{"start_ns", &r.start_ns}, std::pair{"end_ns", &r.end_ns}}) {
    if (const JsonValue* x = o.find(key); x != nullptr) {
      if (!x->is_number() || !x->get_int(field)) return bad(where, "\"" + std::string(key) + "\" is not an integer");
    }
  }
  if (r.pid < -1) return bad(where, "\"pid\" is below -1");
  if (r.end_ns < r.start_ns) return bad(where, "\"end_ns\" is before \"start_ns\"");
  const JsonValue* colls = o.find("collectives");
  r.has_collectives = colls != nullptr;
  if (colls != nullptr) TPROF_TRY(parse_collectives(o, where, version, &r));
  return r;
}

}  // namespace

Result<JobSummary> parse_rank_summary_json(std::string_view text) {
  Result<JsonValue> doc = JsonValue::parse(text);
  if (!doc) return Error(ErrorCode::kFormat, "not a tprof rank summary: " + doc.error().to_string());
  if (!doc->is_object()) return bad("top level", "not an object");
  const JsonValue* format = doc->find("format");
  if (format == nullptr || !format->is_string() || format->text() != kRankSummaryFormat) {
    return bad("top level", "\"format\" is not \"" + std::string(kRankSummaryFormat) + "\" (make one with tprof summarize TRACE)");
  }
  std::int64_t version = 0;
  TPROF_TRY_ASSIGN(version, get_int(*doc, "top level", "version"));
  if (version < 1 || version > kRankSummaryVersion) {
    return Error(ErrorCode::kUnsupported, "rank summary version " + std::to_string(version) +
                                              "; this tprof reads versions 1 to " + std::to_string(kRankSummaryVersion) +
                                              " (summarize the trace again)");
  }
  const JsonValue* ranks = nullptr;
  TPROF_TRY_ASSIGN(ranks, get_array(*doc, "top level", "ranks"));
  JobSummary job;
  for (std::size_t i = 0; i < ranks->items().size(); ++i) {
    RankSummary r;
    TPROF_TRY_ASSIGN(r, parse_rank(ranks->items()[i], "ranks[" + std::to_string(i) + "]", version));
    job.ranks.push_back(std::move(r));
  }
  return job;
}

}  // namespace tprof
