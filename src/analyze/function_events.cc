// prof.events() and key_averages() from a Trace, following torch's
// profiler_util.py / profiler.py step by step (docs/torch-table-semantics.md):
//
//   select CPU ops, annotations, runtime calls, device activities
//     │  (torch's filtered names dropped; python_function and profiler spans are not events to torch)
//   [memory] records by closed interval (any thread); leftovers become "[memory]" rows
//     │
//   device activity time → the op(s) with its External id; runtime calls move to that op's thread
//     │
//   per thread, in (start, -end) order: tree by a stack ── merge same-name single children
//     │
//   backward stacks (only with stacks) ── self / total CPU and device times, bottom-up
//     │
//   key_averages: groups keyed by (name, device, user annotation[, shapes][, stack]),
//                 rows in order of first appearance
//
// Everything is kept in flat columns and ordered with radix sorts: a
// gigabyte trace has millions of FunctionEvents.
#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "src/analyze/py_repr.h"
#include "src/base/radix_sort.h"
#include "src/base/saturate.h"
#include "src/trace/json_value.h"
#include "tprof/key_averages.h"

namespace tprof {

namespace {

using internal::JsonValue;

constexpr std::uint32_t kStepKey = 0xfffffffeu;       // key of every "ProfilerStep#N"
constexpr std::uint32_t kMemoryBit = 0x80000000u;     // event_: a leftover memory record
constexpr std::uint32_t kNoShapes = 0xffffffffu;

enum Flag : std::uint8_t {
  kDevice = 1,
  kUserAnnotation = 2,  // gpu_user_annotation: kept out of the "Self CUDA" total
  kFrontend = 4,        // cpu_op / user_annotation: carries kernels
  kDead = 8,            // merged into its parent
  kBackwardNode = 16,
  kHasShapes = 32,
};

constexpr std::string_view kFilteredNames[] = {
    "[memory]",
    "[OutOfMemory]",
    "profiler::_record_function_enter",
    "profiler::_record_function_enter_new",
    "profiler::_record_function_exit",
    "aten::is_leaf",
    "aten::output_nr",
    "aten::_version",
};

constexpr std::string_view kEvalPrefix = "autograd::engine::evaluate_function: ";

// Stack frames torch drops (profiler_util._filter_stack_entry).
bool keep_frame(std::string_view entry) {
  static constexpr std::pair<std::string_view, std::string_view> kDrop[] = {
      {"autograd/__init__", "_make_grads"},         {"autograd/__init__", "backward"},
      {"torch/tensor", "backward"},                 {"_internal/common_utils", "prof_callable"},
      {"_internal/common_utils", "prof_func_call"}, {"_internal/common_utils", "prof_meth_call"},
  };
  for (const auto& [a, b] : kDrop) {
    if (entry.find(a) != std::string_view::npos && entry.find(b) != std::string_view::npos) return false;
  }
  return true;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// c10::DeviceType values of memory records.
bool is_cpu_memory(std::int16_t device_type) { return device_type == 0 || device_type == 2 || device_type == 5; }
bool is_device_memory(std::int16_t device_type) {
  return device_type == 1 || device_type == 6 || device_type == 20;  // CUDA, HIP, PrivateUse1
}

bool is_cpu_event_kind(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kCudaRuntime ||
         k == EventKind::kCudaDriver || k == EventKind::kOther;
}

// Device activity: kernels, copies, memsets and gpu_user_annotation spans.
// Not cuda_sync (torch's enable_cuda_sync_events): torch 2.x makes those
// FunctionEvents of device type CUDA too, counting the host's wait as Self
// CUDA; tprof leaves them out of the table altogether (issue 22), so the
// table of a trace with sync events is the table of the same run without
// them (torch's default), and Self CUDA time total is the device work's.
bool is_device_event_kind(EventKind k) { return is_device_kind(k); }

}  // namespace

// Builds an EventList's columns; a class so it can reach the private members.
class EventListBuilder {
 public:
  EventListBuilder(const Trace& t, const EventListOptions& o, EventList* out) : t_(t), o_(o), l_(*out) {}
  void run();

 private:
  void select_events();
  void attribute_memory(const std::vector<std::uint32_t>& order);
  void link_device_activity();
  template <class Linked>
  void move_unlinked_runtime_calls(Linked linked);
  std::uint32_t main_thread_lane() const;
  std::vector<std::uint32_t> lane_order() const;
  void build_trees(const std::vector<std::uint32_t>& order);
  void merge_duplicates(const std::vector<std::uint32_t>& order);
  void decode_args();
  void backward_stacks();
  void derive(const std::vector<std::uint32_t>& order);

