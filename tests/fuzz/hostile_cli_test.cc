// Every command of the tprof program on every hostile input we keep: the
// fuzz corpora (corpus/, corpus_gpu/), the extreme-value corpus
// (corpus_extreme/: sums and spans at the int64 edge, rank summaries whose
// numbers overflow), the hostile-input matrix (tests/support/hostile_cases.h),
// and the corpora's traces with their times stretched to the edges of what
// the reader keeps (±2^62 ns). `make test` runs this under ASan+UBSan
// (TPROF_UNIT_TESTS_WITH_CLI): any sanitizer report fails it, so undefined
// arithmetic on values from a file is caught in the code the program runs,
// not only in what the unit tests call.
//
// A run passes when it exits 0, 1 or 2 (no signal, no sanitizer report on
// stderr) and its sums are not negative: a kernels total below zero is a
// wrapped sum (issue 23: "total_ns": -2).
//
// One test per command family, so ctest runs them in parallel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/hostile_cases.h"
#include "tests/support/run_cli.h"
#include "tests/support/sanitizers.h"
#include "tprof/read.h"
#include "tprof/write.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;
using tprof::testing::CliResult;
using tprof::testing::run_cli;

const fs::path kFuzzDir = fs::path(TPROF_SOURCE_DIR) / "tests" / "fuzz";

struct Input {
  std::string name;  // for messages: the corpus file, the case, the variant
  std::string path;
  bool summary = false;  // a rank summary (tprof merge), not a trace
  bool stretched = false;  // a corpus trace with its timestamps stretched to the int64 edge
};

std::string write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

// The earliest and the latest instant the reader keeps (src/trace/event_sink.cc).
constexpr std::int64_t kLowest = -(std::int64_t{1} << 62) + 1;
constexpr std::int64_t kHighest = (std::int64_t{1} << 62) - 1;

enum class Stretch { kSpread, kLong };

__extension__ typedef __int128 Wide;  // (x - lo) * 2^63 / span, exactly

// The trace at `path` with its times mapped linearly from [first start,
// last end] onto [kLowest, kHighest] (order, nesting and overlaps kept, every
// gap and duration huge); kLong also makes every complete event last until
// kHighest. Written by tprof's own writer; "" when it does not load.
std::string stretched(const std::string& path, Stretch mode) {
  Result<Trace> t = read_trace(path);
  if (!t || t->events.size() == 0) return "";
  EventColumns& ev = t->events;
  std::int64_t lo = ev.ts_ns[0], hi = ev.ts_ns[0];
  for (std::size_t e = 0; e < ev.size(); ++e) {
    lo = std::min(lo, ev.ts_ns[e]);
    hi = std::max(hi, ev.ts_ns[e] + std::max<std::int64_t>(0, ev.dur_ns[e]));
  }
  const Wide span = std::max<std::int64_t>(1, hi - lo);
  auto map = [&](std::int64_t ns) {
    return static_cast<std::int64_t>(kLowest + static_cast<Wide>(ns - lo) * (Wide{kHighest} - kLowest) / span);
  };
  for (std::size_t e = 0; e < ev.size(); ++e) {
    const std::int64_t start = map(ev.ts_ns[e]);
    const std::int64_t end = map(ev.ts_ns[e] + std::max<std::int64_t>(0, ev.dur_ns[e]));
    ev.ts_ns[e] = start;
    if (ev.phase[e] == Phase::kComplete) ev.dur_ns[e] = mode == Stretch::kLong ? kHighest - start : end - start;
  }
  t->meta.base_time_ns.reset();
  std::string out;
  write_trace_json(*t, &out);
  return out;
}

