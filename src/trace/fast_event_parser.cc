// The token walker. Its acceptance rules mirror the cursor parser's:
//  - a string ends at its first unescaped quote only if the next token is
//    one of , : } ] — the cursor's lenient rule — otherwise the event falls
//    back (a raw quote in a name);
//  - a field of an unexpected type, a number that is not plain, an escaped
//    "ph", an empty object or a non-object element falls back, so the cursor
//    records the diagnostics it records;
//  - skipped values (args above all, which are stored as written) must be
//    strict JSON (check_strict_json's rules, checked token by token); what
//    is not falls back, and the cursor repairs or drops such args, or fails
//    the read under --strict. The cursor itself only skips over the other
//    fields it does not read (JsonCursor::skip_value_fast).
#include "src/trace/fast_event_parser.h"

#include <emmintrin.h>

#include <charconv>
#include <cstring>
#include <string>

#include "src/trace/json_copy.h"
#include "src/trace/json_cursor.h"
#include "src/trace/kineto_keys.h"
#include "src/trace/structural_index.h"

namespace tprof::internal {

namespace {

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Token positions, indexed a window at a time as the walker asks for them.
class Tokens {
 public:
  Tokens(const char* from, const char* end, std::size_t window, std::vector<std::uint32_t>* buf)
      : end_(end), indexed_(from), window_((window + 63) / 64 * 64), buf_(buf) {
    if (buf_->size() < window_ + 72) buf_->resize(window_ + 72);
  }
  // The next token, or nullptr at the end of the input.
  const char* next() {
    if (i_ == n_ && !refill()) return nullptr;
    return base_ + (*buf_)[i_++];
  }
  const char* peek() {
    if (i_ == n_ && !refill()) return nullptr;
    return base_ + (*buf_)[i_];
  }

 private:
  bool refill() {
    while (indexed_ < end_) {
      // Windows are whole 64-byte blocks except at the very end, so the
      // indexer's carries (inside a string, a scalar, after a backslash)
      // never see padding in the middle of the input.
      const std::size_t left = static_cast<std::size_t>(end_ - indexed_);
      const char* stop = left > window_ ? indexed_ + window_ : end_;
      n_ = ix_.index(indexed_, stop, indexed_, buf_->data());
      base_ = indexed_;
      indexed_ = stop;
      i_ = 0;
      if (n_ > 0) return true;
    }
    return false;
  }

  StructuralIndexer ix_;
  const char* end_;
  const char* indexed_;
  std::size_t window_;
  std::vector<std::uint32_t>* buf_;
  const char* base_ = nullptr;
  std::size_t i_ = 0, n_ = 0;
};

class Walker {
 public:
  Walker(const char* from, const char* end, const char* file_start, EventSink* sink, std::size_t window)
      : end_(end), file_start_(file_start), sink_(sink), b_(sink->batch()), tokens_(from, end, window, &sink->tokens()) {}

  // The walker's token stream (held by value: its position stays in registers).
  Tokens* tokens() { return &tokens_; }

  // Parses the element whose '{' was just taken; *close is its '}'.
  // False: fall back.
  bool event(const char* open, const char** close);

