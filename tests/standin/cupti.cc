// libcupti.so.13, stand-in: the CUPTI calls tprof (and Kineto-like tools)
// make, with real CUPTI's threads, buffers and teardown.
//
//   first call that needs the driver ── the loaded libcuda.so.1, else dlopen
//               it (none to load: CUPTI_ERROR_UNKNOWN)
//   app thread: API enter ── callback ── (the call) ── API record ── callback exit
//               NVTX call (NVTX's injection, InitializeInjectionNvtx2) ── callback
//               no buffer at hand ── bufferRequested (this thread) ── refused: drop, count
//   driver: device work ── pending until the simulated device finishes it
//   app thread: an allocation or release in an API call ── MEMORY2 record (and
//               MEMORY_POOL for a pool's creation) at once, before the call's
//               own API record
//   worker thread (CUPTI's own): finished work ── buffers; FULL buffers ── bufferCompleted
//   cuptiActivityFlushAll(FORCED) on thread T: finished work ── buffers ── every
//               buffer (partial ones too) ── to the worker ── bufferCompleted on
//               the WORKER; T waits for it, then returns
//   driver teardown (context destroyed) ── RESOURCE callback only: buffers not
//               flushed by then are never handed back
//   process exit: the static object below is destroyed (registered with
//               __cxa_atexit when this library was LOADED): counts logged,
//               hooks out of the driver; the state and the worker survive, so
//               a flush from a later exit handler still works
//
// Each of these was checked against CUDA 13.0 / CUPTI 13.0 on an H200
// (tests/standin/README.md, "Checked against real CUDA"). The last point
// used to be the opposite (the state freed, a later call dying of
// SIGSEGV, the reading of PAPI PR #594 for CUDA 13.0.0); the H200 did not
// die, and STANDIN_CUPTI_TEARDOWN=dangle keeps that reading as an option.
//
// STANDIN_CUPTI_LOG=<file>: one line per configuration call and, at the
// end of the process, what was written (tests/standin/README.md).
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <generated_nvtx_meta.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/standin/standin_internal.h"

struct CUpti_Subscriber_st {
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  // Per domain, per cbid: callbacks on.
  std::array<std::array<std::atomic<std::uint8_t>, 1024>, CUPTI_CB_DOMAIN_SIZE> enabled{};
};
struct nvtxDomainRegistration_st {
  std::string name;
};
struct nvtxStringRegistration_st {
  std::string text;
};

namespace standin {
namespace {

constexpr std::size_t kCbidSlots = 1024;
static_assert(CUPTI_DRIVER_TRACE_CBID_SIZE <= kCbidSlots && CUPTI_RUNTIME_TRACE_CBID_SIZE <= kCbidSlots &&
              CUPTI_CBID_RESOURCE_SIZE <= kCbidSlots && CUPTI_CBID_NVTX_SIZE <= kCbidSlots &&
              CUPTI_CBID_SYNCHRONIZE_SIZE <= kCbidSlots && CUPTI_CBID_STATE_SIZE <= kCbidSlots);

std::uint64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint32_t os_tid() noexcept { return static_cast<std::uint32_t>(syscall(SYS_gettid)); }

// ---- the configuration log ------------------------------------------------------------
//
// Outside the state on purpose: plain ints, no destructor, so the teardown
// can log its last lines. One write(2) per line on an O_APPEND descriptor:
// lines of several processes (a torchrun-like parent's children) do not
// mix; each ends with pid=<pid>.

int g_log_fd = -1;

void log_open() noexcept {
  const char* path = std::getenv("STANDIN_CUPTI_LOG");
  if (path != nullptr && *path != '\0') g_log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

__attribute__((format(printf, 1, 2))) void log_line(const char* fmt, ...) noexcept {
  if (g_log_fd < 0) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf - 32, fmt, ap);
  va_end(ap);
  n = std::clamp<int>(n, 0, static_cast<int>(sizeof buf) - 33);
  n += std::snprintf(buf + n, 32, " pid=%d\n", static_cast<int>(getpid()));
  ssize_t ignored = write(g_log_fd, buf, static_cast<std::size_t>(n));
  static_cast<void>(ignored);
}

// What was written to buffers, per API cbid and per kind: a test can tell
// a call CUPTI never recorded from one that was filtered later. Plain
// static arrays of atomics (trivially destructible): they outlive the state.
struct Counts {
  std::array<std::atomic<std::uint64_t>, kCbidSlots> runtime{}, driver{};
  std::array<std::atomic<const char*>, kCbidSlots> runtime_name{}, driver_name{};
  std::array<std::atomic<std::uint64_t>, CUPTI_ACTIVITY_KIND_COUNT> kinds{};
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<std::uint64_t> requests{0}, refused{0}, completed{0};
};
Counts g_counts;

// ---- records --------------------------------------------------------------------------

std::size_t record_size(CUpti_ActivityKind kind) noexcept {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return sizeof(CUpti_ActivityOverhead3);
    case CUPTI_ACTIVITY_KIND_DEVICE:
      return sizeof(CUpti_ActivityDevice5);
    case CUPTI_ACTIVITY_KIND_CONTEXT:
      return sizeof(CUpti_ActivityContext3);
    case CUPTI_ACTIVITY_KIND_MEMORY2:
      return sizeof(CUpti_ActivityMemory4);
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
      return sizeof(CUpti_ActivityMemoryPool3);
    default:
      return 0;
  }
}

// The kinds this stand-in produces; enabling another is CUPTI_ERROR_NOT_SUPPORTED.
bool modeled(CUpti_ActivityKind kind) noexcept { return record_size(kind) != 0 || kind == CUPTI_ACTIVITY_KIND_MEMCPY2; }

union AnyRecord {
  CUpti_ActivityKernel10 kernel;
  CUpti_ActivityMemcpy6 memcpy;
  CUpti_ActivityMemset4 memset;
};

// Device work waiting for the simulated device to finish it.
struct Pending {
  std::uint64_t end_ns;  // device clock
  std::size_t size;
  AnyRecord record;
};

struct Buffer {
  std::uint8_t* data = nullptr;
  std::size_t size = 0, used = 0, max_records = 0, records = 0;
};

// ---- the state ------------------------------------------------------------------------

extern const ToolHooks kHooks;

class Cupti {
 public:
  Cupti() {
    worker_ = std::thread([this] { work(); });
  }
  ~Cupti() = default;
  Cupti(const Cupti&) = delete;
  Cupti& operator=(const Cupti&) = delete;

  // Stops the worker and, unless told not to, takes CUPTI's hooks out of
  // the driver (cuptiFinalize, the dangling teardown). Buffers CUPTI still
  // holds are not handed back: a tool must flush before this.
  void shut_down(bool unhook) noexcept {
    {
      std::lock_guard<std::mutex> lock(buf_mu_);
      stop_ = true;
    }
    worker_cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    if (unhook) unhook_for_good();
  }

  // The process-exit teardown: CUPTI's hooks leave the driver for good;
  // the state, its worker thread and the buffers it holds stay, so a tool
  // that flushes after this (an exit handler registered before libcupti
  // was loaded) still gets them, as it did on an H200 with CUPTI 13.0.
  void unhook_for_good() noexcept {
    std::lock_guard<std::mutex> lock(config_mu_);
    torn_down_ = true;
    if (hooked_) detach_fn_(&kHooks);
    hooked_ = false;
  }

