// Stragglers from arrivals at collectives (docs/scale.md, "Stragglers").
//
// In a synchronous job every rank's collective kernel ends together: the
// collective completes once the last rank has joined. The late rank starts
// its kernel last and so has the shortest one; the punctual ranks sit in
// long kernels, waiting. Step lengths are the same on every rank and say
// nothing. So each rank's summary keeps its collective kernels (start =
// arrival, end) and what its device did before each arrival; the view
// matches the kernels across ranks (group + step + sequence number),
// aligns the ranks' clocks on the common ends, and names the rank that
// arrives last, again and again, with the wait it inflicts.
#include "src/analyze/ranks_collectives.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "src/analyze/intervals.h"
#include "src/base/saturate.h"
#include "src/causal/names.h"
#include "src/trace/json_value.h"

namespace tprof::internal {

namespace {

// [start, end) with a payload: an event, a collective's index.
struct Span {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::uint32_t id = 0;
};

bool by_start(const Span& a, const Span& b) { return a.start < b.start || (a.start == b.start && a.id < b.id); }

// Calls fn(a_item, w_item, overlap_ns) once for every item of `a` and item
// of `w` that overlap by more than 0; both sorted by start. One sweep that
// keeps the items still open on each side: its cost is the two sizes plus
// the pairs, where scanning back for long enclosing events would be
// quadratic.
template <typename Fn>
void for_each_overlap(const std::vector<Span>& a, const std::vector<Span>& w, Fn fn) {
  std::vector<const Span*> open_a, open_w;
  auto prune = [](std::vector<const Span*>& open, std::int64_t t) {
    std::erase_if(open, [t](const Span* s) { return s->end <= t; });
  };
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < w.size()) {
    const bool take_a = j >= w.size() || (i < a.size() && a[i].start <= w[j].start);
    const Span& s = take_a ? a[i++] : w[j++];
    if (s.end <= s.start) continue;
    std::vector<const Span*>& other = take_a ? open_w : open_a;
    prune(other, s.start);
    for (const Span* o : other) {
      const std::int64_t overlap = sat_sub(std::min(s.end, o->end), s.start);
      if (take_a) {
        fn(s, *o, overlap);
      } else {
        fn(*o, s, overlap);
      }
    }
    (take_a ? open_a : open_w).push_back(&s);
  }
}

// The kernel's name up to its parameter list: "ncclDevKernel_AllReduce_Sum_f32_RING_LL".
std::string_view short_name(std::string_view name) {
  const std::size_t paren = name.find('(');
  if (paren != std::string_view::npos) name = name.substr(0, paren);
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  return name;
}

// Where a collective kernel is numbered and its number, when the trace has
// one. Current Kineto copies the collective's metadata from the
// record_param_comms op that launched it onto the kernel (args "Process
// Group Name", "Seq": PyTorch's profiler/util.cpp saveNcclMeta, Kineto's
// output_json.cpp appendCollectiveArgs); some traces have them on that op
// only, which is the innermost op around the launch. Older traces have
// only the stream, which NCCL creates per communicator in the same order on
// every rank. "Seq" counts a process group's collectives alike on every
// rank of it; a send's or receive's counts that rank's point-to-point
// operations only (ProcessGroupNCCL's seqP2P_), so it is no key across
// ranks and is dropped. `pg` is "" when neither has a process group.
struct CollectiveTag {
  std::string pg;
  std::int64_t seq = -1;
  std::int64_t size = -1;  // "Group size"
};

CollectiveTag tag_of(const DiagnoseContext& c, const DeviceOp& op) {
  std::string pg;
  std::int64_t seq = -1, size = -1;
  bool p2p = false;
  auto read = [&](std::uint32_t event) {
    const std::string_view args = c.trace.args_json(event);
    if (args.empty()) return;
    Result<JsonValue> v = JsonValue::parse(args);
    if (!v || !v->is_object()) return;
    const JsonValue* g = v->find("Process Group Name");
    if (pg.empty() && g != nullptr && (g->is_string() || g->is_number())) pg = g->text();
    const JsonValue* n = v->find("Seq");
    std::int64_t x = -1;
    if (seq < 0 && n != nullptr && n->is_number() && n->get_int(&x) && x >= 0) seq = x;
    const JsonValue* gs = v->find("Group size");
    if (size < 0 && gs != nullptr && gs->is_number() && gs->get_int(&x) && x > 0) size = x;
    const JsonValue* name = v->find("Collective name");
    if ((name != nullptr && name->is_string() && collective_kind_of(name->text()) == "send/recv") ||
        v->find("Src Rank") != nullptr || v->find("Dst Rank") != nullptr) {
      p2p = true;
    }
  };
  read(op.event);
  if ((pg.empty() || seq < 0 || size < 0) && op.launch != kNoIndex) {
    const std::uint32_t around = c.enclosing_op(op.launch, /*skip_views=*/false);
    if (around != kNoIndex && c.name(around) == "record_param_comms") read(around);
  }
  return {pg, p2p ? -1 : seq, size};
}

// Each collective's group: its process group, else the one the other
// kernels of its stream name (a kernel launched before the window has no
// launch and so no record_param_comms op: ProcessGroupNCCL gives each
// communicator its own stream), else its stream.
std::vector<std::string> groups_of(const std::vector<const DeviceOp*>& comm, const std::vector<CollectiveTag>& tags) {
  std::map<std::int64_t, std::string> on_stream;  // "" where a stream has two process groups
  for (std::size_t k = 0; k < comm.size(); ++k) {
    if (tags[k].pg.empty()) continue;
    const auto [it, added] = on_stream.emplace(comm[k]->stream, tags[k].pg);
    if (!added && it->second != tags[k].pg) it->second.clear();
  }
  std::vector<std::string> out;
  for (std::size_t k = 0; k < comm.size(); ++k) {
    std::string pg = tags[k].pg;
    if (const auto it = on_stream.find(comm[k]->stream); pg.empty() && it != on_stream.end()) pg = it->second;
    out.push_back(pg.empty() ? "stream " + std::to_string(comm[k]->stream) : "pg " + pg);
  }
  return out;
}

struct Densest {
  std::size_t count = 0;
  std::int64_t median = 0;
  std::int64_t lo = 0, hi = 0;  // the values at the window's two ends
};

// The window of `width` holding the most values (ties: the one whose median
// is nearest 0, then the lowest): the clock offset that most collectives'
// ends agree on, or the ranks whose ends agree on one collective. Robust to
// wrong matches (a kernel missing on one rank shifts the numbering).
Densest densest(std::vector<std::int64_t> v, std::int64_t width) {
  Densest best;
  if (v.empty()) return best;
  std::sort(v.begin(), v.end());
  std::size_t j = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (j < i) j = i;
    while (j + 1 < v.size() && sat_sub(v[j + 1], v[i]) <= width) ++j;
    const std::size_t n = j - i + 1;
    const std::int64_t med =
        mean_median(std::vector<std::int64_t>(v.begin() + static_cast<std::ptrdiff_t>(i), v.begin() + static_cast<std::ptrdiff_t>(j) + 1));
    const auto mag = [](std::int64_t x) { return x < 0 ? sat_sub(0, x) : x; };
    if (n > best.count || (n == best.count && mag(med) < mag(best.median))) best = {n, med, v[i], v[j]};
  }
  return best;
}

double round1(double v) { return std::round(v * 10) / 10; }

double pct_of(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? round1(100.0 * static_cast<double>(part) / static_cast<double>(whole)) : 0;
}

// Each stretch along the rank's own critical path, back from the
// collective's start to the stretch's (docs/scale.md, "Critical path
// across ranks"): by bound type, and the host or device event holding the
// most of it (host work and device work only: a launch's or a stream's
// wait is no event's time; ProfilerStep is no answer). A stretch whose path
// does not span it exactly (the graph's time for the kernel differs) has
// none.
template <class Intern>
void summarize_rank_paths(const DiagnoseContext& c, const std::vector<const DeviceOp*>& comm, Intern& intern,
                          RankSummary* r) {
  const CausalResult& cr = c.causal();
  if (cr.graph == nullptr) return;
  const CausalGraph& g = *cr.graph;
  std::vector<PathQuery> queries;
  std::vector<std::size_t> of;
  for (std::size_t k = 0; k < comm.size(); ++k) {
    const std::uint32_t e = comm[k]->event;
    const std::uint32_t a = e < g.activity_of_event.size() ? g.activity_of_event[e] : kNoIndex;
    if (a == kNoIndex) continue;
    const RankCollective& rc = r->collectives[k];
    queries.push_back({CausalGraph::begin_node(a), sat_sub(rc.start_ns, rc.before_ns)});
    of.push_back(k);
  }
  const std::vector<CriticalPath> paths = measured_critical_paths(c.trace, g, queries);
  std::unordered_map<std::uint32_t, std::int64_t> by_event;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    RankCollective& rc = r->collectives[of[i]];
    const CriticalPath& p = paths[i];
    if (p.start_ns != sat_sub(rc.start_ns, rc.before_ns) || p.end_ns != rc.start_ns) continue;
    rc.has_path = true;
    rc.path_ns = p.bound_ns;
    rc.path_unexplained_ns = sat_add(p.unexplained_ns, p.unrecorded_wait_ns);
    by_event.clear();
    for (const PathSegment& seg : p.segments) {
      if (seg.event == kNoIndex || (seg.type != EdgeType::kHost && seg.type != EdgeType::kDevice)) continue;
      if (is_profiler_step(c.name(seg.event))) continue;
      sat_acc(by_event[seg.event], seg.dur_ns);
    }
    std::uint32_t top = kNoIndex;
    for (const auto& [e, ns] : by_event) {
      if (top == kNoIndex || ns > by_event[top] || (ns == by_event[top] && e < top)) top = e;
    }
    if (top != kNoIndex) {
      rc.path_top = intern(c.name(top));
      rc.path_top_ns = by_event[top];
    }
  }
}

}  // namespace

