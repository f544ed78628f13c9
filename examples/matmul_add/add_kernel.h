// add_kernel.h — the elementwise add of eager torch.add on the GPU, the one
// piece of the example nvcc compiles (add_kernel.cu); cuda_ops.cc, built by
// the host compiler, launches it through this function.
//
//   cudaError_t e = launch_add(a, b, out, count, /*bf16=*/true, stream);
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace matmul_add {

// Enqueues out[i] = a[i] + b[i] for i < count on `stream`, in fp32 for bf16
// (__nv_bfloat16, each sum rounded once to nearest even, as torch does) or
// fp32 elements. a, b and out are device pointers to `count` elements of the
// same shape: the example's b is x·w's shape, so nothing is broadcast.
// Returns the launch's error (cudaGetLastError), cudaSuccess for count 0.
cudaError_t launch_add(const void* a, const void* b, void* out, std::int64_t count, bool bf16, cudaStream_t stream);

}  // namespace matmul_add
