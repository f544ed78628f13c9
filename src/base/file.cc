#include "src/base/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

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

// Waits until a FIFO has a writer (or data). The FIFO was opened without
// blocking, so a FIFO nobody writes to cannot hang the open itself.
Status wait_for_writer(int fd, const std::string& path, int wait_ms) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    const int n = ::poll(&p, 1, wait_ms);
    if (n > 0) return {};
    if (n == 0) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.1f", wait_ms / 1000.0);
      return Error(ErrorCode::kIo,
                   "no writer opened this FIFO within " + std::string(secs) + " s; start the program that writes it first",
                   path);
    }
    if (errno != EINTR) return io_error(path, "cannot wait on FIFO");
  }
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

// The file a symbolic link means: its target, relative to the link's
// directory when the link is relative (the target need not exist yet).
std::string link_target(const std::string& path) {
  std::string current = path;
  for (int hops = 0; hops < 40; ++hops) {  // the kernel's own limit on a chain
    char buf[4096];
    const ssize_t n = ::readlink(current.c_str(), buf, sizeof buf);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof buf) return current;
    std::string target(buf, static_cast<std::size_t>(n));
    if (!target.empty() && target[0] != '/') {
      const std::size_t slash = current.rfind('/');
      if (slash != std::string::npos) target = current.substr(0, slash + 1) + target;
    }
    current = std::move(target);
  }
  return current;
}

// Removes `<target>.tmp.<pid>` files of processes that no longer exist: an
// export killed mid-way (SIGKILL, a crash) leaves its temporary file, and
// the next write of the same target clears it. A live pid's file is kept
// (it may be writing), so at worst a reused pid keeps one a while longer.
void remove_stale_temporaries(const std::string& target) {
  const std::size_t slash = target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : target.substr(0, slash));
  const std::string prefix = (slash == std::string::npos ? target : target.substr(slash + 1)) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) continue;
    const std::string_view digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(std::string(digits)));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

}  // namespace

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const std::string& path) {
  if (path.empty()) return Error(ErrorCode::kIo, "no output path given", path);
  struct stat st {};
  std::string target = path;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) target = link_target(path);
  bool existed = false;
  if (::stat(target.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      // A device or a pipe is written to, never replaced by a file.
      const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return io_error(path, "cannot open for writing");
      return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, {}, fd));
    }
    if (S_ISDIR(st.st_mode)) {
      errno = EISDIR;
      return io_error(path, "cannot write the output");
    }
    if (!S_ISREG(st.st_mode)) {
      return Error(ErrorCode::kIo, "cannot write the output: not a regular file, a device or a FIFO", path);
    }
    existed = true;
  }
  remove_stale_temporaries(target);
  std::string tmp = target + ".tmp." + std::to_string(getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return io_error(path, "cannot create");
  // An existing file keeps its permissions; a new one gets 0666 less the umask.
  if (existed && ::fchmod(fd, st.st_mode & 07777) != 0) {
    Error e = io_error(path, "cannot set the mode of");
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  }
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(std::move(target), std::move(tmp), fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

Status AtomicFileWriter::write(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(path_, "cannot write");
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

Status AtomicFileWriter::commit() {
  if (::close(fd_) != 0) {
    fd_ = -1;
    return io_error(path_, "cannot write");
  }
  fd_ = -1;
  if (!tmp_path_.empty() && ::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return io_error(path_, "cannot rename into place");
  }
  committed_ = true;
  return {};
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  TPROF_TRY_ASSIGN(auto writer, AtomicFileWriter::create(path));
  TPROF_TRY(writer->write(bytes));
  return writer->commit();
}

}  // namespace tprof::internal
