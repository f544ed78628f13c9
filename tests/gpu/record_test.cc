// tprof record without a GPU: options, exit-status pass-through, and the
// whole path CLI -> CUDA_INJECTION64_PATH -> libtprof_inject.so -> trace
// file, with inject_host standing in for the driver's cuInit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/run_cli.h"
#include "tprof/read.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

class Record : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tprof_record_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<fs::path> traces() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) out.push_back(e.path());
    return out;
  }
  fs::path dir_;
};

TEST_F(Record, PassesOutputAndExitStatusThroughAndSaysWhenNoTraceCame) {
  const auto r = run_cli(TPROF_BIN, {"record", "-o", dir_.string(), "--", "sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_NE(r.err.find("err\n"), std::string::npos);
  EXPECT_NE(r.err.find("tprof record: no trace written: sh did not initialize CUDA"), std::string::npos) << r.err;
  EXPECT_TRUE(traces().empty());
}

TEST_F(Record, AProgramThatCannotRunIs127AndBadOptionsAre2) {
  auto r = run_cli(TPROF_BIN, {"record", "-o", dir_.string(), "--", "/nonexistent/program"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("tprof record: cannot run /nonexistent/program: No such file or directory"), std::string::npos)
      << r.err;
  r = run_cli(TPROF_BIN, {"record"});
  EXPECT_EQ(r.exit_code, 2);
  r = run_cli(TPROF_BIN, {"record", "--delay-ms", "-5", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
  // SIGKILL cannot be caught; SIGTERM ends a recording, it does not toggle one.
  for (const char* sig : {"KILL", "SIGTERM", "9", "", "USR3"}) {
    r = run_cli(TPROF_BIN, {"record", "--on-signal", sig, "--", "true"});
    EXPECT_EQ(r.exit_code, 2) << sig;
    EXPECT_NE(r.err.find("--on-signal"), std::string::npos) << r.err;
  }
  r = run_cli(TPROF_BIN, {"record", "--api", "some", "--", "true"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(Record, AProgramKilledByASignalKillsRecordTheSameWay) {
  const auto r = run_cli(TPROF_BIN, {"record", "-o", dir_.string(), "--", "sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(r.exit_code, -1);  // not a normal exit: the signal, passed on
}

TEST_F(Record, TheInjectedProfilerWritesATraceThatSaysWhyItIsCpuOnly) {
  const auto r = run_cli(TPROF_BIN, {"record", "-o", dir_.string(), "--worker", "w", "--", INJECT_HOST_BIN});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_EQ(r.out, "inject_host ran\n");
  const std::vector<fs::path> files = traces();
  ASSERT_EQ(files.size(), 1u) << r.err;
  const std::string name = files[0].filename().string();
  EXPECT_EQ(name.rfind("w.", 0), 0u) << name;
  EXPECT_NE(name.find(".pt.trace.json"), std::string::npos) << name;
  EXPECT_NE(r.err.find("tprof record: trace written to " + files[0].string()), std::string::npos) << r.err;
  Result<Trace> t = read_trace(files[0].string());
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(t->meta.producer, Producer::kTprof);
  // No driver here: CUPTI cannot start, and the trace says so.
  ASSERT_GE(t->diagnostics.count(DiagnosticCode::kActivityUnavailable), 1u);
  bool named = false;
  for (const Diagnostic& d : t->diagnostics.items()) named |= d.message.find("CUDA") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST_F(Record, GzipAndADelayPastTheProgramsEnd) {
  auto r = run_cli(TPROF_BIN, {"record", "-o", dir_.string(), "--gzip", "--", INJECT_HOST_BIN});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  std::vector<fs::path> files = traces();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].extension(), ".gz");
  EXPECT_TRUE(read_trace(files[0].string()));
  fs::remove_all(dir_);
  // The window would open 60 s after cuInit: the program is long gone.
  r = run_cli(TPROF_BIN, {"record", "-o", dir_.string(), "--delay-ms", "60000", "--", INJECT_HOST_BIN});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_TRUE(traces().empty());
  EXPECT_NE(r.err.find("no trace written"), std::string::npos) << r.err;
}

TEST_F(Record, AnNvtxRangeThatNeverRanWritesNothingAndSaysSo) {
  const auto r = run_cli(TPROF_BIN, {"record", "-o", dir_.string(), "--nvtx-range", "step", "--", INJECT_HOST_BIN});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_TRUE(traces().empty());
  EXPECT_NE(r.err.find("never ran the --nvtx-range"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tprof
