// Host work named from the stack (host_stack.h). Python functions and user
// annotations nest in time on their thread (the Python tracer records a
// call's entry and exit; record_function scopes open and close inside the
// frame that entered them), so one scan with a stack of open frames gives
// every frame its depth without decoding the "Python parent id" args.
#include "src/analyze/host_stack.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_map>

#include "src/base/ascii.h"
#include "src/base/saturate.h"

namespace tprof::internal {

namespace {

// An annotation lasting this share of the trace wraps the whole run.
constexpr double kWholeRunShare = 0.9;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool has(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

// Frames a user does not change: torch's own Python (torch/..., as the
// tracer writes paths relative to site-packages), built-ins (C functions
// called from Python), and the standard library's plumbing. They name a
// stretch only when no user frame holds the same time.
bool is_internal_frame(std::string_view n) {
  static constexpr std::string_view kPrefixes[] = {"torch/", "<built-in", "<frozen", "<string>", "threading.py",
                                                   "contextlib.py", "functools.py", "typing.py", "abc.py",
                                                   "queue.py", "selectors.py", "multiprocessing/", "enum.py",
                                                   "copy.py", "weakref.py", "_weakrefset.py", "tqdm/"};
  for (std::string_view p : kPrefixes) {
    if (starts_with(n, p)) return true;
  }
  return false;
}

// The kind of one frame (host_stack.h, HostWorkKind). Names are matched as
// the Python tracer writes them: "path/file.py(line): function",
// "<built-in method name of ...>", "nn.Module: Name_N".
HostWorkKind frame_kind(std::string_view n) {
  // Inductor's generated wrapper: the output code lives in
  // /tmp/torchinductor_<user>/xx/cxxx.py (TORCHINDUCTOR_CACHE_DIR elsewhere,
  // "output_code" in its debug dumps); its guards call assert_size_stride
  // once per input and output of every kernel.
  if (has(n, "torchinductor_") || has(n, "output_code") || has(n, "assert_size_stride") ||
      has(n, "assert_alignment")) {
    return HostWorkKind::kInductorWrapper;
  }
  if (has(n, "_sync_buffers") || has(n, "_broadcast_coalesced") || has(n, "unflatten_dense_tensors") ||
      has(n, "_sync_module_buffers") || has(n, "_distributed_broadcast_coalesced")) {
    return HostWorkKind::kDdpBuffers;
  }
  if (has(n, "utils/data/dataloader.py") && (has(n, ": __next__") || has(n, ": _next_data"))) {
    return HostWorkKind::kDataLoader;
  }
  if (is_dataloader_scope(n)) return HostWorkKind::kDataLoader;
  // torch.compile at work: Dynamo times its phases in user annotations
  // ("_compile.compile_inner (dynamo_timed)", "create_aot_dispatcher_function
  // (dynamo_timed)"), and with_stack names its modules.
  if (has(n, "(dynamo_timed)") || has(n, "_compile.compile_inner") || has(n, "torch/_dynamo/") ||
      has(n, "torch/_inductor/compile_fx") || has(n, "create_aot_dispatcher_function")) {
    return HostWorkKind::kCompile;
  }
  // Triton compiling a kernel on its first call with a new configuration
  // (its JIT: make_ttir, make_ttgir, make_llir, make_ptx, make_cubin under
  // triton/compiler/compiler.py's compile).
  if (has(n, "triton/compiler/")) return HostWorkKind::kJitCompile;
  // A worker's batch arriving in the main process: its tensors unpickled,
  // each storage's shared-memory file descriptor fetched from the worker
  // through multiprocessing's resource sharer.
  if ((has(n, "torch/multiprocessing/reductions.py") && has(n, "rebuild_storage")) ||
      has(n, "multiprocessing/resource_sharer.py")) {
    return HostWorkKind::kBatchHandover;
  }
  static constexpr std::string_view kPreprocessing[] = {
      "image_processing", "video_processing", "image_transforms", "feature_extraction", "processing_utils",
      "PIL/", "torchvision/transforms", "torchvision/io", "scipy/ndimage", "cv2", "skimage/",
      "albumentations/", "decord", "av/", "librosa/", "torchaudio/transforms", "tokenization_"};
  for (std::string_view p : kPreprocessing) {
    if (has(n, p)) return HostWorkKind::kPreprocessing;
  }
  // A pipeline's own preprocess step (transformers' Pipeline.preprocess,
  // which decodes and resizes the input).
  if (n.size() > 12 && n.substr(n.size() - 12) == ": preprocess") return HostWorkKind::kPreprocessing;
  // An annotation that says so (issue 38's fourteenth round: a video
  // classifier's "extract frames" and "process frames", 90% of each step).
  if (is_input_annotation(n)) return HostWorkKind::kPreprocessing;
  return HostWorkKind::kOther;
}

// The name as printed: built-ins carry the object's address
// ("<built-in method to of Tensor object at 0x7cc1559c5310>"), different in
// every run and no help to the reader.
std::string clean_name(std::string_view n) {
  std::string s(n);
  const std::size_t at = s.find(" at 0x");
  if (at != std::string::npos) {
    std::size_t end = at + 6;
    while (end < s.size() && std::isxdigit(static_cast<unsigned char>(s[end])) != 0) ++end;
    s.erase(at, end - at);
  }
  return s;
}

}  // namespace

bool is_input_annotation(std::string_view name) {
  if (name.find(".py(") != std::string_view::npos || name.find('/') != std::string_view::npos) return false;
  const std::string n = ascii_lower(name);
  for (std::string_view w : {"preprocess", "pre-process", "pre_process", "decode", "decoding", "frames", "tokeniz",
                             "augment", "resize", "read video", "read_video", "read image", "read_image", "load image",
                             "load_image", "load video", "load_video", "open video", "open_video"}) {
    if (n.find(w) != std::string::npos) return true;
  }
  return false;
}

bool has_python_stack(const DiagnoseContext& c) {
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) == EventKind::kPythonFunction) return true;
  }
  return false;
}

