// Replay of the causal graph, what-if edits, steps and critical paths
// (docs/critical-path.md, "Replay", "Edits", "The critical path").
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <tuple>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/base/saturate.h"
#include "src/causal/names.h"
#include "tprof/causal.h"
#include "tprof/step_events.h"

namespace tprof {
namespace {

namespace causal = internal::causal;

// Device gaps between the kernels of one CUDA graph: about a microsecond on
// Hopper (docs/critical-path.md, "graph").
constexpr std::int64_t kGraphKernelGapNs = 1000;

// Per edge: the weight the replay applies, and whether it is left out.
struct EditedWeights {
  std::vector<std::int64_t> w;
  std::vector<std::uint8_t> dead;
  std::vector<std::uint8_t> removed;  // per activity: removed device work leaves the step's end
};

class Matcher {
 public:
  static constexpr std::size_t kMaxRegexName = 4096;
  static Result<Matcher> make(const std::string& pattern) {
    Matcher m;
    m.pattern_ = pattern;
    // std::regex compiles and matches recursively: a pattern longer than
    // kMaxRegexName is taken as a name only.
    if (pattern.size() > kMaxRegexName) {
      m.literal_only_ = true;
      return m;
    }
    try {
      m.re_ = std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      m.literal_only_ = true;
    }
    return m;
  }
  bool operator()(const Trace& t, std::uint32_t e) const {
    const StrId id = t.events.name[e];
    auto it = cache_.find(id);
    if (it != cache_.end()) return it->second;
    const std::string_view name = t.str(id);
    bool hit = name == pattern_;
    // std::regex recurses per character: a name longer than kMaxRegexName
    // (a hostile trace's) is matched exactly only, never searched.
    if (!hit && !literal_only_ && name.size() <= kMaxRegexName) hit = std::regex_search(name.begin(), name.end(), re_);
    cache_.emplace(id, hit);
    return hit;
  }
  // Exact matches only (a name that is also a longer name's prefix, such as
  // aten::add in aten::addmm, matches itself alone when some event has
  // exactly that name).
  void set_exact(bool exact) { literal_only_ = literal_only_ || exact; }

 private:
  std::string pattern_;
  std::regex re_;
  bool literal_only_ = false;
  mutable std::unordered_map<StrId, bool> cache_;
};

class Analysis {
 public:
  Analysis(const Trace& t, const CausalGraph& g) : t_(t), g_(g) {
    // Host activities inside a DataLoader scope or a Python frame of
    // torch.utils.data (with_stack: the first __next__ starting the
    // workers runs outside the enumerate(DataLoader) scope): one pass,
    // parents first.
    in_dataloader_.assign(g.activities(), 0);
    std::unordered_map<StrId, bool> named;
    for (std::uint32_t a = 0; a < g.activities(); ++a) {
      if (g.is_device[a]) continue;
      const StrId id = t.events.name[g.events[a]];
      auto it = named.find(id);
      if (it == named.end()) {
        const std::string_view n = t.str(id);
        const bool frame = t.events.kind[g.events[a]] == EventKind::kPythonFunction &&
                           n.find("torch/utils/data/") != std::string_view::npos;
        it = named.emplace(id, frame || causal::is_dataloader(n)).first;
      }
      in_dataloader_[a] = it->second || (g.parent[a] != kNoIndex && in_dataloader_[g.parent[a]]);
    }
  }

  void replay(const EditedWeights* edit, std::vector<std::int64_t>* out, std::vector<std::uint32_t>* via) const {
    const std::size_t nn = g_.nodes();
    out->assign(nn, INT64_MIN);
    via->assign(nn, kNoIndex);
    for (std::uint32_t v : g_.topo) {
      std::int64_t best = INT64_MIN;
      std::uint32_t bi = kNoIndex;
      for (std::uint32_t i = g_.in_begin[v]; i < g_.in_begin[v + 1]; ++i) {
        if (edit != nullptr && edit->dead[i]) continue;
        const std::int64_t tu = (*out)[g_.edges[i].from];
        if (tu == INT64_MIN) continue;  // an edge that closes a cycle
        const std::int64_t x = internal::sat_add(tu, edit != nullptr ? edit->w[i] : g_.edges[i].weight_ns);
        if (x > best || (x == best && g_.edges[i].binding)) {
          best = x;
          bi = i;
        }
      }
      (*out)[v] = bi == kNoIndex ? g_.time_ns[v] : best;
      (*via)[v] = bi;
    }
  }

