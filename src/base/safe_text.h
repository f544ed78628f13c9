// Text that is safe to print: what tprof writes as text (tables, reports)
// quotes names from trace files, which can hold anything. A terminal would
// obey an ESC sequence in a kernel name; a pager chokes on invalid UTF-8.
#pragma once

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

// Escapes & < > " ' for HTML text and attribute values (the one HTML
// escaper: tprof report's pages, tprof serve's index).
std::string html_escape(std::string_view text);

}  // namespace tprof::internal
