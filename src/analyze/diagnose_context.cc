#include "src/analyze/diagnose_context.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <numeric>
#include <unordered_map>

#include "src/analyze/idle.h"
#include "src/analyze/efficiency.h"
#include "src/analyze/intervals.h"
#include "src/analyze/legacy_spans.h"
#include "src/analyze/nesting.h"
#include "src/base/ascii.h"
#include "src/base/radix_sort.h"
#include "src/base/saturate.h"
#include "src/trace/json_value.h"

namespace tprof::internal {

namespace {

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (ascii_lower(s[i]) != prefix[i]) return false;
  }
  return true;
}

std::string id_text(const Trace& t, const TraceId& id) {
  return id.is_str ? std::string(t.str(id.str)) : std::to_string(id.num);
}

}  // namespace

bool contains_ci(std::string_view s, std::string_view needle) {
  for (std::size_t i = 0; i + needle.size() <= s.size(); ++i) {
    if (starts_with_ci(s.substr(i), needle)) return true;
  }
  return false;
}

std::string capitalized(std::string_view text) {
  std::string out(text);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

std::string title_name(std::string_view name) {
  constexpr std::size_t kTitleName = 60;
  return name.size() <= kTitleName ? std::string(name) : std::string(name.substr(0, kTitleName)) + "...";
}

void add_steps(Evidence& ev, std::vector<std::int64_t> steps) {
  constexpr std::size_t kMaxListedSteps = 32;
  const auto n = static_cast<std::int64_t>(steps.size());
  if (steps.size() > kMaxListedSteps) steps.resize(kMaxListedSteps);
  ev.ints("steps", std::move(steps)).num("steps_count", n);
}

std::int64_t upper_median(std::vector<std::int64_t> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

std::int64_t lower_median(std::vector<std::int64_t> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

std::int64_t world_size(const Trace& t) {
  const std::string_view info = t.meta.top_level_json("distributedInfo");
  if (info.empty()) return -1;
  Result<JsonValue> v = JsonValue::parse(info);
  const JsonValue* w = v && v->is_object() ? v->find("world_size") : nullptr;
  std::int64_t out = -1;
  return w != nullptr && w->get_int(&out) && out > 0 ? out : -1;
}

std::int64_t mean_median(std::vector<std::int64_t> v) {
  if (v.empty()) return 0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const std::int64_t hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const std::int64_t lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return std::midpoint(lo, hi);  // lo + (hi - lo) / 2 without the overflow
}

bool records_shapes(const DiagnoseContext& c) {
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) == EventKind::kCpuOp && c.trace.args_json(e).find("\"Input Dims\"") != std::string_view::npos) return true;
  }
  return false;
}

std::string input_dims_text(const Trace& t, std::uint32_t e) {
  static constexpr std::string_view kKeys[] = {"Input Dims"};
  std::string_view v[1];
  const std::string_view raw = t.args_json(e);
  if (raw.empty() || !member_values(raw, kKeys, v)) return {};
  return std::string(v[0]);
}

std::string_view trace_name(const Trace& t) {
  std::string_view name = t.meta.top_level_json("traceName");
  if (name.size() >= 2 && name.front() == '"' && name.back() == '"') name = name.substr(1, name.size() - 2);
  return name;
}

std::string_view trace_host_name(const Trace& t) {
  std::string_view file = trace_name(t);
  if (const std::size_t slash = file.find_last_of("/\\"); slash != std::string_view::npos) file.remove_prefix(slash + 1);
  const std::size_t pid = file.find('_');
  if (file.find(".pt.trace.json") == std::string_view::npos || pid == std::string_view::npos || pid == 0) return {};
  return file.substr(0, pid);
}

std::int64_t mad(std::vector<std::int64_t> v) {
  const std::int64_t m = mean_median(v);
  for (std::int64_t& x : v) x = x > m ? sat_sub(x, m) : sat_sub(m, x);
  return mean_median(std::move(v));
}

std::int64_t nearest_rank(const std::vector<std::int64_t>& sorted, double q) {
  const std::size_t n = sorted.size();
  std::size_t rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
  rank = std::clamp<std::size_t>(rank, 1, n);
  return sorted[rank - 1];
}

bool is_sync_call(std::string_view name) {
  // cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize,
  // cuCtxSynchronize, hipDeviceSynchronize, ...; cudaStreamWaitEvent only
  // orders streams on the device and does not block the host.
  // Cambricon's CNRT: cnrtQueueSync, cnrtSyncDevice.
  return contains_ci(name, "synchronize") || name.starts_with("cnrtQueueSync") || name.starts_with("cnrtSyncDevice") ||
         name.starts_with("cnQueueSync") || name.starts_with("cnCtxSync");
}

bool is_device_free(std::string_view n) {
  return n == "cudaFree" || n == "hipFree" || n == "cuMemFree" || n == "cuMemFree_v2" || n == "cudaFreeAsync" ||
         n == "hipFreeAsync";
}

bool is_device_malloc(std::string_view n) {
  return n == "cudaMalloc" || n == "hipMalloc" || n == "cuMemAlloc" || n == "cuMemAlloc_v2" || n == "cudaMallocAsync" ||
         n == "hipMallocAsync";
}


std::string format_ns(std::int64_t ns) {
  char buf[48];
  const double v = static_cast<double>(ns);
  // Unsigned: -INT64_MIN (a sum saturated downwards) does not exist.
  const std::uint64_t mag = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  if (mag >= 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.3f s", v / 1e9);
  } else if (mag >= 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.3f ms", v / 1e6);
  } else if (mag >= 1'000) {
    std::snprintf(buf, sizeof buf, "%.1f us", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%lld ns", static_cast<long long>(ns));
  }
  return buf;
}

std::string format_pct(double pct) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", pct);
  return buf;
}

namespace {

std::string_view collective_name_arg(const DiagnoseContext& c, std::uint32_t e) {
  const std::string_view args = c.trace.args_json(e);
  if (args.find("Collective name") == std::string_view::npos) return "";
  Result<JsonValue> v = JsonValue::parse(args);
  const JsonValue* n = v && v->is_object() ? v->find("Collective name") : nullptr;
  return n != nullptr && n->is_string() ? collective_kind_of(n->text()) : "";
}

}  // namespace

std::string collective_kind(const DiagnoseContext& c, const DeviceOp& op) {
  std::string_view k = collective_name_arg(c, op.event);
  // The kernel's own name where it says (ncclReduce… under DataParallel's
  // BroadcastBackward op is a reduce), else the ops that launched it.
  if (k.empty()) k = collective_kind_of(c.name(op.event));
  std::uint32_t e = op.launch;
  for (int up = 0; k.empty() && e != kNoIndex && up < 4; ++up) {
    e = c.enclosing_op(e, /*skip_views=*/false);
    if (e == kNoIndex) break;
    k = collective_name_arg(c, e);
    if (k.empty()) k = collective_kind_of(c.name(e));
  }
  if (k.empty()) k = collective_kind_of(c.name(op.event));
  return k.empty() ? "other" : std::string(k);
}

std::string count_of(std::int64_t n, std::string_view noun) {
  std::string s = std::to_string(n) + " " + std::string(noun);
  const bool es = noun.ends_with("s") || noun.ends_with("x") || noun.ends_with("ch") || noun.ends_with("sh");
  if (n != 1) s += es ? "es" : "s";
  return s;
}

