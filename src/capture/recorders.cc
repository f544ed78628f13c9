// The rendezvous of the recorder copies in a process: an ELF note.
//
// Each copy of recorder.o pulls in this file, whose note (kRecorderNote)
// the linker puts in the PT_NOTE segment of whatever it links: the program,
// a plugin, libtprof_capture.so. dl_iterate_phdr lists every object the
// loader has mapped, in load order, including plugins opened RTLD_LOCAL
// (their symbols are out of the global scope, their program headers are
// not) and objects in other dlmopen namespaces; reading the notes of each
// finds every copy, whatever was exported or interposed. No symbol takes
// part: a static copy in a program that exports nothing, or in a plugin
// linked with a version script hiding everything (--exclude-libs, as
// tprof::capture's static archive asks), is found as surely as the shared
// library, and nothing is written anywhere (no environment variable, no
// process-global to race for).
//
// Which copy warns: the later in load order. At start-up every DT_NEEDED
// object is mapped before any constructor runs, so the order of the list,
// not of the constructors, decides, and a pair gives one warning.
#include "src/capture/recorders.h"

#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#ifndef TPROF_VERSION
#error "TPROF_VERSION is defined by src/CMakeLists.txt"
#endif

namespace tprof::internal {

namespace {

constexpr char kNoteName[] = "tprof";
constexpr std::uint32_t kNoteType = 1;    // a recorder, in the "tprof" notes' own numbering
constexpr std::uint32_t kNoteFormat = 1;  // the descriptor below

// An ELF note: the header's three 4-byte words (Elf32_Nhdr and Elf64_Nhdr
// alike), the name padded to 4 bytes, the descriptor.
struct RecorderNote {
  std::uint32_t namesz;
  std::uint32_t descsz;
  std::uint32_t type;
  char name[8];
  std::uint32_t format;
  char version[28];  // tprof's version, NUL-terminated
};
static_assert(sizeof(RecorderNote) == 52, "no padding: the note is read by its layout in other copies");

// A section named .note.* gets type SHT_NOTE from the assembler (GNU as and
// LLVM's alike); the linkers (bfd, gold, lld, mold) gather SHT_NOTE sections
// into a PT_NOTE segment inside the first read-only PT_LOAD, keep them under
// --gc-sections, and strip keeps allocated sections.
// Under ASan, clang pads an instrumented global with a poisoned redzone
// inside its section and aligns it to 32 bytes, which would put 44 bytes the
// scan below may not read into the PT_NOTE segment and misalign the notes
// after it; g++ leaves globals with a section of their own alone.
#if defined(__clang__)
#define TPROF_NOTE_NO_ASAN clang::no_sanitize("address")
#else
#define TPROF_NOTE_NO_ASAN
#endif
[[gnu::section(".note.tprof.recorder"), gnu::used, gnu::aligned(4), TPROF_NOTE_NO_ASAN]] const RecorderNote kRecorderNote = {
    sizeof kNoteName, sizeof(RecorderNote) - offsetof(RecorderNote, format), kNoteType, "tprof", kNoteFormat,
    TPROF_VERSION};

std::uintptr_t pad(std::uintptr_t n, std::uintptr_t align) { return (n + align - 1) & ~(align - 1); }

bool base_name_starts_with(std::string_view path, std::string_view prefix) {
  const std::size_t slash = path.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return base.substr(0, prefix.size()) == prefix;
}

std::string object_path(const char* name, bool program) {
  char buf[PATH_MAX];
  if (program || name == nullptr || name[0] == '\0') {
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("the program");
  }
  // dlopen("./plugin.so") leaves the name as it was given.
  if (name[0] != '/' && ::realpath(name, buf) != nullptr) return buf;
  return name;
}

struct Scan {
  std::vector<LoadedRecorder> found;
  bool first = true;  // dl_iterate_phdr reports the program first
};

// The notes of one PT_NOTE segment: entries padded to the segment's
// alignment (4, or 8 for .note.gnu.property's segment), every length
// checked against the segment's end.
void scan_notes(std::uintptr_t p, std::uintptr_t end, std::uintptr_t align, const dl_phdr_info* info, bool program,
                Scan* scan) {
  while (p < end && end - p >= 12) {
    std::uint32_t h[3];
    std::memcpy(h, reinterpret_cast<const void*>(p), sizeof h);
    const std::uintptr_t name = p + 12;
    if (h[0] > end - name) return;
    const std::uintptr_t desc = name + pad(h[0], align);
    if (desc > end || h[1] > end - desc) return;
    const std::uintptr_t next = desc + pad(h[1], align);
    if (h[2] == kNoteType && h[0] == sizeof kNoteName &&
        std::memcmp(reinterpret_cast<const void*>(name), kNoteName, sizeof kNoteName) == 0 && h[1] >= 4) {
      LoadedRecorder r;
      r.path = object_path(info->dlpi_name, program);
      r.shared = base_name_starts_with(r.path, "libtprof_capture.so");
      r.self = p == reinterpret_cast<std::uintptr_t>(&kRecorderNote);
      std::uint32_t format = 0;
      std::memcpy(&format, reinterpret_cast<const void*>(desc), sizeof format);
      if (format == kNoteFormat && h[1] > 4) {
        const char* v = reinterpret_cast<const char*>(desc + 4);
        r.version.assign(v, ::strnlen(v, h[1] - 4));
      }
      scan->found.push_back(std::move(r));
    }
    if (next >= end) return;
    p = next;
  }
}

int scan_object(dl_phdr_info* info, std::size_t, void* data) {
  Scan* scan = static_cast<Scan*>(data);
  const bool program = scan->first;
  scan->first = false;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE || ph.p_memsz == 0) continue;
    const std::uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    scan_notes(begin, begin + ph.p_memsz, ph.p_align > 4 ? ph.p_align : 4, info, program, scan);
  }
  return 0;
}

