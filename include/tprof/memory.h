// tprof/memory.h — memory over time, the peak and what held it, spikes and
// leaks per step: from a trace's [memory] records or a PyTorch memory
// snapshot (torch.cuda.memory._dump_snapshot), through one analysis.
//
//   tprof::MemoryInput in = tprof::memory_input(trace);          // or read_memory_snapshot(...)
//   tprof::MemoryReport r = tprof::analyze_memory(in);
//   std::cout << tprof::format_memory_text(r);
//
// Definitions (docs/memory.md):
//   allocated  the allocator's total after each event: torch's "Total
//              Allocated" where the trace records it, else a running sum
//              of "Bytes" from 0 at the window's first record (then
//              `totals_recorded` is false and values are relative). From a
//              snapshot: requested bytes (as its trace records them),
//              replayed back from the state at the dump.
//   reserved   "Total Reserved" (the caching allocator's segments), where recorded.
//   peak       the first event at the highest allocated value.
//   live       an allocation made in the window whose address has not been
//              freed yet (needs addresses); grouped by the site that made it.
//   step       high-water mark = the highest allocated value in the step
//              (its start value included); spike = high-water − max(start,
//              end): memory taken and given back inside the step; growth =
//              end − start.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/status.h"
#include "tprof/steps.h"
#include "tprof/trace.h"

