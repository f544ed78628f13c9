// Numbers about real public traces that were computed without tprof, so the
// golden files (tests/golden/expected/) are anchored to something other than
// "whatever tprof printed".
//
// Every constant below comes from tests/golden/independent_counts.py, which
// uses only Python's json module (durations parsed as Decimal, so exact ns):
//   events / by kind   counts of traceEvents by "cat" and "ph" (M = metadata,
//                      name "[memory]" = memory)
//   self CUDA ns       Σ dur of X events with cat kernel/Kernel, gpu_memcpy/Memcpy,
//                      gpu_memset/Memset (not gpu_user_annotation: torch ≥ 2.4
//                      keeps annotations out of the total; not cuda_sync, the
//                      host waiting, which tprof's table leaves out)
//   kernel ns          Σ dur of cat kernel/Kernel
//   GEMM rows          per kernel name matching /gemm|cutlass|Cijk/i: count, Σ dur
//   steps              ProfilerStep#N dur; GPU busy = union of kernel/memcpy/memset
//                      intervals clipped to the step; launches = runtime or driver
//                      calls starting in the step whose correlation matches a
//                      device activity
// To recheck: python3 tests/golden/independent_counts.py
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "src/trace/json_value.h"
#include "tests/support/run_cli.h"
#include "tprof/key_averages.h"
#include "tprof/read.h"
#include "tprof/steps.h"

