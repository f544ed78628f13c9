// memory_spike: device memory that grows step after step and is never
// given back (a leak), and copies held at a step's high-water mark (an
// allocation the size of a tensor already live, made by a copy op), from
// the [memory] records through tprof/memory.h (docs/diagnose.md,
// "memory_spike"; the essay's "Look for Memory Spikes").
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>

#include "src/analyze/rules/rules.h"
#include "tprof/memory.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kMiB = 1 << 20;
// A leak worth a line: at least 1 MiB a step and 1% of the peak over the
// window (smaller drift is caches settling, not a loop that runs out).
constexpr std::int64_t kLeakMinPerStep = kMiB;
constexpr double kLeakMinShareOfPeak = 0.01;
// Copies worth a line: 64 MiB and a tenth of the step's spike.
constexpr std::int64_t kCopyMinBytes = 64 * kMiB;
constexpr double kCopyMinShareOfSpike = 0.1;

std::string mib(std::int64_t b) {
  char buf[48];
  if (b >= 1024 * kMiB) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / static_cast<double>(1024 * kMiB));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / static_cast<double>(kMiB));
  }
  return buf;
}

std::string group_text(const MemoryGroup& g) {
  std::string s = (g.caller.empty() ? "" : g.caller + " > ") + (g.op.empty() ? "no op" : g.op);
  if (!g.stack.empty()) {
    const std::size_t cut = g.stack.find(" <- ");
    s += " at " + (cut == std::string::npos ? g.stack : g.stack.substr(0, cut));
  }
  return s;
}

// Ops that make a new tensor holding an existing one's values.
bool is_copy_op(std::string_view op) {
  return op == "aten::to" || op == "aten::_to_copy" || op == "aten::clone" || op == "aten::contiguous" ||
         op == "aten::copy_" || op == "aten::repeat" || op == "aten::cat";
}

void leak_finding(const DiagnoseContext& c, const MemoryDeviceView& v, std::int64_t capacity,
                  std::vector<Finding>* out) {
  const MemoryLeak& l = v.leak;
  if (!l.found || l.per_step_bytes < kLeakMinPerStep ||
      static_cast<double>(l.growth_bytes) < kLeakMinShareOfPeak * static_cast<double>(v.peak_bytes)) {
    return;
  }
  Finding f;
  f.id = "memory_spike";
  f.severity = FindingSeverity::kWarning;
  const std::int64_t first = v.steps[1].step, last = v.steps.back().step;
  f.title = "memory on " + v.label + " grows " + mib(l.per_step_bytes) + " a step and is not given back (" +
            std::to_string(l.growing_steps) + " of steps " + std::to_string(first) + "-" + std::to_string(last) +
            " grew, " + mib(l.growth_bytes) + " in all)";
  f.evidence.text("kind", "leak")
      .text("device", v.label)
      .num("growth_bytes", l.growth_bytes)
      .num("per_step_bytes", l.per_step_bytes)
      .num("growing_steps", l.growing_steps)
      .num("steps", l.steps)
      .num("peak_bytes", v.peak_bytes);
  if (v.peak_source != kNoIndex) f.evidence.event("peak", c.ref(v.peak_source));
  std::string who;
  if (!l.groups.empty()) {
    std::vector<std::string> names;
    for (const MemoryGroup& g : l.groups) names.push_back(group_text(g) + ": " + mib(g.bytes));
    f.evidence.texts("kept_by", names);
    const MemoryGroup& g = l.groups.front();
    who = "The allocations of those steps still live at the window's end come first from " + group_text(g) + " (" +
          mib(g.bytes) + " in " + std::to_string(g.count) + " allocations). ";
  } else if (!v.addresses_recorded) {
    who = "The records carry no addresses, so which allocations stay is not known (torch >= 1.13 records them). ";
  }
  std::string runway;
  if (capacity > 0 && capacity > v.peak_bytes) {
    runway = " At this rate the " + mib(capacity - v.peak_bytes) + " left on the device last about " +
             std::to_string((capacity - v.peak_bytes) / l.per_step_bytes) + " more steps.";
  }
  f.advice = who +
             (c.is_torch() ? "Something keeps each step's tensors alive: a running total summed without .item() or "
                             ".detach() (it keeps every step's graph), a list appended to every step, or a hook or "
                             "cache holding outputs; `tprof memory` lists them by op and stack."
                           : "Something keeps each step's buffers alive past the step; `tprof memory` lists them by "
                             "site.") +
             runway;
  out->push_back(std::move(f));
}

