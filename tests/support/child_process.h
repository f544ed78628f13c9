// A test's code in a forked child, bounded in time: a child that hangs
// fails its test (killed, "did not finish") instead of hanging the suite.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

namespace tprof::testing {

struct ChildResult {
  bool finished = false;  // ended (exited or killed) within the bound
  int status = 0;         // waitpid()'s
  std::string message;    // what the child wrote to its pipe ("" on success)

  bool ok() const { return finished && WIFEXITED(status) && WEXITSTATUS(status) == 0 && message.empty(); }
  std::string describe() const {
    if (!finished) return "the child did not finish in time (killed): it hung";
    std::string s = WIFEXITED(status)     ? "exit status " + std::to_string(WEXITSTATUS(status))
                    : WIFSIGNALED(status) ? std::string("killed by signal ") + strsignal(WTERMSIG(status))
                                          : "status " + std::to_string(status);
    return message.empty() ? s : s + ": " + message;
  }
};

// Waits for `pid` at most `limit_s` seconds, reading what it writes to
// `read_fd` (closed here) meanwhile; then SIGKILLs it.
inline ChildResult wait_for_child(pid_t pid, int read_fd, int limit_s) {
  ChildResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  for (;;) {
    const pid_t w = waitpid(pid, &r.status, WNOHANG);
    if (w == pid) {
      r.finished = true;
      break;
    }
    if (w < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &r.status, 0);
      break;
    }
    if (read_fd >= 0) {
      pollfd p{read_fd, POLLIN, 0};
      if (poll(&p, 1, 5) > 0) {
        char buf[512];
        const ssize_t n = read(read_fd, buf, sizeof buf);
        if (n > 0) r.message.append(buf, static_cast<std::size_t>(n));
        if (n == 0) {
          close(read_fd);
          read_fd = -1;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (read_fd >= 0) {
    char buf[512];
    ssize_t n;
    while ((n = read(read_fd, buf, sizeof buf)) > 0) r.message.append(buf, static_cast<std::size_t>(n));
    close(read_fd);
  }
  return r;
}

// Runs `body` in a forked child: it returns "" (success) or what went
// wrong, which the parent gets in ChildResult::message. The child ends with
// _exit (0, or 1 with a message), or with exit() when `run_exit` (static
// destructors and atexit handlers run then). It is killed by SIGALRM (its
// default action) after `limit_s` seconds, and by the parent a little later.
inline ChildResult run_in_child(const std::function<std::string()>& body, int limit_s = 30,
                                bool run_exit = false) {
  int fds[2];
  if (pipe(fds) != 0) return ChildResult{true, -1, std::string("pipe: ") + std::strerror(errno)};
  std::fflush(nullptr);  // a child's exit() would write its copy of what is buffered
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return ChildResult{true, -1, std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(limit_s));
    const std::string message = body();
    for (std::size_t done = 0; done < message.size();) {
      const ssize_t n = write(fds[1], message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    close(fds[1]);
    if (run_exit) std::exit(message.empty() ? 0 : 1);
    _exit(message.empty() ? 0 : 1);
  }
  close(fds[1]);
  return wait_for_child(pid, fds[0], limit_s + 10);
}

}  // namespace tprof::testing
