#include "src/base/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>

namespace tprof::internal {

std::size_t half_physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  if (pages <= 0) return std::size_t{8} << 30;
  return static_cast<std::size_t>(pages) / 2 * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

void advise_huge_pages(const void* data, std::size_t bytes) noexcept {
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (first + kHuge - 1) & ~(kHuge - 1), end = (first + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// SIGXFSZ is raised in the thread whose write went past the limit (the
// kernel sends it to that thread), so blocking it on this thread turns the
// kill into EFBIG; the signal is then pending on the thread and taken off
// it here, unless one was there before (the caller's).
FileSizeSignalGuard::FileSizeSignalGuard() noexcept {
  sigset_t xfsz, pending;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
  pthread_sigmask(SIG_BLOCK, &xfsz, &old_);
  sigemptyset(&pending);
  sigpending(&pending);
  ours_ = sigismember(&old_, SIGXFSZ) == 0 && sigismember(&pending, SIGXFSZ) == 0;
}

FileSizeSignalGuard::~FileSizeSignalGuard() {
  const int saved = errno;  // the failed write's, for the caller
  if (ours_) {
    sigset_t xfsz, pending;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    sigemptyset(&pending);
    sigpending(&pending);
    if (sigismember(&pending, SIGXFSZ) == 1) {
      const timespec zero{};
      while (sigtimedwait(&xfsz, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  errno = saved;
}

bool prefault_for_writing(const void* data, std::size_t bytes) noexcept {
  advise_huge_pages(data, bytes);
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = (first + page - 1) & ~(page - 1), end = (first + bytes) & ~(page - 1);
  if (end <= begin) return true;
#ifdef MADV_POPULATE_WRITE
  return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0;
#else
  return false;
#endif
}

namespace {

Error io_error(const std::string& path, const char* what) {
  return Error(ErrorCode::kIo, std::string(what) + ": " + std::strerror(errno), path);
}

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

namespace {

// ---- the SIGBUS guard ------------------------------------------------------
//
// Live maps in a fixed table the signal handler can read without locks. A
// fault inside one is the file shrinking under us: the handler maps a zero
// page over the faulting page (mmap is a plain system call on Linux, safe in
// a handler) and marks the slot. A fault anywhere else goes to the handler
// that was installed before ours, or kills the process as it would have.

struct GuardSlot {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  std::atomic<bool> hit{false};
};
constexpr int kGuardSlots = 64;
GuardSlot g_guard[kGuardSlots];
struct sigaction g_previous_bus {};
std::uintptr_t g_page_size = 4096;  // set before the handler is installed (sysconf is not for handlers)

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (GuardSlot& slot : g_guard) {
    const std::uintptr_t b = slot.begin.load(std::memory_order_acquire);
    if (b != 0 && addr >= b && addr < slot.end.load(std::memory_order_acquire)) {
      const std::uintptr_t page = addr & ~(g_page_size - 1);
      void* p = mmap(reinterpret_cast<void*>(page), g_page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                     -1, 0);
      if (p != MAP_FAILED) {
        slot.hit.store(true, std::memory_order_release);
        return;
      }
      break;
    }
  }
  if ((g_previous_bus.sa_flags & SA_SIGINFO) != 0 && g_previous_bus.sa_sigaction != nullptr) {
    g_previous_bus.sa_sigaction(sig, info, ctx);
    return;
  }
  if (g_previous_bus.sa_handler != SIG_DFL && g_previous_bus.sa_handler != SIG_IGN &&
      g_previous_bus.sa_handler != nullptr) {
    g_previous_bus.sa_handler(sig);
    return;
  }
  // Not ours and nobody else's: die of it as without the guard.
  signal(SIGBUS, SIG_DFL);
}

void install_guard() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_page_size = page_size();
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous_bus);
  });
}

// A slot for [data, data+size), or -1 when all are taken (the map is then
// unguarded, as before the guard existed).
int guard(const char* data, std::size_t size) {
  install_guard();
  const auto b = reinterpret_cast<std::uintptr_t>(data);
  for (int i = 0; i < kGuardSlots; ++i) {
    std::uintptr_t expected = 0;
    if (g_guard[i].begin.compare_exchange_strong(expected, b, std::memory_order_acq_rel)) {
      g_guard[i].hit.store(false, std::memory_order_relaxed);
      g_guard[i].end.store(b + size, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unguard(int slot) {
  if (slot < 0) return;
  g_guard[slot].end.store(0, std::memory_order_release);
  g_guard[slot].begin.store(0, std::memory_order_release);
}

// ---- streamed input -----------------------------------------------------

std::size_t default_stream_limit() { return half_physical_memory(); }

// Waits until a named FIFO has a writer (it was opened here without
// blocking, so a FIFO nobody writes to cannot hang the open itself). Once
// one is there, the read waits for data as long as a writer holds the FIFO
// open, however slow it is (`tprof info <(sleep 60; cat t.json)`): only a
// FIFO that no writer opens within wait_ms is an error.
//
// poll() shows data, and a hang-up once a writer has come and gone, but
// nothing for a writer that has opened the FIFO and not written yet. So
// this opens the FIFO for writing itself and closes it at once: from then
// on POLLHUP means exactly "no writer has it open now", and its absence
// means one does. (A reader blocked in a blocking open of the same FIFO
// elsewhere is woken by that and reads an end of file.) A pipe (`<(cmd)`,
// `cmd |`, pipefs) was made with its writer: nothing to wait for.
Status wait_for_writer(int fd, const std::string& path, int wait_ms) {
  struct statfs fs {};
  if (fstatfs(fd, &fs) == 0 && fs.f_type == PIPEFS_MAGIC) return {};
  int probe = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (probe < 0) probe = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // no /proc
  const bool probed = probe >= 0;
  if (probed) ::close(probe);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    // Probed: look every 10 ms (a hang-up is reported at once while no
    // writer is there). Not probed: data or a writer that left end the wait.
    const int timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, probed ? 10 : INT_MAX));
    const int n = ::poll(&p, 1, probed ? 0 : timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(path, "cannot wait on FIFO");
    if ((p.revents & POLLIN) != 0) return {};                    // data
    if (probed && (p.revents & POLLHUP) == 0) return {};         // a writer has it open
    if (!probed && (p.revents & POLLHUP) != 0) return {};        // a writer came and went
    if (left.count() <= 0) break;
    if (probed) std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", wait_ms / 1000.0);
  return Error(ErrorCode::kIo,
               "no writer opened this FIFO within " + std::string(secs) + " s; start the program that writes it first",
               path);
}

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Reads fd to its end into *out (capacity doubling). Stops early, keeping
// what it read, when the first byte that is not whitespace cannot start a
// trace (JSON or gzip): /dev/zero and the like end at once, and the parser
// reports the byte.
Status read_stream(int fd, const std::string& path, std::size_t limit, std::unique_ptr<char[]>* out,
                   std::size_t* size) {
  std::size_t cap = 1 << 16, n = 0;
  auto buf = std::make_unique_for_overwrite<char[]>(cap + 1);
  bool checked = false;
  for (;;) {
    if (n == cap) {
      if (cap >= limit) {
        return Error(ErrorCode::kIo,
                     "input from a pipe or device is larger than " + std::to_string(limit >> 20) +
                         " MiB (half the physical memory); save it to a file and read that",
                     path);
      }
      const std::size_t next = std::min(cap * 2, limit);
      auto bigger = std::make_unique_for_overwrite<char[]>(next + 1);
      std::memcpy(bigger.get(), buf.get(), n);
      buf = std::move(bigger);
      cap = next;
    }
    const ssize_t r = ::read(fd, buf.get() + n, cap - n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return io_error(path, "cannot read");
    }
    if (r == 0) break;
    n += static_cast<std::size_t>(r);
    if (!checked) {
      std::size_t i = 0;
      while (i < n && is_json_space(buf[i])) ++i;
      if (i < n) {
        checked = true;
        const char c = buf[i];
        if (c != '{' && c != '[' && c != '\x1f' && !(c == '\xef' && i == 0)) break;
      }
    }
  }
  *out = std::move(buf);
  *size = n;
  return {};
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path, const OpenOptions& options) {
  const bool stdin_input = path == "-";
  // O_NONBLOCK: opening a FIFO that has no writer returns at once instead
  // of waiting forever (cleared again before reading).
  int fd = stdin_input ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return io_error(path, "cannot open");
  auto close_fd = [&] {
    if (!stdin_input) ::close(fd);
  };
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    Error e = io_error(path, "cannot stat");
    close_fd();
    return e;
  }
  if (S_ISDIR(st.st_mode)) {
    close_fd();
    return Error(ErrorCode::kIo, "is a directory, expected a trace file", path);
  }
  MappedFile f;
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    f.size_ = static_cast<std::size_t>(st.st_size);
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      Error e = io_error(path, "cannot map");
      close_fd();
      return e;
    }
    f.data_ = static_cast<const char*>(p);
    f.map_size_ = f.size_;
    f.guard_slot_ = guard(f.data_, f.map_size_);
    close_fd();
    return f;
  }
  // Everything else is read as a stream: pipes, FIFOs, devices, stdin, and
  // regular files that report no size (/proc) or are empty.
  if (S_ISFIFO(st.st_mode) && !stdin_input) {
    Status waited = wait_for_writer(fd, path, options.fifo_wait_ms);
    if (!waited.ok()) {
      close_fd();
      return waited.error();
    }
  }
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) != 0 && !stdin_input) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  const std::size_t limit = options.max_stream_bytes > 0 ? options.max_stream_bytes : default_stream_limit();
  Status read = read_stream(fd, path, limit, &f.owned_, &f.size_);
  close_fd();
  if (!read.ok()) return read.error();
  f.data_ = f.owned_.get();
  return f;
}

void MappedFile::reset() noexcept {
  unguard(guard_slot_);
  if (map_size_ > 0) munmap(const_cast<char*>(data_), map_size_);
  owned_.reset();
  data_ = nullptr;
  size_ = map_size_ = 0;
  guard_slot_ = -1;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_),
      size_(other.size_),
      map_size_(other.map_size_),
      owned_(std::move(other.owned_)),
      guard_slot_(other.guard_slot_) {
  other.data_ = nullptr;
  other.size_ = other.map_size_ = 0;
  other.guard_slot_ = -1;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    size_ = other.size_;
    map_size_ = other.map_size_;
    owned_ = std::move(other.owned_);
    guard_slot_ = other.guard_slot_;
    other.data_ = nullptr;
    other.size_ = other.map_size_ = 0;
    other.guard_slot_ = -1;
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

bool MappedFile::shrunk() const {
  return guard_slot_ >= 0 && g_guard[guard_slot_].hit.load(std::memory_order_acquire);
}

namespace {
// Rounds [offset, offset+len) inward to whole pages.
bool inner_pages(std::size_t offset, std::size_t len, std::size_t size, std::size_t* begin,
                 std::size_t* end) {
  const std::size_t page = page_size();
  if (offset >= size) return false;
  if (len > size - offset) len = size - offset;
  *begin = (offset + page - 1) / page * page;
  *end = (offset + len) / page * page;
  return *end > *begin;
}
}  // namespace

void MappedFile::release(std::size_t offset, std::size_t len) const {
  std::size_t b = 0, e = 0;
  if (!inner_pages(offset, len, map_size_, &b, &e)) return;
  madvise(const_cast<char*>(data_) + b, e - b, MADV_DONTNEED);
}

Result<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path, "cannot open");
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      Error e = io_error(path, "cannot read");
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

namespace {

// ---- output ----------------------------------------------------------------

constexpr int kMaxLinkHops = 40;  // the kernel's own limit on a chain of links
constexpr std::string_view kTmpMarker = ".tmp.";
constexpr std::size_t kTmpRandomDigits = 16;

// The descriptor a path names without naming a file, or -1. These are
// links the kernel resolves to whatever the descriptor holds (the shell's
// `>> log`, a pipe, a terminal); resolving one and renaming a file over
// the result would replace the user's log, or fail for a pipe.
int descriptor_of(std::string_view path) {
  if (path == "/dev/stdin") return STDIN_FILENO;
  if (path == "/dev/stdout") return STDOUT_FILENO;
  if (path == "/dev/stderr") return STDERR_FILENO;
  const std::string own = "/proc/" + std::to_string(::getpid()) + "/fd/";
  for (const std::string_view prefix :
       {std::string_view("/dev/fd/"), std::string_view("/proc/self/fd/"), std::string_view("/proc/thread-self/fd/"),
        std::string_view(own)}) {
    if (!path.starts_with(prefix)) continue;
    const std::string_view digits = path.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) {
      return -1;
    }
    return std::stoi(std::string(digits));
  }
  return -1;
}

// "dir/name" as (dir, name): "name" is (".", "name"), "/name" is ("/", "name").
void split_path(const std::string& path, std::string* dir, std::string* name) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) {
    dir->assign(1, '.');
    *name = path;
    return;
  }
  *dir = path.substr(0, slash == 0 ? 1 : slash);
  *name = path.substr(slash + 1);
}

