// gen_trace: writes a realistic Kineto trace of a given size, deterministic by seed.
//
//   gen_trace --size 1G --seed 1 --out /tmp/big.json [--gzip]
//
// What it holds, per ProfilerStep (the shape of a real training step as
// torch 2.x + libkineto write it):
//   - main thread: ProfilerStep#N, nested cpu_op trees (3 levels) with the
//     args torch writes (External id, Record function id, Ev Idx, Input Dims,
//     Input type, Input Strides, Concrete Inputs), cudaLaunchKernel /
//     cudaMemcpyAsync runtime calls, [memory] alloc/free instants;
//   - a backward thread with autograd::engine::evaluate_function nodes;
//   - kernels on 3 streams with CUPTI args, memcpy, ac2g flows (s on the CPU,
//     f on the GPU);
//   - libkineto's layout: events written per activity type (CPU ops, then GPU
//     activity), so "ts" is not sorted; three-decimal epoch µs; one event per
//     few lines, indented.
#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/base/gzip.h"

namespace {

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    s += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

const char* const kOps[] = {"aten::linear", "aten::addmm", "aten::mm", "aten::add", "aten::mul", "aten::relu",
                            "aten::layer_norm", "aten::native_layer_norm", "aten::softmax", "aten::_softmax",
                            "aten::copy_", "aten::to", "aten::_to_copy", "aten::empty", "aten::empty_strided",
                            "aten::view", "aten::reshape", "aten::transpose", "aten::t", "aten::matmul",
                            "aten::bmm", "aten::gelu", "aten::dropout", "aten::sum", "aten::mean", "aten::cat"};
const char* const kKernels[] = {
    "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, "
    "float const*, float const*, float*, float*, float*)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
    "float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
    "unsigned int, float, 4>)",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel",
    "triton_poi_fused_add_gelu_mul_0",
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(Params)",
};
const char* const kBwd[] = {"AddmmBackward0", "MulBackward0", "NativeLayerNormBackward0", "GeluBackward0",
                            "SoftmaxBackward0", "TBackward0"};

class Writer {
 public:
  explicit Writer(std::FILE* f) : f_(f) { buf_.reserve(1 << 22); }
  ~Writer() { flush(); }
  void put(const char* s) { buf_ += s; maybe_flush(); }
  void put(const std::string& s) { buf_ += s; maybe_flush(); }
  void fmt(const char* format, ...) __attribute__((format(printf, 2, 3))) {
    char tmp[2048];
    va_list ap;
    va_start(ap, format);
    int n = std::vsnprintf(tmp, sizeof tmp, format, ap);
    va_end(ap);
    buf_.append(tmp, static_cast<std::size_t>(n < 0 ? 0 : n < 2048 ? n : 2047));
    maybe_flush();
  }
  std::uint64_t written() const { return written_ + buf_.size(); }
  void flush() {
    if (f_ != nullptr && !buf_.empty()) std::fwrite(buf_.data(), 1, buf_.size(), f_);
    written_ += buf_.size();
    if (f_ != nullptr) buf_.clear();
  }
  std::string& buffer() { return buf_; }

 private:
  void maybe_flush() {
    if (f_ != nullptr && buf_.size() > (1 << 22)) flush();
  }
  std::FILE* f_;
  std::string buf_;
  std::uint64_t written_ = 0;
};

// Epoch ns -> "1712345678901234.567"
std::string us(std::int64_t ns) {
  char b[40];
  std::snprintf(b, sizeof b, "%" PRId64 ".%03d", ns / 1000, static_cast<int>(ns % 1000));
  return b;
}

struct Gen {
  Rng rng;
  Writer* w;
  std::vector<std::string> gpu;  // GPU activity of the current step, written after the CPU side
  std::int64_t pid = 2871339, tid_main = 2871339, tid_bwd = 2871420;
  std::int64_t t = 1712345678000000000;  // epoch ns
  std::int64_t ext = 1, corr = 100000, ev_idx = 0;
  bool first = true;

  void sep() {
    if (!first) w->put(",\n");
    first = false;
  }

  void cpu_op(const char* cat, const std::string& name, std::int64_t tid, std::int64_t ts, std::int64_t dur,
              bool shapes) {
    sep();
    w->fmt("  {\n    \"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": %" PRId64 ", \"tid\": %" PRId64
           ",\n    \"ts\": %s, \"dur\": %s,\n    \"args\": {\n      \"External id\": %" PRId64
           ",\"Record function id\": 0, \"Ev Idx\": %" PRId64,
           cat, name.c_str(), pid, tid, us(ts).c_str(), us(dur).c_str(), ext++, ev_idx++);
    if (shapes) {
      const int a = 16 << rng.below(6), b = 16 << rng.below(6);
      w->fmt(", \"Input Dims\": [[%d, %d], [%d, %d], []], \"Input type\": [\"c10::BFloat16\", \"c10::BFloat16\", "
             "\"Scalar\"], \"Input Strides\": [[%d, 1], [%d, 1], []], \"Concrete Inputs\": [\"\", \"\", \"1\"]",
             a, b, b, a, b, a);
    }
    w->put("\n    }\n  }");
  }

