// tprof/trace.h — the one data model: a torch.profiler / Kineto trace as columns.
//
// Every part of tprof reads and writes this model: the reader fills it from a
// file, the capture library fills it in-process, the analyzers and the writer
// read it. Times are int64 nanoseconds (absolute: epoch ns for Kineto traces,
// ns since the cycle start for torch's legacy export). Strings are interned
// once; events refer to them by 32-bit ids.
//
//   tprof::Result<tprof::Trace> t = tprof::read_trace("trace.json");
//   for (std::uint32_t e = 0; e < t->events.size(); ++e)
//     if (t->events.kind[e] == tprof::EventKind::kKernel)
//       total_ns += t->events.dur_ns[e];
//
// A Trace is move-only. Its views (string_views from `strings`, `args_json`)
// stay valid as long as the Trace lives and is not modified.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tprof/string_pool.h"
#include "tprof/internal/visibility.h"

TPROF_API_BEGIN
namespace tprof {

inline constexpr std::uint32_t kNoIndex = 0xffffffffu;

// Trace Event Format phases tprof keeps. B/E pairs are joined into kComplete
// at load; unknown phases are dropped with a diagnostic.
enum class Phase : std::uint8_t {
  kComplete = 'X',
  kInstant = 'i',
  kCounter = 'C',
  kFlowStart = 's',
  kFlowStep = 't',
  kFlowEnd = 'f',
  kMetadata = 'M',
};

// What an event is, derived from its category (old and new Kineto names) and
// phase. Analyses switch on this instead of comparing category strings.
enum class EventKind : std::uint8_t {
  kOther = 0,
  kCpuOp,              // cpu_op, Operator (2021)
  kUserAnnotation,     // user_annotation: record_function scopes, ProfilerStep#N
  kPythonFunction,     // python_function
  kCudaRuntime,        // cuda_runtime, Runtime (2021), mtia_runtime
  kCudaDriver,         // cuda_driver
  kKernel,             // kernel, Kernel (2021), mtia_ccp_events (MTIA device activity)
  kGpuMemcpy,          // gpu_memcpy, Memcpy (2021)
  kGpuMemset,          // gpu_memset, Memset (2021)
  kGpuUserAnnotation,  // gpu_user_annotation
  kCudaSync,           // cuda_sync
  kMemory,             // the "[memory]" instant (allocation / free)
  kOutOfMemory,        // the "[OutOfMemory]" instant
  kTraceSpan,          // the profiler's own "Trace" span
  kFlow,               // s/t/f events (ac2g, async_cpu_to_gpu, fwdbwd, ...)
  kMetadata,           // M events
  kOverhead,           // overhead: the GPU tracer's own work (CUPTI buffer flush, ...)
  kProfilerRange,      // cuda_profiler_range: CUPTI range profiler, hardware counters per kernel or range
  kCount_,
};

// True for the work a device stream runs: kernels, copies and fills, the
// activities with a launch call and a correlation id. Annotations and ranges
// on device lanes are not work (is_device_kind counts them too).
constexpr bool is_device_work(EventKind k) {
  return k == EventKind::kKernel || k == EventKind::kGpuMemcpy || k == EventKind::kGpuMemset;
}

// True for activities that run on the device (they get GPU lanes). A
// range-profiler range is device work too (torch counts it as CUDA time),
// though its times are not measured (docs/diagnose.md, "Range profiler").
constexpr bool is_device_kind(EventKind k) {
  return is_device_work(k) || k == EventKind::kGpuUserAnnotation || k == EventKind::kProfilerRange;
}

// Event flags (EventColumns::flags).
enum EventFlag : std::uint8_t {
  kFlagInstantGlobal = 1 << 0,   // "s": "g"
  kFlagInstantProcess = 1 << 1,  // "s": "p"
  kFlagInstantThread = 1 << 2,   // "s": "t"
  kFlagBindEnclosing = 1 << 3,   // "bp": "e"
  kFlagFromBeginEnd = 1 << 4,    // joined from a B/E pair
};

// Struct-of-arrays event table in file order (capture: recording order).
struct EventColumns {
  std::vector<std::int64_t> ts_ns;
  std::vector<std::int64_t> dur_ns;       // 0 for instants, flows and metadata
  std::vector<StrId> name;
  std::vector<StrId> cat;                 // kEmptyStr when absent; "cpu_op" for torch's legacy array
  std::vector<std::uint32_t> lane;        // index into Trace::lanes
  std::vector<Phase> phase;
  std::vector<EventKind> kind;
  std::vector<std::uint8_t> flags;        // EventFlag bits
  std::vector<std::int64_t> external_id;  // args "External id", -1 when absent
  std::vector<std::int64_t> correlation;  // args "correlation", -1 when absent
  std::vector<std::int64_t> flow_id;      // "id" of flow events, -1 otherwise
  std::vector<std::uint64_t> args_ref;    // see Trace::args_json; 0 = no args
  std::vector<std::uint64_t> src_offset;  // byte offset in the source file (0 when built in memory)

