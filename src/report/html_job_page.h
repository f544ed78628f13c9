// What the job pages share (docs/report.md, "Many ranks"): tprof report
// DIR's page (src/report/html_job.cc) and the comparison of two jobs
// (tprof compare --jobs --format html, src/report/compare_report.cc). One
// stylesheet, and one closing script that cuts long names in their middle
// and marks the page drawn (body[data-rendered]) with its width, for the
// headless tests (tests/html/chromium_job_test.sh,
// tests/html/chromium_job_compare_test.sh).
#pragma once

#include <string>
#include <string_view>

namespace tprof::internal {

const char* job_page_style();
std::string job_page_script();
// Text from a trace or a user, made printable (safe_text) and escaped.
std::string page_text(std::string_view s);
// A file, kernel or job name: one line, cut in its middle by the script
// when long, whole in its title.
std::string page_name(std::string_view s);

}  // namespace tprof::internal