// True when the directory entry `link` lives in /proc: a magic link
// (another process's descriptor, /proc/self/cwd/...) whose target is not
// a path to replace.
bool in_procfs(const std::string& link) {
  std::string dir, name;
  split_path(link, &dir, &name);
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

// One hop of a symbolic link: its target, relative to the link's directory
// when the link is relative (the target need not exist).
Result<std::string> read_link(const std::string& link, const std::string& path) {
  char buf[4096];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n < 0) return io_error(path, "cannot read the symbolic link");
  if (n == 0 || static_cast<std::size_t>(n) >= sizeof buf) {
    errno = n == 0 ? ENOENT : ENAMETOOLONG;
    return io_error(path, "cannot follow the symbolic link");
  }
  std::string target(buf, static_cast<std::size_t>(n));
  if (target[0] != '/') {
    const std::size_t slash = link.rfind('/');
    if (slash != std::string::npos) target = link.substr(0, slash + 1) + target;
  }
  return target;
}

// The kernel's fs.protected_symlinks rule, for the links tprof follows by
// hand (open(2) applies it to the links it follows; resolve_output reads
// each link itself, which bypassed it): in a sticky world-writable
// directory (/tmp), a link is followed only when this process's user or
// the directory's owner owns it. Anyone may add names there, so anyone's
// link there could point a root-run `-o /tmp/out.txt` at any file (issue
// 36). `link_st` is the link's lstat; `path` is the output as given.
Status check_link_may_be_followed(const std::string& link, const struct stat& link_st, const std::string& path) {
  std::string dir, name;
  split_path(link, &dir, &name);
  struct stat d {};
  if (::stat(dir.c_str(), &d) != 0) return io_error(path, "cannot follow the symbolic link");
  constexpr mode_t kStickyWorldWritable = S_ISVTX | S_IWOTH;
  if ((d.st_mode & kStickyWorldWritable) != kStickyWorldWritable || link_st.st_uid == ::geteuid() ||
      link_st.st_uid == d.st_uid) {
    return {};
  }
  const std::string what = link == path ? std::string("is a symbolic link") : "leads to " + link + ", a symbolic link";
  return Error(ErrorCode::kIo,
               what + " owned by uid " + std::to_string(link_st.st_uid) + " in the sticky world-writable directory " +
                   dir + " (owned by uid " + std::to_string(d.st_uid) +
                   "); not following it, as the kernel would not (fs.protected_symlinks): there only a link of "
                   "this user or of the directory's owner is followed (name the file itself, or remove the link)",
               path);
}

