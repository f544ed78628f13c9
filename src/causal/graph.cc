// The dependency graph of a trace (docs/critical-path.md, "The graph").
//
// Host threads become chains of points (every begin and end of their
// events, nested by time); device streams become chains of start/end
// pairs; launches, synchronisations and cross-stream event waits join
// them. Every edge's weight is derived from the measured times so that the
// replay without edits gives back the trace (src/causal/replay.cc).
#include <algorithm>
#include <climits>
#include <map>
#include <numeric>
#include <queue>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "src/causal/names.h"
#include "src/trace/id_index.h"
#include "src/trace/json_value.h"
#include "tprof/causal.h"

namespace tprof {
namespace {

using internal::IdIndex;
namespace causal = internal::causal;

bool is_host_kind(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kPythonFunction ||
         k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver;
}

struct RawEdge {
  std::uint32_t from, to;
  std::uint32_t event, cause_event;
  EdgeType type;
};

// A stream's activities in start order, with the launch time of each (its
// launch call's begin; its own start when no launch is known) made
// monotone, so "launched before t" is a prefix.
struct Stream {
  std::int32_t device = -1;
  std::int64_t id = -1;
  std::vector<std::uint32_t> acts;
  std::vector<std::int64_t> launched_by;  // prefix max of launch times
};

class Builder {
 public:
  explicit Builder(const Trace& t) : t_(t) {}

  CausalGraph build() {
    collect();
    host_chains();
    thread_waits();
    device_chains();
    launches();
    syncs();
    finish();
    return std::move(g_);
  }

 private:
  std::int64_t ts(std::uint32_t e) const { return t_.events.ts_ns[e]; }
  std::int64_t end(std::uint32_t e) const { return t_.events.ts_ns[e] + t_.events.dur_ns[e]; }

  void add(std::uint32_t from, std::uint32_t to, EdgeType type, std::uint32_t event,
           std::uint32_t cause = kNoIndex) {
    if (g_.time_ns[from] > g_.time_ns[to]) {
      ++g_.skipped_edges;
      return;
    }
    raw_.push_back({from, to, event, cause, type});
  }

  void collect() {
    const EventColumns& ev = t_.events;
    const std::size_t n = ev.size();
    g_.activity_of_event.assign(n, kNoIndex);
    for (std::uint32_t e = 0; e < n; ++e) {
      if (ev.phase[e] != Phase::kComplete || ev.lane[e] >= t_.lanes.size()) continue;
      const LaneKind lk = t_.lanes[ev.lane[e]].kind;
      const EventKind k = ev.kind[e];
      if (lk == LaneKind::kCpu && is_host_kind(k)) {
        host_.push_back(e);
      } else if (lk == LaneKind::kGpu && is_device_work(k)) {
        device_.push_back(e);
      } else if (k == EventKind::kCudaSync) {
        sync_records_.push_back(e);
      }
    }
    // Activities: host events by (lane, ts, longer first), then device
    // events by (lane, ts): each lane's run is contiguous.
    auto by_lane = [&](std::uint32_t a, std::uint32_t b) {
      if (ev.lane[a] != ev.lane[b]) return ev.lane[a] < ev.lane[b];
      if (ev.ts_ns[a] != ev.ts_ns[b]) return ev.ts_ns[a] < ev.ts_ns[b];
      if (ev.dur_ns[a] != ev.dur_ns[b]) return ev.dur_ns[a] > ev.dur_ns[b];
      return a < b;
    };
    std::sort(host_.begin(), host_.end(), by_lane);
    std::sort(device_.begin(), device_.end(), by_lane);
    const std::size_t acts = host_.size() + device_.size();
    g_.events.reserve(acts);
    g_.events.insert(g_.events.end(), host_.begin(), host_.end());
    g_.events.insert(g_.events.end(), device_.begin(), device_.end());
    g_.parent.assign(acts, kNoIndex);
    g_.launch.assign(acts, kNoIndex);
    g_.is_device.assign(acts, 0);
    g_.launches_work.assign(acts, 0);
    std::fill(g_.is_device.begin() + static_cast<std::ptrdiff_t>(host_.size()), g_.is_device.end(), 1);
    g_.time_ns.assign(2 * acts, 0);
    for (std::uint32_t a = 0; a < acts; ++a) {
      g_.activity_of_event[g_.events[a]] = a;
      g_.time_ns[2 * a] = ts(g_.events[a]);
      g_.time_ns[2 * a + 1] = end(g_.events[a]);
    }
    raw_.reserve(3 * acts);
  }

