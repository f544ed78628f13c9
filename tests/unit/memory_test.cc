// tprof memory (tprof/memory.h): the per-op bytes against torch's own
// Self CPU Mem / Self CUDA Mem columns (key_averages, checked against the
// tables torch printed), the peak, live set, steps and leak on planted
// traces, and every trace in tests/data with [memory] records.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/support/test_traces.h"
#include "tprof/diagnose.h"
#include "tprof/key_averages.h"
#include "tprof/memory.h"
#include "tprof/read.h"

namespace tprof {
namespace {

bool is_cpu_type(std::int16_t t) { return t == 0 || t == 2 || t == 5; }

// Per op name: the bytes (allocations and frees) of the records whose site
// is that op, on CPU and on devices.
std::map<std::string, std::pair<std::int64_t, std::int64_t>> bytes_by_op(const MemoryInput& in) {
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> out;
  for (const MemoryDeviceInput& d : in.devices) {
    for (const MemorySample& s : d.samples) {
      const std::string& op = in.sites.at(s.site).op;
      (is_cpu_type(d.device_type) ? out[op].first : out[op].second) += s.bytes;
    }
  }
  return out;
}

// Whether records and ops sit on one host thread: torch attributes a
// record to every op open at its time on any thread, tprof to the innermost
// op of the thread that made it; the two agree when one thread runs ops.
bool one_thread(const Trace& t) {
  std::uint32_t lane = kNoIndex;
  auto same = [&](std::uint32_t e) {
    if (lane != kNoIndex && t.events.lane[e] != lane) return false;
    lane = t.events.lane[e];
    return true;
  };
  for (const MemoryRecord& m : t.memory) {
    if (!same(m.event)) return false;
  }
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    const EventKind k = t.events.kind[e];
    if ((k == EventKind::kCpuOp || k == EventKind::kUserAnnotation) && !same(e)) return false;
  }
  return true;
}

// Whether a record falls inside a runtime call (cudaMalloc under the
// caching allocator, cudaMemcpyAsync): torch's events include runtime calls
// and give such a record to the call; tprof gives it to the op around it.
bool record_in_runtime_call(const Trace& t) {
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.kind[e] != EventKind::kCudaRuntime && t.events.kind[e] != EventKind::kCudaDriver) continue;
    for (const MemoryRecord& m : t.memory) {
      const std::int64_t ts = t.events.ts_ns[m.event];
      if (t.events.lane[m.event] == t.events.lane[e] && t.events.ts_ns[e] <= ts &&
          ts <= t.events.ts_ns[e] + t.events.dur_ns[e]) {
        return true;
      }
    }
  }
  return false;
}

// Whether a record sits where one op ends and the next begins (times in
// whole microseconds: torch ≤ 2.0's export_chrome_trace, one aten::empty
// after another inside a batch norm): torch's closed intervals credit it
// to both ops, tprof to the op that made it.
bool record_on_shared_boundary(const Trace& t) {
  std::set<std::int64_t> starts, ends;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.kind[e] != EventKind::kCpuOp) continue;
    starts.insert(t.events.ts_ns[e]);
    ends.insert(t.events.ts_ns[e] + t.events.dur_ns[e]);
  }
  for (const MemoryRecord& m : t.memory) {
    const std::int64_t ts = t.events.ts_ns[m.event];
    if (starts.count(ts) != 0 && ends.count(ts) != 0) return true;
  }
  return false;
}