  void runtime(const char* name, std::int64_t ts, std::int64_t dur, std::int64_t c, std::int64_t e) {
    sep();
    w->fmt("  {\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"%s\", \"pid\": %" PRId64 ", \"tid\": %" PRId64
           ",\n    \"ts\": %s, \"dur\": %s,\n    \"args\": {\n      \"External id\": %" PRId64
           ",  \"cbid\": 211, \"correlation\": %" PRId64 "\n    }\n  }",
           name, pid, tid_main, us(ts).c_str(), us(dur).c_str(), e, c);
    sep();
    w->fmt("  {\n    \"ph\": \"s\", \"id\": %" PRId64 ", \"pid\": %" PRId64 ", \"tid\": %" PRId64
           ", \"ts\": %s,\n    \"cat\": \"ac2g\", \"name\": \"ac2g\"\n  }",
           c, pid, tid_main, us(ts).c_str());
  }

  void kernel(const char* name, int stream, std::int64_t ts, std::int64_t dur, std::int64_t c, std::int64_t e) {
    char buf[2048];
    std::snprintf(buf, sizeof buf,
                  "  {\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d,\n    \"ts\": "
                  "%s, \"dur\": %s,\n    \"args\": {\n      \"External id\": %" PRId64
                  ",\n      \"queued\": 0, \"device\": 0, \"context\": 1,      \"stream\": %d, \"correlation\": %" PRId64
                  ",      \"registers per thread\": %d,      \"shared memory\": %d,      \"blocks per SM\": %.6f,      "
                  "\"warps per SM\": %.6f,      \"grid\": [%d, 1, 1],      \"block\": [256, 1, 1],      \"est. "
                  "achieved occupancy %%\": %d\n    }\n  }",
                  name, stream, us(ts).c_str(), us(dur).c_str(), e, stream, c, 32 + rng.below(200),
                  rng.below(4) * 16384, rng.below(1000) / 100.0, rng.below(3000) / 100.0, 1 + rng.below(4096),
                  rng.below(100));
    gpu.push_back(buf);
    std::snprintf(buf, sizeof buf,
                  "  {\n    \"ph\": \"f\", \"id\": %" PRId64 ", \"pid\": 0, \"tid\": %d, \"ts\": %s,\n    \"cat\": "
                  "\"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"\n  }",
                  c, stream, us(ts).c_str());
    gpu.push_back(buf);
  }

  void memory(std::int64_t ts, std::int64_t bytes, std::int64_t tid) {
    sep();
    w->fmt("  {\n    \"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\",\n    "
           "\"pid\": %" PRId64 ", \"tid\": %" PRId64 ",\n    \"ts\": %s,\n    \"args\": {\n      \"Total Reserved\": "
           "2097152, \"Total Allocated\": %" PRId64 ", \"Bytes\": %" PRId64 ", \"Addr\": %" PRIu64
           ", \"Device Id\": 0, \"Device Type\": 1\n    }\n  }",
           pid, tid, us(ts).c_str(), 1048576 + bytes, bytes, static_cast<std::uint64_t>(139800000000000ull + rng.next() % 100000000ull));
  }