  // Steps: find_step_events' (ProfilerStep#N, or the trace's step range),
  // by start; each with the device work launched during it.
  void find_steps() {
    is_step_.assign(g_.activities(), 0);
    const StepEvents found = find_step_events(t_);  // by start
    for (std::size_t i = 0; i < found.events.size(); ++i) {
      const std::uint32_t e = found.events[i];
      const std::uint32_t a = e < g_.activity_of_event.size() ? g_.activity_of_event[e] : kNoIndex;
      if (a == kNoIndex || g_.is_device[a]) continue;
      steps_.push_back(a);
      step_numbers_.push_back(found.numbers[i]);
      is_step_[a] = 1;
    }
    step_of_device_.assign(g_.activities(), -1);
    if (steps_.empty()) return;
    std::vector<std::int64_t> starts;
    for (std::uint32_t s : steps_) starts.push_back(g_.time_ns[2 * s]);
    for (std::uint32_t d = 0; d < g_.activities(); ++d) {
      if (!g_.is_device[d] || g_.launch[d] == kNoIndex) continue;
      const std::int64_t at = g_.time_ns[2 * g_.launch[d]];
      auto it = std::upper_bound(starts.begin(), starts.end(), at);
      if (it == starts.begin()) continue;
      const std::size_t i = static_cast<std::size_t>(it - starts.begin()) - 1;
      if (at < t_.events.ts_ns[g_.events[steps_[i]]] + t_.events.dur_ns[g_.events[steps_[i]]])
        step_of_device_[d] = static_cast<std::int32_t>(i);
    }
  }

  // Each step's end on a timeline (node times `t`; `measured`: the trace's
  // own event times), and the node that sets it.
  std::vector<std::pair<std::int64_t, std::uint32_t>> step_ends(const std::vector<std::int64_t>& t, bool measured,
                                                                const EditedWeights* edit) const {
    std::vector<std::pair<std::int64_t, std::uint32_t>> ends;
    for (std::uint32_t s : steps_) {
      const std::uint32_t e = g_.events[s];
      const std::int64_t host = measured ? t_.events.ts_ns[e] + t_.events.dur_ns[e] : t[2 * s + 1];
      ends.emplace_back(host, 2 * s + 1);
    }
    for (std::uint32_t d = 0; d < g_.activities(); ++d) {
      const std::int32_t i = step_of_device_[d];
      if (i < 0 || (edit != nullptr && edit->removed[d])) continue;
      const std::uint32_t e = g_.events[d];
      const std::int64_t x = measured ? t_.events.ts_ns[e] + t_.events.dur_ns[e] : t[2 * d + 1];
      auto& cur = ends[static_cast<std::size_t>(i)];
      if (x > cur.first) cur = {x, 2 * d + 1};
    }
    return ends;
  }

  Result<EditedWeights> apply(const std::vector<WhatIfEdit>& edits, std::vector<std::uint64_t>* matched) const {
    EditedWeights ew;
    const std::size_t ne = g_.edges.size(), na = g_.activities();
    ew.w.resize(ne);
    for (std::size_t i = 0; i < ne; ++i) ew.w[i] = g_.edges[i].weight_ns;
    ew.dead.assign(ne, 0);
    ew.removed.assign(na, 0);
    for (const WhatIfEdit& edit : edits) {
      std::uint64_t count = 0;
      if (edit.kind == WhatIfEdit::Kind::kGraph) {
        count = apply_graph(&ew);
      } else if (edit.kind == WhatIfEdit::Kind::kRelease) {
        count = apply_release(&ew);
      } else {
        auto m = Matcher::make(edit.pattern);
        if (!m) return m.error();
        // A pattern that is some event's exact name stands for that name.
        bool exact = false;
        for (std::uint32_t a = 0; a < na && !exact; ++a) exact = t_.name(g_.events[a]) == edit.pattern;
        m->set_exact(exact);
        count = apply_matching(edit, *m, &ew);
      }
      if (count == 0 && edit.kind == WhatIfEdit::Kind::kRelease) {
        return Error(ErrorCode::kInvalidArgument, "--edit release: matches no event it can change (no device work in "
                                                  "this trace starts later than the typical delay after its launch "
                                                  "or the work before it on its stream)");
      }
      if (count == 0) {
        return Error(ErrorCode::kInvalidArgument,
                     "--edit " + edit.text + ": matches no event it can change (expected an event name, a regular "
                     "expression found in names" + std::string(edit.kind == WhatIfEdit::Kind::kScale
                                                                  ? ", or gemm, elementwise, communication)"
                                                                  : ")"));
      }
      matched->push_back(count);
    }
    return ew;
  }

 private:
  bool kernel_class_match(const WhatIfEdit& edit, std::uint32_t e) const {
    if (edit.kind != WhatIfEdit::Kind::kScale || t_.events.kind[e] != EventKind::kKernel) return false;
    const std::string_view n = t_.name(e);
    // By the kernel's own name in the kernel-class table (no launching op:
    // the graph's edits name kernels, not ops).
    using internal::KernelClass;
    const KernelClass cls = internal::match_kernel_name(n).cls;
    if (edit.pattern == "gemm") return cls == KernelClass::kGemm;
    if (edit.pattern == "elementwise") return cls == KernelClass::kElementwise;
    if (edit.pattern == "communication") return cls == KernelClass::kComm;
    return false;
  }