  // ---- the driver --------------------------------------------------------------------
  //
  // As real CUPTI 13.0: the driver already in the process, else it loads
  // libcuda.so.1 itself (on an H200 the driver was not loaded before the
  // first cuptiSubscribe and was after it, and every call succeeded); where
  // there is none to load (no driver installed) its calls fail with
  // CUPTI_ERROR_UNKNOWN. The stand-in finds the stand-in driver by its
  // RUNPATH; STANDIN_CUPTI_NO_DRIVER=1 makes that lookup fail, as on a
  // machine with no driver installed.
  CUptiResult attach() noexcept {
    if (driver_.load(std::memory_order_acquire) != nullptr) return CUPTI_SUCCESS;
    std::lock_guard<std::mutex> lock(config_mu_);
    if (driver_.load(std::memory_order_acquire) != nullptr) return CUPTI_SUCCESS;
    const char* none = std::getenv("STANDIN_CUPTI_NO_DRIVER");
    if (none != nullptr && std::strcmp(none, "1") == 0) return CUPTI_ERROR_UNKNOWN;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    const bool loaded_here = h == nullptr;
    if (loaded_here) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == nullptr) return CUPTI_ERROR_UNKNOWN;
    attach_fn_ = reinterpret_cast<AttachToolFn>(dlsym(h, kAttachToolSymbol));
    detach_fn_ = reinterpret_cast<DetachToolFn>(dlsym(h, kDetachToolSymbol));
    // Already loaded: its loader's reference keeps it, and the function
    // pointers, valid. Loaded here: CUPTI keeps its own reference.
    if (!loaded_here) dlclose(h);
    if (attach_fn_ == nullptr || detach_fn_ == nullptr) return CUPTI_ERROR_UNKNOWN;  // not a driver this CUPTI knows
    const DriverForTool* d = attach_fn_(&kHooks);
    if (d == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;  // torn down
    hooked_ = true;
    driver_.store(d, std::memory_order_release);
    update_hooks_locked();
    return CUPTI_SUCCESS;
  }

  // The driver calls into CUPTI only while CUPTI has something on (a
  // subscriber, an activity kind, a per-call record switch), as real CUPTI
  // registers its driver callbacks on demand. config_mu_ held.
  void update_hooks_locked() noexcept {
    if (driver_.load(std::memory_order_acquire) == nullptr || torn_down_) return;
    bool wanted = subscriber_.load(std::memory_order_acquire) != nullptr;
    for (const auto& on : kind_on_) wanted = wanted || on.load(std::memory_order_relaxed);
    for (const auto& on : runtime_on_) wanted = wanted || on.load(std::memory_order_relaxed) != 0;
    for (const auto& on : driver_on_) wanted = wanted || on.load(std::memory_order_relaxed) != 0;
    if (wanted && !hooked_) {
      hooked_ = attach_fn_(&kHooks) != nullptr;
    } else if (!wanted && hooked_) {
      detach_fn_(&kHooks);
      hooked_ = false;
    }
  }
  void update_hooks() noexcept {
    std::lock_guard<std::mutex> lock(config_mu_);
    update_hooks_locked();
  }

  const DriverForTool* driver() const noexcept { return driver_.load(std::memory_order_acquire); }

  // ---- configuration -----------------------------------------------------------------

  std::mutex config_mu_;
  std::atomic<CUpti_Subscriber_st*> subscriber_{nullptr};
  std::unique_ptr<CUpti_Subscriber_st> subscriber_storage_;
  std::array<std::atomic<bool>, CUPTI_ACTIVITY_KIND_COUNT> kind_on_{};
  std::array<std::atomic<std::uint8_t>, kCbidSlots> runtime_on_{}, driver_on_{};
  std::atomic<CUpti_BuffersCallbackRequestFunc> request_{nullptr};
  std::atomic<CUpti_BuffersCallbackCompleteFunc> complete_{nullptr};
  std::atomic<CUpti_TimestampCallbackFunc> timestamp_{nullptr};
  std::atomic<std::int64_t> timestamp_offset_{0};  // callback clock - CLOCK_MONOTONIC
  std::atomic<int> thread_id_type_{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};
  std::atomic<int> last_error_{CUPTI_SUCCESS};
  std::atomic<bool> event_device_timestamps_{false};
  std::atomic<std::uint64_t> next_grid_id_{1};
  std::atomic<std::uint64_t> next_range_id_{1};
  std::mutex nvtx_mu_;
  std::vector<std::unique_ptr<nvtxDomainRegistration_st>> domains_;
  std::vector<std::unique_ptr<nvtxStringRegistration_st>> strings_;

  std::uint64_t now() const noexcept {
    const CUpti_TimestampCallbackFunc f = timestamp_.load(std::memory_order_acquire);
    return f != nullptr ? f() : monotonic_ns();
  }
  // A device time (CLOCK_MONOTONIC) on the timestamp callback's clock.
  std::uint64_t from_device(std::uint64_t t) const noexcept {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(t) + timestamp_offset_.load(std::memory_order_relaxed));
  }
  std::uint32_t thread_id() const noexcept {
    return thread_id_type_.load(std::memory_order_relaxed) == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM
               ? os_tid()
               : static_cast<std::uint32_t>(pthread_self());
  }
  bool kind_on(CUpti_ActivityKind k) const noexcept {
    return static_cast<std::size_t>(k) < kind_on_.size() && kind_on_[k].load(std::memory_order_relaxed);
  }
  CUpti_Subscriber_st* subscriber_for(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) const noexcept {
    CUpti_Subscriber_st* s = subscriber_.load(std::memory_order_acquire);
    if (s == nullptr || domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE || cbid >= kCbidSlots) {
      return nullptr;
    }
    return s->enabled[domain][cbid].load(std::memory_order_relaxed) != 0 ? s : nullptr;
  }

  // ---- buffers -----------------------------------------------------------------------

  // Writes one record to the buffer at hand, asking for one on this
  // thread when there is none; refused: the record is dropped and counted.
  bool write(const void* record, std::size_t size) noexcept {
    std::lock_guard<std::mutex> lock(buf_mu_);
    return write_locked(record, size);
  }

