// CUPTI records -> converter -> trace builder -> Kineto JSON, end to end on
// CPU: one step of the blog's matmul_add as an H100 runs it (eager GEMM and
// add kernel, an addmm-style bias copy, a memset, the closing synchronize)
// with the CPU scopes around it. Checked field by field against what
// PyTorch 2.11 wrote for the same launches (tests/data/gpu/h100-torch-2.11)
// and against a golden trace. CUPTI's memory records as torch's [memory]
// records (profile_memory). Then tprof's own H100 captures
// (tests/data/gpu/h100-tprof) read back: Self CUDA total is the device
// work's, and their rows are torch's rows for the same runs.
//
// Regenerate the golden file after a reviewed change:
//   TPROF_UPDATE_GOLDEN=1 build/tests/unit/cupti_trace_test
// then read the diff of tests/unit/expected/cupti_trace.json before keeping it.
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/capture/graph_nodes.h"
#include "src/capture/trace_builder.h"
#include "src/cupti/cupti_cbid_names.h"
#include "src/cupti/kineto_api_calls.h"
#include "src/trace/json_value.h"
#include "tests/support/cupti_records.h"
#include "tprof/key_averages.h"
#include "tprof/memory.h"
#include "tprof/read.h"
#include "tprof/record_function.h"
#include "tprof/write.h"

namespace tprof::internal {
namespace {

constexpr std::uint32_t kTid = 4242;
constexpr std::int64_t kEpochOfMonotonic0 = 1790857026000000000;  // the fixtures' baseTimeNanoseconds

constexpr ScopeSite kMatmulAdd{"matmul_add", kUserAnnotation};
constexpr ScopeSite kMatmul{"aten::matmul", kCpuOp};
constexpr ScopeSite kMm{"aten::mm", kCpuOp};
constexpr ScopeSite kAdd{"aten::add", kCpuOp};
constexpr ScopeSite kCopy{"aten::copy_", kCpuOp};

Record scope(const ScopeSite* site, std::uint64_t start, std::uint64_t end) {
  return {reinterpret_cast<std::uintptr_t>(site), start, end, 0, kRecordScope, 0};
}

// One step; ticks are CLOCK_MONOTONIC ns here (ns_per_tick 1, same origin).
std::vector<Record> cpu_records() {
  return {
      scope(&kMm, 1300, 3900),      scope(&kMatmul, 1200, 4000), scope(&kAdd, 4200, 7000),
      scope(&kCopy, 7050, 7600),    scope(&kMatmulAdd, 1100, 8000),
      {1, 1000, 9000, 0, kRecordStep, 0},  // ProfilerStep#1
  };
}

// What CUPTI hands over for that step, in two buffers and out of order.
// Stream 7 runs one thing at a time: GEMM 1900-4012, memset 4050-5138,
// add 5200-6285, copy 7400-8425.
DeviceBatch device_batch() {
  CuptiRecordConverter c;
  // Buffer 1: the API calls (CUPTI fills API records first, device records
  // as the work completes).
  add(c, api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 1500, 300, kTid, 33));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, 3000, 100, kTid, 36));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 4500, 200, kTid, 34));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 7100, 200, kTid, 35));
  // The profiler's stop synchronizes after the last step, as torch's does.
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 9100, 400,
                    kTid, 37));
  // Buffer 2: device work, the context and device records last.
  add(c, memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 7400, 1025, 8192, 35));
  add(c, kernel("_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c108BFloat16EEESt5arrayIPcLm3EEEEviT0_T1_",
                5200, 1085, 34, {16384, 1, 1}, {128, 1, 1}, 34, 0, 0));
  add(c, kernel("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT", 1900, 2112, 33, {4, 2, 1}, {384, 1, 1}, 168, 0, 164308));
  add(c, memset_record(4050, 1088, 4, 36));  // queued behind the GEMM on stream 7
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 9200, 290, 1,
                     static_cast<std::uint32_t>(CUPTI_SYNCHRONIZATION_INVALID_VALUE), 0, 37));
  add(c, context_record(1, 0));
  add(c, h100_device(0));
  DeviceBatch b;
  c.finish(&b);
  b.top_level.emplace_back("cupti_version", "130001");
  return b;
}

// One python3 thread's records and a device batch as the window starting
// at monotonic `start_ns` (graph nodes' scopes when given).
Trace window_trace(const std::vector<Record>& records, const DeviceBatch& batch, std::int64_t start_ns,
                   GraphNodeScopes* nodes) {
  std::vector<ThreadRecords> threads(1);
  threads[0].tid = kTid;
  threads[0].name = "python3";
  threads[0].records = records;
  TickConversion clock;
  clock.epoch_ns0 = kEpochOfMonotonic0;
  clock.monotonic_to_epoch_ns = kEpochOfMonotonic0;
  CaptureInfo info;
  info.pid = kTid;
  info.process_name = "python3";
  info.window_start_ns = kEpochOfMonotonic0 + start_ns;
  info.window_start_monotonic_ns = start_ns;
  info.cuda_requested = info.cuda_available = true;
  info.graph_nodes = nodes;
  return build_trace(threads, batch, clock, info);
}

Trace build() { return window_trace(cpu_records(), device_batch(), 900, nullptr); }

std::string golden_path() { return std::string(TPROF_SOURCE_DIR) + "/tests/unit/expected/cupti_trace.json"; }

TEST(CuptiTrace, GoldenTrace) {
  std::string json;
  write_trace_json(build(), &json);
  if (const char* u = std::getenv("TPROF_UPDATE_GOLDEN"); u != nullptr && u[0] == '1') {
    std::ofstream(golden_path(), std::ios::binary) << json;
    GTEST_SKIP() << "rewrote " << golden_path() << ": review the diff";
  }
  std::ifstream in(golden_path(), std::ios::binary);
  ASSERT_TRUE(in) << golden_path();
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(json, expected.str());
}

Trace load_fixture(const std::string& name) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/" + name);
  EXPECT_TRUE(t) << name;
  return t ? std::move(t).value() : Trace();
}

// The keys of event e's args, in order.
std::vector<std::string> arg_keys(const Trace& t, std::uint32_t e) {
  std::vector<std::string> keys;
  auto v = JsonValue::parse(t.args_json(e), 0);
  if (!v) return keys;
  for (const auto& [k, value] : v->members()) keys.push_back(k);
  return keys;
}

