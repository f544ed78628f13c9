// A plugin of tests/plugins: a shared object the host dlopens (RTLD_LOCAL)
// and calls through plugin_work. PLUGIN_NAME (a string literal) names its
// scopes. Built three times: plugin_a and plugin_b link the shared
// libtprof_capture.so, plugin_static links tprof's static archive (its own
// copy of the recorder).
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "tprof/record_function.h"

#ifndef PLUGIN_NAME
#error "PLUGIN_NAME is set by tests/plugins/CMakeLists.txt"
#endif

// Records PLUGIN_NAME::work on the calling thread around `n` scopes named
// at run time (PLUGIN_NAME::item <i>: interned by the recorder the plugin
// links) and an instant; returns the thread's id.
extern "C" __attribute__((visibility("default"))) std::int64_t plugin_work(int n) {
  TPROF_RECORD_FUNCTION(PLUGIN_NAME "::work");
  for (int i = 0; i < n; ++i) {
    tprof::RecordFunction item(std::string(PLUGIN_NAME "::item ") + std::to_string(i));
    item.arg("i", i);
  }
  TPROF_INSTANT(PLUGIN_NAME "::done");
  return static_cast<std::int64_t>(::syscall(SYS_gettid));
}