  const Trace& t_;
  const EventListOptions& o_;
  EventList& l_;
  bool truncate_ = false;
  // "External id" of event i (torch's correlation id of CPU ops); -1 for memory rows.
  std::int64_t external(std::size_t i) const {
    return (l_.event_[i] & kMemoryBit) ? -1 : t_.events.external_id[l_.event_[i]];
  }
  std::vector<std::int64_t> sequence_nr_, fwd_thread_;  // with stacks only
};

namespace {

std::int64_t to_start(bool truncate, std::int64_t ts) { return truncate ? floor_div(ts, 1000) * 1000 : ts; }

}  // namespace

void EventListBuilder::select_events() {
  const EventColumns& ev = t_.events;
  std::vector<std::uint8_t> name_class(t_.strings.size(), 0);  // 1 filtered, 2 step
  for (std::string_view n : kFilteredNames) {
    if (auto id = t_.strings.find(n)) name_class[*id] = 1;
  }
  for (StrId s = 0; s < t_.strings.size(); ++s) {
    if (t_.strings.str(s).rfind("ProfilerStep#", 0) == 0) name_class[s] = 2;
  }
  std::size_t complete = 0;
  for (Phase p : ev.phase) complete += p == Phase::kComplete;
  l_.start_.reserve(complete);
  l_.end_.reserve(complete);
  l_.key_.reserve(complete);
  l_.event_.reserve(complete);
  l_.lane_.reserve(complete);
  l_.flags_.reserve(complete);
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kComplete) continue;
    const EventKind k = ev.kind[e];
    const bool dev = is_device_event_kind(k);
    if (!dev) {
      if (!is_cpu_event_kind(k)) continue;
      if (k == EventKind::kOther && t_.lanes[ev.lane[e]].kind != LaneKind::kCpu) continue;
    }
    const StrId name = ev.name[e];
    if (name_class[name] == 1) continue;
    const std::int64_t start = to_start(truncate_, ev.ts_ns[e]);
    l_.start_.push_back(start);
    l_.end_.push_back(start + (truncate_ ? floor_div(ev.dur_ns[e], 1000) * 1000 : ev.dur_ns[e]));
    l_.key_.push_back(name_class[name] == 2 ? kStepKey : name);
    l_.event_.push_back(e);
    l_.lane_.push_back(ev.lane[e]);
    std::uint8_t f = 0;
    if (dev) f |= kDevice;
    if (k == EventKind::kGpuUserAnnotation) f |= kUserAnnotation;
    if (k == EventKind::kCpuOp || k == EventKind::kUserAnnotation) f |= kFrontend;
    l_.flags_.push_back(f);
    if (dev) l_.uses_device_ = true;
  }
}

void EventListBuilder::attribute_memory(const std::vector<std::uint32_t>& order) {
  const EventColumns& ev = t_.events;
  const std::size_t nm = t_.memory.size();
  l_.has_memory_records_ = nm > 0;
  if (nm == 0 || !o_.with_memory) return;
  // Records by truncated time (stable: exact time, then file order).
  std::vector<std::uint32_t> recs(nm);
  std::vector<std::uint64_t> keys(nm);
  std::int64_t lo = INT64_MAX;
  for (const MemoryRecord& m : t_.memory) lo = std::min(lo, ev.ts_ns[m.event]);
  for (std::uint32_t i = 0; i < nm; ++i) {
    recs[i] = i;
    keys[i] = static_cast<std::uint64_t>(ev.ts_ns[t_.memory[i].event] - lo);
  }
  internal::radix_sort(&keys, &recs);  // exact order first (stable base for the next sort)
  std::vector<std::int64_t> times(nm);
  for (std::uint32_t i = 0; i < nm; ++i) {
    times[i] = to_start(truncate_, ev.ts_ns[t_.memory[recs[i]].event]);
    keys[i] = static_cast<std::uint64_t>(times[i] - to_start(truncate_, lo));
  }
  internal::radix_sort(&keys, &recs);
  for (std::uint32_t i = 0; i < nm; ++i) times[i] = to_start(truncate_, ev.ts_ns[t_.memory[recs[i]].event]);
  std::vector<std::int64_t> cpu_prefix(nm + 1, 0), dev_prefix(nm + 1, 0);
  for (std::size_t i = 0; i < nm; ++i) {
    const MemoryRecord& m = t_.memory[recs[i]];
    cpu_prefix[i + 1] = internal::sat_add(cpu_prefix[i], is_cpu_memory(m.device_type) ? m.bytes : 0);
    dev_prefix[i + 1] = internal::sat_add(dev_prefix[i], is_device_memory(m.device_type) ? m.bytes : 0);
  }
  const std::size_t n = l_.start_.size();
  l_.cpu_mem_.assign(n, 0);
  l_.dev_mem_.assign(n, 0);
  std::vector<std::int32_t> covered(nm + 1, 0);
  // Each thread's events come in start order: the first record at or after
  // the start only moves forward, and the records up to the end are found by
  // galloping from there (most ops hold few records).
  std::size_t a = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::uint32_t i = order[k];
    if (k == 0 || l_.lane_[order[k - 1]] != l_.lane_[i]) {
      a = static_cast<std::size_t>(std::lower_bound(times.begin(), times.end(), l_.start_[i]) - times.begin());
    }
    while (a < nm && times[a] < l_.start_[i]) ++a;
    std::size_t from = a, to = a, step = 1;
    while (to < nm && times[to] <= l_.end_[i]) {
      from = to + 1;
      to = a + step;
      step *= 2;
    }
    to = std::min(to, nm);
    const std::size_t b = static_cast<std::size_t>(
        std::upper_bound(times.begin() + static_cast<std::ptrdiff_t>(from), times.begin() + static_cast<std::ptrdiff_t>(to),
                         l_.end_[i]) -
        times.begin());
    if (b <= a) continue;
    l_.cpu_mem_[i] = internal::sat_sub(cpu_prefix[b], cpu_prefix[a]);
    l_.dev_mem_[i] = internal::sat_sub(dev_prefix[b], dev_prefix[a]);
    ++covered[a];
    --covered[b];
  }
  // Records no CPU event holds become "[memory]" rows, as torch adds them.
  std::vector<std::uint32_t> leftover;
  std::int32_t run = 0;
  for (std::size_t i = 0; i < nm; ++i) {
    run += covered[i];
    if (run == 0) leftover.push_back(recs[i]);
  }
  std::sort(leftover.begin(), leftover.end(), [&](std::uint32_t x, std::uint32_t y) {
    const std::int64_t tx = ev.ts_ns[t_.memory[x].event], ty = ev.ts_ns[t_.memory[y].event];
    return tx != ty ? tx < ty : x < y;
  });
  const StrId memory_name = t_.strings.find("[memory]").value_or(kEmptyStr);
  for (std::uint32_t r : leftover) {
    const MemoryRecord& m = t_.memory[r];
    const std::int64_t at = to_start(truncate_, ev.ts_ns[m.event]);
    l_.start_.push_back(at);
    l_.end_.push_back(at);
    l_.key_.push_back(memory_name);
    l_.event_.push_back(kMemoryBit | r);
    l_.lane_.push_back(ev.lane[m.event]);
    l_.flags_.push_back(0);
    l_.cpu_mem_.push_back(is_cpu_memory(m.device_type) ? m.bytes : 0);
    l_.dev_mem_.push_back(is_device_memory(m.device_type) ? m.bytes : 0);
  }
}

