// CUPTI logic on CPU: hand-built CUPTI activity records (the installed
// headers' structs) replayed through CuptiRecordConverter, checked against
// the values real PyTorch 2.11 / Kineto traces show for the same launches
// (tests/data/gpu/h100-torch-2.11) and against a golden dump of the whole
// batch. Also: the live source on a machine without a CUDA driver.
//
// Regenerate the golden file after a reviewed change:
//   TPROF_UPDATE_GOLDEN=1 build/tests/unit/cupti_replay_test
// then read the diff of tests/unit/expected/cupti_replay_batch.txt line
// by line before keeping it.
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_nvtx_cbid.h>
#include <cupti_runtime_cbid.h>
#include <generated_nvtx_meta.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/cupti/activity_switches.h"
#include "src/cupti/cupti_cbid_names.h"
#include "src/cupti/cupti_convert.h"
#include "src/cupti/cupti_source.h"
#include "src/cupti/kineto_api_calls.h"
#include "tests/support/cupti_records.h"

namespace tprof::internal {
namespace {

const char* kind_name(DeviceEventKind k) {
  switch (k) {
    case DeviceEventKind::kKernel: return "kernel";
    case DeviceEventKind::kMemcpy: return "gpu_memcpy";
    case DeviceEventKind::kMemset: return "gpu_memset";
    case DeviceEventKind::kSync: return "cuda_sync";
    case DeviceEventKind::kRuntime: return "cuda_runtime";
    case DeviceEventKind::kDriver: return "cuda_driver";
    case DeviceEventKind::kOverhead: return "overhead";
  }
  return "?";
}

// One line per event: kind, start..end ns, lane (device/stream or thread),
// correlation | name | args members; then the batch's other parts.
std::string dump(const DeviceBatch& b) {
  std::ostringstream out;
  for (const DeviceEvent& e : b.events) {
    out << kind_name(e.kind) << ' ' << e.start_ns << ".." << e.end_ns << " device=" << e.device
        << " stream=" << e.stream << " thread=" << e.thread << " corr=" << e.correlation << " | " << b.name(e)
        << " | " << b.args(e) << '\n';
  }
  for (const std::string& p : b.device_properties) out << "deviceProperties " << p << '\n';
  for (const auto& [k, v] : b.top_level) out << "top_level " << k << " = " << v << '\n';
  out << "dropped " << b.dropped << '\n';
  for (const std::string& p : b.problems) out << "problem " << p << '\n';
  return out.str();
}

const DeviceEvent* find(const DeviceBatch& b, DeviceEventKind kind, std::uint64_t corr) {
  for (const DeviceEvent& e : b.events) {
    if (e.kind == kind && e.correlation == corr) return &e;
  }
  return nullptr;
}

constexpr const char* kAddKernel =
    "_ZN2at6native29vectorized_elementwise_kernelILi8ENS0_15CUDAFunctor_addIN3c108BFloat16EEESt5arrayIPcLm3EEEEviT0_"
    "T1_";

// ---- cbid names ----------------------------------------------------------------------

TEST(CuptiCbidNames, TablesAreSortedAndNamedAsKineto) {
  for (std::size_t i = 1; i < kRuntimeCbidNamesSize; ++i) {
    ASSERT_LT(kRuntimeCbidNames[i - 1].cbid, kRuntimeCbidNames[i].cbid) << kRuntimeCbidNames[i].name;
  }
  for (std::size_t i = 1; i < kDriverCbidNamesSize; ++i) {
    ASSERT_LT(kDriverCbidNames[i - 1].cbid, kDriverCbidNames[i].cbid) << kDriverCbidNames[i].name;
  }
  // The ids and names of the fixtures' calls (cupti_runtime_cbid.h / cupti_driver_cbid.h).
  EXPECT_EQ(runtime_cbid_name(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000), "cudaLaunchKernel");
  EXPECT_EQ(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 211);
  EXPECT_EQ(runtime_cbid_name(41), "cudaMemcpyAsync");
  EXPECT_EQ(runtime_cbid_name(51), "cudaMemsetAsync");
  EXPECT_EQ(runtime_cbid_name(165), "cudaDeviceSynchronize");
  EXPECT_EQ(driver_cbid_name(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx), "cuLaunchKernelEx");
  EXPECT_EQ(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 652);
  // _v2 / _v3 are part of the name; only _vNNNN (a CUDA version) goes.
  EXPECT_EQ(driver_cbid_name(CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v2), "cuCtxCreate_v2");
  EXPECT_EQ(runtime_cbid_name(CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030),
            "cudaStreamGetCaptureInfo_v2");
  EXPECT_EQ(runtime_cbid_name(0), "INVALID");
  EXPECT_EQ(runtime_cbid_name(1u << 30), "INVALID");
  EXPECT_EQ(driver_cbid_name(1u << 30), "INVALID");
}

// An H100/H200 SM as the driver describes it (cc 9.0, 132 SMs, 228 KiB of
// shared memory an SM, 1 KiB reserved a block): no name, no memory size.
CuptiDevice hopper_device() {
  CuptiDevice d;
  d.compute_major = 9;
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  d.regs_per_block = 65536;
  d.regs_per_sm = 65536;
  d.warp_size = 32;
  d.smem_per_block = 49152;
  d.smem_per_sm = 233472;
  d.num_sms = 132;
  d.smem_reserved_per_block = 1024;
  d.smem_per_block_optin = 232448;
  return d;
}

// ---- kernels ---------------------------------------------------------------------------

TEST(CuptiReplay, KernelsMatchTheH100Fixtures) {
  CuptiRecordConverter c;
  add(c, h100_device(0));
  // tests/data/gpu/h100-torch-2.11: 64_bf16 (nvjet, small tiles), the
  // add's elementwise kernel, and 4096_bf16 (nvjet, 2x66 blocks).
  add(c, kernel("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT", 4524450005117409, 2304, 1323, {4, 2, 1}, {384, 1, 1}, 168,
                0, 164308));
  add(c, kernel(kAddKernel, 4524516491526872, 30529, 1343, {16384, 1, 1}, {128, 1, 1}, 34, 0, 0));
  add(c, kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_badd_coopA_NNT", 4524529551727722, 176771, 47, {2, 66, 1},
                {384, 1, 1}, 168, 0, 213188));
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.events.size(), 3u);

  const DeviceEvent* nvjet = find(b, DeviceEventKind::kKernel, 1323);
  ASSERT_NE(nvjet, nullptr);
  EXPECT_EQ(b.name(*nvjet), "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT");
  EXPECT_EQ(nvjet->start_ns, 4524450005117409);
  EXPECT_EQ(nvjet->end_ns, 4524450005117409 + 2304);
  EXPECT_EQ(nvjet->device, 0);
  EXPECT_EQ(nvjet->stream, 7);
  EXPECT_EQ(b.args(*nvjet),
            "\"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": 1323, "
            "\"registers per thread\": 168, \"shared memory\": 164308, \"blocks per SM\": 0.060606, "
            "\"warps per SM\": 0.727273, \"grid\": [4, 2, 1], \"block\": [384, 1, 1], "
            "\"est. achieved occupancy %\": 0");

  const DeviceEvent* add_kernel = find(b, DeviceEventKind::kKernel, 1343);
  ASSERT_NE(add_kernel, nullptr);
  EXPECT_EQ(b.name(*add_kernel),
            "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)");
  EXPECT_EQ(b.args(*add_kernel),
            "\"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": 1343, "
            "\"registers per thread\": 34, \"shared memory\": 0, \"blocks per SM\": 124.121216, "
            "\"warps per SM\": 496.484863, \"grid\": [16384, 1, 1], \"block\": [128, 1, 1], "
            "\"est. achieved occupancy %\": 75");

