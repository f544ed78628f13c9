#include "src/trace/event_parser.h"

#include <charconv>
#include <cstring>

#include "src/base/hash.h"

namespace tprof::internal {

namespace {

constexpr std::uint32_t kEmptySlot = 0xffffffffu;

std::uint64_t hash_id(const TraceId& id) {
  return id.is_str ? (0x9e3779b97f4a7c15ull ^ id.str) * 0xff51afd7ed558ccdull
                   : static_cast<std::uint64_t>(id.num) * 0xc4ceb9fe1a85ec53ull;
}

std::uint64_t hash_key(const LocalLaneKey& k) { return mix64(hash_id(k.pid) ^ 0x51ed27, hash_id(k.tid) + 1); }

constexpr bool key_is(std::string_view key, std::string_view want) { return key == want; }

// The event being parsed, before it is committed to the batch's columns.
struct Pending {
  std::int64_t ts = 0, dur = 0;
  bool has_ts = false, has_dur = false;
  char ph = 0;
  StrId name = kEmptyStr, cat = kEmptyStr;
  TraceId pid, tid;
  std::int64_t external_id = -1, correlation = -1, flow_id = -1;
  std::uint8_t flags = 0;
  std::uint64_t args_off = 0, args_len = 0;
  std::int64_t device = -1, stream = -1;
  // "[memory]" payload
  std::int64_t bytes = 0, total_allocated = 0, total_reserved = 0, device_type = 0, device_id = -1;
  std::uint64_t addr = 0;
  // M payload
  StrId meta_text = kEmptyStr;
  std::int64_t meta_number = 0;
  bool has_meta_number = false;
};

class Parser {
 public:
  Parser(JsonCursor* c, const ParseContext& ctx, EventBatch* b) : c_(c), ctx_(ctx), b_(b) {
    memory_name_ = b_->strings.intern("[memory]");
    if (ctx_.legacy_array) default_cat_ = b_->strings.intern("cpu_op");
    oom_name_ = b_->strings.intern("[OutOfMemory]");
    if (b_->lane_slots.empty()) b_->lane_slots.assign(64, kEmptySlot);
  }

  bool parse_event();

 private:
  bool read_string_id(StrId* out);
  bool read_id(TraceId* out);
  bool read_time(std::int64_t* out, bool* has, const char* field);
  // Reads any value; stores it in *out when it is an integer number.
  bool read_int_value(std::int64_t* out, bool* is_int = nullptr);
  bool read_uint_value(std::uint64_t* out);
  bool parse_args(Pending* ev);
  void commit(Pending& ev, std::int64_t src);
  EventKind kind_of(StrId cat);

  JsonCursor* c_;
  const ParseContext& ctx_;
  EventBatch* b_;
  StrId memory_name_ = 0, oom_name_ = 0;
  StrId default_cat_ = kEmptyStr;
  std::vector<std::int8_t> cat_kind_;  // by local cat id; -1 = not yet classified
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

// A canonical decimal integer ("0", "-12", no leading zeros) fits TraceId::num.
bool canonical_int(std::string_view s, std::int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  std::size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  if (s[i] == '0' && s.size() > i + 1) return false;
  for (std::size_t j = i; j < s.size(); ++j) {
    if (s[j] < '0' || s[j] > '9') return false;
  }
  return parse_int64(s, out);
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
    std::string_view num;
    if (!c_->read_number(&num)) return false;
    std::int64_t v = 0;
    if (parse_int64(num, &v)) {
      *out = TraceId{v, kEmptyStr, false};
    } else {
      *out = TraceId{0, b_->strings.intern(num), true};  // 1.5 or huge: keep the text
    }
    return true;
  }
  const char* at = c_->pos();
  if (!c_->skip_value()) return false;
  b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at), "pid/tid is neither a number nor a string");
  return true;
}

bool Parser::read_time(std::int64_t* out, bool* has, const char* field) {
  const char next = c_->peek();
  const char* at = c_->pos();
  std::string_view text;
  if (next == '"') {
    JsonCursor::Str s;
    if (!c_->read_string(&s)) return false;
    text = s.raw;
  } else if (next == '-' || (next >= '0' && next <= '9')) {
    if (!c_->read_number(&text)) return false;
  } else {
    if (!c_->skip_value()) return false;
    b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at),
                        std::string("\"") + field + "\" is not a number");
    return true;
  }
  if (parse_us_to_ns(text, out)) {
    *has = true;
  } else {
    b_->diagnostics.add(DiagnosticCode::kOutOfRange, c_->offset(at),
                        std::string("\"") + field + "\" is not a representable time in µs: " +
                            std::string(text.substr(0, 40)));
  }
  return true;
}

