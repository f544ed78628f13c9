// Host work named from the trace: which Python function (torch.profiler's
// with_stack=True records each call as a python_function event) or user
// annotation (record_function, NVTX) holds most of a stretch of host time
// on one thread, and what kind of work that is. The rules that name host
// work (kernel_gap, low_gpu_utilization, dataloader_bound, the verdict) ask
// this one helper, so a stretch the stack names as a video preprocess is
// never called "set-up" by one rule and "a round trip" by another.
//
//   const HostFrame f = host_frame(c, lane, ranges);
//   if (f.found()) advice = host_frame_remedy(c, f);
//   else if (!has_python_stack(c)) advice += with_stack_ask(c);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "src/analyze/intervals.h"

namespace tprof::internal {

// What a named stretch of host work is, from its frames (docs/diagnose.md,
// "Host work named from the stack"); each kind has its own remedy.
enum class HostWorkKind : std::uint8_t {
  kOther = 0,
  kPreprocessing,    // transformers image/video processors, PIL, torchvision transforms, scipy.ndimage, cv2, decoding; numpy under a data frame
  kInductorWrapper,  // Inductor's generated wrapper: `call`, assert_size_stride in a /tmp/torchinductor_* or output_code file
  kDdpBuffers,       // DDP's buffer broadcast: _sync_buffers, _broadcast_coalesced, unflatten_dense_tensors
  kDataLoader,       // a DataLoader's __next__
  kCompile,          // torch.compile compiling: its "(dynamo_timed)" annotations, compile_fx, AOTAutograd
  kJitCompile,       // Triton compiling a kernel on its first call: triton/compiler/ frames
  kBatchHandover,    // the main process receiving a DataLoader worker's batch: rebuild_storage_fd, resource_sharer
};

struct HostFrame {
  std::uint32_t event = kNoIndex;  // an instance of the named frame (the one holding most of the stretch)
  std::string name;                // as the trace writes it, addresses cut: "transformers/.../x.py(235): preprocess"
  std::string inner;               // the deepest frame holding most of it when a torch-internal or built-in one was skipped for `name`, else ""
  std::int64_t held_ns = 0;        // of the stretch, by the named frame's calls
  std::int64_t stretch_ns = 0;     // the stretch's length
  HostWorkKind kind = HostWorkKind::kOther;
  bool annotation = false;  // a user annotation, not a Python function
  // Where the thread asked about only waits (its deepest frame a lock, a
  // condition, a queue, a sleep) and another thread's frame holds the
  // stretch: the waiting frame ("tp_worker_overlap_thread.py(206):
  // resolve_last_batch_result"); `name` is the other thread's.
  std::string waiter;
  std::uint32_t lane = kNoIndex;  // the thread the named frame ran on
  bool found() const { return event != kNoIndex; }
  double share() const { return stretch_ns > 0 ? static_cast<double>(held_ns) / static_cast<double>(stretch_ns) : 0.0; }
};

// A frame names a stretch when its calls hold more than this share of it.
inline constexpr double kHostFrameShare = 0.5;

// Whether the trace records Python functions (torch.profiler with_stack=True).
bool has_python_stack(const DiagnoseContext& c);
// Whether a thread's name says vLLM ("VLLM::Worker_TP"): its own settings
// then name the fix (VLLM_CPU_OMP_THREADS_BIND, enforce_eager).
bool runs_vllm(const DiagnoseContext& c);

// A frame that waits for another thread or for time to pass: a lock's
// acquire, a condition's or an event's wait, a queue's get, a sleep, a
// selector's select, a message read from another process, Jupyter's kernel
// threads (its heartbeat, its iostream pipe watcher).
bool is_wait_frame(std::string_view name);

// Whether a user annotation (record_function, NVTX) names a step of an
// input pipeline by its words: preprocess, decode, frames, tokenize,
// augment, resize, reading or loading an image or video ("process frames",
// "extract frames", "open video"). Python frames (with_stack) are judged by
// their modules instead (frame_kind's preprocessing).
bool is_input_annotation(std::string_view name);

// The deepest Python function or user annotation on thread `lane` (a CPU
// lane) whose calls hold more than kHostFrameShare of `ranges` (merged,
// sorted): a function that recurs across steps counts all its calls. Frames
// inside torch (torch/...), built-ins (<built-in method ...>) and the
// standard library give way to the user frame above them that holds the
// same time (`inner` keeps the skipped one), unless they are a kind the
// advice knows (a DataLoader's __next__, DDP's _sync_buffers). ProfilerStep#N
// never names anything, nor an annotation lasting 90% of the trace or more
// (a wrapper around the whole run, PARAM's "[param|cuda]"). Not found (event kNoIndex) when no frame holds
// enough, or the thread records none. One pass over the context's host ops.
// A thread that only waits (its deepest frame a lock's acquire, a
// condition's or an event's wait, a queue's get, a sleep) names the other
// thread's work it waits for: the thread whose frames hold the most of the
// stretch without waiting (`waiter` keeps the waiting frame; issue 38's
// eighth round: SGLang's scheduler waiting in resolve_last_batch_result
// while its forward thread JIT-compiled a Triton kernel).
HostFrame host_frame(const DiagnoseContext& c, std::uint32_t lane, const std::vector<Interval>& ranges);

// The CPU lane that launches the most device work (the thread whose host
// work delays the GPU), or kNoIndex without launch calls.
std::uint32_t launching_lane(const DiagnoseContext& c);

// The frame's name as printed: an annotation in quotes.
std::string host_frame_label(const HostFrame& f);

// "transformers/.../image_processing_videomae.py(235): preprocess (178.2 ms,
// 82% of it; deepest: <built-in method to of Tensor object>)".
std::string host_frame_text(const HostFrame& f);

// The kind as evidence: "preprocessing", "inductor_wrapper", "ddp_buffers",
// "dataloader", "other".
const char* host_work_kind_id(HostWorkKind k);

// The fix that follows from the kind, in the program's API (one or two
// sentences naming the frame): preprocessing → DataLoader workers or
// precomputed inputs; Inductor's wrapper → CUDA graphs (mode="reduce-overhead");
// DDP's buffers → broadcast_buffers=False; DataLoader → workers, pin_memory,
// prefetch. For kOther: move the named function's work out of the step or
// overlap it.
std::string host_frame_remedy(const DiagnoseContext& c, const HostFrame& f);

// The ask for a stack is made once per diagnosis: the first finding (in
// rule order) that cannot name host work in a trace without Python
// functions asks, and says so in its evidence ("host_stack": "not
// recorded, with_stack=True asked"); the later ones only note "not
// recorded". with_stack_asked: whether one in `findings` asked.
// note_no_stack: adds the evidence; returns whether f is to ask (no earlier
// finding did, and the trace is torch.profiler's: tprof's captures have no
// Python tracer to turn on).
bool with_stack_asked(const std::vector<Finding>& findings);
bool note_no_stack(const DiagnoseContext& c, const std::vector<Finding>& earlier, Finding& f);

// with_stack_ask: the sentence asking for a stack where a rule cannot name
// host work.
std::string with_stack_ask();

}  // namespace tprof::internal
