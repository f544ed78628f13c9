#include "src/trace/json_cursor.h"

#include <emmintrin.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>

#include "src/base/safe_text.h"

namespace tprof::internal {

namespace {

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// First '"' or '\\' in [p, end), or end. SSE2 is baseline on x86-64.
inline const char* find_quote_or_backslash(const char* p, const char* end) {
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    if (m != 0) return p + __builtin_ctz(static_cast<unsigned>(m));
    p += 16;
  }
  while (p < end && *p != '"' && *p != '\\') ++p;
  return p;
}

// The value of the eight decimal digits in x (digit values 0..9, the most
// significant in the lowest byte).
inline std::uint64_t swar_value8(std::uint64_t x) {
  x = x * 10 + (x >> 8);  // pairs: 10*d0 + d1 in every even byte
  return (((x & 0x000000ff000000ffull) * 0x000f424000000064ull) +
          (((x >> 16) & 0x000000ff000000ffull) * 0x0000271000000001ull)) >>
         32;
}

// Reads up to `max` decimal digits at *q into *v, eight bytes at a time
// (SWAR) while eight bytes are readable, advancing *q. Returns how many.
inline int read_digits(const char** q, const char* end, std::uint64_t* v, int max) {
  static constexpr std::uint64_t kPow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
  const char* p = *q;
  std::uint64_t acc = 0;
  int n = 0;
  while (n < max && end - p >= 8) {
    std::uint64_t x;
    std::memcpy(&x, p, 8);
    // Non-zero bytes of `bad` are not digits: outside 0x30..0x3f, or above '9'.
    const std::uint64_t bad = ((x & 0xf0f0f0f0f0f0f0f0ull) ^ 0x3030303030303030ull) |
                              (((x + 0x0606060606060606ull) & 0xf0f0f0f0f0f0f0f0ull) ^ 0x3030303030303030ull);
    const std::uint64_t nonzero = (((bad & 0x7f7f7f7f7f7f7f7full) + 0x7f7f7f7f7f7f7f7full) | bad) & 0x8080808080808080ull;
    int k = nonzero == 0 ? 8 : __builtin_ctzll(nonzero) / 8;
    if (k > max - n) k = max - n;
    if (k == 0) break;
    // Keep the first k digits, as the low end of an 8-digit number with leading zeros.
    const std::uint64_t d = (x - 0x3030303030303030ull) << (8 * (8 - k));
    acc = acc * kPow10[k] + swar_value8(k == 8 ? x - 0x3030303030303030ull : d);
    p += k;
    n += k;
    if (k < 8) break;
  }
  while (n < max && p < end && is_digit(*p)) {
    acc = acc * 10 + static_cast<std::uint64_t>(*p++ - '0');
    ++n;
  }
  *q = p;
  *v = acc;
  return n;
}

}  // namespace

std::string describe_byte(const char* p, const char* end, std::string_view at_end) {
  if (p >= end) return std::string(at_end);
  const unsigned char c = static_cast<unsigned char>(*p);
  if (c >= 0x21 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 15];
}

bool JsonCursor::fail(const char* at, const char* what) {
  if (failure_ == CursorFailure::kNone) {
    failure_ = at >= end_ ? CursorFailure::kEof : CursorFailure::kSyntax;
    failure_pos_ = at >= end_ ? end_ : at;
    expected_ = what;
  }
  return false;
}

Error JsonCursor::error() const {
  const std::string where = context_ != nullptr ? std::string(" ") + context_ : std::string();
  if (failure_ == CursorFailure::kEof) {
    return Error(ErrorCode::kParse, std::string("unexpected end of file, expected ") + expected_ + where, {},
                 failure_offset());
  }
  return Error(ErrorCode::kParse,
               std::string("expected ") + expected_ + where + ", found " + describe_byte(failure_pos_, end_), {},
               failure_offset());
}

