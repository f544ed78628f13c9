// memory_pressure: the TensorBoard plugin's "device memory usage is at the
// limit" recommendation (kineto tb_plugin/torch_tb_profiler/profiler/data.py,
// analyze; the peak from memory_parser.py, MemorySnapshot.get_peak_memory):
// per device, the peak "Total Allocated" of torch's [memory] records against
// deviceProperties[id].totalGlobalMem.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "src/analyze/rules/rules.h"
#include "src/trace/json_value.h"
#include "tprof/memory.h"

namespace tprof::internal {

namespace {

// data.py: peak_mem > total_mem * 0.9.
constexpr double kMemoryShare = 0.9;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// A peak held by memory allocated before the recording (≥ 90% of it) or by
// one allocation (≥ 50%) is a pre-sized pool: vLLM's KV cache allocated to
// gpu_memory_utilization (0.9) at start-up, by design, not pressure.
constexpr double kPreallocatedShare = 0.9;
constexpr double kOneAllocationShare = 0.5;


std::string gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / kGiB);
  return buf;
}

// What held the peak on `device`, by the op that allocated it (tprof
// memory's live set): "At the peak, 1.2 GiB allocated in the window is
// held by aten::addmm (0.8 GiB) and aten::mul (0.4 GiB); the rest was
// allocated before it. " — "" without addresses in the records.
std::string held_at_peak(const DiagnoseContext& c, std::int64_t device) {
  MemoryOptions o;
  o.device = static_cast<std::int16_t>(device);
  o.buckets = 1;
  o.top = 2;
  const MemoryReport r = analyze_memory(memory_input(c.trace, c.steps), o);
  for (const MemoryDeviceView& v : r.devices) {
    if (v.device_type == 0 || !v.addresses_recorded || v.live_at_peak.empty()) continue;
    std::string s = "At the peak, " + gib(v.peak_in_window_bytes) + " allocated in the window is held most by ";
    for (std::size_t i = 0; i < v.live_at_peak.size(); ++i) {
      const MemoryGroup& g = v.live_at_peak[i];
      s += (i == 0 ? "" : " and ") + (g.caller.empty() ? "" : g.caller + " > ") + (g.op.empty() ? "no op" : g.op) +
           " (" + gib(g.bytes) + ")";
    }
    return s + (v.totals_recorded ? "; the other " + gib(v.peak_bytes - v.peak_in_window_bytes) +
                                        " was allocated before the window (`tprof memory` lists it all). "
                                  : " (`tprof memory` lists it all). ");
  }
  return "";
}

}  // namespace

// totalGlobalMem by device id from the trace's "deviceProperties" array.
std::map<std::int64_t, std::int64_t> device_memory_capacity(const Trace& t) {
  std::map<std::int64_t, std::int64_t> out;
  const std::string_view raw = t.meta.top_level_json("deviceProperties");
  if (raw.empty()) return out;
  auto v = JsonValue::parse(raw);
  if (!v || !v->is_array()) return out;
  std::int64_t position = 0;
  for (const JsonValue& d : v->items()) {
    const JsonValue* mem = d.find("totalGlobalMem");
    const JsonValue* id = d.find("id");
    std::int64_t bytes = 0;
    // The plugin indexes the array by device id; "id" says the same when present.
    const std::int64_t key = id != nullptr ? id->int_or(position) : position;
    if (mem != nullptr && mem->get_int(&bytes) && bytes > 0) out[key] = bytes;
    ++position;
  }
  return out;
}

