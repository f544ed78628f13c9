#include "src/report/event_text.h"

#include <cstdio>

#include "src/analyze/diagnose_context.h"
#include "src/base/json_writer.h"
#include "src/report/py_format.h"

namespace tprof::internal {

EventClock::EventClock(const Trace& t) : origin_ns_(t.start_ns()), base_ns_(t.meta.base_time_ns.value_or(0)) {}

EventClock::EventClock(const Trace& t, const Diagnosis& d)
    : origin_ns_(d.time_origin_ns ? *d.time_origin_ns : t.start_ns()), base_ns_(t.meta.base_time_ns.value_or(0)) {}

std::string EventClock::rel_ms_text(std::int64_t ts_ns) const {
  // Round to the µs, then print µs as ms with the one exact formatter
  // (append_us prints n / 1000 with three decimals): no floating point, so
  // epoch-sized values stay exact.
  // Half away from zero, without adding 500 first: a time 2^63 ns after the
  // trace's start would overflow.
  const std::int64_t ns = rel_ns(ts_ns);
  const std::int64_t us = ns / 1000 + (ns % 1000 >= 500) - (ns % 1000 <= -500);
  std::string s;
  append_us(&s, us);
  return s + " ms";
}

std::string EventClock::raw_ts_text(std::int64_t ts_ns) const {
  std::string s;
  append_us(&s, raw_ns(ts_ns));
  return s;
}

std::string EventClock::at_text(std::int64_t ts_ns) const {
  return "at " + rel_ms_text(ts_ns) + " (ts " + raw_ts_text(ts_ns) + ")";
}

std::string EventClock::event_text(const EventRef& e, const KernelNames* names) const {
  std::string s = (names != nullptr ? names->get(e.name) : e.name) + " @ " + e.lane + ", " + at_text(e.ts_ns);
  if (e.dur_ns > 0) s += ", " + format_ns(e.dur_ns);
  if (e.step >= 0) s += ", step " + std::to_string(e.step);
  return s;
}

bool is_timestamp_key(std::string_view key) {
  // Whole words only: "step_offsets_ns" is a list of durations.
  for (std::string_view w : {std::string_view("ts_ns"), std::string_view("start_ns"), std::string_view("end_ns")}) {
    if (key == w || (key.size() > w.size() && key.ends_with(w) && key[key.size() - w.size() - 1] == '_')) return true;
  }
  return false;
}

std::string real_text(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// One evidence value in a line of text. Points in time print as where to
// find them (ms since the trace's start, the file's ts), never as durations.
std::string evidence_value_text(const Evidence::Field& f, const EventClock& clock, const KernelNames* names) {
  switch (f.kind) {
    case Evidence::Kind::kInt:
      if (internal::is_timestamp_key(f.key)) return clock.at_text(f.i);
      if (f.key.ends_with("_ns")) return format_ns(f.i);
      return std::to_string(f.i);
    case Evidence::Kind::kReal: return real_text(f.d);
    case Evidence::Kind::kText: return f.s;
    case Evidence::Kind::kEvent: return clock.event_text(f.events.front(), names);
    case Evidence::Kind::kEvents: {
      std::string s;
      for (std::size_t i = 0; i < f.events.size() && i < 5; ++i) s += "\n      - " + clock.event_text(f.events[i], names);
      if (f.events.size() > 5) s += "\n      - ... " + std::to_string(f.events.size() - 5) + " more";
      return s;
    }
    case Evidence::Kind::kInts: {
      std::string s = "[";
      for (std::size_t i = 0; i < f.ints.size(); ++i) s += (i ? ", " : "") + std::to_string(f.ints[i]);
      return s + "]";
    }
    case Evidence::Kind::kTexts: {
      std::string s;
      for (std::size_t i = 0; i < f.texts.size(); ++i) s += (i ? ", " : "") + f.texts[i];
      return s;
    }
  }
  return "";
}

}  // namespace tprof::internal
