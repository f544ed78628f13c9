// tprof record [--delay-ms N] [--duration-ms N] [--nvtx-range NAME] [--on-signal SIG] [--api torch|all]
//              [--memory] [-o DIR] [--worker NAME] [--gzip] -- PROGRAM [ARGS...]
//
// Runs PROGRAM unmodified with CUDA's injection hook pointing at
// libtprof_inject.so (src/cupti/inject.cc), which records it the way
// tprof::Profiler does and writes the trace as tensorboard_trace_handler
// names it. PROGRAM's output, standard input and exit status pass through
// unchanged: tprof record exits as PROGRAM did (127/126 when it cannot be
// started, 2 for bad options of its own and when the recording failed),
// and says on stderr which trace files it wrote, or why none was.
//
// How it learns what happened inside PROGRAM: each process of PROGRAM's
// tree that initializes CUDA appends one line per event (CUDA initialized,
// a window opened, a trace written, a write that failed and why) to a file
// named after its pid in a private directory made here (mkdtemp, 0700),
// passed down as TPROF_RECORD_STATUS_DIR (src/cupti/inject.cc). A file
// survives what an inherited descriptor does not: programs that close the
// descriptors they did not open, exec, _exit and SIGKILL (what was
// reported before stays). It is read once PROGRAM has ended; what a
// process PROGRAM left running reports later is lost.
#include <CLI/CLI.hpp>

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "src/base/gzip_codec.h"
#include "src/base/safe_text.h"
#include "tools/tprof/common.h"

extern char** environ;

namespace tprof::cli {

namespace {

namespace fs = std::filesystem;

// Prints `message` as one line on stderr through the CLI's text filter
// (src/base/safe_text.h, as emit() does for stdout): messages quote paths,
// the worker name, PROGRAM's name and what the recorder reported, any of
// which can hold an ESC sequence a terminal would obey. A newline inside
// is shown as "\n", so that a message stays one line.
void say(const std::string& message) {
  std::string line;
  line.reserve(message.size());
  for (const char c : message) {
    if (c == '\n') {
      line += "\\n";
    } else {
      line += c;
    }
  }
  if (internal::needs_safe_text(line)) line = internal::safe_text(line);
  std::cerr << line << '\n';
}

struct RecordOptions {
  std::int64_t delay_ms = 0;
  std::int64_t duration_ms = 0;
  std::string dir = ".";
  std::string worker;
  std::string nvtx_range;
  std::string on_signal;
  bool on_signal_set = false;  // given, even as ""
  std::string api = "torch";
  bool memory = false;
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

// Why `path` is not a library the CUDA driver can use as its injection,
// or "" when it is: it is loaded (dlopen) and its InitializeInjection
// looked up, as the driver does; a library that fails either is skipped by
// the driver without a word, and the program runs unrecorded. In a child
// process, so that the library's constructors run there and not in tprof,
// and what they print (the warning of a second tprof recorder) is dropped.
std::string inject_library_problem(const std::string& path) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::string("pipe2: ") + std::strerror(errno);
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(fds[0]);
    close(fds[1]);
    return std::string("fork: ") + std::strerror(e);
  }
  if (pid == 0) {
    close(fds[0]);
    const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    const char* why = nullptr;
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      why = dlerror();
      if (why == nullptr) why = "dlopen failed";
    } else if (dlsym(lib, "InitializeInjection") == nullptr) {
      why = "it has no InitializeInjection (not an injection library)";
    }
    if (why != nullptr) {
      ssize_t ignored = write(fds[1], why, std::strlen(why));
      static_cast<void>(ignored);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string why;
  char buf[512];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      why.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (why.empty() && WIFSIGNALED(status)) {
    why = "loading it killed the process (" + std::string(strsignal(WTERMSIG(status))) + ")";
  } else if (why.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    why = "loading it ended the process (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
  }
  return why;
}

// The longest --worker: the file name adds "_rank<RANK>" (at most 14
// bytes) and ".<19-digit epoch ns>.pt.trace.json.gz" (37), and a name has
// at most 255 bytes (NAME_MAX).
constexpr std::size_t kMaxWorkerBytes = 200;

// Why `worker` cannot begin the name of a trace file in -o DIR, or "" when
// it can. torch's tensorboard_trace_handler joins worker_name to its
// directory unchecked (os.path.join(dir_name, f"{worker_name}.{ns}.pt.trace.json")),
// so a '/' or ".." there writes somewhere else; here the worker names a
// file in DIR and nothing else.
std::string worker_problem(const std::string& worker) {
  if (worker.find('/') != std::string::npos) {
    return "holds a '/': it begins a file name in the trace directory (-o DIR), it is not a path";
  }
  if (worker == "." || worker == "..") return "is a directory's name, not a file name";
  if (worker.find('\0') != std::string::npos) return "holds a NUL byte";
  if (worker.size() > kMaxWorkerBytes) {
    return "is " + std::to_string(worker.size()) + " bytes long; at most " + std::to_string(kMaxWorkerBytes) +
           " fit in a file name with the rank and time tprof adds";
  }
  return {};
}

// A private directory (0700) for the injection's reports, made in $TMPDIR
// (else /tmp) and removed with what is in it.
class StatusDir {
 public:
  StatusDir() = default;
  StatusDir(const StatusDir&) = delete;
  StatusDir& operator=(const StatusDir&) = delete;
  ~StatusDir() { remove(); }

