// pageable_memcpy: Nsight Systems' expert rule cuda_memcpy_async ("CUDA
// Async Memcpy with Pageable Memory"; Nsight Systems User Guide, "Expert
// Systems Analysis"): copies between the device and pageable host memory.
// The driver stages them through a pinned buffer, so they run slower and the
// "Async" call blocks the host (CUDA Runtime API, "API synchronization
// behavior"). Kineto names the memory kind in the activity's name:
// "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pageable)".
// Precondition: copies of at least kMinBytes (or of unknown size). A scalar
// read (.item(), a 4-byte flag) costs its latency and its synchronization
// (sync_api's business), not the staging: pinning would not shorten it.
// The fix is in the program's API (DiagnoseContext::is_torch): a C++
// program pins with cudaMallocHost/cudaHostRegister, not pin_memory=True.
// Copies that all run before the first kernel, host to device, are set-up
// (a model's weights moved to the device once: HTA's alexnet, 244 MB in
// "[param|cuda]"'s aten::to): info, with nothing to overlap and nothing to
// pin for; the fix is to leave set-up out of the recording.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/idle.h"
#include "src/analyze/rules/rules.h"
#include "src/causal/names.h"

namespace tprof::internal {

namespace {

// Copies with nothing to gain are a finding only above this share of the
// window (the steps, or the trace without steps).
constexpr double kMinWindowShare = 0.01;
constexpr double kMinSavingShare = 0.001;

constexpr std::size_t kMaxSteps = 16;
// Nsight's rule reports every size, ours only what pinning could speed up
// (kPageableMinBytes, rules.h).
constexpr std::int64_t kMinBytes = kPageableMinBytes;
static_assert(kMinBytes == 64 * 1024, "the title says 64 KiB");
constexpr std::int64_t kMaxBytesRead = 100'000;
// What pinned copies reach at least: PCIe Gen3 x16 in practice (about
// 12 GB/s; Gen4 about 25, Gen5 about 50). Pageable copies staged through the
// driver's bounce buffer run at a fraction of it (4.5-4.8 GB/s on an A100
// PCIe Gen4 copy loop, issue 38's fourth round). The saving claimed: the
// copies' time beyond what they take at this rate.
constexpr double kPinnedGbps = 12.0;
// The trace's own pinned copies set the rate from this many, each of this
// size or more (smaller ones are latency, not bandwidth).
constexpr std::int64_t kMeasuredMinBytes = 1 << 20;
constexpr std::int64_t kMeasuredMinCopies = 3;

// What pinned copies reach on the trace's device, by its PCIe generation
// where deviceProperties tells it: Gen5 on Hopper and Blackwell (compute
// capability 9 and up) and AMD's MI300 series, Gen4 on Ampere and Ada
// (8.x) and MI200/MI100, Gen3 below; kPinnedGbps where the trace does not
// say (issue 38's eleventh round: an H100's pageable copy at 25.16 GB/s was
// "at a pinned copy's rate", while the same program pinned reached 57.22).
// A Grace-coupled device (GH200, GB200, GB10) copies over NVLink-C2C or
// shared memory, not PCIe: no rate assumed beyond kPinnedGbps.
double pinned_gbps(const Trace& t, std::string* pcie) {
  const TensorCores d = tensor_cores(t);  // deviceProperties' device 0, its name and compute capability
  const std::string_view n = d.device;
  const bool amd = n.find("AMD") != std::string_view::npos || n.find("Instinct") != std::string_view::npos;
  if (n.find("GH200") != std::string_view::npos || n.find("GB200") != std::string_view::npos ||
      n.find("GB10") != std::string_view::npos || n.find("GB300") != std::string_view::npos) {
    return kPinnedGbps;
  }
  if ((!amd && d.major >= 9) ||
      (amd && (n.find("MI300") != std::string_view::npos || n.find("MI325") != std::string_view::npos ||
               n.find("MI35") != std::string_view::npos))) {
    *pcie = "PCIe Gen5";
    return 50.0;
  }
  if ((!amd && d.major == 8) ||
      (amd && (n.find("MI2") != std::string_view::npos || n.find("MI100") != std::string_view::npos))) {
    *pcie = "PCIe Gen4";
    return 25.0;
  }
  if (!amd && d.major >= 3) *pcie = "PCIe Gen3";
  return kPinnedGbps;
}

}  // namespace

void rule_pageable_memcpy(const DiagnoseContext& c, std::vector<Finding>* out) {
  std::int64_t read = 0, copies = 0, small = 0, htod = 0, dtoh = 0, copy_ns = 0, launch_ns = 0, bytes = 0;
  const DeviceOp* longest = nullptr;
  std::vector<std::int64_t> steps;
  for (const DeviceOp& op : c.device) {
    if (op.cls != DeviceClass::kMemcpy) continue;
    const CopyKind kind = copy_kind(c.name(op.event));
    if (!kind.pageable()) continue;
    // Args are parsed from the source: for the first kMaxBytesRead copies only.
    const std::int64_t b = ++read <= kMaxBytesRead ? c.int_arg(op.event, "bytes") : -1;
    if (b >= 0 && b < kMinBytes) {
      ++small;
      continue;
    }
    ++copies;
    if (kind.direction == CopyDirection::kHtoD) ++htod;
    if (kind.direction == CopyDirection::kDtoH) ++dtoh;
    sat_acc(copy_ns, op.end - op.start);
    if (op.launch != kNoIndex) sat_acc(launch_ns, c.dur(op.launch));
    if (b > 0) sat_acc(bytes, b);
    if (longest == nullptr || op.end - op.start > longest->end - longest->start) longest = &op;
    if (op.step >= 0) steps.push_back(c.step_number(op.step));
  }
  if (copies == 0) return;
  // Set-up: every counted copy is host to device and starts before the
  // first kernel.
  std::int64_t first_kernel = -1;
  for (const DeviceOp& op : c.device) {
    if (op.cls == DeviceClass::kCompute || op.cls == DeviceClass::kComm) {
      first_kernel = op.start;
      break;  // c.device is by start
    }
  }
  bool setup = htod == copies && first_kernel >= 0;  // a trace of copies alone precedes no compute
  bool from_loader = false;
  for (const DeviceOp& op : c.device) {
    if (!setup) break;
    if (op.cls != DeviceClass::kMemcpy || !copy_kind(c.name(op.event)).pageable()) continue;
    if (op.start >= first_kernel) {
      const std::int64_t b = c.int_arg(op.event, "bytes");
      if (b < 0 || b >= kMinBytes) setup = false;
    }
  }
  // A copy launched after a DataLoader call returned is the input batch,
  // copied every iteration, not set-up (issue 38's fifth round: a 19 MB
  // batch copied right after the loader's first __next__, before the first
  // conv, was told to leave the recording).
  // The DataLoader calls' earliest end (INT64_MAX: none): also where pinning names the loader.
  std::int64_t first_loader_end = INT64_MAX;
  for (std::uint32_t e : c.host_ops) {
    if (causal::is_dataloader(c.name(e))) first_loader_end = std::min(first_loader_end, c.end(e));
  }
  if (setup && longest->launch != kNoIndex && first_loader_end <= c.ts(longest->launch)) {
    setup = false;
    from_loader = true;
  }
  // A copy inside ProfilerStep#N, N >= 2, runs in a loop that ran before
  // it: copied every iteration, not set-up (issue 38's eleventh round: a
  // benchmark's 21 MB input copied in its step #3, the profiler's schedule
  // having skipped #0-#2, was told to leave the recording).
  bool in_loop = false;
  if (setup && longest->step >= 0 && c.step_number(longest->step) >= 2) {
    setup = false;
    in_loop = true;
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  if (steps.size() > kMaxSteps) steps.resize(kMaxSteps);

  Finding f;
  f.id = "pageable_memcpy";
  f.severity = FindingSeverity::kWarning;
  // Smaller copies are left out (a scalar's read-back is a sync): the
  // title says which copies it counts (issue 38's eighteenth round: "1 copy,
  // 0 DtoH" beside a sync finding's six small DtoH read-backs).
  const std::string sized = small > 0 ? " of 64 KiB or more" : "";
  f.title = (copies == 1 ? "1 copy" + sized + " uses" : std::to_string(copies) + " copies" + sized + " use") +
            " pageable host memory (" + std::to_string(htod) + " HtoD, " + std::to_string(dtoh) + " DtoH, " +
            format_ns(copy_ns) + " on the device)";
  f.evidence.num("copies", copies)
      .num("htod", htod)
      .num("dtoh", dtoh)
      .num("copy_ns", copy_ns)
      .num("launch_ns", launch_ns)
      .num("bytes", bytes)
      .num("min_bytes", kMinBytes)
      .num("small_copies_left_out", small)
      .event("longest", c.ref(longest->event));
  if (longest->launch != kNoIndex) f.evidence.event("longest_launch", c.ref(longest->launch));
  if (!steps.empty()) f.evidence.ints("steps", steps);
  if (from_loader) f.evidence.text("pattern", "input_batch");
  if (in_loop) f.evidence.text("pattern", "every_iteration");
  if (setup) {
    const std::string site = longest->launch != kNoIndex ? call_sites(c, {longest->launch})[longest->launch] : std::string();
    f.severity = FindingSeverity::kInfo;
    f.evidence.text("pattern", "setup");
    if (!site.empty()) f.evidence.text("longest_site", site);
    char mb[32];
    std::snprintf(mb, sizeof mb, "%.0f MB", static_cast<double>(bytes) / 1e6);
    const std::string rt = c.is_hip() ? "hip" : "cuda";
    f.advice = "Leave this set-up out of the recording: " + (copies == 1 ? std::string("the copy (") : "the " + std::to_string(copies) + " copies (") +
               (bytes > 0 ? std::string(mb) + ", " : std::string()) + format_ns(copy_ns) +
               (copies == 1 ? " on the device) runs before the first kernel" : " on the device) all run before the first kernel") + (site.empty() ? "" : ", the longest in " + site) +
               ": the data moved to the device once (a model's weights, its inputs), with no compute to overlap. Pin "
               "host memory (" +
               (c.is_torch() ? std::string("pin_memory=True and .to(device, non_blocking=True)")
                             : rt + "MallocHost and " + rt + "MemcpyAsync") +
               ") only for buffers the program copies in every iteration.";
    f.impact_ns = copy_ns;
    out->push_back(std::move(f));
    return;
  }
  const std::string rt = c.is_hip() ? "hip" : "cuda";
  // Kernels to overlap with, a DataLoader to pin in, and the copies' rate
  // (bytes known for every counted copy).
  const bool kernels = first_kernel >= 0;
  std::string pcie;
  double pinned = pinned_gbps(c.trace, &pcie);
  // The trace's own pinned copies, where it has some of a size that shows
  // the link's rate (kMeasuredMinBytes, kMeasuredMinCopies): what pinning
  // reaches on this machine, before any nominal rate (issue 38's
  // twenty-second round: "pinned ones reach about 25 GB/s" on an A100 whose
  // pinned copies in the same trace moved 12.5 GB/s).
  std::int64_t pinned_bytes = 0, pinned_ns = 0, pinned_n = 0;
  for (const DeviceOp& op : c.device) {
    if (op.cls != DeviceClass::kMemcpy || copy_kind(c.name(op.event)).host != HostMemory::kPinned) continue;
    const std::int64_t b = c.int_arg(op.event, "bytes");
    if (b < kMeasuredMinBytes || op.end <= op.start) continue;
    sat_acc(pinned_bytes, b);
    sat_acc(pinned_ns, sat_sub(op.end, op.start));
    ++pinned_n;
  }
  const bool measured = pinned_n >= kMeasuredMinCopies && pinned_ns > 0;
  if (measured) {
    pinned = static_cast<double>(pinned_bytes) / static_cast<double>(pinned_ns);
    f.evidence.num("pinned_copies_measured", pinned_n).real("pinned_gbps_measured", pinned);
  }
  const bool dataloader = first_loader_end != INT64_MAX;
  const bool all_sized = read <= kMaxBytesRead && bytes > 0 && copy_ns > 0;
  const double gbps = all_sized ? static_cast<double>(bytes) / static_cast<double>(copy_ns) : 0;
  std::string rate;
  if (all_sized) {
    char b[64];
    std::snprintf(b, sizeof b, "%.2f GB/s", gbps);
    rate = b;
    f.evidence.real("gbps", gbps).real("pinned_gbps_assumed", pinned);
    f.title += ", " + rate;
  }
  const std::string pin = c.is_torch() ? std::string(dataloader ? "DataLoader(pin_memory=True), " : "") +
                                             "tensor.pin_memory(), or allocate with torch.empty(..., pin_memory=True); "
                                             "then copy with .to(device, non_blocking=True)"
                                       : "allocate them with " + rt + "MallocHost (or register existing ones with " +
                                             rt + "HostRegister), then copy with " + rt + "MemcpyAsync on a stream";
  std::string why;
  char reach[96];
  if (measured) {
    std::snprintf(reach, sizeof reach, "the %lld pinned ones in this trace move %.1f GB/s", static_cast<long long>(pinned_n),
                  pinned);
  } else if (pcie.empty()) {
    std::snprintf(reach, sizeof reach, "pinned ones reach about 12 GB/s on PCIe Gen3 x16, 25 on Gen4, 50 on Gen5");
  } else {
    std::snprintf(reach, sizeof reach, "pinned ones reach about %.0f GB/s on this GPU's %s", pinned, pcie.c_str());
  }
  const std::string rates = all_sized && gbps < pinned ? " (these move " + rate + "; " + reach + ")" : std::string();
  if (kernels) {
    why = " so the copy overlaps compute instead of blocking the host" +
          (rates.empty() ? std::string() : ", and runs at a pinned copy's rate" + rates);
  } else {
    // No kernel to overlap with: the gain is the copies' own bandwidth,
    // and the two directions overlapping on the two copy engines.
    why = ": pinned copies skip the driver's staging through a bounce buffer" + rates +
          ", and asynchronous copies in the two directions can overlap on the GPU's two copy engines";
  }
  f.advice = "Pin the host buffers: " + pin + why + ".";
  f.impact_ns = all_sized ? std::max<std::int64_t>(0, copy_ns - static_cast<std::int64_t>(static_cast<double>(bytes) / pinned))
                          : copy_ns;
  // Copies already at a pinned copy's rate that hold a sliver of the
  // window: nothing to gain (issue 38's sixth round: one 24 us copy at
  // 20.5 GB/s in a 46 ms pass was its second cause).
  const DiagnoseContext::BusyWindow w = c.gpu_busy_window();
  // Nor copies whose saving is under a thousandth of it (issue 38's
  // thirteenth round: an MLP's batches, 1.3 us a 1.48 ms step to gain).
  if (static_cast<double>(f.impact_ns) < kMinSavingShare * static_cast<double>(w.span_ns) &&
      static_cast<double>(copy_ns) < kMinWindowShare * static_cast<double>(w.span_ns)) {
    return;
  }
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