 private:
  const char* skip_ws(const char* p) const {
    while (p < end_ && is_ws(*p)) ++p;
    return p;
  }
  // True if a value that ended just before `p` is followed by a separator.
  bool ends_here(const char* p) const {
    p = skip_ws(p);
    return p < end_ && (*p == ',' || *p == '}' || *p == ']' || *p == ':');
  }
  // The value after the ':' token at `colon`: its first byte.
  const char* value_after(const char* colon) const { return skip_ws(colon + 1); }
  // Takes the token at `at` (the value's own first token: a quote or bracket).
  bool take(const char* at) {
    const char* t = t_->next();
    return t == at;
  }
  // A string whose opening quote token was just taken: its text (escapes
  // not decoded). The cursor's rule for where a string ends: its quote must
  // be followed by , : } or ] — otherwise the event falls back.
  bool string_at(const char* open, std::string_view* text) {
    const char* close = t_->next();
    if (close == nullptr || *close != '"' || !ends_here(close + 1)) return false;
    *text = std::string_view(open + 1, static_cast<std::size_t>(close - open - 1));
    return true;
  }
  bool string_value(const char* v, std::string_view* text) {
    return v < end_ && *v == '"' && take(v) && string_at(v, text);
  }
  bool has_backslash(std::string_view s) const { return std::memchr(s.data(), '\\', s.size()) != nullptr; }
  // Every escape is one JSON defines (the cursor reports the others).
  static bool valid_escapes(std::string_view s) {
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\') continue;
      if (i + 1 >= s.size()) return false;
      const char e = s[++i];
      if (e == 'u') {
        if (s.size() - i <= 4) return false;
        for (int h = 1; h <= 4; ++h) {
          const char c = s[i + static_cast<std::size_t>(h)];
          if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
        }
        i += 4;
      } else if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't') {
        return false;
      }
    }
    return true;
  }
  bool string_id(const char* v, StrId* out) {
    std::string_view text;
    return string_value(v, &text) && intern_text(text, out);
  }
  // Interns a string's text as read (escapes decoded).
  bool intern_text(std::string_view text, StrId* out) {
    if (has_backslash(text)) {
      if (!valid_escapes(text)) return false;
      unescape_json(text, &scratch_);
      *out = b_->strings.intern(scratch_);
    } else {
      *out = b_->strings.intern(text);
    }
    return true;
  }
  bool int_value(const char* v, std::int64_t* out) {
    const char* stop = nullptr;
    return scan_int(v, end_, out, &stop) && ends_here(stop);
  }
  bool time_value(const char* v, std::int64_t* out) {
    const char* stop = nullptr;
    return scan_us(v, end_, out, &stop) && ends_here(stop);
  }
  bool id_value(const char* v, TraceId* out);
  // Skips a value (its tokens taken) that is strict JSON (check_strict_json's
  // rules: args are stored as written); false for anything else.
  bool skip_value(const char* v);
  // The text between the quotes at `open` and `close` (both tokens) is a
  // strict JSON string's: no raw control character, JSON's escapes only,
  // well-formed UTF-8.
  bool strict_text(const char* open, const char* close) const;
  // A number as RFC 8259 writes it, or true/false/null, at v; *stop after it.
  bool strict_scalar(const char* v, const char** stop) const;
  bool args(const char* open, PendingEvent* ev);
  // The next token must be `c`.
  const char* expect(char c) {
    const char* t = t_->next();
    return t != nullptr && *t == c ? t : nullptr;
  }
  // The next token must be a key's opening quote at `at` (the first byte
  // after '{' or ',' and whitespace): the bytes before it, which are no
  // token ("{-\"k\"", "{x, \"k\""), must not be skipped unseen.
  const char* key_quote(const char* at) {
    const char* t = expect('"');
    return t == at ? t : nullptr;
  }

  const char* end_;
  const char* file_start_;
  EventSink* sink_;
  EventBatch* b_;
  Tokens tokens_;
  Tokens* const t_ = &tokens_;
  std::string scratch_;
};

bool Walker::id_value(const char* v, TraceId* out) {
  if (v >= end_) return false;
  if (*v == '"') {
    std::string_view text;
    if (!string_value(v, &text) || has_backslash(text)) return false;
    std::int64_t n = 0;
    if (canonical_int(text, &n)) {
      *out = TraceId{n, kEmptyStr, false};
    } else {
      *out = TraceId{0, b_->strings.intern(text), true};
    }
    return true;
  }
  std::int64_t n = 0;
  if (!int_value(v, &n)) return false;
  *out = TraceId{n, kEmptyStr, false};
  return true;
}

inline bool Walker::strict_text(const char* open, const char* close) const {
  // The common case, inline: the first byte the escaper would look at in
  // the 16 after the opening quote ('"', '\\', a control, a byte >= 0x80)
  // is the closing quote. Else the strict scanner decides (escapes, UTF-8,
  // DEL), from where plain bytes end.
  const char* text = open + 1;
  if (end_ - text >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text));
    const __m128i ctrl = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
    const __m128i special =
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
    const unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(ctrl, special)) | _mm_movemask_epi8(v));
    const int first = __builtin_ctz(m | 0x10000u);
    if (text + first == close) return true;
    if (first == 16 && find_json_escape(text + 16, end_) == close) return true;
  }
  const char* p = open;
  JsonProblem problem;
  return scan_strict_string(&p, close + 1, &problem) && p == close + 1;
}