  // Makes the directory; false with the reason in *why.
  bool create(std::string* why) {
    std::vector<std::string> bases;
    if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t == '/') bases.emplace_back(t);
    bases.emplace_back("/tmp");
    for (const std::string& base : bases) {
      std::string templ = base + (base.back() == '/' ? "" : "/") + "tprof-record.XXXXXX";
      if (mkdtemp(templ.data()) != nullptr) {
        path_ = templ;
        return true;
      }
      *why = base + ": " + std::strerror(errno);
    }
    return false;
  }
  const std::string& path() const { return path_; }

  // What one process reported: its file's lines.
  struct Process {
    bool initialized = false;  // "init": it initialized CUDA
    bool opened = false;       // "open": a window opened
    std::vector<std::string> written, errors, no_range;
  };
  // Every process's reports, in the order of their pids.
  std::vector<Process> read() const {
    std::vector<std::pair<long long, std::string>> files;
    const int dfd = open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return {};
    if (DIR* d = fdopendir(dup(dfd))) {
      while (const dirent* e = readdir(d)) {
        const std::string name = e->d_name;
        if (name.empty() || name.size() > 10 || name.find_first_not_of("0123456789") != std::string::npos) continue;
        files.emplace_back(std::stoll(name), name);
      }
      closedir(d);
    }
    std::sort(files.begin(), files.end());
    std::vector<Process> out;
    for (const auto& [pid, name] : files) {
      const int fd = openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) continue;
      std::string text;
      struct stat st {};
      // Only a regular file, and a sane size: a few lines per window.
      if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        char buf[4096];
        ssize_t n;
        while (text.size() < (1u << 20) && ((n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))) {
          if (n > 0) text.append(buf, static_cast<std::size_t>(n));
        }
      }
      close(fd);
      Process p;
      std::size_t at = 0;
      while (at < text.size()) {
        std::size_t nl = text.find('\n', at);
        if (nl == std::string::npos) nl = text.size();  // a line cut short: what it holds
        const std::string line = text.substr(at, nl - at);
        at = nl + 1;
        const std::size_t sp = line.find(' ');
        const std::string kind = line.substr(0, sp);
        const std::string rest = sp == std::string::npos ? std::string() : line.substr(sp + 1);
        if (kind == "init") p.initialized = true;
        if (kind == "open") p.opened = true;
        if (kind == "written") p.written.push_back(rest);
        if (kind == "error") p.errors.push_back(rest);
        if (kind == "no-range") p.no_range.push_back(rest);
      }
      out.push_back(std::move(p));
    }
    close(dfd);
    return out;
  }

  void remove() {
    if (path_.empty()) return;
    const int dfd = open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) {
      if (DIR* d = fdopendir(dup(dfd))) {
        std::vector<std::string> names;
        while (const dirent* e = readdir(d)) {
          const std::string name = e->d_name;
          if (name != "." && name != "..") names.push_back(name);
        }
        closedir(d);
        for (const std::string& n : names) unlinkat(dfd, n.c_str(), 0);
      }
      close(dfd);
    }
    rmdir(path_.c_str());
    path_.clear();
  }

 private:
  std::string path_;
};

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

constexpr char kRootPid[] = "TPROF_RECORD_ROOT_PID=";

