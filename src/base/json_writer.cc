#include "src/base/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace tprof::internal {

void append_json_string(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  const char* p = s.data();
  const char* end = p + s.size();
  const char* run = p;
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(run, p);
    run = p + 1;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\t': out->append("\\t"); break;
      case '\r': out->append("\\r"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      default: {
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out->append(esc, 6);
      }
    }
  }
  out->append(run, end);
  out->push_back('"');
}

void append_us(std::string* out, std::int64_t ns) {
  // Split with floor semantics on the magnitude so that -1 ns is "-0.001".
  const bool neg = ns < 0;
  const std::uint64_t mag = neg ? 0ull - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  char buf[32];
  char* p = buf;
  if (neg) *p++ = '-';
  p = std::to_chars(p, buf + sizeof buf, mag / 1000).ptr;
  const unsigned frac = static_cast<unsigned>(mag % 1000);
  *p++ = '.';
  *p++ = static_cast<char>('0' + frac / 100);
  *p++ = static_cast<char>('0' + frac / 10 % 10);
  *p++ = static_cast<char>('0' + frac % 10);
  out->append(buf, p);
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
  out_->push_back('\n');
  out_->append(level * static_cast<std::size_t>(indent_), ' ');
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) return;
  if (stack_.back()) out_->push_back(',');
  stack_.back() = true;
  if (style_ == kPretty) {
    newline_indent(stack_.size());
  } else if (pending_break_) {
    out_->push_back('\n');
  } else if (out_->size() > 0 && out_->back() == ',') {
    out_->push_back(' ');
  }
  pending_break_ = false;
}

void JsonWriter::open(char c) {
  before_value();
  out_->push_back(c);
  stack_.push_back(false);
}

void JsonWriter::close(char c) {
  const bool had = stack_.back();
  stack_.pop_back();
  if (had && (style_ == kPretty || pending_break_)) {
    if (style_ == kPretty) {
      newline_indent(stack_.size());
    } else {
      out_->push_back('\n');
    }
  }
  pending_break_ = false;
  out_->push_back(c);
}

void JsonWriter::key(std::string_view k) {
  before_value();
  append_json_string(out_, k);
  out_->append(": ");
  after_key_ = true;
}

void JsonWriter::value_string(std::string_view s) {
  before_value();
  append_json_string(out_, s);
}

void JsonWriter::value_int(std::int64_t v) {
  before_value();
  char buf[24];
  out_->append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void JsonWriter::value_uint(std::uint64_t v) {
  before_value();
  char buf[24];
  out_->append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void JsonWriter::value_double(double v) {
  before_value();
  append_double(out_, v);
}

void JsonWriter::value_bool(bool v) {
  before_value();
  out_->append(v ? "true" : "false");
}

void JsonWriter::value_null() {
  before_value();
  out_->append("null");
}

void JsonWriter::value_us(std::int64_t ns) {
  before_value();
  append_us(out_, ns);
}

void JsonWriter::value_raw(std::string_view json) {
  before_value();
  out_->append(json);
}

}  // namespace tprof::internal
