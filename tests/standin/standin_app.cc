// standin_app: a CUDA program for the stand-ins (tests/standin/README.md),
// shaped like what tprof record meets: PyTorch's per-step calls, NVTX
// ranges, CUDA graphs, Triton's driver-API launches, torchrun's children,
// several threads, and every way a process ends.
//
//   standin_app [--steps N] [--run-ms T] [--stop-file PATH] [--nvtx] [--nvtx-early] [--graph] [--triton]
//               [--threads K] [--children N] [--no-sync] [--gemm-us US] [--step-sleep-us US]
//               [--linger-ms T] [--memory]
//               [--exit return|exit|exit-thread|python|sigint|sigint-python|sigterm|throw|_exit]
//
// It prints "standin_app done" (flushed) once its work is done, before the
// exit path starts. Exit status: return 0, exit 10, exit-thread 11, python
// 12, _exit 13; sigint / sigint-python / sigterm die of that signal, throw
// of SIGABRT; 2 for bad options, 3 when a CUDA call fails; --children: the
// worst child's (128 + signal for a signal).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/standin/standin.h"

extern char** environ;

extern "C" __attribute__((visibility("default"))) int Py_AtExit(void (*func)());

namespace {

struct Options {
  std::string exit_mode = "return";
  int steps = 20;
  int run_ms = 0;
  std::string stop_file;
  int threads = 1;
  int children = 0;
  bool nvtx = false;
  bool nvtx_early = false;
  bool graph = false;
  bool triton = false;
  bool sync = true;
  int gemm_us = 0;  // 0: the GEMM's 2.1 us
  int step_sleep_us = 0;  // sleep this long after each step (other work between steps)
  int linger_ms = 0;  // sleep this long after the work, before the exit path
  bool memory = false;  // plant what tprof memory should find (plant_memory)
};

// --memory: each step leaks kLeakBytes (cudaMalloc, never freed), takes
// kSpikeBytes and gives them back (cudaMalloc, a memset, cudaFree), and
// takes kPooledBytes from the device's default pool and gives them back
// (cudaMallocAsync, a memset, cudaFreeAsync: the pool keeps 6 MiB, three
// 2 MiB granules); kPinnedBytes of pinned host memory (cudaMallocHost)
// live from before the first step to after the last. The sizes are
// distinct, so that a test tells each allocation by its size.
constexpr std::size_t kLeakBytes = std::size_t{3} << 20;
constexpr std::size_t kSpikeBytes = std::size_t{64} << 20;
constexpr std::size_t kPooledBytes = std::size_t{5} << 20;
constexpr std::size_t kPinnedBytes = std::size_t{2} << 20;

// Host stubs standing in for __global__ functions, named as nvcc would
// register them (the names an H100 trace of matmul_add shows).
void gemm_stub() {}
void add_stub() {}
constexpr const char kGemmName[] = "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT";
constexpr const char kAddName[] = "_ZN10matmul_add10add_kernelI13__nv_bfloat16EEvPKT_S4_PS2_l";

// As nvcc's generated constructor does: before main, without a driver.
struct RegisterKernels {
  RegisterKernels() {
    standin_register_kernel(reinterpret_cast<const void*>(&gemm_stub), kGemmName, 2100);
    standin_register_kernel(reinterpret_cast<const void*>(&add_stub), kAddName, 1300);
  }
} g_register_kernels;

[[noreturn]] void die(const char* what, int e) {
  std::fprintf(stderr, "standin_app: %s failed: %d\n", what, e);
  std::fflush(nullptr);
  _exit(3);
}

// Set once another thread has called exit(): CUDA is going away under
// this one, and its errors are expected.
std::atomic<bool> g_exiting{false};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess && !g_exiting.load()) die(what, static_cast<int>(e));
}
void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS && !g_exiting.load()) die(what, static_cast<int>(r));
}

// The driver entry points a PyTorch / Triton process reaches without
// linking libcuda (cudaGetDriverEntryPoint, or Triton's own dlopen).
struct DriverApi {
  decltype(&cuKernelGetAttribute) kernel_get_attribute = nullptr;
  decltype(&cuLaunchKernel) launch_kernel = nullptr;
  decltype(&cuLaunchKernelEx) launch_kernel_ex = nullptr;
  CUfunction (*get_function)(const char*, std::int64_t) = nullptr;
  CUfunction gemm = nullptr, triton_add = nullptr, triton_sum = nullptr;
};

