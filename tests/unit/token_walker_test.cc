// The token walker (the SIMD fast path) and the lenient cursor parser must
// produce the same Trace and the same diagnostics for every input: the
// walker only takes events it fully understands and hands the rest over.
#include <gtest/gtest.h>

#include <string>

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "tests/support/test_traces.h"
#include "tests/support/trace_compare.h"
#include "tprof/read.h"

namespace tprof {
namespace {


std::string diagnostics_text(const Trace& t) {
  std::string out;
  for (const Diagnostic& d : t.diagnostics.items()) {
    out += std::string(diagnostic_code_name(d.code)) + "@" + std::to_string(d.byte_offset) + " e" +
           std::to_string(d.event) + " " + d.message + "\n";
  }
  for (int c = 0; c < static_cast<int>(DiagnosticCode::kCount_); ++c) {
    out += std::to_string(t.diagnostics.count(static_cast<DiagnosticCode>(c))) + ",";
  }
  return out;
}

void expect_same(const std::string& bytes, const std::string& what, int threads = 1) {
  ReadOptions walker;
  walker.threads = threads;
  ReadOptions cursor = walker;
  cursor.token_walker = false;
  Result<Trace> a = read_trace_bytes(bytes, what, walker);
  Result<Trace> b = read_trace_bytes(bytes, what, cursor);
  ASSERT_EQ(a.has_value(), b.has_value()) << what << ": " << (a ? b.error().to_string() : a.error().to_string());
  if (!a) {
    EXPECT_EQ(a.error().to_string(), b.error().to_string()) << what;
    return;
  }
  EXPECT_EQ(testing::diff_traces(*a, *b), "") << what;
  EXPECT_EQ(diagnostics_text(*a), diagnostics_text(*b)) << what;
  EXPECT_EQ(a->meta.producer, b->meta.producer) << what;
  for (std::uint32_t e = 0; e < a->events.size(); ++e) {
    ASSERT_EQ(a->events.src_offset[e], b->events.src_offset[e]) << what << " event " << e;
    ASSERT_EQ(a->args_json(e), b->args_json(e)) << what << " event " << e;
  }
}

std::string decompressed(const std::string& path) {
  auto bytes = internal::read_file(path);
  if (!bytes) return {};
  if (!internal::is_gzip(*bytes)) return *bytes;
  auto out = internal::gunzip(*bytes);
  return out ? std::string(out->bytes()) : std::string();
}

TEST(TokenWalker, AgreesWithTheCursorOnEveryTestTrace) {
  int files = 0;
  for (const std::string& path : testing::test_json_files()) {
    const std::string text = decompressed(path);
    expect_same(text, path);
    // Cut points exercise the hand-over at truncation.
    for (std::size_t cut : {text.size() / 3, text.size() / 2 + 1, text.size() * 9 / 10}) {
      expect_same(text.substr(0, cut), path + " cut at " + std::to_string(cut));
    }
    ++files;
  }
  EXPECT_GT(files, 40);
}

TEST(TokenWalker, AgreesOnOddInput) {
  const char* cases[] = {
      // raw quotes and backslashes in names (pre-2023 libkineto)
      R"([{"name": "say "hi" now", "ph": "X", "ts": 1, "dur": 2, "tid": 1, "pid": "CPU functions", "args": {}}])",
      R"([{"name": "5" screen", "ph": "X", "ts": 1, "dur": 2, "tid": 1, "pid": 1}, {"name": "b", "ph": "X", "ts": 3, "dur": 1, "tid": 1, "pid": 1}])",
      R"({"traceEvents": [{"ph": "X", "name": "C:\path\x", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})",
      R"({"traceEvents": [{"ph": "X", "name": "esc \"q\" \u00e9 \ud83d\ude00", "cat": "c\tat", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})",
      // odd types and values
      R"({"traceEvents": [{"ph": 5, "name": "a", "pid": 1, "tid": 1, "ts": 1}, {"ph": "X", "name": 7, "pid": 1.5, "tid": "t", "ts": "2", "dur": -3}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1e3, "dur": 0.0005, "args": {"External id": 1.5, "correlation": "x"}}]})",
      R"({"traceEvents": [{}, 42, "s", [1], null, {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},]})",
      R"({"traceEvents": [{"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 1}, {"ph": "E", "pid": 1, "tid": 1, "ts": 5}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"x": [{"y": "}"}, "]"], "z": {"a": [[]]}, "t": true, "f": false, "n": null}}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"x": tru}}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"x": [1 2]}}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1 2, "dur": 1}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 00, "dur": 1}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1} {"ph": "X"}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"x": {]}}]})",
      R"({"traceEvents": [{"ph": "i", "s": "g", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1, "args": {"Bytes": -8, "Addr": 18446744073709551615, "Device Type": 1, "Device Id": 0}}]})",
      R"({"traceEvents": [{"ph": "s", "id": "0x1f", "pid": 1, "tid": 1, "ts": 1, "cat": "ac2g", "name": "ac2g"}, {"ph": "f", "id": 31, "bp": "e", "pid": 0, "tid": 7, "ts": 2, "cat": "ac2g", "name": "ac2g"}]})",
      R"({"traceEvents": [{"name": "process_sort_index", "ph": "M", "pid": 1, "tid": 0, "args": {"sort_index": 3.5}}, {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": 5}}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 12345678901234567890, "dur": 1}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "ph": "i"}]})",
      // backslashes outside strings
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"x": [1, \ 2]}}]})",
      R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1, "args": {"x": {"y": 1\}}}]})",
  };
  for (const char* c : cases) expect_same(c, c);
}

TEST(TokenWalker, AgreesAcrossWindowAndChunkBoundaries) {
  // Long strings and deep args straddle the walker's index windows; many
  // chunks exercise the hand-over between threads.
  std::string s = "{\"traceEvents\": [\n";
  for (int i = 0; i < 3000; ++i) {
    if (i) s += ",\n";
    std::string name(static_cast<std::size_t>(i % 97) * 13, 'n');
    if (i % 50 == 7) name += "\\\"";
    if (i % 333 == 5) name += "raw\"quote";
    s += "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"" + name + "\", \"pid\": 1, \"tid\": " +
         std::to_string(i % 5) + ", \"ts\": " + std::to_string(i) + ".25, \"dur\": 1.5, \"args\": {\"External id\": " +
         std::to_string(i) + ", \"deep\": [[[[\"" + std::string(static_cast<std::size_t>(i % 71), '\\' == 0 ? 'x' : 'y') +
         "\"]]]], \"Input Dims\": [[" + std::to_string(i) + ", 2], []]}}";
  }
  s += "\n]}";
  expect_same(s, "window test");
  expect_same(s, "window test, 3 threads", 3);
}

}  // namespace
}  // namespace tprof
