// Python string formatting as torch's table code uses it: '{:.3f}', '{: >12}',
// len() and slicing by Unicode code points.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tprof::internal {

// Number of code points in UTF-8 text (continuation bytes are not counted).
std::size_t py_len(std::string_view s);
// The first `n` code points of `s` (Python's s[:n]).
std::string_view py_head(std::string_view s, std::size_t n);
// The last `n` code points of `s` (Python's s[len(s)-n:]).
std::string_view py_tail(std::string_view s, std::size_t n);
// format(s, ' >w') / ' <w': pads with spaces to w code points.
void append_right(std::string* out, std::string_view s, std::size_t w);
void append_left(std::string* out, std::string_view s, std::size_t w);

// '{:.Nf}'.format(v): correctly rounded, like Python.
std::string fixed(double v, int decimals);

// torch's _format_time(µs): "1.234s" / "1.234ms" / "1.234us".
std::string format_time_us(double us);
// torch's _format_time_share: "12.34%", "NaN" when the total is 0.
std::string format_share(double part, double total);
// torch 1.13's _format_memory: "1.50 Gb" / "1.50 Mb" / "1.50 Kb" / "12 b".
std::string format_memory(std::int64_t bytes);

}  // namespace tprof::internal
