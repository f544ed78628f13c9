// What a program can record besides plain scopes: names from the macros,
// runtime names with shapes, scope arguments, instant events, counters,
// cross-thread flows and trace metadata. Each is checked in the built trace
// and again in the exported file read back, as Kineto readers see it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/trace_queries.h"
#include "tprof/profiler.h"
#include "tprof/profiler_tables.h"
#include "tprof/read.h"

namespace tprof {
namespace {

std::uint32_t find_named(const Trace& t, std::string_view name) {
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.name(e) == name) return e;
  }
  return kNoIndex;
}

using tprof::testing::count_named;

// The exported file read back (the same model, from JSON).
Trace exported(const Profiler& prof, const std::string& name, std::string* text = nullptr) {
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(prof.export_chrome_trace(path));
  if (text != nullptr) {
    std::ifstream in(path);
    text->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  Result<Trace> back = read_trace(path);
  std::remove(path.c_str());
  EXPECT_TRUE(back) << (back ? "" : back.error().to_string());
  return back ? std::move(back).value() : Trace();
}

void named_after_its_function() { TPROF_RECORD_FUNCTION_SCOPE(); }

// Two scopes from one macro expansion share a line: __LINE__-named sites
// collided there (a redefinition), __COUNTER__ names them apart.
#define TWO_SCOPES_ON_ONE_LINE(a, b) \
  TPROF_RECORD_FUNCTION(a);          \
  TPROF_RECORD_FUNCTION(b)

TEST(CaptureEvents, MacrosNameScopesUniquelyAndAfterTheirFunction) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  named_after_its_function();
  { TPROF_RECORD_FUNCTION("first"); TPROF_RECORD_OP("second"); }  // one line, two scopes
  { TWO_SCOPES_ON_ONE_LINE("third", "fourth"); }
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  EXPECT_EQ(count_named(t, "named_after_its_function"), 1u);
  for (const char* n : {"first", "second", "third", "fourth"}) EXPECT_EQ(count_named(t, n), 1u) << n;
  EXPECT_EQ(t.cat(find_named(t, "second")), "cpu_op");
  // "second" is inside "first": both began on one line, the inner one later.
  const std::uint32_t first = find_named(t, "first"), second = find_named(t, "second");
  EXPECT_LE(t.events.ts_ns[first], t.events.ts_ns[second]);
  EXPECT_GE(t.events.ts_ns[first] + t.events.dur_ns[first], t.events.ts_ns[second] + t.events.dur_ns[second]);
}

TEST(CaptureEvents, ARuntimeNameCarriesShapes) {
  Profiler prof({.record_shapes = true});
  ASSERT_TRUE(prof.start());
  { RecordFunction op(std::string("layer") + ".3", {{8, 16}, {16}}, kCpuOp); }
  { RecordFunction op(std::string("layer") + ".4", {{2, 2}}); }
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  ASSERT_NE(find_named(t, "layer.3"), kNoIndex);
  EXPECT_EQ(t.cat(find_named(t, "layer.3")), "cpu_op");
  EXPECT_EQ(t.cat(find_named(t, "layer.4")), "user_annotation");
  EXPECT_NE(t.args_json(find_named(t, "layer.3")).find("\"Input Dims\": [[8, 16], [16]]"), std::string::npos)
      << t.args_json(find_named(t, "layer.3"));
  const KeyAverages by_shape = prof.key_averages(true);
  const std::string table = *by_shape.table({.sort_by = "cpu_time_total"});
  EXPECT_NE(table.find("[[8, 16], [16]]"), std::string::npos) << table;
}

