// Fuzz target: tprof serve's request head parser (parse_request_head) and
// its request-path decoding (decode_request_path, percent_encode_path),
// src/serve/server.h. The input is what a client sends; as the server does,
// the head is what comes before the first blank line ("\r\n\r\n"), or the
// whole input when there is none.
//
// Properties:
//   - the status is 0 (well-formed) or one of 400, 414, 431, 505;
//   - the parser accepts exactly what an independent reading of RFC 9112
//     and RFC 9110 accepts, within the server's limits (8 KiB request line,
//     16 KiB head, 100 fields): one "method SP target SP HTTP/1.x" line,
//     "token: value" fields with no control byte but tab in the value, no
//     lone CR or LF, at most one Host (exactly one for HTTP/1.1) whose value
//     is uri-host [":" port] with a port of 1..65535 (five digits at most,
//     not empty; issue 36, defect 11). The bracketed IP literal
//     is read as loosely as the server reads it (hex digits, ':' and '.'):
//     the server only compares it with "::1";
//   - an accepted head, written again in its canonical form, parses to the
//     same method, target and Host;
//   - a path that decodes has no empty, dot-led or hidden segment, no
//     control byte, '\\' or encoded '/', and percent_encode_path of it
//     decodes back to it.
// Seeds: tests/fuzz/corpus_http (requests of browsers, Perfetto UI, curl,
// and the malformed ones of tests/unit/serve_test.cc); http.dict.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "src/serve/server.h"

namespace {

using tprof::internal::decode_request_path;
using tprof::internal::DecodedPath;
using tprof::internal::parse_request_head;
using tprof::internal::PathCheck;
using tprof::internal::RequestHead;

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "http_fuzzer: property failed: %s (%s)\n", what, detail.c_str());
  std::abort();
}

// The server's limits (src/serve/server.cc).
constexpr std::size_t kMaxRequestLine = 8 * 1024;
constexpr std::size_t kMaxHead = 16 * 1024;
constexpr int kMaxHeaderFields = 100;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_hexdig(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
// RFC 9110 5.6.2: tchar.
bool is_tchar(char c) { return is_alpha(c) || is_digit(c) || (c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c)); }
bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

// RFC 3986 3.2.2 reg-name (IPv4address is one): unreserved, pct-encoded, sub-delims.
bool is_reg_name(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (is_alpha(c) || is_digit(c) || std::strchr("-._~!$&'()*+,;=", c) != nullptr) {
      if (c == '\0') return false;
      continue;
    }
    if (c == '%' && i + 2 < s.size() && is_hexdig(s[i + 1]) && is_hexdig(s[i + 2])) {
      i += 2;
      continue;
    }
    return false;
  }
  return true;
}

// RFC 3986 port = *DIGIT; the server takes a TCP port, 1..65535, in at most
// five digits, and refuses an empty one (host ":", which no client sends;
// docs/serve.md).
bool is_port(std::string_view s) {
  if (s.empty() || s.size() > 5 || !std::all_of(s.begin(), s.end(), is_digit)) return false;
  const std::string padded = std::string(5 - s.size(), '0') + std::string(s);
  return padded >= "00001" && padded <= "65535";
}

// RFC 9110 7.2: Host = uri-host [ ":" port ].
bool is_host_value(std::string_view v) {
  std::string_view rest;
  if (!v.empty() && v.front() == '[') {
    const std::size_t close = v.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    const std::string_view literal = v.substr(1, close - 1);
    if (!std::all_of(literal.begin(), literal.end(), [](char c) { return is_hexdig(c) || c == ':' || c == '.'; })) {
      return false;
    }
    rest = v.substr(close + 1);
  } else {
    const std::size_t colon = v.find(':');
    if (!is_reg_name(v.substr(0, colon))) return false;
    rest = colon == std::string_view::npos ? std::string_view() : v.substr(colon);
  }
  if (rest.empty()) return true;
  return rest.front() == ':' && is_port(rest.substr(1));
}

// The reference: whether a head (without its blank line) is one the server
// should take, and its method, target and Host.
struct Reading {
  bool ok = false;
  std::string method, target, host;
  bool has_host = false;
};

