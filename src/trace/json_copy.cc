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
    case 'n': {
      char which = 0;
      if (!c->read_literal(&which)) return false;
      if (which == 'n') {
        w->value_null();
      } else {
        w->value_bool(which == 't');
      }
      return true;
    }
    default: {
      std::string_view num;
      if (!c->read_number(&num)) return false;
      w->value_raw(num);
      return true;
    }
  }
}

// Re-emits stored JSON text; falls back to `fallback` if it does not parse.
void write_stored_json(std::string_view json, JsonWriter* w, std::string* scratch, std::string_view fallback) {
  JsonCursor c(json.data(), json.data() + json.size(), json.data());
  std::string tmp;
  JsonWriter sub(&tmp);
  if (copy_json_value(&c, &sub, scratch, 0) && c.at_end()) {
    w->value_raw(tmp);
  } else {
    w->value_raw(fallback);
  }
}

std::string canonical_json(std::string_view json) {
  JsonCursor c(json.data(), json.data() + json.size(), json.data());
  std::string out, scratch;
  JsonWriter w(&out);
  if (!copy_json_value(&c, &w, &scratch) || !c.at_end()) return {};
  return out;
}

}  // namespace tprof::internal
