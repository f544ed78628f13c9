#include "src/analyze/py_repr.h"

#include <charconv>
#include <cmath>

namespace tprof::internal {

namespace {

void append_py_string(const std::string& s, std::string* out) {
  // Python picks double quotes only when the text has a single quote and no double quote.
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  out->push_back(q);
  for (char c : s) {
    switch (c) {
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c == q) {
          out->push_back('\\');
          out->push_back(c);
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          static constexpr char kHex[] = "0123456789abcdef";
          const unsigned char u = static_cast<unsigned char>(c);
          out->append("\\x");
          out->push_back(kHex[u >> 4]);
          out->push_back(kHex[u & 15]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back(q);
}

void append_py_number(const std::string& text, std::string* out) {
  const bool is_float = text.find_first_of(".eE") != std::string::npos;
  if (!is_float) {
    out->append(text);
    return;
  }
  double d = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), d);
  if (r.ec != std::errc() || !std::isfinite(d)) {
    out->append(text);
    return;
  }
  // Python's float repr: shortest round trip, with ".0" for integral values
  // and exponent form outside [1e-4, 1e16).
  const double mag = std::fabs(d);
  char buf[64];
  if (mag != 0 && (mag >= 1e16 || mag < 1e-4)) {
    auto w = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, w.ptr);
    // C++ writes "1e+16"; Python writes "1e+16" too, but pads the exponent to two digits.
    const auto e = sci.find('e');
    std::string mant = sci.substr(0, e);
    std::string exp = sci.substr(e + 2);
    const char sign = sci[e + 1];
    if (exp.size() < 2) exp = "0" + exp;
    out->append(mant).append("e").push_back(sign);
    out->append(exp);
    return;
  }
  auto w = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  std::string s(buf, w.ptr);
  if (s.find('.') == std::string::npos) s += ".0";
  out->append(s);
}

}  // namespace

void append_py_repr(const JsonValue& v, std::string* out) {
  switch (v.type()) {
    case JsonValue::Type::kNull: out->append("None"); break;
    case JsonValue::Type::kBool: out->append(v.as_bool() ? "True" : "False"); break;
    case JsonValue::Type::kNumber: append_py_number(v.text(), out); break;
    case JsonValue::Type::kString: append_py_string(v.text(), out); break;
    case JsonValue::Type::kArray: {
      out->push_back('[');
      bool first = true;
      for (const JsonValue& item : v.items()) {
        if (!first) out->append(", ");
        first = false;
        append_py_repr(item, out);
      }
      out->push_back(']');
      break;
    }
    case JsonValue::Type::kObject: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, item] : v.members()) {
        if (!first) out->append(", ");
        first = false;
        append_py_string(k, out);
        out->append(": ");
        append_py_repr(item, out);
      }
      out->push_back('}');
      break;
    }
  }
}

}  // namespace tprof::internal