namespace tprof {

inline constexpr std::int64_t kMemoryAbsent = INT64_MIN;

// Who made an allocation: the innermost op on the allocating thread and the
// Python stack (innermost frame first, " <- " between frames) where recorded.
struct MemorySite {
  std::string op;      // "aten::empty", a snapshot's innermost user frame, or "" when none
  std::string stack;   // "" when none
  std::string caller;  // the outermost op around `op` on its thread ("aten::to" around aten::empty_strided), "" when op is outermost
};

// One allocator event of one device, in time order.
struct MemorySample {
  std::int64_t ts_ns = 0;
  std::int64_t bytes = 0;                  // > 0 allocation, < 0 free, 0: reserved changed only (or a snapshot's state at the dump)
  std::uint64_t addr = 0;                  // 0 when not recorded
  std::int64_t allocated = kMemoryAbsent;  // after the event; absent: running sum of bytes
  std::int64_t reserved = kMemoryAbsent;   // after the event; absent when not recorded
  std::uint32_t site = kNoIndex;           // index into MemoryInput::sites
  std::uint32_t source = kNoIndex;         // the trace event (trace input) or trace entry index (snapshot)
};

struct MemoryDeviceInput {
  std::int16_t device_type = 0;  // c10::DeviceType: 0 CPU, 1 CUDA (ROCm too), ...
  std::int16_t device_id = -1;
  std::vector<MemorySample> samples;  // by time, then source order
};

// A step of the program (ProfilerStep#N), for the per-step views.
struct MemoryStepSpan {
  std::int64_t step = -1;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// A segment still reserved when a snapshot was taken, for fragmentation.
struct MemorySegmentState {
  std::int16_t device_id = 0;
  std::uint64_t address = 0;
  std::int64_t total_bytes = 0;
  std::int64_t allocated_bytes = 0;   // active blocks, whole (rounded) block sizes as torch's allocated_size
  std::int64_t largest_free_bytes = 0;
  std::int64_t blocks = 0;
  std::string segment_type;  // "large", "small"
};

struct MemoryInput {
  std::string source;  // "trace" or "snapshot"
  // False when the events carry no times (a snapshot without time_us):
  // ts_ns is then the event's position in its device's trace.
  bool times_recorded = true;
  std::vector<MemoryDeviceInput> devices;  // CPU first, then by (type, id)
  std::vector<MemorySite> sites;
  std::vector<MemoryStepSpan> steps;       // by start; empty without steps
  std::vector<MemorySegmentState> segments;  // a snapshot's segments at dump time; empty for traces
};

// Collects the [memory] records of `trace` per device, with the innermost
// CPU op (and python_function stack) on the recording thread as each
// record's site, and ProfilerStep#N spans as steps.
MemoryInput memory_input(const Trace& trace);
// The same with the trace's steps already computed (compute_steps(trace)).
MemoryInput memory_input(const Trace& trace, const StepsSummary& steps);

// Reads a pickle written by torch.cuda.memory._dump_snapshot (torch ≥ 1.13:
// "segments", and "device_traces" when history was recorded). Errors carry
// the file and the byte offset of the pickle opcode that failed.
Result<MemoryInput> read_memory_snapshot(std::string_view bytes, const std::string& name);

// Whether `bytes` start like a pickle (protocol 2+: 0x80 N), not JSON.
bool looks_like_pickle(std::string_view bytes);

// One device's samples as every view counts them: allocated after each
// (the recorded totals when every sample has one, else a running sum of
// bytes from 0), and the step each fell in.
struct MemorySeries {
  bool totals_recorded = false;
  std::vector<std::int64_t> allocated;  // per sample
  std::vector<std::uint32_t> step;      // per sample: index into MemoryInput::steps, kNoIndex outside steps
};
MemorySeries memory_series(const MemoryInput& input, const MemoryDeviceInput& device);

struct MemoryGroup {
  std::string op;
  std::string stack;
  std::string caller;
  std::int64_t bytes = 0;
  std::int64_t count = 0;
};

struct MemoryStepView {
  std::int64_t step = -1;
  std::int64_t start_ns = 0, end_ns = 0;
  std::int64_t start_bytes = 0, end_bytes = 0;
  std::int64_t high_water_bytes = 0;
  std::int64_t high_water_ns = 0;
  std::int64_t spike_bytes = 0;   // high-water − max(start, end)
  std::int64_t growth_bytes = 0;  // end − start
  std::vector<MemoryGroup> spike_groups;  // live at the high-water mark, made and freed inside the step, largest first
  std::int64_t records = 0;
};

struct MemoryPoint {  // a bucket of the timeline
  std::int64_t start_ns = 0, end_ns = 0;
  std::int64_t min_allocated = 0, max_allocated = 0, last_allocated = 0;
  std::int64_t max_reserved = kMemoryAbsent;
  std::uint32_t max_site = kNoIndex;  // the site of the event that reached max_allocated in the bucket (kNoIndex: carried in)
};

struct MemoryLeak {
  bool found = false;
  std::int64_t steps = 0;           // steps compared (the first one is left out as warm-up)
  std::int64_t growing_steps = 0;   // of them, how many ended higher than they started
  std::int64_t growth_bytes = 0;    // from the start of the second step to the end of the last
  std::int64_t per_step_bytes = 0;  // growth_bytes / steps
  std::vector<MemoryGroup> groups;  // allocations of those steps never freed in the window, largest first
};

struct MemoryDeviceView {
  std::int16_t device_type = 0;
  std::int16_t device_id = -1;
  std::string label;  // "CPU", "CUDA 0"
  bool totals_recorded = false;     // allocated from the trace's totals, not a running sum
  bool reserved_recorded = false;
  bool addresses_recorded = false;
  std::int64_t records = 0, allocations = 0, frees = 0;
  std::int64_t allocated_bytes = 0, freed_bytes = 0;  // sums of |bytes|
  std::int64_t first_ns = 0, last_ns = 0;
  std::int64_t start_bytes = 0;  // allocated before the first event
  std::int64_t end_bytes = 0;
  std::int64_t peak_bytes = 0;
  std::int64_t peak_ns = 0;
  std::uint32_t peak_source = kNoIndex;
  std::int64_t peak_reserved_bytes = kMemoryAbsent;
  std::int64_t peak_reserved_ns = 0;
  std::int64_t peak_in_window_bytes = 0;  // live at the peak, allocated in the window (needs addresses)
  std::vector<MemoryGroup> live_at_peak;  // largest first
  std::int64_t unmatched_frees = 0, unmatched_free_bytes = 0;  // frees of addresses not allocated in the window
  std::int64_t never_freed = 0, never_freed_bytes = 0;          // allocated in the window, live at its end
  std::vector<MemoryGroup> never_freed_groups;
  std::int64_t max_gap_bytes = kMemoryAbsent;  // reserved − allocated, its highest value
  std::int64_t max_gap_ns = 0;
  std::int64_t end_gap_bytes = kMemoryAbsent;
  std::vector<MemoryStepView> steps;
  MemoryLeak leak;
  std::vector<MemoryPoint> timeline;
};

struct MemoryReport {
  std::string source;
  bool times_recorded = true;  // false: times are event positions (MemoryInput::times_recorded)
  std::vector<MemoryDeviceView> devices;
  std::vector<MemorySegmentState> segments;
  std::int64_t origin_ns = 0;  // the earliest event: times in text are relative to it
};

struct MemoryOptions {
  std::optional<std::int16_t> device;  // only this device id (-1: CPU)
  std::size_t buckets = 200;           // timeline points per device
  std::size_t top = 10;                // groups listed per view
};

// Computes the views; O(samples log samples).
MemoryReport analyze_memory(const MemoryInput& input, const MemoryOptions& options = {});

// Formats bytes in binary units as the views print them: "512 B", "3.0 MiB".
std::string format_memory_bytes(std::int64_t bytes);

std::string format_memory_text(const MemoryReport& report);
std::string format_memory_json(const MemoryReport& report);
std::string format_memory_markdown(const MemoryReport& report);
// One row per sample: device, ts_us, bytes, allocated, reserved, op, step.
std::string format_memory_csv(const MemoryInput& input, const MemoryReport& report);

}  // namespace tprof