void EventListBuilder::link_device_activity() {
  const std::size_t n = l_.start_.size();
  l_.self_device_.assign(n, 0);
  // External id -> frontend events, as a dense table when ids are compact
  // (torch numbers them from 1), else sorted pairs.
  std::int64_t max_id = -1;
  std::size_t frontends = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if ((l_.flags_[i] & kFrontend) && external(i) >= 0) {
      max_id = std::max(max_id, external(i));
      ++frontends;
    }
  }
  if (frontends == 0) {
    for (std::size_t i = 0; i < n; ++i) {
      if (l_.flags_[i] & kDevice) l_.self_device_[i] = l_.end_[i] - l_.start_[i];
    }
    move_unlinked_runtime_calls([](std::size_t) { return false; });
    return;
  }
  // Per External id: the device time of its device events, and the last
  // frontend event carrying it (in event order). Every frontend with the id
  // gets the id's whole device time, and a runtime call joins the last one's
  // thread: what visiting each (device event, frontend) pair gave, in one
  // pass each (visiting the pairs was quadratic when many kernels and ops
  // share one id: 200k + 200k took 87 s).
  const bool dense = max_id < static_cast<std::int64_t>(4 * n + 1024);
  // Sparse ids: the distinct ids frontends carry, sorted; an id's slot is
  // its place there. Dense ids are their own slots.
  std::vector<std::int64_t> slot_ids;
  if (!dense) {
    for (std::size_t i = 0; i < n; ++i) {
      if ((l_.flags_[i] & kFrontend) && external(i) >= 0) slot_ids.push_back(external(i));
    }
    std::sort(slot_ids.begin(), slot_ids.end());
    slot_ids.erase(std::unique(slot_ids.begin(), slot_ids.end()), slot_ids.end());
  }
  const std::size_t slots = dense ? static_cast<std::size_t>(max_id) + 1 : slot_ids.size();
  auto slot_of = [&](std::int64_t id) -> std::size_t {
    if (dense) return id >= 0 && id <= max_id ? static_cast<std::size_t>(id) : SIZE_MAX;
    auto it = std::lower_bound(slot_ids.begin(), slot_ids.end(), id);
    return it != slot_ids.end() && *it == id ? static_cast<std::size_t>(it - slot_ids.begin()) : SIZE_MAX;
  };
  std::vector<std::uint32_t> last_frontend(slots, kNoIndex);
  for (std::size_t i = 0; i < n; ++i) {
    if ((l_.flags_[i] & kFrontend) && external(i) >= 0) last_frontend[slot_of(external(i))] = static_cast<std::uint32_t>(i);
  }
  std::vector<std::int64_t> device_ns(slots, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const bool dev = l_.flags_[i] & kDevice;
    if (dev) l_.self_device_[i] = l_.end_[i] - l_.start_[i];
    if (external(i) <= 0 || (l_.flags_[i] & kFrontend)) continue;
    // A gpu_user_annotation carries its CPU annotation's External id in the
    // JSON, but torch links device events by the Kineto event's linked
    // correlation id, which is 0 for it: it stays a row of its own and adds
    // nothing to the annotation's CUDA time (torch 2.11 on an H100,
    // tests/data/gpu/h100-torch-2.11).
    if (l_.flags_[i] & kUserAnnotation) continue;
    const std::size_t slot = slot_of(external(i));
    if (slot == SIZE_MAX || last_frontend[slot] == kNoIndex) continue;
    if (dev) {
      internal::sat_acc(device_ns[slot], l_.end_[i] - l_.start_[i]);
    } else {
      l_.lane_[i] = l_.lane_[last_frontend[slot]];  // a runtime call belongs to its op's thread
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!(l_.flags_[i] & kFrontend) || external(i) < 0) continue;
    const std::size_t slot = slot_of(external(i));
    if (device_ns[slot] != 0) internal::sat_acc(l_.self_device_[i], device_ns[slot]);
  }
  move_unlinked_runtime_calls([&](std::size_t i) {
    const std::size_t slot = external(i) > 0 ? slot_of(external(i)) : SIZE_MAX;
    return slot != SIZE_MAX && last_frontend[slot] != kNoIndex;
  });
}