DriverApi load_driver_api() {
  DriverApi d;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) die("dlopen(libcuda.so.1)", 0);
  d.kernel_get_attribute = reinterpret_cast<decltype(d.kernel_get_attribute)>(dlsym(h, "cuKernelGetAttribute"));
  d.launch_kernel = reinterpret_cast<decltype(d.launch_kernel)>(dlsym(h, "cuLaunchKernel"));
  d.launch_kernel_ex = reinterpret_cast<decltype(d.launch_kernel_ex)>(dlsym(h, "cuLaunchKernelEx"));
  d.get_function = reinterpret_cast<decltype(d.get_function)>(dlsym(h, "standin_get_function"));
  if (!d.kernel_get_attribute || !d.launch_kernel || !d.launch_kernel_ex || !d.get_function) die("dlsym", 0);
  d.gemm = d.get_function(kGemmName, 2100);
  d.triton_add = d.get_function("triton_poi_fused_add_0", 1500);
  d.triton_sum = d.get_function("triton_red_fused_sum_1", 1800);
  return d;
}

// --memory's allocations of one step, on stream `s` (see kLeakBytes).
void plant_memory(cudaStream_t s) {
  void* leak = nullptr;
  check(cudaMalloc(&leak, kLeakBytes), "cudaMalloc");
  void* spike = nullptr;
  check(cudaMalloc(&spike, kSpikeBytes), "cudaMalloc");
  check(cudaMemsetAsync(spike, 0, 4096, s), "cudaMemsetAsync");
  check(cudaFree(spike), "cudaFree");
  void* pooled = nullptr;
  check(cudaMallocAsync(&pooled, kPooledBytes, s), "cudaMallocAsync");
  check(cudaMemsetAsync(pooled, 0, 4096, s), "cudaMemsetAsync");
  check(cudaFreeAsync(pooled, s), "cudaFreeAsync");
}

// One matmul_add step as PyTorch runs it: a GEMM and an add, and the calls
// PyTorch makes around them every step.
void step(const Options& o, const DriverApi& d, cudaStream_t s, int i) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  if (o.nvtx) nvtxRangePushA("step");
  check(cudaGetDevice(&device), "cudaGetDevice");
  void* no_args[1] = {nullptr};
  check(cudaLaunchKernel(reinterpret_cast<const void*>(&gemm_stub), dim3(4, 2, 1), dim3(384, 1, 1), no_args, 0, s),
        "cudaLaunchKernel");
  int attr = 0;
  check(d.kernel_get_attribute(&attr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, reinterpret_cast<CUkernel>(d.gemm), 0),
        "cuKernelGetAttribute");
  check(d.kernel_get_attribute(&attr, CU_FUNC_ATTRIBUTE_NUM_REGS, reinterpret_cast<CUkernel>(d.gemm), 0),
        "cuKernelGetAttribute");
  if (o.triton) {
    // Inductor's generated code: cuLaunchKernel, and cuLaunchKernelEx for
    // kernels with launch attributes.
    check(d.launch_kernel(d.triton_add, 16, 1, 1, 128, 1, 1, 0, s, no_args, nullptr), "cuLaunchKernel");
    if (i % 2 == 1) {
      CUlaunchConfig config{};
      config.gridDimX = 8;
      config.gridDimY = config.gridDimZ = 1;
      config.blockDimX = 256;
      config.blockDimY = config.blockDimZ = 1;
      config.hStream = s;
      check(d.launch_kernel_ex(&config, d.triton_sum, no_args, nullptr), "cuLaunchKernelEx");
    }
  } else {
    check(cudaLaunchKernel(reinterpret_cast<const void*>(&add_stub), dim3(16, 1, 1), dim3(256, 1, 1), no_args, 0, s),
          "cudaLaunchKernel");
  }
  static_cast<void>(cudaGetLastError());
  if (o.memory) plant_memory(s);
  if (o.nvtx) nvtxRangePop();
}

// Step i of a loop started at `start`: the first --steps always, then
// more while --run-ms has not passed and --stop-file does not exist.
bool keep_stepping(const Options& o, std::chrono::steady_clock::time_point start, int i) {
  if (i < o.steps) return true;
  if (o.run_ms <= 0 || std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(o.run_ms)) return false;
  return o.stop_file.empty() || i % 64 != 0 || access(o.stop_file.c_str(), F_OK) != 0;
}

// --step-sleep-us: the host's other work between steps.
void between_steps(const Options& o) {
  if (o.step_sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(o.step_sleep_us));
}

void run_steps(const Options& o, const DriverApi& d, cudaStream_t s) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; keep_stepping(o, start, i); ++i) {
    step(o, d, s, i);
    between_steps(o);
  }
}