// The first event of category `cat` named `name` (any name when empty).
std::uint32_t first(const Trace& t, std::string_view cat, std::string_view name = {}) {
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.cat(e) == cat && (name.empty() || t.name(e) == name)) return e;
  }
  return kNoIndex;
}

TEST(CuptiTrace, EveryCategoryHasTheArgsPyTorchWrites) {
  const Trace ours = build();
  const Trace eager = load_fixture("4096_bf16_warm_eager.json");
  const Trace compile = load_fixture("64_bf16_warm_compile.json");
  struct Case {
    const Trace& fixture;
    std::string_view cat, name;
  };
  const Case cases[] = {
      {eager, "kernel", "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"},
      {eager, "gpu_memset", ""},
      {eager, "cuda_runtime", "cudaLaunchKernel"},
      {eager, "cuda_runtime", "cudaMemsetAsync"},
      {eager, "cuda_driver", "cuLaunchKernelEx"},
      {eager, "cuda_runtime", "cudaDeviceSynchronize"},
      {eager, "gpu_user_annotation", ""},
      {compile, "gpu_memcpy", ""},
      {compile, "cuda_runtime", "cudaMemcpyAsync"},
  };
  for (const Case& c : cases) {
    const std::uint32_t theirs = first(c.fixture, c.cat, c.name);
    // Our kernel has another name (a 64x64 GEMM); the args are the same.
    const std::uint32_t mine = first(ours, c.cat, c.cat == "kernel" ? std::string_view() : c.name);
    ASSERT_NE(theirs, kNoIndex) << c.cat << " " << c.name;
    ASSERT_NE(mine, kNoIndex) << c.cat << " " << c.name;
    EXPECT_EQ(arg_keys(ours, mine), arg_keys(c.fixture, theirs)) << c.cat << " " << c.name;
    EXPECT_EQ(ours.lanes[ours.events.lane[mine]].kind, c.fixture.lanes[c.fixture.events.lane[theirs]].kind)
        << c.cat;
  }
  // The values that do not depend on the run, exactly as PyTorch wrote them.
  const std::uint32_t k = first(ours, "kernel", "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT");
  ASSERT_NE(k, kNoIndex);
  const std::string args(ours.args_json(k));
  EXPECT_NE(args.find("\"registers per thread\": 168, \"shared memory\": 164308, \"blocks per SM\": 0.060606, "
                      "\"warps per SM\": 0.727273, \"grid\": [4, 2, 1], \"block\": [384, 1, 1], "
                      "\"est. achieved occupancy %\": 0"),
            std::string::npos)
      << args;
  const std::uint32_t copy = first(ours, "gpu_memcpy");
  EXPECT_EQ(ours.name(copy), "Memcpy DtoD (Device -> Device)");
  EXPECT_NE(ours.args_json(copy).find("\"bytes\": 8192, \"memory bandwidth (GB/s)\": 7.9921951219512195"),
            std::string::npos);
  // The add kernel's demangled name is the one torch shows.
  EXPECT_NE(first(ours, "kernel",
                  "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
                  "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"),
            kNoIndex);
}

TEST(CuptiTrace, LanesMetadataAndTopLevelAsPyTorchWritesThem) {
  const Trace ours = build();
  const Trace fixture = load_fixture("64_bf16_warm_eager.json");
  for (const Trace* t : {&ours, &fixture}) {
    bool stream7 = false;
    for (const Lane& l : t->lanes) {
      if (l.kind != LaneKind::kGpu || l.stream != 7) continue;
      stream7 = true;
      EXPECT_EQ(t->str(l.thread_name), "stream 7 ");
      EXPECT_EQ(l.sort_index, 7);
      EXPECT_EQ(l.device, 0);
    }
    EXPECT_TRUE(stream7);
    bool gpu0 = false;
    for (const Process& p : t->processes) {
      if (!p.pid.is_str && p.pid.num == 0) {
        gpu0 = true;
        EXPECT_EQ(t->str(p.labels), "GPU 0");
        EXPECT_EQ(p.sort_index, 5000000);
      }
    }
    EXPECT_TRUE(gpu0);
    EXPECT_EQ(t->meta.top_level_json("displayTimeUnit"), "\"ms\"");
    EXPECT_TRUE(t->meta.base_time_ns.has_value());
  }
  // deviceProperties: the fixture's element, key for key and value for value.
  auto props = JsonValue::parse(ours.meta.top_level_json("deviceProperties"), 0);
  auto theirs = JsonValue::parse(fixture.meta.top_level_json("deviceProperties"), 0);
  ASSERT_TRUE(props && theirs);
  ASSERT_EQ(props->items().size(), 1u);
  for (const auto& [key, value] : props->items()[0].members()) {
    const JsonValue* t = theirs->items()[0].find(key);
    ASSERT_NE(t, nullptr) << key;
    EXPECT_EQ(value.is_string() ? value.text() : std::to_string(value.int_or(-1)),
              t->is_string() ? t->text() : std::to_string(t->int_or(-1)))
        << key;
  }
}

