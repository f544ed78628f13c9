// A CUDA_INJECTION64_PATH library for standin_test: at cuInit it registers
// an exit handler that prints what the stand-in driver answers by then
// ("inject atexit: cuCtxSynchronize N"), which tells whether the driver's
// teardown ran before it (STANDIN_DRIVER_ATEXIT).
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace {

void at_exit() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto sync = h != nullptr ? reinterpret_cast<CUresult (*)()>(dlsym(h, "cuCtxSynchronize")) : nullptr;
  const int r = sync != nullptr ? static_cast<int>(sync()) : -1;
  std::fprintf(stderr, "inject atexit: cuCtxSynchronize %d\n", r);
  std::fflush(stderr);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  std::fprintf(stderr, "inject: InitializeInjection\n");
  std::atexit(at_exit);
  return 1;
}
