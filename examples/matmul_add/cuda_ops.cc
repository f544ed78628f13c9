// The CUDA forms of matmul_add (cuda_ops.h), built by the host compiler
// against the CUDA runtime, cuBLAS and cuBLASLt; the one kernel of our own
// is in add_kernel.cu.
//
// Row-major and column-major: tensors are row-major (tensor.h), cuBLAS is
// column-major. A row-major m×n matrix is the same memory as a column-major
// n×m one, so z = x·w (x m×k, w k×n) is computed as zᵀ = wᵀ·xᵀ: cuBLAS gets
// w as its A (n×k, ld n), x as its B (k×m, ld k) and z as C (n×m, ld n),
// and nothing is transposed or copied. torch's at::cuda::blas does the same.
#include "cuda_ops.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "add_kernel.h"
#include "op_scope.h"
#include "tprof/record_function.h"

namespace matmul_add {
namespace {

// The stream every call is enqueued on: the legacy default stream. torch
// enqueues on the current stream, which is the default stream unless a
// script picks another, so the kernels land on the lane the blog's traces
// show them on (CUPTI's stream 7). One stream also orders GEMM, add, copy
// and the reuse of pooled blocks without any event. The legacy stream's
// implicit synchronization with other blocking streams costs nothing here:
// the program has no other stream.
constexpr cudaStream_t kStream = nullptr;

// The workspace cuBLAS and cuBLASLt share. torch gives cuBLAS a workspace
// from its allocator so that no cudaMalloc happens inside a profiled GEMM
// (and cuBLASLt needs one for most algorithms); 32 MiB is what it uses on
// Hopper. Sharing is safe because both libraries run on kStream, one call
// after the other.
constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

// torch's caching allocator rounds small blocks up to 512 bytes, and its
// profile_memory events report the block size.
constexpr std::int64_t kBlockRoundBytes = 512;

constexpr tprof::ScopeSite kMatmulSite{"op::matmul", tprof::kCpuOp};
constexpr tprof::ScopeSite kMmSite{"op::mm", tprof::kCpuOp};
constexpr tprof::ScopeSite kBmmSite{"op::bmm", tprof::kCpuOp};
constexpr tprof::ScopeSite kAddSite{"op::add", tprof::kCpuOp};
constexpr tprof::ScopeSite kAddmmSite{"op::addmm", tprof::kCpuOp};
constexpr tprof::ScopeSite kBaddbmmSite{"op::baddbmm", tprof::kCpuOp};
constexpr tprof::ScopeSite kCopySite{"op::copy_", tprof::kCpuOp};

// "cublasGemmEx(blas, CUBLAS_OP_N, ...)" -> "cublasGemmEx": the name the
// error message starts with.
std::string call_name(const char* expr) {
  const std::string_view s(expr);
  return std::string(s.substr(0, s.find('(')));
}

tprof::Status check(const char* expr, cudaError_t e) {
  if (e == cudaSuccess) return {};
  return tprof::Error(tprof::ErrorCode::kInternal,
                      call_name(expr) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

tprof::Status check(const char* expr, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return tprof::Error(tprof::ErrorCode::kInternal,
                      call_name(expr) + ": " + cublasGetStatusName(s) + ": " + cublasGetStatusString(s));
}

}  // namespace
}  // namespace matmul_add

// Runs a CUDA runtime or cuBLAS(Lt) call and returns its error, named after
// the call, from the enclosing function (a Status or Result one).
#define MATMUL_ADD_CUDA_TRY(call) TPROF_TRY(::matmul_add::check(#call, (call)))

namespace matmul_add {
namespace {

cudaDataType_t cuda_type(DType dtype) { return dtype == DType::kFp32 ? CUDA_R_32F : CUDA_R_16BF; }

// torch's CUDA caching allocator in miniature: blocks go back to a free list
// and are handed out again for the same size, so steady-state steps call no
// cudaMalloc/cudaFree (which would synchronize). Reuse needs no event because
// everything runs on kStream: a block freed after an enqueued kernel is only
// written by work enqueued after that kernel.
class BlockPool {
 public:
  void set_device(int index) { device_ = tprof::cuda_device(static_cast<std::int16_t>(index)); }
  tprof::Device device() const { return device_; }

