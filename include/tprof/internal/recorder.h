// tprof/internal/recorder.h — the recording hot path, inline (not API).
//
// Every thread appends fixed-size records to its own preallocated buffer:
// no lock, no allocation, no string copy per event. A scope takes its record
// when it begins and writes its end tick into it when it ends, so records
// are in start order, a full buffer drops the scopes that begin after it
// filled (their enclosing scopes already hold records: no child is ever
// kept without its parent), and a scope still open at stop() is visible as
// one. Every drop is counted. The collector (Profiler::stop) reads each
// buffer up to its published size. With spilling (ProfilerOptions::
// spill_dir) a full chunk is handed to the spill thread instead of
// dropping (make_room, the rare path).
//
// Signal handlers: a handler runs on the thread it interrupts and may record
// into the same buffer. The thread marks itself while it is inside the
// recorder (tl_in_recorder: plain stores, ordered by signal fences, no
// locked instruction); a record made while the mark is set comes from a
// handler that interrupted the recorder on its own thread, and is refused
// and counted (count_refused: a locked add, the rare path). A record made at
// any other moment, in a handler or not, finds the buffer whole and is kept.
#pragma once

#include <atomic>
#include <cstdint>

#include "tprof/internal/ticks.h"
#include "tprof/internal/visibility.h"