// torch's attribution rules (closed intervals, self = own − children's),
// on exact times: torch ≤ 2.0 truncates times to µs first, which moves a
// record at an op's boundary (its own columns, checked in key_averages_test).
TEST(Memory, BytesPerOpAreTorchsSelfMemoryColumns) {
  int checked = 0, conserved = 0;
  EventListOptions exact;
  exact.time = TimeSemantics::kExactNanos;
  for (const std::string& path : testing::test_traces()) {
    Result<Trace> t = read_trace(path);
    ASSERT_TRUE(t) << t.error().to_string();
    if (t->memory.empty() || !one_thread(*t)) continue;
    const MemoryInput in = memory_input(*t);
    const auto ours = bytes_by_op(in);
    const EventList list = EventList::build(*t, exact);
    // Every byte is somewhere: in an op, a step or a [memory] row.
    std::int64_t torch_total = 0, our_total = 0;
    for (const StatRow& r : list.key_averages()) {
      if (!r.is_device) torch_total += r.self_cpu_memory_usage + r.self_device_memory_usage;
    }
    for (const auto& [op, b] : ours) our_total += b.first + b.second;
    EXPECT_EQ(our_total, torch_total) << path;
    ++conserved;
    if (record_in_runtime_call(*t) || record_on_shared_boundary(*t)) continue;
    for (const StatRow& r : list.key_averages()) {
      if (r.key == "ProfilerStep*" || r.key == "[memory]" || r.is_device) continue;
      auto it = ours.find(r.key);
      const std::pair<std::int64_t, std::int64_t> mine = it == ours.end() ? std::pair<std::int64_t, std::int64_t>{0, 0} : it->second;
      EXPECT_EQ(mine.first, r.self_cpu_memory_usage) << path << ": " << r.key;
      EXPECT_EQ(mine.second, r.self_device_memory_usage) << path << ": " << r.key;
    }
    ++checked;
  }
  EXPECT_GE(conserved, 10);
  EXPECT_GE(checked, 5);
}

constexpr std::int64_t kMiB = 1 << 20;

// A training loop on CUDA 0 with a planted leak and spike: each of `steps`
// ProfilerSteps (1 ms apart) holds an aten::empty that keeps 1 MiB (never
// freed) and an aten::mul that takes 8 MiB and gives it back; 100 MiB were
// allocated before the window, one block of which the first step frees.
std::string planted_trace(int steps, bool totals, bool addresses, bool leak = true) {
  std::string ev;
  std::int64_t total = 100 * kMiB;
  std::uint64_t next_addr = 0x10000;
  auto record = [&](std::int64_t ts_us, std::int64_t bytes, std::uint64_t addr) {
    total += bytes;
    ev += R"(,{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":)" + std::to_string(ts_us) +
          R"(,"args":{"Device Type":1,"Device Id":0,"Bytes":)" + std::to_string(bytes);
    if (addresses) ev += R"(,"Addr":)" + std::to_string(addr);
    if (totals) ev += R"(,"Total Allocated":)" + std::to_string(total) + R"(,"Total Reserved":)" + std::to_string(256 * kMiB);
    ev += "}}";
  };
  auto op = [&](const char* name, std::int64_t ts, std::int64_t dur) {
    ev += R"(,{"ph":"X","cat":"cpu_op","name":")" + std::string(name) + R"(","pid":1,"tid":1,"ts":)" +
          std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) + "}";
  };
  for (int i = 0; i < steps; ++i) {
    const std::int64_t t0 = 1000 + 1000 * i;
    ev += R"(,{"ph":"X","cat":"user_annotation","name":"ProfilerStep#)" + std::to_string(i + 1) +
          R"(","pid":1,"tid":1,"ts":)" + std::to_string(t0) + R"(,"dur":900})";
    op("aten::empty", t0 + 10, 20);
    const std::uint64_t kept = next_addr++;
    record(t0 + 15, kMiB, kept);
    op("aten::mul", t0 + 100, 50);
    const std::uint64_t spike = next_addr++;
    record(t0 + 120, 8 * kMiB, spike);
    op("aten::sum", t0 + 500, 20);
    record(t0 + 510, -8 * kMiB, spike);
    if (i == 0) record(t0 + 600, -2 * kMiB, 0xdead0);  // allocated before the window
    if (!leak) record(t0 + 700, -kMiB, kept);
  }
  return R"({"schemaVersion":1,"traceEvents":[)" + ev.substr(1) + "]}";
}

