// Profiler: torch.profiler.profile's state machine over the recorder.
//
//   start() ── transition(NONE → schedule(0)) ── open ProfilerStep#0
//   step()  ── close step ── transition(prev → schedule(n+1)) ── open ProfilerStep#n+1
//   stop()  ── close step ── transition(current → exit)
//
// A transition runs, in order: stop the window (collect its records into a
// Trace), deliver it (on_trace_ready), prepare, start a window — the subset
// torch's table lists for that pair (docs/torch-table-semantics.md §4.1).
#include "tprof/profiler.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/base/clock.h"
#include "src/base/file.h"
#include "src/base/json_writer.h"
#include "src/capture/activity_source.h"
#include "src/capture/graph_nodes.h"
#include "src/capture/recorder.h"
#include "src/capture/recorders.h"
#include "src/capture/trace_builder.h"
#include "src/cupti/cupti_source.h"
#include "src/trace/json_value.h"
#include "tprof/write.h"

// CUDA capture is linked only into programs that ask for it (tprof::cuda,
// pkg-config tprof-cuda: issue 42, item 3). A weak reference pulls nothing
// out of an archive, so a program that links tprof::capture alone carries
// none of CUPTI's code and this is null there; tprof::cuda defines it
// (src/cupti/cupti_source.h). Shared, the loader binds it to
// libtprof_cuda.so's when the program loaded that.
extern "C" __attribute__((weak)) tprof::internal::ActivitySource* tprof_make_cuda_source(
    const tprof::internal::CuptiOptions& options);