// At the largest spike's high-water mark: live copies made by copy ops
// whose size matches another live allocation (the tensor they copy).
void copy_finding(const DiagnoseContext& c, const MemoryInput& in, const MemoryDeviceView& v,
                  std::vector<Finding>* out) {
  if (!v.addresses_recorded || v.steps.empty()) return;
  const auto high = std::max_element(v.steps.begin(), v.steps.end(), [](const MemoryStepView& a, const MemoryStepView& b) {
    return a.spike_bytes < b.spike_bytes;
  });
  if (high->spike_bytes < kCopyMinBytes) return;
  const MemoryDeviceInput* d = nullptr;
  for (const MemoryDeviceInput& x : in.devices) {
    if (x.device_type == v.device_type && x.device_id == v.device_id) d = &x;
  }
  if (d == nullptr) return;
  // Replay to the high-water mark: the live allocations, and their sizes.
  std::unordered_map<std::uint64_t, std::size_t> live;
  for (std::size_t k = 0; k < d->samples.size() && d->samples[k].ts_ns <= high->high_water_ns; ++k) {
    const MemorySample& s = d->samples[k];
    if (s.bytes > 0) live[s.addr] = k;
    if (s.bytes < 0) live.erase(s.addr);
  }
  std::unordered_map<std::int64_t, int> sizes;
  for (const auto& [addr, k] : live) ++sizes[d->samples[k].bytes];
  std::int64_t copied = 0, count = 0;
  std::string example;
  for (const auto& [addr, k] : live) {
    const MemorySample& s = d->samples[k];
    if (s.ts_ns < high->start_ns || s.site >= in.sites.size()) continue;
    const MemorySite& site = in.sites[s.site];
    if (!is_copy_op(site.op) && !is_copy_op(site.caller)) continue;
    if (sizes[s.bytes] < 2) continue;  // no live tensor of its size: a new tensor, not a copy of one
    copied += s.bytes;
    ++count;
    if (example.empty()) example = (site.caller.empty() ? site.op : site.caller) + (site.stack.empty() ? "" : " at " + site.stack.substr(0, site.stack.find(" <- ")));
  }
  if (copied < kCopyMinBytes || static_cast<double>(copied) < kCopyMinShareOfSpike * static_cast<double>(high->spike_bytes)) {
    return;
  }
  Finding f;
  f.id = "memory_spike";
  f.severity = FindingSeverity::kInfo;
  f.title = mib(copied) + " of step " + std::to_string(high->step) + "'s " + mib(high->spike_bytes) + " spike on " +
            v.label + " are copies of tensors still live (" + std::to_string(count) + " copies, e.g. " + example + ")";
  f.evidence.text("kind", "copies")
      .text("device", v.label)
      .num("step", high->step)
      .num("copied_bytes", copied)
      .num("copies", count)
      .num("spike_bytes", high->spike_bytes)
      .num("high_water_bytes", high->high_water_bytes);
  f.advice = "A copy whose source stays alive doubles that memory: " +
             std::string(c.is_torch() ? "move or cast the tensor once and drop the original (x = x.to(...)), make the "
                                        "layout right where the tensor is made instead of calling .contiguous() "
                                        "later, or use in-place ops where autograd allows."
                                      : "reuse the source buffer or free it once the copy is made.");
  out->push_back(std::move(f));
}

}  // namespace

void rule_memory_spike(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  bool device = false;
  for (const MemoryRecord& r : t.memory) device |= r.device_type != 0 && r.device_id >= 0;
  if (!device) return;
  const MemoryInput in = memory_input(t, c.steps);
  MemoryOptions o;
  o.buckets = 1;
  o.top = 3;
  const MemoryReport r = analyze_memory(in, o);
  const std::map<std::int64_t, std::int64_t> capacity = device_memory_capacity(t);
  for (const MemoryDeviceView& v : r.devices) {
    if (v.device_type == 0 || v.device_id < 0) continue;  // host memory
    const auto cap = capacity.find(v.device_id);
    leak_finding(c, v, cap == capacity.end() ? 0 : cap->second, out);
    copy_finding(c, in, v, out);
  }
}

}  // namespace tprof::internal
