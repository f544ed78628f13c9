// Streaming windows (ProfilerOptions::spill_dir): the spill thread, which
// writes the chunks that recording threads hand over (make_room,
// recorder.cc) to one temporary file per window, and restore_spilled, which
// reads a window's chunks back when its trace is built. The seam with the
// recorder, and the lock order, are described in src/capture/spill.h.
#include "src/capture/spill.h"

#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "src/base/file.h"

namespace tprof::internal {

// The spill thread and its hand-over (the owner's side: spill_chunk, in
// recorder.cc).
//
//   owner thread (make_room, once per chunk)       tprof-spill thread
//   chunk k full ── registry lock: queue it,  ──▶  pwrite records, then
//   busy[k] = true, continue in chunk k+1          payload words, to the
//   (waits for it to be free: counted, at          window's file; index
//   most kSpillMaxWaitNs, then drops, counted)     entry; busy[k] = false
//   restore_spilled (the build, at the window's end): waits for the window's
//   chunks, reads them back in order, closes the (already unlinked) file.
namespace {

struct SpillEntry {
  const void* key = nullptr;
  std::uint32_t base = 0, count = 0;
  std::uint64_t payload_base = 0;
  std::uint32_t payload_words = 0;
  std::uint64_t offset = 0;
  bool lost = false;
};

// One window's file. fd, size and error are the spill thread's until
// `pending` is 0 (then restore_spilled's, under the lock).
struct SpillFile {
  int fd = -1;
  std::uint64_t size = 0;
  std::uint64_t pending = 0;  // chunks queued, not yet written
  std::vector<SpillEntry> index;
  std::string error;
};

struct Spiller {
  std::mutex mu;
  std::condition_variable wake;     // the spill thread: a chunk queued, or quit
  std::condition_variable written;  // restore_spilled: a chunk written
  std::deque<SpillChunk> queue;
  std::map<std::uint32_t, SpillFile> windows;  // by epoch; nodes stay put
  std::string dir;
  bool quit = false;
  // A fork() child's copy: the queue and windows are the parent's, never
  // written nor restored here (configure_spill drops them).
  bool forked = false;
  std::thread thread;
  // Every spill file descriptor open now, under files_mu (taken alone, or
  // first: fork takes it before the others): the child of a fork() closes
  // its copies at once, wherever they were in their life (being created,
  // written, read back) when the process forked. At most three windows
  // hold a file at a time (two ended, one recording) and configure_spill
  // one more: a descriptor past kMaxFiles is not tracked.
  static constexpr int kMaxFiles = 8;
  std::mutex files_mu;
  int files[kMaxFiles] = {-1, -1, -1, -1, -1, -1, -1, -1};
};
Spiller& spiller() {
  static Spiller* s = new Spiller();  // never destroyed, as the registry
  return *s;
}

std::atomic<std::uint64_t> g_spill_chunks{0}, g_spill_bytes{0}, g_spill_waits{0}, g_spill_dropped{0};
std::atomic<std::int64_t> g_spill_wait_ns{0}, g_spill_delay_ns{0}, g_spill_max_wait_ns{kSpillMaxWaitNs};

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// A temporary file in `dir`, unlinked at once: nothing is left behind, even
// by a process that dies; its space is freed when the fd is closed (by
// close_spill_file: a fork child closes its copy at once).
int open_spill_file(const std::string& dir, std::string* error) {
  Spiller& s = spiller();
  // Allocates under the lock fork() takes: the child's allocator is never
  // copied mid-call from this thread.
  const std::lock_guard<std::mutex> lock(s.files_mu);
  std::string path = dir + "/tprof-spill.XXXXXX";
  const int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    *error = "spill_dir \"" + dir + "\": cannot create a file: " + std::strerror(errno);
    return -1;
  }
  ::unlink(path.c_str());
  for (int& f : s.files) {
    if (f < 0) {
      f = fd;
      break;
    }
  }
  return fd;
}

void close_spill_file(int fd) {
  if (fd < 0) return;
  Spiller& s = spiller();
  const std::lock_guard<std::mutex> lock(s.files_mu);
  for (int& f : s.files) {
    if (f == fd) f = -1;
  }
  ::close(fd);
}

// Returns 0 or the errno of the failure. A write past RLIMIT_FSIZE fails
// with EFBIG, as a full disk fails with ENOSPC: SIGXFSZ (whose default
// action kills the process) is held off by the writers' one guard.
int pwrite_all(int fd, const void* data, std::size_t bytes, std::uint64_t offset) {
  const FileSizeSignalGuard no_sigxfsz;
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return 0;
}

// Why a chunk could not be written, for the window's dropped_events
// diagnostic: the disk or the file size limit, named as such (these are
// not full thread buffers).
std::string spill_write_error(int err, const std::string& dir) {
  const std::string quoted = "\"" + dir + "\"";
  const std::string why = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return "the disk of spill_dir " + quoted + " was full: " + why;
  if (err == EFBIG) {
    return "the spill file in spill_dir " + quoted + " reached the file size limit (RLIMIT_FSIZE, ulimit -f): " + why;
  }
  return "writing the spill file in spill_dir " + quoted + " failed: " + why;
}

bool pread_all(int fd, void* data, std::size_t bytes, std::uint64_t offset) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

void run_spill() {
  pthread_setname_np(pthread_self(), "tprof-spill");
  Spiller& s = spiller();
  std::unique_lock<std::mutex> lock(s.mu);
  for (;;) {
    s.wake.wait(lock, [&] { return s.quit || !s.queue.empty(); });
    if (s.queue.empty()) return;  // quit, and every chunk written
    const SpillChunk c = s.queue.front();
    s.queue.pop_front();
    SpillFile& f = s.windows[c.epoch];
    const std::string dir = s.dir;
    lock.unlock();
    if (const std::int64_t delay = g_spill_delay_ns.load(std::memory_order_relaxed); delay > 0) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(delay));
    }
    SpillEntry e{c.key, c.base, c.count, c.payload_base, c.payload_words, f.size, false};
    if (f.fd < 0 && f.error.empty()) f.fd = open_spill_file(dir, &f.error);
    const std::size_t record_bytes = std::size_t{c.count} * sizeof(Record);
    const std::size_t payload_bytes = std::size_t{c.payload_words} * sizeof(std::uint64_t);
    int err = f.fd < 0 ? -1 : pwrite_all(f.fd, c.records, record_bytes, f.size);
    if (err == 0) err = pwrite_all(f.fd, c.payload, payload_bytes, f.size + record_bytes);
    if (err != 0) {
      if (f.error.empty()) f.error = spill_write_error(err, dir);  // (f.fd < 0: open_spill_file's)
      e.lost = true;
      g_spill_dropped.fetch_add(c.count, std::memory_order_relaxed);
    } else {
      f.size += record_bytes + payload_bytes;
      g_spill_chunks.fetch_add(1, std::memory_order_relaxed);
      g_spill_bytes.fetch_add(record_bytes + payload_bytes, std::memory_order_relaxed);
    }
    lock.lock();
    f.index.push_back(e);  // reserved when the chunk was queued
    --f.pending;
    // The owner may write the chunk again: its bytes are in the file.
    c.busy->store(false, std::memory_order_release);
    s.written.notify_all();
  }
}


}  // namespace