TEST(CuptiTrace, LaunchesStartBeforeTheirWorkAndTheTableChargesTheOps) {
  const Trace t = build();
  std::map<std::int64_t, std::int64_t> flow_start;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] == Phase::kFlowStart) flow_start[t.events.flow_id[e]] = t.events.ts_ns[e];
  }
  std::size_t ends = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] != Phase::kFlowEnd) continue;
    ++ends;
    ASSERT_EQ(flow_start.count(t.events.flow_id[e]), 1u);
    EXPECT_LT(flow_start[t.events.flow_id[e]], t.events.ts_ns[e]);
  }
  // Two kernels, the memset, the copy, and the synchronize as the device
  // saw it (Kineto links a cuda_sync to its call the same way).
  EXPECT_EQ(ends, 5u);
  std::map<std::string, StatRow> cpu;
  for (const StatRow& r : EventList::build(t).key_averages()) {
    if (!r.is_user_annotation && !r.is_device) cpu[r.key] = r;
  }
  EXPECT_EQ(cpu["aten::mm"].self_device_time_total_ns, 2112 + 1088);  // GEMM and memset
  EXPECT_EQ(cpu["aten::add"].self_device_time_total_ns, 1085);
  EXPECT_EQ(cpu["aten::copy_"].self_device_time_total_ns, 1025);
  EXPECT_EQ(cpu["matmul_add"].device_time_total_ns, 2112 + 1088 + 1085 + 1025);
  // The synchronization is the host waiting, not device work: no row, and
  // Self CUDA time total is the kernels', the memset's and the copy's.
  std::int64_t self_cuda = 0;
  for (const StatRow& r : EventList::build(t).key_averages()) {
    EXPECT_NE(r.key, "Context Sync");
    if (r.is_device && !r.is_user_annotation) self_cuda += r.self_device_time_total_ns;
  }
  EXPECT_EQ(self_cuda, 2112 + 1088 + 1085 + 1025);
  // The context synchronize: on the GPU's lane; no scope was open around
  // its call, so no External id (as torch's closing synchronize).
  const std::uint32_t sync = first(t, "cuda_sync");
  ASSERT_NE(sync, kNoIndex);
  EXPECT_EQ(t.name(sync), "Context Sync");
  EXPECT_EQ(t.lanes[t.events.lane[sync]].kind, LaneKind::kGpu);
  EXPECT_EQ(t.events.external_id[sync], -1);
}

// Synchronizations (ProfilerOptions::cuda_sync_events) as Kineto writes
// them: cat cuda_sync on the device's pid; a stream's on its stream's row,
// a context's (no stream) on tid 1 (Kineto writes tids as positive
// numbers) with no row named for it; a stream waiting on an event only
// where the window shows device work on that stream; an event sync's args
// with the keys of Kineto's public trace (tests/data/public/kineto).
TEST(CuptiTrace, SynchronizationsAsKinetoWritesThem) {
  CuptiRecordConverter c;
  add(c, kernel("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT", 1900, 2112, 33, {4, 2, 1}, {384, 1, 1}, 168, 0, 164308));
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 1000, 10, 1, 7, 5, 40));
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 1100, 10, 1, 13, 5, 41));
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 4100, 30, 1,
                     static_cast<std::uint32_t>(CUPTI_SYNCHRONIZATION_INVALID_VALUE), 5, 42));
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 4200, 30, 1,
                     static_cast<std::uint32_t>(CUPTI_SYNCHRONIZATION_INVALID_VALUE), 0, 43));
  add(c, context_record(1, 0));
  DeviceBatch b;
  c.finish(&b);
  TickConversion clock;
  clock.epoch_ns0 = clock.monotonic_to_epoch_ns = kEpochOfMonotonic0;
  CaptureInfo info;
  info.pid = kTid;
  info.process_name = "python3";
  info.window_start_ns = kEpochOfMonotonic0 + 900;
  info.window_start_monotonic_ns = 900;
  info.cuda_requested = info.cuda_available = true;
  const Trace t = build_trace({}, b, clock, info);
  std::map<std::string, std::vector<std::uint32_t>> syncs;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.cat(e) == "cuda_sync") syncs[std::string(t.name(e))].push_back(e);
  }
  ASSERT_EQ(syncs["Stream Wait Event"].size(), 1u) << "stream 13 shows no work: its wait is left out";
  const std::uint32_t wait = syncs["Stream Wait Event"][0];
  EXPECT_EQ(t.events.correlation[wait], 40);
  EXPECT_EQ(t.lanes[t.events.lane[wait]].tid.num, 7);
  ASSERT_EQ(syncs["Context Sync"].size(), 1u);
  const Lane& context_lane = t.lanes[t.events.lane[syncs["Context Sync"][0]]];
  EXPECT_EQ(context_lane.pid.num, 0);
  EXPECT_EQ(context_lane.tid.num, 1);
  EXPECT_EQ(context_lane.thread_name, kEmptyStr);
  // The event sync's keys are those of Kineto's own trace.
  const Trace kineto = [] {
    Result<Trace> r = read_trace(std::string(TPROF_TEST_DATA) + "/public/kineto/docs/traces/after_fix_trace.json");
    EXPECT_TRUE(r);
    return r ? std::move(r).value() : Trace();
  }();
  ASSERT_EQ(syncs["Event Sync"].size(), 1u);
  const std::uint32_t theirs = first(kineto, "cuda_sync", "Event Sync");
  ASSERT_NE(theirs, kNoIndex);
  std::vector<std::string> keys = arg_keys(kineto, theirs);
  keys.erase(keys.begin());  // "External id": the builder's, for a call inside a scope
  EXPECT_EQ(arg_keys(t, syncs["Event Sync"][0]), keys);
  EXPECT_NE(t.args_json(syncs["Event Sync"][0]).find("\"wait_on_stream\": -1, \"wait_on_cuda_event_record_corr_id\": -1, "
                                                     "\"wait_on_cuda_event_id\": 5, \"stream\": -1"),
            std::string::npos);
}

// ---- CUDA graphs and Triton's driver launches -----------------------------------------

// What torch.compile(mode="reduce-overhead") does: a GEMM, an add and a
// GEMM captured into a CUDA graph, each inside an annotation, the graph
// instantiated (its nodes copied: 1 -> 11, 2 -> 12, 3 -> 13), then
// replayed; and an Inductor (Triton) kernel launched with cuLaunchKernel.
constexpr ScopeSite kCaptureRange{"capture", kUserAnnotation};
constexpr ScopeSite kGraphGemm{"graph_gemm", kUserAnnotation};
constexpr ScopeSite kGraphAdd{"graph_add", kUserAnnotation};
constexpr ScopeSite kInstantiate{"cuda_graph::instantiate", kCpuOp};
constexpr ScopeSite kReplay{"replay", kUserAnnotation};
constexpr ScopeSite kGraphed{"graphed_forward", kCpuOp};
constexpr const char* kGemmKernel = "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT";
constexpr const char* kTritonKernel = "triton_poi_fused_add_0";

Record node_created(std::uint64_t node, std::uint64_t tick) { return {node, tick, 0, 0, kRecordGraphNode, 0}; }
Record node_cloned(std::uint64_t node, std::uint64_t original, std::uint64_t tick) {
  return {node, tick, original, 0, kRecordGraphNode, 1};
}

