// tprof/causal.h — the causal model of a trace: its dependency graph, the
// critical path, a replay that re-times every event from the trace's own
// durations and dependencies, and what-if edits replayed the same way.
//
//   tprof::Result<tprof::CausalResult> r = tprof::analyze_causal(trace);
//   for (const tprof::StepTime& s : r->steps)
//     std::printf("step %lld: %lld ns measured, %lld ns replayed\n", s.step, s.measured_ns, s.replayed_ns);
//
//   auto edit = tprof::parse_whatif_edit("remove:op::add");
//   r = tprof::analyze_causal(trace, {.edits = {*edit}});  // s.predicted_ns: the step without the add
//
// docs/critical-path.md has the graph, its edges, the replay and its error,
// and the edits.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tprof/status.h"
#include "tprof/trace.h"

namespace tprof {

// Why one node of the graph cannot happen before another.
enum class EdgeType : std::uint8_t {
  kHost = 0,    // program order on a CPU thread inside a recorded event: host work
  kHostGap,     // program order between recorded events: the thread did unrecorded
                // work or waited for something the trace does not show (cause unknown)
  kLaunch,      // a launch call → the device activity it launched starts (correlation): from
                // the call's end when the activity started after the call returned, else
                // from its begin
  kStream,      // the previous activity on the stream ends → the next one starts (FIFO)
  kDevice,      // a device activity runs: its start → its end
  kSync,        // a device activity ends → the call that waited for it returns
                // (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize,
                // a blocking cudaMemcpy, a launch on a full queue; hip* alike)
  kStreamWait,  // cudaStreamWaitEvent: the activity recorded by the matching
                // cudaEventRecord ends → the waiting stream's next activity starts
  kThread,      // one CPU thread hands work to another and waits for it without an
                // event (loss.backward(): the autograd engine's thread runs the
                // backward ops): the waiting thread's point → the worker's first
                // event, and the worker's last event ends → the waiting thread's next point
  kCount_,
};
// "host", "host_gap", "launch", "stream", "device", "sync", "stream_wait", "thread".
std::string_view edge_type_name(EdgeType type);

// HolisticTraceAnalysis' bound types: what the time on the critical path is.
enum class BoundType : std::uint8_t {
  kCpu = 0,               // host work (and host time the trace cannot explain)
  kGpuCompute,            // kernels, copies, memsets
  kGpuCommunication,      // NCCL / RCCL kernels
  kKernelLaunchOverhead,  // a launch call whose kernel the path goes on to, and from the
                          // call to the kernel's start (HTA's launch edge, call start → kernel)
  kKernelKernelOverhead,  // one kernel ended → the next on its stream started (also
                          // across streams through events, and a sync's return)
  kDataLoading,           // host work inside a DataLoader scope
  kCount_,
};
// HTA's names: "cpu_bound", "gpu_compute_bound", "gpu_communication_bound",
// "kernel_launch_overhead", "kernel_kernel_overhead", "data_loading".
std::string_view bound_type_name(BoundType type);

struct CausalEdge {
  std::uint32_t from = 0;  // node
  std::uint32_t to = 0;    // node
  std::int64_t measured_ns = 0;  // time(to) − time(from) in the trace (≥ 0)
  // The delay the replay applies: measured_ns for the binding edge (the one
  // whose source happened last, which set `to`'s time), and for the others
  // min(measured_ns, the floor of their type): the delay they would impose
  // were they the last to be satisfied (docs/critical-path.md, "Weights").
  std::int64_t weight_ns = 0;
  // Whose time the edge is: the innermost host event of a host slice
  // (kNoIndex for a gap), the device activity of device, launch, stream and
  // stream-wait edges, the waiting call of a sync edge, the waiting
  // thread's innermost open event of a thread edge (kNoIndex in a gap).
  std::uint32_t event = kNoIndex;
  // The other end's event where it says more: the launch call of a launch
  // edge, the activity waited for of a sync or stream-wait edge, the
  // worker's first (hand-over) or last (return) event of a thread edge.
  std::uint32_t cause_event = kNoIndex;
  EdgeType type = EdgeType::kHost;
  bool binding = false;
};

// Nodes: node 2a is the begin of activity a, node 2a + 1 its end. An
// activity is a host event (op, annotation, Python function, runtime or
// driver call: complete events on CPU lanes) or a device activity (kernel,
// copy, memset on a GPU lane). Edges are grouped by their `to` node.
class CausalGraph {
 public:
  std::vector<std::uint32_t> events;      // activity → trace event
  std::vector<std::uint32_t> parent;      // activity → the host activity enclosing it, or kNoIndex
  std::vector<std::uint32_t> launch;      // device activity → the activity that launched it, or kNoIndex
  std::vector<std::uint8_t> is_device;    // activity → 1 for device activities
  std::vector<std::uint8_t> launches_work;  // activity → 1 for a call that launched device work
  std::vector<std::int64_t> time_ns;      // node → measured time (a device activity that starts before the one before it on its stream ends starts at that end)
  std::vector<CausalEdge> edges;          // by `to`
  std::vector<std::uint32_t> in_begin;    // edges[in_begin[v], in_begin[v + 1]) end at node v
  std::vector<std::uint32_t> topo;        // every node, in an order where each edge goes forward
  std::vector<std::uint32_t> activity_of_event;  // trace event → activity, or kNoIndex
  std::array<std::uint64_t, static_cast<int>(EdgeType::kCount_)> edges_by_type{};
  // Dependencies the trace names but whose source happened after their
  // target (clock skew between host and device): left out, counted.
  std::uint64_t skipped_edges = 0;
  // The floors of non-binding edges (docs/critical-path.md): the median
  // delay of the binding launch, stream and sync edges of this trace.
  std::int64_t launch_latency_ns = 0;
  std::int64_t stream_gap_ns = 0;
  std::int64_t sync_return_ns = 0;

