// Bad input through the CLI: every subcommand exits 2, prints nothing on
// stdout and one stderr line "tprof: <path>: byte <N>: <what>" that says what
// was expected (the byte part for parse and format errors, not for I/O);
// bad flags exit 2; a failed run leaves no output file behind; a truncated
// trace still gives its report (exit 0) and says it was truncated.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "src/base/safe_text.h"
#include "tests/support/run_cli.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::run_cli;

const std::vector<std::string> kCommands = {"table", "steps", "info"};

std::string fixture_path(const std::string& relative) { return std::string(TPROF_TEST_DATA) + "/" + relative; }

std::string read_fixture(const std::string& relative) {
  Result<std::string> bytes = internal::read_file(fixture_path(relative));
  EXPECT_TRUE(bytes) << relative;
  return bytes ? std::move(bytes).value() : std::string();
}

class CliErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           ("tprof_cli_errors_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }

  static CliResult run(const std::vector<std::string>& args) { return run_cli(TPROF_BIN, args); }

  // The names of the files in the temp dir.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  // Checks that `path` fails in every subcommand with exit code 2, an empty
  // stdout and the one line "tprof: <path>: [byte <N>: ]<what>", N in
  // [first_byte, last_byte]; first_byte -1: no byte part (I/O errors).
  void expect_bad_input(const std::string& path, std::int64_t first_byte, std::int64_t last_byte,
                        const std::string& what, const std::vector<std::string>& flags = {}) {
    for (const std::string& cmd : kCommands) {
      SCOPED_TRACE("tprof " + cmd + " " + path);
      std::vector<std::string> args = flags;
      args.push_back(cmd);
      args.push_back(path);
      const CliResult r = run(args);
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_EQ(r.out, "");
      const std::string prefix = "tprof: " + path + ": ";
      ASSERT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
      EXPECT_EQ(r.err.back(), '\n');
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
      std::string message = r.err.substr(prefix.size());
      if (first_byte < 0) {
        EXPECT_EQ(message.rfind("byte ", 0), std::string::npos) << r.err;
      } else {
        std::int64_t n = -1;
        char colon = 0;
        int used = 0;
        ASSERT_EQ(std::sscanf(message.c_str(), "byte %" SCNd64 "%c%n", &n, &colon, &used), 2) << r.err;
        EXPECT_EQ(colon, ':') << r.err;
        EXPECT_GE(n, first_byte) << r.err;
        EXPECT_LE(n, last_byte) << r.err;
        message = message.substr(static_cast<std::size_t>(used));
      }
      EXPECT_NE(message.find(what), std::string::npos) << "expected it to name '" << what << "': " << r.err;
    }
  }

  fs::path dir_;
};

TEST_F(CliErrors, MissingFileIsAnIoErrorWithoutOffset) {
  expect_bad_input((dir_ / "missing.json").string(), -1, -1, "cannot open");
}

TEST_F(CliErrors, DirectoryIsNotATraceFile) { expect_bad_input(dir_.string(), -1, -1, "expected a trace file"); }

TEST_F(CliErrors, EmptyFile) { expect_bad_input(write("empty.json", ""), 0, 0, "empty file, expected a JSON object"); }

TEST_F(CliErrors, WhitespaceOnlyFile) {
  expect_bad_input(write("blank.json", " \n\t\n"), 4, 4, "expected a JSON object or array");
}

TEST_F(CliErrors, BinaryGarbage) {
  std::string garbage;
  // Starts with 0x80: not whitespace, not JSON.
  for (int i = 0; i < 512; ++i) garbage += static_cast<char>((i * 167 + 0x80) & 0xff);
  expect_bad_input(write("garbage.bin", garbage), 0, 0, "expected a JSON object or array");
}

