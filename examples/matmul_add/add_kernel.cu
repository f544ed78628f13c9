// The elementwise add kernel of the eager path: what torch.add launches on
// a CUDA tensor (at::native's vectorized elementwise kernel), reduced to a
// grid-stride loop. Kept alone in the example's only .cu file so nvcc
// compiles as little as possible.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "add_kernel.h"

namespace matmul_add {
namespace {

// tensor.h's bf16 storage (uint16_t, bf16.h) is handed over as raw bytes.
static_assert(sizeof(__nv_bfloat16) == sizeof(std::uint16_t), "bf16 is 16 bits");

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; larger tensors
// loop (grid stride) instead of launching more.
constexpr std::int64_t kMaxBlocks = 65535;

__device__ __forceinline__ float add_values(float x, float y) { return x + y; }

// torch adds bf16 in fp32 and rounds each result once (round to nearest even).
__device__ __forceinline__ __nv_bfloat16 add_values(__nv_bfloat16 x, __nv_bfloat16 y) {
  return __float2bfloat16_rn(__bfloat162float(x) + __bfloat162float(y));
}

}  // namespace

// Outside the anonymous namespace so the trace names it
// "void matmul_add::add_kernel<float>(...)" rather than "(anonymous namespace)".
template <class T>
__global__ void add_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                           std::int64_t count) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = add_values(a[i], b[i]);
  }
}

cudaError_t launch_add(const void* a, const void* b, void* out, std::int64_t count, bool bf16, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>(std::min((count + kThreads - 1) / kThreads, kMaxBlocks));
  if (bf16) {
    add_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(a),
                                               static_cast<const __nv_bfloat16*>(b),
                                               static_cast<__nv_bfloat16*>(out), count);
  } else {
    add_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(a), static_cast<const float*>(b),
                                               static_cast<float*>(out), count);
  }
  return cudaGetLastError();
}

}  // namespace matmul_add
