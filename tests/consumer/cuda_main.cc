// A C++17 program that records CUDA kernels through tprof's CUDA capture
// component (find_package(tprof COMPONENTS cuda) and tprof::cuda, or
// pkg-config tprof-cuda): the consumer test builds it against an installed
// tprof and the CUDA stand-in (tests/standin: the program links its
// libcudart, and tprof loads its libcupti through TPROF_CUPTI_LIBRARY),
// runs it and reads its trace back; tests/standin builds it against the
// shared libraries with --as-needed. It checks itself that its one window
// holds its three kernels and no activity_unavailable diagnostic (a program
// without the component gets "does not link tprof's CUDA capture" there).
//
//   consumer_cuda TRACE.json
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "../standin/standin.h"
#include "tprof/profiler.h"
#include "tprof/record_function.h"

static_assert(__cplusplus == 201703L, "this consumer is built as C++17");

namespace {

constexpr int kLaunches = 3;
constexpr const char kKernel[] = "consumer_scale_kernel";

void scale_stub() {}

// As nvcc's registration code does: before main.
const int g_registered = standin_register_kernel(reinterpret_cast<const void*>(&scale_stub), kKernel, 1500);

int scale(cudaStream_t s) {
  TPROF_RECORD_FUNCTION("scale");
  void* no_args[1] = {nullptr};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&scale_stub), dim3(8, 1, 1), dim3(128, 1, 1), no_args, 0, s);
}

tprof::Status run(const std::string& path, std::size_t* kernels) {
  tprof::ProfilerOptions options;
  options.activities = {tprof::Activity::kCpu, tprof::Activity::kCuda};
  tprof::Profiler prof(options);
  TPROF_TRY(prof.start());
  for (int i = 0; i < kLaunches; ++i) {
    if (scale(nullptr) != cudaSuccess) return tprof::Error(tprof::ErrorCode::kInternal, "cudaLaunchKernel failed");
  }
  if (cudaDeviceSynchronize() != cudaSuccess) {
    return tprof::Error(tprof::ErrorCode::kInternal, "cudaDeviceSynchronize failed");
  }
  TPROF_TRY(prof.stop());
  const tprof::Trace& t = prof.trace();
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    *kernels += t.events.kind[e] == tprof::EventKind::kKernel && t.name(e) == std::string_view(kKernel);
  }
  for (const tprof::Diagnostic& d : t.diagnostics.items()) {
    if (d.code == tprof::DiagnosticCode::kActivityUnavailable) {
      std::fprintf(stderr, "consumer_cuda: activity unavailable: %s\n", d.message.c_str());
    }
  }
  if (t.diagnostics.count(tprof::DiagnosticCode::kActivityUnavailable) != 0) {
    return tprof::Error(tprof::ErrorCode::kUnsupported, "the window recorded no CUDA activity");
  }
  return prof.export_chrome_trace(path);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "consumer_cuda_trace.json";
  if (g_registered != 0) {
    std::fprintf(stderr, "consumer_cuda: standin_register_kernel failed (%d)\n", g_registered);
    return 2;
  }
  std::size_t kernels = 0;
  const tprof::Status s = run(path, &kernels);
  if (!s.ok()) {
    std::fprintf(stderr, "consumer_cuda: %s\n", s.error().to_string().c_str());
    return 2;
  }
  std::printf("consumer_cuda: %zu %s kernels recorded; wrote %s\n", kernels, kKernel, path.c_str());
  return kernels == kLaunches ? 0 : 1;
}
