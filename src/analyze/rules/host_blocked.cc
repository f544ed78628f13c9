// host_blocked: host calls that block the thread, recognised by their
// effect rather than their name (src/analyze/idle.h, BlockingCall): a call
// of 50 µs or more that is an async copy which returned only once its copy
// was done (pageable host memory, Nsight Systems' cuda_memcpy_async; a
// device-to-host read behind queued work), an allocator call, context,
// module or library initialisation (a first CUDA call, a launch that loads
// its module), a launch stalled because its stream's queue was full (HTA's
// queue length, "Augmented Counters"), or another runtime call. One finding
// per kind, each naming the ops and annotations the calls ran in and the
// GPU time they cost: the GPU idle time while the thread that launches next
// was inside them (the partition's blocked_* causes, which only this rule
// claims). Synchronize calls and blocking copies by name are sync_api's.
// Precondition: the calls of a kind block the host kMinHostNs or more in
// the steps (the whole trace without steps), and the GPU idles
// kMinIdleShare of the window inside them or the host is blocked
// kMinHostShare of it; a GPU kept busy through them lost nothing (info: the
// host waited, the GPU did not).
// Allocator calls: a free asks for no memory, so its fix is to keep what it
// releases. Where the trace marks warm-up iterations (a user annotation
// named "warmup", as PARAM's "[param|...|warmup|forward]"), the calls up to
// the end of the last one are one-time; the fix speaks of the calls after
// it, inside annotations (the measured iterations: on HTA's alexnet 5
// cudaMalloc calls of 32.8 ms in the measured forward, after
// "[param|clear_cache]"'s cudaFree emptied the cache), not of the warm-up's
// 6.0 s cudaFree.
// The caching allocator turned off: PyTorch's caching allocator, once warm,
// calls no free at all (it keeps freed blocks; only empty_cache(), an
// out-of-memory retry or a library's set-up returns memory). Frees that
// come one by one between allocations all through the window (at least
// kMinOffFrees of them, in kMinOffFreeRuns or more separate runs between
// allocations, as many as half the allocations) mean every freed tensor
// goes back to the driver: the fix is to turn caching back on
// (PYTORCH_NO_CUDA_MEMORY_CACHING), not to move one call (TraceLens'
// MI300X ResNet-18 training: 1,360 hipFree and 1,460 hipMalloc calls in
// 521 runs, 84% of the trace blocked in them). Not where the program's
// stack shows an empty_cache() call (then the cache-clearing advice holds).
#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A burst of device frees inside one op from this many on is the caching
// allocator's out-of-memory retry (allocator_retry).
constexpr std::int64_t kMinRetryFrees = 3;
// A kind is a finding once its calls block the host this long in all.
constexpr std::int64_t kMinHostNs = 1'000'000;
// ... and either the GPU idles this share of the window inside them, or the
// host is blocked in them this share of it (the GPU lost nothing, but the
// host could have done other work).
constexpr double kMinIdleShare = 0.01;
constexpr double kMinHostShare = 0.10;
// Warning once the GPU idles this share of the window (the steps, or the
// trace without steps) inside the calls (kernel_launch_stats' share).
constexpr double kWarnShare = 0.05;
constexpr std::size_t kMaxSites = 5;
// The GPU counts as busy through the calls while it idles less than this
// share of their host time (whatever cause holds that idle time).
constexpr double kBusyIdleShare = 0.05;
constexpr std::size_t kMaxSteps = 16;
// The caching allocator off (see the top): this many frees, in this many
// separate runs between allocations.
constexpr std::int64_t kMinOffFrees = 100;
constexpr std::int64_t kMinOffFreeRuns = 50;

struct KindText {
  IdleCause kind;
  const char* one;   // "1 <one> blocks the host ..."
  const char* many;  // "<n> <many> block the host ..."
};

constexpr KindText kKinds[] = {
    {IdleCause::kBlockedCopy, "async copy", "async copies"},
    {IdleCause::kBlockedAlloc, "allocator call", "allocator calls"},
    {IdleCause::kBlockedInit, "initialisation call", "initialisation calls"},
    {IdleCause::kBlockedLaunchQueue, "launch on a full queue", "launches on a full queue"},
    {IdleCause::kBlockedOther, "runtime call", "runtime calls"},
};

// Whether device work ran, or was launched, before `ts`: then the context
// existed (a launch call creates it when nothing did before).
bool context_before(const DiagnoseContext& c, std::int64_t ts) {
  for (const DeviceOp& op : c.device) {
    if (op.start < ts || (op.launch != kNoIndex && c.end(op.launch) <= ts)) return true;
  }
  return false;
}

