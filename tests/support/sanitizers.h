// Whether this test binary runs under a sanitizer (ASan, UBSan-with-ASan,
// TSan): `make test` runs the unit label that way, several times slower (the
// ASan build compiles the main libraries at -O1, the rest at -O0), so large
// cases scale down (and a few skip what the sanitizer runtime cannot do).
#pragma once

namespace tprof::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace tprof::testing
