#include "src/base/json_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tprof::internal {

const char* find_json_escape(const char* p, const char* end) {
#if defined(__SSE2__)
  // Control characters: min(c, 0x1f) == c on unsigned bytes (SSE2 has no
  // unsigned compare); DEL separately.
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i del = _mm_set1_epi8(0x7f);
  const __m128i limit = _mm_set1_epi8(0x1f);
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i ctrl = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, limit), v), _mm_cmpeq_epi8(v, del));
    const __m128i special = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
    // The sign bit of a byte is its >= 0x80 flag: or-ed in after the mask.
    const int m = _mm_movemask_epi8(_mm_or_si128(ctrl, special)) | _mm_movemask_epi8(v);
    if (m != 0) return p + __builtin_ctz(static_cast<unsigned>(m));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x7f) return p;
  }
  return end;
}

int json_copy_length(const char* p, const char* end) {
  if (static_cast<unsigned char>(*p) == 0xc2 && end - p >= 2 && static_cast<unsigned char>(p[1]) < 0xa0) {
    return 0;  // U+0080..U+009F (or not UTF-8 at all)
  }
  return utf8_sequence_length(p, end);
}

int utf8_sequence_length(const char* p, const char* end) {
  const auto b = [&](std::ptrdiff_t i) { return static_cast<unsigned char>(p[i]); };
  const unsigned char c = b(0);
  int n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // past U+10FFFF
  } else {
    return 0;
  }
  if (end - p < n || b(1) < lo || b(1) > hi) return 0;
  for (int i = 2; i < n; ++i) {
    if (b(i) < 0x80 || b(i) > 0xbf) return 0;
  }
  return n;
}

namespace {

// The first byte >= 0x80 in [p, end), or end. SSE2, 16 bytes a step.
const char* find_non_ascii(const char* p, const char* end) {
#if defined(__SSE2__)
  while (end - p >= 16) {
    const int m = _mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    if (m != 0) return p + __builtin_ctz(static_cast<unsigned>(m));
    p += 16;
  }
#endif
  while (p < end && static_cast<unsigned char>(*p) < 0x80) ++p;
  return p;
}

// The first byte in [p, end) that is not part of well-formed UTF-8, or end.
const char* find_invalid_utf8(const char* p, const char* end) {
  for (;;) {
    p = find_non_ascii(p, end);
    if (p == end) return end;
    const int n = utf8_sequence_length(p, end);
    if (n == 0) return p;
    p += n;
  }
}

}  // namespace

bool is_valid_utf8(std::string_view s) { return find_invalid_utf8(s.data(), s.data() + s.size()) == s.data() + s.size(); }

std::string replace_invalid_utf8(std::string_view s) {
  const char* p = s.data();
  const char* end = p + s.size();
  std::string out;
  for (;;) {
    const char* bad = find_invalid_utf8(p, end);
    if (bad != p) out.append(p, static_cast<std::size_t>(bad - p));
    if (bad == end) return out;
    out += "\xef\xbf\xbd";  // U+FFFD for one byte that is not UTF-8
    p = bad + 1;
  }
}

bool needs_json_escape(std::string_view s) {
  const char* p = s.data();
  const char* end = p + s.size();
  for (;;) {
    p = find_json_escape(p, end);
    if (p == end) return false;
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x80) return true;
    const int n = json_copy_length(p, end);
    if (n == 0) return true;
    p += n;
  }
}

char* write_json_string(char* p, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  *p++ = '"';
  const char* q = s.data();
  const char* end = q + s.size();
  for (;;) {
    const char* stop = find_json_escape(q, end);
    if (stop != q) std::memcpy(p, q, static_cast<std::size_t>(stop - q));  // q may be null for ""
    p += stop - q;
    if (stop == end) break;
    const unsigned char c = static_cast<unsigned char>(*stop);
    q = stop + 1;
    if (c >= 0x80) {
      // Well-formed UTF-8 is copied, but for the C1 controls (U+0080..U+009F:
      // U+009B is a terminal's CSI), escaped as \u0080..\u009f; any other
      // byte becomes U+FFFD.
      const int n = json_copy_length(stop, end);
      if (n > 0) {
        std::memcpy(p, stop, static_cast<std::size_t>(n));
        p += n;
        q = stop + n;
      } else if (c == 0xc2 && end - stop >= 2 && static_cast<unsigned char>(stop[1]) < 0xa0 &&
                 static_cast<unsigned char>(stop[1]) >= 0x80) {
        const unsigned char c1 = static_cast<unsigned char>(stop[1]);
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c1 >> 4], kHex[c1 & 15]};
        std::memcpy(p, esc, 6);
        p += 6;
        q = stop + 2;
      } else {
        std::memcpy(p, "\\ufffd", 6);
        p += 6;
      }
      continue;
    }
    *p++ = '\\';
    switch (c) {
      case '"': *p++ = '"'; break;
      case '\\': *p++ = '\\'; break;
      case '\n': *p++ = 'n'; break;
      case '\t': *p++ = 't'; break;
      case '\r': *p++ = 'r'; break;
      case '\b': *p++ = 'b'; break;
      case '\f': *p++ = 'f'; break;
      default: {
        const char esc[5] = {'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        std::memcpy(p, esc, 5);
        p += 5;
      }
    }
  }
  *p++ = '"';
  return p;
}