namespace {

// A tprof capture of a PyTorch program (DiagnoseContext::is_torch): names
// are interned, so each distinct name is classified once.
bool records_torch(const Trace& t) {
  for (const Process& p : t.processes) {
    if (t.str(p.name).starts_with("python")) return true;
  }
  std::vector<std::int8_t> seen(t.strings.size(), -1);
  const EventColumns& ev = t.events;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    const EventKind k = ev.kind[e];
    if (k == EventKind::kPythonFunction) return true;
    if (k != EventKind::kCpuOp && k != EventKind::kUserAnnotation && k != EventKind::kKernel) continue;
    std::int8_t& s = seen[ev.name[e]];
    if (s < 0) {
      const std::string_view n = t.name(e);
      const bool torch = k == EventKind::kKernel
                             ? n.find("at::") != std::string_view::npos || n.starts_with("triton_")
                             : n.starts_with("aten::") || n.starts_with("Torch-Compiled Region");
      s = torch ? 1 : 0;
    }
    if (s == 1) return true;
  }
  return false;
}

std::vector<StatRow> torch_averages(const Trace& t) {
  EventListOptions o;
  o.with_memory = false;
  return EventList::build(t, o).key_averages();
}

// Event e as a device activity: its lane's device and stream, its span.
DeviceOp device_op(const Trace& t, std::uint32_t e, DeviceClass cls) {
  const EventColumns& ev = t.events;
  const Lane& lane = t.lanes[ev.lane[e]];
  DeviceOp op;
  op.event = e;
  op.lane = ev.lane[e];
  op.device = lane.device;
  op.stream = lane.stream;
  op.start = ev.ts_ns[e];
  op.end = ev.ts_ns[e] + std::max<std::int64_t>(0, ev.dur_ns[e]);
  op.cls = cls;
  return op;
}

}  // namespace

DiagnoseContext::DiagnoseContext(const Trace& original, bool with_averages)
    : retimed_(retime_untimed_device(original)), trace(retimed_.trace ? *retimed_.trace : original) {
  const Trace& t = trace;
  std::future<std::vector<StatRow>> rows;
  if (with_averages) rows = std::async(std::launch::async, torch_averages, std::cref(t));
  steps = compute_steps(t);  // its steps come sorted by start (then event)
  const EventColumns& ev = t.events;
  const std::size_t n = ev.size();
  start_ns = steps.trace_start_ns;  // t.start_ns(), already computed
  end_ns = t.end_ns();
  {
    std::int64_t span_end = INT64_MIN;
    for (std::uint32_t e = 0; e < n; ++e) {
      if (ev.kind[e] == EventKind::kTraceSpan) span_end = std::max(span_end, ev.ts_ns[e] + ev.dur_ns[e]);
    }
    const std::optional<StrId> marker = t.strings.find("Record Window End");
    std::int64_t hi = INT64_MIN;
    bool left_out = false;
    for (std::uint32_t e = 0; e < n; ++e) {
      if (ev.phase[e] == Phase::kMetadata) continue;
      const bool after_stop = span_end != INT64_MIN && ev.ts_ns[e] >= span_end &&
                              t.lanes[ev.lane[e]].kind == LaneKind::kCpu;
      if (after_stop || (marker.has_value() && ev.name[e] == *marker)) {
        left_out = true;
        continue;
      }
      hi = std::max(hi, ev.ts_ns[e] + ev.dur_ns[e]);
    }
    if (left_out && hi != INT64_MIN && hi < end_ns) end_ns = hi;
  }
  // Names are interned: classify each distinct kernel name once.
  std::vector<std::int8_t> comm_name(t.strings.size(), -1);
  std::vector<std::uint32_t> device_events, range_events;
  std::vector<std::pair<std::int64_t, std::uint32_t>> launch_corr;
  for (std::uint32_t e = 0; e < n; ++e) {
    const EventKind k = ev.kind[e];
    switch (k) {
      case EventKind::kKernel:
      case EventKind::kGpuMemcpy:
      case EventKind::kGpuMemset:
        device_events.push_back(e);
        break;
      case EventKind::kProfilerRange:
        range_events.push_back(e);
        break;
      case EventKind::kCudaRuntime:
      case EventKind::kCudaDriver:
      case EventKind::kCudaSync:
        if (t.lanes[ev.lane[e]].kind == LaneKind::kCpu) {
          runtime.push_back(e);
          const std::string_view rn = t.name(e);
          if (!hip_ && rn.starts_with("hip")) hip_ = true;
          if (is_graph_launch(rn)) ++graph_launches_;
          if (rn.find("StreamBeginCapture") != std::string_view::npos) ++graph_captures_;
          if (ev.correlation[e] >= 0) launch_corr.emplace_back(ev.correlation[e], e);
        }
        break;
      case EventKind::kCpuOp:
      case EventKind::kUserAnnotation:
      case EventKind::kPythonFunction:
        if (t.lanes[ev.lane[e]].kind == LaneKind::kCpu) host_ops.push_back(e);
        break;
      default:
        break;
    }
  }
  torch_ = t.meta.producer != Producer::kTprof || records_torch(t);
  // Kineto's first category names ("Operator", "Runtime": PyTorch 1.8 and
  // before; 1.9 renamed them cpu_op and cuda_runtime).
  if (torch_) {
    for (std::uint32_t e : host_ops) {
      if (ev.kind[e] != EventKind::kCpuOp) continue;
      torch_before_graphs_ = t.str(ev.cat[e]) == "Operator";
      break;
    }
    // torch's recurrent layers (nn.GRU, nn.LSTM, nn.RNN), where Dynamo
    // breaks its graph (torch._dynamo.config.allow_rnn is off by default).
    for (std::uint32_t e : host_ops) {
      if (ev.kind[e] != EventKind::kCpuOp) continue;
      const std::string_view op = t.str(ev.name[e]);
      if (op == "aten::gru" || op == "aten::lstm" || op == "aten::rnn_tanh" || op == "aten::rnn_relu" ||
          op == "aten::_cudnn_rnn" || op == "aten::miopen_rnn") {
        runs_rnn_ = true;
        break;
      }
    }
    // A Kineto trace of torch 2.0 or older stamps its events with epoch
    // time: one dated before PyTorch 2.0's release comes from an older
    // PyTorch (a date before 2018 is no epoch time: steady-clock stamps).
    constexpr std::int64_t kTorch19ReleaseNs = 1'623'715'200'000'000'000;   // 2021-06-15 00:00 UTC
    constexpr std::int64_t kTorch110ReleaseNs = 1'634'774'400'000'000'000;  // 2021-10-21 00:00 UTC
    constexpr std::int64_t kTorch20ReleaseNs = 1'678'838'400'000'000'000;   // 2023-03-15 00:00 UTC
    constexpr std::int64_t kYear2018Ns = 1'514'764'800'000'000'000;         // 2018-01-01 00:00 UTC
    const bool dated = t.meta.producer == Producer::kKineto2022 && start_ns >= kYear2018Ns;
    torch_before_inference_mode_ = torch_before_graphs_ || (dated && start_ns < kTorch19ReleaseNs);
    if (!torch_before_graphs_ && dated && start_ns < kTorch110ReleaseNs) {
      torch_before_graphs_ = torch_before_graphs_by_date_ = true;
    }
    torch_before_compile_ = torch_before_graphs_ || (dated && start_ns < kTorch20ReleaseNs);
  }
  sort_by_time(ev.ts_ns, &runtime);
  sort_by_time(ev.ts_ns, &host_ops);
  sort_by_time(ev.ts_ns, &device_events);  // device activity starts at ts: by start, then index
  launch_by_corr_ = IdIndex(std::move(launch_corr));
  // Correlation ids grow in launch order. Device work whose id is below
  // every recorded launch's, with no launch of its own in the trace, was
  // launched before the recording began: the queue the first step starts
  // behind where it runs in that step, else no step's (issue 38's eleventh
  // round: a CUDA-graph replay launched before ProfilerStep#3 ran 638 us
  // during step 8, and was counted as step 8's).
  std::int64_t first_linked_corr = INT64_MAX;
  for (std::uint32_t e : device_events) {
    const std::int64_t corr = ev.correlation[e];
    if (corr > 0 && corr < first_linked_corr && launch_for_correlation(corr) != kNoIndex) first_linked_corr = corr;
  }
  device.reserve(device_events.size());
  for (std::uint32_t e : device_events) {
    const EventKind k = ev.kind[e];
    DeviceOp op = device_op(t, e, DeviceClass::kCompute);
    if (k == EventKind::kGpuMemcpy) {
      op.cls = DeviceClass::kMemcpy;
    } else if (k == EventKind::kGpuMemset) {
      op.cls = DeviceClass::kMemset;
    } else {
      std::int8_t& comm = comm_name[ev.name[e]];
      if (comm < 0) comm = is_comm_kernel(t.name(e)) ? 1 : 0;
      op.cls = comm ? DeviceClass::kComm : DeviceClass::kCompute;
    }
    const std::int64_t corr = ev.correlation[e];
    if (corr >= 0) op.launch = launch_for_correlation(corr);
    const bool launched_before =
        op.launch == kNoIndex && corr > 0 && first_linked_corr != INT64_MAX && corr < first_linked_corr;
    op.step = step_index_at(op.launch != kNoIndex ? ev.ts_ns[op.launch] : op.start);
    if (launched_before && op.step > 0) op.step = -1;
    op.before_recording = launched_before;
    if (op.cls == DeviceClass::kMemcpy && op.launch != kNoIndex) {
      const CopyKind copy = copy_kind(t.name(e));
      if (copy.direction == CopyDirection::kDtoH && copy.pageable()) {
        pageable_readbacks_.emplace_back(op.launch, op.end - op.start);
      }
    }
    device.push_back(op);
  }
  std::sort(pageable_readbacks_.begin(), pageable_readbacks_.end());
  link_ranges(std::move(range_events));
  // Per device, the merged activity (device is sorted by start already),
  // and all devices' together.
  {
    std::vector<std::pair<std::int32_t, std::vector<Interval>>> by_device;
    std::vector<Interval> all;
    for (const DeviceOp& op : device) {
      auto it = std::find_if(by_device.begin(), by_device.end(), [&](const auto& d) { return d.first == op.device; });
      if (it == by_device.end()) {
        by_device.emplace_back(op.device, std::vector<Interval>{});
        it = by_device.end() - 1;
      }
      std::vector<Interval>& v = it->second;
      if (!v.empty() && op.start <= v.back().end) {
        v.back().end = std::max(v.back().end, op.end);
      } else if (op.end > op.start) {
        v.push_back({op.start, op.end});
      }
      if (!all.empty() && op.start <= all.back().end) {
        all.back().end = std::max(all.back().end, op.end);
      } else if (op.end > op.start) {
        all.push_back({op.start, op.end});
      }
    }
    for (auto& [d, v] : by_device) busy_by_device_.emplace_back(d, CoverageIndex(std::move(v)));
    busy_all_ = CoverageIndex(std::move(all));
  }
  if (rows.valid()) std::call_once(averages_once_, [&] { set_averages(rows.get()); });
}