  std::uint64_t apply_matching(const WhatIfEdit& edit, const Matcher& match, EditedWeights* ew) const {
    const std::size_t na = g_.activities();
    // Matched activities and, for host events, everything nested in them
    // (parents come before their children in activity order).
    std::vector<std::uint8_t> hit(na, 0);
    std::uint64_t count = 0;
    const bool with_children = edit.kind != WhatIfEdit::Kind::kDropSync;
    for (std::uint32_t a = 0; a < na; ++a) {
      const std::uint32_t e = g_.events[a];
      bool h = match(t_, e) || kernel_class_match(edit, e);
      if (edit.kind == WhatIfEdit::Kind::kDropSync && h) h = !g_.is_device[a];
      if (h) ++count;
      if (!h && with_children && !g_.is_device[a] && g_.parent[a] != kNoIndex) h = hit[g_.parent[a]] != 0;
      hit[a] = h ? 1 : 0;
    }
    if (edit.kind == WhatIfEdit::Kind::kRemove) {
      // Device work launched from removed host events goes too.
      for (std::uint32_t d = 0; d < na; ++d)
        if (g_.is_device[d] && g_.launch[d] != kNoIndex && hit[g_.launch[d]]) hit[d] = 1;
    }
    std::uint64_t changed = 0;
    for (std::size_t i = 0; i < g_.edges.size(); ++i) {
      const CausalEdge& c = g_.edges[i];
      const std::uint32_t to_act = CausalGraph::activity_of(c.to);
      const std::uint32_t owner = c.event == kNoIndex ? kNoIndex : g_.activity_of_event[c.event];
      switch (edit.kind) {
        case WhatIfEdit::Kind::kRemove:
          if (c.type == EdgeType::kHost && owner != kNoIndex && hit[owner]) ew->w[i] = 0, ++changed;
          if (g_.is_device[to_act] && hit[to_act]) {
            if (c.type == EdgeType::kDevice || c.type == EdgeType::kStream || c.type == EdgeType::kLaunch)
              ew->w[i] = 0, ++changed;
            if (c.type == EdgeType::kStreamWait) ew->dead[i] = 1;
          }
          if (c.type == EdgeType::kSync && !g_.is_device[to_act] && hit[to_act]) ew->dead[i] = 1;
          break;
        case WhatIfEdit::Kind::kOverlap:
          if (c.type == EdgeType::kHost && owner != kNoIndex && hit[owner]) ew->w[i] = 0, ++changed;
          if (c.type == EdgeType::kSync && hit[to_act]) ew->dead[i] = 1;
          break;
        case WhatIfEdit::Kind::kScale:
          if ((c.type == EdgeType::kHost && owner != kNoIndex && hit[owner]) ||
              (c.type == EdgeType::kDevice && hit[to_act])) {
            // Clamped: a factor of 1e300 must not overflow (instants stay within ±2^62).
            const double v = std::min(static_cast<double>(ew->w[i]) * edit.factor, 0x1p62);
            ew->w[i] = static_cast<std::int64_t>(std::llround(v));
            ++changed;
          }
          break;
        case WhatIfEdit::Kind::kDropSync:
          if (c.type == EdgeType::kSync && hit[to_act]) ew->dead[i] = 1, ++changed;
          break;
        case WhatIfEdit::Kind::kGraph:
        case WhatIfEdit::Kind::kRelease: break;
      }
    }
    if (edit.kind == WhatIfEdit::Kind::kRemove)
      for (std::uint32_t a = 0; a < na; ++a)
        if (hit[a]) ew->removed[a] = 1;
    return changed == 0 ? 0 : count;
  }

  // Launched work held on the device (a stall with nothing in the trace
  // ahead of it: another process time-slicing the GPU, its clocks): each
  // device activity starts the trace's typical delay after its launch or
  // after the work before it on its stream, whichever is later. Returns
  // the edges shortened.
  std::uint64_t apply_release(EditedWeights* ew) const {
    std::uint64_t count = 0;
    for (std::size_t i = 0; i < g_.edges.size(); ++i) {
      const CausalEdge& c = g_.edges[i];
      std::int64_t floor = -1;
      if (c.type == EdgeType::kLaunch) floor = g_.launch_latency_ns;
      if (c.type == EdgeType::kStream) floor = g_.stream_gap_ns;
      if (floor < 0 || ew->w[i] <= floor) continue;
      ew->w[i] = floor;
      ++count;
    }
    return count;
  }