void summarize_collectives(const DiagnoseContext& c, RankSummary* r) {
  r->has_collectives = true;
  std::vector<const DeviceOp*> comm;
  std::vector<Interval> compute_iv, busy_iv;
  std::vector<Span> compute_spans, comm_spans;
  for (std::size_t i = 0; i < c.device.size(); ++i) {
    const DeviceOp& op = c.device[i];
    busy_iv.push_back({op.start, op.end});
    const Span s{op.start, op.end, static_cast<std::uint32_t>(i)};
    if (op.cls == DeviceClass::kComm) {
      comm.push_back(&op);
      comm_spans.push_back(s);
    } else {
      compute_iv.push_back({op.start, op.end});
      compute_spans.push_back(s);
    }
  }
  if (comm.empty()) return;
  const std::vector<Interval> compute = merge_intervals(std::move(compute_iv));
  const std::vector<Interval> busy = merge_intervals(std::move(busy_iv));
  std::vector<std::int64_t> comm_ends;
  for (const DeviceOp* op : comm) comm_ends.push_back(op->end);
  std::sort(comm_ends.begin(), comm_ends.end());

  std::map<std::pair<std::string, std::string>, std::int32_t> groups;
  std::unordered_map<std::string, std::int32_t> names;
  auto intern = [&](std::string_view n) {
    auto [it, added] = names.emplace(std::string(n), static_cast<std::int32_t>(r->names.size()));
    if (added) r->names.emplace_back(n);
    return it->second;
  };
  std::vector<CollectiveTag> tags;
  for (const DeviceOp* op : comm) tags.push_back(tag_of(c, *op));
  std::vector<std::string> group = groups_of(comm, tags);
  std::vector<Span> windows, idle;  // id: the collective's index
  for (std::size_t k = 0; k < comm.size(); ++k) {
    const DeviceOp& op = *comm[k];
    RankCollective rc;
    auto key = std::make_pair(std::move(group[k]), std::string(short_name(c.name(op.event))));
    auto [g, added] = groups.emplace(key, static_cast<std::int32_t>(r->collective_groups.size()));
    if (added) r->collective_groups.push_back({key.first, key.second});
    CollectiveGroup& cg = r->collective_groups[static_cast<std::size_t>(g->second)];
    cg.size = std::max(cg.size, tags[k].size);
    rc.group = g->second;
    rc.step = c.step_number(op.step);
    rc.seq = tags[k].seq;
    rc.start_ns = op.start;
    rc.end_ns = op.end;
    // Since the rank's previous collective ended: a point every rank of a
    // synchronous job passes at the same time, so the ranks' stretches
    // differ by how late each arrives.
    std::int64_t from = c.start_ns;
    const auto prev = std::upper_bound(comm_ends.begin(), comm_ends.end(), op.start);
    if (prev != comm_ends.begin()) {
      from = *(prev - 1);
    } else if (op.step >= 0) {
      from = c.steps.steps[static_cast<std::size_t>(op.step)].start_ns;
    }
    from = std::min(from, op.start);
    rc.before_ns = sat_sub(op.start, from);
    rc.computation_ns = covered_within(compute, from, op.start);
    rc.communication_ns = covered_within(busy, from, op.start) - rc.computation_ns;
    windows.push_back({from, op.start, static_cast<std::uint32_t>(k)});
    // The device's idle pieces in the stretch: the gaps of `busy` (merged,
    // so sorted by end too).
    auto b = std::partition_point(busy.begin(), busy.end(), [&](const Interval& x) { return x.end <= from; });
    std::int64_t t = from;
    for (; b != busy.end() && b->start < op.start; ++b) {
      if (b->start > t) idle.push_back({t, b->start, static_cast<std::uint32_t>(k)});
      t = std::max(t, b->end);
    }
    if (t < op.start) idle.push_back({t, op.start, static_cast<std::uint32_t>(k)});
    r->collectives.push_back(rc);
  }
  std::sort(windows.begin(), windows.end(), by_start);
  std::sort(idle.begin(), idle.end(), by_start);

  // The longest kernel and the longest other collective in each stretch.
  auto longest = [&](const std::vector<Span>& ops, std::int32_t RankCollective::*top, std::int64_t RankCollective::*top_ns) {
    std::vector<std::pair<std::int64_t, std::uint32_t>> best(comm.size(), {0, 0});
    for_each_overlap(ops, windows, [&](const Span& op, const Span& w, std::int64_t ov) {
      if (ov > best[w.id].first) best[w.id] = {ov, op.id};
    });
    for (std::size_t k = 0; k < comm.size(); ++k) {
      if (best[k].first <= 0) continue;
      r->collectives[k].*top = intern(c.name(c.device[best[k].second].event));
      r->collectives[k].*top_ns = best[k].first;
    }
  };
  longest(compute_spans, &RankCollective::top_kernel, &RankCollective::top_kernel_ns);
  longest(comm_spans, &RankCollective::top_comm, &RankCollective::top_comm_ns);

  // The host while the device idled: DataLoader time, and the event that
  // covers the most of one idle piece (of those covering at least half as
  // much, the shortest: the inner call, not the annotation around it).
  std::vector<Span> host, loader;
  c.for_each_host_event([&](std::uint32_t e) {
    if (is_profiler_step(c.name(e))) return;
    const Span s{c.ts(e), c.end(e), e};
    host.push_back(s);
    if (is_dataloader_scope(c.name(e))) loader.push_back(s);
  });
  std::stable_sort(host.begin(), host.end(), by_start);
  std::stable_sort(loader.begin(), loader.end(), by_start);
  std::vector<std::int64_t> input(comm.size(), 0);
  for_each_overlap(loader, idle, [&](const Span&, const Span& w, std::int64_t ov) { sat_acc(input[w.id], ov); });
  struct Pair {
    std::uint32_t k, event;
    std::int64_t ov;
  };
  std::vector<Pair> pairs;
  for_each_overlap(host, idle, [&](const Span& e, const Span& w, std::int64_t ov) { pairs.push_back({w.id, e.id, ov}); });
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) { return a.k < b.k; });
  for (std::size_t i = 0; i < pairs.size();) {
    std::size_t j = i;
    std::int64_t most = 0;
    for (; j < pairs.size() && pairs[j].k == pairs[i].k; ++j) most = std::max(most, pairs[j].ov);
    const Pair* pick = nullptr;
    for (std::size_t p = i; p < j; ++p) {
      if (pairs[p].ov < most - pairs[p].ov) continue;  // under half of the most
      if (pick == nullptr || c.dur(pairs[p].event) < c.dur(pick->event)) pick = &pairs[p];
    }
    RankCollective& rc = r->collectives[pairs[i].k];
    rc.top_host = intern(c.name(pick->event));
    rc.top_host_ns = pick->ov;
    i = j;
  }
  for (std::size_t k = 0; k < comm.size(); ++k) {
    RankCollective& rc = r->collectives[k];
    const std::int64_t idle_ns = rc.before_ns - rc.computation_ns - rc.communication_ns;
    rc.input_ns = std::min(input[k], idle_ns);
  }
  summarize_rank_paths(c, comm, intern, r);
}