void JsonCursor::skip_ws_slow() {
  // Most runs are short ("\n    " between Kineto's lines): bytes first,
  // then 16 at a time for long indentation.
  for (int i = 0; i < 8; ++i) {
    if (p_ >= end_ || !is_ws(*p_)) return;
    ++p_;
  }
  const __m128i space = _mm_set1_epi8(' ');
  const __m128i nl = _mm_set1_epi8('\n');
  while (end_ - p_ >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
    const int ws = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, space), _mm_cmpeq_epi8(v, nl)));
    if (ws != 0xffff) {
      p_ += __builtin_ctz(static_cast<unsigned>(~ws));
      if (*p_ != '\r' && *p_ != '\t') return;
      break;
    }
    p_ += 16;
  }
  while (p_ < end_ && is_ws(*p_)) ++p_;
}

bool JsonCursor::read_string(Str* out) {
  skip_ws();
  if (p_ >= end_ || *p_ != '"') return fail(p_, "a string");
  ++p_;
  return scan_string_body(out);
}

bool JsonCursor::scan_string_body(Str* out) {
  const char* start = p_;
  const char* q = p_;
  bool escaped = false, lenient = false;
  for (;;) {
    q = find_quote_or_backslash(q, end_);
    if (q >= end_) return fail(end_, "closing '\"' of a string");
    if (*q == '\\') {
      escaped = true;
      if (q + 1 >= end_) return fail(end_, "an escape sequence");
      const char e = q[1];
      if (e == 'u') {
        if (end_ - q < 6) return fail(end_, "four hex digits");
        if (is_hex(q[2]) && is_hex(q[3]) && is_hex(q[4]) && is_hex(q[5])) {
          q += 6;
        } else {
          lenient = true;  // "\u" without hex digits: a raw backslash
          q += 1;
        }
        continue;
      }
      if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
        q += 2;
      } else {
        lenient = true;  // e.g. a Windows path written raw: keep the backslash
        q += 1;
      }
      continue;
    }
    // A quote ends the string when what follows can follow a string. Anything
    // else means the writer did not escape a quote inside the text.
    if (q + 1 < end_) {
      const char n = q[1];
      if (n == ',' || n == ':' || n == '}' || n == ']') break;
    }
    const char* r = q + 1;
    while (r < end_ && is_ws(*r)) ++r;
    if (r >= end_ || *r == ',' || *r == ':' || *r == '}' || *r == ']') break;
    lenient = true;
    q += 1;
  }
  out->raw = std::string_view(start, static_cast<std::size_t>(q - start));
  out->escaped = escaped;
  out->lenient = lenient;
  p_ = q + 1;
  return true;
}

bool JsonCursor::read_number(std::string_view* out) {
  skip_ws();
  const char* s = p_;
  const char* q = p_;
  if (q < end_ && *q == '-') ++q;
  if (q >= end_) return fail(q, "a number");
  if (*q == '0') {
    ++q;
  } else if (is_digit(*q)) {
    while (q < end_ && is_digit(*q)) ++q;
  } else {
    return fail(q, "a number");
  }
  if (q < end_ && *q == '.') {
    ++q;
    if (q >= end_) return fail(q, "digits after '.'");
    if (!is_digit(*q)) return fail(q, "digits after '.'");
    while (q < end_ && is_digit(*q)) ++q;
  }
  if (q < end_ && (*q == 'e' || *q == 'E')) {
    ++q;
    if (q < end_ && (*q == '+' || *q == '-')) ++q;
    if (q >= end_) return fail(q, "exponent digits");
    if (!is_digit(*q)) return fail(q, "exponent digits");
    while (q < end_ && is_digit(*q)) ++q;
  }
  *out = std::string_view(s, static_cast<std::size_t>(q - s));
  p_ = q;
  return true;
}

bool JsonCursor::at_nonfinite() {
  skip_ws();
  if (p_ >= end_) return false;
  return *p_ == 'N' || *p_ == 'I' || (*p_ == '-' && end_ - p_ > 1 && p_[1] == 'I');
}

