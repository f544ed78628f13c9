// cbid -> API name tables for the CUDA runtime and driver callback domains.
// The definitions are generated at configure time by src/cupti/CMakeLists.txt
// from the installed cupti_runtime_cbid.h / cupti_driver_cbid.h, so names
// need neither libcupti nor cuptiGetCallbackName (replay works anywhere).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tprof::internal {

// One enumerator of a cbid header, named as Kineto prints it.
struct CbidName {
  std::uint32_t cbid;
  const char* name;
};

// Sorted by cbid (the headers list them in ascending order; the replay test checks it).
extern const CbidName kRuntimeCbidNames[];
extern const std::size_t kRuntimeCbidNamesSize;
extern const CbidName kDriverCbidNames[];
extern const std::size_t kDriverCbidNamesSize;

// The runtime/driver API called `cbid` ("cudaLaunchKernel", "cuLaunchKernelEx"),
// or "INVALID" (Kineto's word) for a cbid these headers do not know.
// Thread-safe; the view is static.
std::string_view runtime_cbid_name(std::uint32_t cbid) noexcept;
std::string_view driver_cbid_name(std::uint32_t cbid) noexcept;

}  // namespace tprof::internal