namespace {

// One collective kernel of one rank and its number: its sequence number in
// its group where the trace has one (`by_seq`; the step plays no part, kept
// at -1), else its position within its (group, step) on its rank.
struct Entry {
  std::int32_t gid = 0;
  bool by_seq = false;
  std::int64_t step = -1;
  std::int64_t seq = 0;
  std::int32_t ri = 0;  // index into order
  const RankCollective* c = nullptr;
};

auto entry_key(const Entry& e) { return std::tie(e.gid, e.by_seq, e.step, e.seq); }

// One collective across ranks: entries [b, e) share its number; `idx`
// holds those whose ends agree once matched.
struct Instance {
  std::size_t b = 0, e = 0;
  std::vector<std::size_t> idx;
  std::int32_t gid = 0;
  std::int64_t step = -1;
  std::int32_t last = -1;  // ri of the rank arriving last beyond a tie, else -1
  std::int64_t end = 0;    // the common end (aligned)
  std::int64_t wait = 0;   // the others' median wait for the last
  std::int64_t lead = 0;   // the last's arrival − the next-latest's
  std::int64_t after = 0;  // the common end − the last's arrival
  std::int64_t members = 0;
};

constexpr const char* kCauses[] = {"computation", "communication", "input", "host"};

// A matched collective: its step, its common end (aligned clock) and its
// members (entry indices) in arrival order.
struct Matched {
  std::int64_t step = -1;
  std::int64_t end = 0;
  std::vector<std::size_t> by_arrival;
};

// The critical path across ranks (docs/scale.md, "Critical path across
// ranks"). Per step, from the matched collective that ends last, back:
// the rank that arrives last at it (the latest arrival, a tie or not: the
// collective waits for it), the transfer once it arrived (the common end −
// its arrival), and its stretch before arriving, split as RankCollective
// splits it; the stretch began at its own previous collective, which is
// the next collective back when it is matched in the same step; else the
// walk ends (at the step's start, or an unmatched collective).
CrossRankPath cross_rank_path(const std::vector<Entry>& entries, const std::vector<Matched>& matched,
                              const std::vector<std::int32_t>& matched_of, const std::vector<std::int64_t>& arrival,
                              const std::vector<const RankSummary*>& order, const std::vector<std::int64_t>& shown_rank) {
  CrossRankPath out;
  // Each entry's previous collective on its rank (by start, matched or
  // not: its stretch began at that one's end), or -1.
  std::vector<std::vector<std::size_t>> by_rank(shown_rank.size());
  for (std::size_t k = 0; k < entries.size(); ++k) by_rank[static_cast<std::size_t>(entries[k].ri)].push_back(k);
  std::vector<std::ptrdiff_t> prev(entries.size(), -1);
  for (std::vector<std::size_t>& ks : by_rank) {
    std::stable_sort(ks.begin(), ks.end(), [&](std::size_t a, std::size_t b) {
      return entries[a].c->start_ns < entries[b].c->start_ns;
    });
    for (std::size_t i = 1; i < ks.size(); ++i) prev[ks[i]] = static_cast<std::ptrdiff_t>(ks[i - 1]);
  }
  // The last-ending matched collective of each step.
  std::map<std::int64_t, std::size_t> last_of_step;
  for (std::size_t m = 0; m < matched.size(); ++m) {
    const auto [it, added] = last_of_step.emplace(matched[m].step, m);
    if (!added && matched[m].end > matched[it->second].end) it->second = m;
  }
  std::map<std::pair<std::int64_t, int>, std::int64_t> parts;  // (shown rank or -1, cause index 0..4) -> ns
  // The same along the ranks' own paths: (shown rank, bound type or
  // kCount_ for unexplained) -> ns; used when every stretch walked has one.
  std::map<std::pair<std::int64_t, int>, std::int64_t> along;
  std::map<std::pair<std::int64_t, std::string_view>, std::int64_t> tops;  // (shown rank, event) -> ns
  bool all_along = true;
  std::int64_t total = 0, hops = 0;
  std::vector<char> seen(matched.size(), 0);
  for (const auto& [step, first] : last_of_step) {
    for (std::ptrdiff_t m = static_cast<std::ptrdiff_t>(first); m >= 0 && !seen[static_cast<std::size_t>(m)];) {
      const Matched& x = matched[static_cast<std::size_t>(m)];
      seen[static_cast<std::size_t>(m)] = 1;
      ++hops;
      const std::size_t k = x.by_arrival.back();
      const RankCollective& c = *entries[k].c;
      const std::int64_t rank = shown_rank[static_cast<std::size_t>(entries[k].ri)];
      const std::int64_t transfer = std::max<std::int64_t>(0, sat_sub(x.end, arrival[k]));
      const std::int64_t host = c.before_ns - c.computation_ns - c.communication_ns - c.input_ns;
      const std::array<std::int64_t, 4> split = {c.computation_ns, c.communication_ns, c.input_ns, host};
      for (int i = 0; i < 4; ++i) sat_acc(parts[{rank, i}], split[static_cast<std::size_t>(i)]);
      all_along = all_along && c.has_path;
      if (c.has_path) {
        for (int i = 0; i < static_cast<int>(BoundType::kCount_); ++i)
          sat_acc(along[{rank, i}], c.path_ns[static_cast<std::size_t>(i)]);
        sat_acc(along[{rank, static_cast<int>(BoundType::kCount_)}], c.path_unexplained_ns);
        if (c.path_top >= 0) {
          const RankSummary& owner = *order[static_cast<std::size_t>(entries[k].ri)];
          sat_acc(tops[{rank, owner.names[static_cast<std::size_t>(c.path_top)]}], c.path_top_ns);
        }
      }
      sat_acc(parts[{-1, 4}], transfer);
      sat_acc(total, sat_add(c.before_ns, transfer));
      const std::ptrdiff_t p = prev[k];
      const std::int32_t pm = p >= 0 ? matched_of[static_cast<std::size_t>(p)] : -1;
      m = pm >= 0 && matched[static_cast<std::size_t>(pm)].step == step ? pm : -1;
    }
  }
  out.steps = static_cast<std::int64_t>(last_of_step.size());
  if (out.steps == 0) return out;
  out.per_step_ns = total / out.steps;
  out.hops_per_step = static_cast<double>(hops) / static_cast<double>(out.steps);
  // Against the same steps: each the median over ranks of its duration.
  std::map<std::int64_t, std::vector<std::int64_t>> durs;
  for (const RankSummary* r : order) {
    for (const RankStep& st : r->steps) {
      if (last_of_step.contains(st.step)) durs[st.step].push_back(st.dur_ns);
    }
  }
  std::int64_t steps_ns = 0;
  for (auto& [step, d] : durs) sat_acc(steps_ns, mean_median(std::move(d)));
  if (steps_ns > 0) out.step_pct = pct_of(total, steps_ns);
  out.along_rank_paths = all_along;
  for (const auto& [key, ns] : parts) {
    if (ns <= 0) continue;
    PathPart x{key.first, key.second < 4 ? kCauses[key.second] : "transfer", ns / out.steps};
    if (key.first >= 0) out.activity.push_back(x);
    if (!all_along || key.first < 0) out.parts.push_back(std::move(x));
  }
  if (all_along) {
    for (const auto& [key, ns] : along) {
      if (ns <= 0) continue;
      const auto b = static_cast<BoundType>(key.second);
      out.parts.push_back({key.first, b == BoundType::kCount_ ? "unexplained" : std::string(bound_type_name(b)),
                           ns / out.steps});
    }
    // Each rank's event holding the most of its stretches (ties: by name).
    std::map<std::int64_t, PathTop> best;
    for (const auto& [key, ns] : tops) {
      PathTop& t = best[key.first];
      if (t.name.empty() || ns > t.per_step_ns) t = {key.first, std::string(key.second), ns};
    }
    for (auto& [rank, t] : best) {
      t.per_step_ns /= out.steps;
      if (t.per_step_ns > 0) out.tops.push_back(std::move(t));
    }
    std::stable_sort(out.tops.begin(), out.tops.end(),
                     [](const PathTop& a, const PathTop& b) { return a.per_step_ns > b.per_step_ns; });
  }
  for (std::vector<PathPart>* v : {&out.parts, &out.activity}) {
    std::stable_sort(v->begin(), v->end(), [](const PathPart& a, const PathPart& b) { return a.per_step_ns > b.per_step_ns; });
  }
  return out;
}

// The odds that a rank is last at `last` or more of `n` collectives of
// `ranks` ranks by chance alone (each 1/ranks): the binomial tail.
double last_by_chance(std::int64_t last, std::int64_t n, std::int64_t ranks) {
  if (ranks < 2 || n <= 0) return 1.0;
  const double p = 1.0 / static_cast<double>(ranks);
  double tail = 0;
  for (std::int64_t k = std::max<std::int64_t>(last, 0); k <= n; ++k) {
    const double log_c = std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
                         std::lgamma(static_cast<double>(n - k) + 1);
    tail += std::exp(log_c + static_cast<double>(k) * std::log(p) + static_cast<double>(n - k) * std::log1p(-p));
  }
  return std::min(1.0, tail);
}

std::int64_t cause_ns(const RankCollective& c, int what) {
  switch (what) {
    case 0: return c.computation_ns;
    case 1: return c.communication_ns;
    case 2: return c.input_ns;
    default: return c.before_ns - c.computation_ns - c.communication_ns - c.input_ns;
  }
}

std::string straggler_advice(const Straggler& s, const std::string& waits_at) {
  const std::string k = "rank " + std::to_string(s.rank);
  std::string a;
  const ArrivalCause* top = s.before.empty() ? nullptr : &s.before[0];
  const std::string named = top != nullptr && !top->top.empty() ? " (" + title_name(top->top) + ")" : "";
  if (late_before_window(s)) {
    a = k + " is already late when its recorded window begins: its step starts " + format_ns(s.window_start_late_ns) +
        " after the other ranks' (median, clocks aligned on the collectives' ends), before anything its trace "
        "shows. Record several steps in a row (schedule active=2 or more) or start the profiler earlier, so that "
        "the time before its step falls inside the window, and read it again.";
  } else if (s.compared == 0) {
    a = "Read what " + k + " does before its late collectives: its stretches before them do not start with the "
        "other ranks' (a collective only some ranks run), so they are not compared here.";
  } else if (top == nullptr) {
    a = "Read the collective before the late ones on " + k + ": before these it does no more than the others, so "
        "its previous collective may end later on it, or its trace misses what it did.";
  } else if (top->what == "computation") {
    a = "Even out the work of " + k + " before the collective" + named + ": shard sizes, sequence lengths or "
        "expert routing that give it more than the others, or a slower GPU on that rank (clocks, temperature, "
        "another model).";
  } else if (top->what == "input") {
    a = "Feed the input of " + k + " faster" + named + ": more DataLoader workers, pinned memory and prefetching; "
        "check the storage or network it reads from.";
  } else if (top->what == "host") {
    a = "Take the host work off the path of " + k + " to the collective" + named + ": a synchronization, logging, "
        "checkpointing, Python work, or another process on its cores delays its launch.";
  } else {
    a = "Find the straggler of the collectives " + k + " waits in first" + named + ": it is late here because it "
        "is late there.";
  }
  return a + " The other ranks' time in " + waits_at + " is waiting for " + k +
         ": overlapping their communication with compute will not help.";
}

// Ranks as "5, 8-15, 21": runs of consecutive ranks joined.
std::string rank_list(const std::vector<std::int64_t>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

// Slow transfers: per group, the median of its collectives' transfers (the
// common end − the last arrival), against the other groups of the same
// collective and size; the ranks in the most slow groups when that is two
// or more (docs/scale.md, "Slow transfers"). `slow_ids` gets the slow
// groups' ids.
SlowNetwork slow_network(const std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::int64_t>>>& transfers,
                         const std::map<std::int32_t, std::vector<std::size_t>>& members,
                         const std::vector<std::pair<std::string, std::string>>& group_of,
                         const std::vector<std::int64_t>& shown_rank, std::set<std::int32_t>* slow_ids) {
  struct Stat {
    std::int32_t g = 0;
    std::int64_t median = 0, count = 0, steps = 0;
  };
  std::map<std::pair<std::string, std::size_t>, std::vector<Stat>> classes;
  for (const auto& [g, t] : transfers) {
    if (t.size() < static_cast<std::size_t>(kStragglerMinLate)) continue;
    const auto m = members.find(g);
    if (m == members.end()) continue;
    std::vector<std::int64_t> v;
    std::set<std::int64_t> steps;
    for (const auto& [step, ns] : t) {
      v.push_back(ns);
      if (step >= 0) steps.insert(step);
    }
    classes[{group_of[static_cast<std::size_t>(g)].second, m->second.size()}].push_back(
        {g, mean_median(std::move(v)), static_cast<std::int64_t>(t.size()), static_cast<std::int64_t>(steps.size())});
  }
  SlowNetwork net;
  std::map<std::size_t, std::int64_t> slow_count;  // ri -> slow groups it is in
  auto disjoint = [&](std::int32_t a, std::int32_t b) {
    const std::vector<std::size_t>& x = members.at(a);  // ascending ri
    const std::vector<std::size_t>& y = members.at(b);
    for (std::size_t i = 0, j = 0; i < x.size() && j < y.size();) {
      if (x[i] == y[j]) return false;
      if (x[i] < y[j]) {
        ++i;
      } else {
        ++j;
      }
    }
    return true;
  };
  for (const auto& [key, stats] : classes) {
    for (const Stat& x : stats) {
      // Its peers share no rank with it: the other tensor-parallel groups
      // for a tensor-parallel one, not the data-parallel groups it crosses
      // (another message, another link).
      std::vector<std::int64_t> peers;
      for (const Stat& y : stats) {
        if (y.g != x.g && disjoint(x.g, y.g)) peers.push_back(y.median);
      }
      if (peers.size() < kMinTransferPeers) continue;
      const auto n_peers = static_cast<std::int64_t>(peers.size());
      const std::int64_t mid = mean_median(peers);
      const double spread = 4 * 1.4826 * static_cast<double>(mad(std::move(peers)));
      const double least = std::max({spread, kSlowTransferShare * static_cast<double>(mid), static_cast<double>(kArrivalTieNs)});
      const std::int64_t excess = sat_sub(x.median, mid);
      if (static_cast<double>(excess) < least) continue;
      slow_ids->insert(x.g);
      SlowTransfer t;
      t.group = group_of[static_cast<std::size_t>(x.g)].first;
      t.collective = key.first;
      for (const std::size_t ri : members.at(x.g)) {
        t.members.push_back(shown_rank[ri]);
        ++slow_count[ri];
      }
      std::sort(t.members.begin(), t.members.end());
      t.collectives = x.count;
      t.transfer_ns = x.median;
      t.peers = n_peers;
      t.peers_ns = mid;
      t.excess_per_step_ns = sat_mul(excess, x.count) / std::max<std::int64_t>(x.steps, 1);
      net.groups.push_back(std::move(t));
    }
  }
  std::stable_sort(net.groups.begin(), net.groups.end(), [](const SlowTransfer& a, const SlowTransfer& b) {
    return a.excess_per_step_ns > b.excess_per_step_ns;
  });
  std::int64_t most = 0;
  for (const auto& [ri, c] : slow_count) most = std::max(most, c);
  if (most >= 2) {
    for (const auto& [ri, c] : slow_count) {
      if (c == most) net.suspects.push_back(shown_rank[ri]);
    }
    std::sort(net.suspects.begin(), net.suspects.end());
  }
  if (net.groups.empty()) return net;
  if (!net.suspects.empty()) {
    const bool one = net.suspects.size() == 1;
    net.advice = "Test the links of " + std::string(one ? "rank " : "ranks ") + rank_list(net.suspects) + " (in " +
                 std::to_string(most) + " slow groups, more than any other rank): nccl-tests (all_reduce_perf) "
                 "between " + (one ? "its node" : "their nodes") + " and another, the NIC's error counters and link "
                 "speed, NCCL_DEBUG=INFO for the transport NCCL chose; replace or leave out the node. Every rank "
                 "of those groups waits for the transfer: no rank's own work will shorten it. (Unless a slow group's "
                 "messages are larger than its peers', as with pipeline stages of different sizes: compare their "
                 "In msg nelems.)";
  } else {
    net.advice = "One of the ranks of each slow group has a slow link, and no second slow group narrows it down: "
                 "test the links of its ranks (nccl-tests between pairs of them, the NIC's error counters, "
                 "NCCL_DEBUG=INFO for the transport). Every rank of the group waits for the transfer. (Unless "
                 "its messages are larger than its peers', as with pipeline stages of different sizes: compare "
                 "their In msg nelems.)";
  }
  return net;
}

}  // namespace

CollectiveView analyze_collectives(const std::vector<const RankSummary*>& order,
                                   const std::vector<std::int64_t>& shown_rank, std::int64_t median_step_ns) {
  CollectiveView out;
  const std::size_t n = order.size();
  out.waiting_for.assign(n, std::nullopt);
  out.collectives.assign(n, 0);
  out.last_at.assign(n, 0);
  bool old_summaries = false;
  for (const RankSummary* s : order) {
    if (!s->has_collectives) old_summaries = true;
    if (!s->collectives.empty()) ++out.alignment.ranks_with_collectives;
  }

  // Number each rank's collectives: by their sequence number in their
  // group where the trace records one, else within (group, step): the n-th
  // all-reduce of a process group in step 7 is the same all-reduce on every
  // rank.
  std::map<std::pair<std::string, std::string>, std::int32_t> gids;
  std::vector<std::pair<std::string, std::string>> group_of;
  std::vector<std::int64_t> group_size;  // per gid, the largest any rank reports; -1 unknown
  std::vector<Entry> entries;
  for (std::size_t ri = 0; ri < n; ++ri) {
    const RankSummary& s = *order[ri];
    std::vector<std::int32_t> local;
    for (const CollectiveGroup& g : s.collective_groups) {
      auto [it, added] = gids.emplace(std::make_pair(g.on, g.kernel), static_cast<std::int32_t>(group_of.size()));
      if (added) {
        group_of.push_back(it->first);
        group_size.push_back(-1);
      }
      local.push_back(it->second);
      std::int64_t& size = group_size[static_cast<std::size_t>(it->second)];
      size = std::max(size, g.size);
    }
    std::vector<const RankCollective*> cs;
    for (const RankCollective& c : s.collectives) cs.push_back(&c);
    std::stable_sort(cs.begin(), cs.end(), [](const RankCollective* a, const RankCollective* b) { return a->start_ns < b->start_ns; });
    std::map<std::pair<std::int32_t, std::int64_t>, std::int32_t> seq;
    // A second kernel of one sequence number on a rank (two kernels of one
    // collective) is numbered by order: a collective has one arrival a rank.
    std::set<std::pair<std::int32_t, std::int64_t>> seen;
    for (const RankCollective* c : cs) {
      const std::int32_t gid = local[static_cast<std::size_t>(c->group)];
      const auto rank_i = static_cast<std::int32_t>(ri);
      if (c->seq >= 0 && seen.emplace(gid, c->seq).second) {
        entries.push_back({gid, true, -1, c->seq, rank_i, c});
      } else {
        entries.push_back({gid, false, c->step, seq[{gid, c->step}]++, rank_i, c});
      }
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tuple_cat(entry_key(a), std::tie(a.ri)) < std::tuple_cat(entry_key(b), std::tie(b.ri));
  });
  std::vector<Instance> runs;
  for (std::size_t b = 0; b < entries.size();) {
    std::size_t e = b + 1;
    while (e < entries.size() && entry_key(entries[e]) == entry_key(entries[b])) ++e;
    if (e - b >= 2) {
      Instance run;
      run.b = b;
      run.e = e;
      run.gid = entries[b].gid;
      run.step = entries[b].step;
      if (entries[b].by_seq) {
        // The step most of its ranks launched it in (a rank's step
        // boundary may fall either side of it), the lowest of a tie.
        std::map<std::int64_t, std::int64_t> count;
        for (std::size_t k = b; k < e; ++k) ++count[entries[k].c->step];
        std::int64_t most = 0;
        for (const auto& [st, n_st] : count) {
          if (n_st > most) {
            most = n_st;
            run.step = st;
          }
        }
      }
      runs.push_back(std::move(run));
    }
    b = e;
  }
  if (runs.empty()) {
    out.alignment.note = old_summaries && out.alignment.ranks_with_collectives < 2
                             ? "summaries of version 1 have no collectives: summarize the traces again"
                         : out.alignment.ranks_with_collectives < 2
                             ? "fewer than 2 ranks have collective kernels"
                             : "no collective kernel is on 2 ranks (the same kernel and process group or stream, in "
                               "the same step)";
    return out;
  }

  // Clock offsets against the first rank, from the ends: ranks that share
  // no collective with it are aligned through ranks that do.
  std::vector<std::int64_t> offset(n, 0);
  std::vector<char> aligned(n, 0);
  std::int32_t ref = entries[runs[0].b].ri;
  for (const Instance& run : runs) ref = std::min(ref, entries[run.b].ri);
  aligned[static_cast<std::size_t>(ref)] = 1;
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<std::vector<std::int64_t>> diffs(n);
    for (const Instance& run : runs) {
      const Entry* anchor = nullptr;
      for (std::size_t k = run.b; k < run.e && anchor == nullptr; ++k) {
        if (aligned[static_cast<std::size_t>(entries[k].ri)]) anchor = &entries[k];
      }
      if (anchor == nullptr) continue;
      for (std::size_t k = run.b; k < run.e; ++k) {
        const std::size_t ri = static_cast<std::size_t>(entries[k].ri);
        if (aligned[ri]) continue;
        diffs[ri].push_back(sat_add(sat_sub(entries[k].c->end_ns, anchor->c->end_ns), offset[static_cast<std::size_t>(anchor->ri)]));
      }
    }
    for (std::size_t ri = 0; ri < n; ++ri) {
      if (diffs[ri].empty()) continue;
      const Densest d = densest(std::move(diffs[ri]), kCollectiveEndToleranceNs);
      // Two collectives at least: one alone would agree with any offset.
      if (d.count < 2) continue;
      offset[ri] = d.median;
      aligned[ri] = 1;
      progress = true;
    }
  }

