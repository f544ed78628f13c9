// The straggler analysis of many ranks (docs/scale.md, "Stragglers"): each
// rank's collective kernels with what its device did before each one
// (summarize side), then, over the summaries, the collectives matched
// across ranks, the clocks aligned on their common ends, the rank that
// arrives last and the wait it inflicts (view side).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/analyze/diagnose_context.h"
#include "tprof/ranks.h"

namespace tprof::internal {

// Ends of one collective on its ranks agree within this, once the clocks
// are aligned; a clock offset rests on ends that agree within it.
inline constexpr std::int64_t kCollectiveEndToleranceNs = 1'000'000;
// Arrivals closer than this (or than the spread of the ends) are a tie.
inline constexpr std::int64_t kArrivalTieNs = 10'000;
// Collectives of this many ranks or more can have several late ranks at
// once (docs/scale.md, "Stragglers": the late set).
inline constexpr std::size_t kMinLateSetMembers = 8;
// A straggler arrives last at this many matched collectives at least ...
inline constexpr std::int64_t kStragglerMinLate = 3;
// ... and the others wait for it at least this share of a step,
inline constexpr double kStragglerMinWaitPct = 5.0;
// ... or, where being last that often cannot be chance (the binomial tail of
// last_at or more of its collectives, each with 1/ranks odds, at most
// kStragglerChance), this share: a rank 1% late every step of a 64-rank job
// is last at every collective and costs every rank 1% (issue 39).
inline constexpr double kStragglerSignificantWaitPct = 0.5;
inline constexpr double kStragglerChance = 1e-4;
// ... or where its lateness (its arrival − the collective's median arrival;
// the Hodges-Lehmann estimate over its collectives) is this many standard
// errors beyond the arrival jitter of the others in its group: a rank 1%
// late in a group of 8 whose arrivals jitter by ±0.55% is last at 5 of 8
// (chance 1 in 800) but 5.2 standard errors late or more, punctual ranks
// last that often 3.6 at most (bench/README.md, "Jobs on Dask").
inline constexpr double kStragglerMinLatenessZ = 5.0;
// Collectives in a group up to which the lateness is the Hodges-Lehmann
// estimate (n(n+1)/2 pairwise means); the median beyond.
inline constexpr std::size_t kMaxHodgesLehmann = 256;
// The jitter a rank's lateness is judged against leaves its own arrivals
// out unless they are under 1/kOwnShareOfPool of its group's.
inline constexpr std::size_t kOwnShareOfPool = 32;
// Its lateness is not chance, by either test above: a 0.5% wait suffices.
inline bool late_beyond_chance(const Straggler& s) {
  return s.chance <= kStragglerChance || s.lateness_z >= kStragglerMinLatenessZ;
}
// A group's transfer is slow when its median (the common end − the last
// arrival) exceeds the median of its peers (the groups of the same
// collective and size that share no rank with it), of which there are
// kMinTransferPeers at least, by the largest of
// kSlowTransferShare of theirs, 4 standard deviations of theirs (1.4826 ·
// MAD) and the arrival tie; over kStragglerMinLate collectives at least.
inline constexpr std::size_t kMinTransferPeers = 2;
inline constexpr double kSlowTransferShare = 0.05;
// A late rank whose delay lies before its recorded window: it is late at
// the first collective of its windows already when its step starts
// (Straggler::late_at_window_start), and that lateness outweighs what the
// stretches that can be compared show (their top cause, per step).
inline bool late_before_window(const Straggler& s) {
  if (s.late_at_window_start == 0) return false;
  if (s.compared == 0 || s.before.empty()) return true;
  const double per_step = static_cast<double>(s.window_start_late_ns) * static_cast<double>(s.late_at_window_start) /
                          static_cast<double>(std::max<std::int64_t>(s.steps, 1));
  return per_step >= static_cast<double>(s.before[0].excess_per_step_ns);
}
// A rank's verdict becomes "waiting for rank k" when its own verdict is
// communication-bound, dependency-bound or unclear, or when it waits this
// share of a step at least.
inline constexpr double kWaitingVerdictPct = 25.0;

// Fills r's collective_groups, names and collectives from the trace's
// communication kernels (c.device of class kComm).
void summarize_collectives(const DiagnoseContext& c, RankSummary* r);

struct CollectiveView {
  CollectiveAlignment alignment;
  std::vector<Straggler> stragglers;  // named, most wait first
  std::optional<Straggler> latest;    // none named: the rank last most often
  SlowNetwork network;
  CrossRankPath path;
  // Per rank of `order`:
  std::vector<std::optional<WaitingFor>> waiting_for;
  std::vector<std::int64_t> collectives, last_at;
};

// The analysis over the ranks in `order`, shown as `shown_rank` (same
// size); `median_step_ns` is the job's median step (0 without steps).
CollectiveView analyze_collectives(const std::vector<const RankSummary*>& order,
                                   const std::vector<std::int64_t>& shown_rank, std::int64_t median_step_ns);

// What a slow transfer is measured against (text, Markdown and the job
// page say it under their heading).
inline constexpr const char* kSlowTransferRule =
    "collectives that run long once their last rank arrives, against the groups of the same collective and size that "
    "share no rank with them";
// A slow transfer in words: the group, its ranks, its transfer against its
// peers' (text, Markdown and the job page share it).
std::string slow_transfer_text(const SlowTransfer& t);
// ", of its group's 64: an untraced one may arrive later still" when the
// group it is judged in has more ranks than its collectives' traced ones,
// else "" (after "8 traced ranks each").
std::string group_traced_text(const Straggler& s);
// A straggler late before its window begins (late_at_window_start > 0), in
// words, lower case: "already late when its window begins: ...".
std::string window_late_text(const Straggler& s);
// The slow transfers' suspects and the ranks late only through them.
std::string network_who_text(const SlowNetwork& n);
// The critical path's time per step on each rank (its parts summed), as
// (rank, ns), largest first, ties by rank; the transfers (rank -1) left out.
std::vector<std::pair<std::int64_t, std::int64_t>> path_by_rank(const CrossRankPath& p);

}  // namespace tprof::internal
