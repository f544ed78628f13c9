// How efficient the GPU's work is (docs/diagnose.md, "Efficiency"): kernel
// classes with their shares of device time; achieved TFLOP/s of GEMMs from
// their launching op's input shapes, judged on the roofline (a GEMM whose
// arithmetic intensity is below the device's ridge point on its bytes per
// second against HBM), achieved GB/s of elementwise kernels from their
// shapes; against the device's peak from a table keyed by the trace's
// deviceProperties (docs/peaks.md, every number with its source). Classes
// come from the kernel-class table (src/causal/kernel_classes.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/causal/kernel_classes.h"

namespace tprof::internal {

class JsonValue;

// KernelClass, kernel_class_name: the kernel-class table,
// src/causal/kernel_classes.h.

// One device's dense peaks (no sparsity); 0 where the device has no such
// unit. docs/peaks.md gives the source of each row.
struct DevicePeak {
  std::string_view name;      // "H100 SXM"
  double bf16_tflops = 0;     // dense fp16/bf16 tensor (matrix) cores: equal on every device here
  double tf32_tflops = 0;     // dense TF32 tensor cores (fp32 GEMMs with TF32 allowed)
  double fp32_tflops = 0;     // fp32 without tensor cores (vector; matrix on CDNA2)
  double hbm_gbps = 0;        // DRAM bandwidth, GB/s (1e9 bytes)
};

// The peak row for device 0 of the trace's deviceProperties, or nullptr (no
// deviceProperties, or a device not in the table). `device_name` gets the
// name the trace gives ("" without deviceProperties).
const DevicePeak* device_peak(const Trace& t, std::string* device_name);

// The dtype of an op's "Input type" entry ("c10::BFloat16" -> "bf16",
// "float" -> "fp32"; fp8, fp16, fp64), "" for any other (an integer, a
// scalar, an empty entry).
std::string dtype_of_type(std::string_view t);

// An op's "Input Dims" array as shapes, one per input ([] for a scalar or
// an entry that is not an array; a dimension that is not a number reads
// 0); empty when `dims` is null or not an array.
std::vector<std::vector<std::int64_t>> input_shapes(const JsonValue* dims);

struct KernelEfficiency {
  std::string name;           // the kernel's full name
  KernelClass cls = KernelClass::kOther;
  std::string_view family;    // its row's family in the kernel-class table, "" for kOther
  std::string op;             // the launching op ("aten::mm"), "" when none is known
  std::string dtype;          // "bf16", "fp16", "fp32", "fp16/bf16" (a 16-bit GEMM by its name), "" unknown
  bool dtype_from_op = false; // dtype is the op's Input type (else the kernel name's, or unknown)
  std::int64_t count = 0;
  std::int64_t time_ns = 0;   // sum of durations
  // Over the instances whose op's shapes are known:
  std::int64_t sized_count = 0;
  std::int64_t sized_time_ns = 0;
  double flops = 0;           // GEMMs: 2·M·N·K per instance
  double bytes = 0;           // elementwise: inputs + output; GEMMs: A, B and C once each
  double tflops() const { return sized_time_ns > 0 ? flops / static_cast<double>(sized_time_ns) / 1e3 : 0; }
  double gbps() const { return sized_time_ns > 0 ? bytes / static_cast<double>(sized_time_ns) : 0; }
  // GEMMs on the roofline: the sized instances whose arithmetic intensity
  // (flops / bytes) is below the ridge point of the device and their dtype
  // (peak FLOP/s / HBM bytes/s): bandwidth-bound, judged on bytes/s. None
  // without a peak for the device and dtype (nothing to judge by).
  std::int64_t bw_count = 0;
  std::int64_t bw_time_ns = 0;
  double bw_flops = 0, bw_bytes = 0;
  double bw_gbps() const { return bw_time_ns > 0 ? bw_bytes / static_cast<double>(bw_time_ns) : 0; }
  // The rest of the sized instances: compute-bound (or not judged).
  double compute_tflops() const {
    const std::int64_t ns = sized_time_ns - bw_time_ns;
    return ns > 0 ? (flops - bw_flops) / static_cast<double>(ns) / 1e3 : 0;
  }
  // Most of its measured time is bandwidth-bound.
  bool bandwidth_bound() const { return bw_time_ns > 0 && 2 * bw_time_ns >= sized_time_ns; }
};

struct Efficiency {
  const DevicePeak* peak = nullptr;
  std::string device_name;
  std::array<std::int64_t, kKernelClassCount> class_ns{};  // sum of kernel durations by class
  // The same over the work the recording launched: without the activities
  // queued before it began (DeviceOp::before_recording), another step's.
  std::array<std::int64_t, kKernelClassCount> own_class_ns{};
  std::int64_t total_ns = 0;                               // over all device activity (copies and memsets too)
  std::vector<KernelEfficiency> kernels;                   // by time, descending
  double share(KernelClass k) const {
    return total_ns > 0 ? static_cast<double>(class_ns[static_cast<std::size_t>(k)]) / static_cast<double>(total_ns) : 0;
  }
  // The GEMM peak for a dtype ("bf16"/"fp16" tensor, "fp32": TF32 when the
  // device has it, else fp32), 0 when unknown.
  double gemm_peak_tflops(std::string_view dtype) const;
  // The ridge point for a GEMM of that dtype, FLOP per byte of HBM traffic
  // (the dense peak over the HBM bandwidth), 0 when either is unknown.
  double ridge_flops_per_byte(std::string_view dtype) const;
};

Efficiency compute_efficiency(const DiagnoseContext& c);

// The GEMM kernels' achieved rates over the instances with known shapes:
// those below the ridge point in GB/s against the HBM bandwidth, the rest
// in TFLOP/s against the dense peak of their dtypes. The dtype is the one
// holding most of the measured time (from the ops' Input type, else the
// kernel's name), with its share: below 1 the dtypes are mixed.
struct GemmRate {
  double tflops = 0;           // the compute-bound (or unjudged) instances' flops over their time
  double peak_tflops = 0;      // their dense peak: flops / Σ(flops_i / peak of dtype_i); 0 when unknown
  std::string dtype;           // of most of the measured time, "" unknown
  double dtype_share = 0;      // that dtype's share of the measured time
  std::int64_t time_ns = 0;    // the GEMM time the TFLOP/s is measured over
  std::int64_t measured_ns = 0;  // all GEMM time whose shapes are known (time_ns + bw_time_ns)
  std::int64_t bw_time_ns = 0;   // bandwidth-bound instances' time
  double bw_gbps = 0;            // their bytes over their time
  // Faster than the dense peak (> 105%) or the HBM bandwidth (> 150%, the
  // elementwise rule's allowance for L2): the shapes are not those of the
  // kernels they were joined to, and no rate may be quoted.
  bool implausible = false;
};
GemmRate gemm_rate(const Efficiency& e);

// "GEMM 85.0% of GPU time at 813 TFLOP/s (82.2% of the H100 SXM's dense bf16
// peak, measured on all of it), elementwise 15.0%": the classes of at least
// 5% of device time (other: "not recognised"), the GEMM rates where shapes
// are known with the share of GPU time they are measured on, the
// bandwidth-bound part in TB/s against HBM, and why a share of peak is
// missing.
std::string efficiency_text(const Efficiency& e);

// The device's tensor (matrix) cores, from device 0 of the trace's
// deviceProperties: NVIDIA by compute capability (sm70+: fp16; sm80+: also
// bf16 and TF32), AMD by architecture (gfx908/gfx90a: 9.0 with >= 104 CUs,
// CDNA3+: 9.4 and up; fp16 and bf16). `known` is false without
// deviceProperties or a compute capability; all false for a GPU without them.
struct TensorCores {
  bool known = false;
  bool amd = false;
  std::string device;          // the name deviceProperties gives
  std::int64_t major = -1, minor = -1;
  std::int64_t num_sms = -1;   // its numSms (CUs on ROCm), -1 when not given
  bool fp16 = false, bf16 = false, tf32 = false;
};
TensorCores tensor_cores(const Trace& t);

// How a kernel is known to run fp32 GEMM or convolution math without
// tensor cores: by its own name (cuBLAS/CUTLASS SIMT `sgemm`, cuDNN
// `scudnn`, `implicit_convolve_sgemm`, `dgrad_engine<float`,
// `wgrad_alg*_engine<float`), or by its launching op's Input type (float)
// for a GEMM kernel whose name is a library GEMM (`gemm`, Tensile's `Cijk_`)
// with no tensor-core mark. A name with a tensor-core mark (`tensorop`,
// `s1688`, `s16816`, `h1688`, `h16816`, `i8816`, `hmma`, `wmma`, `xmma`,
// `mma`, `tf32`, `bf16`, `f16`, `nvjet`, `mfma`, `_MI`), a Triton kernel, a
// GEMV, or anything else is kNo: unknown counts as no.
enum class Fp32Math : std::uint8_t { kNo = 0, kByName, kByOpType };
Fp32Math fp32_math(const KernelEfficiency& k);
// Whether a kernel's name says fp32 operands on TF32 tensor cores: `tf32`
// (cuBLAS's sm80_xmma_gemm_f32f32_tf32f32_...), or the m16n8k8 single-
// precision tensor-op shape `s1688` (CUTLASS's cutlass_80_tensorop_s1688gemm,
// cuBLAS's ampere_s1688gemm).
bool tf32_math(std::string_view name);
// A convolution kernel (class kConv in the kernel-class table), else a matmul.
bool is_conv_kernel(const KernelEfficiency& k);

// Memory-bound work: elementwise plus reduction/normalisation kernels.
// Ops that only write their output (aten::fill_, aten::zero_, aten::zeros,
// the random generators): their first input is the tensor they overwrite,
// not one they read.
bool write_only_op(std::string_view op);

inline double memory_bound_share(const Efficiency& e) {
  return e.share(KernelClass::kElementwise) + e.share(KernelClass::kReduction);
}

}  // namespace tprof::internal
