// The collector's side of the recorder: configuring thread buffers and
// taking what they hold at the end of a window.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/internal/recorder.h"

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
// in start() and at the warm-up, and not inside the first measured step.
// Returns false when there is no memory (the thread's scopes then drop,
// counted). Call from the thread that will record (the training loop's).
bool prepare_thread_buffer() noexcept;

// What one thread recorded in a window: views of its buffer, valid until
// release_collected() (see collect()).
struct ThreadRecords {
  std::int64_t tid = 0;  // OS thread id
  std::string name;      // pthread name
  std::span<const Record> records;
  std::span<const std::uint64_t> payload;  // the arena; read only where records point
  std::uint64_t dropped = 0;        // events lost to a full buffer
  std::uint64_t refused = 0;        // events refused to a signal handler that interrupted the recorder
  std::uint64_t dropped_shapes = 0; // shapes lost to a full payload arena
};

// Every thread's records of window `epoch`: what was published by now, in
// place (a window's records are 32 bytes each; copying them would double
// the memory a stop() touches). The views stay valid until the next window
// starts or release_collected() runs: records published after this call
// land beyond them, a buffer is reset or reallocated only when its thread
// records in a later window, and buffers of exited threads are freed only
// by release_collected().
std::vector<ThreadRecords> collect(std::uint32_t epoch);

// Frees the buffers of threads that have exited. Invalidates the views of
// their records.
void release_collected();

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

// The runtime name and category of a kRecordDynamicScope record's key; false
// when the key is stale (from before the last release) or interning failed.
// The views stay valid until release_dynamic_names().
bool dynamic_lookup(std::uint64_t key, std::string_view* name, std::string_view* category);
// Empties the runtime-name table (after a window's trace is built): names are
// kept for one window, not for the life of the process.
void release_dynamic_names();
// How many runtime names the table holds now (for tests).
std::size_t dynamic_names_held();

}  // namespace tprof::internal