bool JsonCursor::read_literal(char* which) {
  skip_ws();
  static constexpr std::string_view kTrue = "true", kFalse = "false", kNull = "null";
  static constexpr std::string_view kNaN = "NaN", kInf = "Infinity", kNegInf = "-Infinity";
  std::string_view want;
  if (p_ < end_) {
    switch (*p_) {
      case 't': want = kTrue; break;
      case 'f': want = kFalse; break;
      case 'n': want = kNull; break;
      case 'N': want = kNaN; break;
      case 'I': want = kInf; break;
      case '-': want = kNegInf; break;
      default: break;
    }
  }
  if (want.empty()) return fail(p_, "true, false or null");
  const std::size_t avail = static_cast<std::size_t>(end_ - p_);
  const std::size_t n = avail < want.size() ? avail : want.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (p_[i] != want[i]) return fail(p_ + i, "true, false or null");
  }
  if (n < want.size()) return fail(end_, "true, false or null");
  const char* after = p_ + want.size();
  *which = want[0] == 't' || want[0] == 'f' || want[0] == 'n' ? want[0] : 'N';
  p_ = after;
  return true;
}

bool JsonCursor::skip_value() {
  constexpr int kMaxDepth = 512;
  std::uint64_t is_object[kMaxDepth / 64] = {};
  int depth = 0;
  auto top_is_object = [&] { return (is_object[(depth - 1) >> 6] >> ((depth - 1) & 63)) & 1; };
  auto push = [&](bool obj) {
    const std::uint64_t bit = 1ull << (depth & 63);
    if (obj) {
      is_object[depth >> 6] |= bit;
    } else {
      is_object[depth >> 6] &= ~bit;
    }
    ++depth;
  };
  Str s;
  for (;;) {
    // One value.
    skip_ws();
    if (p_ >= end_) return fail(p_, "a value");
    const char c = *p_;
    bool scalar = true;
    if (c == '{' || c == '[') {
      ++p_;
      if (depth == kMaxDepth) return fail(p_ - 1, "less deeply nested JSON (limit 512)");
      if (eat(c == '{' ? '}' : ']')) {
        scalar = true;  // empty container: a complete value
      } else {
        push(c == '{');
        if (c == '{') {
          if (!read_string(&s) || !expect(':', "':' after an object key")) return false;
        }
        scalar = false;
      }
    } else if (c == '"') {
      ++p_;
      if (!scan_string_body(&s)) return false;
    } else if ((c == '-' || is_digit(c)) && !at_nonfinite()) {
      std::string_view num;
      if (!read_number(&num)) return false;
    } else if (c == 't' || c == 'f' || c == 'n' || at_nonfinite()) {
      char which = 0;
      if (!read_literal(&which)) return false;
    } else {
      return fail(p_, "a value");
    }
    if (!scalar) continue;
    // After a value: separators and closers until another value starts.
    for (;;) {
      if (depth == 0) return true;
      skip_ws();
      const bool obj = top_is_object();
      if (p_ >= end_) return fail(p_, obj ? "',' or '}'" : "',' or ']'");
      const char d = *p_;
      if (d == ',') {
        ++p_;
        if (obj && (!read_string(&s) || !expect(':', "':' after an object key"))) return false;
        break;
      }
      if (d == (obj ? '}' : ']')) {
        ++p_;
        --depth;
        continue;
      }
      return fail(p_, obj ? "',' or '}'" : "',' or ']'");
    }
  }
}

