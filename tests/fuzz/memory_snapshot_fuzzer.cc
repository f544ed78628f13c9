// Fuzz target: a PyTorch memory snapshot (tprof memory SNAPSHOT.pickle).
//
// Properties:
//   - read_memory_snapshot returns a MemoryInput or an Error whose byte
//     offset lies inside the input, never crashing or reading past it;
//   - what it returns, analyze_memory and every view format without
//     crashing, and every sample's site is an index into the sites.
// Seeds: tests/data/snapshots (synthetic snapshots of torch 1.13 and 2.x).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tprof/memory.h"

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "memory_snapshot_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tprof::Result<tprof::MemoryInput> in = tprof::read_memory_snapshot(bytes, "fuzz.pickle");
  if (!in) {
    const std::int64_t at = in.error().byte_offset();
    if (at < 0 || static_cast<std::size_t>(at) > size) property_failed("error offset outside the input", in.error().to_string());
    return 0;
  }
  for (const tprof::MemoryDeviceInput& d : in->devices) {
    for (const tprof::MemorySample& s : d.samples) {
      if (s.site != tprof::kNoIndex && s.site >= in->sites.size()) property_failed("site out of range", std::to_string(s.site));
    }
  }
  tprof::MemoryOptions o;
  o.buckets = 16;
  const tprof::MemoryReport r = tprof::analyze_memory(*in, o);
  const std::string text = tprof::format_memory_text(r) + tprof::format_memory_json(r) +
                           tprof::format_memory_markdown(r) + tprof::format_memory_csv(*in, r);
  if (text.empty()) property_failed("empty views", "");
  return 0;
}
