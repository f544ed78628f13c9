// Kernel names (src/report/kernel_names.h): the short form keeps the functor
// and the dtype, every view prints different kernels differently. The names
// are real ones, from the traces under tests/data.
#include "src/report/kernel_names.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "src/report/py_format.h"
#include "tprof/read.h"

namespace tprof {
namespace {

using internal::KernelNames;
using internal::long_kernel_name;
using internal::short_kernel_name;

TEST(KernelNames, KeepsTheFunctorAndTheDtype) {
  // zero_grad's fill: the example.
  EXPECT_EQ(short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                              "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
                              "at::detail::Array<char*, 1>)"),
            "vectorized_elementwise_kernel<4, FillFunctor<float>>");
  // The blog's add (PyTorch 2.11, H100).
  EXPECT_EQ(short_kernel_name("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::"
                              "BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
                              "std::array<char*, 3ul>)"),
            "vectorized_elementwise_kernel<8, CUDAFunctor_add<BFloat16>>");
  // Offset calculators and load/store policies go.
  EXPECT_EQ(short_kernel_name("void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float>, "
                              "at::detail::Array<char*, 1>, TrivialOffsetCalculator<0, unsigned int>, "
                              "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithoutCast, "
                              "at::native::memory::StoreWithoutCast>(int, at::native::FillFunctor<float>, "
                              "at::detail::Array<char*, 1>, TrivialOffsetCalculator<0, unsigned int>, "
                              "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithoutCast, "
                              "at::native::memory::StoreWithoutCast)"),
            "unrolled_elementwise_kernel<FillFunctor<float>>");
  // gpu_kernel_impl's lambda is its functor.
  EXPECT_EQ(short_kernel_name("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::"
                              "CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> "
                              "const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::CUDAFunctor_add"
                              "<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda("
                              "int)#1})"),
            "elementwise_kernel<128, 2, CUDAFunctor_add<float>>");
  // A dispatch lambda: the function it is local to, and its dtype.
  EXPECT_EQ(short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::exp_kernel_cuda(at::"
                              "TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() "
                              "const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::exp_kernel_"
                              "cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::"
                              "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)"),
            "vectorized_elementwise_kernel<4, exp_kernel_cuda::lambda(float)>");
  // A reduction's ops, without the index type and vector widths.
  EXPECT_EQ(short_kernel_name("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::"
                              "func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::"
                              "TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::"
                              "ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, "
                              "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, "
                              "4>)"),
            "reduce_kernel<512, 1, ReduceOp<float, sum_functor<float, float, float>>>");
  EXPECT_EQ(short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, "
                              "float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, "
                              "3> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::"
                              "MulFunctor<float> >, at::detail::Array<char*, 3>)"),
            "vectorized_elementwise_kernel<4, BinaryFunctor<MulFunctor<float>>>");
}

