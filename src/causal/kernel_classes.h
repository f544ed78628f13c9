// The kernel classes of every vendor and compiler, as one table of data
// (docs/diagnose.md, "Kernel classes"): each row a family of kernels
// (cuBLASLt's nvjet, Tensile's Cijk_, FlashAttention, NCCL, Inductor's
// triton_poi_ …), the class it belongs to, and how it is recognised: by
// the kernel's own name, or by the op that launched it. Every check of a
// kernel's class in tprof is a lookup here: the causal graph's what-if
// edits (gemm, elementwise, communication), diagnose's efficiency and its
// rules. The peers' breakdowns (src/analyze/breakdowns.cc) keep their own
// rules: they reproduce HTA's and TraceLens' figures, not ours.
//
//   const KernelMatch m = classify_kernel(name, launching_op);
//   if (m.cls == KernelClass::kGemm) ... m.family->family ...  // "rocBLAS/hipBLASLt (Tensile Cijk_)"
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tprof::internal {

// The classes, in the order they are listed. kOther is what no row
// recognised: rules give no class-specific advice on it.
enum class KernelClass : std::uint8_t {
  kGemm = 0,
  kAttention,
  kConv,
  kElementwise,
  kReduction,
  kSortScan,
  kComm,
  kCopy,
  kOther,
};
inline constexpr int kKernelClassCount = 9;
// "GEMM", "attention", "convolution", "elementwise", "reduction/normalisation",
// "sort/scan", "communication", "copy/memset", "other".
std::string_view kernel_class_name(KernelClass k);

// What tprof measures a class's efficiency in: GEMMs in TFLOP/s against the
// dense peak (or GB/s against HBM when their arithmetic intensity is below
// the device's ridge point), elementwise kernels in GB/s, the rest not at
// all (kNone: only their share of GPU time is reported).
enum class RateUnit : std::uint8_t { kNone = 0, kTflops, kGbps };
RateUnit rate_unit(KernelClass k);
std::string_view rate_unit_name(RateUnit u);  // "TFLOP/s", "GB/s", "none"

// Where a row looks.
enum class MatchOn : std::uint8_t {
  kName = 0,  // the kernel's own name (without namespaces and template
              // arguments; then, when nothing matched it or the op, its
              // template arguments)
  kOp,        // the name of the op that launched it (its External id)
};
// How a row's pattern is compared (always case-insensitive).
enum class MatchHow : std::uint8_t {
  kContains = 0,
  kPrefix,
  kBase,  // equal to the name after its last "::" ("aten::addmm" -> "addmm")
};

struct KernelFamily {
  KernelClass cls = KernelClass::kOther;
  std::string_view family;   // "cuBLASLt (nvjet)"
  MatchOn on = MatchOn::kName;
  MatchHow how = MatchHow::kContains;
  std::string_view pattern;  // lower case
};

// The table, in the order rows are tried: the first row that matches wins.
std::span<const KernelFamily> kernel_families();

struct KernelMatch {
  KernelClass cls = KernelClass::kOther;
  const KernelFamily* family = nullptr;  // nullptr for kOther
};

// The first name row matching the kernel's own name `kernel` (namespaces
// and template arguments off: "matmul_add::add_kernel<…>" is "add_kernel",
// so a namespace never makes an add a GEMM); else a row that names a
// library's namespace ("deep_ep::", "mscclpp::") found anywhere in the
// whole name.
KernelMatch match_kernel_name(std::string_view kernel);
// A kernel's own name: before its template arguments or parameters, after
// its namespaces ("void at::native::vectorized_elementwise_kernel<4, …>(…)"
// is "vectorized_elementwise_kernel"; "(anonymous namespace)::" is a
// namespace, not the start of its parameters). What the name rows match.
std::string_view kernel_own_name(std::string_view kernel);
// The first name row matching the kernel's template arguments ("<…>"), for
// library kernels named by them ("cutlass::Kernel2<cutlass_80_…gemm…>").
KernelMatch match_kernel_template(std::string_view kernel);
// The first op row matching the launching op's name.
KernelMatch match_launching_op(std::string_view op);
// A kernel's class from both: its own name decides, except that an
// elementwise or unrecognised name takes the launching op's class when the
// op has one (the bias copy inside aten::addmm is GEMM time, a fill inside
// an attention op is attention time, as TraceLens counts them), and a GEMM
// name launched by a convolution op is convolution (cuDNN lowering to
// sgemm); then its template arguments. `op` is "" when no launching op is
// known.
KernelMatch classify_kernel(std::string_view kernel, std::string_view op);
// The same from the three lookups, for callers that cache them per name
// and per op.
KernelMatch classify_kernel(KernelMatch by_name, KernelMatch by_op, KernelMatch by_template);

// True for NCCL's and RCCL's kernels (nccl*, rccl*, ncclDevKernel_*, and
// names with "nccl:"): the table's NCCL/RCCL row, the device activity
// diagnose and the peers' breakdowns count as communication (DeviceClass).
// Other collectives (custom all-reduce kernels) are class kComm in the
// table without being that.
bool is_comm_kernel(std::string_view name);

}  // namespace tprof::internal