// A runtime call no op links (no External id a frontend carries) is on the
// thread that stopped the profiler in torch's tree: Kineto events take
// their linked op's thread, else RecordFunction::currentThreadId() when
// the profiler's results are built (collection.cpp, setKinetoTID), the
// program's main thread. Its JSON tid is CUPTI's (issue 38's thirteenth
// round: vLLM's sampled-token syncs, 79 ms of main-thread work inside
// them, sat on a thread of their own, and Self CPU came out 295 ms where
// torch printed 220.551 ms). Only a call on a thread that records no op
// moves: torch before 1.13 kept Kineto's events apart from the ops (its
// 2021 traces' calls share their ops' threads, unlinked), and where no
// thread is the process's main one (tid = pid) they stay where they are.
// The process's main thread: the CPU lane whose tid is its pid (kNoIndex: none).
std::uint32_t EventListBuilder::main_thread_lane() const {
  for (std::uint32_t l = 0; l < t_.lanes.size(); ++l) {
    const Lane& lane = t_.lanes[l];
    if (lane.kind == LaneKind::kCpu && !lane.pid.is_str && !lane.tid.is_str && lane.pid.num == lane.tid.num) return l;
  }
  return kNoIndex;
}

template <class Linked>
void EventListBuilder::move_unlinked_runtime_calls(Linked linked) {
  const std::uint32_t main_lane = main_thread_lane();
  if (main_lane == kNoIndex) return;
  const EventColumns& ev = t_.events;
  std::vector<std::uint8_t> has_ops(t_.lanes.size(), 0);
  for (std::size_t i = 0; i < l_.start_.size(); ++i) {
    if (l_.flags_[i] & kFrontend) has_ops[t_.events.lane[l_.event_[i]]] = 1;
  }
  for (std::size_t i = 0; i < l_.start_.size(); ++i) {
    if (l_.flags_[i] & (kDevice | kFrontend)) continue;
    if (l_.event_[i] & kMemoryBit) continue;
    const EventKind k = ev.kind[l_.event_[i]];
    if (k != EventKind::kCudaRuntime && k != EventKind::kCudaDriver) continue;
    if (!has_ops[ev.lane[l_.event_[i]]] && !linked(i)) l_.lane_[i] = main_lane;
  }
}

// CPU events by (lane, start, -end, exact start, file order): each thread's
// events in torch's (start, -end) order, the order the tree is built in.
std::vector<std::uint32_t> EventListBuilder::lane_order() const {
  const std::size_t n = l_.start_.size();
  std::vector<std::uint32_t> idx;
  idx.reserve(n);
  std::int64_t lo = INT64_MAX, hi = INT64_MIN;
  std::uint32_t max_lane = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (l_.flags_[i] & kDevice) continue;
    idx.push_back(i);
    lo = std::min(lo, l_.start_[i]);
    hi = std::max(hi, l_.start_[i]);
    max_lane = std::max(max_lane, l_.lane_[i]);
  }
  auto tie_less = [&](std::uint32_t a, std::uint32_t b) { return l_.before(a, b); };
  auto full_less = [&](std::uint32_t a, std::uint32_t b) {
    if (l_.lane_[a] != l_.lane_[b]) return l_.lane_[a] < l_.lane_[b];
    if (l_.start_[a] != l_.start_[b]) return l_.start_[a] < l_.start_[b];
    return tie_less(a, b);
  };
  if (idx.empty()) return idx;
  const std::uint64_t span = static_cast<std::uint64_t>(hi - lo);
  if (span >= (1ull << 44) || max_lane >= (1u << 19)) {
    std::sort(idx.begin(), idx.end(), full_less);  // hours-long traces or huge thread counts
    return idx;
  }
  std::vector<std::uint64_t> keys(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    keys[j] = (static_cast<std::uint64_t>(l_.lane_[idx[j]]) << 44) | static_cast<std::uint64_t>(l_.start_[idx[j]] - lo);
  }
  internal::radix_sort(&keys, &idx);
  for (std::size_t a = 0; a < idx.size();) {  // equal (lane, start): order by -end, exact start, index
    std::size_t b = a + 1;
    while (b < idx.size() && keys[b] == keys[a]) ++b;
    if (b - a > 1) std::sort(idx.begin() + static_cast<std::ptrdiff_t>(a), idx.begin() + static_cast<std::ptrdiff_t>(b), tie_less);
    a = b;
  }
  return idx;
}

