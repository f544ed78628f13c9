// Fuzz target: arbitrary bytes through the reader and everything a user can
// run on what it loads (writer, round trip, torch's table, steps, info).
//
// Properties checked on every input, beyond "does not crash":
//   - a failed read names a byte offset inside the input (or none, -1);
//   - the parallel reader (tiny chunks, so guessed boundaries land inside
//     strings and nested arrays) agrees with the one-thread reader on success,
//     event count and error offset;
//   - a loaded trace written back with the one writer reads again, with the
//     same number of events.
// A broken property aborts, so libFuzzer and the ctest replay both report it.
//
// Built as a normal target (tests/fuzz/CMakeLists.txt) with replay_main.cc;
// with TPROF_BUILD_LIBFUZZER=ON also as a libFuzzer binary.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tprof/info.h"
#include "tprof/key_averages.h"
#include "tprof/read.h"
#include "tprof/steps.h"
#include "tprof/table.h"
#include "tprof/write.h"

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "reader_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

std::string describe(const tprof::Result<tprof::Trace>& t) {
  if (!t) return "error: " + t.error().to_string();
  return "ok: " + std::to_string(t->events.size()) + " events";
}

// The event array's start is where the parallel split begins; 1-byte
// minimum and 32-byte chunks force several guessed boundaries on any input
// with a few events.
tprof::ReadOptions parallel_options() {
  tprof::ReadOptions o;
  o.threads = 3;
  o.min_parallel_bytes = 1;
  o.chunk_bytes = 32;
  return o;
}

void run_analyses(const tprof::Trace& trace) {
  const tprof::EventList list = tprof::EventList::build(trace, {.with_shapes = true, .with_stacks = true});
  tprof::TableOptions table;
  table.sort_by = "cpu_time_total";
  table.profile_memory = list.has_memory_records();
  for (const auto& rows : {list.key_averages(), list.key_averages(true, 5), list.event_rows()}) {
    const tprof::Result<std::string> text = tprof::format_table(rows, table);
    if (!text) property_failed("format_table with a valid sort key fails", text.error().to_string());
  }
  table.sort_by.clear();
  table.top_level_events_only = true;
  table.profile_memory = true;
  table.row_limit = -1;
  if (!tprof::format_table(list.key_averages(), table)) property_failed("format_table without sorting fails", "");

  const tprof::StepsSummary steps = tprof::compute_steps(trace);
  (void)tprof::format_steps_text(trace, steps);
  (void)tprof::format_steps_json(trace, steps);
  (void)tprof::format_info_text(trace);
  (void)tprof::format_info_json(trace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tprof::ReadOptions serial;
  serial.threads = 1;
  tprof::Result<tprof::Trace> trace = tprof::read_trace_bytes(bytes, "fuzz.json", serial);

  const tprof::Result<tprof::Trace> parallel = tprof::read_trace_bytes(bytes, "fuzz.json", parallel_options());
  if (trace.has_value() != parallel.has_value() ||
      (trace && trace->events.size() != parallel->events.size()) ||
      (!trace && trace.error().byte_offset() != parallel.error().byte_offset())) {
    property_failed("parallel and serial reads differ", describe(trace) + " vs " + describe(parallel));
  }

  if (!trace) {
    const std::int64_t at = trace.error().byte_offset();
    // A gzip input's offsets may refer to the decompressed text, which can be
    // longer than the input; only plain text is bounded by its size.
    const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    if (at < -1 || (!gzip && at > static_cast<std::int64_t>(size))) {
      property_failed("error offset outside the input", trace.error().to_string());
    }
    return 0;
  }

  std::string written;
  tprof::write_trace_json(*trace, &written);
  const tprof::Result<tprof::Trace> again = tprof::read_trace_bytes(written, "rewritten.json", serial);
  if (!again) property_failed("written trace does not read back", again.error().to_string() + "\n" + written);
  if (again->events.size() != trace->events.size()) {
    property_failed("round trip changes the event count", describe(trace) + " vs " + describe(again));
  }

  run_analyses(*trace);
  return 0;
}
