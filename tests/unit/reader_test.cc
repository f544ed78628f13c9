#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/base/gzip.h"
#include "src/trace/event_stream.h"
#include "src/trace/json_copy.h"
#include "tprof/read.h"
#include "tprof/write.h"

namespace tprof {
namespace {

Trace read_ok(const std::string& text, ReadOptions options = {}) {
  Result<Trace> t = read_trace_bytes(text, "test.json", options);
  EXPECT_TRUE(t) << (t ? "" : t.error().to_string());
  return t ? std::move(t).value() : Trace();
}

Error read_error(const std::string& text) {
  Result<Trace> t = read_trace_bytes(text, "test.json");
  EXPECT_FALSE(t);
  return t ? Error(ErrorCode::kInternal, "unexpected success") : t.error();
}

TEST(Reader, KinetoObjectWithEveryEventKind) {
  const std::string text = R"(
{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
  "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11, "ts": 1700000000000000.125, "dur": 20.5,
   "args": {"External id": 7, "Input Dims": [[2, 3], [3, 4]]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11, "ts": 1700000000000001, "dur": 5,
   "args": {"External id": 7, "correlation": 99}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1700000000000010, "dur": 100,
   "args": {"External id": 7, "correlation": 99, "device": 0, "stream": 7}},
  {"ph": "s", "id": 99, "pid": 10, "tid": 11, "ts": 1700000000000001, "cat": "ac2g", "name": "ac2g"},
  {"ph": "f", "id": 99, "pid": 0, "tid": 7, "ts": 1700000000000010, "cat": "ac2g", "name": "ac2g", "bp": "e"},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 10, "tid": 11, "ts": 1700000000000002,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 18446744073709551615, "Bytes": -4096, "Total Allocated": 0, "Total Reserved": 8192}},
  {"name": "thread_name", "ph": "M", "ts": 1700000000000000, "pid": 10, "tid": 11, "args": {"name": "thread 11 [python]"}},
  {"name": "process_labels", "ph": "M", "ts": 1700000000000000, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
  {"name": "process_sort_index", "ph": "M", "ts": 1700000000000000, "pid": 0, "tid": 0, "args": {"sort_index": 5000000}}
  ],
  "traceName": "x.json"
})";
  Trace t = read_ok(text);
  ASSERT_EQ(t.events.size(), 9u);
  EXPECT_TRUE(t.diagnostics.empty());
  EXPECT_EQ(t.meta.format, TraceFormat::kKinetoObject);
  EXPECT_EQ(t.meta.producer, Producer::kKineto);
  EXPECT_EQ(t.events.ts_ns[0], 1700000000000000125);
  EXPECT_EQ(t.events.dur_ns[0], 20500);
  EXPECT_EQ(t.events.kind[0], EventKind::kCpuOp);
  EXPECT_EQ(t.events.external_id[0], 7);
  EXPECT_EQ(t.events.kind[1], EventKind::kCudaRuntime);
  EXPECT_EQ(t.events.correlation[1], 99);
  EXPECT_EQ(t.events.kind[2], EventKind::kKernel);
  EXPECT_EQ(t.events.kind[3], EventKind::kFlow);
  EXPECT_EQ(t.events.flow_id[4], 99);
  EXPECT_TRUE(t.events.flags[4] & kFlagBindEnclosing);
  EXPECT_EQ(t.events.kind[5], EventKind::kMemory);
  EXPECT_TRUE(t.events.flags[5] & kFlagInstantThread);
  ASSERT_EQ(t.memory.size(), 1u);
  EXPECT_EQ(t.memory[0].bytes, -4096);
  EXPECT_EQ(t.memory[0].device_type, 1);
  EXPECT_EQ(t.memory[0].total_reserved, 8192);
  EXPECT_EQ(t.memory[0].addr, 18446744073709551615ull);
  EXPECT_EQ(t.args_json(0), R"({"External id": 7, "Input Dims": [[2, 3], [3, 4]]})");

  const Lane& cpu = t.lanes[t.events.lane[0]];
  EXPECT_EQ(cpu.kind, LaneKind::kCpu);
  EXPECT_EQ(cpu.pid.num, 10);
  EXPECT_EQ(cpu.tid.num, 11);
  EXPECT_EQ(t.str(cpu.thread_name), "thread 11 [python]");
  const Lane& gpu = t.lanes[t.events.lane[2]];
  EXPECT_EQ(gpu.kind, LaneKind::kGpu);
  EXPECT_EQ(gpu.device, 0);
  EXPECT_EQ(gpu.stream, 7);
  ASSERT_EQ(t.processes.size(), 1u);
  EXPECT_EQ(t.str(t.processes[0].labels), "GPU 0");
  EXPECT_EQ(t.processes[0].sort_index, 5000000);
  EXPECT_EQ(t.meta.top_level_json("distributedInfo"), R"({"backend": "nccl", "rank": 3, "world_size": 8})");
  EXPECT_EQ(t.meta.top_level_json("traceName"), R"("x.json")");
}

// 10^5 threads under pid 0 cost about what 10^5 processes do: lane lookup
// stays hashed (every lane of pid 0 once fell into one bucket: 20 s vs
// 0.5 s). A ratio within this run, best of three each, not a time.
TEST(Reader, ManyLanesOfOneProcessStayLinear) {
  auto make = [](bool one_pid) {
    std::string json = "{\"traceEvents\": [";
    for (int i = 0; i < 100000; ++i) {
      if (i > 0) json += ",\n";
      json += "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op\", \"pid\": " +
              std::to_string(one_pid ? 0 : i) + ", \"tid\": " + std::to_string(one_pid ? i : 1) +
              ", \"ts\": " + std::to_string(i) + ", \"dur\": 1}";
    }
    return json + "]}";
  };
  auto best_of_3 = [](const std::string& json) {
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      Result<Trace> t = read_trace_bytes(json, "lanes.json");
      const auto t1 = std::chrono::steady_clock::now();
      EXPECT_TRUE(t);
      EXPECT_EQ(t->lanes.size(), 100000u);
      best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    }
    return best;
  };
  const double threads = best_of_3(make(true)), processes = best_of_3(make(false));
  EXPECT_LT(threads, 4 * processes + 0.05) << threads << " s vs " << processes << " s";
}

