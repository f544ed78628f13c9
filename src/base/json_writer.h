// JSON output: one escaper, one µs formatter, one structural writer.
// Nothing in tprof assembles JSON from string templates.
//
//   std::string out;
//   JsonWriter w(&out, JsonWriter::kPretty);
//   w.begin_object();
//   w.key("ts"); w.value_us(1500);          // 1.500
//   w.key("name"); w.value_string("a\"b");  // "a\"b"
//   w.end_object();                         // the document is now in `out`
//
// The writer stages its output in a small buffer of its own and moves it to
// `*out` whenever the top-level value is complete, when the stage fills, at
// flush() and on destruction: a multi-gigabyte trace is written with a few
// appends per 16 KiB instead of several per token.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tprof::internal {

// Appends `s` as a JSON string literal (quotes included). Escapes '"', '\\'
// and every control character: C0 and DEL as \u00xx (or \n, \t, ...), the
// C1 range U+0080..U+009F as \u0080..\u009f; a byte that is not
// well-formed UTF-8 becomes \ufffd; other UTF-8 passes through unchanged.
// The literal is then valid JSON, and safe on a terminal as it is.
void append_json_string(std::string* out, std::string_view s);

// Appends ns as decimal microseconds with exactly three decimals ("-0.001",
// "1795319515516244.078"). Exact for every int64 (no floating point).
void append_us(std::string* out, std::int64_t ns);

// Appends the shortest decimal that reads back as `v` (JSON has no NaN/Inf:
// those become null).
void append_double(std::string* out, double v);

// The cores of the above, writing at `p` and returning the end. The caller
// provides the room: 6 * s.size() + 2 bytes for a string, 32 for a number.
// (The number writers are inline below: every event has several.)
char* write_json_string(char* p, std::string_view s);
inline char* write_us(char* p, std::int64_t ns);
inline char* write_int(char* p, std::int64_t v);
inline char* write_uint(char* p, std::uint64_t v);

// The first byte in [p, end) that the escaper must look at ('"', '\',
// < 0x20, DEL, and every byte >= 0x80: UTF-8 is checked, an invalid byte
// becomes \ufffd so the output is always valid JSON), or end. SSE2, 16
// bytes a step.
const char* find_json_escape(const char* p, const char* end);

// The length (2 to 4) of the UTF-8 sequence at p (its first byte >= 0x80)
// that the escaper copies unchanged: utf8_sequence_length, but 0 for the
// C1 controls U+0080..U+009F, which it escapes.
int json_copy_length(const char* p, const char* end);

// The length (2 to 4) of the well-formed UTF-8 sequence at p (its first byte
// >= 0x80), or 0: overlong forms, surrogates and code points past U+10FFFF
// are not well formed (Unicode 15, table 3-7).
int utf8_sequence_length(const char* p, const char* end);

// True when all of `s` is well-formed UTF-8 (utf8_sequence_length's rule).
bool is_valid_utf8(std::string_view s);

// `s` with every byte that is not part of a well-formed UTF-8 sequence
// replaced by U+FFFD, one per byte: the escaper's rule, for text that is
// not JSON (the SQLite export's TEXT values). Valid text comes back as is.
std::string replace_invalid_utf8(std::string_view s);

// True when the escaper changes `s` (a quote, a backslash, a control
// character, DEL and C1 included, or a byte that is not well-formed
// UTF-8); otherwise its string literal is `"` s `"`.
bool needs_json_escape(std::string_view s);

// An object key fixed at compile time, checked then to need no escaping:
//   static constexpr JsonKey kTs("ts");  w.key(kTs);
class JsonKey {
 public:
  template <std::size_t N>
  consteval explicit JsonKey(const char (&text)[N]) : text_(text, N - 1) {
    for (const char c : text_) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '"' || c == '\\') key_needs_escaping();
    }
  }
  constexpr std::string_view text() const { return text_; }

 private:
  static void key_needs_escaping();  // not constexpr: calling it fails compilation
  std::string_view text_;
};

