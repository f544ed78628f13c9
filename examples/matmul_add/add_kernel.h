// add_kernel.h — the elementwise add of eager torch.add on the GPU, the one
// piece of the example nvcc compiles (add_kernel.cu); cuda_ops.cc, built by
// the host compiler, launches it through this function. Laid out as
// PyTorch's vectorized elementwise kernel: 128 threads a block, 8 elements a
// thread, 16-byte loads and stores.
//
//   cudaError_t e = launch_add(a, b, out, count, /*bf16=*/true, stream);
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace matmul_add {

// Enqueues out[i] = a[i] + b[i] for i < count on `stream`, in fp32 for bf16
// (__nv_bfloat16, each sum rounded once to nearest even, as torch does) or
// fp32 elements. a, b and out are device pointers to `count` elements of the
// same shape: the example's b is x·w's shape, so nothing is broadcast. Any
// alignment works; 16-byte aligned pointers (every cudaMalloc block) get the
// vectorized kernel. Returns the launch's error (cudaGetLastError),
// cudaSuccess for count 0.
cudaError_t launch_add(const void* a, const void* b, void* out, std::int64_t count, bool bf16, cudaStream_t stream);

// The launch launch_add makes, for tests and benchmarks (no device needed):
// blocks of the grid for `count` elements (ceil(count / 1024), 0 for none),
// threads per block (128), and elements per access (8 for bf16 and 4 for
// fp32 when a, b and out are 16-byte aligned, else 1: elementwise).
std::int64_t add_blocks(std::int64_t count);
int add_threads_per_block();
int add_vector_width(const void* a, const void* b, const void* out, bool bf16);

}  // namespace matmul_add