std::uint64_t random_bits() {
  std::uint64_t r = 0;
  if (::getrandom(&r, sizeof r, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof r)) return r;
  // No entropy yet (early boot): O_EXCL still makes the name ours, only
  // less unpredictable.
  static std::atomic<std::uint64_t> counter{0};
  const auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return now ^ (counter.fetch_add(1) * 0x9e3779b97f4a7c15ull) ^ reinterpret_cast<std::uintptr_t>(&r);
}

// "<name>.tmp.<pid>.<16 hex digits>", the name cut so the whole fits
// NAME_MAX. The pid lets a later write tell a dead process's file from a
// live one's; the random part makes the name impossible to plant ahead.
std::string temporary_name(const std::string& name) {
  char random[kTmpRandomDigits + 1];
  std::snprintf(random, sizeof random, "%016llx", static_cast<unsigned long long>(random_bits()));
  const std::string suffix = std::string(kTmpMarker) + std::to_string(::getpid()) + "." + random;
  return name.substr(0, std::min(name.size(), std::size_t{NAME_MAX} - suffix.size())) + suffix;
}

// The pid in a temporary file's name, or -1 when `entry` is not one: any
// "<...>.tmp.<pid>.<16 hex digits>", or "<name>.tmp.<pid>" (the form
// before issue 23, for the same target only).
pid_t temporary_owner(std::string_view entry, std::string_view name) {
  auto pid_of = [](std::string_view digits) -> pid_t {
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) {
      return -1;
    }
    return static_cast<pid_t>(std::stol(std::string(digits)));
  };
  if (entry.size() > kTmpRandomDigits + 1 && entry[entry.size() - kTmpRandomDigits - 1] == '.' &&
      entry.substr(entry.size() - kTmpRandomDigits).find_first_not_of("0123456789abcdef") == std::string_view::npos) {
    const std::string_view rest = entry.substr(0, entry.size() - kTmpRandomDigits - 1);
    const std::size_t marker = rest.rfind(kTmpMarker);
    if (marker != std::string_view::npos) return pid_of(rest.substr(marker + kTmpMarker.size()));
  }
  if (entry.size() > name.size() + kTmpMarker.size() && entry.starts_with(name) &&
      entry.substr(name.size(), kTmpMarker.size()) == kTmpMarker) {
    return pid_of(entry.substr(name.size() + kTmpMarker.size()));
  }
  return -1;
}