// K kernels captured into a graph inside NVTX ranges, the graph replayed
// once per step.
void run_graph(const Options& o) {
  cudaStream_t s = nullptr;
  check(cudaStreamCreate(&s), "cudaStreamCreate");
  if (o.nvtx) nvtxRangePushA("capture");
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  void* no_args[1] = {nullptr};
  for (int k = 0; k < 3; ++k) {
    if (o.nvtx) nvtxRangePushA(k % 2 == 0 ? "graph_gemm" : "graph_add");
    const void* fn = k % 2 == 0 ? reinterpret_cast<const void*>(&gemm_stub) : reinterpret_cast<const void*>(&add_stub);
    check(cudaLaunchKernel(fn, dim3(4, 2, 1), dim3(256, 1, 1), no_args, 0, s), "cudaLaunchKernel");
    if (o.nvtx) nvtxRangePop();
  }
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
  if (o.nvtx) nvtxRangePop();
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; keep_stepping(o, start, i); ++i) {
    if (o.nvtx) nvtxRangePushA("replay");
    check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    if (o.nvtx) nvtxRangePop();
    between_steps(o);
  }
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  check(cudaGraphDestroy(graph), "cudaGraphDestroy");
}

// ---- Python-like exit --------------------------------------------------------------
//
// A library loaded at startup (libtorch) registers exit handlers before
// CUDA exists and frees device memory in them; thread_local objects with
// CUDA work in their destructors run first (glibc: before atexit handlers).
void* g_python_buffer = nullptr;

void python_atexit() {
  // CUDA is usually torn down by now: these return errors, as in PyTorch.
  static_cast<void>(cudaFree(g_python_buffer));
  static_cast<void>(cudaDeviceSynchronize());
}

struct ThreadLocalCudaUser {
  bool armed = false;
  ~ThreadLocalCudaUser() {
    if (!armed) return;
    int device = 0;
    static_cast<void>(cudaGetDevice(&device));
    static_cast<void>(cudaStreamSynchronize(nullptr));
  }
};
thread_local ThreadLocalCudaUser tl_cuda_user;

std::atomic<bool> g_sigint{false};

// CPython's Py_AtExit (exported by the python3 executable): functions run
// last-registered first at the end of Py_FinalizeEx, before the process
// exits or, after a KeyboardInterrupt, kills itself with SIGINT. At most 32.
void (*g_py_exit_funcs[32])() = {};
int g_py_exit_count = 0;
void py_finalize() {
  while (g_py_exit_count > 0) g_py_exit_funcs[--g_py_exit_count]();
}

// ---- torchrun-like parent --------------------------------------------------------------