std::int64_t DiagnoseContext::median_step_idle_ns() const {
  if (!has_device()) return 0;
  std::vector<std::int64_t> idle;
  for (const StepStat& st : steps.steps) idle.push_back(std::max<std::int64_t>(0, st.dur_ns - st.gpu_busy_ns));
  return mean_median(std::move(idle));
}

std::string DiagnoseContext::schedule_call(std::int64_t active) const {
  const std::string n = std::to_string(active);
  return by_tprof() ? "tprof::schedule({.wait = 1, .warmup = 1, .active = " + n + "})"
                    : "torch.profiler.schedule(wait=1, warmup=1, active=" + n + ")";
}

std::string DiagnoseContext::graph_how() const {
  if (torch_before_graphs_) {
    return std::string("torch.cuda.graphs, from PyTorch 1.10: this trace's PyTorch, ") +
           (torch_before_graphs_by_date_ ? "older by its date" : "1.8 or older by its Kineto event names") +
           ", has no graph capture";
  }
  if (torch_ && torch_before_compile_) {
    return "torch.cuda.make_graphed_callables, or torch.cuda.graphs by hand: this trace's PyTorch, older than 2.0 "
           "by its date, has no torch.compile";
  }
  if (torch_ && runs_rnn_) {
    return "torch.cuda.graphs by hand: torch.compile breaks its graph at nn.GRU, nn.LSTM and nn.RNN, which the "
           "trace runs, and replays only the pieces around them";
  }
  if (torch_ && !extension_kernel().empty()) {
    return "torch.cuda.graphs by hand: " + extension_kernel() +
           ", most of the GPU time, is launched outside any ATen op (a C++/CUDA extension), which torch.compile "
           "does not capture unless it is registered as a torch.library custom op";
  }
  if (torch_) return "torch.compile(mode=\"reduce-overhead\")";
  const std::string p = hip_ ? "hip" : "cuda";
  return p + "StreamBeginCapture/" + p + "StreamEndCapture once, then " + p + "GraphLaunch";
}

