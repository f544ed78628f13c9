// A small JSON DOM for small documents: one event's args, deviceProperties,
// test manifests. Trace-sized input never goes through it (see reader.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tprof/status.h"

namespace tprof::internal {

class JsonCursor;

class JsonValue {
 public:
  enum class Type : std::uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

  // Parses exactly one JSON value (surrounding whitespace allowed). Error
  // offsets are relative to `text` plus `base_offset`.
  static Result<JsonValue> parse(std::string_view text, std::int64_t base_offset = 0);
  // Parses the value at the cursor (used inside larger parses).
  static bool parse_at(JsonCursor* c, JsonValue* out, int depth = 0);

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool as_bool() const { return bool_; }
  // Number text as written ("12", "1.5e3") or the decoded string.
  const std::string& text() const { return text_; }
  bool get_int(std::int64_t* out) const;
  bool get_double(double* out) const;
  std::int64_t int_or(std::int64_t fallback) const;

  const std::vector<JsonValue>& items() const { return items_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }
  // Returns the first member named `key`, or nullptr.
  const JsonValue* find(std::string_view key) const;

 private:
  Type type_ = Type::kNull;
  bool bool_ = false;
  std::string text_;
  std::vector<JsonValue> items_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// The values of `keys` among the top-level members of the JSON object
// `json`, as text, found in one pass that skips every other value without
// parsing it: values[k] is the first member named keys[k] (an array or
// object with its brackets, a string with its quotes, a number or literal),
// empty when there is none. Member names written with escapes are
// compared decoded, as JsonValue::find compares them. It stops at the last
// wanted key, so it checks the text up to there only (the reader has
// checked the args already). False when the text is not an object this
// pass reads (malformed up to there, or a wanted key holding a quote or a
// backslash): parse it whole.
// For readers that take one or two args in place per event (diagnose's
// launch shapes, efficiency's input dims and types).
bool member_values(std::string_view json, std::span<const std::string_view> keys, std::span<std::string_view> values);

}  // namespace tprof::internal