void rule_memory_pressure(const DiagnoseContext& c, std::vector<Finding>* out) {
  const Trace& t = c.trace;
  if (t.memory.empty()) return;
  const std::map<std::int64_t, std::int64_t> capacity = device_memory_capacity(t);
  if (capacity.empty()) return;
  struct Peak {
    const MemoryRecord* allocated = nullptr;
    const MemoryRecord* reserved = nullptr;
    std::int64_t before = -1;   // allocated before the first record of the window
    std::int64_t largest = 0;   // the largest single allocation
  };
  std::map<std::int64_t, Peak> peaks;
  for (const MemoryRecord& r : t.memory) {
    if (r.device_type == 0 || r.device_id < 0) continue;  // host memory
    Peak& p = peaks[r.device_id];
    if (p.before < 0) p.before = std::max<std::int64_t>(0, r.total_allocated - std::max<std::int64_t>(0, r.bytes));
    p.largest = std::max(p.largest, r.bytes);
    if (p.allocated == nullptr || r.total_allocated > p.allocated->total_allocated) p.allocated = &r;
    if (p.reserved == nullptr || r.total_reserved > p.reserved->total_reserved) p.reserved = &r;
  }
  // Allocator churn: device allocations and frees the caching allocator made
  // in the window (it reuses blocks; a cudaFree means it gave memory back,
  // after empty_cache() or an allocation that failed and was retried).
  std::int64_t mallocs = 0, frees = 0, churn_ns = 0;
  std::uint32_t longest_churn = kNoIndex;
  for (std::uint32_t e : c.runtime) {
    const std::string_view n = c.name(e);
    const bool is_malloc = is_device_malloc(n);
    const bool is_free = is_device_free(n);
    if (!is_malloc && !is_free) continue;
    (is_malloc ? mallocs : frees) += 1;
    sat_acc(churn_ns, c.dur(e));
    if (longest_churn == kNoIndex || c.dur(e) > c.dur(longest_churn)) longest_churn = e;
  }
  for (const auto& [device, p] : peaks) {
    auto cap = capacity.find(device);
    if (cap == capacity.end()) continue;
    const double total = static_cast<double>(cap->second);
    const double alloc_share = static_cast<double>(p.allocated->total_allocated) / total;
    const double reserved_share = static_cast<double>(p.reserved->total_reserved) / total;
    // The plugin reads allocated memory only; ours also reports a caching
    // allocator that reserves past the limit (fragmentation, cached blocks),
    // which is what the device actually runs out of.
    const bool alloc_high = alloc_share > kMemoryShare;
    if (!alloc_high && reserved_share <= kMemoryShare) continue;
    const double peak_alloc = static_cast<double>(p.allocated->total_allocated);
    const bool preallocated = alloc_high && (static_cast<double>(p.before) >= kPreallocatedShare * peak_alloc ||
                                             static_cast<double>(p.largest) >= kOneAllocationShare * peak_alloc);
    Finding f;
    f.id = "memory_pressure";
    f.severity = preallocated ? FindingSeverity::kInfo : FindingSeverity::kWarning;
    const MemoryRecord& at = alloc_high ? *p.allocated : *p.reserved;
    f.title = std::string(alloc_high ? "peak allocated" : "peak reserved") + " memory on GPU " +
              std::to_string(device) + " is " + format_pct(100.0 * (alloc_high ? alloc_share : reserved_share)) +
              " of " + gib(cap->second);
    f.evidence.num("device", device)
        .num("total_memory_bytes", cap->second)
        .num("peak_allocated_bytes", p.allocated->total_allocated)
        .real("peak_allocated_pct", 100.0 * alloc_share)
        .num("peak_reserved_bytes", p.reserved->total_reserved)
        .real("peak_reserved_pct", 100.0 * reserved_share)
        .real("threshold_pct", 100.0 * kMemoryShare)
        .num("allocated_before_window_bytes", p.before)
        .num("largest_allocation_bytes", p.largest);
    if (at.event != kNoIndex) f.evidence.event("peak", c.ref(at.event));
    std::string churn;
    if (mallocs + frees > 0) {
      f.evidence.num("malloc_calls", mallocs).num("free_calls", frees).num("malloc_free_ns", churn_ns);
      f.evidence.event("longest_malloc_free", c.ref(longest_churn));
      churn = "; the window has " + std::to_string(mallocs) + " device allocations and " + std::to_string(frees) +
              " frees (" + format_ns(churn_ns) + " of host time)" +
              (frees > 0 ? std::string(c.is_torch() ? ": remove torch.cuda.empty_cache() from the loop"
                                                    : ": keep the memory the loop frees for its next step") +
                               ", since every cudaFree makes the next step cudaMalloc again"
                         : "");
    }
    if (preallocated) {
      const bool before = static_cast<double>(p.before) >= kPreallocatedShare * peak_alloc;
      f.title += before ? ", " + gib(p.before) + " of it allocated before the recording"
                        : ", " + gib(p.largest) + " of it in one allocation";
      f.advice = "Most of the peak is memory set aside up front (" +
                 (before ? gib(p.before) + " allocated before the recording started" : "one allocation of " + gib(p.largest)) +
                 "; the recorded work adds " + gib(p.allocated->total_allocated - std::min(p.before, p.allocated->total_allocated)) +
                 "): a server that reserves its KV cache or arena up front (vLLM's gpu_memory_utilization) does this by "
                 "design. Lower that fraction only if other processes need the memory or allocations in the window fail.";
    } else if (alloc_high) {
      f.advice = held_at_peak(c, device) + "Shrink what is live at the peak (" + gib(p.allocated->total_allocated) + " allocated of " +
                 gib(cap->second) + "): " +
                 (c.is_torch() ? "activation checkpointing (torch.utils.checkpoint) on the largest blocks, bf16 "
                                 "autocast, or sharding the parameters and optimizer state (FSDP/ZeRO)"
                               : "free buffers as soon as their last reader is done, keep 16-bit copies, or split "
                                 "the work into smaller pieces") + churn +
                 ". With this little headroom one larger batch or sequence runs out of memory.";
    } else {
      f.advice = (c.is_torch() ? "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the caching allocator reserves "
                               : "Return the allocator's cached blocks or size its pool to what is used: it reserves ") +
                 gib(p.reserved->total_reserved) + " while tensors peak at " + gib(p.allocated->total_allocated) +
                 churn + ". The gap is cached blocks of the wrong sizes (fragmentation), and reserved memory is what "
                 "the device runs out of.";
    }
    f.impact_ns = 0;
    out->push_back(std::move(f));
  }
}

}  // namespace tprof::internal