// --threads 2147483647 once spun 25 s guessing chunk starts; thread counts
// are capped, so it costs what a sane count costs (a ratio in this run).
TEST(Reader, AbsurdThreadCountsAreCapped) {
  std::string json = "{\"traceEvents\": [";
  for (int i = 0; i < 20000; ++i) {
    json += std::string(i > 0 ? ",\n" : "") + "{\"ph\": \"X\", \"name\": \"op\", \"pid\": 1, \"tid\": 1, \"ts\": " +
            std::to_string(i) + ", \"dur\": 1}";
  }
  json += "]}";
  auto timed = [&](int threads) {
    ReadOptions o;
    o.threads = threads;
    o.min_parallel_bytes = 1;
    const auto t0 = std::chrono::steady_clock::now();
    Result<Trace> t = read_trace_bytes(json, "threads.json", o);
    const auto t1 = std::chrono::steady_clock::now();
    EXPECT_TRUE(t);
    EXPECT_EQ(t->events.size(), 20000u);
    return std::chrono::duration<double>(t1 - t0).count();
  };
  const double sane = std::min(timed(2), timed(2));
  const double absurd = timed(2147483647);
  EXPECT_LT(absurd, 20 * sane + 0.2) << absurd << " s vs " << sane << " s";
}

TEST(Reader, LegacyArrayIsCpuOpsInIntegerMicros) {
  Trace t = read_ok(R"([{"name": "aten::zeros", "ph": "X", "ts": 96, "dur": 17, "tid": 1, "pid": "CPU functions", "args": {}}])");
  ASSERT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.meta.format, TraceFormat::kLegacyArray);
  EXPECT_EQ(t.meta.producer, Producer::kTorchLegacy);
  EXPECT_EQ(t.events.kind[0], EventKind::kCpuOp);
  EXPECT_EQ(t.events.ts_ns[0], 96000);
  EXPECT_EQ(t.lanes[0].kind, LaneKind::kCpu);
  EXPECT_TRUE(t.lanes[0].pid.is_str);
  EXPECT_EQ(read_ok("[]").events.size(), 0u);
}

TEST(Reader, BaseTimeNanosecondsAppliesEvenWhenItComesLast) {
  Trace t = read_ok(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.5, "dur": 1}],
                       "baseTimeNanoseconds": 1700000000000000000})");
  EXPECT_EQ(t.meta.base_time_ns, 1700000000000000000);
  EXPECT_EQ(t.events.ts_ns[0], 1700000000000001500);
}

// Found by reader_libfuzzer: a base that would put the events past ±2^62 ns
// is ignored, and the model must then hold no base, or the writer subtracts
// it from times it was never added to and the rewritten file loses them all.
TEST(Reader, AnIgnoredBaseTimeIsNotSubtractedWhenTheTraceIsWritten) {
  const std::string text = R"({"baseTimeNanoseconds": 8170759026000000000, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 4524484371203.161, "dur": 2},
    {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 4524484371204.5, "dur": 0.5}]})";
  Trace t = read_ok(text);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_FALSE(t.meta.base_time_ns.has_value());
  EXPECT_EQ(t.events.ts_ns[0], 4524484371203161);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kOutOfRange), 1u);
  std::string written;
  write_trace_json(t, &written);
  Trace again = read_ok(written);
  ASSERT_EQ(again.events.size(), 2u) << written;
  EXPECT_EQ(again.events.ts_ns[0], t.events.ts_ns[0]);
  EXPECT_EQ(again.events.ts_ns[1], t.events.ts_ns[1]);
  EXPECT_NE(written.find("\"baseTimeNanoseconds\": 8170759026000000000"), std::string::npos);
}

TEST(Reader, Era2021StringTidsAndOldCategories) {
  Trace t = read_ok(R"({"traceEvents": [
    {"ph": "X", "cat": "Operator", "name": "aten::empty", "pid": 5555, "tid": "5555", "ts": 10, "dur": 2, "args": {"External id": 3}},
    {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 5555, "tid": "5555", "ts": 11, "dur": 1, "args": {"correlation": 4, "external id": 3}},
    {"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 20, "dur": 5, "args": {"correlation": 4, "external id": 3}},
    {"ph": "s", "id": 4, "pid": 5555, "tid": 5555, "ts": 11, "cat": "async", "name": "launch"}
  ]})");
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.events.kind[0], EventKind::kCpuOp);
  EXPECT_EQ(t.events.kind[1], EventKind::kCudaRuntime);
  EXPECT_EQ(t.events.external_id[1], 3);
  EXPECT_EQ(t.events.kind[2], EventKind::kKernel);
  // "5555" and 5555 are one thread.
  EXPECT_EQ(t.events.lane[0], t.events.lane[3]);
  const Lane& gpu = t.lanes[t.events.lane[2]];
  EXPECT_EQ(gpu.kind, LaneKind::kGpu);
  EXPECT_EQ(gpu.stream, 7);
}

// Events as HolisticTraceAnalysis' MTIA test trace writes them
// (tests/data/public/hta/mtia_inference_trace): device activity under
// mtia_ccp_events on "Stream N" threads, host calls under mtia_runtime.
TEST(Reader, MtiaDeviceActivityIsDeviceWork) {
  Trace t = read_ok(R"({"traceEvents": [
    {"ph": "X", "cat": "mtia_runtime", "name": "recordEvent", "pid": 865, "tid": 1837, "ts": 10, "dur": 2, "args": {"correlation": 5, "device": 17, "stream_id": "108"}},
    {"ph": "X", "cat": "mtia_ccp_events", "name": "pe_exe", "pid": 17, "tid": 3910, "ts": 20, "dur": 5, "args": {"stream": 112, "packet_ptr": 15}}
  ]})");
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events.kind[0], EventKind::kCudaRuntime);
  EXPECT_EQ(t.events.kind[1], EventKind::kKernel);
  EXPECT_EQ(t.lanes[t.events.lane[0]].kind, LaneKind::kCpu);
  const Lane& dev = t.lanes[t.events.lane[1]];
  EXPECT_EQ(dev.kind, LaneKind::kGpu);
  EXPECT_EQ(dev.device, 17);
}

TEST(Reader, Kineto2022ArgsSelectTheOldProducer) {
  Trace t = read_ok(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1,
                       "args": {"Trace name": "PyTorch Profiler", "Profiler Event Index": 0}}]})");
  EXPECT_EQ(t.meta.producer, Producer::kKineto2022);
}