inline bool Walker::strict_scalar(const char* v, const char** stop) const {
  // A plain integer inline ("64", "0"); anything else but the literals (a
  // sign, a fraction, an exponent, not a number) through the strict scanner.
  if (*v >= '0' && *v <= '9') {
    const char* q = v + 1;
    if (*v != '0') {
      while (q < end_ && *q >= '0' && *q <= '9') ++q;
    }
    if (q < end_ && *q != '.' && *q != 'e' && *q != 'E' && (*q < '0' || *q > '9')) {
      *stop = q;
      return true;
    }
  }
  std::size_t n = 0;
  switch (*v) {
    case 't': n = end_ - v >= 4 && std::memcmp(v, "true", 4) == 0 ? 4 : 0; break;
    case 'f': n = end_ - v >= 5 && std::memcmp(v, "false", 5) == 0 ? 5 : 0; break;
    case 'n': n = end_ - v >= 4 && std::memcmp(v, "null", 4) == 0 ? 4 : 0; break;
    default: {
      JsonProblem problem;
      *stop = v;
      return scan_strict_number(stop, end_, &problem);
    }
  }
  *stop = v + n;
  return n != 0;
}

bool Walker::skip_value(const char* v) {
  if (v >= end_) return false;
  if (*v == '"') {
    std::string_view text;
    return string_value(v, &text) && strict_text(v, text.data() + text.size());
  }
  if (*v != '{' && *v != '[') {
    const char* stop = nullptr;
    return strict_scalar(v, &stop) && ends_here(stop);
  }
  // A container, checked as strict JSON token by token: what each token
  // may be after the one before (`want`), the bytes between two tokens
  // whitespace or, where a value may start, one scalar, every string's text
  // strict. What is not goes to the cursor.
  if (!take(v)) return false;
  enum : std::uint8_t { kKey = 1, kValue = 2, kColon = 4, kComma = 8, kClose = 16 };
  std::uint64_t kinds = *v == '{' ? 1 : 0;  // a bit per level: 1 = object
  int depth = 1;
  std::uint8_t want = *v == '{' ? kKey | kClose : kValue | kClose;
  const char* pos = v + 1;  // after the last token (or string)
  for (;;) {
    const char* t = t_->next();
    if (t == nullptr) return false;
    if (t != pos && (t != pos + 1 || *pos != ' ')) {  // not next to it, nor one blank apart
      const char* p = pos;
      while (p < t && is_ws(*p)) ++p;  // t, a token, is not whitespace
      if (p != t) {  // a scalar, then whitespace
        if ((want & kValue) == 0 || !strict_scalar(p, &p)) return false;
        while (p < t && is_ws(*p)) ++p;
        if (p != t) return false;
        want = kComma | kClose;
      }
    }
    const char c = *t;
    switch (c) {
      case '"': {
        const char* close = t_->next();
        if ((want & (kKey | kValue)) == 0 || close == nullptr || *close != '"' || !strict_text(t, close)) return false;
        want = (want & kKey) != 0 ? kColon : kComma | kClose;
        pos = close + 1;
        continue;
      }
      case ':':
        if (want != kColon) return false;
        want = kValue;
        break;
      case ',':
        if ((want & kComma) == 0) return false;
        want = (kinds & 1) != 0 ? kKey : kValue;
        break;
      case '{':
      case '[':
        if ((want & kValue) == 0 || depth == 64) return false;
        kinds = (kinds << 1) | (c == '{' ? 1 : 0);
        ++depth;
        want = c == '{' ? kKey | kClose : kValue | kClose;
        break;
      case '}':
      case ']':
        if ((want & kClose) == 0 || ((kinds & 1) != 0) != (c == '}')) return false;
        kinds >>= 1;
        if (--depth == 0) return ends_here(t + 1);
        want = kComma | kClose;
        break;
      default:
        return false;  // a backslash outside a string
    }
    pos = t + 1;
  }
}