bool Parser::read_int_value(std::int64_t* out, bool* is_int) {
  const char next = c_->peek();
  if (next == '-' || (next >= '0' && next <= '9')) {
    std::string_view num;
    if (!c_->read_number(&num)) return false;
    const bool ok = parse_int64(num, out);
    if (is_int != nullptr) *is_int = ok;
    return true;
  }
  if (is_int != nullptr) *is_int = false;
  return c_->skip_value();
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
  return c_->skip_value();
}

bool Parser::parse_args(Pending* ev) {
  const char next = c_->peek();
  const char* start = c_->pos();
  if (next != '{') {
    if (!c_->skip_value()) return false;
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
      switch (k.size()) {
        case 4:
          if (key_is(k, "name")) {
            ok = c_->peek() == '"' ? read_string_id(&ev->meta_text) : c_->skip_value();
          } else if (key_is(k, "Addr")) {
            ok = read_uint_value(&ev->addr);
          } else {
            ok = c_->skip_value();
          }
          break;
        case 5:
          if (key_is(k, "Bytes")) {
            ok = read_int_value(&ev->bytes);
          } else {
            ok = c_->skip_value();
          }
          break;
        case 6:
          if (key_is(k, "device")) {
            ok = read_int_value(&ev->device);
          } else if (key_is(k, "stream")) {
            ok = read_int_value(&ev->stream);
          } else if (key_is(k, "labels")) {
            ok = c_->peek() == '"' ? read_string_id(&ev->meta_text) : c_->skip_value();
          } else {
            ok = c_->skip_value();
          }
          break;
        case 9:
          if (key_is(k, "Device Id")) {
            ok = read_int_value(&ev->device_id);
          } else {
            ok = c_->skip_value();
          }
          break;
        case 10:
          if (key_is(k, "sort_index")) {
            ok = read_int_value(&ev->meta_number, &is_int);
            ev->has_meta_number = is_int;
          } else if (key_is(k, "Trace name")) {
            b_->saw_kineto_2022_args = true;
            ok = c_->skip_value();
          } else {
            ok = c_->skip_value();
          }
          break;
        case 11:
          if (key_is(k, "External id") || key_is(k, "external id")) {
            ok = read_int_value(&ev->external_id);
          } else if (key_is(k, "correlation")) {
            ok = read_int_value(&ev->correlation);
          } else if (key_is(k, "Device Type")) {
            ok = read_int_value(&ev->device_type);
          } else {
            ok = c_->skip_value();
          }
          break;
        case 15:
          if (key_is(k, "Total Allocated")) {
            ok = read_int_value(&ev->total_allocated);
          } else {
            ok = c_->skip_value();
          }
          break;
        case 14:
          if (key_is(k, "Total Reserved")) {
            ok = read_int_value(&ev->total_reserved);
          } else {
            ok = c_->skip_value();
          }
          break;
        case 20:
          if (key_is(k, "Profiler Event Index")) b_->saw_kineto_2022_args = true;
          ok = c_->skip_value();
          break;
        default:
          ok = c_->skip_value();
      }
      if (!ok) return false;
      if (c_->eat(',')) continue;
      if (!c_->expect('}', "',' or '}' in \"args\"")) return false;
      break;
    }
  }
  ev->args_off = static_cast<std::uint64_t>(c_->offset(start));
  ev->args_len = static_cast<std::uint64_t>(c_->pos() - start);
  return true;
}

EventKind Parser::kind_of(StrId cat) {
  if (cat >= cat_kind_.size()) cat_kind_.resize(cat + 1, -1);
  if (cat_kind_[cat] < 0) {
    EventKind k = kind_from_category(b_->strings.str(cat));
    cat_kind_[cat] = static_cast<std::int8_t>(k);
  }
  return static_cast<EventKind>(cat_kind_[cat]);
}

