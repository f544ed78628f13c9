// Profiler::key_averages() / events() and their table: torch's EventList
// (analyze) and _build_table (report) over the capture's Trace. Kept out
// of tprof::capture so an instrumented program links the recorder and the
// writer only (docs/architecture.md, layering).
#include "tprof/profiler_tables.h"

#include "tprof/key_averages.h"
#include "tprof/table.h"

namespace tprof {

Result<std::string> KeyAverages::table(TableOptions options) const {
  options.profile_memory = profile_memory_;
  options.dropped_events = dropped_events_;
  return format_table(rows_, options);
}

KeyAverages Profiler::key_averages(bool group_by_input_shape, int group_by_stack_n) const {
  EventListOptions o;
  o.with_shapes = group_by_input_shape;
  o.with_stacks = group_by_stack_n > 0;
  const EventList list = EventList::build(trace(), o);
  return KeyAverages(list.key_averages(group_by_input_shape, group_by_stack_n), profile_memory(),
                     trace().meta.dropped_events);
}

KeyAverages Profiler::events() const {
  EventListOptions o;
  o.with_shapes = o.with_stacks = true;
  const EventList list = EventList::build(trace(), o);
  return KeyAverages(list.event_rows(), profile_memory(), trace().meta.dropped_events);
}

}  // namespace tprof
