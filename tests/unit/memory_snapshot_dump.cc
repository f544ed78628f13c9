// memory_snapshot_dump SNAPSHOT.pickle: reads a PyTorch memory snapshot
// with read_memory_snapshot and prints, per device, the totals that
// tests/python/memory_snapshot_viz_test.py compares with torch's own
// _memory_viz on the same file. Exit 0, or 2 with the reader's error.
//
//   {"times_recorded": true, "sites": 12, "devices": [{"device": 0,
//    "samples": 190, "allocs": 80, "frees": 70, "start_allocated": 0,
//    "final_allocated": ..., "peak_allocated": ..., "final_reserved": ...,
//    "peak_reserved": ..., "segments": 5, "segment_bytes": ...,
//    "segment_allocated_bytes": ..., "largest_free_bytes": ...}]}
//
// start_allocated is the total before the first sample; peak_allocated the
// highest total after a sample (analyze_memory's peak).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "src/base/json_writer.h"
#include "tprof/memory.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: memory_snapshot_dump SNAPSHOT.pickle\n");
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "%s: cannot open\n", argv[1]);
    return 2;
  }
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const tprof::Result<tprof::MemoryInput> in = tprof::read_memory_snapshot(bytes, argv[1]);
  if (!in) {
    std::fprintf(stderr, "%s\n", in.error().to_string().c_str());
    return 2;
  }

  std::string out;
  {
    tprof::internal::JsonWriter w(&out, tprof::internal::JsonWriter::kPretty);
    w.begin_object();
    w.key("times_recorded");
    w.value_bool(in->times_recorded);
    w.key("sites");
    w.value_uint(in->sites.size());
    w.key("devices");
    w.begin_array();
    for (const tprof::MemoryDeviceInput& d : in->devices) {
      std::int64_t allocs = 0, frees = 0, peak = INT64_MIN, peak_reserved = INT64_MIN;
      for (const tprof::MemorySample& s : d.samples) {
        allocs += s.bytes > 0;
        frees += s.bytes < 0;
        peak = std::max(peak, s.allocated);
        peak_reserved = std::max(peak_reserved, s.reserved);
      }
      std::int64_t segments = 0, segment_bytes = 0, segment_allocated = 0, largest_free = 0;
      for (const tprof::MemorySegmentState& s : in->segments) {
        if (s.device_id != d.device_id) continue;
        ++segments;
        segment_bytes += s.total_bytes;
        segment_allocated += s.allocated_bytes;
        largest_free = std::max(largest_free, s.largest_free_bytes);
      }
      w.begin_object();
      w.key("device");
      w.value_int(d.device_id);
      w.key("samples");
      w.value_uint(d.samples.size());
      w.key("allocs");
      w.value_int(allocs);
      w.key("frees");
      w.value_int(frees);
      w.key("start_allocated");
      w.value_int(d.samples.front().allocated - d.samples.front().bytes);
      w.key("final_allocated");
      w.value_int(d.samples.back().allocated);
      w.key("peak_allocated");
      w.value_int(peak);
      w.key("final_reserved");
      w.value_int(d.samples.back().reserved);
      w.key("peak_reserved");
      w.value_int(peak_reserved);
      w.key("segments");
      w.value_int(segments);
      w.key("segment_bytes");
      w.value_int(segment_bytes);
      w.key("segment_allocated_bytes");
      w.value_int(segment_allocated);
      w.key("largest_free_bytes");
      w.value_int(largest_free);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