  // Device work: into the buffers once the simulated device has finished it.
  void add_pending(const AnyRecord& r, std::size_t size, std::uint64_t end_ns) noexcept {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(buf_mu_);
      pending_.push_back(Pending{end_ns, size, r});
      wake = end_ns < worker_wake_at_;
    }
    if (wake) worker_cv_.notify_one();
  }

  // Hands back buffers: every one (forced) or every one holding records;
  // finished device work first. CUPTI's own thread completes them, and
  // this call returns once it has (on an H200 with CUPTI 13.0 a forced
  // flush's partial buffer came back on CUPTI's thread, before
  // cuptiActivityFlushAll returned). Called on that thread (from a
  // completion callback) or with the worker stopped, it completes them
  // itself.
  void flush(bool forced) noexcept {
    const std::uint64_t start = now();
    std::deque<Buffer> batch;
    {
      std::unique_lock<std::mutex> lock(buf_mu_);
      move_finished_locked(monotonic_ns());
      if (current_.data != nullptr && (forced || current_.records != 0)) {
        full_.push_back(current_);
        current_ = Buffer{};
      }
      if (!stop_ && std::this_thread::get_id() != worker_.get_id()) {
        // Everything in full_ now, and what the worker took before, is
        // handed back before this returns.
        const std::uint64_t ticket = ++flush_asked_;
        worker_cv_.notify_one();
        idle_cv_.wait(lock, [&] { return flush_done_ >= ticket; });
      } else {
        batch.swap(full_);
      }
    }
    complete_all(batch);
    if (kind_on(CUPTI_ACTIVITY_KIND_OVERHEAD)) write_overhead(CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, start, now());
  }

  std::size_t take_dropped() noexcept { return static_cast<std::size_t>(dropped_.exchange(0)); }

  void write_overhead(CUpti_ActivityOverheadKind kind, std::uint64_t start, std::uint64_t end) noexcept {
    CUpti_ActivityOverhead3 r{};
    r.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    r.overheadKind = kind;
    r.objectKind = CUPTI_ACTIVITY_OBJECT_PROCESS;
    r.objectId.pt.processId = static_cast<std::uint32_t>(getpid());
    r.start = start;
    r.end = end;
    write(&r, sizeof r);
  }

 private:
  bool write_locked(const void* record, std::size_t size) noexcept {
    if (current_.data != nullptr && (current_.used + size > current_.size ||
                                     (current_.max_records != 0 && current_.records >= current_.max_records))) {
      full_.push_back(current_);
      current_ = Buffer{};
      worker_cv_.notify_one();
    }
    if (current_.data == nullptr && !request_locked()) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      g_counts.dropped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (current_.used + size > current_.size) {  // a buffer smaller than one record
      dropped_.fetch_add(1, std::memory_order_relaxed);
      g_counts.dropped.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    std::memcpy(current_.data + current_.used, record, size);
    current_.used += (size + 7) & ~std::size_t{7};
    ++current_.records;
    CUpti_ActivityKind kind;
    std::memcpy(&kind, record, sizeof kind);
    if (static_cast<std::size_t>(kind) < g_counts.kinds.size())
      g_counts.kinds[kind].fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  bool request_locked() noexcept {
    const CUpti_BuffersCallbackRequestFunc request = request_.load(std::memory_order_acquire);
    if (request == nullptr) return false;
    const std::uint64_t start = now();
    std::uint8_t* data = nullptr;
    std::size_t size = 0, max_records = 0;
    request(&data, &size, &max_records);
    g_counts.requests.fetch_add(1, std::memory_order_relaxed);
    if (data == nullptr || size == 0) {
      g_counts.refused.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    current_ = Buffer{data, size, 0, max_records, 0};
    if (kind_on(CUPTI_ACTIVITY_KIND_OVERHEAD)) {
      CUpti_ActivityOverhead3 r{};
      r.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
      r.overheadKind = CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST;
      r.objectKind = CUPTI_ACTIVITY_OBJECT_PROCESS;
      r.objectId.pt.processId = static_cast<std::uint32_t>(getpid());
      r.start = start;
      r.end = now();
      if (current_.used + sizeof r <= current_.size) write_locked(&r, sizeof r);
    }
    return true;
  }

  void move_finished_locked(std::uint64_t device_now) noexcept {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < pending_.size(); ++i) {
      if (pending_[i].end_ns <= device_now) {
        write_locked(&pending_[i].record, pending_[i].size);
      } else {
        if (kept != i) pending_[kept] = pending_[i];
        ++kept;
      }
    }
    pending_.resize(kept);
  }

  void complete_all(std::deque<Buffer>& batch) noexcept {
    const CUpti_BuffersCallbackCompleteFunc complete = complete_.load(std::memory_order_acquire);
    for (const Buffer& b : batch) {
      g_counts.completed.fetch_add(1, std::memory_order_relaxed);
      // CUDA 6.0 on: global buffers, context NULL and stream 0.
      if (complete != nullptr) complete(nullptr, 0, b.data, b.size, b.used);
    }
  }

  // CUPTI's own thread: finished device work into buffers, full buffers
  // back, and what a flush hands it.
  void work() noexcept {
    std::unique_lock<std::mutex> lock(buf_mu_);
    while (!stop_) {
      if (full_.empty() && flush_done_ == flush_asked_) {
        std::uint64_t next = UINT64_MAX;
        for (const Pending& p : pending_) next = std::min(next, p.end_ns);
        if (next == UINT64_MAX) {
          worker_wake_at_ = UINT64_MAX;
          worker_cv_.wait(lock);
        } else {
          // At most every 200 us: real CUPTI hands device records over in batches.
          next = std::max(next, monotonic_ns() + 200000);
          worker_wake_at_ = next;
          worker_cv_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next)));
        }
        worker_wake_at_ = 0;
      }
      if (stop_) break;
      move_finished_locked(monotonic_ns());
      const std::uint64_t asked = flush_asked_;
      if (full_.empty() && asked == flush_done_) continue;
      std::deque<Buffer> batch;
      batch.swap(full_);
      lock.unlock();
      complete_all(batch);
      lock.lock();
      flush_done_ = asked;
      idle_cv_.notify_all();
    }
    // Stopped: no flush waits on it any more.
    flush_done_ = flush_asked_;
    idle_cv_.notify_all();
  }

  std::atomic<const DriverForTool*> driver_{nullptr};
  AttachToolFn attach_fn_ = nullptr;  // config_mu_
  DetachToolFn detach_fn_ = nullptr;
  bool hooked_ = false;     // the driver calls kHooks
  bool torn_down_ = false;  // the process-exit teardown ran: never hooked again
  std::mutex buf_mu_;
  Buffer current_;
  std::deque<Buffer> full_;
  std::vector<Pending> pending_;
  std::atomic<std::uint64_t> dropped_{0};
  std::uint64_t flush_asked_ = 0, flush_done_ = 0;  // flushes handed to the worker, and completed
  std::condition_variable idle_cv_;
  bool stop_ = false;
  std::uint64_t worker_wake_at_ = 0;
  std::condition_variable worker_cv_;
  std::thread worker_;
};

// ---- the global state and its teardown ------------------------------------------------
//
// g_state is read on every call without a check: after a dangling
// teardown (STANDIN_CUPTI_TEARDOWN=dangle) it is null and the call faults.
Cupti* volatile g_state = nullptr;

Cupti& state() noexcept { return *g_state; }

// For calls that need nothing of the state: they read it all the same, as
// every entry point of the real library does.
void touch_state() noexcept { static_cast<void>(state().last_error_.load(std::memory_order_relaxed)); }

void log_written() noexcept {
  for (std::size_t i = 0; i < kCbidSlots; ++i) {
    if (const std::uint64_t n = g_counts.runtime[i].load()) {
      const char* name = g_counts.runtime_name[i].load();
      log_line("written runtime %zu %s %llu", i, name != nullptr ? name : "?", static_cast<unsigned long long>(n));
    }
  }
  for (std::size_t i = 0; i < kCbidSlots; ++i) {
    if (const std::uint64_t n = g_counts.driver[i].load()) {
      const char* name = g_counts.driver_name[i].load();
      log_line("written driver %zu %s %llu", i, name != nullptr ? name : "?", static_cast<unsigned long long>(n));
    }
  }
  for (std::size_t k = 0; k < g_counts.kinds.size(); ++k) {
    if (const std::uint64_t n = g_counts.kinds[k].load()) {
      log_line("written kind %zu %llu", k, static_cast<unsigned long long>(n));
    }
  }
  log_line("buffers requested %llu refused %llu completed %llu dropped %llu",
           static_cast<unsigned long long>(g_counts.requests.load()),
           static_cast<unsigned long long>(g_counts.refused.load()),
           static_cast<unsigned long long>(g_counts.completed.load()),
           static_cast<unsigned long long>(g_counts.dropped.load()));
}

