// Every table torch 1.13 printed (tests/data/torch-1.13/tables.json) is
// reproduced byte for byte by `tprof table` from each trace the manifest
// names, legacy and Kineto. The test follows the manifest: a case added there
// is tested without code changes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/base/file.h"
#include "src/trace/json_value.h"
#include "tests/support/run_cli.h"

namespace tprof {
namespace {

using internal::JsonValue;

struct Case {
  std::string name;       // expected file + trace format
  std::string expected;   // path
  std::string trace;      // path
  std::vector<std::string> args;
};

std::vector<Case> load_cases() {
  const std::string root = std::string(TPROF_TEST_DATA) + "/torch-1.13/";
  std::vector<Case> cases;
  auto text = internal::read_file(root + "tables.json");
  if (!text) return cases;
  auto manifest = JsonValue::parse(*text);
  if (!manifest) return cases;
  const JsonValue* tables = manifest->find("tables");
  if (tables == nullptr) return cases;
  for (const JsonValue& t : tables->items()) {
    const JsonValue& a = *t.find("args");
    std::vector<std::string> args;
    const JsonValue* sort_by = a.find("sort_by");
    if (sort_by != nullptr && sort_by->is_string()) args.insert(args.end(), {"--sort-by", sort_by->text()});
    args.insert(args.end(), {"--row-limit", std::to_string(a.find("row_limit")->int_or(100))});
    args.insert(args.end(), {"--max-name-width", std::to_string(a.find("max_name_column_width")->int_or(55))});
    args.insert(args.end(), {"--memory", a.find("profile_memory")->as_bool() ? "on" : "off"});
    if (a.find("group_by_input_shape")->as_bool()) args.push_back("--group-by-input-shape");
    const std::int64_t stack_n = a.find("group_by_stack_n")->int_or(0);
    if (stack_n > 0) args.insert(args.end(), {"--group-by-stack-n", std::to_string(stack_n)});
    if (a.find("top_level_events_only")->as_bool()) args.push_back("--top-level-only");
    const JsonValue* header = a.find("header");
    if (header != nullptr && header->is_string()) args.insert(args.end(), {"--header", header->text()});
    if (!a.find("aggregate")->as_bool()) args.push_back("--events");
    for (const auto& [format, trace] : t.find("traces")->members()) {
      Case c;
      c.name = t.find("expected")->text() + " from " + format;
      c.expected = root + t.find("expected")->text();
      c.trace = root + trace.text();
      c.args = args;
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

class TorchTables : public ::testing::TestWithParam<Case> {};

TEST_P(TorchTables, ByteForByte) {
  const Case& c = GetParam();
  auto expected = internal::read_file(c.expected);
  ASSERT_TRUE(expected) << c.expected;
  std::vector<std::string> args = {"table", c.trace};
  args.insert(args.end(), c.args.begin(), c.args.end());
  testing::CliResult r = testing::run_cli(TPROF_BIN, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, *expected) << c.name;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n;
  for (char ch : info.param.name) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Manifest, TorchTables, ::testing::ValuesIn(load_cases()), case_name);

TEST(TorchTablesManifest, LoadsTheWholeManifest) {
  // Guards against a loader that silently finds nothing: the manifest as
  // copied holds 43 tables from Kineto traces and 16 from legacy ones.
  EXPECT_GE(load_cases().size(), 59u);
}

}  // namespace
}  // namespace tprof