bool runs_vllm(const DiagnoseContext& c) {
  for (const Lane& l : c.trace.lanes) {
    const std::string_view n = c.trace.str(l.thread_name);
    if (n.find("VLLM") != std::string_view::npos || n.find("vllm") != std::string_view::npos) return true;
  }
  return false;
}

bool is_wait_frame(std::string_view n) {
  if (starts_with(n, "<built-in method acquire of") || starts_with(n, "<built-in function sleep") ||
      starts_with(n, "<built-in method sleep") || starts_with(n, "<built-in method poll") ||
      starts_with(n, "<built-in method select") || starts_with(n, "<built-in method get of _queue.")) {
    return true;
  }
  // An event loop idles in its poll, below any Python frame; its callbacks
  // are its work (issue 38's eleventh round: a vLLM frontend's uvloop
  // thread, 59 ms of callbacks in 23.9 s, and two thread-pool workers
  // blocked in SimpleQueue.get, each "100.0%" busy).
  if ((starts_with(n, "asyncio/runners.py") && has(n, ": run")) || (starts_with(n, "uvloop/") && has(n, ": run")) ||
      (starts_with(n, "asyncio/base_events.py") &&
       (has(n, ": run_forever") || has(n, ": run_until_complete") || has(n, ": _run_once")))) {
    return true;
  }
  for (std::string_view p : {"threading.py", "queue.py", "selectors.py", "multiprocessing/connection.py",
                             "multiprocessing/synchronize.py", "concurrent/futures/"}) {
    if (!starts_with(n, p)) continue;
    for (std::string_view f : {": wait", ": get", ": select", ": _wait", ": result", ": poll", ": _poll", ": recv",
                               ": _recv", ": acquire", ": _acquire_restore", ": join"}) {
      if (has(n, f)) return true;
    }
  }
  // Jupyter's kernel threads block in C, below any Python frame: the
  // heartbeat's zmq device, the iostream watcher's read of its pipe (issue
  // 38's tenth round: a notebook's three kernel threads, one lane, "100.0%").
  if ((starts_with(n, "ipykernel/heartbeat.py") && has(n, ": run")) ||
      (starts_with(n, "ipykernel/iostream.py") && has(n, ": _watch_pipe_fd"))) {
    return true;
  }
  // Reading a message from another process (Inductor's compile workers'
  // _recv_msg, a connection's recv_bytes): waiting for its sender.
  for (std::string_view f : {": _recv_msg", ": recv_msg", ": recv_bytes", ": _recv_bytes", ": recv_pyobj"}) {
    if (n.size() >= f.size() && n.substr(n.size() - f.size()) == f) return true;
  }
  return false;
}