// A namespace-scope object with a destructor: the compiler registers that
// destructor with __cxa_atexit when the library is loaded (dlopen), so it
// runs at exit before every exit handler registered earlier.
//
// By default it logs the counts and takes CUPTI's hooks out of the driver;
// the state, its worker thread and the buffers it holds survive, and a
// later call works: on an H200 with CUPTI 13.0, a forced flush from an exit
// handler registered before libcupti was loaded returned CUPTI_SUCCESS and
// handed back the buffer.
//
// STANDIN_CUPTI_TEARDOWN=dangle is the pessimistic reading of PAPI pull
// request #594 ("a regression in Cuda Toolkit 13.0.0 leaving dangling
// pointer paths"), not what the H200 did: the teardown frees the state,
// leaves the pointer null and CUPTI's hooks in the driver, so any CUPTI
// call after it, and any driver call that reaches CUPTI (the driver's own
// exit teardown, a thread still launching), dies of SIGSEGV, unless the
// tool called cuptiFinalize (which takes the hooks out) or turned
// everything off first.
struct Global {
  Global() {
    log_open();
    const char* mode = std::getenv("STANDIN_CUPTI_TEARDOWN");
    dangle = mode != nullptr && std::strcmp(mode, "dangle") == 0;
    g_state = new Cupti;
  }
  ~Global() {
    Cupti* s = g_state;
    log_written();
    log_line(dangle ? "teardown dangle" : "teardown");
    if (!dangle) {
      s->unhook_for_good();
      return;
    }
    s->shut_down(false);
    delete s;
    g_state = nullptr;
  }
  Global(const Global&) = delete;
  Global& operator=(const Global&) = delete;
  bool dangle = false;
};
Global g_global;

CUptiResult fail(CUptiResult r) noexcept {
  if (r != CUPTI_SUCCESS) state().last_error_.store(r, std::memory_order_relaxed);
  return r;
}

// ---- hooks: what the driver calls, on the caller's thread ------------------------------

// Correlation ids are CUPTI's, one process-wide sequence over the calls
// it traces: a call whose callback or record is on, or any call while
// device work is recorded (its kernels, copies and syncs carry the id).
// A call it does not trace takes none. Measured on an H200 with CUPTI
// 13.0: a subscriber with the runtime domain and cuDeviceGetCount's
// callback on saw correlation ids 1 to 4 for the four calls it traced,
// though the runtime's initialization made about 117 driver calls before
// the second and a cuDeviceGet (its callback off) came before the fourth.
std::atomic<std::uint32_t> g_next_correlation{1};

// Memory records count as device work here: each carries the correlation
// id of the call that made it (cupti_activity.h, CUpti_ActivityMemory4).
bool traces_device_work(const Cupti& s) noexcept {
  for (const CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                     CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                     CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_MEMORY2,
                                     CUPTI_ACTIVITY_KIND_MEMORY_POOL}) {
    if (s.kind_on(k)) return true;
  }
  return false;
}

void on_api_enter(ApiCall* call) noexcept {
  Cupti& s = state();
  CUpti_Subscriber_st* sub = s.subscriber_for(call->domain, call->cbid);
  const auto& on = call->domain == CUPTI_CB_DOMAIN_RUNTIME_API ? s.runtime_on_ : s.driver_on_;
  const bool recorded = call->cbid < kCbidSlots && on[call->cbid].load(std::memory_order_relaxed) != 0;
  if (sub != nullptr || recorded || traces_device_work(s)) {
    call->correlation_id = g_next_correlation.fetch_add(1, std::memory_order_relaxed);
  }
  if (sub != nullptr) {
    CUpti_CallbackData d{};
    d.callbackSite = CUPTI_API_ENTER;
    d.functionName = call->name;
    d.functionParams = call->params;
    d.functionReturnValue = call->return_value;
    d.symbolName = call->symbol;
    d.context = call->context;
    d.contextUid = call->context_id;
    d.correlationData = &call->correlation_data;
    d.correlationId = call->correlation_id;
    sub->callback(sub->userdata, call->domain, call->cbid, &d);
  }
  call->tool_start = s.now();
  call->tool_entered = true;
}

void on_api_exit(ApiCall* call) noexcept {
  Cupti& s = state();
  if (!call->tool_entered) return;  // CUPTI came in during the call
  const std::uint64_t end = s.now();
  const bool runtime = call->domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const auto& on = runtime ? s.runtime_on_ : s.driver_on_;
  if (call->cbid < kCbidSlots && on[call->cbid].load(std::memory_order_relaxed) != 0) {
    CUpti_ActivityAPI r{};
    r.kind = runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
    r.cbid = call->cbid;
    r.start = call->tool_start;
    r.end = end;
    r.processId = static_cast<std::uint32_t>(getpid());
    r.threadId = s.thread_id();
    r.correlationId = call->correlation_id;
    r.returnValue = call->result;
    if (s.write(&r, sizeof r)) {
      auto& counts = runtime ? g_counts.runtime : g_counts.driver;
      auto& names = runtime ? g_counts.runtime_name : g_counts.driver_name;
      counts[call->cbid].fetch_add(1, std::memory_order_relaxed);
      names[call->cbid].store(call->name, std::memory_order_relaxed);
    }
  }
  if (CUpti_Subscriber_st* sub = s.subscriber_for(call->domain, call->cbid)) {
    CUpti_CallbackData d{};
    d.callbackSite = CUPTI_API_EXIT;
    d.functionName = call->name;
    d.functionParams = call->params;
    d.functionReturnValue = call->return_value;
    d.symbolName = call->symbol;
    d.context = call->context;
    d.contextUid = call->context_id;
    d.correlationData = &call->correlation_data;
    d.correlationId = call->correlation_id;
    sub->callback(sub->userdata, call->domain, call->cbid, &d);
  }
}

void on_work(const Work& w) noexcept {
  Cupti& s = state();
  AnyRecord r;
  std::memset(&r, 0, sizeof r);
  std::size_t size = 0;
  switch (w.kind) {
    case WorkKind::kKernel: {
      const bool concurrent = s.kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      if (!concurrent && !s.kind_on(CUPTI_ACTIVITY_KIND_KERNEL)) return;
      CUpti_ActivityKernel10& k = r.kernel;
      k.kind = concurrent ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
      k.registersPerThread = w.registers;
      k.start = s.from_device(w.start_ns);
      k.end = s.from_device(w.end_ns);
      k.completed = k.end;
      k.deviceId = w.device_id;
      k.contextId = w.context_id;
      k.streamId = w.stream_id;
      k.gridX = w.grid[0];
      k.gridY = w.grid[1];
      k.gridZ = w.grid[2];
      k.blockX = w.block[0];
      k.blockY = w.block[1];
      k.blockZ = w.block[2];
      k.staticSharedMemory = w.static_smem;
      k.dynamicSharedMemory = w.dynamic_smem;
      k.correlationId = w.correlation_id;
      k.gridId = static_cast<std::int64_t>(s.next_grid_id_.fetch_add(1, std::memory_order_relaxed));
      k.name = w.name;
      k.queued = CUPTI_TIMESTAMP_UNKNOWN;
      k.submitted = CUPTI_TIMESTAMP_UNKNOWN;
      k.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
      k.sharedMemoryExecuted = static_cast<std::uint32_t>(w.static_smem + w.dynamic_smem);
      k.graphNodeId = w.graph_node_id;
      k.graphId = w.graph_id;
      k.clusterX = k.clusterY = k.clusterZ = 1;
      size = sizeof k;
      break;
    }
    case WorkKind::kMemcpy: {
      if (!s.kind_on(CUPTI_ACTIVITY_KIND_MEMCPY)) return;
      CUpti_ActivityMemcpy6& m = r.memcpy;
      m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
      m.copyKind = w.copy_kind;
      m.srcKind = w.src_kind;
      m.dstKind = w.dst_kind;
      m.bytes = w.bytes;
      m.start = s.from_device(w.start_ns);
      m.end = s.from_device(w.end_ns);
      m.deviceId = w.device_id;
      m.contextId = w.context_id;
      m.streamId = w.stream_id;
      m.correlationId = w.correlation_id;
      m.graphNodeId = w.graph_node_id;
      m.graphId = w.graph_id;
      m.copyCount = 1;
      size = sizeof m;
      break;
    }
    case WorkKind::kMemset: {
      if (!s.kind_on(CUPTI_ACTIVITY_KIND_MEMSET)) return;
      CUpti_ActivityMemset4& m = r.memset;
      m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
      m.value = w.value;
      m.bytes = w.bytes;
      m.start = s.from_device(w.start_ns);
      m.end = s.from_device(w.end_ns);
      m.deviceId = w.device_id;
      m.contextId = w.context_id;
      m.streamId = w.stream_id;
      m.correlationId = w.correlation_id;
      m.memoryKind = w.memory_kind;
      m.graphNodeId = w.graph_node_id;
      m.graphId = w.graph_id;
      size = sizeof m;
      break;
    }
  }
  s.add_pending(r, size, w.end_ns);
}

