// prof.events() and key_averages() from a Trace, following torch's
// profiler_util.py / profiler.py step by step (docs/torch-table-semantics.md):
//
//   select CPU ops, annotations, runtime calls, device activities
//     │  (drop torch's filtered names; python_function and profiler spans are not events in torch)
//   order by exact start, attribute [memory] by closed interval, leftovers become "[memory]" rows
//     │
//   sort by (start, -end) ── link device activities to the op with their External id
//     │
//   tree per thread (stack) ── merge same-name single children ── backward stacks
//     │
//   self times, device totals (bottom-up) ──▶ StatRow per event ──▶ key_averages groups
#include <algorithm>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "src/analyze/py_repr.h"
#include "src/trace/json_cursor.h"
#include "src/trace/json_value.h"
#include "tprof/key_averages.h"

namespace tprof {

namespace {

using internal::JsonValue;

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

struct Node {
  std::uint32_t event = kNoIndex;  // kNoIndex: synthetic memory row
  std::uint32_t lane = kNoIndex;
  std::int64_t start = 0, end = 0;  // chosen semantics, ns
  std::int64_t exact_start = 0;     // ns as written (order of result.events())
  std::int64_t exact_end = 0;
  StrId name = kEmptyStr;
  bool device = false;
  bool user_annotation = false;  // gpu_user_annotation
  bool frontend = false;         // cpu_op / user_annotation: carries kernels
  bool step = false;             // "ProfilerStep#N"
  std::int64_t external_id = -1;
  std::int64_t cpu_mem = 0, dev_mem = 0;
  std::int64_t kernel_ns = 0;
  std::uint32_t parent = kNoIndex;
  std::vector<std::uint32_t> children;
  bool alive = true;
  bool bw_node = false;
  std::int64_t sequence_nr = -1;
  std::int64_t fwd_thread = 0;
  std::vector<std::string> stack;
  std::string shapes;  // Python repr; "[]" when none
  bool has_shapes = false;
  // derived
  std::int64_t cpu_total = 0, self_cpu = 0, dev_total = 0, self_dev = 0, self_cpu_mem = 0, self_dev_mem = 0;
};

bool is_cpu_event_kind(EventKind k) {
  return k == EventKind::kCpuOp || k == EventKind::kUserAnnotation || k == EventKind::kCudaRuntime ||
         k == EventKind::kCudaDriver || k == EventKind::kOther;
}

bool is_device_event_kind(EventKind k) { return is_device_kind(k) || k == EventKind::kCudaSync; }

// Decodes the args torch keeps per op: shapes, stack, sequence number, fwd thread.
void decode_args(const Trace& t, Node* n, bool shapes, bool stacks) {
  const std::string_view json = t.args_json(n->event);
  if (json.empty()) {
    if (shapes) n->shapes = "[]";
    return;
  }
  auto parsed = JsonValue::parse(json);
  if (!parsed) {
    if (shapes) n->shapes = "[]";
    return;
  }
  const JsonValue& args = *parsed;
  if (shapes) {
    const JsonValue* dims = args.find("Input Dims");
    if (dims != nullptr && dims->is_array()) {
      internal::append_py_repr(*dims, &n->shapes);
      n->has_shapes = !dims->items().empty();
    } else {
      n->shapes = "[]";
    }
  }
  if (stacks) {
    const JsonValue* cs = args.find("Call stack");
    if (cs != nullptr && cs->is_string() && !cs->text().empty()) {
      std::string_view s = cs->text();
      std::size_t pos = 0;
      for (;;) {
        const std::size_t semi = s.find(';', pos);
        const std::string_view frame = s.substr(pos, semi == std::string_view::npos ? s.npos : semi - pos);
        if (keep_frame(frame)) n->stack.emplace_back(frame);
        if (semi == std::string_view::npos) break;
        pos = semi + 1;
      }
    }
    if (const JsonValue* seq = args.find("Sequence number")) n->sequence_nr = seq->int_or(-1);
    if (const JsonValue* fwd = args.find("Fwd thread id")) n->fwd_thread = fwd->int_or(0);
  }
}

}  // namespace

EventList EventList::build(const Trace& t, const EventListOptions& options) {
  EventList out;
  TimeSemantics sem = options.time;
  if (sem == TimeSemantics::kAuto) {
    sem = (t.meta.producer == Producer::kTorchLegacy || t.meta.producer == Producer::kKineto2022)
              ? TimeSemantics::kTruncatedMicros
              : TimeSemantics::kExactNanos;
  }
  out.semantics_ = sem;
  const bool truncate = sem == TimeSemantics::kTruncatedMicros;
  auto to_start = [&](std::int64_t ts) { return truncate ? floor_div(ts, 1000) * 1000 : ts; };
  auto to_dur = [&](std::int64_t dur) { return truncate ? floor_div(dur, 1000) * 1000 : dur; };

  const EventColumns& ev = t.events;
  std::vector<bool> filtered_name(t.strings.size(), false);
  for (std::string_view n : kFilteredNames) {
    if (auto id = t.strings.find(n)) filtered_name[*id] = true;
  }

  // 1. Events torch turns into FunctionEvents, in result.events() order (exact start).
  std::vector<Node> nodes;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kComplete) continue;
    const EventKind k = ev.kind[e];
    const bool dev = is_device_event_kind(k);
    if (!dev) {
      if (!is_cpu_event_kind(k)) continue;
      if (k == EventKind::kOther && t.lanes[ev.lane[e]].kind != LaneKind::kCpu) continue;
    }
    if (filtered_name[ev.name[e]]) continue;
    Node n;
    n.event = e;
    n.lane = ev.lane[e];
    n.exact_start = ev.ts_ns[e];
    n.exact_end = ev.ts_ns[e] + ev.dur_ns[e];
    n.start = to_start(ev.ts_ns[e]);
    n.end = n.start + to_dur(ev.dur_ns[e]);
    n.name = ev.name[e];
    n.device = dev;
    n.user_annotation = k == EventKind::kGpuUserAnnotation;
    n.frontend = k == EventKind::kCpuOp || k == EventKind::kUserAnnotation;
    n.external_id = ev.external_id[e];
    n.step = t.name(e).rfind("ProfilerStep#", 0) == 0;
    if (dev) out.uses_device_ = true;
    nodes.push_back(std::move(n));
  }
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const Node& a, const Node& b) { return a.exact_start < b.exact_start; });

  // 2. Memory: each record counts for every CPU event whose closed interval
  //    holds it (any thread); the rest become top-level "[memory]" rows.
  struct Mem {
    std::int64_t t;
    std::int64_t exact;
    std::uint32_t record;
  };
  std::vector<Mem> mems;
  mems.reserve(t.memory.size());
  for (std::uint32_t i = 0; i < t.memory.size(); ++i) {
    const std::int64_t ts = ev.ts_ns[t.memory[i].event];
    mems.push_back({to_start(ts), ts, i});
  }
  std::stable_sort(mems.begin(), mems.end(), [](const Mem& a, const Mem& b) { return a.exact < b.exact; });
  out.has_memory_records_ = !mems.empty();
  std::vector<Mem> by_t = mems;
  std::stable_sort(by_t.begin(), by_t.end(), [](const Mem& a, const Mem& b) { return a.t < b.t; });
  std::vector<std::int64_t> cpu_prefix(by_t.size() + 1, 0), dev_prefix(by_t.size() + 1, 0);
  for (std::size_t i = 0; i < by_t.size(); ++i) {
    const MemoryRecord& m = t.memory[by_t[i].record];
    cpu_prefix[i + 1] = cpu_prefix[i] + (is_cpu_memory(m.device_type) ? m.bytes : 0);
    dev_prefix[i + 1] = dev_prefix[i] + (is_device_memory(m.device_type) ? m.bytes : 0);
  }
  std::vector<std::int64_t> by_t_times(by_t.size());
  for (std::size_t i = 0; i < by_t.size(); ++i) by_t_times[i] = by_t[i].t;
  // Difference array over by_t marks records covered by some CPU interval.
  std::vector<int> covered(by_t.size() + 1, 0);
  for (Node& n : nodes) {
    if (n.device || by_t.empty()) continue;
    const auto lo = std::lower_bound(by_t_times.begin(), by_t_times.end(), n.start) - by_t_times.begin();
    const auto hi = std::upper_bound(by_t_times.begin(), by_t_times.end(), n.end) - by_t_times.begin();
    if (hi <= lo) continue;
    n.cpu_mem = cpu_prefix[hi] - cpu_prefix[lo];
    n.dev_mem = dev_prefix[hi] - dev_prefix[lo];
    ++covered[lo];
    --covered[hi];
  }
  std::vector<bool> used(t.memory.size(), false);
  for (std::size_t i = 0, run = 0; i < by_t.size(); ++i) {
    run += covered[i];
    used[by_t[i].record] = run > 0;
  }
  const StrId memory_name = t.strings.find("[memory]").value_or(kEmptyStr);
  for (const Mem& m : mems) {
    if (used[m.record]) continue;
    const MemoryRecord& rec = t.memory[m.record];
    Node n;
    n.lane = ev.lane[rec.event];
    n.start = n.end = m.t;
    n.exact_start = n.exact_end = m.exact;
    n.name = memory_name;
    n.cpu_mem = is_cpu_memory(rec.device_type) ? rec.bytes : 0;
    n.dev_mem = is_device_memory(rec.device_type) ? rec.bytes : 0;
    nodes.push_back(std::move(n));
  }

  // 3. torch's order: (start, -end), stable.
  std::stable_sort(nodes.begin(), nodes.end(), [](const Node& a, const Node& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  const std::uint32_t count = static_cast<std::uint32_t>(nodes.size());

  // 4. Device activities charge their time to the op(s) with their External
  //    id; runtime calls move to that op's thread.
  std::unordered_map<std::int64_t, std::vector<std::uint32_t>> frontend_by_id;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (nodes[i].frontend && nodes[i].external_id >= 0) frontend_by_id[nodes[i].external_id].push_back(i);
  }
  for (std::uint32_t i = 0; i < count; ++i) {
    Node& n = nodes[i];
    if (n.external_id <= 0 || n.frontend) continue;
    auto it = frontend_by_id.find(n.external_id);
    if (it == frontend_by_id.end()) continue;
    for (std::uint32_t f : it->second) {
      if (n.device) {
        nodes[f].kernel_ns += n.end - n.start;
      } else {
        n.lane = nodes[f].lane;
      }
    }
  }

  // 5. Tree per thread: an event's parent is the innermost earlier event on
  //    its thread that contains it; partial overlaps never nest.
  {
    std::vector<std::uint32_t> order;
    order.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      if (!nodes[i].device) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return nodes[a].lane < nodes[b].lane; });
    std::vector<std::uint32_t> stack;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const std::uint32_t i = order[k];
      if (k == 0 || nodes[order[k - 1]].lane != nodes[i].lane) stack.clear();
      Node& n = nodes[i];
      while (!stack.empty()) {
        Node& p = nodes[stack.back()];
        if (n.start >= p.end || n.end > p.end) {
          stack.pop_back();
        } else {
          p.children.push_back(i);
          n.parent = stack.back();
          break;
        }
      }
      stack.push_back(i);
    }
  }

  // 6. Same-name single children merge into their parent, until stable.
  auto key_of = [&](const Node& n) { return n.step ? std::string_view("ProfilerStep*") : t.str(n.name); };
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<std::uint32_t> dropped;
    for (std::uint32_t i = 0; i < count; ++i) {
      Node& n = nodes[i];
      if (!n.alive || n.parent == kNoIndex) continue;
      Node& p = nodes[n.parent];
      if (key_of(p) != key_of(n) || p.children.size() != 1) continue;
      p.children = n.children;
      p.kernel_ns = n.kernel_ns;  // torch lifts the child's kernels
      for (std::uint32_t c : n.children) nodes[c].parent = n.parent;
      dropped.push_back(i);
    }
    for (std::uint32_t i : dropped) nodes[i].alive = false;
    changed = !dropped.empty();
  }

  // Args torch keeps per op, decoded only when asked for.
  if (options.with_shapes || options.with_stacks) {
    for (Node& n : nodes) {
      if (!n.alive) continue;
      if (n.event == kNoIndex || n.device) {
        if (options.with_shapes) n.shapes = "[]";
        continue;
      }
      decode_args(t, &n, options.with_shapes, options.with_stacks);
    }
  }

  // 7. Backward ops show the stack of the forward op with their node's
  //    (sequence number, forward thread). The trace does not say which ops
  //    are backward nodes; one is a cpu_op lying inside (exact ns, same
  //    thread) "autograd::engine::evaluate_function: <its name>". "Fwd thread
  //    id" 1 (torch's first profiled thread) is the thread whose tid is the pid.
  if (options.with_stacks) {
    std::unordered_map<std::uint64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> evals;
    auto eval_key = [](std::uint32_t lane, StrId name) { return (static_cast<std::uint64_t>(lane) << 32) | name; };
    for (const Node& n : nodes) {
      if (n.event == kNoIndex || n.device) continue;
      std::string_view name = t.str(n.name);
      if (name.rfind(kEvalPrefix, 0) != 0) continue;
      if (auto inner = t.strings.find(name.substr(kEvalPrefix.size()))) {
        evals[eval_key(t.events.lane[n.event], *inner)].push_back({n.exact_start, n.exact_end});
      }
    }
    for (Node& n : nodes) {
      if (n.event == kNoIndex || n.device) continue;
      auto it = evals.find(eval_key(t.events.lane[n.event], n.name));
      if (it == evals.end()) continue;
      for (const auto& [s, e] : it->second) {
        if (s <= n.exact_start && n.exact_end <= e) n.bw_node = true;
      }
    }
    std::uint32_t main_lane = kNoIndex;
    for (std::uint32_t l = 0; l < t.lanes.size(); ++l) {
      const Lane& lane = t.lanes[l];
      if (lane.kind == LaneKind::kCpu && !lane.pid.is_str && !lane.tid.is_str && lane.pid.num == lane.tid.num) {
        main_lane = l;
        break;
      }
    }
    auto bw_parent = [&](std::uint32_t i) {
      while (i != kNoIndex && !nodes[i].bw_node) i = nodes[i].parent;
      return i;
    };
    std::unordered_map<std::int64_t, std::unordered_map<std::uint32_t, std::uint32_t>> fwd;  // seq -> lane -> node
    for (std::uint32_t i = 0; i < count; ++i) {
      if (!nodes[i].alive || bw_parent(i) != kNoIndex) continue;
      fwd[nodes[i].sequence_nr].try_emplace(nodes[i].lane, i);
    }
    std::vector<std::vector<std::string>> new_stacks(count);
    std::vector<bool> replaced(count, false);
    for (std::uint32_t i = 0; i < count; ++i) {
      if (!nodes[i].alive) continue;
      const std::uint32_t p = bw_parent(i);
      if (p == kNoIndex) continue;
      replaced[i] = true;
      const std::uint32_t fwd_lane = nodes[p].fwd_thread == 1 ? main_lane : kNoIndex;
      auto s = fwd.find(nodes[p].sequence_nr);
      if (s == fwd.end()) continue;
      auto f = s->second.find(fwd_lane);
      if (f != s->second.end()) new_stacks[i] = nodes[f->second].stack;
    }
    for (std::uint32_t i = 0; i < count; ++i) {
      if (replaced[i]) nodes[i].stack = std::move(new_stacks[i]);
    }
  }

  // 8. Derived times, children before parents (a parent sorts before its children).
  for (std::uint32_t i = count; i-- > 0;) {
    Node& n = nodes[i];
    if (!n.alive) continue;
    if (n.device) {
      n.dev_total = n.self_dev = n.end - n.start;
      continue;
    }
    n.cpu_total = n.end - n.start;
    std::int64_t child_cpu = 0, child_dev = 0, child_cpu_mem = 0, child_dev_mem = 0;
    for (std::uint32_t c : n.children) {
      child_cpu += nodes[c].cpu_total;
      child_dev += nodes[c].dev_total;
      child_cpu_mem += nodes[c].cpu_mem;
      child_dev_mem += nodes[c].dev_mem;
    }
    n.self_cpu = n.cpu_total - child_cpu;
    n.dev_total = n.kernel_ns + child_dev;
    n.self_dev = n.dev_total - child_dev;
    n.self_cpu_mem = n.cpu_mem - child_cpu_mem;
    n.self_dev_mem = n.dev_mem - child_dev_mem;
  }

  // 9. Rows.
  std::vector<std::uint32_t> row_of(count, kNoIndex);
  for (std::uint32_t i = 0; i < count; ++i) {
    if (!nodes[i].alive) continue;
    row_of[i] = static_cast<std::uint32_t>(out.rows_.size());
    out.rows_.emplace_back();
  }
  out.parent_.assign(out.rows_.size(), kNoIndex);
  for (std::uint32_t i = 0; i < count; ++i) {
    Node& n = nodes[i];
    if (!n.alive) continue;
    StatRow& r = out.rows_[row_of[i]];
    r.key = key_of(n);
    r.count = 1;
    r.cpu_time_total_ns = n.cpu_total;
    r.self_cpu_time_total_ns = n.self_cpu;
    r.device_time_total_ns = out.uses_device_ ? n.dev_total : 0;
    r.self_device_time_total_ns = out.uses_device_ ? n.self_dev : 0;
    r.cpu_memory_usage = n.cpu_mem;
    r.self_cpu_memory_usage = n.device ? 0 : n.self_cpu_mem;
    r.device_memory_usage = n.dev_mem;
    r.self_device_memory_usage = n.device ? 0 : n.self_dev_mem;
    r.is_device = n.device;
    r.is_user_annotation = n.user_annotation;
    r.has_parent = n.parent != kNoIndex;
    r.input_shapes = std::move(n.shapes);
    r.has_input_shapes = n.has_shapes;
    r.stack = std::move(n.stack);
    r.event = n.event;
    r.lane = n.lane;
    r.start_ns = n.start;
    r.end_ns = n.end;
    if (n.parent != kNoIndex) out.parent_[row_of[i]] = row_of[n.parent];
  }
  return out;
}