std::string describe(const LoadedRecorder& r) {
  const std::string version = r.version.empty() ? std::string("tprof") : "tprof " + r.version;
  if (r.shared) return r.path + " (the shared libtprof_capture.so, " + version + ")";
  if (base_name_starts_with(r.path, "libtprof_inject.so")) return r.path + " (tprof record's own copy of " + version + ")";
  return r.path + " (a static copy of " + version + ")";
}

std::size_t self_index(const std::vector<LoadedRecorder>& all) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].self) return i;
  }
  return all.size();
}

void write_stderr(const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

constexpr const char* kAdvice =
    "link the program and every plugin to the shared libtprof_capture.so (docs/capture.md, "
    "\"Plugins and shared libraries\")";

}  // namespace

std::vector<LoadedRecorder> loaded_recorders() {
  Scan scan;
  ::dl_iterate_phdr(scan_object, &scan);
  return std::move(scan.found);
}

void announce_recorder() noexcept {
  try {
    const std::vector<LoadedRecorder> all = loaded_recorders();
    const std::size_t self = self_index(all);
    if (self == 0 || self == all.size()) return;  // the first copy (or, impossibly, not found)
    const LoadedRecorder& now = all[self];
    std::string text = "tprof: warning: " + std::to_string(self + 1) +
                       " tprof recorders are now loaded in this process, and they do not share windows:\n";
    for (std::size_t i = 0; i < self; ++i) text += "  loaded before: " + describe(all[i]) + "\n";
    text += "  loaded now:    " + describe(now) + "\n";
    text += "  The scopes of code linked to " + now.path +
            " go to its own recorder: a tprof::Profiler started through another copy does not see them "
            "(its traces carry a diagnostic saying so), nor the reverse. To record them in one window, " +
            kAdvice + ".\n";
    write_stderr(text);
  } catch (...) {
    // No memory for the message at load time: say nothing rather than fail the load.
  }
}

std::string other_recorders_problem() {
  const std::vector<LoadedRecorder> all = loaded_recorders();
  const std::size_t self = self_index(all);
  if (all.size() < 2 || self == all.size()) return {};
  std::string others;
  for (const LoadedRecorder& r : all) {
    if (r.self) continue;
    others += (others.empty() ? "" : "; ") + describe(r);
  }
  return std::to_string(all.size()) + " tprof recorders are loaded in this process: this trace holds the events of " +
         describe(all[self]) + " only; code linked to the other" + (all.size() > 2 ? "s" : "") + " (" + others +
         ") records into its own recorder, and its scopes are not here: " + kAdvice;
}

}  // namespace tprof::internal
