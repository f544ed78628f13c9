// The collector's side of the recorder: configuring thread buffers and
// taking what they hold at the end of a window.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tprof/internal/recorder.h"
#include "tprof/status.h"

namespace tprof::internal {

// Categories of interned strings that are not scope names: argument keys and
// string values, and flow names (also the flows' category in the trace).
inline constexpr const char* kArgKeyCategory = "\x01arg";
inline constexpr const char* kFlowCategory = "user_flow";

// Buffer sizes for threads that attach from now on (and at their next window).
void configure_buffers(std::uint32_t events_per_thread, std::uint32_t payload_words_per_thread);

// Attaches the calling thread's buffer for the current window and, the
// first time after the buffer was allocated, writes every page of it, so
// page faults (a 2 MB huge-page fault costs hundreds of µs) are paid here,
// and not inside the first measured step (a no-op for a buffer that
// prefault_thread already did). Returns false when there is no memory (the
// thread's scopes then drop, counted). Call from the thread that will
// record (the training loop's).
bool prepare_thread_buffer() noexcept;

// A registered thread, for prefault_thread (null: no memory).
using ThreadHandle = void*;
// Registers the calling thread (no buffer is allocated yet).
ThreadHandle register_thread() noexcept;
// Allocates and writes every page of `thread`'s buffers that it is not
// recording into and that no window holds, from the calling thread (the
// delivery thread): the owner's first records in them fault nothing, and
// the owner never pays for the faults. An owner attaching a buffer being
// faulted in waits for it. The thread must stay registered meanwhile
// (release_window runs on the same thread as this).
void prefault_thread(ThreadHandle thread) noexcept;

// What one thread recorded in a window: views of its buffer, valid until
// release_collected() (see collect()).
struct ThreadRecords {
  std::int64_t tid = 0;  // OS thread id
  std::string name;      // pthread name
  std::span<const Record> records;
  std::span<const std::uint64_t> payload;  // the arena; read only where records point
  // Spilling (spill_dir): `records` starts at record number `base` of the
  // window and `payload` at word `payload_base`; restore_spilled() puts the
  // spilled records in front (then base is 0) and the spilled words in
  // `spilled_payload` (payload_base words: a payload reference below it
  // points there).
  std::uint32_t base = 0;
  std::uint64_t payload_base = 0;
  std::span<const std::uint64_t> spilled_payload;
  const void* spill_key = nullptr;  // the buffer, as the spill thread's index names it
  std::uint64_t dropped = 0;        // events lost to a full buffer
  std::uint64_t refused = 0;        // events refused to a signal handler that interrupted the recorder
  std::uint64_t dropped_shapes = 0; // shapes lost to a full payload arena
};

// Every thread's records of window `epoch`: what was published by now, in
// place (a window's records are 32 bytes each; copying them would double
// the memory a stop() touches). O(threads), no record is read: the program's
// thread calls it at the window's end, and the trace is built elsewhere.
// The buffers are held: the views stay valid until release_window(epoch),
// even while the next window records (its threads attach their other
// buffer); records published after this call land beyond them.
std::vector<ThreadRecords> collect(std::uint32_t epoch);

// Ends collect(epoch)'s hold (the window's trace is built: its buffers may
// be reset for a later window) and frees the states of threads that have
// exited and have no records of a later window. Invalidates the views.
void release_window(std::uint32_t epoch);

// Streaming windows (ProfilerOptions::spill_dir). Threads attaching from
// now on split their buffers into a ring of kSpillChunks chunks; a full
// chunk goes to the "tprof-spill" thread, which writes it to the window's
// temporary file in `dir` (created and unlinked at once: no file outlives
// the process, its space is freed when the window is restored). An empty
// `dir` stops the thread (call when no window is pending). Errors
// (kIo): `dir` is not a writable directory.
inline constexpr int kSpillChunks = 4;
Status configure_spill(const std::string& dir);

// Counters of the spill thread and the threads handing it chunks, since
// configure_spill(dir) (Profiler::spill_stats()).
struct SpillCounters {
  std::uint64_t chunks = 0;    // chunks written
  std::uint64_t bytes = 0;     // bytes written
  std::uint64_t waits = 0;     // full chunks that waited for a free one (the spill thread was behind)
  std::int64_t wait_ns = 0;    // recording threads' time in those waits
  std::uint64_t dropped = 0;   // records dropped: no chunk free within kSpillMaxWaitNs, or a write failed
};
SpillCounters spill_counters();
// How long a recording thread waits for a free chunk before it drops
// (counted) until one is free.
inline constexpr std::int64_t kSpillMaxWaitNs = 50'000'000;
// Tests: the spill thread sleeps this long before each chunk (a slow disk).
void set_spill_delay_for_testing(std::int64_t ns);
// Tests: how long a recording thread waits for a free chunk (default
// kSpillMaxWaitNs): tests that expect no drop on a loaded machine (a
// sanitizer build on 2 cores) wait longer.
void set_spill_max_wait_for_testing(std::int64_t ns);

// What restore_spilled() read back, owning the views it put in ThreadRecords.
struct RestoredWindow {
  std::vector<std::vector<Record>> records;
  std::vector<std::vector<std::uint64_t>> payload;
  // Records of chunks that could not be written or read back: dropped,
  // but not from a full buffer (ThreadRecords::dropped does not count
  // them; the trace builder's CaptureInfo::lost_events does).
  std::uint64_t lost = 0;
  std::string error;  // why, when lost > 0 (the disk or the file size limit was full, with errno's reason)
};
// Waits until the spill thread has written window `epoch`'s chunks, reads
// them back into memory in order, in front of each thread's records in
// place (their views and counts are rewritten; a kRecordSpanEnd record's
// end tick goes into its span's record), and closes the window's file.
// Null when nothing of the window was spilled. Call after collect(epoch):
// no chunk of the window is handed over after it.
std::unique_ptr<RestoredWindow> restore_spilled(std::uint32_t epoch, std::vector<ThreadRecords>* threads);

// fork(): how many forks separate this process from the one tprof was
// loaded in (incremented in the child of each fork(), by the recorder's
// pthread_atfork handler). A Profiler started under another value was
// started by an ancestor: its delivery and spill threads are not in this
// process, and its windows are not this process's to deliver. The child
// handler also stops recording (the child's scopes record nothing until a
// Profiler started in the child opens a window), forgets the parent's
// threads and spill queue (a later window of the child does not wait for
// them), and closes the child's descriptors of the parent's spill files.
std::uint32_t fork_generation() noexcept;
// Defined by the Profiler (profiler.cc), called by that handler: no
// Profiler is running in the child any more.
void forget_profiler_in_child() noexcept;

// NVTX-style ranges (tprof record): recorded as user_annotation scopes with
// runtime names. push/pop nest on the calling thread (an unmatched pop is
// ignored; nesting deeper than 128 drops the inner ranges, counted);
// start/end may happen on different threads, the range is written on the
// ending thread's lane. Allocation-free except start_range (a map under a
// lock: NVTX start/end ranges are rare). Ranges opened while no window
// records are not written.
void push_range(std::string_view name) noexcept;
void pop_range() noexcept;
void start_range(std::uint64_t id, std::string_view name) noexcept;
void end_range(std::uint64_t id) noexcept;

// CUDA graph nodes (CUPTI's RESOURCE callbacks, on the thread making the
// node): a node created now (a launch under stream capture, a
// cudaGraphAdd*Node, the executable graph's copy inside
// cudaGraphInstantiate), and a node that is a copy of `original`. Each is a
// kRecordGraphNode record of the calling thread, so the trace builder
// links a creation to the scope open on that thread at that moment, as it
// links API calls. Recorded only while a window records; no lock, no
// allocation.
void graph_node_created(std::uint64_t node) noexcept;
void graph_node_cloned(std::uint64_t node, std::uint64_t original) noexcept;

// A window's runtime names, taken out of the process-wide table when the
// window ends (retire_dynamic_names): read without a lock by the trace
// builder, freed with it (wherever that is: the delivery thread).
struct RetiredNames {
  std::uint32_t gen = 0;
  std::deque<std::string> names;
  std::deque<std::string> categories;
  std::unordered_map<std::string, std::uint32_t> ids;
  std::vector<std::uint32_t> category_of;
  std::shared_ptr<void> cache;  // the retiring thread's name cache
  RetiredNames() = default;
  RetiredNames(const RetiredNames&) = delete;
  RetiredNames& operator=(const RetiredNames&) = delete;
  ~RetiredNames();  // gives a large table's memory back to the system
};

// The runtime name and category of a kRecordDynamicScope record's key, in
// `retired` (null: the live table); false when the key is stale (another
// generation) or interning failed. The views stay valid as long as
// `retired` (the live table's: until the next retire).
bool dynamic_lookup(const RetiredNames* retired, std::uint64_t key, std::string_view* name,
                    std::string_view* category);
// Takes the runtime-name table out (at a window's end, O(1): swaps): names
// are kept for one window, not for the life of the process. The next
// window's names start a new generation; keys of this one found later are
// stale.
std::unique_ptr<RetiredNames> retire_dynamic_names();
// retire_dynamic_names(), freed at once.
void release_dynamic_names();
// How many runtime names the table holds now (for tests).
std::size_t dynamic_names_held();

}  // namespace tprof::internal