// The fix: the remedy for the longest call, named by its call and site,
// then why (docs/diagnose.md, "host_blocked").
// In the program's API (DiagnoseContext::is_torch): a C++ program gets
// CUDA's calls where a PyTorch one gets torch's.
std::string advice_for(const DiagnoseContext& c, IdleCause kind, std::string_view call, const std::string& site,
                       std::string_view copy_name, bool lost_gpu_time, bool launch, bool has_steps,
                       bool context_existed) {
  const std::string where = std::string(call) + (site.empty() ? "" : " in " + site);
  const bool torch = c.is_torch();
  const std::string rt = c.is_hip() ? "hip" : "cuda";
  switch (kind) {
    case IdleCause::kBlockedCopy:
      if (copy_kind(copy_name).direction == CopyDirection::kDtoH) {
        return "Move the read of the result behind " + where +
               (torch ? " (.item(), .cpu(), .tolist(), printing a tensor) out of the step or do it every N steps, and "
                        "copy into pinned memory with non_blocking=True when the value is needed later."
                      : " out of the step or do it every N steps, and copy into pinned memory (" + rt +
                            "MallocHost) with " + rt + "MemcpyAsync when the value is needed later.") +
               " A copy to pageable host "
               "memory returns only once the copy and all the work queued before it are done, so the host stops "
               "launching meanwhile.";
      }
      return (torch ? "Pin the host tensor copied by " + where +
                          " (pin_memory=True, DataLoader(pin_memory=True)) and copy it with .to(device, non_blocking=True)."
                    : "Pin the host buffer copied by " + where + " (" + rt + "MallocHost, or " + rt +
                          "HostRegister on the existing buffer) and copy it with " + rt + "MemcpyAsync.") +
             " From "
             "pageable memory the driver stages the copy through a pinned buffer and the call returns only once it "
             "is done (Nsight Systems' cuda_memcpy_async rule).";
    case IdleCause::kBlockedAlloc:
      if (contains_ci(call, "free")) {
        // A free asks for nothing: what costs is releasing memory the program allocates again.
        return "Keep the memory " + where + " releases instead of returning it to the driver" +
               (torch ? std::string(": let PyTorch's caching allocator hold it (no torch.cuda.empty_cache() in the "
                                    "loop, stable shapes).")
                      : " (reuse it from a pool, " + rt + "MallocAsync with a memory pool, or the program's own cache).") +
               " cudaMalloc and cudaFree synchronize the device and call into the driver on every use.";
      }
      return "Pre-allocate the memory " + where + " asks for, outside the loop, or " +
             (torch ? "let PyTorch's caching allocator keep it (no torch.cuda.empty_cache() in the loop, stable "
                      "shapes, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)."
                    : "reuse it from a pool (" + rt + "MallocAsync with a memory pool, or the program's own cache).") +
             " cudaMalloc and cudaFree synchronize the device and call into the driver on every use.";
    case IdleCause::kBlockedInit:
      if (!launch && !has_steps && !context_existed) {
        // A whole-run recording (tprof record, a profiler started with the
        // program): the context is created in it, once per process.
        return "Leave start-up out of the recording: " + where +
               " is where this process sets up CUDA (the context, created lazily by the first call that needs "
               "one), a one-time cost. Record from the first step on (tprof record --nvtx-range or --delay-ms" +
               (torch ? ", torch.profiler's schedule with wait and warmup steps" : "") + ") to see the steady state.";
      }
      if (!launch && !has_steps) {
        // Device work ran before it, so the context existed: a library's
        // first call sets itself up (issue 38's sixth round: cuBLAS's
        // cudaGetSymbolAddress in the first aten::mm was called the
        // context's creation).
        const bool blas = contains_ci(site, "aten::mm") || contains_ci(site, "matmul") || contains_ci(site, "linear") ||
                          contains_ci(site, "bmm") || contains_ci(site, "addmm") || contains_ci(site, "gemm");
        const bool dnn = contains_ci(site, "cudnn") || contains_ci(site, "miopen") || contains_ci(site, "convolution");
        const std::string lib = dnn    ? (c.is_hip() ? "MIOpen's" : "cuDNN's")
                                : blas ? (c.is_hip() ? "hipBLAS's" : "cuBLAS's")
                                       : "a library's or the runtime's";
        return "Warm up before recording: " + where + " is " + lib +
               " first-call set-up (its handle, workspace and kernels), a one-time cost: the " + std::string(c.api()) +
               " context already existed (device work ran before it). Run each path once untimed before starting "
               "the profiler" +
               (torch ? " (or give torch.profiler's schedule wait and warmup steps)" : "") + " to see the steady state.";
      }
      return "Warm up before recording: run the step a few times untimed (or give the schedule warmup steps) so "
             "that " + where + " happens before the window" +
             (launch ? std::string(", or load modules eagerly (") +
                           (c.is_hip() ? "HIP_ENABLE_DEFERRED_LOADING=0" : "CUDA_MODULE_LOADING=EAGER") + ")"
                     : std::string()) +
             ". Context creation and lazy module loading are one-time costs that inflate the steps they land in.";
    case IdleCause::kBlockedLaunchQueue:
      if (!lost_gpu_time) {
        return "No change needed unless the host has other work to do: the GPU stays busy while " + where +
               " waits for a free slot in its stream's launch queue (about 1024 entries). The host simply runs far "
               "ahead of the device.";
      }
      return std::string(c.graph_launches() > 0 ? "Move more of the step into the graphs it already replays"
                                                : "Replay the step as a " + std::string(c.api()) + " graph (" +
                                                      c.graph_how() + ")") +
             " or launch fewer, larger kernels so " + where +
             " does not wait for queue slots. A full launch queue (about 1024 entries per stream) makes each launch "
             "wait for an earlier kernel to finish.";
    default:
      break;
  }
  // Ascend (torch_npu): an op run through AscendCL's older op API, which
  // prepares it on the host on every call (compiling it at its first use)
  // while the launching thread waits (issue 38's seventeenth round: 11
  // such calls held 47% of an NPU step's launching thread, their compile
  // step cached, 0.16 of 6.64 ms).
  if (contains_ci(call, "aclopcompileandexecute")) {
    // torch_npu runs an op as an aclnn kernel only with online compilation
    // off and, for convolutions, internal formats disallowed; otherwise
    // it goes through the older op API. aclnn calls in the trace say
    // compilation is off already; TransData tasks, that internal formats
    // are in use (the seventeenth round's re-reviews: 137 of 148 ops ran
    // as aclnn, the convolutions on the older API between TransData
    // tasks; Ascend's own advisor pairs the two settings).
    bool aclnn = false, transdata = false;
    for (const std::uint32_t e : c.runtime) {
      if (c.name(e).starts_with("AscendCL@aclnn")) {
        aclnn = true;
        break;
      }
    }
    for (const DeviceOp& op : c.device) {
      if (c.name(op.event).find("TransData") != std::string_view::npos) {
        transdata = true;
        break;
      }
    }
    const std::string settings =
        aclnn ? "torch.npu.config.allow_internal_format = False"
              : "torch_npu.npu.set_compile_mode(jit_compile=False) and torch.npu.config.allow_internal_format = False";
    return "Keep the ops " + where + " runs on aclnn kernels (" + settings + "): they go through AscendCL's older op "
           "API, which prepares each call on the host while the launching thread waits and the NPU idles" +
           (aclnn ? std::string("; the trace's other ops already run as aclnn kernels, so online compilation is off")
                  : std::string()) +
           (transdata ? "; its TransData tasks convert tensors to the NPU's internal formats, which send "
                        "convolutions down the older path."
                      : ".");
  }
  if (contains_ci(call, "create")) {
    return "Create the streams, events and handles " + where +
           " makes once, before the loop, and reuse them. Such calls go to the driver and may synchronize the device.";
  }
  // Not a create call (MTIA's gif_merge, a driver query): name it and what
  // it costs; whether it can move depends on what it does.
  return "Find why " + where + " blocks the thread (a blocking runtime call: it returns only once the driver or "
         "device is done) and move it out of the step or overlap it with device work" +
         (lost_gpu_time ? std::string(": the GPU idles while the host is inside it.")
                        : std::string("; the GPU stayed busy, so only the host lost time.")) ;
}

