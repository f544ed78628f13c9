// tprof/profiler.h — torch.profiler's model for C++ programs.
//
//   tprof::Profiler prof({.activities = {tprof::Activity::kCpu},
//                         .schedule = tprof::schedule({.wait = 1, .warmup = 1, .active = 3, .repeat = 1}),
//                         .on_trace_ready = tprof::tensorboard_trace_handler("./log"),
//                         .record_shapes = true, .profile_memory = true});
//   TPROF_TRY(prof.start());
//   for (int i = 0; i < 5; ++i) {
//     { TPROF_RECORD_FUNCTION("matmul_add"); fn(x, w, b); }
//     TPROF_TRY(prof.step());
//   }
//   TPROF_TRY(prof.stop());
//   TPROF_TRY(prof.export_chrome_trace("trace.json"));
//   // With tprof/profiler_tables.h (target tprof::profiler_tables, C++17; or tprof::tprof), as in torch:
//   std::cout << *prof.key_averages().table({.sort_by = "cpu_time_total", .row_limit = 15});
//
// The schedule follows torch's action table exactly (docs/torch-table-semantics.md
// §4); each recorded step is a "ProfilerStep#N" annotation with the step's
// own number (current PyTorch). The written trace goes through the same
// tprof::Trace writer as the `tprof` CLI.
//
// Layering: this header and the target tprof::capture need only tprof::trace
// and tprof::base, and compile as C++17. key_averages() and events() are
// declared here (so prof.key_averages() reads as in torch) and defined one
// layer up, in tprof::profiler_tables (src/profiler_tables/), with the KeyAverages
// type in tprof/profiler_tables.h.
//
// Delivery: a window's trace is built and handed to on_trace_ready on a
// tprof thread ("tprof-deliver"); the step() that ends a window only takes
// its buffers (microseconds, whatever the window's size) and goes on.
// stop() and flush() wait for the pending windows; trace() on the program's
// thread shows the last window delivered by then. ProfilerOptions::
// deliver_inline keeps torch's behaviour (built and delivered inside step()).
//
// Thread-safety: start/step/stop/flush/export are called from one thread
// (the training loop); scopes and memory hooks from any thread.
//
// fork(): in the child, a profiler the parent had started is inert. Its
// stop(), flush(), step() and destructor return at once, with no error:
// the parent's windows are the parent's (no on_trace_ready, no file, no
// spill file read or written in the child), and trace() is what it was at
// the fork. The child's scopes record nothing until a Profiler started in
// the child (a new one, or this one again) opens a window; that one works
// normally. docs/capture.md, "fork()".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

// trace.h first: GCC 12's -Wshadow takes EventKind::kCpuOp, declared after
// record_function.h's tprof::kCpuOp, for a shadowing declaration.
#include "tprof/trace.h"

#include "tprof/record_function.h"
#include "tprof/status.h"
#include "tprof/internal/visibility.h"

TPROF_API_BEGIN
namespace tprof {

namespace internal {
class ActivitySource;
}  // namespace internal

enum class Activity : std::uint8_t { kCpu, kCuda };

// Which CUDA runtime and driver calls an Activity::kCuda window records.
enum class CudaApiCalls : std::uint8_t {
  // Those torch.profiler records (Kineto's lists): every runtime call but
  // cudaGetDevice, cudaSetDevice, cudaGetLastError and
  // cudaEvent{Create,CreateWithFlags,Destroy}; of the driver's, only
  // cuLaunchKernel, cuLaunchKernelEx and the cuMem* virtual-memory calls.
  // The others are never recorded (CUPTI's per-call switches), which keeps
  // the capture cheap.
  kTorch,
  // Every runtime and driver call the program makes (tprof record --api all).
  kAll,
};

// torch.profiler.ProfilerAction.
enum class ProfilerAction : std::uint8_t { kNone, kWarmup, kRecord, kRecordAndSave };

struct ScheduleOptions {
  int wait = 0;
  int warmup = 0;
  int active = 1;
  int repeat = 0;  // 0: cycle for ever
  int skip_first = 0;
};

// torch.profiler.schedule(): step number -> action. Invalid arguments
// (negative counts, active < 1) make Profiler::start() fail.
class Schedule {
 public:
  Schedule() = default;
  explicit Schedule(ScheduleOptions options) : options_(options), set_(true) {}