std::uint32_t launching_lane(const DiagnoseContext& c) {
  std::unordered_map<std::uint32_t, std::int64_t> launches;
  for (const DeviceOp& op : c.device) {
    if (op.launch != kNoIndex) ++launches[c.trace.events.lane[op.launch]];
  }
  std::uint32_t best = kNoIndex;
  std::int64_t most = 0;
  for (const auto& [lane, n] : launches) {
    if (n > most || (n == most && lane < best)) {
      best = lane;
      most = n;
    }
  }
  return best;
}

namespace {

// host_frame on one thread; *waiting: whether its deepest frame holding
// the stretch waits (is_wait_frame).
HostFrame frame_on_lane(const DiagnoseContext& c, std::uint32_t lane, const std::vector<Interval>& ranges,
                        bool* waiting) {
  *waiting = false;
  HostFrame out;
  out.lane = lane;
  for (const Interval& r : ranges) sat_acc(out.stretch_ns, r.end - r.start);
  if (lane == kNoIndex || ranges.empty() || out.stretch_ns <= 0) return out;
  const std::int64_t lo = ranges.front().start, hi = ranges.back().end;
  // Per frame name: its calls' time inside the ranges (a recursive call
  // inside its own frame is not counted twice), its deepest depth, and the
  // call holding the most.
  struct Acc {
    std::int64_t held = 0;
    std::int64_t covered_until = INT64_MIN;  // calls of one name come in ts order: skip nested repeats
    int depth = 0;  // of `best`
    std::uint32_t best = kNoIndex;
    std::int64_t best_held = -1;
    bool annotation = false;
  };
  std::unordered_map<StrId, Acc> by_name;
  std::vector<std::uint32_t> open;  // frames open at the current event, outermost first
  auto held_in = [&](std::int64_t s, std::int64_t e) {
    std::int64_t ns = 0;
    auto it = std::upper_bound(ranges.begin(), ranges.end(), s, [](std::int64_t v, const Interval& r) { return v < r.end; });
    for (; it != ranges.end() && it->start < e; ++it) sat_acc(ns, std::min(e, it->end) - std::max(s, it->start));
    return ns;
  };
  for (std::uint32_t e : c.host_ops) {
    if (c.trace.events.lane[e] != lane) continue;
    const EventKind k = c.kind(e);
    if (k != EventKind::kPythonFunction && k != EventKind::kUserAnnotation) continue;
    if (c.ts(e) >= hi) break;
    const std::string_view n = c.name(e);
    if (is_profiler_step(n)) continue;
    // An annotation around the whole recording (a benchmark's
    // "[param|cuda]") names nothing the trace does not.
    if (k == EventKind::kUserAnnotation &&
        static_cast<double>(c.dur(e)) >= kWholeRunShare * static_cast<double>(c.end_ns - c.start_ns)) {
      continue;
    }
    while (!open.empty() && c.end(open.back()) <= c.ts(e)) open.pop_back();
    const int depth = static_cast<int>(open.size());
    open.push_back(e);
    if (c.end(e) <= lo) continue;
    Acc& a = by_name[c.trace.events.name[e]];
    const std::int64_t from = std::max(c.ts(e), a.covered_until);
    const std::int64_t ns = from < c.end(e) ? held_in(from, c.end(e)) : 0;
    a.covered_until = std::max(a.covered_until, c.end(e));
    sat_acc(a.held, ns);
    a.annotation = k == EventKind::kUserAnnotation;
    // Its depth is that of its call holding the most of the stretch.
    if (ns > a.best_held) {
      a.best_held = ns;
      a.best = e;
      a.depth = depth;
    }
  }
  // The frames holding most of the stretch, deepest first: with nesting
  // they form one chain from the thread's outermost frame down.
  struct Held {
    StrId name;
    const Acc* acc;
  };
  std::vector<Held> chain;
  for (const auto& [name, a] : by_name) {
    if (static_cast<double>(a.held) > kHostFrameShare * static_cast<double>(out.stretch_ns)) chain.push_back({name, &a});
  }
  if (chain.empty()) return out;
  std::sort(chain.begin(), chain.end(), [](const Held& a, const Held& b) {
    if (a.acc->depth != b.acc->depth) return a.acc->depth > b.acc->depth;
    if (a.acc->held != b.acc->held) return a.acc->held < b.acc->held;
    return a.name < b.name;
  });
  // The named frame: the deepest user frame, or a deeper torch frame of a
  // kind the advice knows (DDP's _sync_buffers under the module's frame);
  // never a built-in when a Python frame above it holds the same time (the
  // generated `call`, not each assert_size_stride it makes). The deepest
  // frame of all when every one is internal.
  const Held* named = nullptr;
  for (const Held& h : chain) {
    const std::string_view n = c.trace.str(h.name);
    if (!is_internal_frame(n) || (frame_kind(n) != HostWorkKind::kOther && !starts_with(n, "<built-in"))) {
      named = &h;
      break;
    }
  }
  if (named == nullptr) named = &chain.front();
  // The kind: the deepest frame of a known kind in the chain (a scipy zoom
  // inside a DataLoader's __next__ is preprocessing in the main process).
  // numpy is everywhere (metrics, logging): preprocessing only under a frame
  // that loads or transforms data.
  bool data_frame = false;
  for (const Held& h : chain) {
    const std::string_view n = c.trace.str(h.name);
    data_frame = data_frame || has(n, "__getitem__") || has(n, "transform") || has(n, "preprocess") ||
                 has(n, "collate") || has(n, "dataset") || frame_kind(n) == HostWorkKind::kDataLoader;
  }
  for (const Held& h : chain) {
    const std::string_view n = c.trace.str(h.name);
    HostWorkKind k = frame_kind(n);
    if (k == HostWorkKind::kOther && starts_with(n, "numpy/") && data_frame) k = HostWorkKind::kPreprocessing;
    if (k != HostWorkKind::kOther) {
      out.kind = k;
      break;
    }
  }
  out.event = named->acc->best;
  out.name = clean_name(c.trace.str(named->name));
  out.held_ns = std::min(named->acc->held, out.stretch_ns);
  out.annotation = named->acc->annotation;
  if (named != &chain.front()) out.inner = clean_name(c.trace.str(chain.front().name));
  *waiting = is_wait_frame(c.trace.str(chain.front().name));
  return out;
}

}  // namespace