// The capture: node 1 inside aten::mm inside graph_gemm, node 2 directly
// inside graph_add, node 3 inside a second graph_gemm; their copies made
// inside cuda_graph::instantiate.
std::vector<Record> capture_records() {
  return {
      scope(&kCaptureRange, 100, 400), scope(&kGraphGemm, 110, 200),  scope(&kMm, 120, 190),
      node_created(1, 150),            scope(&kGraphAdd, 210, 300),   node_created(2, 250),
      scope(&kGraphGemm, 310, 390),    node_created(3, 350),          scope(&kInstantiate, 420, 480),
      node_created(11, 430),           node_cloned(11, 1, 431),       node_created(12, 440),
      node_cloned(12, 2, 441),         node_created(13, 450),         node_cloned(13, 3, 451),
  };
}

// Two replays (one inside the replay annotation, one inside an op) and a
// Triton kernel between them, launched inside aten::add.
std::vector<Record> replay_records() {
  return {scope(&kReplay, 500, 700), scope(&kAdd, 710, 790), scope(&kGraphed, 880, 990)};
}

DeviceBatch replay_batch() {
  CuptiRecordConverter c;
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 520, 40, kTid, 50));
  add(c, api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 720, 20, kTid, 52));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 890, 20, kTid, 51));
  add(c, from_graph(kernel(kGemmKernel, 600, 50, 50, {4, 2, 1}, {384, 1, 1}, 168, 0, 0), 3, 11));
  add(c, from_graph(kernel(kTritonKernel, 660, 30, 50, {16, 1, 1}, {128, 1, 1}, 32, 0, 0), 3, 12));
  add(c, from_graph(kernel(kGemmKernel, 695, 10, 50, {4, 2, 1}, {384, 1, 1}, 168, 0, 0), 3, 13));
  add(c, kernel(kTritonKernel, 800, 50, 52, {16, 1, 1}, {128, 1, 1}, 32, 0, 0));
  add(c, from_graph(kernel(kGemmKernel, 920, 20, 51, {4, 2, 1}, {384, 1, 1}, 168, 0, 0), 3, 11));
  add(c, from_graph(kernel(kTritonKernel, 945, 10, 51, {16, 1, 1}, {128, 1, 1}, 32, 0, 0), 3, 12));
  add(c, from_graph(kernel(kGemmKernel, 960, 10, 51, {4, 2, 1}, {384, 1, 1}, 168, 0, 0), 3, 13));
  add(c, context_record(1, 0));
  add(c, h100_device(0));
  DeviceBatch b;
  c.finish(&b);
  return b;
}

Trace build_window(const std::vector<Record>& records, const DeviceBatch& batch, GraphNodeScopes* nodes) {
  return window_trace(records, batch, 50, nodes);
}

// Events of category `cat` named `name`, in time order.
std::vector<std::uint32_t> all(const Trace& t, std::string_view cat, std::string_view name) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.cat(e) == cat && t.name(e) == name) out.push_back(e);
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return t.events.ts_ns[a] < t.events.ts_ns[b]; });
  return out;
}

std::string arg_text(const Trace& t, std::uint32_t e, const char* key) {
  auto v = JsonValue::parse(t.args_json(e), 0);
  const JsonValue* a = v ? v->find(key) : nullptr;
  return a == nullptr ? "<none>" : a->is_string() ? a->text() : std::to_string(a->int_or(-1));
}

// The External ids of the scopes named `name`, in time order.
std::vector<std::int64_t> externals_of(const Trace& t, std::string_view name) {
  std::vector<std::int64_t> out;
  for (const std::string_view cat : {"cpu_op", "user_annotation"}) {
    for (const std::uint32_t e : all(t, cat, name)) out.push_back(t.events.external_id[e]);
  }
  return out;
}
std::int64_t external_of(const Trace& t, std::string_view name) {
  const std::vector<std::int64_t> ids = externals_of(t, name);
  return ids.empty() ? -2 : ids[0];
}

