// Golden cases: every line of tests/golden/cases.txt runs `tprof ARGS` with
// tests/data as the working directory and compares what a user sees with the
// reviewed files under tests/golden/expected/:
//
//   NAME.json / NAME.txt   stdout (.json when the arguments say --format json)
//   NAME.stderr            stderr, present only when tprof writes to it
//   exit=N in the case     the exit status (0 when not given)
//
// Paths in the output are relative to tests/data because the arguments are;
// any absolute data or source prefix that still appears is masked as
// <data>/<src>, so the files do not depend on where the checkout lives.
//
// Update mode (TPROF_UPDATE_GOLDEN=1, or --update on this binary, or
// tests/golden/update.sh) rewrites the expected files instead of comparing,
// and removes expected files no case names; `git diff` is then the review.
// The exit status is never updated: it is part of the case line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/run_cli.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;

bool g_update = false;  // set by --update in main() or TPROF_UPDATE_GOLDEN=1

bool update_mode() {
  const char* env = std::getenv("TPROF_UPDATE_GOLDEN");
  return g_update || (env != nullptr && std::strcmp(env, "1") == 0);
}

const std::string kGoldenDir = std::string(TPROF_SOURCE_DIR) + "/tests/golden";
const std::string kExpectedDir = kGoldenDir + "/expected";

struct Case {
  std::string name;
  std::vector<std::string> args;
  int exit_code = 0;
  int line = 0;
  std::string ext() const {
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "--format" && args[i + 1] == "json") return ".json";
    }
    return ".txt";
  }
};

struct CaseFile {
  std::vector<Case> cases;
  std::vector<std::string> errors;  // malformed lines: a test fails on them
};

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

// Splits on blanks; "double quotes" group words (no escapes inside).
bool split_args(const std::string& s, std::vector<std::string>* out) {
  std::string cur;
  bool in_quotes = false, have = false;
  for (char ch : s) {
    if (ch == '"') {
      in_quotes = !in_quotes;
      have = true;
    } else if ((ch == ' ' || ch == '\t') && !in_quotes) {
      if (have) out->push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += ch;
      have = true;
    }
  }
  if (have) out->push_back(cur);
  return !in_quotes;
}

// Line format: NAME | ARGS [| exit=N]. '#' starts a comment line.
CaseFile load_cases() {
  CaseFile f;
  std::ifstream in(kGoldenDir + "/cases.txt");
  if (!in) {
    f.errors.push_back("cannot open " + kGoldenDir + "/cases.txt");
    return f;
  }
  std::set<std::string> names;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    std::vector<std::string> parts;
    std::stringstream ss(t);
    for (std::string p; std::getline(ss, p, '|');) parts.push_back(trim(p));
    const std::string where = "cases.txt:" + std::to_string(n) + ": ";
    if (parts.size() < 2 || parts.size() > 3) {
      f.errors.push_back(where + "expected 'NAME | ARGS [| exit=N]'");
      continue;
    }
    Case c;
    c.name = parts[0];
    c.line = n;
    if (c.name.empty() || !std::all_of(c.name.begin(), c.name.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
        })) {
      f.errors.push_back(where + "name '" + c.name + "' must be [A-Za-z0-9_]+");
      continue;
    }
    if (!names.insert(c.name).second) {
      f.errors.push_back(where + "duplicate name '" + c.name + "'");
      continue;
    }
    if (!split_args(parts[1], &c.args) || c.args.empty()) {
      f.errors.push_back(where + "no arguments, or an unclosed quote");
      continue;
    }
    if (parts.size() == 3) {
      if (parts[2].rfind("exit=", 0) != 0) {
        f.errors.push_back(where + "third field must be exit=N");
        continue;
      }
      c.exit_code = std::atoi(parts[2].c_str() + 5);
    }
    f.cases.push_back(std::move(c));
  }
  return f;
}

const CaseFile& case_file() {
  static const CaseFile f = load_cases();
  return f;
}

void replace_all(std::string* s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (std::size_t pos = 0; (pos = s->find(from, pos)) != std::string::npos; pos += to.size()) {
    s->replace(pos, from.size(), to);
  }
}

// Masks what depends on the machine rather than on tprof.
std::string mask(std::string s) {
  replace_all(&s, TPROF_TEST_DATA, "<data>");
  replace_all(&s, TPROF_SOURCE_DIR, "<src>");
  return s;
}

