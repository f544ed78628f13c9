// tensor.h — the example's tensor: dense, row-major, fp32 or bf16, reporting
// its storage to the profiler the way torch's CPU allocator does under
// profile_memory (an allocation when created, a free when destroyed).
//
//   Tensor y = Tensor::empty(1, 64, 64, DType::kFp32);  // 64x64, rank 2
//   Tensor z = Tensor::empty(8, 64, 64, DType::kBf16);  // 8x64x64, rank 3
#pragma once

#include <cstdint>

namespace matmul_add {

enum class DType : std::uint8_t { kFp32, kBf16 };

// Returns "fp32" or "bf16", the names of the --dtype flag and the file names.
const char* dtype_name(DType dtype);
// Returns the bytes one element takes (4 or 2).
std::int64_t element_size(DType dtype);

// A batch of rows×cols matrices. Batch 1 is a plain 2-D tensor and batch > 1
// a 3-D one, which is what --batch means (1 = torch.mm, N = torch.bmm).
// Move-only; not thread-safe.
class Tensor {
 public:
  Tensor() = default;
  // Returns a tensor with uninitialised storage (torch.empty), 64-byte
  // aligned for the BLAS kernels. Throws std::bad_alloc when memory runs out.
  static Tensor empty(std::int64_t batch, std::int64_t rows, std::int64_t cols, DType dtype);
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  int rank() const { return batch_ > 1 ? 3 : 2; }
  std::int64_t batch() const { return batch_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t numel() const { return batch_ * rows_ * cols_; }
  std::int64_t size_bytes() const { return numel() * element_size(dtype_); }
  DType dtype() const { return dtype_; }

  // The storage (size_bytes() bytes), and the same as elements of the
  // tensor's dtype; matrix i starts at element i * rows() * cols().
  void* data() { return data_; }
  const void* data() const { return data_; }
  float* f32() { return static_cast<float*>(data_); }
  const float* f32() const { return static_cast<const float*>(data_); }
  std::uint16_t* bf16() { return static_cast<std::uint16_t*>(data_); }
  const std::uint16_t* bf16() const { return static_cast<const std::uint16_t*>(data_); }

 private:
  void release() noexcept;

  void* data_ = nullptr;
  std::int64_t batch_ = 0;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  DType dtype_ = DType::kFp32;
};

}  // namespace matmul_add
