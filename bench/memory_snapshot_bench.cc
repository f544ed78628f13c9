// memory_snapshot_bench: read_memory_snapshot's throughput and peak memory.
//
//   memory_snapshot_bench [--size MB] [--dir DIR] [--repeat N] [--keep]   generate, measure, delete
//   memory_snapshot_bench --generate MB OUT.pickle                        write a snapshot only
//   memory_snapshot_bench [--repeat N] FILE.pickle                        measure a file
//
// Each measured read runs in its own forked process, which maps the file
// and reads it once, so its peak RSS (the file's pages it touched
// included) is the reader's own: the figures are seconds, MB/s and peak
// RSS / file size, fastest run of --repeat (default 3).
//
// The generated snapshot is what torch.cuda.memory._dump_snapshot writes
// for a long training run recorded with _record_memory_history(stacks="all"),
// byte for byte as Python's pickler lays it out at protocol 4 (64 KiB
// FRAMEs, MEMOIZE after each new string and container, BINGET or
// LONG_BINGET after, APPENDS and SETITEMS in batches of 1000): 2,000 frame
// dicts written once; each allocation a new list of 40 frame references
// (the allocator's C++, torch's Python, one of 200 user call paths), which
// its free_requested and free_completed fetch again; a segment_alloc every
// 64 allocations; the dump-time segments at the end. About 350 bytes per
// allocation: a 1 GB file holds some 3 million allocations. At the end everything
// is freed, so the segments (all inactive) are the state the trace leads to.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tprof/memory.h"

namespace {

// Python's pickler at protocol 4, for the shapes a snapshot has.
class Pickler {
 public:
  explicit Pickler(std::FILE* out) : out_(out) {}

  void begin() {
    put(0x80);
    put(4);
  }
  void end() {
    op(0x2e);  // STOP
    flush_frame(true);
  }
  void op(unsigned char c) { frame_.push_back(static_cast<char>(c)); }
  void memoize() {
    op(0x94);
    ++memo_;
  }
  std::uint64_t last_memo() const { return memo_ - 1; }
  void get(std::uint64_t id) {
    if (id < 256) {
      op('h');
      op(static_cast<unsigned char>(id));
    } else {
      op('j');
      le(id, 4);
    }
  }
  void str(const std::string& s) {
    if (auto it = strings_.find(s); it != strings_.end()) {
      get(it->second);
      return;
    }
    if (s.size() < 256) {
      op(0x8c);
      op(static_cast<unsigned char>(s.size()));
    } else {
      op('X');
      le(s.size(), 4);
    }
    frame_.append(s);
    memoize();
    strings_.emplace(s, last_memo());
  }
  void integer(std::int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      op(static_cast<unsigned char>(v));
    } else if (v >= 0 && v < 65536) {
      op('M');
      le(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      le(static_cast<std::uint64_t>(v), 4);
    } else {
      // LONG1, the fewest bytes that hold v with its sign.
      int n = 1;
      while (n < 8 && !(v >= -(std::int64_t{1} << (8 * n - 1)) && v < (std::int64_t{1} << (8 * n - 1)))) ++n;
      op(0x8a);
      op(static_cast<unsigned char>(n));
      le(static_cast<std::uint64_t>(v), n);
    }
  }
  void flush_frame(bool last = false) {
    if (frame_.size() < kFrameBytes && !last) return;
    if (!frame_.empty()) {
      put(0x95);
      std::uint64_t n = frame_.size();
      for (int i = 0; i < 8; ++i) put(static_cast<unsigned char>(n >> (8 * i)));
      std::fwrite(frame_.data(), 1, frame_.size(), out_);
      written_ += frame_.size();
      frame_.clear();
    }
  }
  std::uint64_t written() const { return written_ + frame_.size(); }

 private:
  static constexpr std::size_t kFrameBytes = 64 * 1024;
  void le(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) op(static_cast<unsigned char>(v >> (8 * i)));
  }
  void put(unsigned char c) {
    std::fputc(c, out_);
    ++written_;
  }
  std::FILE* out_;
  std::string frame_;
  std::uint64_t memo_ = 0, written_ = 0;
  std::unordered_map<std::string, std::uint64_t> strings_;
};

struct Rng {
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  std::uint64_t next() {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  }
};

