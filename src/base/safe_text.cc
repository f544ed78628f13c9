#include "src/base/safe_text.h"

#include <cstdio>

#include "src/base/json_writer.h"

namespace tprof::internal {

namespace {

// The length of the printable unit at p: 1 for a plain byte, the sequence
// length for well-formed UTF-8 that is not a C1 control; 0 when the unit
// must be rewritten.
int printable_length(const char* p, const char* end) {
  const unsigned char c = static_cast<unsigned char>(*p);
  if (c < 0x80) return (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? 0 : 1;
  const int n = utf8_sequence_length(p, end);
  if (n == 2 && c == 0xc2 && static_cast<unsigned char>(p[1]) < 0xa0) return 0;  // U+0080..U+009F
  return n;
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

bool needs_safe_text(std::string_view text) {
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    const int n = printable_length(p, end);
    if (n == 0) return true;
    p += n;
  }
  return false;
}

namespace {

// The rewriting pass of safe_text and safe_json_text: `json` chooses the
// escapes.
std::string rewrite_unsafe(std::string_view text, bool json) {
  std::string out;
  out.reserve(text.size() + 16);
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    const int n = printable_length(p, end);
    if (n > 0) {
      out.append(p, static_cast<std::size_t>(n));
      p += n;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(*p);
    char buf[8];
    if (c < 0x80) {
      std::snprintf(buf, sizeof buf, json ? "\\u%04x" : "\\x%02x", c);
      out += buf;
      p += 1;
    } else if (utf8_sequence_length(p, end) == 2) {  // a C1 control
      std::snprintf(buf, sizeof buf, "\\u%04x", ((c & 0x1f) << 6) | (static_cast<unsigned char>(p[1]) & 0x3f));
      out += buf;
      p += 2;
    } else {
      // U+FFFD for one byte that is not UTF-8.
      out += json ? "\\ufffd" : "\xef\xbf\xbd";
      p += 1;
    }
  }
  return out;
}

}  // namespace

std::string safe_text(std::string_view text) {
  if (!needs_safe_text(text)) return std::string(text);
  return rewrite_unsafe(text, false);
}

std::string safe_json_text(std::string_view text) {
  if (!needs_safe_text(text)) return std::string(text);
  return rewrite_unsafe(text, true);
}

void append_utf8(std::string* out, std::uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

}  // namespace tprof::internal
