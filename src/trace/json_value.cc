#include "src/trace/json_value.h"

#include <string.h>  // memmem (GNU)

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
  if (d != static_cast<double>(static_cast<std::int64_t>(d))) return false;
  *out = static_cast<std::int64_t>(d);
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

// memmem: string_view::find stops at every occurrence of the key's first
// character, and in an args object that is every '"' (a third of diagnose's
// in-place reads on a 200 MB trace); glibc's memmem skips ahead by pairs.
std::size_t find_in(std::string_view hay, std::string_view needle, std::size_t from) {
  if (from > hay.size()) return std::string_view::npos;
  const void* at = memmem(hay.data() + from, hay.size() - from, needle.data(), needle.size());
  return at == nullptr ? std::string_view::npos : static_cast<std::size_t>(static_cast<const char*>(at) - hay.data());
}

}  // namespace

std::size_t array_value_at(std::string_view json, std::string_view quoted_key) {
  const std::size_t k = find_in(json, quoted_key, 0);
  if (k == std::string_view::npos || find_in(json, quoted_key, k + 1) != std::string_view::npos) {
    return std::string_view::npos;
  }
  const auto space = [](char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; };
  std::size_t p = k + quoted_key.size();
  while (p < json.size() && space(json[p])) ++p;
  if (p >= json.size() || json[p] != ':') return std::string_view::npos;
  ++p;
  while (p < json.size() && space(json[p])) ++p;
  return p < json.size() && json[p] == '[' ? p : std::string_view::npos;
}

}  // namespace tprof::internal