MemoryReport planted_report(int steps, bool totals, bool addresses, const MemoryOptions& o = {}, bool leak = true) {
  Result<Trace> t = read_trace_bytes(planted_trace(steps, totals, addresses, leak), "planted.json");
  EXPECT_TRUE(t) << t.error().to_string();
  return analyze_memory(memory_input(*t), o);
}

TEST(Memory, PlantedLeakAndSpikeAreNamedWithTheirOps) {
  const MemoryReport r = planted_report(5, true, true);
  ASSERT_EQ(r.devices.size(), 1u);
  const MemoryDeviceView& v = r.devices[0];
  EXPECT_EQ(v.label, "CUDA 0");
  EXPECT_TRUE(v.totals_recorded);
  EXPECT_TRUE(v.reserved_recorded);
  EXPECT_TRUE(v.addresses_recorded);
  EXPECT_EQ(v.start_bytes, 100 * kMiB);
  EXPECT_EQ(v.end_bytes, 100 * kMiB + 5 * kMiB - 2 * kMiB);
  // The peak: the last step's spike on top of five leaked MiB.
  EXPECT_EQ(v.peak_bytes, 100 * kMiB - 2 * kMiB + 5 * kMiB + 8 * kMiB);
  EXPECT_EQ(v.peak_in_window_bytes, 5 * kMiB + 8 * kMiB);
  ASSERT_EQ(v.live_at_peak.size(), 2u);
  EXPECT_EQ(v.live_at_peak[0].op, "aten::mul");
  EXPECT_EQ(v.live_at_peak[0].bytes, 8 * kMiB);
  EXPECT_EQ(v.live_at_peak[1].op, "aten::empty");
  EXPECT_EQ(v.live_at_peak[1].count, 5);
  EXPECT_EQ(v.never_freed, 5);
  EXPECT_EQ(v.never_freed_bytes, 5 * kMiB);
  EXPECT_EQ(v.unmatched_frees, 1);
  EXPECT_EQ(v.unmatched_free_bytes, 2 * kMiB);
  EXPECT_EQ(v.peak_reserved_bytes, 256 * kMiB);
  EXPECT_EQ(v.end_gap_bytes, 256 * kMiB - v.end_bytes);
  ASSERT_EQ(v.steps.size(), 5u);
  for (const MemoryStepView& s : v.steps) {
    // Step 1 also gives back 2 MiB from before the window: 9 MiB above its end.
    EXPECT_EQ(s.spike_bytes, s.step == 1 ? 9 * kMiB : 8 * kMiB) << s.step;
    ASSERT_EQ(s.spike_groups.size(), 1u);
    EXPECT_EQ(s.spike_groups[0].op, "aten::mul");
    EXPECT_EQ(s.growth_bytes, s.step == 1 ? -kMiB : kMiB) << s.step;
  }
  EXPECT_TRUE(v.leak.found);
  EXPECT_EQ(v.leak.steps, 4);
  EXPECT_EQ(v.leak.growing_steps, 4);
  EXPECT_EQ(v.leak.growth_bytes, 4 * kMiB);
  EXPECT_EQ(v.leak.per_step_bytes, kMiB);
  ASSERT_EQ(v.leak.groups.size(), 1u);
  EXPECT_EQ(v.leak.groups[0].op, "aten::empty");
  EXPECT_EQ(v.leak.groups[0].count, 4);
  // The timeline's buckets hold the peak and end at the last value.
  std::int64_t high = 0;
  for (const MemoryPoint& p : v.timeline) high = std::max(high, p.max_allocated);
  EXPECT_EQ(high, v.peak_bytes);
  EXPECT_EQ(v.timeline.back().last_allocated, v.end_bytes);
  EXPECT_EQ(v.timeline.size(), 200u);
}