bool wait_for_free_chunk(const std::atomic<bool>& busy, bool* dropping) noexcept {
  if (busy.load(std::memory_order_acquire)) {
    // The spill thread is behind: wait for it, a bounded and counted time
    // (a record is never kept waiting by a thread that already gave up).
    if (*dropping) return false;
    const std::int64_t t0 = now_ns();
    const std::int64_t max_wait = g_spill_max_wait_ns.load(std::memory_order_relaxed);
    std::int64_t waited = 0;
    while (busy.load(std::memory_order_acquire) && waited < max_wait) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      waited = now_ns() - t0;
    }
    g_spill_waits.fetch_add(1, std::memory_order_relaxed);
    g_spill_wait_ns.fetch_add(waited, std::memory_order_relaxed);
    if (busy.load(std::memory_order_acquire)) {
      *dropping = true;
      return false;
    }
  }
  *dropping = false;
  return true;
}

bool queue_spill_chunk(const SpillChunk& c) noexcept {
  Spiller& s = spiller();
  try {
    std::lock_guard<std::mutex> spill_lock(s.mu);
    SpillFile& f = s.windows[c.epoch];
    f.index.reserve(f.index.size() + f.pending + 1);
    s.queue.push_back(c);
    ++f.pending;
  } catch (...) {
    return false;  // no memory for the queue
  }
  return true;
}

