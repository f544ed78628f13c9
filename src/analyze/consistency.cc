// The consistency pass over the findings and the verdict (consistency.h).
#include "src/analyze/consistency.h"

#include <algorithm>

#include "src/analyze/idle.h"
#include "src/analyze/intervals.h"

namespace tprof::internal {

namespace {

// A finding that says the GPU stayed busy through its calls is contradicted
// once the GPU idles through this share of them.
constexpr double kBusyContradiction = 0.25;

bool says(const Finding& f, std::string_view key, std::string_view value) {
  const Evidence::Field* x = f.evidence.find(key);
  return x != nullptr && x->kind == Evidence::Kind::kText && x->s == value;
}

// The host intervals of a finding's events (its evidence's event refs on
// CPU lanes), merged.
std::vector<Interval> host_spans(const Finding& f) {
  std::vector<Interval> v;
  for (const Evidence::Field& x : f.evidence.fields()) {
    if (x.kind != Evidence::Kind::kEvent && x.kind != Evidence::Kind::kEvents) continue;
    for (const EventRef& e : x.events) {
      if (e.lane.starts_with("cpu") && e.dur_ns > 0) v.push_back({e.ts_ns, e.ts_ns + e.dur_ns});
    }
  }
  return merge_intervals(std::move(v));
}

// The GPU idle time (any cause) inside `merged`.
std::int64_t idle_within(const IdlePartition& p, const std::vector<Interval>& merged) {
  std::int64_t idle = 0;
  for (const std::int64_t v : idle_by_cause(p, merged)) idle += v;
  return idle;
}

}  // namespace

bool host_side_verdict(Verdict v) {
  return v == Verdict::kOverheadBound || v == Verdict::kHostBound || v == Verdict::kInputBound;
}

void reconcile(const DiagnoseContext& c, Diagnosis* d) {
  std::vector<Finding> kept;
  kept.reserve(d->findings.size());
  const bool pageable = std::any_of(d->findings.begin(), d->findings.end(),
                                    [](const Finding& f) { return f.id == "pageable_memcpy"; });
  const auto num = [](const Finding& f, std::string_view key) {
    const Evidence::Field* x = f.evidence.find(key);
    return x != nullptr && x->kind == Evidence::Kind::kInt ? x->i : std::int64_t{-1};
  };
  // host_built_tensor's pageable copies (count, device time), read before
  // the loop moves the findings; -1 without one.
  std::int64_t built_copies = -1, built_copy_ns = -1;
  for (const Finding& f : d->findings) {
    if (f.id != "host_built_tensor") continue;
    built_copies = num(f, "pageable_copies");
    built_copy_ns = num(f, "pageable_copy_ns");
  }
  // fp32 math holding most of the GPU time: its fix is the first for those
  // kernels, and a compute-bound state with no saving of its own (profile
  // the top kernels, fuse the memory-bound ones) is a note beside it
  // (issue 38's fifteenth round: a T4 VGG16's cuDNN and cuBLAS fp32
  // kernels, 84% of its GPU time, told to try Nsight Compute and fusion).
  // The ops another finding's time is made of ("covers_ops"): a hotspot on
  // one of them blames its time a second time, with a fix of its own that
  // misses the cause (issue 38's eighteenth round: dropout's mask draw,
  // aten::bernoulli_, 95% of train_mode_in_inference's time, a hotspot told
  // to check the intra-op threads).
  std::vector<std::pair<std::string, std::string>> covered;  // (op, the finding's id)
  for (const Finding& f : d->findings) {
    const Evidence::Field* x = f.evidence.find("covers_ops");
    if (x == nullptr || x->kind != Evidence::Kind::kTexts || f.id == "hotspot") continue;
    for (const std::string& op : x->texts) covered.emplace_back(op, f.id);
  }
  // The other finding whose ops a hotspot's is one of, else covered.end().
  const auto covering = [&](const Finding& f) {
    const Evidence::Field* key = f.id == "hotspot" ? f.evidence.find("key") : nullptr;
    if (key == nullptr || key->kind != Evidence::Kind::kText) return covered.end();
    return std::find_if(covered.begin(), covered.end(), [&](const auto& o) { return o.first == key->s; });
  };
  double fp32_gpu_pct = 0;
  for (const Finding& f : d->findings) {
    if (f.id != "fp32_math") continue;
    const Evidence::Field* x = f.evidence.find("gpu_time_pct");
    if (x != nullptr && x->kind == Evidence::Kind::kReal) fp32_gpu_pct = x->d;
  }
  for (Finding& f : d->findings) {
    if (f.id == "compute_bound" && f.impact_ns == 0 && fp32_gpu_pct >= 50.0 &&
        f.evidence.find("nothing_to_act_on") == nullptr) {
      f.evidence.num("nothing_to_act_on", 1);
    }
  }
  for (Finding& f : d->findings) {
    std::string why;
    if (pageable && f.id == "host_blocked" && says(f, "copies", "pageable, 64 KiB or more, the GPU busy")) {
      why = "its blocking copies are pageable_memcpy's, with the GPU busy copying through them: pageable memory makes "
            "them synchronous, and pinning is the fix";
    } else if (f.id == "pageable_memcpy" && built_copies > 0 && num(f, "dtoh") == 0 &&
               num(f, "copies") == built_copies && num(f, "copy_ns") == built_copy_ns) {
      why = "its copies are the host-built tensor's (host_built_tensor), whose fix builds the tensor on the device: "
            "no copy is left to pin";
    } else if (const auto it = covering(f); it != covered.end()) {
      why = "its op, " + it->first + ", is what " + it->second + " counts: one cause, that finding's fix";
    } else if (host_side_verdict(d->verdict) && says(f, "host_side", "nothing to fix")) {
      why = "says the host has nothing to fix, under a " + std::string(verdict_name(d->verdict)) + " verdict";
    } else if (host_side_verdict(d->verdict) && says(f, "pace", "gpu")) {
      why = "says the GPU sets the pace, under a " + std::string(verdict_name(d->verdict)) + " verdict";
    } else if (says(f, "gpu_during", "busy") && c.has_device()) {
      const std::vector<Interval> spans = host_spans(f);
      const std::int64_t host = total_length(spans);
      const std::int64_t idle = host > 0 ? idle_within(c.idle(), spans) : 0;
      if (host > 0 && static_cast<double>(idle) >= kBusyContradiction * static_cast<double>(host)) {
        why = "says the GPU stayed busy, while it idles " + format_ns(idle) + " of the " + format_ns(host) +
              " its events span";
      }
    }
    if (why.empty()) {
      kept.push_back(std::move(f));
      continue;
    }
    d->reconciled.push_back({f.id, why});
    std::erase(d->support, f.id);
  }
  d->findings = std::move(kept);
}

}  // namespace tprof::internal
