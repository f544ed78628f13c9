#include "src/base/json_writer.h"

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
  // unsigned compare).
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i limit = _mm_set1_epi8(0x1f);
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i ctrl = _mm_cmpeq_epi8(_mm_min_epu8(v, limit), v);
    const __m128i special = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
    const int m = _mm_movemask_epi8(_mm_or_si128(ctrl, special));
    if (m != 0) return p + __builtin_ctz(static_cast<unsigned>(m));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == '"' || c == '\\') return p;
  }
  return end;
}

bool needs_json_escape(std::string_view s) {
  const char* end = s.data() + s.size();
  return find_json_escape(s.data(), end) != end;
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
  for (std::size_t i = 0; i < s.size(); i += kPiece) {
    char* end = write_json_string(buf, s.substr(i, kPiece));
    out->append(buf + 1, end - 1);  // without the piece's own quotes
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