TEST_F(CliErrors, JsonThatIsNotATrace) {
  expect_bad_input(write("nodes.json", R"({"nodes": []})"), 0, 0, "without \"traceEvents\"");
  expect_bad_input(write("number.json", "42\n"), 0, 0, "expected a JSON object or array");
  expect_bad_input(write("string.json", R"("traceEvents")"), 0, 0, "expected a JSON object or array");
  const std::string not_array = R"({"traceEvents": {"ph": "X"}})";
  const auto object_at = static_cast<std::int64_t>(not_array.find(": {") + 2);
  expect_bad_input(write("events_object.json", not_array), object_at, object_at, "\"traceEvents\" is not an array");
  expect_bad_input(write("array_of_numbers.json", "[1, 2, 3]"), 1, 1, "does not hold trace events");
}

TEST_F(CliErrors, SyntaxErrorMidFileNamesItsByte) {
  const std::string small = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\", \"ts\": 1, \"dur\": 1},\n"
                            " {\"ph\": \"X\", \"name\": \"b\", \"ts\": 2 \"dur\": 1}]}";
  const auto small_at = static_cast<std::int64_t>(small.find("\"dur\": 1}]"));
  expect_bad_input(write("small_syntax.json", small), small_at, small_at, "expected ',' or '}'");

  // A real trace with one comma between an event's fields turned into ';'
  // past the middle of the file: --strict refuses it at that byte; by
  // default the damaged event is skipped, the rest read, and every command
  // says so on stderr (issue 27).
  std::string text = read_fixture("torch-1.13/memory/memory.kineto.json");
  const std::size_t at = text.find(", \"dur\"", text.size() / 2);
  ASSERT_NE(at, std::string::npos);
  text[at] = ';';
  const std::string path = write("memory_syntax.json", text);
  expect_bad_input(path, static_cast<std::int64_t>(at), static_cast<std::int64_t>(at), "expected ',' or '}'",
                   {"--strict"});
  for (const std::string& cmd : kCommands) {
    SCOPED_TRACE("tprof " + cmd + " " + path);
    const CliResult r = run({cmd, path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out, "");
    // info lists the diagnostics in its output; the others note them on stderr.
    if (cmd == "info") {
      EXPECT_NE(r.out.find("skipped_bytes: 1"), std::string::npos) << r.out;
    } else {
      EXPECT_NE(r.err.find("skipped_bytes=1"), std::string::npos) << r.err;
    }
  }
}

TEST_F(CliErrors, CorruptGzipHeader) {
  std::string gz = read_fixture("torch-1.13/mlp/tb_gz/worker0.1795319515914.pt.trace.json.gz");
  ASSERT_GT(gz.size(), 16u);
  gz[2] = '\x63';  // compression method: only 8 (deflate) exists
  // The offset is where decoding stopped, inside the 10-byte header.
  expect_bad_input(write("bad_method.json.gz", gz), 2, 10, "gzip");
  expect_bad_input(write("magic_only.json.gz", std::string("\x1f\x8b", 2)), 0, 2, "gzip");
}

// A gzip bomb (64 MiB of spaces in under 100 KiB) is refused
// by the ratio limit before it is inflated; each limit is a flag, and the
// message names the one that stopped it.
TEST_F(CliErrors, GzipBombsStopAtTheRatioOrTheSizeLimitNamingIt) {
  const auto gz = internal::gzip(std::string(64u << 20, ' '), 9);
  ASSERT_TRUE(gz);
  const std::string bomb = write("bomb.json.gz", *gz);
  const CliResult by_ratio = run({"info", bomb});
  EXPECT_EQ(by_ratio.exit_code, 2);
  EXPECT_NE(by_ratio.err.find("200 times the"), std::string::npos) << by_ratio.err;
  EXPECT_NE(by_ratio.err.find("--max-inflate-ratio"), std::string::npos) << by_ratio.err;
  const CliResult by_size = run({"info", bomb, "--max-inflate-ratio", "0", "--max-inflated-mib", "8"});
  EXPECT_EQ(by_size.exit_code, 2);
  EXPECT_NE(by_size.err.find("more than 8 MiB"), std::string::npos) << by_size.err;
  EXPECT_NE(by_size.err.find("--max-inflated-mib"), std::string::npos) << by_size.err;
  // With the ratio lifted, it inflates and is what it is: whitespace.
  const CliResult lifted = run({"info", bomb, "--max-inflate-ratio", "0"});
  EXPECT_EQ(lifted.exit_code, 2);
  EXPECT_EQ(lifted.err.find("more than"), std::string::npos) << lifted.err;
}

// --max-inflate-ratio nan lifted the gzip limit silently (issue 23): NaN,
// infinities and negative ratios are refused with exit 2 and a line naming
// the flag; 0 stays the documented "no ratio limit" (the test above).
TEST_F(CliErrors, AGzipRatioThatIsNotANumberIsRefused) {
  const auto gz = internal::gzip(std::string(64u << 20, ' '), 9);
  ASSERT_TRUE(gz);
  const std::string bomb = write("bomb.json.gz", *gz);
  const std::string plain = fixture_path("torch-1.13/memory/memory.kineto.json");
  for (const std::string ratio : {"nan", "NaN", "-nan", "inf", "-inf", "-1", "1e400"}) {
    for (const std::string& file : {bomb, plain}) {
      SCOPED_TRACE("--max-inflate-ratio " + ratio + " " + file);
      const CliResult r = run({"info", file, "--max-inflate-ratio", ratio});
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_EQ(r.out, "");
      EXPECT_NE(r.err.find("--max-inflate-ratio"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("more than"), std::string::npos) << r.err;  // refused before inflating
    }
  }
}

TEST_F(CliErrors, BadFlagsExit2WithoutOutput) {
  const std::string good = fixture_path("torch-1.13/memory/memory.kineto.json");
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate", good},
      {"table"},
      {"table", good, "--bogus"},
      {"--bogus", "table", good},
      {"table", good, "--sort-by", "nonsense"},
      {"table", good, "--row-limit", "abc"},
      {"table", good, "--times", "fs"},
      {"steps", good, "--format", "xml"},
      {"info", good, "--format", "xml"},
      {"info", good, "second_trace.json"},
      {"--threads", "-1", "info", good},
  };
  for (const auto& args : cases) {
    std::string line;
    for (const auto& a : args) line += " " + a;
    SCOPED_TRACE("tprof" + line);
    const CliResult r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(r.err.empty());
  }
  const CliResult sort = run({"table", good, "--sort-by", "nonsense"});
  EXPECT_NE(sort.err.find("nonsense"), std::string::npos) << sort.err;
  EXPECT_NE(sort.err.find("cpu_time_total"), std::string::npos) << "should list the valid keys: " << sort.err;
}

TEST_F(CliErrors, FailedRunLeavesNoOutputFile) {
  const std::string bad = write("bad.json", R"({"traceEvents": [{"ph": "X",, "ts": 1}]})");
  const std::string good = fixture_path("torch-1.13/memory/memory.kineto.json");
  const std::string out = (dir_ / "out.txt").string();
  for (const std::string& cmd : kCommands) {
    SCOPED_TRACE("tprof " + cmd + " bad.json -o out.txt");
    const CliResult r = run({cmd, bad, "-o", out});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(listing(), std::vector<std::string>{"bad.json"});
  }
  const CliResult sort = run({"table", good, "--sort-by", "nonsense", "-o", out});
  EXPECT_EQ(sort.exit_code, 2) << sort.err;
  EXPECT_EQ(listing(), std::vector<std::string>{"bad.json"});

  // An output directory that does not exist: one line naming it, no stdout.
  const std::string unwritable = (dir_ / "no_such_dir" / "out.txt").string();
  const CliResult r = run({"info", good, "-o", unwritable});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("tprof: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("no_such_dir"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_EQ(listing(), std::vector<std::string>{"bad.json"});

  // The same command with a good input writes the file and nothing else.
  const CliResult ok = run({"table", good, "-o", out});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "");
  EXPECT_EQ(listing(), (std::vector<std::string>{"bad.json", "out.txt"}));
}

// Output safety: the input is never overwritten, a failed stdout is an
// error, and devices are written to, not replaced.
TEST_F(CliErrors, OutputNeverReplacesTheInputAndStdoutErrorsAreErrors) {
  const std::string trace = write("in.json", read_fixture("torch-1.13/memory/memory.kineto.json"));
  const std::string original = read_fixture("torch-1.13/memory/memory.kineto.json");
  for (const std::string& cmd : kCommands) {
    SCOPED_TRACE("tprof " + cmd + " in.json -o in.json");
    const CliResult r = run({cmd, trace, "-o", trace});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err, "tprof: " + trace + ": is the input trace; refusing to overwrite it\n");
    EXPECT_EQ(*internal::read_file(trace), original);
  }
  // The same through a link to it.
  const std::string link = (dir_ / "link.json").string();
  fs::create_symlink(trace, link);
  EXPECT_EQ(run({"table", trace, "-o", link}).exit_code, 2);
  EXPECT_EQ(*internal::read_file(trace), original);

  const CliResult full = run_cli("/bin/sh", {"-c", std::string(TPROF_BIN) + " table '" + trace + "' > /dev/full"});
  EXPECT_EQ(full.exit_code, 2) << full.err;
  EXPECT_NE(full.err.find("tprof: cannot write to standard output: No space left on device"), std::string::npos)
      << full.err;
  const CliResult closed = run_cli("/bin/sh", {"-c", std::string(TPROF_BIN) + " info '" + trace + "' >&-"});
  EXPECT_EQ(closed.exit_code, 2) << closed.err;

  const CliResult null = run({"table", trace, "-o", "/dev/null"});
  EXPECT_EQ(null.exit_code, 0) << null.err;
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(CliErrors, HostileNamesNeverReachTheTerminalRaw) {
  // An ESC sequence, an 8-bit CSI and bytes that are not UTF-8 in a name:
  // text output shows them escaped, JSON output stays valid UTF-8.
  const std::string trace = write("hostile.json", std::string(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "ev)") +
                                                      "\x1b[2J\xc2\x9b\xff" + R"(", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]})");
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"table", trace},
                                             {"info", trace},
                                             {"info", "--format", "json", trace},
                                             {"kernels", "--format", "json", trace},
                                             {"diagnose", trace},
                                             {"diagnose", "--format", "json", trace},
                                             {"diagnose", "--format", "md", trace}}) {
    const CliResult r = run(args);
    SCOPED_TRACE(args.front() + " " + args[1]);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
    EXPECT_FALSE(internal::needs_safe_text(r.out));  // valid UTF-8, no controls but \n and \t
  }
  EXPECT_NE(run({"table", trace}).out.find("ev\\x1b[2J\\u009b\xef\xbf\xbd"), std::string::npos);
}

