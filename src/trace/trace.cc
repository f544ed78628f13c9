#include "tprof/trace.h"

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>

#include "src/base/check.h"
#include "src/base/file.h"
#include "src/trace/json_cursor.h"

namespace tprof {

namespace {

template <class T>
void reserve_column(std::vector<T>* column, std::size_t n, bool prefault) {
  column->reserve(n);
  if (prefault) internal::prefault_for_writing(column->data(), n * sizeof(T));
}

}  // namespace

void EventColumns::reserve(std::size_t n, bool prefault) {
  reserve_column(&ts_ns, n, prefault);
  reserve_column(&dur_ns, n, prefault);
  reserve_column(&name, n, prefault);
  reserve_column(&cat, n, prefault);
  reserve_column(&lane, n, prefault);
  reserve_column(&phase, n, prefault);
  reserve_column(&kind, n, prefault);
  reserve_column(&flags, n, prefault);
  reserve_column(&external_id, n, prefault);
  reserve_column(&correlation, n, prefault);
  reserve_column(&flow_id, n, prefault);
  reserve_column(&args_ref, n, prefault);
  reserve_column(&src_offset, n, prefault);
}

void EventColumns::resize(std::size_t n) {
  ts_ns.resize(n);
  dur_ns.resize(n);
  name.resize(n);
  cat.resize(n);
  lane.resize(n);
  phase.resize(n, Phase::kComplete);
  kind.resize(n, EventKind::kOther);
  flags.resize(n);
  external_id.resize(n, -1);
  correlation.resize(n, -1);
  flow_id.resize(n, -1);
  args_ref.resize(n);
  src_offset.resize(n);
}

void EventColumns::copy_row(std::size_t to, const EventColumns& src, std::size_t from) {
  ts_ns[to] = src.ts_ns[from];
  dur_ns[to] = src.dur_ns[from];
  name[to] = src.name[from];
  cat[to] = src.cat[from];
  lane[to] = src.lane[from];
  phase[to] = src.phase[from];
  kind[to] = src.kind[from];
  flags[to] = src.flags[from];
  external_id[to] = src.external_id[from];
  correlation[to] = src.correlation[from];
  flow_id[to] = src.flow_id[from];
  args_ref[to] = src.args_ref[from];
  src_offset[to] = src.src_offset[from];
}

std::string_view TraceMetadata::top_level_json(std::string_view key) const {
  for (const auto& [k, v] : top_level) {
    if (k == key) return v;
  }
  return {};
}

std::string_view diagnostic_code_name(DiagnosticCode code) {
  switch (code) {
    case DiagnosticCode::kTruncated: return "truncated";
    case DiagnosticCode::kUnknownPhase: return "unknown_phase";
    case DiagnosticCode::kNegativeDuration: return "negative_duration";
    case DiagnosticCode::kUnmatchedBegin: return "unmatched_begin";
    case DiagnosticCode::kUnmatchedEnd: return "unmatched_end";
    case DiagnosticCode::kUnescapedString: return "unescaped_string";
    case DiagnosticCode::kMissingField: return "missing_field";
    case DiagnosticCode::kBadFieldType: return "bad_field_type";
    case DiagnosticCode::kOutOfRange: return "out_of_range";
    case DiagnosticCode::kNotAnEvent: return "not_an_event";
    case DiagnosticCode::kOverlappingKernels: return "overlapping_kernels";
    case DiagnosticCode::kUnmatchedFlow: return "unmatched_flow";
    case DiagnosticCode::kDroppedEvents: return "dropped_events";
    case DiagnosticCode::kTrailingData: return "trailing_data";
    case DiagnosticCode::kActivityUnavailable: return "activity_unavailable";
    case DiagnosticCode::kUnfinishedScopes: return "unfinished_scopes";
    case DiagnosticCode::kSkippedBytes: return "skipped_bytes";
    case DiagnosticCode::kMalformedArgs: return "malformed_args";
    case DiagnosticCode::kMalformedValue: return "malformed_value";
    case DiagnosticCode::kCount_: break;
  }
  return "unknown";
}

Severity diagnostic_severity(DiagnosticCode code) {
  switch (code) {
    case DiagnosticCode::kTruncated:
    case DiagnosticCode::kDroppedEvents:
    case DiagnosticCode::kSkippedBytes:
    case DiagnosticCode::kOutOfRange:
      return Severity::kError;
    case DiagnosticCode::kUnescapedString:
    case DiagnosticCode::kUnmatchedFlow:
    case DiagnosticCode::kOverlappingKernels:
      return Severity::kInfo;
    default:
      return Severity::kWarning;
  }
}

void Diagnostics::add(DiagnosticCode code, std::int64_t byte_offset, std::string message, std::uint32_t event) {
  auto& n = counts_[static_cast<int>(code)];
  if (n < kKeepPerCode) {
    items_.push_back(Diagnostic{code, diagnostic_severity(code), event, byte_offset, std::move(message)});
  }
  ++n;
}

void Diagnostics::merge(const Diagnostics& other, std::uint32_t event_shift) {
  std::array<std::uint64_t, static_cast<int>(DiagnosticCode::kCount_)> kept{};
  for (const Diagnostic& d : other.items_) {
    auto& n = counts_[static_cast<int>(d.code)];
    if (n + kept[static_cast<int>(d.code)] < kKeepPerCode) {
      items_.push_back(d);
      if (d.event != kNoIndex) items_.back().event += event_shift;
      ++kept[static_cast<int>(d.code)];
    }
  }
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
}

std::uint64_t Diagnostics::total() const {
  std::uint64_t t = 0;
  for (auto n : counts_) t += n;
  return t;
}

namespace internal {

// Keeps the mapped part of a memory-mapped source small while args are read
// lazily: the kernel maps a whole page-cache folio (up to 2 MiB) on each
// fault, so a few thousand scattered reads would map most of a 1 GB file.
// Reads are counted in 2 MiB windows; when more than kMaxWindows distinct
// windows have been touched, all of them are released.
class SourcePager {
 public:
  explicit SourcePager(std::function<void(std::size_t, std::size_t)> release) : release_(std::move(release)) {}