// Each replayed kernel: its graph's ids, the scope its node was captured
// in (the copy's original's, not cudaGraphInstantiate's), its launch's
// External id and flow; per replay a gpu_user_annotation span for each
// capture annotation, around its own work. The capture's ops are charged
// nothing.
void expect_replays(const Trace& t, bool capture_in_window) {
  SCOPED_TRACE(capture_in_window ? "captured in this window" : "captured in an earlier window");
  const std::vector<std::uint32_t> gemms = all(t, "kernel", kGemmKernel);
  const std::vector<std::uint32_t> triton = all(t, "kernel", kTritonKernel);
  ASSERT_EQ(gemms.size(), 4u);
  ASSERT_EQ(triton.size(), 3u);  // replayed, launched by cuLaunchKernel, replayed
  const std::uint32_t replayed[] = {gemms[0], triton[0], gemms[1], gemms[2], triton[2], gemms[3]};
  const char* const scope[] = {"aten::mm", "graph_add", "graph_gemm"};
  const char* const launched_in[] = {"replay", "graphed_forward"};
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(arg_text(t, replayed[i], "graph id"), "3");
    EXPECT_EQ(arg_text(t, replayed[i], "graph node id"), std::to_string(11 + i % 3));
    EXPECT_EQ(arg_text(t, replayed[i], "graph node scope"), scope[i % 3]);
    EXPECT_EQ(t.events.external_id[replayed[i]], external_of(t, launched_in[i / 3]));
    EXPECT_EQ(arg_keys(t, replayed[i]).back(), "graph node scope");
  }
  // The Triton kernel: eager, its driver call's op.
  EXPECT_EQ(arg_text(t, triton[1], "graph node scope"), "<none>");
  EXPECT_EQ(arg_text(t, triton[1], "graph id"), "<none>");
  EXPECT_EQ(t.events.external_id[triton[1]], external_of(t, "aten::add"));

  // Flows: each launch call (two graph launches, one cuLaunchKernel) to
  // each piece of work it launched.
  std::set<std::int64_t> starts;
  std::map<std::int64_t, std::vector<std::string>> ends;  // flow id -> the kernels it ends at
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.phase[e] == Phase::kFlowStart) starts.insert(t.events.flow_id[e]);
    if (t.events.phase[e] != Phase::kFlowEnd) continue;
    for (std::uint32_t k = 0; k < t.events.size(); ++k) {
      if (t.events.kind[k] == EventKind::kKernel && t.events.lane[k] == t.events.lane[e] &&
          t.events.ts_ns[k] == t.events.ts_ns[e]) {
        ends[t.events.flow_id[e]].push_back(std::string(t.name(k)));
      }
    }
  }
  EXPECT_EQ(starts, (std::set<std::int64_t>{50, 51, 52}));
  ASSERT_EQ(ends.size(), 3u);
  const std::vector<std::string> graph_kernels = {kGemmKernel, kTritonKernel, kGemmKernel};
  EXPECT_EQ(ends[50], graph_kernels);
  EXPECT_EQ(ends[51], graph_kernels);
  EXPECT_EQ(ends[52], std::vector<std::string>{kTritonKernel});
  EXPECT_EQ(all(t, "cuda_driver", "cuLaunchKernel").size(), 1u);
  EXPECT_EQ(all(t, "cuda_runtime", "cudaGraphLaunch").size(), 2u);

  // GPU spans: the launch's annotation (replay 1), and per replay one for
  // each capture annotation, on the kernels' stream: two graph_gemm ranges
  // are two spans, each around its own GEMM (not one over the add).
  EXPECT_EQ(all(t, "gpu_user_annotation", "replay").size(), 1u);
  EXPECT_EQ(all(t, "gpu_user_annotation", "capture").size(), 0u);  // not innermost
  const std::vector<std::uint32_t> gemm_spans = all(t, "gpu_user_annotation", "graph_gemm");
  const std::vector<std::uint32_t> add_spans = all(t, "gpu_user_annotation", "graph_add");
  ASSERT_EQ(gemm_spans.size(), 4u);
  ASSERT_EQ(add_spans.size(), 2u);
  const std::vector<std::int64_t> gemm_ranges = externals_of(t, "graph_gemm");
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(t.events.ts_ns[gemm_spans[k]], t.events.ts_ns[gemms[k]] - 1);
    EXPECT_EQ(t.events.dur_ns[gemm_spans[k]], t.events.dur_ns[gemms[k]] + 2);
    EXPECT_EQ(t.events.lane[gemm_spans[k]], t.events.lane[gemms[k]]);
    // Linked to the capture's annotation when it is in this trace, else to nothing.
    EXPECT_EQ(t.events.external_id[gemm_spans[k]], capture_in_window ? gemm_ranges[k % 2] : -1);
  }
  for (int r = 0; r < 2; ++r) {
    const std::uint32_t a = add_spans[r], ak = triton[2 * r];
    EXPECT_EQ(t.events.ts_ns[a], t.events.ts_ns[ak] - 1);
    EXPECT_EQ(t.events.dur_ns[a], t.events.dur_ns[ak] + 2);
    EXPECT_EQ(t.events.external_id[a], capture_in_window ? external_of(t, "graph_add") : -1);
  }

  // torch's table: the replays' time is their launching op's, never the
  // capture's (aten::mm ran once, at capture, and launched nothing).
  std::map<std::string, StatRow> cpu;
  for (const StatRow& r : EventList::build(t).key_averages()) {
    if (!r.is_device) cpu[r.key] = r;
  }
  EXPECT_EQ(cpu.count("aten::mm"), capture_in_window ? 1u : 0u);
  EXPECT_EQ(cpu["graphed_forward"].self_device_time_total_ns, 20 + 10 + 10);
  EXPECT_EQ(cpu["aten::add"].self_device_time_total_ns, 50);
  EXPECT_EQ(cpu["aten::mm"].device_time_total_ns, 0);
}

TEST(CuptiTrace, ReplayedKernelsAreAttributedToTheScopeTheirNodeWasCapturedIn) {
  std::vector<Record> records = capture_records();
  for (const Record& r : replay_records()) records.push_back(r);
  GraphNodeScopes nodes;
  expect_replays(build_window(records, replay_batch(), &nodes), true);
  // Without the process's table: the same, from this window's records.
  expect_replays(build_window(records, replay_batch(), nullptr), true);
  // What later windows will know: the originals by name, the copies as copies.
  GraphNodeScopes::Names n;
  ASSERT_TRUE(nodes.find(11, &n));
  EXPECT_EQ(n.scope, "aten::mm");
  EXPECT_EQ(n.annotation, "graph_gemm");
  EXPECT_EQ(n.annotation_start_ns, kEpochOfMonotonic0 + 110);
  ASSERT_TRUE(nodes.find(2, &n));
  EXPECT_EQ(n.scope, "graph_add");
  EXPECT_EQ(n.annotation, "graph_add");
  EXPECT_EQ(nodes.original(12), 2u);
  EXPECT_EQ(nodes.size(), 6u);  // nodes 1, 2 and 3, copies 11, 12 and 13
}

// Captured and replayed inside the same range (a compiled step that
// captures on its first call): the range's GPU span is there once, not a
// second time as the capture's.
TEST(CuptiTrace, ARangeThatCapturedAndLaunchedHasOneSpan) {
  static constexpr ScopeSite kCompiledStep{"compiled_step", kUserAnnotation};
  const std::vector<Record> records = {scope(&kCompiledStep, 100, 900), node_created(1, 150),
                                       node_created(11, 200), node_cloned(11, 1, 201)};
  CuptiRecordConverter c;
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 300, 40, kTid, 60));
  add(c, from_graph(kernel(kGemmKernel, 400, 50, 60, {4, 2, 1}, {384, 1, 1}, 168, 0, 0), 3, 11));
  DeviceBatch b;
  c.finish(&b);
  const Trace t = build_window(records, b, nullptr);
  const std::vector<std::uint32_t> k = all(t, "kernel", kGemmKernel);
  ASSERT_EQ(k.size(), 1u);
  EXPECT_EQ(arg_text(t, k[0], "graph node scope"), "compiled_step");
  EXPECT_EQ(all(t, "gpu_user_annotation", "compiled_step").size(), 1u);
}

