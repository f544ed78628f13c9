// Where parsed events go: the columns of an EventBatch. Both event parsers
// (the token walker and the lenient cursor parser) fill a PendingEvent and
// commit it here, so the two produce the same model and the same
// diagnostics for the same event.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "src/trace/event_parser.h"
#include "src/trace/json_copy.h"

namespace tprof::internal {

// The event being parsed, before it is committed to the batch's columns.
struct PendingEvent {
  std::int64_t ts = 0, dur = 0;
  bool has_ts = false, has_dur = false;
  char ph = 0;
  StrId name = kEmptyStr, cat = kEmptyStr;
  TraceId pid, tid;
  std::int64_t external_id = -1, correlation = -1, flow_id = -1;
  std::uint8_t flags = 0;
  std::uint64_t args_off = 0, args_len = 0;
  bool args_owned = false;  // args_off/args_len are in the batch's args_store (repaired)
  std::int64_t device = -1, stream = -1;
  // "[memory]" payload
  std::int64_t bytes = 0, total_allocated = 0, total_reserved = 0, device_type = 0, device_id = -1;
  std::uint64_t addr = 0;
  bool has_total_allocated = false, has_total_reserved = false;
  // M payload
  StrId meta_text = kEmptyStr;
  std::int64_t meta_number = 0;
  bool has_meta_number = false;
};

// True when `s` is a canonical decimal integer ("0", "-12"; no leading
// zeros, at most 18 characters), stored in *out. Numeric pid/tid strings
// ("5555" in 2021 traces) become numbers so one thread has one lane.
bool canonical_int(std::string_view s, std::int64_t* out);

class EventSink {
 public:
  EventSink(const ParseContext& ctx, EventBatch* batch);

  EventBatch* batch() { return b_; }
  // Scratch space for the token walker's index.
  std::vector<std::uint32_t>& tokens() { return tokens_; }
  // The category of events without "cat" (torch's legacy array: "cpu_op").
  StrId default_cat() const { return default_cat_; }
  // Validates and appends one event (or records why it was skipped).
  void commit(PendingEvent& ev, std::int64_t src);
  // An "args" object `args` that check_strict_json refused (`problem`, at
  // file offset `problem_offset`): stores what copy_json_value makes of it
  // (strings re-escaped, invalid UTF-8 as U+FFFD, NaN and Infinity as
  // null) in the batch's args_store, or, when even the lenient cursor
  // cannot read it, drops it; either with a malformed_args diagnostic.
  void repair_args(std::string_view args, const JsonProblem& problem, std::int64_t problem_offset,
                   PendingEvent* ev);

 private:
  EventKind kind_of(StrId cat);

  EventBatch* b_;
  StrId memory_name_ = 0, oom_name_ = 0;
  StrId default_cat_ = kEmptyStr;
  // The legacy array's "CUDA functions" process (use_cuda=True): each op's
  // device-side span, read as a GPU user annotation; kEmptyStr elsewhere.
  StrId cuda_functions_ = kEmptyStr, gpu_annotation_cat_ = kEmptyStr;
  std::vector<std::int8_t> cat_kind_;  // by local cat id; -1 = not yet classified
  std::vector<std::uint32_t> tokens_;
  std::string scratch_, repaired_;
};

}  // namespace tprof::internal
