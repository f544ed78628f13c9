// Text that is safe to print: what tprof writes as text (tables, reports)
// quotes names from trace files, which can hold anything. A terminal would
// obey an ESC sequence in a kernel name; a pager chokes on invalid UTF-8.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tprof::internal {

// `text` with every control character other than newline and tab (C0, DEL
// and the C1 range U+0080..U+009F) written as a visible escape ("\x1b",
// "\u009b"), and every byte that is not well-formed UTF-8 as U+FFFD. Text
// without such bytes comes back unchanged (torch's tables stay byte for byte).
std::string safe_text(std::string_view text);

// True when safe_text(text) would change it.
bool needs_safe_text(std::string_view text);

// safe_text for JSON (and pages that carry JSON for a script): what it
// rewrites, it writes as a JSON escape, valid inside a JSON string where
// such bytes can only be: a control character as "\u001b", "\u007f",
// "\u009b", a byte that is not UTF-8 as "\ufffd". Valid JSON stays valid
// (safe_text's "\x7f" is not JSON). What tprof's JSON writer produces never
// needs it (its escaper escapes all of these); it guards what it does not.
std::string safe_json_text(std::string_view text);

// Escapes & < > " ' for HTML text and attribute values (the one HTML
// escaper: tprof report's pages, tprof serve's index).
std::string html_escape(std::string_view text);

// Appends code point `cp` (at most 0x10FFFF; the caller checks) as UTF-8.
void append_utf8(std::string* out, std::uint32_t cp);

}  // namespace tprof::internal
