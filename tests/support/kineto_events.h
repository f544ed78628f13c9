// Kineto-shaped trace events as JSON text, for tests that build a trace in a
// few lines: ts and dur in µs, as Kineto writes them.
//
//   read_trace_bytes(doc({step(1, 0, 100), launch(10, 5, 1), kernel("k", 7, 20, 2, 1)}))
#pragma once

#include <string>
#include <vector>

namespace tprof::testing {

inline std::string x(const std::string& cat, const std::string& name, int pid, int tid, double ts, double dur,
                     const std::string& args = "") {
  std::string s = R"({"ph": "X", "cat": ")" + cat + R"(", "name": ")" + name + R"(", "pid": )" + std::to_string(pid) +
                  R"(, "tid": )" + std::to_string(tid) + R"(, "ts": )" + std::to_string(ts) + R"(, "dur": )" +
                  std::to_string(dur);
  if (!args.empty()) s += R"(, "args": {)" + args + "}";
  return s + "}";
}
inline std::string corr(int id) { return R"("correlation": )" + std::to_string(id); }
inline std::string step(int n, double ts, double dur) {
  return x("user_annotation", "ProfilerStep#" + std::to_string(n), 1, 1, ts, dur);
}
inline std::string launch(double ts, double dur, int id) { return x("cuda_runtime", "cudaLaunchKernel", 1, 1, ts, dur, corr(id)); }
inline std::string kernel(const std::string& name, int stream, double ts, double dur, int id) {
  return x("kernel", name, 0, stream, ts, dur, corr(id));
}
inline std::string doc(const std::vector<std::string>& events, const std::string& top = "") {
  std::string s = "{" + top + (top.empty() ? "" : ", ") + R"("traceEvents": [)";
  for (std::size_t i = 0; i < events.size(); ++i) s += (i ? ",\n" : "\n") + events[i];
  return s + "\n]}";
}

// The legacy autograd profiler's export (torch.profiler on a build without
// Kineto): a JSON array of complete events on one thread, args empty.
//
//   from_text(legacy_doc({legacy_x("aten::mm", 0, 50), legacy_x("aten::add", 60, 5)}))
inline std::string legacy_x(const std::string& name, double ts, double dur) {
  return R"({"name": ")" + name + R"(", "ph": "X", "ts": )" + std::to_string(ts) + R"(, "dur": )" +
         std::to_string(dur) + R"(, "tid": 1, "pid": "CPU functions", "args": {}})";
}
inline std::string legacy_doc(const std::vector<std::string>& events) {
  std::string s = "[";
  for (std::size_t i = 0; i < events.size(); ++i) s += (i ? ",\n" : "") + events[i];
  return s + "]";
}

}  // namespace tprof::testing
