// Structural re-emission of stored JSON text: every string is decoded and
// re-escaped by the one escaper, numbers keep their text. Used by the writer
// (args, top-level values) and to compare JSON canonically.
#pragma once

#include <string>
#include <string_view>

#include "src/base/json_writer.h"
#include "src/trace/json_cursor.h"

namespace tprof::internal {

// Copies the value at the cursor to the writer. Returns false on bad JSON.
bool copy_json_value(JsonCursor* c, JsonWriter* w, std::string* scratch, int depth = 0);

// True when `json` is exactly what copy_json_value writes for it in the
// compact style: then it can be written as it is, without re-tokenizing.
// Conservative: false for some canonical texts (nesting deeper than 64).
bool is_compact_json(std::string_view json);

// Writes stored JSON text as a value, or `fallback` if it does not parse.
// `scratch` and `value` are reused buffers.
void write_stored_json(std::string_view json, JsonWriter* w, std::string* scratch, std::string* value,
                       std::string_view fallback);

// The compact canonical form of a JSON text ("" if it does not parse).
std::string canonical_json(std::string_view json);

// Where a JSON text first departs from RFC 8259, as a strict parser
// (simdjson, Python's json, SQLite's json_extract) reads it.
struct JsonProblem {
  const char* at = nullptr;  // the offending byte (end: the text ended early)
  const char* what = "";     // what was expected there, for "expected X, found Y"
};

// Checks that [p, end) is exactly one JSON value (whitespace around it
// allowed), strictly: the grammar token by token (no trailing commas, no
// bare words, numbers as RFC 8259 writes them: no "01", "1.", "+1", NaN or
// Infinity), strings without raw control characters (C0), with only JSON's
// escapes, \u surrogates in pairs, and well-formed UTF-8; nesting up to
// 512. Returns true, or false with the first problem in *problem.
// Duplicate keys are valid JSON (RFC 8259 4: names SHOULD be unique) and
// pass. One pass, no allocation; strings are scanned 16 bytes a step.
bool check_strict_json(const char* p, const char* end, JsonProblem* problem);

// "expected X, found Y" for a problem in a text ending at `end` (Y: the
// byte quoted when printable ASCII, else its hex, or `at_end`).
std::string describe_json_problem(const JsonProblem& problem, const char* end, std::string_view at_end);

// Two of the scanners check_strict_json is made of (the token walker checks
// args with them): a string whose opening quote is at *p, and a number at
// *p. On success *p is past it; else false with the problem.
bool scan_strict_string(const char** p, const char* end, JsonProblem* problem);
bool scan_strict_number(const char** p, const char* end, JsonProblem* problem);

}  // namespace tprof::internal
