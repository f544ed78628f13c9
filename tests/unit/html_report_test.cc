// tprof report's HTML page: one document, nothing fetched from the network
// but the Perfetto link, uPlot inline, the data blob valid JSON with the
// numbers the analyses give (the critical path's among them), names from
// traces escaped.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <regex>
#include <set>
#include <string>

#include "src/report/html_assets.h"
#include "src/trace/json_value.h"
#include "tprof/causal.h"
#include "tprof/compare.h"
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

// The value of attribute `name` on the element with id `id` ("" when absent).
std::string attr_of(const std::string& html, const std::string& id, const std::string& name) {
  const std::size_t at = html.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const std::size_t end = html.find('>', at);
  const std::size_t a = html.find(" " + name + "=\"", at);
  if (a == std::string::npos || a > end) return "";
  const std::size_t v = a + name.size() + 3;
  return html.substr(v, html.find('"', v) - v);
}

bool has_text(const JsonValue* list, std::string_view text) {
  if (list == nullptr) return false;
  for (const JsonValue& v : list->items()) {
    if (v.text() == text) return true;
  }
  return false;
}

// Checks the timeline's data against the page's attributes and the bounds;
// returns the number of intervals.
std::size_t check_timeline(const std::string& html, const JsonValue& t, const HtmlReportOptions& o) {
  const JsonValue* lanes = t.find("lanes");
  EXPECT_NE(lanes, nullptr);
  if (lanes == nullptr) return 0;
  EXPECT_LE(lanes->items().size(), o.max_timeline_lanes);
  EXPECT_EQ(attr_of(html, "timeline", "data-lanes"), std::to_string(lanes->items().size()));
  const std::int64_t unit = int_of(t.find("unit_ns"));
  const std::int64_t span = int_of(t.find("span_ns"));
  EXPECT_GE(unit, 1);
  std::size_t intervals = 0;
  for (const JsonValue& l : lanes->items()) {
    const auto& iv = l.find("iv")->items();
    EXPECT_EQ(iv.size() % 2, 0u);
    EXPECT_LE(iv.size() / 2, o.max_lane_intervals);
    EXPECT_GE(int_of(l.find("merge_ns")), span / o.timeline_resolution);
    intervals += iv.size() / 2;
    // Gaps and lengths are non-negative and end inside the span (units).
    std::int64_t t_u = 0;
    for (const JsonValue& x : iv) {
      EXPECT_GE(int_of(&x), 0);
      t_u += int_of(&x);
    }
    EXPECT_LE(t_u, span / unit + 2);
    EXPECT_LE(l.find("top")->items().size(), o.timeline_top_events);
  }
  EXPECT_LE(intervals, o.max_timeline_intervals);
  EXPECT_EQ(attr_of(html, "timeline", "data-intervals"), std::to_string(intervals));
  EXPECT_EQ(attr_of(html, "timeline", "data-marks"), std::to_string(t.find("marks")->items().size()));
  return intervals;
}

// Checks the flame graph's nodes: parents first, a child within its parent.
void check_flame(const std::string& html, const JsonValue& f, std::size_t cap) {
  const auto& nodes = f.find("nodes")->items();
  EXPECT_LE(nodes.size(), cap);
  EXPECT_EQ(attr_of(html, "flame", "data-nodes"), std::to_string(nodes.size()));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::int64_t parent = int_of(&nodes[i].items()[0]);
    if (i == 0) {
      EXPECT_EQ(parent, -1);
      continue;
    }
    ASSERT_GE(parent, 0);
    ASSERT_LT(parent, static_cast<std::int64_t>(i));
    EXPECT_LE(int_of(&nodes[i].items()[2]), int_of(&nodes[static_cast<std::size_t>(parent)].items()[2]));
  }
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
  // The header's link, and one per cause that points at an event (zoomed
  // to it and selecting it, src/base/url.h): all of them Perfetto UI
  // opening the trace served by tprof serve.
  const std::size_t look_ats = count_of(h, "<p class=\"look\">");
  ASSERT_GT(look_ats, 0u);
  EXPECT_EQ(count_of(links, "\n"), 1u + look_ats) << links;
  EXPECT_EQ(count_of(links, "href=\"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/64_bf16_warm_eager.json"),
            1u + look_ats)
      << links;
  EXPECT_NE(links.find("href=\"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/64_bf16_warm_eager.json\""),
            std::string::npos)
      << links;
  EXPECT_EQ(count_of(h, "64_bf16_warm_eager.json&amp;visStart="), look_ats);
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