class JsonWriter {
 public:
  enum Style { kCompact, kPretty };
  explicit JsonWriter(std::string* out, Style style = kCompact, int indent = 2)
      : out_(out), style_(style), indent_(indent) {}
  ~JsonWriter() { flush(); }
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  void key(std::string_view k) {
    before_value();
    put_string(k);
    char* p = room(2);
    p[0] = ':';
    p[1] = ' ';
    pos_ = p + 2;
    after_key_ = true;
  }
  void key(const JsonKey& k) {
    before_value();
    const std::string_view t = k.text();
    char* p = room(t.size() + 4);
    *p++ = '"';
    std::memcpy(p, t.data(), t.size());
    p += t.size();
    std::memcpy(p, "\": ", 3);
    pos_ = p + 3;
    after_key_ = true;
  }

  void value_string(std::string_view s) {
    before_value();
    put_string(s);
    after_value();
  }
  // value_string for a string that needs_json_escape() has found needs no
  // escaping (callers that write one string many times check it once).
  void value_plain_string(std::string_view s) {
    before_value();
    if (s.size() > kStageBytes / 4) {
      put_string(s);
    } else {
      char* p = room(s.size() + 2);
      *p++ = '"';
      if (!s.empty()) std::memcpy(p, s.data(), s.size());  // an empty view's data() may be null
      p[s.size()] = '"';
      pos_ = p + s.size() + 1;
    }
    after_value();
  }
  void value_int(std::int64_t v) {
    before_value();
    pos_ = write_int(room(24), v);
    after_value();
  }
  void value_uint(std::uint64_t v) {
    before_value();
    pos_ = write_uint(room(24), v);
    after_value();
  }
  void value_double(double v);
  // Writes v as printf("%f") does (six decimals, no exponent), then drops
  // trailing zeros down to one decimal: "0.060606", "124.121216", "12.0".
  // Kineto writes its float kernel metrics ("blocks per SM") this way.
  // Non-finite values become null.
  void value_fixed6(double v);
  void value_bool(bool v) { value_raw(v ? std::string_view("true") : std::string_view("false")); }
  void value_null() { value_raw("null"); }
  void value_us(std::int64_t ns) {
    before_value();
    pos_ = write_us(room(32), ns);
    after_value();
  }
  // Appends text that already is one valid JSON value (for example a string
  // literal made by append_json_string and kept for reuse).
  void value_raw(std::string_view json) {
    before_value();
    put_raw(json);
    after_value();
  }

  // Appends members that a compact JsonWriter wrote earlier (the text
  // between the braces of `{"a": 1, "b": "x"}`) to the open object, as if
  // they were written here with key() and value calls. Lets a caller write
  // the members many objects share once and reuse the bytes.
  void members_raw(std::string_view members) {
    before_value();
    set_top();
    put_raw(members);
  }

  // Compact style: starts a new line before the next element (for
  // line-per-event output that stays diff-friendly).
  void break_line() { pending_break_ = true; }

  // Moves the staged output to *out.
  void flush() {
    if (pos_ != stage_) {
      out_->append(stage_, pos_);
      pos_ = stage_;
    }
  }
  // Bytes written so far, staged ones included.
  std::size_t size() const { return out_->size() + static_cast<std::size_t>(pos_ - stage_); }
  std::string* out() {
    flush();
    return out_;
  }
  std::size_t depth() const { return depth_; }

 private:
  static constexpr std::size_t kStageBytes = 16384;

  // Room for n more bytes at pos_ (n <= kStageBytes).
  char* room(std::size_t n) {
    if (static_cast<std::size_t>(stage_ + kStageBytes - pos_) < n) flush();
    return pos_;
  }
  void put_raw(std::string_view s) {
    if (s.size() > kStageBytes / 4) {
      flush();
      out_->append(s);
      return;
    }
    char* p = room(s.size());
    if (!s.empty()) std::memcpy(p, s.data(), s.size());  // an empty view's data() may be null
    pos_ = p + s.size();
  }
  void put_string(std::string_view s) {
    if (s.size() > kStageBytes / 8) {
      flush();
      append_json_string(out_, s);
      return;
    }
    pos_ = write_json_string(room(6 * s.size() + 2), s);
  }
  void put_char(char c) {
    char* p = room(1);
    *p = c;
    pos_ = p + 1;
  }

