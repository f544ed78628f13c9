// Test support: compares two Traces as models (what the round trip promises).
#pragma once

#include <string>

#include "tprof/trace.h"

namespace tprof::testing {

// Returns "" when `a` and `b` hold the same model, else the first few
// differences. Compared: every event column (strings by text, args as
// canonical JSON), lanes, processes, memory records, base time and top-level
// keys. Not compared: diagnostics, the source format and producer, byte
// offsets, and the kFlagFromBeginEnd provenance bit.
std::string diff_traces(const Trace& a, const Trace& b);

}  // namespace tprof::testing