TEST(Reader, OddDataBecomesDiagnosticsNotFailures) {
  Trace t = read_ok(R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 5, "dur": -3},
    {"ph": "Q", "name": "weird", "pid": 1, "tid": 1, "ts": 5},
    {"name": "no phase", "pid": 1, "tid": 1, "ts": 5},
    {"ph": "X", "name": "no ts", "pid": 1, "tid": 1},
    42,
    {"ph": "X", "cat": "user_annotation", "name": "say "hi"", "pid": 1, "tid": 1, "ts": 6, "dur": 1}
  ]})");
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events.dur_ns[0], 0);
  EXPECT_EQ(t.name(1), "say \"hi\"");
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kNegativeDuration), 1u);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kUnknownPhase), 1u);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kMissingField), 2u);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kNotAnEvent), 1u);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kUnescapedString), 1u);
  for (const Diagnostic& d : t.diagnostics.items()) EXPECT_GT(d.byte_offset, 0) << d.message;
}

// Flow ids are any JSON number or string. Negative numbers collided with
// the column's encoding of string ids (-(id + 2)): "id": -5 read as string
// 3, and INT64_MIN's negation was undefined (table_fuzzer under UBSan).
TEST(Reader, NegativeFlowIdsAreIdsOfTheirOwn) {
  const std::string flows = "{\"ph\": \"X\", \"name\": \"a\", \"pid\": 1, \"tid\": 1, \"ts\": 0, \"dur\": 9}";
  std::string json = "{\"traceEvents\": [" + flows;
  for (const char* id : {"-5", "-9223372036854775808", "-1", "\"-7\"", "3"}) {
    for (const char* ph : {"s", "f"}) {
      json += std::string(", {\"ph\": \"") + ph + "\", \"id\": " + id +
              ", \"cat\": \"c\", \"name\": \"n\", \"pid\": 1, \"tid\": 1, \"ts\": 1}";
    }
  }
  json += "]}";
  for (bool walker : {true, false}) {
    ReadOptions o;
    o.token_walker = walker;
    Result<Trace> t = read_trace_bytes(json, "flows.json", o);
    ASSERT_TRUE(t) << t.error().to_string();
    EXPECT_EQ(t->diagnostics.count(DiagnosticCode::kUnmatchedFlow), 0u) << "walker " << walker;
    std::string written;
    write_trace_json(*t, &written);
    for (const char* id : {"\"-5\"", "\"-9223372036854775808\"", "\"-1\"", "\"-7\"", ": 3,"}) {
      EXPECT_NE(written.find(id), std::string::npos) << id << " in\n" << written;
    }
  }
}

TEST(Reader, NanAndInfinityAreReadNotFatal) {
  // Python's json.dump writes NaN and Infinity by default: one of them used
  // to reject the whole file. In args they are kept as values with no
  // finite number (null when written back); as a time they are a wrong type.
  Trace t = read_ok(R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2,
     "args": {"x": NaN, "y": -Infinity, "z": [Infinity, 1]}},
    {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": -Infinity, "dur": 2},
    {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 4, "dur": NaN},
    {"ph": "X", "cat": "cpu_op", "name": "d", "pid": 1, "tid": 1, "ts": 5, "dur": "z"}
  ]})");
  ASSERT_EQ(t.events.size(), 3u);  // b has no usable ts
  EXPECT_EQ(t.name(0), "a");
  // Stored as JSON can hold them (issue 36): null, with a diagnostic.
  EXPECT_EQ(t.args_json(0), R"({"x": null, "y": null, "z": [null, 1]})");
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kMalformedArgs), 1u);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kBadFieldType), 3u);
  bool said_nan = false, said_string = false;
  for (const Diagnostic& d : t.diagnostics.items()) {
    said_nan |= d.message.find("NaN or Infinity") != std::string::npos;
    said_string |= d.message.find("\"dur\" is a string that holds no number") != std::string::npos;
    EXPECT_EQ(d.message.find("representable"), std::string::npos) << d.message;  // not "out of range"
  }
  EXPECT_TRUE(said_nan);
  EXPECT_TRUE(said_string);
  // Not a value: still an error with its offset.
  EXPECT_FALSE(read_trace_bytes(R"({"traceEvents": [{"ph": "X", "ts": Nan}]})"));
}

// Issue 36, defect 8: the reader only skipped over an args object (brackets
// matched, strings delimited, scalars and the grammar inside not checked)
// and stored it verbatim, so SQLite's json_extract and Python's json failed
// on what it kept. An args object that is not strict JSON is now stored
// repaired (what copy_json_value makes of it) or, when even the lenient
// cursor cannot read it, dropped, with a malformed_args diagnostic at the
// offending byte; --strict fails the read there. Both parsers (the token
// walker hands such args to the cursor), one thread or many.
struct ArgsCase {
  std::string args;    // as written in the file
  std::string stored;  // what args_json gives; "" = dropped
  std::string at;      // the text from the offending byte on ("" for valid args)
};

const std::vector<ArgsCase>& args_cases() {
  static const std::vector<ArgsCase> cases = {
      // Valid: stored as written, no diagnostic.
      {R"({"a": "x\u0001\ud83d\ude00", "b": [1, -0.5e-3, 1E+2, true, false, null], "c": {}})",
       R"({"a": "x\u0001\ud83d\ude00", "b": [1, -0.5e-3, 1E+2, true, false, null], "c": {}})", ""},
      {R"({"dup": 1, "dup": 2})", R"({"dup": 1, "dup": 2})", ""},  // RFC 8259: valid
      {"{\"del\": \"a\x7f\", \"c1\": \"\xc2\x9b\"}", "{\"del\": \"a\x7f\", \"c1\": \"\xc2\x9b\"}", ""},
      // Read leniently, stored repaired.
      {"{\"ctl\": \"a\x01" "b\tc\"}", R"({"ctl": "a\u0001b\tc"})", "\x01" "b"},
      {R"({"path": "C:\path", "n": 1})", R"({"path": "C:\\path", "n": 1})", R"(\path)"},
      {R"({"q": "say "hi" now"})", R"({"q": "say \"hi\" now"})", "hi\""},
      {"{\"u\": \"a\xff" "b\"}", R"({"u": "a\ufffdb"})", "\xff"},
      {"{\"u\": \"\xed\xa0\x80\"}", R"({"u": "\ufffd\ufffd\ufffd"})", "\xed"},
      {R"({"s": "\ud800x"})", "{\"s\": \"\xef\xbf\xbd" "x\"}", R"(\ud800)"},
      {R"({"s": "\udc00"})", "{\"s\": \"\xef\xbf\xbd\"}", R"(\udc00)"},
      {R"({"x": NaN, "y": [-Infinity]})", R"({"x": null, "y": [null]})", "NaN"},
      // Not JSON at all: dropped, the event kept.
      {R"({"n": 01})", "", "1}"},
      {R"({"n": 1.})", "", "}"},
      {R"({"n": -})", "", "}"},
      {R"({"n": 1e})", "", "}"},
      {R"({"a": [1 2]})", "", "2]"},
      {R"({"a": [1,]})", "", "]}"},
      {R"({"a": {"k": 1 "j": 2}})", "", R"("j")"},
      {R"({"a": {k: 1}})", "", "k: 1"},
      {R"({"a": [true, nul]})", "", "nul]"},
      {R"({"a": {"b": 1,}})", "", "}}"},
  };
  return cases;
}

