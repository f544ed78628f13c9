// One accounting of the GPU's idle time (docs/diagnose.md, "GPU idle
// time"): every stretch of the window where no device activity runs gets
// exactly one cause (the host launching, the host blocked in a call, work
// waiting on another stream or on peers, the profiler, outside any step),
// so the causes sum to the idle time. Built once per trace
// (DiagnoseContext::idle()); the verdicts and the rules about idle time read
// it, and findings claim its ranges without sharing any (claim_idle()).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "src/analyze/intervals.h"
#include "src/causal/names.h"
#include "tprof/diagnose.h"

namespace tprof::internal {

class DiagnoseContext;

// A host call that blocked its thread by effect: it lasted kBlockingCallNs
// or more and is an allocator call, a synchronize or blocking copy, an async
// copy that returned only once its copy was done, a launch while its
// stream's queue was full, initialisation, or another runtime call.
struct BlockingCall {
  std::uint32_t event = kNoIndex;
  IdleCause kind = IdleCause::kBlockedOther;  // one of the kBlocked* causes
  // Launch calls: the depth of the launched work's stream queue when the
  // call started (HTA's queue length), else -1.
  std::int64_t queue_depth = -1;
  std::uint32_t op = kNoIndex;  // index into DiagnoseContext::device of the work it launched, or kNoIndex
  // Inside a convolution call that times candidate algorithms (cuDNN's
  // benchmark mode, MIOpen's find): one-time tuning, kind kBlockedInit.
  bool tuning = false;
};

// A call lasting at least this long blocks its thread (HTA's runtime_cutoff
// for launch calls, 50 µs; per-op dispatch costs 5-50 µs).
inline constexpr std::int64_t kBlockingCallNs = 50'000;
// A launch call this long with its stream's queue not full loads the
// kernel's module (lazy loading, CUDA >= 11.7): initialisation.
inline constexpr std::int64_t kSlowLaunchNs = 1'000'000;
// A CUDA/HIP call this long before its process's first launch creates the
// context (tprof record's whole-run traces on an H200: cudaMalloc 114 ms in
// a plain CUDA program, cudaDeviceGetStreamPriorityRange 107 ms in PyTorch's).
inline constexpr std::int64_t kContextCreateNs = 10'000'000;
// The launch queue is full from this depth (src/causal/names.h).
using causal::kQueueFullDepth;
// Launched work counts as waiting (on other streams, events, peers) only
// beyond the latency an idle device shows after a launch returns (2-20 µs
// on the H100 traces, up to ~50 µs on a first call).
inline constexpr std::int64_t kQueueLatencyNs = 50'000;
// Work launched while the work before it on its stream still ran starts this
// soon after that work ends on its own: the device's kernel-to-kernel
// latency (1-5 µs between queued kernels on the H100 traces), not a wait.
// Beyond it, queued work waits on something (an event, another stream).
inline constexpr std::int64_t kKernelLatencyNs = 10'000;
// A device whose queued kernels start a regular delay after their
// predecessors (IdlePartition's calibration, in idle.cc) has that latency
// instead, from this many such starts, up to this much.
inline constexpr std::size_t kMinLatencySamples = 20;
inline constexpr std::int64_t kMaxDeviceLatencyNs = 100'000;
// A stretch without launch calls this long is host work, not per-op launch
// overhead (eager PyTorch dispatches an op in 5-100 µs).
inline constexpr std::int64_t kHostWorkNs = 1'000'000;
// A host op, Python function or scope this long on a launching thread,
// while no thread launches anything, is host work inside a piece shorter
// than kHostWorkNs too (IdlePartition).
inline constexpr std::int64_t kHostMathNs = 50'000;

// Bit masks of IdleCause values.
constexpr std::uint32_t cause_bit(IdleCause c) { return 1u << static_cast<unsigned>(c); }
inline constexpr std::uint32_t kBlockedCauses =
    cause_bit(IdleCause::kBlockedSync) | cause_bit(IdleCause::kBlockedCopy) | cause_bit(IdleCause::kBlockedAlloc) |
    cause_bit(IdleCause::kBlockedInit) | cause_bit(IdleCause::kBlockedLaunchQueue) |
    cause_bit(IdleCause::kBlockedOther);
// Causes only their own rule claims: blocked_sync (sync_api), the other
// blocked_* (host_blocked), profiler (profiler_buffer_request). The rest are
// shared, claimed first come in the rules' order (overhead_bound,
// kernel_gap, low_gpu_utilization).
inline constexpr std::uint32_t kReservedCauses = kBlockedCauses | cause_bit(IdleCause::kProfiler);
inline constexpr std::uint32_t kAllCauses = (1u << kIdleCauseCount) - 1;

class IdlePartition {
 public:
  explicit IdlePartition(const DiagnoseContext& c);