  // Each matched collective: the ranks whose aligned ends agree, their
  // arrivals, the last one.
  std::vector<char> ok(entries.size(), 0);
  std::vector<std::int64_t> arrival(entries.size(), 0), finish(entries.size(), 0);
  std::vector<std::set<std::int64_t>> steps_of(n);
  std::vector<std::vector<std::int64_t>> members_of(n);
  // Per rank and group (process group or stream, and kernel): the matched
  // collectives it joins, those it is last at, their sizes. A straggler is
  // judged in the group where being last that often is least likely by
  // chance (last_by_chance): with tensor-parallel
  // groups a late rank is last at its group's collectives, while at the
  // data-parallel one its whole group arrives late with it.
  struct GroupCount {
    std::int64_t joined = 0, last = 0;
    std::vector<std::int64_t> members;
    std::vector<std::int64_t> lateness;  // its arrival − the collective's median arrival
  };
  std::vector<std::map<std::int32_t, GroupCount>> per_group(n);
  // Per group: every member's lateness at every collective, pooled (their
  // spread is the arrival jitter a lateness is judged against).
  std::map<std::int32_t, std::vector<std::pair<std::size_t, std::int64_t>>> group_lateness;
  // Per group: (step, transfer) of each matched collective, the transfer
  // being the common end − the last arrival (the slow-transfer test).
  std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::int64_t>>> group_transfer;
  std::vector<std::int64_t> residuals;
  std::vector<std::int64_t> span_lo(n, std::numeric_limits<std::int64_t>::max()),
      span_hi(n, std::numeric_limits<std::int64_t>::min());
  std::set<std::int32_t> matched_groups;
  std::vector<Instance> insts;
  // Every matched collective once (a late set splits it in insts), and each entry's.
  std::vector<Matched> matched;
  std::vector<std::int32_t> matched_of(entries.size(), -1);
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const std::size_t ri = static_cast<std::size_t>(entries[k].ri);
    if (!aligned[ri]) continue;
    arrival[k] = sat_sub(entries[k].c->start_ns, offset[ri]);
    finish[k] = sat_sub(entries[k].c->end_ns, offset[ri]);
  }
  // A matched collective: its members' arrivals, the last one, the wait.
  auto accept = [&](Instance run, std::vector<std::size_t> members, std::int64_t spread) {
    std::vector<std::int64_t> member_ends;
    for (const std::size_t k : members) {
      ok[k] = 1;
      member_ends.push_back(finish[k]);
    }
    ++out.alignment.matched;
    matched_groups.insert(run.gid);
    run.end = mean_median(member_ends);
    run.members = static_cast<std::int64_t>(members.size());
    for (const std::size_t k : members) {
      const std::size_t ri = static_cast<std::size_t>(entries[k].ri);
      residuals.push_back(finish[k] > run.end ? sat_sub(finish[k], run.end) : sat_sub(run.end, finish[k]));
      ++out.collectives[ri];
      if (run.step >= 0) steps_of[ri].insert(run.step);
      members_of[ri].push_back(run.members);
      GroupCount& g = per_group[ri][run.gid];
      ++g.joined;
      g.members.push_back(run.members);
      span_lo[ri] = std::min(span_lo[ri], arrival[k]);
      span_hi[ri] = std::max(span_hi[ri], run.end);
    }
    std::stable_sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) { return arrival[a] < arrival[b]; });
    {
      std::vector<std::int64_t> at;
      for (const std::size_t k : members) at.push_back(arrival[k]);
      const std::int64_t mid = mean_median(std::move(at));
      for (const std::size_t k : members) {
        const std::int64_t late = sat_sub(arrival[k], mid);
        per_group[static_cast<std::size_t>(entries[k].ri)][run.gid].lateness.push_back(late);
        group_lateness[run.gid].emplace_back(static_cast<std::size_t>(entries[k].ri), late);
      }
    }
    for (const std::size_t k : members) matched_of[k] = static_cast<std::int32_t>(matched.size());
    matched.push_back({run.step, run.end, members});
    const std::size_t last = members.back();
    group_transfer[run.gid].emplace_back(run.step, std::max<std::int64_t>(0, sat_sub(run.end, arrival[last])));
    run.lead = sat_sub(arrival[last], arrival[members[members.size() - 2]]);
    const std::int64_t tie = std::max(spread, kArrivalTieNs);
    // Several late ranks (a collective of kMinLateSetMembers or more): the
    // members after the largest gap among the last quarter's arrivals, when
    // that gap exceeds the tie and half the spread of the arrivals before
    // it. Each is late there, with its wait on the punctual ones; the last
    // alone would name one of two equally late ranks, at random.
    const std::size_t count = members.size();
    std::size_t split = count;
    if (count >= kMinLateSetMembers) {
      std::int64_t best_gap = 0;
      // The gap before the last arrival too: where it is the largest, one
      // rank is late (the last, below).
      for (std::size_t i = std::max<std::size_t>(1, count - count / 4); i < count; ++i) {
        const std::int64_t gap = sat_sub(arrival[members[i]], arrival[members[i - 1]]);
        if (gap > best_gap) {
          best_gap = gap;
          split = i;
        }
      }
      if (split + 1 >= count ||
          best_gap <= std::max(tie, sat_sub(arrival[members[split - 1]], arrival[members[0]]) / 2)) {
        split = count;
      }
    }
    if (split < count) {
      for (std::size_t i = split; i < count; ++i) {
        Instance late = run;
        const std::size_t k = members[i];
        late.last = entries[k].ri;
        late.lead = sat_sub(arrival[k], arrival[members[split - 1]]);
        ++out.last_at[static_cast<std::size_t>(late.last)];
        ++per_group[static_cast<std::size_t>(late.last)][run.gid].last;
        std::vector<std::int64_t> waits;
        for (std::size_t j = 0; j < split; ++j) waits.push_back(sat_sub(arrival[k], arrival[members[j]]));
        late.wait = mean_median(std::move(waits));
        late.after = sat_sub(run.end, arrival[k]);
        late.idx = members;
        insts.push_back(std::move(late));
      }
      return;
    }
    if (run.lead > tie) {
      run.last = entries[last].ri;
      ++out.last_at[static_cast<std::size_t>(run.last)];
      ++per_group[static_cast<std::size_t>(run.last)][run.gid].last;
      std::vector<std::int64_t> waits;
      for (std::size_t m = 0; m + 1 < members.size(); ++m) waits.push_back(sat_sub(arrival[last], arrival[members[m]]));
      run.wait = mean_median(std::move(waits));
      run.after = sat_sub(run.end, arrival[last]);
    }
    run.idx = std::move(members);
    insts.push_back(std::move(run));
  };
  // By number within (group, step): the ranks whose aligned ends agree.
  for (const Instance& run : runs) {
    std::vector<std::int64_t> ends;
    for (std::size_t k = run.b; k < run.e; ++k) {
      if (aligned[static_cast<std::size_t>(entries[k].ri)]) ends.push_back(finish[k]);
    }
    if (ends.size() < 2) continue;
    const Densest d = densest(std::move(ends), kCollectiveEndToleranceNs);
    if (d.count < 2) continue;
    std::vector<std::size_t> members;
    for (std::size_t k = run.b; k < run.e; ++k) {
      if (!aligned[static_cast<std::size_t>(entries[k].ri)] || finish[k] < d.lo || finish[k] > d.hi) continue;
      members.push_back(k);
    }
    if (entries[run.b].by_seq) ++out.alignment.matched_by_seq;
    accept(run, std::move(members), sat_sub(d.hi, d.lo));
  }
  // The rest by their aligned ends within (group, step): a rank with one
  // collective more or less in a group and step shifts the numbers of the
  // ones after it. In end order, a collective takes the next kernels whose
  // ends lie within the tolerance of its first, one per rank. A kernel with
  // a sequence number is that collective or none: it is not matched again.
  std::vector<std::size_t> rest;
  for (std::size_t k = 0; k < entries.size(); ++k) {
    if (!aligned[static_cast<std::size_t>(entries[k].ri)] || ok[k]) continue;
    if (entries[k].by_seq) {
      ++out.alignment.unmatched;
    } else {
      rest.push_back(k);
    }
  }
  std::stable_sort(rest.begin(), rest.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(entries[a].gid, entries[a].step, finish[a]) < std::tie(entries[b].gid, entries[b].step, finish[b]);
  });
  std::vector<char> used(rest.size(), 0);
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (used[i]) continue;
    const Entry& first = entries[rest[i]];
    std::vector<std::size_t> members = {rest[i]};
    std::set<std::int32_t> ranks = {first.ri};
    for (std::size_t j = i + 1; j < rest.size(); ++j) {
      const Entry& e = entries[rest[j]];
      if (e.gid != first.gid || e.step != first.step ||
          sat_sub(finish[rest[j]], finish[rest[i]]) > kCollectiveEndToleranceNs) {
        break;
      }
      if (used[j] || !ranks.insert(e.ri).second) continue;
      used[j] = 1;
      members.push_back(rest[j]);
    }
    if (members.size() < 2) {
      ++out.alignment.unmatched;
      continue;
    }
    Instance run;
    run.gid = first.gid;
    run.step = first.step;
    accept(run, members, sat_sub(finish[members.back()], finish[members.front()]));
  }
  out.alignment.groups = static_cast<std::int64_t>(matched_groups.size());
  out.alignment.end_spread_ns = mean_median(std::move(residuals));
  std::int64_t max_mag = -1;
  for (std::size_t ri = 0; ri < n; ++ri) {
    if (!aligned[ri]) continue;
    ++out.alignment.ranks_aligned;
    const std::int64_t mag = offset[ri] < 0 ? sat_sub(0, offset[ri]) : offset[ri];
    if (mag > max_mag) {
      max_mag = mag;
      out.alignment.max_offset_ns = offset[ri];
      out.alignment.max_offset_rank = shown_rank[ri];
    }
  }
  if (out.alignment.matched == 0) {
    out.alignment.note = "no collective's ends agree across ranks once their clocks are aligned";
    return out;
  }
  out.path = cross_rank_path(entries, matched, matched_of, arrival, order, shown_rank);

  // Per rank, over the collectives where it is last: the wait it inflicts,
  // and what it did before arriving beyond what the others did.
  auto per_step = [&](std::size_t ri, std::int64_t total) {
    const auto steps = static_cast<std::int64_t>(steps_of[ri].size());
    return steps > 0 ? total / steps : total;
  };
  auto pct = [&](std::size_t ri, std::int64_t total) {
    if (!steps_of[ri].empty() && median_step_ns > 0) return pct_of(per_step(ri, total), median_step_ns);
    return pct_of(total, sat_sub(span_hi[ri], span_lo[ri]));
  };
  // How far beyond the arrival jitter a rank arrives in group g: the
  // Hodges-Lehmann estimate of its lateness there (the median of the
  // pairwise means of its latenesses: one odd collective moves it a bounded
  // amount, as it does a median, and it is nearly as efficient as a mean)
  // over its standard error (1.0233 · σ / √n). σ = 1.4826 · the MAD of the
  // other members' latenesses in the group: its own are left out, or a late
  // rank widens the jitter it is judged against (in groups of 8 of the
  // generated jobs, a rank 1% late lost 10-20% of its z to its own). The
  // whole pool's, computed once, serves where its own are under
  // 1/kOwnShareOfPool of it (groups of 32 ranks and more: they move the MAD
  // by a few percent), and in groups of fewer than kMinLateSetMembers
  // ranks, where the others' latenesses are measured from a median its own
  // arrival moves (with two ranks they are its own, mirrored) and so say
  // nothing independent about the jitter.
  // Past kMaxHodgesLehmann collectives the plain median (standard error
  // 1.2533 · σ / √n): that many leave no doubt either way. 0 where the
  // others' arrivals do not spread.
  std::map<std::int32_t, double> pool_mad;
  auto group_mad = [&](std::int32_t g, std::size_t ri, std::size_t own, std::int64_t members) {
    const auto& pool = group_lateness[g];
    if (pool.size() >= kOwnShareOfPool * own || members < static_cast<std::int64_t>(kMinLateSetMembers)) {
      auto [it, fresh] = pool_mad.try_emplace(g, 0.0);
      if (fresh) {
        std::vector<std::int64_t> all;
        all.reserve(pool.size());
        for (const auto& rv : pool) all.push_back(rv.second);
        it->second = static_cast<double>(mad(std::move(all)));
      }
      return it->second;
    }
    std::vector<std::int64_t> others;
    for (const auto& [r, v] : pool) {
      if (r != ri) others.push_back(v);
    }
    return static_cast<double>(mad(std::move(others)));
  };
  auto lateness_z = [&](const GroupCount& c, std::int32_t g, std::size_t ri) {
    const std::size_t m = c.lateness.size();
    if (m < 2) return 0.0;
    const double jitter = group_mad(g, ri, m, mean_median(std::vector<std::int64_t>(c.members)));
    if (jitter <= 0) return 0.0;
    double estimate = 0, factor = 1.2533;
    if (m <= kMaxHodgesLehmann) {
      std::vector<std::int64_t> pair_means;
      pair_means.reserve(m * (m + 1) / 2);
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = i; j < m; ++j) pair_means.push_back(c.lateness[i] / 2 + c.lateness[j] / 2);
      }
      estimate = static_cast<double>(mean_median(std::move(pair_means)));
      factor = 1.0233;
    } else {
      estimate = static_cast<double>(mean_median(std::vector<std::int64_t>(c.lateness)));
    }
    const double se = factor * 1.4826 * jitter / std::sqrt(static_cast<double>(m));
    return estimate / se;
  };
  // Whether a collective's stretch starts at the end of one of its rank's
  // own collectives (summarize_collectives starts it there when the trace
  // has an earlier one; else at its step or the trace's start: the first
  // collective of a recorded window).
  std::vector<std::unordered_set<std::int64_t>> own_ends(n);
  for (std::size_t ri = 0; ri < n; ++ri) {
    for (const RankCollective& c : order[ri]->collectives) own_ends[ri].insert(c.end_ns);
  }
  auto starts_at_own_collective = [&](std::size_t ri, const RankCollective& c) {
    return own_ends[ri].contains(sat_sub(c.start_ns, c.before_ns));
  };
  std::vector<Straggler> candidates;
  std::vector<std::size_t> candidate_ri;
  for (std::size_t ri = 0; ri < n; ++ri) {
    if (out.last_at[ri] == 0) continue;
    Straggler s;
    s.rank = shown_rank[ri];
    s.collectives = out.collectives[ri];
    s.last_at = out.last_at[ri];
    s.ranks = mean_median(members_of[ri]);
    s.steps = static_cast<std::int64_t>(steps_of[ri].size());
    std::map<std::int32_t, std::int64_t> by_group;
    std::vector<std::int64_t> leads, afters, window_late;
    std::array<std::int64_t, 4> excess = {0, 0, 0, 0};
    std::array<std::map<std::string, std::int64_t>, 3> tops;  // kernel, collective, host event
    // The wait it inflicts, per step: summed within each group, the largest
    // group's in each step. Nested groups inherit one delay (a rank late at
    // its tensor-parallel all-reduce makes its whole group late at the
    // data-parallel one, the same time lost once), so groups do not add.
    std::map<std::int64_t, std::map<std::int32_t, std::int64_t>> step_group_wait;
    for (const Instance& in : insts) {
      if (in.last != static_cast<std::int32_t>(ri)) continue;
      sat_acc(step_group_wait[in.step][in.gid], in.wait);
      sat_acc(by_group[in.gid], in.wait);
      leads.push_back(in.lead);
      afters.push_back(in.after);
      // The stretches compare only where they start together on every rank
      // (each starts at its rank's previous collective: one the others
      // lack makes it shorter there, or longer on a rank that lacks it).
      std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
      std::int64_t my_from = 0;
      bool opens_window = false;
      std::vector<std::int64_t> others_from;
      for (const std::size_t k : in.idx) {
        const std::int64_t from = sat_sub(arrival[k], entries[k].c->before_ns);
        lo = std::min(lo, from);
        hi = std::max(hi, from);
        if (entries[k].ri == in.last) {
          my_from = from;
          opens_window = !starts_at_own_collective(ri, *entries[k].c);
        } else {
          others_from.push_back(from);
        }
      }
      // The first collective of a window on it: its stretch starts at its
      // step, and when that start is already late by half of its lateness
      // here, the delay is before the window (its trace cannot show it).
      // Elsewhere its stretch starts at its previous collective's end: one
      // that ended late on it passes the lateness on (inherited).
      if (!others_from.empty()) {
        const std::int64_t late = sat_sub(my_from, mean_median(std::move(others_from)));
        if (late > kArrivalTieNs && late >= in.wait / 2) {
          if (opens_window) {
            window_late.push_back(late);
          } else {
            ++s.late_from_previous;
          }
        }
      }
      if (sat_sub(hi, lo) > kCollectiveEndToleranceNs) continue;
      ++s.compared;
      const RankCollective* mine = nullptr;
      std::array<std::vector<std::int64_t>, 4> others;
      for (const std::size_t k : in.idx) {
        if (entries[k].ri == in.last) {
          mine = entries[k].c;
          continue;
        }
        for (int w = 0; w < 4; ++w) others[static_cast<std::size_t>(w)].push_back(cause_ns(*entries[k].c, w));
      }
      for (int w = 0; w < 4; ++w) {
        sat_acc(excess[static_cast<std::size_t>(w)],
                sat_sub(cause_ns(*mine, w), mean_median(std::move(others[static_cast<std::size_t>(w)]))));
      }
      const std::vector<std::string>& names = order[ri]->names;
      const std::pair<std::int32_t, std::int64_t> top[3] = {
          {mine->top_kernel, mine->top_kernel_ns}, {mine->top_comm, mine->top_comm_ns}, {mine->top_host, mine->top_host_ns}};
      for (int t = 0; t < 3; ++t) {
        if (top[t].first >= 0) sat_acc(tops[static_cast<std::size_t>(t)][names[static_cast<std::size_t>(top[t].first)]], top[t].second);
      }
    }
    for (const auto& [step, groups] : step_group_wait) {
      std::int64_t most = 0;
      for (const auto& [g, w] : groups) most = std::max(most, w);
      sat_acc(s.wait_ns, most);
    }
    std::int32_t worst = -1;
    for (const auto& [g, w] : by_group) {
      if (worst < 0 || w > by_group[worst]) worst = g;
    }
    s.on = group_of[static_cast<std::size_t>(worst)].first;
    s.collective = group_of[static_cast<std::size_t>(worst)].second;
    s.wait_per_step_ns = per_step(ri, s.wait_ns);
    s.wait_pct = pct(ri, s.wait_ns);
    s.late_at_window_start = static_cast<std::int64_t>(window_late.size());
    s.window_start_late_ns = mean_median(std::move(window_late));
    s.lead_ns = mean_median(std::move(leads));
    s.after_arrival_ns = mean_median(std::move(afters));
    auto top_name = [&](std::size_t t, bool loader) {
      std::string best;
      std::int64_t most = 0;
      for (const auto& [name, ns] : tops[t]) {
        if (t == 2 && is_dataloader_scope(name) != loader) continue;
        if (ns > most) {
          most = ns;
          best = name;
        }
      }
      return best;
    };
    // A cause worth naming: beyond the arrival tie and a tenth of the wait
    // it explains (jitter of a few µs is no cause).
    const std::int64_t least_cause = std::max(kArrivalTieNs, s.wait_per_step_ns / 10);
    for (int w = 0; w < 4; ++w) {
      const std::int64_t e = per_step(ri, excess[static_cast<std::size_t>(w)]);
      if (e < least_cause) continue;
      ArrivalCause a;
      a.what = kCauses[w];
      a.excess_per_step_ns = e;
      a.top = w == 0 ? top_name(0, false) : w == 1 ? top_name(1, false) : top_name(2, w == 2);
      s.before.push_back(std::move(a));
    }
    std::stable_sort(s.before.begin(), s.before.end(),
                     [](const ArrivalCause& a, const ArrivalCause& b) { return a.excess_per_step_ns > b.excess_per_step_ns; });
    // Named in a group where it is last at half its collectives at least,
    // and clearly more often than chance (one in `ranks`): 3 in 4 with two
    // ranks; and makes the others wait (5% of a step, or 0.5% when its
    // lateness there cannot be chance).
    auto judge = [&](Straggler& t) {
      t.share_needed = std::max(0.5, 1.0 / static_cast<double>(std::max<std::int64_t>(t.ranks, 1)) + 0.25);
      t.chance = last_by_chance(t.last_at, t.collectives, t.ranks);
      t.named = t.last_at >= kStragglerMinLate &&
                static_cast<double>(t.last_at) >= t.share_needed * static_cast<double>(t.collectives) &&
                (t.wait_pct >= kStragglerMinWaitPct ||
                 (late_beyond_chance(t) && t.wait_pct >= kStragglerSignificantWaitPct));
    };
    if (per_group[ri].size() == 1) {
      const auto& [g, c] = *per_group[ri].begin();
      s.lateness_z = lateness_z(c, g, ri);
      s.group_size = group_size[static_cast<std::size_t>(g)];
      judge(s);
    } else {
      // Several groups (a tensor-parallel group's and the data-parallel
      // one): it is judged in each where it is last. Shown: a group where
      // it is named, else any; of those, where being last that often is
      // least likely by chance (then the most often last), so one
      // collective of its own (1 of 1) does not outweigh 7 of 8. At the
      // data-parallel all-reduce its whole tensor-parallel group arrives
      // with it, so it can be last there at 3 of 8 (chance 1 in 20 million
      // among 1,024) while 6 of 8 at its own group's make it a straggler.
      std::optional<Straggler> best;
      for (const auto& [g, c] : per_group[ri]) {
        if (c.last == 0) continue;
        Straggler t = s;
        t.collectives = c.joined;
        t.last_at = c.last;
        t.ranks = mean_median(std::vector<std::int64_t>(c.members));
        t.last_on = group_of[static_cast<std::size_t>(g)].first;
        t.group_size = group_size[static_cast<std::size_t>(g)];
        t.lateness_z = lateness_z(c, g, ri);
        judge(t);
        if (!best || t.named > best->named ||
            (t.named == best->named &&
             (t.chance < best->chance || (t.chance == best->chance && t.last_at > best->last_at)))) {
          best = std::move(t);
        }
      }
      s = std::move(*best);
    }
    s.advice = straggler_advice(s, s.collective);
    candidates.push_back(std::move(s));
    candidate_ri.push_back(ri);
  }

  auto more_wait = [](const Straggler& a, const Straggler& b) {
    return std::tie(b.wait_ns, b.last_at, a.rank) < std::tie(a.wait_ns, a.last_at, b.rank);
  };
  // Followers: a named rank with no cause of its own before arriving
  // (nothing beyond the others since its previous collective, or mostly
  // waiting in another collective) that shares a group with a named rank
  // late for a cause of its own is late because its previous collective,
  // in that group, waited for that rank: with tensor-parallel groups the
  // late rank's whole group arrives late at the data-parallel all-reduce.
  // The root is the straggler.
  // A cause of its own: late before its window, or something in its
  // stretches beyond the others' that is not another collective; not when
  // fewer than kStragglerMinLate of its late collectives (over all its
  // groups) are late of themselves, the rest inheriting their lateness from
  // a previous collective that ended late on it (a late rank's TP peers at
  // the data-parallel all-reduce; every rank after a slow transfer).
  const auto own_cause = [&](std::size_t i) {
    const Straggler& x = candidates[i];
    if (x.late_at_window_start > 0) return true;
    if (out.last_at[candidate_ri[i]] - x.late_from_previous < kStragglerMinLate) return false;
    return !x.before.empty() && x.before[0].what != kCauses[1];
  };
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    Straggler& f = candidates[i];
    if (!f.named || own_cause(i)) continue;
    for (std::size_t j = 0; j < candidates.size(); ++j) {
      const Straggler& root = candidates[j];
      if (j == i || !root.named || !own_cause(j)) continue;
      bool shared = false;
      for (const auto& [g, c] : per_group[candidate_ri[i]]) {
        const auto it = per_group[candidate_ri[j]].find(g);
        shared = shared || (it != per_group[candidate_ri[j]].end() && it->second.last > 0);
      }
      if (shared) {
        f.named = false;
        f.follows = root.rank;
        break;
      }
    }
  }
  std::set<std::int32_t> slow;  // the slow groups' ids
  {
    std::map<std::int32_t, std::vector<std::size_t>> members_of_group;
    for (std::size_t ri = 0; ri < n; ++ri) {
      for (const auto& [g, c] : per_group[ri]) members_of_group[g].push_back(ri);
    }
    out.network = slow_network(group_transfer, members_of_group, group_of, shown_rank, &slow);
  }
  // Ranks late only because a collective of a slow group ended late on
  // them (no cause of their own) are not stragglers; nor is a suspect, whose
  // cause is its link, said once in the network view.
  std::vector<char> by_network(candidates.size(), 0);
  if (!out.network.groups.empty()) {
    std::set<std::int64_t> suspects(out.network.suspects.begin(), out.network.suspects.end());
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      Straggler& f = candidates[i];
      if (!f.named || own_cause(i)) continue;
      bool in_slow = false;
      for (const auto& [g, c] : per_group[candidate_ri[i]]) in_slow = in_slow || slow.contains(g);
      if (!in_slow) continue;
      f.named = false;
      by_network[i] = 1;
      if (suspects.contains(f.rank)) continue;
      out.network.followers.push_back(f.rank);
      if (suspects.size() == 1) f.follows = *suspects.begin();
    }
    std::sort(out.network.followers.begin(), out.network.followers.end());
  }
  bool any_named = false;
  for (const Straggler& s : candidates) any_named = any_named || s.named;
  std::size_t latest = candidates.size();
  if (!any_named && !candidates.empty()) {
    latest = static_cast<std::size_t>(std::min_element(candidates.begin(), candidates.end(), more_wait) - candidates.begin());
    // Late only through a slow transfer: the network view says so.
    if (by_network[latest]) latest = candidates.size();
  }

  // The ranks that wait for a named straggler: their verdict, where the wait
  // is a material share of their step (kStragglerMinWaitPct). A rank late at
  // a few collectives only (`latest`, not named) changes no verdict: the
  // others do not wait for it at most steps, so "waiting for rank k" would
  // misdescribe them; the view names it as the latest rank instead.
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i].named) continue;
    const auto k = static_cast<std::int32_t>(candidate_ri[i]);
    std::vector<std::int64_t> wait(n, 0);
    std::vector<std::map<std::int32_t, std::int64_t>> by_group(n);
    for (const Instance& in : insts) {
      if (in.last != k) continue;
      std::int64_t at = 0;
      for (const std::size_t e : in.idx) {
        if (entries[e].ri == k) at = arrival[e];
      }
      for (const std::size_t e : in.idx) {
        if (entries[e].ri == k) continue;
        const std::size_t ri = static_cast<std::size_t>(entries[e].ri);
        const std::int64_t w = sat_sub(at, arrival[e]);
        sat_acc(wait[ri], w);
        sat_acc(by_group[ri][in.gid], w);
      }
    }
    for (std::size_t ri = 0; ri < n; ++ri) {
      if (wait[ri] <= 0) continue;
      WaitingFor w;
      w.rank = candidates[i].rank;
      w.wait_per_step_ns = per_step(ri, wait[ri]);
      w.wait_pct = pct(ri, wait[ri]);
      if (w.wait_pct < kStragglerMinWaitPct) continue;
      // The wait replaces the rank's own verdict where that verdict rests on
      // it (exposed communication, launched work waiting, nothing clear),
      // or where it is a large share of the step.
      const Verdict own = order[ri]->verdict;
      if (own != Verdict::kCommunicationBound && own != Verdict::kDependencyBound && own != Verdict::kUnclear &&
          w.wait_pct < kWaitingVerdictPct) {
        continue;
      }
      std::int32_t worst = -1;
      for (const auto& [g, ns] : by_group[ri]) {
        if (worst < 0 || ns > by_group[ri][worst]) worst = g;
      }
      w.collective = group_of[static_cast<std::size_t>(worst)].second;
      std::optional<WaitingFor>& slot = out.waiting_for[ri];
      if (!slot || w.wait_per_step_ns > slot->wait_per_step_ns) slot = std::move(w);
    }
  }

  for (Straggler& s : candidates) {
    if (s.named) out.stragglers.push_back(s);
  }
  std::stable_sort(out.stragglers.begin(), out.stragglers.end(), more_wait);
  if (latest < candidates.size()) out.latest = candidates[latest];
  return out;
}