namespace tprof {
namespace {

using internal::JsonValue;

const std::string kData = std::string(TPROF_TEST_DATA) + "/";
const std::string kBert = "public/tracelens/h100/gaunernst_bert-small-uncased__1016001.json.gz";
const std::string kFalconsai = "public/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz";
const std::string kAlexnet = "public/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz";
const std::string kResnet2021 =
    "public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.excerpt.pt.trace.json.gz";
const std::string kTriton = "public/hta/triton_example/triton_example.json.gz";
const std::string kBertMi300 = "public/tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz";
const std::string kRankNonGpu = "kineto-public/hta_rank_non_gpu_2022-08.json.gz";
const std::string kLegacyMlp = "torch-1.13/mlp/cycle0.json";

Trace load(const std::string& rel) {
  Result<Trace> t = read_trace(kData + rel);
  EXPECT_TRUE(t) << rel << ": " << (t ? "" : t.error().to_string());
  return t ? std::move(t).value() : Trace();
}

// ---------------------------------------------------------------------------
// `tprof info --format json`: total events and events by kind.

struct KindCounts {
  std::string trace;
  std::int64_t events;
  std::map<std::string, std::int64_t> by_kind;  // every non-zero kind
};

std::vector<KindCounts> kind_counts() {
  return {
      // by_cat: cpu_op 479, python_function 1385, cuda_runtime 110, cuda_driver 22,
      // kernel 60, gpu_memcpy 1, gpu_user_annotation 1, user_annotation 1, ac2g 193,
      // Trace 1, no cat (2 global instants) 2, [memory] 236, M 60.
      {kBert,
       2551,
       {{"other", 2},
        {"cpu_op", 479},
        {"user_annotation", 1},
        {"python_function", 1385},
        {"cuda_runtime", 110},
        {"cuda_driver", 22},
        {"kernel", 60},
        {"gpu_memcpy", 1},
        {"gpu_user_annotation", 1},
        {"memory", 236},
        {"trace_span", 1},
        {"flow", 193},
        {"metadata", 60}}},
      // by_cat: cpu_op 359, cuda_runtime 361, kernel 79, cuda_sync 41, gpu_memcpy 16,
      // gpu_memset 3, user_annotation 8, ac2g 500, Trace 1, no cat 2, M 38.
      {kAlexnet,
       1408,
       {{"other", 2},
        {"cpu_op", 359},
        {"user_annotation", 8},
        {"cuda_runtime", 361},
        {"kernel", 79},
        {"gpu_memcpy", 16},
        {"gpu_memset", 3},
        {"cuda_sync", 41},
        {"trace_span", 1},
        {"flow", 500},
        {"metadata", 38}}},
      // 2021 category names: Operator 107, Runtime 92, Kernel 50, Memset 6,
      // async (flows) 112, Trace 1, no cat 2, [memory] 79, M 20.
      {kResnet2021,
       469,
       {{"other", 2},
        {"cpu_op", 107},
        {"cuda_runtime", 92},
        {"kernel", 50},
        {"gpu_memset", 6},
        {"memory", 79},
        {"trace_span", 1},
        {"flow", 112},
        {"metadata", 20}}},
      // cpu_op 3, user_annotation 1, cuda_runtime 1, cuda_driver 1, kernel 1, ac2g 3,
      // Trace 1, no cat 2, M 58.
      {kTriton,
       71,
       {{"other", 2},
        {"cpu_op", 3},
        {"user_annotation", 1},
        {"cuda_runtime", 1},
        {"cuda_driver", 1},
        {"kernel", 1},
        {"trace_span", 1},
        {"flow", 3},
        {"metadata", 58}}},
      // 2022 Kineto, CPU only: cpu_op 2424, user_annotation 43.
      {kRankNonGpu, 2467, {{"cpu_op", 2424}, {"user_annotation", 43}}},
      // torch's legacy array has no "cat": 450 events, all ops.
      {kLegacyMlp, 450, {{"cpu_op", 450}}},
  };
}

TEST(PublicTraces, InfoCountsEventsByKindAsPythonDoes) {
  for (const KindCounts& k : kind_counts()) {
    SCOPED_TRACE(k.trace);
    testing::CliResult r = testing::run_cli(TPROF_BIN, {"info", "--format", "json", kData + k.trace});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Result<JsonValue> doc = JsonValue::parse(r.out);
    ASSERT_TRUE(doc) << r.out.substr(0, 500);
    ASSERT_NE(doc->find("events"), nullptr);
    EXPECT_EQ(doc->find("events")->int_or(-1), k.events);
    const JsonValue* by_kind = doc->find("events_by_kind");
    ASSERT_NE(by_kind, nullptr);
    std::map<std::string, std::int64_t> got;
    for (const auto& [name, v] : by_kind->members()) got[name] = v.int_or(-1);
    EXPECT_EQ(got, k.by_kind);
  }
}

// ---------------------------------------------------------------------------
// "Self CUDA time total": the library's sum and the printed footer.

struct DeviceTotals {
  std::string trace;
  std::int64_t self_cuda_ns;  // kernel + memcpy + memset
  std::int64_t kernel_ns;
  std::string footer;  // torch's format of self_cuda_ns
};

std::vector<DeviceTotals> device_totals() {
  return {
      {kBert, 309437, 307197, "Self CUDA time total: 309.437us"},
      {kFalconsai, 1225310, 1220926, "Self CUDA time total: 1.225ms"},
      {kAlexnet, 66203000, 10692000, "Self CUDA time total: 66.203ms"},
      {kResnet2021, 3541000, 3535000, "Self CUDA time total: 3.541ms"},
      {kTriton, 1760, 1760, "Self CUDA time total: 1.760us"},
      {kBertMi300, 390748, 388344, "Self CUDA time total: 390.748us"},
  };
}

TEST(PublicTraces, SelfCudaTotalIsTheSumOfDeviceActivity) {
  for (const DeviceTotals& d : device_totals()) {
    SCOPED_TRACE(d.trace);
    const Trace t = load(d.trace);
    std::int64_t kernel_ns = 0;
    for (std::uint32_t e = 0; e < t.events.size(); ++e) {
      if (t.events.kind[e] == EventKind::kKernel) kernel_ns += t.events.dur_ns[e];
    }
    EXPECT_EQ(kernel_ns, d.kernel_ns);

    const EventList list = EventList::build(t);
    std::int64_t self_cuda = 0;
    for (const StatRow& r : list.key_averages()) {
      if (r.is_device && !r.is_user_annotation) self_cuda += r.self_device_time_total_ns;
    }
    EXPECT_EQ(self_cuda, d.self_cuda_ns);

    testing::CliResult r = testing::run_cli(TPROF_BIN, {"-q", "table", kData + d.trace, "--row-limit", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Self CUDA  "), std::string::npos) << "no Self CUDA column";
    EXPECT_NE(r.out.find("\n" + d.footer + "\n"), std::string::npos) << r.out;
  }
}

TEST(PublicTraces, CpuOnlyTracesHaveNoCudaColumns) {
  for (const std::string& trace : {kRankNonGpu, kLegacyMlp}) {
    testing::CliResult r = testing::run_cli(TPROF_BIN, {"-q", "table", kData + trace, "--row-limit", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("CUDA"), std::string::npos) << trace << "\n" << r.out;
    EXPECT_NE(r.out.find("Self CPU time total: "), std::string::npos) << trace;
  }
}

// ---------------------------------------------------------------------------
// GEMM kernels are rows of their own with their Self CUDA time.

struct KernelRow {
  std::string name;
  std::int64_t count;
  std::int64_t self_cuda_ns;
  std::string printed;  // torch's format of self_cuda_ns
};

TEST(PublicTraces, GemmKernelsAreRowsWithTheirDeviceTime) {
  // H100 BERT (torch 2.6, cuBLAS + CUTLASS + flash attention).
  const std::vector<KernelRow> bert = {
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_"
       "kernel__5x_cublas",
       4, 33089, "33.089us"},
      {"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>(cutlass_80_"
       "tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2::Params)",
       1, 41280, "41.280us"},
      {"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cutlass_80_"
       "tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)",
       4, 24511, "24.511us"},
      {"void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_"
       "wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
       17, 98718, "98.718us"},
  };
  // AlexNet on A100 (integer µs) and ResNet-50 on V100 (2021 "Kernel" category).
  const std::vector<KernelRow> alexnet = {
      {"ampere_gcgemm_64x64_nt", 2, 646000, "646.000us"},
      {"ampere_sgemm_32x32_sliced1x4_tn", 6, 2621000, "2.621ms"},
  };
  const std::vector<KernelRow> resnet = {
      {"volta_sgemm_64x64_nt", 4, 767000, "767.000us"},
  };
  for (const auto& [trace, rows] : {std::pair{kBert, bert}, std::pair{kAlexnet, alexnet},
                                    std::pair{kResnet2021, resnet}}) {
    SCOPED_TRACE(trace);
    const Trace t = load(trace);
    const std::vector<StatRow> avg = EventList::build(t).key_averages();
    testing::CliResult r = testing::run_cli(
        TPROF_BIN, {"-q", "table", kData + trace, "--sort-by", "self_cuda_time_total", "--row-limit", "-1",
                    "--max-name-width", "400"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const KernelRow& k : rows) {
      SCOPED_TRACE(k.name);
      const StatRow* row = nullptr;
      for (const StatRow& s : avg) {
        if (s.key == k.name && s.is_device) row = &s;
      }
      ASSERT_NE(row, nullptr);
      EXPECT_EQ(row->count, k.count);
      EXPECT_EQ(row->self_device_time_total_ns, k.self_cuda_ns);
      EXPECT_EQ(row->cpu_time_total_ns, 0);
      // The printed row: the full name (right-aligned), then its cells.
      std::istringstream lines(r.out);
      bool found = false;
      for (std::string line; std::getline(lines, line);) {
        const std::size_t at = line.find(" " + k.name + "  ");
        if (at == std::string::npos) continue;
        found = true;
        EXPECT_NE(line.find("  " + k.printed + "  ", at), std::string::npos) << line;
      }
      EXPECT_TRUE(found) << "no table row for the kernel";
    }
  }
}

// ---------------------------------------------------------------------------
// Steps: duration, GPU busy and launches per ProfilerStep.

TEST(PublicTraces, StepsMatchIndependentUnions) {
  struct Want {
    std::string trace;
    std::int64_t step, dur_ns, gpu_busy_ns, launches;
  };
  const std::vector<Want> wants = {
      {kBert, 6, 4426114, 309437, 61},  // 39 cudaLaunchKernel/ExC/MemcpyAsync + 22 cuLaunchKernel
      {kFalconsai, 6, 7894065, 1225310, 156},
      {kBertMi300, 6, 4007334, 390748, 61},
      {kTriton, 1, 13336315805, 1760, 1},  // the one launch is a cuLaunchKernel
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.trace);
    const Trace t = load(w.trace);
    const StepsSummary s = compute_steps(t);
    ASSERT_EQ(s.steps.size(), 1u);
    EXPECT_TRUE(s.has_device);
    EXPECT_EQ(s.steps[0].step, w.step);
    EXPECT_EQ(s.steps[0].dur_ns, w.dur_ns);
    EXPECT_EQ(s.steps[0].gpu_busy_ns, w.gpu_busy_ns);
    EXPECT_EQ(s.steps[0].launches, w.launches);
  }
  // CPU-only traces: integer µs durations.
  const StepsSummary legacy = compute_steps(load(kLegacyMlp));
  ASSERT_EQ(legacy.steps.size(), 2u);
  EXPECT_FALSE(legacy.has_device);
  EXPECT_EQ(legacy.steps[0].dur_ns, 1397000);
  EXPECT_EQ(legacy.steps[1].dur_ns, 956000);
  const StepsSummary hta = compute_steps(load(kRankNonGpu));
  ASSERT_EQ(hta.steps.size(), 1u);
  EXPECT_EQ(hta.steps[0].step, 1009);
  EXPECT_EQ(hta.steps[0].dur_ns, 75473000);
}

}  // namespace
}  // namespace tprof
