// Thread buffers: registered on a thread's first record of a window,
// preallocated, owned by the registry so that a thread's records survive its
// exit until they are collected.
#include "src/capture/recorder.h"

#include <malloc.h>  // malloc_trim (glibc)
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>

#include "src/base/file.h"
#include "src/base/hash.h"
#include "src/capture/recorders.h"
#include "src/capture/spill.h"
#include "tprof/record_function.h"

namespace tprof::internal {

std::atomic<bool> g_recording{false};
std::atomic<bool> g_record_shapes{false};
std::atomic<bool> g_profile_memory{false};
std::atomic<std::uint32_t> g_epoch{0};
constinit thread_local ThreadBuffer* tl_buffer = nullptr;
constinit thread_local std::atomic<std::uint32_t> tl_in_recorder{kOutsideRecorder};

namespace {

// Records refused on this thread while it had no buffer of the current
// window to count them in (it was attaching one, or about to): added to the
// buffer's `refused` when the thread leaves tprof (leave_tprof). A
// lock-free atomic: a handler may interrupt an increment with its own.
constinit thread_local std::atomic<std::uint64_t> tl_refused_pending{0};

}  // namespace

// Ends a kInTprof span: the mark goes back to `was`, then the refusals
// counted as pending go to the thread's buffer, if it has one of the
// current window (else they wait for its next attach). From the restored
// mark on, a handler counts straight into the buffer (count_refused) or
// into the pending count again; both are atomic adds.
void leave_tprof(std::uint32_t was) noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tl_in_recorder.store(was, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ThreadBuffer* b = tl_buffer;
  if (tl_refused_pending.load(std::memory_order_relaxed) != 0 && b != nullptr &&
      b->epoch.load(std::memory_order_relaxed) == g_epoch.load(std::memory_order_relaxed)) {
    b->refused.fetch_add(tl_refused_pending.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  }
}

namespace {

// A record's span inside the recorder (enter_recorder/leave_recorder) for
// the out-of-line paths; false when refused (counted, unless `count` is
// false: a call that records nothing, as NVTX calls made while no window
// records, still keeps out of the thread's state).
class RecorderSection {
 public:
  RecorderSection() noexcept : entered_(enter_recorder()) {}
  explicit RecorderSection(bool count) noexcept
      : entered_(count ? enter_recorder() : tl_in_recorder.load(std::memory_order_relaxed) == kOutsideRecorder) {
    if (!count && entered_) {
      tl_in_recorder.store(kInRecorder, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
  }
  ~RecorderSection() {
    if (entered_) leave_recorder();
  }
  RecorderSection(const RecorderSection&) = delete;
  RecorderSection& operator=(const RecorderSection&) = delete;
  explicit operator bool() const noexcept { return entered_; }

 private:
  bool entered_;
};

// Anonymous memory for a thread's arrays. MAP_NORESERVE: the pages a thread
// never writes are not charged to the process, so thousands of short-lived
// threads with 32 MiB buffers do not make fork() fail (ENOMEM); and trim()
// unmaps the unused tail when the thread exits, while its records wait for
// the collector.
class Mapping {
 public:
  Mapping() = default;
  ~Mapping() { reset(); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  bool allocate(std::size_t bytes) {
    reset();
    if (bytes == 0) return true;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    data_ = p;
    bytes_ = bytes;
    return true;
  }
  void reset() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
  }
  // Unmaps the whole pages past the first `keep` bytes.
  void trim(std::size_t keep) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t from = (keep + page - 1) / page * page;
    if (data_ == nullptr || from >= bytes_) return;
    if (::munmap(static_cast<char*>(data_) + from, bytes_ - from) == 0) bytes_ = from;
  }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// One of a thread's two buffers. The flags are read and written under the
// registry's lock.
struct BufferSlot {
  ThreadBuffer buffer;
  Mapping records;
  Mapping payload;
  // Every page of records/payload has been written (prepare_thread_buffer,
  // prefault_thread); cleared when the arrays are reallocated.
  bool prefaulted = false;
  // Collected at a window's end; its records are read until that window's
  // trace is built (release_window). The owner does not attach it meanwhile.
  bool held = false;
  // The delivery thread is writing its pages (prefault_thread): the owner
  // waits before attaching it.
  bool preparing = false;
  // The whole arrays (`buffer` views one chunk of them when spilling).
  Record* ring = nullptr;
  std::uint32_t ring_capacity = 0;
  std::uint64_t* payload_ring = nullptr;
  std::uint32_t payload_ring_capacity = 0;
  // Spilling: the ring's chunks (1: no spilling, the whole arrays), the
  // current one, and which are with the spill thread (set by the owner
  // under the registry's lock, cleared by the spill thread once written).
  int chunks = 1;
  int chunk = 0;
  std::atomic<bool> busy[kSpillChunks] = {};
  bool dropping = false;  // waited kSpillMaxWaitNs in vain: drop without waiting until a chunk is free (owner)
  BufferSlot() { buffer.slot = this; }
};

// Two buffers per thread (double buffering): a window's records stay in
// place while its trace is built on the delivery thread, and the thread
// records the next window into the other buffer. The profiler lets a
// window begin only while at most one ended window is unbuilt, so one of
// the two is always free when a thread attaches.
constexpr int kSlots = 2;

struct ThreadState {
  BufferSlot slots[kSlots];
  int current = -1;  // the slot tl_buffer points to (under the registry's lock)
  std::int64_t tid = 0;
  std::string name;
  std::atomic<bool> alive{true};
};

struct Registry {
  std::mutex mu;
  std::condition_variable prepared;  // a slot's `preparing` went false
  std::vector<std::unique_ptr<ThreadState>> threads;
  std::uint32_t capacity = 1u << 20;
  std::uint32_t payload_capacity = 1u << 18;
  // The last window whose trace is built (release_window): a dead thread's
  // state goes when every buffer it attached belongs to it or an earlier one.
  std::uint32_t released_epoch = 0;
  int spill_chunks = 1;  // chunks per ring for buffers attached from now on (configure_spill)
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: threads may record during exit
  return *r;
}

// One recorder per process (src/capture/recorders.h): as this copy is
// loaded (the program's start, or the dlopen of a plugin that linked tprof
// statically), warn when another copy is already there. Here, in the file
// every copy links, so that recorders.cc and its ELF note come along.
struct Announce {
  Announce() noexcept { announce_recorder(); }
};
const Announce g_announce;

thread_local ThreadState* tl_state = nullptr;
// Set when the guard below has run: a record made later in the thread's exit
// (another thread_local's destructor) gets a state that is already dead.
constinit thread_local bool tl_exited = false;

// Marks the thread's state dead when the thread exits; the collector frees
// it. What the thread wrote stays for the collector; the rest of its arrays
// is given back now: nothing writes past `size` any more (tl_buffer is
// cleared, a later record in this thread's exit gets a new state), and the
// collector reads only what records point to, below it.
struct ExitGuard {
  ~ExitGuard() {
    const TprofSection section;
    if (tl_state != nullptr) {
      // A buffer the delivery thread is faulting in is not trimmed under it.
      Registry& r = registry();
      std::unique_lock<std::mutex> lock(r.mu);
      for (BufferSlot& slot : tl_state->slots) {
        r.prepared.wait(lock, [&] { return !slot.preparing; });
        // A spilling ring's chunks may be anywhere in it (and with the
        // spill thread): kept whole.
        if (slot.chunks > 1) continue;
        const ThreadBuffer& b = slot.buffer;
        slot.records.trim(std::size_t{b.size} * sizeof(Record));
        slot.payload.trim(std::size_t{b.payload_size} * sizeof(std::uint64_t));
      }
      tl_state->alive.store(false, std::memory_order_release);
    }
    tl_state = nullptr;
    tl_buffer = nullptr;
    tl_exited = true;
  }
};
thread_local ExitGuard tl_exit_guard;

std::string current_thread_name() {
  char name[64] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) return {};
  return name;
}

// Runtime names: interned process-wide for a window; each thread caches its
// lookups. A record carries (generation << 32 | id): the table is emptied
// after every window (release_dynamic_names), so a program naming millions
// of scopes does not keep them, and a key from an earlier generation is
// recognised as stale instead of naming the wrong scope.
struct NameTable {
  std::mutex mu;
  std::uint32_t gen = 1;
  std::deque<std::string> names;  // stable addresses
  std::deque<std::string> categories;
  std::unordered_map<std::string, std::uint32_t> ids;
  std::vector<std::uint32_t> category_of;
};
std::atomic<std::uint32_t> g_names_gen{1};
constexpr std::uint64_t kNoName = ~std::uint64_t{0};  // interning failed (no memory)
NameTable& names() {
  static NameTable* t = new NameTable();
  return *t;
}

struct NameCache {
  // Keyed by the name's text and the category's address: the categories
  // are a few constants, so a hit neither measures nor compares one (the
  // same text at another address is a slot of its own, with the same id).
  // A name of up to 16 bytes is compared as the two words its hash was
  // made of (NameProbe), without touching `name`: the hit of a repeated
  // run-time name then costs the hash and three compares.
  struct Slot {
    std::uint64_t w0 = 0, w1 = 0;    // a short name's words (short_words)
    std::uint64_t hash = 0;
    const char* category = nullptr;  // nullptr: an empty slot
    std::size_t size = 0;            // the name's length
    std::uint32_t id = 0;
    std::string name;
  };
  std::vector<Slot> slots = std::vector<Slot>(64);
  std::size_t mask = 63;  // slots.size() - 1, kept (a hit does not divide by the slot's size)
  std::size_t used = 0;
  std::uint32_t gen = 0;  // the table generation its ids belong to

  // Starts over for table generation `g`, giving the slots' memory back
  // (assign() would keep the capacity: 2M names left 200 MB of slots, and
  // their keys 96 MB until the thread named a scope again).
  void reset(std::uint32_t g) {
    std::vector<Slot>(64).swap(slots);
    mask = 63;
    used = 0;
    gen = g;
  }
};
// A thread's cache saves the table's lock for names it repeats; one naming
// more distinct scopes than this starts it over instead of growing it
// (unique names never hit it), so it holds a few MB at most.
constexpr std::size_t kMaxCacheSlots = std::size_t{1} << 16;
// The cache lives on the heap behind trivially destructible thread_locals:
// a scope with a runtime name can run inside another thread_local's
// destructor after this thread's cache is gone (a pool worker exiting while
// a window records); it then goes to the process-wide table directly.
constinit thread_local NameCache* tl_names = nullptr;
constinit thread_local bool tl_names_gone = false;
struct NameCacheOwner {
  ~NameCacheOwner() {
    delete tl_names;
    tl_names = nullptr;
    tl_names_gone = true;
  }
};
thread_local NameCacheOwner tl_names_owner;

NameCache* name_cache() {
  if (tl_names != nullptr || tl_names_gone) return tl_names;
  tl_names = new (std::nothrow) NameCache();
  (void)&tl_names_owner;  // constructs the owner: its destructor frees the cache at thread exit
  return tl_names;
}

// A name of up to 16 bytes (most names, every argument key) as two words,
// read in whole loads that may overlap; false for a longer one.
bool short_words(std::string_view s, std::uint64_t* w0, std::uint64_t* w1) {
  const std::size_t n = s.size();
  const char* p = s.data();
  if (n >= 8 && n <= 16) {
    std::memcpy(w0, p, 8);
    std::memcpy(w1, p + n - 8, 8);
    return true;
  }
  if (n < 8) {
    *w0 = load_under_8(p, n);
    *w1 = 0;
    return true;
  }
  return false;
}

// A name as the thread cache looks it up: a short one's two words and the
// hash, made of those words in products that run side by side (not
// hash_str's chain of dependent ones) with the category's address folded in.
struct NameProbe {
  std::uint64_t w0 = 0, w1 = 0;
  std::uint64_t hash = 0;
  bool is_short = false;
};

__attribute__((always_inline)) inline NameProbe probe_name(std::string_view name, const char* category) {
  NameProbe p;
  const std::uint64_t c = reinterpret_cast<std::uintptr_t>(category) * 0x9e3779b97f4a7c15ull;
  p.is_short = short_words(name, &p.w0, &p.w1);
  p.hash = (p.is_short ? mix64(p.w0 ^ 0xa0761d6478bd642full, p.w1 ^ 0xe7037ed1a0b428dbull ^ name.size())
                       : hash_str(name)) ^
           c;
  return p;
}

// Whether slot `s` holds (name, category) as probed by `p`.
__attribute__((always_inline)) inline bool slot_holds(const NameCache::Slot& s, std::string_view name,
                                                      const char* category, const NameProbe& p) {
  if (s.category != category || s.size != name.size()) return false;
  if (p.is_short) return ((s.w0 ^ p.w0) | (s.w1 ^ p.w1)) == 0;
  return s.hash == p.hash && std::memcmp(s.name.data(), name.data(), name.size()) == 0;
}

// The first time this thread sees (name, category): the process-wide
// table, under its lock, then the thread's cache.
[[gnu::noinline]] std::uint64_t intern_dynamic_slow(std::string_view name, const char* category,
                                                    const NameProbe& p, NameCache* cached) {
  const std::string_view cat = category;
  std::string key;
  key.reserve(name.size() + 1 + cat.size());
  key.append(name).push_back('\0');
  key.append(cat);
  std::uint32_t id = 0, gen = 0;
  {
    NameTable& t = names();
    std::lock_guard<std::mutex> lock(t.mu);
    gen = t.gen;
    auto [it, added] = t.ids.try_emplace(std::move(key), static_cast<std::uint32_t>(t.names.size()));
    if (added) {
      t.names.emplace_back(name);
      auto c = std::find(t.categories.begin(), t.categories.end(), cat);
      if (c == t.categories.end()) {
        t.categories.emplace_back(cat);
        c = t.categories.end() - 1;
      }
      t.category_of.push_back(static_cast<std::uint32_t>(c - t.categories.begin()));
    }
    id = it->second;
  }
  const std::uint64_t result = (std::uint64_t{gen} << 32) | id;
  if (cached == nullptr || gen != cached->gen) return result;  // emptied meanwhile: not cached
  NameCache& cache = *cached;
  if ((cache.used + 1) * 2 > cache.slots.size() && cache.slots.size() >= kMaxCacheSlots) {
    cache.reset(gen);
  } else if ((cache.used + 1) * 2 > cache.slots.size()) {
    std::vector<NameCache::Slot> bigger(cache.slots.size() * 2);
    const std::size_t mask = bigger.size() - 1;
    for (NameCache::Slot& s : cache.slots) {
      if (s.category == nullptr) continue;
      std::size_t i = s.hash & mask;
      while (bigger[i].category != nullptr) i = (i + 1) & mask;
      bigger[i] = std::move(s);
    }
    cache.slots.swap(bigger);
    cache.mask = mask;
  }
  const std::size_t mask = cache.mask;
  std::size_t i = p.hash & mask;
  while (cache.slots[i].category != nullptr) i = (i + 1) & mask;
  cache.slots[i] = NameCache::Slot{p.w0, p.w1, p.hash, category, name.size(), id, std::string(name)};
  ++cache.used;
  return result;
}

// The thread cache's key for (name, category), or kNoName when it does not
// hold it (no cache yet, the table emptied since, a name not seen).
__attribute__((always_inline)) inline std::uint64_t cached_name(std::string_view name, const char* category,
                                                                const NameProbe& p) noexcept {
  const NameCache* const cached = tl_names;
  if (cached == nullptr) return kNoName;
  const std::uint32_t current = g_names_gen.load(std::memory_order_acquire);
  if (cached->gen != current) return kNoName;
  const std::size_t mask = cached->mask;
  for (std::size_t i = p.hash & mask;; i = (i + 1) & mask) {
    const NameCache::Slot& s = cached->slots[i];
    if (s.category == nullptr) return kNoName;
    if (slot_holds(s, name, category, p)) return (std::uint64_t{current} << 32) | s.id;
  }
}

// Not in the thread's cache: the cache made or started over, then the
// process-wide table. Out of memory loses the name (kNoName: the record is
// dropped and counted), never the process.
[[gnu::noinline]] std::uint64_t intern_dynamic_miss(std::string_view name, const char* category,
                                                    const NameProbe& p) noexcept {
  try {
    NameCache* const cached = name_cache();
    if (cached != nullptr) {
      const std::uint32_t current = g_names_gen.load(std::memory_order_acquire);
      if (cached->gen != current) cached->reset(current);  // the table was emptied since
    }
    return intern_dynamic_slow(name, category, p, cached);
  } catch (...) {
    return kNoName;
  }
}

// A runtime name's key: a lookup in the thread's cache, the table's lock
// only the first time this thread sees the name.
__attribute__((always_inline)) inline std::uint64_t intern_dynamic(std::string_view name,
                                                                   const char* category) noexcept {
  if (category == nullptr) category = kUserAnnotation;
  const NameProbe p = probe_name(name, category);
  const std::uint64_t key = cached_name(name, category, p);
  return key != kNoName ? key : intern_dynamic_miss(name, category, p);
}

}  // namespace

void configure_buffers(std::uint32_t events_per_thread, std::uint32_t payload_words_per_thread) {
  const TprofSection section;  // holds the registry's lock
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.capacity = std::max<std::uint32_t>(events_per_thread, 1);
  r.payload_capacity = payload_words_per_thread;
}

namespace {

ThreadBuffer* attach_thread_buffer_or_throw();

}  // namespace

void count_refused() noexcept {
  // Inside the recorder with the current window's buffer attached: into it.
  // Elsewhere (attaching, holding a lock, a stale or no buffer yet) the
  // buffer may be about to be reset: pending, moved into the buffer when the
  // thread leaves that section. A handler that interrupts this one counts
  // its own record with its own locked add.
  ThreadBuffer* b = tl_buffer;
  if (tl_in_recorder.load(std::memory_order_relaxed) == kInRecorder && b != nullptr &&
      b->epoch.load(std::memory_order_relaxed) == g_epoch.load(std::memory_order_relaxed)) {
    b->refused.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  tl_refused_pending.fetch_add(1, std::memory_order_relaxed);
}

ThreadBuffer* attach_thread_buffer() noexcept {
  // A handler interrupting the attach is refused: the buffer is being reset
  // and the registry's lock may be held by this thread.
  const TprofSection section;
  // Out of memory for the registry or the thread's state: the event is
  // dropped (uncounted: there is no buffer to count it in), never an abort.
  try {
    return attach_thread_buffer_or_throw();
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

namespace {

// Allocates a thread's arrays; on failure the buffer has no room, so every
// record of the window is counted as dropped. Returns whether the array
// changed (its pages then need faulting in again).
template <typename T>
bool reallocate(Mapping* storage, T** view, std::uint32_t* capacity, std::uint32_t wanted) {
  if (*capacity == wanted && *view != nullptr) return false;
  *view = nullptr;
  *capacity = 0;
  if (!storage->allocate(std::size_t{wanted} * sizeof(T)) || storage->data() == nullptr) return true;
  *view = static_cast<T*>(storage->data());
  *capacity = wanted;
  return true;
}

// The calling thread's state, registered now if it has none. Under the
// registry's lock.
ThreadState* own_state_locked(Registry& r) {
  ThreadState* st = tl_state;
  if (st == nullptr) {
    r.threads.push_back(std::make_unique<ThreadState>());
    st = r.threads.back().get();
    st->tid = static_cast<std::int64_t>(syscall(SYS_gettid));
  }
  return st;
}

void adopt_state(ThreadState* st) {
  if (tl_state != nullptr) return;
  tl_state = st;
  if (tl_exited) {
    st->alive.store(false, std::memory_order_release);  // collected after this window, then freed
  } else {
    (void)&tl_exit_guard;  // constructs the guard: its destructor runs at thread exit
  }
}

ThreadBuffer* attach_thread_buffer_or_throw() {
  Registry& r = registry();
  ThreadState* st = nullptr;
  BufferSlot* slot = nullptr;
  std::uint32_t capacity = 0, payload_capacity = 0;
  int chunks = 1;
  {
    std::unique_lock<std::mutex> lock(r.mu);
    capacity = r.capacity;
    payload_capacity = r.payload_capacity;
    // A ring smaller than its chunks does not spill.
    chunks = capacity >= static_cast<std::uint32_t>(r.spill_chunks) ? r.spill_chunks : 1;
    st = own_state_locked(r);
    // A free buffer whose pages are in (the one used last first), else
    // one the delivery thread is faulting in (waited for: it is nearly
    // done), else any free one (its pages fault as records are written).
    for (;;) {
      auto free_slot = [&](int i) { return !st->slots[i].held && !st->slots[i].preparing; };
      auto warm = [&](int i) {
        const BufferSlot& x = st->slots[i];
        return x.prefaulted && x.ring_capacity == capacity &&
               (payload_capacity == 0 || x.payload_ring_capacity == payload_capacity);
      };
      int pick = -1;
      bool preparing = false;
      for (int pass = 0; pass < 2 && pick < 0; ++pass) {
        for (int k = 0; k < kSlots && pick < 0; ++k) {
          // The current one first, then the others.
          const int i = st->current >= 0 ? (st->current + k) % kSlots : k;
          preparing |= !st->slots[i].held && st->slots[i].preparing;
          if (free_slot(i) && (pass == 1 || warm(i))) pick = i;
        }
        if (pass == 0 && pick < 0 && preparing) break;
      }
      if (pick < 0 && preparing) {
        r.prepared.wait(lock);
        continue;
      }
      // Both held: a window began while two ended ones were unbuilt, which
      // the profiler never does. No buffer: the event is dropped.
      if (pick < 0) return nullptr;
      st->current = pick;
      slot = &st->slots[pick];
      break;
    }
  }
  adopt_state(st);
  // Preallocated once per buffer (pages are touched only as records are
  // written, or by prefault_thread); reallocated only when a later profiler
  // asks for another size. The collector never reads a buffer being reset
  // here (a held one is never picked). A fresh array may even sit at the
  // old one's address: whether it changed is what reallocate says, not a
  // pointer comparison.
  ThreadBuffer& b = slot->buffer;
  bool changed = reallocate(&slot->records, &slot->ring, &slot->ring_capacity, capacity);
  if (payload_capacity > 0) {
    changed |= reallocate(&slot->payload, &slot->payload_ring, &slot->payload_ring_capacity, payload_capacity);
  }
  // Its chunks are all written: the slot was held until its window was
  // restored, which waits for the spill thread.
  slot->chunks = chunks;
  slot->chunk = 0;
  slot->dropping = false;
  b.records = slot->ring;
  b.capacity = slot->ring_capacity / static_cast<std::uint32_t>(chunks);
  b.payload = slot->payload_ring;
  b.payload_capacity = slot->payload_ring_capacity / static_cast<std::uint32_t>(chunks);
  b.base = 0;
  b.payload_base = 0;
  b.size = 0;
  b.payload_size = 0;
  b.published.store(0, std::memory_order_relaxed);
  b.dropped.store(0, std::memory_order_relaxed);
  b.refused.store(0, std::memory_order_relaxed);
  b.dropped_shapes.store(0, std::memory_order_relaxed);
  {
    // The collector reads name and epoch under the registry lock.
    std::string name = current_thread_name();
    std::lock_guard<std::mutex> lock(r.mu);
    if (changed) slot->prefaulted = false;
    st->name = std::move(name);
    b.epoch.store(g_epoch.load(std::memory_order_relaxed), std::memory_order_release);
  }
  tl_buffer = &b;
  return tl_buffer;
}

// Huge pages where aligned, then one write per 4 KiB page (volatile: the
// stores must happen). In first_window_bench the advice made a fresh
// process's start() ~80 ms faster (a 32 MiB buffer); populating with
// prefault_for_writing() instead made its first scopes 2.3x slower.
void touch_pages(void* data, std::size_t bytes) {
  constexpr std::size_t kPage = 4096;
  advise_huge_pages(data, bytes);
  volatile char* p = static_cast<char*>(data);
  for (std::size_t i = 0; i < bytes; i += kPage) p[i] = 0;
  if (bytes > 0) p[bytes - 1] = 0;  // the last page, when the array does not start on a page boundary
}

}  // namespace

bool prepare_thread_buffer() noexcept {
  // The pages are written below: a handler's record meanwhile would be
  // overwritten, so it is refused (counted) instead.
  const TprofSection section;
  ThreadBuffer* b = attach_thread_buffer();
  if (b == nullptr || b->records == nullptr) return false;
  ThreadState* st = tl_state;
  if (st == nullptr) return true;
  BufferSlot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    slot = &st->slots[st->current];
    if (slot->prefaulted) return true;
  }
  // The buffer is empty for this window, so nothing recorded is overwritten;
  // it is this thread's current one, which prefault_thread never touches.
  touch_pages(slot->ring, std::size_t{slot->ring_capacity} * sizeof(Record));
  if (slot->payload_ring != nullptr) {
    touch_pages(slot->payload_ring, std::size_t{slot->payload_ring_capacity} * sizeof(std::uint64_t));
  }
  std::lock_guard<std::mutex> lock(registry().mu);
  slot->prefaulted = true;
  return true;
}

ThreadHandle register_thread() noexcept {
  const TprofSection section;  // holds the registry's lock
  try {
    Registry& r = registry();
    ThreadState* st = nullptr;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      st = own_state_locked(r);
    }
    adopt_state(st);
    return st;
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

void prefault_thread(ThreadHandle thread) noexcept {
  if (thread == nullptr) return;
  auto* st = static_cast<ThreadState*>(thread);
  Registry& r = registry();
  for (int i = 0; i < kSlots; ++i) {
    BufferSlot& slot = st->slots[i];
    std::uint32_t capacity = 0, payload_capacity = 0;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      // Its owner's current buffer (it may be recording into it), a held
      // one (being read), or one already done: left alone.
      capacity = r.capacity;
      payload_capacity = r.payload_capacity;
      // The current buffer's fields are its owner's (written outside the
      // lock): not even read.
      if (i == st->current || slot.held || !st->alive.load(std::memory_order_relaxed)) continue;
      if (slot.prefaulted && slot.ring_capacity == capacity &&
          (payload_capacity == 0 || slot.payload_ring_capacity == payload_capacity)) {
        continue;
      }
      slot.preparing = true;
    }
    // The owner does not attach a preparing slot: this thread has it alone
    // (its `buffer` view is set again when it is attached).
    bool ok = true;
    try {
      reallocate(&slot.records, &slot.ring, &slot.ring_capacity, capacity);
      if (payload_capacity > 0) {
        reallocate(&slot.payload, &slot.payload_ring, &slot.payload_ring_capacity, payload_capacity);
      }
    } catch (...) {
      ok = false;
    }
    ok = ok && slot.ring != nullptr;
    if (ok) {
      touch_pages(slot.ring, std::size_t{slot.ring_capacity} * sizeof(Record));
      if (slot.payload_ring != nullptr) {
        touch_pages(slot.payload_ring, std::size_t{slot.payload_ring_capacity} * sizeof(std::uint64_t));
      }
    }
    {
      std::lock_guard<std::mutex> lock(r.mu);
      slot.preparing = false;
      slot.prefaulted = ok;
    }
    r.prepared.notify_all();
  }
}

std::vector<ThreadRecords> collect(std::uint32_t epoch) {
  const TprofSection section;  // holds the registry's lock
  Registry& r = registry();
  std::vector<ThreadRecords> out;
  std::lock_guard<std::mutex> lock(r.mu);
  out.reserve(r.threads.size());
  for (const auto& st : r.threads) {
    for (BufferSlot& slot : st->slots) {
      const ThreadBuffer& b = slot.buffer;
      if (b.epoch.load(std::memory_order_acquire) != epoch) continue;
      // Read until release_window(epoch), wherever the trace is built.
      slot.held = true;
      if (b.records == nullptr && b.dropped.load(std::memory_order_relaxed) == 0) continue;
      const std::uint32_t n = b.published.load(std::memory_order_acquire);
      ThreadRecords tr;
      tr.tid = st->tid;
      tr.name = st->name;
      tr.records = b.records != nullptr ? std::span<const Record>(b.records, n) : std::span<const Record>();
      // The whole arena: readers follow only the entries published records
      // refer to, which were written before those records were published.
      tr.payload = std::span<const std::uint64_t>(b.payload, b.payload != nullptr ? b.payload_capacity : 0u);
      tr.base = b.base;  // written under this lock (make_room)
      tr.payload_base = b.payload_base;
      tr.spill_key = &b;
      tr.dropped = b.dropped.load(std::memory_order_relaxed);
      tr.refused = b.refused.load(std::memory_order_relaxed);
      tr.dropped_shapes = b.dropped_shapes.load(std::memory_order_relaxed);
      out.push_back(std::move(tr));
    }
  }
  return out;
}

namespace {

// Whether the OS thread `tid` of this process has finished. A thread marked
// dead may still be running its other thread_local destructors, which can
// record (into a state made for them): its state is freed only once the
// kernel says the thread is gone.
bool thread_gone(std::int64_t tid) {
  return syscall(SYS_tgkill, static_cast<long>(getpid()), static_cast<long>(tid), 0) != 0 && errno == ESRCH;
}

// Whether `epoch` is `released` or before it (epochs wrap: by difference).
bool at_or_before(std::uint32_t epoch, std::uint32_t released) {
  return static_cast<std::int32_t>(released - epoch) >= 0;
}

}  // namespace

void release_window(std::uint32_t epoch) {
  const TprofSection section;  // holds the registry's lock
  Registry& r = registry();
  std::vector<std::unique_ptr<ThreadState>> gone;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.released_epoch = epoch;
    for (const auto& st : r.threads) {
      for (BufferSlot& slot : st->slots) {
        if (slot.held && slot.buffer.epoch.load(std::memory_order_relaxed) == epoch) slot.held = false;
      }
    }
    // Exited threads are done writing, and their records have been used:
    // every buffer they attached belongs to this window or an earlier one
    // (a thread that recorded in the window now open, and exited, stays
    // until that window's trace is built).
    auto done = [&](const std::unique_ptr<ThreadState>& st) {
      if (st->alive.load(std::memory_order_acquire)) return false;
      for (const BufferSlot& slot : st->slots) {
        const std::uint32_t e = slot.buffer.epoch.load(std::memory_order_relaxed);
        if (slot.held || slot.preparing || (e != 0 && !at_or_before(e, epoch))) return false;
      }
      return thread_gone(st->tid);
    };
    for (auto& st : r.threads) {
      if (done(st)) gone.push_back(std::move(st));
    }
    std::erase_if(r.threads, [](const std::unique_ptr<ThreadState>& st) { return st == nullptr; });
  }
  // Unmapped outside the lock: a recording thread attaching meanwhile does
  // not wait for it.
}

// Streaming windows: the owner's side of the hand-over (the spill thread,
// its files and the read-back are spill.cc's; the seam is spill.h).
namespace {

// Hands `b`'s full chunk to the spill thread and makes the next chunk of
// the ring current; false (nothing counted) when it cannot.
bool spill_chunk(ThreadBuffer* b) noexcept {
  auto* slot = static_cast<BufferSlot*>(b->slot);
  if (slot == nullptr || slot->chunks <= 1 || (b->size == 0 && b->payload_size == 0)) return false;
  // Record numbers are 32-bit per thread and window (4G records, 128 GiB).
  if (std::uint64_t{b->base} + b->size + b->capacity > 0xffffffffu) return false;
  const int next = (slot->chunk + 1) % slot->chunks;
  if (!wait_for_free_chunk(slot->busy[next], &slot->dropping)) return false;
  {
    // Under the registry's lock: collect() reads the chunk view whole, and
    // a buffer it has taken (held) hands nothing over after it, nor once
    // its window is built (released): the owner checked the epoch before
    // the window ended, and the chunk would open a file for a window that
    // is never restored again (its descriptor leaked; the records are
    // dropped, counted, as a full buffer's after the window's end).
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (slot->held || at_or_before(b->epoch.load(std::memory_order_relaxed), r.released_epoch)) return false;
    // Busy before it is queued: the spill thread may write it and clear
    // the mark as soon as the spiller's lock is released.
    slot->busy[slot->chunk].store(true, std::memory_order_relaxed);
    if (!queue_spill_chunk(SpillChunk{&slot->busy[slot->chunk], b->epoch.load(std::memory_order_relaxed), b, b->base,
                                      b->size, b->payload_base, b->payload_size, b->records, b->payload})) {
      slot->busy[slot->chunk].store(false, std::memory_order_relaxed);
      return false;  // no memory for the queue
    }
    b->base += b->size;
    b->payload_base += b->payload_size;
    slot->chunk = next;
    b->records = slot->ring + std::size_t{b->capacity} * static_cast<std::size_t>(next);
    if (slot->payload_ring != nullptr) {
      b->payload = slot->payload_ring + std::size_t{b->payload_capacity} * static_cast<std::size_t>(next);
    }
    b->size = 0;
    b->payload_size = 0;
    b->published.store(0, std::memory_order_release);
  }
  wake_spill_thread();
  return true;
}

}  // namespace

bool make_room(ThreadBuffer* b) noexcept {
  if (spill_chunk(b)) return true;
  count_dropped(b);
  const auto* slot = static_cast<const BufferSlot*>(b->slot);
  if (slot != nullptr && slot->chunks > 1) count_spill_drop();
  return false;
}

void set_ring_chunks(int chunks) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().spill_chunks = chunks;
}

namespace {

// Open push/pop ranges of a thread, each with its record (taken when the
// range is pushed, as a scope's). constinit and trivially destructible:
// usable from any thread at any time, even during thread exit.
struct RangeStack {
  static constexpr std::uint32_t kMaxDepth = 128;
  OpenSlot slot[kMaxDepth];  // buffer == nullptr: opened while not recording, or dropped
  std::uint32_t depth;       // may exceed kMaxDepth: those levels are not kept
};
constinit thread_local RangeStack tl_ranges{};

struct OpenRange {
  std::uint64_t name;
  std::uint64_t start;
};
struct RangeMap {
  std::mutex mu;
  std::unordered_map<std::uint64_t, OpenRange> open;
};
RangeMap& range_map() {
  static RangeMap* m = new RangeMap();  // never destroyed: ranges may end during exit
  return *m;
}

// fork() copies a lock held by another thread in the locked state, and
// that thread does not exist in the child: its first attach or runtime name
// would wait forever. tprof's locks are taken around fork() (in the one
// order any is held while taking another: the spill files' alone; the
// registry's, then the spill queue's, as make_room does: spill.h) and
// released on both sides. The forking thread is marked kInTprof meanwhile
// (its mark is copied into the child): a handler on it is refused rather
// than waiting for these.
constinit thread_local std::uint32_t tl_mark_before_fork = kOutsideRecorder;
std::atomic<std::uint32_t> g_fork_generation{0};
void lock_for_fork() {
  tl_mark_before_fork = tl_in_recorder.load(std::memory_order_relaxed);
  tl_in_recorder.store(kInTprof, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  spill_files_mutex().lock();  // waits for a spill file being created or closed
  registry().mu.lock();
  spill_queue_mutex().lock();  // after the registry's: make_room holds both in this order
  names().mu.lock();
  range_map().mu.lock();
}
void unlock_after_fork() {
  range_map().mu.unlock();
  names().mu.unlock();
  spill_queue_mutex().unlock();
  registry().mu.unlock();
  spill_files_mutex().unlock();
  leave_tprof(tl_mark_before_fork);
}
// The child has the forking thread only. The parent's delivery and spill
// threads are not in it, nor its other recording threads, and the windows
// the parent's Profiler keeps are not the child's (that Profiler is inert
// here: src/capture/profiler.cc, Profiler::disown). No allocation and no
// free here (another thread of the parent may have held the allocator's
// lock: GCC 12's ASan has no fork handlers for its own).
void unlock_in_child() {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
  // The child's scopes record nothing until a Profiler of its own opens a
  // window (the parent's window is never collected here), which it may.
  g_recording.store(false, std::memory_order_relaxed);
  forget_profiler_in_child();
  Registry& r = registry();
  for (const auto& st : r.threads) {
    // The parent's other threads: freed at the child's next release_window
    // (thread_gone says ESRCH for them in this process).
    if (st.get() != tl_state) st->alive.store(false, std::memory_order_relaxed);
    for (BufferSlot& slot : st->slots) {
      slot.preparing = false;  // nobody's to finish: the child's owner must not wait for it
      slot.held = false;       // the parent's ended windows are never built here
      for (std::atomic<bool>& busy : slot.busy) busy.store(false, std::memory_order_relaxed);  // nor spilled
    }
  }
  // The child's descriptors of the parent's spill files, its queue and
  // windows, the spill thread's condition variables and handle.
  forget_spill_in_child();
  // The parent's threads that were waiting on it are counted by the
  // child's copy for ever, and glibc's notify then waits for them to
  // leave. Made anew (not destroyed: that would wait).
  new (&r.prepared) std::condition_variable();
  unlock_after_fork();
}
[[maybe_unused]] const bool g_fork_handlers = [] {
  return pthread_atfork(lock_for_fork, unlock_after_fork, unlock_in_child) == 0;
}();

}  // namespace

std::uint32_t fork_generation() noexcept { return g_fork_generation.load(std::memory_order_relaxed); }

namespace {

// Inside the recorder.
void count_drop() noexcept {
  if (ThreadBuffer* b = current_buffer()) count_dropped(b);
}

}  // namespace

// NVTX calls from a signal handler: a push refused while its thread is
// inside the recorder has its pop refused too (the thread is still inside
// when the handler pops), so the stack stays balanced.
void push_range(std::string_view name) noexcept {
  const RecorderSection section(g_recording.load(std::memory_order_relaxed));  // the stack, the names, the buffer
  if (!section) return;
  RangeStack& st = tl_ranges;
  const std::uint32_t d = st.depth++;
  if (d >= RangeStack::kMaxDepth) {
    if (g_recording.load(std::memory_order_relaxed)) count_drop();
    return;
  }
  st.slot[d] = OpenSlot{};
  if (!g_recording.load(std::memory_order_relaxed)) return;
  open_span_inside(intern_dynamic(name, kUserAnnotation), kRecordDynamicScope, 0, &st.slot[d]);
}

void pop_range() noexcept {
  const std::uint64_t end = read_ticks();
  const RecorderSection section(false);  // its push was refused and counted
  if (!section) return;
  RangeStack& st = tl_ranges;
  if (st.depth == 0) return;
  const std::uint32_t d = --st.depth;
  if (d >= RangeStack::kMaxDepth || st.slot[d].buffer == nullptr) return;
  close_span_inside(st.slot[d], end);
}

void start_range(std::uint64_t id, std::string_view name) noexcept {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  const RecorderSection section;  // the names' cache and lock, the map's lock
  if (!section) return;
  const std::uint64_t n = intern_dynamic(name, kUserAnnotation);
  const std::uint64_t start = read_ticks();
  RangeMap& m = range_map();
  try {
    std::lock_guard<std::mutex> lock(m.mu);
    m.open[id] = OpenRange{n, start};
  } catch (...) {
    count_drop();  // no memory for the map: the range is lost, counted
  }
}

void end_range(std::uint64_t id) noexcept {
  const std::uint64_t end = read_ticks();
  const RecorderSection section(g_recording.load(std::memory_order_relaxed));  // the map's lock, the buffer
  if (!section) return;
  OpenRange r{};
  {
    RangeMap& m = range_map();
    std::lock_guard<std::mutex> lock(m.mu);
    auto it = m.open.find(id);
    if (it == m.open.end()) return;
    r = it->second;
    m.open.erase(it);
  }
  if (!g_recording.load(std::memory_order_relaxed)) return;
  append_inside({r.name, r.start, end, 0, kRecordDynamicScope, 0});
}

void graph_node_created(std::uint64_t node) noexcept {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  append({node, read_ticks(), 0, 0, kRecordGraphNode, 0});
}

void graph_node_cloned(std::uint64_t node, std::uint64_t original) noexcept {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  append({node, read_ticks(), original, 0, kRecordGraphNode, 1});
}

bool dynamic_lookup(const RetiredNames* retired, std::uint64_t key, std::string_view* name,
                    std::string_view* category) {
  const auto id = static_cast<std::uint32_t>(key);
  if (retired != nullptr) {
    // The window's own table, no longer written: no lock.
    if (key >> 32 != retired->gen || id >= retired->names.size()) return false;
    *name = retired->names[id];
    *category = retired->categories[retired->category_of[id]];
    return true;
  }
  const TprofSection section;  // holds the names' lock
  NameTable& t = names();
  std::lock_guard<std::mutex> lock(t.mu);
  if (key >> 32 != t.gen || id >= t.names.size()) return false;
  *name = t.names[id];
  *category = t.categories[t.category_of[id]];
  return true;
}

std::size_t dynamic_names_held() {
  const TprofSection section;  // holds the names' lock
  NameTable& t = names();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.names.size();
}

RetiredNames::~RetiredNames() {
  const bool many = names.size() >= (std::size_t{1} << 16);
  names = {};
  categories = {};
  ids = {};
  category_of = {};
  cache.reset();
#ifdef __GLIBC__
  // glibc keeps what a large table freed (small blocks, interleaved with
  // the trace's): 2M names left 400 MB resident after the Profiler was
  // gone, 60 MB with this (about 20 ms, once a window of 2^16 names or more).
  if (many) malloc_trim(0);
#else
  static_cast<void>(many);
#endif
}

std::unique_ptr<RetiredNames> retire_dynamic_names() {
  const TprofSection section;  // holds the names' lock, swaps this thread's cache
  auto retired = std::make_unique<RetiredNames>();
  NameTable& t = names();
  {
    // Swaps only (no string is copied or freed under the lock): the table
    // starts the next generation empty, at once.
    std::lock_guard<std::mutex> lock(t.mu);
    retired->gen = t.gen;
    t.names.swap(retired->names);
    t.categories.swap(retired->categories);
    t.ids.swap(retired->ids);
    t.category_of.swap(retired->category_of);
    t.gen = t.gen + 1 == static_cast<std::uint32_t>(kNoName >> 32) ? 1 : t.gen + 1;
    g_names_gen.store(t.gen, std::memory_order_release);
  }
  // The calling thread's own cache (the one that recorded, in most
  // programs) goes with the table, to be freed where the table is; the
  // thread starts a fresh one at its next runtime name. Other threads'
  // caches start over at their next runtime name, or at their exit.
  if (tl_names != nullptr) {
    retired->cache = std::shared_ptr<void>(tl_names, [](void* c) { delete static_cast<NameCache*>(c); });
    tl_names = nullptr;
  }
  return retired;
}

void release_dynamic_names() { retire_dynamic_names().reset(); }

}  // namespace tprof::internal

namespace tprof::internal {
namespace {

// Writes "Input Dims" into the thread's payload arena: [count][rank][dims...]...
// Returns the record's payload reference (1 + word offset), 0 when the
// shapes are not kept (not asked for, or no room: counted). Inside the
// recorder, with the scope's record.
std::uint32_t store_shapes(Shapes shapes) noexcept {
  if (!g_record_shapes.load(std::memory_order_relaxed)) return 0;
  ThreadBuffer* b = current_buffer();
  // A full record buffer drops the scope whole (counted as a dropped
  // event): its shapes are neither stored nor counted as lost. Spilling,
  // the chunk goes first, and the scope's record and shapes go in the next.
  if (b == nullptr || (b->size == b->capacity && !spill_chunk(b))) return 0;
  std::uint64_t words = 1;
  for (const auto& s : shapes) words += 1 + s.size();
  if (b->payload_capacity - b->payload_size < words && words <= b->payload_capacity && b->size > 0) {
    static_cast<void>(spill_chunk(b));  // a full arena, spilling: its chunk goes, the next has room
  }
  // The reference is 1 + the word's number in the window (32 bits).
  if (b->payload_capacity - b->payload_size >= words && b->payload_base + b->payload_size + words < 0xffffffffu) {
    std::uint64_t* w = b->payload + b->payload_size;
    *w++ = shapes.size();
    for (const auto& s : shapes) {
      *w++ = s.size();
      for (std::int64_t d : s) *w++ = static_cast<std::uint64_t>(d);
    }
    const auto ref = static_cast<std::uint32_t>(b->payload_base + b->payload_size + 1);
    b->payload_size += static_cast<std::uint32_t>(words);
    return ref;
  }
  b->dropped_shapes.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

// A key that is stale by the time the trace is built is dropped there; one
// that failed to intern (no memory) is dropped here, counted. Inside the
// recorder.
bool interned(std::uint64_t key) noexcept {
  if (key != kNoName) return true;
  count_drop();
  return false;
}

std::atomic<std::uint64_t> g_next_flow{1};

}  // namespace
}  // namespace tprof::internal

namespace tprof {

// Each entry point below is one span inside the recorder (RecorderSection):
// interning (the thread's name cache, the table's lock), the shapes' arena
// and the record together; refused and counted as one record when a signal
// handler calls it while its thread is inside.

RecordFunction::RecordFunction(std::string_view name, const char* category) noexcept {
  if (!internal::g_recording.load(std::memory_order_relaxed)) return;
  const internal::RecorderSection section;
  if (!section) return;
  const std::uint64_t key = internal::intern_dynamic(name, category);
  if (!internal::interned(key)) return;
  internal::open_span_inside(key, internal::kRecordDynamicScope, 0, &slot_);
}

RecordFunction::RecordFunction(std::string_view name, Shapes shapes, const char* category) noexcept {
  if (!internal::g_recording.load(std::memory_order_relaxed)) return;
  const internal::RecorderSection section;
  if (!section) return;
  const std::uint64_t key = internal::intern_dynamic(name, category);
  if (!internal::interned(key)) return;
  internal::open_span_inside(key, internal::kRecordDynamicScope, internal::store_shapes(shapes), &slot_);
}

RecordFunction::RecordFunction(const ScopeSite* site, Shapes shapes) noexcept {
  if (!internal::g_recording.load(std::memory_order_relaxed)) return;
  const internal::RecorderSection section;
  if (!section) return;
  internal::open_span_inside(reinterpret_cast<std::uintptr_t>(site), internal::kRecordScope,
                             internal::store_shapes(shapes), &slot_);
}

void RecordFunction::add_arg(std::string_view key, std::uint16_t type, std::uint64_t value) noexcept {
  const internal::RecorderSection section;
  if (section) add_arg_inside(key, type, value);
}

void RecordFunction::add_arg_inside(std::string_view key, std::uint16_t type, std::uint64_t value) noexcept {
  if (!internal::in_span_window(slot_)) return;
  const std::uint64_t k = internal::intern_dynamic(key, internal::kArgKeyCategory);
  if (!internal::interned(k)) return;
  internal::append_inside({k, value, slot_.index, 0, internal::kRecordArg, type});
}

RecordFunction& RecordFunction::arg(std::string_view key, double value) noexcept {
  if (slot_.buffer == nullptr) return *this;
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  add_arg(key, internal::kArgDouble, bits);
  return *this;
}

RecordFunction& RecordFunction::arg(std::string_view key, bool value) noexcept {
  if (slot_.buffer != nullptr) add_arg(key, internal::kArgBool, value ? 1 : 0);
  return *this;
}

RecordFunction& RecordFunction::arg(std::string_view key, std::string_view value) noexcept {
  if (slot_.buffer == nullptr) return *this;
  const internal::RecorderSection section;
  if (!section) return *this;
  const std::uint64_t v = internal::intern_dynamic(value, internal::kArgKeyCategory);
  if (internal::interned(v)) add_arg_inside(key, internal::kArgString, v);
  return *this;
}

RecordFunction& RecordFunction::arg(const ArgKey* key, std::string_view value) noexcept {
  if (slot_.buffer == nullptr) return *this;
  const internal::RecorderSection section;
  if (!section) return *this;
  if (!internal::in_span_window(slot_)) return *this;
  const std::uint64_t v = internal::intern_dynamic(value, internal::kArgKeyCategory);
  if (internal::interned(v)) {
    internal::append_inside({reinterpret_cast<std::uintptr_t>(key), v, slot_.index, 0, internal::kRecordArg,
                             static_cast<std::uint16_t>(internal::kArgString | internal::kArgStaticKey)});
  }
  return *this;
}

void instant(std::string_view name) noexcept {
  if (!internal::g_recording.load(std::memory_order_relaxed)) return;
  const internal::RecorderSection section;
  if (!section) return;
  const std::uint64_t key = internal::intern_dynamic(name, kCpuInstantEvent);
  if (internal::interned(key)) {
    internal::append_inside({key, internal::read_ticks(), 0, 0, internal::kRecordInstant, 1});
  }
}

void counter(std::string_view name, double value) noexcept {
  if (!internal::g_recording.load(std::memory_order_relaxed)) return;
  const internal::RecorderSection section;
  if (!section) return;
  const std::uint64_t key = internal::intern_dynamic(name, kUserCounter);
  if (!internal::interned(key)) return;
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  internal::append_inside({key, internal::read_ticks(), bits, 0, internal::kRecordCounter, 1});
}

Flow flow_begin(std::string_view name) noexcept {
  if (!internal::g_recording.load(std::memory_order_relaxed)) return {};
  const internal::RecorderSection section;
  if (!section) return {};
  const std::uint64_t key = internal::intern_dynamic(name, internal::kFlowCategory);
  if (!internal::interned(key)) return {};
  const Flow f{internal::g_next_flow.fetch_add(1, std::memory_order_relaxed), key};
  internal::append_inside({f.id, internal::read_ticks(), f.name, 0, internal::kRecordFlow, 0});
  return f;
}

void flow_end(const Flow& flow) noexcept {
  if (flow.id == 0 || !internal::g_recording.load(std::memory_order_relaxed)) return;
  internal::append({flow.id, internal::read_ticks(), flow.name, 0, internal::kRecordFlow, 1});
}

}  // namespace tprof