  // Each CPU lane: its events' begins and ends in time order, one chain.
  // An event's parent (and the owner of the stretch up to each point) is
  // the innermost event open where it begins. Events may cross: one that
  // begins inside another and ends past it keeps both times, and each end
  // is placed where it happened. A RecordFunction scope opens inside the
  // Python frames that start it and outlives them (with_stack:
  // ProfilerStep#N begins in profiler.step() -> _record_function_enter_new
  // and ends inside the next step's call), and a step may begin 1 ns before
  // the previous one ends; clipping either to the other moved step ends
  // (issue 38: a CPU-only VAE run's steps replayed 73 us long, one step
  // late; the generated ranks' steps lost one in eight).
  void host_chains() {
    const EventColumns& ev = t_.events;
    const std::uint32_t nh = static_cast<std::uint32_t>(host_.size());
    // Open events by begin (the innermost last; closed ones leave lazily)
    // and by end (the first to end on top, the innermost of a tie): each
    // event enters and leaves each once, O(n log n) at any depth.
    std::vector<std::uint32_t> open;
    using Ending = std::pair<std::int64_t, std::uint32_t>;
    auto later = [](const Ending& x, const Ending& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; };
    std::priority_queue<Ending, std::vector<Ending>, decltype(later)> ends(later);
    std::vector<std::uint8_t> closed(nh, 0);
    std::uint32_t a = 0;
    while (a < nh) {
      const std::uint32_t lane = ev.lane[g_.events[a]];
      open.clear();
      std::uint32_t prev = kNoIndex;  // previous point (node)
      chains_.push_back({lane, static_cast<std::uint32_t>(points_.size()), 0});
      auto emit = [&](std::uint32_t node, std::uint32_t owner) {
        if (prev != kNoIndex) {
          add(prev, node, owner == kNoIndex ? EdgeType::kHostGap : EdgeType::kHost,
              owner == kNoIndex ? kNoIndex : g_.events[owner]);
        }
        prev = node;
        points_.push_back({node, owner});
      };
      // Ends every open event that ends at or before t, in time order.
      auto close_until = [&](std::int64_t t) {
        while (!ends.empty() && ends.top().first <= t) {
          const std::uint32_t e = ends.top().second;
          ends.pop();
          closed[e] = 1;
          emit(2 * e + 1, e);
        }
        while (!open.empty() && closed[open.back()]) open.pop_back();
      };
      for (; a < nh && ev.lane[g_.events[a]] == lane; ++a) {
        close_until(g_.time_ns[2 * a]);
        if (!open.empty()) g_.parent[a] = open.back();
        emit(2 * a, open.empty() ? kNoIndex : open.back());
        open.push_back(a);
        ends.emplace(g_.time_ns[2 * a + 1], a);
      }
      close_until(INT64_MAX);
      chains_.back().end = static_cast<std::uint32_t>(points_.size());
    }
  }

