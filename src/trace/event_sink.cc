#include "src/trace/event_sink.h"

#include <string>

#include "src/base/hash.h"
#include "src/trace/json_cursor.h"
#include "src/trace/kineto_keys.h"

namespace tprof::internal {

namespace {

constexpr std::uint32_t kEmptySlot = 0xffffffffu;

// Every instant the model keeps (ts, and ts + dur) lies strictly within
// ±2^62 ns (±146 years): the difference of any two instants, the span of a
// whole trace included, then fits int64. Sums over many events still
// saturate (src/base/saturate.h).
constexpr std::int64_t kMaxTime = std::int64_t{1} << 62;

std::uint64_t hash_id(const TraceId& id) {
  return id.is_str ? (0x9e3779b97f4a7c15ull ^ id.str) * 0xff51afd7ed558ccdull
                   : static_cast<std::uint64_t>(id.num) * 0xc4ceb9fe1a85ec53ull;
}

std::uint64_t hash_key(const LocalLaneKey& k) { return mix64(hash_id(k.pid) ^ 0x51ed27, hash_id(k.tid) + 1); }

}  // namespace

EventSink::EventSink(const ParseContext& ctx, EventBatch* batch) : b_(batch) {
  memory_name_ = b_->strings.intern(kineto::kMemoryName);
  oom_name_ = b_->strings.intern(kineto::kOutOfMemoryName);
  if (ctx.legacy_array) {
    default_cat_ = b_->strings.intern("cpu_op");
    // torch.autograd.profiler(use_cuda=True) before Kineto writes each op
    // twice: its host call under "CPU functions" and, under "CUDA
    // functions", the span between the CUDA events it recorded on the
    // stream at the op's entry and exit, nested as the ops are. That span
    // is no kernel: it holds the op's kernels and any wait between them.
    cuda_functions_ = b_->strings.intern("CUDA functions");
    gpu_annotation_cat_ = b_->strings.intern("gpu_user_annotation");
  }
  if (b_->lane_slots.empty()) b_->lane_slots.assign(64, kEmptySlot);
}

EventKind EventSink::kind_of(StrId cat) {
  if (cat >= cat_kind_.size()) cat_kind_.resize(cat + 1, -1);
  if (cat_kind_[cat] < 0) {
    EventKind k = kind_from_category(b_->strings.str(cat));
    cat_kind_[cat] = static_cast<std::int8_t>(k);
  }
  return static_cast<EventKind>(cat_kind_[cat]);
}

void EventSink::commit(PendingEvent& ev, std::int64_t src) {
  Phase phase;
  bool begin = false;
  switch (ev.ph) {
    case 'X':
      phase = Phase::kComplete;
      if (ev.cat == default_cat_ && cuda_functions_ != kEmptyStr && ev.pid.is_str && ev.pid.str == cuda_functions_) {
        ev.cat = gpu_annotation_cat_;
      }
      break;
    case 'B': phase = Phase::kComplete; begin = true; break;
    case 'E': {
      if (!ev.has_ts) {
        b_->diagnostics.add(DiagnosticCode::kMissingField, src, "\"E\" event without \"ts\", skipped");
        return;
      }
      if (ev.ts <= -kMaxTime || ev.ts >= kMaxTime) {
        b_->diagnostics.add(DiagnosticCode::kOutOfRange, src, "\"ts\" beyond ±2^62 ns (146 years), event skipped");
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
    case 'M':
      // A metadata record names a process or thread; the legacy array's
      // default category is its ops' (Kineto's first traces, a bare array
      // with "Operator" ops, hold process_name records without "cat").
      phase = Phase::kMetadata;
      if (ev.cat == default_cat_) ev.cat = kEmptyStr;
      break;
    default:
      b_->diagnostics.add(DiagnosticCode::kUnknownPhase, src,
                          std::string("unsupported \"ph\" '") + (ev.ph >= 0x20 && ev.ph < 0x7f ? ev.ph : '?') +
                              "', event skipped");
      return;
  }
  // Within range, ts + dur cannot overflow; only a complete event keeps its dur.
  if ((ev.has_ts && (ev.ts <= -kMaxTime || ev.ts >= kMaxTime)) || (ev.has_dur && ev.dur >= kMaxTime) ||
      (ev.has_ts && ev.has_dur && ev.ph == 'X' && ev.dur > 0 && ev.ts + ev.dur >= kMaxTime)) {
    b_->diagnostics.add(DiagnosticCode::kOutOfRange, src, "\"ts\"/\"dur\" beyond ±2^62 ns (146 years), event skipped");
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
  e.args_ref.push_back(ev.args_len == 0 ? 0 : args_ref::make(ev.args_off, ev.args_len, ev.args_owned));
  e.src_offset.push_back(static_cast<std::uint64_t>(src));
  if (kind == EventKind::kMemory) {
    MemoryRecord m;
    m.event = index;
    m.bytes = ev.bytes;
    m.total_allocated = ev.total_allocated;
    m.total_reserved = ev.total_reserved;
    m.has_total_allocated = ev.has_total_allocated;
    m.has_total_reserved = ev.has_total_reserved;
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

void EventSink::repair_args(std::string_view args, const JsonProblem& problem, std::int64_t problem_offset,
                            PendingEvent* ev) {
  JsonCursor c(args.data(), args.data() + args.size(), args.data());
  repaired_.clear();
  bool ok = false;
  {
    JsonWriter w(&repaired_);
    ok = copy_json_value(&c, &w, &scratch_) && c.at_end();
  }
  const std::string what = describe_json_problem(problem, args.data() + args.size(), "the end of \"args\"");
  if (ok && !repaired_.empty()) {
    ev->args_off = b_->args_store.size();
    ev->args_len = repaired_.size();
    ev->args_owned = true;
    b_->args_store += repaired_;
    b_->diagnostics.add(DiagnosticCode::kMalformedArgs, problem_offset,
                        "\"args\" is not strict JSON (" + what +
                            "); stored repaired: strings re-escaped, NaN and Infinity as null");
  } else {
    ev->args_off = ev->args_len = 0;
    ev->args_owned = false;
    b_->diagnostics.add(DiagnosticCode::kMalformedArgs, problem_offset,
                        "\"args\" is not JSON (" + what + "); dropped, the event kept");
  }
}

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
  for (const kineto::CategoryKind& e : kineto::kCategories) {
    if (e.cat == cat) return e.kind;
  }
  return EventKind::kOther;
}

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

}  // namespace tprof::internal
