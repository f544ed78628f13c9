// tprof report's HTML page: one document, nothing fetched from the network
// but the Perfetto link, uPlot inline, the data blob valid JSON with the
// numbers the analyses give, names from traces escaped.
#include <gtest/gtest.h>

#include <cstdint>
#include <regex>
#include <string>

#include "src/report/html_assets.h"
#include "src/trace/json_value.h"
#include "tprof/html_report.h"
#include "tprof/kernels.h"
#include "tprof/read.h"
#include "tprof/steps.h"

namespace tprof {
namespace {

using internal::JsonValue;

std::size_t count_of(const std::string& s, std::string_view needle) {
  std::size_t n = 0;
  for (std::size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

// The text of <script type="application/json" id="report-data">.
std::string data_blob(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  const std::size_t b = html.find(open);
  if (b == std::string::npos) return "";
  const std::size_t e = html.find("</script>", b);
  return html.substr(b + open.size(), e - b - open.size());
}

std::int64_t int_of(const JsonValue* v) {
  std::int64_t i = -1;
  if (v == nullptr || !v->get_int(&i)) return -1;
  return i;
}

class HtmlReportH100 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/64_bf16_warm_eager.json");
    ASSERT_TRUE(t) << t.error().to_string();
    trace_ = new Trace(std::move(t).value());
    html_ = new std::string(format_report_html(*trace_, {.trace_file_name = "64_bf16_warm_eager.json"}));
  }
  static void TearDownTestSuite() {
    delete html_;
    delete trace_;
  }
  static Trace* trace_;
  static std::string* html_;
};
Trace* HtmlReportH100::trace_ = nullptr;
std::string* HtmlReportH100::html_ = nullptr;

TEST_F(HtmlReportH100, IsOneHtmlDocument) {
  const std::string& h = *html_;
  EXPECT_TRUE(h.starts_with("<!DOCTYPE html>\n<html"));
  EXPECT_EQ(count_of(h, "<html"), 1u);
  EXPECT_EQ(count_of(h, "</html>"), 1u);
  EXPECT_EQ(count_of(h, "<body>"), 1u);
  EXPECT_TRUE(h.ends_with("</html>\n"));
  // Bounded: the page for a small trace is uPlot plus a little.
  EXPECT_LT(h.size(), 400u * 1024);
}

TEST_F(HtmlReportH100, FetchesNothingButThePerfettoLink) {
  const std::string& h = *html_;
  const std::regex external(R"re((src|href)\s*=\s*["']?\s*(https?:)?//)re", std::regex::icase);
  std::string links;
  for (auto it = std::sregex_iterator(h.begin(), h.end(), external); it != std::sregex_iterator(); ++it) {
    const std::size_t at = static_cast<std::size_t>(it->position());
    links += h.substr(at, 90) + "\n";
  }
  EXPECT_EQ(count_of(links, "\n"), 1u) << links;
  EXPECT_NE(links.find("href=\"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/64_bf16_warm_eager.json\""),
            std::string::npos)
      << links;
  EXPECT_EQ(count_of(h, "<link"), 0u);
  EXPECT_EQ(count_of(h, "<script src"), 0u);
  EXPECT_EQ(count_of(h, "@import"), 0u);
}

TEST_F(HtmlReportH100, EmbedsUplot) {
  const std::string& h = *html_;
  ASSERT_GT(internal::uplot_js().size(), 40000u);
  EXPECT_TRUE(internal::uplot_version_text().starts_with("uplot 1."));
  // The vendored code needs no "</" rewriting today, so it is there byte for byte.
  EXPECT_EQ(internal::uplot_js().find("</"), std::string_view::npos);
  EXPECT_NE(h.find(internal::uplot_js()), std::string::npos);
  EXPECT_NE(h.find(internal::uplot_css()), std::string::npos);
  EXPECT_NE(h.find("var uPlot"), std::string::npos);
}

TEST_F(HtmlReportH100, DataBlobParsesAndMatchesTheAnalyses) {
  const std::string blob = data_blob(*html_);
  ASSERT_FALSE(blob.empty());
  EXPECT_EQ(blob.find('<'), std::string::npos);
  Result<JsonValue> v = JsonValue::parse(blob);
  ASSERT_TRUE(v) << v.error().to_string();
  ASSERT_TRUE(v->is_object());
  ASSERT_NE(v->find("format"), nullptr);
  EXPECT_EQ(v->find("format")->text(), "tprof-report/1");
  EXPECT_TRUE(v->find("has_device")->as_bool());

  const StepsSummary steps = compute_steps(*trace_);
  ASSERT_EQ(steps.steps.size(), 20u);
  const JsonValue* s = v->find("steps");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->items().size(), 20u);
  EXPECT_EQ(int_of(v->find("steps_total")), 20);
  for (std::size_t i = 0; i < 20; ++i) {
    const JsonValue& st = s->items()[i];
    EXPECT_EQ(int_of(st.find("step")), steps.steps[i].step);
    EXPECT_EQ(int_of(st.find("dur_ns")), steps.steps[i].dur_ns);
    EXPECT_EQ(int_of(st.find("gpu_busy_ns")), steps.steps[i].gpu_busy_ns);
    EXPECT_EQ(int_of(st.find("gpu_idle_ns")), steps.steps[i].dur_ns - steps.steps[i].gpu_busy_ns);
  }
  EXPECT_NE(html_->find("<div id=\"steps-chart\" data-steps=\"20\">"), std::string::npos);

  // Top kernels by total time, their histograms holding every instance.
  const KernelsSummary ks = compute_kernels(*trace_);
  const std::size_t nk = std::min<std::size_t>(5, ks.kernels.size());
  ASSERT_GT(nk, 0u);
  const JsonValue* k = v->find("kernels");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->items().size(), nk);
  for (std::size_t i = 0; i < nk; ++i) {
    const JsonValue& kj = k->items()[i];
    EXPECT_EQ(kj.find("name")->text(), ks.kernels[i].name);
    EXPECT_EQ(int_of(kj.find("count")), ks.kernels[i].count);
    EXPECT_EQ(int_of(kj.find("median_ns")), ks.kernels[i].median_ns);
    std::int64_t sum = 0;
    ASSERT_LE(kj.find("counts")->items().size(), 30u);
    for (const JsonValue& c : kj.find("counts")->items()) sum += int_of(&c);
    EXPECT_EQ(sum, ks.kernels[i].count) << ks.kernels[i].name;
  }
  EXPECT_NE(html_->find("<div id=\"kernels-chart\" data-kernels=\"" + std::to_string(nk) + "\">"), std::string::npos);

