// The matmul_add example: its bf16 rounding and operators against plain
// loops, then the program itself, its files read back by the tprof CLI.
// The CUDA forms run only where a device is present (skipped otherwise);
// without one, --device cuda must be refused cleanly.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "examples/matmul_add/bf16.h"
#if MATMUL_ADD_WITH_CUDA
#include <cuda_runtime_api.h>

#include "examples/matmul_add/add_kernel.h"
#include "examples/matmul_add/cuda_ops.h"
#endif
#include "examples/matmul_add/ops.h"
#include "examples/matmul_add/tensor.h"
#include "tests/support/run_cli.h"

namespace matmul_add {
namespace {

namespace fs = std::filesystem;
using tprof::testing::CliResult;
using tprof::testing::run_cli;

std::uint16_t bf16_bits(std::uint32_t float_bits) { return bf16_from_float(std::bit_cast<float>(float_bits)); }

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_bits(0x3f800000u), 0x3f80);  // 1.0 is exact
  EXPECT_EQ(bf16_bits(0x3f807fffu), 0x3f80);  // below one half: down
  EXPECT_EQ(bf16_bits(0x3f808001u), 0x3f81);  // above one half: up
  EXPECT_EQ(bf16_bits(0x3f808000u), 0x3f80);  // a tie goes to the even neighbour...
  EXPECT_EQ(bf16_bits(0x3f818000u), 0x3f82);  // ...up or down
  EXPECT_EQ(bf16_bits(0xbf818000u), 0xbf82);  // the same for negatives
  EXPECT_EQ(bf16_bits(0x00018000u), 0x0002);  // and subnormals
  EXPECT_EQ(bf16_bits(0x7f7fffffu), 0x7f80);  // the largest float rounds to infinity
  EXPECT_EQ(bf16_bits(0xff800000u), 0xff80);  // -inf stays
  EXPECT_TRUE(std::isnan(float_from_bf16(bf16_bits(0x7f800001u))));  // a NaN whose payload is all in the low half
  EXPECT_TRUE(std::isnan(float_from_bf16(bf16_bits(0xffffffffu))));
  EXPECT_EQ(float_from_bf16(0x3eab), 0.333984375f);

  // Every bf16 value survives the round trip.
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = float_from_bf16(static_cast<std::uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(bf16_from_float(f), h) << h;
    }
  }
  // Random floats land on the nearer of their two bf16 neighbours (the even
  // one on a tie), measured in double. Above the largest bf16 the upper
  // neighbour is 2^128, which IEEE rounding then turns into infinity.
  std::mt19937 gen(7);
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t bits = gen() & 0x7f7fffffu;  // finite, positive
    const double x = std::bit_cast<float>(bits);
    const std::uint16_t lo = static_cast<std::uint16_t>(bits >> 16);
    const double hi = lo == 0x7f7f ? std::ldexp(1.0, 128) : float_from_bf16(static_cast<std::uint16_t>(lo + 1));
    const double dlo = x - float_from_bf16(lo), dhi = hi - x;
    const std::uint16_t want = dlo < dhi ? lo : dhi < dlo ? static_cast<std::uint16_t>(lo + 1) : (lo & 1) ? lo + 1 : lo;
    ASSERT_EQ(bf16_bits(bits), want) << std::hex << bits;
  }
}

Tensor random_tensor(std::int64_t batch, std::int64_t rows, std::int64_t cols, DType dtype, std::uint32_t seed) {
  Tensor t = Tensor::empty(batch, rows, cols, dtype);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kFp32) {
      t.f32()[i] = dist(gen);
    } else {
      t.bf16()[i] = bf16_from_float(dist(gen));
    }
  }
  return t;
}

double value(const Tensor& t, std::int64_t i) {
  return t.dtype() == DType::kFp32 ? t.f32()[i] : float_from_bf16(t.bf16()[i]);
}