namespace {

inline bool is_number_char(char c) { return is_digit(c) || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'; }

// First of '"', '\\', '{', '}', '[', ']' in [p, end), or end.
inline const char* find_structural(const char* p, const char* end) {
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i lbrace = _mm_set1_epi8('{'), rbrace = _mm_set1_epi8('}');
  const __m128i lbracket = _mm_set1_epi8('['), rbracket = _mm_set1_epi8(']');
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hit = _mm_or_si128(
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_or_si128(_mm_cmpeq_epi8(v, lbrace), _mm_cmpeq_epi8(v, rbrace))),
        _mm_or_si128(_mm_cmpeq_epi8(v, lbracket), _mm_cmpeq_epi8(v, rbracket)));
    const int m = _mm_movemask_epi8(hit);
    if (m != 0) return p + __builtin_ctz(static_cast<unsigned>(m));
    p += 16;
  }
  while (p < end && *p != '"' && *p != '\\' && *p != '{' && *p != '}' && *p != '[' && *p != ']') ++p;
  return p;
}

}  // namespace

bool JsonCursor::skip_container_fast() {
  // At '{' or '['. Tracks the kind of every open bracket (to reject "{]")
  // and skips strings with the lenient string scanner.
  constexpr int kMaxDepth = 512;
  std::uint64_t is_object[kMaxDepth / 64] = {};
  int depth = 0;
  const char* q = p_;
  for (;;) {
    q = find_structural(q, end_);
    if (q >= end_) return fail(end_, depth == 0 ? "a value" : "a closing bracket");
    const char c = *q;
    if (c == '"') {
      p_ = q + 1;
      Str s;
      if (!scan_string_body(&s)) return false;
      q = p_;
      continue;
    }
    if (c == '\\') return fail(q, "a value (backslash outside a string)");
    if (c == '{' || c == '[') {
      if (depth == kMaxDepth) return fail(q, "less deeply nested JSON (limit 512)");
      const std::uint64_t bit = 1ull << (depth & 63);
      if (c == '{') {
        is_object[depth >> 6] |= bit;
      } else {
        is_object[depth >> 6] &= ~bit;
      }
      ++depth;
    } else {
      if (depth == 0) return fail(q, "a value");
      const bool obj = (is_object[(depth - 1) >> 6] >> ((depth - 1) & 63)) & 1;
      if ((c == '}') != obj) return fail(q, obj ? "',' or '}'" : "',' or ']'");
      if (--depth == 0) {
        p_ = q + 1;
        return true;
      }
    }
    ++q;
  }
}

bool JsonCursor::skip_value_fast() {
  skip_ws();
  if (p_ >= end_) return fail(p_, "a value");
  const char c = *p_;
  if (c == '"') {
    ++p_;
    Str s;
    return scan_string_body(&s);
  }
  if (c == '{' || c == '[') return skip_container_fast();
  if ((c == '-' || is_digit(c)) && !at_nonfinite()) {
    const char* q = p_ + 1;
    while (q < end_ && is_number_char(*q)) ++q;
    p_ = q;
    return true;
  }
  char which = 0;
  return read_literal(&which);
}

bool scan_int(const char* p, const char* end, std::int64_t* out, const char** stop) {
  const char* q = p;
  const bool neg = q < end && *q == '-';
  if (neg) ++q;
  const char* digits = q;
  std::uint64_t v = 0;
  const int n = read_digits(&q, end, &v, 19);
  if (n == 0 || (*digits == '0' && n > 1)) return false;
  if ((q < end && is_number_char(*q)) || v > static_cast<std::uint64_t>(INT64_MAX)) return false;
  *out = neg ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  *stop = q;
  return true;
}

