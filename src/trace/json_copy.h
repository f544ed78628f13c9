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

}  // namespace tprof::internal