  // A thread that hands work to another and waits for it without an event:
  // loss.backward() runs the backward ops on the autograd engine's thread
  // (one per device) while the calling thread sits in one stretch of its
  // chain. The stretch [a, b] of a thread of the same process holds the
  // worker's top-level events from its first begin to its last end, at
  // least one an `autograd::engine::evaluate_function`; they cover at least
  // half the stretch, and the waiting thread goes on within a tenth of it
  // after the last one ends. Edges: a → the first's begin (the hand-over),
  // the last's end → b (the return). Where the waiting thread goes on later
  // (a stall after backward() returns) but the work began within a tenth
  // of the stretch after a, the hand-over alone: without it the worker's
  // idle gap since its previous burst held the burst in place, and an edit
  // before it (a DataLoader wait removed) moved nothing (issue 38's
  // thirteenth round: a T4 MLP's last step kept its 43.6 ms). Where several
  // threads' stretches hold the same work, the one that goes on soonest
  // after it waits.
  void thread_waits() {
    const EventColumns& ev = t_.events;
    constexpr std::string_view kEngine = "autograd::engine::evaluate_function";
    struct Wait {
      std::int64_t slack;    // b − the last end (a hand-over alone: its lead, the first's begin − a)
      std::uint32_t point;   // the waiting thread's stretch: points_[point] → points_[point + 1]
      std::uint32_t first, last;   // the worker's activities
      bool back;             // the return edge too
    };
    std::vector<Wait> waits;
    for (std::uint32_t w = 0; w < chains_.size(); ++w) {
      // The worker's top-level activities, in begin order (its chain's order).
      std::vector<std::uint32_t> tops;
      bool engine = false;
      for (std::uint32_t i = chains_[w].begin; i < chains_[w].end; ++i) {
        const std::uint32_t node = points_[i].node;
        const std::uint32_t act = CausalGraph::activity_of(node);
        if (CausalGraph::is_end(node) || g_.parent[act] != kNoIndex) continue;
        tops.push_back(act);
        engine = engine || t_.name(g_.events[act]).starts_with(kEngine);
      }
      if (!engine) continue;
      const Lane& wl = t_.lanes[chains_[w].lane];
      for (std::uint32_t c = 0; c < chains_.size(); ++c) {
        if (c == w || t_.lanes[chains_[c].lane].pid != wl.pid) continue;
        const Chain& ch = chains_[c];
        // Walk the worker's top-level events against the stretches of c.
        std::size_t i = 0;
        for (std::uint32_t p = ch.begin; p + 1 < ch.end && i < tops.size(); ++p) {
          const std::int64_t a = g_.time_ns[points_[p].node], b = g_.time_ns[points_[p + 1].node];
          while (i < tops.size() && g_.time_ns[2 * tops[i]] < a) ++i;
          std::uint32_t first = kNoIndex, last = kNoIndex;
          bool has_engine = false;
          for (; i < tops.size() && g_.time_ns[2 * tops[i]] < b; ++i) {
            const std::uint32_t x = tops[i];
            if (g_.time_ns[2 * x + 1] > b) break;
            if (first == kNoIndex) first = x;
            if (last == kNoIndex || g_.time_ns[2 * x + 1] > g_.time_ns[2 * last + 1]) last = x;
            has_engine = has_engine || t_.name(g_.events[x]).starts_with(kEngine);
          }
          if (!has_engine) continue;
          const std::int64_t span = b - a, busy = g_.time_ns[2 * last + 1] - g_.time_ns[2 * first];
          const std::int64_t slack = b - g_.time_ns[2 * last + 1], lead = g_.time_ns[2 * first] - a;
          if (span <= 0) continue;
          if (busy >= span - busy && slack <= span / 10) {
            waits.push_back({slack, p, first, last, true});
          } else if (lead <= span / 10) {
            waits.push_back({lead, p, first, last, false});
          }
        }
      }
    }
    std::sort(waits.begin(), waits.end(), [](const Wait& x, const Wait& y) {
      return x.back != y.back ? x.back : x.slack < y.slack;  // waits with a return first
    });
    struct Taken {
      std::uint32_t lane;
      std::int64_t lo, hi;
    };
    std::vector<Taken> taken;  // the worker's work already waited for
    for (const Wait& wt : waits) {
      const std::uint32_t lane = ev.lane[g_.events[wt.first]];
      const std::int64_t lo = g_.time_ns[2 * wt.first], hi = g_.time_ns[2 * wt.last + 1];
      if (std::any_of(taken.begin(), taken.end(),
                      [&](const Taken& r) { return r.lane == lane && lo < r.hi && r.lo < hi; }))
        continue;
      taken.push_back({lane, lo, hi});
      const Point& from = points_[wt.point];
      const Point& to = points_[wt.point + 1];
      const std::uint32_t owner = to.owner == kNoIndex ? kNoIndex : g_.events[to.owner];
      add(from.node, 2 * wt.first, EdgeType::kThread, owner, g_.events[wt.first]);
      if (wt.back) add(2 * wt.last + 1, to.node, EdgeType::kThread, owner, g_.events[wt.last]);
    }
  }

