// gzip for a build without libdeflate and zlib (TPROF_WITH_GZIP=OFF, or
// AUTO in a capture-only embed where they were not found): every .gz path
// is refused with an error that says how to get gzip support.
#include "src/base/gzip.h"

namespace tprof::internal {

namespace {

Error no_gzip() {
  return Error(ErrorCode::kUnsupported,
               "this tprof was built without gzip support (TPROF_WITH_GZIP; needs libdeflate and zlib)");
}

}  // namespace

Result<Inflated> gunzip(std::string_view, const GunzipLimits&) { return no_gzip(); }

Result<std::string> gzip(std::string_view, int) { return no_gzip(); }

}  // namespace tprof::internal
