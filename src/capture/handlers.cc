// torch.profiler.tensorboard_trace_handler (docs/torch-table-semantics.md §5).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "src/capture/handlers.h"
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

Result<std::string> tensorboard_trace_path(const std::string& dir, std::string* worker, bool use_gzip) {
  TPROF_TRY(make_dirs(dir));
  if (worker->empty()) *worker = default_worker();  // chosen once, kept for later traces
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::string path = dir;
  if (!path.empty() && path.back() != '/') path += '/';
  path += *worker + "." + std::to_string(ms) + ".pt.trace.json";
  if (use_gzip) path += ".gz";
  return path;
}

}  // namespace internal

TraceHandler tensorboard_trace_handler(std::string dir, std::string worker, bool use_gzip) {
  auto state = std::make_shared<std::string>(std::move(worker));
  return [dir = std::move(dir), state, use_gzip](Profiler& prof) -> Status {
    TPROF_TRY_ASSIGN(std::string path, internal::tensorboard_trace_path(dir, state.get(), use_gzip));
    return prof.export_chrome_trace(path);
  };
}

}  // namespace tprof
