// Complexity of the per-event passes (issue 27): each adversarial shape is
// built at n and 8n events and its pass timed (the best of 3) in one run;
// an O(n log n) pass takes at most about 8 × log(8n)/log(n) ≈ 10× longer
// at 8n, a quadratic one 64×. The bound (24×) leaves room for a noisy,
// shared machine and for caches, and still fails every quadratic pass
// (the old External-id linking and nesting walk gave 56-70x). Times are
// the process's CPU time, so other load on the machine does not count.
// These are ratios measured side by side, not speed targets (bench/ has
// those).
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/sanitizers.h"
#include "tprof/causal.h"
#include "tprof/diagnose.h"
#include "tprof/key_averages.h"
#include "tprof/read.h"

namespace tprof {
namespace {

constexpr double kMaxRatio = 24.0;
constexpr std::size_t kN = 4000;

std::string x(const char* cat, const std::string& name, int tid, double ts, double dur, const std::string& args = "") {
  std::string e = R"({"ph": "X", "cat": ")" + std::string(cat) + R"(", "name": ")" + name + R"(", "pid": 1, "tid": )" +
                  std::to_string(tid) + R"(, "ts": )" + std::to_string(ts) + R"(, "dur": )" + std::to_string(dur);
  if (!args.empty()) e += R"(, "args": {)" + args + "}";
  return e + "}";
}

Trace parse(const std::vector<std::string>& events) {
  std::string json = R"({"schemaVersion": 1, "traceEvents": [)";
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (i) json += ",\n";
    json += events[i];
  }
  json += "]}";
  Result<Trace> t = read_trace_bytes(json);
  EXPECT_TRUE(t.has_value());
  return std::move(t).value();
}

// The process's CPU time (every thread's), not the wall clock: other
// processes on a loaded machine delay a pass without adding to it.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double best_of_3(const std::function<void()>& pass) {
  double best = 1e300;
  for (int r = 0; r < 3; ++r) {
    const double t0 = cpu_seconds();
    pass();
    best = std::min(best, cpu_seconds() - t0);
  }
  return best;
}

// The ratio of the pass's time on shape(8n) to shape(n).
double ratio(const std::function<std::vector<std::string>(std::size_t)>& shape,
             const std::function<void(const Trace&)>& pass) {
  const Trace small = parse(shape(kN));
  const Trace large = parse(shape(8 * kN));
  const double a = best_of_3([&] { pass(small); });
  const double b = best_of_3([&] { pass(large); });
  return b / std::max(a, 1e-6);
}

void table(const Trace& t) { EventList::build(t).key_averages(); }
void diagnose_all(const Trace& t) { diagnose(t); }
void causal(const Trace& t) {
  auto r = analyze_causal(t, {.window_path = true});
  EXPECT_TRUE(r.has_value());
}

// n CPU ops and n kernels, all with External id 1 (link_device_activity).
std::vector<std::string> shared_external_id(std::size_t n) {
  std::vector<std::string> ev;
  for (std::size_t i = 0; i < n; ++i) {
    ev.push_back(x("cpu_op", "aten::op", 1, 10.0 * i, 5, R"("External id": 1)"));
    ev.push_back(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": )" +
                 std::to_string(10.0 * i + 2) + R"(, "dur": 1, "args": {"External id": 1, "device": 0, "stream": 7}})");
  }
  return ev;
}

// n user annotations nested in each other, every name distinct
// (cost_in_children's recursion check, the tree per thread).
std::vector<std::string> deep_nesting(std::size_t n) {
  std::vector<std::string> ev;
  for (std::size_t i = 0; i < n; ++i) {
    ev.push_back(x("user_annotation", "scope" + std::to_string(i), 1, static_cast<double>(i),
                   2.0 * static_cast<double>(n - i) + 1));
  }
  return ev;
}

// The same name, nested in itself n deep (recursion).
std::vector<std::string> deep_recursion(std::size_t n) {
  std::vector<std::string> ev;
  for (std::size_t i = 0; i < n; ++i) {
    ev.push_back(x("user_annotation", "again", 1, static_cast<double>(i), 2.0 * static_cast<double>(n - i) + 1));
  }
  return ev;
}

// One lane, n sequential events of one name.
std::vector<std::string> one_lane_one_name(std::size_t n) {
  std::vector<std::string> ev;
  for (std::size_t i = 0; i < n; ++i) ev.push_back(x("cpu_op", "aten::add", 1, 3.0 * i, 2));
  return ev;
}

// n lanes (threads), one event each, every name distinct.
std::vector<std::string> many_lanes(std::size_t n) {
  std::vector<std::string> ev;
  for (std::size_t i = 0; i < n; ++i) {
    ev.push_back(x("cpu_op", "op" + std::to_string(i), static_cast<int>(i + 1), static_cast<double>(i), 2));
  }
  return ev;
}