  // Each GPU lane (device, stream): FIFO order; an activity that starts
  // before the previous one ended is clipped to start at that end.
  void device_chains() {
    const EventColumns& ev = t_.events;
    const std::uint32_t nh = static_cast<std::uint32_t>(host_.size());
    const std::uint32_t na = static_cast<std::uint32_t>(g_.events.size());
    std::uint32_t a = nh;
    while (a < na) {
      const std::uint32_t lane = ev.lane[g_.events[a]];
      Stream s;
      s.device = t_.lanes[lane].device;
      s.id = t_.lanes[lane].stream;
      std::uint32_t prev = kNoIndex;
      for (; a < na && ev.lane[g_.events[a]] == lane; ++a) {
        if (prev != kNoIndex) {
          std::int64_t& t0 = g_.time_ns[2 * a];
          t0 = std::max(t0, g_.time_ns[2 * prev + 1]);
          g_.time_ns[2 * a + 1] = std::max(g_.time_ns[2 * a + 1], t0);
          add(2 * prev + 1, 2 * a, EdgeType::kStream, g_.events[a]);
        }
        add(2 * a, 2 * a + 1, EdgeType::kDevice, g_.events[a]);
        s.acts.push_back(a);
        prev = a;
      }
      streams_.push_back(std::move(s));
    }
  }

  // Launch edges by correlation id; each stream's launch times.
  void launches() {
    const EventColumns& ev = t_.events;
    std::vector<std::pair<std::int64_t, std::uint32_t>> calls;
    for (std::uint32_t a = 0; a < host_.size(); ++a) {
      const std::uint32_t e = g_.events[a];
      const EventKind k = ev.kind[e];
      if ((k == EventKind::kCudaRuntime || k == EventKind::kCudaDriver) && ev.correlation[e] >= 0) {
        calls.emplace_back(ev.correlation[e], a);
      }
    }
    call_by_corr_ = IdIndex(std::move(calls));
    for (Stream& s : streams_) {
      std::int64_t latest = INT64_MIN;
      for (std::uint32_t a : s.acts) {
        const std::uint32_t e = g_.events[a];
        std::int64_t at = g_.time_ns[2 * a];
        if (ev.correlation[e] >= 0) {
          const std::uint32_t call = call_by_corr_.find(ev.correlation[e]);
          if (call != kNoIndex) {
            g_.launch[a] = call;
            at = g_.time_ns[2 * call];
            // From the call's end when the work started after the call
            // returned (what it waited for last), else from its begin.
            const bool after_return = g_.time_ns[2 * a] >= g_.time_ns[2 * call + 1];
            add(after_return ? 2 * call + 1 : 2 * call, 2 * a, EdgeType::kLaunch, e, g_.events[call]);
            g_.launches_work[call] = 1;
          }
        }
        latest = std::max(latest, at);
        s.launched_by.push_back(latest);
      }
    }
    // Every device activity by launch time, with the one that ended last
    // among those launched so far (device-wide waits).
    {
      std::vector<std::pair<std::int64_t, std::uint32_t>> all;
      for (const Stream& st : streams_)
        for (std::size_t i = 0; i < st.acts.size(); ++i) all.emplace_back(st.launched_by[i], st.acts[i]);
      std::sort(all.begin(), all.end());
      std::uint32_t latest = kNoIndex;
      for (const auto& [at, act] : all) {
        if (latest == kNoIndex || g_.time_ns[2 * act + 1] > g_.time_ns[2 * latest + 1]) latest = act;
        all_launched_by_.push_back(at);
        all_latest_end_.push_back(latest);
      }
      for (std::size_t i = 0; i < streams_.size(); ++i)
        stream_index_.emplace(std::pair(streams_[i].device, streams_[i].id), i);
    }
    // What each call launched (CSR over activities, device activities in
    // stream order).
    launched_begin_.assign(g_.events.size() + 1, 0);
    for (std::uint32_t d = 0; d < g_.events.size(); ++d)
      if (g_.launch[d] != kNoIndex) ++launched_begin_[g_.launch[d] + 1];
    std::partial_sum(launched_begin_.begin(), launched_begin_.end(), launched_begin_.begin());
    launched_list_.resize(launched_begin_.back());
    std::vector<std::uint32_t> fill(launched_begin_.begin(), launched_begin_.end() - 1);
    for (std::uint32_t d = 0; d < g_.events.size(); ++d)
      if (g_.launch[d] != kNoIndex) launched_list_[fill[g_.launch[d]]++] = d;
  }

  std::span<const std::uint32_t> launched(std::uint32_t a) const {
    return {launched_list_.data() + launched_begin_[a], launched_list_.data() + launched_begin_[a + 1]};
  }