bool generate(const std::string& path, std::uint64_t target_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  Pickler p(f);
  Rng rng;
  p.begin();
  p.op('}');
  p.memoize();
  p.op('(');
  // Device traces first: the segments, small, follow.
  p.str("device_traces");
  p.op(']');
  p.memoize();
  p.op(']');  // the one device's trace, APPENDed to device_traces at the end
  p.memoize();

  // 2,000 frames: allocator C++, torch Python, user code.
  struct FrameDef {
    std::string file, name;
    std::int64_t line;
    std::uint64_t memo = UINT64_MAX;
  };
  std::vector<FrameDef> frames;
  for (int k = 0; k < 400; ++k) {
    frames.push_back({"/opt/pytorch/aten/src/ATen/native/cuda/op" + std::to_string(k % 40) + ".cu",
                      "at::native::kernel_" + std::to_string(k), 100 + k});
  }
  for (int k = 0; k < 600; ++k) {
    frames.push_back({"/usr/lib/python3/dist-packages/torch/nn/modules/m" + std::to_string(k % 60) + ".py",
                      "forward_" + std::to_string(k), 10 + k});
  }
  for (int k = 0; k < 1000; ++k) {
    frames.push_back(
        {"/home/user/project/model/layer" + std::to_string(k % 100) + ".py", "block_" + std::to_string(k), 20 + k});
  }
  const auto write_frame = [&](FrameDef& fd) {
    if (fd.memo != UINT64_MAX) {
      p.get(fd.memo);
      return;
    }
    p.op('}');
    p.memoize();
    fd.memo = p.last_memo();
    p.op('(');
    p.str("filename");
    p.str(fd.file);
    p.str("line");
    p.integer(fd.line);
    p.str("name");
    p.str(fd.name);
    p.op('u');
  };
  // 200 user call paths of 12 frames.
  std::vector<std::vector<int>> paths(200);
  for (auto& path_frames : paths) {
    for (int d = 0; d < 12; ++d) path_frames.push_back(1000 + static_cast<int>(rng.next() % 1000));
  }

  std::uint64_t time_us = 1'700'000'000'000'000ull, addr = 0x7f0000000000ull, next_segment = 0x7f0000000000ull;
  std::int64_t allocs = 0;
  int in_batch = 0;
  const auto item_done = [&] {
    if (++in_batch == 1000) {
      p.op('e');
      p.op('(');
      in_batch = 0;
    }
  };
  struct Live {
    std::uint64_t addr;
    std::int64_t size;
    std::uint64_t frames_memo;
  };
  std::vector<Live> live;
  // Returns the memo id of the entry's frames list.
  const auto entry = [&](const char* action, std::uint64_t a, std::int64_t size, std::uint64_t frames_memo,
                         bool new_frames, const std::vector<int>* stack) -> std::uint64_t {
    p.op('}');
    p.memoize();
    p.op('(');
    p.str("action");
    p.str(action);
    p.str("addr");
    p.integer(static_cast<std::int64_t>(a));
    p.str("size");
    p.integer(size);
    p.str("stream");
    p.integer(0);
    p.str("time_us");
    p.integer(static_cast<std::int64_t>(time_us += 3));
    p.str("frames");
    if (new_frames) {
      p.op(']');
      p.memoize();
      frames_memo = p.last_memo();
      p.op('(');
      for (int k : *stack) write_frame(frames[k]);
      p.op('e');
    } else {
      p.get(frames_memo);
    }
    p.op('u');
    item_done();
    p.flush_frame();
    return frames_memo;
  };
  p.op('(');
  std::vector<int> stack;
  while (p.written() + 4096 < target_bytes) {
    if (allocs % 64 == 0) {
      entry("segment_alloc", next_segment, 20 << 20, 0, true, &stack);  // stack empty: frames []
      next_segment += 20 << 20;
    }
    // 40 frames: 10 allocator/ATen, 18 torch Python, 12 of a user path.
    stack.clear();
    for (int d = 0; d < 10; ++d) stack.push_back(static_cast<int>(rng.next() % 400));
    for (int d = 0; d < 18; ++d) stack.push_back(400 + static_cast<int>(rng.next() % 600));
    const auto& user = paths[rng.next() % paths.size()];
    stack.insert(stack.end(), user.begin(), user.end());
    const std::int64_t size = 512 * static_cast<std::int64_t>(1 + rng.next() % 4096);
    live.push_back({addr, size, entry("alloc", addr, size, 0, true, &stack)});
    addr += static_cast<std::uint64_t>(size);
    ++allocs;
    if (live.size() > 64) {
      const std::size_t k = rng.next() % live.size();
      const Live l = live[k];
      live[k] = live.back();
      live.pop_back();
      entry("free_requested", l.addr, l.size, l.frames_memo, false, nullptr);
      entry("free_completed", l.addr, l.size, l.frames_memo, false, nullptr);
    }
  }
  // Everything is given back before the dump, so that the segments (all
  // inactive) are the state the trace leads to.
  for (const Live& l : live) {
    entry("free_requested", l.addr, l.size, l.frames_memo, false, nullptr);
    entry("free_completed", l.addr, l.size, l.frames_memo, false, nullptr);
  }
  p.op('e');  // the last batch
  p.op('a');  // the device's list into device_traces
  // Segments: one per segment_alloc, holding the live blocks as one block
  // each plus a free remainder, sizes adding up.
  p.str("segments");
  p.op(']');
  p.memoize();
  p.op('(');
  const std::int64_t segments = (allocs + 63) / 64;
  for (std::int64_t s = 0; s < segments; ++s) {
    p.op('}');
    p.memoize();
    p.op('(');
    p.str("device");
    p.integer(0);
    p.str("address");
    p.integer(static_cast<std::int64_t>(0x7f0000000000ull + static_cast<std::uint64_t>(s) * (20u << 20)));
    p.str("total_size");
    p.integer(20 << 20);
    p.str("segment_type");
    p.str("large");
    p.str("blocks");
    p.op(']');
    p.memoize();
    p.op('(');
    p.op('}');
    p.memoize();
    p.op('(');
    p.str("size");
    p.integer(20 << 20);
    p.str("requested_size");
    p.integer(0);
    p.str("state");
    p.str("inactive");
    p.op('u');
    p.op('e');
    p.op('u');
    if ((s + 1) % 1000 == 0) {
      p.op('e');
      p.op('(');
    }
    p.flush_frame();
  }
  p.op('e');
  p.op('u');  // the top dict's items
  p.end();
  const bool ok = std::ferror(f) == 0;
  return std::fclose(f) == 0 && ok;
}

