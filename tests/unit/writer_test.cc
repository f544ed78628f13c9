#include <gtest/gtest.h>

#include <string>

#include "src/base/file.h"
#include "tests/support/test_traces.h"
#include "tests/support/trace_compare.h"
#include "tprof/read.h"
#include "tprof/write.h"

namespace tprof {
namespace {


Trace round_trip(const Trace& t) {
  std::string json;
  write_trace_json(t, &json);
  Result<Trace> back = read_trace_bytes(json, "written.json");
  EXPECT_TRUE(back) << (back ? "" : back.error().to_string()) << "\n" << json.substr(0, 2000);
  return back ? std::move(back).value() : Trace();
}

TEST(Writer, RoundTripKeepsEveryField) {
  const std::string text = R"({
  "schemaVersion": 1, "distributedInfo": {"rank": 1},
  "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "a \"quoted\" \\ name\n", "pid": 1, "tid": 2, "ts": 1.001, "dur": 0.999,
   "args": {"External id": 5, "Input Dims": [[1, 2]], "u": "\u00e9\u0001"}},
  {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 9},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 1.5,
   "args": {"Device Type": 0, "Device Id": -1, "Addr": 1, "Bytes": 12, "Total Allocated": 12, "Total Reserved": 0}},
  {"ph": "s", "id": "0xabc", "pid": 1, "tid": 2, "ts": 1.2, "cat": "ac2g", "name": "ac2g"},
  {"ph": "f", "id": "0xabc", "pid": 0, "tid": 7, "ts": 3, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 4, "args": {"stream": 7, "device": 0}},
  {"ph": "C", "name": "counter", "pid": 1, "tid": 2, "ts": 4, "args": {"value": 3.5}},
  {"name": "thread_name", "ph": "M", "ts": 0, "pid": 1, "tid": 2, "args": {"name": "main"}},
  {"name": "process_name", "ph": "M", "ts": 0, "pid": 1, "tid": 0, "args": {"name": "python"}}
  ],
  "baseTimeNanoseconds": 1700000000000000000,
  "traceName": "t.json"
})";
  Result<Trace> a = read_trace_bytes(text, "in.json");
  ASSERT_TRUE(a) << a.error().to_string();
  Trace b = round_trip(*a);
  EXPECT_EQ(testing::diff_traces(*a, b), "");
  EXPECT_EQ(b.events.ts_ns[0], 1700000000000001001);
}

TEST(Writer, LenientInputComesOutAsValidJson) {
  Result<Trace> a = read_trace_bytes(R"([{"name": "say "hi" C:\x", "ph": "X", "ts": 1, "dur": 2, "tid": 1, "pid": "CPU functions", "args": {}}])");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->diagnostics.count(DiagnosticCode::kUnescapedString), 1u);
  std::string json;
  write_trace_json(*a, &json);
  Result<Trace> b = read_trace_bytes(json);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->diagnostics.count(DiagnosticCode::kUnescapedString), 0u);
  EXPECT_EQ(b->name(0), "say \"hi\" C:\\x");
}

TEST(Writer, WritesGzipAtomically) {
  Result<Trace> a = read_trace_bytes(R"([{"name": "a", "ph": "X", "ts": 1, "dur": 2, "tid": 1, "pid": "CPU functions", "args": {}}])");
  ASSERT_TRUE(a);
  const std::string path = ::testing::TempDir() + "/tprof_writer_test.json.gz";
  ASSERT_TRUE(write_trace(*a, path));
  auto bytes = internal::read_file(path);
  ASSERT_TRUE(bytes);
  ASSERT_GE(bytes->size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>((*bytes)[0]), 0x1f);
  Result<Trace> b = read_trace(path);
  ASSERT_TRUE(b);
  EXPECT_EQ(testing::diff_traces(*a, *b), "");
  std::remove(path.c_str());

  Status s = write_trace(*a, "/nonexistent-dir/x.json");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kIo);
}

// Every trace under tests/data reads, writes and reads back to the same model.
TEST(Writer, EveryTestTraceRoundTrips) {
  int checked = 0;
  for (const std::string& path : testing::test_traces()) {
    Result<Trace> a = read_trace(path);
    ASSERT_TRUE(a) << a.error().to_string();
    Trace b = round_trip(*a);
    EXPECT_EQ(testing::diff_traces(*a, b), "") << path;
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace tprof
