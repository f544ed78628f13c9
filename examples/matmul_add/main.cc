// matmul_add — the C++ port of the blog's 01_matmul_add.py: profiles
// torch.add(torch.matmul(x, w), b) for one warmup and 20 active steps and
// writes what the script writes, through tprof's public capture API only.
//
//   matmul_add --size 1024 --dtype fp32 --warmup --compile
//   -> ./traces/01_matmul_add/1024_fp32_warm_compile.json  (Chrome trace)
//      ./traces/01_matmul_add/1024_fp32_warm_compile.txt   (key_averages().table())
//   matmul_add --device cuda --warmup --fused
//   -> ./traces/01_matmul_add/64_bf16_warm_fused.json / .txt
//
// --device cpu runs OpenBLAS (ops.h); --device cuda runs cuBLAS/cuBLASLt and
// one kernel of ours (cuda_ops.h) in a build that found the CUDA toolkit.
//
// Exit status: 0 done, 1 the profiler or a file failed, 2 bad arguments or
// an unavailable device.
#include <cblas.h>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bf16.h"
#if MATMUL_ADD_WITH_CUDA
#include "cuda_ops.h"
#endif
#include "ops.h"
#include "tensor.h"
#include "tprof/profiler.h"
#include "tprof/profiler_tables.h"
#include "tprof/record_function.h"

namespace matmul_add {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
// The blog's --warmup: this many untimed calls before profiling starts.
constexpr int kWarmupCalls = 3;

constexpr std::string_view kUsage =
    "usage: matmul_add [--size N] [--dtype bf16|fp32] [--warmup] [--compile | --fused] [--batch N]\n"
    "                  [--device cpu|cuda] [--trace-dir DIR] [--steps N]\n"
    "  --size N         x, w and b are N x N (default 64)\n"
    "  --dtype T        bf16 (default) or fp32\n"
    "  --warmup         3 untimed calls before profiling (file name: warm, else cold)\n"
    "  --compile        the fused path torch.compile runs: addmm (bias copy + one GEMM)\n"
    "  --fused          cuda only: one cuBLASLt GEMM computing x.w + b, no copy (file name: fused)\n"
    "  --batch N        N independent N x N GEMMs per call, like torch.bmm (default 1: torch.mm)\n"
    "  --device D       cpu (default, OpenBLAS) or cuda (cuBLAS/cuBLASLt on device 0)\n"
    "  --trace-dir DIR  where the .json and .txt go (default ./traces/01_matmul_add)\n"
    "  --steps N        active steps recorded (default 20)\n";

struct Options {
  std::int64_t size = 64;
  DType dtype = DType::kBf16;
  bool warmup = false;
  bool compile = false;
  bool fused = false;
  std::int64_t batch = 1;
  std::string device = "cpu";
  std::string trace_dir = "./traces/01_matmul_add";
  int steps = 20;
};

// Parses a positive decimal integer that fits `T`; nothing else is accepted.
template <class T>
std::optional<T> parse_positive(std::string_view text) {
  T value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

// Returns the options, or an error message for the usage line.
std::optional<Options> parse_args(int argc, char** argv, std::string& error) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--warmup") {
      o.warmup = true;
      continue;
    }
    if (flag == "--compile") {
      o.compile = true;
      continue;
    }
    if (flag == "--fused") {
      o.fused = true;
      continue;
    }
    if (i + 1 >= argc) {
      error = "unknown flag or missing value: " + std::string(flag);
      return std::nullopt;
    }
    const std::string_view value = argv[++i];
    bool ok = true;
    if (flag == "--size") {
      const auto v = parse_positive<std::int64_t>(value);
      ok = v.has_value();
      if (ok) o.size = *v;
    } else if (flag == "--batch") {
      const auto v = parse_positive<std::int64_t>(value);
      ok = v.has_value();
      if (ok) o.batch = *v;
    } else if (flag == "--steps") {
      const auto v = parse_positive<int>(value);
      ok = v.has_value();
      if (ok) o.steps = *v;
    } else if (flag == "--dtype") {
      ok = value == "bf16" || value == "fp32";
      o.dtype = value == "fp32" ? DType::kFp32 : DType::kBf16;
    } else if (flag == "--device") {
      ok = value == "cpu" || value == "cuda";
      o.device = value;
    } else if (flag == "--trace-dir" || flag == "--trace_dir") {  // --trace_dir: the script's spelling
      o.trace_dir = value;
    } else {
      error = "unknown flag: " + std::string(flag);
      return std::nullopt;
    }
    if (!ok) {
      error = "bad value for " + std::string(flag) + ": " + std::string(value);
      return std::nullopt;
    }
  }
  // On the CPU, CBLAS's GEMM accumulates into C in place (C = A·B + beta·C)
  // and has no separate output, so a "fused" CPU run would be --compile's
  // copy + GEMM again: --fused exists for cuBLASLt's D = A·B + C only.
  if (o.fused && o.compile) {
    error = "--fused and --compile are different paths: give one";
    return std::nullopt;
  }
  if (o.fused && o.device != "cuda") {
    error = "--fused needs --device cuda (cuBLASLt's D = A*B + C; on the CPU it would be --compile's copy + GEMM)";
    return std::nullopt;
  }
  return o;
}