TEST(KernelNames, ReturnTypesParametersAndQualifiers) {
  EXPECT_EQ(short_kernel_name("void matmul_add::add_kernel<__nv_bfloat16>(__nv_bfloat16 const*, __nv_bfloat16 "
                              "const*, __nv_bfloat16*, long)"),
            "add_kernel<__nv_bfloat16>");
  EXPECT_EQ(short_kernel_name("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, "
                              "false>(float*, float const*, int, int, int, bool const*, int, bool)"),
            "softmax_warp_forward<float, float, float, 10, false, false>");
  // A generic name keeps its qualifier.
  EXPECT_EQ(short_kernel_name("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_"
                              "align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
                              200),
            "cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>");
  EXPECT_EQ(short_kernel_name("at::cuda::(anonymous namespace)::spin_kernel(long)"), "spin_kernel");
  EXPECT_EQ(short_kernel_name("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"),
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t");
  EXPECT_EQ(short_kernel_name("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, "
                              "128, 1>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, "
                              "unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int,"
                              " 4u>, int, unsigned int)"),
            "CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>");
  // Not C++: as they are.
  EXPECT_EQ(short_kernel_name("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"),
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT");
  EXPECT_EQ(short_kernel_name("Memcpy DtoD (Device -> Device)"), "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(short_kernel_name("Memset (Device)"), "Memset (Device)");
}

TEST(KernelNames, TooLongIsCutInTheMiddle) {
  const std::string s = short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_"
                                          "backward_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() "
                                          "const::{lambda()#2}::operator()() const::{lambda(float, float)#1}, at::"
                                          "detail::Array<char*, 3> >(int)",
                                          48);
  EXPECT_EQ(internal::py_len(s), 48u);
  EXPECT_TRUE(s.starts_with("vectorized_elementwise")) << s;
  EXPECT_TRUE(s.ends_with("lambda(float, float)>")) << s;  // the dtype survives
  EXPECT_EQ(internal::py_len(short_kernel_name(std::string(200, 'x'), 48)), 48u);
  // Template arguments that fit stay whole; the kernel's name is cut (the
  // blog's add in compare's 55-character column).
  EXPECT_EQ(short_kernel_name("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::"
                              "BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
                              "std::array<char*, 3ul>)",
                              55),
            "vectorized_elementwise_kern…<CUDAFunctor_add<BFloat16>>");
  // Unbalanced or hostile names are cut, never parsed past their end.
  EXPECT_EQ(short_kernel_name("void f<<<(((", 72), "void f<<<(((");
  EXPECT_EQ(short_kernel_name(std::string(10000, '<'), 10), std::string(9, '<') + "…");
  std::string hostile = "void a::b<";
  hostile.append(500, '<');
  std::string expected = "void a::b<";
  expected.append(37, '<');
  expected += "…";
  expected.append(24, '<');
  EXPECT_EQ(short_kernel_name(hostile), expected);
}

TEST(KernelNames, TwoKernelsNeverPrintTheSame) {
  // Two copies that differ only in gpu_kernel_impl vs gpu_kernel_impl_nocast
  // (the same short form): the long form tells them apart.
  const std::string a =
      "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::direct_copy_kernel_cuda(at::"
      "TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::"
      "TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() "
      "const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_"
      "kernel_impl<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{"
      "lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda("
      "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} "
      "const&)::{lambda(int)#1})";
  std::string b = a;
  for (std::size_t p = b.find("gpu_kernel_impl<"); p != std::string::npos; p = b.find("gpu_kernel_impl<", p + 1)) {
    b.replace(p, 16, "gpu_kernel_impl_nocast<");
  }
  for (std::size_t p = b.find("{lambda()#2}"); p != std::string::npos; p = b.find("{lambda()#2}", p + 1)) {
    b.replace(p, 12, "{lambda()#3}");
  }
  EXPECT_EQ(short_kernel_name(a), short_kernel_name(b));
  EXPECT_EQ(short_kernel_name(a), "elementwise_kernel<128, 2, direct_copy_kernel_cuda::lambda(float)>");
  const KernelNames names(std::vector<std::string_view>{a, b, "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT"});
  EXPECT_NE(names.get(a), names.get(b));
  EXPECT_EQ(names.get(a), long_kernel_name(a));
  EXPECT_EQ(names.get(a), "elementwise_kernel<128, 2, gpu_kernel_impl<direct_copy_kernel_cuda::lambda()#2::lambda()#7::"
                          "lambda(float)#1>::lambda(int)#1>");
  EXPECT_EQ(names.get("nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT"), "nvjet_sm90_tst_64x8_64x16_1x4_h_bz_NNT");
  // Names the view does not hold (an op) stay as they are.
  EXPECT_FALSE(names.has("aten::mm"));
  EXPECT_EQ(names.get("aten::mm"), "aten::mm");
  // Names identical but for their parameters: numbered.
  const KernelNames overloads(std::vector<std::string_view>{"void f<int>(int)", "void f<int>(long)"});
  EXPECT_EQ(overloads.get("void f<int>(int)"), "f<int>");
  EXPECT_EQ(overloads.get("void f<int>(long)"), "f<int> #2");
}

TEST(KernelNames, EveryKernelOfEveryTestTraceIsUniqueInItsView) {
  for (const char* path : {"public/tracelens/h100/Falconsai_nsfw_image_detection__1016002.json.gz",
                           "public/tracelens/mi210/gpu_only_trace/gpu_only_trace.json.gz",
                           "public/hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
                           "public/kineto/tb_plugin/samples/resnet50_num_workers_4/"
                           "worker0.1623213129365.excerpt.pt.trace.json.gz",
                           "gpu/h100-torch-2.11/4096_bf16_warm_eager.json"}) {
    Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/" + path);
    ASSERT_TRUE(t.has_value()) << path;
    const KernelNames names(*t);
    std::set<std::string> full, shown;
    for (std::size_t e = 0; e < t->events.size(); ++e) {
      if (t->events.kind[e] != EventKind::kKernel) continue;
      const std::string name(t->name(static_cast<std::uint32_t>(e)));
      if (full.insert(name).second) {
        EXPECT_TRUE(shown.insert(names.get(name)).second) << path << ": " << names.get(name);
        // Longer only where the short form would collide.
        if (names.get(name) != short_kernel_name(name)) continue;
        EXPECT_LE(internal::py_len(names.get(name)), internal::kShortKernelName) << name;
      }
    }
  }
}

}  // namespace
}  // namespace tprof
