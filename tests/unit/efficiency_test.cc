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
  EXPECT_NE(text.find("GEMM 84.6% of GPU time at 813 TFLOP/s (82.2% of the H100 SXM's dense bf16 peak, measured on all of "
                      "it)"),
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
  EXPECT_NE(mix.find("(no deviceProperties in the trace: no peak to compare with, measured on all of it)"), std::string::npos) << mix;
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

// fp32_math (src/analyze/rules/fp32_math.cc): fp32 GEMM/conv kernels on a
// GPU whose tensor cores would take them.

// HTA's alexnet on an A100 (sm80): cuBLAS's ampere_sgemm and cuDNN's
// scudnn run fp32 on the CUDA cores, next to a TF32 xmma conv.
constexpr const char* kA100Alexnet =
    "public/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz";
// The TensorBoard plugin's resnet50 sample on a V100 (sm70: fp16 tensor
// cores only), Input type float.
constexpr const char* kV100Resnet =
    "public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.excerpt.pt.trace.json.gz";

double real_field(const Finding& f, std::string_view key) {
  const Evidence::Field* e = f.evidence.find(key);
  return e != nullptr ? e->d : -1;
}

TEST(Fp32Math, A100AlexnetTf32OrBf16OnTheSgemmAndScudnnKernels) {
  const Trace t = load(kA100Alexnet);
  const internal::TensorCores tc = internal::tensor_cores(t);
  EXPECT_TRUE(tc.known && tc.tf32 && tc.bf16 && !tc.amd);
  const Diagnosis d = diagnose(t);
  const Finding* f = find(d, "fp32_math");
  ASSERT_NE(f, nullptr);
  // 2.621 ms of ampere_sgemm + 2.069 ms of scudnn + 1.203 ms of the FFT
  // convolution's ampere_gcgemm of 10.42 ms of compute kernels (cuDNN's
  // layout conversions are copies: no math to move); the TF32 xmma conv
  // (1.814 ms) is already on the tensor cores.
  EXPECT_NE(f->title.find("on the NVIDIA A100-PG509-200 (sm80): 56.6% of compute kernel time (5.893 ms, 8.9% of GPU time)"),
            std::string::npos)
      << f->title;
  EXPECT_EQ(f->title.find("xmma"), std::string::npos) << f->title;
  EXPECT_EQ(f->severity, FindingSeverity::kInfo);  // 8.9% of device time: pageable copies hold 84%
  // autocast (bf16) is the fix, TF32 the cheap one, each with its gain at
  // most: the peak table's ratio to fp32 (A100: 312 and 156 vs 19.5).
  EXPECT_TRUE(f->advice.starts_with(
      "Put the fp32 math on the tensor cores: torch.autocast(\"cuda\", dtype=torch.bfloat16) around the forward "
      "(bf16: up to 16x the fp32 peak on the A100 40GB, 312 vs 19.5 TFLOP/s); or, the cheap fix for the matmuls "
      "alone, torch.backends.cuda.matmul.allow_tf32 = True (torch.set_float32_matmul_precision(\"high\")) (TF32: "
      "up to 8x, 156 TFLOP/s)"))
      << f->advice;
  EXPECT_EQ(f->impact_ns, 5'893'000 / 2);
}

TEST(Fp32Math, V100ResnetFp16AutocastWithGradScaler) {
  const Trace t = load(kV100Resnet);
  const Diagnosis d = diagnose(t);
  const Finding* f = find(d, "fp32_math");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, FindingSeverity::kWarning);
  // With cuDNN's fp32 Winograd transforms (71.2% on sgemm/scudnn names alone).
  EXPECT_NEAR(real_field(*f, "kernel_time_pct"), 81.0, 0.1);
  EXPECT_TRUE(f->advice.starts_with("Put the fp32 math on the tensor cores: torch.autocast(\"cuda\", "
                                    "dtype=torch.float16) around the forward, with torch.cuda.amp.GradScaler() for "
                                    "training (torch.amp.GradScaler(\"cuda\") from PyTorch 2.3)"))
      << f->advice;
  // Named by the conv ops that launched them; no bf16 or TF32 on sm70.
  EXPECT_NE(f->advice.find("aten::cudnn_convolution_backward_weight"), std::string::npos) << f->advice;
  EXPECT_EQ(f->advice.find("bfloat16"), std::string::npos);
  EXPECT_EQ(f->advice.find("set_float32_matmul_precision"), std::string::npos);
  EXPECT_EQ(f->advice.find("allow_tf32 = True"), std::string::npos);
  EXPECT_EQ(f->advice.find("up to"), std::string::npos);  // no TF32 or bf16 gain to state
}