// The whole trace of the capture and the replays, as Perfetto and tprof
// read it, against a reviewed golden file (regenerate as GoldenTrace's).
TEST(CuptiTrace, GraphGoldenTrace) {
  std::vector<Record> records = capture_records();
  for (const Record& r : replay_records()) records.push_back(r);
  GraphNodeScopes nodes;
  std::string json;
  write_trace_json(build_window(records, replay_batch(), &nodes), &json);
  const std::string path = std::string(TPROF_SOURCE_DIR) + "/tests/unit/expected/cupti_graph_trace.json";
  if (const char* u = std::getenv("TPROF_UPDATE_GOLDEN"); u != nullptr && u[0] == '1') {
    std::ofstream(path, std::ios::binary) << json;
    GTEST_SKIP() << "rewrote " << path << ": review the diff";
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(json, expected.str());
}

// torch.compile's case: the graph captured in one window (or a warmup that
// recorded), replayed in later ones. The names come from the process's
// table; the capture's scopes are not in this trace, so the spans link to
// nothing and no op of another window is charged.
TEST(CuptiTrace, ReplaysInALaterWindowAreAttributedByName) {
  GraphNodeScopes nodes;
  const Trace first = build_window(capture_records(), DeviceBatch(), &nodes);
  EXPECT_EQ(nodes.size(), 6u);
  expect_replays(build_window(replay_records(), replay_batch(), &nodes), false);
  // A graph captured while no window recorded: ids, launches and flows,
  // but no scope to name.
  GraphNodeScopes none;
  const Trace unknown = build_window(replay_records(), replay_batch(), &none);
  std::size_t replayed = 0;
  for (std::uint32_t e = 0; e < unknown.events.size(); ++e) {
    if (unknown.cat(e) != "kernel" || arg_text(unknown, e, "graph node id") == "<none>") continue;
    ++replayed;
    EXPECT_EQ(arg_text(unknown, e, "graph node scope"), "<none>");
    EXPECT_GE(unknown.events.external_id[e], 1);
  }
  EXPECT_EQ(replayed, 6u);
  EXPECT_EQ(all(unknown, "gpu_user_annotation", "graph_gemm").size(), 0u);
}

// ---- tprof's own captures on an H100 (tests/data/gpu/h100-tprof) ----------------------
//
// Recorded by the capture before issue 22 (every runtime and driver call,
// synchronizations on): the call set is proven on the capture path above
// and in cupti_replay_test.cc, not here. What these show is the table's
// rules on a real capture.

Trace load_tprof_capture(const std::string& stem) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-tprof/" + stem + ".json");
  EXPECT_TRUE(t) << stem;
  return t ? std::move(t).value() : Trace();
}

TEST(TprofCaptures, SelfCudaTotalIsTheSumOfTheDeviceWork) {
  for (const char* size : {"64", "4096"}) {
    for (const char* temp : {"cold", "warm"}) {
      for (const char* form : {"eager", "compile", "fused"}) {
        const std::string stem = std::string(size) + "_bf16_" + temp + "_" + form;
        SCOPED_TRACE(stem);
        const Trace t = load_tprof_capture(stem);
        std::int64_t work_ns = 0, sync_ns = 0;
        for (std::uint32_t e = 0; e < t.events.size(); ++e) {
          const EventKind k = t.events.kind[e];
          if (k == EventKind::kKernel || k == EventKind::kGpuMemcpy || k == EventKind::kGpuMemset) {
            work_ns += t.events.dur_ns[e];
          }
          if (k == EventKind::kCudaSync) sync_ns += t.events.dur_ns[e];
        }
        EXPECT_GT(sync_ns, 0) << "the old capture's closing Context Sync";
        std::int64_t self_cuda = 0;
        for (const StatRow& r : EventList::build(t).key_averages()) {
          EXPECT_NE(r.key, "Context Sync");
          if (r.is_device && !r.is_user_annotation) self_cuda += r.self_device_time_total_ns;
        }
        EXPECT_EQ(self_cuda, work_ns);
      }
    }
  }
}

// The rows of `tprof table` (key -> count), in torch's names: the example's
// ops are torch's ops (op::mm for aten::mm), its add kernel torch's
// elementwise add; the calls the new capture no longer records are left out.
std::map<std::string, std::int64_t> rows_in_torch_terms(const Trace& t) {
  std::set<std::string> dropped;
  for (const KinetoCbid& c : kKinetoDroppedRuntimeCalls) dropped.insert(std::string(runtime_cbid_name(c.cbid)));
  std::set<std::string> kept_driver;
  for (const KinetoCbid& c : kKinetoKeptDriverCalls) kept_driver.insert(std::string(driver_cbid_name(c.cbid)));
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.kind[e] == EventKind::kCudaDriver && kept_driver.count(std::string(t.name(e))) == 0) {
      dropped.insert(std::string(t.name(e)));
    }
  }
  std::map<std::string, std::int64_t> rows;
  for (const StatRow& r : EventList::build(t).key_averages()) {
    if (dropped.count(r.key) != 0) continue;
    std::string key = r.key;
    if (key.rfind("op::", 0) == 0) key = "aten::" + key.substr(4);
    if (key.rfind("void matmul_add::add_kernel", 0) == 0 ||
        key.rfind("void at::native::vectorized_elementwise_kernel", 0) == 0) {
      key = "add kernel";
    }
    rows[key] += r.count;
  }
  return rows;
}