void on_sync(const Sync& y) noexcept {
  Cupti& s = state();
  if (s.kind_on(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)) {
    CUpti_ActivitySynchronization2 r{};
    r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    r.type = y.type;
    r.start = s.from_device(y.start_ns);
    r.end = s.from_device(y.end_ns);
    r.correlationId = y.correlation_id;
    r.contextId = y.context_id;
    r.streamId = y.stream_id;
    r.cudaEventId = y.event_id;
    r.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    s.write(&r, sizeof r);
  }
  const CUpti_CallbackId cbid = y.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE
                                    ? CUPTI_CBID_SYNCHRONIZE_STREAM_SYNCHRONIZED
                                    : CUPTI_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED;
  if (y.type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE) return;
  if (CUpti_Subscriber_st* sub = s.subscriber_for(CUPTI_CB_DOMAIN_SYNCHRONIZE, cbid)) {
    CUpti_SynchronizeData d{y.context, y.stream};
    sub->callback(sub->userdata, CUPTI_CB_DOMAIN_SYNCHRONIZE, cbid, &d);
  }
}

void deliver_resource(Cupti& s, CUpti_CallbackIdResource cbid, CUcontext context, CUstream stream,
                      void* descriptor) noexcept {
  if (CUpti_Subscriber_st* sub = s.subscriber_for(CUPTI_CB_DOMAIN_RESOURCE, cbid)) {
    CUpti_ResourceData d{};
    d.context = context;
    d.resourceHandle.stream = stream;
    d.resourceDescriptor = descriptor;
    sub->callback(sub->userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &d);
  }
}

void on_resource(CUpti_CallbackIdResource cbid, CUcontext context, CUstream stream, void* descriptor) noexcept {
  deliver_resource(state(), cbid, context, stream, descriptor);
}

// DEVICE and CONTEXT records are written when the context is created, if
// the kinds are on then. On an H100 with CUPTI 13.0, enabling them later
// gave neither (tprof's fixtures: "deviceProperties": [] and syncs with
// device -1), so this stand-in writes none later either.
void on_context_created(const ContextInfo& c, const DeviceInfo& d) noexcept {
  Cupti& s = state();
  if (s.kind_on(CUPTI_ACTIVITY_KIND_DEVICE)) {
    CUpti_ActivityDevice5 r{};
    r.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    r.globalMemoryBandwidth = d.global_memory_bandwidth_kbps;
    r.globalMemorySize = d.global_memory_bytes;
    r.constantMemorySize = d.constant_memory;
    r.l2CacheSize = d.l2_cache;
    r.numThreadsPerWarp = d.warp_size;
    r.coreClockRate = d.core_clock_khz;
    r.numMemcpyEngines = d.memcpy_engines;
    r.numMultiprocessors = d.sms;
    r.maxIPC = d.max_ipc;
    r.maxWarpsPerMultiprocessor = d.max_warps_per_sm;
    r.maxBlocksPerMultiprocessor = d.max_blocks_per_sm;
    r.maxSharedMemoryPerMultiprocessor = d.smem_per_sm;
    r.maxRegistersPerMultiprocessor = d.regs_per_sm;
    r.maxRegistersPerBlock = d.regs_per_block;
    r.maxSharedMemoryPerBlock = d.smem_per_block;
    r.maxThreadsPerBlock = d.max_threads_per_block;
    r.maxBlockDimX = d.max_block_dim[0];
    r.maxBlockDimY = d.max_block_dim[1];
    r.maxBlockDimZ = d.max_block_dim[2];
    r.maxGridDimX = d.max_grid_dim[0];
    r.maxGridDimY = d.max_grid_dim[1];
    r.maxGridDimZ = d.max_grid_dim[2];
    r.computeCapabilityMajor = d.cc_major;
    r.computeCapabilityMinor = d.cc_minor;
    r.id = d.id;
    r.eccEnabled = 1;
    r.uuid = d.uuid;
    r.name = d.name;
    r.isCudaVisible = 1;
    s.write(&r, sizeof r);
  }
  if (s.kind_on(CUPTI_ACTIVITY_KIND_CONTEXT)) {
    CUpti_ActivityContext3 r{};
    r.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
    r.contextId = c.context_id;
    r.deviceId = c.device_id;
    r.computeApiKind = CUPTI_ACTIVITY_COMPUTE_API_CUDA;
    r.nullStreamId = static_cast<std::uint16_t>(c.null_stream_id);
    r.numMultiprocessors = static_cast<std::uint16_t>(d.sms);
    s.write(&r, sizeof r);
  }
  deliver_resource(s, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, c.context, nullptr, nullptr);
}

// The context is going (the driver's exit teardown): the tool hears of it.
// No buffer goes back: on an H200 with CUPTI 13.0, records left in CUPTI's
// buffers at exit without a flush never came back (a program that made
// five API records and exited got no completion at all). A tool flushes
// before the driver's teardown or loses them.
void on_context_destroying(const ContextInfo& c) noexcept {
  Cupti& s = state();
  log_line("context_destroyed %u", c.context_id);
  deliver_resource(s, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, c.context, nullptr, nullptr);
}

// A memory operation, on the thread of the call that made it: written at
// once, as an API record is (not held as device work: nothing runs on the
// device), timestamped on the timestamp callback's clock, with the call's
// correlation id. The struct versions are the CUDA 13 headers' (Memory4,
// MemoryPool3). Not measured against real CUPTI: whether a release made
// by cudaFreeAsync is written at the call (here) or when the stream
// reaches it, and the pool's size before or after the operation (here:
// after).
void on_memory(const MemoryOp& op) noexcept {
  Cupti& s = state();
  const std::uint64_t now = s.now();
  if (op.kind == MemoryOpKind::kPoolCreated) {
    if (!s.kind_on(CUPTI_ACTIVITY_KIND_MEMORY_POOL)) return;
    CUpti_ActivityMemoryPool3 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    r.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
    r.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    r.correlationId = op.correlation_id;
    r.processId = static_cast<std::uint32_t>(getpid());
    r.deviceId = op.device_id;
    r.address = op.pool_address;
    r.size = op.pool_size;
    r.releaseThreshold = op.pool_release_threshold;
    r.timestamp = now;
    r.utilizedSize = op.pool_used;
    s.write(&r, sizeof r);
    return;
  }
  if (!s.kind_on(CUPTI_ACTIVITY_KIND_MEMORY2)) return;
  CUpti_ActivityMemory4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  r.memoryOperationType = op.kind == MemoryOpKind::kAllocation ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                                                : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  r.memoryKind = op.memory_kind;
  r.correlationId = op.correlation_id;
  r.address = op.address;
  r.bytes = op.bytes;
  r.timestamp = now;
  r.processId = static_cast<std::uint32_t>(getpid());
  r.deviceId = op.device_id;
  r.contextId = op.context_id;
  r.streamId = op.is_async ? op.stream_id : CUPTI_INVALID_STREAM_ID;
  r.isAsync = op.is_async ? 1 : 0;
  if (op.pool_address != 0) {
    r.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    r.memoryPoolConfig.address = op.pool_address;
    r.memoryPoolConfig.releaseThreshold = op.pool_release_threshold;
    r.memoryPoolConfig.pool.size = op.pool_size;
    r.memoryPoolConfig.utilizedSize = op.pool_used;
  }
  s.write(&r, sizeof r);
}