bool Walker::args(const char* open, PendingEvent* ev) {
  if (open >= end_ || *open != '{' || !take(open)) return false;
  const char* close = nullptr;
  const char* first = skip_ws(open + 1);
  if (first < end_ && *first == '}') {
    close = expect('}');
    if (close == nullptr) return false;
  } else {
    for (const char* key_at = first;;) {
      const char* kq = key_quote(key_at);
      std::string_view k;
      if (kq == nullptr || !string_at(kq, &k)) return false;
      const char* colon = expect(':');
      if (colon == nullptr) return false;
      const char* v = value_after(colon);
      bool ok = true;
      using kineto::ArgColumn;
      const ArgColumn column = kineto::arg_column(k);
      // A key that is one of Kineto's is plain ASCII; any other is checked.
      if (column == ArgColumn::kNone && !strict_text(kq, k.data() + k.size())) return false;
      switch (column) {
        case ArgColumn::kMetaText:
          if (v < end_ && *v == '"') {
            std::string_view text;
            ok = string_value(v, &text) && strict_text(v, text.data() + text.size()) &&
                 intern_text(text, &ev->meta_text);
          } else {
            ok = skip_value(v);
          }
          break;
        case ArgColumn::kMemoryAddr: {
          const char* q = v;
          while (q < end_ && *q >= '0' && *q <= '9') ++q;
          auto r = std::from_chars(v, q, ev->addr);
          ok = r.ec == std::errc() && (q - v == 1 || *v != '0') && ends_here(q);  // JSON: no leading zeros
          break;
        }
        case ArgColumn::kMemoryBytes:
          ok = int_value(v, &ev->bytes);
          break;
        case ArgColumn::kDeviceIndex:
          ok = int_value(v, &ev->device);
          break;
        case ArgColumn::kStreamId:
          ok = int_value(v, &ev->stream);
          break;
        case ArgColumn::kMemoryDeviceId:
          ok = int_value(v, &ev->device_id);
          break;
        case ArgColumn::kMetaNumber:
          ok = int_value(v, &ev->meta_number);
          ev->has_meta_number = ok;
          break;
        case ArgColumn::kExternal:
          ok = int_value(v, &ev->external_id);
          break;
        case ArgColumn::kCorrelationId:
          ok = int_value(v, &ev->correlation);
          break;
        case ArgColumn::kMemoryDeviceType:
          ok = int_value(v, &ev->device_type);
          break;
        case ArgColumn::kMemoryAllocated:
          ok = int_value(v, &ev->total_allocated);
          ev->has_total_allocated = ok;
          break;
        case ArgColumn::kMemoryReserved:
          ok = int_value(v, &ev->total_reserved);
          ev->has_total_reserved = ok;
          break;
        case ArgColumn::kKineto2022:
          b_->saw_kineto_2022_args = true;
          ok = skip_value(v);
          break;
        case ArgColumn::kNone:
          ok = skip_value(v);
          break;
      }
      if (!ok) return false;
      const char* sep = t_->next();
      if (sep == nullptr) return false;
      if (*sep == ',') {
        key_at = skip_ws(sep + 1);
        continue;
      }
      if (*sep != '}') return false;
      close = sep;
      break;
    }
  }
  ev->args_off = static_cast<std::uint64_t>(open - file_start_);
  ev->args_len = static_cast<std::uint64_t>(close + 1 - open);
  // Args are stored as written: every value above was checked as strict
  // JSON; ones that are not went to the cursor parser, which repairs them
  // or (--strict) fails there.
  return ends_here(close + 1);
}

