// gunzip_floor: the decompressor alone over a .json.gz, output discarded.
// `tprof table x.json.gz` is measured against it:
//   gunzip_floor X.json.gz           the streaming inflater the reader uses
//                                    (zlib, 8 MiB windows, on this thread)
//   gunzip_floor --whole X.json.gz   libdeflate on the whole buffer (the
//                                    fastest decompressor here; memory: the
//                                    whole text)
#include <cstdio>
#include <cstring>

#include "src/base/file.h"
#include "src/base/gzip.h"

int main(int argc, char** argv) {
  const bool whole = argc == 3 && std::strcmp(argv[1], "--whole") == 0;
  if (argc != 2 && !whole) {
    std::fprintf(stderr, "usage: gunzip_floor [--whole] TRACE.json.gz\n");
    return 2;
  }
  auto map = tprof::internal::MappedFile::open(argv[argc - 1]);
  if (!map) return 2;
  if (whole) {
    auto out = tprof::internal::gunzip(map->bytes());
    if (!out) return 2;
    std::printf("%zu bytes\n", out->size);
    return 0;
  }
  auto stream = tprof::internal::GunzipStream::start(map->bytes(), {}, 8u << 20, 0, false);
  if (!stream) return 2;
  tprof::internal::GunzipStream::Window w;
  std::size_t n = 0;
  while ((*stream)->next(&w)) {
    n += w.size;
    (*stream)->recycle(w);
  }
  if ((*stream)->end_error() != nullptr) return 2;
  std::printf("%zu bytes\n", n);
  return 0;
}