// Reads `path` once in this process; prints seconds and what was read.
int measure_child(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) return 3;
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) return 3;
  const auto t0 = std::chrono::steady_clock::now();
  const tprof::Result<tprof::MemoryInput> in =
      tprof::read_memory_snapshot(std::string_view(static_cast<const char*>(map), size), path);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!in) {
    std::fprintf(stderr, "%s\n", in.error().to_string().c_str());
    return 2;
  }
  std::size_t samples = 0;
  for (const auto& d : in->devices) samples += d.samples.size();
  std::printf("%.3f %zu %zu %zu\n", s, samples, in->sites.size(), in->segments.size());
  return 0;
}

struct Measured {
  double seconds = 0, rss_mb = 0;
  std::size_t samples = 0, sites = 0, segments = 0;
  bool ok = false;
};

Measured measure(const std::string& path) {
  Measured m;
  std::fflush(stdout);  // or the child would write the parent's buffered lines into the pipe
  int fds[2];
  if (pipe(fds) != 0) return m;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    std::fflush(stdout);
    const int rc = measure_child(path);
    std::fflush(stdout);
    _exit(rc);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  struct rusage ru {};
  wait4(pid, &status, 0, &ru);
  m.rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  m.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
         std::sscanf(out.c_str(), "%lf %zu %zu %zu", &m.seconds, &m.samples, &m.sites, &m.segments) == 4;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t size_mb = 1024;
  std::string dir = "/tmp", file;
  int repeat = 3;
  bool keep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--size" && i + 1 < argc) {
      size_mb = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--keep") {
      keep = true;
    } else if (a == "--generate" && i + 2 < argc) {
      const std::uint64_t mb = std::strtoull(argv[i + 1], nullptr, 10);
      if (!generate(argv[i + 2], mb << 20)) {
        std::fprintf(stderr, "cannot write %s\n", argv[i + 2]);
        return 1;
      }
      return 0;
    } else if (!a.empty() && a[0] != '-') {
      file = a;
    } else {
      std::fprintf(stderr,
                   "usage: memory_snapshot_bench [--size MB] [--dir DIR] [--repeat N] [--keep] [FILE]\n"
                   "       memory_snapshot_bench --generate MB OUT.pickle\n");
      return 2;
    }
  }
  const bool generated = file.empty();
  if (generated) {
    file = dir + "/memory_snapshot_bench." + std::to_string(getpid()) + ".pickle";
    const auto t0 = std::chrono::steady_clock::now();
    if (!generate(file, size_mb << 20)) {
      std::fprintf(stderr, "cannot write %s\n", file.c_str());
      return 1;
    }
    std::printf("generated %s in %.1f s\n", file.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  struct stat st {};
  if (stat(file.c_str(), &st) != 0) {
    std::fprintf(stderr, "cannot stat %s\n", file.c_str());
    return 1;
  }
  const double mb = static_cast<double>(st.st_size) / (1 << 20);
  Measured best;
  for (int r = 0; r < repeat; ++r) {
    const Measured m = measure(file);
    if (!m.ok) {
      std::fprintf(stderr, "the read failed\n");
      return 1;
    }
    std::printf("run %d: %.3f s, %.0f MB/s, peak RSS %.0f MB (%.2fx the file)\n", r + 1, m.seconds, mb / m.seconds,
                m.rss_mb, m.rss_mb / mb);
    if (!best.ok || m.seconds < best.seconds) best = m;
  }
  std::printf("%.0f MB: %zu samples, %zu sites, %zu segments\n", mb, best.samples, best.sites, best.segments);
  std::printf("best: %.3f s, %.0f MB/s, peak RSS %.2fx the file\n", best.seconds, mb / best.seconds, best.rss_mb / mb);
  if (generated && !keep) std::remove(file.c_str());
  return 0;
}