// Every input, written once per test process into its own directory.
class HostileCli : public ::testing::TestWithParam<const char*> {
 protected:
  static void SetUpTestSuite() {
    // The sanitizers' reports must stop the program and say where (the
    // caller's own settings win). Leaks at exit are not what this looks
    // for, and checking them takes 40% of each short run.
    setenv("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1", 0);
    setenv("ASAN_OPTIONS", "detect_leaks=0", 0);
    dir_ = new fs::path(fs::path(::testing::TempDir()) / ("tprof_hostile_cli_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    inputs_ = new std::vector<Input>();
    std::vector<fs::path> corpus;
    for (const char* sub : {"corpus", "corpus_gpu", "corpus_extreme"}) {
      for (const auto& entry : fs::directory_iterator(kFuzzDir / sub)) corpus.push_back(entry.path());
    }
    std::sort(corpus.begin(), corpus.end());
    for (const fs::path& p : corpus) {
      const std::string name = p.parent_path().filename().string() + "/" + p.filename().string();
      const bool summary = p.string().ends_with(".summary.json");
      inputs_->push_back({name, p.string(), summary});
      if (summary || p.parent_path().filename() == "corpus_extreme") continue;
      for (const auto& [mode, tag] : {std::pair{Stretch::kSpread, "spread"}, std::pair{Stretch::kLong, "long"}}) {
        const std::string bytes = stretched(p.string(), mode);
        if (bytes.empty()) continue;
        const std::string file = p.filename().string() + "." + tag + ".json";
        inputs_->push_back({name + " stretched (" + tag + ")", write_file(*dir_ / file, bytes), false, true});
      }
    }
    int i = 0;
    for (const tprof::testing::HostileCase& c : tprof::testing::hostile_cases()) {
      // The 100 MB name (8 MB under the sanitizers, which run that one):
      // seconds per command in a release build, for what the reader's own
      // test (hostile_input_test) already reads.
      if (c.bytes.size() > (16u << 20)) continue;
      const std::string file = "hostile_" + std::to_string(i++) + ".json";
      inputs_->push_back({std::string("hostile case: ") + c.what, write_file(*dir_ / file, c.bytes)});
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete inputs_;
    delete dir_;
  }

  // Runs tprof with `args`; fails on a signal, an exit status other than
  // 0, 1 and 2, or a sanitizer's report.
  CliResult run(const Input& in, std::vector<std::string> args) {
    args.insert(args.begin(), "-q");
    const CliResult r = run_cli(TPROF_BIN, args);
    std::string line = "tprof";
    for (const std::string& a : args) line += " " + a;
    const bool report = r.err.find("runtime error:") != std::string::npos ||
                        r.err.find("Sanitizer") != std::string::npos;
    EXPECT_TRUE(r.exit_code >= 0 && r.exit_code <= 2 && !report)
        << in.name << ": " << line << "\nexit " << r.exit_code << ", signal " << r.term_signal << "\n"
        << r.err.substr(0, 4000);
    ++runs_;
    return r;
  }

  static inline fs::path* dir_ = nullptr;
  static inline std::vector<Input>* inputs_ = nullptr;
  int runs_ = 0;
};

// A reference trace for the two-trace commands: a small real GPU trace.
std::string reference() { return (kFuzzDir / "corpus_gpu" / "after_fix_trace.json").string(); }

TEST_P(HostileCli, EveryInputThroughTheCommand) {
  const std::string family = GetParam();
  const std::string out = (*dir_ / (family + ".out")).string();
  for (const Input& in : *inputs_) {
    const std::string& f = in.path;
    // Under the sanitizers (20-50x slower, every run a fresh process) the
    // stretched variants' int64-edge timestamps go through table and
    // diagnose, which run the analysis passes the other commands share; the
    // other commands' own code sees them in the release build, without
    // UBSan (a trade for CI time: ~2 minutes of ASan test time).
    if (tprof::testing::kSanitized && in.stretched && family != "table" && family != "diagnose") continue;
    if (family == "merge") {
      if (in.summary) {
        run(in, {"merge", f});
        run(in, {"merge", f, "--format", "json"});
        continue;
      }
      const std::string summary = (*dir_ / "rank.summary.json").string();
      fs::remove(summary);
      if (run(in, {"summarize", f, "-o", summary}).exit_code == 0) run(in, {"merge", summary, "--format", "md"});
      continue;
    }
    if (in.summary) continue;
    if (family == "table") {
      run(in, {"table", f, "--row-limit", "-1", "--memory", "on"});
      run(in, {"table", f, "--group-by-input-shape", "--group-by-stack-n", "5", "--sort-by", "self_cpu_time_total",
               "--format", "json"});
      run(in, {"table", f, "--events", "--row-limit", "50", "--format", "csv"});
    } else if (family == "diagnose") {
      run(in, {"diagnose", f});
      run(in, {"diagnose", f, "--verbose"});
      run(in, {"diagnose", f, "--format", "json"});
      run(in, {"diagnose", f, "--format", "md"});
    } else if (family == "views") {
      const CliResult k = run(in, {"kernels", f, "--format", "json"});
      EXPECT_EQ(k.out.find("\"total_ns\": -"), std::string::npos) << in.name << ": a kernel total wrapped\n" << k.out;
      run(in, {"kernels", f});
      run(in, {"steps", f});
      run(in, {"steps", f, "--format", "json"});
      run(in, {"critical-path", f, "--format", "json"});
      run(in, {"whatif", f, "--edit", "graph"});
      run(in, {"info", f});
      run(in, {"info", f, "--format", "json"});
    } else if (family == "export") {
      // Built without SQLite, this exits 2 saying so: still no signal. A
      // second export, streamed (--stream: its own reader, batch by batch,
      // and a work database), replaces the first's file (the writer's copy,
      // not a rename); a trace that did not load is refused as its own
      // output, and its streamed export fails leaving no file.
      if (run(in, {"export", "--sqlite", f, "-o", out + ".db"}).exit_code == 0) {
        run(in, {"export", "--sqlite", "--stream", f, "-o", out + ".db", "--no-args"});
      } else {
        EXPECT_EQ(run(in, {"export", "--sqlite", f, "-o", f}).exit_code, 2) << in.name;
        fs::remove(out + ".db");
        if (run(in, {"export", "--sqlite", "--stream", f, "-o", out + ".db"}).exit_code != 0) {
          EXPECT_FALSE(fs::exists(out + ".db")) << in.name << ": a failed streamed export left its output";
        }
      }
    } else if (family == "report") {
      run(in, {"report", f, "-o", out + ".html"});
      run(in, {"report", reference(), f, "-o", out + ".html"});
    } else if (family == "compare") {
      run(in, {"compare", f, f});
      run(in, {"compare", reference(), f, "--format", "json"});
    }
  }
  EXPECT_GT(runs_, 100) << "the corpora were not found under " << kFuzzDir;
  std::printf("%d runs of tprof on %zu inputs\n", runs_, inputs_->size());
}

INSTANTIATE_TEST_SUITE_P(Commands, HostileCli,
                         ::testing::Values("table", "diagnose", "views", "report", "compare", "merge", "export"),
                         [](const ::testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
}  // namespace tprof
