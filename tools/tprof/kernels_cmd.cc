// tprof kernels TRACE: per device-activity name count, total, mean, median, p90, min, max, cv, outlier steps.
#include <CLI/CLI.hpp>

#include "tools/tprof/common.h"
#include "tprof/kernels.h"

namespace tprof::cli {

void add_kernels_command(CLI::App& app, int* rc) {
  add_report_command(app, rc, "kernels", "Per kernel: count, total, mean, median, p90, min, max, CV, outlier steps",
                     {"text", "json"}, true, [](const Trace& t, const std::string& format) {
                       const KernelsSummary k = compute_kernels(t);
                       return format == "json" ? format_kernels_json(k) : format_kernels_text(k);
                     });
}

}  // namespace tprof::cli
