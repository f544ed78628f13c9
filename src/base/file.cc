#include "src/base/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tprof::internal {

namespace {

Error io_error(const std::string& path, const char* what) {
  return Error(ErrorCode::kIo, std::string(what) + ": " + std::strerror(errno), path);
}

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path, "cannot open");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    Error e = io_error(path, "cannot stat");
    ::close(fd);
    return e;
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return Error(ErrorCode::kIo, "is a directory, expected a trace file", path);
  }
  MappedFile f;
  f.size_ = static_cast<std::size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      Error e = io_error(path, "cannot map");
      ::close(fd);
      return e;
    }
    f.data_ = static_cast<const char*>(p);
    f.map_size_ = f.size_;
  }
  ::close(fd);
  return f;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), map_size_(other.map_size_) {
  other.data_ = nullptr;
  other.size_ = other.map_size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (map_size_ > 0) munmap(const_cast<char*>(data_), map_size_);
    data_ = other.data_;
    size_ = other.size_;
    map_size_ = other.map_size_;
    other.data_ = nullptr;
    other.size_ = other.map_size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (map_size_ > 0) munmap(const_cast<char*>(data_), map_size_);
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