TEST(CaptureEvents, ScopeArgumentsAreKinetoArgsInTheOrderGiven) {
  Profiler prof({.record_shapes = true});
  {
    TPROF_RECORD_FUNCTION_VAR(before, "before start");  // not recording: arg() does nothing
    before.arg("ignored", 1);
    EXPECT_FALSE(before.recording());
  }
  ASSERT_TRUE(prof.start());
  {
    TPROF_RECORD_FUNCTION_VAR(scope, "decode");
    const std::string model = "llama \"3\"";
    scope.arg("tokens", 17)
        .arg("ratio", 0.5)
        .arg("model", model)
        .arg("greedy", true)
        .arg("big", std::numeric_limits<std::uint64_t>::max())
        .arg("delta", -3)
        .arg("label", "plain")
        .arg("nan", std::numeric_limits<double>::quiet_NaN());
    EXPECT_TRUE(scope.recording());
    TPROF_RECORD_OP_SHAPES("op::mm", {{4, 4}});
  }
  {
    RecordFunction shaped(std::string("shaped"), {{3}}, kCpuOp);
    shaped.arg("k", 1);
  }
  ASSERT_TRUE(prof.stop());
  const std::string want =
      "\"tokens\": 17, \"ratio\": 0.5, \"model\": \"llama \\\"3\\\"\", \"greedy\": true, "
      "\"big\": 18446744073709551615, \"delta\": -3, \"label\": \"plain\", \"nan\": null}";
  const Trace& t = prof.trace();
  const std::string_view args = t.args_json(find_named(t, "decode"));
  EXPECT_EQ(args.substr(0, std::string_view("{\"External id\": ").size()), "{\"External id\": ") << args;
  EXPECT_NE(args.find(want), std::string_view::npos) << args;
  // The scope opened after the arguments is untouched by them; shapes come first.
  EXPECT_EQ(t.args_json(find_named(t, "op::mm")).find("tokens"), std::string_view::npos);
  EXPECT_NE(t.args_json(find_named(t, "shaped")).find("\"Input Dims\": [[3]], \"k\": 1}"), std::string_view::npos)
      << t.args_json(find_named(t, "shaped"));
  EXPECT_EQ(t.meta.dropped_events, 0u);

  const Trace back = exported(prof, "tprof_args.json");
  EXPECT_NE(back.args_json(find_named(back, "decode")).find(want), std::string_view::npos)
      << back.args_json(find_named(back, "decode"));
}

// Static keys (TPROF_ARG, an ArgKey of one's own) and runtime keys mix in
// one scope, in the order given; a static key with a string value interns
// only the value.
TEST(CaptureEvents, StaticArgumentKeysAreWrittenLikeRuntimeOnes) {
  static constexpr ArgKey kRatio{"ratio"};
  Profiler prof;
  {
    TPROF_RECORD_FUNCTION_VAR(before, "before start");
    TPROF_ARG(before, "ignored", 1);  // not recording: nothing
  }
  ASSERT_TRUE(prof.start());
  for (int i = 0; i < 2; ++i) {
    TPROF_RECORD_FUNCTION_VAR(scope, "decode");
    TPROF_ARG(scope, "tokens", 17 + i);
    scope.arg("runtime", i);
    scope.arg(&kRatio, 0.5).arg(&kRatio, true);
    TPROF_ARG(scope, "big", std::numeric_limits<std::uint64_t>::max());
    TPROF_ARG(scope, "model", std::string("llama \"3\""));
    TPROF_ARG(scope, "label", "plain");
    TPROF_ARG(scope, "delta", std::int8_t{-3});
  }
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  std::vector<std::string> got;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    if (t.name(e) == "decode") got.emplace_back(t.args_json(e));
  }
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const std::string want = "\"tokens\": " + std::to_string(17 + i) + ", \"runtime\": " + std::to_string(i) +
                             ", \"ratio\": 0.5, \"ratio\": true, \"big\": 18446744073709551615, "
                             "\"model\": \"llama \\\"3\\\"\", \"label\": \"plain\", \"delta\": -3}";
    EXPECT_NE(got[static_cast<std::size_t>(i)].find(want), std::string::npos) << got[static_cast<std::size_t>(i)];
  }
  EXPECT_EQ(count_named(t, "before start"), 0u);
  EXPECT_EQ(t.meta.dropped_events, 0u);
}