  // One step: a forward tree on the main thread, a backward pass on its own
  // thread, GPU activity written after the CPU side.
  void step(int n) {
    const std::int64_t start = t;
    std::int64_t cur = start + 3000;
    gpu.clear();
    std::int64_t gpu_t = start + 20000;
    const int top_ops = 20 + rng.below(10);
    std::vector<std::string> deferred_step;  // the step annotation is written after its children, as Kineto does
    for (int i = 0; i < top_ops; ++i) {
      const char* top = kOps[rng.below(26)];
      const std::int64_t top_start = cur;
      const int kids = 1 + rng.below(3);
      std::int64_t kid_t = top_start + 500;
      const std::int64_t top_ext = ext;
      std::vector<std::int64_t> kid_spans;
      for (int k = 0; k < kids; ++k) {
        const std::int64_t kd = 2000 + rng.below(8000);
        cpu_op("cpu_op", kOps[rng.below(26)], tid_main, kid_t, kd, true);
        if (rng.below(3) == 0) cpu_op("cpu_op", "aten::empty", tid_main, kid_t + 100, 300 + rng.below(500), false);
        const std::int64_t c = corr++;
        runtime(rng.below(10) == 0 ? "cudaMemcpyAsync" : "cudaLaunchKernel", kid_t + kd - 1500, 1200 + rng.below(800),
                c, ext - 1);
        const std::int64_t kdur = 3000 + rng.below(60000);
        gpu_t = std::max(gpu_t, kid_t + kd) + rng.below(5000);
        kernel(kKernels[rng.below(7)], 7 + 4 * rng.below(3), gpu_t, kdur, c, ext - 1);
        gpu_t += kdur;
        if (rng.below(4) == 0) memory(kid_t + 200, 4096 << rng.below(10), tid_main);
        kid_t += kd + 300;
      }
      cpu_op("cpu_op", top, tid_main, top_start, kid_t - top_start, rng.below(2) == 0);
      (void)top_ext;
      cur = kid_t + 1000 + rng.below(4000);
      if (rng.below(5) == 0) memory(cur - 500, -(4096 << rng.below(10)), tid_main);
    }
    // Backward on another thread.
    std::int64_t b = cur;
    for (int i = 0; i < 8 + rng.below(6); ++i) {
      const char* node = kBwd[rng.below(6)];
      const std::int64_t d = 20000 + rng.below(40000);
      cpu_op("cpu_op", std::string("autograd::engine::evaluate_function: ") + node, tid_bwd, b, d, false);
      cpu_op("cpu_op", node, tid_bwd, b + 500, d - 1000, true);
      const std::int64_t c = corr++;
      runtime("cudaLaunchKernel", b + d - 3000, 1500, c, ext - 1);
      const std::int64_t kdur = 5000 + rng.below(80000);
      gpu_t = std::max(gpu_t, b + d) + rng.below(3000);
      kernel(kKernels[rng.below(7)], 7, gpu_t, kdur, c, ext - 1);
      gpu_t += kdur;
      b += d + 500;
    }
    const std::int64_t end = std::max(b, cur) + 2000;
    cpu_op("user_annotation", "ProfilerStep#" + std::to_string(n), tid_main, start, end - start, false);
    // GPU activity of the step, and a memcpy.
    for (const std::string& g : gpu) {
      sep();
      w->put(g);
    }
    sep();
    w->fmt("  {\n    \"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy DtoD (Device -> Device)\", \"pid\": 0, "
           "\"tid\": 7,\n    \"ts\": %s, \"dur\": %s,\n    \"args\": {\n      \"device\": 0, \"context\": 1,\n      "
           "\"stream\": 7, \"correlation\": %" PRId64 ",\n      \"bytes\": 33554432, \"memory bandwidth (GB/s)\": "
           "1002.3\n    }\n  }",
           us(gpu_t).c_str(), us(33000).c_str(), corr++);
    t = std::max(end, gpu_t) + 1000 + rng.below(2000);
  }
};

std::uint64_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end != nullptr ? *end : 0) {
    case 'k': case 'K': v *= 1e3; break;
    case 'm': case 'M': v *= 1e6; break;
    case 'g': case 'G': v *= 1e9; break;
    default: break;
  }
  return static_cast<std::uint64_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t size = 100000000;
  std::uint64_t seed = 1;
  std::string out;
  bool gz = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--size") && i + 1 < argc) {
      size = parse_size(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) {
      out = argv[++i];
    } else if (!std::strcmp(argv[i], "--gzip")) {
      gz = true;
    } else {
      std::fprintf(stderr, "usage: gen_trace --size N[k|M|G] --out PATH [--seed N] [--gzip]\n");
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "gen_trace: --out is required\n");
    return 2;
  }
  std::FILE* f = std::fopen(out.c_str(), "wb");
  if (f == nullptr) {
    std::perror(out.c_str());
    return 2;
  }
  {
    Writer w(gz ? nullptr : f);
    Gen g{Rng{seed}, &w, {}};
    w.put("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\n      \"id\": 0, \"name\": \"NVIDIA H100 80GB "
          "HBM3\", \"totalGlobalMem\": 84929347584,\n      \"computeMajor\": 9, \"computeMinor\": 0,\n      "
          "\"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048,\n      \"regsPerBlock\": 65536, "
          "\"warpSize\": 32,\n      \"sharedMemPerBlock\": 49152, \"numSms\": 132\n    }\n  ],\n  "
          "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 8},\n  \"traceEvents\": [\n");
    const char* meta[][4] = {{"process_name", "0", "0", "\"name\": \"python3\""},
                             {"process_labels", "0", "0", "\"labels\": \"GPU 0\""},
                             {"thread_name", "2871339", "2871339", "\"name\": \"thread 2871339 (python3)\""},
                             {"thread_name", "2871339", "2871420", "\"name\": \"thread 2871420 (pt_autograd_0)\""}};
    for (auto& m : meta) {
      g.sep();
      w.fmt("  {\n    \"name\": \"%s\", \"ph\": \"M\", \"ts\": %s, \"pid\": %s, \"tid\": %s,\n    \"args\": {\n      "
            "%s\n    }\n  }",
            m[0], us(g.t).c_str(), m[1], m[2], m[3]);
    }
    const std::uint64_t tail = 200;
    for (int n = 1; w.written() + tail < size; ++n) g.step(n);
    g.sep();
    w.fmt("  {\n    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\",\n    \"pid\": \"\", \"tid\": \"\", "
          "\"ts\": %s\n  }\n  ],\n  \"traceName\": \"%s\"\n}\n",
          us(g.t).c_str(), "gen_trace");
    if (gz) {
      auto compressed = tprof::internal::gzip(w.buffer(), 6);
      if (!compressed) {
        std::fprintf(stderr, "gen_trace: %s\n", compressed.error().to_string().c_str());
        return 2;
      }
      std::fwrite(compressed->data(), 1, compressed->size(), f);
    }
  }
  std::fclose(f);
  return 0;
}