  const DeviceEvent* big = find(b, DeviceEventKind::kKernel, 47);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(b.args(*big),
            "\"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": 47, "
            "\"registers per thread\": 168, \"shared memory\": 213188, \"blocks per SM\": 1.0, "
            "\"warps per SM\": 12.0, \"grid\": [2, 66, 1], \"block\": [384, 1, 1], "
            "\"est. achieved occupancy %\": 0");

  // The fixture header's deviceProperties element.
  ASSERT_EQ(b.device_properties.size(), 1u);
  EXPECT_EQ(b.device_properties[0],
            "{\"id\": 0, \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 85017493504, "
            "\"computeMajor\": 9, \"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, "
            "\"maxThreadsPerMultiprocessor\": 2048, \"regsPerBlock\": 65536, \"warpSize\": 32, "
            "\"sharedMemPerBlock\": 49152, \"numSms\": 132, \"regsPerMultiprocessor\": 65536, "
            "\"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472}");
}

// A window opened once the context exists gets no DEVICE record (CUPTI
// writes it at the context's creation): on the H200 matmul_add's traces had
// "deviceProperties": [] and every kernel "blocks per SM": "inf". The
// source asks the driver instead; a DEVICE record, when one comes, wins.
TEST(CuptiReplay, DevicesTheDriverDescribesGiveKernelsTheirOccupancyAndTheTraceItsProperties) {
  CuptiDevice h200 = hopper_device();
  h200.name = "NVIDIA H200";
  h200.global_memory_bytes = 150109880320;
  CuptiRecordConverter c;
  c.add_device_info(h200);
  add(c, kernel(kAddKernel, 4524516491526872, 30529, 1343, {16384, 1, 1}, {128, 1, 1}, 34, 0, 0));
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_NE(b.args(b.events[0]).find("\"blocks per SM\": 124.121216, \"warps per SM\": 496.484863"), std::string::npos)
      << b.args(b.events[0]);
  EXPECT_NE(b.args(b.events[0]).find("\"est. achieved occupancy %\": 75"), std::string::npos);
  // Kineto's keys and order, as tprof record wrote them on the H200 (the
  // DEVICE record there): the same element.
  ASSERT_EQ(b.device_properties.size(), 1u);
  EXPECT_EQ(b.device_properties[0],
            "{\"id\": 0, \"name\": \"NVIDIA H200\", \"totalGlobalMem\": 150109880320, "
            "\"computeMajor\": 9, \"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, "
            "\"maxThreadsPerMultiprocessor\": 2048, \"regsPerBlock\": 65536, \"warpSize\": 32, "
            "\"sharedMemPerBlock\": 49152, \"numSms\": 132, \"regsPerMultiprocessor\": 65536, "
            "\"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472}");
  // A DEVICE record replaces what the driver said; the driver's does not replace a record.
  CuptiRecordConverter both;
  add(both, h100_device(0));
  both.add_device_info(h200);
  DeviceBatch bb;
  both.finish(&bb);
  ASSERT_EQ(bb.device_properties.size(), 1u);
  EXPECT_NE(bb.device_properties[0].find("H100"), std::string::npos) << bb.device_properties[0];
}

TEST(CuptiReplay, OccupancyFollowsTheCalculator) {
  CuptiRecordConverter c;
  add(c, h100_device(0));
  DeviceBatch b;
  c.finish(&b);
  const CuptiDevice d = hopper_device();
  // 34 registers round to 40 a thread: 12 blocks of 128 threads fit an SM, 1536 of 2048 threads.
  EXPECT_EQ(estimated_occupancy_percent(d, 34, 0, 0, 128, 124.121216f), 75);
  // Fewer blocks than fit: the grid caps it (8 blocks of 128 over 2048 threads).
  EXPECT_EQ(estimated_occupancy_percent(d, 34, 0, 0, 128, 8.0f), 50);
  // Static shared memory past the default per-block limit: rejected, 0 (cuBLAS nvjet in the fixtures).
  EXPECT_EQ(estimated_occupancy_percent(d, 168, 164308, 0, 384, 0.060606f), 0);
  EXPECT_EQ(estimated_occupancy_percent(d, 32, 0, 0, 0, 1.0f), 0);
  // No device properties: 0, and the float metrics say "inf" as Kineto does.
  CuptiRecordConverter unknown;
  add(unknown, kernel("k", 10, 5, 9, {1, 1, 1}, {32, 1, 1}, 16, 0, 0));
  DeviceBatch u;
  unknown.finish(&u);
  ASSERT_EQ(u.events.size(), 1u);
  EXPECT_EQ(u.args(u.events[0]),
            "\"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": 9, "
            "\"registers per thread\": 16, \"shared memory\": 0, \"blocks per SM\": \"inf\", "
            "\"warps per SM\": \"inf\", \"grid\": [1, 1, 1], \"block\": [32, 1, 1], "
            "\"est. achieved occupancy %\": 0");
}

TEST(CuptiReplay, KernelNamesThatDoNotDemangleStayRaw) {
  EXPECT_EQ(demangle_kernel_name("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT"), "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT");
  EXPECT_EQ(demangle_kernel_name("_Zgarbage"), "_Zgarbage");
  EXPECT_EQ(demangle_kernel_name("_Z6squarePfi"), "square(float*, int)");
  EXPECT_EQ(demangle_kernel_name(""), "");
  EXPECT_EQ(demangle_kernel_name(nullptr), "");
}

// ---- copies, sets, API calls ---------------------------------------------------------

TEST(CuptiReplay, MemcpyMemsetAndApiCallsMatchTheFixtures) {
  CuptiRecordConverter c;
  add(c, memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4524529551671625, 19648, 33554432, 34));
  CUpti_ActivityMemset4 s{};
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.start = 4524529551717802;
  s.end = s.start + 768;
  s.bytes = 4;
  s.contextId = 1;
  s.streamId = 7;
  s.correlationId = 46;
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  add(c, s);
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 41, 4524529551652176, 19402, 1346, 34));
  add(c, api_record(CUPTI_ACTIVITY_KIND_DRIVER, 652, 4524529551716538, 10575, 1346, 47));
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.events.size(), 4u);

  const DeviceEvent* copy = find(b, DeviceEventKind::kMemcpy, 34);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(b.name(*copy), "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(b.args(*copy),
            "\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": 34, \"bytes\": 33554432, "
            "\"memory bandwidth (GB/s)\": 1707.7785016286646");
  const DeviceEvent* set = find(b, DeviceEventKind::kMemset, 46);
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(b.name(*set), "Memset (Device)");
  EXPECT_EQ(b.args(*set),
            "\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": 46, \"bytes\": 4, "
            "\"memory bandwidth (GB/s)\": 0.005208333333333333");
  const DeviceEvent* rt = find(b, DeviceEventKind::kRuntime, 34);
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(b.name(*rt), "cudaMemcpyAsync");
  EXPECT_EQ(b.args(*rt), "\"cbid\": 41, \"correlation\": 34");
  EXPECT_EQ(rt->thread, 1346);
  EXPECT_EQ(rt->device, -1);
  const DeviceEvent* drv = find(b, DeviceEventKind::kDriver, 47);
  ASSERT_NE(drv, nullptr);
  EXPECT_EQ(b.name(*drv), "cuLaunchKernelEx");
  EXPECT_EQ(b.args(*drv), "\"cbid\": 652, \"correlation\": 47");
}

TEST(CuptiReplay, ZeroLengthCopiesHaveNoBandwidth) {
  CuptiRecordConverter c;
  add(c, memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 1000, 0, 64, 5));
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.name(b.events[0]), "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(b.args(b.events[0]), "\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": 5, \"bytes\": 64");
}