// The initialisation finding's fix where cuDNN's benchmark mode (MIOpen's
// find on ROCm) made some of its calls while timing candidate algorithms
// (idle.h, in_tuning). Where they hold a third of its host time or more,
// the fix's first sentence (all the default view shows) names them; else
// they follow the fix for the longest call (`base`).
std::string with_tuning(const DiagnoseContext& c, const std::string& base, std::int64_t calls, std::int64_t tuning_calls,
                        std::int64_t host_ns, std::int64_t tuning_ns, const std::string& longest_where,
                        bool longest_is_tuning) {
  const IdlePartition& p = c.idle();
  const bool hip = c.is_hip();
  const std::string who = hip ? "MIOpen's find mode" : "cuDNN's benchmark mode (torch.backends.cudnn.benchmark=True)";
  const std::int64_t convs = p.tuning_ops(), readbacks = p.tuning_readbacks();
  const std::string what = std::to_string(tuning_calls) + " of these calls (" + format_ns(tuning_ns) + ") are " + who +
                           " timing candidate algorithms in " + std::to_string(convs) + " convolution call" +
                           (convs == 1 ? "" : "s") + " (" + std::to_string(readbacks) + " timing read-back" +
                           (readbacks == 1 ? "" : "s") + ", " + (hip ? "hipEventElapsedTime" : "cudaEventElapsedTime") +
                           "), once per input shape";
  const std::string reshape = "If the input shapes change from step to step, it tunes again for every new shape: keep "
                              "them fixed (pad or bucket the inputs) or turn " +
                              (hip ? std::string("the find off (MIOPEN_FIND_MODE=FAST)") : std::string("benchmark mode off")) +
                              ".";
  if (sat_mul(3, tuning_ns) < host_ns) return base + " " + what + ", so warm-up removes them too. " + reshape;
  std::string first = "Warm up before recording (run the step a few times untimed, or give the schedule warmup steps): " + what;
  if (tuning_calls < calls && !longest_is_tuning) first += ", and the longest, " + longest_where + ", is one-time set-up too";
  return first + ". " + reshape;
}

