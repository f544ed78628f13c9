// The kernel-class table (src/causal/kernel_classes.h): real kernel names
// of each vendor and compiler, taken from the traces under tests/data, get
// their class; a sort is never a GEMM; docs/diagnose.md lists every family
// the table holds; on real traces the classes and the rules that read them
// (hotspot, compute_bound) say what the table recognised, and nothing of a
// class it did not.
#include "src/causal/kernel_classes.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "src/analyze/diagnose_context.h"
#include "src/analyze/efficiency.h"
#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

using internal::classify_kernel;
using internal::KernelClass;

Trace load(const std::string& rel) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + rel);
  EXPECT_TRUE(t.has_value()) << rel;
  return std::move(*t);
}

KernelClass cls(std::string_view kernel, std::string_view op = "") { return classify_kernel(kernel, op).cls; }

TEST(KernelClasses, NamesOfEachVendorAndCompiler) {
  // MI300X (tests/data/public/tracelens/mi300, inference/sglang_decode):
  // Tensile, AOTriton, paged attention with ck_tile and mfma in its name,
  // aiter's RMSNorm, sglang's activation, MIOpen's convolution and layout.
  EXPECT_EQ(cls("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1"),
            KernelClass::kGemm);
  EXPECT_EQ(cls("attn_fwd"), KernelClass::kAttention);
  EXPECT_EQ(cls("void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16, __hip_bfloat16, "
                "(vllm::Fp8KVCacheDataType)0, 1, 128, 256, false, 4, 1, ck_tile::ComposedAttention<0u, false> >"
                "(__hip_bfloat16 const*)"),
            KernelClass::kAttention);
  EXPECT_EQ(cls("void paged_attention_ll4mi_reduce_kernel<__hip_bfloat16, __hip_bfloat16, 128, 128, 256, 3, false>"
                "(__hip_bfloat16*, float const*)"),
            KernelClass::kAttention);
  EXPECT_EQ(cls("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb1ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib"),
            KernelClass::kReduction);
  EXPECT_EQ(cls("_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i"),
            KernelClass::kElementwise);
  EXPECT_EQ(cls("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt64x64x16_wt16x16x4_ws1x1_wr2x2_ta1x1x4x1_1x16x1x16_tb1x1x4x1_1x16x1x16_me"),
            KernelClass::kConv);
  EXPECT_EQ(cls("batched_transpose_256x4_half", "aten::miopen_convolution"), KernelClass::kCopy);
  EXPECT_EQ(cls("void (anonymous namespace)::store_kvcache<2048l, 4, false, long>((anonymous namespace)::StoreKVCacheParams)"),
            KernelClass::kCopy);
  // vLLM's Marlin (issue 38's twelfth round: a gpt-oss-20b decode on an
  // RTX 3090, 50.3% of its GPU time "other"): 4-bit-weight MoE and dense
  // GEMMs.
  EXPECT_EQ(cls("Marlin<true, 4, 2, false>"), KernelClass::kGemm);
  EXPECT_EQ(cls("void marlin_moe_wna16::Marlin<(vllm::ScalarType::Id)5, 256, 1, 8, 8, 4, false, true, 4, false>(int4 const*)"),
            KernelClass::kGemm);
  // H100 (tests/data/public/tracelens/h100): CUTLASS by its template
  // argument, cuBLAS's sm90_xmma, FlashAttention with cutlass types, a
  // cuDNN/CUTLASS convolution, cuDNN's layout conversion, cuBLAS's GEMV.
  EXPECT_EQ(cls("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64_64x6_tn_align8>"
                "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64_64x6_tn_align8::Params)"),
            KernelClass::kGemm);
  EXPECT_EQ(cls("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_"
                "kernel__5x_cublas"),
            KernelClass::kGemm);
  EXPECT_EQ(cls("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
                "false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >"
                ", false, false, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)"),
            KernelClass::kAttention);
  EXPECT_EQ(cls("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>"
                "(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)"),
            KernelClass::kConv);
  EXPECT_EQ(cls("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true, "
                "(cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<float>)"),
            KernelClass::kCopy);
  EXPECT_EQ(cls("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, "
                "__nv_bfloat16, float, false, true, true, false, 7, false, cublasGemvParamsEx<int> >(cublasGemvParamsEx)"),
            KernelClass::kGemm);
  EXPECT_EQ(cls("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
                "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)"),
            KernelClass::kReduction);
  // Inductor (tests/data/public/tracelens/torch_compile_triton).
  EXPECT_EQ(cls("triton_poi_fused__unsafe_view_mul_silu_2"), KernelClass::kElementwise);
  EXPECT_EQ(cls("triton_red_fused_add_mean_mul_pow_rsqrt_0"), KernelClass::kReduction);
  // cub's scan (tests/data/public/hta/trace_filter).
  EXPECT_EQ(cls("void at_cuda_detail::cub::DeviceScanKernel<at_cuda_detail::cub::AgentScanPolicy<128, 15, long, "
                "(at_cuda_detail::cub::BlockLoadAlgorithm)3> >(long*, long*)"),
            KernelClass::kSortScan);
  // NCCL.
  EXPECT_EQ(cls("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"), KernelClass::kComm);
  EXPECT_TRUE(internal::is_comm_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
  EXPECT_FALSE(internal::is_comm_kernel("void at::native::reduce_kernel<512, 1>"));
  // RCCL's kernel as ROCm's trace names it, with its return type, and the
  // serving engines' custom all-reduce: communication for diagnose as in
  // the class shares (issue 38's twenty-second round: SGLang's DeepSeek-R1
  // on an MI325X, "no collective ran on the device" beside "communication
  // 23.4%").
  EXPECT_TRUE(internal::is_comm_kernel("void rcclGenericKernel<2, false>(ncclDevKernelArgsStorage<4096ul>)"));
  EXPECT_EQ(cls("void rcclGenericKernel<2, false>(ncclDevKernelArgsStorage<4096ul>)"), KernelClass::kComm);
  EXPECT_TRUE(internal::is_comm_kernel(
      "void sglang::cross_device_reduce_1stage<__hip_bfloat16, 8>(sglang::RankData*, sglang::RankSignals, int, int)"));
  EXPECT_FALSE(internal::is_comm_kernel("void at::native::(anonymous namespace)::CatArrayBatchedCopy<int, 4>(int*)"));
  // MSCCL++ (issue 38's thirteenth round: its wait_kernel, spinning until
  // the peer signals, was a hotspot sent to Nsight Compute).
  EXPECT_TRUE(internal::is_comm_kernel("(anonymous namespace)::wait_kernel(mscclpp::MemoryChannelDeviceHandle)"));
  EXPECT_TRUE(internal::is_comm_kernel(
      "(anonymous namespace)::put_and_signal_kernel(mscclpp::MemoryChannelDeviceHandle, unsigned long, unsigned long)"));
  EXPECT_EQ(cls("(anonymous namespace)::wait_kernel(mscclpp::MemoryChannelDeviceHandle)"), KernelClass::kComm);
  // DeepEP's low-latency all-to-all (issue 38's eighteenth round: a MoE
  // decode's combine and dispatch, 55% of its GPU time, not recognised).
  EXPECT_TRUE(internal::is_comm_kernel(
      "void deep_ep::internode_ll::combine<3, 10, 7168, 9>(void*, void*, int*, void*, void const*, long const*, float "
      "const*, int const*, long const*, int*, int, int*, int, int, int, int, int, int, int, int, bool)"));
  EXPECT_EQ(cls("void deep_ep::internode_ll::dispatch<true, 3, 10, 7168>(void*, float*, int*, long*, int*)"),
            KernelClass::kComm);
  // DeepSeek's build of DeepEP, namespace dpsk::ep (its published DualPipe
  // profile, deepseek-ai/profile-data train.json; issue 38's nineteenth
  // round: combine and cached_notify were "not recognised").
  EXPECT_TRUE(internal::is_comm_kernel(
      "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*, float*, bool const*, int4 const*)"));
  EXPECT_EQ(cls("void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*, int, int, int const*)"),
            KernelClass::kComm);
  // An Inductor kernel is what its prefix says, whatever ops its name lists
  // and whatever op the trace records for its launch (its own name):
  // modded-nanogpt's FP8 cast for a _scaled_mm (issue 38's nineteenth round:
  // counted as GEMM through its op).
  constexpr const char* kFp8Cast = "triton_poi_fused__scaled_mm__to_copy_clone_div_lift_fresh_permute_0";
  EXPECT_EQ(cls(kFp8Cast, kFp8Cast), KernelClass::kElementwise);
  EXPECT_EQ(cls("triton_red_fused_mm_sum_3", "triton_red_fused_mm_sum_3"), KernelClass::kReduction);
  // A namespace never makes an add a GEMM; its op does not either when its
  // own name says what it is.
  EXPECT_EQ(cls("void matmul_add::add_kernel<__nv_bfloat16>(__nv_bfloat16*)"), KernelClass::kOther);
  EXPECT_EQ(cls("void matmul_add::add_kernel<__nv_bfloat16>(__nv_bfloat16*)", "op::add"), KernelClass::kElementwise);
}

TEST(KernelClasses, AGemmAConvolutionLaunchedIsConvolution) {
  // cuDNN runs a convolution as an implicit or Winograd GEMM under sgemm
  // names (a T4 VGG-16's volta_sgemm_128x64_nn inside aten::cudnn_convolution,
  // issue 38's third review round): the op says what the work is.
  const char* sgemm = "volta_sgemm_128x64_nn";
  EXPECT_EQ(cls(sgemm), KernelClass::kGemm);
  EXPECT_EQ(cls(sgemm, "aten::cudnn_convolution"), KernelClass::kConv);
  EXPECT_EQ(cls(sgemm, "aten::miopen_convolution"), KernelClass::kConv);
  EXPECT_EQ(cls(sgemm, "aten::addmm"), KernelClass::kGemm);
  // A layout conversion inside the convolution stays a copy.
  EXPECT_EQ(cls("batched_transpose_256x4_half", "aten::miopen_convolution"), KernelClass::kCopy);
}

TEST(KernelClasses, CudnnSgemmsOnTheResnet50SampleAreConvolution) {
  // The TensorBoard plugin's ResNet-50 sample (V100): cuDNN's
  // volta_sgemm_64x64_nt inside aten::cudnn_convolution.
  const Trace t = load("public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.excerpt.pt.trace.json.gz");
  const internal::DiagnoseContext c(t);
  int conv_sgemms = 0;
  for (const internal::KernelEfficiency& k : c.efficiency().kernels) {
    if (k.name.find("sgemm") == std::string::npos) continue;
    if (k.op.find("convolution") != std::string::npos) {
      EXPECT_EQ(k.cls, KernelClass::kConv) << k.name << " in " << k.op;
      ++conv_sgemms;
    }
  }
  EXPECT_GT(conv_sgemms, 0);
}

TEST(KernelClasses, ASortIsNeverAGemm) {
  // PyTorch's sort kernels (aten/src/ATen/native/cuda/Sort.cu, SortImpl),
  // whatever op launched them: their own name decides.
  for (const char* op : {"", "aten::sort", "aten::mm", "aten::linear", "aten::topk"}) {
    EXPECT_EQ(cls("void at::native::bitonicSortKVInPlace<-2, -1, 16, 16, float, long, at::native::LTOp<float, true>, "
                  "unsigned int>(at::cuda::detail::TensorInfo<float, unsigned int>, unsigned int)",
                  op),
              KernelClass::kSortScan)
        << op;
    EXPECT_EQ(cls("void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<at_cuda_detail::cub::DeviceRadixSortPolicy"
                  "<float, long, unsigned int>::Policy800, false, float, long>(unsigned int*)",
                  op),
              KernelClass::kSortScan)
        << op;
  }
}

TEST(KernelClasses, TheDocsListEveryFamily) {
  std::ifstream in(std::string(TPROF_TEST_DATA) + "/../../docs/diagnose.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  ASSERT_FALSE(doc.empty());
  const std::string section = doc.substr(doc.find("## Kernel classes"));
  std::set<int> classes;
  for (const internal::KernelFamily& f : internal::kernel_families()) {
    EXPECT_NE(section.find(std::string(f.family)), std::string::npos) << f.family;
    EXPECT_NE(section.find("`" + std::string(f.pattern) + "`"), std::string::npos) << f.pattern;
    EXPECT_FALSE(f.pattern.empty());
    for (const char ch : f.pattern) EXPECT_FALSE(ch >= 'A' && ch <= 'Z') << f.pattern;
    classes.insert(static_cast<int>(f.cls));
  }
  // Every class but "other" has a row.
  EXPECT_EQ(classes.size(), static_cast<std::size_t>(internal::kKernelClassCount - 1));
}

TEST(KernelClasses, TensileGemmsOnTheMi250ToyTrainer) {
  // HTA's MI250 trace (ROCm 6.2): Tensile's Cijk_ GEMMs, recognised by name.
  const Trace t = load("public/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz");
  const internal::DiagnoseContext c(t);
  const internal::Efficiency& e = c.efficiency();
  std::int64_t cijk_ns = 0;
  for (const internal::KernelEfficiency& k : e.kernels) {
    if (k.name.starts_with("Cijk_")) {
      EXPECT_EQ(k.cls, KernelClass::kGemm) << k.name;
      cijk_ns += k.time_ns;
    }
  }
  ASSERT_GT(cijk_ns, 0);
  EXPECT_GE(e.class_ns[static_cast<std::size_t>(KernelClass::kGemm)], cijk_ns);
}

TEST(KernelClasses, OtherIsReportedWithItsShare) {
  // The MI210 GPU-only trace (no ops): MIOpen's and PyTorch's kernels by
  // name; what no row recognises is "other (not recognised)" with its share.
  const Trace t = load("public/tracelens/mi210/gpu_only_trace/gpu_only_trace.json.gz");
  const internal::DiagnoseContext c(t);
  const internal::Efficiency& e = c.efficiency();
  EXPECT_GT(e.share(KernelClass::kConv), 0.2);
  const std::string text = internal::efficiency_text(e);
  if (e.share(KernelClass::kOther) >= 0.05) {
    EXPECT_NE(text.find("other (not recognised)"), std::string::npos) << text;
  } else {
    EXPECT_EQ(text.find("other"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace tprof

namespace tprof {
namespace {

// A trace whose one kernel holds all the GPU time: a 2 ms `kernel` launched
// by `op` through cudaLaunchKernel (External id 1, correlation 7), on an
// H100 (deviceProperties), the host busy for far less.
std::string one_kernel_trace(const std::string& kernel, const std::string& op) {
  return R"({"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0,
    "totalGlobalMem": 85045149696, "numSms": 132}],
  "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": ")" + op + R"(", "pid": 1, "tid": 1, "ts": 100, "dur": 20, "args": {"External id": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 105, "dur": 10,
   "args": {"External id": 1, "correlation": 7}},
  {"ph": "X", "cat": "kernel", "name": ")" + kernel + R"(", "pid": 0, "tid": 7, "ts": 120, "dur": 2000,
   "args": {"External id": 1, "correlation": 7, "device": 0, "stream": 7}},
  {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 120, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 105, "cat": "ac2g", "name": "ac2g"}
  ]})";
}

const Finding* hotspot_of(const Diagnosis& d) {
  for (const Finding& f : d.findings) {
    if (f.id == "hotspot") return &f;
  }
  return nullptr;
}

TEST(KernelClasses, HotspotGivesNoGemmAdviceToASort) {
  const std::string sort = "void at::native::bitonicSortKVInPlace<-2, -1, 16, 16, float, long, "
                           "at::native::LTOp<float, true>, unsigned int>(at::cuda::detail::TensorInfo<float, "
                           "unsigned int>, unsigned int)";
  Result<Trace> t = read_trace_bytes(one_kernel_trace(sort, "aten::sort"));
  ASSERT_TRUE(t.has_value());
  const Diagnosis d = diagnose(*t);
  const Finding* f = hotspot_of(d);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->advice.find("a sort/scan kernel"), std::string::npos) << f->advice;
  for (const char* gemm : {"TFLOP/s", "tile", "tensor cores", "dtype", "MoE", "fuse"}) {
    EXPECT_EQ(f->advice.find(gemm), std::string::npos) << gemm << ": " << f->advice;
  }
}

TEST(KernelClasses, HotspotGivesNoClassAdviceToAnUnrecognisedKernel) {
  // A fused Triton kernel the table does not know: not told it is a MoE GEMM
  // nor to fuse; told where the time goes and how to see what limits it.
  Result<Trace> t = read_trace_bytes(one_kernel_trace("_kernel_unified_fused_stage1", "vllm::unknown_op"));
  ASSERT_TRUE(t.has_value());
  const Diagnosis d = diagnose(*t);
  const Finding* f = hotspot_of(d);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f->advice.find("not in tprof's kernel-class table"), std::string::npos) << f->advice;
  EXPECT_EQ(f->advice.find("MoE"), std::string::npos) << f->advice;
  EXPECT_EQ(f->advice.find("TFLOP/s"), std::string::npos) << f->advice;
  // A GEMM kernel under the same conditions does get GEMM advice.
  Result<Trace> g = read_trace_bytes(one_kernel_trace("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT", "aten::mm"));
  ASSERT_TRUE(g.has_value());
  const Diagnosis dg = diagnose(*g);  // the finding lives in it
  const Finding* gf = hotspot_of(dg);
  ASSERT_NE(gf, nullptr);
  EXPECT_NE(gf->advice.find("half precision"), std::string::npos) << gf->advice;
}

TEST(KernelClasses, SpyreCompiledMatrixProductsAreGemms) {
  // IBM Spyre's compiled kernels carry their path and the fused ops: a
  // matrix product with its SiLU epilogue is a GEMM, not elementwise.
  for (const char* n : {"/tmp/bench/inductor-cache/inductor-spyre/sdsc_fused_bmm_mul_silu_0_ym",
                        "/tmp/bench/inductor-cache/inductor-spyre/sdsc_fused_mm_mul_silu_0_ab",
                        "/tmp/bench/inductor-cache/inductor-spyre/sdsc_fused_bmm_1_kypoozpt/bu"}) {
    EXPECT_EQ(internal::match_kernel_name(n).cls, KernelClass::kGemm) << n;
  }
}

}  // namespace
}  // namespace tprof
