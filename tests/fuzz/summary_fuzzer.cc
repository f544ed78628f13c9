// Fuzz target: a rank summary file (`tprof summarize`, `tprof merge
// --format summary`) read back as `tprof merge` and `tprof diagnose DIR`
// read it: parse_rank_summary_json, merge_summaries, compute_job_view and
// the views.
//
// Properties beyond "does not crash" (and, under UBSan, no undefined
// arithmetic on the file's numbers):
//   - a failed read is kFormat or kUnsupported, never another error;
//   - a summary that reads is written back (format_rank_summary_json) as
//     strict JSON (RFC 8259, UTF-8; tests/support/strict_json.h) that reads
//     again with the same values; written once more, it is the same bytes;
//   - merging is order-independent: the ranks split in two parts merge the
//     same way either way round (both fail, or the same summary);
//   - the job view's JSON is strict JSON; text, Markdown and HTML are made;
//   - the job compared with itself (compare_jobs): its JSON is strict JSON,
//     its text and HTML page are made.
// Seeds: tests/fuzz/corpus_summary (summaries of tests/data/ranks) and the
// rank summaries of tests/fuzz/corpus_extreme.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "src/trace/json_copy.h"
#include "tests/support/strict_json.h"
#include "tprof/compare.h"
#include "tprof/ranks.h"

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "summary_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

void expect_strict_json(const std::string& text, const char* what) {
  std::string why;
  if (!tprof::testing::is_strict_json(text, &why)) property_failed(what, why + "\n" + text.substr(0, 4000));
}

std::string describe(const tprof::Result<tprof::JobSummary>& job) {
  return job ? tprof::format_rank_summary_json(*job) : "error: " + job.error().to_string();
}

void check_views(const tprof::JobSummary& job) {
  const tprof::Result<tprof::JobSummary> merged = tprof::merge_summaries({job});
  if (!merged) return;  // e.g. one rank from two processes: an error naming both
  const tprof::JobView view = tprof::compute_job_view(*merged);
  (void)tprof::format_job_text(view);
  (void)tprof::format_job_md(view);
  (void)tprof::format_job_html(view);
  expect_strict_json(tprof::format_job_json(view), "the job view's JSON is not strict JSON");
  if (merged->ranks.empty()) return;  // compare_jobs needs a rank a side
  const tprof::JobComparison j = tprof::compare_jobs(*merged, *merged);
  (void)tprof::format_job_comparison_text(j);
  (void)tprof::format_job_comparison_html(j);
  expect_strict_json(tprof::format_job_comparison_json(j), "the job comparison's JSON is not strict JSON");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const tprof::Result<tprof::JobSummary> job = tprof::parse_rank_summary_json(text);
  if (!job) {
    const tprof::ErrorCode code = job.error().code();
    if (code != tprof::ErrorCode::kFormat && code != tprof::ErrorCode::kUnsupported) {
      property_failed("a bad summary fails with another error than kFormat or kUnsupported", job.error().to_string());
    }
    return 0;
  }

  // Written, read and written again: the same values (the first writing
  // may spell an invalid byte as \ufffd, the second writes U+FFFD itself),
  // and from the second writing on the same bytes.
  const std::string written = tprof::format_rank_summary_json(*job);
  expect_strict_json(written, "a summary is written back as invalid JSON");
  const tprof::Result<tprof::JobSummary> again = tprof::parse_rank_summary_json(written);
  if (!again) property_failed("a written summary does not read back", again.error().to_string() + "\n" + written);
  const std::string rewritten = tprof::format_rank_summary_json(*again);
  if (tprof::internal::canonical_json(rewritten) != tprof::internal::canonical_json(written)) {
    property_failed("a summary changes when read and written again", written + "\nvs\n" + rewritten);
  }
  const tprof::Result<tprof::JobSummary> third = tprof::parse_rank_summary_json(rewritten);
  if (!third || tprof::format_rank_summary_json(*third) != rewritten) {
    property_failed("a rewritten summary is not a fixed point", rewritten);
  }

  // Two parts, merged both ways round.
  const std::size_t half = job->ranks.size() / 2;
  tprof::JobSummary a, b;
  a.ranks.assign(job->ranks.begin(), job->ranks.begin() + static_cast<std::ptrdiff_t>(half));
  b.ranks.assign(job->ranks.begin() + static_cast<std::ptrdiff_t>(half), job->ranks.end());
  const tprof::Result<tprof::JobSummary> ab = tprof::merge_summaries({a, b});
  const tprof::Result<tprof::JobSummary> ba = tprof::merge_summaries({b, a});
  if (ab.has_value() != ba.has_value() || (ab && describe(ab) != describe(ba))) {
    property_failed("merging depends on the order of the parts", describe(ab) + "\nvs\n" + describe(ba));
  }
  check_views(*job);
  return 0;
}