  void touch(std::size_t offset, std::size_t len) {
    const std::size_t first = offset / kWindow, last = (offset + std::max<std::size_t>(len, 1) - 1) / kWindow;
    std::lock_guard<std::mutex> lock(mu_);
    for (std::size_t w = first; w <= last; ++w) {
      if (std::find(windows_.begin(), windows_.begin() + static_cast<std::ptrdiff_t>(count_), w) !=
          windows_.begin() + static_cast<std::ptrdiff_t>(count_)) {
        continue;
      }
      if (count_ == kMaxWindows) {
        for (std::size_t i = 0; i < count_; ++i) release_(windows_[i] * kWindow, kWindow);
        count_ = 0;
      }
      windows_[count_++] = w;
    }
  }

 private:
  static constexpr std::size_t kWindow = std::size_t{2} << 20;
  static constexpr std::size_t kMaxWindows = 4;  // 8 MiB
  std::function<void(std::size_t, std::size_t)> release_;
  std::mutex mu_;
  std::array<std::size_t, kMaxWindows> windows_{};
  std::size_t count_ = 0;
};

}  // namespace internal

Trace::Trace() = default;
Trace::Trace(Trace&&) noexcept = default;
Trace& Trace::operator=(Trace&&) noexcept = default;
Trace::~Trace() = default;

std::string_view Trace::args_json(std::uint32_t e) const {
  const std::uint64_t ref = events.args_ref[e];
  if (ref == 0) return {};
  const bool owned = (ref & args_ref::kOwnedBit) != 0;
  const std::uint64_t offset = (ref & ~args_ref::kOwnedBit) >> args_ref::kLenBits;
  std::uint64_t len = ref & args_ref::kLenMask;
  const std::string_view store = owned ? std::string_view(owned_args_) : source_;
  if (offset >= store.size()) return {};
  if (len == args_ref::kLenMask) {
    // Longer than the length field holds: measure it again.
    internal::JsonCursor c(store.data() + offset, store.data() + store.size(), store.data());
    if (!c.skip_value()) return {};
    len = static_cast<std::uint64_t>(c.pos() - (store.data() + offset));
  }
  if (!owned && pager_) pager_->touch(offset, len);
  return store.substr(offset, len);
}

void Trace::set_args_json(std::uint32_t e, std::string_view json) {
  if (json.empty()) {
    events.args_ref[e] = 0;
    return;
  }
  const std::uint64_t offset = owned_args_.size();
  owned_args_.append(json);
  events.args_ref[e] = args_ref::make(offset, json.size(), true);
}

void Trace::attach_source(std::shared_ptr<const void> owner, std::string_view bytes,
                          std::function<void(std::size_t, std::size_t)> release_pages) {
  source_owner_ = std::move(owner);
  source_ = bytes;
  pager_.reset();
  if (release_pages) pager_ = std::make_unique<internal::SourcePager>(std::move(release_pages));
}

std::uint32_t Trace::lane_for(const TraceId& pid, const TraceId& tid, LaneKind kind) {
  for (std::uint32_t i = 0; i < lanes.size(); ++i) {
    if (lanes[i].pid == pid && lanes[i].tid == tid) return i;
  }
  Lane lane;
  lane.pid = pid;
  lane.tid = tid;
  lane.kind = kind;
  lanes.push_back(lane);
  return static_cast<std::uint32_t>(lanes.size() - 1);
}

Process& Trace::process_for(const TraceId& pid) {
  for (Process& p : processes) {
    if (p.pid == pid) return p;
  }
  processes.push_back(Process{pid, kEmptyStr, kEmptyStr, std::nullopt});
  return processes.back();
}

std::int64_t Trace::start_ns() const {
  std::int64_t lo = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events.phase[i] != Phase::kMetadata) lo = std::min(lo, events.ts_ns[i]);
  }
  return lo == std::numeric_limits<std::int64_t>::max() ? 0 : lo;
}

std::int64_t Trace::end_ns() const {
  std::int64_t hi = std::numeric_limits<std::int64_t>::min();
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events.phase[i] != Phase::kMetadata) hi = std::max(hi, events.ts_ns[i] + events.dur_ns[i]);
  }
  return hi == std::numeric_limits<std::int64_t>::min() ? 0 : hi;
}

}  // namespace tprof