// x · w + b for every matrix of the batch, in double.
std::vector<double> reference(const Tensor& x, const Tensor& w, const Tensor& b) {
  const std::int64_t m = x.rows(), k = x.cols(), n = w.cols();
  std::vector<double> out(static_cast<std::size_t>(b.numel()));
  for (std::int64_t p = 0; p < x.batch(); ++p) {
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double s = value(b, (p * m + i) * n + j);
        for (std::int64_t l = 0; l < k; ++l) s += value(x, (p * m + i) * k + l) * value(w, (p * k + l) * n + j);
        out[static_cast<std::size_t>((p * m + i) * n + j)] = s;
      }
    }
  }
  return out;
}

// Non-square shapes, so a swapped dimension or leading stride shows.
TEST(Ops, EagerAndFusedPathsComputeMatmulAdd) {
  for (const DType dtype : {DType::kFp32, DType::kBf16}) {
    for (const std::int64_t batch : {1, 3}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " batch " + std::to_string(batch));
      const Tensor x = random_tensor(batch, 5, 7, dtype, 1);
      const Tensor w = random_tensor(batch, 7, 4, dtype, 2);
      const Tensor b = random_tensor(batch, 5, 4, dtype, 3);
      const std::vector<double> want = reference(x, w, b);
      const Tensor eager = add(matmul(x, w), b);
      const Tensor fused = batch == 1 ? addmm(b, x, w) : baddbmm(b, x, w);
      ASSERT_EQ(eager.rank(), batch == 1 ? 2 : 3);
      ASSERT_EQ(eager.numel(), static_cast<std::int64_t>(want.size()));
      ASSERT_EQ(fused.numel(), static_cast<std::int64_t>(want.size()));
      // bf16 keeps 8 significant bits; eager rounds twice (mm, then add).
      const double tol = dtype == DType::kFp32 ? 1e-5 : 0.05;
      for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(value(eager, static_cast<std::int64_t>(i)), want[i], tol) << i;
        EXPECT_NEAR(value(fused, static_cast<std::int64_t>(i)), want[i], tol) << i;
      }
    }
  }
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The table's rows: name -> "# of Calls" (the last column).
std::map<std::string, int> table_calls(const std::string& table) {
  std::map<std::string, int> rows;
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    std::vector<std::string> words;
    for (std::string w; cells >> w;) words.push_back(w);
    if (words.size() < 3 || words[0].starts_with("-") || words[0] == "Name" || words[0] == "Self") continue;
    rows[words[0]] = std::stoi(words.back());
  }
  return rows;
}

class MatmulAddExample : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / "matmul_add_test" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliResult run_example(std::vector<std::string> args) {
    args.push_back("--trace-dir");
    args.push_back(dir_.string());
    return run_cli(MATMUL_ADD_BIN, args);
  }

  fs::path dir_;
};