Reading read_reference(std::string_view head) {
  Reading r;
  for (std::size_t i = 0; i < head.size(); ++i) {  // CRLF only, as pairs
    if (head[i] == '\r' && (i + 1 == head.size() || head[i + 1] != '\n')) return r;
    if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) return r;
  }
  if (head.size() > kMaxHead) return r;
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0;;) {
    const std::size_t eol = head.find("\r\n", pos);
    lines.push_back(head.substr(pos, eol == std::string_view::npos ? head.npos : eol - pos));
    if (eol == std::string_view::npos) break;
    pos = eol + 2;
  }
  if (lines.size() > 1 && lines.back().empty()) lines.pop_back();  // one CRLF may end the last field
  const std::string_view line = lines[0];
  if (line.size() > kMaxRequestLine) return r;
  const std::size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return r;
  const std::size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) return r;
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!is_token(method) || target.empty()) return r;
  for (const char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) return r;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return r;
  if (lines.size() - 1 > static_cast<std::size_t>(kMaxHeaderFields)) return r;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string_view field = lines[i];
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos || !is_token(field.substr(0, colon))) return r;
    std::string_view value = field.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    for (const char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) return r;
    }
    std::string name(field.substr(0, colon));
    for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (name == "host") {
      if (r.has_host || !is_host_value(value)) return r;
      r.has_host = true;
      r.host = std::string(value);
    }
  }
  if (version == "HTTP/1.1" && !r.has_host) return r;
  r.ok = true;
  r.method = std::string(method);
  r.target = std::string(target);
  return r;
}

std::string show(std::string_view bytes) {
  std::string out;
  for (const char c : bytes.substr(0, 600)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out.push_back(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  return out;
}

void check_path(std::string_view target) {
  const std::string_view path = target.substr(0, target.find_first_of("?#"));
  const DecodedPath d = decode_request_path(path);
  if (d.check != PathCheck::kOk) return;
  if (d.rel_path.empty()) property_failed("a path decodes to nothing", show(path));
  for (std::size_t pos = 0;;) {
    const std::size_t slash = d.rel_path.find('/', pos);
    const std::string_view segment =
        std::string_view(d.rel_path).substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    if (segment.empty() || segment.front() == '.') property_failed("an empty or dot-led segment is served", show(path));
    for (const char c : segment) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f || c == '\\') property_failed("a control byte or '\\' in a served path", show(path));
    }
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  // Each '/' of the decoded path was a '/' of the target, never a %2f.
  if (std::count(d.rel_path.begin(), d.rel_path.end(), '/') != std::count(path.begin(), path.end(), '/') - 1) {
    property_failed("an encoded '/' became a separator", show(path));
  }
  const DecodedPath again = decode_request_path("/" + tprof::internal::percent_encode_path(d.rel_path));
  if (again.check != PathCheck::kOk || again.rel_path != d.rel_path) {
    property_failed("percent_encode_path does not decode back", show(d.rel_path));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view head(reinterpret_cast<const char*>(data), size);
  head = head.substr(0, head.find("\r\n\r\n"));

  const RequestHead req = parse_request_head(head);
  if (req.status != 0 && req.status != 400 && req.status != 414 && req.status != 431 && req.status != 505) {
    property_failed("an unexpected status", std::to_string(req.status) + " for " + show(head));
  }
  const Reading ref = read_reference(head);
  if ((req.status == 0) != ref.ok) {
    property_failed(ref.ok ? "a well-formed head is refused" : "a malformed head is accepted",
                    std::to_string(req.status) + " for " + show(head));
  }
  if (req.status != 0) return 0;
  if (req.method != ref.method || req.target != ref.target || req.has_host != ref.has_host ||
      req.host != ref.host) {
    property_failed("the head is read differently", req.method + " " + req.target + " host " + req.host + " vs " +
                                                        ref.method + " " + ref.target + " host " + ref.host);
  }

  const std::string canonical =
      req.method + " " + req.target + (req.has_host ? " HTTP/1.1\r\nHost: " + req.host : std::string(" HTTP/1.0"));
  const RequestHead again = parse_request_head(canonical);
  if (again.status != 0 || again.method != req.method || again.target != req.target || again.host != req.host) {
    property_failed("the canonical form of an accepted head reads differently", show(canonical));
  }
  if (!req.target.empty() && req.target.front() == '/') check_path(req.target);
  return 0;
}
