// The reader, streaming: every merged batch of events goes to a consumer as
// it is read, in file order, and the model keeps them only while it fits.
// `tprof export --sqlite --stream` writes its rows this way, so a trace
// larger than the memory exports (docs/sql.md, "Streaming").
//
//   class Rows : public internal::EventStream {
//     Status batch(const internal::StreamedBatch& b) override { ... b.args(e) ... }
//   };
//   Rows rows;
//   Result<internal::StreamedTrace> t = internal::read_trace_streamed("big.json", {}, &rows);
//
// A batch's events are the model's columns (trace-wide string and lane
// ids) as read: before B/E pairs are joined (a B event's dur is negative
// until its E comes; StreamedTrace lists the pairs' durations), before
// "baseTimeNanoseconds" is added to ts (StreamedTrace::ts_shift), and
// before lane kinds and names are known (the M events come last).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "tprof/read.h"
#include "tprof/status.h"
#include "tprof/trace.h"

namespace tprof::internal {

// One merged batch: events [first, first + count) of `trace.events`, whose
// trace-wide indices are [first_id, first_id + count).
struct StreamedBatch {
  const Trace& trace;         // strings and lanes so far; events: see above
  std::uint32_t first = 0;    // index in trace.events
  std::uint32_t count = 0;
  std::uint64_t first_id = 0;  // trace-wide index of trace.events[first]
  std::span<const MemoryRecord> memory;  // the batch's "[memory]" payloads; event: trace-wide index
  const char* origin = nullptr;          // where the text's offset 0 would be
  const char* text_end = nullptr;
  std::string_view repaired;             // where args refs with the owned bit point (repaired args)

  // The args JSON of trace.events[e] (first <= e < first + count), as
  // written; valid during the call only.
  std::string_view args(std::uint32_t e) const;
};

// The args at `ref` (an args_ref with the owned bit) in a batch's store of
// repaired args (EventBatch::args_store).
std::string_view batch_args(std::uint64_t ref, std::string_view store);

class EventStream {
 public:
  virtual ~EventStream() = default;
  // Called once per batch, in file order, never concurrently (on whichever
  // reader thread merges). An error stops the read and is what it returns.
  virtual Status batch(const StreamedBatch& b) = 0;
};

struct StreamedTrace {
  // The model. `whole`: every event, exactly as read_trace gives it. Else
  // the read passed the model limit (ReadOptions::max_model_bytes; 0: half
  // the physical memory) and kept only what finishing the read needs: the
  // M events and the B events of B/E pairs, with `ids` their trace-wide
  // indices; the memory records are dropped, and the whole-trace checks
  // (overlapping kernels, unmatched flows) are not made. Diagnostics name
  // trace-wide indices either way.
  Trace trace;
  bool whole = true;
  std::vector<std::uint32_t> ids;  // !whole: trace-wide index of each event kept
  std::uint64_t events = 0;        // every event read
  // Added to every ts once the read ended (0 without a usable
  // "baseTimeNanoseconds"): a batch's ts are as written.
  std::int64_t ts_shift = 0;
  // (trace-wide index, dur) of every event joined from a B/E pair: its
  // duration once its E was found (0 when none was).
  std::vector<std::pair<std::uint32_t, std::int64_t>> joined;
};

// read_trace, handing each batch to `sink` as it is merged. Errors as
// read_trace's, or the first the sink returned (with the path).
Result<StreamedTrace> read_trace_streamed(const std::string& path, const ReadOptions& options, EventStream* sink);

}  // namespace tprof::internal
