// Strict checks for what tprof writes, written for the fuzz targets and
// independent of tprof's own (lenient) JSON reader:
//
//   std::string why;
//   if (!testing::is_strict_json(text, &why)) ...   // RFC 8259, UTF-8
//   if (!testing::is_utf8(bytes)) ...               // well-formed UTF-8 (RFC 3629)
//
// tprof's reader accepts what real trace writers produce (raw quotes in
// strings, invalid escapes, NaN); output meant for other programs (json.loads,
// SQLite's json_extract, jq) has to pass these stricter checks instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tprof::testing {

// The length (1 to 4) of the well-formed UTF-8 sequence at s[i], or 0 (an
// overlong form, a surrogate, past U+10FFFF, a stray continuation byte, cut).
inline std::size_t utf8_sequence_at(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range (RFC 3629, section 4)
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xbf) return 0;
  }
  return n;
}

// True when `s` is well-formed UTF-8; else `*at` (if given) is the offset
// of the first byte that is not.
inline bool is_utf8(std::string_view s, std::size_t* at = nullptr) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence_at(s, i);
    if (n == 0) {
      if (at != nullptr) *at = i;
      return false;
    }
    i += n;
  }
  return true;
}

namespace strict_json_detail {

class Checker {
 public:
  Checker(std::string_view s, bool utf8) : s_(s), utf8_(utf8) {}

  bool document(std::string* why) {
    ws();
    if (!value(0)) return report(why);
    ws();
    if (p_ != s_.size()) {
      error_ = "text after the value";
      return report(why);
    }
    return true;
  }

 private:
  static constexpr int kMaxDepth = 10000;  // deeper than anything tprof writes; bounds the recursion

  bool report(std::string* why) const {
    if (why != nullptr) *why = error_ + " at byte " + std::to_string(p_);
    return false;
  }
  bool fail(const char* what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  bool at_end() const { return p_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[p_]; }
  void ws() {
    while (!at_end() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(p_, word.size()) != word) return fail("an invalid literal");
    p_ += word.size();
    return true;
  }
  static bool digit(char c) { return c >= '0' && c <= '9'; }
  static bool hex(char c) { return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

  bool number() {
    if (peek() == '-') ++p_;
    if (peek() == '0') {
      ++p_;
    } else if (digit(peek())) {
      while (digit(peek())) ++p_;
    } else {
      return fail("a number without digits");
    }
    if (peek() == '.') {
      ++p_;
      if (!digit(peek())) return fail("a fraction without digits");
      while (digit(peek())) ++p_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++p_;
      if (peek() == '+' || peek() == '-') ++p_;
      if (!digit(peek())) return fail("an exponent without digits");
      while (digit(peek())) ++p_;
    }
    return true;
  }

  bool string() {
    ++p_;  // the opening quote
    while (!at_end()) {
      const auto c = static_cast<unsigned char>(s_[p_]);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return fail("a raw control byte in a string");
      if (c == '\\') {
        ++p_;
        const char e = peek();
        if (e == 'u') {
          for (int k = 1; k <= 4; ++k) {
            if (p_ + k >= s_.size() || !hex(s_[p_ + k])) return fail("a \\u escape without four hex digits");
          }
          p_ += 5;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
          ++p_;
        } else {
          return fail("an invalid escape");
        }
        continue;
      }
      const std::size_t n = utf8_ ? utf8_sequence_at(s_, p_) : 1;
      if (n == 0) return fail("invalid UTF-8 in a string");
      p_ += n;
    }
    return fail("an unterminated string");
  }

  bool value(int depth) {
    if (depth > kMaxDepth) return fail("nesting deeper than the checker follows");
    switch (peek()) {
      case '{': {
        ++p_;
        ws();
        if (peek() == '}') {
          ++p_;
          return true;
        }
        for (;;) {
          ws();
          if (peek() != '"') return fail("an object key that is not a string");
          if (!string()) return false;
          ws();
          if (peek() != ':') return fail("no ':' after an object key");
          ++p_;
          ws();
          if (!value(depth + 1)) return false;
          ws();
          if (peek() == ',') {
            ++p_;
            continue;
          }
          if (peek() == '}') {
            ++p_;
            return true;
          }
          return fail("no ',' or '}' in an object");
        }
      }
      case '[': {
        ++p_;
        ws();
        if (peek() == ']') {
          ++p_;
          return true;
        }
        for (;;) {
          ws();
          if (!value(depth + 1)) return false;
          ws();
          if (peek() == ',') {
            ++p_;
            continue;
          }
          if (peek() == ']') {
            ++p_;
            return true;
          }
          return fail("no ',' or ']' in an array");
        }
      }
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }

  std::string_view s_;
  bool utf8_ = true;
  std::size_t p_ = 0;
  std::string error_;
};

}  // namespace strict_json_detail

// True when `text` is one JSON value (RFC 8259) with surrounding whitespace
// and nothing else, every string with valid escapes and no raw control
// byte, no NaN or Infinity, and (with `utf8`) every string well-formed
// UTF-8; else `*why` (if given) says what and where.
inline bool is_strict_json(std::string_view text, std::string* why = nullptr, bool utf8 = true) {
  return strict_json_detail::Checker(text, utf8).document(why);
}

}  // namespace tprof::testing
