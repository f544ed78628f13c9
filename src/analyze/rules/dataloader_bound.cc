// dataloader_bound: the TensorBoard plugin's "high time cost on input data
// loading" recommendation (kineto tb_plugin/torch_tb_profiler/profiler/
// data.py, analyze; the step breakdown in overall_parser.py and
// event_parser.py). The plugin splits every step's time among roles in
// priority order Kernel > Memcpy > Memset > Communication > Runtime >
// DataLoader > CPU Exec > Other, so DataLoader counts only where no device
// activity and no runtime call is running; it recommends more workers when
// the average step spends > 5% in DataLoader. Where the stack names what
// the main process does during the wait (host_stack.h), the fix names it.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/host_stack.h"
#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// A multi-process iterator's waits are mostly the batch's hand-over when
// receiving it (from its first rebuilt tensor to the call's end) holds this
// share of them.
// The loader's calls hold this much more than its share with nothing
// else running: the title gives both.
constexpr double kBesideFactor = 1.02;
constexpr double kHandoverShare = 0.4;

// data.py: dataloader_ratio > 0.05.
constexpr double kDataLoaderShare = 0.05;
// Ours: a quarter of the step in DataLoader is the input-bound verdict's
// threshold (docs/diagnose.md, "Verdicts"); it makes the finding critical.
constexpr double kCriticalShare = 0.25;
constexpr std::size_t kMaxSteps = 16;

}  // namespace

// Whether the main process's time in the loader scopes `exposed` (on
// `lane`) is torch indexing an in-memory data set sample by sample and
// collating it: a with_stack trace whose frames called there include torch's own
// Dataset __getitem__ (torch/utils/data/dataset.py: TensorDataset) and a
// collate, and no frame outside torch (a data set, a transform of the
// program's) holds a tenth of the time; without a stack, ops that only take
// rows and stack them. Issue 38's thirteenth round: an
// RTX 3080 MLP's single-process loader spent its 892 us in
// TensorDataset.__getitem__ and default_collate, and was told to move
// "decoding and augmentation" to workers.
enum class InMemory { kNo, kByStack, kByOps };
InMemory indexes_in_memory_samples(const DiagnoseContext& c, std::uint32_t lane, const std::vector<Interval>& exposed,
                                   std::int64_t in_loader) {
  const Trace& t = c.trace;
  bool torch_getitem = false, collate = false;
  std::map<StrId, std::int64_t> outside;  // frames outside torch → time inside the scopes
  bool any_frame = false;  // the trace records a stack on this thread
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kPythonFunction || t.events.lane[e] != lane) continue;
    any_frame = true;
    // Frames called inside the scopes (the loop's own frame encloses them).
    if (covered_within(exposed, c.ts(e), c.ts(e) + 1) <= 0) continue;
    const std::int64_t in = covered_within(exposed, c.ts(e), c.end(e));
    const std::string_view n = c.name(e);
    if (n.find("torch/utils/data/dataset.py") != std::string_view::npos && n.ends_with("__getitem__")) torch_getitem = true;
    if (n.find("collate") != std::string_view::npos) collate = true;
    const bool torch_frame = n.find("torch/") != std::string_view::npos || n.starts_with("<built-in") ||
                             n.starts_with("<frozen") || n.starts_with("<string>");
    if (!torch_frame) sat_acc(outside[t.events.name[e]], in);
  }
  if (!any_frame) {
    // Without a stack, the ops say it: each call's ops only take rows
    // (select, index, slice) and stack them, with views and allocations in
    // between (issue 38's nineteenth round: a Lightning predict loop's 64
    // calls of 41 us, one aten::select and one aten::stack each, recorded by
    // the legacy profiler, were told to use worker processes).
    // Rows taken, and tensors stacked (aten::stack unsqueezes each): every
    // stacked sample must be a row the ops took, not a tensor Python built
    // unrecorded (an Ascend loader's 64 samples, two slices).
    std::int64_t rows = 0, unsqueezed = 0;
    bool stacked = false;
    for (std::uint32_t e : c.host_ops) {
      if (c.kind(e) != EventKind::kCpuOp || t.events.lane[e] != lane) continue;
      if (covered_within(exposed, c.ts(e), c.ts(e) + 1) <= 0 || is_dataloader_scope(c.name(e))) continue;
      const std::string_view n = after_namespaces(c.name(e));
      if (n == "select" || n == "index" || n == "index_select" || n == "slice" || n == "narrow") {
        ++rows;
      } else if (n == "stack" || n == "cat" || n == "_cat") {
        stacked = true;
      } else if (n == "unsqueeze") {
        ++unsqueezed;
      } else if (!(n == "empty" || n == "as_strided" || n == "view" || n == "resize_" ||
                   n == "expand" || n == "reshape" || n == "_reshape_alias" || n == "alias")) {
        return InMemory::kNo;
      }
    }
    return rows > 0 && rows >= unsqueezed && stacked ? InMemory::kByOps : InMemory::kNo;
  }
  if (!torch_getitem || !collate) return InMemory::kNo;
  for (const auto& [name, ns] : outside) {
    if (sat_mul(10, ns) >= in_loader) return InMemory::kNo;
  }
  return InMemory::kByStack;
}

