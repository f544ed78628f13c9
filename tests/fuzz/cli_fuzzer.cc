// Fuzz target: the CLI's argument handling, in process (tprof::cli::run, the
// code main() runs). The input is argv, one argument per line (at most 40).
// Arguments that name files are placeholders, so that the fuzzer combines
// real traces with every flag instead of inventing paths:
//   @a  a CPU trace with steps      @g  a GPU trace      @z  a .json.gz
//   @r  a directory of two ranks    @s  a rank summary (tprof summarize)
//   @o  out/o.txt                   @h  out/o.html
// Any other argument with a '/' is refused (the input is skipped), and so are
// inputs naming `record`, `serve` or `sweep`, which run programs or listen on
// a socket. The process runs in a scratch directory (out/), emptied after
// every input; stdin is /dev/null, so `-` reads nothing.
//
// Properties:
//   - the exit code is 0, 1 or 2 (never an uncaught exception or a crash);
//   - exit 2 leaves no output file behind (no half-written output);
//   - no temporary file (*.tmp.*) is left behind, whatever the exit code.
// Seeds: tests/fuzz/corpus_cli; dictionary: tests/fuzz/cli.dict.
// stdout and stderr go to /dev/null during a run unless
// TPROF_CLI_FUZZ_VERBOSE=1 (set it to see a crash's messages and report).
// The target changes the working directory: give libFuzzer absolute paths
// (the corpus directory, -artifact_prefix), or it writes new inputs into out/
// where they are deleted.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tools/tprof/cli.h"

#ifndef TPROF_FUZZ_SOURCE_DIR
#error "TPROF_FUZZ_SOURCE_DIR (tests/fuzz) must be defined"
#endif

namespace fs = std::filesystem;

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "cli_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

[[noreturn]] void setup_failed(const std::string& what) {
  std::fprintf(stderr, "cli_fuzzer: set-up failed: %s\n", what.c_str());
  std::abort();
}

constexpr std::size_t kMaxArgs = 40;
constexpr std::size_t kMaxArgBytes = 256;

// The scratch tree: <tmp>/in (the traces the placeholders name) and
// <tmp>/out (the working directory, emptied after each input).
struct Workspace {
  fs::path root, in, out;
  std::string cpu, gpu, gz, ranks, summary, out_text, out_html;
};

void copy_or_die(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) setup_failed("copy " + from.string() + ": " + ec.message());
}

// Runs the CLI with stdout and stderr sent to /dev/null (unless verbose).
int run_quietly(const std::vector<std::string>& args) {
  static const bool verbose = [] {
    const char* v = std::getenv("TPROF_CLI_FUZZ_VERBOSE");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const std::string& a : args) argv.push_back(a.c_str());
  if (verbose) return tprof::cli::run(static_cast<int>(argv.size()), argv.data());

  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = dup(1), saved_err = dup(2);
  const int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved_out < 0 || saved_err < 0 || null_fd < 0) setup_failed("dup/open /dev/null");
  dup2(null_fd, 1);
  dup2(null_fd, 2);
  const int rc = tprof::cli::run(static_cast<int>(argv.size()), argv.data());
  std::fflush(stdout);
  std::fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  close(null_fd);
  return rc;
}