bool Parser::parse_event() {
  const char* start = c_->pos();
  c_->eat('{');
  Pending ev;
  ev.cat = default_cat_;
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
      switch (k.size()) {
        case 1:
          if (k[0] == 's') {
            JsonCursor::Str s;
            if (c_->peek() == '"') {
              ok = c_->read_string(&s);
              if (ok && s.raw.size() == 1) {
                const char scope = s.raw[0];
                ev.flags |= static_cast<std::uint8_t>(scope == 'g'   ? kFlagInstantGlobal
                                                      : scope == 'p' ? kFlagInstantProcess
                                                      : scope == 't' ? kFlagInstantThread
                                                                     : 0);
              }
            } else {
              ok = c_->skip_value();
            }
          } else {
            ok = c_->skip_value();
          }
          break;
        case 2:
          if (k == "ph") {
            JsonCursor::Str s;
            const char* at = c_->pos();
            if (c_->peek() == '"') {
              ok = c_->read_string(&s);
              if (ok) {
                has_ph = true;
                ev.ph = s.raw.size() == 1 ? s.raw[0] : '?';
              }
            } else {
              ok = c_->skip_value();
              if (ok) {
                b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at), "\"ph\" is not a string");
              }
            }
          } else if (k == "ts") {
            ok = read_time(&ev.ts, &ev.has_ts, "ts");
          } else if (k == "id") {
            const char next = c_->peek();
            if (next == '"') {
              JsonCursor::Str s;
              ok = c_->read_string(&s);
              if (ok) {
                std::int64_t v = 0;
                if (canonical_int(s.raw, &v)) {
                  ev.flow_id = v;
                } else {
                  // Non-numeric ids are interned; the id column stores -(str + 2).
                  ev.flow_id = -static_cast<std::int64_t>(b_->strings.intern(s.raw)) - 2;
                }
              }
            } else {
              ok = read_int_value(&ev.flow_id);
            }
          } else if (k == "bp") {
            JsonCursor::Str s;
            if (c_->peek() == '"') {
              ok = c_->read_string(&s);
              if (ok && s.raw == "e") ev.flags |= kFlagBindEnclosing;
            } else {
              ok = c_->skip_value();
            }
          } else {
            ok = c_->skip_value();
          }
          break;
        case 3:
          if (k == "pid") {
            ok = read_id(&ev.pid);
          } else if (k == "tid") {
            ok = read_id(&ev.tid);
          } else if (k == "cat") {
            ok = c_->peek() == '"' ? read_string_id(&ev.cat) : c_->skip_value();
          } else if (k == "dur") {
            ok = read_time(&ev.dur, &ev.has_dur, "dur");
          } else {
            ok = c_->skip_value();
          }
          break;
        case 4:
          if (k == "name") {
            if (c_->peek() == '"') {
              ok = read_string_id(&ev.name);
            } else {
              const char* at = c_->pos();
              ok = c_->skip_value();
              if (ok) b_->diagnostics.add(DiagnosticCode::kBadFieldType, c_->offset(at), "\"name\" is not a string");
            }
          } else if (k == "args") {
            ok = parse_args(&ev);
          } else {
            ok = c_->skip_value();
          }
          break;
        default:
          ok = c_->skip_value();
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
  commit(ev, src);
  return true;
}

void Parser::commit(Pending& ev, std::int64_t src) {
  Phase phase;
  bool begin = false;
  switch (ev.ph) {
    case 'X': phase = Phase::kComplete; break;
    case 'B': phase = Phase::kComplete; begin = true; break;
    case 'E': {
      if (!ev.has_ts) {
        b_->diagnostics.add(DiagnosticCode::kMissingField, src, "\"E\" event without \"ts\", skipped");
        return;
      }
      b_->ends.push_back({static_cast<std::uint64_t>(src), b_->lane_index({ev.pid, ev.tid}), ev.ts});
      return;
    }
    case 'i':
    case 'I': phase = Phase::kInstant; break;
    case 'C': phase = Phase::kCounter; break;
    case 's': phase = Phase::kFlowStart; break;
    case 't': phase = Phase::kFlowStep; break;
    case 'f': phase = Phase::kFlowEnd; break;
    case 'M': phase = Phase::kMetadata; break;
    default:
      b_->diagnostics.add(DiagnosticCode::kUnknownPhase, src,
                          std::string("unsupported \"ph\" '") + (ev.ph >= 0x20 && ev.ph < 0x7f ? ev.ph : '?') +
                              "', event skipped");
      return;
  }
  if (!ev.has_ts && phase != Phase::kMetadata) {
    b_->diagnostics.add(DiagnosticCode::kMissingField, src, "event without a usable \"ts\", skipped");
    return;
  }
  const std::uint32_t index = static_cast<std::uint32_t>(b_->events.size());
  if (phase != Phase::kComplete) {
    ev.dur = 0;
  } else if (begin) {
    ev.dur = -1;  // the reader pairs it with its E event
    ev.flags |= kFlagFromBeginEnd;
    b_->saw_begin = true;
  } else if (!ev.has_dur) {
    b_->diagnostics.add(DiagnosticCode::kMissingField, src, "complete event without \"dur\", kept with dur 0",
                        index);
  } else if (ev.dur < 0) {
    b_->diagnostics.add(DiagnosticCode::kNegativeDuration, src, "negative \"dur\", kept with dur 0", index);
    ev.dur = 0;
  }
  EventKind kind;
  switch (phase) {
    case Phase::kMetadata: kind = EventKind::kMetadata; break;
    case Phase::kFlowStart:
    case Phase::kFlowStep:
    case Phase::kFlowEnd: kind = EventKind::kFlow; break;
    default:
      if (phase == Phase::kInstant && ev.name == memory_name_) {
        kind = EventKind::kMemory;
      } else if (phase == Phase::kInstant && ev.name == oom_name_) {
        kind = EventKind::kOutOfMemory;
      } else {
        kind = kind_of(ev.cat);
      }
  }
  const std::uint32_t lane = b_->lane_index({ev.pid, ev.tid});
  EventColumns& e = b_->events;
  e.ts_ns.push_back(ev.ts);
  e.dur_ns.push_back(ev.dur);
  e.name.push_back(ev.name);
  e.cat.push_back(ev.cat);
  e.lane.push_back(lane);
  e.phase.push_back(phase);
  e.kind.push_back(kind);
  e.flags.push_back(ev.flags);
  e.external_id.push_back(ev.external_id);
  e.correlation.push_back(ev.correlation);
  e.flow_id.push_back(ev.flow_id);
  e.args_ref.push_back(ev.args_len == 0 ? 0 : args_ref::make(ev.args_off, ev.args_len, false));
  e.src_offset.push_back(static_cast<std::uint64_t>(src));
  if (kind == EventKind::kMemory) {
    MemoryRecord m;
    m.event = index;
    m.bytes = ev.bytes;
    m.total_allocated = ev.total_allocated;
    m.total_reserved = ev.total_reserved;
    m.addr = ev.addr;
    m.device_type = static_cast<std::int16_t>(ev.device_type);
    m.device_id = static_cast<std::int16_t>(ev.device_id);
    b_->memory.push_back(m);
  } else if (kind == EventKind::kMetadata) {
    b_->meta.push_back({index, ev.meta_text, ev.meta_number, ev.has_meta_number});
  } else if ((is_device_kind(kind) || kind == EventKind::kCudaSync) && (ev.device >= 0 || ev.stream >= 0)) {
    b_->device_hints.push_back({lane, static_cast<std::int32_t>(ev.device), ev.stream});
  }
}

}  // namespace