  void before_value() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (depth_ != 0) separate();
  }
  // A scalar ended: a complete top-level value goes out at once.
  void after_value() {
    if (depth_ == 0) flush();
  }
  // Before an element of the open container: compact style writes ", "
  // between elements, ",\n" (or "\n" before the first) after break_line();
  // pretty style a newline and indentation before every element.
  void separate() {
    const bool had = top();
    if (style_ != kCompact || pending_break_ || !had) {
      separate_slow();
      return;
    }
    char* p = room(2);
    p[0] = ',';
    p[1] = ' ';
    pos_ = p + 2;
  }
  void separate_slow();
  // The open container's "has elements" flag: a bit per level (64 inline).
  bool top() const { return depth_ <= 64 ? ((has_ >> (depth_ - 1)) & 1) != 0 : deep_[depth_ - 65]; }
  void set_top() {
    if (depth_ <= 64) {
      has_ |= std::uint64_t{1} << (depth_ - 1);
    } else {
      deep_[depth_ - 65] = true;
    }
  }
  void open(char c);
  void close(char c);
  void newline_indent(std::size_t level);

  std::string* out_;
  Style style_;
  int indent_;
  std::size_t depth_ = 0;
  std::uint64_t has_ = 0;     // levels 1..64: bit level-1 set when the container has elements
  std::vector<bool> deep_;    // levels beyond 64
  bool after_key_ = false;
  bool pending_break_ = false;
  char* pos_ = stage_;
  char stage_[kStageBytes];
};

// ---- decimal digits, two at a time ------------------------------------------

namespace digits {

// "00" .. "99".
inline constexpr char kPairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// Exactly four digits of v (< 10000).
inline char* write4(char* p, std::uint32_t v) {
  std::memcpy(p, kPairs + 2 * (v / 100), 2);
  std::memcpy(p + 2, kPairs + 2 * (v % 100), 2);
  return p + 4;
}

// Exactly eight digits of v (< 10^8), as two independent halves.
inline char* write8(char* p, std::uint32_t v) {
  write4(p, v / 10000);
  return write4(p + 4, v % 10000);
}

// v (< 10^8) without leading zeros.
inline char* write_small(char* p, std::uint32_t v) {
  if (v < 100) {
    if (v < 10) {
      *p = static_cast<char>('0' + v);
      return p + 1;
    }
    std::memcpy(p, kPairs + 2 * v, 2);
    return p + 2;
  }
  if (v < 10000) {
    if (v < 1000) {
      *p = static_cast<char>('0' + v / 100);
      std::memcpy(p + 1, kPairs + 2 * (v % 100), 2);
      return p + 3;
    }
    return write4(p, v);
  }
  const std::uint32_t hi = v / 10000;  // 1 .. 9999
  if (hi < 10) {
    *p++ = static_cast<char>('0' + hi);
  } else if (hi < 100) {
    std::memcpy(p, kPairs + 2 * hi, 2);
    p += 2;
  } else if (hi < 1000) {
    *p = static_cast<char>('0' + hi / 100);
    std::memcpy(p + 1, kPairs + 2 * (hi % 100), 2);
    p += 3;
  } else {
    p = write4(p, hi);
  }
  return write4(p, v % 10000);
}

}  // namespace digits

inline char* write_uint(char* p, std::uint64_t v) {
  // Eight digits at a time from the top: at most three groups for 2^64.
  if (v < 100000000) return digits::write_small(p, static_cast<std::uint32_t>(v));
  const std::uint64_t hi = v / 100000000;
  const auto lo = static_cast<std::uint32_t>(v % 100000000);
  if (hi < 100000000) {
    p = digits::write_small(p, static_cast<std::uint32_t>(hi));
  } else {
    p = digits::write_small(p, static_cast<std::uint32_t>(hi / 100000000));
    p = digits::write8(p, static_cast<std::uint32_t>(hi % 100000000));
  }
  return digits::write8(p, lo);
}

inline char* write_int(char* p, std::int64_t v) {
  if (v < 0) {
    *p++ = '-';
    return write_uint(p, 0ull - static_cast<std::uint64_t>(v));
  }
  return write_uint(p, static_cast<std::uint64_t>(v));
}

inline char* write_us(char* p, std::int64_t ns) {
  // Split with floor semantics on the magnitude so that -1 ns is "-0.001".
  auto mag = static_cast<std::uint64_t>(ns);
  if (ns < 0) {
    *p++ = '-';
    mag = 0ull - mag;
  }
  p = write_uint(p, mag / 1000);
  const auto frac = static_cast<std::uint32_t>(mag % 1000);
  p[0] = '.';
  p[1] = static_cast<char>('0' + frac / 100);
  std::memcpy(p + 2, digits::kPairs + 2 * (frac % 100), 2);
  return p + 4;
}

}  // namespace tprof::internal
