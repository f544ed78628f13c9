// libtprof_inject.so: `tprof record` for unmodified CUDA programs.
//
//   tprof record -- ./app args      (tools/tprof/record_cmd.cc)
//     sets CUDA_INJECTION64_PATH=libtprof_inject.so, NVTX_INJECTION64_PATH=libcupti,
//     TPROF_RECORD_* (below), runs the program
//   the CUDA driver, at cuInit ──▶ InitializeInjection()
//     ── a tprof::Profiler with CPU and CUDA activities (CUPTI, NVTX ranges)
//     ── window: from TPROF_RECORD_DELAY_MS after cuInit, for
//        TPROF_RECORD_DURATION_MS (0: until exit), on a timer thread
//     ── at the window's end or at exit: the trace, cut to the first NVTX
//        range named TPROF_RECORD_NVTX_RANGE when set, written as
//        tensorboard_trace_handler(TPROF_RECORD_DIR) names it
//
// Environment (set by tprof record): TPROF_RECORD_DIR (default "."),
// TPROF_RECORD_WORKER (file name prefix; default <host>_<pid>),
// TPROF_RECORD_GZIP=1, TPROF_RECORD_DELAY_MS, TPROF_RECORD_DURATION_MS,
// TPROF_RECORD_NVTX_RANGE.
//
// An NVTX range window is cut from a recording of the whole run rather than
// opened and closed by the range's callbacks: the cut is exact (the range's
// own start and end), and no profiler state changes inside an NVTX call.
//
// Only InitializeInjection is exported (inject.map): the tprof inside this
// library never meets a tprof the program itself links.
#include <cstdlib>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "src/capture/handlers.h"
#include "src/trace/select.h"
#include "tprof/profiler.h"
#include "tprof/write.h"

namespace {

std::int64_t env_ms(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return (end != nullptr && *end == '\0' && n > 0) ? static_cast<std::int64_t>(n) : 0;
}

std::string env_str(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(fallback);
}

// The one recording of this process. Never destroyed: its exit handler and
// timer thread may run while static destructors do.
class Session {
 public:
  void begin() {
    const std::int64_t delay_ms = env_ms("TPROF_RECORD_DELAY_MS");
    duration_ms_ = env_ms("TPROF_RECORD_DURATION_MS");
    tprof::ProfilerOptions options;
    options.activities = {tprof::Activity::kCpu, tprof::Activity::kCuda};
    const char* gzip = std::getenv("TPROF_RECORD_GZIP");
    dir_ = env_str("TPROF_RECORD_DIR", ".");
    worker_ = env_str("TPROF_RECORD_WORKER", "");
    gzip_ = gzip != nullptr && gzip[0] == '1';
    range_ = env_str("TPROF_RECORD_NVTX_RANGE", "");
    options.on_trace_ready = [this](tprof::Profiler& p) { return write(p.trace()); };
    profiler_ = std::make_unique<tprof::Profiler>(std::move(options));
    std::atexit([] { instance().end(); });
    if (delay_ms == 0 && duration_ms_ == 0) {
      start();
      return;
    }
    std::thread([this, delay_ms] { timer(delay_ms); }).detach();
  }

  static Session& instance() {
    static Session* s = new Session();
    return *s;
  }

 private:
  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ended_) started_ = profiler_->start().ok();
  }

  void end() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    ended_ = true;
    // stop() delivers the trace to the handler, which writes it.
    if (started_) static_cast<void>(profiler_->stop());
    cv_.notify_all();
  }

  // Writes the trace, or the first NVTX range named range_ of it (nothing
  // when that range never ran).
  tprof::Status write(const tprof::Trace& t) {
    if (range_.empty()) return emit(t);
    for (std::uint32_t e = 0; e < t.events.size(); ++e) {
      if (t.events.kind[e] != tprof::EventKind::kUserAnnotation || t.name(e) != range_) continue;
      return emit(tprof::internal::select_window(t, t.events.ts_ns[e], t.events.ts_ns[e] + t.events.dur_ns[e]));
    }
    return {};
  }
  tprof::Status emit(const tprof::Trace& t) {
    TPROF_TRY_ASSIGN(std::string path, tprof::internal::tensorboard_trace_path(dir_, &worker_, gzip_));
    return tprof::write_trace(t, path);
  }

  void timer(std::int64_t delay_ms) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(delay_ms), [&] { return ended_; })) return;
    }
    start();
    if (duration_ms_ == 0) return;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::milliseconds(duration_ms_), [&] { return ended_; })) return;
    }
    end();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<tprof::Profiler> profiler_;
  std::int64_t duration_ms_ = 0;
  std::string dir_, worker_, range_;
  bool gzip_ = false;
  bool started_ = false;
  bool ended_ = false;
};

}  // namespace

// Called by the CUDA driver when it initializes, in the thread that called
// cuInit (CUDA_INJECTION64_PATH). Returns nonzero: success.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::once_flag once;
  std::call_once(once, [] { Session::instance().begin(); });
  return 1;
}
