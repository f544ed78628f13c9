// The precision suite (issue 11, "Done when"): `diagnose` on every trace of
// tests/data, checked against what an expert reading that trace expects —
// the verdict, the rules that must fire and the rules that must stay silent,
// each with why — written down in tests/precision/expectations.txt.
//
// Manifest format, one block per file under tests/data (paths relative to it):
//
//   trace: gpu/h100-torch-2.11/64_bf16_cold_eager.json
//   verdict: overhead-bound
//   why verdict: GPU idle 95% of each step while the host launches 2 kernels
//   fires: overhead_bound cold_start
//   silent: compute_bound sync_api
//   why compute_bound: the GPU is busy 5% of the step
//
// `not-a-trace: why` in place of verdict/fires/silent marks a .json file that
// is data, not a trace (torch-1.13/tables.json). A line starting with two
// spaces continues the previous value. Every .json / .json.gz under
// tests/data must have a block, so the suite keeps up as traces are added.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

struct Expectation {
  std::string trace;  // relative to tests/data
  int line = 0;       // of the `trace:` line, for messages
  bool not_a_trace = false;
  std::string verdict;
  std::vector<std::string> fires, silent;
  std::map<std::string, std::string> why;  // "verdict", rule ids, "not-a-trace"
};

// gtest prints a failing parameter with this: the trace, not its bytes.
void PrintTo(const Expectation& e, std::ostream* os) { *os << e.trace; }