  // The last activity of stream s launched before time t, or kNoIndex.
  std::uint32_t last_launched_before(const Stream& s, std::int64_t t) const {
    auto it = std::lower_bound(s.launched_by.begin(), s.launched_by.end(), t);
    if (it == s.launched_by.begin()) return kNoIndex;
    return s.acts[static_cast<std::size_t>(it - s.launched_by.begin()) - 1];
  }
  // The first activity of stream s launched at or after t, or kNoIndex.
  std::uint32_t first_launched_after(const Stream& s, std::int64_t t) const {
    auto it = std::lower_bound(s.launched_by.begin(), s.launched_by.end(), t);
    return it == s.launched_by.end() ? kNoIndex : s.acts[static_cast<std::size_t>(it - s.launched_by.begin())];
  }
  const Stream* stream(std::int32_t device, std::int64_t id) const {
    if (device >= 0) {
      auto it = stream_index_.find({device, id});
      return it == stream_index_.end() ? nullptr : &streams_[it->second];
    }
    for (const auto& [key, i] : stream_index_)  // any device: the first stream with that id
      if (key.second == id) return &streams_[i];
    return nullptr;
  }

  // The sync edge of a waiting call: the activity launched before
  // `launched_before` on the candidate stream (any stream of any device
  // when stream_id < 0) that ended last; none when that one ended before
  // the call began (the call did not wait) or after it returned (it was not
  // what the call waited for: another stream, or skew).
  void wait_for(std::uint32_t call, std::int64_t launched_before, std::int32_t device, std::int64_t stream_id) {
    const std::int64_t t0 = g_.time_ns[2 * call], t1 = g_.time_ns[2 * call + 1];
    std::uint32_t best = kNoIndex;
    if (stream_id < 0) {
      auto it = std::lower_bound(all_launched_by_.begin(), all_launched_by_.end(), launched_before);
      if (it != all_launched_by_.begin()) best = all_latest_end_[static_cast<std::size_t>(it - all_launched_by_.begin()) - 1];
    } else if (const Stream* s = stream(device, stream_id)) {
      best = last_launched_before(*s, launched_before);
    }
    if (best == kNoIndex) return;
    const std::int64_t end = g_.time_ns[2 * best + 1];
    if (end <= t0 || end > t1) return;
    add(2 * best + 1, 2 * call + 1, EdgeType::kSync, g_.events[call], g_.events[best]);
  }

  std::int64_t sync_arg(const internal::JsonValue& args, std::string_view key) const {
    const internal::JsonValue* v = args.find(key);
    std::int64_t out = -1;
    return v != nullptr && v->is_number() && v->get_int(&out) ? out : -1;
  }

