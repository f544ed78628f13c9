// Memory over time (tprof/memory.h, docs/memory.md): a trace's [memory]
// records become per-device samples with the op that made each one, then
// one analysis gives the peak and what held it, the steps' spikes and
// growth, and the timeline — the same for a snapshot's device traces.
//
//   [memory] records ── per lane, swept with the lane's ops and Python frames ──▶ site per record
//        │
//   per device, by time ──▶ MemoryInput ──▶ analyze_memory:
//        replay: allocated (recorded totals, else a running sum), live set by address,
//        the free of each allocation ──▶ peak + live at it, steps, leak, timeline
#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <string_view>
#include <unordered_map>

#include "src/base/saturate.h"
#include "tprof/memory.h"
#include "tprof/steps.h"

namespace tprof {

namespace {

// Frames that hold no user decision: torch's own Python, built-ins and the
// interpreter's library. A stack names the user's frames first.
bool is_internal_frame(std::string_view f) {
  return f.starts_with("<built-in") || f.find("torch/") != std::string_view::npos ||
         f.find("/lib/python") != std::string_view::npos || f.starts_with("<string>");
}

constexpr std::size_t kStackFrames = 5;

// "nn.Module: Qwen2Attention_10" is the 11th instance of a class: the
// class names the code, so the 24 layers' allocations group as one.
std::string_view module_class(std::string_view frame) {
  if (!frame.starts_with("nn.Module: ")) return frame;
  std::size_t end = frame.size();
  while (end > 0 && frame[end - 1] >= '0' && frame[end - 1] <= '9') --end;
  return end < frame.size() && end > 0 && frame[end - 1] == '_' ? frame.substr(0, end - 1) : frame;
}

struct Interval {
  std::int64_t start, end;
  std::uint32_t event;
};

// Sorts by start, then the longer first, so a stack of open intervals sees
// parents before children.
void sort_nested(std::vector<Interval>* v) {
  std::sort(v->begin(), v->end(), [](const Interval& a, const Interval& b) {
    return a.start != b.start ? a.start < b.start : a.end != b.end ? a.end > b.end : a.event < b.event;
  });
}

// Walks a lane's nested intervals forward in time: at(t) leaves open the
// intervals that hold t (closed: torch attributes a record at an op's end
// to it), innermost last.
class NestSweep {
 public:
  explicit NestSweep(const std::vector<Interval>& v) : v_(v) {}
  const std::vector<const Interval*>& at(std::int64_t t) {
    while (!open_.empty() && open_.back()->end < t) open_.pop_back();
    while (next_ < v_.size() && v_[next_].start <= t) {
      const Interval* x = &v_[next_++];
      while (!open_.empty() && open_.back()->end < x->start) open_.pop_back();
      open_.push_back(x);
    }
    while (!open_.empty() && open_.back()->end < t) open_.pop_back();
    // An interval that overlaps without nesting can leave a closed one under
    // an open one; what holds t is what counts.
    held_.clear();
    for (const Interval* x : open_) {
      if (x->start <= t && t <= x->end) held_.push_back(x);
    }
    return held_;
  }

