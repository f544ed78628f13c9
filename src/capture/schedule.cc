// torch.profiler.schedule, as profiler.py defines it (docs/torch-table-semantics.md §4).
#include "tprof/profiler.h"

namespace tprof {

bool Schedule::valid() const {
  const ScheduleOptions& o = options_;
  return o.wait >= 0 && o.warmup >= 0 && o.active > 0 && o.repeat >= 0 && o.skip_first >= 0;
}

ProfilerAction Schedule::operator()(std::int64_t step) const {
  if (!set_) return ProfilerAction::kRecord;
  const ScheduleOptions& o = options_;
  if (step < o.skip_first) return ProfilerAction::kNone;
  step -= o.skip_first;
  const std::int64_t n = static_cast<std::int64_t>(o.wait) + o.warmup + o.active;
  if (n <= 0) return ProfilerAction::kNone;
  if (o.repeat > 0 && step / n >= o.repeat) return ProfilerAction::kNone;
  const std::int64_t m = step % n;
  if (m < o.wait) return ProfilerAction::kNone;
  if (m < o.wait + o.warmup) return ProfilerAction::kWarmup;
  return m < n - 1 ? ProfilerAction::kRecord : ProfilerAction::kRecordAndSave;
}

}  // namespace tprof