HostFrame host_frame(const DiagnoseContext& c, std::uint32_t lane, const std::vector<Interval>& ranges) {
  bool waiting = false;
  HostFrame out = frame_on_lane(c, lane, ranges, &waiting);
  if (!out.found() || !waiting) return out;
  // The thread waits: name the work of the thread that holds the stretch.
  std::vector<std::uint32_t> lanes;
  for (std::uint32_t e : c.host_ops) {
    const std::uint32_t l = c.trace.events.lane[e];
    if (l != lane && c.kind(e) == EventKind::kPythonFunction && std::find(lanes.begin(), lanes.end(), l) == lanes.end())
      lanes.push_back(l);
  }
  // A frame of a known kind (a compile) before one of none; then the most
  // of the stretch.
  HostFrame best;
  for (std::uint32_t l : lanes) {
    bool w = false;
    HostFrame other = frame_on_lane(c, l, ranges, &w);
    if (!other.found() || w) continue;
    const bool known = other.kind != HostWorkKind::kOther, best_known = best.kind != HostWorkKind::kOther;
    if (!best.found() || known > best_known || (known == best_known && other.held_ns > best.held_ns)) best = std::move(other);
  }
  if (!best.found()) return out;
  best.waiter = out.name;
  return best;
}

std::string host_frame_label(const HostFrame& f) { return f.annotation ? "\"" + f.name + "\"" : f.name; }

std::string host_frame_text(const HostFrame& f) {
  std::string s = host_frame_label(f) + " (" + format_ns(f.held_ns) + ", " + format_pct(100.0 * f.share()) + " of it";
  if (!f.inner.empty()) s += "; deepest: " + f.inner;
  if (!f.waiter.empty()) s += "; on another thread, while the launching thread sits in " + f.waiter;
  return s + ")";
}

const char* host_work_kind_id(HostWorkKind k) {
  switch (k) {
    case HostWorkKind::kPreprocessing: return "preprocessing";
    case HostWorkKind::kInductorWrapper: return "inductor_wrapper";
    case HostWorkKind::kDdpBuffers: return "ddp_buffers";
    case HostWorkKind::kDataLoader: return "dataloader";
    case HostWorkKind::kCompile: return "compile";
    case HostWorkKind::kJitCompile: return "jit_compile";
    case HostWorkKind::kBatchHandover: return "batch_handover";
    case HostWorkKind::kOther: break;
  }
  return "other";
}

