// The causal model (include/tprof/causal.h): edges on small traces built by
// hand, the replay's error over every trace in tests/data with two or more
// steps, and what-if predictions checked against real runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/causal/names.h"
#include "tests/support/test_traces.h"
#include "tprof/causal.h"
#include "tprof/read.h"
#include "tprof/write.h"

namespace tprof {
namespace {


std::string data(const std::string& rel) { return std::string(TPROF_SOURCE_DIR) + "/tests/data/" + rel; }

// A Kineto trace from events written as JSON objects.
Trace parse(const std::string& events) {
  auto t = read_trace_bytes("{\"traceEvents\": [" + events + "]}");
  EXPECT_TRUE(t.has_value()) << (t ? "" : t.error().to_string());
  return std::move(*t);
}

std::string cpu(const std::string& cat, const std::string& name, double ts, double dur, int corr = -1) {
  std::string args = corr >= 0 ? ", \"args\": {\"correlation\": " + std::to_string(corr) + "}" : "";
  return "{\"ph\": \"X\", \"cat\": \"" + cat + "\", \"name\": \"" + name + "\", \"pid\": 1, \"tid\": 1, \"ts\": " +
         std::to_string(ts) + ", \"dur\": " + std::to_string(dur) + args + "}";
}
std::string gpu(const std::string& name, double ts, double dur, int corr, int stream = 7) {
  return "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"" + name + "\", \"pid\": 0, \"tid\": " +
         std::to_string(stream) + ", \"ts\": " + std::to_string(ts) + ", \"dur\": " + std::to_string(dur) +
         ", \"args\": {\"device\": 0, \"stream\": " + std::to_string(stream) + ", \"correlation\": " +
         std::to_string(corr) + "}}";
}

std::vector<const CausalEdge*> edges_of(const CausalGraph& g, EdgeType type) {
  std::vector<const CausalEdge*> out;
  for (const CausalEdge& e : g.edges)
    if (e.type == type) out.push_back(&e);
  return out;
}

// Two steps: an op launching a kernel, a second op launching one that
// queues behind it, and a synchronize that waits for the second.
std::string two_steps() {
  std::string s;
  for (int i = 0; i < 2; ++i) {
    const double b = 100.0 * i;
    const int c = 10 * i;
    s += cpu("user_annotation", "ProfilerStep#" + std::to_string(i + 1), b, 90) + ",";
    s += cpu("cpu_op", "aten::mm", b + 1, 10) + ",";
    s += cpu("cuda_runtime", "cudaLaunchKernel", b + 2, 5, c + 1) + ",";
    s += cpu("cpu_op", "aten::add", b + 12, 10) + ",";
    s += cpu("cuda_runtime", "cudaLaunchKernel", b + 13, 5, c + 2) + ",";
    s += cpu("cuda_runtime", "cudaDeviceSynchronize", b + 25, 60, c + 3) + ",";
    s += gpu("gemm_kernel", b + 10, 40, c + 1) + ",";
    s += gpu("add_kernel", b + 51, 30, c + 2) + ",";
  }
  s.pop_back();
  return s;
}

TEST(CausalGraph, LinksLaunchesStreamsAndSynchronisations) {
  const Trace t = parse(two_steps());
  const CausalGraph g = build_causal_graph(t);
  EXPECT_EQ(g.activities(), 16u);
  EXPECT_EQ(g.skipped_edges, 0u);
  // Every kernel has its launch edge, each stream its FIFO edges.
  EXPECT_EQ(edges_of(g, EdgeType::kLaunch).size(), 4u);
  EXPECT_EQ(edges_of(g, EdgeType::kStream).size(), 3u);
  EXPECT_EQ(edges_of(g, EdgeType::kDevice).size(), 4u);
  // The synchronize waits for the add kernel (ended at 81, returned at 85).
  const auto syncs = edges_of(g, EdgeType::kSync);
  ASSERT_EQ(syncs.size(), 2u);
  EXPECT_EQ(t.name(syncs[0]->cause_event), "add_kernel");
  EXPECT_EQ(t.name(syncs[0]->event), "cudaDeviceSynchronize");
  EXPECT_EQ(syncs[0]->measured_ns, 4000);
  EXPECT_TRUE(syncs[0]->binding);
  // The add kernel queued behind the gemm: its stream edge binds, its
  // launch edge (from the call's return at 18 us, since the kernel started
  // after it) is capped at the trace's launch latency: 3 us, the gemm's
  // (its call returned at 7 us, the gemm started at 10).
  for (const CausalEdge* e : edges_of(g, EdgeType::kLaunch)) {
    EXPECT_TRUE(CausalGraph::is_end(e->from));
    if (t.name(e->event) != "add_kernel") continue;
    EXPECT_FALSE(e->binding);
    EXPECT_EQ(e->measured_ns, 33000);
    EXPECT_EQ(e->weight_ns, 3000);
  }
  EXPECT_EQ(g.launch_latency_ns, 3000);
}

// A copy's direction and host memory, from the names Kineto and tprof
// give copies (src/causal/names.h).
TEST(CausalNames, ACopysDirectionAndHostMemoryComeFromItsName) {
  using internal::copy_kind;
  using internal::CopyDirection;
  using internal::HostMemory;
  EXPECT_EQ(copy_kind("Memcpy DtoH (Device -> Pageable)").direction, CopyDirection::kDtoH);
  EXPECT_TRUE(copy_kind("Memcpy DtoH (Device -> Pageable)").pageable());
  EXPECT_EQ(copy_kind("Memcpy HtoD (Pinned -> Device)").host, HostMemory::kPinned);
  EXPECT_EQ(copy_kind("Memcpy HtoD (Pinned -> Device)").direction, CopyDirection::kHtoD);
  EXPECT_EQ(copy_kind("Memcpy DtoD (Device -> Device)").direction, CopyDirection::kDtoD);
  EXPECT_EQ(copy_kind("Memcpy DtoD").host, HostMemory::kUnknown);  // tprof's own traces
  // Without the token, the arrow's ends; a peer copy is neither end's.
  EXPECT_EQ(copy_kind("Memcpy (Device -> Pageable)").direction, CopyDirection::kDtoH);
  EXPECT_EQ(copy_kind("Memcpy (Host -> Device)").direction, CopyDirection::kHtoD);
  EXPECT_EQ(copy_kind("Memcpy PtoP (Device -> Device)").direction, CopyDirection::kOther);
  EXPECT_EQ(copy_kind("Memset (Device)").direction, CopyDirection::kOther);
  EXPECT_EQ(internal::copy_direction_name(CopyDirection::kDtoH), "DtoH");
}

// An Async copy to pageable host memory returns only once its copy is done
// (CUDA's API synchronization behavior): a sync edge from the copy's end,
// as for cudaMemcpy. One to pinned memory returns at once: none.
TEST(CausalGraph, AnAsyncReadBackToPageableMemoryWaitsForItsCopy) {
  auto copy = [](const std::string& name, double ts, double dur, int corr) {
    std::string s = gpu(name, ts, dur, corr);
    s.replace(s.find("\"kernel\""), 8, "\"gpu_memcpy\"");
    return s;
  };
  const Trace t = parse(cpu("cuda_runtime", "cudaLaunchKernel", 1, 4, 1) + "," + gpu("k", 6, 30, 1) + "," +
                        cpu("cuda_runtime", "cudaMemcpyAsync", 10, 32, 2) + "," +
                        copy("Memcpy DtoH (Device -> Pageable)", 36, 2, 2) + "," +
                        cpu("cuda_runtime", "cudaMemcpyAsync", 50, 3, 3) + "," +
                        copy("Memcpy DtoH (Device -> Pinned)", 52, 2, 3));
  const CausalGraph g = build_causal_graph(t);
  const auto syncs = edges_of(g, EdgeType::kSync);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(t.name(syncs[0]->cause_event), "Memcpy DtoH (Device -> Pageable)");
  EXPECT_EQ(t.events.ts_ns[syncs[0]->event], 10000);
  EXPECT_EQ(syncs[0]->measured_ns, 4000);  // the copy ended at 38, the call returned at 42
}

// A launch that begins on a full queue (900 or more launched, not started)
// returns when its stream frees a slot: a sync edge from the stream's work
// that ended last before it returned. A quick launch on the same queue, and
// a slow one on a shallow queue, wait for nothing.
TEST(CausalGraph, ALaunchOnAFullQueueWaitsForTheStreamToFreeASlot) {
  std::string s;
  // 1100 launches 1 us apart; kernel i runs 10 us from 5 + 10 i.
  for (int i = 0; i < 1100; ++i) {
    s += cpu("cuda_runtime", "cudaLaunchKernel", i, 0.5, i) + "," + gpu("k", 5 + 10 * i, 10, i) + ",";
  }
  // At 1100 us 110 kernels have started: 990 queued. The call returns at
  // 1165.5, just after kernel 115 ends (1165).
  s += cpu("cuda_runtime", "cudaLaunchKernel", 1100, 65.5, 1100) + "," + gpu("k", 5 + 10 * 1100, 10, 1100) + ",";
  // 80 us on another stream, nothing queued on it: a slow launch, no wait.
  s += cpu("cuda_runtime", "cudaLaunchKernel", 1170, 80, 1101) + "," + gpu("other", 1260, 5, 1101, 9);
  const Trace t = parse(s);
  const CausalGraph g = build_causal_graph(t);
  const auto syncs = edges_of(g, EdgeType::kSync);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(t.events.ts_ns[syncs[0]->event], 1'100'000);
  EXPECT_EQ(t.events.ts_ns[syncs[0]->cause_event], 1'155'000);  // kernel 115
  EXPECT_EQ(syncs[0]->measured_ns, 500);
  // Halving the kernels frees the slot sooner (kernel 115 ends by 600 us):
  // the held launch returns after its own 0.5 us. Halving the other
  // stream's kernel leaves it where it was.
  const std::uint32_t held = 2 * g.activity_of_event[syncs[0]->event] + 1;
  auto half = analyze_causal(t, {.edits = {*parse_whatif_edit("scale:^k$=0.5")}, .paths = false});
  ASSERT_TRUE(half.has_value());
  EXPECT_EQ(half->predicted_time_ns[held], 1'100'500);
  auto other = analyze_causal(t, {.edits = {*parse_whatif_edit("scale:^other$=0.5")}, .paths = false});
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->predicted_time_ns[held], 1'165'500);
}

TEST(CausalReplay, ReproducesTheTraceAndFollowsTheBindingEdges) {
  const Trace t = parse(two_steps());
  auto r = analyze_causal(t);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->steps.size(), 2u);
  // Step 1 ends with its synchronize (85 us); step 2 at 185 us.
  EXPECT_EQ(r->steps[0].measured_ns, 90000);  // host end 90 after start 0
  EXPECT_EQ(r->steps[1].measured_ns, 100000);
  for (const StepTime& s : r->steps) EXPECT_EQ(s.replayed_ns, s.measured_ns);
  // The path of step 2: host until the launch, gemm, add, the sync's return.
  const CriticalPath& p = r->steps[1].path;
  EXPECT_EQ(p.length_ns(), 100000);
  std::int64_t sum = p.unexplained_ns;
  for (std::int64_t b : p.bound_ns) sum += b;
  EXPECT_EQ(sum, p.length_ns());
  EXPECT_EQ(p.bound_ns[static_cast<int>(BoundType::kGpuCompute)], 70000);
}