// The main process receiving a worker's batch, seen without a stack: in
// each multi-process __next__, the batch's tensors are rebuilt from the
// workers' shared memory (aten::empty, then aten::set_ onto the received
// storage, one per tensor), after the batch left the queue. Issue 38's
// fourteenth round: a CIFAR-10 CNN's waits, 506-663 us each, held two such
// rebuilds about 200 us apart (each storage's file descriptor fetched from
// the worker), and were told to add workers.
struct Handover {
  std::int64_t ns = 0;        // from each call's first rebuilt tensor to its end
  std::int64_t tensors = 0;   // aten::set_ calls in the calls
  std::int64_t calls = 0;     // calls holding one
  bool uniform = true;        // every such call rebuilds as many tensors: one batch each
};

Handover batch_handover(const DiagnoseContext& c, const std::vector<std::uint32_t>& scopes) {
  Handover h;
  const Trace& t = c.trace;
  for (std::uint32_t s : scopes) {
    if (c.name(s).find("_MultiProcessingDataLoaderIter") == std::string_view::npos) continue;
    std::int64_t first_empty = -1;
    std::int64_t sets = 0;
    auto it = std::lower_bound(c.host_ops.begin(), c.host_ops.end(), c.ts(s),
                               [&](std::uint32_t e, std::int64_t v) { return c.ts(e) < v; });
    for (; it != c.host_ops.end() && c.ts(*it) < c.end(s); ++it) {
      if (t.events.lane[*it] != t.events.lane[s] || c.kind(*it) != EventKind::kCpuOp) continue;
      const std::string_view n = c.name(*it);
      if (n == "aten::empty" && first_empty < 0) first_empty = c.ts(*it);
      if (n == "aten::set_" && first_empty >= 0) ++sets;
    }
    if (sets == 0) continue;
    // A call that takes in more than one batch (an out-of-order batch kept
    // until the one due arrives) waits for the workers between them: not a
    // hand-over (issue 38's fourteenth round: a CPU CIFAR-100 pipeline,
    // 1,564 rebuilds over 470 calls, most of its wait the queue).
    if (h.calls > 0 && sets * h.calls != h.tensors) h.uniform = false;
    ++h.calls;
    h.tensors += sets;
    sat_acc(h.ns, c.end(s) - first_empty);
  }
  return h;
}