// The warm eager runs, tprof's capture against torch 2.11's: the same rows.
// The one count that differs is the 4096 add kernel, 21 in a 20-step
// window, and it follows torch's rule: Kineto keeps every device activity
// that starts in the window (GenericActivityProfiler::outOfRange), and
// CUPTI records from the schedule's warmup on. The 21st is the warmup
// step's add kernel, queued behind its 170 us GEMM while the host ran a
// step in 25 us: launched before the window (its call is not in the
// trace: no External id, no op to charge), started after the window
// opened. torch's host took 235 us over its first step, so its warmup's
// kernels had finished when its window opened.
TEST(TprofCaptures, WarmEagerRowsAreTorchsAndTheWarmupKernelIsKeptByTorchsRule) {
  for (const char* size : {"64", "4096"}) {
    SCOPED_TRACE(size);
    const std::string stem = std::string(size) + "_bf16_warm_eager";
    const Trace ours = load_tprof_capture(stem);
    const Trace torch = load_fixture(stem + ".json");
    std::map<std::string, std::int64_t> expected = rows_in_torch_terms(torch);
    if (std::string(size) == "4096") ++expected["add kernel"];
    EXPECT_EQ(rows_in_torch_terms(ours), expected);
  }
  const Trace t = load_tprof_capture("4096_bf16_warm_eager");
  std::int64_t first_step = INT64_MAX, first_call = INT64_MAX;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.name(e).rfind("ProfilerStep#", 0) == 0) first_step = std::min(first_step, t.events.ts_ns[e]);
    const EventKind k = t.events.kind[e];
    if (k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver) {
      first_call = std::min(first_call, t.events.correlation[e]);
    }
  }
  std::vector<std::uint32_t> orphans;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.events.kind[e] == EventKind::kKernel && t.events.external_id[e] < 0) orphans.push_back(e);
  }
  ASSERT_EQ(orphans.size(), 1u);
  const std::uint32_t k = orphans[0];
  EXPECT_EQ(t.name(k).rfind("void matmul_add::add_kernel", 0), 0u);
  EXPECT_GT(t.events.ts_ns[k], first_step) << "started inside the window";
  EXPECT_LT(t.events.correlation[k], first_call) << "launched before the window's first call";
  // The ops are charged their own 20 launches only.
  for (const StatRow& r : EventList::build(t).key_averages()) {
    if (r.key == "op::add") {
      EXPECT_EQ(r.count, 20);
    }
  }
}

// ---- device memory: CUPTI's MEMORY2 / MEMORY_POOL records as torch's [memory] ----------

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::uint32_t kWorker = 4343;
constexpr ScopeSite kAllocOp{"op::alloc", kCpuOp};

// The window (from monotonic 900) of a main thread (tid = pid) and a
// worker with one op, with `hooks` as the main thread's records.
Trace memory_window(const DeviceBatch& batch, const std::vector<Record>& hooks = {}) {
  static const std::vector<Record> worker = {scope(&kAllocOp, 2000, 2600)};
  std::vector<ThreadRecords> threads(2);
  threads[0].tid = kTid;
  threads[0].name = "main";
  threads[0].records = hooks;
  threads[1].tid = kWorker;
  threads[1].name = "worker";
  threads[1].records = worker;
  TickConversion clock;
  clock.epoch_ns0 = kEpochOfMonotonic0;
  clock.monotonic_to_epoch_ns = kEpochOfMonotonic0;
  CaptureInfo info;
  info.pid = kTid;
  info.process_name = "app";
  info.window_start_ns = kEpochOfMonotonic0 + 900;
  info.window_start_monotonic_ns = 900;
  info.cuda_requested = info.cuda_available = true;
  return build_trace(threads, batch, clock, info);
}

struct MemoryRow {
  std::int64_t ts, tid, type, id, bytes, allocated, reserved;
  std::uint64_t addr;
  bool operator==(const MemoryRow&) const = default;
};
void PrintTo(const MemoryRow& r, std::ostream* os) {
  *os << "{ts " << r.ts << " tid " << r.tid << " dev " << r.type << ":" << r.id << " bytes " << r.bytes << " alloc "
      << r.allocated << " reserved " << r.reserved << " addr " << r.addr << "}";
}

// The trace's [memory] events in time order, from their args (what a
// reader sees) and their lanes; each checked against the model's record.
std::vector<MemoryRow> memory_rows(const Trace& t) {
  std::vector<MemoryRow> rows;
  for (const MemoryRecord& m : t.memory) {
    const std::uint32_t e = m.event;
    EXPECT_EQ(t.name(e), "[memory]");
    EXPECT_EQ(t.cat(e), "cpu_instant_event");
    EXPECT_EQ(t.events.kind[e], EventKind::kMemory);
    const auto num = [&](const char* key) { return std::stoll(arg_text(t, e, key)); };
    MemoryRow r{t.events.ts_ns[e] - kEpochOfMonotonic0, t.lanes[t.events.lane[e]].tid.num, num("Device Type"),
                num("Device Id"), num("Bytes"), num("Total Allocated"), num("Total Reserved"),
                static_cast<std::uint64_t>(num("Addr"))};
    EXPECT_EQ(r.bytes, m.bytes);
    EXPECT_EQ(r.allocated, m.total_allocated);
    EXPECT_EQ(r.reserved, m.total_reserved);
    EXPECT_TRUE(m.has_total_allocated && m.has_total_reserved);
    rows.push_back(r);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const MemoryRow& a, const MemoryRow& b) { return a.ts < b.ts; });
  return rows;
}

using MemoryOpType = CUpti_ActivityMemoryOperationType;
constexpr MemoryOpType kAlloc = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
constexpr MemoryOpType kRelease = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
constexpr CUpti_ActivityMemoryKind kDeviceMemory = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;

// A worker's cudaMalloc inside its op, the main thread's cudaMallocAsync
// and cudaFreeAsync from a pool (created, later trimmed to nothing),
// pinned host memory, an allocation whose call was not recorded, the
// worker's cudaFree, and one record from before the window.
DeviceBatch memory_batch() {
  CuptiRecordConverter c;
  const auto call = [&](std::uint32_t cbid, std::uint64_t start, std::uint32_t tid, std::uint32_t corr) {
    add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, cbid, start, 100, tid, corr));
  };
  add(c, memory_record(kAlloc, kDeviceMemory, 0x1000, kMiB, 500, 49));  // before the window: not in it
  call(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 450, kTid, 49);
  add(c, memory_record(kAlloc, kDeviceMemory, 0x7000, kMiB, 2200, 50));
  call(CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 2150, kWorker, 50);
  add(c, pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0xf000, 0, 0, 0, 3040, 51));
  add(c, from_pool(memory_record(kAlloc, kDeviceMemory, 0xf100, 3 * kMiB / 2, 3050, 51), 0xf000, 2 * kMiB,
                   3 * kMiB / 2));
  call(CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020, 3000, kTid, 51);
  add(c, from_pool(memory_record(kRelease, kDeviceMemory, 0xf100, 3 * kMiB / 2, 3500, 52), 0xf000, 2 * kMiB, 0));
  call(CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020, 3450, kTid, 52);
  add(c, pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, 0xf000, 0, 0, 0, 3600, 0));
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0x9000, kMiB / 2, 3700, 53));
  call(CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020, 3650, kTid, 53);
  add(c, memory_record(kAlloc, kDeviceMemory, 0xa000, 4096, 3800, 54));  // its call not recorded
  add(c, memory_record(kRelease, kDeviceMemory, 0x7000, kMiB, 4000, 55));
  call(CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 3950, kWorker, 55);
  DeviceBatch b;
  c.finish(&b);
  return b;
}