  // The host activities a CUDA graph cannot capture: a call that waited
  // for the device (a synchronize, a blocking copy, an Async copy to
  // pageable memory: the graph's sync edges; not a launch held on a full
  // queue, which a graph launch replaces), the ops it runs inside up to the
  // first that is not an op (a Python frame or annotation around many ops
  // keeps the rest capturable), and every launch inside those ops (issue
  // 38's twenty-second round: GPUPuzzlers' per-element .cpu() loop, 4,096
  // read-backs each a copy and a stream sync, counted into a 179 ms graph
  // saving a capture could never make; its graphable add_ loop is 86 ms).
  std::vector<std::uint8_t> uncapturable() const {
    const std::size_t na = g_.activities();
    std::vector<std::uint8_t> eager(na, 0);
    for (const CausalEdge& c : g_.edges) {
      if (c.type != EdgeType::kSync) continue;
      const std::uint32_t a = CausalGraph::activity_of(c.to);
      if (g_.is_device[a]) continue;
      const std::string_view n = t_.name(g_.events[a]);
      if (causal::sync_kind(n) == causal::SyncKind::kNone && n.find("Memcpy") == std::string_view::npos) continue;
      eager[a] = 1;
      for (std::uint32_t p = g_.parent[a]; p != kNoIndex && !eager[p]; p = g_.parent[p]) {
        if (is_step_[p] || t_.events.kind[g_.events[p]] != EventKind::kCpuOp) break;
        eager[p] = 1;
      }
    }
    // Parents come before their children: a launch inside an eager op is eager.
    for (std::uint32_t a = 0; a < na; ++a) {
      if (!g_.is_device[a] && !eager[a] && g_.parent[a] != kNoIndex && eager[g_.parent[a]] &&
          t_.events.kind[g_.events[a]] != EventKind::kPythonFunction) {
        eager[a] = 1;
      }
    }
    return eager;
  }

  // A scope whose host time a graph replay removes: an op (its dispatch and
  // launches), a Python frame (a graphed module's forward does not run),
  // and Inductor's compiled graph's call (its wrapper code, which a CUDA
  // graph tree replays without running). Not the record_function scopes
  // around them, which the caller still opens around each replay, nor
  // Dynamo's guard check and wrapper (Torch-Compiled Region), which still
  // run before it (issue 38's twenty-third round: the blog's 64x64
  // matmul_add credited its record_function scope's time, 42 us a step
  // where a graph removes about 30, and its compiled 1024 run the Dynamo
  // wrapper's).
  bool graphable_scope(std::uint32_t a) const {
    const std::uint32_t e = g_.events[a];
    const std::string_view n = t_.name(e);
    const EventKind k = t_.events.kind[e];
    if (k == EventKind::kCpuOp) return !n.starts_with("Torch-Compiled Region");
    if (k == EventKind::kPythonFunction) return true;
    return n.starts_with("## Call CompiledFxGraph");
  }

  // Each step (the window without steps) as one graph: the host work of the
  // launch calls and of the ops around them collapses into the first launch
  // call of the step (the graph launch); kernels follow it at the launch
  // latency, and each other at graph latency.
  std::uint64_t apply_graph(EditedWeights* ew) const {
    const std::size_t na = g_.activities();
    std::vector<std::uint8_t> graphed(na, 0), first(na, 0), dev_in(na, 0);
    // The earliest launch call of each step (the window without steps).
    std::vector<std::uint32_t> earliest(steps_.empty() ? 1 : steps_.size(), kNoIndex);
    std::uint64_t count = 0;
    const std::vector<std::uint8_t> eager = uncapturable();
    for (std::uint32_t d = 0; d < na; ++d) {
      if (!g_.is_device[d] || g_.launch[d] == kNoIndex) continue;
      const std::int32_t s = steps_.empty() ? 0 : step_of_device_[d];
      if (s < 0) continue;
      const std::uint32_t call = g_.launch[d];
      if (eager[call]) continue;
      dev_in[d] = 1;
      std::uint32_t& e = earliest[static_cast<std::size_t>(s)];
      if (e == kNoIndex || g_.time_ns[2 * call] < g_.time_ns[2 * e]) e = call;
      if (graphed[call]) continue;
      ++count;
      graphed[call] = 1;
      for (std::uint32_t p = g_.parent[call]; p != kNoIndex && !graphed[p]; p = g_.parent[p]) {
        if (is_step_[p] || !graphable_scope(p)) break;
        graphed[p] = 1;
      }
    }
    for (std::uint32_t e : earliest)
      if (e != kNoIndex) first[e] = 1;
    // The first launch call of each step is the graph launch: keep it.
    for (std::uint32_t a = 0; a < na; ++a)
      if (first[a]) graphed[a] = 0;
    for (std::size_t i = 0; i < g_.edges.size(); ++i) {
      const CausalEdge& c = g_.edges[i];
      const std::uint32_t to_act = CausalGraph::activity_of(c.to);
      const std::uint32_t owner = c.event == kNoIndex ? kNoIndex : g_.activity_of_event[c.event];
      if (c.type == EdgeType::kHost && owner != kNoIndex && graphed[owner]) ew->w[i] = 0;
      if (c.type == EdgeType::kLaunch && dev_in[to_act]) ew->w[i] = std::min(ew->w[i], g_.launch_latency_ns);
      if (c.type == EdgeType::kStream && dev_in[to_act] && dev_in[CausalGraph::activity_of(c.from)])
        ew->w[i] = std::min(ew->w[i], kGraphKernelGapNs);
    }
    return count;
  }