  // Returns a block of `bytes` (a multiple of kBlockRoundBytes), cached or new.
  tprof::Result<void*> acquire(std::int64_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->bytes == bytes) {
        void* p = it->ptr;
        free_.erase(it);
        return p;
      }
    }
    void* p = nullptr;
    MATMUL_ADD_CUDA_TRY(cudaMalloc(&p, static_cast<std::size_t>(bytes)));
    all_.push_back(p);
    return p;
  }
  void release(void* ptr, std::int64_t bytes) { free_.push_back({ptr, bytes}); }

  // Frees every block, in use or not; the first error is returned.
  tprof::Status free_all() {
    tprof::Status first;
    for (void* p : all_) {
      tprof::Status s = check("cudaFree", cudaFree(p));
      if (first && !s) first = std::move(s);
    }
    all_.clear();
    free_.clear();
    return first;
  }

 private:
  struct Block {
    void* ptr;
    std::int64_t bytes;
  };
  std::vector<Block> free_;
  std::vector<void*> all_;
  tprof::Device device_ = tprof::cuda_device(0);
};

// A device tensor: Tensor's shape and dtype, storage from a BlockPool, with
// an allocation event when created and a free when destroyed, as torch's
// allocator reports CUDA tensors under profile_memory. Move-only.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  static tprof::Result<DeviceTensor> empty(BlockPool& pool, std::int64_t batch, std::int64_t rows,
                                           std::int64_t cols, DType dtype) {
    DeviceTensor t;
    t.pool_ = &pool;
    t.batch_ = batch;
    t.rows_ = rows;
    t.cols_ = cols;
    t.dtype_ = dtype;
    t.block_bytes_ = (t.size_bytes() + kBlockRoundBytes - 1) / kBlockRoundBytes * kBlockRoundBytes;
    TPROF_TRY_ASSIGN(t.data_, pool.acquire(t.block_bytes_));
    tprof::record_alloc(t.data_, t.block_bytes_, pool.device());
    return t;
  }
  ~DeviceTensor() { release(); }
  DeviceTensor(DeviceTensor&& other) noexcept { *this = std::move(other); }
  DeviceTensor& operator=(DeviceTensor&& other) noexcept {
    if (this != &other) {
      release();
      pool_ = other.pool_;
      data_ = std::exchange(other.data_, nullptr);
      batch_ = other.batch_;
      rows_ = other.rows_;
      cols_ = other.cols_;
      block_bytes_ = other.block_bytes_;
      dtype_ = other.dtype_;
    }
    return *this;
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  bool defined() const { return data_ != nullptr; }
  int rank() const { return batch_ > 1 ? 3 : 2; }
  std::int64_t batch() const { return batch_; }
  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t numel() const { return batch_ * rows_ * cols_; }
  std::int64_t size_bytes() const { return numel() * element_size(dtype_); }
  DType dtype() const { return dtype_; }
  void* data() { return data_; }
  const void* data() const { return data_; }

 private:
  void release() noexcept {
    if (data_ == nullptr) return;
    tprof::record_free(data_, block_bytes_, pool_->device());
    pool_->release(data_, block_bytes_);
    data_ = nullptr;
  }

  BlockPool* pool_ = nullptr;
  void* data_ = nullptr;
  std::int64_t batch_ = 0;
  std::int64_t rows_ = 0;
  std::int64_t cols_ = 0;
  std::int64_t block_bytes_ = 0;
  DType dtype_ = DType::kFp32;
};

// cuBLAS takes int dimensions; create() has checked that they fit.
int to_int(std::int64_t v) { return static_cast<int>(v); }

}  // namespace

