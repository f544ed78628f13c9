// Where an event is, in words a person can search for: ms since the trace's
// first event (the origin `tprof steps` and Perfetto use) and the "ts" as
// written in the file; kernel names through src/report/kernel_names.h.
// Used by the diagnose text, Markdown and JSON sinks alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/report/kernel_names.h"
#include "tprof/diagnose.h"
#include "tprof/trace.h"

namespace tprof::internal {

class EventClock {
 public:
  // origin_ns: the trace's first event (Trace::start_ns()); file_base_ns:
  // "baseTimeNanoseconds" (0 without it), which the reader added to every ts.
  EventClock(std::int64_t origin_ns, std::int64_t file_base_ns) : origin_ns_(origin_ns), base_ns_(file_base_ns) {}
  explicit EventClock(const Trace& t);
  // The trace's clock, from d.time_origin_ns where diagnose set it.
  EventClock(const Trace& t, const Diagnosis& d);

  // ns since the trace's first event.
  std::int64_t rel_ns(std::int64_t ts_ns) const { return ts_ns - origin_ns_; }
  // The file's ts in ns (µs × 1000): relative to baseTimeNanoseconds when the file has it.
  std::int64_t raw_ns(std::int64_t ts_ns) const { return ts_ns - base_ns_; }
  // "0.198 ms": rounded to the µs.
  std::string rel_ms_text(std::int64_t ts_ns) const;
  // "5117.500": µs with three decimals, as Kineto writes "ts".
  std::string raw_ts_text(std::int64_t ts_ns) const;
  // "at 0.198 ms (ts 5117.500)"
  std::string at_text(std::int64_t ts_ns) const;
  // "nvjet_sm90_... @ gpu 0 stream 7, at 0.198 ms (ts 5117.500), 2.3 us, step 1";
  // a kernel's name as `names` gives it (nullptr: the full name).
  std::string event_text(const EventRef& e, const KernelNames* names) const;

 private:
  std::int64_t origin_ns_ = 0;
  std::int64_t base_ns_ = 0;
};

// True for evidence keys holding a point in time ("ts_ns", "…_start_ns", "…_end_ns"),
// not a duration.
bool is_timestamp_key(std::string_view key);

// "0.1235": a real evidence value to four significant digits.
std::string real_text(double v);
// One evidence value in a line of text. Points in time print as where to
// find them (ms since the trace's start, the file's ts), never as durations;
// durations as "1.234 ms"; an event list one "\n      - " line per event (5 at most);
// kernel names as `names` gives them (nullptr: full names).
std::string evidence_value_text(const Evidence::Field& f, const EventClock& clock, const KernelNames* names);

}  // namespace tprof::internal