void wake_spill_thread() noexcept { spiller().wake.notify_one(); }

void count_spill_drop() noexcept { g_spill_dropped.fetch_add(1, std::memory_order_relaxed); }

std::mutex& spill_files_mutex() { return spiller().files_mu; }

std::mutex& spill_queue_mutex() { return spiller().mu; }

void forget_spill_in_child() noexcept {
  Spiller& s = spiller();
  // The child's descriptors of the parent's spill files (the parent's
  // files are untouched: only this process's references go, and with them
  // the disk space a long-lived child would keep).
  for (int& fd : s.files) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  for (auto& [epoch, f] : s.windows) f.fd = -1;
  s.forked = true;
  // The parent's threads that were waiting on these are counted by the
  // child's copies for ever, and glibc's notify then waits for them to
  // leave (a hang at the child's first window that spills). Made anew, as
  // the spill thread's handle (not destroyed: that would wait, or
  // terminate on a joinable thread).
  new (&s.wake) std::condition_variable();
  new (&s.written) std::condition_variable();
  new (&s.thread) std::thread();
}

void close_spilled_span(ThreadBuffer* b, std::uint32_t epoch, std::uint32_t index, std::uint64_t end) noexcept {
  // Only into the span's own window: after it, the span ended too late.
  if (tl_buffer != b || g_epoch.load(std::memory_order_relaxed) != epoch) return;
  append_inside({index, end, 0, 0, kRecordSpanEnd, 0});
}

Status configure_spill(const std::string& dir) {
  const TprofSection section;  // holds the registry's and the spiller's locks
  Spiller& s = spiller();
  if (!dir.empty()) {
    std::string error;
    const int fd = open_spill_file(dir, &error);
    if (fd < 0) return Error(ErrorCode::kIo, error, dir);
    close_spill_file(fd);
  }
  // Stops the thread first (it writes what is queued), then starts it
  // again for `dir`.
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.quit = true;
  }
  s.wake.notify_all();
  if (s.thread.joinable()) s.thread.join();
  set_ring_chunks(dir.empty() ? 1 : kSpillChunks);
  {
    // A fork child: the parent's chunks and windows are dropped here (not
    // in the fork handler, which must not free: another thread of the
    // parent may have held the allocator's lock).
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.forked) {
      s.queue.clear();
      s.windows.clear();
      s.forked = false;
    }
  }
  if (dir.empty()) return {};
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.quit = false;
    s.dir = dir;
  }
  for (auto* c : {&g_spill_chunks, &g_spill_bytes, &g_spill_waits, &g_spill_dropped}) {
    c->store(0, std::memory_order_relaxed);
  }
  g_spill_wait_ns.store(0, std::memory_order_relaxed);
  try {
    s.thread = std::thread(run_spill);
  } catch (const std::system_error& e) {
    set_ring_chunks(1);
    return Error(ErrorCode::kInternal, std::string("cannot start the spill thread: ") + e.what());
  }
  return {};
}

