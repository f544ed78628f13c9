// tprof/status.h — errors returned by every control-path call.
//
// The library never throws and never exits: a fallible call returns `Status`
// or `Result<T>`, and the caller decides what to print.
//
//   tprof::Result<tprof::Trace> trace = tprof::read_trace("run.json");
//   if (!trace) {
//     std::cerr << trace.error().to_string() << "\n";  // file, byte offset, what was expected
//     return 2;
//   }
//   use(*trace);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "tprof/internal/visibility.h"

TPROF_API_BEGIN
namespace tprof {

// What kind of failure an Error is. Stable: tools map it to exit codes.
enum class ErrorCode : std::uint8_t {
  kIo = 1,           // open/read/write/mmap failed
  kParse = 2,        // the bytes are not the JSON (or gzip) we expect
  kFormat = 3,       // valid JSON, wrong shape (e.g. top level is a number)
  kInvalidArgument = 4,
  kUnsupported = 5,
  kInternal = 6,
};

// A failure with enough context for a person to find it: the file, the byte
// offset in that file (or -1 when it does not apply) and what was expected.
class Error {
 public:
  Error(ErrorCode code, std::string message, std::string path = {}, std::int64_t byte_offset = -1)
      : code_(code), message_(std::move(message)), path_(std::move(path)), byte_offset_(byte_offset) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& path() const { return path_; }
  std::int64_t byte_offset() const { return byte_offset_; }

  // Returns a copy that names `path` (kept if one is already set).
  Error with_path(std::string path) const;

  // Formats "path: byte N: message" (parts that are absent are left out).
  std::string to_string() const;

 private:
  ErrorCode code_;
  std::string message_;
  std::string path_;
  std::int64_t byte_offset_;
};

// Success, or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design, like std::expected

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_{ErrorCode::kInternal, {}};
  bool ok_ = true;
};

// A value or an Error: the part of std::expected that tprof uses.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }
  Status status() const { return has_value() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace tprof
TPROF_API_END

#define TPROF_CONCAT_INNER_(a, b) a##b
#define TPROF_CONCAT_(a, b) TPROF_CONCAT_INNER_(a, b)

// Returns the error of a failed Status / Result expression from the current function.
#define TPROF_TRY(expr)                                   \
  do {                                                    \
    auto&& tprof_try_v_ = (expr);                         \
    if (!tprof_try_v_) return tprof_try_v_.error();       \
  } while (0)

// Declares/assigns `lhs` from a Result expression, or returns its error.
#define TPROF_TRY_ASSIGN(lhs, expr) TPROF_TRY_ASSIGN_IMPL_(TPROF_CONCAT_(tprof_r_, __LINE__), lhs, expr)
#define TPROF_TRY_ASSIGN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp) return tmp.error();                \
  lhs = std::move(tmp).value()