std::string trim(const std::string& s) {
  const std::size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Parse errors are collected, not thrown: the manifest test reports them.
struct Manifest {
  std::vector<Expectation> blocks;
  std::vector<std::string> errors;
};

const Manifest& manifest() {
  static const Manifest m = [] {
    Manifest out;
    std::ifstream in(TPROF_PRECISION_MANIFEST);
    if (!in) {
      out.errors.push_back(std::string("cannot read ") + TPROF_PRECISION_MANIFEST);
      return out;
    }
    std::string line, *last = nullptr;
    int n = 0;
    for (; std::getline(in, line); ++n) {
      if (line.starts_with("  ") && last != nullptr && !trim(line).empty()) {
        *last += " " + trim(line);
        continue;
      }
      last = nullptr;
      const std::string t = trim(line);
      if (t.empty() || t.starts_with("#")) continue;
      const std::size_t colon = t.find(':');
      if (colon == std::string::npos) {
        out.errors.push_back("line " + std::to_string(n + 1) + ": no key: " + t);
        continue;
      }
      const std::string key = trim(t.substr(0, colon)), value = trim(t.substr(colon + 1));
      if (key == "trace") {
        out.blocks.push_back({.trace = value, .line = n + 1});
        continue;
      }
      if (out.blocks.empty()) {
        out.errors.push_back("line " + std::to_string(n + 1) + ": " + key + " before any trace:");
        continue;
      }
      Expectation& e = out.blocks.back();
      if (key == "verdict") {
        e.verdict = value;
      } else if (key == "fires") {
        for (std::string& w : words(value)) e.fires.push_back(std::move(w));
      } else if (key == "silent") {
        for (std::string& w : words(value)) e.silent.push_back(std::move(w));
      } else if (key == "not-a-trace") {
        e.not_a_trace = true;
        last = &(e.why["not-a-trace"] = value);
      } else if (key.starts_with("why ")) {
        last = &(e.why[trim(key.substr(4))] = value);
      } else {
        out.errors.push_back("line " + std::to_string(n + 1) + ": unknown key " + key);
      }
    }
    return out;
  }();
  return m;
}

std::string why(const Expectation& e, const std::string& key) {
  auto it = e.why.find(key);
  return it == e.why.end() ? "(no why written)" : it->second;
}

// Every .json / .json.gz under tests/data, relative, sorted; but the ranks
// of the synthetic jobs in tests/data/ranks/: a job is judged as a whole
// (the straggler, who waits for whom) by tests/golden/ranks_test.cc, and
// one rank of it alone is not a trace an expert reads.
std::vector<std::string> data_files() {
  namespace fs = std::filesystem;
  const fs::path root(TPROF_TEST_DATA);
  std::vector<std::string> out;
  for (const fs::directory_entry& d : fs::recursive_directory_iterator(root)) {
    if (!d.is_regular_file()) continue;
    if (fs::relative(d.path(), root).generic_string().starts_with("ranks/")) continue;
    const std::string name = d.path().filename().string();
    if (name.ends_with(".json") || name.ends_with(".json.gz")) out.push_back(fs::relative(d.path(), root).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ---- the manifest itself --------------------------------------------------

TEST(PrecisionManifest, Parses) {
  for (const std::string& err : manifest().errors) ADD_FAILURE() << "expectations.txt " << err;
  EXPECT_FALSE(manifest().blocks.empty());
}

TEST(PrecisionManifest, CoversEveryTraceInTestData) {
  std::set<std::string> listed;
  for (const Expectation& e : manifest().blocks) {
    EXPECT_TRUE(listed.insert(e.trace).second) << "expectations.txt line " << e.line << ": " << e.trace << " listed twice";
  }
  const std::vector<std::string> files = data_files();
  for (const std::string& f : files) {
    EXPECT_TRUE(listed.count(f)) << "tests/data/" << f
                                 << " has no block in tests/precision/expectations.txt: add its verdict and the "
                                    "rules that must and must not fire (or `not-a-trace:` with why)";
  }
  for (const Expectation& e : manifest().blocks) {
    EXPECT_TRUE(std::find(files.begin(), files.end(), e.trace) != files.end())
        << "expectations.txt line " << e.line << ": tests/data/" << e.trace << " does not exist";
  }
}

TEST(PrecisionManifest, NamesKnownRulesAndVerdicts) {
  const std::vector<std::string> ids = rule_ids();
  // The verdict names of docs/diagnose.md, including those the verdict logic
  // is gaining (host-bound, dependency-bound, unclear).
  const std::set<std::string> verdicts = {"overhead-bound", "compute-bound",   "input-bound", "communication-bound",
                                          "sync-bound",     "host-bound",      "dependency-bound", "cpu-only",
                                          "unclear",        "copy-bound",       "shared-device"};
  for (const Expectation& e : manifest().blocks) {
    if (e.not_a_trace) continue;
    EXPECT_TRUE(verdicts.count(e.verdict)) << e.trace << ": unknown verdict '" << e.verdict << "'";
    EXPECT_TRUE(e.why.count("verdict")) << e.trace << ": the verdict needs a `why verdict:` line";
    for (const std::vector<std::string>* list : {&e.fires, &e.silent}) {
      for (const std::string& r : *list) {
        EXPECT_TRUE(std::find(ids.begin(), ids.end(), r) != ids.end()) << e.trace << ": unknown rule id " << r;
      }
    }
    for (const std::string& r : e.fires) {
      EXPECT_TRUE(std::find(e.silent.begin(), e.silent.end(), r) == e.silent.end())
          << e.trace << ": " << r << " both fires and silent";
    }
    for (const auto& [key, text] : e.why) {
      const bool known = key == "verdict" || key == "not-a-trace" ||
                         std::find(e.fires.begin(), e.fires.end(), key) != e.fires.end() ||
                         std::find(e.silent.begin(), e.silent.end(), key) != e.silent.end();
      EXPECT_TRUE(known) << e.trace << ": `why " << key << "` names neither the verdict nor a listed rule";
    }
  }
}

// ---- one test per trace ---------------------------------------------------

// gtest parameter names: letters, digits and '_' only.
std::string test_name(const std::string& rel) {
  std::string out;
  for (char ch : rel) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

std::vector<Expectation> traces() {
  std::vector<Expectation> out;
  for (const Expectation& e : manifest().blocks) {
    if (!e.not_a_trace) out.push_back(e);
  }
  return out;
}

// One diagnosis per trace per process (the verdict and rule tests share it).
const Diagnosis& diagnosis_of(const std::string& rel) {
  static std::map<std::string, std::unique_ptr<Diagnosis>> cache;
  auto it = cache.find(rel);
  if (it == cache.end()) {
    Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + rel);
    auto d = std::make_unique<Diagnosis>();
    if (t) {
      *d = diagnose(*t);
    } else {
      ADD_FAILURE() << rel << ": cannot read the trace";
    }
    it = cache.emplace(rel, std::move(d)).first;
  }
  return *it->second;
}

class PrecisionTrace : public testing::TestWithParam<Expectation> {};

TEST_P(PrecisionTrace, Verdict) {
  const Expectation& e = GetParam();
  const Diagnosis& d = diagnosis_of(e.trace);
  EXPECT_EQ(std::string(verdict_name(d.verdict)), e.verdict)
      << e.trace << ": an expert's verdict is " << e.verdict << " (why: " << why(e, "verdict") << "); diagnose said "
      << verdict_name(d.verdict) << ": " << d.summary;
}

TEST_P(PrecisionTrace, Rules) {
  const Expectation& e = GetParam();
  const Diagnosis& d = diagnosis_of(e.trace);
  for (const std::string& r : e.fires) {
    const bool fired = std::any_of(d.findings.begin(), d.findings.end(), [&](const Finding& f) { return f.id == r; });
    EXPECT_TRUE(fired) << e.trace << ": rule " << r << " must fire and did not (why: " << why(e, r) << ")";
  }
  for (const std::string& r : e.silent) {
    for (const Finding& f : d.findings) {
      EXPECT_NE(f.id, r) << e.trace << ": rule " << r << " must stay silent (why: " << why(e, r)
                         << ") and said: " << f.title;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Data, PrecisionTrace, testing::ValuesIn(traces()),
                         [](const testing::TestParamInfo<Expectation>& i) { return test_name(i.param.trace); });

}  // namespace
}  // namespace tprof