  std::size_t size() const { return ts_ns.size(); }
  // prefault: make the reserved rows resident now (one call per column, not
  // a page fault per 4 KiB as they are written; for rows about to be filled).
  void reserve(std::size_t n, bool prefault = false);
  void resize(std::size_t n);
  // Copies every column of row `from` of `src` into row `to` (< size()).
  void copy_row(std::size_t to, const EventColumns& src, std::size_t from);
};

// An identifier as written in the file: pid and tid are integers or strings.
struct TraceId {
  std::int64_t num = 0;
  StrId str = kEmptyStr;
  bool is_str = false;
  // Spelled out (not = default) so this header compiles as C++17.
  friend bool operator==(const TraceId& a, const TraceId& b) {
    return a.num == b.num && a.str == b.str && a.is_str == b.is_str;
  }
  friend bool operator!=(const TraceId& a, const TraceId& b) { return !(a == b); }
};

enum class LaneKind : std::uint8_t {
  kCpu = 0,    // a host thread: (pid, tid)
  kGpu = 1,    // a device stream: (device, stream)
  kOther = 2,  // profiler spans, global markers, lanes holding only metadata
};

// One timeline row. CPU lanes are keyed by (pid, tid), GPU lanes by
// (device, stream) as Kineto writes them (pid = device, tid = stream).
struct Lane {
  TraceId pid;
  TraceId tid;
  LaneKind kind = LaneKind::kOther;
  std::int32_t device = -1;  // GPU lanes
  std::int64_t stream = -1;  // GPU lanes
  StrId thread_name = kEmptyStr;  // from "thread_name" metadata
  std::optional<std::int64_t> sort_index;
};

// Per process metadata ("process_name", "process_labels", "process_sort_index").
struct Process {
  TraceId pid;
  StrId name = kEmptyStr;
  StrId labels = kEmptyStr;
  std::optional<std::int64_t> sort_index;
};

// A "[memory]" instant's payload (torch's allocation record).
struct MemoryRecord {
  std::uint32_t event = kNoIndex;
  std::int64_t bytes = 0;             // negative on free
  std::int64_t total_allocated = 0;
  std::int64_t total_reserved = 0;
  std::uint64_t addr = 0;
  std::int16_t device_type = 0;       // c10::DeviceType: 0 CPU, 1 CUDA, ...
  std::int16_t device_id = -1;
  // Whether the record carries "Total Allocated" / "Total Reserved" (2021
  // traces carry neither: the totals above are then 0, not measured).
  bool has_total_allocated = false;
  bool has_total_reserved = false;
};

// Which program wrote the trace; decides torch-compatible time semantics.
enum class Producer : std::uint8_t {
  kUnknown = 0,
  kTorchLegacy,  // torch's legacy JSON array (export without Kineto): integer µs
  kKineto2022,   // torch ≤ 2.0 + libkineto (args "Profiler Event Index"/"Trace name")
  kKineto,       // later Kineto: ns-precision µs
  kTprof,        // tprof's own capture
};

enum class TraceFormat : std::uint8_t { kKinetoObject = 0, kLegacyArray = 1 };

struct TraceMetadata {
  TraceFormat format = TraceFormat::kKinetoObject;
  Producer producer = Producer::kUnknown;
  bool gzip = false;                         // the source was .gz
  std::optional<std::int64_t> base_time_ns;  // "baseTimeNanoseconds": ts in the file is relative to it
  // Every top-level key except "traceEvents", in file order, with its raw JSON value.
  std::vector<std::pair<std::string, std::string>> top_level;
  std::uint64_t dropped_events = 0;  // events the recorder lost (capture)
  std::uint64_t dropped_shapes = 0;  // kept scopes whose input shapes were lost (capture)
  std::uint64_t unfinished_scopes = 0;  // scopes still open when the window ended (capture)
  // The range whose occurrences are this trace's steps, instead of its
  // ProfilerStep#N events (the CLI's --step-range NAME). Not read from the
  // file nor written to one: how the analyses delimit steps
  // (find_step_events, tprof/steps.h). Empty: ProfilerStep#N, or a
  // repeated range found in the trace when it has none.
  std::string step_range;