void EventListBuilder::build_trees(const std::vector<std::uint32_t>& order) {
  l_.parent_.assign(l_.start_.size(), kNoIndex);
  l_.self_device_.resize(l_.start_.size(), 0);
  std::vector<std::uint32_t> stack;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::uint32_t i = order[k];
    if (k == 0 || l_.lane_[order[k - 1]] != l_.lane_[i]) stack.clear();
    while (!stack.empty()) {
      const std::uint32_t p = stack.back();
      if (l_.start_[i] >= l_.end_[p] || l_.end_[i] > l_.end_[p]) {
        stack.pop_back();
      } else {
        l_.parent_[i] = p;
        break;
      }
    }
    stack.push_back(i);
  }
}

void EventListBuilder::merge_duplicates(const std::vector<std::uint32_t>& order) {
  // torch's _remove_dup_nodes: an event whose parent has the same name and
  // exactly one child is deleted; the parent adopts its children and its
  // kernels; repeated until nothing changes. One pass in `order` reaches the
  // same fixed point: parents come before their children, a parent's child
  // count changes only when its single child merges into it, and that
  // child's children — the only events the change concerns — come later.
  const std::size_t n = l_.start_.size();
  std::vector<std::uint32_t> child_count(n, 0);
  for (std::uint32_t i : order) {
    if (l_.parent_[i] != kNoIndex) ++child_count[l_.parent_[i]];
  }
  for (std::uint32_t i : order) {
    std::uint32_t p = l_.parent_[i];
    while (p != kNoIndex && (l_.flags_[p] & kDead)) p = l_.parent_[p];
    l_.parent_[i] = p;
    if (p == kNoIndex || child_count[p] != 1 || l_.key_[p] != l_.key_[i]) continue;
    l_.flags_[i] |= kDead;
    child_count[p] = child_count[i];
    l_.self_device_[p] = l_.self_device_[i];
  }
}

void EventListBuilder::decode_args() {
  const std::size_t n = l_.start_.size();
  if (o_.with_shapes) l_.shapes_.assign(n, kNoShapes);
  if (o_.with_stacks) {
    l_.stack_.assign(n, 0);
    l_.stack_pool_.emplace_back();  // id 0: no frames
    sequence_nr_.assign(n, -1);
    fwd_thread_.assign(n, 0);
  }
  std::unordered_map<std::string, std::uint32_t> shape_ids, stack_ids;
  std::string repr;
  std::vector<std::string> frames;
  for (std::size_t i = 0; i < n; ++i) {
    if ((l_.flags_[i] & (kDevice | kDead)) || (l_.event_[i] & kMemoryBit)) continue;
    const std::string_view json = t_.args_json(l_.event_[i]);
    if (json.empty()) continue;
    auto parsed = JsonValue::parse(json);
    if (!parsed) continue;
    if (o_.with_shapes) {
      const JsonValue* dims = parsed->find("Input Dims");
      if (dims != nullptr && dims->is_array()) {
        repr.clear();
        internal::append_py_repr(*dims, &repr);
        auto [it, added] = shape_ids.try_emplace(repr, static_cast<std::uint32_t>(l_.shape_pool_.size()));
        if (added) l_.shape_pool_.push_back(repr);
        l_.shapes_[i] = it->second;
        if (!dims->items().empty()) l_.flags_[i] |= kHasShapes;
      }
    }
    if (o_.with_stacks) {
      const JsonValue* cs = parsed->find("Call stack");
      if (cs != nullptr && cs->is_string() && !cs->text().empty()) {
        frames.clear();
        std::string_view s = cs->text();
        for (std::size_t pos = 0;;) {
          const std::size_t semi = s.find(';', pos);
          const std::string_view frame = s.substr(pos, semi == std::string_view::npos ? s.npos : semi - pos);
          if (keep_frame(frame)) frames.emplace_back(frame);
          if (semi == std::string_view::npos) break;
          pos = semi + 1;
        }
        std::string joined;
        for (const std::string& f : frames) joined.append(f).push_back('\x1e');
        auto [it, added] = stack_ids.try_emplace(joined, static_cast<std::uint32_t>(l_.stack_pool_.size()));
        if (added) l_.stack_pool_.push_back(frames);
        l_.stack_[i] = it->second;
      }
      if (const JsonValue* seq = parsed->find("Sequence number")) sequence_nr_[i] = seq->int_or(-1);
      if (const JsonValue* fwd = parsed->find("Fwd thread id")) fwd_thread_[i] = fwd->int_or(0);
    }
  }
}