// Allocator calls after the trace's warm-up (the end of the last user
// annotation named warmup), inside an annotation: the advice for them, or
// "" when the trace marks no warm-up or nothing after it allocates.
// *idle_ns gets the GPU idle time inside those calls (idle_of: per call).
std::string after_warmup(const DiagnoseContext& c, const std::vector<const BlockingCall*>& calls,
                         std::unordered_map<std::uint32_t, std::string>& site,
                         const std::unordered_map<std::uint32_t, std::int64_t>& idle_of, std::int64_t* idle_ns) {
  std::int64_t warmup_end = -1;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kUserAnnotation) continue;
    const std::string_view n = c.name(e);
    if (contains_ci(n, "warmup") || contains_ci(n, "warm_up") || contains_ci(n, "warm-up")) warmup_end = std::max(warmup_end, c.end(e));
  }
  if (warmup_end < 0) return "";
  std::int64_t before_n = 0, before_ns = 0, after_n = 0, after_ns = 0;
  const BlockingCall* before_longest = nullptr;
  std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, std::int64_t>> by_site;  // count, host time
  std::int64_t first_alloc = -1;
  for (const BlockingCall* b : calls) {
    if (b->kind != IdleCause::kBlockedAlloc) continue;
    const std::string& s = site[b->event];
    if (c.ts(b->event) < warmup_end) {
      ++before_n;
      sat_acc(before_ns, c.dur(b->event));
      if (before_longest == nullptr || c.dur(b->event) > c.dur(before_longest->event)) before_longest = b;
      continue;
    }
    if (s.find(" in \"") == std::string::npos && !s.starts_with("\"")) continue;  // outside any annotation: exit, teardown
    if (contains_ci(c.name(b->event), "free")) continue;  // the frees that empty the cache are named below
    ++after_n;
    sat_acc(after_ns, c.dur(b->event));
    if (const auto it = idle_of.find(b->event); it != idle_of.end()) sat_acc(*idle_ns, it->second);
    auto& row = by_site[{std::string(c.name(b->event)), s}];
    ++row.first;
    sat_acc(row.second, c.dur(b->event));
    if (first_alloc < 0 || c.ts(b->event) < first_alloc) first_alloc = c.ts(b->event);
  }
  if (after_n == 0 || before_longest == nullptr) return "";
  const auto top = std::max_element(by_site.begin(), by_site.end(),
                                    [](const auto& a, const auto& b) { return a.second.second < b.second.second; });
  // A free after the warm-up and before these allocations: the cache
  // emptied (torch.cuda.empty_cache(), a clear-cache scope).
  std::uint32_t free_call = kNoIndex;
  for (std::uint32_t e : c.runtime) {
    if (c.ts(e) < warmup_end || c.ts(e) >= first_alloc) continue;
    if (contains_ci(c.name(e), "free") && !contains_ci(c.name(e), "host")) free_call = e;
  }
  std::string free_text;
  if (free_call != kNoIndex) {
    const std::string fs = call_sites(c, {free_call})[free_call];
    free_text = ", after " + std::string(c.name(free_call)) + (fs.empty() ? "" : " in " + fs) + " (" +
                format_ns(c.dur(free_call)) + ") emptied the cache";
  }
  const std::string what = std::to_string(top->second.first) + " " + top->first.first + " call" +
                           (top->second.first == 1 ? "" : "s") + (top->first.second.empty() ? "" : " in " + top->first.second);
  return "Keep the allocator's memory through the measured iterations: after the warm-up, " +
         count_of(after_n, "allocator call") + " take " + format_ns(after_ns) + " (" + what + ")" + free_text +
         ", so every iteration allocates again; " +
         (c.is_torch() ? std::string("drop the cache clearing (torch.cuda.empty_cache()) from the loop and let the "
                                     "caching allocator keep its blocks.")
                       : std::string("keep the buffers from one iteration to the next.")) +
         " The set-up's and warm-up's " + std::to_string(before_n) + " calls (" + format_ns(before_ns) + ", longest " +
         std::string(c.name(before_longest->event)) + " " + format_ns(c.dur(before_longest->event)) +
         ") are one-time.";
}

// Whether the program empties the caching allocator itself
// (torch.cuda.empty_cache() in its stack): its frees are then its own.
bool empties_cache(const DiagnoseContext& c) {
  return std::any_of(c.host_ops.begin(), c.host_ops.end(),
                     [&c](std::uint32_t e) { return contains_ci(c.name(e), "empty_cache"); });
}