// ---- CUDA graphs ---------------------------------------------------------------------

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// Work replayed from a graph carries Kineto's "graph id" and "graph node
// id" last (Kineto: after the kernel's occupancy, after a copy's
// bandwidth), and the event the node that ran it; other work neither
// (Kineto writes zeros there, tprof nothing: the args of eager work stay
// those of every torch before 2026).
TEST(CuptiReplay, GraphWorkCarriesItsGraphAndNodeIds) {
  CuptiRecordConverter c;
  add(c, h100_device(0));
  add(c, from_graph(kernel("triton_poi_fused_add_0", 1000, 500, 50, {16, 1, 1}, {128, 1, 1}, 32, 0, 0), 3, 11));
  add(c, kernel("triton_poi_fused_add_0", 2000, 500, 51, {16, 1, 1}, {128, 1, 1}, 32, 0, 0));
  add(c, from_graph(memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                                  CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 3000, 100, 4096, 52),
                    3, 12));
  add(c, from_graph(memset_record(3200, 100, 64, 53), 3, 13));
  add(c, memset_record(3400, 100, 64, 54));
  CUpti_ActivityMemcpyPtoP4 peer{};
  peer.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  peer.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  peer.start = 3600;
  peer.end = 3700;
  peer.bytes = 1024;
  peer.srcDeviceId = 1;
  peer.correlationId = 55;
  add(c, from_graph(peer, 4, 14));
  DeviceBatch b;
  c.finish(&b);

  const DeviceEvent* replayed = find(b, DeviceEventKind::kKernel, 50);
  const DeviceEvent* eager = find(b, DeviceEventKind::kKernel, 51);
  ASSERT_TRUE(replayed && eager);
  EXPECT_EQ(replayed->graph_node, 11u);
  EXPECT_TRUE(ends_with(b.args(*replayed), "\"est. achieved occupancy %\": 1, \"graph id\": 3, \"graph node id\": 11"))
      << b.args(*replayed);
  EXPECT_EQ(eager->graph_node, 0u);
  EXPECT_EQ(b.args(*eager).find("graph"), std::string_view::npos) << b.args(*eager);

  const DeviceEvent* copy = find(b, DeviceEventKind::kMemcpy, 52);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->graph_node, 12u);
  EXPECT_TRUE(ends_with(b.args(*copy), "\"memory bandwidth (GB/s)\": 40.96, \"graph id\": 3, \"graph node id\": 12"))
      << b.args(*copy);
  const DeviceEvent* set = find(b, DeviceEventKind::kMemset, 53);
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->graph_node, 13u);
  EXPECT_TRUE(ends_with(b.args(*set), "\"graph id\": 3, \"graph node id\": 13")) << b.args(*set);
  const DeviceEvent* eager_set = find(b, DeviceEventKind::kMemset, 54);
  ASSERT_NE(eager_set, nullptr);
  EXPECT_EQ(eager_set->graph_node, 0u);
  EXPECT_EQ(b.args(*eager_set).find("graph"), std::string_view::npos) << b.args(*eager_set);
  const DeviceEvent* p2p = find(b, DeviceEventKind::kMemcpy, 55);
  ASSERT_NE(p2p, nullptr);
  EXPECT_EQ(p2p->graph_node, 14u);
  EXPECT_TRUE(ends_with(b.args(*p2p), "\"graph id\": 4, \"graph node id\": 14")) << b.args(*p2p);
}

// The RESOURCE callback without CUPTI: a node created and a node cloned
// reach the hooks with the ids CUPTI gives their handles; other resources,
// and handles without an id, reach nothing.
std::vector<std::string> g_graph_calls;
int g_node_handles[3];

std::uint64_t handle_id(const void* node) noexcept {
  for (int i = 0; i < 2; ++i) {
    if (node == &g_node_handles[i]) return 100 + static_cast<std::uint64_t>(i);
  }
  return 0;  // g_node_handles[2]: CUPTI has no id for it
}

TEST(CuptiGraphNodes, CreatedAndClonedNodesReachTheHooksWithTheirIds) {
  static constexpr GraphNodes kLog{
      [](std::uint64_t node) noexcept { g_graph_calls.push_back("created " + std::to_string(node)); },
      [](std::uint64_t node, std::uint64_t original) noexcept {
        g_graph_calls.push_back("cloned " + std::to_string(node) + " " + std::to_string(original));
      }};
  g_graph_calls.clear();
  auto handle = [](int i) { return reinterpret_cast<CUgraphNode>(&g_node_handles[i]); };
  CUpti_GraphData graph{};
  CUpti_ResourceData data{};
  data.resourceDescriptor = &graph;
  graph.node = handle(0);
  report_graph_node(kLog, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &data, handle_id);
  graph.node = handle(1);
  graph.originalNode = handle(0);
  report_graph_node(kLog, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &data, handle_id);
  report_graph_node(kLog, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, &data, handle_id);
  // Not node creations.
  report_graph_node(kLog, CUPTI_CBID_RESOURCE_GRAPH_CREATED, &data, handle_id);
  report_graph_node(kLog, CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING, &data, handle_id);
  // No id for the node, or for its original; no descriptor at all.
  graph.node = handle(2);
  report_graph_node(kLog, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &data, handle_id);
  graph.node = handle(1);
  graph.originalNode = nullptr;
  report_graph_node(kLog, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, &data, handle_id);
  data.resourceDescriptor = nullptr;
  report_graph_node(kLog, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &data, handle_id);
  report_graph_node(kLog, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, nullptr, handle_id);
  const std::vector<std::string> expected = {"created 100", "created 101", "cloned 101 100"};
  EXPECT_EQ(g_graph_calls, expected);
}

// ---- synchronization, overhead, odd data ----------------------------------------------

TEST(CuptiReplay, SyncDeviceComesFromALaterContextRecord) {
  CuptiRecordConverter c;
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 100, 50, 3,
                     CUPTI_SYNCHRONIZATION_INVALID_VALUE, CUPTI_SYNCHRONIZATION_INVALID_VALUE, 528));
  add(c, context_record(3, 2));  // in a later buffer
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.events.size(), 1u);
  const DeviceEvent& e = b.events[0];
  EXPECT_EQ(b.name(e), "Context Sync");
  EXPECT_EQ(e.device, 2);
  EXPECT_EQ(e.stream, -1);
  EXPECT_EQ(b.args(e),
            "\"cuda_sync_kind\": \"Context Sync\", \"stream\": -1, \"correlation\": 528, \"device\": 2, "
            "\"context\": 3");
  // Contexts are remembered for the next window.
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 300, 10, 3, 7,
                     CUPTI_SYNCHRONIZATION_INVALID_VALUE, 600));
  DeviceBatch next;
  c.finish(&next);
  ASSERT_EQ(next.events.size(), 1u);
  EXPECT_EQ(next.events[0].device, 2);
  EXPECT_EQ(next.events[0].stream, 7);
}

TEST(CuptiReplay, FinishAppendsToABatchThatHoldsText) {
  CuptiRecordConverter c;
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 10, 5, 42, 1));
  DeviceBatch b;
  b.add_text("something already there");
  c.finish(&b);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.name(b.events[0]), "cudaLaunchKernel");
  EXPECT_EQ(b.args(b.events[0]), "\"cbid\": 211, \"correlation\": 1");
}

