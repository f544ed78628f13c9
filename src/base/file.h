// Files: read-only memory maps for input, atomic writes for output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tprof/status.h"

namespace tprof::internal {

// Half the machine's physical memory (8 GiB when unknown): the most tprof
// reads from a stream or inflates from a .gz, so a hostile input is an
// error, not an out-of-memory abort.
std::size_t half_physical_memory();

// Asks for transparent huge pages over the 2 MiB-aligned part of
// [data, data + bytes) (THP's "madvise" mode is Debian's default): one page
// fault per 2 MiB instead of 512 as it is first written, and a fault costs
// microseconds under a hypervisor. For arrays of 4 MiB and more; advisory.
void advise_huge_pages(const void* data, std::size_t bytes) noexcept;

// Makes [data, data + bytes) resident and writable up front, for an array
// about to be written whole: advise_huge_pages(), then the page tables
// filled in one call (MADV_POPULATE_WRITE) instead of a fault per page.
// Fresh memory of a process's first trace was most of what its stop() and
// export cost. Already-resident pages cost a page-table walk. Returns
// false where the kernel cannot populate (before Linux 5.14): the pages
// then fault in as they are written.
bool prefault_for_writing(const void* data, std::size_t bytes) noexcept;

// The bytes of a whole input. A regular file is memory-mapped; anything
// else that can be read (a pipe, a FIFO, a character device, "-" for
// stdin, a /proc file) is read into memory. Move-only.
//
// A mapped file that shrinks while it is read would raise SIGBUS: a
// process-wide handler (installed on first use, chaining to any previous
// one) maps zero pages over the part that went away and marks the map, so
// the reader sees damage instead of dying; shrunk() then reports it.
class MappedFile {
 public:
  struct OpenOptions {
    // How long to wait for a writer to open a FIFO before giving up.
    int fifo_wait_ms = 10'000;
    // The most bytes read from a stream (pipe, FIFO, device); 0: half the
    // machine's physical memory.
    std::size_t max_stream_bytes = 0;
  };
  static Result<MappedFile> open(const std::string& path, const OpenOptions& options);
  static Result<MappedFile> open(const std::string& path) { return open(path, OpenOptions{}); }

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view bytes() const { return {data_, size_}; }

  // Drops the resident pages wholly inside [offset, offset+len): they are
  // read again from the page cache if touched later. Keeps peak RSS low
  // when a large file is parsed once. No-op for streamed input.
  void release(std::size_t offset, std::size_t len) const;

  // True once a read touched a part of the file that was cut off after it
  // was mapped (the bytes read there were zeros).
  bool shrunk() const;

 private:
  MappedFile() = default;
  void reset() noexcept;
  const char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t map_size_ = 0;
  std::unique_ptr<char[]> owned_;  // streamed input
  int guard_slot_ = -1;            // index in the SIGBUS guard's table, -1: none
};

// Reads a whole (small) file into a string.
Result<std::string> read_file(const std::string& path);

// The one way tprof writes an output file. What is at `path` decides how:
//   - nothing: a new file, complete or absent (a temporary file next to it,
//     renamed into place on commit()); mode 0666 less the umask;
//   - a regular file: replaced the same way, keeping its permission bits;
//   - a symbolic link: its target is written, as above (the link stays);
//   - a character device or a FIFO (/dev/null, /dev/stdout, a named pipe):
//     written straight through, never replaced;
//   - anything else (a directory, a block device, a socket): refused.
// Every write and the final close are checked. Destroying an uncommitted
// writer removes its temporary file.
class AtomicFileWriter {
 public:
  static Result<std::unique_ptr<AtomicFileWriter>> create(const std::string& path);
  ~AtomicFileWriter();

  Status write(std::string_view bytes);
  Status commit();

 private:
  AtomicFileWriter(std::string path, std::string tmp_path, int fd)
      : path_(std::move(path)), tmp_path_(std::move(tmp_path)), fd_(fd) {}
  std::string path_;
  std::string tmp_path_;  // empty: writing straight through to path_
  int fd_ = -1;
  bool committed_ = false;
};

// True when `a` and `b` name the same existing file (device and inode),
// symbolic links followed: an output path that would overwrite an input.
bool same_file(const std::string& a, const std::string& b);

// Writes `bytes` to `path` atomically (see AtomicFileWriter).
Status write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace tprof::internal