// An argument given after its scope's window ended is not recorded into
// the next window (its record would name a scope of the window before).
TEST(CaptureEvents, AnArgumentAfterItsWindowEndedIsNotRecorded) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  std::optional<RecordFunction> open;
  open.emplace(std::string("spans windows"));
  TPROF_RECORD_FUNCTION_VAR(early, "early");
  ASSERT_TRUE(prof.stop());
  ASSERT_TRUE(prof.start());
  TPROF_ARG(early, "late", 1);
  early.arg("late runtime", 2);
  TPROF_ARG(*open, "late", 3);
  { TPROF_RECORD_FUNCTION("in the second window"); }
  open.reset();
  ASSERT_TRUE(prof.stop());
  const Trace& t = prof.trace();
  ASSERT_EQ(count_named(t, "in the second window"), 1u);
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    EXPECT_EQ(t.args_json(e).find("late"), std::string_view::npos) << t.name(e) << " " << t.args_json(e);
  }
}

TEST(CaptureEvents, InstantsAndCountersAreWrittenAsKinetoAndChromeDo) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  {
    TPROF_RECORD_FUNCTION("work");
    TPROF_INSTANT("cache flushed");
    instant(std::string("checkpoint ") + "7");
    TPROF_COUNTER("queue depth", 3);
    counter(std::string("loss"), 0.25);
    counter("loss", 0.125);
  }
  ASSERT_TRUE(prof.stop());
  std::string text;
  const Trace back = exported(prof, "tprof_instants.json", &text);
  for (const Trace* t : {&prof.trace(), &back}) {
    const std::uint32_t flush = find_named(*t, "cache flushed");
    ASSERT_NE(flush, kNoIndex);
    EXPECT_EQ(t->events.phase[flush], Phase::kInstant);
    EXPECT_EQ(t->cat(flush), "cpu_instant_event");
    EXPECT_EQ(t->events.flags[flush] & kFlagInstantThread, kFlagInstantThread);
    ASSERT_NE(find_named(*t, "checkpoint 7"), kNoIndex);
    EXPECT_EQ(t->events.phase[find_named(*t, "checkpoint 7")], Phase::kInstant);
    EXPECT_EQ(count_named(*t, "loss"), 2u);
    const std::uint32_t depth = find_named(*t, "queue depth");
    ASSERT_NE(depth, kNoIndex);
    EXPECT_EQ(t->events.phase[depth], Phase::kCounter);
    EXPECT_EQ(t->args_json(depth), "{\"value\": 3}");
    // Inside the scope, in time order.
    const std::uint32_t work = find_named(*t, "work");
    EXPECT_GE(t->events.ts_ns[flush], t->events.ts_ns[work]);
    EXPECT_LE(t->events.ts_ns[depth], t->events.ts_ns[work] + t->events.dur_ns[work]);
  }
  EXPECT_NE(text.find("\"ph\": \"C\""), std::string::npos);
  EXPECT_NE(text.find("\"s\": \"t\""), std::string::npos);
  // torch's table counts ops, not markers.
  const std::string table = *prof.key_averages().table();
  EXPECT_NE(table.find("work"), std::string::npos);
  EXPECT_EQ(table.find("queue depth"), std::string::npos) << table;
  EXPECT_EQ(table.find("cache flushed"), std::string::npos) << table;
}