const ToolHooks kHooks = {on_api_enter,       on_api_exit,           on_work,  on_sync, on_resource,
                          on_context_created, on_context_destroying, on_memory};

// ---- NVTX (NVTX's injection protocol, nvtx3/nvtxDetail/nvtxInit.h) -----------------------
//
// NVTX calls land here on the calling thread: one callback per call, with
// generated_nvtx_meta.h's parameters and the call's return value.

void nvtx_callback(CUpti_CallbackId cbid, const char* name, const void* params, const void* ret) noexcept {
  Cupti& s = state();
  if (CUpti_Subscriber_st* sub = s.subscriber_for(CUPTI_CB_DOMAIN_NVTX, cbid)) {
    CUpti_NvtxData d{name, params, ret};
    sub->callback(sub->userdata, CUPTI_CB_DOMAIN_NVTX, cbid, &d);
  }
}

// Push/pop depth per thread (the core API) and per (thread, domain).
constinit thread_local int tl_depth = 0;
struct DomainDepth {
  const void* domain;
  int depth;
};
constinit thread_local DomainDepth tl_domain_depth[16] = {};

int& domain_depth(const void* domain) noexcept {
  for (DomainDepth& d : tl_domain_depth) {
    if (d.domain == domain) return d.depth;
  }
  for (DomainDepth& d : tl_domain_depth) {
    if (d.domain == nullptr) {
      d.domain = domain;
      return d.depth;
    }
  }
  return tl_domain_depth[15].depth;  // more domains than slots share the last
}

int push_level() noexcept { return tl_depth++; }
int pop_level() noexcept { return tl_depth > 0 ? --tl_depth : -1; }

void NVTX_API mark_ex(const nvtxEventAttributes_t* a) {
  nvtxMarkEx_params p{a};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxMarkEx, "nvtxMarkEx", &p, nullptr);
}
void NVTX_API mark_a(const char* m) {
  nvtxMarkA_params p{m};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxMarkA, "nvtxMarkA", &p, nullptr);
}
void NVTX_API mark_w(const wchar_t* m) {
  nvtxMarkW_params p{m};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxMarkW, "nvtxMarkW", &p, nullptr);
}
nvtxRangeId_t NVTX_API range_start_ex(const nvtxEventAttributes_t* a) {
  const nvtxRangeId_t id = state().next_range_id_.fetch_add(1, std::memory_order_relaxed);
  nvtxRangeStartEx_params p{a};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxRangeStartEx, "nvtxRangeStartEx", &p, &id);
  return id;
}
nvtxRangeId_t NVTX_API range_start_a(const char* m) {
  const nvtxRangeId_t id = state().next_range_id_.fetch_add(1, std::memory_order_relaxed);
  nvtxRangeStartA_params p{m};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxRangeStartA, "nvtxRangeStartA", &p, &id);
  return id;
}
nvtxRangeId_t NVTX_API range_start_w(const wchar_t* m) {
  const nvtxRangeId_t id = state().next_range_id_.fetch_add(1, std::memory_order_relaxed);
  nvtxRangeStartW_params p{m};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxRangeStartW, "nvtxRangeStartW", &p, &id);
  return id;
}
void NVTX_API range_end(nvtxRangeId_t id) {
  nvtxRangeEnd_params p{id};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxRangeEnd, "nvtxRangeEnd", &p, nullptr);
}
int NVTX_API range_push_ex(const nvtxEventAttributes_t* a) {
  const int level = push_level();
  nvtxRangePushEx_params p{a};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxRangePushEx, "nvtxRangePushEx", &p, &level);
  return level;
}
int NVTX_API range_push_a(const char* m) {
  const int level = push_level();
  nvtxRangePushA_params p{m};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxRangePushA, "nvtxRangePushA", &p, &level);
  return level;
}
int NVTX_API range_push_w(const wchar_t* m) {
  const int level = push_level();
  nvtxRangePushW_params p{m};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxRangePushW, "nvtxRangePushW", &p, &level);
  return level;
}
int NVTX_API range_pop() {
  const int level = pop_level();
  nvtxRangePop_params p{nullptr};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxRangePop, "nvtxRangePop", &p, &level);
  return level;
}
void NVTX_API name_category_a(std::uint32_t category, const char* n) {
  nvtxNameCategoryA_params p{category, n};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxNameCategoryA, "nvtxNameCategoryA", &p, nullptr);
}
void NVTX_API name_category_w(std::uint32_t category, const wchar_t* n) {
  nvtxNameCategoryW_params p{category, n};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxNameCategoryW, "nvtxNameCategoryW", &p, nullptr);
}
void NVTX_API name_os_thread_a(std::uint32_t tid, const char* n) {
  nvtxNameOsThreadA_params p{tid, n};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxNameOsThreadA, "nvtxNameOsThreadA", &p, nullptr);
}
void NVTX_API name_os_thread_w(std::uint32_t tid, const wchar_t* n) {
  nvtxNameOsThreadW_params p{tid, n};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxNameOsThreadW, "nvtxNameOsThreadW", &p, nullptr);
}

void NVTX_API domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  nvtxDomainMarkEx_params p{d, {a}};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxDomainMarkEx, "nvtxDomainMarkEx", &p, nullptr);
}
nvtxRangeId_t NVTX_API domain_range_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  const nvtxRangeId_t id = state().next_range_id_.fetch_add(1, std::memory_order_relaxed);
  nvtxDomainRangeStartEx_params p{d, {a}};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxDomainRangeStartEx, "nvtxDomainRangeStartEx", &p, &id);
  return id;
}
void NVTX_API domain_range_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  nvtxDomainRangeEnd_params p{d, {id}};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxDomainRangeEnd, "nvtxDomainRangeEnd", &p, nullptr);
}
int NVTX_API domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  const int level = domain_depth(d)++;
  nvtxDomainRangePushEx_params p{d, {a}};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxDomainRangePushEx, "nvtxDomainRangePushEx", &p, &level);
  return level;
}
int NVTX_API domain_range_pop(nvtxDomainHandle_t d) {
  int& depth = domain_depth(d);
  const int level = depth > 0 ? --depth : -1;
  nvtxDomainRangePop_params p{d};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxDomainRangePop, "nvtxDomainRangePop", &p, &level);
  return level;
}
nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  Cupti& s = state();
  nvtxDomainHandle_t h;
  {
    std::lock_guard<std::mutex> lock(s.nvtx_mu_);
    s.domains_.push_back(std::make_unique<nvtxDomainRegistration_st>());
    s.domains_.back()->name = name != nullptr ? name : "";
    h = s.domains_.back().get();
  }
  nvtxDomainCreateA_params p{name};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxDomainCreateA, "nvtxDomainCreateA", &p, &h);
  return h;
}
nvtxDomainHandle_t NVTX_API domain_create_w(const wchar_t* name) {
  std::string narrow;
  for (const wchar_t* c = name; c != nullptr && *c != L'\0'; ++c)
    narrow.push_back(*c < 0x80 ? static_cast<char>(*c) : '?');
  Cupti& s = state();
  std::lock_guard<std::mutex> lock(s.nvtx_mu_);
  s.domains_.push_back(std::make_unique<nvtxDomainRegistration_st>());
  s.domains_.back()->name = narrow;
  return s.domains_.back().get();
}
void NVTX_API domain_destroy(nvtxDomainHandle_t d) {
  nvtxDomainDestroy_params p{d};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxDomainDestroy, "nvtxDomainDestroy", &p, nullptr);
}
nvtxStringHandle_t NVTX_API domain_register_string(nvtxDomainHandle_t d, const char* text) {
  Cupti& s = state();
  nvtxStringHandle_t h;
  {
    std::lock_guard<std::mutex> lock(s.nvtx_mu_);
    s.strings_.push_back(std::make_unique<nvtxStringRegistration_st>());
    s.strings_.back()->text = text != nullptr ? text : "";
    h = s.strings_.back().get();
  }
  nvtxDomainRegisterStringA_params p{d, text};
  nvtx_callback(CUPTI_CBID_NVTX_nvtxDomainRegisterStringA, "nvtxDomainRegisterStringA", &p, &h);
  return h;
}
void NVTX_API nvtx_initialize(const void*) {}