bool Walker::event(const char* open, const char** close) {
  PendingEvent ev;
  ev.cat = sink_->default_cat();
  const char* first = skip_ws(open + 1);
  if (first >= end_ || *first == '}') return false;  // empty object: the cursor reports it
  bool has_ph = false;
  for (const char* key_at = first;;) {
    const char* kq = key_quote(key_at);
    std::string_view k;
    if (kq == nullptr || !string_at(kq, &k)) return false;
    const char* colon = expect(':');
    if (colon == nullptr) return false;
    const char* v = value_after(colon);
    bool ok = true;
    using kineto::EventField;
    switch (kineto::event_field(k)) {
      case EventField::kScope: {
        std::string_view s;
        ok = string_value(v, &s);
        if (ok && s.size() == 1) {
          const char scope = s[0];
          ev.flags |= static_cast<std::uint8_t>(scope == 'g'   ? kFlagInstantGlobal
                                                : scope == 'p' ? kFlagInstantProcess
                                                : scope == 't' ? kFlagInstantThread
                                                               : 0);
        }
        break;
      }
      case EventField::kPhase: {
        std::string_view s;
        ok = string_value(v, &s) && !has_backslash(s);
        if (ok) {
          has_ph = true;
          ev.ph = s.size() == 1 ? s[0] : '?';
        }
        break;
      }
      case EventField::kTimestamp:
        ok = time_value(v, &ev.ts);
        ev.has_ts = ok;
        break;
      case EventField::kFlowId:
        if (v < end_ && *v == '"') {
          std::string_view s;
          ok = string_value(v, &s) && !has_backslash(s);
          if (ok) {
            std::int64_t n = 0;
            ev.flow_id = canonical_int(s, &n) && n >= 0 ? n : -static_cast<std::int64_t>(b_->strings.intern(s)) - 2;
          }
        } else {
          ok = int_value(v, &ev.flow_id);
          // As in event_parser.cc: a negative number is kept as its text.
          if (ok && ev.flow_id < 0) {
            ev.flow_id = -static_cast<std::int64_t>(b_->strings.intern(std::to_string(ev.flow_id))) - 2;
          }
        }
        break;
      case EventField::kBindPoint: {
        std::string_view s;
        ok = string_value(v, &s);
        if (ok && s == "e") ev.flags |= kFlagBindEnclosing;
        break;
      }
      case EventField::kProcessId:
        ok = id_value(v, &ev.pid);
        break;
      case EventField::kThreadId:
        ok = id_value(v, &ev.tid);
        break;
      case EventField::kCategory:
        ok = string_id(v, &ev.cat);
        break;
      case EventField::kDuration:
        ok = time_value(v, &ev.dur);
        ev.has_dur = ok;
        break;
      case EventField::kEventName:
        ok = string_id(v, &ev.name);
        break;
      case EventField::kArgsObject:
        ok = args(v, &ev);
        break;
      case EventField::kOther:
        ok = skip_value(v);
        break;
    }
    if (!ok) return false;
    const char* sep = t_->next();
    if (sep == nullptr) return false;
    if (*sep == ',') {
      key_at = skip_ws(sep + 1);
      continue;
    }
    if (*sep != '}') return false;
    *close = sep;
    break;
  }
  if (!has_ph) return false;
  sink_->commit(ev, open - file_start_);
  return true;
}

}  // namespace

namespace {

bool only_whitespace(const char* p, const char* end) {
  for (; p < end; ++p) {
    if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') return false;
  }
  return true;
}

}  // namespace

FastResult parse_events_fast(const char* from, const char* end, const char* file_start, const char* stop_at,
                             std::size_t window, EventSink* sink) {
  FastResult r;
  Walker walker(from, end, file_start, sink, window);
  Tokens& tokens = *walker.tokens();
  const char* elem = tokens.next();  // the '{' at `from`
  for (;;) {
    if (elem == nullptr || *elem != '{') {
      r.status = FastStatus::kFallback;
      r.pos = elem == nullptr ? from : elem;
      return r;
    }
    // The event's own token cursor state cannot be rewound, so an event that
    // falls back is re-read by the cursor from its '{'.
    const char* close = nullptr;
    if (!walker.event(elem, &close)) {
      r.status = FastStatus::kFallback;
      r.pos = elem;
      return r;
    }
    ++r.events;
    const char* sep = tokens.next();
    // The structural index skips what is not structure: a separator counts
    // only when nothing but whitespace precedes it (garbage after an event
    // must reach the cursor, not read as "], ..." further on).
    if (sep != nullptr && !only_whitespace(close + 1, sep)) sep = nullptr;
    if (sep == nullptr || (*sep != ',' && *sep != ']')) {
      // The cursor reports what is wrong after a complete event.
      r.status = FastStatus::kSeparator;
      r.pos = close + 1;
      return r;
    }
    if (*sep == ']') {
      r.status = FastStatus::kArrayEnd;
      r.pos = sep + 1;
      return r;
    }
    const char* next = tokens.peek();
    if (next != nullptr && !only_whitespace(sep + 1, next)) next = nullptr;
    if (next == nullptr || *next != '{') {
      r.status = FastStatus::kFallback;  // trailing comma, a non-object element, or the end
      r.pos = sep + 1;
      return r;
    }
    if (next >= stop_at) {
      r.status = FastStatus::kStop;
      r.pos = next;
      return r;
    }
    elem = tokens.next();
  }
}

}  // namespace tprof::internal
