// What a program built against the CUDA stand-ins (tests/standin) calls
// besides the real CUDA API: naming its kernels, which nvcc's generated
// registration code (__cudaRegisterFunction) does in a real program.
//
//   static void gemm_stub() {}   // stands in for a __global__ function's host stub
//   standin_register_kernel(reinterpret_cast<const void*>(&gemm_stub),
//                           "_Z4gemmPKfS0_Pfi", 2100);   // runs 2.1 us on the device
//   cudaLaunchKernel(reinterpret_cast<const void*>(&gemm_stub), grid, block, args, 0, stream);
//
//   // Triton / inductor: a driver-API kernel, launched with cuLaunchKernel.
//   auto get = reinterpret_cast<CUfunction (*)(const char*, std::int64_t)>(
//       dlsym(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "standin_get_function"));
//   CUfunction f = get("triton_poi_fused_add_0", 1500);
#pragma once

#include <cuda.h>

#include <cstdint>

extern "C" {

// libcudart.so.13 (stand-in). Names the kernel whose host stub is
// host_fn; dur_ns: its run time on the simulated device. Thread-safe; a
// second registration of host_fn replaces the first. Returns 0, or
// cudaErrorInvalidValue for null arguments.
int standin_register_kernel(const void* host_fn, const char* mangled_name, std::int64_t dur_ns);

// libcuda.so.1 (stand-in). A driver-API kernel of the simulated device
// (the name is copied); the same name returns the same function. Null
// when the driver is torn down.
CUfunction standin_get_function(const char* name, std::int64_t dur_ns);

}  // extern "C"