namespace tprof {

namespace {

// Activity::kCuda in a program without CUDA capture linked: a source that
// never starts, so that each window records the CPU and says why, as for a
// missing driver. (A tprof built without CUPTI has no source at all; the
// trace builder says that instead.)
class UnlinkedCudaSource final : public internal::ActivitySource {
 public:
  Status start() override {
    return Error(ErrorCode::kUnsupported,
                 "CUDA activity was requested, but this program does not link tprof's CUDA capture "
                 "(CMake: tprof::cuda, find_package(tprof COMPONENTS cuda); pkg-config: tprof-cuda): CPU only");
  }
  void stop(internal::DeviceBatch*) override {}
};

std::atomic<Profiler*> g_active{nullptr};

// ProfilerOptions::toggle_signal: deliveries, counted by the handler (an
// atomic add is async-signal-safe); the profiler acts on them at step().
std::atomic<unsigned> g_toggles{0};
struct sigaction g_toggle_old {};
// The signal whose handler a running profiler installed (0: none), for the
// fork child's handler (forget_profiler_in_child); g_toggle_old is written
// before it is stored.
std::atomic<int> g_toggle_installed{0};

void on_toggle_signal(int) { g_toggles.fetch_add(1, std::memory_order_relaxed); }

// The kernel's name of this process (/proc/self/comm, at most 15 bytes and
// a newline). Read with plain system calls: the first std::ifstream of a
// process costs ~0.3 ms of locale set-up, inside the first window's stop().
std::string process_name() {
  char buf[64];
  ssize_t n = -1;
  const int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    do {
      n = ::read(fd, buf, sizeof buf);
    } while (n < 0 && errno == EINTR);
    ::close(fd);
  }
  std::string name(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name.empty() ? std::string("tprof") : name;
}

// The window on_trace_ready is delivering on this thread: trace(),
// export_chrome_trace(), key_averages() and step_num() of that profiler
// answer from it (the program's thread has moved on meanwhile).
struct Delivering {
  const Profiler* prof = nullptr;
  const Trace* trace = nullptr;
  std::int64_t step = 0;
};
thread_local Delivering tl_delivering;

}  // namespace

namespace internal {

// The recorder's fork handler, in the child (src/capture/recorder.cc): the
// running profiler is the parent's, inert here (Profiler::disown), so a
// Profiler the child starts may run; the toggle signal's disposition goes
// back to what it was before that profiler's start(). Async-signal-safe.
void forget_profiler_in_child() noexcept {
  g_active.store(nullptr, std::memory_order_relaxed);
  if (const int toggle = g_toggle_installed.exchange(0, std::memory_order_acquire); toggle != 0) {
    sigaction(toggle, &g_toggle_old, nullptr);
  }
}

}  // namespace internal

// Off-thread delivery. The program's thread ends a window by collecting
// its buffers' views (O(threads)) and queueing them; this thread builds the
// trace, releases the buffers, runs on_trace_ready, and leaves the trace for
// the program's thread to take in at its next step()/stop()/flush(). The
// program's thread alone reads and replaces trace_; traces it lets go are
// freed here too (a large one takes milliseconds to free).
//
//   program thread                     tprof-deliver
//   step(): window ends ── Window ──▶  build_trace, release_window(epoch)
//           next window records       on_trace_ready (trace() = this window)
//   step()/flush(): trace_ ◀─ latest ─ latest, first error
namespace {

// An ended window: views of its threads' buffers (held until built), what
// the trace builder needs besides, and its runtime names.
struct PendingWindow {
  std::uint32_t epoch = 0;
  bool ready = false;  // on_trace_ready gets it (else only trace() does)
  std::int64_t step = 0;
  std::vector<internal::ThreadRecords> threads;
  internal::DeviceBatch device;
  internal::TickConversion clock{};
  internal::CaptureInfo info;
  std::unique_ptr<internal::RetiredNames> names;
};

// Turns a window's records into its trace and gives its buffers and names
// back (on whichever thread delivers).
std::unique_ptr<Trace> build_window(PendingWindow& w) {
  w.info.process_name = process_name();
  w.info.names = w.names.get();
  // Streaming windows: the spilled chunks, read back in front of the
  // records in place (the file is closed, its space freed, whatever follows).
  std::unique_ptr<internal::RestoredWindow> restored = internal::restore_spilled(w.epoch, &w.threads);
  if (restored != nullptr && restored->lost > 0) {
    w.info.lost_events += restored->lost;
    w.info.capture_problems.push_back(std::to_string(restored->lost) + " spilled events dropped: " + restored->error);
  }
  // Another copy of the recorder in the process (a plugin that linked tprof
  // statically): its scopes are not here, and the trace says so. Looked up
  // here, off the program's thread (it takes the loader's lock).
  if (std::string other = internal::other_recorders_problem(); !other.empty()) {
    w.info.unrecordable.push_back(std::move(other));
  }
  auto trace = std::make_unique<Trace>(internal::build_trace(w.threads, w.device, w.clock, w.info));
  restored.reset();
  w.threads.clear();
  internal::release_window(w.epoch);
  w.names.reset();  // the trace holds its own copies
  return trace;
}

}  // namespace

struct Profiler::Delivery {
  std::mutex mu;
  std::condition_variable wake;  // the delivery thread: work queued
  std::condition_variable done;  // the program's thread: a window built or delivered
  std::deque<PendingWindow> queue;
  internal::ThreadHandle prefault = nullptr;  // a thread whose buffers to fault in
  internal::ThreadHandle owner = nullptr;     // the program's thread, faulted in again after each build
  bool prefaulting = false;
  std::vector<std::unique_ptr<Trace>> graveyard;
  std::unique_ptr<Trace> latest;  // delivered, not yet taken in
  std::optional<Error> error;     // the first handler error not yet returned
  std::uint64_t later_errors = 0;  // handler errors after it, before it was returned
  std::uint64_t enqueued = 0, built = 0, delivered = 0;
  bool quit = false;
  std::thread thread;
};

Profiler::Profiler(ProfilerOptions options) : options_(std::move(options)), trace_(std::make_unique<Trace>()) {}

Profiler::~Profiler() {
  if (forked_away()) disown();
  if (running_) static_cast<void>(stop());
  stop_delivery();
}

bool Profiler::forked_away() const { return running_ && generation_ != internal::fork_generation(); }

// The child of a fork() with this profiler running in the parent: it
// becomes a stopped profiler whose windows were never this process's.
// Nothing of the parent's is delivered, waited for, read or written.
void Profiler::disown() {
  // Kept, never used nor destroyed: its thread is the parent's (not in this
  // process), its lock may have been held at the fork, and its condition
  // variables count that thread as a waiter (destroying one waits for it
  // for ever); the windows queued in it are the parent's. The device
  // tracer's session is the parent's too (CUPTI does not survive fork()).
  // Held from a static, so that a leak checker does not report them.
  static auto* kept = new std::vector<void*>();
  auto keep = [](void* raw) {
    if (raw == nullptr) return;
    try {
      kept->push_back(raw);
    } catch (...) {
      // No memory: it stays, unreachable.
    }
  };
  keep(delivery_.release());
  keep(device_.release());
  device_started_ = false;
  toggle_installed_ = false;  // restored by the fork handler (forget_profiler_in_child)
  // The fork handler stopped the child's recording; a step() that was
  // inside on_trace_ready at the fork may have opened a window since
  // (unless a profiler of the child's own is running).
  if (g_active.load() == nullptr) internal::g_recording.store(false, std::memory_order_release);
  running_ = false;
  recording_ = false;
  step_ = {};
  action_ = ProfilerAction::kNone;
  forked_ = true;
}

bool Profiler::delivering() const { return tl_delivering.prof == this; }

const Trace& Profiler::trace() const { return delivering() ? *tl_delivering.trace : *trace_; }

std::int64_t Profiler::step_num() const { return delivering() ? tl_delivering.step : step_num_; }

bool Profiler::wants_cuda() const {
  for (Activity a : options_.activities) {
    if (a == Activity::kCuda) return true;
  }
  return false;
}

void Profiler::start_device() {
  if (device_ == nullptr || device_started_) return;
  Status s = device_->start();
  device_started_ = s.ok();
  if (!s.ok()) device_problem_ = s.error().message();
}

namespace {

void write_json(const internal::JsonValue& v, internal::JsonWriter* w) {
  using T = internal::JsonValue::Type;
  switch (v.type()) {
    case T::kNull:
      w->value_null();
      break;
    case T::kBool:
      w->value_bool(v.as_bool());
      break;
    case T::kNumber:
      w->value_raw(v.text());
      break;
    case T::kString:
      w->value_string(v.text());
      break;
    case T::kArray:
      w->begin_array();
      for (const internal::JsonValue& item : v.items()) write_json(item, w);
      w->end_array();
      break;
    case T::kObject:
      w->begin_object();
      for (const auto& [key, member] : v.members()) {
        w->key(key);
        write_json(member, w);
      }
      w->end_object();
      break;
  }
}

Error reentered(const char* what) {
  return Error(ErrorCode::kInvalidArgument,
               std::string(what) + "() called from on_trace_ready: the profiler is delivering a trace");
}

}  // namespace

Status Profiler::start() {
  if (forked_away()) disown();
  if (delivering()) return reentered("start");
  if (running_) return Error(ErrorCode::kInvalidArgument, "the profiler is already running");
  if (options_.schedule.is_set() && !options_.schedule.valid()) {
    return Error(ErrorCode::kInvalidArgument,
                 "invalid profiler schedule arguments (need wait, warmup, repeat, skip_first >= 0 and active > 0)");
  }
  // Per recording thread: records of 32 bytes and the shapes arena. A size
  // no machine can give is refused here, not discovered by the first scope.
  const std::uint64_t per_thread = std::uint64_t{options_.buffer_events_per_thread} * sizeof(internal::Record) +
                                   std::uint64_t{options_.payload_words_per_thread} * sizeof(std::uint64_t);
  if (per_thread > internal::half_physical_memory()) {
    return Error(ErrorCode::kInvalidArgument,
                 "buffer_events_per_thread and payload_words_per_thread ask for " + std::to_string(per_thread >> 20) +
                     " MiB per recording thread, more than half the physical memory");
  }
  const int toggle = options_.toggle_signal;
  if (toggle != 0) {
    if (options_.schedule.is_set()) {
      return Error(ErrorCode::kInvalidArgument, "toggle_signal and a schedule cannot be combined");
    }
    if (toggle < 1 || toggle >= NSIG || toggle == SIGKILL || toggle == SIGSTOP) {
      return Error(ErrorCode::kInvalidArgument, "toggle_signal " + std::to_string(toggle) + " cannot be caught");
    }
  }
  Profiler* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, this)) {
    return Error(ErrorCode::kInvalidArgument, "another tprof::Profiler is running");
  }
  if (toggle != 0) {
    struct sigaction sa {};
    sa.sa_handler = on_toggle_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(toggle, &sa, &g_toggle_old) != 0) {
      g_active.store(nullptr);
      return Error(ErrorCode::kInvalidArgument,
                   "toggle_signal " + std::to_string(toggle) + ": sigaction failed: " + std::strerror(errno));
    }
    toggle_installed_ = true;
    g_toggle_installed.store(toggle, std::memory_order_release);
    toggles_seen_ = g_toggles.load(std::memory_order_relaxed);
  }
  internal::configure_buffers(options_.buffer_events_per_thread, options_.payload_words_per_thread);
  if (Status spill = internal::configure_spill(options_.spill_dir); !spill.ok()) {
    if (toggle_installed_) {
      g_toggle_installed.store(0, std::memory_order_relaxed);
      sigaction(toggle, &g_toggle_old, nullptr);
      toggle_installed_ = false;
    }
    g_active.store(nullptr);
    return spill;
  }
  if (wants_cuda() && device_ == nullptr && tprof_make_cuda_source != nullptr) {
    // NVTX ranges reach CUPTI only where NVTX_INJECTION64_PATH names
    // libcupti (tprof record sets it); elsewhere this costs nothing.
    static constexpr internal::NvtxRanges kRecorderRanges{internal::push_range, internal::pop_range,
                                                          internal::start_range, internal::end_range};
    // CUDA graph nodes as the program makes them: records of its threads,
    // linked to their scopes by build_trace like API calls.
    static constexpr internal::GraphNodes kRecorderGraphNodes{internal::graph_node_created,
                                                              internal::graph_node_cloned};
    internal::CuptiOptions cupti;
    cupti.nvtx = &kRecorderRanges;
    cupti.graph_nodes = &kRecorderGraphNodes;
    cupti.api_calls = options_.cuda_api_calls == CudaApiCalls::kAll ? internal::CuptiApiCalls::kAll
                                                                     : internal::CuptiApiCalls::kTorch;
    cupti.sync_events = options_.cuda_sync_events;
    // profile_memory covers CUDA's allocations too (CUPTI's memory
    // activity), as torch's covers its CUDA caching allocator's.
    cupti.memory = options_.profile_memory;
    device_.reset(tprof_make_cuda_source(cupti));
  }
