// A window records far more events than its buffers hold: memory stays at
// the configured buffer size and every event beyond it is dropped and
// counted exactly (issue target: 10M events, buffer_events_per_thread = 1M).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/sanitizers.h"
#include "tprof/profiler.h"


namespace tprof {
namespace {

// Resident set size now, from /proc/self/statm (pages).
std::int64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Peak resident set size (VmHWM), from /proc/self/status.
std::int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      std::int64_t kb = 0;
      fields >> kb;
      return kb * 1024;
    }
  }
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0); false if not allowed.
bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

TEST(CaptureMemory, TenMillionEventsStayWithinTheBufferAndDropsAreExact) {
  constexpr std::uint32_t kCapacity = 1'000'000;
  constexpr std::uint64_t kEvents = 10'000'000;
  constexpr std::int64_t kRecordBytes = 32;

  ProfilerOptions options;
  options.buffer_events_per_thread = kCapacity;
  Profiler prof(options);
  const bool peak_reset = reset_peak_rss();
  const std::int64_t rss_before = rss_bytes();
  ASSERT_TRUE(prof.start());
  for (std::uint64_t i = 0; i < kEvents; ++i) {
    TPROF_RECORD_FUNCTION("memory_test");
  }
  // Before stop(): the Trace that stop() builds is the caller's memory.
  const std::int64_t peak_after = peak_reset ? peak_rss_bytes() : rss_bytes();
  ASSERT_TRUE(prof.stop());

  const Trace& t = prof.trace();
  EXPECT_EQ(t.meta.dropped_events, kEvents - kCapacity);
  EXPECT_EQ(t.diagnostics.count(DiagnosticCode::kDroppedEvents), 1u);
  std::uint64_t kept = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e) kept += t.name(e) == "memory_test";
  EXPECT_EQ(kept, kCapacity);

  const std::int64_t growth = peak_after - rss_before;
  const std::int64_t buffer = static_cast<std::int64_t>(kCapacity) * kRecordBytes;
  std::cout << "RSS growth while recording " << kEvents << " events into a " << kCapacity
            << "-event buffer: " << growth / 1024 << " KiB (buffer " << buffer / 1024 << " KiB, "
            << (peak_reset ? "peak RSS" : "RSS") << ")\n";
  if (!tprof::testing::kSanitized) {
    // The buffer and a little more (the payload arena is reserved, not
    // touched, without shapes); never the 320 MB 10M records would take.
    EXPECT_LE(growth, buffer + (4 << 20));
    EXPECT_GE(growth, buffer / 2);  // the records really were written
  }
}

}  // namespace
}  // namespace tprof
