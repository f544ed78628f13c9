// Files: read-only memory maps for input, atomic writes for output.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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

// While alive, a write by the calling thread past RLIMIT_FSIZE (`ulimit
// -f`) fails with EFBIG instead of killing the process: SIGXFSZ, whose
// default action kills (and would leave a temporary file, or stop a
// profiler's spill thread mid-window), is blocked on the thread, and the
// one such a write raised is taken off the thread at the end. A SIGXFSZ
// that was pending or blocked before is left to the caller. Used by
// AtomicFileWriter's writes and the spill thread's (ProfilerOptions::spill_dir).
class FileSizeSignalGuard {
 public:
  FileSizeSignalGuard() noexcept;
  ~FileSizeSignalGuard();
  FileSizeSignalGuard(const FileSizeSignalGuard&) = delete;
  FileSizeSignalGuard& operator=(const FileSizeSignalGuard&) = delete;

 private:
  sigset_t old_;
  bool ours_ = false;  // SIGXFSZ was neither blocked nor pending before
};

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
    // How long to wait for a writer to open a named FIFO before giving up.
    // Once one has opened it, the read waits for data as long as a writer
    // holds it open; a pipe (`<(cmd)`, `cmd |`) always has one, so it is
    // read without this limit.
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

// A file's device and inode.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
};

// A file for work in progress that no one else can be handed in its
// place: made as AtomicFileWriter makes its temporary files
// ("<name>.tmp.<pid>.<16 hex digits>", O_CREAT|O_EXCL|O_NOFOLLOW, through a
// descriptor of its directory, the stale ones of dead processes removed
// first, so one a killed process leaves goes at the next write there),
// mode 0600, open for reading and writing. It is used only through fd(),
// never opened again by its name (a name in a directory others may write
// can be made to mean another file between two opens), and removed on
// destruction if its name is still this file. Move-only.
class ScratchFile {
 public:
  // In the directory `dir` (a path), or with `dir` empty in $TMPDIR (else
  // /tmp). Errors name the directory.
  static Result<ScratchFile> create(const std::string& dir, const std::string& name);
  // In the directory open at `dir_fd` (`dir` names it in messages).
  static Result<ScratchFile> create_in(int dir_fd, const std::string& dir, const std::string& name);

  ScratchFile(ScratchFile&& other) noexcept;
  ScratchFile& operator=(ScratchFile&& other) noexcept;
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile();

  int fd() const { return fd_; }
  // Its path, for messages only.
  const std::string& path() const { return path_; }

 private:
  ScratchFile() = default;
  void reset() noexcept;
  int dir_fd_ = -1;
  int fd_ = -1;
  std::string name_;
  std::string path_;
  FileId id_;
};

// How AtomicFileWriter::create treats what it finds at the path.
struct OutputOptions {
  // How long to wait for a reader to open a FIFO output; then an error.
  int fifo_wait_ms = 10'000;
  // false: a new file only. create() needs just the directory, and the
  // file is put in place by commit_unique(), which never replaces anything
  // (commit() then fails when the name is taken).
  bool replace = true;
};

// The one way tprof writes an output file. What the path names decides how:
//   - /dev/stdout, /dev/stderr, /dev/stdin, /dev/fd/N, /proc/self/fd/N (and
//     /proc/thread-self/fd/N, /proc/<own pid>/fd/N, or a symbolic link to
//     one of them): the open descriptor is written (a dup of it, so
//     appending where it was opened for append), never resolved to a file
//     and replaced; a descriptor that is not open, or open only for
//     reading, is refused;
//   - nothing: a new file, complete or absent: a temporary file made beside
//     it (O_CREAT|O_EXCL|O_NOFOLLOW, an unpredictable name
//     "<name>.tmp.<pid>.<16 hex digits>"), renamed into place on commit();
//     mode 0666 less the umask;
//   - a regular file: replaced the same way, keeping its mode bits (and its
//     owner and group where the process may set them); a file without any
//     write permission bit, or one this process may not write, is refused;
//   - a symbolic link: its target is written as above (the link stays); a
//     loop (or a chain of more than 40 links) is refused, as is a link in
//     /proc other than the descriptor names above, and, at any hop, a link
//     in a sticky world-writable directory (/tmp) that neither this user
//     (the effective uid) nor the directory's owner owns (the kernel's
//     fs.protected_symlinks rule: the error names the link);
//   - a character device: written straight through, never replaced;
//   - a FIFO: opened without blocking, waiting up to fifo_wait_ms for a
//     reader (then refused), and written straight through;
//   - anything else (a directory, a block device, a socket): refused.
// Temporary files of processes that no longer exist, owned by this user,
// in the same directory, are removed when a temporary file is made there.
// The temporary file is this process's until commit() (no more readable
// than the file it replaces, writable by no one else); commit() gives it
// the replaced file's owner and mode, and refuses (an error) when its name
// no longer holds it (another user of the directory renamed something
// over it), so only the file written is ever put in place.
// Every write and the final close are checked; a write past RLIMIT_FSIZE
// is an error (EFBIG: SIGXFSZ is blocked while writing), never a kill.
// Destroying an uncommitted writer removes its temporary file. Errors name
// the path as given. One thread at a time per writer.
class AtomicFileWriter {
 public:
  static Result<std::unique_ptr<AtomicFileWriter>> create(const std::string& path, const OutputOptions& options);
  static Result<std::unique_ptr<AtomicFileWriter>> create(const std::string& path) {
    return create(path, OutputOptions{});
  }
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  Status write(std::string_view bytes);
  Status commit();

  // The temporary file, open for reading and writing, for a caller that
  // builds the output in place (positioned reads and writes: the SQLite
  // export's database) before commit(); -1 for a writer that writes a
  // descriptor, a device or a FIFO straight through (write() only).
  int temporary_fd() const;

  // A ScratchFile in the temporary file's directory (the same file system
  // as the output), or in $TMPDIR (else /tmp) for a writer without one.
  // Errors name the output (and the directory).
  Result<ScratchFile> create_scratch(const std::string& name) const;

  // For a writer made with replace = false: puts the finished file under
  // the first of name(0), name(1), ... (names in the directory of the path
  // given to create()) that nothing holds, atomically and never replacing
  // anything (renameat2 RENAME_NOREPLACE, or link() where the file system
  // lacks it). Returns the path it was given under (the directory of the
  // create() path joined with the name). Gives up after 1000 names.
  Result<std::string> commit_unique(const std::function<std::string(int attempt)>& name);

 private:
  AtomicFileWriter() = default;
  std::string path_;      // as given, for messages
  std::string dir_;       // the directory of the temporary file, as a path ("" for streams)
  std::string tmp_name_;  // the temporary file's name in dir_fd_; empty: writing straight through
  std::string name_;      // the final name in dir_fd_
  int dir_fd_ = -1;
  int fd_ = -1;
  FileId tmp_id_;  // the temporary file's
  // The replaced file's owner and mode, given to the temporary file at commit().
  struct KeepOwnerAndMode {
    uid_t uid;
    gid_t gid;
    mode_t mode;
  };
  std::optional<KeepOwnerAndMode> keep_;
  bool replace_ = true;
  bool committed_ = false;
};

// True when `a` and `b` name the same existing regular file (device and
// inode), symbolic links followed; "-" is standard input, and the
// descriptor names above are their descriptors: an output that would
// overwrite an input.
bool same_file(const std::string& a, const std::string& b);

// Writes `bytes` to `path` atomically (see AtomicFileWriter).
Status write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace tprof::internal
