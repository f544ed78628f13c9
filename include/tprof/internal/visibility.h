// tprof/internal/visibility.h — what libtprof_capture.so exports (not API).
//
// base, trace and capture compile with hidden visibility: in the shared
// build (docs/install.md, "Shared library") only what the public headers
// declare between TPROF_API_BEGIN and TPROF_API_END is exported, and a
// static copy linked into a plugin exports nothing else of tprof either.
// In a program that includes these headers the markers change nothing,
// except under its own `#pragma GCC visibility push(hidden)`, which would
// make tprof's symbols unreachable in libtprof_capture.so.
#pragma once

#if defined(__GNUC__)
#define TPROF_API_BEGIN _Pragma("GCC visibility push(default)")
#define TPROF_API_END _Pragma("GCC visibility pop")
#else
#define TPROF_API_BEGIN
#define TPROF_API_END
#endif
