// Percent-encoding and Perfetto UI links (url.h).
#include "src/base/url.h"

namespace tprof::internal {

namespace {

constexpr char kHex[] = "0123456789ABCDEF";

bool unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

void append_escaped(std::string* out, char c) {
  const auto u = static_cast<unsigned char>(c);
  out->push_back('%');
  out->push_back(kHex[u >> 4]);
  out->push_back(kHex[u & 15]);
}

void append_arg(std::string* out, std::string_view key, std::int64_t v) {
  *out += '&';
  *out += key;
  *out += '=';
  *out += std::to_string(v);
}

}  // namespace

std::string percent_encode(std::string_view s, bool keep_slash) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (unreserved(c) || (keep_slash && c == '/')) {
      out.push_back(c);
    } else {
      append_escaped(&out, c);
    }
  }
  return out;
}

std::string perfetto_link(std::string_view trace_url, const PerfettoView& view) {
  std::string link(kPerfettoUi);
  link += "?url=";
  for (const char c : trace_url) {
    if (unreserved(c) || c == ':' || c == '/') {
      link.push_back(c);
    } else {
      append_escaped(&link, c);
    }
  }
  if (view.vis_start_ns >= 0 && view.vis_end_ns > view.vis_start_ns) {
    append_arg(&link, "visStart", view.vis_start_ns);
    append_arg(&link, "visEnd", view.vis_end_ns);
  }
  if (view.ts_ns >= 0) {
    append_arg(&link, "ts", view.ts_ns);
    if (view.dur_ns >= 0) append_arg(&link, "dur", view.dur_ns);
  }
  return link;
}

}  // namespace tprof::internal
