#include "ops.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstring>

#include "bf16.h"
#include "op_scope.h"
#include "tprof/record_function.h"

namespace matmul_add {
namespace {

using SbgemmFn = decltype(&cblas_sbgemm);

// Debian's OpenBLAS declares cblas_sbgemm in cblas.h but is built without
// bf16 kernels, so the symbol is absent and naming it would not link: look
// it up in whatever libopenblas is loaded instead.
SbgemmFn bf16_gemm() {
  static const SbgemmFn fn = reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
  return fn;
}

blasint to_blasint(std::int64_t v) { return static_cast<blasint>(v); }

// One row-major fp32 GEMM: c = a · b + beta · c, a m×k, b k×n.
void sgemm(const float* a, const float* b, float beta, float* c, std::int64_t m, std::int64_t k, std::int64_t n) {
  TPROF_RECORD_OP_SHAPES("blas::sgemm", {{m, k}, {k, n}});
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, to_blasint(m), to_blasint(n), to_blasint(k), 1.0f, a,
              to_blasint(k), b, to_blasint(n), beta, c, to_blasint(n));
}

// A new fp32 tensor holding the values of the bf16 tensor `t` (exact).
Tensor to_fp32(const Tensor& t) {
  static constexpr tprof::ScopeSite kSite{"cast::bf16_to_fp32", tprof::kCpuOp};
  const OpScope scope(&kSite, t);
  Tensor out = Tensor::empty(t.batch(), t.rows(), t.cols(), DType::kFp32);
  const std::uint16_t* in = t.bf16();
  float* o = out.f32();
  for (std::int64_t i = 0; i < t.numel(); ++i) o[i] = float_from_bf16(in[i]);
  return out;
}

// Rounds the fp32 tensor `src` into the bf16 tensor `dst` (ties to even).
void round_to_bf16(const Tensor& src, Tensor& dst) {
  static constexpr tprof::ScopeSite kSite{"cast::fp32_to_bf16", tprof::kCpuOp};
  const OpScope scope(&kSite, src);
  const float* in = src.f32();
  std::uint16_t* o = dst.bf16();
  for (std::int64_t i = 0; i < src.numel(); ++i) o[i] = bf16_from_float(in[i]);
}

// c[i] = a[i] · b[i] + beta · c[i] for each matrix i of the batch, one BLAS
// call per matrix (the OpenBLAS of Debian 12 has no batched GEMM).
void gemm(const Tensor& a, const Tensor& b, float beta, Tensor& c) {
  const std::int64_t m = a.rows(), k = a.cols(), n = b.cols();
  if (c.dtype() == DType::kFp32) {
    for (std::int64_t i = 0; i < c.batch(); ++i) {
      sgemm(a.f32() + i * m * k, b.f32() + i * k * n, beta, c.f32() + i * m * n, m, k, n);
    }
    return;
  }
  // Both bf16 routes accumulate in fp32 and round once at the end, as torch's
  // bf16 GEMMs do. With beta = 0 the BLAS ignores the accumulator's contents.
  Tensor acc = beta != 0.0f ? to_fp32(c) : Tensor::empty(c.batch(), m, n, DType::kFp32);
  if (const SbgemmFn sbgemm = bf16_gemm()) {
    for (std::int64_t i = 0; i < c.batch(); ++i) {
      TPROF_RECORD_OP_SHAPES("blas::sbgemm", {{m, k}, {k, n}});
      sbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, to_blasint(m), to_blasint(n), to_blasint(k), 1.0f,
             a.bf16() + i * m * k, to_blasint(k), b.bf16() + i * k * n, to_blasint(n), beta, acc.f32() + i * m * n,
             to_blasint(n));
    }
  } else {
    const Tensor a32 = to_fp32(a);
    const Tensor b32 = to_fp32(b);
    for (std::int64_t i = 0; i < c.batch(); ++i) {
      sgemm(a32.f32() + i * m * k, b32.f32() + i * k * n, beta, acc.f32() + i * m * n, m, k, n);
    }
  }
  round_to_bf16(acc, c);
}

// torch's Tensor.copy_(src): dst takes src's values (same shape and dtype).
void copy_(Tensor& dst, const Tensor& src) {
  static constexpr tprof::ScopeSite kSite{"op::copy_", tprof::kCpuOp};
  const OpScope scope(&kSite, dst, src);
  std::memcpy(dst.data(), src.data(), static_cast<std::size_t>(src.size_bytes()));
}

}  // namespace

bool has_bf16_gemm() { return bf16_gemm() != nullptr; }

Tensor matmul(const Tensor& a, const Tensor& b) {
  static constexpr tprof::ScopeSite kSite{"op::matmul", tprof::kCpuOp};
  const OpScope scope(&kSite, a, b);
  return a.rank() == 2 ? mm(a, b) : bmm(a, b);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  TPROF_RECORD_OP_SHAPES("op::mm", {{a.rows(), a.cols()}, {b.rows(), b.cols()}});
  Tensor out = Tensor::empty(1, a.rows(), b.cols(), a.dtype());
  gemm(a, b, 0.0f, out);
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  TPROF_RECORD_OP_SHAPES("op::bmm", {{a.batch(), a.rows(), a.cols()}, {b.batch(), b.rows(), b.cols()}});
  Tensor out = Tensor::empty(a.batch(), a.rows(), b.cols(), a.dtype());
  gemm(a, b, 0.0f, out);
  return out;
}

Tensor add(const Tensor& a, const Tensor& b) {
  static constexpr tprof::ScopeSite kSite{"op::add", tprof::kCpuOp};
  const OpScope scope(&kSite, a, b);
  Tensor out = Tensor::empty(a.batch(), a.rows(), a.cols(), a.dtype());
  const std::int64_t count = a.numel();
  if (a.dtype() == DType::kFp32) {
    const float* x = a.f32();
    const float* y = b.f32();
    float* o = out.f32();
    for (std::int64_t i = 0; i < count; ++i) o[i] = x[i] + y[i];
  } else {
    // torch adds bf16 in fp32 and rounds each result once.
    const std::uint16_t* x = a.bf16();
    const std::uint16_t* y = b.bf16();
    std::uint16_t* o = out.bf16();
    for (std::int64_t i = 0; i < count; ++i) o[i] = bf16_from_float(float_from_bf16(x[i]) + float_from_bf16(y[i]));
  }
  return out;
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b) {
  TPROF_RECORD_OP_SHAPES("op::addmm",
                         {{bias.rows(), bias.cols()}, {a.rows(), a.cols()}, {b.rows(), b.cols()}});
  Tensor out = Tensor::empty(1, a.rows(), b.cols(), a.dtype());
  copy_(out, bias);
  gemm(a, b, 1.0f, out);
  return out;
}

Tensor baddbmm(const Tensor& bias, const Tensor& a, const Tensor& b) {
  TPROF_RECORD_OP_SHAPES("op::baddbmm", {{bias.batch(), bias.rows(), bias.cols()},
                                         {a.batch(), a.rows(), a.cols()},
                                         {b.batch(), b.rows(), b.cols()}});
  Tensor out = Tensor::empty(a.batch(), a.rows(), b.cols(), a.dtype());
  copy_(out, bias);
  gemm(a, b, 1.0f, out);
  return out;
}

}  // namespace matmul_add