 public:
  BoundType bound_of(const CausalEdge& c) const {
    switch (c.type) {
      case EdgeType::kHost:
      case EdgeType::kHostGap:
      case EdgeType::kThread: {
        const std::uint32_t a = c.event == kNoIndex ? kNoIndex : g_.activity_of_event[c.event];
        return a != kNoIndex && in_dataloader_[a] ? BoundType::kDataLoading : BoundType::kCpu;
      }
      case EdgeType::kDevice:
        return internal::is_comm_kernel(t_.name(c.event)) ? BoundType::kGpuCommunication : BoundType::kGpuCompute;
      case EdgeType::kLaunch: return BoundType::kKernelLaunchOverhead;
      case EdgeType::kStream:
      case EdgeType::kStreamWait:
      case EdgeType::kSync: return BoundType::kKernelKernelOverhead;
      case EdgeType::kCount_: break;
    }
    return BoundType::kCpu;
  }

  // The critical path into `node`, back to `start` (clipped there).
  CriticalPath path(std::uint32_t node, std::int64_t start, const std::vector<std::int64_t>& t,
                    const std::vector<std::uint32_t>& via) const {
    CriticalPath p;
    p.start_ns = start;
    p.end_ns = std::max(t[node], start);  // a step that ends before it starts takes no time
    std::uint32_t v = node;
    // Edges of no time can only repeat a node on a cycle the replay left
    // out; one visit per node bounds the walk.
    for (std::size_t visits = 0; t[v] > start && visits < g_.nodes(); ++visits) {
      const std::uint32_t i = via[v];
      if (i == kNoIndex) {
        p.unexplained_ns = t[v] - start;
        break;
      }
      const CausalEdge& c = g_.edges[i];
      const std::int64_t s = std::max(t[c.from], start);
      if (t[v] > s) {
        PathSegment seg;
        seg.edge = i;
        seg.type = c.type;
        seg.bound = bound_of(c);
        seg.event = c.event;
        seg.start_ns = s;
        seg.dur_ns = t[v] - s;
        p.bound_ns[static_cast<int>(seg.bound)] += seg.dur_ns;
        p.segments.push_back(seg);
      }
      v = c.from;
    }
    std::reverse(p.segments.begin(), p.segments.end());
    // A launch call whose kernel the path goes on to is launch overhead, as
    // HTA's launch edge (from the call's start) counts it.
    for (std::size_t i = 0; i < p.segments.size(); ++i) {
      if (p.segments[i].type != EdgeType::kLaunch) continue;
      const std::uint32_t call = g_.edges[p.segments[i].edge].cause_event;
      for (std::size_t j = i; j-- > 0 && p.segments[j].type == EdgeType::kHost && p.segments[j].event == call;) {
        PathSegment& seg = p.segments[j];
        p.bound_ns[static_cast<int>(seg.bound)] -= seg.dur_ns;
        seg.bound = BoundType::kKernelLaunchOverhead;
        p.bound_ns[static_cast<int>(seg.bound)] += seg.dur_ns;
      }
    }
    return p;
  }

  const std::vector<std::uint32_t>& steps() const { return steps_; }
  const std::vector<std::int64_t>& step_numbers() const { return step_numbers_; }

