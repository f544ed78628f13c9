// The kernel-class table (kernel_classes.h). Its rows are listed, in this
// order, in docs/diagnose.md ("Kernel classes"); a new family is a new row
// there and here, with a real kernel name in tests/unit/kernel_classes_test.cc.
#include "src/causal/kernel_classes.h"

#include <array>

#include "src/base/ascii.h"
#include "src/causal/names.h"

namespace tprof::internal {
namespace {

using C = KernelClass;
constexpr MatchOn kName = MatchOn::kName;
constexpr MatchOn kOp = MatchOn::kOp;
constexpr MatchHow kHas = MatchHow::kContains;
constexpr MatchHow kStarts = MatchHow::kPrefix;
constexpr MatchHow kIs = MatchHow::kBase;

// Order matters where families share words: collectives first (a
// reduce_scatter is no reduction); attention before GEMM and convolution
// (FlashAttention's kernels carry cutlass types, paged attention's
// `reduce` kernel is attention); convolution before GEMM (cuDNN's
// implicit_convolve_sgemm, xmma_fprop_implicit_gemm, MIOpen's igemm_fwd
// are convolutions); cuBLAS's split-K reduction before reductions; sort
// and scan before reductions (topkGatingSoftmax routes tokens).
constexpr std::string_view kHcclFamily = "HCCL (Ascend)";
constexpr std::string_view kDeepEpFamily = "DeepEP (MoE expert-parallel dispatch and combine)";

constexpr const char* kSpyreGemmFamily = "IBM Spyre compiled matrix products (sdsc_fused_mm…, sdsc_fused_bmm…)";

constexpr std::array kFamilies{
    // Communication.
    KernelFamily{C::kComm, "NCCL/RCCL/MSCCL++", kName, kStarts, "nccl"},
    KernelFamily{C::kComm, "NCCL/RCCL/MSCCL++", kName, kStarts, "rccl"},
    KernelFamily{C::kComm, "NCCL/RCCL/MSCCL++", kName, kHas, "nccl:"},
    // MSCCL++'s kernels take its handles (mscclpp::MemoryChannelDeviceHandle):
    // a wait_kernel spins until the peer signals (issue 38's thirteenth
    // round: 45 ms of one, sent to Nsight Compute as a hotspot).
    KernelFamily{C::kComm, "NCCL/RCCL/MSCCL++", kName, kHas, "mscclpp::"},
    // Ascend's HCCL: torch_npu's trace names a whole collective
    // "hcom_allReduce__586_0_1" (src/trace/torch_npu.h).
    KernelFamily{C::kComm, kHcclFamily, kName, kStarts, "hcom_"},
    // DeepEP's expert-parallel all-to-all (deep_ep::internode_ll::dispatch,
    // ::combine, intranode::notify_dispatch): its receive loops spin until
    // the peers' tokens land (issue 38's eighteenth round: a DeepSeek-style
    // MoE decode's combine and dispatch, 55% of GPU time, "not recognised").
    KernelFamily{C::kComm, kDeepEpFamily, kName, kHas, "deep_ep::"},
    // DeepSeek's own build names the namespace dpsk::ep (its published
    // DualPipe training profile: internode::combine, cached_notify and
    // dispatch, 44% of an H800 rank's GPU time; issue 38's nineteenth round).
    KernelFamily{C::kComm, kDeepEpFamily, kName, kHas, "dpsk::ep::"},
    KernelFamily{C::kComm, "custom collectives (vLLM/sglang all-reduce, all-to-all)", kName, kHas, "all_reduce"},
    KernelFamily{C::kComm, "custom collectives (vLLM/sglang all-reduce, all-to-all)", kName, kHas, "allreduce"},
    KernelFamily{C::kComm, "custom collectives (vLLM/sglang all-reduce, all-to-all)", kName, kHas, "cross_device_reduce"},
    KernelFamily{C::kComm, "custom collectives (vLLM/sglang all-reduce, all-to-all)", kName, kHas, "all_gather"},
    KernelFamily{C::kComm, "custom collectives (vLLM/sglang all-reduce, all-to-all)", kName, kHas, "allgather"},
    KernelFamily{C::kComm, "custom collectives (vLLM/sglang all-reduce, all-to-all)", kName, kHas, "reduce_scatter"},
    KernelFamily{C::kComm, "custom collectives (vLLM/sglang all-reduce, all-to-all)", kName, kHas, "reducescatter"},
    KernelFamily{C::kComm, "custom collectives (vLLM/sglang all-reduce, all-to-all)", kName, kHas, "all_to_all"},
    KernelFamily{C::kComm, "custom collectives (vLLM/sglang all-reduce, all-to-all)", kName, kHas, "alltoall"},
    // Attention.
    KernelFamily{C::kAttention, "FlashAttention (flash_fwd, flash_bwd, pytorch_flash, FlashMLA)", kName, kHas, "flash_"},
    KernelFamily{C::kAttention, "FlashAttention (flash_fwd, flash_bwd, pytorch_flash, FlashMLA)", kName, kHas, "flashattn"},
    KernelFamily{C::kAttention, "fmha (xFormers/CUTLASS, Composable Kernel, aiter)", kName, kHas, "fmha"},
    KernelFamily{C::kAttention, "AOTriton/Triton flash attention (attn_fwd, attn_bwd)", kName, kHas, "attn_fwd"},
    KernelFamily{C::kAttention, "AOTriton/Triton flash attention (attn_fwd, attn_bwd)", kName, kHas, "attn_bwd"},
    KernelFamily{C::kAttention, "paged and other attention kernels (vLLM, sglang, aiter, TensorRT-LLM)", kName, kHas, "attention"},
    KernelFamily{C::kAttention, "FlashInfer (…WithPagedKVCache…, …WithKVCache…)", kName, kHas, "withpagedkvcache"},
    KernelFamily{C::kAttention, "FlashInfer (…WithPagedKVCache…, …WithKVCache…)", kName, kHas, "withkvcache"},
    KernelFamily{C::kAttention, "cuDNN SDPA", kName, kHas, "sdpa"},
    KernelFamily{C::kAttention, "paged and other attention kernels (vLLM, sglang, aiter, TensorRT-LLM)", kName, kHas, "attn"},
    // Convolution.
    KernelFamily{C::kConv, "cuDNN/CUTLASS convolutions (fprop, dgrad, wgrad, scudnn, winograd, implicit_convolve)", kName, kHas, "fprop"},
    KernelFamily{C::kConv, "cuDNN/CUTLASS convolutions (fprop, dgrad, wgrad, scudnn, winograd, implicit_convolve)", kName, kHas, "dgrad"},
    KernelFamily{C::kConv, "cuDNN/CUTLASS convolutions (fprop, dgrad, wgrad, scudnn, winograd, implicit_convolve)", kName, kHas, "wgrad"},
    KernelFamily{C::kConv, "cuDNN/CUTLASS convolutions (fprop, dgrad, wgrad, scudnn, winograd, implicit_convolve)", kName, kHas, "scudnn"},
    KernelFamily{C::kConv, "cuDNN/CUTLASS convolutions (fprop, dgrad, wgrad, scudnn, winograd, implicit_convolve)", kName, kHas, "winograd"},
    KernelFamily{C::kConv, "cuDNN/CUTLASS convolutions (fprop, dgrad, wgrad, scudnn, winograd, implicit_convolve)", kName, kHas, "convolve"},
    KernelFamily{C::kConv, "MIOpen convolutions (igemm_fwd/bwd/wrw, naive_conv, MIOpenConv, assembly miopen*AsmConv*)", kName, kStarts, "igemm_"},
    KernelFamily{C::kConv, "MIOpen convolutions (igemm_fwd/bwd/wrw, naive_conv, MIOpenConv, assembly miopen*AsmConv*)", kName, kHas, "naive_conv"},
    KernelFamily{C::kConv, "MIOpen convolutions (igemm_fwd/bwd/wrw, naive_conv, MIOpenConv, assembly miopen*AsmConv*)", kName, kHas, "miopenconv"},
    // MIOpen's assembly solvers: miopenSp3AsmConv_v30_3_1_gfx9_fp16_dot2_edc_f3x2_stride1
    // (Winograd), miopenGcnAsmConv1x1U (issue 38's eighth round: an MI300X
    // convolution_backward replay whose kernels launched before the
    // recording had no op to tell their class).
    KernelFamily{C::kConv, "MIOpen convolutions (igemm_fwd/bwd/wrw, naive_conv, MIOpenConv, assembly miopen*AsmConv*)", kName, kHas, "asmconv"},
    KernelFamily{C::kConv, "convolutions (other: convolution, conv2d, …)", kName, kHas, "convolution"},
    KernelFamily{C::kConv, "convolutions (other: convolution, conv2d, …)", kName, kHas, "conv1d"},
    KernelFamily{C::kConv, "convolutions (other: convolution, conv2d, …)", kName, kHas, "conv2d"},
    KernelFamily{C::kConv, "convolutions (other: convolution, conv2d, …)", kName, kHas, "conv3d"},
    // GEMM.
    KernelFamily{C::kGemm, "cuBLAS split-K reduction (part of its GEMM)", kName, kHas, "splitkreduce"},
    KernelFamily{C::kGemm, "cuBLASLt (nvjet)", kName, kStarts, "nvjet"},
    KernelFamily{C::kGemm, "rocBLAS/hipBLASLt (Tensile Cijk_)", kName, kStarts, "cijk_"},
    KernelFamily{C::kGemm, "MoE grouped GEMMs (Triton matmul_ogs, fused_moe, moe_gemm)", kName, kHas, "matmul_ogs"},
    KernelFamily{C::kGemm, "MoE grouped GEMMs (Triton matmul_ogs, fused_moe, moe_gemm)", kName, kHas, "fused_moe"},
    KernelFamily{C::kGemm, "MoE grouped GEMMs (Triton matmul_ogs, fused_moe, moe_gemm)", kName, kHas, "moe_gemm"},
    // vLLM's Marlin: 4- and 8-bit-weight GEMMs, dense (gptq_marlin) and MoE
    // (marlin_moe_wna16), named "Marlin<...>" (issue 38's twelfth round: a
    // gpt-oss-20b decode's 50.3% of GPU time was "other (not recognised)").
    KernelFamily{C::kGemm, "Marlin quantized-weight GEMMs (vLLM's Marlin, marlin_moe)", kName, kHas, "marlin"},
    KernelFamily{C::kGemm, "Inductor GEMM templates (triton_tem_…)", kName, kStarts, "triton_tem_"},
    // IBM Spyre's compiled kernels (torch-spyre's Inductor backend, SDSC):
    // a matrix product with its epilogue fused in (sdsc_fused_bmm_mul_silu_0,
    // issue 38's twenty-third round: 107 GFLOP a call, called a fusable
    // elementwise kernel).
    KernelFamily{C::kGemm, kSpyreGemmFamily, kName, kHas, "sdsc_fused_mm"},
    KernelFamily{C::kGemm, kSpyreGemmFamily, kName, kHas, "sdsc_fused_bmm"},
    KernelFamily{C::kGemm, "GEMV (cuBLAS gemv, rocBLAS gemv)", kName, kHas, "gemv"},
    KernelFamily{C::kGemm, "cuBLAS/CUTLASS/rocBLAS/Composable Kernel/aiter GEMMs (…gemm…: sm90_xmma_gemm, ampere_*gemm, ck::…gemm)", kName, kHas, "gemm"},
    KernelFamily{C::kGemm, "CUTLASS (cutlass_…)", kName, kHas, "cutlass"},
    KernelFamily{C::kGemm, "cuBLAS/CUTLASS tensor-core kernels (xmma, wgmma, hmma)", kName, kHas, "xmma"},
    KernelFamily{C::kGemm, "cuBLAS/CUTLASS tensor-core kernels (xmma, wgmma, hmma)", kName, kHas, "wgmma"},
    KernelFamily{C::kGemm, "cuBLAS/CUTLASS tensor-core kernels (xmma, wgmma, hmma)", kName, kHas, "hmma"},
    KernelFamily{C::kGemm, "cuBLAS (cublas…)", kName, kHas, "cublas"},
    KernelFamily{C::kGemm, "matmul kernels (Triton and others: …matmul…)", kName, kHas, "matmul"},
    // Sort, scan, top-k, MoE routing.
    KernelFamily{C::kSortScan, "sort (bitonic, radix, merge, segmented; cub DeviceRadixSort)", kName, kHas, "bitonic"},
    KernelFamily{C::kSortScan, "sort (bitonic, radix, merge, segmented; cub DeviceRadixSort)", kName, kHas, "sort"},
    KernelFamily{C::kSortScan, "scan and select (cub DeviceScan, DeviceSelect; torch's scan kernels)", kName, kHas, "scan"},
    KernelFamily{C::kSortScan, "scan and select (cub DeviceScan, DeviceSelect; torch's scan kernels)", kName, kHas, "deviceselect"},
    KernelFamily{C::kSortScan, "top-k and MoE routing (gatherTopK, sbtopk, topkGatingSoftmax, moe_align, triton_kernels routing)", kName, kHas, "topk"},
    KernelFamily{C::kSortScan, "top-k and MoE routing (gatherTopK, sbtopk, topkGatingSoftmax, moe_align, triton_kernels routing)", kName, kHas, "moe_align"},
    KernelFamily{C::kSortScan, "top-k and MoE routing (gatherTopK, sbtopk, topkGatingSoftmax, moe_align, triton_kernels routing)", kName, kHas, "routing"},
    KernelFamily{C::kSortScan, "top-k and MoE routing (gatherTopK, sbtopk, topkGatingSoftmax, moe_align, triton_kernels routing)", kName, kHas, "bitmatrix"},
    // Copies, layout conversions, KV-cache writes.
    KernelFamily{C::kCopy, "layout conversions (cuDNN nchwToNhwc/nhwcToNchw, MIOpen batched_transpose)", kName, kHas, "nchwtonhwc"},
    KernelFamily{C::kCopy, "layout conversions (cuDNN nchwToNhwc/nhwcToNchw, MIOpen batched_transpose)", kName, kHas, "nhwctonchw"},
    KernelFamily{C::kCopy, "layout conversions (cuDNN nchwToNhwc/nhwcToNchw, MIOpen batched_transpose)", kName, kHas, "nchw2nhwc"},
    KernelFamily{C::kCopy, "layout conversions (cuDNN nchwToNhwc/nhwcToNchw, MIOpen batched_transpose)", kName, kHas, "nhwc2nchw"},
    KernelFamily{C::kCopy, "layout conversions (cuDNN nchwToNhwc/nhwcToNchw, MIOpen batched_transpose)", kName, kHas, "batched_transpose"},
    KernelFamily{C::kCopy, "KV-cache writes (sglang store_kvcache, vLLM reshape_and_cache)", kName, kHas, "store_kvcache"},
    KernelFamily{C::kCopy, "KV-cache writes (sglang store_kvcache, vLLM reshape_and_cache)", kName, kHas, "reshape_and_cache"},
    KernelFamily{C::kCopy, "KV-cache writes (sglang store_kvcache, vLLM reshape_and_cache)", kName, kHas, "concat_and_cache"},
    // Reductions, normalisations, softmax.
    KernelFamily{C::kReduction, "log-softmax (a loss over the classes, not attention)", kName, kHas, "logsoftmax"},
    KernelFamily{C::kReduction, "log-softmax (a loss over the classes, not attention)", kName, kHas, "log_softmax"},
    KernelFamily{C::kReduction, "softmax", kName, kHas, "softmax"},
    KernelFamily{C::kReduction, "normalisations (layer, RMS, batch, group; aiter rmsnorm, cuDNN bn_)", kName, kHas, "norm"},
    KernelFamily{C::kReduction, "normalisations (layer, RMS, batch, group; aiter rmsnorm, cuDNN bn_)", kName, kStarts, "bn_fw"},
    KernelFamily{C::kReduction, "normalisations (layer, RMS, batch, group; aiter rmsnorm, cuDNN bn_)", kName, kStarts, "bn_bw"},
    KernelFamily{C::kReduction, "Inductor reductions (triton_red_, triton_per_)", kName, kStarts, "triton_red_"},
    KernelFamily{C::kReduction, "Inductor reductions (triton_red_, triton_per_)", kName, kStarts, "triton_per_"},
    KernelFamily{C::kReduction, "reductions (reduce_kernel, cub DeviceReduce, losses, argmax)", kName, kHas, "reduce"},
    KernelFamily{C::kReduction, "reductions (reduce_kernel, cub DeviceReduce, losses, argmax)", kName, kHas, "cross_entropy"},
    KernelFamily{C::kReduction, "reductions (reduce_kernel, cub DeviceReduce, losses, argmax)", kName, kHas, "nll_loss"},
    KernelFamily{C::kReduction, "reductions (reduce_kernel, cub DeviceReduce, losses, argmax)", kName, kHas, "argmax"},
    KernelFamily{C::kReduction, "reductions (reduce_kernel, cub DeviceReduce, losses, argmax)", kName, kHas, "sum_functor"},
    // Elementwise.
    KernelFamily{C::kElementwise, "PyTorch elementwise (elementwise_kernel, vectorized_…, unrolled_…, functors)", kName, kHas, "elementwise"},
    KernelFamily{C::kElementwise, "PyTorch elementwise (elementwise_kernel, vectorized_…, unrolled_…, functors)", kName, kHas, "functor"},
    KernelFamily{C::kElementwise, "Inductor pointwise (triton_poi_)", kName, kStarts, "triton_poi_"},
    KernelFamily{C::kElementwise, "Inductor pointwise (triton_poi_)", kName, kHas, "pointwise"},
    KernelFamily{C::kElementwise, "foreach ops (multi_tensor_apply)", kName, kHas, "multi_tensor_apply"},
    KernelFamily{C::kElementwise, "copies, fills, cat, index, gather/scatter", kName, kHas, "copy_kernel"},
    KernelFamily{C::kElementwise, "copies, fills, cat, index, gather/scatter", kName, kHas, "fill"},
    KernelFamily{C::kElementwise, "copies, fills, cat, index, gather/scatter", kName, kHas, "catarray"},
    KernelFamily{C::kElementwise, "copies, fills, cat, index, gather/scatter", kName, kHas, "index"},
    KernelFamily{C::kElementwise, "copies, fills, cat, index, gather/scatter", kName, kHas, "gather"},
    KernelFamily{C::kElementwise, "copies, fills, cat, index, gather/scatter", kName, kHas, "scatter"},
    KernelFamily{C::kElementwise, "activations and RoPE (act_and_mul, silu_and_mul, rotary_embedding)", kName, kHas, "_and_mul"},
    KernelFamily{C::kElementwise, "activations and RoPE (act_and_mul, silu_and_mul, rotary_embedding)", kName, kHas, "rotary"},
    KernelFamily{C::kElementwise, "MIOpen tensor ops (SubTensorOp…)", kName, kStarts, "subtensorop"},
    KernelFamily{C::kElementwise, "dropout (fused_dropout_kernel)", kName, kHas, "dropout"},

    // By the launching op, for kernels whose own name says nothing (or
    // only "elementwise").
    KernelFamily{C::kComm, "collective ops (nccl:, c10d::, all_reduce, …)", kOp, kStarts, "nccl:"},
    KernelFamily{C::kComm, "collective ops (nccl:, c10d::, all_reduce, …)", kOp, kStarts, "c10d::"},
    KernelFamily{C::kComm, "collective ops (nccl:, c10d::, all_reduce, …)", kOp, kHas, "all_reduce"},
    KernelFamily{C::kComm, "collective ops (nccl:, c10d::, all_reduce, …)", kOp, kHas, "all_gather"},
    KernelFamily{C::kComm, "collective ops (nccl:, c10d::, all_reduce, …)", kOp, kHas, "reduce_scatter"},
    KernelFamily{C::kComm, "collective ops (nccl:, c10d::, all_reduce, …)", kOp, kHas, "all_to_all"},
    KernelFamily{C::kAttention, "attention ops (SDPA, _flash_attention_forward, _efficient_attention_*, paged attention)", kOp, kHas, "attention"},
    KernelFamily{C::kAttention, "attention ops (SDPA, _flash_attention_forward, _efficient_attention_*, paged attention)", kOp, kHas, "_scaled_dot_product"},
    KernelFamily{C::kAttention, "attention ops (SDPA, _flash_attention_forward, _efficient_attention_*, paged attention)", kOp, kHas, "flash_attn"},
    KernelFamily{C::kAttention, "attention ops (SDPA, _flash_attention_forward, _efficient_attention_*, paged attention)", kOp, kHas, "fmha"},
    KernelFamily{C::kAttention, "attention ops (SDPA, _flash_attention_forward, _efficient_attention_*, paged attention)", kOp, kHas, "mha_"},
    KernelFamily{C::kConv, "convolution ops (aten::convolution, cudnn_convolution, miopen_convolution, conv2d)", kOp, kHas, "convolution"},
    KernelFamily{C::kConv, "convolution ops (aten::convolution, cudnn_convolution, miopen_convolution, conv2d)", kOp, kIs, "conv1d"},
    KernelFamily{C::kConv, "convolution ops (aten::convolution, cudnn_convolution, miopen_convolution, conv2d)", kOp, kIs, "conv2d"},
    KernelFamily{C::kConv, "convolution ops (aten::convolution, cudnn_convolution, miopen_convolution, conv2d)", kOp, kIs, "conv3d"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kIs, "mm"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kIs, "addmm"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kIs, "bmm"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kIs, "baddbmm"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kIs, "addbmm"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kIs, "matmul"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kIs, "linear"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kIs, "mv"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kIs, "addmv"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kHas, "scaled_mm"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kHas, "grouped_mm"},
    KernelFamily{C::kGemm, "GEMM ops (mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm, _grouped_mm)", kOp, kHas, "gemm"},
    KernelFamily{C::kSortScan, "sort, top-k and scan ops (sort, argsort, topk, cumsum, unique, nonzero)", kOp, kIs, "sort"},
    KernelFamily{C::kSortScan, "sort, top-k and scan ops (sort, argsort, topk, cumsum, unique, nonzero)", kOp, kIs, "argsort"},
    KernelFamily{C::kSortScan, "sort, top-k and scan ops (sort, argsort, topk, cumsum, unique, nonzero)", kOp, kIs, "topk"},
    KernelFamily{C::kSortScan, "sort, top-k and scan ops (sort, argsort, topk, cumsum, unique, nonzero)", kOp, kIs, "cumsum"},
    KernelFamily{C::kSortScan, "sort, top-k and scan ops (sort, argsort, topk, cumsum, unique, nonzero)", kOp, kIs, "cumprod"},
    KernelFamily{C::kSortScan, "sort, top-k and scan ops (sort, argsort, topk, cumsum, unique, nonzero)", kOp, kIs, "_unique2"},
    KernelFamily{C::kSortScan, "sort, top-k and scan ops (sort, argsort, topk, cumsum, unique, nonzero)", kOp, kIs, "nonzero"},
    KernelFamily{C::kReduction, "reduction and normalisation ops (sum, mean, softmax, layer_norm, rms_norm, …)", kOp, kIs, "sum"},
    KernelFamily{C::kReduction, "reduction and normalisation ops (sum, mean, softmax, layer_norm, rms_norm, …)", kOp, kIs, "mean"},
    KernelFamily{C::kReduction, "reduction and normalisation ops (sum, mean, softmax, layer_norm, rms_norm, …)", kOp, kHas, "softmax"},
    KernelFamily{C::kReduction, "reduction and normalisation ops (sum, mean, softmax, layer_norm, rms_norm, …)", kOp, kHas, "_norm"},
    KernelFamily{C::kReduction, "reduction and normalisation ops (sum, mean, softmax, layer_norm, rms_norm, …)", kOp, kHas, "rmsnorm"},
    KernelFamily{C::kReduction, "reduction and normalisation ops (sum, mean, softmax, layer_norm, rms_norm, …)", kOp, kIs, "norm"},
    KernelFamily{C::kReduction, "reduction and normalisation ops (sum, mean, softmax, layer_norm, rms_norm, …)", kOp, kIs, "argmax"},
    KernelFamily{C::kReduction, "reduction and normalisation ops (sum, mean, softmax, layer_norm, rms_norm, …)", kOp, kIs, "amax"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "add"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "add_"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "mul"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "mul_"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "sub"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "sub_"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "div"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "div_"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "relu"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "relu_"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "gelu"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "silu"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "sigmoid"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "tanh"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "exp"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "copy_"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "fill_"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "zero_"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "where"},
    KernelFamily{C::kElementwise, "elementwise ops (add, mul, copy_, fill_, relu, gelu, where, …)", kOp, kIs, "clamp"},
};

// `pattern` is lower case; `s` any case.
bool starts_ci(std::string_view s, std::string_view pattern) {
  if (pattern.size() > s.size()) return false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (ascii_lower(s[i]) != pattern[i]) return false;
  }
  return true;
}

bool contains_ci(std::string_view s, std::string_view pattern) {
  if (pattern.size() > s.size()) return false;
  for (std::size_t i = 0; i + pattern.size() <= s.size(); ++i) {
    if (starts_ci(s.substr(i), pattern)) return true;
  }
  return false;
}

}  // namespace