const std::string& DiagnoseContext::extension_kernel() const {
  std::call_once(extension_once_, [&] {
    if (!torch_) return;
    const EventColumns& ev = trace.events;
    if (std::none_of(host_ops.begin(), host_ops.end(), [&](std::uint32_t e) { return ev.kind[e] == EventKind::kCpuOp; })) {
      return;
    }
    std::int64_t all_ns = 0, outside_ns = 0;
    std::vector<std::pair<std::string_view, std::int64_t>> by_name;
    for (const DeviceOp& op : device) {
      if (ev.kind[op.event] != EventKind::kKernel) continue;
      const std::int64_t d = op.end - op.start;
      all_ns = sat_add(all_ns, d);
      if (op.launch == kNoIndex || ev.external_id[op.launch] > 0) continue;
      const std::string_view call = name(op.launch);
      if (!call.starts_with("cudaLaunchKernel") && !call.starts_with("hipLaunchKernel")) continue;
      if (enclosing_op(op.launch, false) != kNoIndex) continue;
      outside_ns = sat_add(outside_ns, d);
      const std::string_view k = name(op.event);
      auto it = std::find_if(by_name.begin(), by_name.end(), [&](const auto& p) { return p.first == k; });
      if (it == by_name.end()) {
        by_name.emplace_back(k, d);
      } else {
        it->second = sat_add(it->second, d);
      }
    }
    if (by_name.empty() || sat_mul(2, outside_ns) < all_ns) return;
    const auto top = std::max_element(by_name.begin(), by_name.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
    std::string_view k = top->first;  // "void ns::name<...>(...)": ns::name
    if (k.starts_with("void ")) k.remove_prefix(5);
    extension_kernel_ = std::string(k.substr(0, std::min(k.find_first_of("<("), k.size())));
  });
  return extension_kernel_;
}

std::string DiagnoseContext::count_per(std::int64_t n, std::int64_t d) {
  if (n % d == 0) return std::to_string(n / d);
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", static_cast<double>(n) / static_cast<double>(d));
  return b;
}

std::int64_t DiagnoseContext::pageable_readback_ns(std::uint32_t e) const {
  const auto it = std::lower_bound(pageable_readbacks_.begin(), pageable_readbacks_.end(), e,
                                   [](const auto& r, std::uint32_t v) { return r.first < v; });
  return it != pageable_readbacks_.end() && it->first == e ? it->second : -1;
}

bool DiagnoseContext::blocks_host(std::uint32_t e) const {
  const std::string_view n = name(e);
  return is_sync_call(n) || is_blocking_memcpy(n) || pageable_readback_ns(e) >= 0;
}

const std::vector<Interval>& DiagnoseContext::host_waits() const {
  std::call_once(host_waits_once_, [&] {
    std::vector<Interval> waits;
    for (const std::uint32_t e : runtime)
      if (blocks_host(e)) waits.push_back({ts(e), end(e)});
    host_waits_ = merge_intervals(std::move(waits));
  });
  return host_waits_;
}

const std::vector<Interval>& DiagnoseContext::dataloader_scopes() const {
  std::call_once(dataloader_once_, [&] {
    std::vector<Interval> scopes;
    for (const std::uint32_t e : host_ops) {
      const EventKind k = kind(e);
      if ((k == EventKind::kCpuOp || k == EventKind::kUserAnnotation) && is_dataloader_scope(name(e))) {
        scopes.push_back({ts(e), end(e)});
      }
    }
    if (const Interval s = dataloader_startup(); s.end > s.start) scopes.push_back(s);
    dataloader_scopes_ = merge_intervals(std::move(scopes));
  });
  return dataloader_scopes_;
}

bool DiagnoseContext::profiler_event_timing() const {
  std::call_once(profiler_event_timing_once_, [&] {
    std::int64_t records = 0, ops = 0;
    for (const std::uint32_t e : runtime) {
      const std::string_view n = name(e);
      records += n == "cudaEventRecord" || n == "hipEventRecord";
    }
    for (const std::uint32_t e : host_ops) ops += kind(e) == EventKind::kCpuOp;
    profiler_event_timing_ = records >= 100 && ops > 0 && 2 * records >= 3 * ops;
  });
  return profiler_event_timing_;
}

bool DiagnoseContext::first_next_is_startup(std::int64_t first_ns, std::int64_t spawn_ns,
                                            const std::vector<std::int64_t>& later) {
  first_ns = sat_add(first_ns, spawn_ns);
  if (first_ns < kDataLoaderStartupNs && spawn_ns < kWorkerSpawnNs) return false;
  if (later.empty()) return true;
  const std::int64_t longest = *std::max_element(later.begin(), later.end());
  return first_ns >= sat_mul(kFirstNextFactor, upper_median(later)) && sat_mul(2, longest) < first_ns;
}

bool DiagnoseContext::first_next_is_startup(const std::vector<std::uint32_t>& calls, std::int64_t spawn_ns) const {
  if (calls.empty()) return false;
  std::vector<std::int64_t> later;
  later.reserve(calls.size() - 1);
  for (std::size_t i = 1; i < calls.size(); ++i) later.push_back(dur(calls[i]));
  return first_next_is_startup(dur(calls.front()), spawn_ns, later);
}

std::int64_t DiagnoseContext::pinned_htod_copies() const {
  std::int64_t pinned = 0, pageable = 0;
  for (const DeviceOp& op : device) {
    if (op.cls != DeviceClass::kMemcpy) continue;
    const CopyKind k = copy_kind(name(op.event));
    if (k.direction != CopyDirection::kHtoD) continue;
    (k.host == HostMemory::kPinned ? pinned : pageable) += 1;
  }
  return pageable == 0 ? pinned : 0;
}

Interval DiagnoseContext::dataloader_startup() const {
  std::call_once(dataloader_startup_once_, [&] {
    // The multi-process iterator's first __next__, and the ops before it
    // on its thread.
    std::uint32_t first = kNoIndex;
    for (const std::uint32_t e : host_ops) {
      if (is_dataloader_scope(name(e)) && name(e).find("_MultiProcessingDataLoaderIter") != std::string_view::npos) {
        first = e;
        break;
      }
    }
    if (first == kNoIndex) return;
    const std::uint32_t lane = trace.events.lane[first];
    std::vector<std::uint32_t> before;
    for (const std::uint32_t e : host_ops) {
      if (ts(e) >= ts(first)) break;
      if (trace.events.lane[e] == lane && kind(e) == EventKind::kCpuOp) before.push_back(e);
    }
    // The widest stretch with no op between them, right after the
    // iterator's seed draw (aten::random_ then .item(), in
    // _BaseDataLoaderIter.__init__): the workers starting.
    std::int64_t best = 0;
    Interval gap{0, 0};
    std::int64_t reached = INT64_MIN;
    for (std::size_t i = 0; i < before.size(); ++i) {
      const std::uint32_t e = before[i];
      const std::int64_t next = i + 1 < before.size() ? ts(before[i + 1]) : ts(first);
      reached = std::max(reached, end(e));
      if (next - reached <= best) continue;
      bool seed = false;
      for (std::size_t k = i + 1; k-- > 0 && k + 4 > i;) {
        if (name(before[k]) == "aten::random_") seed = true;
      }
      const std::string_view n = name(e);
      if (seed && is_scalar_read(n)) {
        best = next - reached;
        gap = {reached, next};
      }
    }
    if (best >= kWorkerSpawnNs) dataloader_startup_ = gap;
  });
  return dataloader_startup_;
}

const DiagnoseContext::CaptureBlockers& DiagnoseContext::capture_blockers() const {
  std::call_once(capture_blockers_once_, [&] {
    CaptureBlockers& out = capture_blockers_;
    if (steps.steps.empty()) return;
    // Step index -> its first launch call's end and its last one's start.
    std::unordered_map<int, std::pair<std::int64_t, std::int64_t>> launches;
    for (const DeviceOp& op : device) {
      if (op.launch == kNoIndex) continue;
      const int s = step_index_at(ts(op.launch));
      if (s < 0) continue;
      const auto [it, added] = launches.try_emplace(s, end(op.launch), ts(op.launch));
      if (!added) {
        it->second.first = std::min(it->second.first, end(op.launch));
        it->second.second = std::max(it->second.second, ts(op.launch));
      }
    }
    std::unordered_map<std::string, std::int64_t> by_op;
    for (const std::uint32_t e : runtime) {
      if (!blocks_host(e)) continue;
      const std::string_view n = name(e);
      const auto it = launches.find(step_index_at(ts(e)));
      if (it == launches.end() || ts(e) < it->second.first || end(e) > it->second.second) continue;
      ++out.count;
      // The op the program calls: .item() is aten::item around the
      // aten::_local_scalar_dense that copies and waits.
      std::uint32_t op = enclosing_op(e, /*skip_views=*/true);
      if (op != kNoIndex && name(op) == "aten::_local_scalar_dense") {
        const std::uint32_t up = enclosing_op(op, /*skip_views=*/true);
        if (up != kNoIndex && name(up) == "aten::item") op = up;
      }
      // A Python truth test on a tensor (`if mask.all():`, `assert t`) is
      // aten::is_nonzero around that item (issue 38's fourteenth round: a
      // Hugging Face model's attention-mask check, told to drop .item()
      // and nonzero from the loop).
      if (op != kNoIndex && name(op) == "aten::item") {
        const std::uint32_t up = enclosing_op(op, /*skip_views=*/true);
        if (up != kNoIndex && name(up) == "aten::is_nonzero") op = up;
      }
      ++by_op[std::string(op == kNoIndex ? n : name(op))];
    }
    out.ops.assign(by_op.begin(), by_op.end());
    std::sort(out.ops.begin(), out.ops.end(), [](const auto& a, const auto& b) {
      return a.second > b.second || (a.second == b.second && a.first < b.first);
    });
  });
  return capture_blockers_;
}

std::string DiagnoseContext::graph_blocker() const {
  const CaptureBlockers& b = capture_blockers();
  if (b.count <= 0) return "";
  const auto n = static_cast<std::int64_t>(steps.steps.size());
  std::string where;
  for (std::size_t i = 0; i < b.ops.size() && i < 3; ++i) {
    where += (i ? ", " : "") + b.ops[i].first + " x" + std::to_string(b.ops[i].second);
  }
  // "once", "10 times", "2 times a step", "3 times over 4 steps".
  const std::string times = b.count == 1 && n <= 1 ? std::string("once")
                            : n <= 1              ? std::to_string(b.count) + " times"
                            : b.count % n == 0    ? std::to_string(b.count / n) + (b.count == n ? " time" : " times") +
                                                     " a step"
                                                  : std::to_string(b.count) + (b.count == 1 ? " time" : " times") +
                                                     " over " + std::to_string(n) + " steps";
  return "A " + std::string(api()) + " graph (" + graph_how() + ") cannot replay the step yet: it waits for the GPU " +
         times + " in the middle (" + where + "; sync_api), and those waits must go first.";
}

std::string DiagnoseContext::fuse_how() const {
  if (torch_before_graphs_) return "apex's fused layers; torch.compile needs PyTorch 2.0";
  if (torch_) return compile_how();
  return hip_ ? "a fused kernel or a hipBLASLt epilogue" : "a fused kernel or a cuBLASLt epilogue";
}

std::string DiagnoseContext::inference_mode_how() const {
  return torch_before_inference_mode_ ? "torch.no_grad() (torch.inference_mode needs PyTorch 1.9)"
                                      : "torch.inference_mode()";
}

std::string DiagnoseContext::compile_how() const {
  return torch_before_compile_ ? "TorchScript (torch.jit.script; torch.compile needs PyTorch 2.0)" : "torch.compile";
}

DiagnoseContext::LaunchRate DiagnoseContext::launch_rate() const {
  LaunchRate r;
  std::vector<std::uint32_t> calls;
  for (const DeviceOp& op : device) {
    if (op.launch != kNoIndex && (steps.steps.empty() || op.step >= 0)) calls.push_back(op.launch);
  }
  std::sort(calls.begin(), calls.end());
  calls.erase(std::unique(calls.begin(), calls.end()), calls.end());
  r.calls = static_cast<std::int64_t>(calls.size());
  if (!steps.steps.empty()) {
    r.iterations = static_cast<std::int64_t>(steps.steps.size());
    r.unit = "step";
    return r;
  }
  // Without steps: the repeated range (user annotation) whose calls hold
  // the launches.
  std::vector<std::int64_t> launch_ts;
  for (std::uint32_t e : calls) launch_ts.push_back(ts(e));
  std::sort(launch_ts.begin(), launch_ts.end());
  struct Range {
    std::int64_t count = 0, launches = 0;
  };
  std::vector<std::pair<StrId, Range>> named;
  for (std::uint32_t e : host_ops) {
    if (kind(e) != EventKind::kUserAnnotation || dur(e) <= 0) continue;
    const StrId id = trace.events.name[e];
    auto it = std::find_if(named.begin(), named.end(), [&](const auto& x) { return x.first == id; });
    if (it == named.end()) {
      if (named.size() >= 64) continue;  // a range names the loop's body: a few names, not thousands
      named.emplace_back(id, Range{});
      it = named.end() - 1;
    }
    ++it->second.count;
    it->second.launches += std::lower_bound(launch_ts.begin(), launch_ts.end(), end(e)) -
                           std::lower_bound(launch_ts.begin(), launch_ts.end(), ts(e));
  }
  const std::pair<StrId, Range>* best = nullptr;
  for (const auto& x : named) {
    if (x.second.count < 3 || 2 * x.second.launches < r.calls) continue;
    if (best == nullptr || x.second.count > best->second.count) best = &x;
  }
  if (best != nullptr) {
    r.iterations = best->second.count;
    r.unit = "\"" + std::string(trace.str(best->first)) + "\" range";
  }
  return r;
}

std::uint32_t measured_range(const DiagnoseContext& c, std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> launches;
  for (const DeviceOp& op : c.device) {
    if (op.launch != kNoIndex) launches.push_back(c.ts(op.launch));
  }
  std::sort(launches.begin(), launches.end());
  launches.erase(std::unique(launches.begin(), launches.end()), launches.end());
  std::unordered_map<StrId, int> count;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) == EventKind::kUserAnnotation) ++count[c.trace.events.name[e]];
  }
  std::uint32_t best = kNoIndex;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kUserAnnotation || count[c.trace.events.name[e]] != 1 || c.dur(e) <= 0) continue;
    if (is_profiler_step(c.name(e)) || (c.ts(e) < to && c.end(e) > from)) continue;
    const auto held = std::lower_bound(launches.begin(), launches.end(), c.end(e)) -
                      std::lower_bound(launches.begin(), launches.end(), c.ts(e));
    if (2 * held < static_cast<std::ptrdiff_t>(launches.size())) continue;
    if (best == kNoIndex || c.dur(e) < c.dur(best)) best = e;
  }
  return best;
}