std::vector<StatRow> EventList::key_averages(bool group_by_input_shape, int group_by_stack_n) const {
  std::vector<StatRow> out;
  std::unordered_map<std::string, std::size_t> index;
  std::string key;
  for (const StatRow& r : rows_) {
    key.clear();
    key.append(r.key);
    key.push_back('\x1f');
    key.push_back(r.is_device ? 'D' : 'C');
    key.push_back(r.is_user_annotation ? 'U' : '-');
    if (group_by_input_shape) {
      key.push_back('\x1f');
      key.append(r.input_shapes);
    }
    for (int i = 0; i < group_by_stack_n && i < static_cast<int>(r.stack.size()); ++i) {
      key.push_back('\x1e');
      key.append(r.stack[static_cast<std::size_t>(i)]);
    }
    auto [it, added] = index.try_emplace(key, out.size());
    if (added) {
      StatRow a;
      a.key = r.key;
      a.is_async = r.is_async;
      a.is_device = r.is_device;
      a.is_user_annotation = r.is_user_annotation;
      a.has_parent = r.has_parent;
      a.input_shapes = group_by_input_shape ? r.input_shapes : std::string();
      a.has_input_shapes = group_by_input_shape && r.has_input_shapes;
      const std::size_t n = std::min<std::size_t>(r.stack.size(), static_cast<std::size_t>(std::max(0, group_by_stack_n)));
      a.stack.assign(r.stack.begin(), r.stack.begin() + static_cast<std::ptrdiff_t>(n));
      a.event = r.event;
      a.lane = r.lane;
      a.start_ns = r.start_ns;
      a.end_ns = r.end_ns;
      out.push_back(std::move(a));
    }
    StatRow& a = out[it->second];
    a.count += r.count;
    a.cpu_time_total_ns += r.cpu_time_total_ns;
    a.self_cpu_time_total_ns += r.self_cpu_time_total_ns;
    a.device_time_total_ns += r.device_time_total_ns;
    a.self_device_time_total_ns += r.self_device_time_total_ns;
    a.cpu_memory_usage += r.cpu_memory_usage;
    a.self_cpu_memory_usage += r.self_cpu_memory_usage;
    a.device_memory_usage += r.device_memory_usage;
    a.self_device_memory_usage += r.self_device_memory_usage;
  }
  return out;
}

}  // namespace tprof