TEST_F(HtmlReportH100, TimelineHasTheLanesAndTheFindings) {
  Result<JsonValue> v = JsonValue::parse(data_blob(*html_));
  ASSERT_TRUE(v);
  const JsonValue* t = v->find("timeline");
  ASSERT_NE(t, nullptr);
  EXPECT_GT(check_timeline(*html_, *t, {}), 0u);
  bool cpu = false, gpu = false;
  for (const JsonValue& l : t->find("lanes")->items()) {
    (l.find("gpu")->as_bool() ? gpu : cpu) = true;
    EXPECT_GT(int_of(l.find("busy_ns")), 0);
    EXPECT_FALSE(l.find("top")->items().empty());
  }
  EXPECT_TRUE(cpu);
  EXPECT_TRUE(gpu);
  EXPECT_EQ(int_of(t->find("lanes_total")), static_cast<std::int64_t>(t->find("lanes")->items().size()));
  // Every cause that points at an event is a mark, on a drawn lane.
  std::size_t look_ats = 0;
  for (std::size_t p = html_->find("<p class=\"look\">"); p != std::string::npos;
       p = html_->find("<p class=\"look\">", p + 1)) {
    ++look_ats;
  }
  const auto& marks = t->find("marks")->items();
  EXPECT_EQ(marks.size(), look_ats);
  ASSERT_FALSE(marks.empty());
  for (const JsonValue& m : marks) {
    EXPECT_GE(int_of(m.find("lane")), 0) << m.find("lane_label")->text();
    EXPECT_GE(int_of(m.find("ts_ns")), 0);
    EXPECT_FALSE(m.find("title")->text().empty());
  }
}

TEST_F(HtmlReportH100, FlameGraphHoldsTheOpTree) {
  Result<JsonValue> v = JsonValue::parse(data_blob(*html_));
  ASSERT_TRUE(v);
  const JsonValue* f = v->find("flame");
  ASSERT_NE(f, nullptr);
  check_flame(*html_, *f, 2000);
  const JsonValue* names = f->find("names");
  EXPECT_TRUE(has_text(names, "all threads"));
  EXPECT_TRUE(has_text(names, "ProfilerStep#*"));
  EXPECT_TRUE(has_text(names, "aten::mm"));
  EXPECT_GT(int_of(&f->find("nodes")->items()[0].items()[2]), 0);
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
  // Encoded into the path, then once more into Perfetto's url argument.
  EXPECT_NE(h.find("url=http://127.0.0.1:9001/a%2520%2522b%2522%2520%253Cc%253E.json"), std::string::npos);
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
  // And from the critical path's names (the kernel is on it).
  EXPECT_TRUE(has_text(v->find("critical_path")->find("names"), evil));
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
  // No steps: one path over the trace, all of it the op's host time.
  const JsonValue& cp = *v->find("critical_path");
  EXPECT_FALSE(cp.find("has_steps")->as_bool());
  ASSERT_EQ(cp.find("steps")->items().size(), 1u);
  const JsonValue& st = cp.find("steps")->items()[0];
  EXPECT_EQ(int_of(st.find("step")), -1);
  EXPECT_EQ(int_of(st.find("length_ns")), 15000);
  EXPECT_EQ(int_of(&st.find("bound_ns")->items()[0]), 15000);
  EXPECT_NE(h.find("No ProfilerSteps: the chain of work"), std::string::npos);
}

