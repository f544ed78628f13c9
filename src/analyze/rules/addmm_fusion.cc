// addmm_fusion: aten::addmm(b, x, w) in place of aten::mm + aten::add: a
// dispatcher-level fusion that saves one launch but still runs the same GEMM,
// plus a DtoD copy of the bias. Cheatsheet: "aten::addmm(b, x, w) instead of
// aten::mm + aten::add: fusion at the dispatcher level; the GPU still runs
// the same GEMM, plus the DtoD copy."
// Precondition: device activity, and DtoD copies under the addmm ops (the
// only time the fusion costs: without them addmm is simply how nn.Linear
// runs, one GEMM with its bias epilogue, nothing to change). On a CPU-only
// trace there is no GEMM kernel and no DtoD copy to show.
#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

#include "src/analyze/rules/rules.h"

namespace tprof::internal {

namespace {

// One aten::addmm with a copy is enough: the copies are its whole impact.
constexpr std::int64_t kMinAddmm = 1;
// The aten::addmm ops of one thread, by start (they do not nest in each other).
struct LaneOps {
  std::uint32_t lane = kNoIndex;
  std::vector<std::uint32_t> ops;
};

}  // namespace

void rule_addmm_fusion(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.has_device()) return;
  const Trace& t = c.trace;
  const auto addmm_id = t.strings.find("aten::addmm");
  if (!addmm_id) return;
  const auto mm_id = t.strings.find("aten::mm");
  const auto add_id = t.strings.find("aten::add");
  std::int64_t addmm_count = 0, mm_count = 0, add_count = 0;
  std::unordered_set<std::int64_t> addmm_ext;
  std::vector<LaneOps> addmm_by_lane;  // few threads: a linear search over them is fine
  std::uint32_t first_addmm = kNoIndex;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp) continue;
    const StrId n = t.events.name[e];
    if (n == *addmm_id) {
      ++addmm_count;
      if (first_addmm == kNoIndex) first_addmm = e;
      if (t.events.external_id[e] >= 0) addmm_ext.insert(t.events.external_id[e]);
      const std::uint32_t lane = t.events.lane[e];
      auto it = std::find_if(addmm_by_lane.begin(), addmm_by_lane.end(), [&](const LaneOps& l) { return l.lane == lane; });
      if (it == addmm_by_lane.end()) it = addmm_by_lane.insert(addmm_by_lane.end(), LaneOps{lane, {}});
      it->ops.push_back(e);
    } else if (mm_id && n == *mm_id) {
      ++mm_count;
    } else if (add_id && n == *add_id) {
      ++add_count;
    }
  }
  if (addmm_count < kMinAddmm) return;

  // Device work issued by an addmm: by External id, else by the launch call
  // lying inside an addmm on its thread.
  auto from_addmm = [&](const DeviceOp& op) {
    for (std::uint32_t e : {op.event, op.launch}) {
      if (e != kNoIndex && t.events.external_id[e] >= 0) return addmm_ext.count(t.events.external_id[e]) > 0;
    }
    if (op.launch == kNoIndex) return false;
    // No External id: the launch call lies inside an addmm on its thread.
    const std::uint32_t lane = t.events.lane[op.launch];
    const std::int64_t ts = c.ts(op.launch);
    for (const LaneOps& l : addmm_by_lane) {
      if (l.lane != lane) continue;
      auto it = std::upper_bound(l.ops.begin(), l.ops.end(), ts, [&](std::int64_t v, std::uint32_t e) { return v < c.ts(e); });
      return it != l.ops.begin() && c.end(*std::prev(it)) >= ts;
    }
    return false;
  };
  std::unordered_map<StrId, std::int64_t> kernel_count, kernel_ns;
  std::int64_t dtod_count = 0, dtod_ns = 0, device_ops = 0;
  std::uint32_t first_dtod = kNoIndex;
  for (const DeviceOp& op : c.device) {
    if (!from_addmm(op)) continue;
    ++device_ops;
    const std::int64_t d = op.end - op.start;
    if (op.cls == DeviceClass::kMemcpy) {
      ++dtod_count;
      sat_acc(dtod_ns, d);
      if (first_dtod == kNoIndex) first_dtod = op.event;
    } else if (op.cls == DeviceClass::kCompute) {
      const StrId n = t.events.name[op.event];
      ++kernel_count[n];
      sat_acc(kernel_ns[n], d);
    }
  }
  // Without a copy the fusion costs nothing: no finding (addmm is how
  // nn.Linear runs; 28 traces of 28 carried one with zero impact).
  if (dtod_count == 0) return;
  // The GEMM: the kernel addmm launches most often (longest total on ties).
  StrId gemm = kEmptyStr;
  for (const auto& [n, k] : kernel_count) {
    if (gemm == kEmptyStr || k > kernel_count[gemm] || (k == kernel_count[gemm] && kernel_ns[n] > kernel_ns[gemm])) gemm = n;
  }
  std::uint32_t first_gemm = kNoIndex;
  if (gemm != kEmptyStr) {
    for (const DeviceOp& op : c.device) {
      if (t.events.name[op.event] == gemm && from_addmm(op)) {
        first_gemm = op.event;
        break;
      }
    }
  }

  Finding f;
  f.id = "addmm_fusion";
  f.severity = FindingSeverity::kInfo;
  f.title = "aten::addmm x" + std::to_string(addmm_count) + " instead of aten::mm + aten::add";
  if (gemm != kEmptyStr) {
    f.title += ": the GPU still runs the GEMM " + std::string(t.str(gemm)) + " x" + std::to_string(kernel_count[gemm]);
    if (dtod_count > 0) f.title += " plus " + std::to_string(dtod_count) + " DtoD copies (" + format_ns(dtod_ns) + ")";
  }
  f.evidence.num("addmm_count", addmm_count).num("mm_count", mm_count).num("add_count", add_count);
  if (gemm != kEmptyStr) {
    f.evidence.text("gemm_kernel", std::string(t.str(gemm)))
        .num("gemm_count", kernel_count[gemm])
        .num("gemm_total_ns", kernel_ns[gemm]);
  }
  f.evidence.num("dtod_count", dtod_count).num("dtod_total_ns", dtod_ns);
  if (addmm_count > 0) f.evidence.real("device_ops_per_addmm", static_cast<double>(device_ops) / static_cast<double>(addmm_count));
  f.evidence.event("addmm", c.ref(first_addmm));
  if (first_gemm != kNoIndex) f.evidence.event("gemm", c.ref(first_gemm));
  if (first_dtod != kNoIndex) f.evidence.event("dtod_copy", c.ref(first_dtod));
  f.impact_ns = dtod_ns;
  const std::int64_t steps = std::max<std::int64_t>(1, static_cast<std::int64_t>(c.steps.steps.size()));
  f.advice = "Let torch.compile(mode=\"max-autotune\") fuse the add into the GEMM's epilogue, or, where the addend "
             "is a bias vector broadcast over the rows, pass it 1-D so aten::addmm takes cuBLASLt's bias epilogue: either drops the " + std::to_string(dtod_count) +
             " DtoD copies (" + format_ns(dtod_ns / steps) + (c.steps.steps.empty() ? "" : " per step") +
             "). addmm fuses matmul + add at the dispatcher only: one launch less on the CPU, but the GPU runs the same "
             "GEMM plus a device-to-device copy of the addend into the output; compare GPU time, not op counts.";
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