std::string args_trace(const std::string& args) {
  return R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": )" +
         args + R"(}, {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 4, "dur": 2, "args": {"k": 1}}]})";
}

TEST(Reader, ArgsThatAreNotStrictJsonAreRepairedOrDroppedAndSaidSo) {
  for (const bool walker : {true, false}) {
    for (const ArgsCase& c : args_cases()) {
      SCOPED_TRACE(c.args + (walker ? " (token walker)" : " (cursor)"));
      const std::string text = args_trace(c.args);
      ReadOptions options;
      options.token_walker = walker;
      Trace t = read_ok(text, options);
      ASSERT_EQ(t.events.size(), 2u);
      EXPECT_EQ(t.args_json(0), c.stored);
      EXPECT_EQ(t.args_json(1), R"({"k": 1})");
      internal::JsonProblem problem;
      const std::string_view stored = t.args_json(0);
      if (!stored.empty()) {
        EXPECT_TRUE(internal::check_strict_json(stored.data(), stored.data() + stored.size(), &problem))
            << problem.what;
      }
      EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kMalformedArgs), c.at.empty() ? 0u : 1u);
      if (c.at.empty()) continue;
      // The diagnostic names the offending byte.
      const std::size_t at = text.find(c.at, text.find(R"("args")"));
      ASSERT_NE(at, std::string::npos);
      for (const Diagnostic& d : t.diagnostics.items()) {
        if (d.code != DiagnosticCode::kMalformedArgs) continue;
        EXPECT_EQ(d.byte_offset, static_cast<std::int64_t>(at)) << d.message;
        EXPECT_NE(d.message.find(c.stored.empty() ? "dropped" : "stored repaired"), std::string::npos) << d.message;
      }
      // --strict: the read fails at that byte.
      options.strict = true;
      Result<Trace> strict = read_trace_bytes(text, "test.json", options);
      ASSERT_FALSE(strict);
      EXPECT_EQ(strict.error().byte_offset(), static_cast<std::int64_t>(at)) << strict.error().to_string();
      EXPECT_NE(strict.error().message().find("in \"args\""), std::string::npos) << strict.error().to_string();
    }
  }
}

// Top-level values are stored as read and exported as JSON (the SQLite
// export's top_level) too: the repairable args cases as a top-level value
// are stored repaired with a malformed_value diagnostic at the byte, and
// --strict fails there (a fuzzer's find: "traceName" with a "\ud-3d").
TEST(Reader, TopLevelValuesThatAreNotStrictJsonAreRepairedAndSaidSo) {
  for (const ArgsCase& c : args_cases()) {
    if (c.stored.empty()) continue;  // a grammar error there fails the read, as it always did
    SCOPED_TRACE(c.args);
    const std::string text = R"({"traceName": )" + c.args +
                             R"(, "traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]})";
    Trace t = read_ok(text);
    ASSERT_EQ(t.meta.top_level.size(), 1u);
    EXPECT_EQ(t.meta.top_level[0].second, c.at.empty() ? c.args : internal::canonical_json(c.args));
    EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kMalformedValue), c.at.empty() ? 0u : 1u);
    EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kMalformedArgs), 0u);
    if (c.at.empty()) continue;
    const std::string_view stored = t.meta.top_level[0].second;
    internal::JsonProblem problem;
    EXPECT_TRUE(internal::check_strict_json(stored.data(), stored.data() + stored.size(), &problem)) << problem.what;
    const std::size_t at = text.find(c.at);
    for (const Diagnostic& d : t.diagnostics.items()) {
      if (d.code != DiagnosticCode::kMalformedValue) continue;
      EXPECT_EQ(d.byte_offset, static_cast<std::int64_t>(at)) << d.message;
      EXPECT_NE(d.message.find(R"(top-level "traceName" is not strict JSON)"), std::string::npos) << d.message;
    }
    ReadOptions strict;
    strict.strict = true;
    Result<Trace> refused = read_trace_bytes(text, "test.json", strict);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().byte_offset(), static_cast<std::int64_t>(at)) << refused.error().to_string();
  }
}

// The token walker takes keys by their quote tokens; bytes before a key
// that are no token ("{-\"labels\"", "x \"ts\"") were skipped unseen, so
// it stored args the cursor refuses (a fuzzer's find). Both parsers now
// read these the same: the event fails and is skipped.
TEST(Reader, BytesBeforeAKeyAreSeenByBothParsers) {
  const std::string fields = R"("ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2)";
  const std::vector<std::string> elements = {"{" + fields + R"(, "args": {-"labels": "CPU"}})",
                                             "{" + fields + R"(, "args": {"a": 1, x "b": 2}})", "{-" + fields + "}",
                                             R"({"ph": "X", "name": "a", "pid": 1, "tid": 1, 7 "ts": 1, "dur": 2})"};
  for (const std::string& element : elements) {
    SCOPED_TRACE(element);
    const std::string text = R"({"traceEvents": [)" + element +
                             R"(, {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 2}]})";
    for (const bool walker : {true, false}) {
      ReadOptions options;
      options.token_walker = walker;
      Trace t = read_ok(text, options);
      ASSERT_EQ(t.events.size(), 1u) << walker;
      EXPECT_EQ(t.name(0), "b");
      EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kSkippedBytes), 1u) << walker;
    }
  }
}

