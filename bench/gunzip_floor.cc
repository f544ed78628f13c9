// gunzip_floor: the decompressor alone — tprof's own gunzip (libdeflate,
// whole buffer) over a .json.gz, output discarded. `tprof table x.json.gz` is
// measured against it.
#include <cstdio>

#include "src/base/file.h"
#include "src/base/gzip.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gunzip_floor TRACE.json.gz\n");
    return 2;
  }
  auto map = tprof::internal::MappedFile::open(argv[1]);
  if (!map) return 2;
  auto out = tprof::internal::gunzip(map->bytes());
  if (!out) return 2;
  std::printf("%zu bytes\n", out->size);
  return 0;
}