#if TPROF_HAVE_CUPTI
  if (wants_cuda() && device_ == nullptr) device_ = std::make_unique<UnlinkedCudaSource>();
#endif
  running_ = true;
  forked_ = false;
  generation_ = internal::fork_generation();  // before the delivery thread reads it
  step_num_ = 0;
  if (!options_.deliver_inline) start_delivery();
  // On demand: armed, no window until the first toggle.
  action_ = toggle != 0 ? ProfilerAction::kNone : options_.schedule(0);
  Status s = transition(ProfilerAction::kNone, action_, false);
  open_step();
  // The delivery thread faults in this thread's buffers now, ahead of the
  // windows (the one a window starting here attached is done: left alone).
  // Without a schedule or toggles there is one window, in one buffer.
  if (delivery_ != nullptr && (options_.schedule.is_set() || toggle != 0)) {
    const internal::ThreadHandle self = internal::register_thread();
    {
      const std::lock_guard<std::mutex> lock(delivery_->mu);
      delivery_->prefault = self;
      delivery_->owner = self;
    }
    delivery_->wake.notify_one();
  }
  return s;
}

void Profiler::start_delivery() {
  if (delivery_ != nullptr) return;
  delivery_ = std::make_unique<Delivery>();
  delivery_->thread = std::thread([this] { run_delivery(); });
}