// Many events in many chunks on several threads, a streamed .gz, and the
// streaming reader's sink: the repaired args land on their own events.
TEST(Reader, RepairedArgsKeepTheirEventsAcrossChunksAndStreams) {
  std::string text = R"({"traceEvents": [)";
  constexpr int kEvents = 20000;
  for (int i = 0; i < kEvents; ++i) {
    text += std::string(i ? ",\n" : "") + R"({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": )" +
            std::to_string(i * 10) + R"(, "dur": 5, "args": {"i": )" + std::to_string(i) +
            (i % 3 == 0 ? R"(, "v": NaN})" : i % 3 == 1 ? R"(, "v": "a\q"})" : "}") + "}";
  }
  text += "]}";
  auto expected = [](int i) {
    return R"({"i": )" + std::to_string(i) + (i % 3 == 0 ? R"(, "v": null})" : i % 3 == 1 ? R"(, "v": "a\\q"})" : "}");
  };
  ReadOptions options;
  options.threads = 4;
  options.min_parallel_bytes = 1;
  options.chunk_bytes = 16 << 10;
  const std::string dir = ::testing::TempDir();
  const std::string plain = dir + "/repaired_args_" + std::to_string(getpid()) + ".json";
  std::ofstream(plain, std::ios::binary) << text;
  Result<std::string> gz = internal::gzip(text);
  ASSERT_TRUE(gz);
  const std::string packed = plain + ".gz";
  std::ofstream(packed, std::ios::binary) << *gz;
  for (const std::string& path : {plain, packed}) {
    SCOPED_TRACE(path);
    Result<Trace> t = read_trace(path, options);
    ASSERT_TRUE(t) << t.error().to_string();
    ASSERT_EQ(t->events.size(), static_cast<std::size_t>(kEvents));
    for (int i = 0; i < kEvents; ++i) ASSERT_EQ(t->args_json(static_cast<std::uint32_t>(i)), expected(i)) << i;
    EXPECT_EQ(t->diagnostics.count(DiagnosticCode::kMalformedArgs), static_cast<std::uint64_t>(kEvents - kEvents / 3));
  }
  struct Collect : internal::EventStream {
    std::vector<std::string> args;
    Status batch(const internal::StreamedBatch& b) override {
      for (std::uint32_t e = b.first; e < b.first + b.count; ++e) args.emplace_back(b.args(e));
      return {};
    }
  };
  for (const std::string& path : {plain, packed}) {
    for (const std::uint64_t model : {std::uint64_t{0}, std::uint64_t{1} << 16}) {  // whole, and past the model limit
      SCOPED_TRACE(path + " model " + std::to_string(model));
      Collect sink;
      ReadOptions o = options;
      o.max_model_bytes = model;
      Result<internal::StreamedTrace> s = internal::read_trace_streamed(path, o, &sink);
      ASSERT_TRUE(s) << s.error().to_string();
      ASSERT_EQ(sink.args.size(), static_cast<std::size_t>(kEvents));
      for (int i = 0; i < kEvents; ++i) ASSERT_EQ(sink.args[static_cast<std::size_t>(i)], expected(i)) << i;
      if (s->whole) {
        for (int i = 0; i < kEvents; ++i) {
          ASSERT_EQ(s->trace.args_json(static_cast<std::uint32_t>(i)), expected(i)) << i;
        }
      }
    }
  }
  std::remove(plain.c_str());
  std::remove(packed.c_str());
}

// Issue 36, item 11: string ids are 32-bit, and the pool handed out ids past
// 2^32 - 1 by wrapping (2^32 - 1 is also its empty-slot mark). A pool with
// no id left now gives kEmptyStr and says so, and the reader fails the read
// naming the limit. A pool capped by the test hook stands for 2^32 strings.
TEST(Reader, MoreDistinctStringsThanIdsFailTheReadInsteadOfWrapping) {
  auto trace_of = [](int names) {
    std::string text = R"({"traceEvents": [)";
    for (int i = 0; i < names; ++i) {
      text += std::string(i ? "," : "") + R"({"ph": "X", "cat": "cpu_op", "name": "op)" + std::to_string(i) +
              R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(i) + R"(, "dur": 1, "id": "flow)" +
              std::to_string(i) + R"("})";
    }
    return text + "]}";
  };
  StringPool::set_limit_for_testing(300);
  for (const int threads : {1, 4}) {
    ReadOptions o;
    o.threads = threads;
    o.min_parallel_bytes = 1;
    o.chunk_bytes = 1024;
    EXPECT_TRUE(read_trace_bytes(trace_of(100), "small.json", o)) << threads;  // ~200 strings
    Result<Trace> t = read_trace_bytes(trace_of(200), "big.json", o);            // ~400 strings
    ASSERT_FALSE(t) << threads;
    EXPECT_NE(t.error().message().find("distinct strings"), std::string::npos) << t.error().to_string();
  }
  StringPool::set_limit_for_testing(0);
  EXPECT_TRUE(read_trace_bytes(trace_of(200), "big.json"));
}

// A ratio NaN lifted the gzip limit silently (issue 23: every comparison
// with it is false); NaN, infinities and negative ratios are refused before reading.
TEST(Reader, AGzipRatioLimitThatIsNotANumberIsRefused) {
  for (double r : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity(), -1.0}) {
    ReadOptions o;
    o.max_inflate_ratio = r;
    Result<Trace> t = read_trace_bytes(R"({"traceEvents": []})", "x.json", o);
    ASSERT_FALSE(t) << r;
    EXPECT_EQ(t.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(t.error().message().find("--max-inflate-ratio"), std::string::npos) << t.error().message();
  }
  ReadOptions none;
  none.max_inflate_ratio = 0;  // documented: no ratio limit
  EXPECT_TRUE(read_trace_bytes(R"({"traceEvents": []})", "x.json", none));
}

TEST(Reader, ADamagedGzipIsReportedAsGzipDamageAtItsCompressedOffset) {
  // A byte flipped mid-stream decodes to garbage until zlib's CRC check: the
  // JSON error that follows is the gzip's damage, which `gzip -t` names too.
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 5000; ++i) {
    text += std::string(i ? "," : "") + R"({"ph": "X", "cat": "cpu_op", "name": "op)" + std::to_string(i) +
            R"(", "pid": 1, "tid": 1, "ts": )" + std::to_string(i * 10) + R"(, "dur": 5})";
  }
  text += "]}";
  auto gz = internal::gzip(text);
  ASSERT_TRUE(gz);
  // Which flipped byte breaks the JSON depends on the compressor's output
  // (zlib or libdeflate): the first of a few mid-stream bytes that does.
  std::string bad;
  Result<Trace> t = Error(ErrorCode::kInternal, "no flip tried");
  for (std::size_t k = 0; k < 64; ++k) {
    bad = *gz;
    bad[bad.size() / 2 + k] ^= 0xff;
    t = read_trace_bytes(bad, "bad.json.gz");
    if (!t && t.error().message().find("incorrect data check") != std::string::npos) break;
  }
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message().find("the gzip stream is damaged (incorrect data check)"), std::string::npos)
      << t.error().to_string();
  EXPECT_EQ(t.error().byte_offset(), static_cast<std::int64_t>(bad.size()) - 4);  // the CRC, where zlib noticed
  // A cut .gz is a truncated trace: every complete event before the cut.
  Result<Trace> cut = read_trace_bytes(std::string_view(*gz).substr(0, gz->size() / 2), "cut.json.gz");
  ASSERT_TRUE(cut);
  EXPECT_GT(cut->events.size(), 100u);
  bool named = false;
  for (const Diagnostic& d : cut->diagnostics.items()) named |= d.message.find("gzip stream cut at compressed byte") == 0;
  EXPECT_TRUE(named);
}

