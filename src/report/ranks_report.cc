// The job view as text, JSON and Markdown, and the rank summary file
// (written with JsonWriter, read back with JsonValue).
#include <cstdio>
#include <string>

#include "src/analyze/diagnose_context.h"
#include "src/base/json_writer.h"
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
  std::string s = std::to_string(v.ranks.size()) + (v.ranks.size() == 1 ? " rank" : " ranks") + " (numbered by " +
                  (v.ranks_from_file_names ? "file name order: a trace has no distributedInfo.rank" : "distributedInfo.rank") +
                  "), " + std::to_string(v.ranks_with_steps) + " with steps";
  if (v.ranks_with_steps > 0) {
    s += "; job median step " + internal::format_ns(v.median_step_ns) + ", ranks' MAD " + internal::format_ns(v.ranks_mad_ns);
  }
  return s;
}

std::string straggler_line(const Straggler& s) {
  return "rank " + std::to_string(s.rank) + ": median step " + internal::format_ns(s.median_step_ns) + ", +" +
         internal::format_ns(s.excess_ns) + " (+" + pct_text(s.excess_pct, 1) + ") over the job median (noise " +
         internal::format_ns(s.noise_ns) + "); slow in " + s.phase + ": " + (s.phase_excess_ns >= 0 ? "+" : "") +
         internal::format_ns(s.phase_excess_ns) + " per step over the ranks' median";
}

std::string overlap_text(const CommCompOverlap& o) {
  return "rank " + std::to_string(o.rank) + " " + (o.overlap_pct ? pct_text(*o.overlap_pct, 2) : std::string("n/a"));
}

}  // namespace

std::string format_job_text(const JobView& v) {
  std::string out = header_line(v) + "\n\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%6s %6s %12s %11s %12s %14s %12s  %-20s %s\n", "rank", "steps", "median step",
                "step MAD", "computation", "communication", "idle", "verdict", "file");
  out += buf;
  for (const RankRow& r : v.ranks) {
    std::snprintf(buf, sizeof buf, "%6lld %6lld %12s %11s %12s %14s %12s  %-20s ", static_cast<long long>(r.rank),
                  static_cast<long long>(r.steps), internal::format_ns(r.median_step_ns).c_str(),
                  internal::format_ns(r.step_mad_ns).c_str(), internal::format_ns(r.median_computation_ns).c_str(),
                  internal::format_ns(r.median_communication_ns).c_str(), internal::format_ns(r.median_idle_ns).c_str(),
                  std::string(verdict_name(r.verdict)).c_str());
    out += buf + r.source + "\n";
  }
  out += "(per-rank medians over its steps; the phases split each step: docs/scale.md)\n\n";
  if (v.stragglers.empty()) {
    out += std::string("Stragglers: none (slower than the job median by more than ") + kNoiseRule + ")\n";
  } else {
    out += std::string("Stragglers (slower than the job median by more than ") + kNoiseRule + "):\n";
    for (const Straggler& s : v.stragglers) out += "  " + straggler_line(s) + "\n";
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
           " | " + internal::format_ns(r.step_mad_ns) + " | " + internal::format_ns(r.median_computation_ns) + " | " +
           internal::format_ns(r.median_communication_ns) + " | " + internal::format_ns(r.median_idle_ns) + " | " +
           std::string(verdict_name(r.verdict)) + " | `" + r.source + "` |\n";
  }
  out += std::string("\n## Stragglers\n\nSlower than the job median by more than ") + kNoiseRule + ".\n\n";
  if (v.stragglers.empty()) out += "None.\n";
  for (const Straggler& s : v.stragglers) out += "- " + straggler_line(s) + "\n";
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
      w.key("steps"); w.value_int(r.steps);
      w.key("median_step_ns"); w.value_int(r.median_step_ns);
      w.key("step_mad_ns"); w.value_int(r.step_mad_ns);
      w.key("median_computation_ns"); w.value_int(r.median_computation_ns);
      w.key("median_communication_ns"); w.value_int(r.median_communication_ns);
      w.key("median_idle_ns"); w.value_int(r.median_idle_ns);
      w.end_object();
    }
    w.end_array();
    w.key("job");
    w.begin_object();
    w.key("ranks_with_steps"); w.value_int(v.ranks_with_steps);
    w.key("median_step_ns"); w.value_int(v.median_step_ns);
    w.key("ranks_mad_ns"); w.value_int(v.ranks_mad_ns);
    w.end_object();
    w.key("stragglers");
    w.begin_array();
    for (const Straggler& s : v.stragglers) {
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
          l.end_array();
        }
        w.value_raw(line);
      }
      w.end_array();
      w.key("step_fields");
      w.begin_array();
      for (const char* f : {"step", "dur_ns", "computation_ns", "communication_ns", "idle_ns"}) w.value_string(f);
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

Result<RankSummary> parse_rank(const JsonValue& o, const std::string& where) {
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
    std::int64_t f[5] = {};
    if (!s.is_array() || s.items().size() != 5) return bad(at, "not an array of 5 integers");
    for (std::size_t j = 0; j < 5; ++j) {
      if (!s.items()[j].is_number() || !s.items()[j].get_int(&f[j])) return bad(at, "not an array of 5 integers");
    }
    // f[2] + f[3] + f[4] == f[1], without the sum (it could overflow).
    if (f[1] < 0 || f[2] < 0 || f[3] < 0 || f[4] < 0 || f[2] > f[1] || f[3] > f[1] - f[2] ||
        f[4] != f[1] - f[2] - f[3]) {
      return bad(at, "the phases are negative or do not sum to the step");
    }
    r.steps.push_back({f[0], f[1], f[2], f[3], f[4]});
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
  if (version != kRankSummaryVersion) {
    return Error(ErrorCode::kUnsupported, "rank summary version " + std::to_string(version) + "; this tprof reads version " +
                                              std::to_string(kRankSummaryVersion) + " (summarize the trace again)");
  }
  const JsonValue* ranks = nullptr;
  TPROF_TRY_ASSIGN(ranks, get_array(*doc, "top level", "ranks"));
  JobSummary job;
  for (std::size_t i = 0; i < ranks->items().size(); ++i) {
    RankSummary r;
    TPROF_TRY_ASSIGN(r, parse_rank(ranks->items()[i], "ranks[" + std::to_string(i) + "]"));
    job.ranks.push_back(std::move(r));
  }
  return job;
}

}  // namespace tprof
