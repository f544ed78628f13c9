// Fuzz target: the reader's gzip path. The input is compressed (so that
// mutations of the text reach the decompressor as valid streams), then also
// cut and damaged; the input itself is read too when it is gzip already.
//
// Properties:
//   - a trace read from gzip(x) is the trace read from x: same success,
//     same event count, the same error offset (in the decompressed text);
//   - a cut or damaged stream, or two members, loads or fails with an
//     offset (never a negative one), without crashing.
// Seeds: tests/fuzz/corpus (plain traces and a .gz).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "src/base/gzip.h"
#include "tprof/read.h"

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "gzip_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

std::string describe(const tprof::Result<tprof::Trace>& t) {
  if (!t) return "error: " + t.error().to_string();
  return "ok: " + std::to_string(t->events.size()) + " events";
}

void read_damaged(const std::string& gz) {
  tprof::ReadOptions serial;
  serial.threads = 1;
  const tprof::Result<tprof::Trace> t = tprof::read_trace_bytes(gz, "fuzz.json.gz", serial);
  if (!t && (t.error().byte_offset() < -1)) property_failed("a negative error offset", t.error().to_string());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tprof::ReadOptions serial;
  serial.threads = 1;
  serial.max_inflate_ratio = 0;  // a fuzzed text may compress far more than a trace
  if (tprof::internal::is_gzip(text)) {
    (void)tprof::read_trace_bytes(text, "input.json.gz", serial);
    return 0;
  }
  const tprof::Result<std::string> gz = tprof::internal::gzip(text, 1);
  if (!gz) property_failed("gzip of the input fails", gz.error().to_string());
  const tprof::Result<tprof::Trace> plain = tprof::read_trace_bytes(text, "fuzz.json", serial);
  const tprof::Result<tprof::Trace> packed = tprof::read_trace_bytes(*gz, "fuzz.json.gz", serial);
  // An empty or whitespace text may say "empty file" plain and differ in
  // wording compressed; success, events and offset must agree.
  if (plain.has_value() != packed.has_value() || (plain && plain->events.size() != packed->events.size()) ||
      (!plain && plain.error().byte_offset() != packed.error().byte_offset())) {
    property_failed("gzip(x) reads differently from x", describe(plain) + " vs " + describe(packed));
  }
  // Cut and damaged streams, at a few places chosen by the input's size.
  const std::string& z = *gz;
  if (z.size() > 20) {
    read_damaged(z.substr(0, z.size() / 2));
    read_damaged(z.substr(0, z.size() - 5));
    std::string flipped = z;
    flipped[10 + size % (z.size() - 18)] ^= static_cast<char>(1 + size % 255);
    read_damaged(flipped);
    read_damaged(z + z);  // two members
  }
  return 0;
}