  ProfilerAction operator()(std::int64_t step) const;
  bool is_set() const { return set_; }
  bool valid() const;
  const ScheduleOptions& options() const { return options_; }

 private:
  ScheduleOptions options_;
  bool set_ = false;
};

inline Schedule schedule(ScheduleOptions options) { return Schedule(options); }

class Profiler;

// Called when a window's trace is ready (torch's on_trace_ready), on the
// delivery thread (the step()'s thread with deliver_inline). Inside it,
// prof.trace(), export_chrome_trace(), key_averages(), events() and
// step_num() show the window being delivered, even while the program's
// thread records the next one; start()/step()/stop()/flush() return an
// error; add_metadata must not be called. Its error, if any, and an
// exception it throws (as an error naming it: none escapes tprof, not even
// from ~Profiler), is returned by the next step()/stop()/flush() of the
// program's thread (with deliver_inline: by the step()/stop() that
// delivered the trace). Windows are delivered one at a time, in order.
using TraceHandler = std::function<Status(Profiler&)>;

// torch.profiler.tensorboard_trace_handler: writes each trace to
// `dir/<worker>.<epoch ns>.pt.trace.json[.gz]` (a new file each time, never
// replacing one: a taken name moves to the next ns); `worker` defaults to
// "<host>_<pid>" (chosen at the first call and kept). Creates `dir`.
TraceHandler tensorboard_trace_handler(std::string dir, std::string worker = {}, bool use_gzip = false);

struct ProfilerOptions {
  std::vector<Activity> activities = {Activity::kCpu};
  Schedule schedule{};  // unset: every step records; the trace is ready at stop()
  TraceHandler on_trace_ready{};
  bool record_shapes = false;
  // [memory] events: the program's record_alloc/record_free calls and, with
  // Activity::kCuda, every CUDA device allocation and release (CUPTI's
  // memory activity: cudaMalloc, cudaFree, cudaMallocAsync's pools,
  // cudaMallocManaged; pinned host memory as CPU), on the thread that made
  // the call, with torch's running totals (docs/memory.md).
  bool profile_memory = false;
  // Records each thread's buffer holds per window (32 bytes each); more are
  // dropped and counted. Shapes use a separate arena of payload_words_per_thread.
  std::uint32_t buffer_events_per_thread = 1u << 20;
  std::uint32_t payload_words_per_thread = 1u << 18;
  // On-demand windows for long jobs (`kill -USR2 <pid>`): a signal number
  // (0: off). start() installs a handler for it (restored by stop()) and
  // opens no window; each delivery then toggles recording at the next
  // step(): a window opens there, or the open one ends there and its trace
  // goes to on_trace_ready. Steps are "ProfilerStep#N" annotations, as
  // under a schedule; an open window also ends at stop(). Memory stays
  // bounded however long the job runs: each window is released when the
  // next one ends. Cannot be combined with a schedule (kInvalidArgument);
  // SIGKILL, SIGSTOP and numbers outside 1..NSIG-1 are refused.
  int toggle_signal = 0;
  // Activity::kCuda: which runtime and driver calls the trace holds
  // (cat "cuda_runtime" / "cuda_driver"). Default: torch.profiler's.
  CudaApiCalls cuda_api_calls = CudaApiCalls::kTorch;
  // Activity::kCuda: also record CUDA synchronizations (cat "cuda_sync" on
  // the device's lane: stream, event and context syncs, and a stream
  // waiting on an event), as torch's
  // _ExperimentalConfig(enable_cuda_sync_events=True). Off by default, as
  // in torch. Their time is the host waiting: tables never count it as
  // device (CUDA) time.
  bool cuda_sync_events = false;
  // Deliver on the program's thread, as torch does: the step() or stop()
  // that ends a window builds its trace and runs on_trace_ready before it
  // returns (150-200 ms for a 500k-event window, bench/README.md). Off by
  // default: a tprof thread builds and delivers, the window's end costs the
  // program's thread microseconds, and its buffer pages are faulted in by
  // that thread ahead of need. Off-thread, at most two ended windows wait
  // for their traces to be built (each thread's records of one stay in
  // place in one of its two buffers, the next window records into the
  // other); a window that would begin while two wait blocks the program's
  // thread in that step() until the older is built (counted:
  // Profiler::delivery_stats()). Nothing is dropped for a slow handler,
  // unless on_backlog says to skip.
  bool deliver_inline = false;
  // Off-thread delivery, when a window would begin while two ended windows
  // wait to be built: kBlock (default) waits in that step() until the older
  // is built; kSkip never waits: the window is not recorded (its steps run
  // unprofiled; counted in delivery_stats().skipped, and the next recorded
  // window's trace says how many were skipped before it, as a
  // dropped_events diagnostic). For a serving loop that must never stall.
  enum class Backlog : std::uint8_t { kBlock = 0, kSkip = 1 };
  Backlog on_backlog = Backlog::kBlock;
  // Streaming windows: a directory (on disk, not tmpfs: that is memory) for
  // the records of windows longer than the buffers. Empty (default): a
  // window keeps its first buffer_events_per_thread records per thread and
  // drops the rest, counted. Set: each thread's buffer is a ring of 4
  // chunks; a full chunk is handed to a tprof thread ("tprof-spill") that
  // writes it to the window's temporary file, and the thread records on in
  // the next chunk, so memory stays at the buffers' size and nothing is
  // dropped while the disk keeps up. When it does not, a thread whose next
  // chunk is still being written waits for it (up to 50 ms, counted in
  // spill_stats()), then drops records (counted, droppedEvents) until a
  // chunk is free. At the window's end the chunks are read back in order
  // and the trace is the same as an in-memory window's. The file is
  // unlinked when created (none is left behind, even by a crash) and its
  // space freed when the window's trace is built. start() returns kIo
  // when no file can be created in the directory.
  std::string spill_dir{};
};

// Streaming windows' counters since start() (Profiler::spill_stats()).
struct SpillStats {
  std::uint64_t chunks = 0;   // chunks written to spill files
  std::uint64_t bytes = 0;    // bytes written
  std::uint64_t waits = 0;    // times a recording thread waited for a chunk to be written
  std::int64_t wait_ns = 0;   // recording threads' time in those waits
  std::uint64_t dropped = 0;  // records dropped: no chunk free after a wait, or a write failed (also in droppedEvents)
};

// Off-thread delivery's counters (Profiler::delivery_stats()).
struct DeliveryStats {
  std::uint64_t windows = 0;  // windows ended (handed to the delivery thread)
  std::uint64_t waits = 0;    // step()/start() calls that waited for a window to be built
  std::int64_t wait_ns = 0;   // the program's thread's time in those waits
  std::uint64_t skipped = 0;  // windows not recorded: on_backlog = kSkip with two ended windows unbuilt
};

// key_averages()'s result: defined in tprof/profiler_tables.h.
class KeyAverages;

class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  // Stops a running profiler: every pending window is delivered first (its
  // handler errors are lost).
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Errors: kInvalidArgument for an invalid schedule or another profiler
  // already running; kUnsupported is never returned for CUDA — without
  // CUPTI (not built in, no library, no driver or GPU, another profiler
  // holding it, no permission) the window records CPU only and the trace
  // says why in an activity_unavailable diagnostic.
  Status start();
  // Ends step step_num() and begins the next one. A window that ends here
  // is handed to the delivery thread; step() does not wait for it (it
  // waits only when two ended windows are still unbuilt, see
  // deliver_inline). Returns the first error of an earlier window's
  // on_trace_ready not yet returned.
  Status step();
  // Ends the open window, and waits until every window is delivered (so
  // trace(), key_averages() and export_chrome_trace() show the last one
  // when it returns, as in torch). Returns the first handler error not yet
  // returned.
  Status stop();
  // Waits until every ended window has been delivered (its handler
  // returned) and the delivery thread is idle (this thread's buffers
  // faulted in), and returns the first handler error not yet returned;
  // then trace() is the last delivered window's. Does not end a window.
  Status flush();
  // The current step; inside on_trace_ready, the step at which the
  // delivered window ended.
  std::int64_t step_num() const;
  DeliveryStats delivery_stats() const { return stats_; }
  // spill_dir's counters (process-wide, since this profiler's start()); any thread.
  SpillStats spill_stats() const;