 private:
  const std::vector<Interval>& v_;
  std::size_t next_ = 0;
  std::vector<const Interval*> open_, held_;
};

std::string device_label(std::int16_t type, std::int16_t id) {
  static constexpr const char* kNames[] = {"CPU",    "CUDA",  "MKLDNN", "OpenGL", "OpenCL", "IDEEP", "HIP",
                                           "FPGA",   "MAIA",  "XLA",    "Vulkan", "Metal",  "XPU",   "MPS",
                                           "Meta",   "HPU",   "VE",     "Lazy",   "IPU",    "MTIA",  "PrivateUse1"};
  std::string name = type >= 0 && static_cast<std::size_t>(type) < std::size(kNames)
                         ? kNames[type]
                         : "device type " + std::to_string(type);
  if (id >= 0) name += " " + std::to_string(id);
  return name;
}

struct Group {
  std::int64_t bytes = 0, count = 0;
};

// Groups (site → bytes, count) by (op, stack), largest first, at most `top`.
std::vector<MemoryGroup> top_groups(const MemoryInput& in, const std::unordered_map<std::uint32_t, Group>& by_site,
                                    std::size_t top) {
  std::map<std::tuple<std::string, std::string, std::string>, Group> merged;
  for (const auto& [site, g] : by_site) {
    std::tuple<std::string, std::string, std::string> key;
    if (site < in.sites.size()) key = {in.sites[site].op, in.sites[site].stack, in.sites[site].caller};
    Group& m = merged[key];
    m.bytes = internal::sat_add(m.bytes, g.bytes);
    m.count += g.count;
  }
  std::vector<MemoryGroup> out;
  out.reserve(merged.size());
  for (auto& [key, g] : merged) out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), g.bytes, g.count});
  std::stable_sort(out.begin(), out.end(), [](const MemoryGroup& a, const MemoryGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.count > b.count;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

// span × k / n without overflow (k ≤ n).
std::int64_t bucket_offset(std::int64_t span, std::size_t k, std::size_t n) {
  const auto ik = static_cast<std::int64_t>(k), in = static_cast<std::int64_t>(n);
  return span / in * ik + span % in * ik / in;
}

}  // namespace

MemoryInput memory_input(const Trace& t) {
  if (t.memory.empty()) return memory_input(t, StepsSummary{});
  return memory_input(t, compute_steps(t));
}

MemoryInput memory_input(const Trace& t, const StepsSummary& steps) {
  MemoryInput in;
  in.source = "trace";
  if (t.memory.empty()) return in;
  const EventColumns& ev = t.events;

  // The lanes that hold records, and their ops and Python frames.
  std::vector<std::uint8_t> wanted(t.lanes.size(), 0);
  for (const MemoryRecord& m : t.memory) wanted[ev.lane[m.event]] = 1;
  std::vector<std::vector<Interval>> ops(t.lanes.size()), frames(t.lanes.size());
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kComplete || !wanted[ev.lane[e]]) continue;
    const EventKind k = ev.kind[e];
    const Interval x{ev.ts_ns[e], internal::sat_add(ev.ts_ns[e], ev.dur_ns[e]), e};
    if (k == EventKind::kPythonFunction) {
      frames[ev.lane[e]].push_back(x);
    } else if (k == EventKind::kCpuOp || (k == EventKind::kUserAnnotation && !t.name(e).starts_with("ProfilerStep#"))) {
      // A step is when, not who: an allocation straight under ProfilerStep#N has no op.
      ops[ev.lane[e]].push_back(x);
    }
  }
  for (auto& v : ops) sort_nested(&v);
  for (auto& v : frames) sort_nested(&v);

  // Records per lane by time (file order breaks ties).
  std::vector<std::uint32_t> order(t.memory.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const std::uint32_t la = ev.lane[t.memory[a].event], lb = ev.lane[t.memory[b].event];
    if (la != lb) return la < lb;
    return ev.ts_ns[t.memory[a].event] < ev.ts_ns[t.memory[b].event];
  });
  std::vector<std::uint32_t> site_of(t.memory.size(), kNoIndex);
  std::map<std::tuple<StrId, StrId, std::string>, std::uint32_t> site_ids;
  std::unordered_map<std::uint32_t, std::string> stack_of_frame;  // innermost frame event → stack text
  std::size_t i = 0;
  while (i < order.size()) {
    const std::uint32_t lane = ev.lane[t.memory[order[i]].event];
    NestSweep op_sweep(ops[lane]), frame_sweep(frames[lane]);
    for (; i < order.size() && ev.lane[t.memory[order[i]].event] == lane; ++i) {
      const std::int64_t ts = ev.ts_ns[t.memory[order[i]].event];
      const auto& op_stack = op_sweep.at(ts);
      const auto& frame_stack = frame_sweep.at(ts);
      const StrId op = op_stack.empty() ? kEmptyStr : ev.name[op_stack.back()->event];
      const StrId caller = op_stack.size() < 2 ? kEmptyStr : ev.name[op_stack.front()->event];
      std::string stack;
      if (!frame_stack.empty()) {
        auto [it, fresh] = stack_of_frame.try_emplace(frame_stack.back()->event);
        if (fresh) {
          std::size_t n = 0;
          for (auto f = frame_stack.rbegin(); f != frame_stack.rend() && n < kStackFrames; ++f) {
            const std::string_view name = t.name((*f)->event);
            if (is_internal_frame(name)) continue;
            if (n++ > 0) it->second += " <- ";
            it->second += module_class(name);
          }
        }
        stack = it->second;
      }
      auto [sit, added] = site_ids.try_emplace({op, caller, stack}, static_cast<std::uint32_t>(in.sites.size()));
      if (added) in.sites.push_back({std::string(t.str(op)), std::move(stack), std::string(t.str(caller))});
      site_of[order[i]] = sit->second;
    }
  }

  // Per device, by time then file order.
  std::map<std::pair<std::int16_t, std::int16_t>, std::vector<std::uint32_t>> by_device;
  for (std::uint32_t r = 0; r < t.memory.size(); ++r) {
    by_device[{t.memory[r].device_type, t.memory[r].device_id}].push_back(r);
  }
  for (auto& [key, recs] : by_device) {
    std::stable_sort(recs.begin(), recs.end(), [&](std::uint32_t a, std::uint32_t b) {
      return ev.ts_ns[t.memory[a].event] < ev.ts_ns[t.memory[b].event];
    });
    MemoryDeviceInput d;
    d.device_type = key.first;
    d.device_id = key.second;
    d.samples.reserve(recs.size());
    for (std::uint32_t r : recs) {
      const MemoryRecord& m = t.memory[r];
      MemorySample s;
      s.ts_ns = ev.ts_ns[m.event];
      s.bytes = m.bytes;
      s.addr = m.addr;
      if (m.has_total_allocated) s.allocated = m.total_allocated;
      if (m.has_total_reserved) s.reserved = m.total_reserved;
      s.site = site_of[r];
      s.source = m.event;
      d.samples.push_back(s);
    }
    in.devices.push_back(std::move(d));
  }

  for (const StepStat& s : steps.steps) {
    in.steps.push_back({s.step, s.start_ns, internal::sat_add(s.start_ns, s.dur_ns)});
  }
  return in;
}

