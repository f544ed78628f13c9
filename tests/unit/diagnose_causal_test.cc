// diagnose on the causal model (issue 37, item 5): a cause's saving is the
// trace replayed with the what-if edit that expresses its fix, a finding
// that says a call waits names what it waits for in the causal graph (or
// says the trace does not), and "nothing to fix on the host" is checked
// against the critical path.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "tprof/causal.h"
#include "tprof/diagnose.h"
#include "tprof/read.h"

namespace tprof {
namespace {

Trace read(const std::string& rel) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + rel);
  EXPECT_TRUE(t.has_value()) << rel;
  return t ? std::move(*t) : Trace{};
}

const Cause* cause(const Diagnosis& d, const std::string& id) {
  for (const Cause& c : d.causes)
    if (c.id == id) return &c;
  return nullptr;
}

const Finding* finding(const Diagnosis& d, const std::string& id) {
  for (const Finding& f : d.findings)
    if (f.id == id) return &f;
  return nullptr;
}

// The mean of the two middle values of an even count, the middle one of an odd count.
std::int64_t mean_median(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

TEST(DiagnoseCausal, LaunchOverheadSavingIsTheGraphReplay) {
  const Trace t = read("gpu/h100-tprof/64_bf16_warm_eager.json");
  const Diagnosis d = diagnose(t);
  const Cause* c = cause(d, "launch_overhead");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->saving_from, "replay");
  EXPECT_EQ(c->whatif, "graph");
  Result<WhatIfEdit> edit = parse_whatif_edit("graph");
  ASSERT_TRUE(edit.has_value());
  Result<CausalResult> r = analyze_causal(t, {.edits = {*edit}, .paths = false});
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->has_steps);
  EXPECT_EQ(c->impact_ns, r->replayed_ns - r->predicted_ns);
  std::vector<std::int64_t> per_step;
  for (const StepTime& s : r->steps) per_step.push_back(s.replayed_ns - s.predicted_ns);
  EXPECT_EQ(c->impact_per_step_ns, mean_median(per_step));
  EXPECT_GT(c->impact_ns, 0);
  // The anchor says where its cause's saving comes from and how to replay it.
  const Finding& anchor = d.findings[c->anchor];
  const Evidence::Field* from = anchor.evidence.find("saving_from");
  const Evidence::Field* whatif = anchor.evidence.find("whatif");
  ASSERT_NE(from, nullptr);
  ASSERT_NE(whatif, nullptr);
  EXPECT_EQ(from->s, "replay");
  EXPECT_EQ(whatif->s, "graph");
  // The text view prints the replay's saving with its edit.
  const std::string text = format_diagnosis_text(t, d);
  EXPECT_NE(text.find("in the replay with \"graph\""), std::string::npos) << text;
  // Causes stay ordered by their saving.
  for (std::size_t i = 1; i < d.causes.size(); ++i) EXPECT_GE(d.causes[i - 1].impact_ns, d.causes[i].impact_ns);
}

TEST(DiagnoseCausal, CausesWithoutAnEditKeepTheirEstimate) {
  const Diagnosis d = diagnose(read("gpu/h100-torch-2.11/64_bf16_cold_compile.json"));
  const Cause* c = cause(d, "compile_overhead");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->saving_from, "estimate");
  EXPECT_TRUE(c->whatif.empty());
  EXPECT_EQ(c->impact_ns, d.findings[c->anchor].impact_ns);
}