template <class F>
void install(NvtxFunctionTable table, unsigned int size, unsigned int slot, F f) noexcept {
  if (slot < size && table[slot] != nullptr) *table[slot] = reinterpret_cast<NvtxFunctionPointer>(f);
}

}  // namespace
}  // namespace standin

using standin::fail;
using standin::log_line;
using standin::state;

extern "C" {

// ---- stateless --------------------------------------------------------------------------

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  if (version == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  if (str == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS:
      *str = "CUPTI_SUCCESS";
      break;
    case CUPTI_ERROR_INVALID_PARAMETER:
      *str = "CUPTI_ERROR_INVALID_PARAMETER";
      break;
    case CUPTI_ERROR_INVALID_DEVICE:
      *str = "CUPTI_ERROR_INVALID_DEVICE";
      break;
    case CUPTI_ERROR_INVALID_CONTEXT:
      *str = "CUPTI_ERROR_INVALID_CONTEXT";
      break;
    case CUPTI_ERROR_INVALID_OPERATION:
      *str = "CUPTI_ERROR_INVALID_OPERATION";
      break;
    case CUPTI_ERROR_OUT_OF_MEMORY:
      *str = "CUPTI_ERROR_OUT_OF_MEMORY";
      break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED:
      *str = "CUPTI_ERROR_MAX_LIMIT_REACHED";
      break;
    case CUPTI_ERROR_NOT_READY:
      *str = "CUPTI_ERROR_NOT_READY";
      break;
    case CUPTI_ERROR_NOT_COMPATIBLE:
      *str = "CUPTI_ERROR_NOT_COMPATIBLE";
      break;
    case CUPTI_ERROR_NOT_INITIALIZED:
      *str = "CUPTI_ERROR_NOT_INITIALIZED";
      break;
    case CUPTI_ERROR_INVALID_KIND:
      *str = "CUPTI_ERROR_INVALID_KIND";
      break;
    case CUPTI_ERROR_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      *str = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_UNKNOWN:
      *str = "CUPTI_ERROR_UNKNOWN";
      break;
    default:
      *str = "CUPTI_ERROR_UNKNOWN";
      return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

// ---- callbacks API ------------------------------------------------------------------------

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  standin::Cupti& s = state();
  if (subscriber == nullptr) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) {
    log_line("subscribe error %d", static_cast<int>(r));
    return fail(r);
  }
  std::lock_guard<std::mutex> lock(s.config_mu_);
  if (s.subscriber_storage_) {
    // Returned, not kept: on an H200 with CUPTI 13.0, cuptiGetLastError
    // after the refusal gave CUPTI_SUCCESS.
    log_line("subscribe error %d", static_cast<int>(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED));
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  s.subscriber_storage_ = std::make_unique<CUpti_Subscriber_st>();
  s.subscriber_storage_->callback = callback;
  s.subscriber_storage_->userdata = userdata;
  s.subscriber_.store(s.subscriber_storage_.get(), std::memory_order_release);
  *subscriber = s.subscriber_storage_.get();
  s.update_hooks_locked();
  log_line("subscribe");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  standin::Cupti& s = state();
  std::lock_guard<std::mutex> lock(s.config_mu_);
  if (subscriber == nullptr || subscriber != s.subscriber_storage_.get()) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  s.subscriber_.store(nullptr, std::memory_order_release);
  // Kept, not freed: another thread may be inside a callback with it.
  static_cast<void>(s.subscriber_storage_.release());
  s.update_hooks_locked();
  log_line("unsubscribe");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  standin::Cupti& s = state();
  if (subscriber == nullptr || subscriber != s.subscriber_.load() || domain <= CUPTI_CB_DOMAIN_INVALID ||
      domain >= CUPTI_CB_DOMAIN_SIZE || cbid >= standin::kCbidSlots) {
    return fail(CUPTI_ERROR_INVALID_PARAMETER);
  }
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  subscriber->enabled[domain][cbid].store(enable != 0 ? 1 : 0, std::memory_order_relaxed);
  log_line("enable_callback %d %u %d", static_cast<int>(domain), cbid, enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain) {
  standin::Cupti& s = state();
  if (subscriber == nullptr || subscriber != s.subscriber_.load() || domain <= CUPTI_CB_DOMAIN_INVALID ||
      domain >= CUPTI_CB_DOMAIN_SIZE) {
    return fail(CUPTI_ERROR_INVALID_PARAMETER);
  }
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  for (auto& slot : subscriber->enabled[domain]) slot.store(enable != 0 ? 1 : 0, std::memory_order_relaxed);
  log_line("enable_domain %d %d", static_cast<int>(domain), enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  for (int d = CUPTI_CB_DOMAIN_DRIVER_API; d < CUPTI_CB_DOMAIN_SIZE; ++d) {
    if (const CUptiResult r = cuptiEnableDomain(enable, subscriber, static_cast<CUpti_CallbackDomain>(d));
        r != CUPTI_SUCCESS) {
      return r;
    }
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetLastError(void) {
  return static_cast<CUptiResult>(state().last_error_.exchange(CUPTI_SUCCESS, std::memory_order_relaxed));
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  standin::Cupti& s = state();
  if (timestamp == nullptr) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  *timestamp = s.now();
  return CUPTI_SUCCESS;
}

// ---- activity API -------------------------------------------------------------------------

CUptiResult CUPTIAPI cuptiSetThreadIdType(CUpti_ActivityThreadIdType type) {
  standin::Cupti& s = state();
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) {
    return fail(CUPTI_ERROR_INVALID_PARAMETER);
  }
  s.thread_id_type_.store(type, std::memory_order_relaxed);
  log_line("thread_id_type %d", static_cast<int>(type));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetThreadIdType(CUpti_ActivityThreadIdType* type) {
  standin::Cupti& s = state();
  if (type == nullptr) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  *type = static_cast<CUpti_ActivityThreadIdType>(s.thread_id_type_.load(std::memory_order_relaxed));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp) {
  standin::Cupti& s = state();
  if (funcTimestamp == nullptr) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  // Device times are mapped to the callback's clock by one offset, taken now.
  const std::uint64_t mono = standin::monotonic_ns();
  const std::uint64_t cb = funcTimestamp();
  s.timestamp_offset_.store(static_cast<std::int64_t>(cb - mono), std::memory_order_relaxed);
  s.timestamp_.store(funcTimestamp, std::memory_order_release);
  log_line("timestamp_callback");
  return CUPTI_SUCCESS;
}

// Works without a driver, as real CUPTI's does.
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                                    CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  standin::Cupti& s = state();
  if (funcBufferRequested == nullptr || funcBufferCompleted == nullptr) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  s.request_.store(funcBufferRequested, std::memory_order_release);
  s.complete_.store(funcBufferCompleted, std::memory_order_release);
  log_line("register_callbacks");
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  standin::Cupti& s = state();
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) {
    log_line("activity_enable %d error %d", static_cast<int>(kind), static_cast<int>(r));
    return fail(r);
  }
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) return fail(CUPTI_ERROR_INVALID_KIND);
  if (!standin::modeled(kind)) {
    log_line("activity_enable %d error %d", static_cast<int>(kind), static_cast<int>(CUPTI_ERROR_NOT_SUPPORTED));
    return fail(CUPTI_ERROR_NOT_SUPPORTED);
  }
  s.kind_on_[kind].store(true, std::memory_order_relaxed);
  // The kind switches every API of its domain on, overriding earlier
  // per-cbid calls (cupti_activity.h, cuptiActivityEnableRuntimeApi).
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    for (auto& on : s.runtime_on_) on.store(1, std::memory_order_relaxed);
  } else if (kind == CUPTI_ACTIVITY_KIND_DRIVER) {
    for (auto& on : s.driver_on_) on.store(1, std::memory_order_relaxed);
  }
  s.update_hooks();
  log_line("activity_enable %d", static_cast<int>(kind));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  standin::Cupti& s = state();
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT) return fail(CUPTI_ERROR_INVALID_KIND);
  s.kind_on_[kind].store(false, std::memory_order_relaxed);
  if (kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
    for (auto& on : s.runtime_on_) on.store(0, std::memory_order_relaxed);
  } else if (kind == CUPTI_ACTIVITY_KIND_DRIVER) {
    for (auto& on : s.driver_on_) on.store(0, std::memory_order_relaxed);
  }
  s.update_hooks();
  log_line("activity_disable %d", static_cast<int>(kind));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  standin::Cupti& s = state();
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  if (cbid >= standin::kCbidSlots) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  s.runtime_on_[cbid].store(enable != 0 ? 1 : 0, std::memory_order_relaxed);
  s.update_hooks();
  log_line("runtime_api %u %d", cbid, enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

// Switched on without the DRIVER kind once the context exists, a driver
// call is not recorded, though the call succeeds: on an H200 with CUPTI
// 13.0, cuptiActivityEnableDriverApi(cbid, 1) recorded the call when made
// before the context was created and nothing when made after it (the
// DRIVER kind recorded it either way). The stand-in takes the context's
// creation as the line ("after cuInit, before the context" is unmeasured);
// the log line says "late" for such a switch.
CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  standin::Cupti& s = state();
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  if (cbid >= standin::kCbidSlots) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  const bool late = enable != 0 && !s.kind_on(CUPTI_ACTIVITY_KIND_DRIVER) && s.driver()->have_context();
  if (late) {
    log_line("driver_api %u 1 late", cbid);
    return CUPTI_SUCCESS;
  }
  s.driver_on_[cbid].store(enable != 0 ? 1 : 0, std::memory_order_relaxed);
  s.update_hooks();
  log_line("driver_api %u %d", cbid, enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t enable) {
  standin::Cupti& s = state();
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  s.event_device_timestamps_.store(enable != 0, std::memory_order_relaxed);
  log_line("event_device_timestamps %d", enable != 0 ? 1 : 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  standin::Cupti& s = state();
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  if (s.request_.load() == nullptr) return fail(CUPTI_ERROR_INVALID_OPERATION);
  log_line("flush_all %u", flag);
  s.flush((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes, CUpti_Activity** record) {
  standin::touch_state();
  if (buffer == nullptr || record == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::size_t offset = 0;
  if (*record != nullptr) {
    CUpti_ActivityKind kind;
    std::memcpy(&kind, *record, sizeof kind);
    const std::size_t size = standin::record_size(kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    offset =
        static_cast<std::size_t>(reinterpret_cast<std::uint8_t*>(*record) - buffer) + ((size + 7) & ~std::size_t{7});
  }
  if (offset + sizeof(CUpti_ActivityKind) > validBufferSizeBytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  CUpti_ActivityKind kind;
  std::memcpy(&kind, buffer + offset, sizeof kind);
  const std::size_t size = standin::record_size(kind);
  if (size == 0 || offset + size > validBufferSizeBytes) return CUPTI_ERROR_INVALID_KIND;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  standin::Cupti& s = state();
  if (dropped == nullptr) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  *dropped = s.take_dropped();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetGraphNodeId(CUgraphNode node, uint64_t* nodeId) {
  standin::Cupti& s = state();
  if (node == nullptr || nodeId == nullptr) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  *nodeId = s.driver()->graph_node_id(node);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetGraphId(CUgraph graph, uint32_t* pId) {
  standin::Cupti& s = state();
  if (graph == nullptr || pId == nullptr) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  *pId = s.driver()->graph_id(graph);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetGraphExecId(CUgraphExec graphExec, uint32_t* pId) {
  standin::Cupti& s = state();
  if (graphExec == nullptr || pId == nullptr) return fail(CUPTI_ERROR_INVALID_PARAMETER);
  if (const CUptiResult r = s.attach(); r != CUPTI_SUCCESS) return fail(r);
  *pId = s.driver()->graph_exec_id(graphExec);
  return CUPTI_SUCCESS;
}

// Detaches: the subscriber, the enabled kinds and the buffers CUPTI holds
// are dropped (a tool flushes first); CUPTI starts afresh at its next call.
CUptiResult CUPTIAPI cuptiFinalize(void) {
  standin::Cupti* old = standin::g_state;
  old->attach();
  log_line("finalize");
  standin::g_state = new standin::Cupti;
  old->shut_down(true);
  // The old state is kept: a callback running on another thread may
  // still read it.
  return CUPTI_SUCCESS;
}

// ---- NVTX's injection entry point ---------------------------------------------------------

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
  standin::touch_state();
  if (getExportTable == nullptr) return 0;
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(getExportTable(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  if (const auto* version = static_cast<const NvtxExportTableVersionInfo*>(getExportTable(NVTX_ETID_VERSIONINFO));
      version != nullptr && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
      version->SetInjectionNvtxVersion != nullptr) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0 || core == nullptr) return 0;
  using namespace standin;
  install(core, core_size, NVTX_CBID_CORE_MarkEx, &mark_ex);
  install(core, core_size, NVTX_CBID_CORE_MarkA, &mark_a);
  install(core, core_size, NVTX_CBID_CORE_MarkW, &mark_w);
  install(core, core_size, NVTX_CBID_CORE_RangeStartEx, &range_start_ex);
  install(core, core_size, NVTX_CBID_CORE_RangeStartA, &range_start_a);
  install(core, core_size, NVTX_CBID_CORE_RangeStartW, &range_start_w);
  install(core, core_size, NVTX_CBID_CORE_RangeEnd, &range_end);
  install(core, core_size, NVTX_CBID_CORE_RangePushEx, &range_push_ex);
  install(core, core_size, NVTX_CBID_CORE_RangePushA, &range_push_a);
  install(core, core_size, NVTX_CBID_CORE_RangePushW, &range_push_w);
  install(core, core_size, NVTX_CBID_CORE_RangePop, &range_pop);
  install(core, core_size, NVTX_CBID_CORE_NameCategoryA, &name_category_a);
  install(core, core_size, NVTX_CBID_CORE_NameCategoryW, &name_category_w);
  install(core, core_size, NVTX_CBID_CORE_NameOsThreadA, &name_os_thread_a);
  install(core, core_size, NVTX_CBID_CORE_NameOsThreadW, &name_os_thread_w);
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) != 0 && core2 != nullptr) {
    install(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, &domain_mark_ex);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, &domain_range_start_ex);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, &domain_range_end);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_range_push_ex);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &domain_range_pop);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &domain_register_string);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &domain_create);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, &domain_create_w);
    install(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, &domain_destroy);
    install(core2, core2_size, NVTX_CBID_CORE2_Initialize, &nvtx_initialize);
  }
  log_line("nvtx_init");
  return 1;
}

}  // extern "C"