// Each record on its call's thread (unknown: the main thread), "Total
// Allocated" the running sum per device in time order from the window's
// start, "Total Reserved" CUDA's: allocations outside pools plus each
// pool's size (a trim shrinks it); 0 for CPU (pinned) memory, as torch.
TEST(CuptiMemoryTrace, RecordsAreTorchsMemoryEventsOnTheCallingThread) {
  const Trace t = memory_window(memory_batch());
  const std::vector<MemoryRow> expected = {
      {2200, kWorker, 1, 0, kMiB, kMiB, kMiB, 0x7000},
      {3050, kTid, 1, 0, 3 * kMiB / 2, 5 * kMiB / 2, 3 * kMiB, 0xf100},
      {3500, kTid, 1, 0, -3 * kMiB / 2, kMiB, 3 * kMiB, 0xf100},
      {3700, kTid, 0, -1, kMiB / 2, kMiB / 2, 0, 0x9000},
      {3800, kTid, 1, 0, 4096, kMiB + 4096, kMiB + 4096, 0xa000},
      {4000, kWorker, 1, 0, -kMiB, 4096, 4096, 0x7000},
  };
  EXPECT_EQ(memory_rows(t), expected);
  // torch's keys in the order tprof's capture writes them.
  const std::vector<std::string> keys = {"Device Type", "Device Id",       "Addr",
                                         "Bytes",       "Total Allocated", "Total Reserved"};
  EXPECT_EQ(arg_keys(t, t.memory[0].event), keys);
  // Both threads' rows are named.
  std::set<std::int64_t> named;
  for (const Lane& l : t.lanes) {
    if (l.kind == LaneKind::kCpu && l.thread_name != kEmptyStr) named.insert(l.tid.num);
  }
  EXPECT_EQ(named, (std::set<std::int64_t>{kTid, kWorker}));

  // Written and read back: the same records.
  std::string json;
  write_trace_json(t, &json);
  Result<Trace> back = read_trace_bytes(json);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(memory_rows(*back), expected);

  // tprof memory's views: the worker's allocation under its op, the peak,
  // what was never freed; reserved is recorded.
  const MemoryReport r = analyze_memory(memory_input(t));
  const MemoryDeviceView* cuda = nullptr;
  for (const MemoryDeviceView& v : r.devices) {
    if (v.device_type == 1 && v.device_id == 0) cuda = &v;
  }
  ASSERT_NE(cuda, nullptr);
  EXPECT_TRUE(cuda->totals_recorded);
  EXPECT_TRUE(cuda->reserved_recorded);
  EXPECT_EQ(cuda->peak_bytes, 5 * kMiB / 2);
  EXPECT_EQ(cuda->peak_reserved_bytes, 3 * kMiB);
  EXPECT_EQ(cuda->never_freed_bytes, 4096);
  ASSERT_FALSE(cuda->live_at_peak.empty());
  bool under_op = false;
  for (const MemoryGroup& g : cuda->live_at_peak) under_op |= g.op == "op::alloc" && g.bytes == kMiB;
  EXPECT_TRUE(under_op);
}

// A program whose own allocator reports its blocks on the device
// (record_alloc with a CUDA device): CUDA's allocations there are that
// allocator's segments, its "Total Reserved" (torch's caching allocator's
// own split), not [memory] events of their own. Pinned memory and the
// program's CPU hooks share one CPU sum.
TEST(CuptiMemoryTrace, AProgramsOwnCudaAllocatorMakesCudasAllocationsItsReservation) {
  CuptiRecordConverter c;
  add(c, memory_record(kAlloc, kDeviceMemory, 0x100000, 4 * kMiB, 1000, 60));  // the allocator's segment
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0x900000, kMiB, 1050, 61));
  DeviceBatch b;
  c.finish(&b);
  const std::uint16_t cuda0 = (std::uint16_t{1} << 8) | 0, cpu = 0xff;
  const std::vector<Record> hooks = {
      {0x100000, 1100, static_cast<std::uint64_t>(kMiB), 0, kRecordMemory, cuda0},
      {0x200000, 1150, 64, 0, kRecordMemory, cpu},
      {0x100400, 1200, static_cast<std::uint64_t>(kMiB), 0, kRecordMemory, cuda0},
      {0x100000, 1300, static_cast<std::uint64_t>(-kMiB), 0, kRecordMemory, cuda0},
  };
  const Trace t = memory_window(b, hooks);
  const std::vector<MemoryRow> expected = {
      {1050, kTid, 0, -1, kMiB, kMiB, 0, 0x900000},
      {1100, kTid, 1, 0, kMiB, kMiB, 4 * kMiB, 0x100000},
      {1150, kTid, 0, -1, 64, kMiB + 64, 0, 0x200000},
      {1200, kTid, 1, 0, kMiB, 2 * kMiB, 4 * kMiB, 0x100400},
      {1300, kTid, 1, 0, -kMiB, kMiB, 4 * kMiB, 0x100000},
  };
  EXPECT_EQ(memory_rows(t), expected);
}

// Without memory records (no profile_memory) nothing changes: the hooks'
// records keep "Total Reserved" 0 and no [memory] event comes from CUDA.
TEST(CuptiMemoryTrace, WithoutMemoryRecordsTheHooksAreAsBefore) {
  const std::vector<Record> hooks = {
      {0x100000, 1100, static_cast<std::uint64_t>(kMiB), 0, kRecordMemory, (std::uint16_t{1} << 8) | 0},
  };
  const Trace t = memory_window(device_batch(), hooks);
  const std::vector<MemoryRow> expected = {{1100, kTid, 1, 0, kMiB, kMiB, 0, 0x100000}};
  EXPECT_EQ(memory_rows(t), expected);
  EXPECT_EQ(memory_rows(build()).size(), 0u);
}

}  // namespace
}  // namespace tprof::internal