// Fills `t` with standard normal values (torch.randn), fixed seed.
void fill_randn(Tensor& t, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const float v = dist(gen);
    if (t.dtype() == DType::kFp32) {
      t.f32()[i] = v;
    } else {
      t.bf16()[i] = bf16_from_float(v);
    }
  }
}

// What eager PyTorch runs for torch.add(torch.matmul(x, w), b).
Tensor eager_matmul_add(const Tensor& x, const Tensor& w, const Tensor& b) { return add(matmul(x, w), b); }

// What torch.compile turns it into: one fused addmm (baddbmm when batched),
// whose bias copy and GEMM are the two operations the blog still saw.
Tensor compiled_matmul_add(const Tensor& x, const Tensor& w, const Tensor& b) {
  return x.rank() == 2 ? addmm(b, x, w) : baddbmm(b, x, w);
}

// The output name without extension: <size>_<dtype>_<cold|warm>_<eager|compile|fused>,
// prefixed bmm<N>x when batched, as the torch fixtures in tests/data name theirs.
std::string output_stem(const Options& o) {
  std::string stem = o.batch > 1 ? "bmm" + std::to_string(o.batch) + "x" : "";
  stem += std::to_string(o.size) + "_" + dtype_name(o.dtype);
  stem += o.warmup ? "_warm" : "_cold";
  stem += o.fused ? "_fused" : o.compile ? "_compile" : "_eager";
  return stem;
}

tprof::Status write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return tprof::Error(tprof::ErrorCode::kIo, "cannot write the table", path);
  return {};
}

// The script's profiler: schedule(wait=0, warmup=1, active=steps, repeat=1),
// record_shapes and profile_memory.
tprof::ProfilerOptions profiler_options(const Options& o, std::vector<tprof::Activity> activities) {
  return {.activities = std::move(activities),
          .schedule = tprof::schedule({.wait = 0, .warmup = 1, .active = o.steps, .repeat = 1}),
          .record_shapes = true,
          .profile_memory = true};
}

// Runs the profiled loop: `call` (returning a Status) once per step inside
// record_function("matmul_add"), then prof.step().
template <class Call>
tprof::Status record_steps(tprof::Profiler& prof, const Options& o, Call&& call) {
  TPROF_TRY(prof.start());
  // One profiler-warmup step, then the active ones; the window's trace is
  // complete when the last step() leaves it.
  for (int i = 0; i < 1 + o.steps; ++i) {
    {
      TPROF_RECORD_FUNCTION("matmul_add");
      TPROF_TRY(call());
    }
    TPROF_TRY(prof.step());
  }
  return prof.stop();
}

// Writes <stem>.json and <stem>.txt, the table sorted by `sort_by`.
tprof::Status write_outputs(const tprof::Profiler& prof, const Options& o, const std::string& sort_by) {
  std::error_code ec;
  std::filesystem::create_directories(o.trace_dir, ec);
  if (ec) return tprof::Error(tprof::ErrorCode::kIo, "cannot create the trace directory: " + ec.message(), o.trace_dir);
  const std::string base = (std::filesystem::path(o.trace_dir) / output_stem(o)).string();
  TPROF_TRY(prof.export_chrome_trace(base + ".json"));
  TPROF_TRY_ASSIGN(const std::string table, prof.key_averages().table({.sort_by = sort_by, .row_limit = 15}));
  TPROF_TRY(write_text(base + ".txt", table));
  std::cout << "matmul_add: wrote " << base << ".json and " << base << ".txt\n";
  return {};
}