void Profiler::stop_delivery() {
  if (delivery_ == nullptr) return;
  {
    const std::lock_guard<std::mutex> lock(delivery_->mu);
    delivery_->quit = true;
  }
  delivery_->wake.notify_one();
  delivery_->thread.join();  // it delivers what is queued first
  delivery_.reset();
}

void Profiler::run_delivery() {
  pthread_setname_np(pthread_self(), "tprof-deliver");
  Delivery& d = *delivery_;
  std::unique_lock<std::mutex> lock(d.mu);
  for (;;) {
    d.wake.wait(lock, [&] { return d.quit || !d.queue.empty() || d.prefault != nullptr || !d.graveyard.empty(); });
    if (!d.graveyard.empty()) {
      std::vector<std::unique_ptr<Trace>> dead;
      dead.swap(d.graveyard);
      lock.unlock();
      dead.clear();
      lock.lock();
      continue;
    }
    if (d.prefault != nullptr && !d.quit) {  // not worth it any more at stop()
      const internal::ThreadHandle thread = d.prefault;
      d.prefault = nullptr;
      d.prefaulting = true;
      lock.unlock();
      internal::prefault_thread(thread);
      lock.lock();
      d.prefaulting = false;
      d.done.notify_all();
      continue;
    }
    if (!d.queue.empty()) {
      PendingWindow w = std::move(d.queue.front());
      d.queue.pop_front();
      lock.unlock();
      std::unique_ptr<Trace> trace = build_window(w);
      // The buffer just released, or one of an old size, is ready before
      // the program's thread needs it for the window after next.
      internal::prefault_thread(d.owner);
      lock.lock();
      ++d.built;  // its buffers are free: a window waiting to begin may
      lock.unlock();
      d.done.notify_all();
      Status s;
      if (w.ready && options_.on_trace_ready) s = deliver_now(*trace, w.step);
      // fork() inside on_trace_ready: in the child, this thread is the
      // only one, with no program to return to; it ends here (the child
      // then exits 0, as a process does when its last thread ends).
      if (internal::fork_generation() != generation_) return;
      std::unique_ptr<Trace> old;
      lock.lock();
      if (!s.ok()) {
        if (d.error.has_value()) {
          ++d.later_errors;
        } else {
          d.error = s.error();
        }
      }
      old = std::move(d.latest);  // never taken in: superseded
      d.latest = std::move(trace);
      ++d.delivered;
      lock.unlock();
      d.done.notify_all();
      old.reset();
      lock.lock();
      continue;
    }
    if (d.quit) return;
  }
}

