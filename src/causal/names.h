// What the causal graph and its edits need to know of event names:
// synchronising calls, DataLoader scopes, graph launches, a copy's
// direction. These are diagnose's too (src/analyze uses them from here);
// kernel classes are the table of src/causal/kernel_classes.h.
#pragma once

#include <cstdint>
#include <string_view>

#include "src/causal/kernel_classes.h"

namespace tprof::internal {

// A name after its last namespace: "aten::copy_" is "copy_",
// "c10d::allreduce_" is "allreduce_"; a name without one is itself.
std::string_view after_namespaces(std::string_view name);
// The TensorBoard plugin's DataLoader role (event_parser.py): torch's
// "enumerate(DataLoader)#<iter>.__next__" and "enumerate(DataPipe)#..." scopes.
bool is_dataloader_scope(std::string_view name);
// True for copies that return only when done: cudaMemcpy, cudaMemcpy2D,
// cudaMemcpyToSymbol, cuMemcpyDtoH_v2, hipMemcpy, hipMemcpyWithStream (the
// forms without "Async").
bool is_blocking_memcpy(std::string_view name);
// True for runtime calls that replay a graph (cudaGraphLaunch, hipGraphLaunch,
// cuGraphLaunch): one call, many kernels.
bool is_graph_launch(std::string_view name);
// View and metadata ops (aten::view, as_strided, t, empty, resize_, ...):
// they launch nothing, but their External ids can be the ones a launch call
// carries (legacy traces give the launch the id of the last op entered, an
// aten::as_strided inside aten::linear), so they never name the launching op.
bool is_view_op(std::string_view name);
// Elementwise, reduction and cast ops, each one pass over its tensor:
// aten::add, mul, pow, rsqrt, mean, sum, to, _to_copy, copy_, silu, gelu,
// softmax, comparisons, losses, the backward of each, the optimizers'
// _foreach_ forms, ... and their in-place forms (aten::mul_). Not dropout (a
// mask drawn), not a normalisation op (native_layer_norm is one fused pass).
bool is_elementwise_op(std::string_view name);
// A matrix product by its name, the namespace aside and case ignored:
// …mm (aten::mm, addmm, bmm, _C::onednn_mm), mm_…, linear, gemm, matmul,
// einsum, and the BLAS's matrix-vector and dot products (mv, addmv, dot).
bool is_matrix_product_op(std::string_view name);
// Inductor's call of a compiled graph ("## Call CompiledFxGraph f…z ##",
// "CompiledFxGraph"): the generated code runs inside it.
bool is_compiled_graph_call(std::string_view name);
// Code torch.compile runs: a compiled graph's call, or Dynamo's
// "Torch-Compiled Region: 0/0" around it.
bool is_compiled_scope(std::string_view name);
// A collective's kind from a name PyTorch gives it: the "Collective name"
// arg ("allreduce", "_allgather_base", "all_to_allv", "send"), the c10d op
// ("c10d::alltoall_base_") or the NCCL/RCCL kernel
// ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "AllToAllPivot"):
// "all_to_all", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
// "send/recv"; "" when it says none. A SendRecv kernel is both NCCL's
// send/receive and its all-to-all: it says none. DeepEP's dispatch and
// combine (deep_ep::internode_ll::combine) are an all-to-all of MoE tokens.
std::string_view collective_kind_of(std::string_view name);
// A collective the host runs and waits for: gloo's record_function scopes
// ("gloo:all_reduce", "gloo:barrier"), or a scope or autograd function with
// no namespace a model named after its collective (DLRM's
// "All2All_Scatter_Wait", "AllGather" and their backwards). Not c10d's ops
// (the call that hands the work over) nor point-to-point calls.
bool is_host_collective(std::string_view name);
// torch.distributed.rpc's call as its profiler records it, from the call to
// its result: "rpc_async#fn(worker0 -> worker12)", rpc_sync#, rpc_remote#,
// to_here#.
bool is_rpc_call(std::string_view name);

// A copy's direction and host memory, read from its name the one way
// (Kineto: "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device ->
// Pinned)"; tprof's own traces: "Memcpy DtoD"). The token after "Memcpy"
// wins; else the "(A -> B)" ends name it.
enum class CopyDirection : std::uint8_t { kOther = 0, kHtoD, kDtoH, kDtoD };
enum class HostMemory : std::uint8_t { kUnknown = 0, kPageable, kPinned };
struct CopyKind {
  CopyDirection direction = CopyDirection::kOther;
  HostMemory host = HostMemory::kUnknown;
  bool pageable() const { return host == HostMemory::kPageable; }
};
CopyKind copy_kind(std::string_view name);
// "HtoD", "DtoH", "DtoD" or "other".
std::string_view copy_direction_name(CopyDirection d);

}  // namespace tprof::internal

namespace tprof::internal::causal {

enum class SyncKind : std::uint8_t {
  kNone = 0,
  kDevice,        // cudaDeviceSynchronize, cuCtxSynchronize, hipDeviceSynchronize
  kStream,        // cudaStreamSynchronize, cuStreamSynchronize, hipStreamSynchronize
  kEvent,         // cudaEventSynchronize, cuEventSynchronize, hipEventSynchronize
  kBlockingCopy,  // is_blocking_memcpy: returns when its copy is done
  kEventRecord,   // cudaEventRecord, cuEventRecord, hipEventRecord
  kStreamWait,    // cudaStreamWaitEvent, cuStreamWaitEvent, hipStreamWaitEvent: orders streams, never blocks the host
};
SyncKind sync_kind(std::string_view call);

// A stream's launch queue is full from this depth: CUDA's per-stream limit
// is 1024 (HTA's docs, "Augmented Counters"); launches stall at 942-1014
// on HTA's trace_diff trace, whose count misses entries the trace cannot
// show. A launch that starts on a full queue returns when the stream frees
// a slot.
inline constexpr std::int64_t kQueueFullDepth = 900;

// Host work that loads data: is_dataloader_scope, and anything named DataLoader.
bool is_dataloader(std::string_view name);

}  // namespace tprof::internal::causal
