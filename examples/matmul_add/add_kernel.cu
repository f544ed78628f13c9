// The elementwise add of the eager path: what torch.add launches on a CUDA
// tensor, laid out as at::native's vectorized elementwise kernel
// (aten/src/ATen/native/cuda/CUDALoops.cuh, launch_vectorized_kernel):
//
//   block  128 threads (num_threads(): 4 warps)
//   tile   8 elements a thread, 1024 a block (elems_per_thread for inputs
//          and output wider than a byte; io_block_work_size)
//   grid   one block per tile: ceil(count / 1024) (4096 x 4096 bf16:
//          16384 blocks, as torch's trace on the H100 shows)
//   access 16 bytes a load or store (8 bf16 or 4 fp32), thread t of a
//          block taking vectors t, t + 128, ... of its tile, so a warp's
//          accesses are one contiguous 512-byte span
//   tail   the last, partial tile elementwise, with bounds checks
//   align  a, b or out not 16-byte aligned: the same tiles, elementwise
//          (add_kernel<1, T>), as torch falls back to its unrolled kernel
//
// The grid of the first version (65535 blocks of 256 threads, a grid-stride
// loop of 2-byte accesses) took 57.5 us at 4096 x 4096 bf16 on an H100
// where torch's kernel takes 29.8 us. Kept alone in the example's only .cu
// file so nvcc compiles as little as possible.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "add_kernel.h"

namespace matmul_add {
namespace {

// tensor.h's bf16 storage (uint16_t, bf16.h) is handed over as raw bytes.
static_assert(sizeof(__nv_bfloat16) == sizeof(std::uint16_t), "bf16 is 16 bits");
static_assert(sizeof(__nv_bfloat162) == 4 && sizeof(uint4) == 16, "a vector is 4 words of 4 bytes");

constexpr int kThreads = 128;
constexpr int kElemsPerThread = 8;
constexpr std::int64_t kTile = static_cast<std::int64_t>(kThreads) * kElemsPerThread;
constexpr int kVectorBytes = 16;
// The grid's x dimension is at most 2^31 - 1 blocks; past that many tiles
// (2^41 elements) blocks loop over tiles.
constexpr std::int64_t kMaxBlocks = (std::int64_t{1} << 31) - 1;

__device__ __forceinline__ float add_values(float x, float y) { return x + y; }

// torch adds bf16 in fp32 and rounds each result once (round to nearest even).
__device__ __forceinline__ __nv_bfloat16 add_values(__nv_bfloat16 x, __nv_bfloat16 y) {
  return __float2bfloat16_rn(__bfloat162float(x) + __bfloat162float(y));
}

// One 16-byte vector of each input, added lane by lane with the same
// arithmetic as add_values: fp32 sums; bf16 widened, summed in fp32 and
// rounded once to nearest even (cvt.rn.bf16x2.f32, the rounding of
// __float2bfloat16_rn), so the vector and elementwise paths agree bit for
// bit. The words go through memcpy and the bit-cast intrinsics, not pointer
// casts, so nothing is read at an alignment it lacks.
__device__ __forceinline__ std::uint32_t add_words(std::uint32_t x, std::uint32_t y, const float*) {
  return __float_as_uint(__uint_as_float(x) + __uint_as_float(y));
}

__device__ __forceinline__ std::uint32_t add_words(std::uint32_t x, std::uint32_t y, const __nv_bfloat16*) {
  __nv_bfloat162 a, b;
  memcpy(&a, &x, sizeof a);
  memcpy(&b, &y, sizeof b);
  const float2 fa = __bfloat1622float2(a), fb = __bfloat1622float2(b);
  const __nv_bfloat162 sum = __float22bfloat162_rn(make_float2(fa.x + fb.x, fa.y + fb.y));
  std::uint32_t r;
  memcpy(&r, &sum, sizeof r);
  return r;
}

template <class T>
__device__ __forceinline__ uint4 add_vector(uint4 x, uint4 y) {
  const T* tag = nullptr;
  return make_uint4(add_words(x.x, y.x, tag), add_words(x.y, y.y, tag), add_words(x.z, y.z, tag),
                    add_words(x.w, y.w, tag));
}

// Returns 16 / sizeof(T) when a, b and out are all 16-byte aligned, else 1.
template <class T>
int vector_width(const void* a, const void* b, const void* out) {
  const auto misaligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kVectorBytes != 0; };
  return misaligned(a) || misaligned(b) || misaligned(out) ? 1 : kVectorBytes / static_cast<int>(sizeof(T));
}

}  // namespace