MemorySeries memory_series(const MemoryInput& in, const MemoryDeviceInput& d) {
  MemorySeries out;
  const std::vector<MemorySample>& s = d.samples;
  // A mix of recorded and absent totals cannot be trusted as a series.
  out.totals_recorded =
      std::all_of(s.begin(), s.end(), [](const MemorySample& x) { return x.allocated != kMemoryAbsent; });
  out.allocated.resize(s.size());
  out.step.resize(s.size(), kNoIndex);
  std::int64_t run = 0;
  std::size_t step = 0;  // steps by start, samples by time: one walk
  for (std::size_t k = 0; k < s.size(); ++k) {
    run = internal::sat_add(run, s[k].bytes);
    out.allocated[k] = out.totals_recorded ? s[k].allocated : run;
    while (step < in.steps.size() && in.steps[step].end_ns <= s[k].ts_ns) ++step;
    if (step < in.steps.size() && in.steps[step].start_ns <= s[k].ts_ns) out.step[k] = static_cast<std::uint32_t>(step);
  }
  return out;
}

MemoryReport analyze_memory(const MemoryInput& in, const MemoryOptions& o) {
  MemoryReport out;
  out.source = in.source;
  out.times_recorded = in.times_recorded;
  out.segments = in.segments;
  bool any = false;
  for (const MemoryDeviceInput& d : in.devices) {
    if (d.samples.empty()) continue;
    out.origin_ns = any ? std::min(out.origin_ns, d.samples.front().ts_ns) : d.samples.front().ts_ns;
    any = true;
  }
  for (const MemoryDeviceInput& d : in.devices) {
    if (d.samples.empty() || (o.device && *o.device != d.device_id)) continue;
    const std::vector<MemorySample>& s = d.samples;
    const std::size_t n = s.size();
    MemoryDeviceView v;
    v.device_type = d.device_type;
    v.device_id = d.device_id;
    v.label = device_label(d.device_type, d.device_id);
    v.records = static_cast<std::int64_t>(n);
    v.first_ns = s.front().ts_ns;
    v.last_ns = s.back().ts_ns;

    const MemorySeries series = memory_series(in, d);
    v.totals_recorded = series.totals_recorded;
    // Reserved: torch writes 0 for CPU memory and tprof's own hooks write 0
    // too; a series of zeros is "not measured", not an empty pool.
    v.reserved_recorded = std::all_of(s.begin(), s.end(), [](const MemorySample& x) { return x.reserved != kMemoryAbsent; }) &&
                          std::any_of(s.begin(), s.end(), [](const MemorySample& x) { return x.reserved != 0; });
    std::int64_t with_addr = 0, changes = 0;
    for (const MemorySample& x : s) {
      if (x.bytes == 0) continue;
      ++changes;
      if (x.addr != 0) ++with_addr;
    }
    v.addresses_recorded = changes > 0 && with_addr == changes;
    const std::vector<std::int64_t>& a = series.allocated;
    v.start_bytes = v.totals_recorded ? internal::sat_sub(a[0], s[0].bytes) : 0;
    v.end_bytes = a[n - 1];

    // Replay: the live set by address, and where each allocation was freed.
    std::vector<std::uint32_t> freed_at(n, kNoIndex);
    std::unordered_map<std::uint64_t, std::uint32_t> live;  // addr → allocating sample
    std::size_t peak = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const MemorySample& x = s[k];
      if (a[k] > a[peak]) peak = k;
      if (x.bytes > 0) {
        ++v.allocations;
        v.allocated_bytes = internal::sat_add(v.allocated_bytes, x.bytes);
        if (v.addresses_recorded) {
          // An address allocated again without a free in between: the free
          // was not recorded; the older block is gone by now.
          auto [it, fresh] = live.try_emplace(x.addr, static_cast<std::uint32_t>(k));
          if (!fresh) {
            freed_at[it->second] = static_cast<std::uint32_t>(k);
            it->second = static_cast<std::uint32_t>(k);
          }
        }
      } else if (x.bytes < 0) {
        ++v.frees;
        v.freed_bytes = internal::sat_sub(v.freed_bytes, x.bytes);
        if (v.addresses_recorded) {
          auto it = live.find(x.addr);
          if (it == live.end()) {
            ++v.unmatched_frees;
            v.unmatched_free_bytes = internal::sat_sub(v.unmatched_free_bytes, x.bytes);
          } else {
            freed_at[it->second] = static_cast<std::uint32_t>(k);
            live.erase(it);
          }
        }
      }
      if (v.reserved_recorded && x.reserved != kMemoryAbsent) {
        if (v.peak_reserved_bytes == kMemoryAbsent || x.reserved > v.peak_reserved_bytes) {
          v.peak_reserved_bytes = x.reserved;
          v.peak_reserved_ns = x.ts_ns;
        }
        const std::int64_t gap = internal::sat_sub(x.reserved, a[k]);
        if (v.max_gap_bytes == kMemoryAbsent || gap > v.max_gap_bytes) {
          v.max_gap_bytes = gap;
          v.max_gap_ns = x.ts_ns;
        }
        v.end_gap_bytes = gap;
      }
    }
    v.peak_bytes = a[peak];
    v.peak_ns = s[peak].ts_ns;
    v.peak_source = s[peak].source;

    if (v.addresses_recorded) {
      std::unordered_map<std::uint32_t, Group> at_peak, never;
      for (std::size_t k = 0; k <= peak; ++k) {
        if (s[k].bytes <= 0 || (freed_at[k] != kNoIndex && freed_at[k] <= peak)) continue;
        Group& g = at_peak[s[k].site];
        g.bytes = internal::sat_add(g.bytes, s[k].bytes);
        ++g.count;
        v.peak_in_window_bytes = internal::sat_add(v.peak_in_window_bytes, s[k].bytes);
      }
      for (const auto& [addr, k] : live) {
        Group& g = never[s[k].site];
        g.bytes = internal::sat_add(g.bytes, s[k].bytes);
        ++g.count;
        ++v.never_freed;
        v.never_freed_bytes = internal::sat_add(v.never_freed_bytes, s[k].bytes);
      }
      v.live_at_peak = top_groups(in, at_peak, o.top);
      v.never_freed_groups = top_groups(in, never, o.top);
    }

    // Steps: the value at a step's start is the one after the last sample
    // before it (the window's start value before the first sample).
    for (const MemoryStepSpan& span : in.steps) {
      const auto first = std::lower_bound(s.begin(), s.end(), span.start_ns,
                                          [](const MemorySample& x, std::int64_t t) { return x.ts_ns < t; });
      const auto last = std::lower_bound(first, s.end(), span.end_ns,
                                         [](const MemorySample& x, std::int64_t t) { return x.ts_ns < t; });
      const std::size_t b = static_cast<std::size_t>(first - s.begin()), e = static_cast<std::size_t>(last - s.begin());
      MemoryStepView sv;
      sv.step = span.step;
      sv.start_ns = span.start_ns;
      sv.end_ns = span.end_ns;
      sv.records = static_cast<std::int64_t>(e - b);
      sv.start_bytes = b == 0 ? v.start_bytes : a[b - 1];
      sv.end_bytes = e == 0 ? v.start_bytes : a[e - 1];
      sv.high_water_bytes = sv.start_bytes;
      sv.high_water_ns = span.start_ns;
      std::size_t high = n;
      for (std::size_t k = b; k < e; ++k) {
        if (a[k] > sv.high_water_bytes) {
          sv.high_water_bytes = a[k];
          sv.high_water_ns = s[k].ts_ns;
          high = k;
        }
      }
      sv.spike_bytes = internal::sat_sub(sv.high_water_bytes, std::max(sv.start_bytes, sv.end_bytes));
      sv.growth_bytes = internal::sat_sub(sv.end_bytes, sv.start_bytes);
      if (v.addresses_recorded && high != n && sv.spike_bytes > 0) {
        std::unordered_map<std::uint32_t, Group> spike;
        for (std::size_t k = b; k <= high; ++k) {
          if (s[k].bytes <= 0 || freed_at[k] == kNoIndex || freed_at[k] <= high || freed_at[k] >= e) continue;
          Group& g = spike[s[k].site];
          g.bytes = internal::sat_add(g.bytes, s[k].bytes);
          ++g.count;
        }
        sv.spike_groups = top_groups(in, spike, o.top);
      }
      v.steps.push_back(std::move(sv));
    }

    // A leak: past the first step (warm-up: optimizer state, caches), the
    // memory a step starts from keeps rising — growth that does not come back.
    if (v.steps.size() >= 3) {
      MemoryLeak& l = v.leak;
      const std::vector<MemoryStepView>& st = v.steps;
      l.steps = static_cast<std::int64_t>(st.size() - 1);
      for (std::size_t k = 1; k < st.size(); ++k) l.growing_steps += st[k].growth_bytes > 0 ? 1 : 0;
      l.growth_bytes = internal::sat_sub(st.back().end_bytes, st[1].start_bytes);
      l.per_step_bytes = l.growth_bytes / l.steps;
      // Growth in most steps, and the last step's low point above where the
      // second step started: a rise undone inside a step is a spike.
      std::int64_t last_low = st.back().start_bytes;
      const auto lf = std::lower_bound(s.begin(), s.end(), st.back().start_ns,
                                       [](const MemorySample& x, std::int64_t t) { return x.ts_ns < t; });
      for (auto it = lf; it != s.end() && it->ts_ns < st.back().end_ns; ++it) {
        last_low = std::min(last_low, a[static_cast<std::size_t>(it - s.begin())]);
      }
      l.found = l.growth_bytes > 0 && 4 * l.growing_steps >= 3 * l.steps && last_low > st[1].start_bytes;
      if (l.found && v.addresses_recorded) {
        std::unordered_map<std::uint32_t, Group> kept;
        for (const auto& [addr, k] : live) {
          if (s[k].ts_ns < st[1].start_ns || s[k].ts_ns >= st.back().end_ns) continue;
          Group& g = kept[s[k].site];
          g.bytes = internal::sat_add(g.bytes, s[k].bytes);
          ++g.count;
        }
        l.groups = top_groups(in, kept, o.top);
      }
    }

    // Timeline buckets over [first, last]; an empty bucket carries the value on.
    const std::size_t nb = std::max<std::size_t>(1, o.buckets);
    const std::int64_t span = std::max<std::int64_t>(1, internal::sat_sub(v.last_ns, v.first_ns));
    std::int64_t carry = v.start_bytes, carry_reserved = kMemoryAbsent;
    std::size_t k = 0;
    for (std::size_t bkt = 0; bkt < nb; ++bkt) {
      MemoryPoint p;
      // Saturating: a hostile snapshot's first time sits at INT64_MAX (the span then clamps to 1).
      p.start_ns = internal::sat_add(v.first_ns, bucket_offset(span, bkt, nb));
      p.end_ns = internal::sat_add(v.first_ns, bucket_offset(span, bkt + 1, nb));
      // The level held when the bucket opens counts: a bucket is a stretch of time.
      p.min_allocated = p.max_allocated = carry;
      p.max_reserved = carry_reserved;
      for (; k < n && (s[k].ts_ns < p.end_ns || bkt + 1 == nb); ++k) {
        p.min_allocated = std::min(p.min_allocated, a[k]);
        if (a[k] > p.max_allocated || (p.max_site == kNoIndex && a[k] == p.max_allocated && s[k].bytes > 0)) {
          p.max_site = s[k].site;
        }
        p.max_allocated = std::max(p.max_allocated, a[k]);
        if (v.reserved_recorded && s[k].reserved != kMemoryAbsent) {
          p.max_reserved = p.max_reserved == kMemoryAbsent ? s[k].reserved : std::max(p.max_reserved, s[k].reserved);
          carry_reserved = s[k].reserved;
        }
        carry = a[k];
      }
      p.last_allocated = carry;
      v.timeline.push_back(p);
    }
    out.devices.push_back(std::move(v));
  }
  return out;
}

}  // namespace tprof