std::string_view kernel_own_name(std::string_view name) {
  if (name.starts_with("void ")) name.remove_prefix(5);
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  std::size_t open = name.find_first_of("<(");
  while (open != std::string_view::npos && name.substr(open).starts_with(kAnonymous)) {
    open = name.find_first_of("<(", open + kAnonymous.size());
  }
  if (open != std::string_view::npos) name = name.substr(0, open);
  return after_namespaces(name);
}

namespace {

bool row_matches(const KernelFamily& f, std::string_view text) {
  switch (f.how) {
    case MatchHow::kContains: return contains_ci(text, f.pattern);
    case MatchHow::kPrefix: return starts_ci(text, f.pattern);
    case MatchHow::kBase: {
      const std::string_view base = after_namespaces(text);
      return base.size() == f.pattern.size() && starts_ci(base, f.pattern);
    }
  }
  return false;
}

KernelMatch first_match(MatchOn on, std::string_view text) {
  if (text.empty()) return {};
  for (const KernelFamily& f : kFamilies) {
    if (f.on == on && row_matches(f, text)) return {f.cls, &f};
  }
  return {};
}

}  // namespace

std::string_view kernel_class_name(KernelClass k) {
  switch (k) {
    case KernelClass::kGemm: return "GEMM";
    case KernelClass::kAttention: return "attention";
    case KernelClass::kConv: return "convolution";
    case KernelClass::kElementwise: return "elementwise";
    case KernelClass::kReduction: return "reduction/normalisation";
    case KernelClass::kSortScan: return "sort/scan";
    case KernelClass::kComm: return "communication";
    case KernelClass::kCopy: return "copy/memset";
    case KernelClass::kOther: return "other";
  }
  return "other";
}

