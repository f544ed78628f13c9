#include "src/trace/json_value.h"

#include <cstring>

#include "src/trace/json_cursor.h"

namespace tprof::internal {

namespace {
constexpr int kMaxDepth = 512;
}

bool JsonValue::parse_at(JsonCursor* c, JsonValue* out, int depth) {
  const char next = c->peek();
  switch (next) {
    case '{': {
      if (depth >= kMaxDepth) return c->fail_here("less deeply nested JSON (limit 512)");
      c->eat('{');
      out->type_ = Type::kObject;
      if (c->eat('}')) return true;
      for (;;) {
        JsonCursor::Str key;
        if (!c->read_string(&key)) return false;
        if (!c->expect(':', "':' after an object key")) return false;
        std::string k;
        if (key.escaped) {
          unescape_json(key.raw, &k);
        } else {
          k.assign(key.raw);
        }
        out->members_.emplace_back(std::move(k), JsonValue());
        if (!parse_at(c, &out->members_.back().second, depth + 1)) return false;
        if (c->eat(',')) continue;
        return c->expect('}', "',' or '}'");
      }
    }
    case '[': {
      if (depth >= kMaxDepth) return c->fail_here("less deeply nested JSON (limit 512)");
      c->eat('[');
      out->type_ = Type::kArray;
      if (c->eat(']')) return true;
      for (;;) {
        out->items_.emplace_back();
        if (!parse_at(c, &out->items_.back(), depth + 1)) return false;
        if (c->eat(',')) continue;
        return c->expect(']', "',' or ']'");
      }
    }
    case '"': {
      JsonCursor::Str s;
      if (!c->read_string(&s)) return false;
      out->type_ = Type::kString;
      if (s.escaped) {
        unescape_json(s.raw, &out->text_);
      } else {
        out->text_.assign(s.raw);
      }
      return true;
    }
    case 't':
    case 'f':
    case 'n':
    case 'N':
    case 'I': {
      char which = 0;
      if (!c->read_literal(&which)) return false;
      // NaN / Infinity (Python's json.dump): no finite value to read.
      out->type_ = which == 't' || which == 'f' ? Type::kBool : Type::kNull;
      out->bool_ = which == 't';
      return true;
    }
    default: {
      if (c->at_nonfinite()) {  // -Infinity
        char which = 0;
        if (!c->read_literal(&which)) return false;
        out->type_ = Type::kNull;
        return true;
      }
      std::string_view num;
      if (!c->read_number(&num)) return c->fail_here("a value");
      out->type_ = Type::kNumber;
      out->text_.assign(num);
      return true;
    }
  }
}

Result<JsonValue> JsonValue::parse(std::string_view text, std::int64_t base_offset) {
  JsonCursor c(text.data(), text.data() + text.size(), text.data() - base_offset);
  JsonValue v;
  if (!parse_at(&c, &v)) return c.error();
  if (!c.at_end()) {
    c.fail_here("end of input after the JSON value");
    return c.error();
  }
  return v;
}

bool JsonValue::get_int(std::int64_t* out) const {
  if (type_ != Type::kNumber) return false;
  if (parse_int64(text_, out)) return true;
  double d = 0;
  if (!parse_double(text_, &d)) return false;
  // The conversion is undefined outside int64's range, [-2^63, 2^63) (and
  // for NaN): "9.3e18" is no integer here, as "9300000000000000000" is not.
  if (!(d >= -0x1p63 && d < 0x1p63)) return false;
  const auto i = static_cast<std::int64_t>(d);
  if (d != static_cast<double>(i)) return false;
  *out = i;
  return true;
}

bool JsonValue::get_double(double* out) const {
  return type_ == Type::kNumber && parse_double(text_, out);
}

std::int64_t JsonValue::int_or(std::int64_t fallback) const {
  std::int64_t v = 0;
  return get_int(&v) ? v : fallback;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : members_) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

bool space(char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }

// p at an opening '"': the offset just past its closing quote, or npos.
std::size_t past_string(std::string_view s, std::size_t p) {
  for (++p;;) {
    const void* q = memchr(s.data() + p, '"', s.size() - p);
    if (q == nullptr) return std::string_view::npos;
    std::size_t at = static_cast<std::size_t>(static_cast<const char*>(q) - s.data());
    std::size_t slashes = 0;
    while (at - slashes > p && s[at - slashes - 1] == '\\') ++slashes;
    if (slashes % 2 == 0) {
      // JsonCursor reads a quote followed by anything but , : } ] as a raw
      // quote inside the string (Kineto before kineto#754 wrote them): such
      // text is left to a whole parse rather than cut at that quote.
      std::size_t next = at + 1;
      while (next < s.size() && space(s[next])) ++next;
      if (next < s.size() && s[next] != ',' && s[next] != ':' && s[next] != '}' && s[next] != ']') {
        return std::string_view::npos;
      }
      return at + 1;
    }
    p = at + 1;
  }
}

// p at a value's first character: the offset just past the value, or npos.
std::size_t past_value(std::string_view s, std::size_t p) {
  const char first = s[p];
  if (first == '"') return past_string(s, p);
  if (first == '[' || first == '{') {
    char open[kMaxDepth];  // the closing bracket each open one needs
    std::size_t depth = 0;
    while (p < s.size()) {
      const char ch = s[p];
      if (ch == '"') {
        p = past_string(s, p);
        if (p == std::string_view::npos) return p;
        continue;
      }
      if (ch == '[' || ch == '{') {
        if (depth == kMaxDepth) return std::string_view::npos;
        open[depth++] = ch == '[' ? ']' : '}';
      } else if (ch == ']' || ch == '}') {
        if (ch != open[--depth]) return std::string_view::npos;
        if (depth == 0) return p + 1;
      }
      ++p;
    }
    return std::string_view::npos;
  }
  while (p < s.size() && s[p] != ',' && s[p] != '}' && s[p] != ']' && !space(s[p])) ++p;
  return p;
}

}  // namespace