void append_json_string(std::string* out, std::string_view s) {
  // Escaped in pieces through a stack buffer: the one escaper, bounded room.
  constexpr std::size_t kPiece = 1024;
  char buf[6 * kPiece + 2];
  if (s.size() <= kPiece) {
    out->append(buf, write_json_string(buf, s));
    return;
  }
  out->push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    // A piece never ends inside a UTF-8 sequence (it would read as invalid):
    // it gives back up to 3 continuation bytes to the next piece.
    std::size_t n = std::min(kPiece, s.size() - i);
    if (i + n < s.size()) {
      std::size_t back = 0;
      while (back < 3 && back + 1 < n && (static_cast<unsigned char>(s[i + n - back]) & 0xc0) == 0x80) ++back;
      if ((static_cast<unsigned char>(s[i + n - back]) & 0xc0) != 0x80) n -= back;
    }
    char* end = write_json_string(buf, s.substr(i, n));
    out->append(buf + 1, end - 1);  // without the piece's own quotes
    i += n;
  }
  out->push_back('"');
}

void append_us(std::string* out, std::int64_t ns) {
  char buf[32];
  out->append(buf, write_us(buf, ns));
}

void append_double(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

void JsonWriter::newline_indent(std::size_t level) {
  const std::size_t n = level * static_cast<std::size_t>(indent_);
  if (n + 1 > kStageBytes) {
    flush();
    out_->push_back('\n');
    out_->append(n, ' ');
    return;
  }
  char* p = room(n + 1);
  *p = '\n';
  std::memset(p + 1, ' ', n);
  pos_ = p + n + 1;
}

void JsonWriter::separate_slow() {
  const bool had = top();
  set_top();
  if (had) put_char(',');
  if (style_ == kPretty) {
    newline_indent(depth_);
  } else if (pending_break_) {
    put_char('\n');
  } else if (had) {
    put_char(' ');
  }
  pending_break_ = false;
}

void JsonWriter::value_double(double v) {
  before_value();
  char buf[64];
  char* end = buf;
  if (std::isfinite(v)) {
    end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  } else {
    std::memcpy(buf, "null", 4);
    end = buf + 4;
  }
  put_raw(std::string_view(buf, static_cast<std::size_t>(end - buf)));
  after_value();
}

void JsonWriter::value_fixed6(double v) {
  if (!std::isfinite(v)) {
    value_null();
    return;
  }
  before_value();
  // Six decimals of a finite double: at most 309 integer digits.
  char buf[330];
  char* end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 6).ptr;
  // The point is always there (precision 6): keep one digit after it.
  while (end[-1] == '0' && end[-2] != '.') --end;
  put_raw(std::string_view(buf, static_cast<std::size_t>(end - buf)));
  after_value();
}

void JsonWriter::open(char c) {
  before_value();
  put_char(c);
  ++depth_;
  if (depth_ <= 64) {
    has_ &= ~(std::uint64_t{1} << (depth_ - 1));
  } else {
    deep_.push_back(false);
  }
}

void JsonWriter::close(char c) {
  const bool had = top();
  if (depth_ > 64) deep_.pop_back();
  --depth_;
  if (had && (style_ == kPretty || pending_break_)) {
    if (style_ == kPretty) {
      newline_indent(depth_);
    } else {
      put_char('\n');
    }
  }
  pending_break_ = false;
  put_char(c);
  after_value();
}

}  // namespace tprof::internal
