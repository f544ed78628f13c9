// comm_exposed: the TensorBoard plugin's "high time cost on communication"
// recommendation (kineto tb_plugin/torch_tb_profiler/profiler/data.py,
// _analyze_distributed_metrics; roles in overall_parser.py). The plugin's
// Communication role ranks below Kernel, Memcpy and Memset, so it is the
// communication no computation or copy hides: exposed communication. It
// recommends gradient compression / accumulation when that exceeds 10% of
// the average step.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/names.h"
#include "src/trace/json_value.h"

namespace tprof::internal {

namespace {

// data.py: communication_ratio > 0.1.
constexpr double kCommShare = 0.1;
// Ours: the communication-bound verdict's threshold (docs/diagnose.md,
// "Verdicts") makes the finding critical.
constexpr double kCriticalShare = 0.25;
constexpr std::size_t kMaxSteps = 16;
// The kind of collective with the most exposed time sets the advice when it
// holds this share of it or more.
constexpr double kKindShare = 0.4;

// A call this many times its group's median, and kLateExtraNs longer,
// waited for a late peer: the same kernel on the same message moves the
// same bytes in about the same time.
constexpr std::int64_t kLateRatio = 4;
constexpr std::int64_t kLateExtraNs = 1'000'000;
// The title says so from this share of the exposed time.
constexpr double kLateShare = 0.25;

// The message a collective's launching op names: its "Input Dims" as the
// trace writes them, "" when it has none.
std::string_view input_dims(const DiagnoseContext& c, std::uint32_t op) {
  if (op == kNoIndex) return {};
  static constexpr std::string_view kKeys[] = {"Input Dims"};
  std::string_view v[1];
  return member_values(c.trace.args_json(op), kKeys, v) ? v[0] : std::string_view();
}

}  // namespace

void rule_comm_exposed(const DiagnoseContext& c, std::vector<Finding>* out) {
  std::vector<Interval> comm, busy;
  for (const DeviceOp& op : c.device) {
    (op.cls == DeviceClass::kComm ? comm : busy).push_back({op.start, op.end});
  }
  if (comm.empty()) return;
  const std::vector<Interval> comm_merged = merge_intervals(std::move(comm));
  const std::vector<Interval> exposed = subtract(comm_merged, merge_intervals(std::move(busy)));

  struct Window {
    std::int64_t step, lo, hi;
  };
  std::vector<Window> windows;
  for (const StepStat& s : c.steps.steps) windows.push_back({s.step, s.start_ns, s.start_ns + s.dur_ns});
  // Without steps, the trace from its first device activity where it
  // opens on queued work it does not hold (the verdict's window).
  const Interval lead = c.queued_lead();
  const bool from_first = windows.empty() && lead.end > lead.start;
  if (windows.empty()) windows.push_back({-1, from_first ? lead.end : c.start_ns, c.end_ns});
  std::int64_t total = 0, exposed_ns = 0, comm_ns = 0;
  std::vector<std::int64_t> steps_over;
  for (const Window& w : windows) {
    const std::int64_t e = covered_within(exposed, w.lo, w.hi);
    sat_acc(total, w.hi - w.lo);  // steps may overlap
    sat_acc(exposed_ns, e);
    sat_acc(comm_ns, covered_within(comm_merged, w.lo, w.hi));
    if (w.step >= 0 && static_cast<double>(e) > kCommShare * static_cast<double>(w.hi - w.lo) &&
        steps_over.size() < kMaxSteps) {
      steps_over.push_back(w.step);
    }
  }
  if (total <= 0) return;
  const double share = static_cast<double>(exposed_ns) / static_cast<double>(total);
  if (share <= kCommShare) return;

  // The communication activity with the most exposed time: where to look
  // first; and the exposed time by collective (activities of one stream
  // do not overlap, of several streams they can: each counts its own).
  const DeviceOp* worst = nullptr;
  std::int64_t worst_ns = 0;
  std::map<std::string, std::int64_t> by_kind;
  for (const DeviceOp& op : c.device) {
    if (op.cls != DeviceClass::kComm) continue;
    const std::int64_t e = covered_within(exposed, op.start, op.end);
    if (e > 0) sat_acc(by_kind[collective_kind(c, op)], e);
    if (e > worst_ns) {
      worst_ns = e;
      worst = &op;
    }
  }
  std::vector<std::pair<std::string, std::int64_t>> kinds(by_kind.begin(), by_kind.end());
  std::stable_sort(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::int64_t kinds_ns = 0;
  for (const auto& k : kinds) sat_acc(kinds_ns, k.second);
  std::string top_kind;
  if (!kinds.empty() && kinds[0].first != "other" &&
      static_cast<double>(kinds[0].second) >= kKindShare * static_cast<double>(kinds_ns)) {
    top_kind = kinds[0].first;
  }

  // Calls far longer than the others of their kernel on the same message
  // (the launching op's Input Dims): the excess is this rank waiting for a
  // late peer, not the transfer (issue 38's nineteenth round: a Megatron
  // TP8 rank's 64 MiB fp16 all-reduces, median 0.626 ms, 18 of them 2.3 to
  // 19.1 ms, read as 241 ms of communication to overlap).
  std::map<std::pair<std::string_view, std::string_view>, std::vector<const DeviceOp*>> groups;
  for (const DeviceOp& op : c.device) {
    if (op.cls != DeviceClass::kComm || op.launch == kNoIndex) continue;
    groups[{c.name(op.event), input_dims(c, c.enclosing_op(op.launch, /*skip_views=*/true))}].push_back(&op);
  }
  std::int64_t late_ns = 0, late_calls = 0;
  const DeviceOp* latest = nullptr;
  std::int64_t latest_median = 0;
  for (const auto& [key, ops] : groups) {
    if (ops.size() < 3) continue;
    std::vector<std::int64_t> durs;
    for (const DeviceOp* op : ops) durs.push_back(op->end - op->start);
    const std::int64_t median = upper_median(durs);
    for (const DeviceOp* op : ops) {
      const std::int64_t d = op->end - op->start;
      if (median <= 0 || d < kLateRatio * median || d - median < kLateExtraNs) continue;
      ++late_calls;
      sat_acc(late_ns, std::min(d - median, covered_within(exposed, op->start, op->end)));
      if (latest == nullptr || d > latest->end - latest->start) latest = op, latest_median = median;
    }
  }
  const bool late = exposed_ns > 0 && static_cast<double>(late_ns) >= kLateShare * static_cast<double>(exposed_ns);

  Finding f;
  f.id = "comm_exposed";
  f.severity = share >= kCriticalShare ? FindingSeverity::kCritical : FindingSeverity::kWarning;
  f.title = format_pct(100.0 * share) +
            (!c.steps.steps.empty() ? " of the step time"
             : from_first           ? " of the trace from its first device activity"
                                    : " of the trace") +
            " is communication not overlapped by compute (" +
            format_ns(exposed_ns) + ")";
  if (late) {
    f.title += ", " + format_ns(late_ns) + " of it in " + count_of(late_calls, "call") + " " +
               std::to_string(kLateRatio) + "x or more the median of their kernel on the same message (up to " +
               format_ns(latest->end - latest->start) + " against " + format_ns(latest_median) +
               "): this rank waiting for a late peer, not the transfer";
    f.evidence.num("late_peer_ns", late_ns).num("late_calls", late_calls).event("latest_call", c.ref(latest->event));
  }
  const double overlap = comm_ns > 0 ? 100.0 * static_cast<double>(comm_ns - exposed_ns) / static_cast<double>(comm_ns) : 0;
  f.evidence.real("exposed_comm_pct", 100.0 * share)
      .num("exposed_comm_ns", exposed_ns)
      .num("comm_ns", comm_ns)
      .real("overlap_pct", overlap)
      .num("step_total_ns", total)
      .real("threshold_pct", 100.0 * kCommShare);
  if (worst != nullptr) {
    f.evidence.num("worst_exposed_ns", worst_ns).event("worst_comm", c.ref(worst->event));
    if (worst->launch != kNoIndex) f.evidence.event("worst_comm_launch", c.ref(worst->launch));
  }
  if (!steps_over.empty()) f.evidence.ints("steps", steps_over);
  auto share_of = [&](std::int64_t ns) { return format_pct(100.0 * static_cast<double>(ns) / static_cast<double>(kinds_ns)); };
  std::vector<std::string> kind_text;  // "all_to_all 161.463 ms (48.0%)"
  for (const auto& [kind, ns] : kinds) kind_text.push_back(kind + " " + format_ns(ns) + " (" + share_of(ns) + ")");
  f.evidence.texts("exposed_by_collective", kind_text);
  const std::string worst_name = worst != nullptr ? std::string(c.name(worst->event)) : std::string("the collectives");
  const std::size_t nsteps = c.steps.steps.size();
  const std::string how_much =
      format_ns(exposed_ns) + " of communication (" +
      (nsteps > 0 ? format_ns(exposed_ns / static_cast<std::int64_t>(nsteps)) + " per step" : std::string("in the window")) +
      ") runs with no compute beside it";
  // One process driving several GPUs (nn.DataParallel): its collectives
  // run on every GPU in this one trace, with no rank to wait for; each step
  // broadcasts the parameters and reduces the gradients to GPU 0 (issue
  // 38's fourteenth round: a BERT fp16 run on 2 GPUs was told to look for a
  // straggler among its ranks).
  std::vector<std::int32_t> comm_devices;
  for (const DeviceOp& op : c.device) {
    if (op.cls == DeviceClass::kComm &&
        std::find(comm_devices.begin(), comm_devices.end(), op.device) == comm_devices.end()) {
      comm_devices.push_back(op.device);
    }
  }
  const bool one_process = comm_devices.size() >= 2 && world_size(c.trace) <= 1;
  if (one_process) {
    f.evidence.num("devices", static_cast<std::int64_t>(comm_devices.size())).text("processes", "one");
    // What DDP saves: the broadcast, which it does not make, and of the
    // gradients' reduce (its all-reduce moves as many bytes over the same
    // link) at most the compute it could overlap, all of it here (issue 38's
    // fourteenth round: a BERT run's 0.73 s broadcast and 0.98 s reduce a
    // step at about 0.5 GB/s, beside 0.13 s of kernels, was "up to 1.707 s a
    // step").
    std::vector<Interval> bcast, rest, compute;
    for (const DeviceOp& op : c.device) {
      if (op.cls != DeviceClass::kComm) {
        compute.push_back({op.start, op.end});
      } else {
        (collective_kind(c, op) == "broadcast" ? bcast : rest).push_back({op.start, op.end});
      }
    }
    const std::vector<Interval> compute_merged = merge_intervals(std::move(compute));
    const std::vector<Interval> bcast_exposed = subtract(merge_intervals(std::move(bcast)), compute_merged);
    const std::vector<Interval> rest_exposed =
        subtract(subtract(merge_intervals(std::move(rest)), bcast_exposed), compute_merged);
    std::int64_t bcast_ns = 0, rest_ns = 0, compute_ns = 0;
    for (const Window& w : windows) {
      sat_acc(bcast_ns, covered_within(bcast_exposed, w.lo, w.hi));
      sat_acc(rest_ns, covered_within(rest_exposed, w.lo, w.hi));
      sat_acc(compute_ns, covered_within(compute_merged, w.lo, w.hi));
    }
    const std::int64_t saving = std::min(exposed_ns, sat_add(bcast_ns, std::min(rest_ns, compute_ns)));
    const auto per = [&](std::int64_t ns) {
      return nsteps > 0 ? format_ns(ns / static_cast<std::int64_t>(nsteps)) + " a step" : format_ns(ns);
    };
    f.evidence.num("broadcast_exposed_ns", bcast_ns).num("other_comm_exposed_ns", rest_ns).num("compute_ns", compute_ns);
    f.advice = "Use DistributedDataParallel, one process per GPU, in place of this one process driving " +
               std::to_string(comm_devices.size()) +
               " GPUs (nn.DataParallel): each step it broadcasts the parameters from GPU 0 and reduces the gradients "
               "back to it, and compute on every GPU waits behind both; DDP has no per-step broadcast (" +
               per(bcast_ns) + " here) and overlaps the gradient all-reduce with backward. " + how_much +
               "; DDP's all-reduce moves the gradients over the same link, so of the other collectives' " +
               per(rest_ns) + " it can hide at most the compute beside it (" + per(compute_ns) +
               "). Where the transfers themselves are slow, check the link between the GPUs (nvidia-smi topo -m, "
               "NCCL_DEBUG=INFO, P2P): it sets what stays.";
    f.impact_ns = saving;
    out->push_back(std::move(f));
    return;
  }
  const std::string first =
      late ? "Find the late rank first: " + format_ns(late_ns) + " of this rank's collectives is waiting for a peer, "
                 "which overlap does not remove; tprof diagnose on all ranks' traces together names the rank and what "
                 "delays it (its host, its input, its compute). "
           : "First run tprof diagnose on all ranks' traces together: if this rank waits for a straggler at " +
                 worst_name + ", speed up the straggler instead. ";
  // A forward-only recording (inference): no backward to hide collectives
  // behind, and no gradients to accumulate or compress. Tensor-parallel
  // all-reduces of activations sit between layers, on the critical path
  // (issue 38's third round: DDP advice on a TP=2 LLaMA forward).
  const bool inference = c.forward_only();
  f.evidence.text("pass", inference ? "forward only (no backward op)" : "training or unknown");
  if (top_kind == "all_to_all") {
    // Issue 38, fifth round: an all-to-all read as missing overlap. Its
    // uses all need its data at once: embeddings, MoE tokens, attention
    // heads (DeepSpeed-Ulysses).
    std::string rest;
    for (std::size_t i = 1; i < kinds.size(); ++i) {
      rest += (rest.empty() ? "" : ", ") + kind_text[i];
    }
    // DeepEP's dispatch and combine: the MoE exchange, whose fix is the
    // overlap its serving frameworks offer, before any straggler. On the
    // compute stream nothing on the device overlaps them: the micro-batches
    // interleave them there (two-batch overlap with DeepEP's receive hooks)
    // or nothing does (issue 38's eighteenth round: a LightLLM decode in
    // micro-batch overlap told to turn it on).
    const bool deep_ep = worst != nullptr && c.name(worst->event).find("deep_ep::") != std::string_view::npos;
    bool inline_stream = false;
    if (deep_ep) {
      for (const DeviceOp& op : c.device) {
        if (op.cls == DeviceClass::kCompute && op.device == worst->device && op.stream == worst->stream) {
          inline_stream = true;
          break;
        }
      }
    }
    const std::string amount = "DeepEP's all-to-all, " + format_ns(kinds[0].second) + " of it";
    const std::string opening =
        !deep_ep ? first + "Otherwise: "
        : inline_stream
            ? "Balance the experts' load across ranks: the MoE dispatch and combine (" + amount +
                  ") run on the compute stream, in line with the layers, so each waits for the slowest rank's tokens "
                  "(tprof diagnose on all ranks' traces together shows which); the other micro-batch's compute hides "
                  "them only where its turn comes while they wait (two-batch overlap). "
            : "Overlap the MoE dispatch and combine (" + amount +
                  ") with compute: a second micro-batch's (two-batch overlap) or the shared experts' and attention's, "
                  "and balance the experts' load, since each exchange lasts as long as the slowest rank's share "
                  "(tprof diagnose on all ranks' traces together shows which). ";
    f.advice = opening + "all-to-all holds " + share_of(kinds[0].second) + " of it (" +
               format_ns(kinds[0].second) + "), the exchange of sharded "
               "embeddings (TorchRec, DLRM), of MoE tokens between experts or of attention heads (DeepSpeed-Ulysses), "
               "which the next operation needs whole, so it lasts as long as the slowest peer's share: balance what "
               "each rank sends (embedding sharding, the router's load balancing), pipeline it with other work "
               "(TorchRec's TrainPipelineSparseDist overlaps the next batch's input distribution with this one's "
               "compute; MoE: overlap dispatch and combine with the shared experts or attention), or send fewer "
               "bytes (quantized communication, fp16/bf16 embeddings); " + how_much + "." +
               (rest.empty() ? std::string()
                : inference  ? " The rest (" + rest + ") sits between layers too, with no backward to hide it: fewer "
                               "ranks per model or a faster link shorten it."
                             : " The rest (" + rest + "): overlap it with compute (DDP starts its all-reduces during "
                               "backward, a smaller bucket_cap_mb earlier; FSDP: forward/backward_prefetch) or "
                               "communicate less (no_sync() for gradient accumulation).");
  } else if (inference && !late) {
    // The fix a forward pass has comes first (the default report shows one
    // sentence); the straggler check follows (issue 38's twenty-second
    // round: SGLang's DeepSeek-R1 prefill on 8 MI300X, its RCCL all-reduces
    // 19.8% of GPU time in line with the layers, read "First run tprof
    // diagnose on all ranks' traces together").
    f.advice = "Shrink or hide the tensor-parallel all-reduces: in a forward-only pass they sit between layers, in "
               "line with the compute that needs their result, so only a second micro-batch overlaps them (SGLang's "
               "two-batch overlap, vLLM's dual-batch overlap); fewer ranks per model (a smaller tensor-parallel "
               "degree; data-parallel attention and expert parallelism for MoE models), a faster link "
               "(NVLink/NVSwitch or xGMI with P2P on; between PCIe GPUs each all-reduce crosses the host bridge), a "
               "fused or custom all-reduce (vLLM's and SGLang's custom all-reduce, NCCL NVLS), or more tokens per "
               "step so each all-reduce carries more work shorten them; " + how_much + ". " + first +
               "In a synchronous job a rank that arrives early sits in the collective until the last one arrives, "
               "which looks like exposed communication too.";
  } else if (inference) {
    f.advice = first + "Otherwise, in a forward-only pass the collectives (tensor-parallel all-reduces of activations) "
               "sit between layers with nothing to overlap them: use fewer ranks per model where it fits (a smaller "
               "tensor-parallel degree, data-parallel replicas instead), a faster link (NVLink/NVSwitch with P2P on; "
               "between PCIe GPUs each all-reduce crosses the host bridge), a fused or custom all-reduce (vLLM's "
               "custom all-reduce, NCCL NVLS), or more tokens per step so each all-reduce carries more work; " +
               how_much + ". In a synchronous job a rank that arrives early sits in the collective until the last one "
               "arrives, which looks like exposed communication too.";
  } else {
    f.advice = first + "Otherwise overlap the collectives with compute: let DDP start them during backward (a smaller "
               "bucket_cap_mb sends the first buckets earlier; FSDP: forward/backward_prefetch), or communicate less "
               "(no_sync() for gradient accumulation, bf16 gradient compression); " +
               how_much + ". In a synchronous job a rank that arrives early sits in the collective until the last one "
               "arrives, which looks like exposed communication too.";
  }
  f.impact_ns = exposed_ns;
  // The host leaves the GPU idle longer than the collectives run exposed:
  // it sets the pace, they run while it works, and removing them saves
  // only the host's waits for them, inside its synchronizing calls.
  std::int64_t host_idle = 0;
  for (const Window& w : windows) sat_acc(host_idle, host_left_idle(c.idle().totals_within(w.lo, w.hi)));
  if (host_idle > exposed_ns) {
    std::int64_t waited = 0;
    for (const Interval& iv : c.host_waits()) sat_acc(waited, covered_within(exposed, iv.start, iv.end));
    f.impact_ns = std::min(exposed_ns, waited);
    f.severity = FindingSeverity::kWarning;
    f.evidence.num("host_left_idle_ns", host_idle).num("host_waits_ns", waited);
    f.advice += " Here the host leaves the GPU idle longer (" + format_ns(host_idle) +
                ", launching op after op or working) than the collectives run exposed: they run while it works, "
                "and removing them would save only the " + format_ns(waited) +
                " it waits for them in its synchronizing calls.";
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
