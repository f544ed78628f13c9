// Files: read-only memory maps for input, atomic writes for output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tprof/status.h"

namespace tprof::internal {

// A read-only memory map of a whole file. Move-only; unmaps on destruction.
class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view bytes() const { return {data_, size_}; }

  // Drops the resident pages wholly inside [offset, offset+len): they are
  // read again from the page cache if touched later. Keeps peak RSS low
  // when a large file is parsed once.
  void release(std::size_t offset, std::size_t len) const;

 private:
  MappedFile() = default;
  const char* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t map_size_ = 0;
};

// Reads a whole (small) file into a string.
Result<std::string> read_file(const std::string& path);

// Writes a file so that it either appears complete or not at all: data goes
// to a temporary file next to `path`, which is renamed over `path` on
// commit(). Destroying an uncommitted writer removes the temporary file.
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
  std::string tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `bytes` to `path` atomically (see AtomicFileWriter).
Status write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace tprof::internal