 private:
  const Trace& t_;
  const CausalGraph& g_;
  std::vector<std::uint32_t> steps_;
  std::vector<std::int64_t> step_numbers_;  // per step: find_step_events' number
  std::vector<std::uint8_t> is_step_;       // per activity
  std::vector<std::int32_t> step_of_device_;
  std::vector<std::uint8_t> in_dataloader_;
};


}  // namespace

std::string_view edge_type_name(EdgeType type) {
  switch (type) {
    case EdgeType::kHost: return "host";
    case EdgeType::kHostGap: return "host_gap";
    case EdgeType::kLaunch: return "launch";
    case EdgeType::kStream: return "stream";
    case EdgeType::kDevice: return "device";
    case EdgeType::kSync: return "sync";
    case EdgeType::kStreamWait: return "stream_wait";
    case EdgeType::kThread: return "thread";
    case EdgeType::kCount_: break;
  }
  return "unknown";
}

std::string_view bound_type_name(BoundType type) {
  switch (type) {
    case BoundType::kCpu: return "cpu_bound";
    case BoundType::kGpuCompute: return "gpu_compute_bound";
    case BoundType::kGpuCommunication: return "gpu_communication_bound";
    case BoundType::kKernelLaunchOverhead: return "kernel_launch_overhead";
    case BoundType::kKernelKernelOverhead: return "kernel_kernel_overhead";
    case BoundType::kDataLoading: return "data_loading";
    case BoundType::kCount_: break;
  }
  return "unknown";
}

Result<WhatIfEdit> parse_whatif_edit(std::string_view text) {
  WhatIfEdit e;
  e.text = std::string(text);
  auto bad = [&](std::string what) {
    return Error(ErrorCode::kInvalidArgument, "--edit " + std::string(text) + ": " + what);
  };
  if (text == "graph") {
    e.kind = WhatIfEdit::Kind::kGraph;
    return e;
  }
  if (text == "release") {
    e.kind = WhatIfEdit::Kind::kRelease;
    return e;
  }
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos)
    return bad("expected remove:PATTERN, scale:PATTERN=F, graph, release, drop-sync:PATTERN or overlap:PATTERN");
  const std::string_view verb = text.substr(0, colon);
  std::string_view rest = text.substr(colon + 1);
  if (verb == "remove") {
    e.kind = WhatIfEdit::Kind::kRemove;
  } else if (verb == "scale") {
    e.kind = WhatIfEdit::Kind::kScale;
    const std::size_t eq = rest.rfind('=');
    if (eq == std::string_view::npos) return bad("expected scale:PATTERN=F (F a factor such as 0.5)");
    const std::string f(rest.substr(eq + 1));
    char* endp = nullptr;
    const double v = std::strtod(f.c_str(), &endp);
    if (f.empty() || endp != f.c_str() + f.size() || !std::isfinite(v) || v < 0)
      return bad("the factor after '=' must be a number ≥ 0, not \"" + f + "\"");
    e.factor = v;
    rest = rest.substr(0, eq);
  } else if (verb == "drop-sync") {
    e.kind = WhatIfEdit::Kind::kDropSync;
  } else if (verb == "overlap") {
    e.kind = WhatIfEdit::Kind::kOverlap;
  } else {
    return bad("unknown edit \"" + std::string(verb) + "\" (expected remove, scale, graph, release, drop-sync or overlap)");
  }
  if (rest.empty()) return bad("expected a PATTERN after ':' (an event name or a regular expression)");
  // A pattern that is not a valid regular expression ("foo(") still
  // matches a name exactly (analyze_causal's Matcher).
  e.pattern = std::string(rest);
  return e;
}

Result<CausalResult> analyze_causal(const Trace& trace, const CausalOptions& options) {
  return analyze_causal(trace, std::make_shared<const CausalGraph>(build_causal_graph(trace)), options);
}

