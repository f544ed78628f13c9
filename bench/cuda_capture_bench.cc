// cuda_capture_bench: what tprof's CUDA capture adds to the blog's 64x64
// matmul_add step, against the floor CUPTI itself sets with tprof's
// settings (tprof's source, records discarded unread) and against no
// profiler at all.
//
//   build/bench/cuda_capture_bench [--size 64] [--dtype bf16|fp32] [--steps 2000] [--rounds 7]
//
// Each round runs the three modes back to back in one process (none, floor,
// tprof, in a rotating order); each mode's added cost is taken against the
// same round's none, and the medians over rounds are printed with the
// ratio the target is stated in (bench/README.md): tprof's added cost per
// step <= 1.2x the floor's. --json prints each round's figures instead, one
// line each (bench/record_cost.py reads them).
// torch.profiler and tprof record on the PyTorch loop: bench/record_cost.py.
// Needs a GPU; exits 2 with the reason without one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cuda_ops.h"
#include "tensor.h"
#include "src/capture/activity_source.h"
#include "src/cupti/cupti_source.h"
#include "tprof/profiler.h"
#include "tprof/record_function.h"

namespace {

using Clock = std::chrono::steady_clock;

// The floor: tprof's own CUPTI source asking CUPTI exactly what a
// Profiler window asks (the subscriber, the NVTX domain and graph-node
// callbacks with hooks that do nothing, system thread ids, the timestamp
// callback, the same buffers, the same activity kinds and per-call API
// switches, chosen by the same code), every buffer handed back unread
// (CuptiOptions::discard_records): what CUPTI costs with tprof's settings,
// without tprof's conversion and recording.
void noop_push(std::string_view) noexcept {}
void noop_pop() noexcept {}
void noop_start(std::uint64_t, std::string_view) noexcept {}
void noop_end(std::uint64_t) noexcept {}
void noop_created(std::uint64_t) noexcept {}
void noop_cloned(std::uint64_t, std::uint64_t) noexcept {}
constexpr tprof::internal::NvtxRanges kNoRanges{noop_push, noop_pop, noop_start, noop_end};
constexpr tprof::internal::GraphNodes kNoNodes{noop_created, noop_cloned};

std::unique_ptr<tprof::internal::ActivitySource> floor_source() {
  tprof::internal::CuptiOptions options;  // a Profiler's defaults: torch's API calls, no syncs, no memory
  options.nvtx = &kNoRanges;
  options.graph_nodes = &kNoNodes;
  options.discard_records = true;
  return std::unique_ptr<tprof::internal::ActivitySource>(tprof_make_cuda_source(options));
}

enum class Mode { kNone, kFloor, kTprof };
const char* mode_name(Mode m) { return m == Mode::kNone ? "none" : m == Mode::kFloor ? "cupti floor" : "tprof"; }

// Mean ns per step of `steps` calls, the device drained at the end (inside
// the timing: device work that the profiler delays counts). Each step is
// the blog's record_function("matmul_add") around the ops (the example's
// aten::matmul > aten::mm and aten::add scopes, with shapes). tprof: the
// events its window recorded per step, in *events_per_step.
double run(matmul_add::CudaMatmulAdd& gpu, Mode mode, int steps, double* events_per_step = nullptr) {
  std::unique_ptr<tprof::Profiler> prof;
  std::unique_ptr<tprof::internal::ActivitySource> floor;
  if (mode == Mode::kTprof) {
    prof = std::make_unique<tprof::Profiler>(tprof::ProfilerOptions{
        .activities = {tprof::Activity::kCpu, tprof::Activity::kCuda}});
    if (!prof->start().ok()) std::exit(1);
  } else if (mode == Mode::kFloor) {
    floor = floor_source();
    if (const tprof::Status s = floor->start(); !s.ok()) {
      std::fprintf(stderr, "cuda_capture_bench: CUPTI refused the floor: %s\n", s.error().to_string().c_str());
      std::exit(1);
    }
  }
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    TPROF_RECORD_FUNCTION("matmul_add");
    if (!gpu.call().ok()) std::exit(1);
  }
  if (!gpu.synchronize().ok()) std::exit(1);
  const auto t1 = Clock::now();
  if (mode == Mode::kTprof) {
    static_cast<void>(prof->stop());
    if (events_per_step != nullptr) *events_per_step = static_cast<double>(prof->trace().events.size()) / steps;
    if (!prof->trace().diagnostics.empty()) {
      for (const tprof::Diagnostic& d : prof->trace().diagnostics.items()) {
        std::fprintf(stderr, "cuda_capture_bench: tprof: %s\n", d.message.c_str());
      }
    }
  } else if (mode == Mode::kFloor) {
    tprof::internal::DeviceBatch discarded;
    floor->stop(&discarded);
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
  bool json = false;
  matmul_add::DType dtype = matmul_add::DType::kBf16;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--json") {
      json = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) break;
    const std::string value = argv[i + 1];
    if (flag == "--size") size = std::atoll(value.c_str());
    else if (flag == "--steps") steps = std::atoi(value.c_str());
    else if (flag == "--rounds") rounds = std::atoi(value.c_str());
    else if (flag == "--dtype") dtype = value == "fp32" ? matmul_add::DType::kFp32 : matmul_add::DType::kBf16;
  }
  if (size <= 0 || steps <= 0 || rounds <= 0) {
    std::fprintf(stderr,
                 "usage: cuda_capture_bench [--size N] [--dtype bf16|fp32] [--steps N] [--rounds N] [--json]\n");
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
  std::vector<double> t[3], events;
  const Mode order[3] = {Mode::kNone, Mode::kFloor, Mode::kTprof};
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 3; ++k) {
      const Mode m = order[(k + r) % 3];
      double per_step = 0;
      t[static_cast<int>(m)].push_back(run(**gpu, m, steps, &per_step));
      if (m == Mode::kTprof) events.push_back(per_step);
    }
  }
  if (json) {
    // One line per round, for bench/record_cost.py: ns per step of each mode.
    for (int r = 0; r < rounds; ++r) {
      std::printf("{\"round\": %d, \"none\": %.1f, \"floor\": %.1f, \"tprof\": %.1f, \"tprof_events_per_step\": %.2f}\n",
                  r, t[0][r], t[1][r], t[2][r], events[r]);
    }
  } else {
    // Added costs per round, each mode against the same round's none.
    std::vector<double> added_floor, added_tprof;
    for (int r = 0; r < rounds; ++r) {
      added_floor.push_back(t[1][r] - t[0][r]);
      added_tprof.push_back(t[2][r] - t[0][r]);
    }
    const auto spread = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return std::make_pair(v.front(), v.back());
    };
    const double floor = median(added_floor), tprof = median(added_tprof);
    std::printf("matmul_add eager %lldx%lld, %d steps x %d rounds, median of per-round means\n",
                static_cast<long long>(size), static_cast<long long>(size), steps, rounds);
    for (Mode m : order) std::printf("  %-12s %10.1f ns/step\n", mode_name(m), median(t[static_cast<int>(m)]));
    const auto [fl, fh] = spread(added_floor);
    const auto [tl, th] = spread(added_tprof);
    std::printf("  added by the cupti floor: %.1f ns/step (per round %.1f to %.1f)\n", floor, fl, fh);
    std::printf("  added by tprof:           %.1f ns/step (per round %.1f to %.1f; %.2fx the floor; target <= 1.2x)\n",
                tprof, tl, th, floor > 0 ? tprof / floor : 0.0);
    std::printf("  tprof recorded %.1f events per step\n", median(events));
  }
  static_cast<void>((*gpu)->close());
  return 0;
}
