// tprof record on the CUDA stand-in (tests/standin/README.md): the runs that
// crashed on a real H100 (every program's exit, no trace) run here end to
// end with CUPTI's real threads, buffers and exit-time teardown. tprof
// record's injection must write the trace and pass the program's exit
// status through, whichever way the program ends and whichever order the
// driver registers its teardown in.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tprof/read.h"

extern char** environ;

namespace tprof {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int exit_code = -1;   // -1: did not exit normally
  int term_signal = 0;  // the signal it died of, when it did
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs binary with args in this environment, its output in files under dir.
CliResult run(const fs::path& dir, const std::string& binary, const std::vector<std::string>& args) {
  const fs::path out = dir / "stdout", err = dir / "stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  CliResult r;
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return r;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

class StandinRecord : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tprof_standin_record_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    log_ = (dir_ / "cupti.log").string();
    setenv("TPROF_CUPTI_LIBRARY", STANDIN_CUPTI, 1);
    setenv("STANDIN_CUPTI_LOG", log_.c_str(), 1);
    unsetenv("NVTX_INJECTION64_PATH");
    unsetenv("STANDIN_DRIVER_ATEXIT");
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliResult record(const std::vector<std::string>& options, const std::vector<std::string>& app_args) {
    std::vector<std::string> args = {"record", "-o", (dir_ / "rec").string()};
    args.insert(args.end(), options.begin(), options.end());
    args.push_back("--");
    args.push_back(STANDIN_APP);
    args.insert(args.end(), app_args.begin(), app_args.end());
    return run(dir_, TPROF_BIN, args);
  }

  std::vector<fs::path> traces() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "rec", ec)) out.push_back(e.path());
    return out;
  }

  // Kernels in the one trace written, by name.
  std::size_t kernels(const std::string& name) const {
    const std::vector<fs::path> files = traces();
    if (files.size() != 1) return 0;
    Result<Trace> t = read_trace(files[0].string());
    if (!t) return 0;
    std::size_t n = 0;
    for (std::uint32_t e = 0; e < t->events.size(); ++e) {
      n += t->events.kind[e] == EventKind::kKernel && t->name(e) == name;
    }
    return n;
  }

  std::string cupti_log() const { return slurp(log_); }

  fs::path dir_;
  std::string log_;
};

constexpr char kGemm[] = "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT";

// The H100 run: the window runs until exit.
TEST_F(StandinRecord, AWholeRunEndingAtExitWritesItsTrace) {
  const CliResult r = record({}, {"--steps", "20"});
  EXPECT_EQ(r.exit_code, 0) << "signal " << r.term_signal << "\n" << r.err;
  EXPECT_EQ(r.out, "standin_app done\n");
  ASSERT_EQ(traces().size(), 1u) << r.err;
  EXPECT_EQ(kernels(kGemm), 20u);
  // CUPTI was flushed while it still existed.
  const std::string log = cupti_log();
  const std::size_t flush = log.rfind("\nflush_all 1 pid=");
  const std::size_t teardown = log.find("\nteardown pid=");
  ASSERT_NE(flush, std::string::npos) << log;
  ASSERT_NE(teardown, std::string::npos) << log;
  EXPECT_LT(flush, teardown) << log;
}

TEST_F(StandinRecord, AWindowEndingWhileTheProgramRunsWritesItsTrace) {
  const CliResult r = record({"--duration-ms", "50"}, {"--run-ms", "300"});
  EXPECT_EQ(r.exit_code, 0) << "signal " << r.term_signal << "\n" << r.err;
  ASSERT_EQ(traces().size(), 1u) << r.err;
  EXPECT_GT(kernels(kGemm), 0u);
}

TEST_F(StandinRecord, EitherDriverTeardownOrder) {
  for (const char* order : {"before", "after"}) {
    SCOPED_TRACE(order);
    setenv("STANDIN_DRIVER_ATEXIT", order, 1);
    fs::remove_all(dir_ / "rec");
    const CliResult r = record({}, {"--steps", "20"});
    EXPECT_EQ(r.exit_code, 0) << "signal " << r.term_signal << "\n" << r.err;
    ASSERT_EQ(traces().size(), 1u) << r.err;
    EXPECT_EQ(kernels(kGemm), 20u);
  }
}

TEST_F(StandinRecord, ExitPathsThatRunExitHandlersWriteTheTraceAndKeepTheStatus) {
  const struct {
    const char* mode;
    int status;
  } cases[] = {{"exit", 10}, {"exit-thread", 11}, {"python", 12}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.mode);
    fs::remove_all(dir_ / "rec");
    const CliResult r = record({}, {"--steps", "20", "--exit", c.mode});
    EXPECT_EQ(r.exit_code, c.status) << "signal " << r.term_signal << "\n" << r.err;
    EXPECT_EQ(r.out, "standin_app done\n");
    ASSERT_EQ(traces().size(), 1u) << r.err;
    EXPECT_GE(kernels(kGemm), 20u);
  }
}

TEST_F(StandinRecord, ProgramsKilledBySignalsKillRecordTheSameWay) {
  const struct {
    const char* mode;
    int signal;
  } cases[] = {{"sigint", SIGINT}, {"sigterm", SIGTERM}, {"throw", SIGABRT}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.mode);
    fs::remove_all(dir_ / "rec");
    const CliResult r = record({}, {"--steps", "20", "--exit", c.mode});
    EXPECT_EQ(r.term_signal, c.signal) << r.err;
    EXPECT_EQ(r.out, "standin_app done\n");
  }
}

TEST_F(StandinRecord, UnderscoreExitWritesNothingAndKeepsTheStatus) {
  const CliResult r = record({}, {"--steps", "20", "--exit", "_exit"});
  EXPECT_EQ(r.exit_code, 13) << r.err;
  EXPECT_TRUE(traces().empty());
  EXPECT_NE(r.err.find("no trace written"), std::string::npos) << r.err;
}

TEST_F(StandinRecord, NvtxRangesGraphsTritonAndThreads) {
  const struct {
    std::vector<std::string> options, args;
    const char* kernel;
    std::size_t count;
  } cases[] = {
      {{"--nvtx-range", "measure"}, {"--steps", "20", "--nvtx"}, kGemm, 20},
      {{}, {"--steps", "20", "--graph", "--nvtx"}, kGemm, 40},  // two of the three captured kernels
      {{}, {"--steps", "20", "--triton"}, "triton_poi_fused_add_0", 20},
      {{}, {"--steps", "20", "--threads", "4"}, kGemm, 80},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args.back());
    fs::remove_all(dir_ / "rec");
    const CliResult r = record(c.options, c.args);
    EXPECT_EQ(r.exit_code, 0) << "signal " << r.term_signal << "\n" << r.err;
    ASSERT_EQ(traces().size(), 1u) << r.err;
    EXPECT_EQ(kernels(c.kernel), c.count);
  }
}

TEST_F(StandinRecord, EachChildOfATorchrunLikeParentWritesItsOwnTrace) {
  const CliResult r = record({}, {"--steps", "20", "--children", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(traces().size(), 2u) << r.err;
}

}  // namespace
}  // namespace tprof
