// tprof — read torch.profiler / Kineto traces the way an expert would, and
// record unmodified CUDA programs into them.
#include "tools/tprof/cli.h"

int main(int argc, char** argv) { return tprof::cli::run(argc, argv); }