bool scan_us(const char* p, const char* end, std::int64_t* out, const char** stop) {
  const char* q = p;
  const bool neg = q < end && *q == '-';
  if (neg) ++q;
  const char* digits = q;
  std::uint64_t whole = 0;
  const int n = read_digits(&q, end, &whole, 16);
  if (n == 0 || (*digits == '0' && n > 1)) return false;
  std::uint64_t frac = 0;
  int frac_digits = 0;
  if (q < end && *q == '.') {
    const char* f = ++q;
    while (q < end && is_digit(*q) && q - f < 3) frac = frac * 10 + static_cast<std::uint64_t>(*q++ - '0');
    frac_digits = static_cast<int>(q - f);
    if (frac_digits == 0) return false;
  }
  if (q < end && is_number_char(*q)) return false;
  static constexpr std::uint64_t kScale[] = {1000, 100, 10, 1};
  const std::uint64_t ns = whole * 1000 + frac * kScale[frac_digits];
  if (ns > static_cast<std::uint64_t>(INT64_MAX)) return false;
  *out = neg ? -static_cast<std::int64_t>(ns) : static_cast<std::int64_t>(ns);
  *stop = q;
  return true;
}

bool JsonCursor::read_int(std::int64_t* out, bool* is_int) {
  skip_ws();
  const char* stop = nullptr;
  if (scan_int(p_, end_, out, &stop)) {
    *is_int = true;
    p_ = stop;
    return true;
  }
  std::string_view text;
  if (!read_number(&text)) return false;  // full grammar check for the unusual case
  *is_int = parse_int64(text, out);
  return true;
}

bool JsonCursor::read_us(std::int64_t* out, bool* ok) {
  skip_ws();
  const char* stop = nullptr;
  if (scan_us(p_, end_, out, &stop)) {
    *ok = true;
    p_ = stop;
    return true;
  }
  std::string_view text;
  if (!read_number(&text)) return false;
  *ok = parse_us_to_ns(text, out);
  return true;
}

namespace {


std::uint32_t hex4(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= static_cast<std::uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v |= static_cast<std::uint32_t>(c - 'a' + 10);
    } else {
      v |= static_cast<std::uint32_t>(c - 'A' + 10);
    }
  }
  return v;
}

}  // namespace

void unescape_json(std::string_view raw, std::string* out) {
  out->clear();
  out->reserve(raw.size());
  const char* p = raw.data();
  const char* end = p + raw.size();
  while (p < end) {
    const char* bs = static_cast<const char*>(std::memchr(p, '\\', static_cast<std::size_t>(end - p)));
    if (bs == nullptr) {
      out->append(p, end);
      break;
    }
    out->append(p, bs);
    p = bs;
    if (p + 1 >= end) {
      out->push_back('\\');
      break;
    }
    const char e = p[1];
    switch (e) {
      case '"': out->push_back('"'); p += 2; continue;
      case '\\': out->push_back('\\'); p += 2; continue;
      case '/': out->push_back('/'); p += 2; continue;
      case 'b': out->push_back('\b'); p += 2; continue;
      case 'f': out->push_back('\f'); p += 2; continue;
      case 'n': out->push_back('\n'); p += 2; continue;
      case 'r': out->push_back('\r'); p += 2; continue;
      case 't': out->push_back('\t'); p += 2; continue;
      case 'u':
        if (end - p >= 6 && is_hex(p[2]) && is_hex(p[3]) && is_hex(p[4]) && is_hex(p[5])) {
          std::uint32_t cp = hex4(p + 2);
          p += 6;
          if (cp >= 0xd800 && cp < 0xdc00) {
            if (end - p >= 6 && p[0] == '\\' && p[1] == 'u' && is_hex(p[2]) && is_hex(p[3]) &&
                is_hex(p[4]) && is_hex(p[5])) {
              const std::uint32_t lo = hex4(p + 2);
              if (lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                p += 6;
              } else {
                cp = 0xfffd;
              }
            } else {
              cp = 0xfffd;
            }
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            cp = 0xfffd;
          }
          append_utf8(out, cp);
          continue;
        }
        [[fallthrough]];
      default:
        out->push_back('\\');  // invalid escape, written raw by the producer
        p += 1;
    }
  }
}

