// Fuzz target: what reads an event's args. The input is one args object's
// text, as a trace holds it after "args":.
//
// On the text itself:
//   - JsonValue::parse and member_values (the one-pass lookup diagnose and
//     efficiency use per event) agree: where member_values answers (true)
//     and the whole text parses as an object, each wanted key's value is the
//     one JsonValue::find returns (the first member of that name), absent in
//     both or present in both with equal values.
// In a trace: the text is the args of every kind of event whose args tprof
// reads (an op with shapes and a stack, a launch, a kernel and its range,
// an annotation, a step, a memory instant), once as it is and once with the
// correlation and External id that link them. Whatever reads:
//   - every stored args text is a JSON object (RFC 8259, checked by
//     tests/support/strict_json.h, not by tprof's lenient reader): SQLite's
//     json_extract and Python's json.loads read what tprof stores (issue 36,
//     defect 8);
//   - the analyses that read args (the events table with shapes and stacks,
//     key_averages, diagnose, kernels, steps, a rank summary) run on it;
//   - the trace written back is strict JSON (the writer re-escapes args) and
//     reads again with each event's args the same, canonically.
// Seeds: tests/fuzz/corpus_args (args objects of the traces in tests/data).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/trace/json_copy.h"
#include "src/trace/json_value.h"
#include "tests/support/strict_json.h"
#include "tprof/diagnose.h"
#include "tprof/kernels.h"
#include "tprof/key_averages.h"
#include "tprof/ranks.h"
#include "tprof/read.h"
#include "tprof/steps.h"
#include "tprof/table.h"
#include "tprof/write.h"

namespace {

using tprof::internal::JsonValue;

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "args_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

bool same_value(const JsonValue& a, const JsonValue& b) {
  if (a.type() != b.type() || a.as_bool() != b.as_bool() || a.text() != b.text()) return false;
  if (a.items().size() != b.items().size() || a.members().size() != b.members().size()) return false;
  for (std::size_t i = 0; i < a.items().size(); ++i) {
    if (!same_value(a.items()[i], b.items()[i])) return false;
  }
  for (std::size_t i = 0; i < a.members().size(); ++i) {
    if (a.members()[i].first != b.members()[i].first || !same_value(a.members()[i].second, b.members()[i].second)) {
      return false;
    }
  }
  return true;
}

// member_values against the whole parse, for one set of keys.
void check_member_values(std::string_view text, const tprof::Result<JsonValue>& whole,
                         std::span<const std::string_view> keys) {
  std::string_view values[4];
  const std::span<std::string_view> out(values, keys.size());
  if (!tprof::internal::member_values(text, keys, out)) return;  // "parse it whole": nothing claimed
  if (!whole || !whole->is_object()) return;  // it stops at the last wanted key: the rest may be bad
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const JsonValue* expected = whole->find(keys[k]);
    const std::string key(keys[k]);
    if ((expected == nullptr) != out[k].empty()) {
      property_failed("member_values and JsonValue::find disagree on whether a key is there",
                      key + ": \"" + std::string(out[k]) + "\"");
    }
    if (expected == nullptr) continue;
    // Parsed with bytes after it, as in its object: a string at the very end
    // of a text reads as cut short when a "\u" has fewer than four bytes after it.
    const tprof::Result<JsonValue> got = JsonValue::parse("[" + std::string(out[k]) + "]    ");
    if (!got || got->items().size() != 1 || !same_value(got->items()[0], *expected)) {
      property_failed("member_values returns another value than JsonValue::find", key + ": " + std::string(out[k]));
    }
  }
}

// The args in the places tprof reads them. `link`: the launch, kernel and op
// share a correlation and an External id (inserted at the object's start).
std::string trace_with_args(std::string_view args, bool link) {
  std::string linked(args);
  if (link) {
    const std::size_t brace = args.find('{');
    if (brace == std::string_view::npos) return {};
    linked.insert(brace + 1, "\"correlation\": 7, \"External id\": 3, ");
  }
  const std::string a = "\"args\": " + linked;
  std::string t = "{\"schemaVersion\": 1, \"traceEvents\": [\n";
  t += "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 1, \"tid\": 1, \"ts\": 0, "
       "\"dur\": 100, " + a + "},\n";
  t += "{\"ph\": \"X\", \"cat\": \"python_function\", \"name\": \"m.py(3): f\", \"pid\": 1, \"tid\": 1, \"ts\": 2, "
       "\"dur\": 90, " + a + "},\n";
  t += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 1, \"tid\": 1, \"ts\": 10, \"dur\": 50, " +
       a + "},\n";
  t += "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1, "
       "\"ts\": 20, \"dur\": 5, " + a + "},\n";
  t += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ampere_sgemm_128x64_nn\", \"pid\": 0, \"tid\": 7, "
       "\"ts\": 30, \"dur\": 20, " + a + "},\n";
  t += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)\", "
       "\"pid\": 0, \"tid\": 7, \"ts\": 52, \"dur\": 8, " + a + "},\n";
  t += "{\"ph\": \"X\", \"cat\": \"gpu_user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 0, \"tid\": 7, "
       "\"ts\": 29, \"dur\": 32, " + a + "},\n";
  t += "{\"ph\": \"X\", \"cat\": \"cuda_profiler_range\", \"name\": \"range\", \"pid\": 0, \"tid\": 7, \"ts\": 30, "
       "\"dur\": 20, " + a + "},\n";
  t += "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"name\": \"[memory]\", \"pid\": 1, \"tid\": 1, \"ts\": 40, "
       "\"s\": \"t\", " + a + "}\n";
  t += "], \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100\", \"totalGlobalMem\": 85000000000}], "
       "\"distributedInfo\": {\"rank\": 0, \"world_size\": 2}}\n";
  return t;
}