// Removes the temporary files a killed or crashed write left in the
// directory (of any target): regular files owned by this user whose
// process no longer exists. A live pid's file is kept (it may be writing);
// a file of another user, or a link, is never touched, so a root process
// cannot be made to remove what only looks like a temporary file.
void remove_stale_temporaries(int dir_fd, const std::string& name) {
  const int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  const pid_t self = ::getpid();
  const uid_t me = ::geteuid();
  while (const dirent* e = ::readdir(d)) {
    const pid_t pid = temporary_owner(e->d_name, name);
    if (pid <= 0 || pid == self) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != me) {
      continue;
    }
    ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

// The identity of a file: its device and inode.
FileId file_id(const struct stat& st) { return FileId{st.st_dev, st.st_ino}; }

// Makes "<name>.tmp.<pid>.<16 hex digits>" in `dir_fd`, open for reading
// and writing, after removing the stale temporary files of dead processes
// there: O_CREAT | O_EXCL | O_NOFOLLOW, so a name someone planted (a link
// to a file of theirs, or of root's) is never opened; a fresh random name
// is tried. Returns the descriptor, its name and identity, or -1 with errno.
int create_temporary(int dir_fd, const std::string& name, mode_t mode, std::string* tmp_name, FileId* id) {
  remove_stale_temporaries(dir_fd, name);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string tmp = temporary_name(name);
    const int fd = ::openat(dir_fd, tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) {
      struct stat st {};
      if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::unlinkat(dir_fd, tmp.c_str(), 0);
        ::close(fd);
        errno = err;
        return -1;
      }
      *tmp_name = std::move(tmp);
      *id = file_id(st);
      return fd;
    }
    if (errno != EEXIST && errno != EINTR) return -1;
  }
  errno = EEXIST;
  return -1;
}