std::string one_launch_remedy(const DiagnoseContext& c) {
  const DiagnoseContext::LaunchRate r = c.launch_rate();
  if (r.iterations <= 0 || r.per_iteration() > 1) return "";
  const std::string how = c.is_torch() ? "torch.cuda.graph around several iterations" : c.graph_how();
  return "Give each launch more work (a larger batch), or capture several iterations in one " + std::string(c.api()) +
         " graph (" + how + "): each " + r.unit +
         " makes one launch call, with nothing within it to replay as a graph or fuse";
}

void DiagnoseContext::link_ranges(std::vector<std::uint32_t> events) {
  if (events.empty()) return;
  const EventColumns& ev = trace.events;
  sort_by_time(ev.ts_ns, &events);
  // Without correlation ids, the k-th range is the k-th kernel launch when
  // the counts agree: the range profiler serializes kernels (HTA matches
  // them so, hta/analyzers/cupti_counter_analysis.py).
  std::vector<std::uint32_t> launches;
  for (std::uint32_t e : runtime) {
    if (name(e).find("LaunchKernel") != std::string_view::npos) launches.push_back(e);
  }
  const bool by_order = launches.size() == events.size();
  ranges.reserve(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::uint32_t e = events[i];
    DeviceOp op = device_op(trace, e, DeviceClass::kRange);
    // Kineto writes correlation 0 for a range it could not match to a kernel.
    if (ev.correlation[e] > 0) op.launch = launch_for_correlation(ev.correlation[e]);
    if (op.launch == kNoIndex && by_order) op.launch = launches[i];
    op.step = step_index_at(op.launch != kNoIndex ? ev.ts_ns[op.launch] : op.start);
    ranges.push_back(op);
  }
}