void EventListBuilder::backward_stacks() {
  // Backward ops show the stack of the forward op with their node's
  // (sequence number, forward thread). The trace does not say which ops are
  // backward nodes; one is a cpu_op starting inside (same thread)
  // "autograd::engine::evaluate_function: <its name>". Only its start is
  // checked: with integer µs whose start and duration were truncated
  // separately (the values torch's table uses), the node can end 1 µs after
  // its wrapper. "Fwd thread id" 1 (torch's first profiled thread) is the
  // thread whose tid is the pid.
  const std::size_t n = l_.start_.size();
  const EventColumns& ev = t_.events;
  auto eval_key = [](std::uint32_t lane, StrId name) { return (static_cast<std::uint64_t>(lane) << 32) | name; };
  std::unordered_map<std::uint64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> evals;
  for (std::size_t i = 0; i < n; ++i) {
    if ((l_.flags_[i] & kDevice) || (l_.event_[i] & kMemoryBit) || l_.key_[i] == kStepKey) continue;
    const std::uint32_t e = l_.event_[i];
    const std::string_view name = t_.name(e);
    if (name.rfind(kEvalPrefix, 0) != 0) continue;
    if (auto inner = t_.strings.find(name.substr(kEvalPrefix.size()))) {
      evals[eval_key(ev.lane[e], *inner)].push_back({ev.ts_ns[e], ev.ts_ns[e] + ev.dur_ns[e]});
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if ((l_.flags_[i] & kDevice) || (l_.event_[i] & kMemoryBit) || l_.key_[i] == kStepKey) continue;
    const std::uint32_t e = l_.event_[i];
    auto it = evals.find(eval_key(ev.lane[e], ev.name[e]));
    if (it == evals.end()) continue;
    // Starting inside the wrapper is enough: only backward nodes carry these
    // names, and with start and duration truncated separately (torch 1.13)
    // a node can end a microsecond after its wrapper.
    for (const auto& [s, end] : it->second) {
      if (s <= ev.ts_ns[e] && ev.ts_ns[e] <= end) l_.flags_[i] |= kBackwardNode;
    }
  }
  const std::uint32_t main_lane = main_thread_lane();
  auto bw_parent = [&](std::uint32_t i) {
    while (i != kNoIndex && !(l_.flags_[i] & kBackwardNode)) i = l_.parent_[i];
    return i;
  };
  // The first forward event (in torch's order) of each (sequence number, thread).
  std::unordered_map<std::int64_t, std::unordered_map<std::uint32_t, std::uint32_t>> fwd;
  const std::vector<std::uint32_t> order = l_.torch_order();
  for (std::uint32_t i : order) {
    if ((l_.flags_[i] & kDead) || bw_parent(i) != kNoIndex) continue;
    fwd[sequence_nr_[i]].try_emplace(l_.lane_[i], i);
  }
  std::vector<std::uint32_t> new_stack = l_.stack_;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (l_.flags_[i] & kDead) continue;
    const std::uint32_t p = bw_parent(i);
    if (p == kNoIndex) continue;
    new_stack[i] = 0;
    const std::uint32_t fwd_lane = fwd_thread_[p] == 1 ? main_lane : kNoIndex;
    auto s = fwd.find(sequence_nr_[p]);
    if (s == fwd.end()) continue;
    auto f = s->second.find(fwd_lane);
    if (f != s->second.end()) new_stack[i] = l_.stack_[f->second];
  }
  l_.stack_.swap(new_stack);
}

void EventListBuilder::derive(const std::vector<std::uint32_t>& order) {
  // self = total - children, and device totals bottom-up, in place: children
  // come after their parents in `order`, so walk it backwards.
  const std::size_t n = l_.start_.size();
  const bool memory = !l_.cpu_mem_.empty();
  l_.self_cpu_.resize(n);
  for (std::size_t i = 0; i < n; ++i) l_.self_cpu_[i] = (l_.flags_[i] & kDevice) ? 0 : l_.end_[i] - l_.start_[i];
  l_.device_total_ = l_.self_device_;
  if (memory) {
    l_.self_cpu_mem_ = l_.cpu_mem_;
    l_.self_dev_mem_ = l_.dev_mem_;
  }
  for (std::size_t k = order.size(); k-- > 0;) {
    const std::uint32_t i = order[k];
    const std::uint32_t p = l_.parent_[i];
    if ((l_.flags_[i] & kDead) || p == kNoIndex) continue;
    l_.self_cpu_[p] = internal::sat_sub(l_.self_cpu_[p], l_.end_[i] - l_.start_[i]);
    internal::sat_acc(l_.device_total_[p], l_.device_total_[i]);
    if (memory) {
      l_.self_cpu_mem_[p] = internal::sat_sub(l_.self_cpu_mem_[p], l_.cpu_mem_[i]);
      l_.self_dev_mem_[p] = internal::sat_sub(l_.self_dev_mem_[p], l_.dev_mem_[i]);
    }
  }
  if (!l_.uses_device_) {
    std::fill(l_.device_total_.begin(), l_.device_total_.end(), 0);
    std::fill(l_.self_device_.begin(), l_.self_device_.end(), 0);
  }
}

