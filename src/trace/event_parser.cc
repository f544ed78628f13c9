#include "src/trace/event_parser.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>

#include "src/trace/event_sink.h"
#include "src/trace/fast_event_parser.h"
#include "src/trace/json_copy.h"
#include "src/trace/kineto_keys.h"

namespace tprof::internal {

namespace {

// The lenient, byte-by-byte parser: handles everything, reports every
// oddity with its offset. The token walker (fast_event_parser.cc) hands it
// every event it does not handle itself.
class Parser {
 public:
  Parser(JsonCursor* c, EventSink* sink, bool strict) : c_(c), sink_(sink), b_(sink->batch()), strict_(strict) {}

  bool parse_event();

 private:
  bool read_string_id(StrId* out);
  bool read_id(TraceId* out);
  bool read_time(std::int64_t* out, bool* has, const char* field);
  // Reads any value; stores it in *out when it is an integer number.
  bool read_int_value(std::int64_t* out, bool* is_int = nullptr);
  bool read_uint_value(std::uint64_t* out);
  bool parse_args(PendingEvent* ev);

  JsonCursor* c_;
  EventSink* sink_;
  EventBatch* b_;
  bool strict_;
  std::string scratch_;
};

bool Parser::read_string_id(StrId* out) {
  JsonCursor::Str s;
  const char* at = c_->pos();
  if (!c_->read_string(&s)) return false;
  if (s.lenient) {
    b_->diagnostics.add(DiagnosticCode::kUnescapedString, c_->offset(at),
                        "string with an unescaped quote or backslash, read leniently");
  }
  if (s.escaped) {
    unescape_json(s.raw, &scratch_);
    *out = b_->strings.intern(scratch_);
  } else {
    *out = b_->strings.intern(s.raw);
  }
  return true;
}


bool Parser::read_id(TraceId* out) {
  const char next = c_->peek();
  if (next == '"') {
    JsonCursor::Str s;
    if (!c_->read_string(&s)) return false;
    std::int64_t v = 0;
    // 2021 traces write some tids as numeric strings ("5555") and others as
    // numbers; one lane per thread needs them to compare equal.
    if (!s.escaped && canonical_int(s.raw, &v)) {
      *out = TraceId{v, kEmptyStr, false};
      return true;
    }
    if (s.escaped) {
      unescape_json(s.raw, &scratch_);
      *out = TraceId{0, b_->strings.intern(scratch_), true};
    } else {
      *out = TraceId{0, b_->strings.intern(s.raw), true};
    }
    return true;
  }
  if (next == '-' || (next >= '0' && next <= '9')) {
    const char* at = c_->pos();
    std::int64_t v = 0;
    bool ok = false;
    if (!c_->read_int(&v, &ok)) return false;
    if (ok) {
      *out = TraceId{v, kEmptyStr, false};
    } else {
      // 1.5 or huge: keep the text.
      *out = TraceId{0, b_->strings.intern(std::string_view(at, static_cast<std::size_t>(c_->pos() - at))), true};
    }
    return true;
  }
  const char* at = c_->pos();
  if (!c_->skip_value_fast()) return false;
  b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at), "pid/tid is neither a number nor a string");
  return true;
}

bool Parser::read_time(std::int64_t* out, bool* has, const char* field) {
  const char next = c_->peek();
  const char* at = c_->pos();
  bool ok = false;
  if (c_->at_nonfinite()) {
    if (!c_->skip_value_fast()) return false;
    b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at),
                        std::string("\"") + field + "\" is NaN or Infinity, not a time");
    return true;
  }
  if (next == '"') {
    JsonCursor::Str s;
    if (!c_->read_string(&s)) return false;
    ok = parse_us_to_ns(s.raw, out);
    // A string holding no number ("z") is the wrong type, not a time out of range.
    const char first = s.raw.empty() ? '\0' : s.raw.front();
    if (!ok && first != '-' && first != '.' && (first < '0' || first > '9')) {
      b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at),
                          std::string("\"") + field + "\" is a string that holds no number, expected a number of µs");
      return true;
    }
  } else if (next == '-' || (next >= '0' && next <= '9')) {
    if (!c_->read_us(out, &ok)) return false;
  } else {
    if (!c_->skip_value_fast()) return false;
    b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at),
                        std::string("\"") + field + "\" is not a number");
    return true;
  }
  if (ok) {
    *has = true;
  } else {
    b_->diagnostics.add(DiagnosticCode::kOutOfRange, c_->offset(at),
                        std::string("\"") + field + "\" is not a representable time in µs");
  }
  return true;
}

