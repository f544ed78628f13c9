// tprof sweep: runs examples/matmul_add at growing sizes and shows where the
// work turns from overhead-bound to compute-bound (docs/sweep.md).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "src/base/file.h"
#include "tools/tprof/common.h"
#include "tprof/sweep.h"

extern char** environ;

namespace tprof::cli {

namespace {

namespace fs = std::filesystem;

struct SweepArgs {
  std::vector<std::int64_t> sizes = {16, 32, 64, 128, 256, 512, 1024};
  std::string program;
  std::string device = "cpu";
  std::string dtype = "fp32";
  int steps = 10;
  std::string format = "text";
  std::string output;
  std::string html;
  std::string keep;
};

// The example next to this tprof in a build tree (build/tools/tprof/tprof →
// build/examples/matmul_add), else "" (then --program is required).
std::string default_program() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const fs::path candidate = self.parent_path() / ".." / ".." / "examples" / "matmul_add";
  return fs::is_regular_file(candidate, ec) ? fs::weakly_canonical(candidate, ec).string() : std::string();
}

// Runs argv with stdout and stderr into `log`; returns its exit status, or
// -1 when it could not start or died of a signal.
int run(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The last 600 bytes of the child's log, for the error message.
std::string tail(const std::string& path) {
  Result<std::string> text = internal::read_file(path);
  if (!text) return {};
  return text->size() > 600 ? "..." + text->substr(text->size() - 600) : *text;
}

int run_sweep(const SweepArgs& a) {
  const std::string program = a.program.empty() ? default_program() : a.program;
  if (program.empty()) {
    std::cerr << "tprof: sweep: examples/matmul_add was not found next to this tprof; name it with --program\n";
    return kExitBadInput;
  }
  if (::access(program.c_str(), X_OK) != 0) {
    std::cerr << "tprof: sweep: " << program << ": not an executable program\n";
    return kExitBadInput;
  }
  std::error_code ec;
  fs::path dir;
  if (!a.keep.empty()) {
    dir = a.keep;
    fs::create_directories(dir, ec);
  } else {
    char tmpl[] = "/tmp/tprof_sweep_XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) dir = tmpl;
  }
  if (dir.empty() || ec) {
    std::cerr << "tprof: sweep: cannot create a directory for the traces\n";
    return kExitBadInput;
  }
  std::vector<SweepPoint> points;
  int rc = kExitOk;
  for (const std::int64_t size : a.sizes) {
    const std::vector<std::string> args = {program,     "--size",  std::to_string(size), "--dtype",     a.dtype,
                                           "--warmup",  "--steps", std::to_string(a.steps), "--trace-dir", dir.string(),
                                           "--device",  a.device};
    // The example names its trace <size>_<dtype>_warm_eager.json (--warmup,
    // no --compile/--fused). Exactly that file, removed first: a --keep
    // directory may hold a _compile or _fused trace, or an older run's.
    const fs::path trace = dir / (std::to_string(size) + "_" + a.dtype + "_warm_eager.json");
    fs::remove(trace, ec);
    const std::string log = (dir / ("sweep_" + std::to_string(size) + ".log")).string();
    if (!global_options().quiet) std::cerr << "sweep: size " << size << "\n";
    const int status = run(args, log);
    if (status != 0) {
      std::cerr << "tprof: sweep: " << program << " --size " << size << " failed (exit " << status << "): " << tail(log)
                << "\n";
      rc = kExitBadInput;
      break;
    }
    if (!fs::is_regular_file(trace, ec)) {
      std::cerr << "tprof: sweep: no trace written for size " << size << ": expected " << trace.string() << "\n";
      rc = kExitBadInput;
      break;
    }
    std::optional<Trace> t = load_trace(trace.string());
    if (!t) {
      rc = kExitBadInput;
      break;
    }
    points.push_back(sweep_point(*t, size));
  }
  if (a.keep.empty()) fs::remove_all(dir, ec);
  if (rc != kExitOk) return rc;
  const Sweep s = finish_sweep(std::move(points));
  if (!a.html.empty()) {
    const int h = emit(format_sweep_html(s, "tprof sweep: matmul_add " + a.dtype + " on " + a.device), a.html, "",
                       Markup::kJson);
    if (h != kExitOk) return h;
  }
  return emit(a.format == "json" ? format_sweep_json(s) : format_sweep_text(s), a.output, "",
              a.format == "json" ? Markup::kJson : Markup::kNone);
}

}  // namespace

void add_sweep_command(CLI::App& app, int* rc) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Run examples/matmul_add at growing sizes: step time vs work per size, and where it turns compute-bound");
  cmd->add_option("--sizes", args->sizes, "Sizes N (N x N), e.g. --sizes 16,64,256")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16));
  cmd->add_option("--program", args->program, "The matmul_add binary (default: the one built next to tprof)");
  cmd->add_option("--device", args->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--dtype", args->dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  cmd->add_option("--steps", args->steps, "Steps recorded per size")->check(CLI::Range(1, 10000));
  cmd->add_option("--format", args->format, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("-o,--output", args->output, "Write the table or JSON here instead of stdout");
  cmd->add_option("--html", args->html, "Also write a self-contained HTML chart here");
  cmd->add_option("--keep", args->keep, "Keep the traces in this directory (default: a temporary one, removed)");
  cmd->callback([args, rc] { *rc = run_sweep(*args); });
}

}  // namespace tprof::cli
