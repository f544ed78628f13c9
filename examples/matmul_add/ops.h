// ops.h — the operators of torch.add(torch.matmul(x, w), b) on the CPU, each
// recorded as a cpu_op scope with its input shapes, so the trace shows the
// same dispatch chain as torch's aten:: operators:
//
//   eager:    op::matmul ─┬─ op::mm  (2-D) ──┬─ blas::sgemm | blas::sbgemm
//                         └─ op::bmm (3-D) ──┘
//             op::add
//   compiled: op::addmm (2-D) | op::baddbmm (3-D) ── op::copy_ (bias → output)
//                                                 └─ one GEMM with beta = 1
//
// bf16 GEMMs use OpenBLAS's cblas_sbgemm when the loaded library exports it;
// otherwise the operands go through cast::bf16_to_fp32 / cast::fp32_to_bf16
// scopes around blas::sgemm. Outputs are new tensors, as in torch.
//
//   Tensor z = add(matmul(x, w), b);   // eager
//   Tensor z = addmm(b, x, w);         // what torch.compile runs for it
//
// Operators only read their inputs and return new tensors; how many threads
// the BLAS uses is the caller's choice (openblas_set_num_threads).
#pragma once

#include "tensor.h"

namespace matmul_add {

// Returns whether bf16 GEMMs run in bf16 (cblas_sbgemm found at run time).
bool has_bf16_gemm();

// torch.matmul: op::mm for 2-D operands, op::bmm for batched (3-D) ones.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.add of two tensors of the same shape.
Tensor add(const Tensor& a, const Tensor& b);
// torch.addmm(bias, a, b) / torch.baddbmm: bias copied into the output, then
// one GEMM accumulating onto it (beta = 1).
Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b);
Tensor baddbmm(const Tensor& bias, const Tensor& a, const Tensor& b);

}  // namespace matmul_add