TEST(CuptiReplay, OddRecordsAreCountedNotFatal) {
  CuptiRecordConverter c;
  // end before start: written with end = start, counted.
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 1000, 0, 42, 1));
  CUpti_ActivityAPI reversed = api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 2000, 0, 42, 2);
  reversed.end = 1500;
  add(c, reversed);
  // A kind the converter does not handle.
  CUpti_ActivityMarker2 marker{};
  marker.kind = CUPTI_ACTIVITY_KIND_MARKER;
  add(c, marker);
  c.add(nullptr);
  EXPECT_EQ(c.clamped_records(), 1u);
  EXPECT_EQ(c.ignored_records(), 1u);
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.events.size(), 2u);
  const DeviceEvent* e = find(b, DeviceEventKind::kRuntime, 2);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->start_ns, 2000);
  EXPECT_EQ(e->end_ns, 2000);
}

// ---- device memory (MEMORY2, MEMORY_POOL) ------------------------------------------------

using MemoryOp = CUpti_ActivityMemoryOperationType;
constexpr MemoryOp kAlloc = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
constexpr MemoryOp kRelease = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;

const DeviceMemoryEvent* find_memory(const DeviceBatch& b, std::uint64_t corr) {
  for (const DeviceMemoryEvent& m : b.memory) {
    if (m.correlation == corr) return &m;
  }
  return nullptr;
}

// Each record becomes one memory event: signed bytes, torch's device, the
// thread of the API record with its correlation id (which comes later in
// the buffer: CUPTI writes an API record at the call's exit).
TEST(CuptiMemory, RecordsBecomeEventsOnTheThreadOfTheirCall) {
  CuptiRecordConverter c;
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000, 4096, 1100, 21, 1));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 1000, 300, 77, 21));
  add(c, memory_record(kRelease, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000, 4096, 2100, 22, 1));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 2000, 300, 78, 22));
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 0x9000, 512, 3100, 23));
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 0xa000, 256, 3200, 24));
  // No API record for it (its call was not recorded): thread unknown.
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, 0xb000, 128, 3300, 25));
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.memory.size(), 5u);
  EXPECT_EQ(c.ignored_records(), 0u);
  const DeviceMemoryEvent* m = find_memory(b, 21);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->bytes, 4096);
  EXPECT_EQ(m->addr, 0x7000u);
  EXPECT_EQ(m->ts_ns, 1100);
  EXPECT_EQ(m->thread, 77);
  EXPECT_EQ(m->device_type, 1);
  EXPECT_EQ(m->device_id, 1);
  EXPECT_EQ(m->pool, 0u);
  m = find_memory(b, 22);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->bytes, -4096);
  EXPECT_EQ(m->thread, 78);
  // Pinned host memory is CPU memory in torch's terms.
  m = find_memory(b, 23);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->device_type, 0);
  EXPECT_EQ(m->device_id, -1);
  // Managed memory and arrays are the device's.
  EXPECT_EQ(find_memory(b, 24)->device_type, 1);
  EXPECT_EQ(find_memory(b, 25)->device_type, 1);
  EXPECT_EQ(find_memory(b, 25)->thread, 0);
  // The API records are events as before.
  EXPECT_NE(find(b, DeviceEventKind::kRuntime, 21), nullptr);
}

// The thread of a call torch's lists drop (cuMemAlloc under a DRIVER kind
// the converter filters) is still found when memory is recorded.
TEST(CuptiMemory, ACallTheConverterDropsStillGivesItsThread) {
  for (const bool expect : {false, true}) {
    CuptiRecordConverter c;
    c.keep_torch_api_calls_only(true);
    c.expect_memory_records(expect);
    add(c, api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, 1000, 300, 91, 31));
    add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000, 4096, 1100, 31));
    DeviceBatch b;
    c.finish(&b);
    EXPECT_EQ(c.filtered_api_records(), 0u);  // reset by finish()
    EXPECT_TRUE(b.events.empty());
    ASSERT_EQ(b.memory.size(), 1u);
    EXPECT_EQ(b.memory[0].thread, expect ? 91 : 0);
  }
}

// What is not counted is counted as ignored, never fatal: static module
// memory, pageable memory, an invalid operation, a device id no device
// has, a release whose size nobody gave. A release that gives no size
// takes its allocation's, when the same batch (window) holds it.
TEST(CuptiMemory, OddMemoryRecordsAreCountedNotFatal) {
  CuptiRecordConverter c;
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, 0x1000, 64, 100, 1));
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, 0x2000, 64, 110, 2));
  add(c, memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x3000, 64,
                       120, 3));
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, 0x4000, 64, 130, 4,
                       CUPTI_UNIFIED_MEMORY_CPU_DEVICE_ID));
  add(c, memory_record(kRelease, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x5000, 0, 140, 5));  // never seen allocated
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x6000, 0, 150, 6));    // nothing allocated
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000, 1000, 160, 7));
  EXPECT_EQ(c.ignored_records(), 6u);
  add(c, memory_record(kRelease, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000, 0, 170, 8));
  add(c, memory_record(kRelease, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000, 0, 180, 9));  // twice: unknown now
  EXPECT_EQ(c.ignored_records(), 7u);
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.memory.size(), 2u);
  EXPECT_EQ(b.memory[0].bytes, 1000);
  EXPECT_EQ(b.memory[1].bytes, -1000);
  EXPECT_EQ(b.memory[1].correlation, 8u);
  // A later batch does not remember this one's allocations.
  add(c, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7100, 100, 190, 10));
  c.finish(&b);
  add(c, memory_record(kRelease, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7100, 0, 200, 11));
  EXPECT_EQ(c.ignored_records(), 1u);
  c.finish(&b);
  EXPECT_EQ(b.memory.size(), 3u);
  // Sizes beyond int64 saturate.
  CuptiRecordConverter big;
  add(big, memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x8000, ~std::uint64_t{0}, 190, 12));
  DeviceBatch huge;
  big.finish(&huge);
  ASSERT_EQ(huge.memory.size(), 1u);
  EXPECT_EQ(huge.memory[0].bytes, INT64_MAX);
}

// cudaMallocAsync's records name their pool and its size then (or what is
// in use, if more); the pool's own records give its creation, trims (what
// a trim keeps) and destruction. Imported pools' sizes are not this
// process's: not a pool here.
TEST(CuptiMemory, PoolsGiveTheirReservations) {
  CuptiRecordConverter c;
  add(c, pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0xf000, 0, 0, 0, 900, 40));
  add(c, from_pool(memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0xf100, 5u << 20, 1000, 41),
                   0xf000, 6u << 20, 5u << 20));
  add(c, from_pool(memory_record(kRelease, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0xf100, 5u << 20, 1100, 42),
                   0xf000, 0, 0x7fffff));  // a size below what is in use: what is in use
  add(c, pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, 0xf000, 123, 1u << 20, 2u << 20, 1200, 43));
  add(c, pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED, 0xf000, 0, 0, 0, 1300, 44));
  CUpti_ActivityMemory4 imported =
      from_pool(memory_record(kAlloc, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0xe100, 64, 1400, 45), 0xe000, 4242, 0);
  imported.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED;
  add(c, imported);
  CUpti_ActivityMemoryPool3 imported_pool =
      pool_record(CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED, 0xe000, 1, 0, 0, 1500, 46);
  imported_pool.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED;
  add(c, imported_pool);
  EXPECT_EQ(c.ignored_records(), 1u);
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.memory.size(), 6u);
  const auto check = [&](std::uint64_t corr, std::int64_t bytes, std::uint64_t pool, std::int64_t pool_bytes) {
    const DeviceMemoryEvent* m = find_memory(b, corr);
    ASSERT_NE(m, nullptr) << corr;
    EXPECT_EQ(m->bytes, bytes) << corr;
    EXPECT_EQ(m->pool, pool) << corr;
    EXPECT_EQ(m->pool_bytes, pool_bytes) << corr;
    EXPECT_EQ(m->device_type, 1) << corr;
  };
  check(40, 0, 0xf000, 0);
  check(41, 5 << 20, 0xf000, 6 << 20);
  check(42, -(5 << 20), 0xf000, 0x7fffff);
  check(43, 0, 0xf000, 2 << 20);  // keeps minBytesToKeep (more than in use)
  check(44, 0, 0xf000, 0);
  check(45, 64, 0, -1);
}

