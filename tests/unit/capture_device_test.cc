// The trace builder's device part, fed a DeviceBatch directly (what any
// ActivitySource hands over): linking API calls to the scope open around
// them, device work to its launch, flows, GPU annotation spans, lanes and
// metadata, and what torch's table makes of the result. Needs no CUPTI.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/capture/trace_builder.h"
#include "tests/support/trace_compare.h"
#include "tprof/key_averages.h"
#include "tprof/read.h"
#include "tprof/record_function.h"
#include "tprof/write.h"

namespace tprof::internal {
namespace {

constexpr std::int64_t kEpoch = 1790000000123456789;  // epoch ns of tick 0 and of monotonic 0
constexpr std::int64_t kTid = 100;

constexpr ScopeSite kMatmulAdd{"matmul_add", kUserAnnotation};
constexpr ScopeSite kMm{"aten::mm", kCpuOp};
constexpr ScopeSite kAdd{"aten::add", kCpuOp};

Record scope(const ScopeSite* site, std::uint64_t start, std::uint64_t end) {
  return {reinterpret_cast<std::uintptr_t>(site), start, end, 0, kRecordScope, 0};
}

// Records arrive in scope-exit order, as the recorder appends them.
std::vector<Record> cpu_records() {
  return {
      scope(&kMm, 150, 400),
      scope(&kAdd, 450, 800),
      scope(&kMatmulAdd, 100, 900),
      {0, 10, 1000, 0, kRecordStep, 0},  // ProfilerStep#0
  };
}

void add(DeviceBatch* b, DeviceEventKind kind, std::int64_t start, std::int64_t end, std::uint64_t corr,
         std::string_view name, std::string_view args, std::int32_t device = -1, std::int64_t stream = -1,
         std::int64_t thread = 0) {
  DeviceEvent e;
  e.kind = kind;
  e.start_ns = start;
  e.end_ns = end;
  e.correlation = corr;
  e.device = device;
  e.stream = stream;
  e.thread = thread;
  std::tie(e.name_offset, e.name_len) = b->add_text(name);
  std::tie(e.args_offset, e.args_len) = b->add_text(args);
  b->events.push_back(e);
}

DeviceBatch device_batch() {
  DeviceBatch b;
  // Out of order on purpose: a source hands events over in buffer order.
  add(&b, DeviceEventKind::kKernel, 610, 700, 2, "add_kernel", "\"device\": 0, \"stream\": 7, \"correlation\": 2", 0, 7);
  add(&b, DeviceEventKind::kRuntime, 200, 300, 1, "cudaLaunchKernel", "\"cbid\": 211, \"correlation\": 1", -1, -1,
      kTid);
  add(&b, DeviceEventKind::kKernel, 350, 450, 1, "gemm_kernel", "\"device\": 0, \"stream\": 7, \"correlation\": 1", 0,
      7);
  add(&b, DeviceEventKind::kRuntime, 500, 600, 2, "cudaLaunchKernel", "\"cbid\": 211, \"correlation\": 2", -1, -1,
      kTid);
  // A synchronize after the add, still inside matmul_add: launches nothing.
  add(&b, DeviceEventKind::kRuntime, 820, 880, 3, "cudaDeviceSynchronize", "\"cbid\": 165, \"correlation\": 3", -1,
      -1, kTid);
  // A copy whose launch was not recorded, and an API call on a thread with no scopes.
  add(&b, DeviceEventKind::kMemcpy, 720, 730, 9, "Memcpy HtoD (Pageable -> Device)",
      "\"stream\": 13, \"correlation\": 9, \"bytes\": 64", 0, 13);
  add(&b, DeviceEventKind::kRuntime, 300, 310, 10, "cudaGetDevice", "\"cbid\": 17, \"correlation\": 10", -1, -1,
      200);
  add(&b, DeviceEventKind::kOverhead, 5, 8, 0, "Activity Buffer Request", "", -1, -1, 0);
  // Before the window: a warmup's launch, dropped.
  add(&b, DeviceEventKind::kRuntime, -500, -400, 11, "cudaLaunchKernel", "\"cbid\": 211, \"correlation\": 11", -1,
      -1, kTid);
  b.device_properties.push_back("{\"id\": 0, \"name\": \"Test GPU\", \"numSms\": 132}");
  b.top_level.emplace_back("cupti_version", "130001");
  return b;
}

Trace build(const DeviceBatch& device) {
  const std::vector<Record> records = cpu_records();
  std::vector<ThreadRecords> threads(1);
  threads[0].tid = kTid;
  threads[0].name = "main";
  threads[0].records = records;
  TickConversion clock;
  clock.tick0 = 0;
  clock.epoch_ns0 = kEpoch;
  clock.ns_per_tick = 1.0;
  clock.monotonic_to_epoch_ns = kEpoch;
  CaptureInfo info;
  info.pid = 42;
  info.process_name = "matmul_add";
  info.window_start_ns = kEpoch;
  info.window_start_monotonic_ns = 0;
  info.cuda_requested = info.cuda_available = true;
  return build_trace(threads, device, clock, info);
}

std::uint32_t find(const Trace& t, std::string_view name, Phase ph = Phase::kComplete, std::string_view cat = {}) {
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.name(e) == name && t.events.phase[e] == ph && (cat.empty() || t.cat(e) == cat)) return e;
  }
  ADD_FAILURE() << "no event " << name;
  return 0;
}

