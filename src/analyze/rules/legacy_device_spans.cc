// legacy_device_spans: a trace of the legacy autograd profiler with
// use_cuda=True (before Kineto, or torch.autograd.profiler without
// use_kineto=True) records each op's device span, not its kernels
// (legacy_spans.h). When the device got to each op's work says which side
// waits: spans that start behind their calls, or device work that ends long
// after the host's last op, are a device that runs behind (the GPU sets the
// pace); spans that start as their calls do are a device that keeps up and
// waits for each launch. Origin: issue 38's fifteenth round, where a 2021
// convolution benchmark (the device's work ending 785 ms after its host's,
// 15.4 ms a convolution) and a batch-1 ResNet-18 (its spans within 2 us of
// their calls) were both "the GPU's activity was not recorded".
//
// Precondition: legacy spans and no device activity; the span of the trace
// at least kMinSpanNs. Info: the spans measure no idle time to save.
#include <string>
#include <vector>

#include "src/analyze/legacy_spans.h"
#include "src/analyze/rules/cpu_collectives.h"
#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

constexpr std::int64_t kMinSpanNs = 1'000'000;

}  // namespace

void rule_legacy_device_spans(const DiagnoseContext& c, std::vector<Finding>* out) {
  const LegacySpans& l = c.legacy_spans();
  const std::int64_t span = c.end_ns - c.start_ns;
  if (!l.any() || span < kMinSpanNs) return;
  Finding f;
  f.id = "legacy_device_spans";
  f.severity = FindingSeverity::kInfo;
  const bool behind = l.device_behind(span);
  const std::string busiest = l.busiest != kNoIndex ? std::string(c.name(l.busiest)) : std::string("the ops");
  const std::string offset = "a median " + format_ns(l.median_offset_ns) + " after their calls (" +
                             std::to_string(l.late) + " of " + std::to_string(l.linked) + " by " +
                             format_ns(kLegacyLateNs) + " or more)";
  // In the fix's first sentence (the default view prints that one).
  const std::string record =
      "; torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) (PyTorch 1.8.1 and later) "
      "records the kernels and the device's idle time. The legacy profiler's spans run from the op's entry to its exit "
      "on the stream, the waits between its kernels included.";
  if (behind) {
    f.title = "The device runs behind the host: its ops' device work starts " + offset + " and ends " +
              format_ns(sat_sub(l.device_end_ns, l.host_end_ns)) + " after the host's last op; " + busiest +
              " holds " + format_ns(l.busiest_ns) + " of the spans' own time (" + std::to_string(l.busiest_calls) +
              " calls)";
    const bool conv = busiest.find("conv") != std::string::npos;
    f.advice = "Make " + busiest + " cheaper on the device, " +
               format_ns(l.busiest_calls > 0 ? l.busiest_ns / l.busiest_calls : 0) + " a call: the device sets the pace" +
               (conv ? std::string(" (torch.backends.cudnn.benchmark = True lets cuDNN time its algorithms for these "
                                   "shapes; fp16 or channels_last where the GPU has tensor cores)")
                     : std::string()) +
               record;
  } else {
    f.title = "The device keeps up with the host: its ops' device work starts " + offset +
              ", so each op waits for its launch; the spans cover " + format_ns(l.covered_ns) + " of " +
              format_ns(span) + ", an upper bound on the device's busy time";
    // The host's waits in its collectives are not launching (issue 38's
    // eighteenth round: a gloo DLRM, 39% of its trace in them).
    const std::int64_t coll = host_collective_wait_ns(c);
    const bool waits = coll > 0;
    f.advice = "Give each launch more work: more inputs per call (a larger batch), fewer and larger ops (TorchScript's "
               "fusion; CUDA graphs from PyTorch 1.10): the host launching op after op sets the pace" +
               (waits ? " outside the " + format_ns(coll) + " it waits in its collectives (cpu_collectives)"
                      : std::string()) +
               record;
    if (waits) f.evidence.num("host_collectives_ns", coll);
  }
  f.evidence.num("spans", l.spans)
      .num("linked_spans", l.linked)
      .num("median_offset_ns", l.median_offset_ns)
      .num("late_spans", l.late)
      .num("device_after_host_ns", sat_sub(l.device_end_ns, l.host_end_ns))
      .num("covered_ns", l.covered_ns)
      .text("device", behind ? "behind the host" : "keeps up with the host");
  if (l.busiest != kNoIndex) f.evidence.event("busiest_span", c.ref(l.busiest)).num("busiest_ns", l.busiest_ns);
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