// A usage error quotes the argument as typed (CLI11's "--api: X not in
// {torch,all}", "unknown command 'X'"): through the same text filter, so an
// ESC in it is shown as "\x1b", never obeyed by the terminal (issue 36).
TEST_F(CliErrors, UsageErrorsQuoteArgumentsThroughTheTextFilter) {
  const std::string esc = "\x1b[2J\x1b]0;t\x07";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"record", "--api", esc, "--", "true"}, {"table", "--format", esc, "t.json"}, {"tab" + esc, "t.json"}}) {
    const CliResult r = run(args);
    SCOPED_TRACE(args.front());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("\\x1b[2J"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\x07'), std::string::npos) << r.err;
  }
}

// A name for every byte a terminal or a strict JSON parser minds: C0 (NUL
// by escape, the rest raw and escaped), DEL, C1 as UTF-8 (U+0080..U+009F,
// U+009B the 8-bit CSI), the raw bytes 0x80..0x9f and 0xff, ESC and OSC
// sequences, a surrogate and an overlong form written raw.
std::string hostile_names_trace() {
  std::vector<std::string> names;
  for (int c = 0; c < 0x20; ++c) {
    char esc[8];
    std::snprintf(esc, sizeof esc, "\\u%04x", c);
    names.push_back(std::string("esc") + esc);
    if (c != 0 && c != '\n' && c != '\r') names.push_back("raw" + std::string(1, static_cast<char>(c)));
  }
  for (const char* n : {"del\x7f", "c1\xc2\x80", "csi\xc2\x9b" "2J", "c1\xc2\x9f", "raw\x80", "raw\x9b" "2J", "raw\x9f",
                        "ff\xff", "sur\xed\xa0\x80", "over\xc0\xaf", "sgr\x1b[31mred\x1b[0m", "osc\x1b]0;title\x07",
                        "cut\xe2\x82", "ok \xe2\x82\xac"}) {
    names.push_back(n);
  }
  // All of them at once, where info, diagnose and the summaries quote
  // names: the process, thread and device, the op, kernel and annotation
  // that take the most time.
  const std::string mix = "mix\x7f\xc2\x9b\x1b[2J\x1b]0;t\x07\x80\x9b\xff\x01\\u0000\xc2\x85";
  std::string t = R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "gpu)" + mix + R"("}],
