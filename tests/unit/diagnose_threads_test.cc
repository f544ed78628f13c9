// diagnose runs its rules on several threads (src/analyze/diagnose.cc): the
// findings must not depend on how many, and only the rules the registry marks
// as claiming GPU idle time may set claims (the others run alongside them, in
// any order). Over every real GPU trace in tests/data and a few CPU-only ones.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "src/analyze/rules/rules.h"
#include "tests/support/test_traces.h"
#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

TEST(DiagnoseThreads, ManyThreadsGiveTheFindingsOfOne) {
  const std::vector<std::string> paths = testing::test_traces({"gpu/h200-tprof", "gpu/h100-torch-2.11", "gpu/h100-tprof", "public", "torch-1.13/blog"});
  ASSERT_GE(paths.size(), 40u);
  int with_findings = 0, claims = 0;
  for (const std::string& p : paths) {
    SCOPED_TRACE(p);
    Result<Trace> t = read_trace(p);
    ASSERT_TRUE(t.has_value()) << t.error().message();
    const Diagnosis one = diagnose(*t, {.threads = 1});
    const std::string want = format_diagnosis_json(*t, one);
    // More threads than this machine has cores: the rules interleave.
    for (int threads : {2, 8}) {
      EXPECT_EQ(format_diagnosis_json(*t, diagnose(*t, {.threads = threads})), want) << threads << " threads";
    }
    with_findings += one.findings.empty() ? 0 : 1;
    // Only the rules the registry marks claim idle time: an unmarked rule
    // runs alongside the chain of claims and could take time a claiming
    // rule takes too. (A rule's findings are the same alone or with the
    // others: only marked rules read earlier findings.)
    for (const Finding& f : one.findings) {
      if (f.idle_claim.empty()) continue;
      ++claims;
      const auto rules = internal::all_rules();
      const auto r = std::find_if(rules.begin(), rules.end(), [&](const internal::RuleInfo& i) { return i.id == f.id; });
      ASSERT_NE(r, rules.end()) << f.id;
      EXPECT_TRUE(r->claims_idle) << f.id << " claims idle time but is not marked claims_idle in registry.cc";
    }
  }
  EXPECT_GE(with_findings, 30);
  EXPECT_GE(claims, 20);  // the check above is not empty
}

TEST(DiagnoseThreads, ASubsetOfRulesKeepsItsChainOfClaims) {
  // Two claiming rules and two others: the claims the later one makes are
  // what the earlier one left, on any number of threads.
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h200-tprof/64_bf16_warm_eager.json");
  ASSERT_TRUE(t.has_value());
  const std::vector<std::string> only = {"overhead_bound", "hotspot", "low_gpu_utilization", "kernel_variance"};
  const std::string want = format_diagnosis_json(*t, diagnose(*t, {.only = only, .threads = 1}));
  EXPECT_EQ(format_diagnosis_json(*t, diagnose(*t, {.only = only, .threads = 4})), want);
  EXPECT_NE(want.find("\"overhead_bound\""), std::string::npos);
}

}  // namespace
}  // namespace tprof
