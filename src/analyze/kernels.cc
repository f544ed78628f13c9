// Per-name statistics of device activity (tprof kernels).
#include "tprof/kernels.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <unordered_map>

#include "src/analyze/diagnose_context.h"
#include "src/base/saturate.h"
#include "src/trace/json_value.h"

namespace tprof {

KernelsSummary compute_kernels(const Trace& trace) { return internal::kernel_stats(internal::DiagnoseContext(trace)); }

KernelStat internal::kernel_stat(const internal::DiagnoseContext& c, std::string name, std::string category,
                                 const std::vector<const internal::DeviceOp*>& ops) {
  KernelStat s;
  s.name = std::move(name);
  s.category = std::move(category);
  std::vector<std::int64_t> d;
  for (const internal::DeviceOp* op : ops) d.push_back(op->end - op->start);
  std::sort(d.begin(), d.end());
  s.count = static_cast<std::int64_t>(d.size());
  if (d.empty()) return s;
  // The total saturates (ten kernels of 4.6e15 µs do not fit int64 ns);
  // the mean is summed in double, so it stays right when the total cannot.
  double sum = 0;
  for (std::int64_t v : d) {
    s.total_ns = internal::sat_add(s.total_ns, v);
    sum += static_cast<double>(v);
  }
  s.mean_ns = sum / static_cast<double>(s.count);
  // The median of an even count is the mean of the two middle ones (as
  // pandas, HTA's, takes it; issue 38's eighth round: 943.2 us, the lower of
  // 943.2 and 1409.7, was called a median).
  s.median_ns = d.size() % 2 == 1 ? d[d.size() / 2] : std::midpoint(d[d.size() / 2 - 1], d[d.size() / 2]);
  s.p90_ns = internal::nearest_rank(d, 0.9);
  s.min_ns = d.front();
  s.max_ns = d.back();
  double var = 0;
  for (std::int64_t v : d) var += (static_cast<double>(v) - s.mean_ns) * (static_cast<double>(v) - s.mean_ns);
  var /= static_cast<double>(s.count);
  s.cv = s.mean_ns > 0 ? std::sqrt(var) / s.mean_ns : 0;
  if (s.count >= 3) {
    const double hi = 1.5 * static_cast<double>(s.median_ns), lo = 0.5 * static_cast<double>(s.median_ns);
    for (const internal::DeviceOp* op : ops) {
      const double v = static_cast<double>(op->end - op->start);
      if (v > hi || v < lo) s.outliers.push_back({op->event, c.step_number(op->step), op->start, op->end - op->start});
    }
  }
  return s;
}

KernelsSummary internal::kernel_stats(const internal::DiagnoseContext& c) {
  const Trace& trace = c.trace;
  KernelsSummary out;
  std::unordered_map<StrId, std::size_t> index;
  std::vector<std::vector<const internal::DeviceOp*>> ops;
  for (const internal::DeviceOp& op : c.device) {
    const StrId name = trace.events.name[op.event];
    auto [it, fresh] = index.emplace(name, ops.size());
    if (fresh) {
      ops.emplace_back();
      KernelStat s;
      s.name = std::string(trace.str(name));
      s.category = op.cls == internal::DeviceClass::kMemcpy   ? "memcpy"
                   : op.cls == internal::DeviceClass::kMemset ? "memset"
                                                              : "kernel";
      out.kernels.push_back(std::move(s));
    }
    ops[it->second].push_back(&op);
  }
  for (std::size_t k = 0; k < ops.size(); ++k) {
    KernelStat& s = out.kernels[k];
    s = internal::kernel_stat(c, std::move(s.name), std::move(s.category), ops[k]);
    out.total_ns = internal::sat_add(out.total_ns, s.total_ns);  // two saturated kernels made -2
  }
  std::stable_sort(out.kernels.begin(), out.kernels.end(),
                   [](const KernelStat& a, const KernelStat& b) { return a.total_ns > b.total_ns; });
  out.ranges = range_stats(c);
  return out;
}

std::vector<RangeStat> internal::range_stats(const internal::DiagnoseContext& c) {
  const Trace& trace = c.trace;
  std::vector<RangeStat> out;
  std::unordered_map<StrId, std::size_t> index;
  for (const internal::DeviceOp& op : c.ranges) {
    const StrId name = trace.events.name[op.event];
    auto [it, fresh] = index.emplace(name, out.size());
    if (fresh) out.push_back(RangeStat{std::string(trace.str(name)), 0, {}});
    RangeStat& s = out[it->second];
    ++s.count;
    // Counters are the args' numbers named as CUPTI's Perfworks metrics are
    // ("smsp__…", "dram__bytes_read.sum"); ids ("correlation") are not.
    const std::string_view raw = trace.args_json(op.event);
    if (raw.empty()) continue;
    Result<internal::JsonValue> args = internal::JsonValue::parse(raw);
    if (!args.has_value() || !args->is_object()) continue;
    for (const auto& member : args->members()) {
      // Not a structured binding: clang before 16 cannot capture one in the lambda below.
      const std::string& key = member.first;
      const internal::JsonValue& value = member.second;
      double v = 0;
      if (key.find("__") == std::string::npos) continue;
      if (!value.is_number() || !value.get_double(&v) || !std::isfinite(v)) continue;
      auto at = std::find_if(s.counters.begin(), s.counters.end(), [&](const RangeCounter& r) { return r.name == key; });
      if (at == s.counters.end()) {
        s.counters.push_back(RangeCounter{key, v});
      } else {
        at->sum += v;
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const RangeStat& a, const RangeStat& b) { return a.count > b.count; });
  return out;
}

}  // namespace tprof