"traceEvents": [
{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "proc)" + mix + R"("}},
{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thr)" + mix + R"("}},
{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "gpu)" + mix + R"("}},
{"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream)" + mix + R"("}},
{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100000},
{"ph": "X", "cat": "user_annotation", "name": "ann)" + mix + R"(", "pid": 1, "tid": 1, "ts": 5000, "dur": 90000},
{"ph": "X", "cat": "cpu_op", "name": "op)" + mix + R"(", "pid": 1, "tid": 1, "ts": 5001, "dur": 40000},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5002, "dur": 30, "args": {"correlation": 9999}},
{"ph": "X", "cat": "kernel", "name": "k)" + mix + R"(", "pid": 0, "tid": 7, "ts": 5100, "dur": 80000, "args": {"device": 0, "stream": 7, "correlation": 9999}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 6002, "dur": 30, "args": {"correlation": 9998}},
{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL)" + mix + R"(", "pid": 0, "tid": 8, "ts": 6100, "dur": 30000, "args": {"device": 0, "stream": 8, "correlation": 9998}})";
  std::int64_t ts = 1;
  for (std::size_t i = 0; i < names.size(); ++i, ts += 40) {
    const std::string n = names[i];
    t += ",\n{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op" + n + "\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         std::to_string(ts) + ", \"dur\": 10, \"args\": {\"External id\": " + std::to_string(i) + "}}";
    t += ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, "
         "\"ts\": " + std::to_string(ts + 11) + ", \"dur\": 5, \"args\": {\"correlation\": " + std::to_string(i + 1) + "}}";
    t += ",\n{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k" + n + "\", \"pid\": 0, \"tid\": 7, \"ts\": " +
         std::to_string(ts + 20) + ", \"dur\": 8, \"args\": {\"device\": 0, \"stream\": 7, \"correlation\": " +
         std::to_string(i + 1) + ", \"grid\": [1, 1, 1]}}";
  }
  return t + "\n]}\n";
}