// An fp32 GEMM loop on a GeForce RTX 3060 (sm86): its dense TF32 rate is
// about its fp32 peak, so TF32 is no cheap fix there (issue 38, fifth
// round: "TF32 sold as a cheap speed-up on GeForce Ampere"); autocast stays.
TEST(Fp32Math, NoTf32AdviceOnGeForceAmpere) {
  auto trace_on = [](const std::string& device, int minor, int major = 8) {
    std::string ev;
    for (int i = 0; i < 4; ++i) {
      const std::string t0 = std::to_string(1000 * i), corr = std::to_string(i + 1);
      ev += R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": )" + t0 +
            R"(, "dur": 20, "args": {"Input type": ["float", "float"]}},)";
      ev += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" + t0 +
            R"(, "dur": 10, "args": {"correlation": )" + corr + "}},";
      ev += R"({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": )" +
            std::to_string(1000 * i + 15) + R"(, "dur": 900, "args": {"device": 0, "stream": 7, "correlation": )" +
            corr + "}}" + (i < 3 ? "," : "");
    }
    const std::string json = R"({"deviceProperties": [{"id": 0, "name": ")" + device +
                             R"(", "computeMajor": )" + std::to_string(major) + R"(, "computeMinor": )" + std::to_string(minor) +
                             R"(}], "traceEvents": [)" + ev + "]}";
    Result<Trace> t = read_trace_bytes(json, "sgemm.json");
    EXPECT_TRUE(t.has_value());
    return std::move(t).value();
  };
  const Diagnosis geforce = diagnose(trace_on("NVIDIA GeForce RTX 3060", 6));
  const Finding* f = find(geforce, "fp32_math");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->advice.starts_with("Put the fp32 math on the tensor cores: torch.autocast(\"cuda\", "
                                    "dtype=torch.bfloat16) around the forward"))
      << f->advice;
  EXPECT_EQ(f->advice.find("allow_tf32 = True"), std::string::npos) << f->advice;
  EXPECT_NE(f->advice.find("TF32 gains little on this GPU"), std::string::npos) << f->advice;
  // GeForce Blackwell (sm120) likewise (issue 38, sixth round: an RTX 5060
  // Laptop GPU was given the TF32 cheap fix).
  const Diagnosis blackwell = diagnose(trace_on("NVIDIA GeForce RTX 5060 Laptop GPU", 0, 12));
  const Finding* b = find(blackwell, "fp32_math");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->advice.find("allow_tf32 = True"), std::string::npos) << b->advice;
  EXPECT_NE(b->advice.find("TF32 gains little on this GPU"), std::string::npos) << b->advice;
  // The same loop on an A100 (sm80) keeps TF32 as the cheap fix.
  const Diagnosis a100 = diagnose(trace_on("NVIDIA A100-SXM4-40GB", 0));
  const Finding* g = find(a100, "fp32_math");
  ASSERT_NE(g, nullptr);
  EXPECT_NE(g->advice.find("allow_tf32 = True"), std::string::npos) << g->advice;
  // On a T4 (sm75: fp16 tensor cores only) a forward with no backward is
  // not told to scale gradients (issue 38's fourteenth round: a ViT
  // inference run was given GradScaler); a training run keeps it (the V100
  // ResNet above).
  const Diagnosis t4 = diagnose(trace_on("Tesla T4", 5, 7));
  const Finding* h = find(t4, "fp32_math");
  ASSERT_NE(h, nullptr);
  EXPECT_TRUE(h->advice.starts_with("Put the fp32 math on the tensor cores: torch.autocast(\"cuda\", "
                                    "dtype=torch.float16) around the forward;"))
      << h->advice;
  EXPECT_EQ(h->advice.find("GradScaler"), std::string::npos) << h->advice;
}

// Issue 38's fourteenth round: a T4 ViT inference step, 27 of its 88 ms a
// cold launch loading its module, the GPU busy 40% of the rest, was
// promised "up to 11.579 ms a step" from faster GEMMs. The initialisation is
// start-up: left out, the rest of the window still decides. PARAM's linear
// replay: 60% of its idle time blocked in initialisation, the GPU busy
// 36.8% after it: the host sets the pace, faster kernels save nothing.
TEST(Fp32Math, NoSavingWhereTheHostPacesTheRestOfAColdRun) {
  const Trace t = load("public/param/et_replay/tests/inputs/linear_kineto.json.gz");
  const Diagnosis d = diagnose(t);
  const Finding* f = find(d, "fp32_math");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->impact_ns, 0);
  EXPECT_TRUE(f->advice.starts_with("Not a saving while the GPU idles")) << f->advice;
}