// ---- which calls a window records: the source's CUPTI switches ------------------------
//
// A CUPTI that logs what start() and stop() ask of it (the vocabulary of the
// stand-in libcupti, tests/standin) and keeps the state CUPTI documents for
// it (cupti_activity.h, cuptiActivityEnableRuntimeApi): enabling a kind
// records every call of it and overrides the per-call switches set before;
// a per-call switch set after the kind, or without it, decides that call.

struct FakeCupti {
  std::vector<std::string> log;
  std::set<int> kinds;
  std::map<std::uint32_t, bool> runtime_calls, driver_calls;  // per-call switches in force
  CUptiResult refuse_driver_api = CUPTI_SUCCESS;               // what enable_driver_api answers
  std::set<int> unsupported;                                   // kinds enabling answers CUPTI_ERROR_NOT_SUPPORTED
  // A context exists: a per-call driver switch turned on now answers
  // CUPTI_SUCCESS and records nothing (measured on an H200, CUDA 13.0).
  bool context = false;

  bool records_runtime(std::uint32_t cbid) const {
    auto it = runtime_calls.find(cbid);
    return it != runtime_calls.end() ? it->second : kinds.count(CUPTI_ACTIVITY_KIND_RUNTIME) != 0;
  }
  bool records_driver(std::uint32_t cbid) const {
    auto it = driver_calls.find(cbid);
    return it != driver_calls.end() ? it->second : kinds.count(CUPTI_ACTIVITY_KIND_DRIVER) != 0;
  }
};
FakeCupti* g_fake = nullptr;

CUptiResult fake_enable(CUpti_ActivityKind k) {
  g_fake->log.push_back("activity_enable " + std::to_string(k));
  if (g_fake->unsupported.count(k) != 0) return CUPTI_ERROR_NOT_SUPPORTED;
  g_fake->kinds.insert(k);
  if (k == CUPTI_ACTIVITY_KIND_RUNTIME) g_fake->runtime_calls.clear();
  if (k == CUPTI_ACTIVITY_KIND_DRIVER) g_fake->driver_calls.clear();
  return CUPTI_SUCCESS;
}
CUptiResult fake_disable(CUpti_ActivityKind k) {
  g_fake->log.push_back("activity_disable " + std::to_string(k));
  g_fake->kinds.erase(k);
  if (k == CUPTI_ACTIVITY_KIND_RUNTIME) g_fake->runtime_calls.clear();
  if (k == CUPTI_ACTIVITY_KIND_DRIVER) g_fake->driver_calls.clear();
  return CUPTI_SUCCESS;
}
CUptiResult fake_runtime_api(CUpti_CallbackId cbid, std::uint8_t on) {
  g_fake->log.push_back("runtime_api " + std::to_string(cbid) + " " + std::to_string(on));
  g_fake->runtime_calls[cbid] = on != 0;
  return CUPTI_SUCCESS;
}
CUptiResult fake_driver_api(CUpti_CallbackId cbid, std::uint8_t on) {
  g_fake->log.push_back("driver_api " + std::to_string(cbid) + " " + std::to_string(on));
  if (g_fake->refuse_driver_api != CUPTI_SUCCESS && on != 0 && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx) {
    return g_fake->refuse_driver_api;
  }
  if (on != 0 && g_fake->context) return CUPTI_SUCCESS;
  g_fake->driver_calls[cbid] = on != 0;
  return CUPTI_SUCCESS;
}

class CuptiSwitches : public ::testing::Test {
 protected:
  void SetUp() override { g_fake = &fake_; }
  void TearDown() override { g_fake = nullptr; }
  ActivitySwitches all_functions() const { return {fake_enable, fake_disable, fake_runtime_api, fake_driver_api}; }
  std::size_t index_of(const std::string& line) const {
    for (std::size_t i = 0; i < fake_.log.size(); ++i) {
      if (fake_.log[i] == line) return i;
    }
    return fake_.log.size();
  }
  bool logged(const std::string& line) const { return index_of(line) < fake_.log.size(); }
  FakeCupti fake_;
};

std::string enabled(CUpti_ActivityKind k) { return "activity_enable " + std::to_string(k); }