// Where a strict parser finds `json` malformed ("" when it is valid): Python's
// json, which refuses raw control characters, bad escapes and invalid UTF-8.
std::string python_json_error(const std::string& json_path) {
  const CliResult r = run_cli("/usr/bin/python3",
                              {"-c", "import json, sys\n"
                                     "json.loads(sys.stdin.buffer.read().decode('utf-8'), "
                                     "parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))"},
                              json_path);
  return r.exit_code == 0 ? std::string() : r.err.empty() ? "exit " + std::to_string(r.exit_code) : r.err;
}

// Issue 36, defect 6: a DEL in a name came out of every --format json as
// "\x7f": the terminal filter ran over JSON with its text escapes. Every
// JSON output (and summarize's files, report's embedded data) is now valid
// JSON for any name bytes, and has no raw ESC, DEL or C1 for a terminal.
TEST_F(CliErrors, EveryJsonOutputIsValidJsonWhateverTheNames) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 to parse the JSON strictly";
  const std::string trace = write("hostile.json", hostile_names_trace());
  fs::create_directories(dir_ / "ranks");
  const std::string ranks = (dir_ / "ranks").string();
  fs::copy_file(trace, dir_ / "ranks" / "rank0.json");
  fs::copy_file(trace, dir_ / "ranks" / "rank1.json");
  const std::string summary = (dir_ / "hostile.summary.json").string();
  ASSERT_EQ(run({"summarize", trace, "-o", summary}).exit_code, 0);
  const std::string html = (dir_ / "report.html").string();
  ASSERT_EQ(run({"report", trace, "-o", html}).exit_code, 0);
  std::vector<std::pair<std::string, std::string>> outputs;  // what, bytes
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"table", "--format", "json", "--row-limit", "-1", trace},
           {"table", "--format", "json", "--sort-by", "cuda_time_total", trace},
           {"compare", "--format", "json", trace, trace},
           {"kernels", "--format", "json", trace},
           {"info", "--format", "json", trace},
           {"steps", "--format", "json", trace},
           {"diagnose", "--format", "json", trace},
           {"diagnose", "--format", "json", ranks},
           {"merge", "--format", "json", summary},
           {"merge", "--format", "summary", summary},
           {"summarize", trace}}) {
    const CliResult r = run(args);
    std::string what;
    for (const std::string& a : args) what += a + " ";
    EXPECT_EQ(r.exit_code, 0) << what << r.err;
    outputs.emplace_back(what, r.out);
  }
  Result<std::string> s = internal::read_file(summary);
  ASSERT_TRUE(s);
  outputs.emplace_back("summarize -o", *s);
  Result<std::string> page = internal::read_file(html);
  ASSERT_TRUE(page);
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  const std::size_t from = page->find(open);
  ASSERT_NE(from, std::string::npos);
  const std::size_t to = page->find("</script>", from);
  outputs.emplace_back("report's data", page->substr(from + open.size(), to - from - open.size()));
  outputs.emplace_back("report's page", *page);
  for (const auto& [what, out] : outputs) {
    SCOPED_TRACE(what);
    EXPECT_FALSE(out.empty());
    // Nothing a terminal would act on, no invalid UTF-8: the filter had nothing to do.
    EXPECT_FALSE(internal::needs_safe_text(out));
    EXPECT_EQ(out.find('\x1b'), std::string::npos);
    EXPECT_EQ(out.find('\x7f'), std::string::npos);
    EXPECT_EQ(out.find("\\x7f"), std::string::npos);
    if (what == "report's page") continue;
    const std::string file = write("out.json", out);
    EXPECT_EQ(python_json_error(file), "");
  }
  // The names are there, escaped: DEL, C1 and ESC as \u escapes, a byte that
  // is not UTF-8 as \ufffd.
  const std::string& table = outputs.front().second;
  for (const char* escaped : {"opdel\\u007f", "opc1\\u0080", "opcsi\\u009b2J", "opsgr\\u001b[31mred", "opff\\ufffd",
                              "opraw\\u0001", "opesc\\u0000", "opok \xe2\x82\xac"}) {
    EXPECT_NE(table.find(escaped), std::string::npos) << escaped;
  }
  // Each output quotes the mixed name somewhere (its invalid bytes as
  // \ufffd, or as U+FFFD itself once a summary was read back); steps are
  // "ProfilerStep#N", and the job view (diagnose DIR, merge --format json)
  // names kernels only for collectives matched across ranks.
  for (const auto& [what, out] : outputs) {
    if (what.rfind("steps", 0) == 0 || what.find(ranks) != std::string::npos ||
        what.rfind("merge --format json", 0) == 0) {
      continue;
    }
    const std::size_t at = out.find("mix\\u007f\\u009b\\u001b[2J\\u001b]0;t\\u0007");
    ASSERT_NE(at, std::string::npos) << what;
    EXPECT_LT(out.find("\\u0001\\u0000\\u0085", at), at + 80) << what;
  }
}

