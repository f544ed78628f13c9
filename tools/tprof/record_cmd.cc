// tprof record [--delay-ms N] [--duration-ms N] [--nvtx-range NAME] [--on-signal SIG] [--api torch|all]
//              [-o DIR] [--worker NAME] [--gzip] -- PROGRAM [ARGS...]
//
// Runs PROGRAM unmodified with CUDA's injection hook pointing at
// libtprof_inject.so (src/cupti/inject.cc), which records it the way
// tprof::Profiler does and writes the trace as tensorboard_trace_handler
// names it. PROGRAM's output, standard input and exit status pass through
// unchanged: tprof record exits as PROGRAM did (127/126 when it cannot be
// started, 2 for bad options of its own), and says on stderr which trace
// files it wrote.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tools/tprof/common.h"

namespace tprof::cli {

namespace {

namespace fs = std::filesystem;

struct RecordOptions {
  std::int64_t delay_ms = 0;
  std::int64_t duration_ms = 0;
  std::string dir = ".";
  std::string worker;
  std::string nvtx_range;
  std::string on_signal;
  bool on_signal_set = false;  // given, even as ""
  std::string api = "torch";
  bool gzip = false;
  std::vector<std::string> command;
};

// The injection library: $TPROF_INJECT_LIBRARY, else next to this binary
// (the build tree), else ../lib/tprof/ (an installed tree).
std::string find_inject_library() {
  if (const char* v = std::getenv("TPROF_INJECT_LIBRARY"); v != nullptr && *v != '\0') return v;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const fs::path& p : {exe.parent_path() / "libtprof_inject.so",
                            exe.parent_path().parent_path() / "lib" / "tprof" / "libtprof_inject.so"}) {
    if (fs::exists(p, ec)) return p.string();
  }
  return {};
}

std::set<std::string> trace_files(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find(".pt.trace.json") != std::string::npos) out.insert(name);
  }
  return out;
}

// "USR2", "SIGUSR2" or "12" -> 12; 0 when it is not a signal a window may
// toggle on (SIGKILL and SIGSTOP cannot be caught; the fatal signals end
// the recording instead, and SIGCHLD/SIGPIPE/SIGALRM belong to programs).
int parse_toggle_signal(std::string name) {
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  static constexpr std::pair<const char*, int> kNames[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"WINCH", SIGWINCH},
                                                           {"URG", SIGURG},   {"PWR", SIGPWR},   {"TTIN", SIGTTIN},
                                                           {"TTOU", SIGTTOU}};
  for (const auto& [n, sig] : kNames) {
    if (name == n) return sig;
  }
  if (!name.empty() && name.size() <= 2 && std::isdigit(static_cast<unsigned char>(name[0])) &&
      std::isdigit(static_cast<unsigned char>(name.back()))) {
    const int sig = std::stoi(name);
    for (const auto& [n, s] : kNames) {
      if (s == sig) return sig;
    }
    if (sig >= SIGRTMIN && sig <= SIGRTMAX) return sig;
  }
  return 0;
}