std::uint32_t EventBatch::lane_index(const LocalLaneKey& key) {
  const std::uint64_t h = hash_key(key);
  std::size_t mask = lane_slots.size() - 1;
  std::size_t i = h & mask;
  for (;; i = (i + 1) & mask) {
    const std::uint32_t id = lane_slots[i];
    if (id == kEmptySlot) break;
    if (lanes[id] == key) return id;
  }
  const std::uint32_t id = static_cast<std::uint32_t>(lanes.size());
  lanes.push_back(key);
  lane_slots[i] = id;
  if (lanes.size() * 2 > lane_slots.size()) {
    std::vector<std::uint32_t> slots(lane_slots.size() * 2, kEmptySlot);
    mask = slots.size() - 1;
    for (std::uint32_t l = 0; l < lanes.size(); ++l) {
      std::size_t j = hash_key(lanes[l]) & mask;
      while (slots[j] != kEmptySlot) j = (j + 1) & mask;
      slots[j] = l;
    }
    lane_slots.swap(slots);
  }
  return id;
}

EventKind kind_from_category(std::string_view cat) {
  struct Entry {
    std::string_view cat;
    EventKind kind;
  };
  static constexpr Entry kTable[] = {
      {"cpu_op", EventKind::kCpuOp},
      {"Operator", EventKind::kCpuOp},
      {"user_annotation", EventKind::kUserAnnotation},
      {"python_function", EventKind::kPythonFunction},
      {"cuda_runtime", EventKind::kCudaRuntime},
      {"Runtime", EventKind::kCudaRuntime},
      {"cuda_driver", EventKind::kCudaDriver},
      {"kernel", EventKind::kKernel},
      {"Kernel", EventKind::kKernel},
      {"gpu_memcpy", EventKind::kGpuMemcpy},
      {"Memcpy", EventKind::kGpuMemcpy},
      {"gpu_memset", EventKind::kGpuMemset},
      {"Memset", EventKind::kGpuMemset},
      {"gpu_user_annotation", EventKind::kGpuUserAnnotation},
      {"cuda_sync", EventKind::kCudaSync},
      {"Trace", EventKind::kTraceSpan},
  };
  for (const Entry& e : kTable) {
    if (e.cat == cat) return e.kind;
  }
  return EventKind::kOther;
}

ChunkEnd parse_event_elements(JsonCursor* c, const char* stop_at, const ParseContext& ctx, EventBatch* batch) {
  Parser parser(c, ctx, batch);
  ChunkEnd end;
  for (;;) {
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
    if (*elem == '{') {
      if (!parser.parse_event()) {
        end.failed = true;
        end.pos = c->pos();
        return end;
      }
    } else {
      if (!c->skip_value()) {
        end.failed = true;
        end.pos = c->pos();
        return end;
      }
      batch->diagnostics.add(DiagnosticCode::kNotAnEvent, c->offset(elem),
                             "element of the event array is not an object, skipped");
    }
    if (c->eat(',')) continue;
    if (c->peek() == ']') continue;
    c->fail_here("',' or ']' after an event");
    end.failed = true;
    end.pos = c->pos();
    return end;
  }
}

}  // namespace tprof::internal