TEST_F(CliErrors, VersionUnknownCommandsAndGlobalFlagsAnywhere) {
  const CliResult v = run({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("tprof ", 0), 0u) << v.out;
  const CliResult typo = run({"tabel", "x.json"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_EQ(typo.out, "");
  EXPECT_NE(typo.err.find("unknown command 'tabel'; did you mean 'table'?"), std::string::npos) << typo.err;
  const CliResult far = run({"--threads", "2", "xyzzy"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
  // -q after the command: the diagnostics note is gone, as with -q before it.
  const std::string trace = write("odd.json", R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1}]})");
  const CliResult before = run({"-q", "table", trace});
  const CliResult after = run({"table", trace, "-q"});
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.err, "");
  EXPECT_EQ(after.out, before.out);
  EXPECT_NE(run({"table", trace}).err.find("note"), std::string::npos);
}

TEST_F(CliErrors, PipesStdinAndDevicesAreInputs) {
  // `-` was "cannot open"; /dev/stdin from a pipe and <(...) were "empty file".
  const std::string trace = fixture_path("torch-1.13/memory/memory.kineto.json");
  const CliResult file = run({"table", trace});
  ASSERT_EQ(file.exit_code, 0) << file.err;
  const CliResult dash = run_cli(TPROF_BIN, {"table", "-"}, trace);
  EXPECT_EQ(dash.exit_code, 0) << dash.err;
  EXPECT_EQ(dash.out, file.out);
  const CliResult piped =
      run_cli("/bin/sh", {"-c", "cat '" + trace + "' | " + std::string(TPROF_BIN) + " table /dev/stdin"});
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, file.out);
  // A device that never ends stops at its first byte.
  expect_bad_input("/dev/zero", 0, 0, "expected a JSON object or array");
}

