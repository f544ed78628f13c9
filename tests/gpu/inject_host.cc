// Stands in for the CUDA driver in record_test: loads the library named by
// CUDA_INJECTION64_PATH and calls its InitializeInjection, as the driver
// does at cuInit, then runs `sh -c ARG` if given and exits with status 5.
// On this machine there is no driver and no GPU: the injected profiler
// records CPU only and says why in the trace.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path == nullptr) {
    std::fprintf(stderr, "inject_host: CUDA_INJECTION64_PATH is not set\n");
    return 3;
  }
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "inject_host: %s\n", dlerror());
    return 4;
  }
  using Init = int (*)();
  auto init = reinterpret_cast<Init>(dlsym(lib, "InitializeInjection"));
  if (init == nullptr || init() != 1) {
    std::fprintf(stderr, "inject_host: InitializeInjection missing or failed\n");
    return 4;
  }
  std::puts("inject_host ran");
  if (argc > 1) {
    const int rc = std::system(argv[1]);
    static_cast<void>(rc);
  }
  return 5;
}