bool Parser::read_int_value(std::int64_t* out, bool* is_int) {
  const char next = c_->peek();
  if ((next == '-' || (next >= '0' && next <= '9')) && !c_->at_nonfinite()) {
    std::int64_t v = 0;
    bool ok = false;
    if (!c_->read_int(&v, &ok)) return false;
    if (ok) *out = v;
    if (is_int != nullptr) *is_int = ok;
    return true;
  }
  if (is_int != nullptr) *is_int = false;
  return c_->skip_value_fast();
}

bool Parser::read_uint_value(std::uint64_t* out) {
  const char next = c_->peek();
  if (next >= '0' && next <= '9') {
    std::string_view num;
    if (!c_->read_number(&num)) return false;
    auto r = std::from_chars(num.data(), num.data() + num.size(), *out);
    if (r.ec != std::errc() || r.ptr != num.data() + num.size()) *out = 0;
    return true;
  }
  return c_->skip_value_fast();
}

bool Parser::parse_args(PendingEvent* ev) {
  const char next = c_->peek();
  const char* start = c_->pos();
  if (next != '{') {
    if (!c_->skip_value_fast()) return false;
    b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(start), "\"args\" is not an object");
    return true;
  }
  c_->eat('{');
  if (!c_->eat('}')) {
    JsonCursor::Str key;
    for (;;) {
      if (!c_->read_string(&key)) return false;
      if (!c_->expect(':', "':' after an object key")) return false;
      const std::string_view k = key.raw;
      bool ok = true;
      bool is_int = false;
      using kineto::ArgColumn;
      switch (kineto::arg_column(k)) {
        case ArgColumn::kMetaText:
          ok = c_->peek() == '"' ? read_string_id(&ev->meta_text) : c_->skip_value_fast();
          break;
        case ArgColumn::kMemoryAddr:
          ok = read_uint_value(&ev->addr);
          break;
        case ArgColumn::kMemoryBytes:
          ok = read_int_value(&ev->bytes);
          break;
        case ArgColumn::kDeviceIndex:
          ok = read_int_value(&ev->device);
          break;
        case ArgColumn::kStreamId:
          ok = read_int_value(&ev->stream);
          break;
        case ArgColumn::kMemoryDeviceId:
          ok = read_int_value(&ev->device_id);
          break;
        case ArgColumn::kMetaNumber:
          ok = read_int_value(&ev->meta_number, &is_int);
          ev->has_meta_number = is_int;
          break;
        case ArgColumn::kExternal:
          ok = read_int_value(&ev->external_id);
          break;
        case ArgColumn::kCorrelationId:
          ok = read_int_value(&ev->correlation);
          break;
        case ArgColumn::kMemoryDeviceType:
          ok = read_int_value(&ev->device_type);
          break;
        case ArgColumn::kMemoryAllocated:
          ok = read_int_value(&ev->total_allocated);
          ev->has_total_allocated = ok;
          break;
        case ArgColumn::kMemoryReserved:
          ok = read_int_value(&ev->total_reserved);
          ev->has_total_reserved = ok;
          break;
        case ArgColumn::kKineto2022:
          b_->saw_kineto_2022_args = true;
          ok = c_->skip_value_fast();
          break;
        case ArgColumn::kNone:
          ok = c_->skip_value_fast();
          break;
      }
      if (!ok) return false;
      if (c_->eat(',')) continue;
      if (!c_->expect('}', "',' or '}' in \"args\"")) return false;
      break;
    }
  }
  ev->args_off = static_cast<std::uint64_t>(c_->offset(start));
  ev->args_len = static_cast<std::uint64_t>(c_->pos() - start);
  // The args are stored as written and read again by strict parsers
  // (SQLite's json_extract, Python's json): what the lenient reading above
  // let through (raw quotes and control characters in strings, bad
  // escapes, invalid UTF-8, NaN, a grammar it only skipped) is caught here.
  JsonProblem problem;
  if (!check_strict_json(start, c_->pos(), &problem)) {
    if (strict_) return c_->fail_in(problem.at, problem.what, "in \"args\" (--strict reads them as JSON)");
    sink_->repair_args(std::string_view(start, static_cast<std::size_t>(c_->pos() - start)), problem,
                       c_->offset(problem.at), ev);
  }
  return true;
}

