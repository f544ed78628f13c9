#include "src/causal/names.h"

#include <string>
#include <unordered_set>

#include "src/base/ascii.h"

namespace tprof::internal::causal {
namespace {

bool has(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

// The API's prefix off: "cudaStreamSynchronize" → "StreamSynchronize".
std::string_view api_less(std::string_view call) {
  for (std::string_view p : {"cuda", "hip", "cu"})
    if (call.starts_with(p)) return call.substr(p.size());
  return {};
}

}  // namespace

SyncKind sync_kind(std::string_view call) {
  const std::string_view c = api_less(call);
  if (c.empty()) return SyncKind::kNone;
  if (c == "DeviceSynchronize" || c == "CtxSynchronize") return SyncKind::kDevice;
  if (c == "StreamSynchronize") return SyncKind::kStream;
  if (c == "EventSynchronize") return SyncKind::kEvent;
  if (c.starts_with("EventRecord")) return SyncKind::kEventRecord;
  if (c.starts_with("StreamWaitEvent")) return SyncKind::kStreamWait;
  if (is_blocking_memcpy(call)) return SyncKind::kBlockingCopy;
  return SyncKind::kNone;
}

bool is_dataloader(std::string_view name) { return is_dataloader_scope(name) || has(name, "DataLoader"); }

}  // namespace tprof::internal::causal

namespace tprof::internal {

std::string_view after_namespaces(std::string_view name) {
  const std::size_t colons = name.rfind("::");
  return colons == std::string_view::npos ? name : name.substr(colons + 2);
}

bool is_dataloader_scope(std::string_view name) {
  return (name.starts_with("enumerate(DataLoader)#") && name.ends_with(".__next__")) ||
         name.starts_with("enumerate(DataPipe)#");
}

bool is_blocking_memcpy(std::string_view name) {
  const bool memcpy = name.starts_with("cudaMemcpy") || name.starts_with("cuMemcpy") || name.starts_with("hipMemcpy");
  return memcpy && name.find("Async") == std::string_view::npos;
}

bool is_graph_launch(std::string_view name) { return name.find("GraphLaunch") != std::string_view::npos; }

bool is_view_op(std::string_view name) {
  for (std::string_view k : {"aten::reshape", "aten::view", "aten::_reshape_alias", "aten::as_strided", "aten::expand",
                             "aten::permute", "aten::transpose", "aten::t", "aten::contiguous", "aten::unsqueeze",
                             "aten::squeeze", "aten::slice", "aten::select", "aten::alias", "aten::detach",
                             "aten::empty", "aten::empty_strided", "aten::resize_"}) {
    if (name == k) return true;
  }
  return false;
}

bool is_elementwise_op(std::string_view n) {
  if (!n.starts_with("aten::")) return false;
  n.remove_prefix(6);
  if (n.size() > 1 && n.back() == '_' && n != "copy_" && n != "_to_copy") n.remove_suffix(1);  // in place
  static const std::unordered_set<std::string_view> kOps = {
      "add", "sub", "rsub", "mul", "div", "pow", "rsqrt", "sqrt", "exp", "log", "tanh", "sigmoid", "silu", "gelu",
      "relu", "neg", "abs", "clamp", "clamp_min", "clamp_max", "where", "mean", "sum", "var", "to", "type_as",
      "_to_copy", "copy_", "masked_fill", "softmax", "_softmax", "log_softmax", "maximum", "minimum", "erf",
      "square", "reciprocal", "addcmul", "addcdiv", "lerp", "hardtanh", "leaky_relu", "cos", "sin", "amax",
      "amin", "eq", "ne", "lt", "gt", "le", "ge", "min", "max", "argmax", "argmin", "all", "any", "logical_not",
      "logical_and", "logical_or", "fill", "zero", "clone",
      // Losses: a reduction over their inputs.
      "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "nll_loss_forward", "nll_loss2d_forward",
      "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy_loss", "kl_div",
      // The backward of an elementwise op or a loss is one pass too.
      "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
      "hardtanh_backward", "leaky_relu_backward", "mse_loss_backward", "l1_loss_backward", "nll_loss_backward",
      "binary_cross_entropy_backward", "_softmax_backward_data", "_log_softmax_backward_data"};
  // The optimizers' multi-tensor forms (aten::_foreach_mul_): elementwise
  // over a list of tensors.
  if (n.starts_with("_foreach_")) return true;
  return kOps.count(n) != 0;
}

bool is_matrix_product_op(std::string_view name) {
  const std::size_t colons = name.find("::");
  const std::string n = ascii_lower(colons == std::string_view::npos ? name : name.substr(colons + 2));
  const std::string_view op = n;
  return op.ends_with("mm") || op.find("mm_") != std::string_view::npos || op.find("linear") != std::string_view::npos ||
         op.find("gemm") != std::string_view::npos || op == "matmul" || op == "einsum" || op.ends_with("mv") ||
         op == "addmv_" || op == "dot" || op == "vdot";
}

bool is_compiled_graph_call(std::string_view name) {
  return name.starts_with("## Call CompiledFxGraph") || name.starts_with("CompiledFxGraph");
}

bool is_compiled_scope(std::string_view name) {
  return name.starts_with("Torch-Compiled Region") || is_compiled_graph_call(name);
}

std::string_view collective_kind_of(std::string_view name) {
  std::string n;
  for (const char ch : name) {
    if (ch != '_') n += ascii_lower(ch);
  }
  if (n.find("sendrecv") != std::string::npos) return "";
  // (DLRM's own autograd functions: "All2All_Scatter_Wait".)
  if (n.find("alltoall") != std::string::npos || n.find("all2all") != std::string::npos) return "all_to_all";
  // DeepEP's MoE dispatch and combine: an all-to-all of tokens.
  if (n.find("deepep::") != std::string::npos) return "all_to_all";
  if (n.find("allreduce") != std::string::npos) return "all_reduce";
  if (n.find("allgather") != std::string::npos) return "all_gather";
  if (n.find("reducescatter") != std::string::npos) return "reduce_scatter";
  if (n.find("broadcast") != std::string::npos) return "broadcast";
  // NCCL's and RCCL's reduce to one rank (nn.DataParallel's gradients:
  // ncclReduceRingLLKernel_sum_f32, ncclDevKernel_Reduce_RING_LL), c10d's
  // reduce; the checks above took all-reduce and reduce-scatter.
  if (((n.starts_with("nccl") || n.starts_with("rccl")) && n.find("reduce") != std::string::npos) ||
      n.ends_with("::reduce")) {
    return "reduce";
  }
  if (n == "send" || n == "recv" || n.ends_with("::send") || n.ends_with("::recv") || n.ends_with("::recv_")) {
    return "send/recv";
  }
  return "";
}

bool is_rpc_call(std::string_view name) {
  return name.starts_with("rpc_async#") || name.starts_with("rpc_sync#") || name.starts_with("rpc_remote#") ||
         name.starts_with("to_here#");
}

bool is_host_collective(std::string_view name) {
  if (name.starts_with("gloo:")) {
    const std::string_view op = name.substr(5);
    for (std::string_view k : {"all_reduce", "allreduce", "broadcast", "all_gather", "allgather", "reduce_scatter",
                               "all_to_all", "alltoall", "barrier", "reduce", "gather", "scatter"}) {
      if (op.starts_with(k)) return true;
    }
    return false;
  }
  // No namespace, no "nccl:" (NCCL's record_function launches its kernel
  // and returns): a scope or autograd function a model named after its
  // collective, its backward too ("AllGather", "AllGatherBackward").
  if (name.find(':') != std::string_view::npos) return false;
  const std::string_view k = collective_kind_of(name);
  return !k.empty() && k != "send/recv";
}

CopyKind copy_kind(std::string_view name) {
  CopyKind k;
  const auto has = [&](std::string_view w) { return name.find(w) != std::string_view::npos; };
  if (has("HtoD")) {
    k.direction = CopyDirection::kHtoD;
  } else if (has("DtoH")) {
    k.direction = CopyDirection::kDtoH;
  } else if (has("DtoD")) {
    k.direction = CopyDirection::kDtoD;
  } else if (has("PtoP")) {
    k.direction = CopyDirection::kOther;  // between devices: neither end is this device's memory alone
  } else if (const std::size_t arrow = name.find(" -> "); arrow != std::string_view::npos) {
    const bool from_device = name.substr(0, arrow).ends_with("Device");
    const bool to_device = name.substr(arrow + 4).starts_with("Device");
    k.direction = from_device && to_device ? CopyDirection::kDtoD
                  : from_device            ? CopyDirection::kDtoH
                  : to_device              ? CopyDirection::kHtoD
                                           : CopyDirection::kOther;
  }
  k.host = has("Pageable") ? HostMemory::kPageable : has("Pinned") ? HostMemory::kPinned : HostMemory::kUnknown;
  return k;
}

std::string_view copy_direction_name(CopyDirection d) {
  switch (d) {
    case CopyDirection::kHtoD: return "HtoD";
    case CopyDirection::kDtoH: return "DtoH";
    case CopyDirection::kDtoD: return "DtoD";
    case CopyDirection::kOther: break;
  }
  return "other";
}

}  // namespace tprof::internal