// The index of the event named `name` (the first).
std::uint32_t event_named(const Trace& t, std::string_view name) {
  for (std::uint32_t e = 0; e < t.events.size(); ++e)
    if (t.name(e) == name) return e;
  ADD_FAILURE() << "no event " << name;
  return 0;
}

// The path into a node on the measured timeline follows the binding edges
// back to the start asked for: into step 2's add kernel, from the step's
// start, the gemm it queues behind, the gemm's launch and the host before.
// A CUDA graph cannot capture a call that waits for the device: the op a
// read-back runs in (aten::to > cudaMemcpyAsync to pageable memory, and its
// cudaStreamSynchronize) keeps its host time under the graph edit, while
// the op that only launches (aten::add) collapses into the graph launch.
TEST(CausalWhatIf, AGraphKeepsTheOpsThatWaitForTheDevice) {
  auto copy = [](const std::string& name, double ts, double dur, int corr) {
    std::string s = gpu(name, ts, dur, corr);
    s.replace(s.find("\"kernel\""), 8, "\"gpu_memcpy\"");
    return s;
  };
  const std::string step = cpu("user_annotation", "ProfilerStep#1", 0, 200) + ",";
  const std::string add = cpu("cpu_op", "aten::mul", 1, 9) + "," + cpu("cuda_runtime", "cudaLaunchKernel", 3, 5, 1) + "," +
                          gpu("k", 9, 2, 1) + ",";
  const std::string read = cpu("cpu_op", "aten::to", 20, 60) + "," + cpu("cuda_runtime", "cudaMemcpyAsync", 25, 20, 2) + "," +
                           copy("Memcpy DtoH (Device -> Pageable)", 30, 2, 2) + "," +
                           cpu("cuda_runtime", "cudaStreamSynchronize", 50, 10, 3) + ",";
  const std::string tail = cpu("cpu_op", "aten::add", 100, 60) + "," + cpu("cuda_runtime", "cudaLaunchKernel", 110, 40, 4) +
                           "," + gpu("k", 152, 2, 4);
  const Trace t = parse(step + add + read + tail);
  auto r = analyze_causal(t, {.edits = {*parse_whatif_edit("graph")}, .paths = false});
  ASSERT_TRUE(r.has_value());
  const CausalGraph& g = *r->graph;
  auto node_end = [&](std::string_view name) { return 2 * g.activity_of_event[event_named(t, name)] + 1; };
  auto node_begin = [&](std::string_view name) { return 2 * g.activity_of_event[event_named(t, name)]; };
  // aten::to keeps its 60 us; aten::add's 60 us go (its launch is not the
  // step's first, which stands for the graph launch).
  EXPECT_EQ(r->predicted_time_ns[node_end("aten::to")] - r->predicted_time_ns[node_begin("aten::to")], 60'000);
  EXPECT_EQ(r->predicted_time_ns[node_end("aten::add")], r->predicted_time_ns[node_begin("aten::add")]);
}

TEST(CausalMeasuredPath, FollowsTheBindingEdgesToTheStartAskedFor) {
  const Trace t = parse(two_steps());
  const CausalGraph g = build_causal_graph(t);
  std::uint32_t add = 0;
  for (std::uint32_t e = 0; e < t.events.size(); ++e)
    if (t.name(e) == "add_kernel" && t.events.ts_ns[e] > 100'000) add = e;
  const std::vector<CriticalPath> paths =
      measured_critical_paths(t, g, {{CausalGraph::begin_node(g.activity_of_event[add]), 100'000}});
  ASSERT_EQ(paths.size(), 1u);
  const CriticalPath& p = paths[0];
  EXPECT_EQ(p.start_ns, 100'000);
  EXPECT_EQ(p.end_ns, 151'000);
  EXPECT_EQ(p.unexplained_ns, 0);
  EXPECT_EQ(p.unrecorded_wait_ns, 0);
  EXPECT_EQ(p.bound_ns[static_cast<int>(BoundType::kGpuCompute)], 40'000);         // the gemm
  EXPECT_EQ(p.bound_ns[static_cast<int>(BoundType::kKernelKernelOverhead)], 1'000);  // gemm end -> add
  // The launch call (5 us) and its kernel's start 3 us after it returned.
  EXPECT_EQ(p.bound_ns[static_cast<int>(BoundType::kKernelLaunchOverhead)], 8'000);
  EXPECT_EQ(p.bound_ns[static_cast<int>(BoundType::kCpu)], 2'000);
}

// A kernel that starts long after both its launch and its stream's previous
// kernel waited for something the trace does not record: beyond the
// trace's usual launch delay (3 us here) its wait is not launch overhead.
TEST(CausalMeasuredPath, ALongWaitAfterTheLaunchIsUnrecorded) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    s += cpu("cuda_runtime", "cudaLaunchKernel", 20.0 * i, 5, i + 1) + ",";
    s += gpu("k" + std::to_string(i + 1), i < 3 ? 20.0 * i + 8 : 700.0, 10, i + 1) + ",";
  }
  s.pop_back();
  const Trace t = parse(s);
  const CausalGraph g = build_causal_graph(t);
  EXPECT_EQ(g.launch_latency_ns, 3'000);
  const std::uint32_t k4 = g.activity_of_event[event_named(t, "k4")];
  const CriticalPath p = measured_critical_paths(t, g, {{CausalGraph::begin_node(k4), 60'000}})[0];
  EXPECT_EQ(p.length_ns(), 640'000);
  EXPECT_EQ(p.unrecorded_wait_ns, 632'000);
  EXPECT_EQ(p.bound_ns[static_cast<int>(BoundType::kKernelLaunchOverhead)], 8'000);
  std::int64_t sum = p.unexplained_ns + p.unrecorded_wait_ns;
  for (std::int64_t b : p.bound_ns) sum += b;
  EXPECT_EQ(sum, p.length_ns());
}

TEST(CausalWhatIf, RemovingAnOpTakesItsHostTimeAndItsKernel) {
  const Trace t = parse(two_steps());
  auto edit = parse_whatif_edit("remove:aten::add");
  ASSERT_TRUE(edit.has_value());
  auto r = analyze_causal(t, {.edits = {*edit}});
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  ASSERT_EQ(r->matched.size(), 1u);
  EXPECT_EQ(r->matched[0], 2u);
  // Without the add kernel the sync returns 4 us after the gemm ends (50
  // us) instead of after the add (81 us); the step's last 5 us of host
  // time follow: step 1 ends at 59 us instead of 90.
  EXPECT_EQ(r->steps[0].measured_ns, 90000);
  EXPECT_EQ(r->steps[0].predicted_end_ns, 59000);
  EXPECT_EQ(r->steps[0].predicted_ns, 59000);
  // Step 2 the same, plus the 10 us between the steps (from step 1's end).
  EXPECT_EQ(r->steps[1].measured_ns, 100000);
  EXPECT_EQ(r->steps[1].predicted_ns, 69000);
}

// release: launched work held on the device starts as soon as its launch
// and its stream allow. A DCGAN on one stream loses ~2.3 ms to each of 13
// stalls (another process time-slicing the GPU); letting them go shortens
// the run, though less than the stalls: the main thread's wait for the
// autograd thread has no edge, so it keeps its measured length.
TEST(CausalWhatIf, ReleasingHeldWorkShortensTheStalledRun) {
  auto t = read_trace(data("public/warming423_pf/dcgan_train_rtx3080.pt.trace.json.gz"));
  ASSERT_TRUE(t.has_value());
  auto r = analyze_causal(*t, {.edits = {*parse_whatif_edit("release")}, .paths = false});
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_GT(r->matched[0], 0u);
  EXPECT_EQ(r->replayed_ns, r->measured_ns);
  EXPECT_LT(r->predicted_ns, r->replayed_ns - 2'000'000);
  // A trace whose work starts at the typical delay after its launch or
  // its stream: nothing to release, an error rather than a silent no-op.
  const Trace q = parse(two_steps());
  auto none = analyze_causal(q, {.edits = {*parse_whatif_edit("release")}, .paths = false});
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message().find("matches no event"), std::string::npos);
}

// loss.backward(): the calling thread (tid 1) waits in one stretch while
// the autograd engine's thread (tid 2) runs the backward ops.
std::string backward_on_another_thread(const std::string& op, double next_at, int worker_pid = 1) {
  auto on = [](int pid, int tid, const std::string& name, double ts, double dur) {
    return "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"" + name + "\", \"pid\": " + std::to_string(pid) +
           ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + std::to_string(ts) + ", \"dur\": " + std::to_string(dur) + "}";
  };
  return "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#1\", \"pid\": 1, \"tid\": 1, \"ts\": 0, "
         "\"dur\": " + std::to_string(next_at + 40) + "}," +
         on(1, 1, "aten::mse_loss", 10, 80) + "," + on(1, 1, "Optimizer.step#SGD.step", next_at, 30) + "," +
         on(worker_pid, 2, op + "MseLossBackward0", 120, 180) + "," + on(worker_pid, 2, op + "AddmmBackward0", 310, 630);
}

TEST(CausalGraph, ACallerWaitsForTheAutogradThreadsBackward) {
  const std::string engine = "autograd::engine::evaluate_function: ";
  const Trace t = parse(backward_on_another_thread(engine, 960));
  auto r = analyze_causal(t, {.edits = {*parse_whatif_edit("remove:AddmmBackward0")}, .paths = false});
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  std::vector<const CausalEdge*> waits = edges_of(*r->graph, EdgeType::kThread);
  ASSERT_EQ(waits.size(), 2u);
  if (r->graph->time_ns[waits[0]->to] > r->graph->time_ns[waits[1]->to]) std::swap(waits[0], waits[1]);
  // The hand-over: the loss ends → the first backward op begins; the
  // return: the last one ends → the optimizer step begins.
  EXPECT_EQ(t.name(waits[0]->cause_event), engine + "MseLossBackward0");
  EXPECT_EQ(waits[0]->measured_ns, 30'000);
  EXPECT_EQ(t.name(waits[1]->cause_event), engine + "AddmmBackward0");
  EXPECT_EQ(waits[1]->measured_ns, 20'000);
  EXPECT_EQ(r->replayed_ns, r->measured_ns);
  // Without the 630 us AddmmBackward0 the caller goes on at 330 us, not
  // 960: the step ends at 370 us (it stayed at 1000 while the wait was a
  // stretch of the step's own time).
  EXPECT_EQ(r->measured_ns, 1'000'000);
  EXPECT_EQ(r->predicted_ns, 370'000);
  // Not a wait: ops that are not the engine's, a thread of another process.
  for (const Trace& q : {parse(backward_on_another_thread("aten::", 960)),
                         parse(backward_on_another_thread(engine, 960, 2))}) {
    EXPECT_TRUE(edges_of(build_causal_graph(q), EdgeType::kThread).empty());
  }
  // A caller that goes on long after the work ends (560 us of 1.4 ms): the
  // hand-over alone (the backward began 30 us into the stretch), no return.
  const CausalGraph late_graph = build_causal_graph(parse(backward_on_another_thread(engine, 1500)));
  const std::vector<const CausalEdge*> late = edges_of(late_graph, EdgeType::kThread);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0]->measured_ns, 30'000);
}

// Issue 38's thirteenth round: a T4 MLP's last step waited 43.6 ms for its
// DataLoader, then stalled 4 ms after backward() returned. With no return
// edge the backward had no hand-over either, so the autograd thread's idle
// gap since the step before held its burst (and the kernels it launched,
// and the synchronize behind them) in place: the DataLoader's removal saved
// that step nothing. Here step 2 loads for 1 ms, the worker's backward
// launches a kernel the step's synchronize waits for, and the caller stalls.
TEST(CausalWhatIf, AHandOverWithoutAReturnStillMovesTheBackward) {
  const std::string engine = "autograd::engine::evaluate_function: ";
  auto on = [](int tid, const std::string& cat, const std::string& name, double ts, double dur, int corr = -1) {
    std::string s = cpu(cat, name, ts, dur, corr);
    return s.replace(s.find("\"tid\": 1"), 8, "\"tid\": " + std::to_string(tid));
  };
  const std::string events =
      cpu("user_annotation", "ProfilerStep#1", 0, 1000) + "," + cpu("cpu_op", "aten::mse_loss", 10, 80) + "," +
      on(2, "cpu_op", engine + "MseLossBackward0", 120, 180) + "," + on(2, "cpu_op", engine + "AddmmBackward0", 310, 630) +
      "," + cpu("cpu_op", "Optimizer.step#SGD.step", 960, 30) + "," +
      cpu("user_annotation", "ProfilerStep#2", 1000, 2000) + "," +
      cpu("user_annotation", "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 1000, 1000) + "," +
      cpu("cpu_op", "aten::mse_loss", 2010, 80) + "," + on(2, "cpu_op", engine + "MseLossBackward0", 2120, 180) + "," +
      on(2, "cuda_runtime", "cudaLaunchKernel", 2150, 10, 7) + "," + gpu("gemm_kernel", 2170, 810, 7) + "," +
      on(2, "cpu_op", engine + "AddmmBackward0", 2310, 90) + "," +
      cpu("cuda_runtime", "cudaDeviceSynchronize", 2940, 45) + "," + cpu("cpu_op", "Optimizer.step#SGD.step", 2990, 5);
  const Trace t = parse(events);
  auto r = analyze_causal(
      t, {.edits = {*parse_whatif_edit("overlap:enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__")},
          .paths = false});
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  ASSERT_EQ(r->steps.size(), 2u);
  EXPECT_EQ(r->steps[1].replayed_ns, r->steps[1].measured_ns);
  // The hand-over (2090 → 2120) moves the burst, its kernel and the
  // synchronize with the main thread: the step loses the 1 ms load.
  EXPECT_EQ(r->steps[1].measured_ns, 2'000'000);
  EXPECT_EQ(r->steps[1].predicted_ns, 1'000'000);
}

TEST(CausalWhatIf, RemovingTheBackwardShortensTheStepThatWaitedForIt) {
  // The DCGAN's three backward passes a step run on the autograd thread
  // while the main thread sits in its ProfilerStep: removing them predicted
  // 13% (the wait stayed as the step's own time); each pass's hand-over and
  // return are now edges.
  auto t = read_trace(data("public/warming423_pf/dcgan_train_rtx3080.pt.trace.json.gz"));
  ASSERT_TRUE(t.has_value());
  auto r = analyze_causal(*t, {.edits = {*parse_whatif_edit("remove:^autograd::engine")}, .paths = false});
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(edges_of(*r->graph, EdgeType::kThread).size(), 18u);
  ASSERT_EQ(r->steps.size(), 3u);
  for (const StepTime& s : r->steps) {
    EXPECT_EQ(s.replayed_ns, s.measured_ns);
    EXPECT_LT(s.predicted_ns, s.measured_ns * 6 / 10) << s.step;
  }
}

TEST(CausalWhatIf, EditsParseAndRefuseWhatTheyCannotMean) {
  EXPECT_EQ(parse_whatif_edit("graph")->kind, WhatIfEdit::Kind::kGraph);
  auto s = parse_whatif_edit("scale:gemm=0.5");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->pattern, "gemm");
  EXPECT_DOUBLE_EQ(s->factor, 0.5);
  EXPECT_FALSE(parse_whatif_edit("scale:gemm").has_value());
  EXPECT_FALSE(parse_whatif_edit("scale:gemm=fast").has_value());
  EXPECT_FALSE(parse_whatif_edit("scale:gemm=-1").has_value());
  EXPECT_FALSE(parse_whatif_edit("remove:").has_value());
  EXPECT_FALSE(parse_whatif_edit("fuse:add").has_value());
  EXPECT_EQ(parse_whatif_edit("drop-sync:cudaDeviceSynchronize")->kind, WhatIfEdit::Kind::kDropSync);
  EXPECT_EQ(parse_whatif_edit("overlap:DataLoader")->kind, WhatIfEdit::Kind::kOverlap);
  EXPECT_EQ(parse_whatif_edit("release")->kind, WhatIfEdit::Kind::kRelease);
  EXPECT_FALSE(parse_whatif_edit("release:x").has_value());
  // An edit that changes nothing is an error, not a silent no-op.
  const Trace t = parse(two_steps());
  auto r = analyze_causal(t, {.edits = {*parse_whatif_edit("remove:no_such_op")}});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("matches no event"), std::string::npos);
}

// Every trace in tests/data (the callers keep those with two or more steps).
std::vector<std::string> stepped_traces() { return testing::test_traces(); }

TEST(CausalReplay, ErrorPerStepOverEveryTraceWithStepsMeetsTheBound) {
  std::vector<double> errors;
  int traces = 0;
  std::printf("%-70s %6s %9s %9s %9s\n", "trace", "steps", "median%", "p90%", "max%");
  for (const std::string& path : stepped_traces()) {
    auto t = read_trace(path);
    if (!t) continue;  // not a trace (manifests, hostile inputs)
    auto r = analyze_causal(*t, {.paths = false});
    ASSERT_TRUE(r.has_value()) << path;
    if (!r->has_steps || r->steps.size() < 2) continue;
    std::vector<double> e;
    for (const StepTime& s : r->steps) {
      if (s.measured_ns <= 0) continue;
      e.push_back(100.0 * std::abs(static_cast<double>(s.replayed_ns - s.measured_ns)) /
                  static_cast<double>(s.measured_ns));
    }
    if (e.empty()) continue;
    ++traces;
    std::sort(e.begin(), e.end());
    std::printf("%-70s %6zu %9.3f %9.3f %9.3f\n", path.substr(data("").size()).c_str(), e.size(), e[e.size() / 2],
                e[std::min(e.size() - 1, e.size() * 9 / 10)], e.back());
    errors.insert(errors.end(), e.begin(), e.end());
  }
  ASSERT_GE(traces, 20);
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  const double p90 = errors[std::min(errors.size() - 1, errors.size() * 9 / 10)];
  std::printf("all %d traces, %zu steps: median %.3f%%, p90 %.3f%%\n", traces, errors.size(), median, p90);
  // Every trace replays exactly since crossing host events keep their
  // times (issue 38, ninth round); the bounds leave room for a new trace.
  EXPECT_LE(median, 0.5);
  EXPECT_LE(p90, 1.0);
}

// A run's step time: the median over its steps (the first steps of a cold
// run carry warm-up; a median is what tprof compare and the gate use).
double steady(const std::vector<StepTime>& steps, bool predicted) {
  std::vector<double> v;
  for (const StepTime& s : steps) v.push_back(static_cast<double>(predicted ? s.predicted_ns : s.measured_ns));
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

// remove:op::add on the eager matmul_add captures predicts the fused
// (addmm) run of the same size on the same GPU: within 15% on H100 at both
// sizes and on H200 at 4096. On H200 at 64 the fused program's op::addmm
// costs 2-3 us less host time than the eager op::matmul -> op::mm it
// replaces (16.4 vs 18.5 us warm, 14.8 vs 17.9 us cold), and the cold eager
// run spends 1.8 us per step before its first op that the other runs do
// not: neither is the add, so removing the add cannot predict them
// (docs/critical-path.md, "Validation"). Those two pairs are held to the
// error they have, so a change that makes them worse fails.
TEST(CausalWhatIf, RemovingTheAddPredictsTheFusedRunWithinFifteenPercent) {
  std::printf("%-34s %12s %12s %12s %8s\n", "pair", "eager us", "predicted us", "fused us", "error");
  for (const char* gpu_dir : {"gpu/h100-tprof", "gpu/h200-tprof"}) {
    for (const char* size : {"64", "4096"}) {
      for (const char* temp : {"warm", "cold"}) {
        const std::string stem = std::string(gpu_dir) + "/" + size + "_bf16_" + temp;
        auto eager = read_trace(data(stem + "_eager.json"));
        auto fused = read_trace(data(stem + "_fused.json"));
        ASSERT_TRUE(eager.has_value() && fused.has_value()) << stem;
        auto pred = analyze_causal(*eager, {.edits = {*parse_whatif_edit("remove:op::add")}, .paths = false});
        auto truth = analyze_causal(*fused, {.paths = false});
        ASSERT_TRUE(pred.has_value()) << pred.error().to_string();
        ASSERT_TRUE(truth.has_value());
        const double p = steady(pred->steps, true), f = steady(truth->steps, false);
        const double err = 100.0 * (p - f) / f;
        std::printf("%-34s %12.1f %12.1f %12.1f %7.1f%%\n", stem.c_str(), steady(pred->steps, false) / 1e3, p / 1e3,
                    f / 1e3, err);
        const bool h200_64 = std::string(gpu_dir) == "gpu/h200-tprof" && std::string(size) == "64";
        const double bound = !h200_64 ? 15.0 : std::string(temp) == "warm" ? 16.0 : 35.0;
        EXPECT_LE(std::abs(err), bound) << stem;
      }
    }
  }
}

}  // namespace
}  // namespace tprof

namespace tprof {
namespace {

TEST(CausalWhatIf, DroppingTheSyncLeavesTheDeviceWorkToEndTheStep) {
  const Trace t = parse(two_steps());
  auto r = analyze_causal(t, {.edits = {*parse_whatif_edit("drop-sync:cudaDeviceSynchronize")}});
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  // Step 1: the sync returns 4 us after it begins (its return latency), the
  // host ends at 34 us, and the add kernel (to 81 us) ends the step.
  EXPECT_EQ(r->steps[0].predicted_ns, 81000);
  // Step 2 starts 10 us after step 1's host end (44 us); its gemm queues
  // behind step 1's add kernel (81 us + the 1 us stream gap), then the add:
  // 82 + 40 + 1 + 30 = 153 us, 72 us after step 1 ended.
  EXPECT_EQ(r->steps[1].predicted_ns, 72000);
  // The critical path of step 2 is now device work and stream gaps.
  const CriticalPath& p = r->steps[1].path;
  EXPECT_EQ(p.bound_ns[static_cast<int>(BoundType::kGpuCompute)], 70000);
  EXPECT_EQ(p.bound_ns[static_cast<int>(BoundType::kKernelKernelOverhead)], 2000);
}

TEST(CausalWhatIf, ScaleClampsAndGraphAndOverlapShortenTheHost) {
  const Trace t = parse(two_steps());
  // A factor that would overflow is clamped, never undefined.
  auto huge = analyze_causal(t, {.edits = {*parse_whatif_edit("scale:gemm_kernel=1e300")}});
  ASSERT_TRUE(huge.has_value());
  EXPECT_GT(huge->steps[0].predicted_ns, 1'000'000'000'000'000LL);
  // Halving the GEMMs, by class and by name: the sync waits for the add,
  // which now starts at 31 us (gemm 10..30, + 1 us): the step's host end
  // moves from 90 to 70 us. The add kernel is not in the class.
  for (const char* edit : {"scale:gemm=0.5", "scale:gemm_kernel=0.5"}) {
    auto half = analyze_causal(t, {.edits = {*parse_whatif_edit(edit)}});
    ASSERT_TRUE(half.has_value()) << edit;
    EXPECT_EQ(half->steps[0].predicted_ns, 70000) << edit;
    EXPECT_EQ(half->matched[0], 2u) << edit;
  }
  // As a graph, each step's ops collapse into its first launch call.
  auto graph = analyze_causal(t, {.edits = {*parse_whatif_edit("graph")}});
  ASSERT_TRUE(graph.has_value());
  EXPECT_LT(graph->steps[1].predicted_ns, graph->steps[1].replayed_ns);
  // Overlapping aten::add's host work: its 10 us leave the thread, but the
  // step waits for its kernels (the sync returns after the add kernel),
  // so it saves nothing: the host was not on the critical path.
  auto overlap = analyze_causal(t, {.edits = {*parse_whatif_edit("overlap:aten::add")}});
  ASSERT_TRUE(overlap.has_value());
  EXPECT_EQ(overlap->steps[0].predicted_ns, overlap->steps[0].replayed_ns);
  EXPECT_EQ(overlap->steps[0].path.bound_ns[static_cast<int>(BoundType::kGpuCompute)], 70000);
}

TEST(CausalWhatIf, RegexPatternsSkipNamesTooLongToSearch) {
  // A 100 kB kernel name: a regex edit must not recurse through it.
  const std::string long_name(100000, 'a');
  const Trace t = parse(cpu("cpu_op", "op", 0, 10) + "," + cpu("cuda_runtime", "cudaLaunchKernel", 1, 2, 1) + "," +
                        gpu(long_name, 4, 2, 1));
  auto r = analyze_causal(t, {.edits = {*parse_whatif_edit("remove:a+b")}});
  EXPECT_FALSE(r.has_value());  // nothing matched, and no crash
  auto exact = analyze_causal(t, {.edits = {*parse_whatif_edit("remove:" + long_name)}});
  EXPECT_TRUE(exact.has_value());
}

}  // namespace
}  // namespace tprof

namespace tprof {
namespace {

// The replay is max-plus: an edit that only lowers weights or drops edges
// can only move nodes earlier. So graph, drop-sync of every sync call, and
// remove of a trace's most frequent op never make a step end later, on
// every trace in tests/data. (One step may still take longer than before:
// when the step before it ends earlier still, its device backlog moves
// into it.)
TEST(CausalWhatIf, EditsThatOnlyRemoveWorkNeverMakeAStepEndLater) {
  int checked = 0;
  for (const std::string& path : stepped_traces()) {
    auto t = read_trace(path);
    if (!t) continue;
    auto graph = std::make_shared<const CausalGraph>(build_causal_graph(*t));
    std::map<std::string, int> count;
    for (std::uint32_t a = 0; a < graph->activities(); ++a)
      if (!graph->is_device[a] && t->events.kind[graph->events[a]] == EventKind::kCpuOp)
        ++count[std::string(t->name(graph->events[a]))];
    std::vector<std::string> edits = {"graph", "drop-sync:Synchronize"};
    if (!count.empty()) {
      auto top = std::max_element(count.begin(), count.end(),
                                  [](const auto& x, const auto& y) { return x.second < y.second; });
      edits.push_back("remove:" + top->first);
    }
    for (const std::string& text : edits) {
      auto r = analyze_causal(*t, graph, {.edits = {*parse_whatif_edit(text)}, .paths = false});
      if (!r) continue;  // the edit matched nothing in this trace
      ++checked;
      for (const StepTime& s : r->steps)
        EXPECT_LE(s.predicted_end_ns, s.replayed_end_ns) << path << " " << text << " step " << s.step;
    }
  }
  EXPECT_GE(checked, 100);
}

}  // namespace
}  // namespace tprof

namespace tprof {
namespace {

TEST(CausalOverlay, MarksThePathAndItsFlowsAsHtaDoesAndReadsBack) {
  auto t = read_trace(data("gpu/h100-tprof/64_bf16_warm_eager.json"));
  ASSERT_TRUE(t.has_value());
  auto r = analyze_causal(*t);
  ASSERT_TRUE(r.has_value());
  const std::uint64_t unmatched_before = t->diagnostics.count(DiagnosticCode::kUnmatchedFlow);
  std::vector<const CriticalPath*> paths;
  std::size_t joins = 0;
  std::set<std::uint32_t> on_path;
  for (const StepTime& s : r->steps) {
    paths.push_back(&s.path);
    for (const PathSegment& seg : s.path.segments) {
      const CausalEdge& c = r->graph->edges[seg.edge];
      on_path.insert(r->graph->event_of(c.from));
      on_path.insert(r->graph->event_of(c.to));
      if (seg.event != kNoIndex) on_path.insert(seg.event);  // the op whose own time the slice is
      joins += r->graph->event_of(c.from) != r->graph->event_of(c.to);
    }
  }
  ASSERT_GT(joins, 0u);
  const std::size_t before = t->events.size();
  overlay_critical_path(&*t, *r->graph, paths);
  EXPECT_EQ(t->events.size(), before + 2 * joins);
  std::string json;
  write_trace_json(*t, &json);
  auto back = read_trace_bytes(json);
  ASSERT_TRUE(back.has_value()) << back.error().to_string();
  // Every critical_path flow has both ends; the events on the path say so.
  EXPECT_EQ(back->diagnostics.count(DiagnosticCode::kUnmatchedFlow), unmatched_before);
  std::size_t critical = 0, flows = 0;
  for (std::uint32_t e = 0; e < back->events.size(); ++e) {
    if (back->name(e) == "critical_path") {
      ++flows;
      EXPECT_NE(back->args_json(e).find("\"weight\": "), std::string_view::npos);
      if (back->events.phase[e] == Phase::kFlowEnd) {
        EXPECT_TRUE(back->events.flags[e] & kFlagBindEnclosing);
      }
    } else if (back->args_json(e).starts_with("{\"critical\": 1")) {
      ++critical;
    }
  }
  EXPECT_EQ(flows, 2 * joins);
  EXPECT_EQ(critical, on_path.size());
}

}  // namespace
}  // namespace tprof

namespace tprof {
namespace {

// Found by the diagnose fuzzer: a step that ends before the step before it
// (nested or overlapping ProfilerSteps) gave a negative step time.
TEST(CausalReplay, AStepThatEndsBeforeThePreviousOneTakesNoTime) {
  const Trace t = parse(cpu("user_annotation", "ProfilerStep#1", 0, 100) + "," +
                        cpu("user_annotation", "ProfilerStep#2", 10, 20) + "," +
                        cpu("user_annotation", "ProfilerStep#3", 150, 20));
  auto r = analyze_causal(t);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->steps.size(), 3u);
  EXPECT_EQ(r->steps[0].measured_ns, 100000);
  EXPECT_EQ(r->steps[1].measured_ns, 0);
  EXPECT_EQ(r->steps[1].replayed_ns, 0);
  EXPECT_EQ(r->steps[1].path.length_ns(), 0);
  EXPECT_EQ(r->steps[2].measured_ns, 70000);  // from step 1's end (100) to 170
  EXPECT_EQ(r->steps[2].replayed_ns, 70000);
}

// with_stack: a RecordFunction scope begins inside the Python frames that
// open it (profiler.step -> _record_function_enter_new), outlives them,
// and ends inside the next call's frames. Host events that cross keep
// their times; clipping the scope to the frames made every step of this
// CPU-only VAE run 73 us long in the replay and each step's time the step
// before's (replay error: median 99.9%).
TEST(CausalReplay, AStepOpenedInsidePythonFramesKeepsItsWork) {
  auto t = read_trace(data("public/dtu_mlops/vae_profile_train.pt.trace.json.gz"));
  ASSERT_TRUE(t.has_value());
  auto r = analyze_causal(*t, {.paths = false});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->steps.size(), 3u);
  EXPECT_EQ(r->steps[0].measured_ns, 128'742'700);
  for (const StepTime& s : r->steps) EXPECT_EQ(s.replayed_ns, s.measured_ns) << s.step;
  // The first __next__ starts the DataLoader's workers outside the
  // enumerate(DataLoader) scope, in torch/utils/data's frames: data loading.
  auto p = analyze_causal(*t);
  ASSERT_TRUE(p.has_value());
  const CriticalPath& first = p->steps[0].path;
  EXPECT_GT(first.bound_ns[static_cast<int>(BoundType::kDataLoading)], first.length_ns() / 2);
}

// A step that begins 62 ns before the previous one ends (the generated
// ranks' microsecond timestamps) crosses it: neither loses its time.
TEST(CausalReplay, StepsThatOverlapByARoundingKeepTheirTimes) {
  const Trace t = parse(cpu("user_annotation", "ProfilerStep#1", 0, 100.062) + "," +
                        cpu("cpu_op", "aten::mm", 10, 80) + "," +
                        cpu("user_annotation", "ProfilerStep#2", 100, 50) + "," +
                        cpu("cpu_op", "aten::add", 110, 30));
  auto r = analyze_causal(t, {.paths = false});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->steps.size(), 2u);
  EXPECT_EQ(r->steps[0].replayed_ns, 100'062);
  EXPECT_EQ(r->steps[1].replayed_ns, 49'938);
  for (const StepTime& s : r->steps) EXPECT_EQ(s.replayed_ns, s.measured_ns) << s.step;
}

}  // namespace
}  // namespace tprof
