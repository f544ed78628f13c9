// Fresh ground truth from the installed PyTorch: torch_tables.py profiles
// small random workloads, writes each cycle's legacy trace (torch's own
// export_chrome_trace), a Kineto-format trace of the same records, and the
// tables torch printed for random table() arguments. Every table must come
// out of `tprof table` byte for byte from each trace the manifest names.
//
// The seed is random unless TPROF_INTEGRATION_SEED is set; it is printed
// either way. A seed fixes the workloads and the table() arguments; the
// timings are measured anew, which does not matter: tprof only re-aggregates
// the numbers torch wrote into the traces, so equality must be exact.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "src/base/file.h"
#include "src/trace/json_value.h"
#include "tests/support/run_cli.h"

namespace tprof {
namespace {

using internal::JsonValue;

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kScript = TPROF_SOURCE_DIR "/tests/integration/torch_tables.py";
constexpr const char* kSeedVariable = "TPROF_INTEGRATION_SEED";

std::uint32_t pick_seed() {
  if (const char* env = std::getenv(kSeedVariable); env != nullptr && *env != '\0') {
    return static_cast<std::uint32_t>(std::strtoul(env, nullptr, 10));
  }
  return std::random_device{}() % 1000000u;
}

// The last `n` characters of `s`, for error messages.
std::string tail(const std::string& s, std::size_t n = 2000) { return s.size() <= n ? s : s.substr(s.size() - n); }

// "" when `import torch` works, else why not.
std::string torch_unavailable() {
  if (!std::filesystem::exists(kPython)) return std::string(kPython) + " does not exist";
  const testing::CliResult r = testing::run_cli(kPython, {"-c", "import torch"});
  if (r.exit_code == 0) return "";
  return std::string(kPython) + " -c 'import torch' exited with " + std::to_string(r.exit_code) + ": " +
         tail(r.err, 300);
}

// The manifest's table() arguments (same fields as the fixtures' tables.json)
// as `tprof table` flags.
std::vector<std::string> cli_flags(const JsonValue& a) {
  std::vector<std::string> f;
  const JsonValue* sort_by = a.find("sort_by");
  if (sort_by != nullptr && sort_by->is_string()) f.insert(f.end(), {"--sort-by", sort_by->text()});
  f.insert(f.end(), {"--row-limit", std::to_string(a.find("row_limit")->int_or(100))});
  f.insert(f.end(), {"--max-name-width", std::to_string(a.find("max_name_column_width")->int_or(55))});
  f.insert(f.end(), {"--memory", a.find("profile_memory")->as_bool() ? "on" : "off"});
  if (a.find("group_by_input_shape")->as_bool()) f.push_back("--group-by-input-shape");
  const std::int64_t stack_n = a.find("group_by_stack_n")->int_or(0);
  if (stack_n > 0) f.insert(f.end(), {"--group-by-stack-n", std::to_string(stack_n)});
  if (a.find("top_level_events_only")->as_bool()) f.push_back("--top-level-only");
  const JsonValue* header = a.find("header");
  if (header != nullptr && header->is_string()) f.insert(f.end(), {"--header", header->text()});
  if (!a.find("aggregate")->as_bool()) f.push_back("--events");
  return f;
}

// Where two texts first differ, line by line.
std::string first_difference(const std::string& expected, const std::string& actual) {
  std::istringstream e(expected), a(actual);
  std::string el, al;
  for (int line = 1;; ++line) {
    const bool has_e = static_cast<bool>(std::getline(e, el));
    const bool has_a = static_cast<bool>(std::getline(a, al));
    if (!has_e && !has_a) return "the texts differ only in their final newline";
    if (has_e != has_a || el != al) {
      return "first difference at line " + std::to_string(line) + "\n  torch: " +
             (has_e ? "\"" + el + "\"" : std::string("<end of text>")) + "\n  tprof: " +
             (has_a ? "\"" + al + "\"" : std::string("<end of text>"));
    }
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

TEST(FreshTorchTables, TprofReproducesEveryTableTorchPrinted) {
  const std::uint32_t seed = pick_seed();
  std::cout << "[   SEED   ] " << kSeedVariable << "=" << seed << " (set it to replay this run)\n";
  RecordProperty("seed", std::to_string(seed));
  if (const std::string why = torch_unavailable(); !why.empty()) {
    GTEST_SKIP() << "python3-torch is not installed: " << why;
  }

  std::error_code ignored;
  std::filesystem::create_directories(::testing::TempDir(), ignored);  // TEST_TMPDIR may not exist yet
  std::string dir_template = ::testing::TempDir() + "tprof_fresh_torch_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template.data()), nullptr) << "cannot create a directory under " << ::testing::TempDir();
  const std::string dir = dir_template;
  std::cout << "[   SEED   ] traces and torch's tables go to " << dir << " (removed when everything matches)\n";

  // UTF-8 regardless of the locale: torch's legacy exporter writes with the
  // locale's encoding, and the labels are not ASCII.
  setenv("PYTHONUTF8", "1", 1);
  setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
  const std::vector<std::string> gen_args = {kScript, "--out", dir, "--seed", std::to_string(seed)};
  const testing::CliResult gen = testing::run_cli(kPython, gen_args);
  ASSERT_EQ(gen.exit_code, 0) << "seed " << seed << ": " << kPython << " " << join(gen_args) << " failed:\n"
                              << tail(gen.err);

  auto text = internal::read_file(dir + "/manifest.json");
  ASSERT_TRUE(text) << dir << "/manifest.json";
  auto manifest = JsonValue::parse(*text);
  ASSERT_TRUE(manifest) << "manifest.json is not JSON";
  const JsonValue* tables = manifest->find("tables");
  ASSERT_TRUE(tables != nullptr && tables->is_array());
  // Three workloads with eight tables each; a generator that writes nothing must not pass.
  ASSERT_GE(tables->items().size(), 3u) << "seed " << seed;

  int compared = 0, failed = 0;
  for (const JsonValue& t : tables->items()) {
    const std::string expected_path = dir + "/" + t.find("expected")->text();
    auto expected = internal::read_file(expected_path);
    ASSERT_TRUE(expected) << expected_path;
    const std::vector<std::string> flags = cli_flags(*t.find("args"));
    const JsonValue* traces = t.find("traces");
    ASSERT_TRUE(traces != nullptr && traces->find("kineto") != nullptr)
        << t.find("expected")->text() << ": every table must be reproducible from the Kineto trace";
    for (const auto& [format, trace] : traces->members()) {
      std::vector<std::string> args = {"table", dir + "/" + trace.text()};
      args.insert(args.end(), flags.begin(), flags.end());
      const testing::CliResult r = testing::run_cli(TPROF_BIN, args);
      ++compared;
      if (r.exit_code == 0 && r.out == *expected) continue;
      ++failed;
      ADD_FAILURE() << "seed " << seed << ", case " << t.find("case")->text() << ", " << t.find("expected")->text()
                    << " from the " << format << " trace\n  torch: " << t.find("call")->text()
                    << "\n  tprof " << join(args) << "\n  exit " << r.exit_code << " " << tail(r.err, 500) << "\n"
                    << (r.exit_code == 0 ? first_difference(*expected, r.out) : std::string());
    }
  }
  std::cout << "[   SEED   ] " << seed << ": " << compared << " comparisons, " << failed << " failed\n";
  // Kept when something failed (an ASSERT above returns early and keeps it too).
  if (failed == 0) {
    std::filesystem::remove_all(dir);
  } else {
    std::cout << "[   SEED   ] kept " << dir << " for inspection\n";
  }
}

}  // namespace
}  // namespace tprof