TEST(Fp32Math, SilentOnBf16H100AndCpuOnly) {
  for (const char* rel : {kTorchShapes, "gpu/h100-torch-2.11/64_bf16_warm_eager.json",
                          "gpu/h100-torch-2.11/4096_bf16_warm_compile.json",
                          "public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"}) {
    const Trace t = load(rel);
    EXPECT_EQ(find(diagnose(t), "fp32_math"), nullptr) << rel;
  }
}

TEST(Fp32Math, TensorCoreKernelNamesAreNotFp32Math) {
  // Kernel names from HTA's trace_diff pair (A100, TF32 tensor ops next to
  // ampere_sgemm) and the alexnet trace.
  auto kernel = [](std::string name) {
    internal::KernelEfficiency k;
    k.name = std::move(name);
    k.cls = KernelClass::kGemm;
    return k;
  };
  using internal::Fp32Math;
  EXPECT_EQ(internal::fp32_math(kernel("ampere_sgemm_128x128_tn")), Fp32Math::kByName);
  EXPECT_EQ(internal::fp32_math(kernel("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>("
                                       "cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1::Params)")),
            Fp32Math::kNo);
  EXPECT_EQ(internal::fp32_math(kernel("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw")),
            Fp32Math::kNo);
  EXPECT_EQ(internal::fp32_math(kernel("ampere_gcgemm_64x64_nt")), Fp32Math::kNo);  // no convolution around it
  // cuDNN's backward-data algorithm 1 beside its dgrad_engine (a T4
  // ResNet-50's 1.009 ms kernel left out; issue 38's fifteenth round).
  EXPECT_EQ(internal::fp32_math(kernel("void cudnn::detail::dgrad_alg1_engine<float, 128, 5, 5, 3, 3, 3, false, true>("
                                       "int, int, int, float const*, int, float const*, int, float*, kernel_grad_params, "
                                       "unsigned long long, int, float, int)")),
            Fp32Math::kByName);
  EXPECT_EQ(internal::fp32_math(kernel("void cudnn::detail::dgrad_alg1_engine<__half, 128, 5, 5, 3, 3, 3, false, true>("
                                       "int)")),
            Fp32Math::kNo);
  // FFT convolution inside a convolution op: its complex GEMM and float
  // transforms are the convolution's fp32 time (a T4 ResNet-18: 7.8 ms of
  // volta_gcgemm and 8.1 ms of fft2d; issue 38's thirteenth round).
  internal::KernelEfficiency gc = kernel("volta_gcgemm_64x32_nt");
  gc.op = "aten::cudnn_convolution";
  EXPECT_EQ(internal::fp32_math(gc), Fp32Math::kByName);
  internal::KernelEfficiency fft = kernel("void fft2d_r2c_32x32<float, true, 0u, false>(float2*, float const*, int)");
  fft.cls = KernelClass::kOther;
  fft.op = "aten::convolution_backward";
  EXPECT_EQ(internal::fp32_math(fft), Fp32Math::kByName);
  fft.op = "aten::fft_rfft";
  EXPECT_EQ(internal::fp32_math(fft), Fp32Math::kNo);  // torch.fft's own transform: no convolution to move
  // cuDNN's Winograd transforms and implicit GEMM on float templates (a T4
  // ResNet-18: 68.5% of its kernel time fp32 convolution, "39.9%" without
  // them; issue 38's thirteenth round).
  EXPECT_EQ(internal::fp32_math(kernel("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>("
                                       "cudnn::winograd_nonfused::WinogradDataParams<float, float>)")),
            Fp32Math::kByName);
  EXPECT_EQ(internal::fp32_math(kernel("void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, "
                                       "false, true>(int, int, int, float const*, int, float*, float const*)")),
            Fp32Math::kByName);
  EXPECT_EQ(internal::fp32_math(kernel("void cudnn::winograd_nonfused::winogradForwardData4x4<__half, __half>("
                                       "cudnn::winograd_nonfused::WinogradDataParams<__half, __half>)")),
            Fp32Math::kNo);
  // cuBLAS's SIMT kernels on sm90 carry xmma and ffma: fp32 on the CUDA
  // cores (a GH200 fp32 TransformerEncoder); CUTLASS's simt likewise. A
  // TF32 or 16-bit operand keeps a kernel on the tensor cores.
  EXPECT_EQ(internal::fp32_math(kernel("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_"
                                       "ffma_aligna4_alignc4_execute_kernel__51a_cublas")),
            Fp32Math::kByName);
  EXPECT_EQ(internal::fp32_math(kernel("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>("
                                       "cutlass_80_simt_sgemm_128x64_8x5_nn_align1::Params)")),
            Fp32Math::kByName);
  EXPECT_EQ(internal::fp32_math(kernel("sm90_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_"
                                       "execute_segment_k_off_kernel__5x_cublas")),
            Fp32Math::kNo);
  // The op's float type alone needs a library GEMM name without a tensor-core mark.
  internal::KernelEfficiency by_op = kernel("gemm_kernel_unknown");
  by_op.dtype = "fp32";
  by_op.dtype_from_op = true;
  EXPECT_EQ(internal::fp32_math(by_op), Fp32Math::kByOpType);
  by_op.name = "nvjet_tst_128x64_64x8_1x2_h_bz_TNT";
  EXPECT_EQ(internal::fp32_math(by_op), Fp32Math::kNo);
}

