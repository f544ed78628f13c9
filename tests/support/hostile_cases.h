// The hostile-input matrix's cases (docs/reliability.md, "Matrix"), shared
// by the reader's test (tests/unit/hostile_input_test.cc: each case loads
// with its diagnostic or fails at an offset) and the CLI's
// (tests/fuzz/hostile_cli_test.cc: every command on each case, under
// ASan+UBSan in make test). Sizes scale down under the sanitizers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tests/support/sanitizers.h"
#include "tprof/trace.h"

namespace tprof::testing {

inline std::string events(const std::string& body) { return "{\"traceEvents\": [" + body + "]}"; }

inline std::string x_event(const std::string& fields) {
  return "{\"ph\": \"X\", \"name\": \"op\", \"pid\": 1, \"tid\": 1" + fields + "}";
}

struct HostileCase {
  const char* what;
  std::string bytes;
  bool loads;                 // else: an error
  std::size_t complete = 0;   // complete events expected when it loads
  DiagnosticCode diagnostic;  // expected when `has_diagnostic`
  bool has_diagnostic = false;
};

inline std::vector<HostileCase> hostile_cases() {
  std::vector<HostileCase> c;
  c.push_back({"empty", "", false});
  c.push_back({"whitespace only", " \n\t \r\n", false});
  c.push_back({"a BOM only", "\xEF\xBB\xBF", false});
  c.push_back({"a BOM, then a trace", "\xEF\xBB\xBF" + events(x_event(", \"ts\": 1, \"dur\": 2")), true, 1});
  c.push_back({"not JSON", "hello, world", false});
  c.push_back({"a number at the top", "42", false});
  c.push_back({"a string at the top", "\"traceEvents\"", false});
  c.push_back({"traceEvents is an object", "{\"traceEvents\": {}}", false});
  c.push_back({"traceEvents is a number", "{\"traceEvents\": 7}", false});
  c.push_back({"an event that is a number", events("1, " + x_event(", \"ts\": 1, \"dur\": 2")), true, 1,
               DiagnosticCode::kNotAnEvent, true});
  c.push_back({"ts of every wrong type", events(x_event(", \"ts\": [1], \"dur\": 2") + "," +
                                                x_event(", \"ts\": {}, \"dur\": 2") + "," +
                                                x_event(", \"ts\": true, \"dur\": 2") + "," +
                                                x_event(", \"ts\": 5, \"dur\": 2")),
               true, 1, DiagnosticCode::kBadFieldType, true});
  c.push_back({"name, ph, pid of wrong types",
               events("{\"ph\": 1, \"name\": \"a\", \"ts\": 1}, {\"ph\": \"X\", \"name\": [], \"pid\": 1, \"tid\": 1, "
                      "\"ts\": 1, \"dur\": 1}, {\"ph\": \"X\", \"name\": \"b\", \"pid\": {}, \"tid\": 1, \"ts\": 1, "
                      "\"dur\": 1}"),
               true, 2, DiagnosticCode::kBadFieldType, true});  // kept, without the field
  c.push_back({"numbers past int64, 1e400, -0",
               events(x_event(", \"ts\": 99999999999999999999999, \"dur\": 1") + "," +
                      x_event(", \"ts\": 1e400, \"dur\": 1") + "," + x_event(", \"ts\": -0, \"dur\": 1e400") + "," +
                      x_event(", \"ts\": 3, \"dur\": 1")),
               true, 2, DiagnosticCode::kOutOfRange, true});  // the -0 one kept with dur 0
  c.push_back({"negative and absurd ts and dur",
               events(x_event(", \"ts\": -5, \"dur\": 1") + "," + x_event(", \"ts\": 1, \"dur\": -7") + "," +
                      x_event(", \"ts\": 9000000000000, \"dur\": 9000000000000")),
               true, 3, DiagnosticCode::kNegativeDuration, true});
  c.push_back({"duplicate keys", events("{\"ph\": \"X\", \"name\": \"a\", \"name\": \"b\", \"pid\": 1, \"tid\": 1, "
                                        "\"ts\": 1, \"ts\": 2, \"dur\": 1, \"dur\": 3}"),
               true, 1});
  c.push_back({"invalid UTF-8 and lone surrogates in names",
               events(std::string("{\"ph\": \"X\", \"name\": \"\xff\xfe\xc0\x80\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1},") +
                      "{\"ph\": \"X\", \"name\": \"\\ud800 \\udfff\", \"pid\": 1, \"tid\": 1, \"ts\": 2, \"dur\": 1}"),
               true, 2});
  c.push_back({"flows that collide and point nowhere",
               events(x_event(", \"ts\": 1, \"dur\": 9") +
                      ", {\"ph\": \"s\", \"id\": 1, \"cat\": \"c\", \"name\": \"f\", \"pid\": 1, \"tid\": 1, \"ts\": 2},"
                      " {\"ph\": \"s\", \"id\": 1, \"cat\": \"c\", \"name\": \"f\", \"pid\": 1, \"tid\": 1, \"ts\": 3},"
                      " {\"ph\": \"f\", \"id\": 2, \"cat\": \"c\", \"name\": \"f\", \"pid\": 9, \"tid\": 9, \"ts\": 4}"),
               true, 1, DiagnosticCode::kUnmatchedFlow, true});
  {
    // 10^5 nested B events and half as many E: the unmatched ones are
    // diagnosed, not a stack overflow.
    const int depth = kSanitized ? 10000 : 100000;
    std::string body;
    for (int i = 0; i < depth; ++i) {
      body += std::string(i > 0 ? "," : "") + "{\"ph\": \"B\", \"name\": \"b\", \"pid\": 1, \"tid\": 1, \"ts\": " +
              std::to_string(i) + "}";
    }
    for (int i = 0; i < depth / 2; ++i) {
      body += ", {\"ph\": \"E\", \"pid\": 1, \"tid\": 1, \"ts\": " + std::to_string(depth + i) + "}";
    }
    // Every B is kept: the matched ones as spans, the others with dur 0.
    c.push_back({"unbalanced B/E 10^5 deep", events(body), true, static_cast<std::size_t>(depth),
                 DiagnosticCode::kUnmatchedBegin, true});
  }
  {
    // Nesting 10^6 deep inside args: refused at a depth limit, with an offset.
    const std::size_t depth = kSanitized ? 100000 : 1000000;
    std::string deep = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"a\", \"pid\": 1, \"tid\": 1, \"ts\": 1, "
                       "\"dur\": 1, \"args\": {\"x\": ";
    deep += std::string(depth, '[') + std::string(depth, ']') + "}}]}";
    c.push_back({"10^6-deep nesting", deep, false});
  }
  {
    // A 100 MB name: read, kept whole.
    const std::size_t n = kSanitized ? (8u << 20) : (100u << 20);
    c.push_back({"a 100 MB string",
                 events("{\"ph\": \"X\", \"name\": \"" + std::string(n, 'a') +
                        "\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1}"),
                 true, 1});
  }
  return c;
}

}  // namespace tprof::testing