Status Profiler::deliver_now(const Trace& trace, std::int64_t step) {
  // The user's code: an exception becomes the call's error (it would
  // otherwise leave the profiler half-stopped, end the delivery thread, or
  // terminate in ~Profiler).
  const Delivering outer = tl_delivering;
  tl_delivering = Delivering{this, &trace, step};
  Status status;
  try {
    status = options_.on_trace_ready(*this);
  } catch (const std::exception& e) {
    status = Error(ErrorCode::kInternal, std::string("on_trace_ready threw: ") + e.what());
  } catch (...) {
    status = Error(ErrorCode::kInternal, "on_trace_ready threw an exception that is not a std::exception");
  }
  tl_delivering = outer;
  return status;
}

// A window may begin only while at most one ended window is unbuilt: each
// recording thread then has a free buffer of its two.
void Profiler::wait_for_room() {
  if (delivery_ == nullptr) return;
  Delivery& d = *delivery_;
  std::unique_lock<std::mutex> lock(d.mu);
  if (d.enqueued - d.built < 2) return;
  const auto t0 = std::chrono::steady_clock::now();
  d.done.wait(lock, [&] { return d.enqueued - d.built < 2; });
  ++stats_.waits;
  stats_.wait_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

bool Profiler::backlog_full() const {
  if (delivery_ == nullptr) return false;
  const std::lock_guard<std::mutex> lock(delivery_->mu);
  return delivery_->enqueued - delivery_->built >= 2;
}

Status Profiler::take_delivered() {
  if (delivery_ == nullptr) return {};
  Delivery& d = *delivery_;
  Status s;
  {
    const std::lock_guard<std::mutex> lock(d.mu);
    if (d.latest != nullptr) {
      // The trace let go is freed on the delivery thread.
      d.graveyard.push_back(std::move(trace_));
      trace_ = std::move(d.latest);
    }
    if (d.error.has_value()) {
      Error e = std::move(*d.error);
      d.error.reset();
      if (d.later_errors > 0) {
        e = Error(e.code(), e.message() + " (and " + std::to_string(d.later_errors) +
                                " later on_trace_ready errors)", e.path(), e.byte_offset());
        d.later_errors = 0;
      }
      s = std::move(e);
    }
  }
  d.wake.notify_one();
  return s;
}

Status Profiler::flush() {
  if (forked_away()) disown();
  if (delivering()) return reentered("flush");
  if (delivery_ == nullptr) return {};
  {
    std::unique_lock<std::mutex> lock(delivery_->mu);
    // Idle: every window delivered, the buffers faulted in.
    delivery_->done.wait(lock, [&] {
      const Delivery& d = *delivery_;
      return d.delivered == d.enqueued && (d.quit || (d.prefault == nullptr && !d.prefaulting));
    });
  }
  return take_delivered();
}

ProfilerAction Profiler::next_action() {
  if (options_.toggle_signal == 0) return options_.schedule(step_num_);
  const unsigned toggles = g_toggles.load(std::memory_order_relaxed);
  // An even number of deliveries since the last step() changes nothing.
  const bool flip = ((toggles - toggles_seen_) & 1u) != 0;
  toggles_seen_ = toggles;
  const bool recording = action_ == ProfilerAction::kRecord;
  if (!flip) return action_;
  // Leaving a window is kRecordAndSave's transition: stop, deliver.
  return recording ? ProfilerAction::kNone : ProfilerAction::kRecord;
}

Status Profiler::step() {
  if (forked_away()) disown();
  if (forked_) return {};  // the parent's profiler, in a fork child: inert
  if (delivering()) return reentered("step");
  if (!running_) return Error(ErrorCode::kInvalidArgument, "step() before start()");
  close_step();
  ProfilerAction prev = action_;
  ++step_num_;
  action_ = next_action();
  if (options_.toggle_signal != 0 && prev == ProfilerAction::kRecord && action_ == ProfilerAction::kNone) {
    prev = ProfilerAction::kRecordAndSave;  // the window ends here: stop and deliver
  }
  Status s = transition(prev, action_, false);
  open_step();
  if (!s.ok()) return s;  // an earlier window's error waits for the next call
  return take_delivered();
}

Status Profiler::stop() {
  if (forked_away()) disown();
  if (delivering()) return reentered("stop");
  if (!running_) return {};
  close_step();
  Status s = transition(action_, ProfilerAction::kNone, true);
  // torch's prof.stop(); prof.export_chrome_trace(...): the last window is
  // delivered, and trace() is it, when stop() returns.
  Status delivered = flush();
  stop_delivery();
  if (s.ok()) s = std::move(delivered);
  // Every window is built: nothing is left for the spill thread.
  if (!options_.spill_dir.empty()) static_cast<void>(internal::configure_spill({}));
  if (device_started_) {
    internal::DeviceBatch unused;  // only a warmup's: no window was open
    device_->stop(&unused);
    device_started_ = false;
  }
  running_ = false;
  if (toggle_installed_) {
    g_toggle_installed.store(0, std::memory_order_relaxed);
    sigaction(options_.toggle_signal, &g_toggle_old, nullptr);
    toggle_installed_ = false;
  }
  g_active.store(nullptr);
  return s;
}

void Profiler::open_step() {
  // Without a schedule torch adds no step annotations; on-demand windows
  // have them, so that a window is whole steps.
  if ((!options_.schedule.is_set() && options_.toggle_signal == 0) || !recording_) return;
  // Its record is taken now, before any scope of the step: a buffer that
  // fills during the step keeps the step.
  internal::open_span(static_cast<std::uint64_t>(step_num_), internal::kRecordStep, 0, &step_);
}

void Profiler::close_step() {
  if (step_.buffer == nullptr) return;
  if (recording_) internal::close_span(step_);
  step_ = {};
}

void Profiler::start_window() {
  // Off-thread: not while two ended windows still hold their buffers; a
  // server that must not wait skips the window instead (no buffer is
  // touched: the two in use stay the delivery thread's).
  if (options_.on_backlog == ProfilerOptions::Backlog::kSkip && backlog_full()) {
    window_skipped_ = true;
    ++stats_.skipped;
    ++skipped_unreported_;
    return;
  }
  wait_for_room();
  device_problem_.clear();
  start_device();
  internal::TickClock::instance().sample();
  window_start_ns_ = internal::realtime_ns();
  window_start_ticks_ = internal::read_ticks();
  window_start_monotonic_ns_ = static_cast<std::int64_t>(internal::monotonic_ns());
  internal::g_epoch.fetch_add(1, std::memory_order_relaxed);
  // The calling thread (the training loop's) attaches now, its pages
  // faulted in, so its first scope in the window pays neither (off-thread,
  // the delivery thread faulted them in already, and this attaches only).
  static_cast<void>(internal::prepare_thread_buffer());
  internal::g_record_shapes.store(options_.record_shapes, std::memory_order_relaxed);
  internal::g_profile_memory.store(options_.profile_memory, std::memory_order_relaxed);
  internal::g_recording.store(true, std::memory_order_release);
  recording_ = true;
}

Status Profiler::stop_window(bool ready) {
  if (window_skipped_) {
    // Nothing was recorded. A device source a warmup started is stopped
    // with the window it was started for; what it holds is discarded.
    window_skipped_ = false;
    if (device_started_) {
      internal::DeviceBatch discarded;
      device_->stop(&discarded);
      device_started_ = false;
    }
    return {};
  }
  internal::g_recording.store(false, std::memory_order_release);
  // Scopes that end after this tick are still open at the window's end.
  const std::uint64_t window_end_ticks = internal::read_ticks();
  recording_ = false;
  internal::TickClock::instance().sample();
  PendingWindow w;
  w.clock = internal::TickClock::instance().conversion();
  w.ready = ready && options_.on_trace_ready != nullptr;
  w.step = step_num_;
  internal::CaptureInfo& info = w.info;
  info.pid = static_cast<std::int64_t>(getpid());
  info.window_start_ns = window_start_ns_;
  info.window_start_monotonic_ns = window_start_monotonic_ns_;
  info.window_start_ticks = window_start_ticks_;
  info.cuda_requested = wants_cuda();
  info.cuda_available = device_ != nullptr;
  info.metadata = metadata_;
  info.window_end_ticks = window_end_ticks;
  info.graph_nodes = &internal::graph_node_scopes();
  if (device_started_) {
    device_->stop(&w.device);
    device_started_ = false;
  }
  if (!device_problem_.empty()) w.device.problems.push_back(device_problem_);
  if (skipped_unreported_ > 0) {
    info.capture_problems.push_back(std::to_string(skipped_unreported_) +
                                    " window(s) before this one were not recorded: two ended windows were still "
                                    "being built when they began (ProfilerOptions::on_backlog = kSkip)");
    skipped_unreported_ = 0;
  }
  // Views of the buffers, held until the trace is built, and the window's
  // runtime names: O(threads), no record is read or copied here.
  w.epoch = internal::g_epoch.load(std::memory_order_relaxed);
  w.threads = internal::collect(w.epoch);
  w.names = internal::retire_dynamic_names();
  if (delivery_ != nullptr) {
    {
      const std::lock_guard<std::mutex> lock(delivery_->mu);
      delivery_->queue.push_back(std::move(w));
      ++delivery_->enqueued;
    }
    delivery_->wake.notify_one();
    ++stats_.windows;
    return {};
  }
  // Inline: the previous window's trace goes first: its memory is free for
  // this one's (the two never coexist, and repeated windows reuse the pages).
  trace_.reset();
  trace_ = build_window(w);
  return w.ready ? deliver_now(*trace_, w.step) : Status();
}

Status Profiler::transition(ProfilerAction from, ProfilerAction to, bool exiting) {
  using A = ProfilerAction;
  bool start = false, stop = false, ready = false;
  if (exiting) {
    if (from == A::kWarmup) start = stop = true;
    if (from == A::kRecord || from == A::kRecordAndSave) stop = ready = true;
  } else {
    switch (from) {
      case A::kNone:
        start = to == A::kRecord || to == A::kRecordAndSave;
        break;
      case A::kWarmup:
        start = to != A::kWarmup;
        stop = to == A::kNone;
        break;
      case A::kRecord:
        stop = to == A::kNone || to == A::kWarmup;
        break;
      case A::kRecordAndSave:
        stop = ready = true;
        start = to == A::kRecord || to == A::kRecordAndSave;
        break;
    }
  }
  // torch: a warmup followed directly by NONE starts and stops at once.
  if (start && stop && !ready) {
    start_window();
    return stop_window(false);
  }
  Status status;
  if (stop) status = stop_window(ready);
  // torch's prepare: the GPU tracer starts with the warmup, so that its
  // set-up cost is not in the recorded window; so do this thread's buffer
  // pages (inline: here, prepare_thread_buffer; off-thread: the delivery
  // thread faults them in from start() on).
  if (to == A::kWarmup && !exiting) {
    start_device();
    if (delivery_ == nullptr) static_cast<void>(internal::prepare_thread_buffer());
  }
  if (start) start_window();
  return status;
}

SpillStats Profiler::spill_stats() const {
  const internal::SpillCounters c = internal::spill_counters();
  return SpillStats{c.chunks, c.bytes, c.waits, c.wait_ns, c.dropped};
}

Status Profiler::export_chrome_trace(const std::string& path) const { return write_trace(trace(), path); }

Status Profiler::add_metadata(const std::string& key, const std::string& value) {
  std::string json;
  internal::JsonWriter w(&json);
  w.value_string(value);
  return add_metadata_json(key, *w.out());  // out(): flushed
}

Status Profiler::add_metadata_json(const std::string& key, const std::string& json) {
  static constexpr std::string_view kOwn[] = {"traceEvents",     "schemaVersion",       "deviceProperties",
                                              "displayTimeUnit", "baseTimeNanoseconds", "tprof"};
  if (key.empty()) return Error(ErrorCode::kInvalidArgument, "add_metadata: the key is empty");
  for (std::string_view own : kOwn) {
    if (key == own) {
      return Error(ErrorCode::kInvalidArgument, "add_metadata: \"" + key + "\" is a key tprof writes itself");
    }
  }
  Result<internal::JsonValue> parsed = internal::JsonValue::parse(json);
  if (!parsed) {
    return Error(ErrorCode::kInvalidArgument,
                 "add_metadata_json(\"" + key + "\"): not one valid JSON value: " + parsed.error().to_string());
  }
  // Stored as tprof's writer writes JSON: compact, valid UTF-8, no NaN.
  std::string canonical;
  {
    internal::JsonWriter w(&canonical);
    write_json(*parsed, &w);
  }
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(canonical);
      return {};
    }
  }
  metadata_.emplace_back(key, std::move(canonical));
  return {};
}

}  // namespace tprof