  std::size_t activities() const { return events.size(); }
  std::size_t nodes() const { return time_ns.size(); }
  static std::uint32_t begin_node(std::uint32_t activity) { return 2 * activity; }
  static std::uint32_t end_node(std::uint32_t activity) { return 2 * activity + 1; }
  static std::uint32_t activity_of(std::uint32_t node) { return node >> 1; }
  static bool is_end(std::uint32_t node) { return (node & 1) != 0; }
  std::uint32_t event_of(std::uint32_t node) const { return events[node >> 1]; }
};

// Builds the graph of a trace: linear in its events (plus a sort per lane).
CausalGraph build_causal_graph(const Trace& trace);

// A what-if edit (docs/critical-path.md, "Edits"). PATTERN is an event name
// (exact), else an ECMAScript regular expression searched in names; for
// scale, also a kernel class: gemm, elementwise, communication.
struct WhatIfEdit {
  enum class Kind : std::uint8_t {
    kRemove,    // remove:PATTERN — the matching events with their children, launches and device work
    kScale,     // scale:PATTERN=F — multiply the matching kernels' or ops' durations by F
    kGraph,     // graph — each step replayed as one CUDA graph launch
    kDropSync,  // drop-sync:PATTERN — matching synchronising calls no longer wait
    kOverlap,   // overlap:PATTERN — matching host work runs off the thread (its device work stays)
    kRelease,   // release — launched work starts as soon as its launch and its stream allow (no device hold)
  };
  Kind kind = Kind::kRemove;
  std::string pattern;
  double factor = 1.0;
  std::string text;  // as written
};
// "remove:aten::add", "scale:gemm=0.5", "graph", "drop-sync:cudaStreamSynchronize",
// "overlap:DataLoader", "release". Errors (kInvalidArgument) name what was expected.
Result<WhatIfEdit> parse_whatif_edit(std::string_view text);

// One stretch of the critical path: an edge, on the replayed (or predicted)
// timeline, clipped to the window it is reported for.
struct PathSegment {
  std::uint32_t edge = 0;  // index into CausalGraph::edges
  EdgeType type = EdgeType::kHost;
  BoundType bound = BoundType::kCpu;
  std::uint32_t event = kNoIndex;  // CausalEdge::event
  std::int64_t start_ns = 0;
  std::int64_t dur_ns = 0;
};

struct CriticalPath {
  std::int64_t start_ns = 0;  // the window, on the replayed timeline
  std::int64_t end_ns = 0;
  std::array<std::int64_t, static_cast<int>(BoundType::kCount_)> bound_ns{};
  // Window time before the path's first node: that node has no known
  // predecessor (the first event of a thread, work queued before the trace).
  std::int64_t unexplained_ns = 0;
  // measured_critical_paths only: launch and stream edges' delay beyond
  // kUnrecordedWaitNs over the trace's median for their type, left out of
  // bound_ns (the kernel started long after its launch and its stream's
  // previous kernel: it waited for something the trace does not record).
  std::int64_t unrecorded_wait_ns = 0;
  std::vector<PathSegment> segments;  // oldest first
  std::int64_t length_ns() const { return end_ns - start_ns; }
};

// A step: ProfilerStep#N, ending at the later of its host end and the end
// of the device work launched during it; its time runs from the previous
// step's end (the first step: from its own start).
struct StepTime {
  std::int64_t step = -1;           // N; -1 for the whole window of a trace without steps
  std::uint32_t event = kNoIndex;   // the ProfilerStep event
  std::int64_t measured_ns = 0;
  std::int64_t replayed_ns = 0;     // the graph replayed without edits
  std::int64_t predicted_ns = 0;    // replayed with the edits (= replayed_ns without)
  std::int64_t measured_end_ns = 0; // absolute
  std::int64_t replayed_end_ns = 0;
  std::int64_t predicted_end_ns = 0;
  CriticalPath path;                // on the predicted timeline
};

struct CausalOptions {
  std::vector<WhatIfEdit> edits;
  bool paths = true;         // compute a critical path per step
  bool window_path = false;  // and one over the whole window
};

struct CausalResult {
  std::shared_ptr<const CausalGraph> graph;
  bool has_steps = false;
  std::vector<StepTime> steps;  // by start; one window step without ProfilerSteps
  CriticalPath window;          // when options.window_path
  std::vector<std::uint64_t> matched;  // per edit: the events it changed
  std::int64_t measured_ns = 0;  // sums over the steps
  std::int64_t replayed_ns = 0;
  std::int64_t predicted_ns = 0;
  // Per node, the predicted times and the edge that set each (kNoIndex: anchored).
  std::vector<std::int64_t> predicted_time_ns;
  std::vector<std::uint32_t> via;
};

// Builds the graph, replays it with and without `options.edits`, and
// measures every step. Fails (kInvalidArgument) on an edit that matches
// nothing it can change.
Result<CausalResult> analyze_causal(const Trace& trace, const CausalOptions& options = {});
// The same over a graph already built from `trace`.
Result<CausalResult> analyze_causal(const Trace& trace, std::shared_ptr<const CausalGraph> graph,
                                    const CausalOptions& options = {});

// The critical path of the `instance`-th (0-based, by start) host event
// named `name` (a user annotation such as "## forward ##", or any op): its
// window runs from its begin to the later of its end and the end of the
// device work launched inside it, on the predicted timeline of `r`.
// kInvalidArgument when there is no such instance.
Result<CriticalPath> annotation_critical_path(const Trace& trace, const CausalResult& r, std::string_view name,
                                              std::size_t instance);

// The critical path into a node on the measured timeline: back from
// `node` through each node's binding edge (the dependency satisfied last)
// to `start_ns`, clipped there, with the bound types a step's path has. A
// job's rank summaries split each rank's stretch before a collective by it
// (docs/scale.md, "Critical path across ranks").
struct PathQuery {
  std::uint32_t node = 0;
  std::int64_t start_ns = 0;
};
// A launch or stream edge whose delay exceeds the trace's median binding
// delay of its type (CausalGraph::launch_latency_ns, stream_gap_ns) by more
// than this is a wait the trace does not record (a cross-stream event wait
// left out, a device full of other streams' work): the excess is
// CriticalPath::unrecorded_wait_ns, not launch or kernel-to-kernel overhead.
inline constexpr std::int64_t kUnrecordedWaitNs = 100'000;
// One path per query, in order; linear in the paths' lengths after one
// pass over the graph's activities.
std::vector<CriticalPath> measured_critical_paths(const Trace& trace, const CausalGraph& graph,
                                                  const std::vector<PathQuery>& into);

// The events `paths` (computed on `graph`) mark critical, by event index
// (of `events`, the trace's event count): both ends of each segment's edge
// and the event whose time the segment is.
std::vector<std::uint8_t> critical_events(const CausalGraph& graph, const std::vector<const CriticalPath*>& paths,
                                          std::size_t events);

// Marks `paths` (computed on `graph`, which was built from `trace`) in
// `trace`, as HolisticTraceAnalysis' overlay_critical_path_analysis does:
// "critical": 1 in the args of every critical_events() event, and a
// "critical_path" flow (s → f, "bp": "e" on f; args weight, critical, type)
// along each edge of a path that joins two events.
void overlay_critical_path(Trace* trace, const CausalGraph& graph, const std::vector<const CriticalPath*>& paths);

}  // namespace tprof
