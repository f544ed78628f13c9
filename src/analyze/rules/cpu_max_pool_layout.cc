// cpu_max_pool_layout: max pooling on the CPU in PyTorch's channels-first
// kernel, many times slower than an elementwise pass over the same tensor.
// PyTorch's CPU max_pool2d has a channels-last kernel vectorized over the
// channels (pytorch/pytorch#56361, PyTorch 1.9; its first version, #48917,
// measured 4-10x on ResNet-50's stem);
// the contiguous (NCHW) one is not (pytorch/pytorch#51393). Origin: issue
// 38's twenty-first round (tuning half): DTU MLOps ResNet-18 forwards on
// laptops' CPUs, aten::max_pool2d_with_indices 8-18% of Self CPU, 10-80 ms
// a call on a [5, 64, 112, 112] tensor the ReLU before it passes over in
// under a tenth of that; every review named it, no finding did.
//
// Precondition: cpu_only_program; aten::max_pool2d_with_indices calls
// with recorded Input Dims of 4 dimensions,
// holding >= kMinShare of torch's Self CPU total and >= kMinNs; an
// elementwise op (relu, relu_, hardtanh, silu, gelu, add) over an input of
// the same shape to compare with, the pooling's median call >= kSlowRatio
// times that op's median (the same bytes read; a channels-last pooling runs
// near an elementwise pass).
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "src/analyze/efficiency.h"
#include "src/analyze/rules/device_activity_missing.h"
#include "src/analyze/rules/rules.h"
#include "src/trace/json_value.h"

namespace tprof::internal {

namespace {

constexpr double kMinShare = 0.05;
constexpr std::int64_t kMinNs = 1'000'000;
constexpr double kSlowRatio = 3.0;
constexpr double kWarnShare = 0.10;
// Elementwise ops whose args are read, at most.
constexpr std::size_t kMaxPassesRead = 200'000;
// The smallest speed-up the channels-last kernel measured (#48917: 4x at a
// batch of 128 on a socket, up to 9.7x on one core): what the estimate
// assumes.
constexpr double kChannelsLastSpeedup = 4.0;

// The first input's dims, where recorded (only the "Input Dims" array is
// parsed).
std::vector<std::int64_t> first_input(const DiagnoseContext& c, std::uint32_t e) {
  const std::string text = input_dims_text(c.trace, e);
  if (text.empty()) return {};
  const Result<JsonValue> dims = JsonValue::parse(text);
  if (!dims) return {};
  const std::vector<std::vector<std::int64_t>> in = input_shapes(&*dims);
  return in.empty() ? std::vector<std::int64_t>{} : in.front();
}

bool is_pass_op(std::string_view n) {
  return n == "aten::relu" || n == "aten::relu_" || n == "aten::hardtanh" || n == "aten::hardtanh_" ||
         n == "aten::silu" || n == "aten::silu_" || n == "aten::gelu" || n == "aten::add" || n == "aten::add_" ||
         n == "aten::clamp_min" || n == "aten::clamp_min_";
}

std::string dims_text(const std::vector<std::int64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

void rule_cpu_max_pool_layout(const DiagnoseContext& c, std::vector<Finding>* out) {
  if (!c.is_torch() || !cpu_only_program(c)) return;
  const std::int64_t self_total = c.self_cpu_total_ns();
  if (self_total <= 0) return;
  // The poolings by input shape; then, where they hold enough time, the
  // elementwise passes over those shapes (a bounded number of args read).
  std::map<std::vector<std::int64_t>, std::vector<std::uint32_t>> pools;
  std::map<std::vector<std::int64_t>, std::vector<std::int64_t>> passes;
  std::int64_t pool_ns = 0, pool_calls = 0;
  std::uint32_t longest = kNoIndex;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp || c.name(e) != "aten::max_pool2d_with_indices") continue;
    std::vector<std::int64_t> d = first_input(c, e);
    if (d.size() != 4) continue;
    sat_acc(pool_ns, c.dur(e));
    ++pool_calls;
    if (longest == kNoIndex || c.dur(e) > c.dur(longest)) longest = e;
    pools[std::move(d)].push_back(e);
  }
  const double share = static_cast<double>(pool_ns) / static_cast<double>(self_total);
  if (pool_calls == 0 || pool_ns < kMinNs || share < kMinShare) return;
  std::size_t read = 0;
  for (std::uint32_t e : c.host_ops) {
    if (c.kind(e) != EventKind::kCpuOp || !is_pass_op(c.name(e))) continue;
    if (read++ >= kMaxPassesRead) break;
    std::vector<std::int64_t> d = first_input(c, e);
    if (pools.count(d) != 0) passes[std::move(d)].push_back(c.dur(e));
  }
  // The slowest shape against an elementwise pass over the same tensor.
  const std::vector<std::int64_t>* shape = nullptr;
  std::int64_t pool_median = 0, pass_median = 0;
  for (const auto& [d, calls] : pools) {
    const auto it = passes.find(d);
    if (it == passes.end()) continue;
    std::vector<std::int64_t> ns;
    for (std::uint32_t e : calls) ns.push_back(c.dur(e));
    const std::int64_t pm = mean_median(ns), em = mean_median(it->second);
    if (em <= 0 || static_cast<double>(pm) < kSlowRatio * static_cast<double>(em)) continue;
    if (shape == nullptr || static_cast<double>(pm) * static_cast<double>(pass_median) >
                                static_cast<double>(pool_median) * static_cast<double>(em)) {
      shape = &d;
      pool_median = pm;
      pass_median = em;
    }
  }
  if (shape == nullptr) return;
  const double ratio = static_cast<double>(pool_median) / static_cast<double>(pass_median);
  char r[32];
  std::snprintf(r, sizeof r, "%.0fx", ratio);

  Finding f;
  f.id = "cpu_max_pool_layout";
  f.severity = share >= kWarnShare ? FindingSeverity::kWarning : FindingSeverity::kInfo;
  f.title = "Max pooling runs PyTorch's channels-first CPU kernel: aten::max_pool2d_with_indices, " +
            std::to_string(pool_calls) + (pool_calls == 1 ? " call, " : " calls, ") + format_ns(pool_ns) + " (" +
            format_pct(100.0 * share) + " of Self CPU), " + format_ns(pool_median) + " a call on " + dims_text(*shape) +
            ", " + r + " an elementwise pass over the same tensor";
  f.evidence.num("pool_calls", pool_calls)
      .num("pool_ns", pool_ns)
      .real("pool_share", share)
      .num("pool_median_ns", pool_median)
      .num("elementwise_median_ns", pass_median)
      .real("ratio", ratio)
      .text("shape", dims_text(*shape))
      .event("longest_pool", c.ref(longest));
  const std::int64_t saving = static_cast<std::int64_t>(static_cast<double>(pool_ns) * (1.0 - 1.0 / kChannelsLastSpeedup));
  f.evidence.num("saving_estimate_ns", saving);
  f.advice = "Run the model and its input in channels_last (model.to(memory_format=torch.channels_last), "
             "x = x.to(memory_format=torch.channels_last)): PyTorch's CPU max pooling has a channels-last kernel "
             "vectorized over the channels (PyTorch 1.9 and later, pytorch/pytorch#56361; its first version, #48917, "
             "measured 4-10x over the channels-first one on ResNet-50's stem), where the channels-first kernel is not (pytorch/pytorch#51393): here it takes " +
             std::string(r) + " an elementwise pass over the same tensor. The convolutions take the layout too. The "
             "saving assumes the smallest of those speed-ups.";
  f.impact_ns = saving;
  out->push_back(std::move(f));
}

}  // namespace tprof::internal
