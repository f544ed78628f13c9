#include "tprof/status.h"

namespace tprof {

Error Error::with_path(std::string path) const {
  Error e = *this;
  if (e.path_.empty()) e.path_ = std::move(path);
  return e;
}

std::string Error::to_string() const {
  std::string out;
  if (!path_.empty()) out += path_ + ": ";
  if (byte_offset_ >= 0) out += "byte " + std::to_string(byte_offset_) + ": ";
  out += message_;
  return out;
}

}  // namespace tprof