RateUnit rate_unit(KernelClass k) {
  switch (k) {
    case KernelClass::kGemm: return RateUnit::kTflops;
    case KernelClass::kElementwise: return RateUnit::kGbps;
    default: return RateUnit::kNone;
  }
}

std::string_view rate_unit_name(RateUnit u) {
  switch (u) {
    case RateUnit::kTflops: return "TFLOP/s";
    case RateUnit::kGbps: return "GB/s";
    case RateUnit::kNone: return "none";
  }
  return "none";
}

std::span<const KernelFamily> kernel_families() { return kFamilies; }

KernelMatch match_kernel_name(std::string_view kernel) {
  const KernelMatch m = first_match(MatchOn::kName, kernel_own_name(kernel));
  if (m.cls != KernelClass::kOther) return m;
  // A library's namespace row ("deep_ep::", "mscclpp::") reads the whole
  // name, namespaces and parameters: the library's kernels are its class
  // whatever their own names ("combine", "wait_kernel").
  for (const KernelFamily& f : kFamilies) {
    if (f.on == MatchOn::kName && f.pattern.ends_with("::") && row_matches(f, kernel)) return {f.cls, &f};
  }
  return m;
}

KernelMatch match_kernel_template(std::string_view kernel) {
  const std::size_t lt = kernel.find('<');
  return lt == std::string_view::npos ? KernelMatch{} : first_match(MatchOn::kName, kernel.substr(lt));
}