TEST_F(CuptiSwitches, ByDefaultCuptiRecordsExactlyTheCallsTorchRecords) {
  EnabledActivities on;
  enable_activities(all_functions(), CuptiOptions{}, CudaContexts::kNoneYet, &on);
  EXPECT_EQ(on.failed_call, nullptr);
  EXPECT_TRUE(on.problems.empty()) << on.problems.front();
  // Every runtime and driver call CUPTI knows, through CUPTI's own state:
  // a call Kineto drops is never recorded, a call it keeps always is.
  for (std::size_t i = 0; i < kRuntimeCbidNamesSize; ++i) {
    const std::uint32_t cbid = kRuntimeCbidNames[i].cbid;
    EXPECT_EQ(fake_.records_runtime(cbid), kineto_records_runtime_call(cbid)) << kRuntimeCbidNames[i].name;
  }
  for (std::size_t i = 0; i < kDriverCbidNamesSize; ++i) {
    const std::uint32_t cbid = kDriverCbidNames[i].cbid;
    EXPECT_EQ(fake_.records_driver(cbid), kineto_records_driver_call(cbid)) << kDriverCbidNames[i].name;
  }
  // The per-step noise: none of it.
  EXPECT_FALSE(fake_.records_runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));
  EXPECT_FALSE(fake_.records_runtime(CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020));
  EXPECT_FALSE(fake_.records_driver(CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute));
  EXPECT_FALSE(fake_.records_driver(CUPTI_DRIVER_TRACE_CBID_cuKernelGetName));
  EXPECT_TRUE(fake_.records_runtime(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_TRUE(fake_.records_driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
  // How: the runtime kind, then its per-call switches off; the driver's
  // kept calls one by one, never the DRIVER kind; no synchronizations.
  const std::size_t runtime_kind = index_of(enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
  ASSERT_LT(runtime_kind, fake_.log.size());
  for (const KinetoCbid& c : kKinetoDroppedRuntimeCalls) {
    const std::size_t at = index_of("runtime_api " + std::to_string(c.cbid) + " 0");
    ASSERT_LT(at, fake_.log.size()) << c.cbid;
    EXPECT_GT(at, runtime_kind) << "a per-call switch before the kind is overridden by it";
  }
  for (const KinetoCbid& c : kKinetoKeptDriverCalls) EXPECT_TRUE(logged("driver_api " + std::to_string(c.cbid) + " 1"));
  EXPECT_FALSE(logged(enabled(CUPTI_ACTIVITY_KIND_DRIVER)));
  EXPECT_FALSE(logged(enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)));
  for (const CUpti_ActivityKind k :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
        CUPTI_ACTIVITY_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT}) {
    EXPECT_TRUE(logged(enabled(k))) << k;
  }
  EXPECT_TRUE(on.driver_calls_by_cbid);

  // The window's end: no call is recorded any more (tprof's own device
  // wait comes next), device work still is; then everything goes off.
  disable_api_records(all_functions(), &on);
  for (std::size_t i = 0; i < kRuntimeCbidNamesSize; ++i) EXPECT_FALSE(fake_.records_runtime(kRuntimeCbidNames[i].cbid));
  for (std::size_t i = 0; i < kDriverCbidNamesSize; ++i) EXPECT_FALSE(fake_.records_driver(kDriverCbidNames[i].cbid));
  EXPECT_EQ(fake_.kinds.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 1u);
  disable_activities(all_functions(), &on);
  EXPECT_TRUE(fake_.kinds.empty());
  EXPECT_TRUE(on.kinds.empty());
}

TEST_F(CuptiSwitches, AWindowOpenedOnARunningProgramTakesTheDriverKindAndTheConverterKeepsWhatTorchKeeps) {
  // matmul_add on the H200: its context and cuBLAS handles exist before
  // the window; the per-call switches took, and cuBLASLt's GEMM launches
  // (cuLaunchKernelEx) were missing, their kernels linked to no step.
  fake_.context = true;
  EnabledActivities on;
  enable_activities(all_functions(), CuptiOptions{}, CudaContexts::kExist, &on);
  EXPECT_EQ(on.failed_call, nullptr);
  EXPECT_TRUE(on.problems.empty()) << on.problems.front();
  EXPECT_TRUE(logged(enabled(CUPTI_ACTIVITY_KIND_DRIVER)));
  EXPECT_FALSE(on.driver_calls_by_cbid);
  for (const KinetoCbid& c : kKinetoKeptDriverCalls) EXPECT_TRUE(fake_.records_driver(c.cbid)) << c.cbid;
  // What the switches alone would have recorded there: nothing.
  FakeCupti alone;
  alone.context = true;
  g_fake = &alone;
  EnabledActivities switches_only;
  enable_activities(all_functions(), CuptiOptions{}, CudaContexts::kNoneYet, &switches_only);
  EXPECT_FALSE(alone.records_driver(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
  g_fake = &fake_;
  disable_activities(all_functions(), &on);
  EXPECT_TRUE(fake_.kinds.empty());
}

TEST_F(CuptiSwitches, AllCallsAreTheWholeKindsWithoutSwitches) {
  CuptiOptions options;
  options.api_calls = CuptiApiCalls::kAll;
  EnabledActivities on;
  enable_activities(all_functions(), options, CudaContexts::kNoneYet, &on);
  EXPECT_TRUE(on.problems.empty());
  for (std::size_t i = 0; i < kRuntimeCbidNamesSize; ++i) EXPECT_TRUE(fake_.records_runtime(kRuntimeCbidNames[i].cbid));
  for (std::size_t i = 0; i < kDriverCbidNamesSize; ++i) EXPECT_TRUE(fake_.records_driver(kDriverCbidNames[i].cbid));
  for (const std::string& line : fake_.log) {
    EXPECT_EQ(line.rfind("runtime_api", 0), std::string::npos) << line;
    EXPECT_EQ(line.rfind("driver_api", 0), std::string::npos) << line;
  }
  disable_activities(all_functions(), &on);
  EXPECT_TRUE(fake_.kinds.empty());
}

TEST_F(CuptiSwitches, SynchronizationsOnlyWhenAsked) {
  CuptiOptions options;
  options.sync_events = true;
  EnabledActivities on;
  enable_activities(all_functions(), options, CudaContexts::kNoneYet, &on);
  EXPECT_TRUE(logged(enabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)));
  disable_activities(all_functions(), &on);
  EXPECT_TRUE(logged("activity_disable " + std::to_string(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)));
}

// Memory only with CuptiOptions::memory (ProfilerOptions::profile_memory,
// tprof record --memory): MEMORY2 and MEMORY_POOL, turned off with the rest.
TEST_F(CuptiSwitches, MemoryOnlyWhenAsked) {
  EnabledActivities plain;
  enable_activities(all_functions(), CuptiOptions{}, CudaContexts::kNoneYet, &plain);
  EXPECT_FALSE(logged(enabled(CUPTI_ACTIVITY_KIND_MEMORY2)));
  EXPECT_FALSE(logged(enabled(CUPTI_ACTIVITY_KIND_MEMORY_POOL)));
  disable_activities(all_functions(), &plain);

  CuptiOptions options;
  options.memory = true;
  EnabledActivities on;
  enable_activities(all_functions(), options, CudaContexts::kNoneYet, &on);
  EXPECT_EQ(on.failed_call, nullptr);
  EXPECT_TRUE(on.problems.empty());
  EXPECT_EQ(fake_.kinds.count(CUPTI_ACTIVITY_KIND_MEMORY2), 1u);
  EXPECT_EQ(fake_.kinds.count(CUPTI_ACTIVITY_KIND_MEMORY_POOL), 1u);
  // The window's end: memory stays on through tprof's own device wait
  // (which allocates nothing), then goes with everything.
  disable_api_records(all_functions(), &on);
  EXPECT_EQ(fake_.kinds.count(CUPTI_ACTIVITY_KIND_MEMORY2), 1u);
  disable_activities(all_functions(), &on);
  EXPECT_TRUE(fake_.kinds.empty());
}

// A CUPTI without the memory kinds records the rest and says so.
TEST_F(CuptiSwitches, MemoryKindsACuptiLacksAreProblemsNotFailures) {
  fake_.unsupported = {CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_MEMORY_POOL};
  CuptiOptions options;
  options.memory = true;
  EnabledActivities on;
  enable_activities(all_functions(), options, CudaContexts::kNoneYet, &on);
  EXPECT_EQ(on.failed_call, nullptr);
  ASSERT_EQ(on.problems.size(), 2u);
  EXPECT_NE(on.problems[0].find("kind 49 not recorded"), std::string::npos) << on.problems[0];
  EXPECT_NE(on.problems[1].find("kind 50 not recorded"), std::string::npos) << on.problems[1];
  EXPECT_EQ(fake_.kinds.count(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), 1u);
  disable_activities(all_functions(), &on);
}

TEST_F(CuptiSwitches, OlderCuptiRecordsEverythingAndSaysTheConverterDrops) {
  ActivitySwitches old = all_functions();
  old.enable_runtime_api = nullptr;
  old.enable_driver_api = nullptr;
  EnabledActivities on;
  enable_activities(old, CuptiOptions{}, CudaContexts::kNoneYet, &on);
  EXPECT_EQ(on.failed_call, nullptr);
  EXPECT_TRUE(logged(enabled(CUPTI_ACTIVITY_KIND_RUNTIME)));
  EXPECT_TRUE(logged(enabled(CUPTI_ACTIVITY_KIND_DRIVER)));
  EXPECT_FALSE(on.driver_calls_by_cbid);
  ASSERT_EQ(on.problems.size(), 2u);
  EXPECT_NE(on.problems[0].find("no cuptiActivityEnableRuntimeApi"), std::string::npos) << on.problems[0];
  EXPECT_NE(on.problems[1].find("no cuptiActivityEnableDriverApi"), std::string::npos) << on.problems[1];
  EXPECT_NE(on.problems[1].find("dropped"), std::string::npos) << on.problems[1];

  // What such a CUPTI hands over: the converter keeps what torch keeps.
  CuptiRecordConverter c;
  c.keep_torch_api_calls_only(true);
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 10, 1, 42, 1));
  add(c, api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute, 12, 1, 42, 2));
  add(c, api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuKernelGetName, 13, 1, 42, 3));
  add(c, api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 14, 5, 42, 4));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 20, 5, 42, 5));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, 26, 1, 42, 6));
  EXPECT_EQ(c.filtered_api_records(), 4u);
  DeviceBatch b;
  c.finish(&b);
  ASSERT_EQ(b.events.size(), 2u);
  EXPECT_EQ(b.name(b.events[0]), "cuLaunchKernelEx");
  EXPECT_EQ(b.name(b.events[1]), "cudaLaunchKernel");
  // By default (kAll's converter) every call stays.
  CuptiRecordConverter every;
  add(every, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 10, 1, 42, 1));
  add(every, api_record(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuKernelGetName, 13, 1, 42, 3));
  DeviceBatch all;
  every.finish(&all);
  EXPECT_EQ(all.events.size(), 2u);
}

