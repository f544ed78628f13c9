// thread_pool: a C++ program instrumented with tprof::capture the way a
// production service would be (docs/capture.md walks through it): a pool of
// 4 workers fed through a queue, with static and run-time named scopes,
// arguments, shapes, instants, a counter, flows from each submit to the
// worker that runs the job, allocations, and a wait/warmup/active/repeat
// schedule whose windows go to a tensorboard-style handler.
//
//   build/examples/thread_pool traces/thread_pool    # two windows, two files
//   build/tools/tprof/tprof table traces/thread_pool/strict.*.pt.trace.json
//
// tests/consumer/consumer_test.sh builds this file against the installed
// library with the strictest flags (-Wall -Wextra -Wpedantic -Wconversion
// -Wsign-conversion -Wshadow -Werror), GCC and clang, C++17, with
// TPROF_ENABLE=1 (run, traces read back) and 0.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tprof/profiler.h"
#include "tprof/record_function.h"

static_assert(__cplusplus == 201703L, "this consumer is built as C++17");

namespace {

class Pool {
 public:
  explicit Pool(int workers) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this] { run(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void submit(std::function<void()> job) {
    // The flow links the submit to the run on whichever worker takes it.
    const tprof::Flow flow = tprof::flow_begin("job");
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back({std::move(job), flow});
      // A local computed only for the counter: with TPROF_ENABLE=0 it must
      // still count as used.
      const std::size_t depth = jobs_.size();
      TPROF_COUNTER("queue depth", depth);
    }
    cv_.notify_one();
  }
  void wait_idle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [this] { return jobs_.empty() && running_ == 0; });
  }

 private:
  struct Job {
    std::function<void()> fn;
    tprof::Flow flow;
  };
  void run() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return done_ || !jobs_.empty(); });
        if (done_ && jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
        ++running_;
      }
      tprof::flow_end(job.flow);
      job.fn();
      {
        std::lock_guard<std::mutex> lock(mu_);
        --running_;
      }
      idle_cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Job> jobs_;
  int running_ = 0;
  bool done_ = false;
  std::vector<std::thread> threads_;
};

std::int64_t work(std::int64_t n, int step) {
  TPROF_RECORD_FUNCTION_SCOPE();
  const std::string name = "tile " + std::to_string(step % 3);
  tprof::RecordFunction dynamic(name);  // a run-time name
  TPROF_RECORD_FUNCTION_VAR(scope, "inner");
  TPROF_ARG(scope, "n", n);  // a static key: one record
  scope.arg("step", step).arg("fast", n < 100).arg("ratio", 0.5).arg("kind", "tile");
  const std::int64_t rows = n, cols = 1;  // used only by the shapes
  TPROF_RECORD_OP_SHAPES("op::mm", {{rows, rows}, {rows, cols}});
  std::vector<char> buffer(static_cast<std::size_t>(n));
  tprof::record_alloc(buffer.data(), n);
  std::int64_t s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += i % 7;
  tprof::record_free(buffer.data(), n);
  TPROF_INSTANT("tile done");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "strict_traces";
  tprof::ProfilerOptions options;
  options.schedule = tprof::schedule(tprof::ScheduleOptions{1, 1, 2, 2, 0});
  options.profile_memory = true;
  options.on_trace_ready = tprof::tensorboard_trace_handler(dir, "strict");
  tprof::Profiler prof(options);
  if (const tprof::Status s = prof.start(); !s.ok()) {
    std::fprintf(stderr, "strict: %s\n", s.error().to_string().c_str());
    return 2;
  }
  std::atomic<std::int64_t> sum{0};
  {
    Pool pool(4);
    for (int step = 0; step < 8; ++step) {
      TPROF_RECORD_OP("step body");
      for (int j = 0; j < 8; ++j) pool.submit([&sum, j, step] { sum += work(64 + j, step); });
      pool.wait_idle();
      if (const tprof::Status s = prof.step(); !s.ok()) {
        std::fprintf(stderr, "strict: %s\n", s.error().to_string().c_str());
        return 2;
      }
    }
  }
  if (const tprof::Status s = prof.stop(); !s.ok()) {
    std::fprintf(stderr, "strict: %s\n", s.error().to_string().c_str());
    return 2;
  }
  std::printf("strict: %lld\n", static_cast<long long>(sum.load()));
  return 0;
}
