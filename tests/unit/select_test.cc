// select_window and select_events: a time window (or any set of events) of a real trace as a trace of its own.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/trace/select.h"
#include "tests/support/trace_compare.h"
#include "tprof/read.h"
#include "tprof/write.h"

namespace tprof::internal {
namespace {

Trace load(const std::string& relative) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + relative);
  EXPECT_TRUE(t) << relative;
  return t ? std::move(t).value() : Trace();
}

TEST(SelectWindow, KeepsWhatOverlapsOneStepAndEveryMetadataEvent) {
  const Trace t = load("gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  std::uint32_t step = kNoIndex;
  for (std::uint32_t e = 0; e < t.events.size() && step == kNoIndex; ++e) {
    if (t.name(e) == "ProfilerStep#5") step = e;
  }
  ASSERT_NE(step, kNoIndex);
  const std::int64_t start = t.events.ts_ns[step], end = start + t.events.dur_ns[step];
  const Trace w = select_window(t, start, end);
  std::size_t expected = 0, steps = 0, metadata = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    const bool meta = t.events.phase[e] == Phase::kMetadata;
    metadata += meta;
    expected += meta || (t.events.ts_ns[e] <= end && t.events.ts_ns[e] + t.events.dur_ns[e] >= start);
  }
  ASSERT_EQ(w.events.size(), expected);
  std::size_t kept_metadata = 0;
  for (std::uint32_t e = 0; e < w.events.size(); ++e) {
    kept_metadata += w.events.phase[e] == Phase::kMetadata;
    if (w.name(e).rfind("ProfilerStep#", 0) == 0) {
      ++steps;
      EXPECT_EQ(w.name(e), "ProfilerStep#5");
    }
    if (w.events.phase[e] != Phase::kMetadata) {
      EXPECT_LE(w.events.ts_ns[e], end);
      EXPECT_GE(w.events.ts_ns[e] + w.events.dur_ns[e], start);
    }
  }
  EXPECT_EQ(steps, 1u);
  EXPECT_EQ(kept_metadata, metadata);
  EXPECT_LT(w.events.size(), t.events.size());
  // The window written and read back is the same model, strings and args intact.
  std::string json;
  write_trace_json(w, &json);
  Result<Trace> back = read_trace_bytes(json, "window.json");
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(testing::diff_traces(w, *back), "");
}

TEST(SelectWindow, TheWholeSpanIsTheSameTraceAndAnEmptyWindowKeepsMetadataOnly) {
  const Trace t = load("torch-1.13/memory/memory.json");
  const Trace all = select_window(t, t.start_ns(), t.end_ns());
  EXPECT_EQ(testing::diff_traces(t, all), "");
  const Trace none = select_window(t, t.end_ns() + 1000, t.end_ns() + 2000);
  for (std::uint32_t e = 0; e < none.events.size(); ++e) EXPECT_EQ(none.events.phase[e], Phase::kMetadata);
  EXPECT_TRUE(none.memory.empty());
}

TEST(SelectEvents, EveryEventKeptIsACopyWithTheSameIndicesAndAMaskKeepsThoseOnly) {
  const Trace t = load("gpu/h100-torch-2.11/64_bf16_warm_eager.json");
  const Trace all = select_events(t, std::vector<std::uint8_t>(t.events.size(), 1));
  EXPECT_EQ(testing::diff_traces(t, all), "");
  ASSERT_EQ(all.events.size(), t.events.size());
  for (std::uint32_t e = 0; e < t.events.size(); ++e) {
    EXPECT_EQ(all.name(e), t.name(e));
    EXPECT_EQ(all.args_json(e), t.args_json(e));
  }
  // Every other event: those, in order, their args with them.
  std::vector<std::uint8_t> keep(t.events.size(), 0);
  for (std::size_t e = 0; e < keep.size(); e += 2) keep[e] = 1;
  const Trace half = select_events(t, keep);
  ASSERT_EQ(half.events.size(), (t.events.size() + 1) / 2);
  for (std::uint32_t e = 0; e < half.events.size(); ++e) {
    EXPECT_EQ(half.name(e), t.name(2 * e));
    EXPECT_EQ(half.events.ts_ns[e], t.events.ts_ns[2 * e]);
    EXPECT_EQ(half.args_json(e), t.args_json(2 * e));
  }
}

}  // namespace
}  // namespace tprof::internal