  // The last delivered window's trace (empty before the first is). On the
  // program's thread: the reference is valid until its next
  // step()/stop()/flush() (which may take in a newer window); inside
  // on_trace_ready: the window being delivered. Never from other threads.
  const Trace& trace() const;
  // torch's key_averages() and events() over the last window's trace.
  // Defined in tprof::tprof, not tprof::capture: include
  // tprof/profiler_tables.h (or tprof/tprof.h) and link tprof::profiler_tables
  // (C++17; pkg-config tprof-tables) or tprof::tprof.
  KeyAverages key_averages(bool group_by_input_shape = false, int group_by_stack_n = 0) const;
  // prof.events(): one row per event.
  KeyAverages events() const;
  bool profile_memory() const { return options_.profile_memory; }
  // Writes trace() (Kineto JSON; gzip when path ends in .gz).
  Status export_chrome_trace(const std::string& path) const;

  // torch's add_metadata / add_metadata_json: a top-level key of the trace,
  // in every trace this profiler builds after the call (torch keeps it for
  // the current Kineto session only). add_metadata writes `value` as a
  // JSON string; add_metadata_json writes `json`, which must be one valid
  // JSON value ("distributedInfo" is how torch tells ranks apart). The same
  // key again replaces the value. Errors (kInvalidArgument): invalid JSON, an
  // empty key, or a key tprof writes itself (traceEvents, schemaVersion,
  // deviceProperties, displayTimeUnit, baseTimeNanoseconds, tprof).
  Status add_metadata(const std::string& key, const std::string& value);
  Status add_metadata_json(const std::string& key, const std::string& json);