// PROGRAM's environment: tprof record's own without any TPROF_RECORD_*
// variable (one left in the shell would change a plain record: another
// worker name, an NVTX range that never runs, --api all) and without the
// names in `set`, then `set`, then TPROF_RECORD_ROOT_PID with room for the
// digits the child writes in (its pid, known only after fork).
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& set) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    if (name.starts_with("TPROF_RECORD_")) continue;
    if (std::any_of(set.begin(), set.end(), [&](const auto& kv) { return kv.first == name; })) continue;
    env.emplace_back(entry);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  env.push_back(std::string(kRootPid) + std::string(24, '\0'));
  return env;
}

// Runs the command in the environment `env` (child_environment's); returns
// its wait status, or sets *exec_errno when it could not be started. A
// nonzero `forward` signal received meanwhile is passed on to the child.
int run_child(const std::vector<std::string>& command, std::vector<std::string>& env, int forward, int* exec_errno) {
  // Everything exec needs is allocated before fork.
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char* root_pid = env.back().data() + sizeof kRootPid - 1;
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
    // exec keeps the pid: the injection library tells this process from
    // the ones it starts (their traces get the pid in their names).
    char digits[24];
    int n = 0;
    for (long long v = getpid(); v > 0 && n < 23; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
    for (int i = 0; i < n; ++i) root_pid[i] = digits[n - 1 - i];
    root_pid[n] = '\0';
    execvpe(argv[0], argv.data(), envp.data());
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

// What PROGRAM's wait status was, for a line saying so.
std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const char* abbrev = sigabbrev_np(WTERMSIG(status));
    return abbrev != nullptr ? std::string("was killed by SIG") + abbrev
                             : "was killed by signal " + std::to_string(WTERMSIG(status));
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

int record(const RecordOptions& o) {
#if !TPROF_HAVE_CUPTI
  static_cast<void>(o);
  std::cerr << "tprof record: this tprof was built without CUPTI (TPROF_WITH_CUPTI=OFF, or no CUDA toolkit at "
               "configure time); record needs it\n";
  return kExitBadInput;
#else
  // What can be refused is refused before PROGRAM runs: afterwards, a
  // recording that could not be written costs the whole run.
  if (const std::string why = worker_problem(o.worker); !why.empty()) {
    say("tprof record: --worker " + o.worker + ": " + why);
    return kExitBadInput;
  }
  int toggle = 0;
  if (o.on_signal_set) {
    toggle = parse_toggle_signal(o.on_signal);
    if (toggle == 0) {
      say("tprof record: --on-signal " + o.on_signal +
          ": expected USR1, USR2, WINCH, URG, PWR, TTIN, TTOU or a real-time signal number");
      return kExitBadInput;
    }
  }
  const std::string inject = find_inject_library();
  if (inject.empty()) {
    say("tprof record: libtprof_inject.so not found next to tprof or in ../lib/tprof (set TPROF_INJECT_LIBRARY)");
    return kExitBadInput;
  }
  if (const std::string why = inject_library_problem(inject); !why.empty()) {
    say("tprof record: " + inject + ": the CUDA driver could not load it as its injection library: " + why);
    return kExitBadInput;
  }
  if (o.gzip) {
    // The injection library writes .json.gz through zlib loaded at run
    // time (it links no compression library); the same loader, here.
    std::string why;
    if (internal::runtime_zlib(&why) == nullptr) {
      say("tprof record: --gzip: the recorder compresses with zlib loaded at run time, which cannot be loaded: " +
          why + " (install zlib, Debian: zlib1g; or record without --gzip)");
      return kExitBadInput;
    }
  }
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (ec) {
    say("tprof record: " + o.dir + ": cannot create the trace directory: " + ec.message());
    return kExitBadInput;
  }
  StatusDir status_dir;
  if (std::string why; !status_dir.create(&why)) {
    say("tprof record: cannot make a private directory for the recorder's reports: " + why + " (set TMPDIR)");
    return kExitBadInput;
  }
  std::vector<std::pair<std::string, std::string>> set = {
      {"CUDA_INJECTION64_PATH", inject},
      {"TPROF_RECORD_DIR", o.dir},
      {"TPROF_RECORD_DELAY_MS", std::to_string(o.delay_ms)},
      {"TPROF_RECORD_DURATION_MS", std::to_string(o.duration_ms)},
      {"TPROF_RECORD_GZIP", o.gzip ? "1" : "0"},
      {"TPROF_RECORD_STATUS_DIR", status_dir.path()},
  };
  if (!o.worker.empty()) set.emplace_back("TPROF_RECORD_WORKER", o.worker);
  if (!o.nvtx_range.empty()) set.emplace_back("TPROF_RECORD_NVTX_RANGE", o.nvtx_range);
  if (toggle != 0) set.emplace_back("TPROF_RECORD_ON_SIGNAL", std::to_string(toggle));
  if (o.api == "all") set.emplace_back("TPROF_RECORD_API", "all");
  if (o.memory) set.emplace_back("TPROF_RECORD_MEMORY", "1");
  // NVTX ranges reach CUPTI's callbacks only through NVTX's own injection
  // hook; a value the user set is kept.
  const char* cupti = std::getenv("TPROF_CUPTI_LIBRARY");
  const std::string cupti_path = cupti != nullptr && *cupti != '\0' ? cupti : TPROF_CUPTI_DEFAULT_LIBRARY;
  if (std::getenv("NVTX_INJECTION64_PATH") == nullptr && !cupti_path.empty()) {
    set.emplace_back("NVTX_INJECTION64_PATH", cupti_path);
  }
  std::vector<std::string> env = child_environment(set);
  const std::set<std::string> before = trace_files(o.dir);
  int exec_errno = 0;
  const int status = run_child(o.command, env, toggle, &exec_errno);
  if (status < 0) {
    say("tprof record: cannot run " + o.command[0] + ": " + std::strerror(exec_errno));
    return exec_errno == ENOENT ? 127 : 126;
  }

  // What the processes reported, and the trace files that appeared (a
  // process that could not report, after a change of user, still wrote).
  const std::vector<StatusDir::Process> reports = status_dir.read();
  status_dir.remove();
  std::vector<std::string> written, errors, no_range;
  bool initialized = false, opened = false;
  for (const StatusDir::Process& p : reports) {
    initialized |= p.initialized;
    opened |= p.opened;
    written.insert(written.end(), p.written.begin(), p.written.end());
    errors.insert(errors.end(), p.errors.begin(), p.errors.end());
    no_range.insert(no_range.end(), p.no_range.begin(), p.no_range.end());
  }
  for (const std::string& f : trace_files(o.dir)) {
    if (before.count(f) != 0) continue;
    const std::string path = (fs::path(o.dir) / f).string();
    if (std::find(written.begin(), written.end(), path) == written.end()) written.push_back(path);
  }
  std::sort(written.begin(), written.end());
  if (!global_options().quiet) {
    for (const std::string& path : written) say("tprof record: trace written to " + path);
  }
  if (!errors.empty()) {
    // The recording failed: said whatever --quiet asks, and exit 2, with
    // PROGRAM's own status on a line of its own when it was not a success.
    for (const std::string& e : errors) say("tprof record: " + e);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      say("tprof record: " + o.command[0] + " " + describe_status(status));
    }
    return kExitBadInput;
  }
  if (written.empty() && !global_options().quiet) {
    std::string why;
    if (!initialized) {
      why = o.command[0] + " did not initialize CUDA";
    } else if (!opened) {
      why = o.command[0] + " initialized CUDA but ended before the window began (" +
            (toggle != 0 ? std::string("no --on-signal signal") : "--delay-ms " + std::to_string(o.delay_ms)) + ")";
    } else if (!no_range.empty()) {
      why = o.command[0] + " never ran the --nvtx-range " + o.nvtx_range;
    } else {
      why = o.command[0] + " " + describe_status(status) +
            " while its window was open, without running its exit handlers (_exit, exec or a signal it could not "
            "catch): the trace is written when the window ends";
    }
    say("tprof record: no trace written: " + why);
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
  cmd->add_flag("--memory", o->memory,
                "Also record CUDA's memory: each allocation and release (cudaMalloc, cudaFree, cudaMallocAsync's "
                "pools, managed and pinned memory) as torch's [memory] records, for tprof memory");
  cmd->add_option("-o,--dir", o->dir, "Directory for <worker>.<epoch ns>.pt.trace.json (default: .)");
  cmd->add_option("--worker", o->worker,
                  "File name prefix (default: <host>_<pid>, as torch's handler); a file name: no '/', not . or ..");
  cmd->add_flag("--gzip", o->gzip, "Write .pt.trace.json.gz");
  cmd->add_option("command", o->command, "-- PROGRAM [ARGS...]")->required()->expected(1, -1);
  cmd->footer(
      "Exit status: PROGRAM's; 127/126 when PROGRAM cannot be run; 2 for bad options, and when a trace could not "
      "be written (each failure a line on stderr: the file and the reason).");
  cmd->callback([o, rc, cmd] {
    o->on_signal_set = cmd->count("--on-signal") > 0;
    *rc = record(*o);
  });
}

}  // namespace tprof::cli