void rule_dataloader_bound(const DiagnoseContext& c, std::vector<Finding>* out) {
  std::vector<Interval> loader;
  std::vector<std::uint32_t> scopes;
  std::uint32_t longest = kNoIndex, first = kNoIndex;
  bool workers = false;  // torch's multi-process iterator: workers already load the input
  for (std::uint32_t e : c.host_ops) {
    const EventKind k = c.kind(e);
    if (k != EventKind::kCpuOp && k != EventKind::kUserAnnotation) continue;
    if (!is_dataloader_scope(c.name(e))) continue;
    loader.push_back({c.ts(e), c.end(e)});
    scopes.push_back(e);
    if (longest == kNoIndex || c.dur(e) > c.dur(longest)) longest = e;
    if (first == kNoIndex || c.ts(e) < c.ts(first)) first = e;
    workers = workers || c.name(e).find("_MultiProcessingDataLoaderIter") != std::string_view::npos;
  }
  if (loader.empty()) return;
  // The workers starting before the first __next__ (the iterator's
  // creation) are its start-up too.
  const Interval spawn = c.dataloader_startup();
  const std::int64_t spawn_ns = spawn.end - spawn.start;
  // The calls alone, as the verdict counts them (the title's second figure).
  const std::vector<Interval> calls_only = merge_intervals(std::vector<Interval>(loader));
  if (spawn_ns > 0) loader.push_back(spawn);
  std::vector<Interval> higher;
  higher.reserve(c.device.size() + c.runtime.size());
  for (const DeviceOp& op : c.device) higher.push_back({op.start, op.end});
  for (std::uint32_t e : c.runtime) higher.push_back({c.ts(e), c.end(e)});
  // The loader's calls as they ran, device work beside them or not (the
  // verdict's figure), and where nothing else runs (the plugin's).
  const std::vector<Interval> calls = merge_intervals(std::move(loader));
  const std::vector<Interval> exposed = subtract(calls, merge_intervals(std::move(higher)));

  // Windows: the steps, or the whole trace as the plugin's single step "0".
  struct Window {
    std::int64_t step, lo, hi;
  };
  std::vector<Window> windows;
  for (const StepStat& s : c.steps.steps) windows.push_back({s.step, s.start_ns, s.start_ns + s.dur_ns});
  if (windows.empty()) windows.push_back({-1, c.start_ns, c.end_ns});
  std::int64_t total = 0, in_loader = 0, worst_ns = 0, worst_step = -1;
  // The worst step by the loader's calls.
  std::int64_t raw = 0, worst_raw = 0, worst_raw_step = -1;
  std::vector<std::int64_t> steps_over;
  for (const Window& w : windows) {
    const std::int64_t ns = covered_within(exposed, w.lo, w.hi);
    const std::int64_t all = covered_within(calls_only, w.lo, w.hi);
    sat_acc(raw, all);
    if (all > worst_raw) worst_raw = all, worst_raw_step = w.step;
    sat_acc(total, w.hi - w.lo);  // steps may overlap
    sat_acc(in_loader, ns);
    if (ns > worst_ns) {
      worst_ns = ns;
      worst_step = w.step;
    }
    if (w.step >= 0 && static_cast<double>(ns) > kDataLoaderShare * static_cast<double>(w.hi - w.lo) &&
        steps_over.size() < kMaxSteps) {
      steps_over.push_back(w.step);
    }
  }
  if (total <= 0) return;
  const double share = static_cast<double>(in_loader) / static_cast<double>(total);
  if (share <= kDataLoaderShare) return;

  // The first __next__ of a multi-process iterator starts the workers: a
  // wait that is mostly that call is start-up, not a slow pipeline.
  const std::int64_t spawn_in_ns = spawn_ns > 0 ? covered_within(exposed, spawn.start, spawn.end) : 0;
  const std::int64_t first_ns = sat_add(covered_within(exposed, c.ts(first), c.end(first)), spawn_in_ns);
  const std::int64_t later_ns = in_loader - first_ns;
  // The multi-process iterator's first call against its later ones: start-up
  // only where DiagnoseContext::first_next_is_startup says so.
  std::vector<std::uint32_t> mp;
  for (const std::uint32_t e : scopes) {
    if (c.name(e).find("_MultiProcessingDataLoaderIter") != std::string_view::npos) mp.push_back(e);
  }
  std::sort(mp.begin(), mp.end(), [&](std::uint32_t a, std::uint32_t b) { return c.ts(a) < c.ts(b); });
  // The workers spawning before the first call (spawn) start it too.
  const bool first_is_startup = c.first_next_is_startup(mp, spawn_ns);
  const bool startup = first_is_startup && sat_mul(2, first_ns) >= in_loader;

  Finding f;
  f.id = "dataloader_bound";
  // Start-up happens once: never critical (issue 38's fifth round: a
  // trace without steps was told "[critical] 29.0% of the step time" for
  // one 780 ms first __next__).
  f.severity = share >= kCriticalShare && !startup ? FindingSeverity::kCritical : FindingSeverity::kWarning;
  // Where the device works beside the loader's calls, the title says both
  // figures: the plugin's (nothing else running) and the calls' own, the
  // verdict's (issue 38's fourteenth round: "37.2% ... (2.817 s)" beside
  // a verdict line of 70.7%, a DDP rank whose all-reduce ran through its
  // loads; the thirteenth's T4 MLP likewise).
  const bool beside = static_cast<double>(raw) >= kBesideFactor * static_cast<double>(in_loader);
  // The workers' start-up counts in the first figure, not in the calls'
  // (issue 38's sixteenth round: "13.137 s ... its calls hold 13.757 s",
  // the first with 127 ms of spawning in it, matched no reading).
  const std::string spawn_in =
      spawn_in_ns > 0 && !startup ? ", with its workers' " + format_ns(spawn_in_ns) + " start-up" : std::string();
  f.title = format_pct(100.0 * share) + (c.steps.steps.empty() ? " of the trace" : " of the step time") +
            " is in DataLoader" + (beside ? " alone" : "") + " (" + format_ns(in_loader) + " of " +
            format_ns(total) + spawn_in + (beside ? ", nothing else running; its calls hold " + format_ns(raw) + ", " +
                                             format_pct(100.0 * static_cast<double>(raw) / static_cast<double>(total))
                                       : std::string()) +
            ")" + (startup ? ", mostly its workers starting (before its first batch)" : "");
  f.evidence.real("dataloader_pct", 100.0 * share)
      .num("dataloader_ns", in_loader)
      .num("step_total_ns", total)
      .num("windows", static_cast<std::int64_t>(windows.size()))
      .real("threshold_pct", 100.0 * kDataLoaderShare)
      .num("worst_step", worst_step)
      .num("worst_step_dataloader_ns", worst_ns)
      .event("longest_dataloader", c.ref(longest));
  if (!steps_over.empty()) f.evidence.ints("steps", steps_over);
  const std::size_t nsteps = c.steps.steps.size();
  const std::string where =
      beside ? format_ns(raw) + " in " + std::string(c.name(longest)) +
                   (nsteps > 0 ? " (" + format_ns(raw / static_cast<std::int64_t>(nsteps)) + " a step, up to " +
                                     format_ns(worst_raw) + " in step " + std::to_string(worst_raw_step) + ")"
                               : std::string()) +
                   ", " + format_ns(in_loader) + " of it with nothing else running"
             : format_ns(in_loader) + " in " + std::string(c.name(longest)) +
                   (nsteps > 0 ? " (" + format_ns(in_loader / static_cast<std::int64_t>(nsteps)) +
                                     " a step, up to " + format_ns(worst_ns) + " in step " +
                                     std::to_string(worst_step) + ")"
                               : std::string());
  // What the main process does while it waits, where the stack (with_stack)
  // names something below the iterator: a transform, a decoder or a
  // collate function running in the main process (a scipy zoom in a
  // single-process iterator), whose fix is to move it to the workers or
  // precompute it. The iterator's own frames (__next__, the queue it reads)
  // say nothing the scope does not.
  const HostFrame hf = host_frame(c, c.trace.events.lane[longest], exposed);
  std::string inside;
  if (hf.found() && hf.kind != HostWorkKind::kDataLoader) {
    f.evidence.text("host_frame", hf.name)
        .num("host_frame_ns", hf.held_ns)
        .text("host_work_kind", host_work_kind_id(hf.kind))
        .event("host_frame_event", c.ref(hf.event));
    inside = "; most of the wait is " + host_frame_text(hf) + " in the main process" +
             (hf.kind == HostWorkKind::kPreprocessing ? ", preprocessing that workers run in parallel or that can be "
                                                        "precomputed"
                                                      : "");
  }
  if (beside) f.evidence.num("dataloader_calls_ns", raw);
  f.evidence.text("iterator", workers ? "multi_process" : "single_process").num("first_call_ns", first_ns);
  // Host-to-device copies from pinned memory: pin_memory is on already
  // (issue 38 review: pin_memory=True advised where every copy was
  // "Pinned -> Device").
  const std::int64_t pinned = c.pinned_htod_copies();
  const bool pinned_already = pinned > 0;
  if (pinned_already) f.evidence.num("pinned_htod_copies", pinned);
  // A run without device work gets no GPU advice.
  const bool gpu = c.has_device();
  // Launched work queued on the device while the loop waited (the idle
  // partition's stream_wait inside the waits): the GPU idled on the device,
  // not for the input, and overlapping the waits saves only the rest
  // (issue 38's ninth round: a DCGAN's __next__ calls fell in 2.3 ms device
  // stalls with 8 kernels queued; the replay saved 0 ns).
  std::int64_t queued = 0;
  if (gpu) {
    std::vector<Interval> in_windows;
    for (const Window& w : windows) {
      for (const Interval& iv : exposed) {
        const std::int64_t a = std::max(iv.start, w.lo), b = std::min(iv.end, w.hi);
        if (a < b) in_windows.push_back({a, b});
      }
    }
    queued = idle_by_cause(c.idle(), merge_intervals(std::move(in_windows)))[static_cast<std::size_t>(IdleCause::kStreamWait)];
  }
  const bool mostly_queued = sat_mul(2, queued) >= in_loader;
  const std::string gpu_idles =
      !gpu ? std::string()
      : mostly_queued
          ? " Launched work was queued on the device during " + format_ns(queued) +
                " of these waits: the GPU idled on the device, not for the input, so overlapping them saves little."
          : std::string(" While the main process waits no kernel and no launch runs, so the GPU idles.");
  if (mostly_queued) {
    f.severity = FindingSeverity::kInfo;
    f.evidence.num("queued_on_device_ns", queued);
  }
  if (startup && spawn_ns > 0) {
    // The workers spawned when the iterator was made (each epoch's
    // `for batch in loader`), before any batch.
    f.evidence.num("workers_start_ns", spawn_ns);
    f.advice = "Keep the workers across epochs (persistent_workers=True), or load in the main process "
               "(num_workers=0) where the data set is small, and start recording after the first batch: most of "
               "the wait (" + format_ns(first_ns) + " of " + format_ns(in_loader) +
               ") is the multi-process DataLoader starting its workers, " + format_ns(spawn_ns) +
               " before its first batch with no op running" +
               // Seconds of it are a spawn start's, each worker importing
               // the script again; a fork takes milliseconds.
               (spawn_ns >= DiagnoseContext::kDataLoaderStartupNs
                    ? " (a spawned worker imports the script again: Windows and macOS)"
                    : "") +
               ", which each epoch pays again unless they persist. The later waits (" +
               format_ns(later_ns) +
               ") are the pipeline's steady cost: more workers or a larger prefetch_factor if they matter.";
  } else if (startup) {
    f.advice = "Start recording after the first batch (torch.profiler.schedule(wait=1, ...)) and keep the workers "
               "across epochs (persistent_workers=True): most of the wait is the multi-process DataLoader's first "
               "__next__ (" + format_ns(first_ns) + " of " + format_ns(in_loader) +
               "), its workers starting and filling their first batches, a one-time cost. The later waits (" +
               format_ns(later_ns) +
               ") are the pipeline's steady cost: more workers or a larger prefetch_factor if they matter.";
  } else if (const Handover h = workers && !mostly_queued && (!hf.found() || hf.kind == HostWorkKind::kDataLoader)
                                   ? batch_handover(c, scopes)
                                   : Handover{};
             gpu && h.calls > 0 && h.uniform && h.tensors >= 2 * h.calls &&
             static_cast<double>(h.ns) >= kHandoverShare * static_cast<double>(in_loader)) {
    // The batches arrive; receiving them is much of the wait.
    f.evidence.num("handover_ns", h.ns).num("rebuilt_tensors", h.tensors);
    const std::string per = format_ns(h.ns / h.calls);
    f.advice = std::string(pinned_already ? "Make the batches cheaper to hand over: "
                                          : "Receive the batches off the main thread: pin_memory=True (the pin-memory "
                                            "thread receives and pins them), and ") +
               (h.tensors > 4 * h.calls ? "collate each batch into fewer, larger tensors"
                                         : "larger batches (the hand-over costs per batch, not per sample)") +
               ", or keep a data set that fits in GPU memory there. " +
               format_ns(h.ns) + " of the loop's " + format_ns(in_loader) + " wait (" + per +
               " a batch) comes after a batch left the workers' queue: the main process rebuilding its " +
               std::to_string(h.tensors / h.calls) +
               " tensors from the workers' shared memory, one storage's file descriptor at a time, not the workers "
               "falling behind; more workers would not shorten it. The loop waits " + where + inside + ".";
  } else if (workers && hf.found() && hf.kind == HostWorkKind::kBatchHandover) {
    // The workers keep up; receiving their batches is the cost (issue 38's
    // eighth round: TensorRT runs whose main thread spent 85% of each wait
    // in rebuild_storage_fd, 50-70 us in the queue itself).
    f.advice = host_frame_remedy(c, hf) + " The loop waits " + where + inside + ".";
  } else if (workers) {
    // The action first; a CPU-only run gets no GPU advice (issue 38's
    // eighth round: pin_memory, "decode and augment on the GPU" and "the GPU
    // idles" on a CPU-only DataLoader profile).
    // The first call stands out: the workers starting (first_next_is_startup;
    // a recording that begins at step 4 sees a first call like the others,
    // issue 38's ninth round), a tenth of the wait or more.
    const bool notable_first = first_is_startup && sat_mul(10, first_ns) >= in_loader;
    f.advice = std::string("Make the workers keep up: add workers (up to the CPU cores") + (gpu ? " per GPU" : "") +
               "), raise prefetch_factor, " + (gpu && !pinned_already ? "pin_memory=True, " : "") +
               "and make the per-sample transforms cheaper (" +
               (gpu ? "decode and augment on the GPU, or pre-process the data set; a data set that fits in GPU memory "
                      "can live there"
                    : "pre-process the data set once and load the tensors") +
               "). The DataLoader already uses worker processes (_MultiProcessingDataLoaderIter), yet the loop waits " +
               where + inside + "; " +
               (notable_first ? "its first __next__ (" + format_ns(first_ns) +
                                    ") is the workers starting (persistent_workers=True, and record after the first "
                                    "batch), the later waits (" + format_ns(later_ns) + ") are the workers not keeping up."
                              : std::string("that is the workers not keeping up.")) +
               (gpu ? gpu_idles
                    : " Their work is not in this trace (only the main process is): profile the data set's __getitem__ "
                      "alone to see what it costs.");
  } else if (const InMemory m = indexes_in_memory_samples(c, c.trace.events.lane[longest], exposed, in_loader);
             m != InMemory::kNo) {
    f.evidence.text("in_memory_samples", m == InMemory::kByStack ? "yes" : "by_ops");
    f.advice = "Index whole batches instead of samples: the loop waits " + where +
               (m == InMemory::kByStack
                    ? ", torch indexing an in-memory data set one sample at a time (its own Dataset __getitem__, "
                      "TensorDataset's) and collating the samples, no transform of the program's. Pass a "
                    : ", each call only selecting rows of an in-memory tensor and stacking them (its ops: select or "
                      "index, then stack), no decoding or transform. Pass a ") +
               "BatchSampler as the sampler with batch_size=None, or shuffle an index tensor and slice the tensors "
               "per batch" +
               (gpu ? "; a data set that fits in GPU memory can live there and be indexed on the device" : "") +
               ". Workers would add their hand-over to work this small.";
  } else {
    // Workers bounded by the cores the process has beside torch's own
    // threads, and the in-memory alternative (issue 38's twenty-fifth round:
    // "num_workers=4 or more" told to MNIST loops on a 2-core machine whose
    // torch already used both, their batches built from in-memory images
    // with no decoding to move).
    const bool in_main = c.name(longest).find("_SingleProcessDataLoaderIter") != std::string_view::npos;
    f.advice = std::string("Build the batches off the loop: ") +
               (in_main ? "the DataLoader makes each one in the main process (num_workers=0), and the loop spends "
                        : "the loop waits ") +
               where + inside + ". Give it worker processes, DataLoader(num_workers=N" +
               (gpu ? ", pin_memory=True" : "") +
               ", persistent_workers=True) with N no more than the cores free beside " +
               (gpu ? "the main process" : "torch's own threads (torch.get_num_threads())") +
               "; a data set whose transforms are fixed (no random augmentation) can instead be transformed once, "
               "kept as tensors and indexed a whole batch at a time." +
               (mostly_queued ? gpu_idles
                : gpu         ? " While the main process loads the next batch no kernel and no launch runs, so the GPU idles."
                              : "");
  }
  f.impact_ns = mostly_queued ? in_loader - queued : in_loader;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