TEST(HtmlReport, FlameGraphNestsOpsByPath) {
  Result<Trace> t = read_trace_bytes(R"({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 20, "dur": 30},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 110, "dur": 40},
  {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 160, "dur": 1}]})");
  ASSERT_TRUE(t);
  const std::string h = format_report_html(*t);
  Result<JsonValue> v = JsonValue::parse(data_blob(h));
  ASSERT_TRUE(v);
  const JsonValue& f = *v->find("flame");
  check_flame(h, f, 2000);
  // all → thread → ProfilerStep#* (2 calls) → aten::linear (2) → aten::addmm;
  // aten::relu is 0.5% of the root: kept at the threshold.
  std::vector<std::string> paths;
  const auto& nodes = f.find("nodes")->items();
  std::vector<std::string> path_of;
  for (const JsonValue& n : nodes) {
    const std::int64_t parent = int_of(&n.items()[0]);
    const std::string name(f.find("names")->items()[static_cast<std::size_t>(int_of(&n.items()[1]))].text());
    path_of.push_back(parent < 0 ? name : path_of[static_cast<std::size_t>(parent)] + "/" + name);
    paths.push_back(path_of.back() + " " + std::to_string(int_of(&n.items()[2])) + " " +
                    std::to_string(int_of(&n.items()[3])));
  }
  ASSERT_EQ(paths.size(), 6u);
  EXPECT_EQ(paths[0], "all threads 200000 0");
  EXPECT_EQ(paths[1], "all threads/thread pid 1 tid 1 200000 0");
  EXPECT_EQ(paths[2], "all threads/thread pid 1 tid 1/ProfilerStep#* 200000 2");
  EXPECT_EQ(paths[3], "all threads/thread pid 1 tid 1/ProfilerStep#*/aten::linear 90000 2");
  EXPECT_EQ(paths[4], "all threads/thread pid 1 tid 1/ProfilerStep#*/aten::linear/aten::addmm 30000 1");
  EXPECT_EQ(paths[5], "all threads/thread pid 1 tid 1/ProfilerStep#*/aten::relu 1000 1");
  // Pruned: at 1% aten::relu goes; capped at 3 nodes.
  EXPECT_EQ(JsonValue::parse(data_blob(format_report_html(*t, {.flame_min_fraction = 0.01})))
                ->find("flame")->find("nodes")->items().size(),
            5u);
  EXPECT_EQ(JsonValue::parse(data_blob(format_report_html(*t, {.max_flame_nodes = 3})))
                ->find("flame")->find("nodes")->items().size(),
            3u);
}