TEST(Reader, BeginEndPairsBecomeCompleteEvents) {
  Trace t = read_ok(R"({"traceEvents": [
    {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 10},
    {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 12},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 15},
    {"ph": "E", "pid": 1, "tid": 1, "ts": 30},
    {"ph": "E", "pid": 1, "tid": 2, "ts": 31},
    {"ph": "B", "name": "open", "pid": 1, "tid": 1, "ts": 40}
  ]})");
  ASSERT_EQ(t.events.size(), 3u);
  EXPECT_EQ(t.events.phase[0], Phase::kComplete);
  EXPECT_EQ(t.events.dur_ns[0], 20000);
  EXPECT_EQ(t.events.dur_ns[1], 3000);
  EXPECT_EQ(t.events.dur_ns[2], 0);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kUnmatchedEnd), 1u);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kUnmatchedBegin), 1u);
}

TEST(Reader, TruncatedFileKeepsEveryCompleteEvent) {
  const std::string full = R"({"traceEvents": [
    {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
    {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 1},
    {"ph": "X", "name": "c", "pid": 1, "tid": 1, "ts": 3, "dur": 1}]})";
  const std::size_t cut = full.find("\"c\"");
  Trace t = read_ok(full.substr(0, cut));
  EXPECT_EQ(t.events.size(), 2u);
  ASSERT_EQ(t.diagnostics.count(DiagnosticCode::kTruncated), 1u);
  EXPECT_EQ(t.diagnostics.items()[0].byte_offset, static_cast<std::int64_t>(cut));
}

// --strict refuses what the lenient read keeps: a file cut short, plain
// (at the JSON's cut) or gzip (at the compressed byte), exit 2 in the CLI.
TEST(Reader, StrictRefusesATruncatedTrace) {
  std::string full = R"({"traceEvents": [)";
  for (int i = 0; i < 4000; ++i) {
    full += R"({"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": )" + std::to_string(i) + R"(, "dur": 1},)";
  }
  full += R"({"ph": "X", "name": "z", "pid": 1, "tid": 1, "ts": 9999, "dur": 1}]})";
  ReadOptions strict;
  strict.strict = true;
  ASSERT_TRUE(read_trace_bytes(full, "whole.json", strict));
  const std::size_t cut = full.size() / 2;
  Result<Trace> lenient = read_trace_bytes(full.substr(0, cut), "cut.json");
  ASSERT_TRUE(lenient);
  EXPECT_EQ(lenient->diagnostics.count(DiagnosticCode::kTruncated), 1u);
  Result<Trace> refused = read_trace_bytes(full.substr(0, cut), "cut.json", strict);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ErrorCode::kParse);
  EXPECT_EQ(refused.error().byte_offset(), lenient->diagnostics.items()[0].byte_offset);
  EXPECT_NE(refused.error().message().find("--strict refuses a truncated trace"), std::string::npos)
      << refused.error().message();
  Result<std::string> gz = internal::gzip(full);
  ASSERT_TRUE(gz);
  const std::string gz_cut = gz->substr(0, gz->size() / 2);
  ASSERT_TRUE(read_trace_bytes(gz_cut, "cut.json.gz"));
  Result<Trace> gz_refused = read_trace_bytes(gz_cut, "cut.json.gz", strict);
  ASSERT_FALSE(gz_refused);
  EXPECT_EQ(gz_refused.error().byte_offset(), static_cast<std::int64_t>(gz_cut.size()));
  EXPECT_NE(gz_refused.error().message().find("gzip stream cut at compressed byte"), std::string::npos)
      << gz_refused.error().message();
}

TEST(Reader, TrailingNulPaddingIsTruncationNotGarbage) {
  std::string text = R"({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},)";
  text += std::string(64, '\0');
  Trace t = read_ok(text);
  EXPECT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kTruncated), 1u);
}

TEST(Reader, HardErrorsNameTheOffsetAndWhatWasExpected) {
  Error e = read_error("");
  EXPECT_EQ(e.code(), ErrorCode::kFormat);
  EXPECT_EQ(e.to_string(), "test.json: byte 0: empty file, expected a JSON object or array");

  e = read_error("  hello");
  EXPECT_EQ(e.code(), ErrorCode::kFormat);
  EXPECT_EQ(e.byte_offset(), 2);

  e = read_error("42");
  EXPECT_EQ(e.code(), ErrorCode::kFormat);

  e = read_error(R"({"traceEvents": {"a": 1}})");
  EXPECT_EQ(e.code(), ErrorCode::kFormat);
  EXPECT_EQ(e.byte_offset(), 16);

  e = read_error(R"({"nodes": []})");
  EXPECT_EQ(e.code(), ErrorCode::kFormat);

  e = read_error(R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1 "dur": 2}]})");
  EXPECT_EQ(e.code(), ErrorCode::kParse);
  EXPECT_EQ(e.byte_offset(), 50);
  EXPECT_NE(e.message().find("expected ',' or '}'"), std::string::npos);

  e = read_error("[[1, 2], [3]]");
  EXPECT_EQ(e.code(), ErrorCode::kFormat);
}

TEST(Reader, GzipIsDetectedFromContent) {
  auto gz = internal::gzip(R"([{"name": "a", "ph": "X", "ts": 1, "dur": 2, "tid": 1, "pid": "CPU functions", "args": {}}])");
  ASSERT_TRUE(gz);
  Trace t = read_ok(*gz);
  EXPECT_TRUE(t.meta.gzip);
  EXPECT_EQ(t.events.size(), 1u);
  EXPECT_EQ(t.args_json(0), "{}");
}