// The caching allocator turned off (see the top): the advice, with its
// counts in `f`'s evidence, or "" when the frees do not show it.
std::string allocator_off(const DiagnoseContext& c, Finding& f) {
  if (!c.is_torch()) return "";
  std::int64_t frees = 0, mallocs = 0, runs = 0;
  std::string_view free_name, malloc_name;
  bool in_run = false;
  for (std::uint32_t e : c.runtime) {
    const std::string_view n = c.name(e);
    // Device memory only: pinned host memory (cudaFreeHost) and the
    // stream-ordered allocator (cudaFreeAsync: PyTorch's cudaMallocAsync
    // backend frees that way by design) are not the caching allocator's.
    if (contains_ci(n, "host") || contains_ci(n, "async") || contains_ci(n, "array")) continue;
    const bool is_free = n == "cudaFree" || n == "hipFree" || n.starts_with("cuMemFree");
    const bool is_malloc = n == "cudaMalloc" || n == "hipMalloc" || n.starts_with("cuMemAlloc");
    if (is_free) {
      ++frees;
      free_name = n;
      if (!in_run) ++runs;
      in_run = true;
    } else if (is_malloc) {
      ++mallocs;
      malloc_name = n;
      in_run = false;
    }
  }
  if (frees < kMinOffFrees || runs < kMinOffFreeRuns || sat_mul(2, frees) < mallocs) return "";
  if (empties_cache(c)) return "";
  f.evidence.num("device_frees", frees).num("device_mallocs", mallocs).num("free_runs", runs);
  const bool hip = free_name.starts_with("hip");
  return "Turn PyTorch's caching allocator back on (unset " +
         std::string(hip ? "PYTORCH_NO_HIP_MEMORY_CACHING and PYTORCH_NO_CUDA_MEMORY_CACHING"
                         : "PYTORCH_NO_CUDA_MEMORY_CACHING") +
         ", or replace a pluggable allocator that does not cache): " + std::to_string(frees) + " " +
         std::string(free_name) + " and " + std::to_string(mallocs) + " " +
         std::string(malloc_name.empty() ? "malloc" : malloc_name) + " calls, the frees one by one between "
         "allocations in " + std::to_string(runs) + " places, mean every freed tensor goes back to the driver, "
         "where a warm caching allocator keeps freed blocks and calls neither.";
}

// The caching allocator out of memory: a burst of device frees inside one
// allocation op (aten::empty*, new_empty, zeros, ones, full; at least
// kMinRetryFrees, no empty_cache() anywhere) is it releasing
// its cached blocks to retry an allocation that failed; the allocations
// after it go back to the driver. The advice, with its counts in `f`'s
// evidence, or "" when no op holds such a burst (issue 38's nineteenth
// round: a TorchRec V100 rank's 17 cudaFree calls, 106 ms, inside an
// all_to_all_single's new_empty, and a 90.6 ms cudaMalloc after them in
// BmmBackward0, told to pre-allocate the bmm's memory).
std::string allocator_retry(const DiagnoseContext& c, Finding& f) {
  if (!c.is_torch() || empties_cache(c)) return "";
  std::map<std::uint32_t, std::pair<std::int64_t, std::int64_t>> by_op;  // enclosing op -> (frees, their time)
  for (std::uint32_t e : c.runtime) {
    const std::string_view n = c.name(e);
    if (n != "cudaFree" && n != "hipFree" && !n.starts_with("cuMemFree")) continue;
    // Inside an allocation (the tensor whose memory the retry is for), not
    // a library's set-up in its op's first call (cuDNN's, cuBLAS's frees in
    // a first convolution or addmm).
    const std::uint32_t op = c.enclosing_op(e, /*skip_views=*/false);
    if (op == kNoIndex) continue;
    const std::string_view on = c.name(op);
    if (!on.starts_with("aten::empty") && !on.starts_with("aten::new_empty") && !on.starts_with("aten::zeros") &&
        !on.starts_with("aten::ones") && !on.starts_with("aten::full")) {
      continue;
    }
    auto& [k, ns] = by_op[op];
    ++k;
    sat_acc(ns, c.dur(e));
  }
  std::uint32_t op = kNoIndex;
  for (const auto& [o, v] : by_op) {
    if (v.first >= kMinRetryFrees && (op == kNoIndex || v.second > by_op[op].second)) op = o;
  }
  if (op == kNoIndex) return "";
  const auto [frees, free_ns] = by_op[op];
  const std::string site = call_sites(c, {op})[op];
  const std::string where = std::string(c.name(op)) + (site.empty() ? "" : " in " + site);
  f.evidence.num("retry_frees", frees).num("retry_free_ns", free_ns).event("retry_in", c.ref(op));
  return "Lower the memory peak: the caching allocator ran out of memory in " + where + " and returned its cached "
         "blocks to the driver to retry (" + std::to_string(frees) + " frees, " + format_ns(free_ns) +
         "), so the allocations after it go back to the driver too. Cut the peak (torch.autocast, activation "
         "checkpointing, a smaller batch or buffers) or fragmentation (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True); "
         "torch.cuda.memory_stats()[\"num_alloc_retries\"] counts these retries.";
}

}  // namespace

