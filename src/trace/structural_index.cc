#include "src/trace/structural_index.h"

#include <immintrin.h>

#include <cstring>

namespace tprof::internal {

namespace {

// Per-64-byte-block bit masks (bit i = byte i).
struct Masks {
  std::uint64_t quote;
  std::uint64_t backslash;
  std::uint64_t structural;  // { } [ ] : ,
};

inline std::uint64_t movemask16(__m128i v) { return static_cast<std::uint32_t>(_mm_movemask_epi8(v)) & 0xffffu; }

inline std::uint64_t class16(__m128i v, char a, char b) {
  return movemask16(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(a)), _mm_cmpeq_epi8(v, _mm_set1_epi8(b))));
}

Masks classify_sse2(const char* p) {
  Masks m{0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
    const int shift = 16 * i;
    m.quote |= movemask16(_mm_cmpeq_epi8(v, _mm_set1_epi8('"'))) << shift;
    m.backslash |= movemask16(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))) << shift;
    m.structural |= (class16(v, '{', '}') | class16(v, '[', ']') | class16(v, ':', ',')) << shift;
  }
  return m;
}

__attribute__((target("avx2"))) inline std::uint64_t movemask32(__m256i v) {
  return static_cast<std::uint32_t>(_mm256_movemask_epi8(v));
}

__attribute__((target("avx2"))) inline __m256i eq32(__m256i v, char c) {
  return _mm256_cmpeq_epi8(v, _mm256_set1_epi8(c));
}

__attribute__((target("avx2"), always_inline)) inline Masks classify_avx2(const char* p) {
  Masks m{0, 0, 0};
  for (int i = 0; i < 2; ++i) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * i));
    const int shift = 32 * i;
    m.quote |= movemask32(eq32(v, '"')) << shift;
    m.backslash |= movemask32(eq32(v, '\\')) << shift;
    m.structural |= movemask32(_mm256_or_si256(
                        _mm256_or_si256(_mm256_or_si256(eq32(v, '{'), eq32(v, '}')),
                                        _mm256_or_si256(eq32(v, '['), eq32(v, ']'))),
                        _mm256_or_si256(eq32(v, ':'), eq32(v, ','))))
                    << shift;
  }
  return m;
}

// AVX-512: the compares give bit masks directly.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline std::uint64_t eq64(__m512i v, char c) {
  return static_cast<std::uint64_t>(_mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(c)));
}

__attribute__((target("avx512f,avx512bw"), always_inline)) inline Masks classify_avx512(const char* p) {
  const __m512i v = _mm512_loadu_si512(p);
  return Masks{eq64(v, '"'), eq64(v, '\\'),
               eq64(v, '{') | eq64(v, '}') | eq64(v, '[') | eq64(v, ']') | eq64(v, ':') | eq64(v, ',')};
}

