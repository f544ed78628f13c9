// tprof kernels output: a text table and the JSON contract.
#include <cmath>
#include <cstdio>

#include "src/analyze/diagnose_context.h"
#include "src/base/json_writer.h"
#include "src/report/kernel_names.h"
#include "tprof/kernels.h"

namespace tprof {

// The view's kernel names: short, and unique among the trace's kernels.
internal::KernelNames view_names(const KernelsSummary& k) {
  std::vector<std::string_view> names;
  for (const KernelStat& s : k.kernels) names.push_back(s.name);
  for (const RangeStat& r : k.ranges) names.push_back(r.name);
  return internal::KernelNames(names);
}

// A counter's sum: an integer as one ("38731776"), else 4 significant digits.
std::string counter_text(double v) {
  char b[64];
  if (std::fabs(v) < 9e15 && v == std::floor(v)) {
    std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
  } else {
    std::snprintf(b, sizeof b, "%.4g", v);
  }
  return b;
}

// The range profiler's ranges: per name, the count and the counters that
// are not zero (docs/diagnose.md, "Range profiler").
void append_ranges_text(std::string* out, const KernelsSummary& k, const internal::KernelNames& names) {
  std::int64_t total = 0;
  for (const RangeStat& r : k.ranges) total += r.count;
  *out += "Range profiler (CUPTI, cuda_profiler_range): " + std::to_string(total) + " ranges, " +
          std::to_string(k.ranges.size()) +
          " names; hardware counters summed per name, zeros left out (range times are not measured)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%7s  %s\n", "Count", "Name / counters");
  *out += line;
  for (const RangeStat& r : k.ranges) {
    std::snprintf(line, sizeof line, "%7lld  ", static_cast<long long>(r.count));
    *out += line + names.get(r.name) + "\n";
    for (const RangeCounter& c : r.counters) {
      if (c.sum == 0) continue;
      *out += "         " + c.name + " " + counter_text(c.sum) + "\n";
    }
  }
}

std::string format_kernels_text(const KernelsSummary& k) {
  std::string out;
  const internal::KernelNames names = view_names(k);
  if (k.kernels.empty()) {
    if (k.ranges.empty()) return "no device activity in the trace\n";
    append_ranges_text(&out, k, names);
    return out;
  }
  char line[512];
  std::snprintf(line, sizeof line, "%7s  %11s  %7s  %11s  %11s  %11s  %11s  %11s  %6s  %-16s  %s\n", "Count", "Total",
                "Share", "Mean", "Median", "p90", "Min", "Max", "CV", "Outlier steps", "Name");
  out += line;
  for (const KernelStat& s : k.kernels) {
    std::string steps;
    std::size_t shown = 0;
    for (const KernelOutlier& o : s.outliers) {
      if (shown == 4) {
        steps += ",+";
        steps += std::to_string(s.outliers.size() - 4);
        break;
      }
      if (shown) steps += ',';
      steps += o.step >= 0 ? std::to_string(o.step) : std::string("-");
      ++shown;
    }
    if (steps.empty()) steps.push_back('-');
    const double share = k.total_ns > 0 ? 100.0 * static_cast<double>(s.total_ns) / static_cast<double>(k.total_ns) : 0;
    std::snprintf(line, sizeof line, "%7lld  %11s  %7s  %11s  %11s  %11s  %11s  %11s  %6.3f  %-16s  %s\n",
                  static_cast<long long>(s.count), internal::format_ns(s.total_ns).c_str(),
                  internal::format_pct(share).c_str(),
                  internal::format_ns(static_cast<std::int64_t>(std::llround(s.mean_ns))).c_str(),
                  internal::format_ns(s.median_ns).c_str(), internal::format_ns(s.p90_ns).c_str(),
                  internal::format_ns(s.min_ns).c_str(), internal::format_ns(s.max_ns).c_str(), s.cv, steps.c_str(),
                  names.get(s.name).c_str());
    out += line;
  }
  if (!k.ranges.empty()) {
    out += "\n";
    append_ranges_text(&out, k, names);
  }
  return out;
}

std::string format_kernels_json(const KernelsSummary& k) {
  std::string out;
  {
    internal::JsonWriter w(&out, internal::JsonWriter::kPretty);
    w.begin_object();
    w.key("total_ns");
    w.value_int(k.total_ns);
    w.key("kernels");
    w.begin_array();
    const internal::KernelNames names = view_names(k);
    for (const KernelStat& s : k.kernels) {
      w.begin_object();
      w.key("name");
      w.value_string(s.name);
      w.key("short_name");
      w.value_string(names.get(s.name));
      w.key("category");
      w.value_string(s.category);
      w.key("count");
      w.value_int(s.count);
      w.key("total_ns");
      w.value_int(s.total_ns);
      w.key("mean_ns");
      w.value_double(std::round(s.mean_ns * 1000.0) / 1000.0);
      w.key("median_ns");
      w.value_int(s.median_ns);
      w.key("p90_ns");
      w.value_int(s.p90_ns);
      w.key("min_ns");
      w.value_int(s.min_ns);
      w.key("max_ns");
      w.value_int(s.max_ns);
      w.key("cv");
      w.value_double(std::round(s.cv * 1e4) / 1e4);
      w.key("outliers");
      w.begin_array();
      for (const KernelOutlier& o : s.outliers) {
        w.begin_object();
        w.key("step");
        w.value_int(o.step);
        w.key("ts_ns");
        w.value_int(o.ts_ns);
        w.key("dur_ns");
        w.value_int(o.dur_ns);
        w.end_object();
      }
      w.end_array();
      w.end_object();
    }
    w.end_array();
    // Range-profiler ranges (only when the trace has them): counters by name.
    if (!k.ranges.empty()) {
      w.key("ranges");
      w.begin_array();
      for (const RangeStat& r : k.ranges) {
        w.begin_object();
        w.key("name");
        w.value_string(r.name);
        w.key("short_name");
        w.value_string(names.get(r.name));
        w.key("count");
        w.value_int(r.count);
        w.key("counters");
        w.begin_object();
        for (const RangeCounter& c : r.counters) {
          w.key(c.name);
          w.value_double(c.sum);
        }
        w.end_object();
        w.end_object();
      }
      w.end_array();
    }
    w.end_object();
  }
  out.push_back('\n');
  return out;
}

}  // namespace tprof
