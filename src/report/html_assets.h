// The front-end files `tprof report` inlines into its page: the vendored
// uPlot (third_party/uplot), embedded at build time by cmake/EmbedFiles.cmake
// into a generated source. Views of static storage.
#pragma once

#include <string_view>

namespace tprof::internal {

std::string_view uplot_js();   // uPlot.iife.min.js
std::string_view uplot_css();  // uPlot.min.css
std::string_view uplot_version_text();  // third_party/uplot/VERSION: "uplot 1.6.32\n"

}  // namespace tprof::internal