TEST(DiagnoseCausal, SyncFindingShowsTheDeviceWorkItWaitsFor) {
  const char* kTrace = "public/hta/critical_path/cuda_event_sync/event_sync_trace.json.gz";
  const Trace t = read(kTrace);
  const Diagnosis d = diagnose(t);
  const Finding* f = finding(d, "sync_api");
  ASSERT_NE(f, nullptr);
  const Evidence::Field* w = f->evidence.find("waits_for");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->kind, Evidence::Kind::kEvent);
  EXPECT_NE(w->events.front().name.find("spin_kernel"), std::string::npos);
  // The same edge in the causal graph: a sync edge into the longest call's
  // return, from the activity named.
  const Evidence::Field* longest = f->evidence.find("longest");
  ASSERT_NE(longest, nullptr);
  const CausalGraph g = build_causal_graph(t);
  bool found = false;
  for (const CausalEdge& e : g.edges) {
    if (e.type != EdgeType::kSync || e.event == kNoIndex || e.cause_event == kNoIndex) continue;
    if (t.events.ts_ns[e.event] == longest->events.front().ts_ns && t.name(e.event) == longest->events.front().name &&
        t.events.ts_ns[e.cause_event] == w->events.front().ts_ns) {
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // Its saving is the replay without those waits.
  const Cause* c = cause(d, "sync_api");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->saving_from, "replay");
  EXPECT_EQ(c->whatif.rfind("drop-sync:", 0), 0u) << c->whatif;
}

TEST(DiagnoseCausal, SyncWithNoDeviceWorkInsideSaysUnknown) {
  const Diagnosis d = diagnose(read("public/tracelens/mi300/gaunernst_bert-small-uncased__1016001.json.gz"));
  const Finding* f = finding(d, "sync_api");
  ASSERT_NE(f, nullptr);
  const Evidence::Field* w = f->evidence.find("waits_for");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->kind, Evidence::Kind::kText);
  EXPECT_EQ(w->s.rfind("unknown", 0), 0u) << w->s;
}

TEST(DiagnoseCausal, HostOnTheCriticalPathIsNotNothingToFix) {
  // The rank whose host is late: the queue backs up, yet host work holds
  // most of the steps' critical path.
  const Diagnosis late = diagnose(read("ranks/late_host/rank-06.json.gz"));
  const Finding* f = finding(late, "cpu_gpu_offset");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(f->evidence.find("host_critical_path_pct"), nullptr);
  EXPECT_GE(f->evidence.find("host_critical_path_pct")->d, 20.0);
  EXPECT_EQ(f->advice.find("nothing to fix on the host"), std::string::npos) << f->advice;
  // Its GPU is busy a third of the steps: the queue is the device phase's
  // alone, and the fix points at the idle time (issue 38's eighth round).
  EXPECT_TRUE(f->advice.starts_with("Look at where the GPU idles first: it is busy only 32.2% of the steps"))
      << f->advice;
  // A GPU-bound run keeps the advice: the host is off the path.
  const Diagnosis bound = diagnose(read("gpu/h100-torch-2.11/4096_bf16_warm_eager.json"));
  const Finding* g = finding(bound, "cpu_gpu_offset");
  ASSERT_NE(g, nullptr);
  EXPECT_LT(g->evidence.find("host_critical_path_pct")->d, 20.0);
  EXPECT_NE(g->advice.find("nothing to fix on the host"), std::string::npos) << g->advice;
}

// "No change needed unless the host has other work to do" sat beside a
// replayed saving of 7.2 ms a step on this rank: the replay without the
// wait answers the "unless", and the advice says which way.
TEST(DiagnoseCausal, ASyncWhileTheGpuIsBusySaysWhetherTheHostHasOtherWork) {
  const Diagnosis late = diagnose(read("ranks/late_host/rank-06.json.gz"));
  const Finding* f = finding(late, "sync_api");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->advice.starts_with("The host has other work to do: while cudaStreamSynchronize waits")) << f->advice;
  const Cause* c = cause(late, "sync_api");
  ASSERT_NE(c, nullptr);
  EXPECT_GT(c->impact_per_step_ns, 0);
  // A trace whose host has nothing after the sync keeps the condition.
  const Diagnosis other = diagnose(read("public/torchbench/trace.json.gz"));
  const Finding* g = finding(other, "sync_api");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->advice.starts_with("No change needed unless the host has other work to do")) << g->advice;
  // The MoE trace's host had work after its routing syncs all along: a
  // thread that launches nothing (threading's _bootstrap, the whole 1.185 s)
  // held the whole-trace replay's end, so no edit could save anything until
  // the window became the launching thread's and the device's (issue 38's
  // eighth round).
  const Diagnosis moe = diagnose(read("public/switch_transformers/switch_moe_a100_fp32.json.gz"));
  const Finding* m = finding(moe, "sync_api");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->advice.starts_with("The host has other work to do")) << m->advice;
  // A rank whose sync waits behind the all-reduce, itself waiting for the
  // late rank 6, is told so (issue 38, seventh round), not "no change".
  const Diagnosis waiting = diagnose(read("ranks/late_host/rank-07.json.gz"));
  const Finding* h = finding(waiting, "sync_api");
  ASSERT_NE(h, nullptr);
  EXPECT_TRUE(h->advice.starts_with("First find why the collectives that cudaStreamSynchronize waits behind take so long"))
      << h->advice;
}