  void syncs() {
    const EventColumns& ev = t_.events;
    // torch 2.x's cuda_sync records say what each sync waited on.
    std::vector<std::uint8_t> described(g_.events.size(), 0);
    for (std::uint32_t r : sync_records_) {
      const std::int64_t corr = ev.correlation[r];
      const std::uint32_t call = corr >= 0 ? call_by_corr_.find(corr) : kNoIndex;
      if (call == kNoIndex) continue;
      auto args = internal::JsonValue::parse(t_.args_json(r));
      if (!args) continue;
      const internal::JsonValue* kind = args->find("cuda_sync_kind");
      const std::string_view k = kind != nullptr && kind->is_string() ? std::string_view(kind->text()) : "";
      const std::int32_t device = static_cast<std::int32_t>(sync_arg(*args, "device"));
      const std::int64_t stream_id = sync_arg(*args, "stream");
      const std::int64_t wait_stream = sync_arg(*args, "wait_on_stream");
      const std::int64_t record_corr = sync_arg(*args, "wait_on_cuda_event_record_corr_id");
      const std::uint32_t record = record_corr >= 0 ? call_by_corr_.find(record_corr) : kNoIndex;
      described[call] = 1;
      if (k == "Stream Wait Event") {
        const Stream* from = stream(device, wait_stream);
        const Stream* to = stream(device, stream_id);
        if (from == nullptr || to == nullptr || record == kNoIndex) continue;
        const std::uint32_t src = last_launched_before(*from, g_.time_ns[2 * record]);
        const std::uint32_t dst = first_launched_after(*to, g_.time_ns[2 * call]);
        if (src != kNoIndex && dst != kNoIndex)
          add(2 * src + 1, 2 * dst, EdgeType::kStreamWait, g_.events[dst], g_.events[src]);
      } else if (k == "Event Sync") {
        if (record == kNoIndex || wait_stream < 0) continue;
        wait_for(call, g_.time_ns[2 * record], device, wait_stream);
      } else if (k == "Stream Sync") {
        wait_for(call, g_.time_ns[2 * call], device, stream_id);
      } else if (k == "Context Sync") {
        wait_for(call, g_.time_ns[2 * call], device, -1);
      }
    }
    // Without records: by the call's name.
    std::uint32_t last_lane = kNoIndex, last_record = kNoIndex, last_launch = kNoIndex;
    // The next launch call on the same thread after each host activity (a
    // backward pass), for cudaStreamWaitEvent without records.
    std::vector<std::uint32_t> next_launch(host_.size(), kNoIndex);
    for (std::uint32_t b = static_cast<std::uint32_t>(host_.size()); b-- > 0;) {
      const bool same_lane = b + 1 < host_.size() && ev.lane[g_.events[b + 1]] == ev.lane[g_.events[b]];
      if (same_lane) next_launch[b] = is_launch_call(b + 1) ? b + 1 : next_launch[b + 1];
    }
    for (std::uint32_t a = 0; a < host_.size(); ++a) {
      const std::uint32_t e = g_.events[a];
      if (ev.lane[e] != last_lane) {
        last_lane = ev.lane[e];
        last_record = last_launch = kNoIndex;
      }
      const EventKind k = ev.kind[e];
      if (k != EventKind::kCudaRuntime && k != EventKind::kCudaDriver) continue;
      const std::string_view name = t_.name(e);
      const causal::SyncKind sk = causal::sync_kind(name);
      if (is_launch_call(a)) last_launch = a;
      if (sk == causal::SyncKind::kEventRecord) {
        last_record = a;
        continue;
      }
      if (described[a]) continue;
      if (sk == causal::SyncKind::kNone) {
        // An Async copy to pageable host memory returns only once its copy
        // is done (CUDA Runtime API, "API synchronization behavior"): it
        // waits like the blocking form (DLRM's split-size read-backs).
        for (std::uint32_t d : launched(a)) {
          const std::uint32_t de = g_.events[d];
          if (ev.kind[de] != EventKind::kGpuMemcpy) continue;
          const internal::CopyKind ck = internal::copy_kind(t_.name(de));
          if (ck.direction == internal::CopyDirection::kDtoH && ck.pageable()) add(2 * d + 1, 2 * a + 1, EdgeType::kSync, e, de);
        }
        full_queue_wait(a);
        continue;
      }
      if (sk == causal::SyncKind::kBlockingCopy) {
        for (std::uint32_t d : launched(a)) add(2 * d + 1, 2 * a + 1, EdgeType::kSync, e, g_.events[d]);
      } else if (sk == causal::SyncKind::kDevice || sk == causal::SyncKind::kStream) {
        wait_for(a, g_.time_ns[2 * a], -1, -1);
      } else if (sk == causal::SyncKind::kEvent) {
        const std::int64_t before = last_record != kNoIndex ? g_.time_ns[2 * last_record] : g_.time_ns[2 * a];
        wait_for(a, before, -1, -1);
      } else if (sk == causal::SyncKind::kStreamWait && last_record != kNoIndex && last_launch != kNoIndex &&
                 g_.time_ns[2 * last_launch] < g_.time_ns[2 * last_record] && !launched(last_launch).empty()) {
        // The recorded work: the last launch before the record; the
        // waiting stream: the next launch of this thread on another one.
        const std::uint32_t src = launched(last_launch).back();
        const std::uint32_t next = next_launch[a];
        if (next == kNoIndex) continue;
        for (std::uint32_t d : launched(next)) {
          if (t_.events.lane[g_.events[d]] != t_.events.lane[g_.events[src]])
            add(2 * src + 1, 2 * d, EdgeType::kStreamWait, g_.events[d], g_.events[src]);
          break;
        }
      }
    }
  }

  bool is_launch_call(std::uint32_t a) const { return !launched(a).empty(); }