int run_children(int argc, char** argv, int n) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--children") == 0) {
      ++i;
      continue;
    }
    args.emplace_back(argv[i]);
  }
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "RANK=", 5) != 0 && std::strncmp(*e, "LOCAL_RANK=", 11) != 0 &&
          std::strncmp(*e, "WORLD_SIZE=", 11) != 0) {
        env_strings.emplace_back(*e);
      }
    }
    env_strings.push_back("RANK=" + std::to_string(rank));
    env_strings.push_back("LOCAL_RANK=" + std::to_string(rank));
    env_strings.push_back("WORLD_SIZE=" + std::to_string(n));
    std::vector<char*> env, av;
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    for (std::string& s : args) av.push_back(s.data());
    av.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, av.data(), env.data()) != 0) die("posix_spawn", errno);
    pids.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : pids) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const int code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    worst = std::max(worst, code);
  }
  std::printf("standin_app parent done (%d children)\n", n);
  std::fflush(stdout);
  return worst;
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](int* out) {
      if (i + 1 >= argc) return false;
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || v < 0) return false;
      *out = static_cast<int>(v);
      return true;
    };
    if (a == "--steps") {
      if (!value(&o->steps)) return false;
    } else if (a == "--run-ms") {
      if (!value(&o->run_ms)) return false;
    } else if (a == "--stop-file" && i + 1 < argc) {
      o->stop_file = argv[++i];
    } else if (a == "--threads") {
      if (!value(&o->threads) || o->threads < 1) return false;
    } else if (a == "--children") {
      if (!value(&o->children)) return false;
    } else if (a == "--nvtx") {
      o->nvtx = true;
    } else if (a == "--memory") {
      o->memory = true;
    } else if (a == "--nvtx-early") {
      o->nvtx_early = true;
    } else if (a == "--graph") {
      o->graph = true;
    } else if (a == "--triton") {
      o->triton = true;
    } else if (a == "--no-sync") {
      o->sync = false;
    } else if (a == "--gemm-us" && i + 1 < argc) {
      o->gemm_us = std::atoi(argv[++i]);
    } else if (a == "--step-sleep-us" && i + 1 < argc) {
      o->step_sleep_us = std::atoi(argv[++i]);
    } else if (a == "--linger-ms" && i + 1 < argc) {
      o->linger_ms = std::atoi(argv[++i]);
    } else if (a == "--exit" && i + 1 < argc) {
      o->exit_mode = argv[++i];
      static const char* const kModes[] = {"return",        "exit",    "exit-thread", "python", "sigint",
                                           "sigint-python", "sigterm", "throw",       "_exit"};
      bool known = false;
      for (const char* m : kModes) known |= o->exit_mode == m;
      if (!known) return false;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::fprintf(
        stderr,
        "usage: standin_app [--steps N] [--run-ms T] [--stop-file PATH] [--nvtx] [--nvtx-early] [--graph] [--triton] "
        "[--threads K] [--children N] [--no-sync] [--gemm-us US] [--step-sleep-us US] [--linger-ms T] "
        "[--memory] [--exit MODE]\n");
    return 2;
  }
  if (o.children > 0) return run_children(argc, argv, o.children);  // the parent never touches CUDA
  if (o.gemm_us > 0) {
    // A GPU-bound step: the device is still busy when the program ends.
    standin_register_kernel(reinterpret_cast<const void*>(&gemm_stub), kGemmName, std::int64_t{o.gemm_us} * 1000);
  }

  if (o.exit_mode == "python") std::atexit(python_atexit);  // before CUDA, as libtorch's statics
  if (o.exit_mode == "sigint-python") {
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_sigint.store(true); };
    sigaction(SIGINT, &sa, nullptr);
  }
  if (o.nvtx_early) {
    // NVTX before CUDA: NVTX's injection loads libcupti now.
    nvtxRangePushA("early");
    nvtxRangePop();
  }

  // The first runtime call initializes CUDA (cuInit: the injection runs).
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  void* buffer = nullptr;
  check(cudaMalloc(&buffer, 1 << 20), "cudaMalloc");
  check(cudaMemset(buffer, 0, 1 << 20), "cudaMemset");
  const DriverApi d = load_driver_api();
  if (o.exit_mode == "python") {
    check(cudaMalloc(&g_python_buffer, 4096), "cudaMalloc");
    tl_cuda_user.armed = true;
  }

  void* pinned = nullptr;
  if (o.memory) check(cudaMallocHost(&pinned, kPinnedBytes), "cudaMallocHost");

  nvtxRangeId_t measure = 0;
  if (o.nvtx) measure = nvtxRangeStartA("measure");
  if (o.graph) {
    run_graph(o);
  } else if (o.threads > 1) {
    std::vector<std::thread> workers;
    for (int t = 0; t < o.threads; ++t) {
      workers.emplace_back([&] {
        cudaStream_t s = nullptr;
        check(cudaStreamCreate(&s), "cudaStreamCreate");
        run_steps(o, d, s);
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      });
    }
    for (std::thread& w : workers) w.join();
  } else {
    run_steps(o, d, nullptr);
  }
  if (o.sync) check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (o.nvtx) nvtxRangeEnd(measure);
  if (o.sync) {
    // A synchronous copy waits for the stream: --no-sync leaves work queued.
    char host[64];
    check(cudaMemcpy(host, buffer, sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  if (o.memory) check(cudaFreeHost(pinned), "cudaFreeHost");

  std::printf("standin_app done\n");
  std::fflush(stdout);
  if (o.linger_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.linger_ms));

  const std::string& m = o.exit_mode;
  if (m == "exit") std::exit(10);
  if (m == "python") {
    py_finalize();
    std::exit(12);
  }
  if (m == "_exit") _exit(13);
  if (m == "throw") throw std::runtime_error("standin_app: --exit throw");
  if (m == "sigint" || m == "sigterm") {
    // Mid-run: more work queued, then the signal, default disposition.
    run_steps(o, d, nullptr);
    kill(getpid(), m == "sigint" ? SIGINT : SIGTERM);
    for (;;) pause();
  }
  if (m == "sigint-python") {
    // Python: the handler sets a flag, the interpreter raises
    // KeyboardInterrupt, finalizes, and then dies of SIGINT (no C exit handlers).
    kill(getpid(), SIGINT);
    while (!g_sigint.load()) std::this_thread::yield();
    std::fprintf(stderr, "KeyboardInterrupt\n");
    std::fflush(nullptr);
    py_finalize();
    signal(SIGINT, SIG_DFL);
    kill(getpid(), SIGINT);
    for (;;) pause();
  }
  if (m == "exit-thread") {
    // Another thread exits while this one still launches work.
    g_exiting.store(true);
    std::thread([] { std::exit(11); }).detach();
    for (int i = 0;; ++i) step(o, d, nullptr, i);
  }
  return 0;
}

extern "C" int Py_AtExit(void (*func)()) {
  if (g_py_exit_count >= 32) return -1;
  g_py_exit_funcs[g_py_exit_count++] = func;
  return 0;
}