bool member_values(std::string_view json, std::span<const std::string_view> keys, std::span<std::string_view> values) {
  for (std::string_view& v : values) v = {};
  for (std::string_view k : keys) {
    if (k.find('\\') != std::string_view::npos || k.find('"') != std::string_view::npos) return false;
  }
  std::size_t p = 0, found = 0;
  std::string decoded;
  const auto skip_space = [&] {
    while (p < json.size() && space(json[p])) ++p;
  };
  skip_space();
  if (p >= json.size() || json[p] != '{') return false;
  ++p;
  skip_space();
  if (p < json.size() && json[p] == '}') return true;
  while (true) {
    if (p >= json.size() || json[p] != '"') return false;
    const std::size_t key_end = past_string(json, p);
    if (key_end == std::string_view::npos) return false;
    std::string_view key = json.substr(p + 1, key_end - p - 2);
    // A name written with escapes ("gr\u0069d") is compared decoded, as
    // JsonValue::find compares it; real traces have none, so the copy is rare.
    if (key.find('\\') != std::string_view::npos) {
      unescape_json(key, &decoded);
      key = decoded;
    }
    p = key_end;
    skip_space();
    if (p >= json.size() || json[p] != ':') return false;
    ++p;
    skip_space();
    if (p >= json.size()) return false;
    const std::size_t value_end = past_value(json, p);
    if (value_end == std::string_view::npos || value_end == p) return false;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      if (values[k].empty() && key == keys[k]) {
        values[k] = json.substr(p, value_end - p);
        if (++found == keys.size()) return true;  // the first of each: what JsonValue::find returns
      }
    }
    p = value_end;
    skip_space();
    if (p < json.size() && json[p] == ',') {
      ++p;
      skip_space();
      continue;
    }
    return p < json.size() && json[p] == '}';
  }
}

}  // namespace tprof::internal