// True when `name` in `dir_fd` is still the file `id` (not a link or file
// that another user, who may rename entries in the directory, put there).
bool is_own_entry(int dir_fd, const std::string& name, const FileId& id) {
  struct stat st {};
  return ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == id.dev && st.st_ino == id.ino;
}

// Removes `name` from `dir_fd` if it is still the file `id`.
void remove_own_entry(int dir_fd, const std::string& name, const FileId& id) {
  if (is_own_entry(dir_fd, name, id)) ::unlinkat(dir_fd, name.c_str(), 0);
}

// The descriptor a /dev/fd-like path names, duplicated (closing ours
// leaves the caller's open; the file offset and O_APPEND are shared, so
// `>> log` appends).
Result<int> open_descriptor(int n, const std::string& path) {
  const int flags = ::fcntl(n, F_GETFL);
  if (flags < 0) {
    return Error(ErrorCode::kIo, "names descriptor " + std::to_string(n) + ", which is not open", path);
  }
  if ((flags & O_ACCMODE) == O_RDONLY) {
    return Error(ErrorCode::kIo,
                 "names descriptor " + std::to_string(n) + ", which is open only for reading; not writing there", path);
  }
  // What stdio holds for the same descriptor goes first.
  if (n == STDOUT_FILENO) std::fflush(stdout);
  if (n == STDERR_FILENO) std::fflush(stderr);
  const int fd = ::fcntl(n, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return io_error(path, "cannot duplicate the descriptor");
  return fd;
}

Status clear_nonblocking(int fd, const std::string& path) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) return io_error(path, "cannot open for writing");
  return {};
}

// A character device, written straight through. O_NONBLOCK: a line that
// waits for a carrier cannot hang the open; O_NOFOLLOW: a link swapped in
// since the lstat is an error, not followed.
Result<int> open_device(const std::string& target, const std::string& path) {
  int fd;
  do {
    fd = ::open(target.c_str(), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return io_error(path, "cannot open for writing");
  struct stat st {};
  Status cleared = clear_nonblocking(fd, path);
  if (!cleared || ::fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) {
    ::close(fd);
    if (!cleared) return cleared.error();
    return Error(ErrorCode::kIo, "changed while it was opened; expected a device", path);
  }
  return fd;
}

// A FIFO: a blocking open would wait forever for a reader. Opened without
// blocking, it fails (ENXIO) until a reader has it open; tried again every
// 10 ms until wait_ms have passed.
Result<int> open_fifo(const std::string& target, const std::string& path, int wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    const int fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st {};
      Status cleared = clear_nonblocking(fd, path);
      if (!cleared || ::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
        ::close(fd);
        if (!cleared) return cleared.error();
        return Error(ErrorCode::kIo, "changed while it was opened; expected a FIFO", path);
      }
      return fd;
    }
    if (errno == EINTR) continue;
    if (errno != ENXIO) return io_error(path, "cannot open for writing");
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", wait_ms / 1000.0);
      return Error(ErrorCode::kIo,
                   "no reader opened this FIFO within " + std::string(secs) +
                       " s; start the program that reads it first",
                   path);
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(deadline - now, std::chrono::milliseconds(10)));
  }
}

