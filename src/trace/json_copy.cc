#include "src/trace/json_copy.h"

namespace tprof::internal {

bool copy_json_value(JsonCursor* c, JsonWriter* w, std::string* scratch, int depth) {
  const char next = c->peek();
  switch (next) {
    case '{': {
      if (depth > 512) return false;
      c->eat('{');
      w->begin_object();
      if (!c->eat('}')) {
        for (;;) {
          JsonCursor::Str k;
          if (!c->read_string(&k) || !c->expect(':', "':'")) return false;
          if (k.escaped) {
            unescape_json(k.raw, scratch);
            w->key(*scratch);
          } else {
            w->key(k.raw);
          }
          if (!copy_json_value(c, w, scratch, depth + 1)) return false;
          if (c->eat(',')) continue;
          if (!c->expect('}', "'}'")) return false;
          break;
        }
      }
      w->end_object();
      return true;
    }
    case '[': {
      if (depth > 512) return false;
      c->eat('[');
      w->begin_array();
      if (!c->eat(']')) {
        for (;;) {
          if (!copy_json_value(c, w, scratch, depth + 1)) return false;
          if (c->eat(',')) continue;
          if (!c->expect(']', "']'")) return false;
          break;
        }
      }
      w->end_array();
      return true;
    }
    case '"': {
      JsonCursor::Str s;
      if (!c->read_string(&s)) return false;
      if (s.escaped) {
        unescape_json(s.raw, scratch);
        w->value_string(*scratch);
      } else {
        w->value_string(s.raw);
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
      if (which == 'n' || which == 'N') {
        // NaN and Infinity are not JSON: what we write stays valid.
        w->value_null();
      } else {
        w->value_bool(which == 't');
      }
      return true;
    }
    default: {
      if (c->at_nonfinite()) {  // -Infinity
        char which = 0;
        if (!c->read_literal(&which)) return false;
        w->value_null();
        return true;
      }
      std::string_view num;
      if (!c->read_number(&num)) return false;
      w->value_raw(num);
      return true;
    }
  }
}

namespace {

// Scans a string at *p (its opening quote) that the copy would write back
// unchanged: no raw control characters (C0, DEL, C1), and only the escapes
// the one escaper writes (\" \\ \n \t \r \b \f, \u00xx in lower case for
// the other control characters). The closing quote must be followed by
// what ends a string for JsonCursor too (checked by the caller).
bool scan_compact_string(const char** p, const char* end) {
  const char* q = *p + 1;
  for (;;) {
    q = find_json_escape(q, end);
    if (q >= end) return false;
    const unsigned char c = static_cast<unsigned char>(*q);
    if (c == '"') break;
    if (c < 0x20 || c == 0x7f) return false;
    if (c >= 0x80) {  // well-formed UTF-8 but C1 is copied as is; anything else is not
      const int n = json_copy_length(q, end);
      if (n == 0) return false;
      q += n;
      continue;
    }
    // A backslash.
    if (end - q < 2) return false;
    const char e = q[1];
    if (e == '"' || e == '\\' || e == 'n' || e == 't' || e == 'r' || e == 'b' || e == 'f') {
      q += 2;
      continue;
    }
    if (e != 'u' || end - q < 6 || q[2] != '0' || q[3] != '0') return false;
    const char g = q[4], h = q[5];
    const auto hex = [](char x) { return x >= '0' && x <= '9' ? x - '0' : x >= 'a' && x <= 'f' ? x - 'a' + 10 : -1; };
    if (hex(g) < 0 || hex(h) < 0) return false;
    const int v = hex(g) * 16 + hex(h);
    // \u0000..\u001f but the short forms, \u007f, \u0080..\u009f.
    if (v >= 0x20 && v != 0x7f && (v < 0x80 || v > 0x9f)) return false;
    if (v == '\b' || v == '\t' || v == '\n' || v == '\f' || v == '\r') return false;
    q += 6;
  }
  *p = q + 1;
  return true;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// JSON's number grammar, as JsonCursor::read_number accepts it.
bool scan_number(const char** p, const char* end) {
  const char* q = *p;
  if (q < end && *q == '-') ++q;
  if (q >= end) return false;
  if (*q == '0') {
    ++q;
  } else if (is_digit(*q)) {
    while (q < end && is_digit(*q)) ++q;
  } else {
    return false;
  }
  if (q < end && *q == '.') {
    ++q;
    if (q >= end || !is_digit(*q)) return false;
    while (q < end && is_digit(*q)) ++q;
  }
  if (q < end && (*q == 'e' || *q == 'E')) {
    ++q;
    if (q < end && (*q == '+' || *q == '-')) ++q;
    if (q >= end || !is_digit(*q)) return false;
    while (q < end && is_digit(*q)) ++q;
  }
  *p = q;
  return true;
}

bool scan_literal(const char** p, const char* end, std::string_view word) {
  if (static_cast<std::size_t>(end - *p) < word.size() || std::string_view(*p, word.size()) != word) return false;
  *p += word.size();
  return true;
}

// An object key and its ": ".
bool scan_compact_key(const char** p, const char* end) {
  if (*p >= end || **p != '"' || !scan_compact_string(p, end)) return false;
  if (end - *p < 2 || (*p)[0] != ':' || (*p)[1] != ' ') return false;
  *p += 2;
  return true;
}

}  // namespace

bool is_compact_json(std::string_view json) {
  const char* p = json.data();
  const char* end = p + json.size();
  std::uint64_t objects = 0;  // bit i: the container at depth i + 1 is an object
  int depth = 0;
  for (;;) {
    // A value starts at p.
    if (p >= end) return false;
    const char c = *p;
    bool scalar = true;
    if (c == '{' || c == '[') {
      const char closer = c == '{' ? '}' : ']';
      ++p;
      if (p < end && *p == closer) {
        ++p;  // empty container: a complete value
      } else {
        if (depth == 64) return false;
        objects = (objects << 1) | (c == '{' ? 1u : 0u);
        ++depth;
        if (c == '{' && !scan_compact_key(&p, end)) return false;
        scalar = false;
      }
    } else if (c == '"') {
      if (!scan_compact_string(&p, end)) return false;
    } else if (c == 't') {
      if (!scan_literal(&p, end, "true")) return false;
    } else if (c == 'f') {
      if (!scan_literal(&p, end, "false")) return false;
    } else if (c == 'n') {
      if (!scan_literal(&p, end, "null")) return false;
    } else if (!scan_number(&p, end)) {
      return false;
    }
    if (!scalar) continue;
    // After a value: ", " and the next element, or closers.
    for (;;) {
      if (depth == 0) return p == end;
      if (p >= end) return false;
      const bool object = (objects & 1) != 0;
      if (*p == ',') {
        if (end - p < 2 || p[1] != ' ') return false;
        p += 2;
        if (object && !scan_compact_key(&p, end)) return false;
        break;
      }
      if (*p != (object ? '}' : ']')) return false;
      ++p;
      objects >>= 1;
      --depth;
    }
  }
}

// Re-emits stored JSON text; falls back to `fallback` if it does not parse.
void write_stored_json(std::string_view json, JsonWriter* w, std::string* scratch, std::string* value,
                       std::string_view fallback) {
  // What tprof wrote itself (capture args, a trace written by tprof) is
  // already in the form the copy produces: write it as it is.
  if (is_compact_json(json)) {
    w->value_raw(json);
    return;
  }
  JsonCursor c(json.data(), json.data() + json.size(), json.data());
  value->clear();
  bool ok = false;
  {
    JsonWriter sub(value);
    ok = copy_json_value(&c, &sub, scratch, 0) && c.at_end();
  }
  w->value_raw(ok ? std::string_view(*value) : fallback);
}

namespace {

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool is_hex4(const char* q) {
  for (int i = 0; i < 4; ++i) {
    const char c = q[i];
    if (!is_digit(c) && !(c >= 'a' && c <= 'f') && !(c >= 'A' && c <= 'F')) return false;
  }
  return true;
}

unsigned hex4_value(const char* q) {
  unsigned v = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = q[i];
    v = v * 16 + static_cast<unsigned>(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
  }
  return v;
}

bool problem_at(JsonProblem* problem, const char* at, const char* what) {
  problem->at = at;
  problem->what = what;
  return false;
}

}  // namespace

bool scan_strict_string(const char** p, const char* end, JsonProblem* problem) {
  const char* q = *p + 1;
  for (;;) {
    q = find_json_escape(q, end);
    if (q >= end) return problem_at(problem, end, "the closing '\"' of a string");
    const unsigned char c = static_cast<unsigned char>(*q);
    if (c == '"') break;
    if (c == 0x7f) {  // DEL is a plain character in JSON
      ++q;
      continue;
    }
    if (c < 0x20) return problem_at(problem, q, "a control character written as an escape (\\u00xx)");
    if (c >= 0x80) {
      const int n = utf8_sequence_length(q, end);
      if (n == 0) return problem_at(problem, q, "well-formed UTF-8");
      q += n;
      continue;
    }
    // A backslash.
    if (end - q < 2) return problem_at(problem, end, "an escape sequence");
    const char e = q[1];
    if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
      q += 2;
      continue;
    }
    if (e != 'u') return problem_at(problem, q, "one of JSON's escapes (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
    if (end - q < 6 || !is_hex4(q + 2)) return problem_at(problem, q, "four hex digits after \\u");
    const unsigned v = hex4_value(q + 2);
    q += 6;
    if (v >= 0xdc00 && v < 0xe000) return problem_at(problem, q - 6, "a low surrogate only after a high one");
    if (v >= 0xd800 && v < 0xdc00) {
      if (end - q < 6 || q[0] != '\\' || q[1] != 'u' || !is_hex4(q + 2) || hex4_value(q + 2) < 0xdc00 ||
          hex4_value(q + 2) >= 0xe000) {
        return problem_at(problem, q - 6, "a high surrogate followed by a low one");
      }
      q += 6;
    }
  }
  *p = q + 1;
  return true;
}

bool scan_strict_number(const char** p, const char* end, JsonProblem* problem) {
  const char* q = *p;
  if (q < end && *q == '-') ++q;
  if (q < end && *q == '0') {
    ++q;
  } else if (q < end && is_digit(*q) && *q != '0') {
    while (q < end && is_digit(*q)) ++q;
  } else {
    return problem_at(problem, q, "a digit");
  }
  if (q < end && *q == '.') {
    ++q;
    if (q >= end || !is_digit(*q)) return problem_at(problem, q, "a digit after '.'");
    while (q < end && is_digit(*q)) ++q;
  }
  if (q < end && (*q == 'e' || *q == 'E')) {
    ++q;
    if (q < end && (*q == '+' || *q == '-')) ++q;
    if (q >= end || !is_digit(*q)) return problem_at(problem, q, "exponent digits");
    while (q < end && is_digit(*q)) ++q;
  }
  *p = q;
  return true;
}

namespace {

const char* skip_ws_bytes(const char* p, const char* end) {
  while (p < end && is_ws(*p)) ++p;
  return p;
}

}  // namespace

bool check_strict_json(const char* p, const char* end, JsonProblem* problem) {
  constexpr int kMaxDepth = 512;
  std::uint64_t objects[kMaxDepth / 64] = {};  // bit d: the container at depth d + 1 is an object
  int depth = 0;
  auto in_object = [&] { return ((objects[(depth - 1) >> 6] >> ((depth - 1) & 63)) & 1) != 0; };
  // After '{' or ',' in an object: a key and its ':'.
  auto key = [&]() {
    p = skip_ws_bytes(p, end);
    if (p >= end || *p != '"') return problem_at(problem, p, "a string (an object key)");
    if (!scan_strict_string(&p, end, problem)) return false;
    p = skip_ws_bytes(p, end);
    if (p >= end || *p != ':') return problem_at(problem, p, "':' after an object key");
    ++p;
    return true;
  };
  for (;;) {
    // A value.
    p = skip_ws_bytes(p, end);
    if (p >= end) return problem_at(problem, end, "a value");
    const char c = *p;
    if (c == '{' || c == '[') {
      ++p;
      const char* q = skip_ws_bytes(p, end);
      if (q < end && *q == (c == '{' ? '}' : ']')) {
        p = q + 1;  // empty: a complete value
      } else {
        if (depth == kMaxDepth) return problem_at(problem, p - 1, "less deeply nested JSON (limit 512)");
        const std::uint64_t bit = 1ull << (depth & 63);
        objects[depth >> 6] = c == '{' ? objects[depth >> 6] | bit : objects[depth >> 6] & ~bit;
        ++depth;
        if (c == '{' && !key()) return false;
        continue;
      }
    } else if (c == '"') {
      if (!scan_strict_string(&p, end, problem)) return false;
    } else if (c == '-' || is_digit(c)) {
      if (!scan_strict_number(&p, end, problem)) return false;
    } else if (c == 't' || c == 'f' || c == 'n') {
      const std::string_view word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      if (!scan_literal(&p, end, word)) return problem_at(problem, p, "true, false or null");
    } else {
      return problem_at(problem, p, "a JSON value");
    }
    // After a value: separators and closers until the next value.
    for (;;) {
      p = skip_ws_bytes(p, end);
      if (depth == 0) return p == end || problem_at(problem, p, "the end of the value");
      const bool object = in_object();
      if (p >= end) return problem_at(problem, end, object ? "',' or '}'" : "',' or ']'");
      if (*p == ',') {
        ++p;
        if (object && !key()) return false;
        break;
      }
      if (*p != (object ? '}' : ']')) return problem_at(problem, p, object ? "',' or '}'" : "',' or ']'");
      ++p;
      --depth;
    }
  }
}

std::string describe_json_problem(const JsonProblem& problem, const char* end, std::string_view at_end) {
  return std::string("expected ") + problem.what + ", found " + describe_byte(problem.at, end, at_end);
}

std::string canonical_json(std::string_view json) {
  JsonCursor c(json.data(), json.data() + json.size(), json.data());
  std::string out, scratch;
  JsonWriter w(&out);
  if (!copy_json_value(&c, &w, &scratch) || !c.at_end()) return {};
  return out;
}

}  // namespace tprof::internal