void EventListBuilder::run() {
  TimeSemantics sem = o_.time;
  if (sem == TimeSemantics::kAuto) {
    // The legacy autograd profiler's FunctionEvents keep fractional µs
    // (cpu_elapsed_us is a double), and its export writes them as they are:
    // torch's table over them does not truncate (issue 38's nineteenth
    // round: a 2021 Lightning export's aten::empty, 402 us, read as 165 us).
    sem = t_.meta.producer == Producer::kKineto2022 ? TimeSemantics::kTruncatedMicros : TimeSemantics::kExactNanos;
  }
  l_.trace_ = &t_;
  l_.semantics_ = sem;
  truncate_ = sem == TimeSemantics::kTruncatedMicros;
  select_events();
  link_device_activity();
  const std::vector<std::uint32_t> order = lane_order();
  // Leftover memory rows are appended here; they hold nothing and sit in no
  // event, so they stay out of `order` and the tree.
  attribute_memory(order);
  build_trees(order);
  merge_duplicates(order);
  if (o_.with_shapes || o_.with_stacks) decode_args();
  if (o_.with_stacks) backward_stacks();
  derive(order);
}

EventList EventList::build(const Trace& trace, const EventListOptions& options) {
  EventList out;
  EventListBuilder(trace, options, &out).run();
  return out;
}

bool EventList::before(std::uint32_t a, std::uint32_t b) const {
  // torch: stable sort by (start, -end) of result.events() (exact start
  // order, then file order) followed by the leftover [memory] rows.
  if (start_[a] != start_[b]) return start_[a] < start_[b];
  if (end_[a] != end_[b]) return end_[a] > end_[b];
  const bool ma = event_[a] & kMemoryBit, mb = event_[b] & kMemoryBit;
  if (ma != mb) return mb;
  const std::int64_t xa = exact_start(a), xb = exact_start(b);
  return xa != xb ? xa < xb : a < b;
}

std::int64_t EventList::exact_start(std::uint32_t i) const {
  const std::uint32_t e = event_[i];
  if (e & kMemoryBit) return trace_->events.ts_ns[trace_->memory[e & ~kMemoryBit].event];
  return trace_->events.ts_ns[e];
}

std::vector<std::uint32_t> EventList::torch_order() const {
  const std::size_t n = start_.size();
  std::vector<std::uint32_t> idx;
  idx.reserve(n);
  std::int64_t lo = INT64_MAX;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (flags_[i] & kDead) continue;
    idx.push_back(i);
    lo = std::min(lo, start_[i]);
  }
  std::vector<std::uint64_t> keys(idx.size());
  for (std::size_t j = 0; j < idx.size(); ++j) keys[j] = static_cast<std::uint64_t>(start_[idx[j]] - lo);
  internal::radix_sort(&keys, &idx);
  auto tie_less = [&](std::uint32_t a, std::uint32_t b) { return before(a, b); };
  for (std::size_t a = 0; a < idx.size();) {
    std::size_t b = a + 1;
    while (b < idx.size() && keys[b] == keys[a]) ++b;
    if (b - a > 1) std::sort(idx.begin() + static_cast<std::ptrdiff_t>(a), idx.begin() + static_cast<std::ptrdiff_t>(b), tie_less);
    a = b;
  }
  return idx;
}

StatRow EventList::row(std::uint32_t i) const {
  StatRow r;
  r.key = key_[i] == kStepKey ? std::string("ProfilerStep*") : std::string(trace_->str(key_[i]));
  r.count = 1;
  const bool dev = flags_[i] & kDevice;
  r.cpu_time_total_ns = dev ? 0 : end_[i] - start_[i];
  r.self_cpu_time_total_ns = dev ? 0 : self_cpu_[i];
  r.device_time_total_ns = device_total_[i];
  r.self_device_time_total_ns = self_device_[i];
  if (!cpu_mem_.empty()) {
    r.cpu_memory_usage = cpu_mem_[i];
    r.device_memory_usage = dev_mem_[i];
    r.self_cpu_memory_usage = dev ? 0 : self_cpu_mem_[i];
    r.self_device_memory_usage = dev ? 0 : self_dev_mem_[i];
  }
  r.is_device = dev;
  r.is_user_annotation = flags_[i] & kUserAnnotation;
  r.has_parent = parent_[i] != kNoIndex;
  if (!shapes_.empty()) {
    r.input_shapes = shapes_[i] == kNoShapes ? std::string("[]") : shape_pool_[shapes_[i]];
    r.has_input_shapes = flags_[i] & kHasShapes;
  }
  if (!stack_.empty()) r.stack = stack_pool_[stack_[i]];
  r.event = (event_[i] & kMemoryBit) ? kNoIndex : event_[i];
  r.lane = lane_[i];
  r.start_ns = start_[i];
  r.end_ns = end_[i];
  return r;
}

