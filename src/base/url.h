// URLs tprof writes: percent-encoding and the links that open a trace in
// Perfetto UI. `tprof report` (its header link, the causes' events, the
// timeline's event under the cursor) and `tprof serve` (its index and the
// links it prints) build every Perfetto link with perfetto_link(), so they
// encode alike (docs/report.md, "The Perfetto link").
//
//   std::string url = "http://127.0.0.1:9001/" + percent_encode("my trace.json");
//   std::string link = perfetto_link(url, {.vis_start_ns = a, .vis_end_ns = b});
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tprof::internal {

// `s` with every byte but RFC 3986's unreserved characters (A-Z a-z 0-9
// - . _ ~), and '/' when keep_slash, written %XX (upper-case hex).
std::string percent_encode(std::string_view s, bool keep_slash = false);

// Perfetto UI's deep-link arguments (ui/src/public/route_schema.ts and the
// dev.perfetto.DeeplinkQuerystring plugin): after the trace loads it zooms to
// [visStart, visEnd] when visStart < visEnd and both lie within the trace,
// and selects the slice whose ts (and dur, when given) match exactly. Times
// are the trace's own, in ns (a JSON trace's µs × 1000). Negative: not given.
struct PerfettoView {
  std::int64_t vis_start_ns = -1;
  std::int64_t vis_end_ns = -1;
  std::int64_t ts_ns = -1;
  std::int64_t dur_ns = -1;
};

inline constexpr std::string_view kPerfettoUi = "https://ui.perfetto.dev/#!/";

// The link that opens the trace at `trace_url` (an absolute URL whose path
// is already percent-encoded) in Perfetto UI, at `view`.
// Perfetto UI reads its arguments from the fragment "#!/?a=1&b=2": it parses
// them with new URL() (a '#' would end them), turns '+' into a space and
// splits on '&' and '=' before decoding each value once with
// decodeURIComponent (ui/src/core/router.ts, Router.parseQueryString). So
// the url value is percent-encoded once more, keeping only the unreserved
// characters, ':' and '/' (which mean the same decoded or not): a '%' of the
// encoded path becomes "%25" and decodes back to itself. The view's numbers
// are appended as "&visStart=N&visEnd=N&ts=N&dur=N" (digits only; the
// report's page appends the same arguments in the same order).
std::string perfetto_link(std::string_view trace_url, const PerfettoView& view = {});

}  // namespace tprof::internal