TPROF_API_BEGIN
namespace tprof::internal {

// Spans (scope, dynamic scope, step) have b = start tick and c = end tick,
// 0 while open; c is written by the owner thread after the record was
// published, so it is read with load_end().
enum RecordKind : std::uint16_t {
  kRecordScope = 1,         // a: const ScopeSite*, b/c: ticks, d: payload
  kRecordDynamicScope = 2,  // a: runtime name key, b/c: ticks, d: payload
  kRecordStep = 3,          // a: step number, b/c: ticks
  kRecordMemory = 4,        // a: address, b: tick, c: bytes (two's complement), e: device type << 8 | index
  kRecordInstant = 5,       // a: const ScopeSite* (e = 0) or runtime name key (e = 1), b: tick
  kRecordCounter = 6,       // a, e: as an instant's, b: tick, c: the value's double bits
  kRecordFlow = 7,          // a: flow id, b: tick, c: name key, e: 0 begins, 1 ends
  kRecordArg = 8,           // a: key (ArgKey* or name key), b: value, c: its scope's record number, e: ArgType flags
  kRecordGraphNode = 9,     // a: CUDA graph node id, b: tick, e: 0 created, 1 cloned (c: the node it copies)
  kRecordSpanEnd = 10,      // a: a spilled span's record number in the window, b: its end tick (spill_dir)
};

// How a kRecordArg's value is held in b (e's low byte), and whether its
// key (a) is a const ArgKey* (kArgStaticKey set) or a runtime name key.
enum ArgType : std::uint16_t { kArgInt = 0, kArgUint = 1, kArgDouble = 2, kArgBool = 3, kArgString = 4 };
inline constexpr std::uint16_t kArgTypeMask = 0xff;
inline constexpr std::uint16_t kArgStaticKey = 0x100;

// One event, as written on the hot path. Trivially copyable, 32 bytes.
struct Record {
  std::uint64_t a;
  std::uint64_t b;
  std::uint64_t c;
  std::uint32_t d;  // payload: 1 + word offset in the thread's payload arena, 0 = none
  std::uint16_t kind;
  std::uint16_t e;
};
static_assert(sizeof(Record) == 32, "records are written with one 32-byte store pattern");

// Record numbers: a record's number in its thread's window is `base` + its
// index in `records`. Without spilling `base` is 0 and `records` is the
// whole buffer. With ProfilerOptions::spill_dir the buffer is a ring of
// chunks: `records`/`capacity` (and `payload`/`payload_capacity`) are the
// chunk being written, and the chunks before it were handed to the spill
// thread (make_room), `base` records and `payload_base` words in all.
struct ThreadBuffer {
  Record* records = nullptr;
  std::uint32_t capacity = 0;
  std::uint32_t size = 0;                    // written by the owner thread only
  std::uint32_t base = 0;                    // records of this window spilled before `records` (owner)
  std::atomic<std::uint32_t> published{0};   // `size`, released for the collector
  std::atomic<std::uint64_t> dropped{0};     // records lost to a full buffer (owner increments)
  std::atomic<std::uint64_t> refused{0};     // records refused to a signal handler (count_refused)
  // The window this buffer's contents belong to; stored last (release) when
  // the owner resets the buffer, so a collector that sees it sees the rest.
  std::atomic<std::uint32_t> epoch{0};
  std::uint64_t* payload = nullptr;          // shapes, in 64-bit words
  std::uint32_t payload_capacity = 0;
  std::uint32_t payload_size = 0;
  std::atomic<std::uint64_t> dropped_shapes{0};  // shapes lost to a full payload arena (owner increments)
  std::uint64_t payload_base = 0;            // payload words of this window spilled before `payload` (owner)
  void* slot = nullptr;                      // the recorder's bookkeeping for this buffer (recorder.cc)
};

// Set while a window records. Relaxed loads: a scope that starts as the
// window opens or closes may or may not be recorded, as in torch.
extern std::atomic<bool> g_recording;
extern std::atomic<bool> g_record_shapes;
extern std::atomic<bool> g_profile_memory;
// Incremented at every window start; buffers of older epochs are stale.
extern std::atomic<std::uint32_t> g_epoch;
// Constant-initialized (constinit in C++20, the same promise spelled for
// C++17 compilers): no dynamic initialization, so a scope reads it straight
// from the thread pointer (no TLS-init check per access). This header
// compiles as C++17 (the capture headers' contract, docs/install.md).
#if defined(__cpp_constinit)
#define TPROF_CONSTINIT constinit
#elif defined(__clang__)
#define TPROF_CONSTINIT __attribute__((require_constant_initialization))
#else
#define TPROF_CONSTINIT
#endif
extern TPROF_CONSTINIT thread_local ThreadBuffer* tl_buffer;

// Where the calling thread is (tl_in_recorder): outside tprof; inside the
// recorder, on its buffer (the window's, or about to attach one); or
// elsewhere in tprof: attaching a buffer, holding one of its locks, its exit.
enum InRecorder : std::uint32_t { kOutsideRecorder = 0, kInRecorder = 1, kInTprof = 2 };
// Async-signal-safe to read and write (lock-free, relaxed: one thread).
extern TPROF_CONSTINIT thread_local std::atomic<std::uint32_t> tl_in_recorder;

// Counts one record refused because its thread was inside the recorder
// (a signal handler interrupted it): async-signal-safe, nests.
void count_refused() noexcept;

// Marks the calling thread inside the recorder; false, with the record
// counted as refused, when it already was (a handler interrupted it). Every
// path that touches the thread's buffer or per-thread state runs between
// enter_recorder() and leave_recorder(). The signal fences keep the
// compiler from moving the buffer's accesses across the mark; the CPU
// shows a thread its own stores in order, and a handler runs on the thread.
inline bool enter_recorder() noexcept {
  if (__builtin_expect(tl_in_recorder.load(std::memory_order_relaxed) != kOutsideRecorder, 0)) {
    count_refused();
    return false;
  }
  tl_in_recorder.store(kInRecorder, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return true;
}

// Clears the mark. A handler that interrupted the thread in between was
// refused and left the mark alone; one that came just before the mark was
// set restored it to clear before this thread went on.
inline void leave_recorder() noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tl_in_recorder.store(kOutsideRecorder, std::memory_order_relaxed);
}

// Registers the calling thread (first use) or resets a buffer for the
// current window. Each thread has two buffers: the one a window ended in
// stays untouched until that window's trace is built (on the delivery
// thread), while the thread records the next window into the other. Not on the per-event path: once per thread per window.
// Takes a lock, and allocates the first time a thread records: not
// async-signal-safe. Called inside the recorder (marks itself kInTprof).
// May return nullptr (no memory): the caller then drops the event.
ThreadBuffer* attach_thread_buffer() noexcept;

// The calling thread's buffer for the current window (attached now if it
// is not yet). Call inside the recorder.
inline ThreadBuffer* current_buffer() noexcept {
  ThreadBuffer* b = tl_buffer;
  if (__builtin_expect(b != nullptr && b->epoch.load(std::memory_order_relaxed) ==
                                           g_epoch.load(std::memory_order_relaxed),
                       1)) {
    return b;
  }
  return attach_thread_buffer();
}

// Counts one record lost on this thread: inside the recorder, where no
// handler can count into `dropped` at the same time (a plain increment).
inline void count_dropped(ThreadBuffer* b) noexcept {
  b->dropped.store(b->dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Called when `b` (the calling thread's current buffer) is full. With
// spilling, hands the full chunk to the spill thread and makes the next
// chunk of the ring current (b->size is then 0): true. Without, or when
// the ring has no free chunk within the spill wait (the spill thread is
// behind), or the window has ended: counts the record as dropped, false.
// The rare path (once per chunk): out of line, takes a lock. Call inside
// the recorder.
bool make_room(ThreadBuffer* b) noexcept;

// Ends a span whose record was spilled already (its chunk is the spill
// thread's): appends a kRecordSpanEnd record for it. Call inside the recorder.
void close_spilled_span(ThreadBuffer* b, std::uint32_t epoch, std::uint32_t index, std::uint64_t end) noexcept;

// Appends a record; call inside the recorder. Always inlined: called out
// of line, the record built field by field in the caller's frame was read
// back in 16-byte loads that waited for those stores (about 30 cycles).
__attribute__((always_inline)) inline void append_inside(const Record& r) noexcept {
  ThreadBuffer* b = current_buffer();
  if (__builtin_expect(b == nullptr, 0)) return;
  std::uint32_t i = b->size;
  if (__builtin_expect(i == b->capacity, 0)) {
    if (!make_room(b)) return;
    i = b->size;
  }
  b->records[i] = r;
  b->size = i + 1;
  b->published.store(i + 1, std::memory_order_release);
}

inline void append(const Record& r) noexcept {
  if (__builtin_expect(!enter_recorder(), 0)) return;
  append_inside(r);
  leave_recorder();
}

// An open span's record: where to write its end. buffer == nullptr: none
// (not recording, dropped, or refused).
struct OpenSlot {
  ThreadBuffer* buffer = nullptr;
  std::uint32_t index = 0;  // the record's number in the window (base + index in the chunk)
  std::uint32_t epoch = 0;
};

// Takes the next record for a span beginning now (its start tick is read
// last, so the bookkeeping is outside the measured time). False when the
// buffer is full (counted) or there is none. Call inside the recorder.
__attribute__((always_inline)) inline bool open_span_inside(std::uint64_t a, std::uint16_t kind, std::uint32_t payload, OpenSlot* slot) noexcept {
  ThreadBuffer* b = current_buffer();
  if (__builtin_expect(b == nullptr, 0)) return false;
  std::uint32_t i = b->size;
  if (__builtin_expect(i == b->capacity, 0)) {
    if (!make_room(b)) return false;
    i = b->size;
  }
  Record& r = b->records[i];
  r.a = a;
  r.c = 0;
  r.d = payload;
  r.kind = kind;
  r.e = 0;
  slot->buffer = b;
  slot->index = b->base + i;
  slot->epoch = b->epoch.load(std::memory_order_relaxed);
  r.b = read_ticks();
  b->size = i + 1;
  b->published.store(i + 1, std::memory_order_release);
  return true;
}

// Whether the calling thread's buffer is the open span's own, in the
// window that is still the current one: where a record that names the span
// by its number (an argument) may go.
inline bool in_span_window(const OpenSlot& slot) noexcept {
  const ThreadBuffer* const b = tl_buffer;
  return b == slot.buffer && b->epoch.load(std::memory_order_relaxed) == slot.epoch &&
         slot.epoch == g_epoch.load(std::memory_order_relaxed);
}

// Appends an argument of the open span `slot` (type: ArgType | flags),
// only in_span_window. Refused (counted) in a handler that interrupted the
// recorder.
inline void append_arg(const OpenSlot& slot, std::uint64_t key, std::uint16_t type, std::uint64_t value) noexcept {
  if (__builtin_expect(!enter_recorder(), 0)) return;
  if (__builtin_expect(in_span_window(slot), 1)) append_inside({key, value, slot.index, 0, kRecordArg, type});
  leave_recorder();
}

// As above, or false when refused (counted).
inline bool open_span(std::uint64_t a, std::uint16_t kind, std::uint32_t payload, OpenSlot* slot) noexcept {
  if (__builtin_expect(!enter_recorder(), 0)) return false;
  const bool opened = open_span_inside(a, kind, payload, slot);
  leave_recorder();
  return opened;
}

// Ends the span at tick `end`: its end tick goes into its record, unless
// the buffer has been reset for a later window since (the span began in an
// earlier one: that window's trace is built, and its record is gone). A
// record in a chunk already spilled gets its end as a record of its own.
// Call inside the recorder.
inline void close_span_inside(const OpenSlot& slot, std::uint64_t end) noexcept {
  ThreadBuffer* const b = slot.buffer;
  if (__builtin_expect(b->epoch.load(std::memory_order_relaxed) != slot.epoch, 0)) return;
  const std::uint32_t base = b->base;
  if (__builtin_expect(slot.index < base, 0)) {
    close_spilled_span(b, slot.epoch, slot.index, end);
    return;
  }
  __atomic_store_n(&b->records[slot.index - base].c, end, __ATOMIC_RELAXED);
}

// Ends the span now. Never refused: the span's record is its own. It is
// marked all the same: a handler between the epoch check and the store
// could reset the buffer for a new window (its first record there), and the
// end tick would land in the handler's record; the handler is refused
// instead. The mark it found is restored.
inline void close_span(const OpenSlot& slot) noexcept {
  const std::uint64_t end = read_ticks();
  const std::uint32_t was = tl_in_recorder.load(std::memory_order_relaxed);
  tl_in_recorder.store(kInRecorder, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  close_span_inside(slot, end);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tl_in_recorder.store(was, std::memory_order_relaxed);
}

// A span's end tick as the collector reads it (0: still open).
inline std::uint64_t load_end(const Record& r) noexcept { return __atomic_load_n(&r.c, __ATOMIC_RELAXED); }

}  // namespace tprof::internal
TPROF_API_END