  // A launch that began on a full queue returns when its stream frees a
  // slot: the sync edge from the stream's work that ended last before the
  // call returned (issue 38's twenty-second round: an A100's 1000 fp32
  // GEMMs, 274 launches held 26.7 ms on a queue 1021 deep; the replay of
  // faster GEMMs saved nothing, the host's launches set at their measured
  // length). Blocking calls only (kBlockingCallNs, src/analyze/idle.h):
  // a launch that returns at once did not wait.
  void full_queue_wait(std::uint32_t a) {
    constexpr std::int64_t kBlockingCallNs = 50'000;
    const std::int64_t t0 = g_.time_ns[2 * a], t1 = g_.time_ns[2 * a + 1];
    if (t1 - t0 < kBlockingCallNs) return;
    for (std::uint32_t d : launched(a)) {
      const std::uint32_t lane = t_.events.lane[g_.events[d]];
      const Stream* s = stream(t_.lanes[lane].device, t_.lanes[lane].stream);
      if (s == nullptr) continue;
      // Launched before the call began, not started by then.
      const auto launched_n = std::lower_bound(s->launched_by.begin(), s->launched_by.end(), t0) - s->launched_by.begin();
      const auto started_n = std::partition_point(s->acts.begin(), s->acts.end(),
                                                  [&](std::uint32_t x) { return g_.time_ns[2 * x] <= t0; }) -
                             s->acts.begin();
      if (launched_n - started_n < causal::kQueueFullDepth) continue;
      // A stream's activities end in order (device_chains made them monotone).
      const auto done = std::partition_point(s->acts.begin(), s->acts.end(),
                                             [&](std::uint32_t x) { return g_.time_ns[2 * x + 1] <= t1; });
      if (done == s->acts.begin()) continue;
      const std::uint32_t b = *(done - 1);
      if (g_.time_ns[2 * b + 1] < t0) continue;
      add(2 * b + 1, 2 * a + 1, EdgeType::kSync, g_.events[a], g_.events[b]);
      return;
    }
  }