// Writes all of `bytes`; returns 0 or the errno of the failure. A write
// past RLIMIT_FSIZE fails with EFBIG (FileSizeSignalGuard) and is reported
// like a full disk.
int write_all(int fd, std::string_view bytes) {
  const FileSizeSignalGuard no_sigxfsz;
  int err = 0;
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // a descriptor someone left non-blocking
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    err = n < 0 ? errno : EIO;
    break;
  }
  return err;
}

// What is at an output path, links followed by hand.
struct OutputTarget {
  enum class Kind : std::uint8_t { kNew, kFile, kStream } kind = Kind::kNew;
  std::string path;     // kNew, kFile: the file to create or replace
  struct stat st {};    // kFile: the file's
  int fd = -1;          // kStream: open for writing
};

Result<OutputTarget> resolve_output(const std::string& path, const OutputOptions& options) {
  OutputTarget out;
  out.path = path;
  for (int hops = 0;; ++hops) {
    if (const int n = descriptor_of(out.path); n >= 0) {
      TPROF_TRY_ASSIGN(out.fd, open_descriptor(n, path));
      out.kind = OutputTarget::Kind::kStream;
      return out;
    }
    struct stat& st = out.st;
    if (::lstat(out.path.c_str(), &st) != 0) {
      if (errno == ENOENT) return out;  // a new file (its directory is checked when the file is made)
      return io_error(path, "cannot write the output");
    }
    if (S_ISLNK(st.st_mode)) {
      if (hops == kMaxLinkHops) {
        return Error(ErrorCode::kIo,
                     "is a symbolic link loop (or a chain of more than 40 links); expected a path to a file, "
                     "not replacing it",
                     path);
      }
      if (in_procfs(out.path)) {
        return Error(ErrorCode::kIo,
                     "is a link in /proc that is not one of this process's descriptors (/dev/fd/N, "
                     "/proc/self/fd/N); name the file itself",
                     path);
      }
      TPROF_TRY(check_link_may_be_followed(out.path, st, path));
      TPROF_TRY_ASSIGN(out.path, read_link(out.path, path));
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      if ((st.st_mode & 0222) == 0) {
        char mode[16];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return Error(ErrorCode::kIo,
                     std::string("is read-only (mode ") + mode +
                         "); expected a writable file, not replacing it (make it writable or remove it first)",
                     path);
      }
      if (::faccessat(AT_FDCWD, out.path.c_str(), W_OK, AT_EACCESS) != 0) {
        return io_error(path, "cannot write the output");
      }
      out.kind = OutputTarget::Kind::kFile;
      return out;
    }
    if (S_ISCHR(st.st_mode)) {
      TPROF_TRY_ASSIGN(out.fd, open_device(out.path, path));
      out.kind = OutputTarget::Kind::kStream;
      return out;
    }
    if (S_ISFIFO(st.st_mode)) {
      TPROF_TRY_ASSIGN(out.fd, open_fifo(out.path, path, options.fifo_wait_ms));
      out.kind = OutputTarget::Kind::kStream;
      return out;
    }
    if (S_ISDIR(st.st_mode)) {
      errno = EISDIR;
      return io_error(path, "cannot write the output");
    }
    return Error(ErrorCode::kIo, "cannot write the output: not a regular file, a device or a FIFO", path);
  }
}

}  // namespace

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const std::string& path,
                                                                   const OutputOptions& options) {
  if (path.empty()) return Error(ErrorCode::kIo, "no output path given", path);
  std::unique_ptr<AtomicFileWriter> w(new AtomicFileWriter());
  w->path_ = path;
  w->replace_ = options.replace;
  OutputTarget target;
  target.path = path;
  if (options.replace) {
    TPROF_TRY_ASSIGN(target, resolve_output(path, options));
    if (target.kind == OutputTarget::Kind::kStream) {
      w->fd_ = target.fd;
      return w;
    }
  }
  split_path(target.path, &w->dir_, &w->name_);
  if (w->name_.empty() || w->name_ == "." || w->name_ == "..") {
    errno = EISDIR;
    return io_error(path, "cannot write the output");
  }
  w->dir_fd_ = ::open(w->dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (w->dir_fd_ < 0) return io_error(path, "cannot create");
  w->fd_ = create_temporary(w->dir_fd_, w->name_, 0666, &w->tmp_name_, &w->tmp_id_);
  if (w->fd_ < 0) return io_error(path, errno == EEXIST ? "cannot create a temporary file" : "cannot create");
  if (target.kind == OutputTarget::Kind::kFile) {
    // An existing file keeps its mode, and its owner and group where this
    // process may give them (root writing a user's file leaves it theirs):
    // given at commit(). Until then the temporary file is this process's,
    // no more readable than the file it replaces and writable by no one
    // else (the SQLite export builds its database in it).
    const struct stat& st = target.st;
    w->keep_ = KeepOwnerAndMode{st.st_uid, st.st_gid, st.st_mode & 07777};
    if (::fchmod(w->fd_, st.st_mode & 0755) != 0) return io_error(path, "cannot set the mode of");
  }
  return w;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_name_.empty()) remove_own_entry(dir_fd_, tmp_name_, tmp_id_);
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

int AtomicFileWriter::temporary_fd() const { return tmp_name_.empty() || committed_ ? -1 : fd_; }

Result<ScratchFile> AtomicFileWriter::create_scratch(const std::string& name) const {
  Result<ScratchFile> s = dir_fd_ >= 0 ? ScratchFile::create_in(dir_fd_, dir_, name) : ScratchFile::create("", name);
  if (!s) return Error(s.error().code(), s.error().path() + ": " + s.error().message(), path_);
  return s;
}

Status AtomicFileWriter::write(std::string_view bytes) {
  if (fd_ < 0) return Error(ErrorCode::kIo, "cannot write: the output is already closed", path_);
  if (const int err = write_all(fd_, bytes); err != 0) {
    errno = err;
    return io_error(path_, "cannot write");
  }
  return {};
}

namespace {

// Closes `*fd`, checked (NFS reports some write errors only here).
Status close_checked(int* fd, const std::string& path) {
  const int f = *fd;
  *fd = -1;
  if (f < 0) return Error(ErrorCode::kIo, "cannot write: the output is already closed", path);
  if (::close(f) != 0) return io_error(path, "cannot write");
  return {};
}

// Gives the file `tmp` the name `name` in `dir_fd` unless something has
// that name: true when it did, false when the name is taken.
Result<bool> link_without_replacing(int dir_fd, const std::string& tmp, const std::string& name,
                                    const std::string& path) {
  if (::renameat2(dir_fd, tmp.c_str(), dir_fd, name.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno == EEXIST) return false;
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) return io_error(path, "cannot rename into place");
  // A file system without RENAME_NOREPLACE (NFS, older kernels): link()
  // never replaces either.
  if (::linkat(dir_fd, tmp.c_str(), dir_fd, name.c_str(), 0) != 0) {
    if (errno == EEXIST) return false;
    return io_error(path, "cannot link into place");
  }
  ::unlinkat(dir_fd, tmp.c_str(), 0);
  return true;
}

}  // namespace

Status AtomicFileWriter::commit() {
  if (keep_ && fd_ >= 0) {
    if (keep_->uid != ::geteuid() || keep_->gid != ::getegid()) {
      [[maybe_unused]] const int ignored = ::fchown(fd_, keep_->uid, keep_->gid);
    }
    if (::fchmod(fd_, keep_->mode) != 0) return io_error(path_, "cannot set the mode of");
  }
  TPROF_TRY(close_checked(&fd_, path_));
  if (!tmp_name_.empty()) {
    // Whoever may write the directory may rename entries in it: what is
    // renamed into place must still be the file written, not a link or a
    // file put at the temporary name meanwhile.
    if (!is_own_entry(dir_fd_, tmp_name_, tmp_id_)) {
      return Error(ErrorCode::kIo,
                   "the temporary file " + tmp_name_ +
                       " was replaced or removed while it was written (by another user of the directory?); "
                       "not putting it in place",
                   path_);
    }
    if (replace_) {
      if (::renameat(dir_fd_, tmp_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
        return io_error(path_, "cannot rename into place");
      }
    } else {
      TPROF_TRY_ASSIGN(const bool placed, link_without_replacing(dir_fd_, tmp_name_, name_, path_));
      if (!placed) {
        errno = EEXIST;
        return io_error(path_, "cannot write a new file (not replacing what is there)");
      }
    }
  }
  committed_ = true;
  return {};
}

Result<std::string> AtomicFileWriter::commit_unique(const std::function<std::string(int attempt)>& name) {
  if (replace_ || tmp_name_.empty()) {
    return Error(ErrorCode::kInvalidArgument, "commit_unique() needs a writer made with replace = false", path_);
  }
  TPROF_TRY(close_checked(&fd_, path_));
  if (!is_own_entry(dir_fd_, tmp_name_, tmp_id_)) {
    return Error(ErrorCode::kIo,
                 "the temporary file " + tmp_name_ + " was replaced or removed while it was written; not putting it "
                 "in place",
                 path_);
  }
  const std::size_t slash = path_.rfind('/');
  const std::string prefix = slash == std::string::npos ? std::string() : path_.substr(0, slash + 1);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string candidate = name(attempt);
    if (candidate.empty() || candidate.find('/') != std::string::npos || candidate == "." || candidate == "..") {
      return Error(ErrorCode::kInvalidArgument, "not a file name: \"" + candidate + "\"", path_);
    }
    TPROF_TRY_ASSIGN(const bool placed, link_without_replacing(dir_fd_, tmp_name_, candidate, path_));
    if (placed) {
      committed_ = true;
      return prefix + candidate;
    }
  }
  errno = EEXIST;
  return io_error(path_, "cannot write a new file: 1000 names tried were taken");
}

Result<ScratchFile> ScratchFile::create(const std::string& dir, const std::string& name) {
  std::string where = dir;
  if (where.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    where = tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
  }
  const int dir_fd = ::open(where.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return io_error(where, "cannot create a scratch file in this directory");
  Result<ScratchFile> s = create_in(dir_fd, where, name);
  ::close(dir_fd);
  return s;
}

Result<ScratchFile> ScratchFile::create_in(int dir_fd, const std::string& dir, const std::string& name) {
  ScratchFile s;
  s.dir_fd_ = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
  if (s.dir_fd_ < 0) return io_error(dir, "cannot create a scratch file in this directory");
  s.fd_ = create_temporary(s.dir_fd_, name.empty() ? std::string("tprof") : name, 0600, &s.name_, &s.id_);
  if (s.fd_ < 0) return io_error(dir, "cannot create a scratch file in this directory");
  s.path_ = (dir == "/" ? dir : dir + "/") + s.name_;
  return s;
}

ScratchFile::ScratchFile(ScratchFile&& o) noexcept
    : dir_fd_(o.dir_fd_), fd_(o.fd_), name_(std::move(o.name_)), path_(std::move(o.path_)), id_(o.id_) {
  o.dir_fd_ = o.fd_ = -1;
  o.name_.clear();
}

ScratchFile& ScratchFile::operator=(ScratchFile&& o) noexcept {
  if (this != &o) {
    reset();
    dir_fd_ = o.dir_fd_;
    fd_ = o.fd_;
    name_ = std::move(o.name_);
    path_ = std::move(o.path_);
    id_ = o.id_;
    o.dir_fd_ = o.fd_ = -1;
    o.name_.clear();
  }
  return *this;
}

ScratchFile::~ScratchFile() { reset(); }

void ScratchFile::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  if (dir_fd_ >= 0) {
    if (!name_.empty()) remove_own_entry(dir_fd_, name_, id_);
    ::close(dir_fd_);
  }
  dir_fd_ = fd_ = -1;
  name_.clear();
}

bool same_file(const std::string& a, const std::string& b) {
  auto identify = [](const std::string& p, struct stat* st) {
    if (p == "-") return ::fstat(STDIN_FILENO, st) == 0;
    if (const int n = descriptor_of(p); n >= 0) return ::fstat(n, st) == 0;
    return ::stat(p.c_str(), st) == 0;
  };
  struct stat sa {}, sb {};
  return identify(a, &sa) && identify(b, &sb) && S_ISREG(sa.st_mode) && S_ISREG(sb.st_mode) &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  TPROF_TRY_ASSIGN(auto writer, AtomicFileWriter::create(path));
  TPROF_TRY(writer->write(bytes));
  return writer->commit();
}

}  // namespace tprof::internal