std::string host_frame_remedy(const DiagnoseContext& c, const HostFrame& f) {
  const std::string where = host_frame_label(f);
  switch (f.kind) {
    case HostWorkKind::kPreprocessing:
      return "Take the input preprocessing out of the step: " + where +
             " prepares the input on the thread that launches the GPU's work, so the GPU waits; run it in DataLoader "
             "workers (num_workers > 0) so it overlaps the GPU, or precompute it once.";
    case HostWorkKind::kInductorWrapper:
      return "Cut the host cost of Inductor's generated wrapper (" + where +
             "): it checks every tensor's size and stride (assert_size_stride) and launches kernel after kernel "
             "from Python; compile with mode=\"reduce-overhead\" (" + std::string(c.api()) +
             " graphs) so one graph replay does it.";
    case HostWorkKind::kDdpBuffers:
      return "Stop DistributedDataParallel broadcasting its buffers every forward (" + where +
             "): DistributedDataParallel(..., broadcast_buffers=False) when the buffers (BatchNorm running "
             "statistics) need not match across ranks each step, or SyncBatchNorm where they must.";
    case HostWorkKind::kDataLoader: {
      // What the loader already does is not advised again (issue 38's
      // sixteenth round: workers and pin_memory=True offered to a
      // multi-process iterator whose every copy was pinned).
      const bool pinned = c.pinned_htod_copies() > 0;
      if (f.name.find("_MultiProcessingDataLoaderIter") != std::string::npos) {
        return "The main thread waits for the next batch in " + where +
               ": its worker processes do not keep up; add workers (up to the CPU cores per GPU), raise "
               "prefetch_factor" + (pinned || !c.has_device() ? "" : ", pin_memory=True") +
               ", and make the per-sample transforms cheaper (cache what the deterministic ones compute, or "
               "pre-process the data set once).";
      }
      return "The main thread waits for the next batch in " + where +
             ": load it in worker processes (num_workers, persistent_workers=True)" +
             (pinned || !c.has_device() ? "" : ", pin_memory=True") +
             " and a larger prefetch_factor, so batches are ready when the step asks.";
    }
    case HostWorkKind::kCompile:
      return "Leave torch.compile's compilation out of the recording: " + where +
             " is it compiling (Dynamo, AOTAutograd, Inductor), a one-time cost per input shape; call the compiled "
             "function once before starting the profiler (or give the schedule warmup steps), and keep shapes "
             "stable so it does not compile again.";
    case HostWorkKind::kJitCompile:
      return "Leave Triton's just-in-time compilation out of the recording: " + where +
             " compiles a kernel on its first call with a new configuration (shapes, dtypes, constants), a one-time "
             "cost per configuration; run the workload once with the shapes it will see before starting the profiler "
             "(a server's warm-up requests), and keep Triton's cache (TRITON_CACHE_DIR) across runs.";
    case HostWorkKind::kBatchHandover:
      return "Make the batches cheaper to hand over: the main process spends the wait in " + where +
             ", receiving a worker's batch (unpickling its tensors, each storage's shared-memory file descriptor "
             "fetched from the worker), not waiting for the workers; collate each batch into a few large tensors (a "
             "storage per tensor, not per sample), try torch.multiprocessing.set_sharing_strategy(\"file_system\"), "
             "or set pin_memory=True so the pin-memory thread receives them off the main thread.";
    case HostWorkKind::kOther: break;
  }
  return "Move the work of " + where + " out of the step or overlap it with device work (" +
         (c.is_torch() ? "DataLoader workers, a side thread, or compute it once" : "a side thread, or compute it once") +
         "): it runs on the thread that launches the GPU's work, so nothing is launched meanwhile.";
}

namespace {
constexpr std::string_view kNotRecorded = "not recorded";
constexpr std::string_view kAsked = "not recorded, with_stack=True asked";
}  // namespace

bool with_stack_asked(const std::vector<Finding>& findings) {
  for (const Finding& f : findings) {
    const Evidence::Field* v = f.evidence.find("host_stack");
    if (v != nullptr && v->s == kAsked) return true;
  }
  return false;
}

bool note_no_stack(const DiagnoseContext& c, const std::vector<Finding>& earlier, Finding& f) {
  // tprof's captures have no Python tracer to turn on (a C++ program's
  // host work is named by its scopes): nothing to ask there.
  if (c.by_tprof()) return false;
  const bool ask = !with_stack_asked(earlier);
  f.evidence.text("host_stack", std::string(ask ? kAsked : kNotRecorded));
  return ask;
}

std::string with_stack_ask() {
  return "The trace records no Python stack to name that host work: profile again with "
         "torch.profiler.profile(with_stack=True) to see which function it is.";
}

}  // namespace tprof::internal