// Outside the anonymous namespace so the trace names it
// "void matmul_add::add_kernel<8, __nv_bfloat16>(...)" rather than
// "(anonymous namespace)"; kVec is the elements per access, as in torch's
// vectorized_elementwise_kernel<8, ...>.
template <int kVec, class T>
__global__ void __launch_bounds__(kThreads)
    add_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out, std::int64_t count) {
  static_assert(kVec == 1 || kVec * sizeof(T) == kVectorBytes, "a vector is 16 bytes");
  static_assert(kElemsPerThread % kVec == 0, "a thread's elements are whole vectors");
  const std::int64_t tiles = (count + kTile - 1) / kTile;
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t base = tile * kTile;
    if constexpr (kVec > 1) {
      if (count - base >= kTile) {
        // A full tile: base is a multiple of 1024 elements, so with aligned
        // pointers every vector is aligned too.
        const uint4* va = reinterpret_cast<const uint4*>(a + base);
        const uint4* vb = reinterpret_cast<const uint4*>(b + base);
        uint4* vo = reinterpret_cast<uint4*>(out + base);
        constexpr int kVectors = kElemsPerThread / kVec;
        uint4 x[kVectors], y[kVectors];
        // Every load first, then the stores: 2 x kVectors 16-byte loads in
        // flight per thread.
#pragma unroll
        for (int i = 0; i < kVectors; ++i) {
          x[i] = va[threadIdx.x + i * kThreads];
          y[i] = vb[threadIdx.x + i * kThreads];
        }
#pragma unroll
        for (int i = 0; i < kVectors; ++i) vo[threadIdx.x + i * kThreads] = add_vector<T>(x[i], y[i]);
        continue;
      }
    }
    // The last, partial tile (every tile when misaligned): element by
    // element, thread t taking t, t + 128, ... (coalesced).
#pragma unroll
    for (int i = 0; i < kElemsPerThread; ++i) {
      const std::int64_t j = base + threadIdx.x + static_cast<std::int64_t>(i) * kThreads;
      if (j < count) out[j] = add_values(a[j], b[j]);
    }
  }
}

namespace {

template <class T>
cudaError_t launch(const void* a, const void* b, void* out, std::int64_t count, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(add_blocks(count));
  const T* ta = static_cast<const T*>(a);
  const T* tb = static_cast<const T*>(b);
  T* to = static_cast<T*>(out);
  if (vector_width<T>(a, b, out) > 1) {
    add_kernel<kVectorBytes / static_cast<int>(sizeof(T)), T><<<blocks, kThreads, 0, stream>>>(ta, tb, to, count);
  } else {
    add_kernel<1, T><<<blocks, kThreads, 0, stream>>>(ta, tb, to, count);
  }
  return cudaGetLastError();
}

}  // namespace

std::int64_t add_blocks(std::int64_t count) {
  return count <= 0 ? 0 : std::min((count + kTile - 1) / kTile, kMaxBlocks);
}

int add_threads_per_block() { return kThreads; }

int add_vector_width(const void* a, const void* b, const void* out, bool bf16) {
  return bf16 ? vector_width<__nv_bfloat16>(a, b, out) : vector_width<float>(a, b, out);
}

cudaError_t launch_add(const void* a, const void* b, void* out, std::int64_t count, bool bf16, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  return bf16 ? launch<__nv_bfloat16>(a, b, out, count, stream) : launch<float>(a, b, out, count, stream);
}

}  // namespace matmul_add