TEST(Memory, WithoutTotalsAllocatedIsARunningSumAndWithoutAddressesNoLiveSet) {
  const MemoryReport r = planted_report(4, false, false);
  ASSERT_EQ(r.devices.size(), 1u);
  const MemoryDeviceView& v = r.devices[0];
  EXPECT_FALSE(v.totals_recorded);
  EXPECT_FALSE(v.reserved_recorded);
  EXPECT_FALSE(v.addresses_recorded);
  EXPECT_EQ(v.start_bytes, 0);
  EXPECT_EQ(v.end_bytes, 4 * kMiB - 2 * kMiB);
  EXPECT_EQ(v.peak_bytes, 4 * kMiB - 2 * kMiB + 8 * kMiB);
  EXPECT_TRUE(v.live_at_peak.empty());
  EXPECT_EQ(v.peak_reserved_bytes, kMemoryAbsent);
  EXPECT_TRUE(v.leak.found);  // from the values alone
  EXPECT_TRUE(v.leak.groups.empty());
  EXPECT_NE(format_memory_text(r).find("no totals in the trace"), std::string::npos);
}

TEST(Memory, SpikesWithoutGrowthAreNoLeakNorAreTwoSteps) {
  const MemoryReport spikes = planted_report(6, true, true, {}, false);
  const MemoryDeviceView& v = spikes.devices[0];
  EXPECT_FALSE(v.leak.found);
  EXPECT_EQ(v.leak.growing_steps, 0);
  EXPECT_EQ(v.never_freed, 0);
  EXPECT_EQ(v.steps[3].spike_bytes, 9 * kMiB);
  const MemoryReport two = planted_report(2, true, true);
  EXPECT_FALSE(two.devices[0].leak.found);  // too few steps to tell
  EXPECT_EQ(two.devices[0].leak.steps, 0);
}

TEST(Memory, DeviceFilterAndEmptyTrace) {
  MemoryOptions cpu;
  cpu.device = -1;
  EXPECT_TRUE(planted_report(3, true, true, cpu).devices.empty());
  MemoryOptions dev0;
  dev0.device = 0;
  EXPECT_EQ(planted_report(3, true, true, dev0).devices.size(), 1u);
  Result<Trace> t = read_trace_bytes(R"({"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]})", "x");
  ASSERT_TRUE(t);
  const MemoryReport r = analyze_memory(memory_input(*t));
  EXPECT_TRUE(r.devices.empty());
  EXPECT_NE(format_memory_text(r).find("no [memory] records"), std::string::npos);
  EXPECT_NE(format_memory_json(r).find("\"devices\": []"), std::string::npos);
}

TEST(Memory, EveryTraceWithRecordsGivesConsistentViews) {
  int n = 0;
  for (const std::string& path : testing::test_traces()) {
    Result<Trace> t = read_trace(path);
    ASSERT_TRUE(t) << t.error().to_string();
    if (t->memory.empty()) continue;
    const MemoryInput in = memory_input(*t);
    const MemoryReport r = analyze_memory(in);
    ASSERT_FALSE(r.devices.empty()) << path;
    std::int64_t records = 0;
    for (const MemoryDeviceView& v : r.devices) {
      records += v.records;
      EXPECT_EQ(v.records, v.allocations + v.frees + [&] {
        std::int64_t zero = 0;
        for (const MemoryDeviceInput& d : in.devices) {
          if (d.device_type == v.device_type && d.device_id == v.device_id) {
            for (const MemorySample& s : d.samples) zero += s.bytes == 0 ? 1 : 0;
          }
        }
        return zero;
      }()) << path;
      EXPECT_GE(v.peak_bytes, v.start_bytes) << path;
      EXPECT_GE(v.peak_bytes, v.end_bytes) << path;
      for (const MemoryStepView& s : v.steps) {
        EXPECT_GE(s.high_water_bytes, std::max(s.start_bytes, s.end_bytes)) << path;
        EXPECT_LE(s.high_water_bytes, v.peak_bytes) << path;
      }
      if (v.addresses_recorded) {
        std::int64_t live = 0;
        for (const MemoryGroup& g : v.live_at_peak) live += g.bytes;
        EXPECT_LE(live, v.peak_in_window_bytes) << path;
        if (v.totals_recorded) {
          EXPECT_LE(v.peak_in_window_bytes, v.peak_bytes) << path;
        }
      }
    }
    EXPECT_EQ(records, static_cast<std::int64_t>(t->memory.size())) << path;
    // Every format renders; the CSV has one row per record.
    EXPECT_FALSE(format_memory_text(r).empty());
    EXPECT_FALSE(format_memory_markdown(r).empty());
    const std::string csv = format_memory_csv(in, r);
    EXPECT_EQ(static_cast<std::int64_t>(std::count(csv.begin(), csv.end(), '\n')), records + 1) << path;
    ++n;
  }
  EXPECT_GE(n, 30);
}