TEST(CaptureDevice, ApiCallsLinkToTheInnermostOpenScopeAndWorkToItsLaunch) {
  const Trace t = build(device_batch());
  const EventColumns& ev = t.events;
  const std::uint32_t mm = find(t, "aten::mm"), add_op = find(t, "aten::add"), ma = find(t, "matmul_add");
  const std::uint32_t gemm = find(t, "gemm_kernel"), add_kernel = find(t, "add_kernel");
  EXPECT_EQ(ev.external_id[gemm], ev.external_id[mm]);
  EXPECT_EQ(ev.external_id[add_kernel], ev.external_id[add_op]);
  EXPECT_EQ(ev.correlation[gemm], 1);
  EXPECT_EQ(ev.kind[gemm], EventKind::kKernel);
  EXPECT_EQ(t.args_json(gemm), "{\"External id\": " + std::to_string(ev.external_id[mm]) +
                                   ", \"device\": 0, \"stream\": 7, \"correlation\": 1}");
  // The synchronize sits in matmul_add after aten::add ended.
  const std::uint32_t sync = find(t, "cudaDeviceSynchronize");
  EXPECT_EQ(ev.external_id[sync], ev.external_id[ma]);
  EXPECT_EQ(ev.kind[sync], EventKind::kCudaRuntime);
  EXPECT_EQ(ev.ts_ns[sync], kEpoch + 820);
  EXPECT_EQ(ev.dur_ns[sync], 60);
  // Unlinked: no External id, and no "External id" key (Kineto leaves it out).
  const std::uint32_t copy = find(t, "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(ev.external_id[copy], -1);
  EXPECT_EQ(t.args_json(copy), "{\"stream\": 13, \"correlation\": 9, \"bytes\": 64}");
  const std::uint32_t get_device = find(t, "cudaGetDevice");
  EXPECT_EQ(ev.external_id[get_device], -1);
  // The warmup's launch is not in the window.
  std::size_t launches = 0;
  for (std::uint32_t e = 0; e < ev.size(); ++e) launches += t.name(e) == "cudaLaunchKernel";
  EXPECT_EQ(launches, 2u);
}

TEST(CaptureDevice, FlowsPairEachLaunchWithItsWorkAndStartBeforeIt) {
  const Trace t = build(device_batch());
  const EventColumns& ev = t.events;
  std::map<std::int64_t, std::vector<std::uint32_t>> starts, ends;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] == Phase::kFlowStart) starts[ev.flow_id[e]].push_back(e);
    if (ev.phase[e] == Phase::kFlowEnd) ends[ev.flow_id[e]].push_back(e);
  }
  // Launches 1 and 2 only: the synchronize, the unmatched copy and the
  // call on the other thread get no half flows.
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(ends.size(), 2u);
  for (const auto& [id, s] : starts) {
    ASSERT_EQ(s.size(), 1u);
    ASSERT_EQ(ends[id].size(), 1u);
    const std::uint32_t f = ends[id][0];
    EXPECT_EQ(t.cat(s[0]), "ac2g");
    EXPECT_EQ(ev.kind[s[0]], EventKind::kFlow);
    EXPECT_LT(ev.ts_ns[s[0]], ev.ts_ns[f]);
    EXPECT_EQ(t.lanes[ev.lane[s[0]]].kind, LaneKind::kCpu);
    EXPECT_EQ(t.lanes[ev.lane[f]].kind, LaneKind::kGpu);
    EXPECT_TRUE(ev.flags[f] & kFlagBindEnclosing);
  }
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kUnmatchedFlow), 0u);
}

TEST(CaptureDevice, GpuAnnotationSpansTheAnnotationsWorkPerStream) {
  const Trace t = build(device_batch());
  const EventColumns& ev = t.events;
  std::vector<std::uint32_t> spans;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.kind[e] == EventKind::kGpuUserAnnotation) spans.push_back(e);
  }
  // matmul_add on stream 7 only: ProfilerStep#N is not a user annotation
  // here (as in torch), and the copy on stream 13 was not launched in it.
  ASSERT_EQ(spans.size(), 1u);
  const std::uint32_t s = spans[0];
  EXPECT_EQ(t.name(s), "matmul_add");
  EXPECT_EQ(ev.external_id[s], ev.external_id[find(t, "matmul_add")]);
  EXPECT_EQ(ev.ts_ns[s], kEpoch + 350 - 1);  // Kineto's 1 ns either side
  EXPECT_EQ(ev.dur_ns[s], 700 - 350 + 2);
  EXPECT_EQ(t.lanes[ev.lane[s]].stream, 7);
}