void rule_host_blocked(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const IdlePartition& p = c.idle();
  const bool has_steps = !c.steps.steps.empty();
  std::vector<const BlockingCall*> calls;
  for (const BlockingCall& b : p.blocking()) {
    if (b.kind == IdleCause::kBlockedSync) continue;
    if (has_steps && c.step_index_at(c.ts(b.event)) < 0) continue;
    calls.push_back(&b);
  }
  if (calls.empty()) return;

  std::vector<std::uint32_t> events;
  for (const BlockingCall* b : calls) events.push_back(b->event);
  std::unordered_map<std::uint32_t, std::string> site = call_sites(c, std::move(events));

  // GPU idle inside each call: the partition's spans it explains.
  std::unordered_map<std::uint32_t, std::int64_t> idle_of;
  for (const IdlePartition::Span& s : p.spans()) {
    if ((cause_bit(s.cause) & kBlockedCauses) != 0 && s.event != kNoIndex) idle_of[s.event] += s.range.end - s.range.start;
  }

  // The start of the device work each launch or copy call made.
  std::unordered_map<std::uint32_t, std::int64_t> first_work;
  for (const DeviceOp& op : c.device) {
    if (op.launch == kNoIndex) continue;
    const auto [it, added] = first_work.try_emplace(op.launch, op.start);
    if (!added) it->second = std::min(it->second, op.start);
  }

  const std::int64_t window = c.window_ns();
  for (const KindText& kt : kKinds) {
    std::int64_t n = 0, host_ns = 0, max_depth = -1, tuning_n = 0, tuning_ns = 0;
    const BlockingCall* longest = nullptr;
    // (call name, site) -> count, host time, GPU idle
    std::map<std::pair<std::string, std::string>, std::array<std::int64_t, 3>> by_site;
    std::vector<std::int64_t> steps;
    for (const BlockingCall* b : calls) {
      if (b->kind != kt.kind) continue;
      ++n;
      sat_acc(host_ns, c.dur(b->event));
      if (b->tuning) {
        ++tuning_n;
        sat_acc(tuning_ns, c.dur(b->event));
      }
      max_depth = std::max(max_depth, b->queue_depth);
      if (longest == nullptr || c.dur(b->event) > c.dur(longest->event)) longest = b;
      auto& row = by_site[{std::string(c.name(b->event)), site[b->event]}];
      ++row[0];
      sat_acc(row[1], c.dur(b->event));
      sat_acc(row[2], idle_of[b->event]);
      const std::int64_t s = c.step_number_at(c.ts(b->event));
      if (s >= 0) steps.push_back(s);
    }
    if (n == 0 || host_ns < kMinHostNs) continue;
    // Copies made synchronous by pageable memory, every one a transfer of
    // 64 KiB or more (what pageable_memcpy counts), with the GPU busy
    // (copying) through nine tenths of them: the blocking costs nothing
    // beyond the copies' own time, and the consistency pass leaves them to
    // pageable_memcpy's finding (one cause, one fix). Where the GPU idles
    // in them (an input copy stalling the queue), this finding keeps that
    // loss.
    bool all_pageable = kt.kind == IdleCause::kBlockedCopy;
    for (const BlockingCall* b : calls) {
      if (!all_pageable) break;
      if (b->kind != kt.kind) continue;
      all_pageable = b->op != kNoIndex && copy_kind(c.name(c.device[b->op].event)).pageable() &&
                     c.int_arg(c.device[b->op].event, "bytes") >= kPageableMinBytes;
    }
    std::vector<Interval> claim = claimable_idle(p, cause_bit(kt.kind), nullptr, *out);
    // A call whose own device work still waited as long as the call after
    // it returned cost the device nothing: it was held by earlier work the
    // trace does not record (issue 38's fifteenth round: a T4 VGG16's 1.281
    // ms first cudaLaunchKernel, its kernel starting 5.48 ms after the call
    // returned, "the GPU idle 1.281 ms meanwhile").
    std::vector<Interval> costless;
    for (const BlockingCall* b : calls) {
      if (b->kind != kt.kind) continue;
      const auto it = first_work.find(b->event);
      if (it != first_work.end() && it->second - c.end(b->event) >= c.dur(b->event)) {
        costless.push_back({c.ts(b->event), c.end(b->event)});
      }
    }
    if (!costless.empty()) claim = subtract(claim, merge_intervals(std::move(costless)));
    Finding f;
    f.id = "host_blocked";
    set_idle_claim(f, claim);
    const double idle_share = window > 0 ? static_cast<double>(f.idle_ns) / static_cast<double>(window) : 0.0;
    const double host_share = window > 0 ? static_cast<double>(host_ns) / static_cast<double>(window) : 0.0;
    // Material: the GPU lost time in them, or the host lost a large share
    // of its own (what it could have done meanwhile).
    if (idle_share < kMinIdleShare && host_share < kMinHostShare) continue;
    f.severity = idle_share >= kWarnShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
    std::vector<std::pair<std::pair<std::string, std::string>, std::array<std::int64_t, 3>>> rows(by_site.begin(),
                                                                                                   by_site.end());
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second[1] > b.second[1]; });
    std::vector<std::string> sites;
    for (std::size_t i = 0; i < rows.size() && i < kMaxSites; ++i) {
      const auto& [key, v] = rows[i];
      sites.push_back(key.first + (key.second.empty() ? "" : " in " + key.second) + " x" + std::to_string(v[0]) + ": host " + format_ns(v[1]) +
                      ", GPU idle " + format_ns(v[2]));
    }
    const std::string& top_site = site[longest->event];
    // The GPU's idle time inside the calls whatever its cause: a finding
    // whose claim other causes took first (the idle inside a long call that
    // launched nothing, held by low_gpu_utilization) did not see a busy GPU
    // (issue 38: "the GPU stayed busy" while it idled 88 of 146 ms).
    std::vector<Interval> in_calls;
    for (const BlockingCall* b : calls) {
      if (b->kind == kt.kind) in_calls.push_back({c.ts(b->event), c.end(b->event)});
    }
    in_calls = merge_intervals(std::move(in_calls));
    std::int64_t idle_any = 0;
    for (const std::int64_t v : idle_by_cause(p, in_calls)) sat_acc(idle_any, v);
    const bool gpu_busy = static_cast<double>(idle_any) < kBusyIdleShare * static_cast<double>(host_ns);
    std::string meanwhile;
    if (f.idle_ns > 0 && idle_any - f.idle_ns < f.idle_ns / 10) {
      meanwhile = ", the GPU idle " + format_ns(f.idle_ns) + " meanwhile";
    } else if (!gpu_busy) {
      // (issue 38 review: "none of it not held by another cause" read garbled)
      meanwhile = ", the GPU idle " + format_ns(idle_any) + " meanwhile (" +
                  (f.idle_ns > 0 ? format_ns(f.idle_ns) + " of it not held by another cause"
                                 : std::string("all of it held by another cause")) +
                  ")";
    } else {
      meanwhile = "; the GPU stayed busy: the host waited, the GPU did not";
    }
    f.title = std::to_string(n) + " " + (n == 1 ? std::string(kt.one) + " blocks" : std::string(kt.many) + " block") + " the host " +
              format_ns(host_ns) + meanwhile +
              "; longest " + std::string(c.name(longest->event)) + " " + format_ns(c.dur(longest->event)) +
              (top_site.empty() ? "" : " in " + top_site);
    if (kt.kind == IdleCause::kBlockedCopy && longest->op != kNoIndex) {
      f.title += " (" + title_name(c.name(c.device[longest->op].event)) + ")";
    }
    if (kt.kind == IdleCause::kBlockedLaunchQueue) f.title += " (queue depth up to " + std::to_string(max_depth) + ")";
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
    const auto steps_with = static_cast<std::int64_t>(steps.size());
    if (steps.size() > kMaxSteps) steps.resize(kMaxSteps);
    f.evidence.text("kind", std::string(idle_cause_id(kt.kind)))
        .num("calls", n)
        .num("host_blocked_ns", host_ns)
        .num("gpu_idle_ns", f.idle_ns)
        .num("window_ns", window)
        .real("gpu_idle_pct", 100.0 * idle_share)
        .num("min_call_ns", kBlockingCallNs)
        .texts("sites", sites)
        .text("longest_site", top_site)
        .event("longest", c.ref(longest->event))
        .num("gpu_idle_any_cause_ns", idle_any)
        .text("gpu_during", gpu_busy ? "busy" : "idle");
    if (all_pageable && static_cast<double>(idle_any) < 0.1 * static_cast<double>(host_ns)) {
      f.evidence.text("copies", "pageable, 64 KiB or more, the GPU busy");
    }
    if (longest->op != kNoIndex) f.evidence.event("longest_activity", c.ref(c.device[longest->op].event));
    // What the longest call waited for in the causal graph (a sync edge into
    // its return), or that the trace does not say.
    add_waits_for(c, f.evidence, longest->event, EdgeType::kSync);
    if (kt.kind == IdleCause::kBlockedLaunchQueue) {
      f.evidence.num("max_queue_depth", max_depth).num("queue_full_depth", kQueueFullDepth);
    }
    if (has_steps) f.evidence.ints("steps", steps).num("steps_count", steps_with);
    // A full launch queue behind a busy GPU: "no change needed" (the
    // consistency pass drops it under a host-side verdict).
    // A full queue holds about 1024 launched entries: idle inside the calls
    // is another cause's (a graph's own latency), not the queue's, however
    // much of it there is (issue 38's twenty-second round: SGLang's decode
    // replays on an H200, idle 6.6% of the calls' time, all of it claimed
    // elsewhere, told to move more into graphs).
    const bool queue_costs = kt.kind != IdleCause::kBlockedLaunchQueue || f.idle_ns > 0;
    if (kt.kind == IdleCause::kBlockedLaunchQueue && !queue_costs) {
      f.evidence.text("host_side", "nothing to fix");
    }
    // A launch call, linked to its work or not (a trace without correlation
    // ids: its launches load modules too, they create no context).
    const bool launch = longest->op != kNoIndex || c.name(longest->event).find("Launch") != std::string_view::npos;
    f.advice = advice_for(c, kt.kind, c.name(longest->event), top_site,
                          longest->op != kNoIndex ? c.name(c.device[longest->op].event) : std::string_view(),
                          queue_costs && (!gpu_busy || f.idle_ns > 0), launch, has_steps,
                          context_before(c, c.ts(longest->event)));
    // A graph launch that blocks with nothing queued ahead of it: the
    // graph's own upload or node count (issue 38's eighteenth round: a
    // 4568-node decode graph's one launch held the host 9.157 ms, "a full
    // queue").
    if (kt.kind == IdleCause::kBlockedOther && is_graph_launch(c.name(longest->event))) {
      std::int64_t nodes = 0;
      for (const DeviceOp& op : c.device) nodes += op.launch == longest->event;
      f.evidence.num("graph_nodes", nodes);
      const std::string rt = c.is_hip() ? "hip" : "cuda";
      // The trace's first graph launch, with later ones that do not block
      // this way: the upload, paid once (issue 38's twenty-second round:
      // SGLang's first decode replay on an H200, 2.4 ms, ranked above the
      // GPU-bound run's own kernels).
      std::int64_t graph_launches_before = 0;
      std::unordered_set<std::uint32_t> graph_calls;
      for (const DeviceOp& op : c.device) {
        if (op.launch == kNoIndex || !is_graph_launch(c.name(op.launch)) || !graph_calls.insert(op.launch).second) continue;
        if (c.ts(op.launch) < c.ts(longest->event)) ++graph_launches_before;
      }
      const bool first_launch = n == 1 && graph_launches_before == 0 && graph_calls.size() >= 2;
      if (first_launch) {
        f.evidence.text("first_calls", "yes").num("graph_launches", static_cast<std::int64_t>(graph_calls.size()));
        f.advice = "Paid once: " + std::string(c.name(longest->event)) + " is the trace's first graph launch, of " +
                   std::to_string(graph_calls.size()) + ", and held the host " + format_ns(c.dur(longest->event)) +
                   " with nothing queued ahead of it (a graph's first launch after instantiation uploads it; " + rt +
                   "GraphUpload does that ahead, or a warm-up replay before the recording).";
        out->push_back(std::move(f));
        continue;
      }
      f.advice = "Compare with an unprofiled run's step time before acting on it: " + std::string(c.name(longest->event)) +
                 " launched a graph of " + std::to_string(nodes) + " device activities and held the host " +
                 format_ns(c.dur(longest->event)) +
                 " with nothing queued ahead of it, the launch's own cost, not a full queue (a graph's first launch "
                 "after instantiation uploads it, " + rt +
                 "GraphUpload does that ahead; the profiler's records of thousands of nodes add to it). Where every "
                 "launch costs this, split the graph or launch it ahead of when its output is needed.";
    }
    if (tuning_n > 0) {
      f.evidence.num("tuning_calls", tuning_n)
          .num("tuning_host_ns", tuning_ns)
          .num("tuning_conv_calls", p.tuning_ops())
          .num("timing_readbacks", p.tuning_readbacks());
      f.advice = with_tuning(c, f.advice, n, tuning_n, host_ns, tuning_ns,
                             std::string(c.name(longest->event)) + (top_site.empty() ? "" : " in " + top_site),
                             longest->tuning);
    }
    if (kt.kind == IdleCause::kBlockedAlloc) {
      std::int64_t after_idle = 0;
      if (std::string off = allocator_off(c, f); !off.empty()) {
        f.evidence.text("allocator", "caching off");
        f.advice = std::move(off);
      } else if (std::string retry = allocator_retry(c, f); !retry.empty()) {
        f.evidence.text("allocator", "out-of-memory retry");
        f.advice = std::move(retry);
      } else if (std::string after = after_warmup(c, calls, site, idle_of, &after_idle); !after.empty()) {
        // What the fix saves: the measured iterations' allocations; the
        // warm-up's are paid once (the claim keeps all of them).
        f.evidence.num("after_warmup_gpu_idle_ns", after_idle);
        f.advice = after;
        f.impact_ns = std::min(f.idle_ns, after_idle);
        out->push_back(std::move(f));
        continue;
      }
    }
    f.impact_ns = f.idle_ns;
    out->push_back(std::move(f));
  }
}

}  // namespace tprof::internal
