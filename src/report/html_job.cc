// tprof report DIR: the job view as one self-contained page (docs/report.md,
// "Many ranks"; definitions in docs/scale.md). Per-rank step bars, the
// straggler and the others' wait, comm/compute overlap, verdicts and slow
// ranks, drawn here as inline SVG and HTML: the page fetches nothing and
// runs one tiny script that only marks it drawn (body[data-rendered]) and
// records its width for the layout test. Every name from a trace goes
// through safe_text and html_escape; long names are cut by CSS, with the
// full text in a title. The text view of `tprof diagnose DIR` closes the page.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

#include "src/analyze/diagnose_context.h"
#include "src/analyze/ranks_collectives.h"
#include "src/base/safe_text.h"
#include "src/report/html_job_page.h"
#include "tprof/ranks.h"

namespace tprof {

namespace {

using internal::format_ns;
using internal::job_page_script;
using internal::job_page_style;

// Steps drawn per rank: enough for any window a person reads bar by bar;
// a longer trace draws its first ones and says so.
constexpr std::size_t kMaxStepsDrawn = 400;
// SVG user units: one step's slot, its bar, the strip's height.
constexpr int kSlot = 10;
constexpr int kBar = 8;
constexpr int kStripHeight = 60;
// One step per rank: a horizontal bar per rank instead, its length the
// step's time (SVG user units across the strip, and the strip's height).
constexpr int kHorizontalWidth = 1000;
constexpr int kHorizontalHeight = 20;

std::string esc(std::string_view s) { return internal::page_text(s); }
std::string name_html(std::string_view s) { return internal::page_name(s); }

std::string pct_text(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f%%", decimals, v);
  return buf;
}

// Percent of `part` in `whole` as an SVG/CSS length, 2 decimals.
std::string share(std::int64_t part, std::int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return buf;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string verdict_html(const RankRow& r) {
  if (!r.waiting_for) return "<span class=\"verdict\">" + esc(verdict_name(r.verdict)) + "</span>";
  return "<span class=\"verdict waiting\">waiting for rank " + std::to_string(r.waiting_for->rank) + "</span> at " +
         name_html(r.waiting_for->collective);
}



std::string header_html(const JobView& v) {
  std::size_t traces = 0;
  for (const RankRow& r : v.ranks) traces += r.windows.size();
  std::string s = std::to_string(v.ranks.size()) + (v.ranks.size() == 1 ? " rank" : " ranks");
  if (traces > v.ranks.size()) s += " from " + std::to_string(traces) + " traces (one process's profiling windows make one rank)";
  if (v.world_size > static_cast<std::int64_t>(v.ranks.size())) {
    s += ", of " + std::to_string(v.world_size) + " in the job";
  }
  s += v.ranks_from_file_names ? "; numbered in file-name order (a trace has no rank number)"
                               : "; numbered as the traces number them";
  if (v.ranks_with_steps > 0) {
    s += ". The job's median step is " + format_ns(v.median_step_ns) + " (the median of the ranks' median steps).";
  } else {
    s += ". No rank has steps (ProfilerStep, or a repeated range).";
  }
  return "<p class=\"sub\">" + esc(s) + "</p>\n";
}

std::string causes_text(const Straggler& s) {
  std::string out;
  for (std::size_t i = 0; i < s.before.size(); ++i) out += (i == 0 ? "" : ", ") + s.before[i].what;
  return out;
}

// The headline: who makes the others wait, which ranks are slow.
std::string summary_html(const JobView& v) {
  std::string out = "<section id=\"summary\"><h2>In short</h2>\n<ul>\n";
  for (const Straggler& s : v.stragglers) {
    out += "<li><b>Rank " + std::to_string(s.rank) + " is the straggler</b>: it arrives last at " +
           std::to_string(s.last_at) + " of the " + std::to_string(s.collectives) +
           " collectives it joins, and the other ranks wait " + esc(format_ns(s.wait_per_step_ns)) +
           (s.steps > 0 ? " per step" : " in the window") + " for it (" + esc(pct_text(s.wait_pct, 1)) +
           (s.steps > 0 ? " of a step" : " of the collectives' span") + ")";
    out += s.before.empty() ? ".</li>\n" : "; before arriving it spends longer than they do in " + esc(causes_text(s)) + ".</li>\n";
  }
  if (!v.network.groups.empty()) {
    out += "<li><b>Slow transfer" + std::string(v.network.groups.size() > 1 ? "s" : "") + "</b>: " +
           esc(internal::network_who_text(v.network)) + ".</li>\n";
  }
  if (v.stragglers.empty() && v.network.suspects.empty() && v.network.followers.empty()) {
    out += "<li>No straggler: no rank arrives last at the collectives often enough, and long enough, to hold the others back";
    out += v.latest ? " (rank " + std::to_string(v.latest->rank) + " is the one they wait for most).</li>\n" : ".</li>\n";
  }
  std::int64_t waiting = 0;
  for (const RankRow& r : v.ranks) waiting += r.waiting_for ? 1 : 0;
  if (waiting > 0) {
    out += "<li>" + std::to_string(waiting) + (waiting == 1 ? " rank spends" : " ranks spend") +
           " its step waiting for a straggler: its communication time is that wait, which overlapping will not cure.</li>\n";
  }
  if (v.slow_ranks.empty()) {
    out += "<li>No slow rank: no rank's median step is longer than the job's by more than the noise.</li>\n";
  } else {
    out += "<li>Slow " + std::string(v.slow_ranks.size() == 1 ? "rank" : "ranks") + ":";
    for (std::size_t i = 0; i < v.slow_ranks.size(); ++i) {
      out += std::string(i == 0 ? " " : ", ") + "rank " + std::to_string(v.slow_ranks[i].rank) + " (+" +
             esc(pct_text(v.slow_ranks[i].excess_pct, 1)) + ", in " + esc(v.slow_ranks[i].phase) + ")";
    }
    out += ".</li>\n";
  }
  return out + "</ul></section>\n";
}

std::string step_group_open(const RankRow& r, const RankStep& s) {
  return "<g class=\"step\" data-step=\"" + std::to_string(s.step) + "\" data-dur-ns=\"" + std::to_string(s.dur_ns) +
         "\" data-computation-ns=\"" + std::to_string(s.computation_ns) + "\" data-communication-ns=\"" +
         std::to_string(s.communication_ns) + "\" data-idle-ns=\"" + std::to_string(s.idle_ns) + "\"><title>" +
         esc("rank " + std::to_string(r.rank) + ", step " + std::to_string(s.step) + ": " + format_ns(s.dur_ns) +
             " = computation " + format_ns(s.computation_ns) + " + exposed communication " +
             format_ns(s.communication_ns) + " + idle " + format_ns(s.idle_ns)) +
         "</title>";
}

// A rank's one step as a horizontal stacked bar (computation, exposed
// communication, idle from the left), its length the step's time on one
// scale for every rank (max_ns): with a step per rank, vertical bars would
// each fill a strip alone and compare nothing.
std::string hbar_svg(const RankRow& r, std::int64_t max_ns) {
  std::string out = "<svg class=\"bars horizontal\" viewBox=\"0 0 " + std::to_string(kHorizontalWidth) + " " +
                    std::to_string(kHorizontalHeight) + "\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"rank " +
                    std::to_string(r.rank) + ": 1 step\">\n";
  if (r.step_list.empty()) return out + "</svg>";
  const RankStep& s = r.step_list[0];
  const double scale = max_ns > 0 ? static_cast<double>(kHorizontalWidth) / static_cast<double>(max_ns) : 0.0;
  out += step_group_open(r, s);
  double x = 0;
  for (const auto& [ns, cls] : {std::pair{s.computation_ns, "c-comp"}, std::pair{s.communication_ns, "c-comm"},
                                std::pair{s.idle_ns, "c-idle"}}) {
    const double w = static_cast<double>(ns) * scale;
    if (ns > 0) {
      out += "<rect class=\"" + std::string(cls) + "\" x=\"" + num(x) + "\" y=\"2\" width=\"" + num(w) + "\" height=\"" +
             std::to_string(kHorizontalHeight - 4) + "\"/>";
    }
    x += w;
  }
  return out + "</g>\n</svg>";
}

// One rank's steps as stacked bars: computation at the bottom, exposed
// communication, idle on top; one y scale for every rank (max_ns), one
// x slot per step so that step k of every rank lines up.
std::string bars_svg(const RankRow& r, std::size_t slots, std::int64_t max_ns) {
  const std::size_t drawn = std::min(r.step_list.size(), kMaxStepsDrawn);
  std::string out = "<svg class=\"bars\" viewBox=\"0 0 " + std::to_string(std::max<std::size_t>(slots, 1) * kSlot) + " " +
                    std::to_string(kStripHeight) + "\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"rank " +
                    std::to_string(r.rank) + ": " + std::to_string(drawn) + " steps\">\n";
  const double scale = max_ns > 0 ? static_cast<double>(kStripHeight) / static_cast<double>(max_ns) : 0.0;
  for (std::size_t i = 0; i < drawn; ++i) {
    const RankStep& s = r.step_list[i];
    const double x = static_cast<double>(i * kSlot + 1);
    out += step_group_open(r, s);
    double y = kStripHeight;
    for (const auto& [ns, cls] : {std::pair{s.computation_ns, "c-comp"}, std::pair{s.communication_ns, "c-comm"},
                                  std::pair{s.idle_ns, "c-idle"}}) {
      const double h = static_cast<double>(ns) * scale;
      y -= h;
      if (ns > 0) {
        out += "<rect class=\"" + std::string(cls) + "\" x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" +
               std::to_string(kBar) + "\" height=\"" + num(h) + "\"/>";
      }
    }
    out += "</g>\n";
  }
  // Where one profiling window ends and the next begins.
  std::size_t at = 0;
  for (std::size_t w = 0; w + 1 < r.window_steps.size(); ++w) {
    at += static_cast<std::size_t>(std::max<std::int64_t>(0, r.window_steps[w]));
    if (at == 0 || at >= drawn) continue;
    const std::string x = std::to_string(at * kSlot);
    out += "<line class=\"window-edge\" x1=\"" + x + "\" x2=\"" + x + "\" y1=\"0\" y2=\"" + std::to_string(kStripHeight) +
           "\" vector-effect=\"non-scaling-stroke\"/>\n";
  }
  return out + "</svg>";
}

std::string ranks_html(const JobView& v) {
  std::size_t slots = 0, drawn_total = 0;
  std::int64_t max_ns = 0;
  for (const RankRow& r : v.ranks) {
    const std::size_t drawn = std::min(r.step_list.size(), kMaxStepsDrawn);
    slots = std::max(slots, drawn);
    drawn_total += drawn;
    for (std::size_t i = 0; i < drawn; ++i) max_ns = std::max(max_ns, r.step_list[i].dur_ns);
  }
  std::int64_t straggler = v.stragglers.empty() ? -1 : v.stragglers[0].rank;
  const bool horizontal = slots == 1;
  std::string out = "<section id=\"ranks\" data-ranks=\"" + std::to_string(v.ranks.size()) + "\" data-steps-drawn=\"" +
                    std::to_string(drawn_total) + "\" data-max-step-ns=\"" + std::to_string(max_ns) +
                    "\" data-layout=\"" + (horizontal ? "horizontal" : "vertical") + "\"><h2>Steps per rank</h2>\n";
  out += "<p class=\"legend\"><span><i class=\"sw c-comp\"></i>computation</span><span><i class=\"sw c-comm\"></i>"
         "exposed communication (not hidden under computation; waiting for a late rank counts here)</span><span>"
         "<i class=\"sw c-idle\"></i>idle (no device work)</span></p>\n";
  if (horizontal) {
    out += "<p class=\"note\">Each rank has one step: its bar runs from the left, as long as the step, every rank on the "
           "same scale (the longest is " +
           esc(format_ns(max_ns)) + "). Hover a bar for its numbers.</p>\n";
  } else {
    out += "<p class=\"note\">Each bar is one step, in time order; every rank on the same scale (the tallest bar is " +
           esc(format_ns(max_ns)) + "). A dashed line separates one process's profiling windows. Hover a bar for its numbers.</p>\n";
  }
  for (const RankRow& r : v.ranks) {
    const std::size_t drawn = std::min(r.step_list.size(), kMaxStepsDrawn);
    out += "<div class=\"rank-row" + std::string(r.rank == straggler ? " straggler" : "") + "\" data-rank=\"" +
           std::to_string(r.rank) + "\" data-steps=\"" + std::to_string(r.steps) + "\" data-drawn=\"" +
           std::to_string(drawn) + "\" data-windows=\"" + std::to_string(r.windows.size()) + "\">\n";
    out += "<div class=\"rank-label\"><b>rank " + std::to_string(r.rank) + (r.rank == straggler ? " (straggler)" : "") +
           "</b>" + verdict_html(r) + "<br>" + name_html(r.source);
    if (r.windows.size() > 1) out += "<br><span class=\"note\">" + std::to_string(r.windows.size()) + " windows</span>";
    out += "</div>\n";
    if (r.step_list.empty()) {
      out += "<div class=\"note\">no steps in this trace (ProfilerStep, or a repeated range)</div>\n";
    } else {
      out += (horizontal ? hbar_svg(r, max_ns) : bars_svg(r, slots, max_ns)) + "\n";
    }
    out += "<div class=\"rank-stats\">";
    if (r.steps == 1) {
      // One step has no spread to show: "±0 ns" would read as a measured one.
      out += "1 step: no spread; " + esc(format_ns(r.median_step_ns)) + "<br>computation " +
             esc(format_ns(r.median_computation_ns)) + ", exposed communication " +
             esc(format_ns(r.median_communication_ns)) + ", idle " + esc(format_ns(r.median_idle_ns));
    } else {
      out += std::to_string(r.steps) + " steps";
      if (drawn < r.step_list.size()) out += " (the first " + std::to_string(drawn) + " drawn)";
    }
    if (r.steps > 1) {
      out += "; median " + esc(format_ns(r.median_step_ns)) + " (&plusmn;" + esc(format_ns(r.step_mad_ns)) +
             ")<br>computation " + esc(format_ns(r.median_computation_ns)) + ", exposed communication " +
             esc(format_ns(r.median_communication_ns)) + ", idle " + esc(format_ns(r.median_idle_ns)) + " (medians)";
    }
    out += "</div>\n</div>\n";
  }
  return out + "</section>\n";
}

std::string straggler_story(const Straggler& s, const JobView& v) {
  const std::string per = s.steps > 0 ? " per step" : " in the window";
  std::string out = "<p>Rank " + std::to_string(s.rank) + " arrives last at " + std::to_string(s.last_at) + " of the " +
                    std::to_string(s.collectives) + " collectives it joins (" + std::to_string(s.ranks) +
                    " traced ranks each" + esc(internal::group_traced_text(s)) + "). The other ranks wait " + esc(format_ns(s.wait_per_step_ns)) + per +
                    " for it: " + esc(pct_text(s.wait_pct, 1)) +
                    (s.steps > 0 ? " of the job's median step (" + esc(format_ns(s.wait_ns)) + " over " +
                                       std::to_string(s.steps) + (s.steps == 1 ? " step)" : " steps)")
                                 : std::string(" of the traced collectives' span")) +
                    ", most at " + name_html(s.collective) + " (" + esc(s.on) + "). It arrives " +
                    esc(format_ns(s.lead_ns)) + " after the next-latest rank, and its collectives finish " +
                    esc(format_ns(s.after_arrival_ns)) + " after it arrives (medians).</p>\n";
  if (s.late_at_window_start > 0) {
    out += "<p>" + esc(internal::capitalized(internal::window_late_text(s))) + ".</p>\n";
  }
  if (s.compared == 0) {
    if (s.late_at_window_start == 0) {
      out += "<p class=\"note\">What it did before arriving cannot be compared: at none of its late collectives does the "
             "stretch since the previous collective start together on every rank.</p>\n";
    }
  } else {
    out += "<p>Before arriving, beyond what the other ranks do in the same stretch (" + std::string(s.steps > 0 ? "per step" : "in the window");
    if (s.compared < s.last_at) {
      out += ", at " + std::to_string(s.compared) + " of its " + std::to_string(s.last_at) + " late collectives";
    }
    out += "):</p>\n";
    if (s.before.empty()) {
      out += "<p class=\"note\">nothing stands out.</p>\n";
    } else {
      out += "<div class=\"grid2\" id=\"before\">\n";
      for (const ArrivalCause& a : s.before) {
        out += "<div>" + esc(a.what) + "</div><div class=\"meter cause\" data-cause=\"" + esc(a.what) +
               "\" data-excess-ns=\"" + std::to_string(a.excess_per_step_ns) + "\"><div style=\"width:" +
               share(std::min(a.excess_per_step_ns, s.wait_per_step_ns), s.wait_per_step_ns) + "%\"></div></div><div>+" +
               esc(format_ns(a.excess_per_step_ns)) + (a.top.empty() ? "" : ", longest: " + name_html(a.top)) + "</div>\n";
      }
      out += "</div>\n<p class=\"note\">Bars: the share of the others' wait that each cause explains.</p>\n";
    }
  }
  if (!s.advice.empty()) out += "<p><b>What to do:</b> " + esc(s.advice) + "</p>\n";
  // The ranks whose verdict is this wait.
  std::string rows;
  for (const RankRow& r : v.ranks) {
    if (!r.waiting_for || r.waiting_for->rank != s.rank) continue;
    rows += "<tr data-rank=\"" + std::to_string(r.rank) + "\"><td>rank " + std::to_string(r.rank) + "</td><td class=\"n\">" +
            esc(format_ns(r.waiting_for->wait_per_step_ns)) + "</td><td class=\"n\">" +
            esc(pct_text(r.waiting_for->wait_pct, 1)) + "</td><td>" + name_html(r.waiting_for->collective) + "</td></tr>\n";
  }
  if (!rows.empty()) {
    out += "<table class=\"waiting\"><thead><tr><th>waiting rank</th><th class=\"n\">waits per step</th><th class=\"n\">"
           "of a step</th><th>at</th></tr></thead><tbody>\n" +
           rows + "</tbody></table>\n";
  }
  return out;
}

std::string straggler_html(const JobView& v) {
  const Straggler* s = !v.stragglers.empty() ? &v.stragglers[0] : v.latest ? &*v.latest : nullptr;
  std::string out = "<section id=\"straggler\" data-named=\"" + std::string(v.stragglers.empty() ? "0" : "1") + "\"";
  if (s != nullptr) {
    out += " data-rank=\"" + std::to_string(s->rank) + "\" data-wait-per-step-ns=\"" + std::to_string(s->wait_per_step_ns) + "\"";
  }
  out += ">";
  if (!v.stragglers.empty()) {
    out += "<h2>The straggler" + std::string(v.stragglers.size() > 1 ? "s" : "") + " and the others' wait</h2>\n";
    for (const Straggler& st : v.stragglers) out += straggler_story(st, v);
  } else if (v.latest) {
    const Straggler& l = *v.latest;
    out += "<h2>Stragglers: none</h2>\n<p>No rank is named a straggler (it would have to arrive last at " +
           std::to_string(internal::kStragglerMinLate) + " collectives at least, at " +
           esc(pct_text(100.0 * l.share_needed, 0)) + " of those it joins, and make the others wait " +
           esc(pct_text(internal::kStragglerMinWaitPct, 0)) + " of a step). The rank the others wait for most:</p>\n" +
           straggler_story(l, v);
  } else if (v.alignment.matched > 0) {
    out += "<h2>Stragglers: none</h2>\n<p>No rank arrives last at a matched collective by more than the spread of its ends.</p>\n";
  } else {
    out += "<h2>Stragglers: none</h2>\n<p>Nothing to judge them by: " + esc(v.alignment.note) + ".</p>\n";
  }
  if (!v.network.groups.empty()) {
    out += "<h3>Slow transfers</h3>\n<p>" + esc(internal::capitalized(internal::kSlowTransferRule)) +
           ":</p>\n<ul id=\"slow-transfers\">\n";
    for (const SlowTransfer& t : v.network.groups) out += "<li>" + esc(internal::slow_transfer_text(t)) + "</li>\n";
    out += "</ul>\n<p>" + esc(internal::network_who_text(v.network)) + ".</p>\n<p><b>What to do:</b> " +
           esc(v.network.advice) + "</p>\n";
  }
  const CollectiveAlignment& a = v.alignment;
  if (a.matched > 0) {
    std::string line = "Collectives matched across ranks: " + std::to_string(a.matched) +
                       (a.matched_by_seq > 0 ? " (" + std::to_string(a.matched_by_seq) + " by their sequence number)" : "") +
                       ", on " + std::to_string(a.ranks_aligned) + " ranks. Their clocks were aligned on the collectives' "
                       "common ends, which agree within " + format_ns(a.end_spread_ns) +
                       " (median); the largest clock offset is " + (a.max_offset_ns < 0 ? "-" : "+") +
                       format_ns(a.max_offset_ns < 0 ? -a.max_offset_ns : a.max_offset_ns) + " (rank " +
                       std::to_string(a.max_offset_rank) + ").";
    if (a.unmatched > 0) {
      line += " " + std::to_string(a.unmatched) + " collective kernels end when no other traced rank's does (their peers "
              "are untraced) and are left out.";
    }
    if (v.world_size > static_cast<std::int64_t>(v.ranks.size())) {
      line += " Only " + std::to_string(v.ranks.size()) + " of " + std::to_string(v.world_size) +
              " ranks are traced: the latest traced rank may itself wait for an untraced one.";
    }
    out += "<p class=\"note\">" + esc(line) + "</p>\n";
  }
  return out + "</section>\n";
}

std::string overlap_html(const JobView& v) {
  std::string out = "<section id=\"overlap\"><h2>Communication hidden under computation, per rank</h2>\n"
                    "<p class=\"note\">The share of each rank's communication kernels' time during which computation "
                    "kernels run too (HolisticTraceAnalysis' comm/comp overlap). Communication not hidden is the "
                    "exposed communication of the step bars.</p>\n<div class=\"grid2\">\n";
  for (const CommCompOverlap& o : v.comm_comp_overlap) {
    out += "<div>rank " + std::to_string(o.rank) + "</div>";
    if (o.overlap_pct) {
      out += "<div class=\"meter\" data-rank=\"" + std::to_string(o.rank) + "\" data-overlap-pct=\"" + num(*o.overlap_pct) +
             "\"><div style=\"width:" + num(std::clamp(*o.overlap_pct, 0.0, 100.0)) + "%\"></div></div><div>" +
             esc(pct_text(*o.overlap_pct, 1)) + " of its communication overlaps computation</div>\n";
    } else {
      out += "<div class=\"meter\" data-rank=\"" + std::to_string(o.rank) + "\"></div><div>no communication kernels</div>\n";
    }
  }
  out += "</div>\n";
  if (!v.kernel_types.empty()) {
    out += "<p class=\"note\">GPU time of all ranks by kernel type: ";
    for (std::size_t i = 0; i < v.kernel_types.size(); ++i) {
      const KernelTypeRow& k = v.kernel_types[i];
      out += (i == 0 ? "" : "; ") + esc(k.kernel_type) + " " + esc(format_ns(k.ns)) + " (" + esc(pct_text(k.pct, 1)) + ")";
    }
    out += ".</p>\n";
  }
  return out + "</section>\n";
}

std::string verdicts_html(const JobView& v) {
  std::string out = "<section id=\"verdicts\"><h2>Verdicts per rank</h2>\n<table><colgroup><col style=\"width:6%\">"
                    "<col style=\"width:6%\"><col style=\"width:10%\"><col style=\"width:10%\"><col style=\"width:11%\">"
                    "<col style=\"width:12%\"><col style=\"width:9%\"><col style=\"width:18%\"><col style=\"width:18%\">"
                    "</colgroup><thead><tr><th>rank</th><th class=\"n\">steps</th><th class=\"n\">median step</th>"
                    "<th class=\"n\">its spread</th><th class=\"n\">computation</th><th class=\"n\">exposed comm.</th>"
                    "<th class=\"n\">idle</th><th>verdict</th><th>file</th></tr></thead><tbody>\n";
  for (const RankRow& r : v.ranks) {
    std::string verdict = r.waiting_for ? "waiting for rank " + std::to_string(r.waiting_for->rank) + " at " + r.waiting_for->collective
                                        : std::string(verdict_name(r.verdict));
    std::string files;
    for (std::size_t i = 0; i < r.windows.size(); ++i) files += (i == 0 ? "" : ", ") + r.windows[i];
    if (files.empty()) files = r.source;
    out += "<tr data-rank=\"" + std::to_string(r.rank) + "\"><td>" + std::to_string(r.rank) + "</td><td class=\"n\">" +
           std::to_string(r.steps) + "</td><td class=\"n\">" + esc(format_ns(r.median_step_ns)) + "</td><td class=\"n\">" +
           (r.steps == 1 ? std::string("none (1 step)") : r.steps == 0 ? std::string("&mdash;") : esc(format_ns(r.step_mad_ns))) +
           "</td><td class=\"n\">" + esc(format_ns(r.median_computation_ns)) +
           "</td><td class=\"n\">" + esc(format_ns(r.median_communication_ns)) + "</td><td class=\"n\">" +
           esc(format_ns(r.median_idle_ns)) + "</td><td title=\"" + esc(verdict) + "\">" + esc(verdict) +
           "</td><td title=\"" + esc(files) + "\">" + esc(r.windows.size() > 1 ? std::to_string(r.windows.size()) + " windows: " + files : files) +
           "</td></tr>\n";
  }
  out += "</tbody></table>\n<p class=\"note\">Medians over each rank's steps; its spread is the median absolute deviation "
         "of its steps. A verdict reads \"waiting for rank k\" where the rank's time goes to waiting for a straggler; "
         "its own trace's verdict is in the text view below.</p>\n</section>\n";
  return out;
}

std::string slow_html(const JobView& v) {
  std::string out = "<section id=\"slow-ranks\" data-slow=\"" + std::to_string(v.slow_ranks.size()) + "\"><h2>Slow ranks</h2>\n";
  if (v.slow_ranks.empty()) {
    out += "<p>None: no rank's median step is longer than the job's median by more than the noise (the larger of 3 "
           "times the ranks' spread, 3 times the rank's own spread, and 2% of the job's median step).";
    if (v.ranks_with_steps == 2) out += " Two ranks alone never show which one is slow.";
    out += "</p>\n";
  } else {
    out += "<ul>\n";
    for (const SlowRank& s : v.slow_ranks) {
      out += "<li data-rank=\"" + std::to_string(s.rank) + "\">Rank " + std::to_string(s.rank) + "'s median step is " +
             esc(format_ns(s.median_step_ns)) + ", " + esc(format_ns(s.excess_ns)) + " (" + esc(pct_text(s.excess_pct, 1)) +
             ") longer than the job's median (the noise is " + esc(format_ns(s.noise_ns)) + "). The extra time is " +
             esc(s.phase) + ": " + (s.phase_excess_ns >= 0 ? "+" : "") + esc(format_ns(s.phase_excess_ns)) +
             " per step over the ranks' median.</li>\n";
    }
    out += "</ul>\n";
  }
  out += "<p class=\"note\">In a synchronous job every rank's step is as long as the slowest one's: read the "
         "straggler above, not step lengths.</p>\n</section>\n";
  return out;
}

}  // namespace

std::string format_job_html(const JobView& v) {
  const std::string ranks = std::to_string(v.ranks.size()) + (v.ranks.size() == 1 ? " rank" : " ranks");
  std::string out = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>tprof: " +
                    esc(ranks) + "</title>\n<style>" + std::string(job_page_style()) + "</style></head>\n<body data-ranks=\"" +
                    std::to_string(v.ranks.size()) + "\">\n<h1>tprof report: " + esc(ranks) + "</h1>\n";
  out += header_html(v);
  out += summary_html(v);
  out += ranks_html(v);
  out += straggler_html(v);
  out += overlap_html(v);
  out += verdicts_html(v);
  out += slow_html(v);
  out += "<details id=\"text-view\"><summary>The same view as text (<code>tprof diagnose DIR</code>)</summary><pre>" +
         esc(format_job_text(v)) + "</pre></details>\n";
  out += job_page_script() + "</body></html>\n";
  return out;
}

namespace internal {

const char* job_page_style() {
  return R"css(
*{box-sizing:border-box}
html,body{margin:0;padding:0}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1d1f;background:#fff;padding:16px 24px;max-width:100%;overflow-wrap:anywhere}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e2e2e2;padding-bottom:4px}
p,li{max-width:72em}
.sub{color:#555;margin:0}
.name{display:inline-block;max-width:min(36em,100%);overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom;font-family:ui-monospace,monospace;font-size:12.5px}
.legend span{display:inline-block;margin-right:16px}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:4px}
.c-comp{background:#4c78a8;fill:#4c78a8}.c-comm{background:#f58518;fill:#f58518}.c-idle{background:#c9c9c9;fill:#c9c9c9}
.rank-row{display:grid;grid-template-columns:minmax(0,15em) minmax(0,1fr) minmax(0,15em);gap:12px;align-items:center;padding:6px 0;border-bottom:1px solid #f0f0f0}
.rank-row.straggler{background:#fff4e8}
.rank-label{min-width:0}
.rank-label b{display:block}
.rank-stats{font-size:12.5px;color:#444;min-width:0}
svg.bars{display:block;width:100%;height:60px;background:#fafafa}
svg.bars.horizontal{height:22px}
.window-edge{stroke:#333;stroke-dasharray:3 2}
.verdict{font-weight:600}.verdict.waiting{color:#b35c00}
.meter{height:12px;background:#eee;border-radius:3px;overflow:hidden}
.meter>div{height:100%;background:#54a24b}
.meter.cause>div{background:#e45756}
.grid2{display:grid;grid-template-columns:minmax(0,12em) minmax(0,1fr) minmax(0,22em);gap:8px 12px;align-items:center;max-width:72em}
table{border-collapse:collapse;width:100%;table-layout:fixed;font-size:13px}
th,td{text-align:left;padding:4px 6px;border-bottom:1px solid #eee;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
table.wrap td{white-space:normal;overflow-wrap:anywhere}
.note{color:#555;font-size:13px}
details{margin-top:28px}
pre{font:12px/1.35 ui-monospace,monospace;white-space:pre;overflow-x:auto;max-width:100%;background:#f6f6f6;padding:8px}
.c-a{background:#9ecae9;fill:#9ecae9}.c-b{background:#4c78a8;fill:#4c78a8}
.slower{color:#b3261e}.faster{color:#1b7f3b}
svg.pair{display:block;width:100%;height:26px;background:#fafafa}
@media (max-width:700px){.rank-row{grid-template-columns:minmax(0,1fr)}.grid2{grid-template-columns:minmax(0,1fr)}}
)css";
}

std::string page_text(std::string_view s) { return html_escape(safe_text(s)); }

std::string page_name(std::string_view s) {
  return "<span class=\"name\" title=\"" + page_text(s) + "\">" + page_text(s) + "</span>";
}

std::string job_page_script() {
  // Cuts long names in their middle, where CSS's ellipsis would cut their
  // end (the part that tells kernels and files apart): each name box that
  // overflows gets as much of both ends as fits, measured on a canvas in
  // its own font (the whole name stays in its title). Then marks the page
  // drawn and records its width against the window's and the names still
  // overflowing, for the headless test (tests/html/chromium_job_test.sh).
  return "<script>(function(){var b=document.body,q='span.name,td[title]',mc=document.createElement('canvas')"
         ".getContext('2d'),todo=[],cut=0,left=0;"
         "function fit(s,w){if(mc.measureText(s).width<=w)return s;var c=Array.from(s),lo=0,hi=c.length-1;"
         "function at(k){var a=Math.ceil(k/2);return c.slice(0,a).join('')+'\\u2026'+c.slice(c.length-(k-a)).join('');}"
         "while(lo<hi){var m=(lo+hi+1)>>1;if(mc.measureText(at(m)).width<=w)lo=m;else hi=m-1;}return at(lo);}"
         "document.querySelectorAll(q).forEach(function(e){if(e.clientWidth>0&&e.scrollWidth>e.clientWidth){"
         "var cs=getComputedStyle(e);todo.push([e,e.clientWidth-parseFloat(cs.paddingLeft)-parseFloat(cs.paddingRight)-2,"
         "cs.font]);}});"
         "todo.forEach(function(t){mc.font=t[2];t[0].textContent=fit(t[0].textContent,t[1]);"
         "t[0].setAttribute('data-elided','1');cut++;});"
         "document.querySelectorAll(q).forEach(function(e){if(e.scrollWidth>e.clientWidth+1)left++;});"
         "b.setAttribute('data-names-cut',cut);b.setAttribute('data-names-overflowing',left);"
         "b.setAttribute('data-scroll-width',document.documentElement.scrollWidth);"
         "b.setAttribute('data-window-width',window.innerWidth);b.setAttribute('data-rendered','1');})();</script>\n";
}

}  // namespace internal

}  // namespace tprof