KernelMatch match_launching_op(std::string_view op) { return first_match(MatchOn::kOp, op); }

KernelMatch classify_kernel(KernelMatch by_name, KernelMatch by_op, KernelMatch by_template) {
  KernelMatch m = by_name;
  // Inductor's generated kernels say what they are in their prefix
  // (triton_poi_, triton_red_, triton_per_, triton_tem_); the rest of the
  // name lists the ops fused into them, and the op the trace records for
  // the launch is the kernel's own name: neither is a class. A pointwise
  // kernel named triton_poi_fused__scaled_mm__to_copy_… casts to FP8 for a
  // _scaled_mm, it is no GEMM (issue 38's nineteenth round: 11.6 ms of an
  // H100 rank's "GEMM 46.6%").
  const bool inductor = by_name.family != nullptr && by_name.family->pattern.starts_with("triton_");
  if ((m.cls == KernelClass::kOther || m.cls == KernelClass::kElementwise) && by_op.cls != KernelClass::kOther &&
      !inductor) {
    m = by_op;
  }
  // A GEMM kernel a convolution op launched is the convolution's work
  // (cuDNN's implicit-GEMM and Winograd lowerings run volta_sgemm and
  // friends; TraceLens counts them by the op): convolution, not GEMM
  // (issue 38 review: a T4 VGG-16's "GEMM 37%" was 12.4 of its 15.5 ms of
  // sgemm launched by cudnn_convolution, convolutions ~77% of GPU time).
  if (m.cls == KernelClass::kGemm && by_op.cls == KernelClass::kConv) m = by_op;
  return m.cls == KernelClass::kOther ? by_template : m;
}

KernelMatch classify_kernel(std::string_view kernel, std::string_view op) {
  return classify_kernel(match_kernel_name(kernel), match_launching_op(op), match_kernel_template(kernel));
}

bool is_comm_kernel(std::string_view name) {
  // The kernel-name rows of the communication class, read as the class
  // shares read them (its own name, without `void `, templates and
  // namespaces; a library's namespace row on the whole name): NCCL/RCCL/
  // MSCCL++, HCCL, DeepEP, and the serving engines' custom all-reduce
  // kernels, which spin until the peers' data lands as NCCL's do. On the
  // name as the trace gives it the prefix rows missed ROCm's
  // "void rcclGenericKernel<2, false>(…)" and the custom rows were not read
  // (issue 38's twenty-second round: SGLang's DeepSeek-R1 on MI325X, its
  // RCCL kernels 23% of GPU time in the class shares while diagnose said
  // "no collective ran on the device").
  return match_kernel_name(name).cls == KernelClass::kComm;
}

}  // namespace tprof::internal
