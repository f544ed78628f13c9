// JSON output: one escaper, one µs formatter, one structural writer.
// Nothing in tprof assembles JSON from string templates.
//
//   std::string out;
//   JsonWriter w(&out, JsonWriter::kPretty);
//   w.begin_object();
//   w.key("ts"); w.value_us(1500);          // 1.500
//   w.key("name"); w.value_string("a\"b");  // "a\"b"
//   w.end_object();
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tprof::internal {

// Appends `s` as a JSON string literal (quotes included). Escapes '"', '\\'
// and control characters; other bytes (UTF-8) pass through unchanged.
void append_json_string(std::string* out, std::string_view s);

// Appends ns as decimal microseconds with exactly three decimals ("-0.001",
// "1795319515516244.078"). Exact for every int64 (no floating point).
void append_us(std::string* out, std::int64_t ns);

// Appends the shortest decimal that reads back as `v` (JSON has no NaN/Inf:
// those become null).
void append_double(std::string* out, double v);

class JsonWriter {
 public:
  enum Style { kCompact, kPretty };
  explicit JsonWriter(std::string* out, Style style = kCompact, int indent = 2)
      : out_(out), style_(style), indent_(indent) {}

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  void key(std::string_view k);

  void value_string(std::string_view s);
  void value_int(std::int64_t v);
  void value_uint(std::uint64_t v);
  void value_double(double v);
  void value_bool(bool v);
  void value_null();
  void value_us(std::int64_t ns);
  // Appends text that already is one valid JSON value.
  void value_raw(std::string_view json);

  // Compact style: starts a new line before the next element (for
  // line-per-event output that stays diff-friendly).
  void break_line() { pending_break_ = true; }

  std::string* out() { return out_; }
  std::size_t depth() const { return stack_.size(); }

 private:
  void open(char c);
  void close(char c);
  void before_value();
  void newline_indent(std::size_t level);

  std::string* out_;
  Style style_;
  int indent_;
  std::vector<bool> stack_;  // per open container: has elements
  bool after_key_ = false;
  bool pending_break_ = false;
};

}  // namespace tprof::internal
