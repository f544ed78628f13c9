// The streaming read (src/trace/event_stream.h): the batches a consumer gets
// are the model's events in file order, with their args and memory records,
// exactly what read_trace gives once the read's own finishing (B/E pairs,
// the base time) is applied; past the model limit the model keeps only what
// finishing needs, with lanes, metadata and diagnostics as read_trace's; a
// consumer's error stops the read and is returned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "src/trace/event_stream.h"
#include "tests/support/stream_options.h"
#include "tprof/read.h"

namespace tprof {
namespace {

const std::string kData = TPROF_TEST_DATA;

struct Row {
  std::uint64_t id = 0;
  std::string name, args;
  std::int64_t ts = 0, dur = 0;
  std::uint32_t lane = 0;
};

// Copies every batch's events as the consumer sees them.
class Collect : public internal::EventStream {
 public:
  Status batch(const internal::StreamedBatch& b) override {
    EXPECT_EQ(b.first_id, rows.size()) << "batches in file order, none missing";
    ++batches;
    for (std::uint32_t e = b.first; e < b.first + b.count; ++e) {
      Row r;
      r.id = b.first_id + (e - b.first);
      r.name = std::string(b.trace.name(e));
      r.args = std::string(b.args(e));
      r.ts = b.trace.events.ts_ns[e];
      r.dur = b.trace.events.dur_ns[e];
      r.lane = b.trace.events.lane[e];
      rows.push_back(std::move(r));
    }
    memory.insert(memory.end(), b.memory.begin(), b.memory.end());
    if (fail_at >= 0 && batches > fail_at) return Error(ErrorCode::kIo, "disk full", "out.db");
    return {};
  }
  std::vector<Row> rows;
  std::vector<MemoryRecord> memory;
  int batches = 0;
  int fail_at = -1;
};


class ReaderStream : public ::testing::TestWithParam<const char*> {};

TEST_P(ReaderStream, BatchesAreTheModelsEventsInFileOrder) {
  const std::string path = kData + "/" + GetParam();
  Result<Trace> model = read_trace(path);
  ASSERT_TRUE(model.has_value());
  const Trace& m = *model;
  for (const std::uint64_t limit : {std::uint64_t{0}, std::uint64_t{1}}) {
    SCOPED_TRACE(limit == 0 ? "model kept" : "model over its limit");
    Collect sink;
    Result<internal::StreamedTrace> st =
        internal::read_trace_streamed(path, testing::many_small_batches(limit), &sink);
    ASSERT_TRUE(st.has_value()) << st.error().to_string();
    if (std::filesystem::file_size(path) > (64u << 10)) {
      EXPECT_GT(sink.batches, 3);
    }
    ASSERT_EQ(sink.rows.size(), m.events.size());
    EXPECT_EQ(st->events, m.events.size());
    std::vector<std::int64_t> joined(m.events.size(), -1);
    for (const auto& [id, dur] : st->joined) joined[id] = dur;
    for (std::uint32_t e = 0; e < m.events.size(); ++e) {
      const Row& r = sink.rows[e];
      ASSERT_EQ(r.name, m.name(e)) << e;
      ASSERT_EQ(r.ts + st->ts_shift, m.events.ts_ns[e]) << e;
      ASSERT_EQ(joined[e] >= 0 ? joined[e] : r.dur, m.events.dur_ns[e]) << e;
      ASSERT_EQ(r.args, m.args_json(e)) << e;
      ASSERT_EQ(r.lane, m.events.lane[e]) << e;
    }
    ASSERT_EQ(sink.memory.size(), m.memory.size());
    for (std::size_t i = 0; i < m.memory.size(); ++i) {
      EXPECT_EQ(sink.memory[i].event, m.memory[i].event);
      EXPECT_EQ(sink.memory[i].bytes, m.memory[i].bytes);
    }
    // What the model says of lanes and processes needs every event: the same.
    const Trace& t = st->trace;
    ASSERT_EQ(t.lanes.size(), m.lanes.size());
    for (std::size_t l = 0; l < m.lanes.size(); ++l) {
      EXPECT_EQ(t.lanes[l].kind, m.lanes[l].kind) << l;
      EXPECT_EQ(t.lanes[l].device, m.lanes[l].device) << l;
      EXPECT_EQ(t.lanes[l].stream, m.lanes[l].stream) << l;
      EXPECT_EQ(t.str(t.lanes[l].thread_name), m.str(m.lanes[l].thread_name)) << l;
    }
    ASSERT_EQ(t.processes.size(), m.processes.size());
    for (std::size_t p = 0; p < m.processes.size(); ++p) {
      EXPECT_EQ(t.str(t.processes[p].name), m.str(m.processes[p].name));
    }
    EXPECT_EQ(t.meta.producer, m.meta.producer);
    EXPECT_EQ(t.meta.base_time_ns, m.meta.base_time_ns);
    if (limit == 0) {
      EXPECT_TRUE(st->whole);
      EXPECT_EQ(t.events.size(), m.events.size());
      EXPECT_EQ(t.events.ts_ns, m.events.ts_ns);
      EXPECT_EQ(t.events.dur_ns, m.events.dur_ns);
      EXPECT_EQ(t.diagnostics.total(), m.diagnostics.total());
      for (std::uint32_t e = 0; e < m.events.size(); ++e) ASSERT_EQ(t.args_json(e), m.args_json(e)) << e;
      continue;
    }
    // Past the limit: the M events and B events, at their trace-wide indices.
    EXPECT_FALSE(st->whole);
    EXPECT_TRUE(t.memory.empty());
    ASSERT_EQ(st->ids.size(), t.events.size());
    std::size_t metadata = 0;
    for (std::uint32_t e = 0; e < m.events.size(); ++e) metadata += m.events.phase[e] == Phase::kMetadata;
    EXPECT_EQ(t.events.size(), metadata + st->joined.size());
    for (std::uint32_t k = 0; k < t.events.size(); ++k) {
      const std::uint32_t e = st->ids[k];
      EXPECT_EQ(t.events.phase[k], m.events.phase[e]);
      EXPECT_EQ(t.events.ts_ns[k], m.events.ts_ns[e]);
      EXPECT_EQ(t.events.dur_ns[k], m.events.dur_ns[e]);
      EXPECT_EQ(t.name(k), m.name(e));
    }
    // Diagnostics name trace-wide events; the whole-trace checks are not made.
    for (int c = 0; c < static_cast<int>(DiagnosticCode::kCount_); ++c) {
      const auto code = static_cast<DiagnosticCode>(c);
      if (code == DiagnosticCode::kOverlappingKernels || code == DiagnosticCode::kUnmatchedFlow) continue;
      EXPECT_EQ(t.diagnostics.count(code), m.diagnostics.count(code)) << diagnostic_code_name(code);
    }
    for (const Diagnostic& d : t.diagnostics.items()) {
      if (d.event == kNoIndex) continue;
      const auto same = std::find_if(m.diagnostics.items().begin(), m.diagnostics.items().end(),
                                     [&](const Diagnostic& x) { return x.code == d.code && x.message == d.message; });
      ASSERT_NE(same, m.diagnostics.items().end()) << d.message;
      EXPECT_EQ(d.event, same->event) << d.message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Traces, ReaderStream,
                         ::testing::Values("gpu/h100-torch-2.11/64_bf16_warm_eager.json",
                                           "gpu/h100-torch-2.11/4096_bf16_warm_compile.json",
                                           "torch-1.13/memory/memory.json",
                                           "kineto-public/hta_rank_non_gpu_2022-08.json.gz",
                                           "public/kineto/docs/traces/after_fix_trace.json"));

// A consumer's error stops the read: no more batches, and the read returns it.
TEST(ReaderStreamError, TheConsumersErrorStopsTheRead) {
  const std::string path = kData + "/gpu/h100-torch-2.11/4096_bf16_warm_compile.json";
  Collect sink;
  sink.fail_at = 2;
  Result<internal::StreamedTrace> st = internal::read_trace_streamed(path, testing::many_small_batches(), &sink);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message(), "disk full");
  EXPECT_EQ(st.error().path(), "out.db");
  EXPECT_EQ(sink.batches, 3);
}

}  // namespace
}  // namespace tprof