std::vector<StatRow> EventList::event_rows() const {
  std::vector<StatRow> rows;
  for (std::uint32_t i : torch_order()) rows.push_back(row(i));
  return rows;
}

std::vector<StatRow> EventList::key_averages(bool group_by_input_shape, int group_by_stack_n) const {
  const std::size_t n = start_.size();
  const bool by_shape = group_by_input_shape && !shapes_.empty();
  const std::size_t stack_n = group_by_stack_n > 0 && !stack_.empty() ? static_cast<std::size_t>(group_by_stack_n) : 0;
  // Group ids: (key, device, user annotation) in a flat table; shapes and
  // stack prefixes, when grouped by, through a hash map on top.
  const std::size_t keys = trace_->strings.size() + 1;
  std::vector<std::uint32_t> flat(by_shape || stack_n ? 0 : keys * 4, kNoIndex);
  std::unordered_map<std::string, std::uint32_t> wide;
  struct Group {
    std::uint32_t first;  // the group's first event in torch's order
    StatRow row;
  };
  std::vector<Group> groups;
  std::vector<std::uint32_t> group_of(n, kNoIndex);
  std::string wide_key;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (flags_[i] & kDead) continue;
    const std::uint32_t key = key_[i] == kStepKey ? static_cast<std::uint32_t>(keys - 1) : key_[i];
    const std::uint32_t variant = (flags_[i] & kDevice ? 1u : 0u) | (flags_[i] & kUserAnnotation ? 2u : 0u);
    std::uint32_t* slot;
    if (flat.empty()) {
      wide_key.assign(reinterpret_cast<const char*>(&key), sizeof key);
      wide_key.push_back(static_cast<char>(variant));
      if (by_shape) {
        const std::uint32_t s = shapes_[i];
        wide_key.append(reinterpret_cast<const char*>(&s), sizeof s);
      }
      if (stack_n) {
        const auto& frames = stack_pool_[stack_[i]];
        for (std::size_t f = 0; f < std::min(stack_n, frames.size()); ++f) wide_key.append(frames[f]).push_back('\x1e');
      }
      slot = &wide.try_emplace(wide_key, kNoIndex).first->second;
    } else {
      slot = &flat[static_cast<std::size_t>(key) * 4 + variant];
    }
    if (*slot == kNoIndex) {
      *slot = static_cast<std::uint32_t>(groups.size());
      groups.push_back({i, {}});
    }
    group_of[i] = *slot;
  }
  // torch orders groups by their first event (in its (start, -end) order).
  auto earlier = [&](std::uint32_t a, std::uint32_t b) { return before(a, b); };
  for (std::uint32_t i = 0; i < n; ++i) {
    if (group_of[i] != kNoIndex && earlier(i, groups[group_of[i]].first)) groups[group_of[i]].first = i;
  }
  for (Group& g : groups) {
    g.row = row(g.first);  // fields copied from the first event
    g.row.count = 0;
    g.row.cpu_time_total_ns = g.row.self_cpu_time_total_ns = 0;
    g.row.device_time_total_ns = g.row.self_device_time_total_ns = 0;
    g.row.cpu_memory_usage = g.row.self_cpu_memory_usage = 0;
    g.row.device_memory_usage = g.row.self_device_memory_usage = 0;
    if (!by_shape) {
      g.row.input_shapes.clear();
      g.row.has_input_shapes = false;
    }
    if (g.row.stack.size() > stack_n) g.row.stack.resize(stack_n);
  }
  const bool memory = !cpu_mem_.empty();
  for (std::uint32_t i = 0; i < n; ++i) {
    if (group_of[i] == kNoIndex) continue;
    StatRow& r = groups[group_of[i]].row;
    const bool dev = flags_[i] & kDevice;
    ++r.count;
    using internal::sat_acc;
    if (!dev) {
      sat_acc(r.cpu_time_total_ns, end_[i] - start_[i]);
      sat_acc(r.self_cpu_time_total_ns, self_cpu_[i]);
    }
    sat_acc(r.device_time_total_ns, device_total_[i]);
    sat_acc(r.self_device_time_total_ns, self_device_[i]);
    if (memory) {
      sat_acc(r.cpu_memory_usage, cpu_mem_[i]);
      sat_acc(r.device_memory_usage, dev_mem_[i]);
      if (!dev) {
        sat_acc(r.self_cpu_memory_usage, self_cpu_mem_[i]);
        sat_acc(r.self_device_memory_usage, self_dev_mem_[i]);
      }
    }
  }
  std::sort(groups.begin(), groups.end(), [&](const Group& a, const Group& b) { return earlier(a.first, b.first); });
  std::vector<StatRow> out;
  out.reserve(groups.size());
  for (Group& g : groups) out.push_back(std::move(g.row));
  return out;
}

}  // namespace tprof