// 100,000 events on 80 CPU threads and 4 GPU streams: the page keeps its
// bounds (lanes, intervals per lane and in all, flame nodes, size).
TEST(HtmlReport, LargeTraceStaysBounded) {
  std::string text = R"({"traceEvents": [)";
  std::size_t events = 0;
  auto add = [&](std::string_view cat, const std::string& name, int pid, int tid, std::int64_t ts, std::int64_t dur,
                 std::string_view args = "") {
    text += events++ ? ",\n" : "\n";
    text += R"({"ph": "X", "cat": ")" + std::string(cat) + R"(", "name": ")" + name + R"(", "pid": )" +
            std::to_string(pid) + R"(, "tid": )" + std::to_string(tid) + R"(, "ts": )" + std::to_string(ts) +
            R"(, "dur": )" + std::to_string(dur);
    if (!args.empty()) text += R"(, "args": )" + std::string(args);
    text += "}";
  };
  constexpr int kThreads = 80;
  constexpr int kBlocks = 100;  // per thread; 11 events each: 88,000
  for (int tid = 1; tid <= kThreads; ++tid) {
    for (int b = 0; b < kBlocks; ++b) {
      const std::int64_t t0 = b * 200 + tid;
      add("user_annotation", "block_" + std::to_string(b % 7), 1, tid, t0, 100);
      for (int j = 0; j < 5; ++j) {
        add("cpu_op", "aten::op_" + std::to_string((b + j) % 13), 1, tid, t0 + 2 + j * 19, 15);
        add("cpu_op", "aten::inner_" + std::to_string((b * 7 + j + tid) % 61), 1, tid, t0 + 4 + j * 19, 6);
      }
    }
  }
  for (int k = 0; events < 100000; ++k) {
    const int stream = 7 + k % 4;
    add("kernel", "kernel_" + std::to_string(k % 17), 0, stream, (k / 4) * 7, 1,
        R"({"device": 0, "stream": )" + std::to_string(stream) + "}");
  }
  text += "\n]}";
  Result<Trace> t = read_trace_bytes(text);
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_EQ(t->events.size(), 100000u);

  const HtmlReportOptions o;
  const std::string h = format_report_html(*t, o);
  EXPECT_LT(h.size(), 2u * 1024 * 1024);
  Result<JsonValue> v = JsonValue::parse(data_blob(h));
  ASSERT_TRUE(v) << v.error().to_string();
  const JsonValue& tl = *v->find("timeline");
  EXPECT_EQ(int_of(tl.find("lanes_total")), kThreads + 4);
  EXPECT_EQ(tl.find("lanes")->items().size(), o.max_timeline_lanes);
  check_timeline(h, tl, o);
  check_flame(h, *v->find("flame"), o.max_flame_nodes);
  // No steps: one path over the whole trace, its stretches capped.
  const JsonValue& cp = *v->find("critical_path");
  EXPECT_FALSE(cp.find("has_steps")->as_bool());
  ASSERT_EQ(cp.find("steps")->items().size(), 1u);
  const auto total = static_cast<std::size_t>(int_of(cp.find("segments_total")));
  EXPECT_GT(total, 0u);
  EXPECT_EQ(cp.find("segments")->items().size(), std::min(o.max_path_segments, total));
  // A GPU stream's 3,000 kernels are 6 us apart, over span / 4000: the
  // stream is over its share (40,000 / 64 lanes) and merged coarser.
  const JsonValue& gpu = tl.find("lanes")->items().back();
  ASSERT_TRUE(gpu.find("gpu")->as_bool());
  EXPECT_EQ(int_of(gpu.find("events")), 3000);
  EXPECT_GT(int_of(gpu.find("merge_ns")), int_of(tl.find("span_ns")) / o.timeline_resolution);
  EXPECT_GT(gpu.find("iv")->items().size() / 2, 100u);
  EXPECT_LE(gpu.find("iv")->items().size() / 2, o.max_timeline_intervals / o.max_timeline_lanes);

  // Tighter bounds hold too.
  HtmlReportOptions tight;
  tight.max_timeline_lanes = 10;
  tight.max_lane_intervals = 50;
  tight.max_flame_nodes = 40;
  const std::string small = format_report_html(*t, tight);
  Result<JsonValue> sv = JsonValue::parse(data_blob(small));
  ASSERT_TRUE(sv);
  EXPECT_EQ(sv->find("timeline")->find("lanes")->items().size(), 10u);
  check_timeline(small, *sv->find("timeline"), tight);
  check_flame(small, *sv->find("flame"), 40);
  EXPECT_EQ(sv->find("flame")->find("nodes")->items().size(), 40u);
  std::printf("100k-event synthetic trace: page %zu bytes (tight bounds: %zu)\n", h.size(), small.size());
}