bool parse_int64(std::string_view text, std::int64_t* out) {
  auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

bool parse_double(std::string_view text, double* out) {
  auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  return r.ec == std::errc() && r.ptr == text.data() + text.size();
}

namespace {

bool parse_us_to_ns_slow(std::string_view text, std::int64_t* out) {
  const char* p = text.data();
  const char* end = p + text.size();
  bool neg = false;
  if (p < end && *p == '-') {
    neg = true;
    ++p;
  }
  __int128_t mant = 0;
  int exp10 = 0;
  int digits = 0;  // significant digits kept in mant
  bool any = false;
  for (; p < end && is_digit(*p); ++p) {
    any = true;
    if (digits < 36) {
      mant = mant * 10 + (*p - '0');
      if (mant != 0) ++digits;
    } else {
      ++exp10;
    }
  }
  if (p < end && *p == '.') {
    ++p;
    for (; p < end && is_digit(*p); ++p) {
      any = true;
      if (digits < 36) {
        mant = mant * 10 + (*p - '0');
        if (mant != 0) ++digits;
        --exp10;
      }
    }
  }
  if (!any) return false;
  if (p < end && (*p == 'e' || *p == 'E')) {
    ++p;
    bool eneg = false;
    if (p < end && (*p == '+' || *p == '-')) eneg = *p++ == '-';
    int e = 0;
    bool edig = false;
    for (; p < end && is_digit(*p); ++p) {
      edig = true;
      if (e < 100000) e = e * 10 + (*p - '0');
    }
    if (!edig) return false;
    exp10 += eneg ? -e : e;
  }
  if (p != end) return false;
  exp10 += 3;  // µs -> ns
  constexpr __int128_t kMax = std::numeric_limits<std::int64_t>::max();
  if (mant == 0) {
    *out = 0;
    return true;
  }
  if (exp10 >= 0) {
    for (int i = 0; i < exp10; ++i) {
      mant *= 10;
      if (mant > kMax) return false;
    }
  } else {
    if (exp10 < -38) {
      *out = 0;
      return true;
    }
    __int128_t pow = 1;
    for (int i = 0; i < -exp10; ++i) pow *= 10;
    const __int128_t q = mant / pow;
    const __int128_t r = mant % pow;
    mant = q + (r * 2 >= pow ? 1 : 0);
  }
  if (mant > kMax) return false;
  *out = neg ? -static_cast<std::int64_t>(mant) : static_cast<std::int64_t>(mant);
  return true;
}

}  // namespace

bool parse_us_to_ns(std::string_view text, std::int64_t* out) {
  // Fast path: [-]digits[.d{0,3}] with at most 15 integer digits (< 1e15 µs = 31 years...
  // epoch µs have 16 digits, so allow 16: 9.99e15 µs * 1000 < 9.22e18).
  const char* p = text.data();
  const char* end = p + text.size();
  bool neg = false;
  if (p < end && *p == '-') {
    neg = true;
    ++p;
  }
  const char* int_start = p;
  std::uint64_t whole = 0;
  while (p < end && is_digit(*p)) whole = whole * 10 + static_cast<std::uint64_t>(*p++ - '0');
  const std::ptrdiff_t int_digits = p - int_start;
  if (int_digits == 0 || int_digits > 16) return parse_us_to_ns_slow(text, out);
  std::uint64_t frac = 0;
  if (p < end && *p == '.') {
    ++p;
    const char* f = p;
    while (p < end && is_digit(*p) && p - f < 3) frac = frac * 10 + static_cast<std::uint64_t>(*p++ - '0');
    const std::ptrdiff_t n = p - f;
    if (n == 0 || (p < end)) return parse_us_to_ns_slow(text, out);
    frac *= n == 1 ? 100 : n == 2 ? 10 : 1;
  } else if (p < end) {
    return parse_us_to_ns_slow(text, out);
  }
  const std::uint64_t ns = whole * 1000 + frac;
  if (ns > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
  *out = neg ? -static_cast<std::int64_t>(ns) : static_cast<std::int64_t>(ns);
  return true;
}

}  // namespace tprof::internal