// n flows that all end at one event.
std::vector<std::string> flows_to_one_event(std::size_t n) {
  std::vector<std::string> ev;
  ev.push_back(x("cpu_op", "sink", 2, 0, 1e6));
  for (std::size_t i = 0; i < n; ++i) {
    const std::string id = std::to_string(i + 1);
    ev.push_back(x("cpu_op", "src", 1, 3.0 * i, 2));
    ev.push_back(R"({"ph": "s", "cat": "ac2g", "name": "f", "id": )" + id + R"(, "pid": 1, "tid": 1, "ts": )" +
                 std::to_string(3.0 * i + 1) + "}");
    ev.push_back(R"({"ph": "f", "bp": "e", "cat": "ac2g", "name": "f", "id": )" + id +
                 R"(, "pid": 1, "tid": 2, "ts": 10})");
  }
  return ev;
}

// n streams, each with one kernel launched from one thread, and a device
// synchronize after every launch (the causal graph's sync edges).
std::vector<std::string> streams_and_syncs(std::size_t n) {
  std::vector<std::string> ev;
  for (std::size_t i = 0; i < n; ++i) {
    const double t = 20.0 * static_cast<double>(i);
    const std::string corr = std::to_string(2 * i + 1), stream = std::to_string(i + 1);
    ev.push_back(x("cuda_runtime", "cudaLaunchKernel", 1, t, 2, R"("correlation": )" + corr));
    ev.push_back(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": )" + stream + R"(, "ts": )" +
                 std::to_string(t + 3) + R"(, "dur": 5, "args": {"device": 0, "stream": )" + stream +
                 R"(, "correlation": )" + corr + "}}");
    ev.push_back(x("cuda_runtime", "cudaDeviceSynchronize", 1, t + 4, 6, R"("correlation": )" + std::to_string(2 * i + 2)));
  }
  return ev;
}

// One launch, then n cudaEventRecord / cudaStreamWaitEvent pairs with no
// launch after them (the causal graph looks for the next launch of each).
std::vector<std::string> stream_waits(std::size_t n) {
  std::vector<std::string> ev;
  ev.push_back(x("cuda_runtime", "cudaLaunchKernel", 1, 0, 2, R"("correlation": 1)"));
  ev.push_back(R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 3, "dur": 5, )"
               R"("args": {"device": 0, "stream": 7, "correlation": 1}})");
  for (std::size_t i = 0; i < n; ++i) {
    ev.push_back(x("cuda_runtime", "cudaEventRecord", 1, 10.0 + 4.0 * i, 1));
    ev.push_back(x("cuda_runtime", "cudaStreamWaitEvent", 1, 12.0 + 4.0 * i, 1));
  }
  return ev;
}

struct Case {
  const char* name;
  std::vector<std::string> (*shape)(std::size_t);
};

const Case kCases[] = {
    {"shared_external_id", shared_external_id}, {"deep_nesting", deep_nesting},
    {"deep_recursion", deep_recursion},         {"one_lane_one_name", one_lane_one_name},
    {"many_lanes", many_lanes},                 {"flows_to_one_event", flows_to_one_event},
    {"streams_and_syncs", streams_and_syncs},   {"stream_waits", stream_waits},
};

TEST(Complexity, TableIsNearLinearOnEveryShape) {
  // Scaling is the algorithm's, measured in the release build; under a
  // sanitizer it only costs time.
  if (tprof::testing::kSanitized) GTEST_SKIP() << "complexity is checked in the release build";
  for (const Case& c : kCases) {
    const double r = ratio(c.shape, table);
    RecordProperty(std::string("table_") + c.name, std::to_string(r));
    EXPECT_LT(r, kMaxRatio) << c.name << ": table at 8n took " << r << "x its time at n";
  }
}

TEST(Complexity, DiagnoseIsNearLinearOnEveryShape) {
  // Scaling is the algorithm's, measured in the release build; under a
  // sanitizer it only costs time.
  if (tprof::testing::kSanitized) GTEST_SKIP() << "complexity is checked in the release build";
  for (const Case& c : kCases) {
    const double r = ratio(c.shape, diagnose_all);
    RecordProperty(std::string("diagnose_") + c.name, std::to_string(r));
    EXPECT_LT(r, kMaxRatio) << c.name << ": diagnose at 8n took " << r << "x its time at n";
  }
}

}  // namespace
}  // namespace tprof

namespace tprof {
namespace {

// The graph, the replay and every step's critical path (issue 37, item 7).
TEST(Complexity, CausalModelIsNearLinearOnEveryShape) {
  if (tprof::testing::kSanitized) GTEST_SKIP() << "complexity is checked in the release build";
  for (const Case& c : kCases) {
    const double r = ratio(c.shape, causal);
    RecordProperty(std::string("causal_") + c.name, std::to_string(r));
    EXPECT_LT(r, kMaxRatio) << c.name << ": the causal model at 8n took " << r << "x its time at n";
  }
}

}  // namespace
}  // namespace tprof
