// Replays a fuzz corpus through LLVMFuzzerTestOneInput without libFuzzer
// (g++ builds; ctest). For every file given, and every file in a directory
// given, it runs the file itself, then deterministic variants of it: prefixes
// (cut points spread over the file), bit flips, replaced bytes, deletions,
// duplicated ranges, and inserted quotes, braces, brackets, commas,
// backslashes and NULs. The variants come from a PRNG seeded by the file's
// bytes, so every run replays the same inputs; `--print-input` writes each
// input's description to stderr before it runs, so a crash names its input.
//
//   reader_fuzzer tests/fuzz/corpus            # ctest
//   reader_fuzzer --print-input crash-1234     # one file, e.g. from libFuzzer
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/sanitizers.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

// Sanitizer builds (`make test` runs the unit label under ASan+UBSan, the CLI
// and the fuzz targets at -O0) are several times slower, so they replay fewer
// variants.
using tprof::testing::kSanitized;

// Per file: this many cuts spread evenly (every byte of a shorter file; the
// truncation test cuts real traces far more densely) and random mutations.
// A target whose every input is costly sets its own counts (tprof_add_fuzzer's
// CUTS and MUTATIONS): the release build's, then the sanitizer build's (one
// number: both).
#ifndef TPROF_REPLAY_CUTS
#define TPROF_REPLAY_CUTS 256, 32
#endif
#ifndef TPROF_REPLAY_MUTATIONS
#define TPROF_REPLAY_MUTATIONS 1024, 64
#endif
constexpr std::size_t kCutCounts[] = {TPROF_REPLAY_CUTS};
constexpr int kMutationCounts[] = {TPROF_REPLAY_MUTATIONS};
constexpr std::size_t kCuts = kSanitized ? kCutCounts[std::size(kCutCounts) - 1] : kCutCounts[0];
constexpr int kRandomMutations = kSanitized ? kMutationCounts[std::size(kMutationCounts) - 1] : kMutationCounts[0];

struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n) for n > 0.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

std::uint64_t fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

bool g_print_input = false;
std::size_t g_runs = 0;

void run_one(const std::string& label, std::string_view input) {
  if (g_print_input) std::fprintf(stderr, "input: %s (%zu bytes)\n", label.c_str(), input.size());
  // A heap copy of exactly the input's size, so ASan sees any read past its end.
  std::vector<std::uint8_t> copy(input.begin(), input.end());
  LLVMFuzzerTestOneInput(copy.data(), copy.size());
  ++g_runs;
}

std::string mutate(std::string s, SplitMix64* rng, std::string* what) {
  static constexpr std::string_view kInserts[] = {"\"", "{", "}", "[", "]", ",", ":", "\\", std::string_view("\0", 1),
                                                  "\"}", "{\"", "]}", "1e999", "-", "\\u"};
  const std::size_t n = s.size();
  switch (rng->below(n == 0 ? 1 : 6)) {
    case 0: {
      const std::string_view ins = kInserts[rng->below(std::size(kInserts))];
      const std::size_t at = rng->below(n + 1);
      s.insert(at, ins);
      *what = "insert " + std::to_string(ins.size()) + " bytes at " + std::to_string(at);
      break;
    }
    case 1: {
      const std::size_t at = rng->below(n);
      s[at] = static_cast<char>(s[at] ^ (1u << rng->below(8)));
      *what = "flip a bit at " + std::to_string(at);
      break;
    }
    case 2: {
      const std::size_t at = rng->below(n);
      s[at] = static_cast<char>(rng->next());
      *what = "replace the byte at " + std::to_string(at);
      break;
    }
    case 3: {
      const std::size_t at = rng->below(n);
      const std::size_t len = 1 + rng->below(std::min<std::size_t>(n - at, 64));
      s.erase(at, len);
      *what = "delete " + std::to_string(len) + " bytes at " + std::to_string(at);
      break;
    }
    case 4: {
      const std::size_t at = rng->below(n);
      const std::size_t len = 1 + rng->below(std::min<std::size_t>(n - at, 256));
      const std::size_t to = rng->below(n + 1);
      s.insert(to, s.substr(at, len));
      *what = "copy " + std::to_string(len) + " bytes from " + std::to_string(at) + " to " + std::to_string(to);
      break;
    }
    default: {
      const std::size_t at = rng->below(n + 1);
      s.resize(at);
      *what = "cut at " + std::to_string(at);
      break;
    }
  }
  return s;
}

void replay_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string name = path.string();
  run_one(name, bytes);
  const std::size_t cuts = std::min(kCuts, bytes.size());
  for (std::size_t i = 0; i < cuts; ++i) {
    const std::size_t cut = i * bytes.size() / cuts;
    run_one(name + " cut at " + std::to_string(cut), std::string_view(bytes).substr(0, cut));
  }
  SplitMix64 rng{fnv1a(bytes)};
  for (int i = 0; i < kRandomMutations; ++i) {
    std::string what;
    std::string input = mutate(bytes, &rng, &what);
    // Every fourth input stacks a second mutation on the first.
    if (i % 4 == 3) {
      std::string second;
      input = mutate(std::move(input), &rng, &second);
      what += ", then " + second;
    }
    run_one(name + ": " + what, input);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--print-input") {
      g_print_input = true;
      continue;
    }
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
    } else if (std::filesystem::is_regular_file(arg, ec)) {
      files.emplace_back(arg);
    } else {
      std::fprintf(stderr, "%s: %s: not a file or directory\n", argv[0], arg.c_str());
      return 2;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: %s [--print-input] CORPUS_DIR_OR_FILE...\n(no input files found)\n", argv[0]);
    return 2;
  }
  // Directory order is unspecified; sorting keeps runs identical.
  std::sort(files.begin(), files.end());
  for (const auto& f : files) replay_file(f);
  std::printf("%s: %zu files, %zu inputs, no property failed\n", argv[0], files.size(), g_runs);
  return 0;
}