// Lazy args reads over a large memory-mapped file release the mapped pages
// as they go (Trace::attach_source); views handed out before a release must
// still read the same bytes.
TEST(Reader, ArgsOfALargeMappedFileStayReadableWhilePagesAreReleased) {
  constexpr int kEvents = 48;
  const std::string pad(1'500'000, 'x');  // 48 x 1.5 MB: far more than the 8 MiB kept mapped
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < kEvents; ++i) {
    if (i > 0) text += ',';
    text += R"({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": )";
    text += std::to_string(i * 10);
    text += R"(, "dur": 5, "args": {"i": )";
    text += std::to_string(i);
    text += R"(, "pad": ")";
    text += pad;
    text += "\"}}";
  }
  text += "]}";
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("tprof_reader_test_" + std::to_string(getpid()) + ".json");
  { std::ofstream(path, std::ios::binary) << text; }
  Result<Trace> read = read_trace(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(read) << read.error().to_string();
  Trace& t = *read;
  ASSERT_EQ(t.events.size(), static_cast<std::size_t>(kEvents));
  auto expect_args = [&](std::uint32_t e, std::string_view args) {
    const std::string head = R"({"i": )" + std::to_string(e) + R"(, "pad": "xxx)";
    EXPECT_EQ(args.substr(0, head.size()), head) << "event " << e;
    EXPECT_EQ(args.size(), head.size() - 3 + pad.size() + 2) << "event " << e;
  };
  std::vector<std::string_view> views;
  for (std::uint32_t e = 0; e < kEvents; ++e) views.push_back(t.args_json(e));
  for (std::uint32_t e = kEvents; e-- > 0;) expect_args(e, t.args_json(e));
  for (std::uint32_t e = 0; e < kEvents; ++e) expect_args(e, views[e]);  // read after their pages were released

  // What gets released: whole 2 MiB windows, all 4 held each time a 5th is touched.
  constexpr std::size_t kWindow = std::size_t{2} << 20;
  std::size_t windows = 0;  // distinct windows the args span, in file order
  for (std::uint32_t e = 0, last = 0; e < kEvents; ++e) {
    const std::size_t begin = static_cast<std::size_t>(views[e].data() - t.source().data());
    for (std::size_t w = begin / kWindow; w <= (begin + views[e].size() - 1) / kWindow; ++w) {
      if (windows == 0 || w != last) ++windows;
      last = static_cast<std::uint32_t>(w);
    }
  }
  auto copy = std::make_shared<std::string>(t.source());
  std::vector<std::pair<std::size_t, std::size_t>> released;
  t.attach_source(copy, *copy, [&](std::size_t offset, std::size_t len) { released.emplace_back(offset, len); });
  for (std::uint32_t e = 0; e < kEvents; ++e) expect_args(e, t.args_json(e));
  ASSERT_GT(windows, 30u);
  EXPECT_EQ(released.size(), (windows - 1) / 4 * 4);
  for (const auto& [offset, len] : released) {
    EXPECT_EQ(offset % kWindow, 0u);
    EXPECT_EQ(len, kWindow);
  }
  released.clear();
  for (std::uint32_t e = kEvents; e-- > 0;) expect_args(e, t.args_json(e));
  EXPECT_FALSE(released.empty());
}

TEST(Reader, AFileThatShrinksWhileReadIsAnErrorNotACrash) {
  // Rewriting a trace in place one second into `tprof info` killed it with
  // SIGBUS. The progress callback stands in for the other program: it cuts
  // the file to a tenth after the first piece is parsed.
  std::string text = R"({"traceEvents": [)";
  for (int i = 0; i < 40000; ++i) {
    if (i > 0) text += ',';
    text += R"({"ph": "X", "cat": "cpu_op", "name": "aten::op_with_a_long_name", "pid": 1, "tid": 1, "ts": )" +
            std::to_string(i * 10) + R"(, "dur": 5})";
  }
  text += "]}";
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("tprof_shrink_test_" + std::to_string(getpid()) + ".json");
  { std::ofstream(path, std::ios::binary) << text; }
  ReadOptions options;
  options.threads = 1;
  options.min_parallel_bytes = 0;
  options.chunk_bytes = 64 << 10;
  bool cut = false;
  options.progress = [&](std::uint64_t, std::uint64_t) {
    if (!cut) {
      cut = true;
      std::filesystem::resize_file(path, text.size() / 10);
    }
  };
  Result<Trace> read = read_trace(path.string(), options);
  std::filesystem::remove(path);
  ASSERT_TRUE(cut);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().to_string().find("shrank while it was read"), std::string::npos) << read.error().to_string();
}

TEST(Reader, BomAndTrailingData) {
  Trace t = read_ok("\xEF\xBB\xBF[]");
  EXPECT_EQ(t.events.size(), 0u);
  t = read_ok("[] xyz");
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kTrailingData), 1u);
}

ReadOptions one_thread() {
  ReadOptions o;
  o.threads = 1;
  return o;
}

// Builds a trace big enough to split, with names that contain the chunk
// boundary pattern ("}, {") so that some guessed boundaries are false.
std::string big_trace(int n) {
  std::string s = "{\"traceEvents\": [\n";
  for (int i = 0; i < n; ++i) {
    if (i) s += ",\n";
    s += "  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"op" + std::to_string(i % 13) +
         "}, {\\\"x\\\": 1}\", \"pid\": 1, \"tid\": " + std::to_string(i % 3) + ", \"ts\": " + std::to_string(i) +
         ", \"dur\": 1, \"args\": {\"External id\": " + std::to_string(i) + ", \"nested\": [{\"a\": 1}, {\"b\": 2}]}}";
  }
  s += "\n], \"traceName\": \"big\"}";
  return s;
}

TEST(Reader, ParallelChunksGiveTheSameModelAsOneThread) {
  const std::string text = big_trace(20000);
  ReadOptions one;
  one.threads = 1;
  ReadOptions many;
  many.threads = 4;
  many.min_parallel_bytes = 1;
  many.chunk_bytes = 4096;  // hundreds of chunks, many guessed inside strings/args
  Trace a = read_ok(text, one);
  Trace b = read_ok(text, many);
  ASSERT_EQ(a.events.size(), 20000u);
  ASSERT_EQ(b.events.size(), 20000u);
  for (std::uint32_t e = 0; e < a.events.size(); ++e) {
    ASSERT_EQ(a.events.ts_ns[e], b.events.ts_ns[e]);
    ASSERT_EQ(a.name(e), b.name(e));
    ASSERT_EQ(a.events.external_id[e], b.events.external_id[e]);
    ASSERT_EQ(a.args_json(e), b.args_json(e));
    ASSERT_EQ(a.lanes[a.events.lane[e]].tid.num, b.lanes[b.events.lane[e]].tid.num);
  }
  EXPECT_EQ(b.meta.top_level_json("traceName"), "\"big\"");
}

