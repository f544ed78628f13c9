// A pull tokenizer over JSON bytes, built for trace files: no allocation,
// every error carries its byte offset, and two leniencies for what real
// torch/Kineto writers produce (raw quotes and backslashes inside strings,
// written unescaped before kineto#754 in 2023).
//
//   JsonCursor c(bytes.data(), bytes.data() + bytes.size(), bytes.data());
//   if (!c.expect('{', "'{'")) return c.error();
//   JsonCursor::Str key;
//   while (c.read_string(&key) && c.expect(':', "':'")) { ... c.skip_value(); ... }
//
// The cursor never reads past `end`. Callers check each call's bool; after a
// failure, `failure()` says whether the input ended early (truncation) or
// held something else than expected (syntax).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tprof/status.h"

namespace tprof::internal {

enum class CursorFailure : std::uint8_t { kNone, kEof, kSyntax };

class JsonCursor {
 public:
  JsonCursor(const char* begin, const char* end, const char* file_start)
      : p_(begin), end_(end), base_(file_start) {}

  struct Str {
    std::string_view raw;   // between the quotes, escapes not decoded
    bool escaped = false;   // raw contains backslash escapes
    bool lenient = false;   // raw contains an unescaped quote or an invalid escape
  };

  // Skips whitespace and returns the next byte, or '\0' at the end.
  char peek() {
    skip_ws();
    return p_ < end_ ? *p_ : '\0';
  }
  // Skips whitespace; consumes `c` if it is next.
  bool eat(char c) {
    skip_ws();
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  // Skips whitespace and consumes `c`, or fails naming `what` was expected.
  bool expect(char c, const char* what) {
    if (eat(c)) return true;
    return fail_here(what);
  }

  // Reads a string (after whitespace). Fails if the next value is not one.
  bool read_string(Str* out);
  // Reads a number's text (after whitespace), validated against JSON's grammar.
  bool read_number(std::string_view* out);
  // Skips one value of any type, validating it. Nesting is limited to 512.
  bool skip_value();
  // Skips one value quickly, for values a caller does not read: strings and
  // bracket nesting are checked (and truncation detected), but the grammar
  // inside a skipped object or array is not validated token by token.
  bool skip_value_fast();
  // Reads a number (after whitespace). `*is_int` says whether it was a plain
  // integer that fits int64 (then `*out` holds it); other numbers are consumed.
  bool read_int(std::int64_t* out, bool* is_int);
  // Reads a number of microseconds (after whitespace) as exact nanoseconds;
  // `*ok` is false when it does not fit.
  bool read_us(std::int64_t* out, bool* ok);
  // Reads true/false/null (after whitespace); `*which` is 't', 'f' or 'n'.
  // Also NaN, Infinity and -Infinity, which Python's json.dump writes by
  // default (not JSON, but common in traces): `*which` is then 'N', and
  // readers treat the value as a number that is not finite.
  bool read_literal(char* which);
  // True when the next value (after whitespace) is NaN, Infinity or -Infinity.
  bool at_nonfinite();

  const char* pos() const { return p_; }
  void set_pos(const char* p) { p_ = p; }
  const char* end() const { return end_; }
  bool at_end() {
    skip_ws();
    return p_ >= end_;
  }
  std::int64_t offset(const char* q) const { return q - base_; }
  const char* base() const { return base_; }
  std::int64_t offset() const { return p_ - base_; }

  CursorFailure failure() const { return failure_; }
  std::int64_t failure_offset() const { return failure_pos_ ? failure_pos_ - base_ : -1; }
  const char* expected() const { return expected_; }
  // The failure as an Error ("expected X, found Y" / "unexpected end of file").
  Error error() const;

  // Records a failure at `at` (EOF if at == end) and returns false.
  bool fail(const char* at, const char* what);
  // The same, the error saying where: "expected X <context>, found Y".
  bool fail_in(const char* at, const char* what, const char* context) {
    if (failure_ == CursorFailure::kNone) context_ = context;
    return fail(at, what);
  }
  bool fail_here(const char* what) { return fail(p_, what); }

  void skip_ws() {
    // Structural characters and value starts are all above 0x20, JSON's
    // whitespace all at or below: one compare settles the common case.
    if (p_ < end_ && static_cast<unsigned char>(*p_) > 0x20) return;
    skip_ws_slow();
  }

 private:
  bool scan_string_body(Str* out);
  void skip_ws_slow();
  bool skip_container_fast();

  const char* p_;
  const char* end_;
  const char* base_;
  CursorFailure failure_ = CursorFailure::kNone;
  const char* failure_pos_ = nullptr;
  const char* expected_ = "";
  const char* context_ = nullptr;  // fail_in's
};

// Decodes JSON string escapes of `raw` (as returned in Str::raw) into `out`.
// Invalid escapes and lone surrogates are kept/replaced leniently.
void unescape_json(std::string_view raw, std::string* out);

// Parses an integer number text. Fails on fractions, exponents and overflow.
bool parse_int64(std::string_view text, std::int64_t* out);

// Parses a decimal number of microseconds ("1795319515516244.078", "68.0",
// "1.5e3") into integer nanoseconds exactly (rounding half away from zero
// beyond the third decimal). Fails on overflow.
bool parse_us_to_ns(std::string_view text, std::int64_t* out);

// Plain numbers on raw bytes, for the token walker: the integer, or the
// microseconds as ns (at most 16 integer digits and 3 decimals), that starts
// at p. On success *stop is the first byte after it. False for anything
// else (exponents, leading zeros, more digits, no digits): the caller then
// uses the general path.
bool scan_int(const char* p, const char* end, std::int64_t* out, const char** stop);
bool scan_us(const char* p, const char* end, std::int64_t* out, const char** stop);

// Parses any JSON number into a double (for values that are floats by nature).
bool parse_double(std::string_view text, double* out);

// The byte at p for an error's "found ...": quoted when printable ASCII,
// else its hex; `at_end` when p is at or past `end`.
std::string describe_byte(const char* p, const char* end, std::string_view at_end = "end of file");

}  // namespace tprof::internal
