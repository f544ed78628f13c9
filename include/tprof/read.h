// tprof/read.h — load any torch.profiler / Kineto trace into a tprof::Trace.
//
// Reads the Kineto JSON object format of every era (2021 string tids and old
// category names, 2022 integer µs, 2023+ ns-precision µs, ts relative to
// "baseTimeNanoseconds"), torch's legacy JSON array, and both as .gz.
//
//   tprof::Result<tprof::Trace> t = tprof::read_trace("worker0.pt.trace.json.gz");
//   if (!t) { std::cerr << t.error().to_string(); return 2; }
//
// Hard errors (I/O, not JSON, wrong top level) return an Error with the file
// and byte offset. A file that ends early loads every complete event before
// the cut and records a `truncated` diagnostic; odd data is a diagnostic too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "tprof/status.h"
#include "tprof/trace.h"
#include "tprof/internal/visibility.h"

TPROF_API_BEGIN
namespace tprof {

// The most parser threads a read uses (larger ReadOptions::threads are capped).
inline constexpr int kMaxReaderThreads = 256;

struct ReadOptions {
  // Parser threads; 0 = one per hardware thread; at most kMaxReaderThreads.
  int threads = 0;
  // Called with (bytes parsed, bytes total) as the load progresses, from the
  // thread that finished a piece of work, never concurrently.
  std::function<void(std::uint64_t, std::uint64_t)> progress{};
  // Chunking (tuning and tests): an event array smaller than
  // `min_parallel_bytes` is parsed in one piece, a larger one in pieces of
  // about `chunk_bytes` (never fewer pieces than threads), each released as
  // soon as it is merged.
  std::size_t min_parallel_bytes = 4u << 20;
  std::size_t chunk_bytes = 4u << 20;
  // The SIMD token walker parses clean events and hands the rest to the
  // lenient cursor parser; false parses everything with the cursor (tests
  // prove both give the same Trace).
  bool token_walker = true;
  // A syntax error inside "traceEvents" skips to the next event the reader
  // can resynchronise on (an element starting '{"' after "}," ), keeps
  // everything else, and records each skipped byte range as a
  // `skipped_bytes` diagnostic. strict: the first such error, or an "args"
  // object that is not strict JSON (else stored repaired, or dropped), fails the read (kParse, with its byte offset);
  // so does a file that ends early (else read up to the cut, with a `truncated` diagnostic).
  bool strict = false;
  // A .gz is streamed: inflated window by window (on a thread of its own
  // unless threads == 1) into the parser, so its memory is the model (the
  // events, and their args copied out of the text), not the inflated text.
  // Its text may be at most `max_inflated_bytes` (0: half the physical
  // memory) and at most `max_inflate_ratio` times its compressed size (0: no
  // ratio limit): these bound the time a gzip bomb takes (real traces
  // compress 7-28:1, a bomb 800-1030:1, DEFLATE's most). Its model may be
  // at most `max_model_bytes` (0: half the physical memory). Past a limit
  // the read fails naming it; one JSON value (an event, a top-level value)
  // of more than 32 MiB in a .gz fails too. A NaN, infinite or negative
  // ratio is refused (kInvalidArgument) before anything is read.
  std::uint64_t max_inflated_bytes = 0;
  double max_inflate_ratio = 200;
  std::uint64_t max_model_bytes = 0;
  // The host range whose outermost calls are the trace's steps (an NVTX
  // range, a record_function; --step-range NAME): copied to
  // TraceMeta::step_range, read by find_step_events (tprof/step_events.h).
  // Empty: ProfilerStep#N, else a repeated range found in the trace.
  std::string step_range{};
};

// Reads a trace file (.json or .json.gz, detected from the content).
// Thread-safe; the Trace owns (or maps) the file bytes its args refer to.
Result<Trace> read_trace(const std::string& path, const ReadOptions& options = {});

// Reads a trace from bytes in memory (copied). `name` is used in errors.
Result<Trace> read_trace_bytes(std::string_view bytes, const std::string& name = "<memory>",
                               const ReadOptions& options = {});

}  // namespace tprof
TPROF_API_END