  // Returns the raw JSON of a top-level key ("deviceProperties", "distributedInfo", ...), or "".
  std::string_view top_level_json(std::string_view key) const;
};

enum class Severity : std::uint8_t { kInfo = 0, kWarning = 1, kError = 2 };

// Odd data found while loading or checking a trace. Never fatal.
enum class DiagnosticCode : std::uint8_t {
  kTruncated = 0,       // the file ends early; everything before the cut is loaded
  kUnknownPhase,        // "ph" we do not model; event skipped
  kNegativeDuration,    // "dur" < 0; kept with dur 0
  kUnmatchedBegin,      // B without E; dropped
  kUnmatchedEnd,        // E without B; dropped
  kUnescapedString,     // a raw quote/backslash inside a string (pre-2023 writers); read leniently
  kMissingField,        // an event without "ph" or "ts"; skipped
  kBadFieldType,        // a field of the wrong JSON type; ignored
  kOutOfRange,          // a number that does not fit; event skipped
  kNotAnEvent,          // a traceEvents element that is not an object
  kOverlappingKernels,  // device activities overlapping on one stream; kept
  kUnmatchedFlow,       // a flow start without end or the reverse
  kDroppedEvents,       // the recorder dropped events (capture)
  kTrailingData,        // bytes after the top-level JSON value
  kActivityUnavailable, // capture: a requested activity (CUDA) could not be recorded
  kUnfinishedScopes,    // capture: scopes still open when the window ended (left out of the trace)
  kSkippedBytes,        // a syntax error inside traceEvents: bytes skipped to the next event (salvage)
  kMalformedArgs,       // an event's "args" object that is not strict JSON: stored repaired, or dropped
  kMalformedValue,      // a top-level value (not traceEvents) that is not strict JSON: stored repaired, or as null
  kCount_,
};

std::string_view diagnostic_code_name(DiagnosticCode code);
Severity diagnostic_severity(DiagnosticCode code);

struct Diagnostic {
  DiagnosticCode code = DiagnosticCode::kTruncated;
  Severity severity = Severity::kWarning;
  std::uint32_t event = kNoIndex;  // index into events, when one applies
  std::int64_t byte_offset = -1;   // in the source file, when one applies
  std::string message;
};

// Diagnostics, capped per code (the count keeps the true total).
class Diagnostics {
 public:
  static constexpr std::size_t kKeepPerCode = 16;

  void add(DiagnosticCode code, std::int64_t byte_offset, std::string message,
           std::uint32_t event = kNoIndex);
  // Adds another set (a chunk's), shifting its event indices by `event_shift`.
  void merge(const Diagnostics& other, std::uint32_t event_shift = 0);
  const std::vector<Diagnostic>& items() const { return items_; }
  std::uint64_t count(DiagnosticCode code) const { return counts_[static_cast<std::size_t>(code)]; }
  std::uint64_t total() const;
  bool empty() const { return total() == 0; }

 private:
  std::vector<Diagnostic> items_;
  std::array<std::uint64_t, static_cast<int>(DiagnosticCode::kCount_)> counts_{};
};

namespace internal {
class SourcePager;
}  // namespace internal

class Trace {
 public:
  Trace();
  Trace(Trace&&) noexcept;
  Trace& operator=(Trace&&) noexcept;
  ~Trace();

  EventColumns events;
  std::vector<Lane> lanes;
  std::vector<Process> processes;
  std::vector<MemoryRecord> memory;  // in event order
  StringPool strings;
  TraceMetadata meta;
  Diagnostics diagnostics;

  std::string_view str(StrId id) const { return strings.str(id); }
  std::string_view name(std::uint32_t e) const { return strings.str(events.name[e]); }
  std::string_view cat(std::uint32_t e) const { return strings.str(events.cat[e]); }

  // Returns the raw JSON text of event e's "args" object ("" when it has none).
  // The view points into the source bytes (or the trace's own store).
  std::string_view args_json(std::uint32_t e) const;

  // Stores `json` (an object's text) as event e's args.
  void set_args_json(std::uint32_t e, std::string_view json);

  // Lets args refer to `bytes` (kept alive by `owner`): the reader's source
  // buffer. For a memory-mapped file, `release_pages(offset, len)` drops
  // the mapped pages of a range; args_json then keeps at most 8 MiB of the
  // file mapped (pages dropped are read again if touched, so earlier views
  // stay valid). Without it, lazy args reads over a large mapped file would
  // bring most of it back into memory.
  void attach_source(std::shared_ptr<const void> owner, std::string_view bytes,
                     std::function<void(std::size_t offset, std::size_t len)> release_pages = {});
  std::string_view source() const { return source_; }

  // Returns the lane index for (pid, tid), adding a lane of `kind` when new.
  std::uint32_t lane_for(const TraceId& pid, const TraceId& tid, LaneKind kind);
  // Returns the process entry for pid, adding one when new.
  Process& process_for(const TraceId& pid);

  std::int64_t end_ns() const;    // max(ts + dur) over non-metadata events, 0 when empty
  std::int64_t start_ns() const;  // min ts over non-metadata events, 0 when empty

 private:
  std::shared_ptr<const void> source_owner_;
  std::string_view source_;
  std::unique_ptr<internal::SourcePager> pager_;  // set for mapped sources
  std::string owned_args_;
};

// Args references: 0 = none; high bit set = offset into the trace's own store,
// otherwise offset into the source. The low 24 bits hold the length when it
// fits (lengths ≥ 2^24-1 keep the escape value and are measured on demand).
namespace args_ref {
inline constexpr std::uint64_t kOwnedBit = 1ull << 63;
inline constexpr int kLenBits = 24;
inline constexpr std::uint64_t kLenMask = (1ull << kLenBits) - 1;
constexpr std::uint64_t make(std::uint64_t offset, std::uint64_t len, bool owned) {
  return (owned ? kOwnedBit : 0) | (offset << kLenBits) | (len < kLenMask ? len : kLenMask);
}
}  // namespace args_ref

}  // namespace tprof
TPROF_API_END
