// What the causal graph and its edits need to know of event names:
// synchronising calls, kernel classes, DataLoader scopes.
#pragma once

#include <cstdint>
#include <string_view>

namespace tprof::internal::causal {

enum class SyncKind : std::uint8_t {
  kNone = 0,
  kDevice,        // cudaDeviceSynchronize, cuCtxSynchronize, hipDeviceSynchronize
  kStream,        // cudaStreamSynchronize, cuStreamSynchronize, hipStreamSynchronize
  kEvent,         // cudaEventSynchronize, cuEventSynchronize, hipEventSynchronize
  kBlockingCopy,  // cudaMemcpy, cudaMemcpy2D, cuMemcpyDtoH_v2, hipMemcpy (no "Async"): returns when its copy is done
  kEventRecord,   // cudaEventRecord, cuEventRecord, hipEventRecord
  kStreamWait,    // cudaStreamWaitEvent, cuStreamWaitEvent, hipStreamWaitEvent: orders streams, never blocks the host
};
SyncKind sync_kind(std::string_view call);

// Kernel classes scale: accepts: "gemm", "elementwise", "communication".
bool is_gemm_kernel(std::string_view name);
bool is_elementwise_kernel(std::string_view name);
bool is_comm_kernel(std::string_view name);

// torch's DataLoader scopes ("enumerate(DataLoader)#...__next__",
// "enumerate(DataPipe)#...") and anything named DataLoader.
bool is_dataloader(std::string_view name);

// True for the runtime calls that replay a graph (cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch).
bool is_graph_launch_call(std::string_view name);

}  // namespace tprof::internal::causal
