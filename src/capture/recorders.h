// One recorder per process. Every copy of tprof's recorder (the shared
// libtprof_capture.so, or a static copy linked into a program or a plugin)
// carries an ELF note; the copies loaded in the process are the loaded
// objects whose PT_NOTE segments hold it (recorders.cc). A program and its
// plugins that link libtprof_capture.so share its one copy (the loader
// maps a soname once), so a second copy means a module linked tprof
// statically: its scopes go to a recorder of its own, which this copy's
// Profiler does not see. The copy that loads later warns once on stderr,
// and every window's trace names the other copies (a diagnostic).
#pragma once

#include <string>
#include <vector>

namespace tprof::internal {

// One copy of the recorder in this process.
struct LoadedRecorder {
  std::string path;      // the object that holds it: a library's path, or the program's
  std::string version;   // tprof's version in that copy
  bool shared = false;   // libtprof_capture.so (else a static copy linked into `path`)
  bool self = false;     // the copy this code belongs to
};

// Every copy loaded now, in load order (the program's first). Takes the
// dynamic loader's lock (dl_iterate_phdr) and allocates: not for the hot
// path or a signal handler.
std::vector<LoadedRecorder> loaded_recorders();

// Run once by each copy as it is loaded (a static initializer of
// recorder.cc): when copies loaded before it are in the process, writes one
// warning to stderr naming them and this one. The only thing tprof's
// libraries print: a second recorder otherwise loses events silently.
void announce_recorder() noexcept;

// For a window's trace: what the other copies in the process mean for it
// (their paths; their scopes are not in it). Empty when this copy is alone.
std::string other_recorders_problem();

}  // namespace tprof::internal