TEST_F(CliErrors, ThreadCountsOutOfRangeAreUsageErrors) {
  const std::string good = fixture_path("torch-1.13/memory/memory.kineto.json");
  for (const std::string n : {"100000", "2147483647", "-1"}) {
    const CliResult r = run({"--threads", n, "info", good});
    EXPECT_EQ(r.exit_code, 2) << n;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("--threads: Value " + n + " not in range 0 to 256"), std::string::npos) << r.err;
    EXPECT_LT(r.err.size(), 200u) << r.err;
  }
  EXPECT_EQ(run({"--threads", "256", "info", good}).exit_code, 0);
}

TEST_F(CliErrors, TruncatedTraceStillReportsAndSaysSo) {
  const std::string text = read_fixture("torch-1.13/memory/memory.kineto.json");
  const std::string path = write("cut.json", text.substr(0, text.size() / 2));
  for (const std::string& cmd : {std::string("table"), std::string("steps")}) {
    SCOPED_TRACE("tprof " + cmd + " cut.json");
    const CliResult r = run({cmd, path});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.out.empty());
    EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(path), std::string::npos) << r.err;

    const CliResult quiet = run({"-q", cmd, path});
    EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
    EXPECT_EQ(quiet.err, "");
    EXPECT_EQ(quiet.out, r.out);
  }
  // info lists every diagnostic in its report.
  const CliResult info = run({"info", path});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("truncated"), std::string::npos) << info.out;

  // A cut .gz too.
  const std::string gz = read_fixture("torch-1.13/mlp/tb_gz/worker0.1795319515914.pt.trace.json.gz");
  const std::string gz_path = write("cut.json.gz", gz.substr(0, gz.size() * 2 / 3));
  const CliResult table = run({"table", gz_path});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_FALSE(table.out.empty());
  EXPECT_NE(table.err.find("truncated"), std::string::npos) << table.err;
}

}  // namespace
}  // namespace tprof
