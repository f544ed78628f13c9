// tprof — read torch.profiler / Kineto traces the way an expert would, and
// record unmodified CUDA programs into them.
#include <signal.h>

#include "tools/tprof/cli.h"

namespace {

// A write past `ulimit -f` raises SIGXFSZ, whose default action kills the
// process (leaving a half-written stdout file). Caught, the write fails
// with EFBIG and is reported like a full disk (exit 2). A handler, not
// SIG_IGN: it is reset on exec, so the programs `tprof record` runs keep
// their own default.
void on_sigxfsz(int) {}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction sa {};
  sa.sa_handler = on_sigxfsz;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGXFSZ, &sa, nullptr);
  return tprof::cli::run(argc, argv);
}