// compute_bound's impact is a saving, not the state's size: the blog's
// efficient bf16 GEMMs (82% of peak) save nothing by being "compute-bound".
TEST(ComputeBound, EfficientGemmsClaimNoSaving) {
  const Trace t = load(kTorchShapes);
  const Diagnosis d = diagnose(t);
  const Finding* f = find(d, "compute_bound");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->impact_ns, 0);
  const std::string text = format_diagnosis_text(t, d, DiagnoseFormat{});
  EXPECT_EQ(text.find("fix (up to 192.8 us a step)"), std::string::npos) << text;
}

// A fill writes its tensor and reads none (its first input is the tensor
// it overwrites): on HTA's MI250 run (record_shapes) the fills must not be
// counted as reading it too, which doubled their rate.
TEST(Efficiency, FillsOnlyWrite) {
  EXPECT_TRUE(internal::write_only_op("aten::fill_"));
  EXPECT_TRUE(internal::write_only_op("aten::zero_"));
  EXPECT_FALSE(internal::write_only_op("aten::add_"));
  const Trace t = load("public/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
  internal::DiagnoseContext c(t);
  int fills = 0;
  for (const internal::KernelEfficiency& k : c.efficiency().kernels) {
    if (!internal::write_only_op(k.op) || k.sized_count == 0) continue;
    ++fills;
    // aten::fill_ of a [5, 128] float tensor (Input Dims [[5, 128], []]):
    // 640 elements written, 2,560 bytes; read and written it was 5,120.
    EXPECT_EQ(k.op, "aten::fill_");
    EXPECT_EQ(k.sized_count, 1);
    EXPECT_DOUBLE_EQ(k.bytes, 5 * 128 * 4);
  }
  EXPECT_EQ(fills, 1);
}

// Elementwise kernels holding the GPU while moving a few percent of its
// bandwidth: nine float adds of 1024 x 1024 (12.6 MB each way and back) at
// 120 us on an H100 (3.35 TB/s) move 105 GB/s, 3.1%: "GPU-bound on
// elementwise and reduction kernels far below the memory ceiling", not
// memory-bound (issue 38, fifth round).
TEST(ComputeBound, ElementwiseFarBelowTheCeilingIsNotCalledMemoryBound) {
  std::string ev = R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1200},)";
  for (int i = 0; i < 9; ++i) {
    const std::string t0 = std::to_string(10 + 12 * i), corr = std::to_string(100 + i);
    ev += R"({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": )" + t0 +
          R"(, "dur": 10, "args": {"Input Dims": [[1024, 1024], [1024, 1024], []], "Input type": ["float", "float", "Scalar"]}},)";
    ev += R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" + t0 +
          R"(, "dur": 5, "args": {"correlation": )" + corr + "}},";
    ev += R"({"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "pid": 0, "tid": 7, "ts": )" +
          std::to_string(120 + 120 * i) + R"(, "dur": 120, "args": {"device": 0, "stream": 7, "correlation": )" + corr +
          "}}" + (i < 8 ? "," : "");
  }
  Result<Trace> t = read_trace_bytes(R"({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0}], "traceEvents": [)" +
                                         ev + "]}",
                                     "adds.json");
  ASSERT_TRUE(t) << t.error().to_string();
  const Diagnosis d = diagnose(*t);
  const Finding* f = find(d, "compute_bound");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->title.starts_with("GPU-bound on elementwise and reduction kernels far below the memory ceiling")) << f->title;
  const Evidence::Field* pct = f->evidence.find("memory_bound_pct_of_peak");
  ASSERT_NE(pct, nullptr);
  EXPECT_NEAR(pct->d, 100.0 * (3.0 * 1024 * 1024 * 4 / 120e3) / 3350, 0.01);
  EXPECT_NE(f->advice.find("far below the ceiling, so their time is not the traffic alone"), std::string::npos) << f->advice;
  EXPECT_EQ(f->advice.find("whose time is memory traffic"), std::string::npos) << f->advice;
}

}  // namespace
}  // namespace tprof