tprof::Status run_cpu(const Options& o) {
  const auto fn = o.compile ? compiled_matmul_add : eager_matmul_add;
  Tensor x = Tensor::empty(o.batch, o.size, o.size, o.dtype);
  Tensor w = Tensor::empty(o.batch, o.size, o.size, o.dtype);
  Tensor b = Tensor::empty(o.batch, o.size, o.size, o.dtype);
  fill_randn(x, 1);
  fill_randn(w, 2);
  fill_randn(b, 3);
  if (o.warmup) {
    for (int i = 0; i < kWarmupCalls; ++i) fn(x, w, b);
  }

  tprof::Profiler prof(profiler_options(o, {tprof::Activity::kCpu}));
  Tensor z;
  TPROF_TRY(record_steps(prof, o, [&] {
    z = fn(x, w, b);
    return tprof::Status();
  }));
  // The script sorts by cuda_time_total; with CPU activity only every CUDA
  // time is zero, so the CPU total orders the rows instead.
  return write_outputs(prof, o, "cpu_time_total");
}

#if MATMUL_ADD_WITH_CUDA
// The same loop on device 0 (cuda_ops.h). Inputs are the CPU run's values,
// uploaded before profiling, as the script creates its tensors on the device
// before the profiler starts.
tprof::Status run_cuda(const Options& o) {
  Tensor x = Tensor::empty(o.batch, o.size, o.size, o.dtype);
  Tensor w = Tensor::empty(o.batch, o.size, o.size, o.dtype);
  Tensor b = Tensor::empty(o.batch, o.size, o.size, o.dtype);
  fill_randn(x, 1);
  fill_randn(w, 2);
  fill_randn(b, 3);
  const CudaMode mode = o.fused ? CudaMode::kFused : o.compile ? CudaMode::kCompile : CudaMode::kEager;
  TPROF_TRY_ASSIGN(std::unique_ptr<CudaMatmulAdd> gpu, CudaMatmulAdd::create(x, w, b, mode));
  if (o.warmup) {
    for (int i = 0; i < kWarmupCalls; ++i) TPROF_TRY(gpu->call());
    // Profiling starts with an idle device, as after the script's warmup.
    TPROF_TRY(gpu->synchronize());
  }

  tprof::Profiler prof(profiler_options(o, {tprof::Activity::kCpu, tprof::Activity::kCuda}));
  // No synchronization per step: torch's loop has none (each step only
  // enqueues), and nothing here reads z. The profiler drains the device when
  // the window closes (tprof's CUPTI source synchronizes in its stop, as
  // torch's profiler does); the synchronize below reports errors of the
  // enqueued work before any file is written.
  TPROF_TRY(record_steps(prof, o, [&] { return gpu->call(); }));
  TPROF_TRY(gpu->synchronize());
  // The script's own sort key: with CUDA activity the device totals exist.
  TPROF_TRY(write_outputs(prof, o, "cuda_time_total"));
  return gpu->close();
}
#endif

}  // namespace
}  // namespace matmul_add

int main(int argc, char** argv) {
  using namespace matmul_add;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      std::cout << kUsage;
      return 0;
    }
  }
  std::string error;
  const std::optional<Options> options = parse_args(argc, argv, error);
  if (!options) {
    std::cerr << "matmul_add: " << error << "\n" << kUsage;
    return kExitUsage;
  }
  if (options->device == "cuda") {
#if MATMUL_ADD_WITH_CUDA
    // Checked before anything is created, so a machine without a GPU or
    // driver gets one line and no files.
    if (const std::string why = cuda_unavailable_reason(); !why.empty()) {
      std::cerr << "matmul_add: --device cuda: " << why << "\n";
      return kExitUsage;
    }
    const tprof::Status status = run_cuda(*options);
    if (!status) {
      std::cerr << "matmul_add: " << status.error().to_string() << "\n";
      return kExitFailure;
    }
    return 0;
#else
    std::cerr << "matmul_add: --device cuda: this build has no CUDA (the CUDA toolkit was not found at configure "
                 "time)\n";
    return kExitUsage;
#endif
  }
  // One BLAS thread: OpenBLAS starts one per core by default, and on the
  // 2-core CI machine its GEMM times then depend on whatever else runs there.
  // A single thread keeps the runs comparable (64 vs 1024, eager vs compile).
  openblas_set_num_threads(1);
  if (options->dtype == DType::kBf16 && !has_bf16_gemm()) {
    std::cerr << "matmul_add: note: bf16 runs as fp32: this OpenBLAS has no bf16 GEMM (cblas_sbgemm), so inputs "
                 "are converted to fp32, multiplied with cblas_sgemm and rounded back to bf16\n";
  }
  const tprof::Status status = run_cpu(*options);
  if (!status) {
    std::cerr << "matmul_add: " << status.error().to_string() << "\n";
    return kExitFailure;
  }
  return 0;
}