TEST_F(CuptiSwitches, ADriverCallCuptiCannotSwitchAloneFallsBackToTheKind) {
  fake_.refuse_driver_api = CUPTI_ERROR_INVALID_PARAMETER;
  EnabledActivities on;
  enable_activities(all_functions(), CuptiOptions{}, CudaContexts::kNoneYet, &on);
  EXPECT_EQ(on.failed_call, nullptr);
  EXPECT_TRUE(logged(enabled(CUPTI_ACTIVITY_KIND_DRIVER)));
  EXPECT_FALSE(on.driver_calls_by_cbid);
  // The switches set before the refusal were undone first.
  EXPECT_TRUE(logged("driver_api " + std::to_string(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) + " 0"));
  ASSERT_EQ(on.problems.size(), 1u);
  EXPECT_NE(on.problems[0].find("cuptiActivityEnableDriverApi"), std::string::npos);
  // Every kept call is recorded (the converter drops the rest).
  for (const KinetoCbid& c : kKinetoKeptDriverCalls) EXPECT_TRUE(fake_.records_driver(c.cbid)) << c.cbid;
  disable_activities(all_functions(), &on);
  EXPECT_TRUE(fake_.kinds.empty());
}

CUptiResult refuse_kernels(CUpti_ActivityKind k) {
  g_fake->log.push_back("activity_enable " + std::to_string(k));
  return k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ? CUPTI_ERROR_INSUFFICIENT_PRIVILEGES : CUPTI_SUCCESS;
}

TEST_F(CuptiSwitches, TheFirstKindFailingStopsEverything) {
  ActivitySwitches s = all_functions();
  s.enable = refuse_kernels;
  EnabledActivities on;
  enable_activities(s, CuptiOptions{}, CudaContexts::kNoneYet, &on);
  EXPECT_STREQ(on.failed_call, "cuptiActivityEnable");
  EXPECT_EQ(on.failed_result, CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
  EXPECT_TRUE(on.kinds.empty());
  EXPECT_EQ(fake_.log.size(), 1u);
}

TEST(KinetoApiCalls, TheListsNameRealCallsOnce) {
  std::set<std::uint32_t> seen;
  for (const KinetoCbid& c : kKinetoDroppedRuntimeCalls) {
    EXPECT_TRUE(seen.insert(c.cbid).second) << c.cbid;
    EXPECT_NE(runtime_cbid_name(c.cbid), "INVALID") << c.cbid;
    EXPECT_FALSE(kineto_records_runtime_call(c.cbid));
  }
  seen.clear();
  for (const KinetoCbid& c : kKinetoKeptDriverCalls) {
    EXPECT_TRUE(seen.insert(c.cbid).second) << c.cbid;
    EXPECT_NE(driver_cbid_name(c.cbid), "INVALID") << c.cbid;
    EXPECT_TRUE(kineto_records_driver_call(c.cbid));
  }
  EXPECT_EQ(runtime_cbid_name(kKinetoDroppedRuntimeCalls[0].cbid), "cudaGetDevice");
  EXPECT_EQ(driver_cbid_name(kKinetoKeptDriverCalls[1].cbid), "cuLaunchKernelEx");
}

// ---- everything at once, against the golden file -------------------------------------

std::string golden_path() { return std::string(TPROF_SOURCE_DIR) + "/tests/unit/expected/cupti_replay_batch.txt"; }

TEST(CuptiReplay, GoldenBatch) {
  CuptiRecordConverter c;
  // Buffer 1: work before its DEVICE and CONTEXT records.
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE, 5000, 200, 1,
                     CUPTI_SYNCHRONIZATION_INVALID_VALUE, 12, 60));
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT, 5300, 10, 1, 7, 13, 61));
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE, 5400, 20, 1, 7,
                     CUPTI_SYNCHRONIZATION_INVALID_VALUE, 62));
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE, 5500, 30, 1,
                     CUPTI_SYNCHRONIZATION_INVALID_VALUE, CUPTI_SYNCHRONIZATION_INVALID_VALUE, 63));
  add(c, sync_record(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN, 5600, 1, 9,
                     CUPTI_SYNCHRONIZATION_INVALID_VALUE, CUPTI_SYNCHRONIZATION_INVALID_VALUE, 64));
  add(c, kernel(kAddKernel, 4524516491526872, 30529, 1343, {16384, 1, 1}, {128, 1, 1}, 34, 0, 0));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 211, 4524516491390260, 8817, 1317, 1343));
  add(c, kernel("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT", 4524450005117409, 2304, 1323, {4, 2, 1}, {384, 1, 1}, 168,
                0, 164308));
  add(c, api_record(CUPTI_ACTIVITY_KIND_DRIVER, 652, 4524450005105000, 10575, 1317, 1323));
  // Buffer 2: the descriptions, then more work.
  add(c, h100_device(0));
  add(c, context_record(1, 0));
  add(c, kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_badd_coopA_NNT", 4524529551727722, 176771, 47, {2, 66, 1},
                {384, 1, 1}, 168, 0, 213188));
  add(c, api_record(CUPTI_ACTIVITY_KIND_DRIVER, 652, 4524529551716538, 10575, 1346, 47));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 41, 4524529551652176, 19402, 1346, 34));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 51, 4524529551708905, 7139, 1346, 46));
  add(c, api_record(CUPTI_ACTIVITY_KIND_RUNTIME, 165, 4524529554709711, 939914, 1346, 528));
  // Every copy direction, each with a different pair of memory kinds.
  const std::uint8_t copy_kinds[] = {
      CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
      CUPTI_ACTIVITY_MEMCPY_KIND_HTOA,    CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, CUPTI_ACTIVITY_MEMCPY_KIND_ATOA,
      CUPTI_ACTIVITY_MEMCPY_KIND_ATOD,    CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD,
      CUPTI_ACTIVITY_MEMCPY_KIND_HTOH,    CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, 42};
  const std::uint8_t memory_kinds[] = {
      CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
      CUPTI_ACTIVITY_MEMORY_KIND_PINNED,  CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
      CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,   CUPTI_ACTIVITY_MEMORY_KIND_MANAGED,
      CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC, 99};
  std::uint32_t corr = 100;
  std::uint64_t t = 4524529551671625;
  for (std::size_t i = 0; i < std::size(copy_kinds); ++i) {
    add(c, memcpy_record(copy_kinds[i], memory_kinds[i % std::size(memory_kinds)],
                         memory_kinds[(i + 3) % std::size(memory_kinds)], t, 1000 + i, 4096 * (i + 1), corr++));
    t += 5000;
  }
  // The fixture's DtoD copy.
  add(c, memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4524529551671625, 19648, 33554432, 34));
  // A peer copy from device 1 to device 0, executed by device 0.
  CUpti_ActivityMemcpyPtoP4 peer{};
  peer.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  peer.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  peer.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  peer.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  peer.start = 4524529552000000;
  peer.end = peer.start + 4096;
  peer.bytes = 1 << 20;
  peer.deviceId = 0;
  peer.contextId = 1;
  peer.streamId = 13;
  peer.srcDeviceId = 1;
  peer.srcContextId = 2;
  peer.dstDeviceId = 0;
  peer.dstContextId = 1;
  peer.correlationId = 70;
  add(c, peer);
  // The fixture's memset, and one on pinned host memory.
  for (const std::uint16_t kind : {CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, CUPTI_ACTIVITY_MEMORY_KIND_PINNED}) {
    CUpti_ActivityMemset4 s{};
    s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s.start = kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE ? 4524529551717802 : 4524529551800000;
    s.end = s.start + 768;
    s.bytes = 4;
    s.contextId = 1;
    s.streamId = 7;
    s.correlationId = kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE ? 46 : 48;
    s.memoryKind = kind;
    add(c, s);
  }
  // CUPTI's own work: on a thread, on a device, and on nothing.
  CUpti_ActivityOverhead3 o{};
  o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  o.objectId.pt.processId = 1346;
  o.objectId.pt.threadId = 1400;
  o.start = 4524529560000000;
  o.end = o.start + 12000;
  add(c, o);
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_DEVICE;
  o.objectId = {};
  o.objectId.dcs.deviceId = 0;
  add(c, o);
  o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING;
  o.objectKind = CUPTI_ACTIVITY_OBJECT_UNKNOWN;
  add(c, o);
  for (const CUpti_ActivityOverheadKind k :
       {CUPTI_ACTIVITY_OVERHEAD_UNKNOWN, CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER,
        CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION, CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE,
        CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING, CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL,
        CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT}) {
    o.overheadKind = k;
    add(c, o);
  }
  // Odd data: a reversed copy, an unknown kind.
  CUpti_ActivityMemcpy6 reversed = memcpy_record(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
                                                 CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4524529570000000, 0, 8, 90);
  reversed.end = reversed.start - 100;
  add(c, reversed);
  CUpti_ActivityMarker2 marker{};
  marker.kind = CUPTI_ACTIVITY_KIND_MARKER;
  add(c, marker);

  EXPECT_EQ(c.clamped_records(), 1u);
  EXPECT_EQ(c.ignored_records(), 1u);
  DeviceBatch b;
  c.finish(&b);
  const std::string actual = dump(b);

  if (const char* update = std::getenv("TPROF_UPDATE_GOLDEN"); update != nullptr && update[0] == '1') {
    std::ofstream(golden_path(), std::ios::binary) << actual;
    GTEST_SKIP() << "rewrote " << golden_path() << ": review the diff";
  }
  std::ifstream in(golden_path(), std::ios::binary);
  ASSERT_TRUE(in) << golden_path() << " is missing; run with TPROF_UPDATE_GOLDEN=1 and review it";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str()) << "regenerate with TPROF_UPDATE_GOLDEN=1 after reviewing the change";
}

