// Streaming windows (ProfilerOptions::spill_dir): the spill thread, its
// queue and files, and the read-back (spill.cc), and what the recorder
// (recorder.cc) and it share. spill.cc also defines the entry points the
// profiler calls (configure_spill, restore_spilled, spill_counters and the
// test hooks, declared in src/capture/recorder.h) and close_spilled_span
// (the hot path's, in tprof/internal/recorder.h); this header is the seam
// between the two files.
//
// The recorder owns the thread buffers and their rings of chunks; spill.cc
// owns what happens to a full chunk. A recording thread whose chunk is
// full (make_room, or store_shapes for a full arena) does, in recorder.cc:
//
//   if (!wait_for_free_chunk(slot->busy[next], &slot->dropping)) drop;
//   { registry lock: busy[k] = true;
//     queue_spill_chunk({&slot->busy[k], epoch, b, base, counts, views});
//     (false: busy[k] = false, drop) the buffer views chunk k+1 }
//   wake_spill_thread();
//
// and the spill thread writes the chunk to its window's file and clears
// *busy, after which the owner may write the chunk again. A record dropped
// for want of a free chunk is counted by count_spill_drop().
//
// Locks, in the one order any is held while taking another: the spill
// files' (spill_files_mutex(), taken alone), the registry's
// (recorder.cc), then the spill queue's (spill_queue_mutex()). fork()
// takes all three in that order (recorder.cc's atfork handlers), and the
// child then calls forget_spill_in_child().
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "src/capture/recorder.h"

namespace tprof::internal {

// One full chunk of a thread's ring, handed to the spill thread: views of
// the buffer's memory, valid while *busy is true.
struct SpillChunk {
  std::atomic<bool>* busy = nullptr;  // the chunk's mark in its BufferSlot: cleared once written
  std::uint32_t epoch = 0;            // the window (its file)
  const void* key = nullptr;          // the buffer: ThreadRecords::spill_key
  std::uint32_t base = 0, count = 0;  // record numbers [base, base + count) of the window
  std::uint64_t payload_base = 0;     // payload words [payload_base, + payload_words)
  std::uint32_t payload_words = 0;
  const Record* records = nullptr;
  const std::uint64_t* payload = nullptr;
};

// Recording thread, before it hands its chunk over: waits for the ring's
// next chunk (`busy`, the spill thread's until written) to be free, at most
// kSpillMaxWaitNs (counted in SpillCounters::waits and wait_ns). False when
// it stays busy: `*dropping` is then set, and later calls return false at
// once, without waiting, until the chunk is free again (a record is never
// kept waiting by a thread that already gave up).
bool wait_for_free_chunk(const std::atomic<bool>& busy, bool* dropping) noexcept;

// Recording thread, under the registry's lock, with *c.busy already set:
// queues `c` for the spill thread (and reserves its window's index entry).
// False when there is no memory for the queue (nothing queued).
bool queue_spill_chunk(const SpillChunk& c) noexcept;

// Recording thread, after the registry's lock is released: wakes the spill
// thread for what queue_spill_chunk queued.
void wake_spill_thread() noexcept;

// Counts one record dropped by a spilling buffer (SpillCounters::dropped).
void count_spill_drop() noexcept;

// The locks fork() takes (see the order above).
std::mutex& spill_files_mutex();
std::mutex& spill_queue_mutex();

// fork() child, with the locks above held: closes the child's descriptors
// of the parent's spill files, marks the parent's queue and windows to be
// dropped by the next configure_spill, and makes the spill thread's
// condition variables and handle anew. No allocation and no free.
void forget_spill_in_child() noexcept;

// What spill.cc uses of the recorder (recorder.cc).

// Sets how many chunks the rings of buffers attached from now on have (1:
// no spilling), under the registry's lock.
void set_ring_chunks(int chunks);

// Leaves a TprofSection: restores the thread's mark `was` and moves the
// refusals counted meanwhile into its buffer.
void leave_tprof(std::uint32_t was) noexcept;

// A span of the recorder that is not a record: attaching a buffer, holding
// one of tprof's locks, the thread's exit. Marked kInTprof, so a handler
// that interrupts it is refused (its record counted as pending) and never
// waits for a lock its own thread holds, nor sees a buffer being reset.
// Nests (restores the mark it found, leave_tprof).
class TprofSection {
 public:
  TprofSection() noexcept : was_(tl_in_recorder.load(std::memory_order_relaxed)) {
    tl_in_recorder.store(kInTprof, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  ~TprofSection() { leave_tprof(was_); }
  TprofSection(const TprofSection&) = delete;
  TprofSection& operator=(const TprofSection&) = delete;

 private:
  std::uint32_t was_;
};

}  // namespace tprof::internal