void check_in_a_trace(std::string_view args, bool link) {
  const std::string text = trace_with_args(args, link);
  if (text.empty()) return;
  tprof::ReadOptions serial;
  serial.threads = 1;
  const tprof::Result<tprof::Trace> trace = tprof::read_trace_bytes(text, "args.json", serial);
  if (!trace) return;  // bad args JSON fails the read, at an offset: fine
  const std::size_t n = trace->events.size();
  for (std::uint32_t e = 0; e < n; ++e) {
    const std::string_view stored = trace->args_json(e);
    if (stored.empty()) continue;
    std::string why;
    if (!tprof::testing::is_strict_json(stored, &why, /*utf8=*/false) || stored.front() != '{') {
      property_failed("stored args are not a JSON object", why + ": " + std::string(stored.substr(0, 200)));
    }
  }

  const tprof::EventList list = tprof::EventList::build(*trace, {.with_shapes = true, .with_stacks = true});
  tprof::TableOptions table;
  table.sort_by = "cpu_time_total";
  for (const auto& rows : {list.key_averages(true, 5), list.event_rows()}) (void)tprof::format_table(rows, table);
  const tprof::Diagnosis d = tprof::diagnose(*trace);
  (void)tprof::format_diagnosis_text(*trace, d);
  (void)tprof::format_diagnosis_json(*trace, d);
  (void)tprof::format_kernels_json(tprof::compute_kernels(*trace));
  (void)tprof::format_steps_json(*trace, tprof::compute_steps(*trace));
  (void)tprof::format_rank_summary_json(tprof::JobSummary{{tprof::summarize_rank(*trace, "args.json")}});

  std::string written;
  tprof::write_trace_json(*trace, &written);
  std::string why;
  if (!tprof::testing::is_strict_json(written, &why)) {
    property_failed("the written trace is not strict JSON", why + "\n" + written.substr(0, 4000));
  }
  const tprof::Result<tprof::Trace> again = tprof::read_trace_bytes(written, "rewritten.json", serial);
  if (!again || again->events.size() != n) property_failed("the written trace does not read back", written);
  // Compared canonically; an invalid byte the writer made U+FFFD is U+FFFD
  // on both sides once canonical_json has run twice (the first spells it
  // \ufffd, the second decodes that).
  using tprof::internal::canonical_json;
  for (std::uint32_t e = 0; e < n; ++e) {
    const std::string before = canonical_json(canonical_json(trace->args_json(e)));
    const std::string after = canonical_json(again->args_json(e));
    if (before.empty() && !trace->args_json(e).empty()) continue;  // not JSON: the property above (args-json)
    if (before != after) property_failed("the writer changes an event's args", before + " vs " + after);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const tprof::Result<JsonValue> whole = JsonValue::parse(text);

  // The keys tprof looks up in place, and the object's own first keys (so
  // that any key the input holds is looked up too).
  static constexpr std::string_view kShapes[] = {"Input Dims", "Input type"};
  static constexpr std::string_view kLaunch[] = {"grid", "block"};
  static constexpr std::string_view kStream[] = {"stream"};
  static constexpr std::string_view kMany[] = {"Call stack", "correlation", "External id", "Process Group Name"};
  check_member_values(text, whole, kShapes);
  check_member_values(text, whole, kLaunch);
  check_member_values(text, whole, kStream);
  check_member_values(text, whole, kMany);
  if (whole && whole->is_object()) {
    std::vector<std::string_view> own;
    for (const auto& [key, value] : whole->members()) {
      if (own.size() < 3) own.push_back(key);
    }
    // member_values refuses (returns false for) keys with quotes or
    // backslashes; it is asked with any key the object has.
    check_member_values(text, whole, own);
  }

  check_in_a_trace(text, false);
  check_in_a_trace(text, true);
  return 0;
}