TEST(CaptureDevice, LanesAndMetadataAsKinetoWritesThem) {
  const Trace t = build(device_batch());
  std::set<std::int64_t> gpu_streams;
  for (const Lane& l : t.lanes) {
    if (l.kind != LaneKind::kGpu) continue;
    EXPECT_EQ(l.device, 0);
    gpu_streams.insert(l.stream);
    EXPECT_EQ(t.str(l.thread_name), "stream " + std::to_string(l.stream) + " ");
    EXPECT_EQ(l.sort_index, l.stream);
  }
  EXPECT_EQ(gpu_streams, (std::set<std::int64_t>{7, 13}));
  bool gpu_process = false, cpu_process = false;
  for (const Process& p : t.processes) {
    if (p.pid.num == 0) {
      gpu_process = true;
      EXPECT_EQ(t.str(p.labels), "GPU 0");
      EXPECT_EQ(p.sort_index, 5000000);
    }
    if (p.pid.num == 42) {
      cpu_process = true;
      EXPECT_EQ(t.str(p.labels), "CPU");
      EXPECT_EQ(t.str(p.name), "matmul_add");
    }
  }
  EXPECT_TRUE(gpu_process && cpu_process);
  // The thread with only an API call gets a named row; overhead sits where
  // Kineto puts it (pid -1), not on a CPU or GPU lane.
  const std::uint32_t get_device = find(t, "cudaGetDevice");
  EXPECT_EQ(t.str(t.lanes[t.events.lane[get_device]].thread_name), "thread 200");
  const std::uint32_t overhead = find(t, "Activity Buffer Request");
  EXPECT_EQ(t.events.kind[overhead], EventKind::kOverhead);
  EXPECT_EQ(t.lanes[t.events.lane[overhead]].pid.num, -1);
  EXPECT_EQ(t.lanes[t.events.lane[overhead]].kind, LaneKind::kOther);
  // Top level: PyTorch 2.x's relative time base.
  ASSERT_TRUE(t.meta.base_time_ns.has_value());
  EXPECT_EQ(*t.meta.base_time_ns % 1000000000, 0);
  EXPECT_EQ(t.meta.top_level_json("displayTimeUnit"), "\"ms\"");
  EXPECT_EQ(t.meta.top_level_json("deviceProperties"), "[{\"id\": 0, \"name\": \"Test GPU\", \"numSms\": 132}]");
  EXPECT_EQ(t.meta.top_level_json("cupti_version"), "130001");
}

TEST(CaptureDevice, TorchsTableChargesKernelsToTheLaunchingOp) {
  const Trace t = build(device_batch());
  const std::vector<StatRow> rows = EventList::build(t).key_averages();
  std::map<std::string, StatRow> by_key;  // CPU and device rows; the GPU annotation row apart
  StatRow annotation;
  for (const StatRow& r : rows) (r.is_user_annotation ? annotation : by_key[r.key]) = r;
  EXPECT_EQ(annotation.key, "matmul_add");
  EXPECT_EQ(annotation.device_time_total_ns, 352);
  EXPECT_EQ(by_key["aten::mm"].self_device_time_total_ns, 100);
  EXPECT_EQ(by_key["aten::add"].self_device_time_total_ns, 90);
  EXPECT_EQ(by_key["matmul_add"].device_time_total_ns, 190);
  EXPECT_TRUE(by_key["gemm_kernel"].is_device);
  EXPECT_EQ(by_key["gemm_kernel"].device_time_total_ns, 100);
  EXPECT_EQ(by_key.count("Activity Buffer Request"), 0u);  // not one of torch's rows
}

TEST(CaptureDevice, WrittenAndReadBackItIsTheSameModel) {
  const Trace t = build(device_batch());
  std::string json;
  write_trace_json(t, &json);
  EXPECT_NE(json.find("\"baseTimeNanoseconds\": "), std::string::npos);
  Result<Trace> back = read_trace_bytes(json, "device.json");
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(testing::diff_traces(t, *back), "");
  EXPECT_EQ(back->meta.producer, Producer::kTprof);
}

TEST(CaptureDevice, ProblemsAndDropsBecomeDiagnostics) {
  DeviceBatch b;
  b.problems.push_back("CUDA activity unavailable: no CUDA driver");
  b.dropped = 7;
  const Trace t = build(b);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kActivityUnavailable), 1u);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kDroppedEvents), 1u);
  EXPECT_EQ(t.meta.dropped_events, 7u);
  bool named = false;
  for (const Diagnostic& d : t.diagnostics.items()) named |= d.message.find("no CUDA driver") != std::string::npos;
  EXPECT_TRUE(named);
  // The written trace carries the reason: every reader of the file sees it.
  std::string json;
  write_trace_json(t, &json);
  Result<Trace> back = read_trace_bytes(json, "cpu_only.json");
  ASSERT_TRUE(back);
  ASSERT_EQ(back->diagnostics.count(DiagnosticCode::kActivityUnavailable), 1u);
  for (const Diagnostic& d : back->diagnostics.items()) {
    if (d.code == DiagnosticCode::kActivityUnavailable) {
      EXPECT_EQ(d.message, "CUDA activity unavailable: no CUDA driver");
    }
  }
  EXPECT_EQ(back->meta.dropped_events, 7u);
}

}  // namespace
}  // namespace tprof::internal