std::string slow_transfer_text(const SlowTransfer& t) {
  return t.group + " (" + t.collective + ", ranks " + rank_list(t.members) + "): its collectives run " +
         format_ns(t.transfer_ns) + " after their last rank arrives where its " + std::to_string(t.peers) +
         (t.peers == 1 ? " peer group takes " : " peer groups take ") + format_ns(t.peers_ns) + " (medians): +" +
         format_ns(t.excess_per_step_ns) + " a step over its " + std::to_string(t.collectives) + " collectives";
}

std::string group_traced_text(const Straggler& s) {
  if (s.group_size <= s.ranks) return "";
  return ", of its group's " + std::to_string(s.group_size) + ": an untraced one may arrive later still";
}

std::string window_late_text(const Straggler& s) {
  return "already late when its window begins: at " + std::to_string(s.late_at_window_start) + " of its " +
         std::to_string(s.last_at) + " late collectives (the first of a recorded window on it) its step starts " +
         format_ns(s.window_start_late_ns) +
         " after the other ranks' (median): the delay is before the window, where its trace cannot show it";
}

std::vector<std::pair<std::int64_t, std::int64_t>> path_by_rank(const CrossRankPath& p) {
  std::map<std::int64_t, std::int64_t> ns;
  for (const PathPart& x : p.parts) {
    if (x.rank >= 0) sat_acc(ns[x.rank], x.per_step_ns);
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> out(ns.begin(), ns.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::string network_who_text(const SlowNetwork& n) {
  std::string out;
  if (!n.suspects.empty()) {
    out += std::string(n.suspects.size() == 1 ? "rank " : "ranks ") + rank_list(n.suspects) +
           (n.suspects.size() == 1 ? " is in the most slow groups: its link is the suspect"
                                   : " are in the most slow groups: their links are the suspects");
  } else {
    out += "no rank is in two slow groups: each group alone says only that one of its ranks has a slow link";
  }
  if (!n.followers.empty()) {
    out += "; ranks " + rank_list(n.followers) +
           " arrive last only because a collective of a slow group ended late on them: not stragglers";
  }
  return out;
}

}  // namespace tprof::internal