bool Parser::parse_event() {
  const char* start = c_->pos();
  c_->eat('{');
  PendingEvent ev;
  ev.cat = sink_->default_cat();
  bool has_ph = false;
  if (!c_->eat('}')) {
    JsonCursor::Str key;
    for (;;) {
      if (!c_->read_string(&key)) return false;
      if (!c_->expect(':', "':' after an object key")) return false;
      std::string_view k = key.raw;
      if (key.escaped) {
        unescape_json(key.raw, &scratch_);
        k = scratch_;
      }
      bool ok = true;
      using kineto::EventField;
      switch (kineto::event_field(k)) {
        case EventField::kScope:
          if (c_->peek() == '"') {
            JsonCursor::Str s;
            ok = c_->read_string(&s);
            if (ok && s.raw.size() == 1) {
              const char scope = s.raw[0];
              ev.flags |= static_cast<std::uint8_t>(scope == 'g'   ? kFlagInstantGlobal
                                                    : scope == 'p' ? kFlagInstantProcess
                                                    : scope == 't' ? kFlagInstantThread
                                                                   : 0);
            }
          } else {
            ok = c_->skip_value_fast();
          }
          break;
        case EventField::kPhase: {
          JsonCursor::Str s;
          const char* at = c_->pos();
          if (c_->peek() == '"') {
            ok = c_->read_string(&s);
            if (ok) {
              has_ph = true;
              ev.ph = s.raw.size() == 1 ? s.raw[0] : '?';
            }
          } else {
            ok = c_->skip_value_fast();
            if (ok) {
              b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at), "\"ph\" is not a string");
            }
          }
          break;
        }
        case EventField::kTimestamp:
          ok = read_time(&ev.ts, &ev.has_ts, "ts");
          break;
        case EventField::kFlowId: {
          const char next = c_->peek();
          if (next == '"') {
            JsonCursor::Str s;
            ok = c_->read_string(&s);
            if (ok) {
              std::int64_t v = 0;
              if (canonical_int(s.raw, &v) && v >= 0) {
                ev.flow_id = v;
              } else {
                // Other ids are interned; the id column stores -(str + 2).
                ev.flow_id = -static_cast<std::int64_t>(b_->strings.intern(s.raw)) - 2;
              }
            }
          } else {
            ok = read_int_value(&ev.flow_id);
            // A negative number would read as the encoding of a string id
            // (and -INT64_MIN does not exist): kept as its text.
            if (ok && ev.flow_id < 0) {
              ev.flow_id = -static_cast<std::int64_t>(b_->strings.intern(std::to_string(ev.flow_id))) - 2;
            }
          }
          break;
        }
        case EventField::kBindPoint:
          if (c_->peek() == '"') {
            JsonCursor::Str s;
            ok = c_->read_string(&s);
            if (ok && s.raw == "e") ev.flags |= kFlagBindEnclosing;
          } else {
            ok = c_->skip_value_fast();
          }
          break;
        case EventField::kProcessId:
          ok = read_id(&ev.pid);
          break;
        case EventField::kThreadId:
          ok = read_id(&ev.tid);
          break;
        case EventField::kCategory:
          ok = c_->peek() == '"' ? read_string_id(&ev.cat) : c_->skip_value_fast();
          break;
        case EventField::kDuration:
          ok = read_time(&ev.dur, &ev.has_dur, "dur");
          break;
        case EventField::kEventName:
          if (c_->peek() == '"') {
            ok = read_string_id(&ev.name);
          } else {
            const char* at = c_->pos();
            ok = c_->skip_value_fast();
            if (ok) b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at), "\"name\" is not a string");
          }
          break;
        case EventField::kArgsObject:
          ok = parse_args(&ev);
          break;
        case EventField::kOther:
          ok = c_->skip_value_fast();
          break;
      }
      if (!ok) return false;
      if (c_->eat(',')) continue;
      if (!c_->expect('}', "',' or '}' in an event")) return false;
      break;
    }
  }
  const std::int64_t src = c_->offset(start);
  if (!has_ph) {
    b_->diagnostics.add(DiagnosticCode::kMissingField, src, "event without \"ph\", skipped");
    return true;
  }
  sink_->commit(ev, src);
  return true;
}

}  // namespace

