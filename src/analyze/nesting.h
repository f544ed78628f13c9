// The call tree of each lane: which event encloses which, as torch builds
// prof.events()'s tree. One computation for every view that shows the
// nesting: the SQL export's events.parent_id (src/export/sqlite_export.cc)
// and the Python module's Trace.events() columns parent and depth.
//
//   const Nesting nest = build_nesting(trace);
//   const std::vector<std::uint32_t> parent = event_parents(trace, nest);
//   const std::vector<std::int32_t> depth = event_depths(trace, nest, parent);
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tprof/trace.h"

namespace tprof::internal {

// Per lane, complete events nest into a tree as torch builds prof.events()'s:
// in (ts, -end) order, an event's parent is the innermost open event that
// contains it whole. python_function events are not FunctionEvents to torch:
// they form a tree of their own on the lane (the Python call stack), so an
// op's children and self time are torch's.
struct Nesting {
  std::vector<std::uint32_t> parent;   // per event; kNoIndex: top level, or not nested
  std::vector<std::int64_t> child_ns;  // per event: Σ dur of its direct children
  std::vector<std::uint32_t> order;    // complete events by (group, ts, -end, index)
  std::vector<std::size_t> group_begin;  // positions in `order` per group (2·lane + python), one past the last too
};

// Builds the tree of every lane's complete events: three stable radix
// passes and one stack pass, O(n) memory. Reads no args.
Nesting build_nesting(const Trace& t);

// The innermost complete event (not a python_function) on `lane` whose
// [ts, end] holds `at`, or kNoIndex.
std::uint32_t enclosing(const Trace& t, const Nesting& nest, std::uint32_t lane, std::int64_t at);

// The innermost nn.Module call (with_stack's python_function "nn.Module:
// Linear_0") on event e's lane whose [ts, end] holds e's, or kNoIndex.
std::uint32_t enclosing_module(const Trace& t, const Nesting& nest, std::uint32_t e);

// The first complete event (not a python_function) on `lane` starting at or
// after `at`, or kNoIndex: where a flow end without "bp": "e" binds (the
// trace event format's "next slice").
std::uint32_t next_slice(const Trace& t, const Nesting& nest, std::uint32_t lane, std::int64_t at);

// Event e's parent, kNoIndex at the top: for a complete event its parent in
// the tree; for an instant or a flow event the slice open on its lane at
// its time (enclosing); none for counters and metadata.
std::uint32_t event_parent(const Trace& t, const Nesting& nest, std::uint32_t e);

// event_parent of every event, by event index.
std::vector<std::uint32_t> event_parents(const Trace& t, const Nesting& nest);

// Per event, how many ancestors `parents` (event_parents) gives it: 0 at
// the top level.
std::vector<std::int32_t> event_depths(const Trace& t, const Nesting& nest, const std::vector<std::uint32_t>& parents);

}  // namespace tprof::internal
