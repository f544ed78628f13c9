#include "tensor.h"

#include <cstdlib>
#include <new>
#include <utility>

#include "tprof/record_function.h"

namespace matmul_add {

const char* dtype_name(DType dtype) { return dtype == DType::kFp32 ? "fp32" : "bf16"; }

std::int64_t element_size(DType dtype) { return dtype == DType::kFp32 ? 4 : 2; }

Tensor Tensor::empty(std::int64_t batch, std::int64_t rows, std::int64_t cols, DType dtype) {
  Tensor t;
  t.batch_ = batch;
  t.rows_ = rows;
  t.cols_ = cols;
  t.dtype_ = dtype;
  // std::aligned_alloc wants a size that is a multiple of the alignment.
  constexpr std::int64_t kAlign = 64;
  const std::int64_t padded = (t.size_bytes() + kAlign - 1) / kAlign * kAlign;
  t.data_ = std::aligned_alloc(kAlign, static_cast<std::size_t>(padded));
  if (t.data_ == nullptr) throw std::bad_alloc();
  // The tensor's own size, not the padded one: torch reports nbytes too.
  tprof::record_alloc(t.data_, t.size_bytes());
  return t;
}

Tensor::~Tensor() { release(); }

Tensor::Tensor(Tensor&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      batch_(other.batch_),
      rows_(other.rows_),
      cols_(other.cols_),
      dtype_(other.dtype_) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    batch_ = other.batch_;
    rows_ = other.rows_;
    cols_ = other.cols_;
    dtype_ = other.dtype_;
  }
  return *this;
}

void Tensor::release() noexcept {
  if (data_ == nullptr) return;
  tprof::record_free(data_, size_bytes());
  std::free(data_);
  data_ = nullptr;
}

}  // namespace matmul_add