ChunkEnd parse_event_elements(JsonCursor* c, const char* stop_at, const ParseContext& ctx, EventBatch* batch,
                              bool after_element) {
  EventSink sink(ctx, batch);
  Parser parser(c, &sink, ctx.strict);
  ChunkEnd end;
  // Bytes indexed at a time by the token walker: grows while it runs clean,
  // shrinks when events keep falling back (a file full of raw quotes must
  // not index far ahead for every event).
  std::size_t window = 16 << 10;
  bool slow = false;  // the next element goes to the cursor parser
  for (;;) {
    if (after_element) {
      after_element = false;  // the element before the cursor is complete
    } else {
      c->skip_ws();
      const char* elem = c->pos();
      if (elem >= c->end()) {
        c->fail(elem, "an event object or ']'");
        end.failed = true;
        end.pos = elem;
        return end;
      }
      if (*elem == ']') {
        c->set_pos(elem + 1);
        end.array_closed = true;
        end.pos = elem + 1;
        return end;
      }
      if (elem >= stop_at) {
        end.pos = elem;
        return end;
      }
      if (*elem == '{' && !slow && ctx.token_walker) {
        const FastResult r = parse_events_fast(elem, c->end(), c->base(), stop_at, window, &sink);
        window = r.events > 16 ? std::min<std::size_t>(window * 2, 1 << 20) : std::max<std::size_t>(window / 4, 512);
        switch (r.status) {
          case FastStatus::kStop:
            c->set_pos(r.pos);
            end.pos = r.pos;
            return end;
          case FastStatus::kArrayEnd:
            c->set_pos(r.pos);
            end.array_closed = true;
            end.pos = r.pos;
            return end;
          case FastStatus::kSeparator:
            c->set_pos(r.pos);
            break;  // to the separator check below
          case FastStatus::kFallback:
            // An element the walker could not take: the cursor parses it next.
            c->set_pos(r.pos);
            slow = true;
            continue;
        }
      } else {
        slow = false;
        if (*elem == '{') {
          if (!parser.parse_event()) {
            end.failed = true;
            end.pos = c->pos();
            end.element = elem;
            return end;
          }
        } else {
          if (!c->skip_value()) {
            end.failed = true;
            end.pos = c->pos();
            end.element = elem;
            return end;
          }
          batch->diagnostics.add(DiagnosticCode::kNotAnEvent, c->offset(elem),
                                 "element of the event array is not an object, skipped");
        }
      }
    }
    if (c->eat(',')) continue;
    if (c->peek() == ']') continue;
    c->fail_here("',' or ']' after an event");
    end.failed = true;
    end.pos = c->pos();
    end.element = c->pos();
    end.after_element = true;
    return end;
  }
}

}  // namespace tprof::internal
