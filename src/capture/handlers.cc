// torch.profiler.tensorboard_trace_handler (docs/torch-table-semantics.md §5).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "src/base/file.h"
#include "src/capture/handlers.h"
#include "src/trace/writer.h"
#include "tprof/profiler.h"

namespace tprof {

namespace {

// mkdir -p
Status make_dirs(const std::string& dir) {
  if (dir.empty()) return {};
  std::string path;
  for (std::size_t i = 0; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    path = dir.substr(0, i);
    if (path.empty()) continue;
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) return Error(ErrorCode::kIo, "Can't create directory: " + dir + " (not a directory)", path);
      continue;
    }
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return Error(ErrorCode::kIo, std::string("Can't create directory: ") + dir + ": " + std::strerror(errno), path);
    }
  }
  return {};
}

std::string default_worker() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  return std::string(host) + "_" + std::to_string(getpid());
}

}  // namespace

namespace internal {

Result<std::string> write_tensorboard_trace(const Trace& trace, const std::string& dir, std::string* worker,
                                            bool use_gzip, std::int64_t epoch_ns) {
  TPROF_TRY(make_dirs(dir));
  if (worker->empty()) *worker = default_worker();  // chosen once, kept for later traces
  if (epoch_ns < 0) {
    epoch_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count();
  }
  // A taken name moves to the next nanosecond rather than gaining a
  // suffix: TensorBoard's plugin reads "<worker>.<digits>.pt.trace.json",
  // and a suffix would make the file another worker's.
  auto name = [&](int attempt) {
    return *worker + "." + std::to_string(epoch_ns + attempt) + ".pt.trace.json" + (use_gzip ? ".gz" : "");
  };
  std::string prefix = dir;
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  TPROF_TRY_ASSIGN(auto file, AtomicFileWriter::create(prefix + name(0), {.replace = false}));
  TPROF_TRY(write_trace_to(trace, file.get(), use_gzip, WriteOptions{}.gzip_level));
  // The worker may hold a '/' (torch joins it to the directory as it is):
  // the file's name is what follows the last one.
  return file->commit_unique([&](int attempt) {
    const std::string path = prefix + name(attempt);
    return path.substr(path.rfind('/') + 1);
  });
}

}  // namespace internal

TraceHandler tensorboard_trace_handler(std::string dir, std::string worker, bool use_gzip) {
  auto state = std::make_shared<std::string>(std::move(worker));
  return [dir = std::move(dir), state, use_gzip](Profiler& prof) -> Status {
    TPROF_TRY(internal::write_tensorboard_trace(prof.trace(), dir, state.get(), use_gzip));
    return {};
  };
}

}  // namespace tprof