// diagnose's memory_spike (docs/diagnose.md): the planted leak is named
// with the op that keeps it; spikes that are given back are not a leak.
TEST(MemorySpikeRule, NamesThePlantedLeakAndStaysSilentOnSpikes) {
  Result<Trace> t = read_trace_bytes(planted_trace(5, true, true), "planted.json");
  ASSERT_TRUE(t);
  const std::vector<Finding> f = diagnose(*t, {.only = {"memory_spike"}}).findings;
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, FindingSeverity::kWarning);
  EXPECT_NE(f[0].title.find("grows 1.0 MiB a step"), std::string::npos) << f[0].title;
  EXPECT_NE(f[0].advice.find("aten::empty"), std::string::npos) << f[0].advice;
  Result<Trace> spikes = read_trace_bytes(planted_trace(5, true, true, false), "spikes.json");
  ASSERT_TRUE(spikes);
  EXPECT_TRUE(diagnose(*spikes, {.only = {"memory_spike"}}).findings.empty());
}

// A 256 MiB tensor copied by aten::contiguous while the original lives:
// the copy is half the step's spike.
TEST(MemorySpikeRule, NamesACopyHeldAtTheHighWaterMark) {
  const std::int64_t big = 256 * kMiB;
  auto rec = [](std::int64_t ts, std::int64_t bytes, std::uint64_t addr, std::int64_t total) {
    return R"(,{"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":)" + std::to_string(ts) +
           R"(,"args":{"Device Type":1,"Device Id":0,"Bytes":)" + std::to_string(bytes) + R"(,"Addr":)" +
           std::to_string(addr) + R"(,"Total Allocated":)" + std::to_string(total) + R"(,"Total Reserved":)" +
           std::to_string(1024 * kMiB) + "}}";
  };
  auto op = [](const char* name, std::int64_t ts, std::int64_t dur) {
    return R"(,{"ph":"X","cat":"cpu_op","name":")" + std::string(name) + R"(","pid":1,"tid":1,"ts":)" +
           std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) + "}";
  };
  std::string ev = R"({"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":1,"tid":1,"ts":0,"dur":1000})";
  ev += op("aten::empty", 10, 10) + rec(15, big, 0x1000, big);
  ev += op("aten::contiguous", 100, 50) + op("aten::clone", 105, 40) + op("aten::empty_like", 110, 10) +
        rec(115, big, 0x2000, 2 * big);
  ev += op("aten::add", 200, 10) + rec(205, -big, 0x2000, big) + rec(206, -big, 0x1000, 0);
  Result<Trace> t = read_trace_bytes(R"({"traceEvents":[)" + ev + "]}", "copy.json");
  ASSERT_TRUE(t) << t.error().to_string();
  const std::vector<Finding> f = diagnose(*t, {.only = {"memory_spike"}}).findings;
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].title.find("256.0 MiB of step 1's 512.0 MiB spike"), std::string::npos) << f[0].title;
  EXPECT_NE(f[0].title.find("aten::contiguous"), std::string::npos) << f[0].title;
}

}  // namespace
}  // namespace tprof