// The script's schedule (wait 0, warmup 1, active 20) over 21 calls: step 0
// is the profiler's warmup, so the trace holds steps 1..20, each labelled
// with its own number as current PyTorch does.
TEST_F(MatmulAddExample, EagerRunWritesTwentyStepsAndTorchsTable) {
  const CliResult run = run_example({"--size", "64", "--dtype", "fp32"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const fs::path json = dir_ / "64_fp32_cold_eager.json";
  const fs::path txt = dir_ / "64_fp32_cold_eager.txt";
  ASSERT_TRUE(fs::exists(json));
  ASSERT_TRUE(fs::exists(txt));

  const CliResult info = run_cli(TPROF_BIN, {"info", "--format", "json", json.string()});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("\"producer\": \"tprof\""), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("\"diagnostics\": []"), std::string::npos) << info.out;

  const CliResult steps = run_cli(TPROF_BIN, {"steps", "--format", "json", json.string()});
  ASSERT_EQ(steps.exit_code, 0) << steps.err;
  std::vector<int> numbers;
  const std::regex step_re(R"("step": (\d+))");
  for (auto it = std::sregex_iterator(steps.out.begin(), steps.out.end(), step_re); it != std::sregex_iterator(); ++it) {
    numbers.push_back(std::stoi((*it)[1]));
  }
  std::vector<int> want(20);
  for (int i = 0; i < 20; ++i) want[i] = i + 1;
  EXPECT_EQ(numbers, want) << steps.out;

  const std::string table = read_text(txt);
  const std::map<std::string, int> rows = table_calls(table);
  for (const char* name : {"ProfilerStep*", "matmul_add", "op::matmul", "op::mm", "blas::sgemm", "op::add"}) {
    ASSERT_TRUE(rows.contains(name)) << name << "\n" << table;
    EXPECT_EQ(rows.at(name), 20) << name;
  }
  // Each call allocates its outputs, as torch's ops do: CPU Mem is shown.
  EXPECT_NE(table.find("CPU Mem"), std::string::npos);
  EXPECT_NE(table.find("320.00 Kb"), std::string::npos) << table;  // 20 outputs of 64x64 fp32

  // The in-process table is the CLI's table of the written trace.
  const CliResult cli = run_cli(TPROF_BIN, {"table", json.string(), "--sort-by", "cpu_time_total", "--row-limit", "15"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(cli.out, table);
}

// tprof sweep runs this example at each size and reads its traces back.
TEST_F(MatmulAddExample, SweepRunsEachSizeAndChartsIt) {
  const fs::path html = dir_ / "sweep.html";
  fs::create_directories(dir_);
  const CliResult r = run_cli(TPROF_BIN, {"-q", "sweep", "--program", MATMUL_ADD_BIN, "--sizes", "8,32,128", "--steps",
                                          "3", "--format", "json", "--html", html.string(), "--keep", dir_.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex size_re(R"("size": (\d+))");
  std::vector<int> sizes;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), size_re); it != std::sregex_iterator(); ++it) {
    sizes.push_back(std::stoi((*it)[1]));
  }
  EXPECT_EQ(sizes, (std::vector<int>{8, 32, 128})) << r.out;
  EXPECT_NE(r.out.find("\"steps\": 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"verdict\": \"cpu-only\""), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir_ / "128_fp32_warm_eager.json"));
  EXPECT_NE(read_text(html).find("data-points=\"3\""), std::string::npos);
  // A program that fails: exit 2 with its output's tail.
  const CliResult bad = run_cli(TPROF_BIN, {"-q", "sweep", "--program", "/bin/false", "--sizes", "8"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("failed"), std::string::npos) << bad.err;
}

TEST_F(MatmulAddExample, CompileRunsOneAddmmWithABiasCopy) {
  const CliResult run = run_example({"--size", "64", "--dtype", "fp32", "--compile"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string table = read_text(dir_ / "64_fp32_cold_compile.txt");
  const std::map<std::string, int> rows = table_calls(table);
  for (const char* name : {"matmul_add", "op::addmm", "op::copy_", "blas::sgemm"}) {
    ASSERT_TRUE(rows.contains(name)) << name << "\n" << table;
    EXPECT_EQ(rows.at(name), 20) << name;
  }
  EXPECT_FALSE(rows.contains("op::add")) << table;
  EXPECT_FALSE(rows.contains("op::mm")) << table;
}

TEST_F(MatmulAddExample, BatchedRunsBmmWithOneGemmPerMatrix) {
  const CliResult run = run_example({"--size", "16", "--dtype", "fp32", "--batch", "4", "--warmup", "--steps", "5"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string table = read_text(dir_ / "bmm4x16_fp32_warm_eager.txt");
  const std::map<std::string, int> rows = table_calls(table);
  ASSERT_TRUE(rows.contains("op::bmm")) << table;
  EXPECT_EQ(rows.at("op::bmm"), 5);
  EXPECT_EQ(rows.at("blas::sgemm"), 4 * 5);
  EXPECT_FALSE(rows.contains("op::mm")) << table;
}

// Debian's OpenBLAS has no cblas_sbgemm: bf16 then runs through fp32 and
// says so; an OpenBLAS with it runs blas::sbgemm and says nothing.
TEST_F(MatmulAddExample, Bf16SaysWhetherItRunsAsFp32) {
  const CliResult run = run_example({"--size", "32"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::map<std::string, int> rows = table_calls(read_text(dir_ / "32_bf16_cold_eager.txt"));
  if (run.err.find("bf16 runs as fp32") != std::string::npos) {
    EXPECT_TRUE(rows.contains("blas::sgemm"));
    EXPECT_EQ(rows.at("cast::bf16_to_fp32"), 2 * 20);
    EXPECT_EQ(rows.at("cast::fp32_to_bf16"), 20);
  } else {
    EXPECT_TRUE(rows.contains("blas::sbgemm")) << run.err;
  }
}

// Why --device cuda cannot run here, as the program says it ("" when it can).
std::string cuda_refusal() {
#if MATMUL_ADD_WITH_CUDA
  const std::string why = cuda_unavailable_reason();
  return why.empty() ? "" : "matmul_add: --device cuda: " + why + "\n";
#else
  return "matmul_add: --device cuda: this build has no CUDA (the CUDA toolkit was not found at configure time)\n";
#endif
}

// Without a device or a driver (this machine, CI) --device cuda is refused
// with status 2 and exactly one line naming the cause, before any file is
// written, whatever the other flags.
TEST_F(MatmulAddExample, CudaWithoutADeviceExitsTwoWithTheCause) {
  const std::string want = cuda_refusal();
  if (want.empty()) GTEST_SKIP() << "a CUDA device is present: CudaRunsWriteTracesWithDeviceWork covers it";
#if MATMUL_ADD_WITH_CUDA
  // No device or driver here; elsewhere, perhaps a GPU older than sm_80.
  EXPECT_TRUE(want.starts_with("matmul_add: --device cuda: no CUDA device (cudaGetDeviceCount: ") ||
              want.starts_with("matmul_add: --device cuda: CUDA device 0 "))
      << want;
#endif
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--device", "cuda"},
           {"--device", "cuda", "--fused", "--warmup"},
           {"--device", "cuda", "--compile", "--dtype", "fp32", "--batch", "2"}}) {
    const CliResult run = run_example(args);
    EXPECT_EQ(run.exit_code, 2) << args.size();
    EXPECT_EQ(run.err, want);
    EXPECT_EQ(run.out, "");
    EXPECT_FALSE(fs::exists(dir_)) << args.size();
  }
}

TEST_F(MatmulAddExample, UsageListsFusedAndCuda) {
  const CliResult help = run_example({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("[--compile | --fused]"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("  --fused "), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("cuda (cuBLAS/cuBLASLt"), std::string::npos) << help.out;
  // A bad flag prints the same usage on stderr.
  const CliResult bad = run_example({"--bogus"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("  --fused "), std::string::npos) << bad.err;
}

// --fused is cuBLASLt's D = A·B + C: refused on the CPU and with --compile,
// as argument errors (status 2, no files), before any device is looked at.
TEST_F(MatmulAddExample, FusedNeedsCudaAndExcludesCompile) {
  const CliResult cpu = run_example({"--fused"});
  EXPECT_EQ(cpu.exit_code, 2);
  EXPECT_NE(cpu.err.find("--fused needs --device cuda"), std::string::npos) << cpu.err;
  const CliResult explicit_cpu = run_example({"--device", "cpu", "--fused", "--size", "8"});
  EXPECT_EQ(explicit_cpu.exit_code, 2);
  EXPECT_NE(explicit_cpu.err.find("--fused needs --device cuda"), std::string::npos) << explicit_cpu.err;
  const CliResult both = run_example({"--device", "cuda", "--fused", "--compile"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--fused and --compile"), std::string::npos) << both.err;
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(MatmulAddExample, BadFlagsExitTwo) {
  const std::vector<std::vector<std::string>> bad = {
      {"--size", "0"},     {"--dtype", "fp16"}, {"--batch", "x"}, {"--bogus"}, {"--size"}, {"--device", "gpu"},
      {"--device", "cuda", "--size", "-1"}, {"--fused", "1"}};
  for (const std::vector<std::string>& args : bad) {
    const CliResult run = run_example(args);
    EXPECT_EQ(run.exit_code, 2) << args[0] << " " << args.back();
    EXPECT_NE(run.err.find("usage: matmul_add"), std::string::npos) << run.err;
  }
  EXPECT_FALSE(fs::exists(dir_));
}

// How many events of category `cat` a Kineto JSON trace holds.
int count_category(const std::string& json, const std::string& cat) {
  const std::regex re("\"cat\":\\s*\"" + cat + "\"");
  return static_cast<int>(std::distance(std::sregex_iterator(json.begin(), json.end(), re), std::sregex_iterator()));
}

// On a machine with a GPU: each form writes its two files with the CPU
// chain of the CPU example, and, when tprof records device activity (built
// with CUPTI), the device work of docs/trace-reading.md: eager a GEMM and an
// add kernel, compile a Memcpy DtoD and a GEMM, fused one GEMM and no copy.
TEST_F(MatmulAddExample, CudaRunsWriteTracesWithDeviceWork) {
  if (!cuda_refusal().empty()) GTEST_SKIP() << "no usable CUDA device: " << cuda_refusal();
  constexpr int kSteps = 5;
  struct Case {
    std::vector<std::string> flags;
    const char* stem;
    std::vector<const char*> ops;
    std::vector<const char*> absent;
    int min_kernels_per_step;
    bool memcpy;
  };
  const std::vector<Case> cases = {
      {{}, "64_bf16_warm_eager", {"matmul_add", "op::matmul", "op::mm", "op::add"}, {"op::addmm", "op::copy_"},
       2, false},
      {{"--compile"}, "64_bf16_warm_compile", {"matmul_add", "op::addmm", "op::copy_"}, {"op::mm", "op::add"},
       1, true},
      {{"--fused"}, "64_bf16_warm_fused", {"matmul_add", "op::addmm"}, {"op::copy_", "op::mm", "op::add"},
       1, false},
      {{"--batch", "3", "--dtype", "fp32"}, "bmm3x64_fp32_warm_eager", {"op::matmul", "op::bmm", "op::add"},
       {"op::mm"}, 2, false},
  };
  std::string no_device_activity;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.stem);
    std::vector<std::string> args = {"--device", "cuda", "--size", "64", "--warmup", "--steps", std::to_string(kSteps)};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const CliResult run = run_example(args);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const fs::path json = dir_ / (std::string(c.stem) + ".json");
    ASSERT_TRUE(fs::exists(json));
    const std::string table = read_text(dir_ / (std::string(c.stem) + ".txt"));
    const std::map<std::string, int> rows = table_calls(table);
    for (const char* name : c.ops) {
      ASSERT_TRUE(rows.contains(name)) << name << "\n" << table;
      EXPECT_EQ(rows.at(name), kSteps) << name;
    }
    for (const char* name : c.absent) EXPECT_FALSE(rows.contains(name)) << name << "\n" << table;

    const std::string trace = read_text(json);
    const int kernels = count_category(trace, "kernel");
    const int memcpys = count_category(trace, "gpu_memcpy");
    if (kernels == 0) {
      // Only acceptable when the trace says why (tprof built without CUPTI).
      const CliResult info = run_cli(TPROF_BIN, {"info", "--format", "json", json.string()});
      EXPECT_NE(info.out.find("activity_unavailable"), std::string::npos)
          << "no kernels and no reason in the trace:\n" << info.out;
      no_device_activity = info.out;
      continue;
    }
    // At least the active steps' work; the profiler's warmup step may add one more.
    EXPECT_GE(kernels, c.min_kernels_per_step * kSteps);
    if (c.memcpy) {
      EXPECT_GE(memcpys, kSteps);
      EXPECT_LE(memcpys, kSteps + 1);
      EXPECT_NE(trace.find("Memcpy DtoD"), std::string::npos);
    } else {
      EXPECT_EQ(memcpys, 0);
    }
    if (c.min_kernels_per_step == 2) {
      EXPECT_NE(trace.find("add_kernel"), std::string::npos);
    }
  }
  if (!no_device_activity.empty()) {
    GTEST_SKIP() << "CPU side checked; this tprof records no device activity:\n" << no_device_activity;
  }
}

#if MATMUL_ADD_WITH_CUDA
// The three CUDA forms against the reference, non-square so a swapped
// dimension or leading stride shows, batched and not, on a GPU only.
TEST(CudaOps, EagerCompileAndFusedComputeMatmulAdd) {
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (const DType dtype : {DType::kFp32, DType::kBf16}) {
    for (const std::int64_t batch : {1, 3}) {
      for (const CudaMode mode : {CudaMode::kEager, CudaMode::kCompile, CudaMode::kFused}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " batch " + std::to_string(batch) + " mode " +
                     std::to_string(static_cast<int>(mode)));
        const Tensor x = random_tensor(batch, 5, 7, dtype, 1);
        const Tensor w = random_tensor(batch, 7, 4, dtype, 2);
        const Tensor b = random_tensor(batch, 5, 4, dtype, 3);
        const std::vector<double> want = reference(x, w, b);
        auto gpu = CudaMatmulAdd::create(x, w, b, mode);
        ASSERT_TRUE(gpu.has_value()) << gpu.error().to_string();
        // Twice: the second call reuses the pooled blocks of the first.
        for (int i = 0; i < 2; ++i) ASSERT_TRUE((*gpu)->call().ok());
        auto z = (*gpu)->result();
        ASSERT_TRUE(z.has_value()) << z.error().to_string();
        ASSERT_EQ(z->rank(), batch == 1 ? 2 : 3);
        ASSERT_EQ(z->numel(), static_cast<std::int64_t>(want.size()));
        // fp32 without TF32 is within float rounding of the double reference.
        const double tol = dtype == DType::kFp32 ? 1e-5 : 0.05;
        for (std::size_t i = 0; i < want.size(); ++i) {
          EXPECT_NEAR(value(*z, static_cast<std::int64_t>(i)), want[i], tol) << i;
        }
        const tprof::Status closed = (*gpu)->close();
        EXPECT_TRUE(closed.ok()) << closed.error().to_string();
      }
    }
  }
}

// The add's launch is torch's vectorized elementwise launch (no device
// needed): 128 threads a block, 1024 elements a block, and the grid torch's
// own trace of the same add shows on the H100 (tests/data/gpu/h100-torch-2.11:
// vectorized_elementwise_kernel<8, CUDAFunctor_add<BFloat16>>, grid
// [16384, 1, 1] and block [128, 1, 1] at 4096 x 4096, [4, 1, 1] at 64 x 64).
TEST(AddKernel, LaunchesLikeTorchsVectorizedElementwiseKernel) {
  for (const auto& [file, count] : {std::pair<std::string, std::int64_t>{"4096_bf16_warm_eager.json", 4096 * 4096},
                                    {"64_bf16_warm_eager.json", 64 * 64}}) {
    const std::string trace =
        read_text(fs::path(TPROF_SOURCE_DIR) / "tests" / "data" / "gpu" / "h100-torch-2.11" / file);
    const std::size_t at = trace.find("vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add");
    ASSERT_NE(at, std::string::npos) << file;
    // The kernel event's args follow its name within a few hundred bytes.
    const std::string event = trace.substr(at, 1500);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(event, m, std::regex(R"("grid": \[(\d+), 1, 1\],\s*"block": \[(\d+), 1, 1\])")))
        << event;
    EXPECT_EQ(add_blocks(count), std::stoll(m[1].str())) << file;
    EXPECT_EQ(add_threads_per_block(), std::stoi(m[2].str())) << file;
  }
  EXPECT_EQ(add_blocks(0), 0);
  EXPECT_EQ(add_blocks(1), 1);
  EXPECT_EQ(add_blocks(1024), 1);
  EXPECT_EQ(add_blocks(1025), 2);
  // 16-byte accesses where every pointer allows them, elementwise otherwise.
  const auto at = [](std::uintptr_t address) { return reinterpret_cast<const void*>(address); };
  EXPECT_EQ(add_vector_width(at(0x1000), at(0x2000), at(0x3000), /*bf16=*/true), 8);
  EXPECT_EQ(add_vector_width(at(0x1000), at(0x2000), at(0x3000), /*bf16=*/false), 4);
  EXPECT_EQ(add_vector_width(at(0x1002), at(0x2000), at(0x3000), true), 1);
  EXPECT_EQ(add_vector_width(at(0x1000), at(0x2008), at(0x3000), false), 1);
  EXPECT_EQ(add_vector_width(at(0x1000), at(0x2000), at(0x3004), false), 1);
}

// On a GPU: the add is bit for bit the host's (fp32 sums; bf16 summed in
// fp32 and rounded once), for lengths that end inside a vector, a tile and
// a grid's last block, and for pointers that rule out 16-byte accesses.
TEST(CudaOps, AddIsExactForEveryLengthAndAlignment) {
  if (const std::string why = cuda_unavailable_reason(); !why.empty()) GTEST_SKIP() << why;
  for (const bool bf16 : {true, false}) {
    const std::size_t elem = bf16 ? 2 : 4;
    for (const std::int64_t count : {1, 7, 8, 1023, 1024, 1025, 3 * 1024 + 5, (1 << 20) + 3}) {
      for (const std::int64_t offset : {0, 1}) {  // elements: 1 misaligns all three
        SCOPED_TRACE((bf16 ? "bf16 " : "fp32 ") + std::to_string(count) + " offset " + std::to_string(offset));
        const std::size_t n = static_cast<std::size_t>(count + offset);
        std::vector<std::uint32_t> a(n), b(n);
        std::mt19937 gen(static_cast<std::uint32_t>(count * 2 + offset));
        std::normal_distribution<float> dist(0.0f, 8.0f);
        for (std::size_t i = 0; i < n; ++i) {
          const float x = dist(gen), y = dist(gen);
          a[i] = bf16 ? bf16_from_float(x) : std::bit_cast<std::uint32_t>(x);
          b[i] = bf16 ? bf16_from_float(y) : std::bit_cast<std::uint32_t>(y);
        }
        // Host layout: bf16 as uint16_t, fp32 as its bits.
        std::vector<unsigned char> ha(n * elem), hb(n * elem), hz(n * elem);
        for (std::size_t i = 0; i < n; ++i) {
          if (bf16) {
            const auto va = static_cast<std::uint16_t>(a[i]), vb = static_cast<std::uint16_t>(b[i]);
            std::memcpy(&ha[i * 2], &va, 2);
            std::memcpy(&hb[i * 2], &vb, 2);
          } else {
            std::memcpy(&ha[i * 4], &a[i], 4);
            std::memcpy(&hb[i * 4], &b[i], 4);
          }
        }
        void *da = nullptr, *db = nullptr, *dz = nullptr;
        ASSERT_EQ(cudaMalloc(&da, n * elem), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&db, n * elem), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dz, n * elem), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(da, ha.data(), n * elem, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(db, hb.data(), n * elem, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemset(dz, 0xff, n * elem), cudaSuccess);
        const std::size_t skip = static_cast<std::size_t>(offset) * elem;
        auto* pa = static_cast<char*>(da) + skip;
        auto* pb = static_cast<char*>(db) + skip;
        auto* pz = static_cast<char*>(dz) + skip;
        EXPECT_EQ(add_vector_width(pa, pb, pz, bf16), offset == 0 ? (bf16 ? 8 : 4) : 1);
        ASSERT_EQ(launch_add(pa, pb, pz, count, bf16, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(hz.data(), dz, n * elem, cudaMemcpyDeviceToHost), cudaSuccess);
        cudaFree(da);
        cudaFree(db);
        cudaFree(dz);
        int wrong = 0;
        for (std::size_t i = static_cast<std::size_t>(offset); i < n && wrong < 5; ++i) {
          std::uint32_t got = 0, want = 0;
          if (bf16) {
            std::uint16_t g = 0;
            std::memcpy(&g, &hz[i * 2], 2);
            got = g;
            want = bf16_from_float(float_from_bf16(static_cast<std::uint16_t>(a[i])) +
                                   float_from_bf16(static_cast<std::uint16_t>(b[i])));
          } else {
            std::memcpy(&got, &hz[i * 4], 4);
            want = std::bit_cast<std::uint32_t>(std::bit_cast<float>(a[i]) + std::bit_cast<float>(b[i]));
          }
          if (got != want) {
            ADD_FAILURE() << "element " << i - static_cast<std::size_t>(offset) << ": got " << std::hex << got
                          << ", want " << want;
            ++wrong;
          }
        }
        // Nothing before the first element is written (the offset's padding).
        if (offset > 0) {
          EXPECT_EQ(hz[0], 0xff);
        }
      }
    }
  }
}
#endif

}  // namespace
}  // namespace matmul_add
