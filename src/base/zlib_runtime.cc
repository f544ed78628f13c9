// zlib loaded at run time (src/base/gzip_codec.h): how a program that links
// tprof::capture but not tprof::gzip writes and reads .json.gz. libz.so.1 is
// on essentially every Linux system (Debian: zlib1g, priority required);
// TPROF_ZLIB_LIBRARY names another file (tests point it at nothing to see
// the error).
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "src/base/gzip_codec.h"

namespace tprof::internal {

namespace {

struct Loaded {
  ZlibApi api{};
  bool ok = false;
  std::string why;
};

template <typename F>
bool bind(void* lib, const char* name, F& out, std::string& why) {
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    why = std::string("libz lacks ") + name;
    return false;
  }
  out = reinterpret_cast<F>(sym);
  return true;
}

Loaded load() {
  Loaded r;
  const char* env = std::getenv("TPROF_ZLIB_LIBRARY");
  const char* file = env != nullptr && *env != '\0' ? env : "libz.so.1";
  // Never unloaded: the pointers live as long as the process.
  void* lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    r.why = err != nullptr ? err : std::string(file) + " not found";
    return r;
  }
  ZlibApi& a = r.api;
  r.ok = bind(lib, "zlibVersion", a.version, r.why) && bind(lib, "inflateInit2_", a.inflate_init2, r.why) &&
         bind(lib, "inflate", a.inflate, r.why) && bind(lib, "inflateReset", a.inflate_reset, r.why) &&
         bind(lib, "inflateEnd", a.inflate_end, r.why) && bind(lib, "deflateInit2_", a.deflate_init2, r.why) &&
         bind(lib, "deflate", a.deflate, r.why) && bind(lib, "deflateEnd", a.deflate_end, r.why);
  // zlib 1.x is the z_stream this build mirrors.
  if (r.ok && a.version()[0] != '1') {
    r.ok = false;
    r.why = std::string(file) + " is zlib " + a.version() + ", not 1.x";
  }
  return r;
}

}  // namespace

const ZlibApi* runtime_zlib(std::string* why) {
  static const Loaded loaded = load();
  if (!loaded.ok && why != nullptr) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

}  // namespace tprof::internal
