// A trace cut at any byte (a job killed mid-write, a partial copy) never
// crashes the reader and never yields invented data. At every cut the reader
// either
//   (a) loads, with a `truncated` diagnostic at or before the cut, and the
//       events are a prefix of the whole file's (same names, times, lanes),
//       every one of them starting before the cut and none but the element
//       the cut went through missing; or
//   (b) fails with an Error whose byte offset lies in [0, cut].
// The parallel reader, with chunks small enough that guessed boundaries land
// everywhere, must agree with the one-thread reader at every cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/file.h"
#include "src/base/gzip.h"
#include "tprof/read.h"

#include "tests/support/sanitizers.h"

namespace tprof {
namespace {

// Sanitizer builds run this suite too (`make test`); they are 20-50x slower,
// so the large fixtures get fewer cut points there. Small files are always
// cut at every byte.
using tprof::testing::kSanitized;

constexpr int kCodes = static_cast<int>(DiagnosticCode::kCount_);

std::string fixture_path(const std::string& relative) { return std::string(TPROF_TEST_DATA) + "/" + relative; }

std::string read_fixture(const std::string& relative) {
  Result<std::string> bytes = internal::read_file(fixture_path(relative));
  EXPECT_TRUE(bytes) << relative << ": " << (bytes ? "" : bytes.error().to_string());
  return bytes ? std::move(bytes).value() : std::string();
}

std::string gunzip_fixture(const std::string& relative) {
  const std::string gz = read_fixture(relative);
  Result<internal::Inflated> text = internal::gunzip(gz);
  EXPECT_TRUE(text && !text->truncated) << relative;
  return text ? std::string(text->bytes()) : std::string();
}

// `count` cut points spread evenly over [0, size], both ends included.
std::vector<std::size_t> even_cuts(std::size_t size, std::size_t count) {
  std::vector<std::size_t> cuts;
  if (count >= size + 1) {
    for (std::size_t i = 0; i <= size; ++i) cuts.push_back(i);
    return cuts;
  }
  for (std::size_t i = 0; i < count; ++i) cuts.push_back(i * size / (count - 1));
  return cuts;
}

std::vector<std::size_t> every_cut(std::size_t size) { return even_cuts(size, size + 1); }

// Every byte of a .gz in release builds. Under sanitizers: every byte of the
// first and last 64 (gzip header, last block, CRC and size trailer) and
// `count` cuts in between.
std::vector<std::size_t> gzip_cuts(std::size_t size, std::size_t count) {
  if (!kSanitized) return every_cut(size);
  std::vector<std::size_t> cuts = even_cuts(size, count);
  for (std::size_t i = 0; i <= size && i < 64; ++i) {
    cuts.push_back(i);
    cuts.push_back(size - i);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

// Where offsets in the result point: into the text that was cut, or into the
// compressed bytes (a cut .gz: the gzip diagnostic names the compressed byte,
// the text's own diagnostics name decompressed bytes).
enum class CutSpace { kText, kCompressed };

// What one read of a cut file gave, for comparing the serial and parallel
// readers.
struct Outcome {
  bool ok = false;
  std::size_t events = 0;
  std::int64_t offset = -1;  // the error's, or the first truncated diagnostic's
  std::array<std::uint64_t, kCodes> counts{};
};

Outcome outcome_of(const Result<Trace>& r) {
  Outcome o;
  o.ok = r.has_value();
  if (!o.ok) {
    o.offset = r.error().byte_offset();
    return o;
  }
  o.events = r->events.size();
  for (int c = 0; c < kCodes; ++c) o.counts[c] = r->diagnostics.count(static_cast<DiagnosticCode>(c));
  for (const Diagnostic& d : r->diagnostics.items()) {
    if (d.code == DiagnosticCode::kTruncated) {
      o.offset = d.byte_offset;
      break;
    }
  }
  return o;
}

std::int64_t relative_ts(const Trace& t, std::uint32_t e) {
  return t.events.ts_ns[e] - t.meta.base_time_ns.value_or(0);
}

class CutChecker {
 public:
  // Loads the whole of `bytes` once; every cut is compared with that. The
  // parallel reader gets chunks of `parallel_chunk_bytes`, a few events
  // each, so most cuts fall in a chunk after the first.
  CutChecker(std::string name, std::string bytes, CutSpace space, std::size_t parallel_chunk_bytes)
      : name_(std::move(name)), bytes_(std::move(bytes)), space_(space) {
    serial_.threads = 1;
    parallel_.threads = 3;
    parallel_.min_parallel_bytes = 1;
    parallel_.chunk_bytes = parallel_chunk_bytes;
    Result<Trace> full = read_trace_bytes(bytes_, name_, serial_);
    EXPECT_TRUE(full) << name_ << ": " << (full ? "" : full.error().to_string());
    if (full) full_ = std::move(full).value();
    EXPECT_EQ(full_.diagnostics.count(DiagnosticCode::kTruncated), 0u) << name_;
    EXPECT_GT(full_.events.size(), 0u) << name_;
    const std::size_t last = bytes_.find_last_not_of(" \t\r\n");
    content_end_ = last == std::string::npos ? 0 : last + 1;
  }

  std::size_t size() const { return bytes_.size(); }

  // Checks every cut, stopping at the first failing one to keep the log readable.
  void check(const std::vector<std::size_t>& cuts) {
    ASSERT_FALSE(cuts.empty());
    for (std::size_t cut : cuts) {
      check_cut(cut);
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << name_ << ": first failing cut at byte " << cut << " of " << bytes_.size();
        return;
      }
    }
  }

 private:
  void check_cut(std::size_t cut) {
    SCOPED_TRACE(name_ + " cut at byte " + std::to_string(cut) + " of " + std::to_string(bytes_.size()));
    const std::string_view cut_bytes = std::string_view(bytes_).substr(0, cut);
    const Result<Trace> serial = read_trace_bytes(cut_bytes, name_, serial_);
    const Result<Trace> parallel = read_trace_bytes(cut_bytes, name_, parallel_);

    const Outcome s = outcome_of(serial);
    const Outcome p = outcome_of(parallel);
    EXPECT_EQ(s.ok, p.ok) << "parallel: " << (parallel ? "loaded" : parallel.error().to_string());
    EXPECT_EQ(s.events, p.events);
    EXPECT_EQ(s.offset, p.offset);
    EXPECT_EQ(s.counts, p.counts);

    if (!serial) {
      EXPECT_GE(serial.error().byte_offset(), 0) << serial.error().to_string();
      EXPECT_LE(serial.error().byte_offset(), static_cast<std::int64_t>(cut)) << serial.error().to_string();
      return;
    }
    check_loaded(*serial, cut);
  }

  void check_loaded(const Trace& t, std::size_t cut) {
    const std::size_t n = t.events.size();
    ASSERT_LE(n, full_.events.size());
    for (std::uint32_t e = 0; e < n; ++e) {
      ASSERT_EQ(t.name(e), full_.name(e)) << "event " << e;
      ASSERT_EQ(relative_ts(t, e), relative_ts(full_, e)) << "event " << e << " " << t.name(e);
      ASSERT_EQ(t.events.phase[e], full_.events.phase[e]) << "event " << e;
      // A B event whose E was cut off keeps dur 0; every other duration is the file's.
      if (!(t.events.flags[e] & kFlagFromBeginEnd)) {
        ASSERT_EQ(t.events.dur_ns[e], full_.events.dur_ns[e]) << "event " << e << " " << t.name(e);
      }
      const Lane& lane = t.lanes[t.events.lane[e]];
      const Lane& full_lane = full_.lanes[full_.events.lane[e]];
      ASSERT_EQ(lane.pid, full_lane.pid) << "event " << e;
      ASSERT_EQ(lane.tid, full_lane.tid) << "event " << e;
    }
    // A base time that is there at all is the whole number, not a cut one.
    if (t.meta.base_time_ns) {
      EXPECT_EQ(t.meta.base_time_ns, full_.meta.base_time_ns);
    }
    EXPECT_LE(t.memory.size(), full_.memory.size());

    std::vector<const Diagnostic*> truncated;
    for (const Diagnostic& d : t.diagnostics.items()) {
      if (d.code == DiagnosticCode::kTruncated) truncated.push_back(&d);
    }
    if (truncated.empty()) {
      // Only a cut that removed nothing but trailing whitespace loads whole
      // without a word (a .gz cut anywhere is damage).
      EXPECT_GE(cut, space_ == CutSpace::kText ? content_end_ : bytes_.size());
      EXPECT_EQ(n, full_.events.size());
      return;
    }
    if (space_ == CutSpace::kCompressed) {
      // The gzip diagnostic comes first and names a compressed offset.
      EXPECT_NE(truncated.front()->message.find("gzip"), std::string::npos) << truncated.front()->message;
      EXPECT_GE(truncated.front()->byte_offset, 0);
      EXPECT_LE(truncated.front()->byte_offset, static_cast<std::int64_t>(cut)) << truncated.front()->message;
      return;
    }
    EXPECT_EQ(truncated.size(), 1u);
    EXPECT_GE(truncated.front()->byte_offset, 0);
    EXPECT_LE(truncated.front()->byte_offset, static_cast<std::int64_t>(cut)) << truncated.front()->message;
    // Every loaded event starts before the cut, and of the events that start
    // before it only the one the cut went through may be missing.
    std::size_t started = 0;
    for (std::uint32_t e = 0; e < full_.events.size(); ++e) {
      if (full_.events.src_offset[e] < cut) ++started;
    }
    for (std::uint32_t e = 0; e < n; ++e) ASSERT_LT(t.events.src_offset[e], cut) << "event " << e;
    EXPECT_GE(n + 1, started) << "complete events before the cut were lost";
  }

  std::string name_;
  std::string bytes_;
  CutSpace space_;
  ReadOptions serial_;
  ReadOptions parallel_;
  Trace full_;
  std::size_t content_end_ = 0;
};

TEST(Truncation, KinetoObject2022EveryByte) {
  CutChecker c("hta_backward_thread_2022-10.json", read_fixture("kineto-public/hta_backward_thread_2022-10.json"),
               CutSpace::kText, 256);
  c.check(every_cut(c.size()));
}

TEST(Truncation, GzipDecompressedTextEveryByte) {
  // CPU-only Kineto trace with baseTimeNanoseconds, 25 KB of text.
  const std::string path = "public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz";
  CutChecker c(path, gunzip_fixture(path), CutSpace::kText, 1024);
  c.check(kSanitized ? even_cuts(c.size(), 1500) : every_cut(c.size()));
}

TEST(Truncation, GzipCompressedBytesEveryByte) {
  // torch's tensorboard_trace_handler(use_gzip=True) output: a legacy array.
  const std::string path = "torch-1.13/mlp/tb_gz/worker0.1795319515914.pt.trace.json.gz";
  CutChecker c(path, read_fixture(path), CutSpace::kCompressed, 2048);
  c.check(gzip_cuts(c.size(), 300));
}

TEST(Truncation, GzipCompressedKinetoEveryByte) {
  const std::string path = "public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz";
  CutChecker c(path, read_fixture(path), CutSpace::kCompressed, 1024);
  c.check(gzip_cuts(c.size(), 300));
}

TEST(Truncation, LegacyArray) {
  CutChecker c("cycle0.json", read_fixture("torch-1.13/mlp/cycle0.json"), CutSpace::kText, 2048);
  c.check(even_cuts(c.size(), kSanitized ? 300 : 1200));
}

TEST(Truncation, KinetoWithMemoryEvents) {
  CutChecker c("memory.kineto.json", read_fixture("torch-1.13/memory/memory.kineto.json"), CutSpace::kText, 1024);
  c.check(even_cuts(c.size(), kSanitized ? 400 : 2000));
}

TEST(Truncation, Kineto2021StringTids) {
  // 2021 (old category names, string tids, flows), 774 KB of text.
  const std::string path =
      "public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.excerpt.pt.trace.json.gz";
  CutChecker c(path, gunzip_fixture(path), CutSpace::kText, 16 << 10);
  c.check(even_cuts(c.size(), kSanitized ? 100 : 1000));
}

TEST(Truncation, KinetoWithBaseTimeAndFloatMicros) {
  CutChecker c("after_fix_trace.json", read_fixture("public/kineto/docs/traces/after_fix_trace.json"),
               CutSpace::kText, 1024);
  c.check(even_cuts(c.size(), kSanitized ? 400 : 2000));
}

}  // namespace
}  // namespace tprof