  struct Span {
    Interval range;
    IdleCause cause = IdleCause::kLaunching;
    std::int32_t step = -1;  // index into steps.steps; -1 outside every step
    std::uint32_t event = kNoIndex;
  };
  using Totals = std::array<std::int64_t, kIdleCauseCount>;

  Interval window() const { return window_; }
  std::int64_t idle_ns() const { return idle_ns_; }
  // The kernel-to-kernel latency the partition allowed queued work:
  // kKernelLatencyNs, or the device's calibrated one (idle.cc).
  std::int64_t kernel_latency_ns() const { return kernel_latency_ns_; }
  const std::vector<Span>& spans() const { return spans_; }  // sorted, disjoint
  const Totals& totals() const { return totals_; }
  // The idle time of step index `step` by cause.
  const Totals& step_totals(std::size_t step) const { return step_totals_[step]; }
  // The idle time inside [lo, hi) by cause.
  Totals totals_within(std::int64_t lo, std::int64_t hi) const;
  // The longest unbroken run of recorded host work in a stretch without a
  // launch (a piece of kHostWorkNs or more) starting inside [lo, hi).
  std::int64_t longest_host_work(std::int64_t lo, std::int64_t hi) const;
  // The idle ranges of the causes in `mask` inside [lo, hi), merged.
  std::vector<Interval> ranges(std::uint32_t mask, std::int64_t lo, std::int64_t hi) const;
  // Every blocking call in the window, by start.
  const std::vector<BlockingCall>& blocking() const { return blocking_; }
  // The blocking call that is `event`, or nullptr.
  const BlockingCall* blocking_call(std::uint32_t event) const;
  // Whether host call `event` runs inside a convolution call that times
  // candidate algorithms: cuDNN's benchmark mode
  // (torch.backends.cudnn.benchmark) or MIOpen's find, which record events
  // around trial kernels and read them back (cudaEventSynchronize,
  // cudaEventElapsedTime) the first time a convolution meets an input shape.
  bool in_tuning(const DiagnoseContext& c, std::uint32_t event) const;
  // How many such convolution calls, and the timing read-backs in them.
  std::int64_t tuning_ops() const { return tuning_ops_; }
  std::int64_t tuning_readbacks() const { return tuning_readbacks_; }

  // The public form (Diagnosis::idle).
  IdleAccount account(const DiagnoseContext& c) const;