TEST(CaptureEvents, AFlowLinksTheScopesOnTwoThreads) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  Flow handed_over;
  {
    TPROF_RECORD_FUNCTION("submit");
    handed_over = flow_begin("task");
  }
  std::thread worker([&] {
    TPROF_RECORD_FUNCTION("run task");
    flow_end(handed_over);
  });
  worker.join();
  ASSERT_TRUE(prof.stop());
  const Trace back = exported(prof, "tprof_flows.json");
  for (const Trace* t : {&prof.trace(), &back}) {
    const Trace& tr = *t;
    std::uint32_t start = kNoIndex, end = kNoIndex;
    for (std::uint32_t e = 0; e < tr.events.size(); ++e) {
      if (tr.events.phase[e] == Phase::kFlowStart) start = e;
      if (tr.events.phase[e] == Phase::kFlowEnd) end = e;
    }
    ASSERT_NE(start, kNoIndex);
    ASSERT_NE(end, kNoIndex);
    EXPECT_EQ(tr.name(start), "task");
    EXPECT_EQ(tr.cat(start), "user_flow");
    EXPECT_EQ(tr.events.flow_id[start], tr.events.flow_id[end]);
    EXPECT_EQ(tr.events.lane[start], tr.events.lane[find_named(tr, "submit")]);
    EXPECT_EQ(tr.events.lane[end], tr.events.lane[find_named(tr, "run task")]);
    EXPECT_EQ(tr.diagnostics.count(DiagnosticCode::kUnmatchedFlow), 0u);
  }
}

TEST(CaptureEvents, AFlowWithAnEndOutsideTheWindowIsNotWritten) {
  Profiler prof;
  ASSERT_TRUE(prof.start());
  const Flow early = flow_begin("crosses windows");
  const Flow never = flow_begin("never ends");
  ASSERT_TRUE(prof.stop());
  EXPECT_EQ(count_named(prof.trace(), "crosses windows"), 0u);
  EXPECT_EQ(count_named(prof.trace(), "never ends"), 0u);
  ASSERT_TRUE(prof.start());
  flow_end(early);
  const Flow late = flow_begin("inside");
  flow_end(late);
  ASSERT_TRUE(prof.stop());
  (void)never;
  EXPECT_EQ(count_named(prof.trace(), "crosses windows"), 0u);
  EXPECT_EQ(count_named(prof.trace(), "inside"), 2u);
  EXPECT_EQ(prof.trace().diagnostics.count(DiagnosticCode::kUnmatchedFlow), 0u);
  EXPECT_EQ(prof.trace().meta.dropped_events, 0u);
  // Outside a window a flow is nothing.
  const Flow none = flow_begin("off");
  EXPECT_EQ(none.id, 0u);
  flow_end(none);
}

TEST(CaptureEvents, MetadataIsTopLevelInEveryLaterTrace) {
  Profiler prof;
  ASSERT_TRUE(prof.add_metadata("run", "nightly \"7\""));
  ASSERT_TRUE(prof.add_metadata_json("distributedInfo", R"({"backend": "nccl", "rank": 1, "world_size": 2})"));
  ASSERT_TRUE(prof.add_metadata_json("extra", "[1, 2.5, NaN]"));
  ASSERT_TRUE(prof.add_metadata("run", "nightly 8"));  // replaces
  for (const char* own : {"traceEvents", "baseTimeNanoseconds", "tprof", "schemaVersion"}) {
    Status s = prof.add_metadata(own, "x");
    ASSERT_FALSE(s) << own;
    EXPECT_NE(s.error().message().find("a key tprof writes itself"), std::string::npos) << s.error().message();
  }
  Status bad = prof.add_metadata_json("broken", "{\"a\": ");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("not one valid JSON value"), std::string::npos) << bad.error().message();
  EXPECT_FALSE(prof.add_metadata("", "x"));

  for (int window = 0; window < 2; ++window) {
    ASSERT_TRUE(prof.start());
    { TPROF_RECORD_FUNCTION("work"); }
    ASSERT_TRUE(prof.stop());
    const Trace back = exported(prof, "tprof_metadata.json");
    for (const Trace* t : {&prof.trace(), &back}) {
      EXPECT_EQ(t->meta.top_level_json("run"), "\"nightly 8\"");
      EXPECT_EQ(t->meta.top_level_json("extra"), "[1, 2.5, null]");
      EXPECT_EQ(t->meta.top_level_json("broken"), "");
      EXPECT_NE(t->meta.top_level_json("distributedInfo").find("\"rank\": 1"), std::string_view::npos)
          << t->meta.top_level_json("distributedInfo");
    }
  }
}

}  // namespace
}  // namespace tprof
