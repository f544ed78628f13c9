// Stage 2 of the fast event parser: walks the token positions found by the
// StructuralIndexer and commits clean events (the shape every Kineto writer
// produces) without looking at most of their bytes. Anything else — a raw
// quote in a name, a field of an unexpected type, the end of the input — is
// left, event by event, to the lenient cursor parser (event_parser.cc),
// which produces the diagnostics and errors.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/trace/event_sink.h"

namespace tprof::internal {

enum class FastStatus : std::uint8_t {
  kStop,      // the next element starts at or after stop_at: `pos` is its start
  kArrayEnd,  // the array's ']' was consumed: `pos` is just after it
  kFallback,  // the element at `pos` needs the lenient parser
  kSeparator, // an element ended just before `pos`, followed by neither ',' nor ']'
};

struct FastResult {
  FastStatus status = FastStatus::kFallback;
  const char* pos = nullptr;
  std::size_t events = 0;  // elements committed
};

// Parses array elements starting at `from` (the '{' of an element) until one
// of the FastStatus conditions. `window` is how many bytes are indexed at a
// time. Byte offsets are relative to `file_start`.
FastResult parse_events_fast(const char* from, const char* end, const char* file_start, const char* stop_at,
                             std::size_t window, EventSink* sink);

}  // namespace tprof::internal