TEST(Reader, ParallelTruncationAndErrorsMatchOneThread) {
  const std::string text = big_trace(5000);
  ReadOptions many;
  many.threads = 3;
  many.min_parallel_bytes = 1;
  many.chunk_bytes = 2048;
  for (std::size_t cut : {text.size() / 3, text.size() / 2 + 7, text.size() - 30}) {
    Result<Trace> a = read_trace_bytes(text.substr(0, cut), "t", one_thread());
    Result<Trace> b = read_trace_bytes(text.substr(0, cut), "t", many);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->events.size(), b->events.size());
    EXPECT_EQ(b->diagnostics.count(DiagnosticCode::kTruncated), 1u);
  }
  std::string bad = text;
  bad[text.size() / 2] = '#';
  Result<Trace> a = read_trace_bytes(bad, "t", one_thread());
  Result<Trace> b = read_trace_bytes(bad, "t", many);
  if (a) {
    ASSERT_TRUE(b);  // the '#' landed inside a string
  } else {
    ASSERT_FALSE(b);
    EXPECT_EQ(a.error().byte_offset(), b.error().byte_offset());
  }
}

}  // namespace
}  // namespace tprof

namespace tprof {
namespace {

std::string file_text(const std::string& rel) {
  std::ifstream in(std::string(TPROF_TEST_DATA) + "/" + rel, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Kept {
  std::uint64_t at;
  std::int64_t ts, dur;
  std::string name;
  bool operator==(const Kept&) const = default;
};

std::vector<Kept> kept_events(const Trace& t, std::uint64_t skip_from = 0, std::uint64_t skip_to = 0) {
  std::vector<Kept> out;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    const std::uint64_t at = t.events.src_offset[e];
    if (at >= skip_from && at < skip_to) continue;
    out.push_back({at, t.events.ts_ns[e], t.events.dur_ns[e], std::string(t.name(e))});
  }
  return out;
}

// Issue 27: damage planted in the middle of real traces (a broken event, a
// run of garbage across several parse chunks) costs only the bytes it hits:
// every event outside the skipped range is kept, exactly, on one thread and
// on many, and --strict still refuses the file at the damage.
TEST(ReaderSalvage, PlantedDamageKeepsEveryEventOutsideTheSkippedRange) {
  ReadOptions many;
  many.threads = 3;
  many.min_parallel_bytes = 1;
  many.chunk_bytes = 4096;
  for (const char* rel : {"gpu/h100-torch-2.11/64_bf16_warm_eager.json",
                          "torch-1.13/mlp/cycle0.kineto.json", "torch-1.13/mlp/cycle0.json"}) {
    const std::string text = file_text(rel);
    ASSERT_GT(text.size(), 20000u) << rel;
    const Trace original = read_ok(text);
    for (const double where : {0.3, 0.5, 0.8}) {
      for (int kind = 0; kind < 3; ++kind) {
        // 0: an event's ',' separator broken; 1: an args object's '{'
        // broken (the error is inside the event); 2: 9,000 bytes of garbage
        // from a separator on, across several parse chunks.
        std::string bad = text;
        const std::size_t from_pos = static_cast<std::size_t>(where * static_cast<double>(text.size()));
        std::size_t at = kind == 1 ? bad.find("\"args\": {", from_pos) : bad.find("}, ", from_pos);
        if (kind != 1) at = std::min(at, bad.find("},\n", from_pos));
        ASSERT_NE(at, std::string::npos) << rel << " kind " << kind;
        at += kind == 1 ? 8 : 1;
        const std::size_t run = kind == 2 ? 9000 : 1;
        for (std::size_t i = at; i < at + run && i < bad.size() - 100; ++i) bad[i] = '#';
        for (const ReadOptions& options : {one_thread(), many}) {
          Result<Trace> t = read_trace_bytes(bad, "damaged.json", options);
          ASSERT_TRUE(t) << rel << " at " << at << ": " << t.error().to_string();
          ASSERT_EQ(t->diagnostics.count(DiagnosticCode::kSkippedBytes), 1u) << rel << " at " << at;
          const Diagnostic* d = nullptr;
          for (const Diagnostic& x : t->diagnostics.items()) {
            if (x.code == DiagnosticCode::kSkippedBytes) d = &x;
          }
          ASSERT_NE(d, nullptr);
          // "bytes A..B skipped (N bytes): ..."
          unsigned long long from = 0, to = 0;
          ASSERT_EQ(std::sscanf(d->message.c_str(), "bytes %llu..%llu", &from, &to), 2) << d->message;
          EXPECT_LE(from, at);
          EXPECT_GE(to, at + run);
          EXPECT_EQ(kept_events(*t), kept_events(original, from, to)) << rel << " at " << at << " kind " << kind;
          EXPECT_LT(t->events.size(), original.events.size());
        }
        ReadOptions strict;
        strict.strict = true;
        Result<Trace> refused = read_trace_bytes(bad, "damaged.json", strict);
        ASSERT_FALSE(refused) << rel;
        EXPECT_EQ(refused.error().code(), ErrorCode::kParse);
        EXPECT_GE(refused.error().byte_offset(), static_cast<std::int64_t>(at));
      }
    }
  }
}

TEST(ReaderSalvage, NothingToResumeAtIsStillAnError) {
  // The damage is in the last event: no later event to resynchronise on.
  Error e = read_error(R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1 "dur": 2}]})");
  EXPECT_EQ(e.code(), ErrorCode::kParse);
  EXPECT_EQ(e.byte_offset(), 50);
  // Two damaged events, each skipped on its own; the good ones around them kept.
  const Trace t = read_ok(
      R"({"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}, {"ph": "X", "name": "b" "ts": 2},)"
      R"( {"ph": "X", "name": "c", "ts": 3, "dur": 1}, {"ph" "X"}, {"ph": "X", "name": "d", "ts": 4, "dur": 1}]})");
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kSkippedBytes), 2u);
  std::vector<std::string> names;
  for (std::uint32_t e2 = 0; e2 < t.events.size(); ++e2) names.emplace_back(t.name(e2));
  EXPECT_EQ(names, (std::vector<std::string>{"a", "c", "d"}));
}

}  // namespace
}  // namespace tprof
