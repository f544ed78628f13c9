// cuda_capture_bench: what tprof's CUDA capture adds to the blog's 64x64
// matmul_add step, against the floor a bare CUPTI subscriber sets (same
// activity kinds, buffers discarded) and against no profiler at all.
//
//   build/bench/cuda_capture_bench [--size 64] [--dtype bf16|fp32] [--steps 2000] [--rounds 7]
//
// Each round runs the three modes back to back in one process (none, floor,
// tprof, in a rotating order); the medians over rounds of the mean step
// time are printed with the ratios the targets are stated in
// (bench/README.md): tprof's added cost per step <= 1.2x the floor's.
// torch.profiler and tprof record on the PyTorch loop: bench/record_cost.py.
// Needs a GPU; exits 2 with the reason without one.
#include <cupti.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda_ops.h"
#include "tensor.h"
#include "tprof/profiler.h"

namespace {

using Clock = std::chrono::steady_clock;

// The floor: the activity kinds tprof enables, buffers thrown away.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,  CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_OVERHEAD};

void CUPTIAPI floor_request(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *size = std::size_t{4} << 20;
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}
void CUPTIAPI floor_complete(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t) {
  std::free(buffer);
}

bool floor_start() {
  if (cuptiActivityRegisterCallbacks(floor_request, floor_complete) != CUPTI_SUCCESS) return false;
  for (CUpti_ActivityKind k : kKinds) cuptiActivityEnable(k);
  return true;
}
void floor_stop() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
}

enum class Mode { kNone, kFloor, kTprof };
const char* mode_name(Mode m) { return m == Mode::kNone ? "none" : m == Mode::kFloor ? "cupti floor" : "tprof"; }

// Mean ns per step of `steps` calls, the device drained at the end (inside
// the timing: device work that the profiler delays counts).
double run(matmul_add::CudaMatmulAdd& gpu, Mode mode, int steps) {
  std::unique_ptr<tprof::Profiler> prof;
  if (mode == Mode::kTprof) {
    prof = std::make_unique<tprof::Profiler>(tprof::ProfilerOptions{
        .activities = {tprof::Activity::kCpu, tprof::Activity::kCuda}});
    if (!prof->start().ok()) std::exit(1);
  } else if (mode == Mode::kFloor && !floor_start()) {
    std::fprintf(stderr, "cuda_capture_bench: CUPTI refused the floor subscriber\n");
    std::exit(1);
  }
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    if (!gpu.call().ok()) std::exit(1);
  }
  if (!gpu.synchronize().ok()) std::exit(1);
  const auto t1 = Clock::now();
  if (mode == Mode::kTprof) {
    static_cast<void>(prof->stop());
    if (!prof->trace().diagnostics.empty()) {
      for (const tprof::Diagnostic& d : prof->trace().diagnostics.items()) {
        std::fprintf(stderr, "cuda_capture_bench: tprof: %s\n", d.message.c_str());
      }
    }
  } else if (mode == Mode::kFloor) {
    floor_stop();
  }
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / steps;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t size = 64;
  int steps = 2000, rounds = 7;
  matmul_add::DType dtype = matmul_add::DType::kBf16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--size") size = std::atoll(value.c_str());
    else if (flag == "--steps") steps = std::atoi(value.c_str());
    else if (flag == "--rounds") rounds = std::atoi(value.c_str());
    else if (flag == "--dtype") dtype = value == "fp32" ? matmul_add::DType::kFp32 : matmul_add::DType::kBf16;
  }
  if (size <= 0 || steps <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: cuda_capture_bench [--size N] [--dtype bf16|fp32] [--steps N] [--rounds N]\n");
    return 2;
  }
  if (const std::string why = matmul_add::cuda_unavailable_reason(); !why.empty()) {
    std::fprintf(stderr, "cuda_capture_bench: %s\n", why.c_str());
    return 2;
  }
  // Zero-filled inputs: the timing does not depend on the values.
  matmul_add::Tensor x = matmul_add::Tensor::empty(1, size, size, dtype);
  matmul_add::Tensor w = matmul_add::Tensor::empty(1, size, size, dtype);
  matmul_add::Tensor b = matmul_add::Tensor::empty(1, size, size, dtype);
  for (matmul_add::Tensor* t : {&x, &w, &b}) std::memset(t->data(), 0, static_cast<std::size_t>(t->size_bytes()));
  auto gpu = matmul_add::CudaMatmulAdd::create(x, w, b, matmul_add::CudaMode::kEager);
  if (!gpu) {
    std::fprintf(stderr, "cuda_capture_bench: %s\n", gpu.error().to_string().c_str());
    return 1;
  }
  run(**gpu, Mode::kNone, steps);  // warm cuBLAS, the pool, the caches
  run(**gpu, Mode::kTprof, steps / 10 + 1);
  std::vector<double> t[3];
  const Mode order[3] = {Mode::kNone, Mode::kFloor, Mode::kTprof};
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 3; ++k) {
      const Mode m = order[(k + r) % 3];
      t[static_cast<int>(m)].push_back(run(**gpu, m, steps));
    }
  }
  const double none = median(t[0]), floor = median(t[1]), tprof = median(t[2]);
  std::printf("matmul_add eager %lldx%lld, %d steps x %d rounds, median of per-round means\n",
              static_cast<long long>(size), static_cast<long long>(size), steps, rounds);
  for (Mode m : order) std::printf("  %-12s %10.1f ns/step\n", mode_name(m), median(t[static_cast<int>(m)]));
  std::printf("  added by the cupti floor: %.1f ns/step\n", floor - none);
  std::printf("  added by tprof:           %.1f ns/step (%.2fx the floor; target <= 1.2x)\n", tprof - none,
              floor > none ? (tprof - none) / (floor - none) : 0.0);
  static_cast<void>((*gpu)->close());
  return 0;
}