Result<CausalResult> analyze_causal(const Trace& trace, std::shared_ptr<const CausalGraph> graph,
                                    const CausalOptions& options) {
  const CausalGraph& g = *graph;
  Analysis an(trace, g);
  an.find_steps();
  CausalResult r;
  r.graph = graph;
  std::vector<std::int64_t> replayed;
  std::vector<std::uint32_t> via0;
  an.replay(nullptr, &replayed, &via0);
  std::optional<EditedWeights> edited;
  if (!options.edits.empty()) {
    auto ew = an.apply(options.edits, &r.matched);
    if (!ew) return ew.error();
    edited = std::move(*ew);
    an.replay(&*edited, &r.predicted_time_ns, &r.via);
  } else {
    r.predicted_time_ns = replayed;
    r.via = via0;
  }
  const EditedWeights* ew = edited ? &*edited : nullptr;
  r.has_steps = !an.steps().empty();
  // Without steps the window is the program's work: the device activity
  // and the threads that launch it. A thread that launches nothing (a
  // notebook's heartbeat, a server's watchdog, running from the first
  // event to the last) would hold the window's end wherever edits move
  // the work (issue 38's eighth round: a Jupyter heartbeat pinned a BERT
  // forward's whole-trace replay at 20.5 ms, every edit saving 0).
  std::vector<std::uint8_t> in_window(g.activities(), 1);
  if (!r.has_steps) {
    std::vector<std::uint8_t> launching(trace.lanes.size(), 0);
    bool any = false;
    for (std::uint32_t d = 0; d < g.activities(); ++d) {
      if (!g.is_device[d] || g.launch[d] == kNoIndex) continue;
      launching[trace.events.lane[g.events[g.launch[d]]]] = 1;
      any = true;
    }
    if (any) {
      for (std::uint32_t a = 0; a < g.activities(); ++a)
        in_window[a] = g.is_device[a] || launching[trace.events.lane[g.events[a]]];
    }
  }
  if (r.has_steps) {
    auto m = an.step_ends(g.time_ns, true, nullptr);
    auto rp = an.step_ends(replayed, false, nullptr);
    auto pr = an.step_ends(r.predicted_time_ns, false, ew);
    // Ends never go back: a step that ends before the one before it (steps
    // that overlap, or nest) takes no time.
    const std::uint32_t s0 = an.steps().front();
    std::int64_t mp = trace.events.ts_ns[g.events[s0]], rpp = replayed[2 * s0], prp = r.predicted_time_ns[2 * s0];
    for (std::size_t i = 0; i < an.steps().size(); ++i) {
      const std::uint32_t s = an.steps()[i];
      StepTime st;
      st.event = g.events[s];
      st.step = an.step_numbers()[i];
      m[i].first = std::max(m[i].first, mp);
      rp[i].first = std::max(rp[i].first, rpp);
      pr[i].first = std::max(pr[i].first, prp);
      st.measured_ns = m[i].first - mp;
      st.replayed_ns = rp[i].first - rpp;
      st.predicted_ns = pr[i].first - prp;
      st.measured_end_ns = m[i].first;
      st.replayed_end_ns = rp[i].first;
      st.predicted_end_ns = pr[i].first;
      if (options.paths) st.path = an.path(pr[i].second, prp, r.predicted_time_ns, r.via);
      mp = m[i].first;
      rpp = rp[i].first;
      prp = pr[i].first;
      r.steps.push_back(std::move(st));
    }
  } else if (g.nodes() > 0) {
    // The whole window as one step: first node to last.
    auto span = [&](const std::vector<std::int64_t>& t, const EditedWeights* e) {
      std::int64_t lo = INT64_MAX, hi = INT64_MIN;
      std::uint32_t last = 0;
      for (std::uint32_t v = 0; v < t.size(); ++v) {
        if (!in_window[CausalGraph::activity_of(v)]) continue;
        if (e != nullptr && e->removed[CausalGraph::activity_of(v)]) continue;
        lo = std::min(lo, t[v]);
        if (t[v] > hi) hi = t[v], last = v;
      }
      return std::tuple(lo, hi, last);
    };
    StepTime st;
    const auto [m0, m1, ml] = span(g.time_ns, nullptr);
    const auto [r0, r1, rl] = span(replayed, nullptr);
    const auto [p0, p1, pl] = span(r.predicted_time_ns, ew);
    st.measured_ns = m1 - m0;
    st.replayed_ns = r1 - r0;
    st.predicted_ns = p1 - p0;
    st.measured_end_ns = m1;
    st.replayed_end_ns = r1;
    st.predicted_end_ns = p1;
    (void)ml;
    (void)rl;
    if (options.paths) st.path = an.path(pl, p0, r.predicted_time_ns, r.via);
    r.steps.push_back(std::move(st));
  }
  for (const StepTime& st : r.steps) {
    r.measured_ns = internal::sat_add(r.measured_ns, st.measured_ns);
    r.replayed_ns = internal::sat_add(r.replayed_ns, st.replayed_ns);
    r.predicted_ns = internal::sat_add(r.predicted_ns, st.predicted_ns);
  }
  if (options.window_path && g.nodes() > 0) {
    std::uint32_t last = kNoIndex;
    std::int64_t lo = INT64_MAX;
    for (std::uint32_t v = 0; v < g.nodes(); ++v) {
      if (!in_window[CausalGraph::activity_of(v)]) continue;
      if (ew != nullptr && ew->removed[CausalGraph::activity_of(v)]) continue;
      lo = std::min(lo, r.predicted_time_ns[v]);
      if (last == kNoIndex || r.predicted_time_ns[v] > r.predicted_time_ns[last]) last = v;
    }
    if (last == kNoIndex) last = 0;
    r.window = an.path(last, lo == INT64_MAX ? r.predicted_time_ns[0] : lo, r.predicted_time_ns, r.via);
  }
  return r;
}

}  // namespace tprof