// A sync the GPU works through in a GPU-bound run (busy 90% or more of
// the window) is "no change needed" unless the replay frees 2% of the
// window, and a cause whose fix is "no change needed" ranks after the
// causes with a fix (issue 38's eleventh round: vLLM's 130 ms of
// cudaEventSynchronize, 1% in the replay, was a GPU-bound run's first
// cause). ranks/late_compute's rank 11 (synthetic, GPU busy 98.1%): its
// sync was the first cause.
TEST(DiagnoseCausal, ANoChangeSyncRanksAfterTheCausesWithAFix) {
  const Diagnosis d = diagnose(read("ranks/late_compute/rank-11.json.gz"));
  const Finding* f = finding(d, "sync_api");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->advice.starts_with("No change needed unless the host has other work to do")) << f->advice;
  std::size_t sync_at = d.causes.size(), bound_at = d.causes.size();
  for (std::size_t i = 0; i < d.causes.size(); ++i) {
    if (d.causes[i].id == "sync_api") sync_at = i;
    if (d.causes[i].id == "compute_bound") bound_at = i;
  }
  ASSERT_LT(sync_at, d.causes.size());
  ASSERT_LT(bound_at, d.causes.size());
  EXPECT_LT(bound_at, sync_at);
}

// fp32 math's saving is the replay of its kernels at half their time: most
// of the kernel time on a GPU-bound run (switch_moe, 575 ms of fp32 GEMMs),
// almost none where the GPU waits for the input pipeline (resnet50 with 4
// workers, 396 ms of fp32 convolutions): it then ranks after the causes
// that set the pace. The estimate it replaces was half the kernel time.
TEST(DiagnoseCausal, Fp32MathSavingIsTheReplayOfItsKernelsAtHalfTime) {
  for (const auto& [rel, at_least_pct, at_most_pct] :
       std::vector<std::tuple<std::string, double, double>>{
           {"public/switch_transformers/switch_moe_a100_fp32.json.gz", 80.0, 100.0},
           {"public/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz", 0.0, 1.0}}) {
    const Trace t = read(rel);
    const Diagnosis d = diagnose(t);
    const Cause* c = cause(d, "fp32_math");
    ASSERT_NE(c, nullptr) << rel;
    EXPECT_EQ(c->saving_from, "replay") << rel;
    ASSERT_TRUE(c->whatif.starts_with("scale:^")) << rel;
    Result<WhatIfEdit> edit = parse_whatif_edit(c->whatif);
    ASSERT_TRUE(edit.has_value()) << rel;
    Result<CausalResult> r = analyze_causal(t, {.edits = {*edit}, .paths = false});
    ASSERT_TRUE(r.has_value()) << rel;
    EXPECT_EQ(c->impact_ns, std::max<std::int64_t>(0, r->replayed_ns - r->predicted_ns)) << rel;
    const double half_kernel_ns = 0.5 * static_cast<double>(d.findings[c->anchor].evidence.find("fp32_math_ns")->i);
    EXPECT_GE(static_cast<double>(c->impact_ns), at_least_pct / 100.0 * half_kernel_ns) << rel;
    EXPECT_LE(static_cast<double>(c->impact_ns), at_most_pct / 100.0 * half_kernel_ns) << rel;
  }
}

}  // namespace
}  // namespace tprof