TEST(HtmlReport, TwoTracesAddTheComparison) {
  const std::string dir = std::string(TPROF_TEST_DATA) + "/gpu/h100-torch-2.11/";
  Result<Trace> a = read_trace(dir + "64_bf16_warm_eager.json");
  Result<Trace> b = read_trace(dir + "64_bf16_warm_compile.json");
  ASSERT_TRUE(a && b);
  HtmlReportOptions o;
  o.trace_file_name = "64_bf16_warm_compile.json";
  o.baseline_file_name = "64_bf16_warm_eager.json";
  const std::string h = format_compare_report_html(*a, *b, o);
  EXPECT_TRUE(h.starts_with("<!DOCTYPE html>\n<html"));
  EXPECT_EQ(count_of(h, "</html>"), 1u);
  EXPECT_NE(h.find("<section id=\"compare\" data-compare=\"1\""), std::string::npos);
  EXPECT_NE(h.find("The sections below this one show <b>B</b>"), std::string::npos);
  EXPECT_NE(h.find("<code title=\"aten::addmm\">aten::addmm</code>"), std::string::npos);
  EXPECT_LT(h.find("id=\"compare\""), h.find("id=\"verdict\""));
  // The gate's statistics: the three metrics, the bound one named.
  EXPECT_NE(h.find("data-bound-metric=\"steady\""), std::string::npos);
  EXPECT_NE(h.find("data-metric=\"device\""), std::string::npos);
  EXPECT_NE(h.find("<b>mean step cost (steady state)</b> (the gate's metric)"), std::string::npos);
  EXPECT_NE(h.find("B slower, beyond the noise"), std::string::npos);
  Result<JsonValue> v = JsonValue::parse(data_blob(h));
  ASSERT_TRUE(v) << v.error().to_string();
  const JsonValue* c = v->find("compare");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->find("a")->text(), "64_bf16_warm_eager.json");
  EXPECT_EQ(c->find("b")->text(), "64_bf16_warm_compile.json");
  EXPECT_TRUE(has_text(c->find("new_ops"), "aten::addmm"));
  EXPECT_TRUE(has_text(c->find("vanished_ops"), "aten::mm"));
  EXPECT_FALSE(has_text(c->find("new_ops"), "aten::mm"));
  const Comparison cmp = compare_traces(*a, *b);
  EXPECT_EQ(int_of(c->find("median_a_ns")), cmp.a.median_step_ns);
  EXPECT_EQ(int_of(c->find("median_b_ns")), cmp.b.median_step_ns);
  EXPECT_EQ(int_of(c->find("noise_ns")), cmp.noise_ns);
  // The other sections show B: the same data as B's own page.
  const std::string only_b = format_report_html(*b, {.trace_file_name = "64_bf16_warm_compile.json"});
  Result<JsonValue> vb = JsonValue::parse(data_blob(only_b));
  ASSERT_TRUE(vb);
  EXPECT_EQ(v->find("steps")->items().size(), vb->find("steps")->items().size());
  EXPECT_EQ(v->find("ops")->items().size(), vb->find("ops")->items().size());
  EXPECT_EQ(only_b.find("id=\"compare\""), std::string::npos);
  EXPECT_EQ(vb->find("compare"), nullptr);
}

