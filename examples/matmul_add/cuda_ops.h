// cuda_ops.h — torch.add(torch.matmul(x, w), b) on a CUDA device, in the
// three forms the blog compares. Each call is a chain of cpu_op scopes named
// as the CPU operators in ops.h, so CPU and CUDA traces read alike; under
// them CUPTI (when tprof is built with it) shows the runtime calls and the
// device work:
//
//   eager:    op::matmul ── op::mm | op::bmm     cublasGemmEx | cublasGemmStridedBatchedEx,
//                                                 beta = 0, into a new tensor      (GEMM kernel)
//             op::add                            add_kernel (add_kernel.cu) into
//                                                 a new tensor                      (add kernel)
//   compile:  op::addmm | op::baddbmm ─┬─ op::copy_   cudaMemcpyAsync DeviceToDevice
//                                      │               bias -> output             (Memcpy DtoD)
//                                      └─ cublasGemmEx | ...StridedBatchedEx, beta = 1
//                                                      onto the output            (GEMM kernel)
//   fused:    op::addmm | op::baddbmm ── cublasLtMatmul, D = A·B + C with C the
//                                        bias and D a new tensor               (GEMM kernel)
//
// bf16 is CUDA_R_16BF and fp32 CUDA_R_32F, both with CUBLAS_COMPUTE_32F;
// fp32 never uses TF32 (torch's default). Everything runs on the legacy
// default stream and nothing synchronizes per call (see cuda_ops.cc).
//
//   if (std::string why = cuda_unavailable_reason(); !why.empty()) ...;  // exit 2
//   TPROF_TRY_ASSIGN(std::unique_ptr<CudaMatmulAdd> gpu, CudaMatmulAdd::create(x, w, b, CudaMode::kEager));
//   TPROF_TRY(gpu->call());                       // z = fn(x, w, b), enqueued
//   TPROF_TRY_ASSIGN(Tensor z, gpu->result());    // waits, copies z to the host
//   TPROF_TRY(gpu->close());
//
// This header has no CUDA types, so main.cc and the test build with the
// host compiler alone. Errors name the failing CUDA/cuBLAS call and its
// error string ("cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED: ..."). Not
// thread-safe: one thread drives an instance.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tensor.h"
#include "tprof/status.h"

namespace matmul_add {

enum class CudaMode : std::uint8_t { kEager, kCompile, kFused };

// Returns "" when device 0 can run the example, else one line saying why not
// ("no CUDA device (cudaGetDeviceCount: ...)", or a device older than sm_80,
// which has no bf16 GEMMs and no kernels in this build). Never fails.
std::string cuda_unavailable_reason();

// x, w and b copied to device 0, the cuBLAS/cuBLASLt state and a caching
// pool for the outputs; call() runs one torch.add(torch.matmul(x, w), b).
class CudaMatmulAdd {
 public:
  // Uploads x, w, b (same batch, dtype; x m×k, w k×n, b m×n) and prepares
  // `mode`. Synchronizes before returning: the device is idle afterwards.
  static tprof::Result<std::unique_ptr<CudaMatmulAdd>> create(const Tensor& x, const Tensor& w, const Tensor& b,
                                                               CudaMode mode);
  ~CudaMatmulAdd();  // releases what close() did not (errors then go unreported)
  CudaMatmulAdd(const CudaMatmulAdd&) = delete;
  CudaMatmulAdd& operator=(const CudaMatmulAdd&) = delete;

  // Enqueues one call as `z = fn(x, w, b)`: the new output replaces (frees)
  // the previous one. Returns without waiting for the device.
  tprof::Status call();
  // Waits for the device (cudaDeviceSynchronize): reports errors of work
  // already enqueued.
  tprof::Status synchronize();
  // Waits, then returns a host copy of the last call's output.
  tprof::Result<Tensor> result();
  // Waits, then frees the device memory and the handles.
  tprof::Status close();

 private:
  struct State;
  explicit CudaMatmulAdd(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

}  // namespace matmul_add