namespace tprof {

Result<CriticalPath> annotation_critical_path(const Trace& trace, const CausalResult& r, std::string_view name,
                                              std::size_t instance) {
  const CausalGraph& g = *r.graph;
  std::vector<std::uint32_t> found;
  for (std::uint32_t a = 0; a < g.activities(); ++a)
    if (!g.is_device[a] && trace.name(g.events[a]) == name) found.push_back(a);
  // Stable: instances that begin together count in activity order (by lane).
  std::stable_sort(found.begin(), found.end(),
                   [&](std::uint32_t x, std::uint32_t y) { return g.time_ns[2 * x] < g.time_ns[2 * y]; });
  if (instance >= found.size()) {
    return Error(ErrorCode::kInvalidArgument,
                 "--annotation \"" + std::string(name) + "\" --instance " + std::to_string(instance) + ": the trace has " +
                     std::to_string(found.size()) + " host event(s) of that name (instances count from 0)");
  }
  const std::uint32_t a = found[instance];
  const std::vector<std::int64_t>& t = r.predicted_time_ns;
  const std::int64_t begin = g.time_ns[2 * a], end = g.time_ns[2 * a + 1];
  // The window's end: the annotation's end, or later device work launched inside it.
  std::uint32_t last = 2 * a + 1;
  for (std::uint32_t d = 0; d < g.activities(); ++d) {
    if (!g.is_device[d] || g.launch[d] == kNoIndex) continue;
    const std::int64_t at = g.time_ns[2 * g.launch[d]];
    if (at >= begin && at < end && t[2 * d + 1] > t[last]) last = 2 * d + 1;
  }
  Analysis an(trace, g);
  return an.path(last, t[2 * a], t, r.via);
}

std::vector<CriticalPath> measured_critical_paths(const Trace& trace, const CausalGraph& g,
                                                  const std::vector<PathQuery>& into) {
  std::vector<std::uint32_t> via(g.nodes(), kNoIndex);
  for (std::uint32_t i = 0; i < g.edges.size(); ++i)
    if (g.edges[i].binding) via[g.edges[i].to] = i;
  Analysis an(trace, g);
  std::vector<CriticalPath> out;
  out.reserve(into.size());
  for (const PathQuery& q : into) {
    if (q.node >= g.nodes()) {
      out.emplace_back();
      continue;
    }
    CriticalPath p = an.path(q.node, q.start_ns, g.time_ns, via);
    for (const PathSegment& seg : p.segments) {
      if (seg.type != EdgeType::kLaunch && seg.type != EdgeType::kStream) continue;
      const std::int64_t floor = seg.type == EdgeType::kLaunch ? g.launch_latency_ns : g.stream_gap_ns;
      const std::int64_t excess = seg.dur_ns - floor;
      if (excess <= kUnrecordedWaitNs) continue;
      p.bound_ns[static_cast<int>(seg.bound)] -= excess;
      p.unrecorded_wait_ns += excess;
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::uint8_t> critical_events(const CausalGraph& g, const std::vector<const CriticalPath*>& paths,
                                          std::size_t events) {
  std::vector<std::uint8_t> marked(events, 0);
  for (const CriticalPath* p : paths) {
    for (const PathSegment& seg : p->segments) {
      const CausalEdge& c = g.edges[seg.edge];
      marked[g.event_of(c.from)] = 1;
      marked[g.event_of(c.to)] = 1;
      if (seg.event != kNoIndex) marked[seg.event] = 1;
    }
  }
  return marked;
}

void overlay_critical_path(Trace* trace, const CausalGraph& g, const std::vector<const CriticalPath*>& paths) {
  EventColumns& ev = trace->events;
  const std::vector<std::uint8_t> critical = critical_events(g, paths, ev.size());
  struct Flow {
    std::uint32_t from_event, to_event;
    std::int64_t from_ts, to_ts, weight;
    EdgeType type;
  };
  std::vector<Flow> flows;
  for (const CriticalPath* p : paths) {
    for (const PathSegment& seg : p->segments) {
      const CausalEdge& c = g.edges[seg.edge];
      const std::uint32_t fe = g.event_of(c.from), te = g.event_of(c.to);
      // Each end at its event's start, which binds it to that slice in
      // Perfetto ("bp": "e" on the f end); the weight is in the args.
      if (fe != te) flows.push_back({fe, te, ev.ts_ns[fe], ev.ts_ns[te], seg.dur_ns, c.type});
    }
  }
  for (std::uint32_t e = 0; e < critical.size(); ++e) {
    if (!critical[e]) continue;
    const std::string_view args = trace->args_json(e);
    std::string out = "{\"critical\": 1";
    const std::size_t open = args.find('{');
    if (open != std::string_view::npos) {
      const std::string_view rest = args.substr(open + 1);
      const std::size_t body = rest.find_first_not_of(" \t\r\n");
      if (body != std::string_view::npos && rest[body] != '}') out += ", ";
      out += rest;
    } else {
      out += "}";
    }
    trace->set_args_json(e, out);
  }
  std::int64_t id = 0;
  for (std::size_t e = 0; e < ev.size(); ++e) id = std::max(id, ev.flow_id[e] + 1);
  const StrId name = trace->strings.intern("critical_path");
  const std::size_t base = ev.size();
  ev.resize(base + 2 * flows.size());
  for (std::size_t i = 0; i < flows.size(); ++i, ++id) {
    const Flow& f = flows[i];
    for (int k = 0; k < 2; ++k) {
      const std::size_t row = base + 2 * i + static_cast<std::size_t>(k);
      const std::uint32_t at = k == 0 ? f.from_event : f.to_event;
      ev.ts_ns[row] = k == 0 ? f.from_ts : f.to_ts;
      ev.dur_ns[row] = 0;
      ev.name[row] = name;
      ev.cat[row] = name;
      ev.lane[row] = ev.lane[at];
      ev.phase[row] = k == 0 ? Phase::kFlowStart : Phase::kFlowEnd;
      ev.kind[row] = EventKind::kFlow;
      ev.flags[row] = k == 0 ? 0 : kFlagBindEnclosing;
      ev.external_id[row] = -1;
      ev.correlation[row] = -1;
      ev.flow_id[row] = id;
      ev.args_ref[row] = 0;
      ev.src_offset[row] = 0;
      trace->set_args_json(static_cast<std::uint32_t>(row),
                           "{\"weight\": " + std::to_string(f.weight) + ", \"critical\": true, \"type\": \"" +
                               std::string(edge_type_name(f.type)) + "\"}");
    }
  }
}

}  // namespace tprof