  // Edges grouped by target, the binding edge of each node and the weights;
  // then a topological order (Kahn's).
  void finish() {
    const std::size_t nn = g_.time_ns.size();
    g_.in_begin.assign(nn + 1, 0);
    for (const RawEdge& r : raw_) ++g_.in_begin[r.to + 1];
    std::partial_sum(g_.in_begin.begin(), g_.in_begin.end(), g_.in_begin.begin());
    g_.edges.resize(raw_.size());
    {
      std::vector<std::uint32_t> fill(g_.in_begin.begin(), g_.in_begin.end() - 1);
      for (const RawEdge& r : raw_) {
        CausalEdge& c = g_.edges[fill[r.to]++];
        c.from = r.from;
        c.to = r.to;
        c.event = r.event;
        c.cause_event = r.cause_event;
        c.type = r.type;
        c.measured_ns = g_.time_ns[r.to] - g_.time_ns[r.from];
      }
    }
    raw_.clear();
    raw_.shrink_to_fit();
    // Binding: the source that happened last; on a tie, a dependency on
    // another lane (launch, sync, wait) before program or stream order.
    auto rank = [](EdgeType t) {
      switch (t) {
        case EdgeType::kSync: case EdgeType::kStreamWait: case EdgeType::kThread: return 3;
        case EdgeType::kLaunch: return 2;
        case EdgeType::kDevice: return 4;
        default: return 1;
      }
    };
    std::vector<std::int64_t> launch_d, stream_d, sync_d;
    for (std::size_t v = 0; v < nn; ++v) {
      const std::uint32_t b = g_.in_begin[v], e = g_.in_begin[v + 1];
      if (b == e) continue;
      std::uint32_t best = b;
      for (std::uint32_t i = b + 1; i < e; ++i) {
        const CausalEdge& x = g_.edges[i];
        const CausalEdge& y = g_.edges[best];
        const std::int64_t tx = g_.time_ns[x.from], ty = g_.time_ns[y.from];
        if (tx > ty || (tx == ty && rank(x.type) > rank(y.type))) best = i;
      }
      g_.edges[best].binding = true;
      const CausalEdge& bb = g_.edges[best];
      if (bb.type == EdgeType::kLaunch) launch_d.push_back(bb.measured_ns);
      if (bb.type == EdgeType::kStream) stream_d.push_back(bb.measured_ns);
      if (bb.type == EdgeType::kSync) sync_d.push_back(bb.measured_ns);
    }
    auto median = [](std::vector<std::int64_t>& v) -> std::int64_t {
      if (v.empty()) return 0;
      auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
      std::nth_element(v.begin(), mid, v.end());
      return *mid;
    };
    g_.launch_latency_ns = median(launch_d);
    g_.stream_gap_ns = median(stream_d);
    g_.sync_return_ns = median(sync_d);
    for (std::size_t v = 0; v < nn; ++v) {
      const std::uint32_t b = g_.in_begin[v], e = g_.in_begin[v + 1];
      std::int64_t bind_delay = 0;
      for (std::uint32_t i = b; i < e; ++i)
        if (g_.edges[i].binding) bind_delay = g_.edges[i].measured_ns;
      for (std::uint32_t i = b; i < e; ++i) {
        CausalEdge& c = g_.edges[i];
        ++g_.edges_by_type[static_cast<int>(c.type)];
        if (c.binding) {
          c.weight_ns = c.measured_ns;
          continue;
        }
        std::int64_t floor = 0;
        switch (c.type) {
          case EdgeType::kLaunch: floor = g_.launch_latency_ns; break;
          case EdgeType::kStream: case EdgeType::kStreamWait: floor = g_.stream_gap_ns; break;
          case EdgeType::kSync: floor = g_.sync_return_ns; break;
          // Program order into a call that waited: the call's own cost,
          // its return after the work it waited for.
          default: floor = bind_delay; break;
        }
        c.weight_ns = std::min(c.measured_ns, floor);
      }
    }
    // Kahn's order; ties keep node order. Edges all go forward in measured
    // time, so a cycle needs equal times: its nodes are appended in time
    // order and the edges closing it are left out of the replay (counted).
    std::vector<std::uint32_t> indeg(nn, 0);
    std::vector<std::uint32_t> out_begin(nn + 1, 0), out;
    for (const CausalEdge& c : g_.edges) ++out_begin[c.from + 1];
    std::partial_sum(out_begin.begin(), out_begin.end(), out_begin.begin());
    out.resize(g_.edges.size());
    {
      std::vector<std::uint32_t> fill(out_begin.begin(), out_begin.end() - 1);
      for (const CausalEdge& c : g_.edges) {
        out[fill[c.from]++] = c.to;
        ++indeg[c.to];
      }
    }
    g_.topo.reserve(nn);
    for (std::uint32_t v = 0; v < nn; ++v)
      if (indeg[v] == 0) g_.topo.push_back(v);
    for (std::size_t i = 0; i < g_.topo.size(); ++i) {
      const std::uint32_t v = g_.topo[i];
      for (std::uint32_t j = out_begin[v]; j < out_begin[v + 1]; ++j)
        if (--indeg[out[j]] == 0) g_.topo.push_back(out[j]);
    }
    if (g_.topo.size() < nn) {
      std::vector<std::uint32_t> rest;
      for (std::uint32_t v = 0; v < nn; ++v)
        if (indeg[v] != 0) rest.push_back(v);
      std::stable_sort(rest.begin(), rest.end(),
                       [&](std::uint32_t x, std::uint32_t y) { return g_.time_ns[x] < g_.time_ns[y]; });
      g_.skipped_edges += rest.size();
      g_.topo.insert(g_.topo.end(), rest.begin(), rest.end());
    }
  }

  // A CPU thread's chain: its points (begins and ends in time order) with
  // the innermost event open up to each (kNoIndex: a gap), by lane.
  struct Point {
    std::uint32_t node, owner;
  };
  struct Chain {
    std::uint32_t lane, begin, end;  // points_[begin, end)
  };

  const Trace& t_;
  CausalGraph g_;
  std::vector<Point> points_;
  std::vector<Chain> chains_;
  std::vector<std::uint32_t> host_, device_, sync_records_;
  std::vector<Stream> streams_;
  std::map<std::pair<std::int32_t, std::int64_t>, std::size_t> stream_index_;  // (device, stream) → streams_
  std::vector<std::int64_t> all_launched_by_;  // every device activity's launch time, sorted
  std::vector<std::uint32_t> all_latest_end_;  // the activity that ended last among those up to here
  std::vector<RawEdge> raw_;
  IdIndex call_by_corr_;
  std::vector<std::uint32_t> launched_begin_, launched_list_;
};

}  // namespace

CausalGraph build_causal_graph(const Trace& trace) { return Builder(trace).build(); }

}  // namespace tprof