// Issue 37, item 6: the page carries each step's critical path. On tprof's
// own H100 capture of matmul_add (64, eager), every step's bound-type
// shares sum to its path's length, which is the step's time; the stretches
// read back (gap, duration) to analyze_causal's segments, on their lanes,
// and tile the path.
TEST(HtmlReport, CarriesEachStepsCriticalPath) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-tprof/64_bf16_warm_eager.json");
  ASSERT_TRUE(t) << t.error().to_string();
  const std::string h = format_report_html(*t, {.trace_file_name = "64_bf16_warm_eager.json"});
  Result<JsonValue> v = JsonValue::parse(data_blob(h));
  ASSERT_TRUE(v) << v.error().to_string();
  const JsonValue* cp = v->find("critical_path");
  ASSERT_NE(cp, nullptr);
  EXPECT_TRUE(cp->find("available")->as_bool());
  EXPECT_TRUE(cp->find("has_steps")->as_bool());
  Result<CausalResult> r = analyze_causal(*t);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->steps.size(), 20u);
  constexpr int kBounds = static_cast<int>(BoundType::kCount_);
  const auto& bounds = cp->find("bounds")->items();
  ASSERT_EQ(bounds.size(), static_cast<std::size_t>(kBounds));
  for (int b = 0; b < kBounds; ++b) EXPECT_EQ(bounds[b].text(), bound_type_name(static_cast<BoundType>(b)));
  EXPECT_EQ(bounds[0].text(), "cpu_bound");
  EXPECT_EQ(bounds[5].text(), "data_loading");
  const auto& types = cp->find("edge_types")->items();
  const auto& names = cp->find("names")->items();
  const JsonValue& timeline = *v->find("timeline");
  const auto& lanes = timeline.find("lanes")->items();
  const std::int64_t origin = int_of(timeline.find("start_ns"));

  const auto& steps = cp->find("steps")->items();
  ASSERT_EQ(steps.size(), 20u);
  EXPECT_EQ(int_of(cp->find("steps_total")), 20);
  EXPECT_EQ(int_of(cp->find("steps_marked")), 20);
  const auto& segs = cp->find("segments")->items();
  EXPECT_EQ(int_of(cp->find("segments_total")), static_cast<std::int64_t>(segs.size()));
  EXPECT_EQ(int_of(cp->find("off_timeline")), 0);
  std::size_t k = 0;
  std::int64_t prev_end = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const JsonValue& st = steps[i];
    const StepTime& want = r->steps[i];
    EXPECT_EQ(int_of(st.find("step")), want.step);
    EXPECT_EQ(want.step, static_cast<std::int64_t>(i) + 1);
    const std::int64_t length = int_of(st.find("length_ns"));
    EXPECT_EQ(length, want.path.length_ns());
    EXPECT_EQ(length, want.measured_ns) << "the path spans the step's time";
    EXPECT_GT(length, 0);
    EXPECT_EQ(int_of(st.find("start_ns")), want.path.start_ns - origin);
    const auto& b_ns = st.find("bound_ns")->items();
    ASSERT_EQ(b_ns.size(), static_cast<std::size_t>(kBounds));
    std::int64_t sum = int_of(st.find("unexplained_ns"));
    EXPECT_EQ(sum, 0) << "every path here starts at its step's start";
    for (int b = 0; b < kBounds; ++b) {
      EXPECT_EQ(int_of(&b_ns[b]), want.path.bound_ns[static_cast<std::size_t>(b)]);
      sum += int_of(&b_ns[b]);
    }
    EXPECT_EQ(sum, length) << "step " << want.step << ": the shares sum to the path's length";
    // Launch-bound: host work and launch overhead, a little GPU compute.
    EXPECT_GT(int_of(&b_ns[0]), length / 2);
    EXPECT_GT(int_of(&b_ns[3]), 0);
    EXPECT_GT(int_of(&b_ns[1]), 0);
    // The stretches: analyze_causal's segments of more than 0 ns, in order.
    std::size_t n = 0;
    std::int64_t marked = 0;
    for (const PathSegment& s : want.path.segments) {
      if (s.dur_ns <= 0) continue;
      ++n;
      ASSERT_LT(k, segs.size());
      const auto& x = segs[k++].items();
      ASSERT_EQ(x.size(), 6u);
      const std::int64_t start = prev_end + int_of(&x[1]);
      prev_end = start + int_of(&x[2]);
      EXPECT_EQ(start, s.start_ns - origin);
      EXPECT_EQ(int_of(&x[2]), s.dur_ns);
      EXPECT_EQ(types[static_cast<std::size_t>(int_of(&x[3]))].text(), edge_type_name(s.type));
      EXPECT_EQ(int_of(&x[4]), static_cast<int>(s.bound));
      const std::int64_t name = int_of(&x[5]);
      if (s.event == kNoIndex) {
        EXPECT_EQ(name, -1);
      } else {
        ASSERT_GE(name, 0);
        EXPECT_EQ(names[static_cast<std::size_t>(name)].text(), t->name(s.event));
      }
      // On the lane of the event whose time it is: device work, launches
      // and stream gaps on the GPU stream, host time on the thread.
      const std::int64_t lane = int_of(&x[0]);
      ASSERT_GE(lane, 0);
      ASSERT_LT(lane, static_cast<std::int64_t>(lanes.size()));
      const bool gpu = s.type == EdgeType::kDevice || s.type == EdgeType::kLaunch || s.type == EdgeType::kStream ||
                       s.type == EdgeType::kStreamWait;
      EXPECT_EQ(lanes[static_cast<std::size_t>(lane)].find("gpu")->as_bool(), gpu) << edge_type_name(s.type);
      // Inside the step's window.
      EXPECT_GE(start, int_of(st.find("start_ns")));
      EXPECT_LE(start + s.dur_ns, int_of(st.find("start_ns")) + length);
      marked += s.dur_ns;
    }
    EXPECT_EQ(int_of(st.find("segments")), static_cast<std::int64_t>(n));
    EXPECT_EQ(int_of(st.find("segments_total")), static_cast<std::int64_t>(n));
    EXPECT_EQ(marked, length) << "step " << want.step << ": the marked stretches tile the path";
  }
  EXPECT_EQ(k, segs.size());
  // The page: the section right after the steps' bars, the counts the
  // page's script and the Chromium test read.
  EXPECT_LT(h.find("<section id=\"where\">"), h.find("<section id=\"critical\">"));
  EXPECT_LT(h.find("<section id=\"critical\">"), h.find("<section id=\"causes\""));
  EXPECT_EQ(attr_of(h, "critical-chart", "data-steps"), "20");
  EXPECT_EQ(attr_of(h, "critical-chart", "data-segments"), std::to_string(segs.size()));
  EXPECT_EQ(attr_of(h, "critical-chart", "data-segments-total"), std::to_string(segs.size()));
  EXPECT_EQ(attr_of(h, "timeline", "data-critical"), std::to_string(segs.size()));
  EXPECT_EQ(h.find("class=\"capped\""), std::string::npos);
  std::printf("critical path: 20 steps, %zu stretches\n", segs.size());
}