SpillCounters spill_counters() {
  SpillCounters c;
  c.chunks = g_spill_chunks.load(std::memory_order_relaxed);
  c.bytes = g_spill_bytes.load(std::memory_order_relaxed);
  c.waits = g_spill_waits.load(std::memory_order_relaxed);
  c.wait_ns = g_spill_wait_ns.load(std::memory_order_relaxed);
  c.dropped = g_spill_dropped.load(std::memory_order_relaxed);
  return c;
}

void set_spill_delay_for_testing(std::int64_t ns) { g_spill_delay_ns.store(ns, std::memory_order_relaxed); }

void set_spill_max_wait_for_testing(std::int64_t ns) { g_spill_max_wait_ns.store(ns, std::memory_order_relaxed); }

std::unique_ptr<RestoredWindow> restore_spilled(std::uint32_t epoch, std::vector<ThreadRecords>* threads) {
  Spiller& s = spiller();
  SpillFile f;
  {
    const TprofSection section;  // holds the spiller's lock
    std::unique_lock<std::mutex> lock(s.mu);
    auto it = s.windows.find(epoch);
    if (it == s.windows.end()) return nullptr;
    s.written.wait(lock, [&] { return it->second.pending == 0; });
    f = std::move(it->second);
    s.windows.erase(it);
  }
  auto out = std::make_unique<RestoredWindow>();
  std::sort(f.index.begin(), f.index.end(), [](const SpillEntry& x, const SpillEntry& y) {
    return std::tie(x.key, x.base, x.payload_base) < std::tie(y.key, y.base, y.payload_base);
  });
  for (ThreadRecords& tr : *threads) {
    if (tr.base == 0 && tr.payload_base == 0) continue;
    std::vector<Record> records(std::size_t{tr.base} + tr.records.size(), Record{});
    std::vector<std::uint64_t> words(tr.payload_base, 0);
    auto e = std::lower_bound(f.index.begin(), f.index.end(), tr.spill_key,
                              [](const SpillEntry& x, const void* key) { return x.key < key; });
    for (; e != f.index.end() && e->key == tr.spill_key; ++e) {
      const bool fits = std::size_t{e->base} + e->count <= tr.base && e->payload_base + e->payload_words <= words.size();
      const std::size_t record_bytes = std::size_t{e->count} * sizeof(Record);
      if (e->lost || !fits || !pread_all(f.fd, records.data() + e->base, record_bytes, e->offset) ||
          !pread_all(f.fd, words.data() + e->payload_base, std::size_t{e->payload_words} * sizeof(std::uint64_t),
                     e->offset + record_bytes)) {
        if (!e->lost && out->error.empty()) out->error = std::string("reading the spill file failed: ") + std::strerror(errno);
        if (fits) std::fill_n(records.begin() + e->base, e->count, Record{});  // kind 0: skipped by the builder
        out->lost += e->count;  // not tr.dropped: these are not a full buffer's (CaptureInfo::lost_events)
      }
    }
    // The chunk still in place; a span's end is read once (its thread may
    // still be writing it).
    for (std::size_t i = 0; i < tr.records.size(); ++i) {
      Record r = tr.records[i];
      r.c = load_end(tr.records[i]);
      records[tr.base + i] = r;
    }
    // Ends of spans whose records were spilled before they ended.
    for (const Record& r : records) {
      if (r.kind != kRecordSpanEnd || r.a >= records.size()) continue;
      Record& span = records[r.a];
      const bool is_span = span.kind == kRecordScope || span.kind == kRecordDynamicScope || span.kind == kRecordStep;
      if (is_span && span.c == 0) span.c = r.b;
    }
    tr.records = std::span<const Record>(records.data(), records.size());
    tr.base = 0;
    tr.spilled_payload = std::span<const std::uint64_t>(words.data(), words.size());
    out->records.push_back(std::move(records));
    out->payload.push_back(std::move(words));
  }
  if (!f.error.empty() && out->error.empty()) out->error = f.error;
  close_spill_file(f.fd);
  return out;
}

}  // namespace tprof::internal
