// Efficiency (src/analyze/efficiency.h) on the blog's 4096 matmul_add on an
// H100: the GEMM's achieved TFLOP/s against the H100's dense bf16 peak, the
// add kernel memory-bound at the HBM ceiling and fusable, the verdict's
// wording; an unknown device gives no share of peak and says so.
#include <gtest/gtest.h>

#include <string>

#include "src/analyze/diagnose_context.h"
#include "src/analyze/efficiency.h"
#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

using internal::KernelClass;

Trace load(const std::string& rel) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + rel);
  EXPECT_TRUE(t.has_value()) << rel;
  return std::move(*t);
}

const Finding* find(const Diagnosis& d, std::string_view id) {
  for (const Finding& f : d.findings) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

// torch 2.11's trace of the blog's bf16 4096 run with the shapes torch
// records under record_shapes=True (tests/data/PROVENANCE.md).
constexpr const char* kTorchShapes = "gpu/h100-torch-2.11-shapes/4096_bf16_warm_eager.json";

TEST(Efficiency, GemmAtMostOfTheH100sBf16Peak) {
  const Trace t = load(kTorchShapes);
  const internal::DiagnoseContext c(t);
  const internal::Efficiency& e = c.efficiency();
  ASSERT_NE(e.peak, nullptr);
  EXPECT_EQ(e.peak->name, "H100 SXM");
  EXPECT_NEAR(e.share(KernelClass::kGemm), 0.846, 0.001);
  EXPECT_NEAR(e.share(KernelClass::kElementwise), 0.149, 0.001);
  const internal::GemmRate g = internal::gemm_rate(e);
  EXPECT_EQ(g.dtype, "bf16");
  // 2·4096³ flops in 169.0 us a call: 813 TFLOP/s, 82% of 989.4.
  EXPECT_NEAR(g.tflops, 813.2, 1.0);
  EXPECT_GE(g.tflops / g.peak_tflops, 0.75);
}

TEST(Efficiency, DefaultTextStatesGemmRateAndTheFusableAdd) {
  const Trace t = load(kTorchShapes);
  const Diagnosis d = diagnose(t);
  const std::string text = format_diagnosis_text(t, d, DiagnoseFormat{});
  EXPECT_NE(text.find("GEMM 84.6% of GPU time at 813 TFLOP/s (82.2% of the H100 SXM's dense bf16 peak)"),
            std::string::npos)
      << text;
  const Finding* add = find(d, "memory_bound_elementwise");
  ASSERT_NE(add, nullptr);
  // 3 × 4096² × 2 bytes in 29.85 us: the HBM ceiling (3.35 TB/s).
  EXPECT_NE(add->title.find("of the H100 SXM's HBM bandwidth, at the ceiling"), std::string::npos) << add->title;
  EXPECT_NE(text.find("Memory-bound elementwise kernel vectorized_elementwise_kernel<8, CUDAFunctor_add<BFloat16>>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fusable"), std::string::npos);
  EXPECT_NE(text.find("fix (up to 29.8 us a step): Fuse aten::add"), std::string::npos) << text;
  // Efficient math: not told "usually what you want", not told to fuse as a verdict.
  EXPECT_EQ(text.find("usually what you want"), std::string::npos);
}

TEST(Efficiency, UnknownDeviceNoShareOfPeak) {
  // tprof's own capture at commit 6c32929 wrote no deviceProperties.
  const Trace t = load("gpu/h100-tprof/4096_bf16_warm_eager.json");
  const internal::DiagnoseContext c(t);
  const internal::Efficiency& e = c.efficiency();
  EXPECT_EQ(e.peak, nullptr);
  EXPECT_TRUE(e.device_name.empty());
  const std::string mix = internal::efficiency_text(e);
  EXPECT_NE(mix.find("(no deviceProperties in the trace: no peak to compare with)"), std::string::npos) << mix;
  // The custom add kernel is elementwise by its op (op::add), not a GEMM by
  // its namespace (matmul_add::).
  for (const internal::KernelEfficiency& k : e.kernels) {
    if (k.name.find("add_kernel") != std::string::npos) EXPECT_EQ(k.cls, KernelClass::kElementwise);
  }
  const Diagnosis d = diagnose(t);
  const Finding* add = find(d, "memory_bound_elementwise");
  ASSERT_NE(add, nullptr);
  EXPECT_NE(add->title.find("no peak to compare with"), std::string::npos) << add->title;
}

TEST(Efficiency, CommunicationIsNeverGemm) {
  // HTA's sampled NCCL rank: its collectives are communication.
  const Trace t = load("public/hta/trace_filter/sampled_rank-0.json.gz");
  const internal::DiagnoseContext c(t);
  for (const internal::KernelEfficiency& k : c.efficiency().kernels) {
    if (k.name.find("nccl") != std::string::npos) EXPECT_EQ(k.cls, KernelClass::kComm) << k.name;
  }
}

}  // namespace
}  // namespace tprof