  // The op table: name, self CPU, CPU total, self CUDA, CUDA total, calls.
  const JsonValue* ops = v->find("ops");
  ASSERT_NE(ops, nullptr);
  ASSERT_FALSE(ops->items().empty());
  EXPECT_LE(ops->items().size(), 200u);
  EXPECT_EQ(ops->items()[0].items().size(), 6u);
  bool has_mm = false;
  for (const JsonValue& r : ops->items()) has_mm |= r.items()[0].text() == "aten::mm";
  EXPECT_TRUE(has_mm);
}

TEST_F(HtmlReportH100, ShowsTheVerdictAndCauses) {
  const std::string& h = *html_;
  EXPECT_NE(h.find("<section id=\"verdict\" data-verdict=\""), std::string::npos);
  EXPECT_NE(h.find("Root causes"), std::string::npos);
  EXPECT_NE(h.find("class=\"cause sev-"), std::string::npos);
}

TEST(HtmlReport, EscapesNamesFromTheTrace) {
  const std::string evil = R"(<script>alert(1)</script>)";
  const std::string text = R"({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "<script>alert(1)</script>", "pid": 1, "tid": 1, "ts": 5, "dur": 15},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 1, "External id": 2}},
  {"ph": "X", "cat": "kernel", "name": "<script>alert(1)</script>", "pid": 0, "tid": 7, "ts": 40, "dur": 20, "args": {"correlation": 1, "External id": 2, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "<script>alert(1)</script>", "pid": 0, "tid": 7, "ts": 70, "dur": 25, "args": {"correlation": 1, "device": 0, "stream": 7}}
]})";
  Result<Trace> t = read_trace_bytes(text);
  ASSERT_TRUE(t);
  const std::string h = format_report_html(*t, {.trace_file_name = "a \"b\" <c>.json"});
  EXPECT_EQ(h.find(evil), std::string::npos);
  EXPECT_EQ(h.find("<script>alert"), std::string::npos);
  EXPECT_EQ(h.find("<c>"), std::string::npos);
  EXPECT_NE(h.find("tprof report: a &quot;b&quot; &lt;c&gt;.json"), std::string::npos);
  EXPECT_NE(h.find("url=http://127.0.0.1:9001/a%20%22b%22%20%3Cc%3E.json"), std::string::npos);
  // Only our own script elements: the data, uPlot, the page's script.
  EXPECT_EQ(count_of(h, "<script"), 3u);
  EXPECT_EQ(count_of(h, "</script>"), 3u);
  // The name reads back whole from the data blob.
  Result<JsonValue> v = JsonValue::parse(data_blob(h));
  ASSERT_TRUE(v) << v.error().to_string();
  ASSERT_EQ(v->find("kernels")->items().size(), 1u);
  EXPECT_EQ(v->find("kernels")->items()[0].find("name")->text(), evil);
  EXPECT_EQ(int_of(v->find("kernels")->items()[0].find("count")), 2);
  EXPECT_NE(h.find("data-steps=\"1\""), std::string::npos);
}

TEST(HtmlReport, TraceWithoutStepsOrDevice) {
  Result<Trace> t = read_trace_bytes(R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 5, "dur": 15}]})");
  ASSERT_TRUE(t);
  const std::string h = format_report_html(*t);
  EXPECT_NE(h.find("data-steps=\"0\""), std::string::npos);
  EXPECT_NE(h.find("data-kernels=\"0\""), std::string::npos);
  EXPECT_EQ(h.find("perfetto-link"), std::string::npos);  // no file name, no link
  Result<JsonValue> v = JsonValue::parse(data_blob(h));
  ASSERT_TRUE(v);
  EXPECT_FALSE(v->find("has_device")->as_bool());
}

TEST(HtmlReport, EscapesHtml) {
  EXPECT_EQ(html_escape(R"(<a href="x">&'</a>)"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain"), "plain");
}

}  // namespace
}  // namespace tprof