struct CudaMatmulAdd::State {
  CudaMode mode = CudaMode::kEager;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  // The fused plan: descriptors and algorithm chosen once at create().
  // torch builds them on every call; doing it once keeps the heuristic
  // search out of the profiled steps, so the step shows the launch alone.
  cublasLtMatmulDesc_t lt_desc = nullptr;
  cublasLtMatrixLayout_t lt_w = nullptr;     // cuBLASLt's A: w, n×k column-major
  cublasLtMatrixLayout_t lt_x = nullptr;     // cuBLASLt's B: x, k×m
  cublasLtMatrixLayout_t lt_bias = nullptr;  // C (the bias) and D (the output), n×m
  cublasLtMatmulPreference_t lt_pref = nullptr;
  cublasLtMatmulAlgo_t lt_algo{};
  // Declared before the tensors, so it outlives them.
  BlockPool pool;
  DeviceTensor x, w, b, z;

  ~State() { static_cast<void>(release()); }

  tprof::Status init(const Tensor& hx, const Tensor& hw, const Tensor& hb, CudaMode m) {
    mode = m;
    // Device 0, as torch's "cuda" means the current device, 0 unless set
    // (CUDA_VISIBLE_DEVICES picks which GPU that is).
    MATMUL_ADD_CUDA_TRY(cudaSetDevice(0));
    pool.set_device(0);
    MATMUL_ADD_CUDA_TRY(cublasCreate(&blas));
    MATMUL_ADD_CUDA_TRY(cublasSetStream(blas, kStream));
    // No TF32 for fp32, torch's default (torch.backends.cuda.matmul.allow_tf32
    // = False): CUBLAS_DEFAULT_MATH with CUBLAS_COMPUTE_32F keeps fp32 GEMMs
    // in full fp32; CUBLAS_TF32_TENSOR_OP_MATH or CUBLAS_COMPUTE_32F_FAST_TF32
    // would allow TF32. bf16 GEMMs run on tensor cores either way, with fp32
    // accumulation (CUBLAS_COMPUTE_32F), as torch's.
    MATMUL_ADD_CUDA_TRY(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));
    MATMUL_ADD_CUDA_TRY(cudaMalloc(&workspace, kWorkspaceBytes));
    MATMUL_ADD_CUDA_TRY(cublasSetWorkspace(blas, workspace, kWorkspaceBytes));
    TPROF_TRY_ASSIGN(x, upload(hx));
    TPROF_TRY_ASSIGN(w, upload(hw));
    TPROF_TRY_ASSIGN(b, upload(hb));
    if (mode == CudaMode::kFused) TPROF_TRY(plan_fused());
    MATMUL_ADD_CUDA_TRY(cudaDeviceSynchronize());
    return {};
  }

  tprof::Result<DeviceTensor> upload(const Tensor& h) {
    TPROF_TRY_ASSIGN(DeviceTensor d, DeviceTensor::empty(pool, h.batch(), h.rows(), h.cols(), h.dtype()));
    MATMUL_ADD_CUDA_TRY(
        cudaMemcpy(d.data(), h.data(), static_cast<std::size_t>(h.size_bytes()), cudaMemcpyHostToDevice));
    return d;
  }

  // The fused form, D = A·B + C with C and D separate. The CPU example's b
  // is a full matrix of x·w's shape (batch×size×size), not a vector, so the
  // bias epilogue (CUBLASLT_EPILOGUE_BIAS, one value per row of D, which
  // torch uses for addmm with a 1-D bias) cannot express it: instead C is b
  // and D a fresh output, which cuBLASLt reads and writes in one kernel, so
  // neither the bias copy nor a second kernel is needed.
  tprof::Status plan_fused() {
    const auto m = static_cast<std::uint64_t>(x.rows());
    const auto k = static_cast<std::uint64_t>(x.cols());
    const auto n = static_cast<std::uint64_t>(w.cols());
    const cudaDataType_t type = cuda_type(x.dtype());
    MATMUL_ADD_CUDA_TRY(cublasLtCreate(&lt));
    // fp32 compute and fp32 alpha/beta for both dtypes, as the GEMMs above;
    // both operands CUBLAS_OP_N (the default).
    MATMUL_ADD_CUDA_TRY(cublasLtMatmulDescCreate(&lt_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    MATMUL_ADD_CUDA_TRY(cublasLtMatrixLayoutCreate(&lt_w, type, n, k, static_cast<std::int64_t>(n)));
    MATMUL_ADD_CUDA_TRY(cublasLtMatrixLayoutCreate(&lt_x, type, k, m, static_cast<std::int64_t>(k)));
    MATMUL_ADD_CUDA_TRY(cublasLtMatrixLayoutCreate(&lt_bias, type, n, m, static_cast<std::int64_t>(n)));
    if (x.batch() > 1) {
      const auto count = static_cast<std::int32_t>(x.batch());
      const std::pair<cublasLtMatrixLayout_t, std::int64_t> layouts[] = {
          {lt_w, w.rows() * w.cols()}, {lt_x, x.rows() * x.cols()}, {lt_bias, b.rows() * b.cols()}};
      for (const auto& [layout, stride] : layouts) {
        MATMUL_ADD_CUDA_TRY(
            cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        MATMUL_ADD_CUDA_TRY(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                             &stride, sizeof(stride)));
      }
    }
    MATMUL_ADD_CUDA_TRY(cublasLtMatmulPreferenceCreate(&lt_pref));
    const std::uint64_t workspace_bytes = kWorkspaceBytes;
    MATMUL_ADD_CUDA_TRY(cublasLtMatmulPreferenceSetAttribute(lt_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                             &workspace_bytes, sizeof(workspace_bytes)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    MATMUL_ADD_CUDA_TRY(cublasLtMatmulAlgoGetHeuristic(lt, lt_desc, lt_w, lt_x, lt_bias, lt_bias, lt_pref, 1,
                                                       &result, &found));
    if (found == 0) {
      return tprof::Error(tprof::ErrorCode::kUnsupported,
                          "cublasLtMatmulAlgoGetHeuristic: no algorithm for D = A·B + C with these shapes");
    }
    lt_algo = result.algo;
    return {};
  }

  // c = a·b + beta·c, one cuBLAS call for the whole batch (see the top of
  // the file for the operand order).
  tprof::Status gemm(const DeviceTensor& a, const DeviceTensor& bm, float beta, DeviceTensor& c) {
    const int m = to_int(a.rows()), k = to_int(a.cols()), n = to_int(bm.cols());
    const cudaDataType_t type = cuda_type(c.dtype());
    const float alpha = 1.0f;
    if (c.batch() == 1) {
      MATMUL_ADD_CUDA_TRY(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, bm.data(), type, n, a.data(),
                                       type, k, &beta, c.data(), type, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
      const long long stride_a = a.rows() * a.cols(), stride_b = bm.rows() * bm.cols(), stride_c = c.rows() * c.cols();
      MATMUL_ADD_CUDA_TRY(cublasGemmStridedBatchedEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, bm.data(), type,
                                                     n, stride_b, a.data(), type, k, stride_a, &beta, c.data(), type,
                                                     n, stride_c, to_int(c.batch()), CUBLAS_COMPUTE_32F,
                                                     CUBLAS_GEMM_DEFAULT));
    }
    return {};
  }

  tprof::Result<DeviceTensor> empty_like_product(const DeviceTensor& a, const DeviceTensor& bm) {
    return DeviceTensor::empty(pool, a.batch(), a.rows(), bm.cols(), a.dtype());
  }

  // torch.matmul: op::mm for 2-D operands, op::bmm for batched ones; each
  // allocates its output and runs one GEMM with beta = 0.
  tprof::Result<DeviceTensor> matmul(const DeviceTensor& a, const DeviceTensor& bm) {
    const OpScope scope(&kMatmulSite, a, bm);
    const OpScope inner(a.rank() == 2 ? &kMmSite : &kBmmSite, a, bm);
    TPROF_TRY_ASSIGN(DeviceTensor out, empty_like_product(a, bm));
    TPROF_TRY(gemm(a, bm, 0.0f, out));
    return out;
  }

  // torch.add: a new output, one elementwise kernel.
  tprof::Result<DeviceTensor> add(const DeviceTensor& a, const DeviceTensor& bm) {
    const OpScope scope(&kAddSite, a, bm);
    TPROF_TRY_ASSIGN(DeviceTensor out, DeviceTensor::empty(pool, a.batch(), a.rows(), a.cols(), a.dtype()));
    MATMUL_ADD_CUDA_TRY(launch_add(a.data(), bm.data(), out.data(), a.numel(), a.dtype() == DType::kBf16, kStream));
    return out;
  }

  // torch's addmm / baddbmm with a 2-D (3-D) bias: the bias copied into the
  // output (the blog's hidden Memcpy DtoD), then the GEMM with beta = 1.
  tprof::Result<DeviceTensor> addmm(const DeviceTensor& bias, const DeviceTensor& a, const DeviceTensor& bm) {
    const OpScope scope(bias.rank() == 2 ? &kAddmmSite : &kBaddbmmSite, bias, a, bm);
    TPROF_TRY_ASSIGN(DeviceTensor out, empty_like_product(a, bm));
    {
      const OpScope copy(&kCopySite, out, bias);
      MATMUL_ADD_CUDA_TRY(cudaMemcpyAsync(out.data(), bias.data(), static_cast<std::size_t>(bias.size_bytes()),
                                          cudaMemcpyDeviceToDevice, kStream));
    }
    TPROF_TRY(gemm(a, bm, 1.0f, out));
    return out;
  }

  // The same operator in one cuBLASLt kernel: out = a·b + bias, the bias
  // read as C, the output written as D (plan_fused).
  tprof::Result<DeviceTensor> fused_addmm(const DeviceTensor& bias, const DeviceTensor& a, const DeviceTensor& bm) {
    const OpScope scope(bias.rank() == 2 ? &kAddmmSite : &kBaddbmmSite, bias, a, bm);
    TPROF_TRY_ASSIGN(DeviceTensor out, empty_like_product(a, bm));
    const float alpha = 1.0f, beta = 1.0f;
    MATMUL_ADD_CUDA_TRY(cublasLtMatmul(lt, lt_desc, &alpha, bm.data(), lt_w, a.data(), lt_x, &beta, bias.data(),
                                       lt_bias, out.data(), lt_bias, &lt_algo, workspace, kWorkspaceBytes, kStream));
    return out;
  }

  tprof::Status call() {
    // As `z = fn(x, w, b)` on the CPU: the intermediate of the eager form is
    // freed before the previous result is.
    DeviceTensor out;
    switch (mode) {
      case CudaMode::kEager: {
        TPROF_TRY_ASSIGN(DeviceTensor y, matmul(x, w));
        TPROF_TRY_ASSIGN(out, add(y, b));
        break;
      }
      case CudaMode::kCompile: {
        TPROF_TRY_ASSIGN(out, addmm(b, x, w));
        break;
      }
      case CudaMode::kFused: {
        TPROF_TRY_ASSIGN(out, fused_addmm(b, x, w));
        break;
      }
    }
    z = std::move(out);
    return {};
  }

  // Frees everything that was created, also after a failed init(); returns
  // the first error.
  tprof::Status release() {
    tprof::Status first;
    auto keep = [&first](tprof::Status s) {
      if (first && !s) first = std::move(s);
    };
    x = DeviceTensor();
    w = DeviceTensor();
    b = DeviceTensor();
    z = DeviceTensor();
    keep(pool.free_all());
    if (lt_pref != nullptr) keep(check("cublasLtMatmulPreferenceDestroy", cublasLtMatmulPreferenceDestroy(lt_pref)));
    for (cublasLtMatrixLayout_t* layout : {&lt_w, &lt_x, &lt_bias}) {
      if (*layout != nullptr) keep(check("cublasLtMatrixLayoutDestroy", cublasLtMatrixLayoutDestroy(*layout)));
      *layout = nullptr;
    }
    if (lt_desc != nullptr) keep(check("cublasLtMatmulDescDestroy", cublasLtMatmulDescDestroy(lt_desc)));
    if (lt != nullptr) keep(check("cublasLtDestroy", cublasLtDestroy(lt)));
    if (blas != nullptr) keep(check("cublasDestroy", cublasDestroy(blas)));
    if (workspace != nullptr) keep(check("cudaFree", cudaFree(workspace)));
    lt_pref = nullptr;
    lt_desc = nullptr;
    lt = nullptr;
    blas = nullptr;
    workspace = nullptr;
    return first;
  }
};

std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
  if (count == 0) return "no CUDA device (cudaGetDeviceCount: 0 devices)";
  int major = 0, minor = 0;
  const cudaError_t e_major = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  const cudaError_t e_minor = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  if (e_major != cudaSuccess || e_minor != cudaSuccess) {
    return std::string("CUDA device 0 unusable (cudaDeviceGetAttribute: ") +
           cudaGetErrorString(e_major != cudaSuccess ? e_major : e_minor) + ")";
  }
  // bf16 GEMMs (CUDA_R_16BF) need sm_80, and add_kernel.cu is built for
  // sm_80 and sm_90 (PTX included, so newer GPUs JIT it).
  if (major < 8) {
    return "CUDA device 0 is sm_" + std::to_string(major) + std::to_string(minor) +
           "; this example needs sm_80 or newer (bf16 GEMMs, and its kernels are built for sm_80 and sm_90)";
  }
  return {};
}

CudaMatmulAdd::CudaMatmulAdd(std::unique_ptr<State> state) : state_(std::move(state)) {}

CudaMatmulAdd::~CudaMatmulAdd() = default;

tprof::Result<std::unique_ptr<CudaMatmulAdd>> CudaMatmulAdd::create(const Tensor& x, const Tensor& w, const Tensor& b,
                                                                     CudaMode mode) {
  for (const Tensor* t : {&x, &w, &b}) {
    if (t->batch() > INT_MAX || t->rows() > INT_MAX || t->cols() > INT_MAX) {
      return tprof::Error(tprof::ErrorCode::kInvalidArgument, "a dimension does not fit cuBLAS's int");
    }
  }
  if (x.cols() != w.rows() || b.rows() != x.rows() || b.cols() != w.cols() || x.batch() != w.batch() ||
      b.batch() != x.batch() || x.dtype() != w.dtype() || b.dtype() != x.dtype()) {
    return tprof::Error(tprof::ErrorCode::kInvalidArgument, "x, w and b do not make x·w + b");
  }
  auto state = std::make_unique<State>();
  TPROF_TRY(state->init(x, w, b, mode));
  return std::unique_ptr<CudaMatmulAdd>(new CudaMatmulAdd(std::move(state)));
}

tprof::Status CudaMatmulAdd::call() { return state_->call(); }

tprof::Status CudaMatmulAdd::synchronize() {
  MATMUL_ADD_CUDA_TRY(cudaDeviceSynchronize());
  return {};
}

tprof::Result<Tensor> CudaMatmulAdd::result() {
  TPROF_TRY(synchronize());
  const DeviceTensor& z = state_->z;
  if (!z.defined()) return tprof::Error(tprof::ErrorCode::kInvalidArgument, "result() before the first call()");
  Tensor out = Tensor::empty(z.batch(), z.rows(), z.cols(), z.dtype());
  MATMUL_ADD_CUDA_TRY(
      cudaMemcpy(out.data(), z.data(), static_cast<std::size_t>(z.size_bytes()), cudaMemcpyDeviceToHost));
  return out;
}

tprof::Status CudaMatmulAdd::close() {
  TPROF_TRY(synchronize());
  return state_->release();
}

}  // namespace matmul_add