 private:
  Interval window_;
  std::int64_t idle_ns_ = 0;
  std::int64_t kernel_latency_ns_ = kKernelLatencyNs;
  std::vector<Span> spans_;
  Totals totals_{};
  std::vector<Totals> step_totals_;
  std::vector<std::pair<std::int64_t, std::int64_t>> host_work_;  // (start, recorded ns) per long piece
  std::vector<BlockingCall> blocking_;
  // The tuning convolution calls' spans: (lane, start, end), merged per
  // lane, sorted.
  std::vector<std::tuple<std::uint32_t, std::int64_t, std::int64_t>> tuning_;
  std::int64_t tuning_ops_ = 0, tuning_readbacks_ = 0;
};

// The ranges of `candidate` (sorted, merged) that lie in idle spans of the
// causes in `mask` and that no finding in `earlier` claims; `candidate`
// nullptr: the whole window.
std::vector<Interval> claimable_idle(const IdlePartition& p, std::uint32_t mask, const std::vector<Interval>* candidate,
                                     const std::vector<Finding>& earlier);
// Sets f's idle_claim and idle_ns from merged ranges.
void set_idle_claim(Finding& f, const std::vector<Interval>& ranges);
// The idle time inside `ranges` (merged) by cause.
IdlePartition::Totals idle_by_cause(const IdlePartition& p, const std::vector<Interval>& ranges);
// The GPU idle the host leaves in `t`: launching op after op, host work
// that launches nothing, the host blocked in an allocator, initialisation,
// a full launch queue or another call (not its syncs: those wait on the
// device). Where it exceeds the exposed communication of the same window,
// the host sets the pace and the collectives run while it works: the
// verdict is not communication-bound, and comm_exposed saves only the
// host's waits for them (issue 38, seventh round).
std::int64_t host_left_idle(const IdlePartition::Totals& t);
// Where each host call in `events` ran: "outer op > inner op in
// \"annotation\"" (the outermost and innermost op around it on its thread,
// the innermost record_function scope other than ProfilerStep#N), "" when
// none is recorded around it. One pass over the host events.
std::unordered_map<std::uint32_t, std::string> call_sites(const DiagnoseContext& c, std::vector<std::uint32_t> events);
// The cause holding the most of `t`.
IdleCause dominant_cause(const IdlePartition::Totals& t);
// The remedy for idle time of `cause`, as the first sentence of a fix.
std::string idle_remedy(IdleCause cause, const DiagnoseContext& c);
// The opening of a fix that makes kernels faster where the GPU is busy only
// `busy_share` of its window (the steps, or the trace) and the host sets
// the pace: "Not a saving while the GPU idles 66.9% of the trace (the host
// sets the pace: <why>); once the host keeps it busy: "
// (memory_bound_elementwise, fp32_math).
std::string not_a_saving_while_idle(double busy_share, bool over_steps, std::string_view why);

// A cold pass's one-time costs: the blocking calls starting in [lo, hi)
// that set something up (kind kBlockedInit), by what they set up, and the
// allocator calls beside them (kBlockedAlloc: the caching allocator
// filling, or churn; counted apart, not as one-time).
struct OneTimeSetUp {
  std::int64_t module_ns = 0;   // launches and unlinked launch calls that loaded their kernel's module (lazy loading)
  std::int64_t library_ns = 0;  // the context, libraries' handles, streams and queries, first frees and allocations
  std::int64_t tuning_ns = 0;   // convolutions timing candidate algorithms (cuDNN benchmark, MIOpen find)
  std::int64_t alloc_ns = 0;    // allocator calls that are not set-up
  std::int64_t total_ns() const { return module_ns + library_ns + tuning_ns; }
};
OneTimeSetUp one_time_setup(const DiagnoseContext& c, std::int64_t lo, std::int64_t hi);
// "16.792 ms in one-time set-up (lazy module loading 7.0 ms, context and
// library set-up 9.8 ms)"; "" when none.
std::string one_time_setup_text(const OneTimeSetUp& s);

// The idle causes a rule that names one place (a gap, a launch delay) may
// claim: the shared ones (not kReservedCauses), less stream waits where the
// trace shows nothing to wait for (DiagnoseContext::dependency_visible
// false). That idle is
// the device held from outside the program, one cause wherever it falls:
// low_gpu_utilization's "check the GPU" (issue 38's ninth round: a DCGAN
// run time-sliced with another process, its 2.3 ms stalls told in four
// findings to start earlier the work behind a cudaStreamWaitEvent on a
// trace with one stream and no event).
std::uint32_t place_causes(const DiagnoseContext& c);

}  // namespace tprof::internal