// ---- the live source without a driver --------------------------------------------------

// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

// Whether this machine can run CUDA work (then the no-driver test is moot).
bool have_cuda_driver() {
  for (const char* path : {"/dev/nvidiactl", "/dev/nvidia0"}) {
    if (std::ifstream(path)) return true;
  }
  return false;
}

// The NVTX callback without CUPTI: each kind of call reaches the ranges it
// was given (capture passes the recorder's), with its text or the id the
// start returned; a push without usable text is still a push.
std::vector<std::string> g_nvtx_calls;

TEST(CuptiNvtx, EachCallReachesTheRangesItWasGiven) {
  static constexpr NvtxRanges kLog{
      [](std::string_view name) noexcept { g_nvtx_calls.push_back("push " + std::string(name)); },
      []() noexcept { g_nvtx_calls.push_back("pop"); },
      [](std::uint64_t id, std::string_view name) noexcept {
        g_nvtx_calls.push_back("start " + std::to_string(id) + " " + std::string(name));
      },
      [](std::uint64_t id) noexcept { g_nvtx_calls.push_back("end " + std::to_string(id)); }};
  g_nvtx_calls.clear();
  auto call = [](CUpti_CallbackId cbid, const void* params, const void* result = nullptr) {
    CUpti_NvtxData data{};
    data.functionName = "nvtx";
    data.functionParams = params;
    data.functionReturnValue = result;
    report_nvtx(kLog, cbid, &data);
  };
  const nvtxRangePushA_params forward{"forward"};
  call(CUPTI_CBID_NVTX_nvtxRangePushA, &forward);
  const nvtxRangePushW_params wide{L"b\u00e4ckward"};
  call(CUPTI_CBID_NVTX_nvtxRangePushW, &wide);
  nvtxEventAttributes_t attrib{};
  attrib.version = NVTX_VERSION;
  attrib.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attrib.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attrib.message.ascii = "optimizer";
  const nvtxRangePushEx_params ex{&attrib};
  call(CUPTI_CBID_NVTX_nvtxRangePushEx, &ex);
  const nvtxRangePushA_params unnamed{nullptr};
  call(CUPTI_CBID_NVTX_nvtxRangePushA, &unnamed);
  call(CUPTI_CBID_NVTX_nvtxRangePop, nullptr);
  const nvtxRangeStartA_params load{"load"};
  const nvtxRangeId_t id = 42;
  call(CUPTI_CBID_NVTX_nvtxRangeStartA, &load, &id);
  call(CUPTI_CBID_NVTX_nvtxRangeStartA, &load);  // no id returned: nothing to end later
  const nvtxRangeEnd_params end{id};
  call(CUPTI_CBID_NVTX_nvtxRangeEnd, &end);
  call(CUPTI_CBID_NVTX_nvtxRangePushA, nullptr);  // no arguments: not a push CUPTI can describe
  const std::vector<std::string> expected = {"push forward", "push b?ckward", "push optimizer", "push nvtx range",
                                             "pop",          "start 42 load", "end 42"};
  EXPECT_EQ(g_nvtx_calls, expected);
}

TEST(CuptiLiveSource, MissingLibraryIsAClearError) {
  ScopedEnv env("TPROF_CUPTI_LIBRARY", "/nonexistent/libcupti.so");
  auto source = make_cupti_source(CuptiOptions{});
  const Status s = source->start();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.error().message().find("libcupti could not be loaded"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("/nonexistent/libcupti.so"), std::string::npos) << s.error().message();
  DeviceBatch b;
  source->stop(&b);  // harmless
  EXPECT_TRUE(b.events.empty());
  EXPECT_TRUE(b.problems.empty());
}

TEST(CuptiLiveSource, NoDriverFailsQuicklyAndStopIsHarmless) {
  if (have_cuda_driver()) GTEST_SKIP() << "a CUDA driver is present";
  static constexpr NvtxRanges kNowhere{[](std::string_view) noexcept {}, []() noexcept {},
                                      [](std::uint64_t, std::string_view) noexcept {}, [](std::uint64_t) noexcept {}};
  CuptiOptions options;
  options.nvtx = &kNowhere;
  auto source = make_cupti_source(options);
  const auto t0 = std::chrono::steady_clock::now();
  const Status s = source->start();
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(s.ok()) << "CUPTI started without a CUDA driver?";
  EXPECT_EQ(s.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.error().message().find("CUDA activity unavailable: no CUDA driver: libcuda.so.1 could not be loaded"),
            std::string::npos)
      << s.error().message();
  EXPECT_LT(elapsed, std::chrono::seconds(10)) << s.error().message();
  std::printf("start() without a driver: %s\n", s.error().message().c_str());
  DeviceBatch b;
  source->stop(&b);
  EXPECT_TRUE(b.events.empty());
  // A second attempt says the same, and a second source may try too.
  const Status again = source->start();
  EXPECT_FALSE(again.ok());
  auto other = make_cupti_source(CuptiOptions{});
  EXPECT_FALSE(other->start().ok());
  other->stop(&b);
  source->stop(&b);
}

}  // namespace
}  // namespace tprof::internal
