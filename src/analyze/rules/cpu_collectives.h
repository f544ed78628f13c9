// The collectives a program runs on its host (cpu_collectives.cc): the rule
// and the verdict (verdict.cc) read them, so a verdict of a host that
// waits on its peers says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/analyze/diagnose_context.h"

namespace tprof::internal {

// A CPU-only program, or device activity (kernels, or the legacy
// profiler's spans) with no collective among it: gloo's collectives, or a
// model's own, run on the host and block the thread that calls them.
bool collectives_on_host(const DiagnoseContext& c);

// The union of the host's collectives (is_host_collective) within the
// steps, or the trace without them, where it holds the share of the window
// the rule reports from (5%); 0 below it, or unless collectives_on_host.
std::int64_t host_collective_wait_ns(const DiagnoseContext& c);

// torch.distributed.rpc's calls (rpc_async#, rpc_sync#, rpc_remote#,
// to_here#) with nothing else recorded on the host meanwhile: a process
// waiting on other workers' results.
struct RpcWait {
  std::int64_t ns = 0;      // within the steps, or the trace without them
  std::int64_t calls = 0;
  std::uint32_t longest = kNoIndex;
  std::vector<std::string> to;  // destinations by the calls' time, most first
};
RpcWait rpc_wait(const DiagnoseContext& c);

}  // namespace tprof::internal
