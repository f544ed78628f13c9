// tprof/key_averages.h — torch.profiler's prof.events() and key_averages(),
// computed from a Trace with torch's exact semantics.
//
//   tprof::EventList events = tprof::EventList::build(trace);
//   std::vector<tprof::StatRow> rows = events.key_averages();
//   std::cout << *tprof::format_table(rows, {.sort_by = "cpu_time_total", .row_limit = 15});  // tprof/table.h
//
// What "exact" means is written down in docs/torch-table-semantics.md: which
// events count, how [memory] records are attributed (closed time interval,
// any thread), how the per-thread tree is built, how same-name single
// children are merged, how kernels are charged to the CPU op that launched
// them (External id), how backward ops inherit forward stacks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprof/status.h"
#include "tprof/trace.h"

namespace tprof {

// How event times become the numbers torch aggregates.
enum class TimeSemantics : std::uint8_t {
  kAuto = 0,         // from Trace::meta.producer: truncated for Kineto traces of torch ≤ 2.0, exact otherwise (the legacy profiler's fractional µs too)
  kTruncatedMicros,  // torch 1.13: start = floor(ts µs), dur = floor(dur µs), end = start + dur
  kExactNanos,       // torch ≥ 2.1: ns precision
};

// One row of torch's table: a FunctionEvent (prof.events()) or a
// FunctionEventAvg (key_averages()). Times in ns, memory in bytes.
struct StatRow {
  std::string key;   // name; every "ProfilerStep#N" is "ProfilerStep*"
  std::int64_t count = 0;
  std::int64_t cpu_time_total_ns = 0;
  std::int64_t self_cpu_time_total_ns = 0;
  std::int64_t device_time_total_ns = 0;       // "CUDA total"
  std::int64_t self_device_time_total_ns = 0;  // "Self CUDA"
  std::int64_t cpu_memory_usage = 0;
  std::int64_t self_cpu_memory_usage = 0;
  std::int64_t device_memory_usage = 0;
  std::int64_t self_device_memory_usage = 0;
  bool is_async = false;
  bool is_device = false;           // a device activity (kernel, memcpy, ...): device_type CUDA
  bool is_user_annotation = false;  // gpu_user_annotation (kept out of the "Self CUDA" total)
  bool has_parent = false;          // cpu_parent is not None (of the group's first event)
  std::string input_shapes;         // str(input_shapes) as Python prints it; "" when not shown
  bool has_input_shapes = false;    // the shapes list is non-empty
  std::vector<std::string> stack;   // Source Location frames
  // For prof.events() rows: the event in the trace (kNoIndex for synthetic [memory] rows).
  std::uint32_t event = kNoIndex;
  std::uint32_t lane = kNoIndex;
  std::int64_t start_ns = 0;  // in the chosen semantics (absolute)
  std::int64_t end_ns = 0;
};

struct EventListOptions {
  TimeSemantics time = TimeSemantics::kAuto;
  bool with_memory = true;   // attribute [memory] records (CPU Mem columns, memory sort keys)
  bool with_shapes = false;  // decode "Input Dims" (group_by_input_shape, the events table)
  bool with_stacks = false;  // decode "Call stack" (group_by_stack_n, the events table)
};

// torch's prof.events(): the FunctionEvent list, tree built per thread,
// duplicates merged, self times derived. Kept as compact columns (a few
// dozen bytes per event); rows are materialised only when asked for.
// The EventList refers to the Trace it was built from: keep that alive.
class EventList {
 public:
  static EventList build(const Trace& trace, const EventListOptions& options = {});

  // prof.events(): one row per FunctionEvent, sorted by (start, -end) as torch sorts them.
  std::vector<StatRow> event_rows() const;
  // key_averages(group_by_input_shape, group_by_stack_n): one row per key,
  // in order of first appearance.
  std::vector<StatRow> key_averages(bool group_by_input_shape = false, int group_by_stack_n = 0) const;

  std::size_t size() const { return start_.size(); }
  TimeSemantics semantics() const { return semantics_; }
  bool has_memory_records() const { return has_memory_records_; }
  bool uses_device() const { return uses_device_; }

 private:
  friend class EventListBuilder;
  StatRow row(std::uint32_t i) const;
  // Events in torch's order: (start, -end), then exact start, then file order.
  std::vector<std::uint32_t> torch_order() const;
  std::int64_t exact_start(std::uint32_t i) const;
  // True when event a comes before event b in torch's order.
  bool before(std::uint32_t a, std::uint32_t b) const;

  const Trace* trace_ = nullptr;
  TimeSemantics semantics_ = TimeSemantics::kExactNanos;
  bool has_memory_records_ = false;
  bool uses_device_ = false;
  // Per FunctionEvent (index i); synthetic "[memory]" rows have event_ =
  // kMemoryBit | record index.
  std::vector<std::int64_t> start_, end_;
  std::vector<std::uint32_t> key_;  // StrId, or kStepKey for "ProfilerStep*"
  std::vector<std::uint32_t> event_;
  std::vector<std::uint32_t> lane_;
  std::vector<std::uint32_t> parent_;  // kNoIndex: top level
  std::vector<std::uint8_t> flags_;
  std::vector<std::int64_t> self_cpu_;
  std::vector<std::int64_t> device_total_;
  std::vector<std::int64_t> self_device_;  // own device activity (device events: their duration)
  // With memory records only.
  std::vector<std::int64_t> cpu_mem_, self_cpu_mem_, dev_mem_, self_dev_mem_;
  // With shapes / stacks only: ids into the pools below.
  std::vector<std::uint32_t> shapes_;
  std::vector<std::uint32_t> stack_;
  std::vector<std::string> shape_pool_;
  std::vector<std::vector<std::string>> stack_pool_;
};

}  // namespace tprof