const Workspace& workspace() {
  static const Workspace ws = [] {
    Workspace w;
    std::string pattern = (fs::temp_directory_path() / "tprof_cli_fuzz.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) setup_failed("mkdtemp");
    w.root = pattern;
    w.in = w.root / "in";
    w.out = w.root / "out";
    fs::create_directories(w.in / "ranks");
    fs::create_directories(w.out);
    const fs::path src = TPROF_FUZZ_SOURCE_DIR;
    w.cpu = (w.in / "cpu.json").string();
    w.gpu = (w.in / "gpu.json").string();
    w.gz = (w.in / "memory.json.gz").string();
    w.ranks = (w.in / "ranks").string();
    w.summary = (w.in / "rank0.summary.json").string();
    w.out_text = (w.out / "o.txt").string();
    w.out_html = (w.out / "o.html").string();
    copy_or_die(src / "corpus" / "kineto_2022.json", w.cpu);
    copy_or_die(src / "corpus_gpu" / "hta_backward_thread_2022-10.json", w.gpu);
    copy_or_die(src / "corpus" / "memory.json.gz", w.gz);
    copy_or_die(src / "corpus_gpu" / "hta_backward_thread_2022-10.json", w.in / "ranks" / "rank0.json");
    copy_or_die(src / "corpus_gpu" / "after_fix_trace.json", w.in / "ranks" / "rank1.json");
    // stdin reads nothing; a `-` argument must not wait for a terminal.
    const int null_in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_in < 0 || dup2(null_in, 0) < 0) setup_failed("stdin from /dev/null");
    close(null_in);
    if (run_quietly({"tprof", "-q", "summarize", w.gpu, "-o", w.summary}) != 0) setup_failed("tprof summarize");
    std::error_code ec;
    fs::current_path(w.out, ec);
    if (ec) setup_failed("chdir " + w.out.string() + ": " + ec.message());
    // Removed at exit; the path is copied to storage that outlives the
    // static destructors, which run before this handler.
    static char root[4096];
    std::snprintf(root, sizeof root, "%s", w.root.c_str());
    std::atexit([] {
      std::error_code ignored;
      fs::current_path("/", ignored);
      fs::remove_all(root, ignored);
    });
    return w;
  }();
  return ws;
}

// The argv of an input, or nothing when the input is skipped.
bool parse_args(std::string_view bytes, const Workspace& w, std::vector<std::string>* args) {
  args->assign(1, "tprof");
  if (bytes.ends_with('\n')) bytes.remove_suffix(1);  // a trailing newline ends the list
  if (bytes.empty()) return true;
  for (std::size_t pos = 0;;) {
    const std::size_t nl = std::min(bytes.find('\n', pos), bytes.size());
    std::string arg(bytes.substr(pos, nl - pos));
    if (args->size() > kMaxArgs || arg.size() > kMaxArgBytes) return false;
    if (arg.find('\0') != std::string::npos) return false;  // argv strings cannot hold a NUL
    if (arg == "record" || arg == "serve" || arg == "sweep") return false;
    const std::pair<std::string_view, const std::string*> placeholders[] = {
        {"@a", &w.cpu},     {"@g", &w.gpu},      {"@z", &w.gz},      {"@r", &w.ranks},
        {"@s", &w.summary}, {"@o", &w.out_text}, {"@h", &w.out_html}};
    const auto named =
        std::find_if(std::begin(placeholders), std::end(placeholders), [&](const auto& p) { return p.first == arg; });
    if (named != std::end(placeholders)) {
      arg = *named->second;
    } else if (arg.find('/') != std::string::npos) {
      return false;  // only the scratch tree
    }
    args->push_back(std::move(arg));
    if (nl == bytes.size()) break;
    pos = nl + 1;
  }
  return true;
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Workspace& w = workspace();
  std::vector<std::string> args;
  if (!parse_args(std::string_view(reinterpret_cast<const char*>(data), size), w, &args)) return 0;

  const int rc = run_quietly(args);
  if (rc != 0 && rc != 1 && rc != 2)
    property_failed("exit code not 0, 1 or 2", std::to_string(rc) + ": " + joined(args));

  std::vector<std::string> left;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(w.out, ec)) left.push_back(e.path().filename().string());
  for (const std::string& name : left) {
    if (name.find(".tmp.") != std::string::npos) property_failed("temporary file left", name + ": " + joined(args));
    if (rc == 2) property_failed("output written by a run that failed (exit 2)", name + ": " + joined(args));
  }
  for (const std::string& name : left) fs::remove_all(w.out / name, ec);
  return 0;
}