// The child to pass the --on-signal signal on to: `kill -USR2 <tprof
// record's pid>` toggles the program's window as well as its own pid would.
volatile sig_atomic_t g_child = 0;
void forward_signal(int sig) {
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

// Runs the command with `env` added; returns its wait status, or sets
// *exec_errno when it could not be started. A nonzero `forward` signal
// received meanwhile is passed on to the child.
int run_child(const std::vector<std::string>& command, const std::vector<std::pair<std::string, std::string>>& env,
              int forward, int* exec_errno) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    *exec_errno = errno;
    return -1;
  }
  // The forwarding handler is in place before the child exists: a signal
  // in between must not kill tprof record (the child resets it).
  struct sigaction pass {}, old_pass{};
  if (forward != 0) {
    pass.sa_handler = forward_signal;
    sigemptyset(&pass.sa_mask);
    pass.sa_flags = SA_RESTART;
    sigaction(forward, &pass, &old_pass);
  }
  const pid_t pid = fork();
  if (pid < 0) {
    *exec_errno = errno;
    if (forward != 0) sigaction(forward, &old_pass, nullptr);
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    // First: until exec, this copy of tprof record holds the forwarding
    // handler, which has no child to forward to (a signal sent to the new
    // pid now is lost, not passed on).
    if (forward != 0) signal(forward, SIG_DFL);
    close(fds[0]);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    // exec keeps the pid: the injection library tells this process from
    // the ones it starts (their traces get the pid in their names).
    setenv("TPROF_RECORD_ROOT_PID", std::to_string(getpid()).c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    const int e = errno;
    ssize_t ignored = write(fds[1], &e, sizeof e);
    static_cast<void>(ignored);
    _exit(127);
  }
  close(fds[1]);
  int e = 0;
  ssize_t n;
  do {
    n = read(fds[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  close(fds[0]);
  // A terminal's Ctrl-C reaches PROGRAM (same process group); tprof record
  // outlives it to report and pass its status on.
  struct sigaction ignore {}, old_int{}, old_quit{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  g_child = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (forward != 0) sigaction(forward, &old_pass, nullptr);
  g_child = 0;
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  if (n == static_cast<ssize_t>(sizeof e)) {
    *exec_errno = e;
    return -1;
  }
  return status;
}

int record(const RecordOptions& o) {
#if !TPROF_HAVE_CUPTI
  static_cast<void>(o);
  std::cerr << "tprof record: this tprof was built without CUPTI (TPROF_WITH_CUPTI=OFF, or no CUDA toolkit at "
               "configure time); record needs it\n";
  return kExitBadInput;
#else
  const std::string inject = find_inject_library();
  if (inject.empty()) {
    std::cerr << "tprof record: libtprof_inject.so not found next to tprof or in ../lib/tprof "
                 "(set TPROF_INJECT_LIBRARY)\n";
    return kExitBadInput;
  }
  int toggle = 0;
  if (o.on_signal_set) {
    toggle = parse_toggle_signal(o.on_signal);
    if (toggle == 0) {
      std::cerr << "tprof record: --on-signal " << o.on_signal
                << ": expected USR1, USR2, WINCH, URG, PWR, TTIN, TTOU or a real-time signal number\n";
      return kExitBadInput;
    }
  }
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (ec) {
    std::cerr << "tprof record: " << o.dir << ": cannot create the trace directory: " << ec.message() << "\n";
    return kExitBadInput;
  }
  std::vector<std::pair<std::string, std::string>> env = {
      {"CUDA_INJECTION64_PATH", inject},
      {"TPROF_RECORD_DIR", o.dir},
      {"TPROF_RECORD_DELAY_MS", std::to_string(o.delay_ms)},
      {"TPROF_RECORD_DURATION_MS", std::to_string(o.duration_ms)},
      {"TPROF_RECORD_GZIP", o.gzip ? "1" : "0"},
  };
  if (!o.worker.empty()) env.emplace_back("TPROF_RECORD_WORKER", o.worker);
  if (!o.nvtx_range.empty()) env.emplace_back("TPROF_RECORD_NVTX_RANGE", o.nvtx_range);
  if (toggle != 0) env.emplace_back("TPROF_RECORD_ON_SIGNAL", std::to_string(toggle));
  if (o.api == "all") env.emplace_back("TPROF_RECORD_API", "all");
  // NVTX ranges reach CUPTI's callbacks only through NVTX's own injection
  // hook; a value the user set is kept.
  const char* cupti = std::getenv("TPROF_CUPTI_LIBRARY");
  const std::string cupti_path = cupti != nullptr && *cupti != '\0' ? cupti : TPROF_CUPTI_DEFAULT_LIBRARY;
  if (std::getenv("NVTX_INJECTION64_PATH") == nullptr && !cupti_path.empty()) {
    env.emplace_back("NVTX_INJECTION64_PATH", cupti_path);
  }
  const std::set<std::string> before = trace_files(o.dir);
  int exec_errno = 0;
  const int status = run_child(o.command, env, toggle, &exec_errno);
  if (status < 0) {
    std::cerr << "tprof record: cannot run " << o.command[0] << ": " << std::strerror(exec_errno) << "\n";
    return exec_errno == ENOENT ? 127 : 126;
  }
  std::size_t written = 0;
  for (const std::string& f : trace_files(o.dir)) {
    if (before.count(f) != 0) continue;
    ++written;
    if (!global_options().quiet) std::cerr << "tprof record: trace written to " << (fs::path(o.dir) / f).string() << "\n";
  }
  if (written == 0 && !global_options().quiet) {
    std::cerr << "tprof record: no trace written: " << o.command[0]
              << " did not initialize CUDA, exited before the window began (--delay-ms"
              << (toggle != 0 ? ", no --on-signal signal" : "") << "), or never ran the --nvtx-range\n";
  }
  if (WIFSIGNALED(status)) {
    // Die the way PROGRAM did, so that a shell sees the same status.
    const int sig = WTERMSIG(status);
    std::cout.flush();
    signal(sig, SIG_DFL);
    raise(sig);
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitCheckFailed;
#endif
}

}  // namespace

void add_record_command(CLI::App& app, int* rc) {
  auto o = std::make_shared<RecordOptions>();
  CLI::App* cmd = app.add_subcommand(
      "record", "Run an unmodified CUDA program and write its CPU + GPU trace (torch.profiler's format)");
  cmd->add_option("--delay-ms", o->delay_ms, "Start recording this long after the program initializes CUDA")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--duration-ms", o->duration_ms, "Record this long (default: until the program exits)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--nvtx-range", o->nvtx_range,
                  "Keep only the first NVTX range of this name (push/pop or start/end) and what ran in it");
  cmd->add_option("--on-signal", o->on_signal,
                  "Record on demand: each SIG (e.g. USR2) sent to PROGRAM or to tprof record starts a window or "
                  "ends the open one, each window its own trace (--duration-ms: each window's length)");
  cmd->add_option("--api", o->api,
                  "CUDA runtime/driver calls to record: torch (default: the ones torch.profiler records) or all")
      ->check(CLI::IsMember({"torch", "all"}));
  cmd->add_option("-o,--dir", o->dir, "Directory for <worker>.<epoch ns>.pt.trace.json (default: .)");
  cmd->add_option("--worker", o->worker, "File name prefix (default: <host>_<pid>, as torch's handler)");
  cmd->add_flag("--gzip", o->gzip, "Write .pt.trace.json.gz");
  cmd->add_option("command", o->command, "-- PROGRAM [ARGS...]")->required()->expected(1, -1);
  cmd->footer("Exit status: PROGRAM's; 127/126 when PROGRAM cannot be run; 2 for bad options.");
  cmd->callback([o, rc, cmd] {
    o->on_signal_set = cmd->count("--on-signal") > 0;
    *rc = record(*o);
  });
}

}  // namespace tprof::cli