DiagnoseContext::CommOverlap DiagnoseContext::comm_overlap() const {
  std::call_once(comm_overlap_once_, [&] {
    std::vector<Interval> comm, compute;
    for (const DeviceOp& op : device) (op.cls == DeviceClass::kComm ? comm : compute).push_back({op.start, op.end});
    if (comm.empty()) return;
    comm_overlap_.comm_ns = union_length(comm);
    const std::int64_t compute_ns = union_length(compute);
    compute.insert(compute.end(), comm.begin(), comm.end());
    comm_overlap_.exposed_ns = std::max<std::int64_t>(0, union_length(std::move(compute)) - compute_ns);
  });
  return comm_overlap_;
}

std::int64_t DiagnoseContext::device_busy_ns(std::int32_t dev, std::int64_t from, std::int64_t to) const {
  if (to <= from) return 0;
  if (dev >= 0) {
    for (const auto& [d, v] : busy_by_device_) {
      if (d == dev) return v.covered(from, to);
    }
    return 0;
  }
  return busy_all_.covered(from, to);
}

namespace {

bool json_space(char ch) { return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r'; }

// Appends `name [a, b, c]` for an args value `[a, b, c]` that is a flat
// array of integers, written as the source writes them; false (out
// unchanged in meaning) otherwise.
bool append_int_array(std::string_view json, std::string_view name, std::string* out) {
  if (json.empty() || json.front() != '[') return false;
  std::size_t p = 1;
  if (!out->empty()) *out += ' ';
  *out += name;
  *out += " [";
  for (bool first = true;; first = false) {
    while (p < json.size() && json_space(json[p])) ++p;
    const std::size_t start = p;
    if (p < json.size() && json[p] == '-') ++p;
    const std::size_t digits = p;
    while (p < json.size() && json[p] >= '0' && json[p] <= '9') ++p;
    if (p == digits) return false;
    if (!first) *out += ", ";
    *out += json.substr(start, p - start);
    while (p < json.size() && json_space(json[p])) ++p;
    if (p < json.size() && json[p] == ',') {
      ++p;
      continue;
    }
    if (p < json.size() && json[p] == ']') break;
    return false;
  }
  *out += ']';
  return true;
}

}  // namespace

bool DiagnoseContext::forward_only() const {
  auto backward = [](std::string_view n) {
    return n.find("Backward") != std::string_view::npos || n.find("backward") != std::string_view::npos ||
           n.find("evaluate_function") != std::string_view::npos || n.starts_with("Optimizer.step");
  };
  // An optimizer's annotation or frames (Optimizer.zero_grad#Adam.zero_grad,
  // torch/optim/...) say training too, where the window closed before the
  // backward (issue 38's twenty-third round: a training step recorded up to
  // its losses, its dropout told to call model.eval()).
  bool any_op = false;
  for (std::uint32_t e : host_ops) {
    const std::string_view n = name(e);
    if (kind(e) == EventKind::kUserAnnotation && n.starts_with("Optimizer.")) return false;
    if (kind(e) == EventKind::kPythonFunction && n.find("torch/optim/") != std::string_view::npos) return false;
    if (kind(e) != EventKind::kCpuOp) continue;
    any_op = true;
    if (backward(n)) return false;
  }
  if (!any_op) return false;
  for (const DeviceOp& op : device) {
    if (backward(name(op.event))) return false;
  }
  return true;
}

std::string DiagnoseContext::launch_shape(std::uint32_t e) const {
  const std::string_view json = trace.args_json(e);
  if (json.empty()) return "";
  // Kineto's grid and block: flat integer arrays, read in place (parsing
  // them per kernel instance was a tenth of diagnose on a 50 MB trace).
  {
    static constexpr std::string_view kKeys[] = {"grid", "block"};
    std::string_view v[2];
    std::string fast;
    if (member_values(json, kKeys, v) && append_int_array(v[0], kKeys[0], &fast) &&
        append_int_array(v[1], kKeys[1], &fast)) {
      return fast;
    }
  }
  // Anything else (floats, nested values): the whole object.
  Result<JsonValue> whole = JsonValue::parse(json);
  if (!whole) return "";
  std::string out;
  for (const char* key : {"grid", "block"}) {
    const JsonValue* v = whole->find(key);
    if (v == nullptr || !v->is_array()) return "";
    out += out.empty() ? "" : " ";
    out += key;
    out += " [";
    for (std::size_t i = 0; i < v->items().size(); ++i) {
      if (i > 0) out += ", ";
      out += v->items()[i].text();
    }
    out += "]";
  }
  return out;
}

const std::vector<StatRow>& DiagnoseContext::averages() const {
  std::call_once(averages_once_, [&] { set_averages(torch_averages(trace)); });
  return *averages_;
}

const CausalResult& DiagnoseContext::causal() const {
  std::call_once(causal_once_, [&] {
    // Without edits analyze_causal cannot fail.
    Result<CausalResult> r = analyze_causal(trace);
    causal_ = std::make_shared<const CausalResult>(r ? std::move(*r) : CausalResult{});
  });
  return *causal_;
}

const Nesting& DiagnoseContext::nesting() const {
  std::call_once(nesting_once_, [&] { nesting_ = std::make_shared<const Nesting>(build_nesting(trace)); });
  return *nesting_;
}

const LegacySpans& DiagnoseContext::legacy_spans() const {
  std::call_once(legacy_spans_once_,
                 [&] { legacy_spans_ = std::make_shared<const LegacySpans>(compute_legacy_spans(*this)); });
  return *legacy_spans_;
}

const std::vector<std::uint32_t>& DiagnoseContext::buffer_requests() const {
  std::call_once(buffer_requests_once_, [&] {
    const auto id = trace.strings.find("Activity Buffer Request");
    if (!id) return;
    for (std::uint32_t e = 0; e < trace.events.size(); ++e) {
      if (trace.events.name[e] == *id && trace.events.phase[e] == Phase::kComplete) buffer_requests_.push_back(e);
    }
    std::sort(buffer_requests_.begin(), buffer_requests_.end(),
              [&](std::uint32_t a, std::uint32_t b) { return ts(a) < ts(b); });
  });
  return buffer_requests_;
}

std::optional<DiagnoseContext::ReplayedSaving> DiagnoseContext::replayed_saving(std::vector<WhatIfEdit> edits) const {
  const CausalResult& base = causal();
  if (base.graph == nullptr || base.steps.empty()) return std::nullopt;
  CausalOptions o;
  o.edits = std::move(edits);
  o.paths = false;
  Result<CausalResult> r = analyze_causal(trace, base.graph, o);
  if (!r) return std::nullopt;
  ReplayedSaving s;
  s.total_ns = sat_sub(r->replayed_ns, r->predicted_ns);
  std::vector<std::int64_t> per_step;
  for (const StepTime& st : r->steps) per_step.push_back(sat_sub(st.replayed_ns, st.predicted_ns));
  s.per_step_ns = r->has_steps ? mean_median(std::move(per_step)) : s.total_ns;
  return s;
}

std::uint32_t DiagnoseContext::waited_for(std::uint32_t e, EdgeType type) const {
  const CausalResult& r = causal();
  if (r.graph == nullptr || e >= r.graph->activity_of_event.size()) return kNoIndex;
  const CausalGraph& g = *r.graph;
  const std::uint32_t a = g.activity_of_event[e];
  if (a == kNoIndex) return kNoIndex;
  const std::uint32_t v = type == EdgeType::kSync ? CausalGraph::end_node(a) : CausalGraph::begin_node(a);
  const CausalEdge* best = nullptr;
  for (std::uint32_t i = g.in_begin[v]; i < g.in_begin[v + 1]; ++i) {
    const CausalEdge& edge = g.edges[i];
    if (edge.type != type || edge.cause_event == kNoIndex) continue;
    if (best == nullptr || (edge.binding && !best->binding) ||
        (edge.binding == best->binding && g.time_ns[edge.from] > g.time_ns[best->from])) {
      best = &edge;
    }
  }
  return best == nullptr ? kNoIndex : best->cause_event;
}

double DiagnoseContext::host_path_share() const {
  const CausalResult& r = causal();
  // The profiler's own buffer request (CUPTI asking for memory, an
  // "overhead" event) is no host work of the program's: the host op it lands
  // in is on the path for the request's time (issue 38's fourteenth round:
  // an H200 attention call's aten::fill_, 1.157 ms around a 1.121 ms
  // request, made "host work 37.2% of the critical path"). The overlap of
  // each host segment's event with the requests leaves the path and the
  // total, at most once per event.
  const std::vector<std::uint32_t>& requests = buffer_requests();
  std::int64_t host = 0, total = 0;
  for (const StepTime& st : r.steps) {
    std::int64_t profiler = 0;
    std::unordered_map<std::uint32_t, std::int64_t> left;  // event → request time not yet taken out
    for (const PathSegment& seg : st.path.segments) {
      if (requests.empty() || seg.event == kNoIndex || seg.event >= trace.events.size()) continue;
      if (seg.bound != BoundType::kCpu && seg.bound != BoundType::kDataLoading) continue;
      auto [it, fresh] = left.try_emplace(seg.event, 0);
      if (fresh) {
        for (const std::uint32_t q : requests) {
          sat_acc(it->second,
                  std::max<std::int64_t>(0, sat_sub(std::min(end(q), end(seg.event)), std::max(ts(q), ts(seg.event)))));
        }
      }
      const std::int64_t take = std::min(it->second, seg.dur_ns);
      it->second -= take;
      sat_acc(profiler, take);
    }
    sat_acc(host, st.path.bound_ns[static_cast<int>(BoundType::kCpu)]);
    sat_acc(host, st.path.bound_ns[static_cast<int>(BoundType::kDataLoading)]);
    host = std::max<std::int64_t>(0, sat_sub(host, profiler));
    sat_acc(total, sat_sub(st.replayed_ns, profiler));
  }
  return total > 0 ? std::min(1.0, static_cast<double>(host) / static_cast<double>(total)) : 0.0;
}

void add_waits_for(const DiagnoseContext& c, Evidence& ev, std::uint32_t e, EdgeType type) {
  const std::uint32_t w = c.waited_for(e, type);
  if (w != kNoIndex) {
    ev.event("waits_for", c.ref(w));
  } else if (type == EdgeType::kSync) {
    ev.text("waits_for", "unknown (the trace records no device work ending inside this call)");
  } else {
    ev.text("waits_for", "unknown (the trace records no stream wait on an event before this activity)");
  }
}

const IdlePartition& DiagnoseContext::idle() const {
  std::call_once(idle_once_, [&] { idle_ = std::make_shared<const IdlePartition>(*this); });
  return *idle_;
}

const Efficiency& DiagnoseContext::efficiency() const {
  std::call_once(efficiency_once_, [&] { efficiency_ = std::make_shared<const Efficiency>(compute_efficiency(*this)); });
  return *efficiency_;
}

void DiagnoseContext::set_averages(std::vector<StatRow> rows) const {
  averages_ = std::move(rows);
  for (const StatRow& r : *averages_) {
    // Saturating, as torch's table footer is (table_text.cc): two rows that
    // each saturated summed to -2 ns.
    sat_acc(self_cpu_total_, r.self_cpu_time_total_ns);
    if (r.is_device && !r.is_user_annotation) sat_acc(self_device_total_, r.self_device_time_total_ns);
  }
}

DiagnoseContext::BusyWindow DiagnoseContext::gpu_busy_window() const {
  // Built once: a dozen rules ask, and each answer sorts the device work.
  std::call_once(busy_window_once_, [&] { busy_window_ = compute_busy_window(); });
  return busy_window_;
}

bool DiagnoseContext::cold_first_step() const {
  constexpr std::int64_t kColdFirstStepFactor = 10;
  if (steps.steps.size() < 4) return false;
  std::vector<std::int64_t> later;
  for (std::size_t i = 1; i < steps.steps.size(); ++i) later.push_back(steps.steps[i].dur_ns);
  const std::int64_t median = upper_median(std::move(later));
  return median > 0 && steps.steps[0].dur_ns >= sat_mul(kColdFirstStepFactor, median);
}

Interval DiagnoseContext::queued_lead() const {
  std::call_once(queued_lead_once_, [&] {
    queued_lead_ = {start_ns, start_ns};
    if (!steps.steps.empty() || device.empty() || end_ns <= start_ns) return;
    std::int64_t first = INT64_MAX;
    for (const DeviceOp& op : device) first = std::min(first, op.start);
    if (first <= start_ns || first >= end_ns) return;
    const IdlePartition::Totals lead = idle().totals_within(start_ns, first);
    const std::int64_t wait = sat_add(lead[static_cast<std::size_t>(IdleCause::kStreamWait)],
                                      lead[static_cast<std::size_t>(IdleCause::kPeers)]);
    if (sat_mul(4, wait) >= end_ns - start_ns) queued_lead_ = {start_ns, first};
  });
  return queued_lead_;
}

bool DiagnoseContext::dependency_visible() const {
  std::call_once(dependency_once_, [&] {
    dependency_visible_ = [&] {
      for (std::uint32_t e : runtime) {
        if (name(e).find("StreamWaitEvent") != std::string_view::npos) return true;
      }
      std::vector<std::pair<std::int32_t, std::int64_t>> first_stream;  // per device: the first stream seen
      for (const DeviceOp& op : device) {
        auto it = std::find_if(first_stream.begin(), first_stream.end(), [&](const auto& d) { return d.first == op.device; });
        if (it == first_stream.end()) {
          first_stream.emplace_back(op.device, op.stream);
        } else if (it->second != op.stream) {
          return true;
        }
      }
      return false;
    }();
  });
  return dependency_visible_;
}

DiagnoseContext::BusyWindow DiagnoseContext::compute_busy_window() const {
  BusyWindow w;
  if (!steps.steps.empty()) {
    w.over_steps = true;
    // A cold first step aside: the steady state is the steps after it.
    const std::size_t first = cold_first_step() ? 1 : 0;
    for (std::size_t i = first; i < steps.steps.size(); ++i) {
      const StepStat& st = steps.steps[i];
      sat_acc(w.span_ns, st.dur_ns);  // steps may overlap: the sum is not bounded by the trace's span
      sat_acc(w.busy_ns, std::min(st.gpu_busy_ns, st.dur_ns));
    }
    std::vector<Interval> launched;
    for (const DeviceOp& op : device)
      if (op.step >= static_cast<std::int32_t>(first)) launched.push_back({op.start, op.end});
    if (union_length(std::move(launched)) > w.span_ns) {
      const Interval pw = idle().window();
      const std::int64_t lo = first ? std::max(pw.start, steps.steps[1].start_ns) : pw.start;
      std::int64_t idle_ns = idle().idle_ns();
      if (first) {
        idle_ns = 0;
        for (const std::int64_t v : idle().totals_within(lo, pw.end)) sat_acc(idle_ns, v);
      }
      w.queued_ahead = true;
      w.span_ns = std::max<std::int64_t>(0, pw.end - lo);
      w.busy_ns = std::max<std::int64_t>(0, w.span_ns - idle_ns);
    }
    return w;
  }
  std::vector<Interval> iv;
  iv.reserve(device.size());
  for (const DeviceOp& op : device) iv.push_back({op.start, op.end});
  w.span_ns = end_ns - start_ns;
  w.busy_ns = std::min(w.span_ns, union_length(std::move(iv)));
  return w;
}

std::int64_t DiagnoseContext::self_cpu_total_ns() const {
  averages();
  return self_cpu_total_;
}

std::int64_t DiagnoseContext::self_device_total_ns() const {
  averages();
  return self_device_total_;
}

std::int64_t DiagnoseContext::covered_in_host_window(const std::vector<Interval>& merged) const {
  if (!host_vs_device().within_steps) return covered_within(merged, start_ns, end_ns);
  std::int64_t ns = 0;
  for (const StepStat& st : steps.steps) sat_acc(ns, covered_within(merged, st.start_ns, st.start_ns + st.dur_ns));
  return ns;
}

const DiagnoseContext::HostVsDevice& DiagnoseContext::host_vs_device() const {
  std::call_once(host_vs_device_once_, [&] {
    HostVsDevice& h = host_vs_device_;
    if (steps.range.empty() || steps.steps.empty()) {
      h.cpu_ns = self_cpu_total_ns();
      h.device_ns = self_device_total_ns();
      return;
    }
    h.within_steps = true;
    // A cold first step aside (cold_first_step): the steady state.
    const int first = cold_first_step() ? 1 : 0;
    h.cpu_label = first ? "Self CPU in the steps after the first (a cold start)" : "Self CPU in the steps";
    h.device_label = "device time of their work";
    // torch's self times (prof.events()), of the host events that start in a step.
    const EventList list = EventList::build(trace, {.with_memory = false});
    for (const StatRow& r : list.event_rows()) {
      if (!r.is_device && step_index_at(r.start_ns) >= first) sat_acc(h.cpu_ns, r.self_cpu_time_total_ns);
    }
    for (const DeviceOp& op : device) {
      if (op.step >= first) sat_acc(h.device_ns, op.end - op.start);
    }
  });
  return host_vs_device_;
}

int DiagnoseContext::step_index_at(std::int64_t ts) const {
  const auto& s = steps.steps;
  // The last step starting at or before ts.
  auto it = std::upper_bound(s.begin(), s.end(), ts, [](std::int64_t v, const StepStat& st) { return v < st.start_ns; });
  if (it == s.begin()) return -1;
  --it;
  if (ts >= it->start_ns + it->dur_ns) return -1;
  return static_cast<int>(it - s.begin());
}

std::int64_t DiagnoseContext::step_number_at(std::int64_t ts) const { return step_number(step_index_at(ts)); }

std::vector<std::int64_t> DiagnoseContext::event_step_numbers() const {
  const EventColumns& ev = trace.events;
  std::vector<std::int64_t> out(ev.size(), -1);
  if (steps.steps.empty()) return out;
  for (std::uint32_t e = 0; e < ev.size(); ++e) {
    if (ev.phase[e] != Phase::kMetadata) out[e] = step_number_at(ev.ts_ns[e]);
  }
  for (const std::vector<DeviceOp>* ops : {&device, &ranges}) {
    for (const DeviceOp& op : *ops) out[op.event] = step_number(op.step);
  }
  return out;
}

std::int64_t DiagnoseContext::window_ns() const {
  if (steps.steps.empty()) return std::max<std::int64_t>(0, sat_sub(end_ns, start_ns));
  std::int64_t total = 0;
  for (const StepStat& s : steps.steps) total = sat_add(total, s.dur_ns);
  return total;
}

std::string DiagnoseContext::lane_label(std::uint32_t lane) const {
  if (lane >= trace.lanes.size()) return "";
  const Lane& l = trace.lanes[lane];
  if (l.kind == LaneKind::kGpu) {
    return "gpu " + std::to_string(l.device) + " stream " + std::to_string(l.stream);
  }
  return std::string(l.kind == LaneKind::kCpu ? "cpu" : "other") + " pid " + id_text(trace, l.pid) + " tid " +
         id_text(trace, l.tid);
}

EventRef DiagnoseContext::ref(std::uint32_t e) const {
  EventRef r;
  r.name = std::string(trace.name(e));
  r.lane = lane_label(trace.events.lane[e]);
  r.ts_ns = trace.events.ts_ns[e];
  r.dur_ns = trace.events.dur_ns[e];
  r.step = step_number_at(r.ts_ns);
  return r;
}

std::int64_t DiagnoseContext::int_arg(std::uint32_t e, std::string_view key) const {
  const std::string_view json = trace.args_json(e);
  if (json.empty()) return -1;
  auto parsed = JsonValue::parse(json);
  if (!parsed) return -1;
  const JsonValue* v = parsed->find(key);
  std::int64_t out = -1;
  return v != nullptr && v->is_number() && v->get_int(&out) ? out : -1;
}

std::uint32_t DiagnoseContext::launch_for_correlation(std::int64_t correlation) const {
  return launch_by_corr_.find(correlation);
}

std::uint32_t DiagnoseContext::enclosing_op(std::uint32_t call, bool skip_views) const {
  constexpr int kMaxEnclosingWalk = 512;
  return innermost_enclosing(
      trace.events.lane[call], ts(call), end(call), kMaxEnclosingWalk,
      [&](std::uint32_t e) {
        if (kind(e) != EventKind::kCpuOp) return false;
        const std::string_view n_e = name(e);
        return !is_profiler_step(n_e) && !(skip_views && is_view_op(n_e));
      },
      call);
}

}  // namespace tprof::internal
