// Fuzz target: torch's table over whatever loads, with table options drawn
// from the input's hash (so every mutation also varies them): sort key
// (each valid one, and misspelt ones), row limit, grouping by input shape
// and stack, top-level only, memory columns; text, JSON and CSV.
//
// Properties: a valid sort key never fails; an unknown one is an error
// (a Result), never a crash or a table; the JSON is valid JSON.
// Seeds: tests/fuzz/corpus and tests/fuzz/corpus_gpu.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "src/trace/json_value.h"
#include "tprof/key_averages.h"
#include "tprof/read.h"
#include "tprof/table.h"

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "table_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tprof::ReadOptions serial;
  serial.threads = 1;
  const tprof::Result<tprof::Trace> trace = tprof::read_trace_bytes(bytes, "fuzz.json", serial);
  if (!trace) return 0;

  std::uint64_t h = fnv1a(bytes);
  auto take = [&h](std::uint64_t n) {
    const std::uint64_t v = h % n;
    h = h / n ^ (h * 0x9e3779b97f4a7c15ull);
    return v;
  };
  const std::vector<std::string>& keys = tprof::table_sort_keys();
  tprof::TableOptions options;
  const std::uint64_t k = take(keys.size() + 2);
  const bool valid_key = k < keys.size();
  options.sort_by = valid_key ? keys[k] : (k == keys.size() ? "cpu_time_totl" : "");
  const bool empty_key = options.sort_by.empty();
  options.row_limit = static_cast<int>(take(6)) - 1;  // -1 (all) .. 4
  options.top_level_events_only = take(2) == 1;
  options.profile_memory = take(2) == 1;
  const bool by_shape = take(2) == 1;
  const int stack_n = static_cast<int>(take(3)) * 2;

  const tprof::EventList list = tprof::EventList::build(*trace, {.with_shapes = by_shape, .with_stacks = stack_n > 0});
  for (const std::vector<tprof::StatRow>& rows : {list.key_averages(by_shape, stack_n), list.event_rows()}) {
    const tprof::Result<std::string> text = tprof::format_table(rows, options);
    const tprof::Result<std::string> json = tprof::format_table_json(rows, options);
    const tprof::Result<std::string> csv = tprof::format_table_csv(rows, options);
    if (valid_key || empty_key) {
      if (!text || !json || !csv) property_failed("a valid sort key fails", options.sort_by);
      const auto parsed = tprof::internal::JsonValue::parse(*json);
      if (!parsed) property_failed("table JSON is not valid JSON", parsed.error().to_string());
    } else if (text || json || csv) {
      property_failed("an unknown sort key makes a table", options.sort_by);
    }
  }
  return 0;
}
