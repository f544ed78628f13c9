// tprof/sweep.h — the blog's central lesson measured: one workload at
// growing sizes, the time a step spends working against the time around the
// work, and the size where it turns from overhead-bound to compute-bound.
//
//   std::vector<tprof::SweepPoint> points;
//   for (auto& [size, trace] : runs) points.push_back(tprof::sweep_point(trace, size));
//   tprof::Sweep s = tprof::finish_sweep(std::move(points));
//   std::cout << tprof::format_sweep_text(s);
//
// Definitions (docs/sweep.md):
//   step      on the CPU, a ProfilerStep#N; with device activity, from the
//             step's start (or the previous step's completion, when later)
//             to its completion: the later of its ProfilerStep's end and the
//             end of the device work it launched. Loops that do not
//             synchronize per step (torch's, matmul_add's) end a GPU-bound
//             ProfilerStep once its work is enqueued, so its span alone is
//             the host's time. The whole trace when it has no steps; medians
//             over the steps.
//   host      the ProfilerStep's own span: the host's time per step.
//   work      with device activity: the device work the step launched (the
//             union of its kernels, copies and memsets, wherever they ran),
//             diagnose's per-step gpu_work_ns; on the CPU: the time in leaf
//             host ops (ops that call no other recorded op: the GEMM, the add
//             loop), where the arithmetic is.
//   overhead  step − work: the host dispatching, launching and waiting
//             around the work (never negative).
//   verdict   tprof diagnose's verdict on the same trace.
//   crossover the smallest size from which every larger size spends at
//             least half of its step working (work ≥ overhead), when one
//             exists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tprof/trace.h"

namespace tprof {

struct SweepPoint {
  std::int64_t size = 0;
  std::int64_t steps = 0;         // steps measured (1 for a trace without steps)
  bool device = false;            // work is device time (else leaf host ops)
  std::int64_t step_ns = 0;       // median step duration (with device work: to the step's completion)
  std::int64_t host_ns = 0;       // median ProfilerStep span (the host's part of a step)
  std::int64_t work_ns = 0;       // median work per step
  std::int64_t overhead_ns = 0;   // median of (step − work) per step
  double work_pct = 0;            // median over steps of work / step, in % (at most 100)
  std::string verdict;            // tprof diagnose's verdict for the run
};

struct Sweep {
  std::vector<SweepPoint> points;            // by size
  std::optional<std::int64_t> crossover_size;  // first size compute-bound from there on
};

// The point of one run at `size`. Runs diagnose on the trace (the verdict).
SweepPoint sweep_point(const Trace& trace, std::int64_t size);

// Sorts the points by size and finds the crossover.
Sweep finish_sweep(std::vector<SweepPoint> points);

// Reports: a table, a JSON document (ns integers, a stable contract) and a
// self-contained HTML page (log-log chart of step, work and overhead per
// size, drawn with the vendored uPlot; no network needed).
std::string format_sweep_text(const Sweep& sweep);
std::string format_sweep_json(const Sweep& sweep);
std::string format_sweep_html(const Sweep& sweep, const std::string& title);

}  // namespace tprof
