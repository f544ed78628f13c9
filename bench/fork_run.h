// What the benches that need a fresh process share: run a measurement in a
// child forked for it (no buffers, no faulted pages, a peak RSS of its own)
// and bring its result back through a pipe; the median of the runs.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <type_traits>
#include <vector>

namespace bench {

// Forks; the child runs body() (which returns std::optional<T>) and exits.
// The parent gets the child's T, or nullopt when the child failed (no
// value, a short write, a non-zero exit or a signal).
template <class T, class Body>
std::optional<T> in_fresh_process(Body body) {
  static_assert(std::is_trivially_copyable_v<T>, "the result crosses a pipe as bytes");
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    close(fds[0]);
    const std::optional<T> r = body();
    const bool sent = r && write(fds[1], &*r, sizeof(T)) == static_cast<ssize_t>(sizeof(T));
    _exit(sent ? 0 : 2);
  }
  close(fds[1]);
  T value{};
  const bool got = read(fds[0], &value, sizeof(T)) == static_cast<ssize_t>(sizeof(T));
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return value;
}

// The upper median (0 for none).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace bench