bool read_text(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

bool write_text(const std::string& path, const std::string& text) {
  std::string old;
  if (read_text(path, &old) && old == text) return true;  // keep mtime when unchanged
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

// A short account of the first difference (the files can be 100 KB).
std::string describe_diff(const std::string& expected, const std::string& actual) {
  std::istringstream e(expected), a(actual);
  std::string el, al;
  for (int line = 1;; ++line) {
    const bool he = static_cast<bool>(std::getline(e, el));
    const bool ha = static_cast<bool>(std::getline(a, al));
    if (!he && !ha) break;
    if (he != ha || el != al) {
      return "first difference at line " + std::to_string(line) + "\n  expected: " + (he ? el : "<end>") +
             "\n  actual:   " + (ha ? al : "<end>") + "\n(" + std::to_string(expected.size()) + " vs " +
             std::to_string(actual.size()) + " bytes)";
    }
  }
  return "the files differ only in the final newline";
}

// Runs a command with `dir` as the working directory (restored afterwards).
testing::CliResult run_in(const std::string& dir, const std::vector<std::string>& args) {
  const fs::path before = fs::current_path();
  fs::current_path(dir);
  testing::CliResult r = testing::run_cli(TPROF_BIN, args);
  fs::current_path(before);
  return r;
}

// gtest prints a failing case's parameter: its name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, MatchesExpected) {
  const Case& c = GetParam();
  SCOPED_TRACE("cases.txt:" + std::to_string(c.line) + " " + c.name);
  const testing::CliResult r = run_in(TPROF_TEST_DATA, c.args);
  ASSERT_NE(r.exit_code, -1) << "tprof crashed\n" << r.err;
  EXPECT_EQ(r.exit_code, c.exit_code) << "stderr:\n" << r.err;
  const std::string out = mask(r.out);
  const std::string err = mask(r.err);
  const std::string out_path = kExpectedDir + "/" + c.name + c.ext();
  const std::string err_path = kExpectedDir + "/" + c.name + ".stderr";

  if (update_mode()) {
    fs::create_directories(kExpectedDir);
    ASSERT_TRUE(write_text(out_path, out)) << out_path;
    if (err.empty()) {
      fs::remove(err_path);
    } else {
      ASSERT_TRUE(write_text(err_path, err)) << err_path;
    }
    return;
  }
  std::string expected_out, expected_err;
  ASSERT_TRUE(read_text(out_path, &expected_out))
      << out_path << " is missing: run tests/golden/update.sh and review the new file";
  EXPECT_TRUE(out == expected_out) << "stdout differs from " << out_path << "\n"
                                   << describe_diff(expected_out, out)
                                   << "\nIf the change is intended: tests/golden/update.sh, then review git diff";
  const bool has_err_file = read_text(err_path, &expected_err);
  EXPECT_TRUE(err == expected_err) << "stderr differs from " << (has_err_file ? err_path : "(no .stderr file)")
                                   << "\n"
                                   << describe_diff(expected_err, err);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Cases, Golden, ::testing::ValuesIn(case_file().cases), case_name);

TEST(GoldenCasesFile, ParsesWithoutErrors) {
  for (const std::string& e : case_file().errors) ADD_FAILURE() << e;
  // Guards against a loader that silently finds nothing.
  EXPECT_GE(case_file().cases.size(), 60u);
}

TEST(GoldenCasesFile, EveryExpectedFileBelongsToACase) {
  std::set<std::string> wanted;
  for (const Case& c : case_file().cases) {
    wanted.insert(c.name + c.ext());
    wanted.insert(c.name + ".stderr");
  }
  if (!fs::exists(kExpectedDir)) GTEST_SKIP() << "no expected files yet";
  for (const fs::directory_entry& e : fs::directory_iterator(kExpectedDir)) {
    const std::string file = e.path().filename().string();
    if (wanted.count(file) != 0) continue;
    if (update_mode()) {
      fs::remove(e.path());
    } else {
      ADD_FAILURE() << "expected/" << file << " belongs to no case in cases.txt (stale: delete it, or run update.sh)";
    }
  }
}

}  // namespace
}  // namespace tprof

// Own main (it replaces gtest_main's) so that `golden_cases_test --update`
// works as STYLE.md asks, next to TPROF_UPDATE_GOLDEN=1.
int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--update") == 0) {
      tprof::g_update = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  ::testing::InitGoogleTest(&n, args.data());
  return RUN_ALL_TESTS();
}