 private:
  Status transition(ProfilerAction from, ProfilerAction to, bool exiting);
  // The action of step step_num_: the schedule's, or the toggles'.
  ProfilerAction next_action();
  struct Delivery;  // the delivery thread and its queue (profiler.cc)
  void start_window();
  Status stop_window(bool ready);
  Status deliver_now(const Trace& trace, std::int64_t step);
  bool delivering() const;
  void start_delivery();
  void stop_delivery();
  void run_delivery();
  void wait_for_room();
  bool backlog_full() const;  // two ended windows wait to be built (off-thread delivery)
  Status take_delivered();
  void open_step();
  void close_step();
  void start_device();
  bool wants_cuda() const;
  // fork(): whether this profiler was started in another process (an
  // ancestor of this one); disown() makes it inert here.
  bool forked_away() const;
  void disown();


  ProfilerOptions options_;
  std::unique_ptr<Trace> trace_;
  std::vector<std::pair<std::string, std::string>> metadata_;  // key, JSON value
  std::int64_t step_num_ = 0;
  ProfilerAction action_ = ProfilerAction::kNone;
  bool running_ = false;
  bool recording_ = false;
  bool window_skipped_ = false;         // the window that should be open was skipped (Backlog::kSkip)
  std::uint64_t skipped_unreported_ = 0;  // skipped windows the next recorded window's trace reports
  std::unique_ptr<Delivery> delivery_;  // off-thread delivery, while running
  DeliveryStats stats_;
  internal::OpenSlot step_;  // the open ProfilerStep#N annotation's record (buffer == nullptr: none)
  std::int64_t window_start_ns_ = 0;
  std::int64_t window_start_monotonic_ns_ = 0;
  std::uint64_t window_start_ticks_ = 0;
  // Kineto's CUDA activities (CUPTI), when asked for and built in. Started
  // when a warmup or window begins, stopped (flushed, disabled) when the
  // window ends.
  std::unique_ptr<internal::ActivitySource> device_;
  bool device_started_ = false;
  std::string device_problem_;  // why it did not start, for this window's trace
  // toggle_signal: the handler's delivery count seen by the last step().
  unsigned toggles_seen_ = 0;
  bool toggle_installed_ = false;
  // internal::fork_generation() at start(); forked_: disowned in a fork
  // child (step() then returns at once, without an error).
  std::uint32_t generation_ = 0;
  bool forked_ = false;
};

}  // namespace tprof
TPROF_API_END