// Running XOR from bit 0 upwards: bit i = parity of set bits 0..i.
inline std::uint64_t prefix_xor(std::uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

// Writes the positions of the set bits of `bits` (plus `offset`) at out[n..].
// Unconditional stores of eight at a time: token counts per block vary, and
// a data-dependent loop exit per token mispredicts.
inline std::size_t flatten(std::uint64_t bits, std::uint32_t offset, std::uint32_t* out, std::size_t n) {
  const int count = __builtin_popcountll(bits);
  std::uint32_t* w = out + n;
  while (bits != 0) {
    for (int i = 0; i < 8; ++i) {
      w[i] = offset + static_cast<std::uint32_t>(__builtin_ctzll(bits | (1ull << 63)));
      bits &= bits - 1;
    }
    w += 8;
  }
  return n + static_cast<std::size_t>(count);
}

struct State {
  std::uint64_t in_string;
  bool escape_carry;
};

// The token bits of one 64-byte block, from its masks.
inline __attribute__((always_inline)) std::uint64_t block_tokens(Masks m, State* st) {
  // Escaped characters: each backslash that is not itself escaped escapes
  // the next byte. Backslashes are rare, so walk them one by one.
  std::uint64_t escaped = st->escape_carry ? 1 : 0;
  st->escape_carry = false;
  for (std::uint64_t b = m.backslash & ~escaped; b != 0;) {
    const int i = __builtin_ctzll(b);
    b &= b - 1;
    if ((escaped >> i) & 1) continue;
    if (i == 63) {
      st->escape_carry = true;
    } else {
      escaped |= 1ull << (i + 1);
      b &= ~(1ull << (i + 1));
    }
  }
  const std::uint64_t quote = m.quote & ~escaped;
  // Inside a string: from an opening quote (inclusive) to its closing quote (exclusive).
  const std::uint64_t in_string = prefix_xor(quote) ^ st->in_string;
  st->in_string = static_cast<std::uint64_t>(static_cast<std::int64_t>(in_string) >> 63);
  // A backslash outside a string is a token too: no valid JSON has one, and
  // the walker must see it to hand the event to the cursor (which reports it).
  return ((m.structural | m.backslash) & ~in_string) | quote;
}

inline __attribute__((always_inline)) std::size_t index_block(Masks m, State* st, std::uint32_t offset,
                                                               std::uint32_t* out, std::size_t n) {
  return flatten(block_tokens(m, st), offset, out, n);
}

// The same loop twice, once compiled for AVX2: classify_avx2 can only be
// inlined into a function built for AVX2.
#define TPROF_INDEX_LOOP(classify)                                                          \
  std::size_t n = 0;                                                                       \
  const char* p = begin;                                                                   \
  for (; end - p >= 64; p += 64) {                                                         \
    n = index_block(classify(p), st, static_cast<std::uint32_t>(p - base), out, n);        \
  }                                                                                        \
  if (p < end) {                                                                           \
    /* The last partial block, padded with spaces (which make no tokens). */               \
    alignas(64) char tail[64];                                                             \
    const std::size_t avail = static_cast<std::size_t>(end - p);                           \
    std::memset(tail, ' ', sizeof tail);                                                   \
    std::memcpy(tail, p, avail);                                                           \
    n = index_block(classify(tail), st, static_cast<std::uint32_t>(p - base), out, n);     \
  }                                                                                        \
  return n

// Flattening with compress: sixteen positions per instruction. The register
// form (then a plain store) is used on purpose: compress straight to memory
// is microcoded and slow on some CPUs (AMD Zen 4).
__attribute__((target("avx512f,avx512bw"))) inline std::size_t flatten_avx512(std::uint64_t bits, std::uint32_t offset,
                                                                              std::uint32_t* out, std::size_t n) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int q = 0; q < 4 && bits != 0; ++q, bits >>= 16) {
    const __mmask16 m = static_cast<__mmask16>(bits & 0xffff);
    if (m == 0) continue;
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(offset + 16 * q)), iota);
    _mm512_storeu_si512(out + n, _mm512_maskz_compress_epi32(m, idx));
    n += static_cast<std::size_t>(__builtin_popcount(m));
  }
  return n;
}

__attribute__((target("avx512f,avx512bw"))) std::size_t index_avx512(const char* begin, const char* end,
                                                                      const char* base, std::uint32_t* out,
                                                                      State* st) {
  std::size_t n = 0;
  const char* p = begin;
  alignas(64) char tail[64];
  for (;;) {
    const char* block = p;
    const std::size_t avail = static_cast<std::size_t>(end - p);
    if (avail == 0) break;
    if (avail < 64) {
      std::memset(tail, ' ', sizeof tail);
      std::memcpy(tail, p, avail);
      block = tail;
    }
    const std::uint64_t tokens = block_tokens(classify_avx512(block), st);
    n = flatten_avx512(tokens, static_cast<std::uint32_t>(p - base), out, n);
    if (avail <= 64) break;
    p += 64;
  }
  return n;
}

__attribute__((target("avx2"))) std::size_t index_avx2(const char* begin, const char* end, const char* base,
                                                        std::uint32_t* out, State* st) {
  TPROF_INDEX_LOOP(classify_avx2);
}

std::size_t index_sse2(const char* begin, const char* end, const char* base, std::uint32_t* out, State* st) {
  TPROF_INDEX_LOOP(classify_sse2);
}

#undef TPROF_INDEX_LOOP

}  // namespace

StructuralIndexer::Level StructuralIndexer::best_level() {
  static const Level level = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") ? kAvx512
                             : __builtin_cpu_supports("avx2")                                        ? kAvx2
                                                                                                     : kSse2;
  return level;
}

StructuralIndexer::StructuralIndexer() : level_(best_level()) {}

std::size_t StructuralIndexer::index(const char* begin, const char* end, const char* base, std::uint32_t* out) {
  State st{in_string_, escape_carry_};
  const std::size_t n = level_ == kAvx512 ? index_avx512(begin, end, base, out, &st)
                        : level_ == kAvx2 ? index_avx2(begin, end, base, out, &st)
                                          : index_sse2(begin, end, base, out, &st);
  in_string_ = st.in_string;
  escape_carry_ = st.escape_carry;
  return n;
}

}  // namespace tprof::internal