TEST(HtmlReport, CriticalPathStretchesAreCappedAndSaySo) {
  Result<Trace> t = read_trace(std::string(TPROF_TEST_DATA) + "/gpu/h100-tprof/64_bf16_warm_eager.json");
  ASSERT_TRUE(t);
  const std::string full = format_report_html(*t);
  const std::string all = attr_of(full, "critical-chart", "data-segments-total");
  HtmlReportOptions o;
  o.max_path_segments = 50;
  const std::string h = format_report_html(*t, o);
  Result<JsonValue> v = JsonValue::parse(data_blob(h));
  ASSERT_TRUE(v);
  const JsonValue& cp = *v->find("critical_path");
  EXPECT_EQ(cp.find("segments")->items().size(), 50u);
  EXPECT_EQ(std::to_string(int_of(cp.find("segments_total"))), all);
  // Every step keeps its shares; the first ones keep their stretches.
  const auto& steps = cp.find("steps")->items();
  ASSERT_EQ(steps.size(), 20u);
  const std::int64_t marked = int_of(cp.find("steps_marked"));
  EXPECT_GT(marked, 0);
  EXPECT_LT(marked, 20);
  std::int64_t kept = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::int64_t n = int_of(steps[i].find("segments")), total = int_of(steps[i].find("segments_total"));
    kept += n;
    if (static_cast<std::int64_t>(i) < marked) {
      EXPECT_EQ(n, total);
    } else if (static_cast<std::int64_t>(i) > marked) {
      EXPECT_EQ(n, 0);
    }
  }
  EXPECT_EQ(kept, 50);
  EXPECT_NE(h.find("<b class=\"capped\">The path is marked on the timeline for the first " + std::to_string(marked) +
                   " of 20 steps only (50 of " + all + " stretches).</b>"),
            std::string::npos);
  EXPECT_EQ(attr_of(h, "timeline", "data-critical"), "50");
}

TEST(HtmlReport, EscapesHtml) {
  EXPECT_EQ(html_escape(R"(<a href="x">&'</a>)"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain"), "plain");
}

}  // namespace
}  // namespace tprof
