# A program linked with tprof::capture alone (issue 26, item 3): no
# compression library among its NEEDED entries, and no CUDA capture
# (issue 42, item 3): no CUPTI symbol and no libcupti, libcuda or
# libtprof_cuda needed, whether or not CUPTI was built (HAVE_CUPTI):
# that is tprof::cuda's.
#   cmake -DBINARY=... -DREADELF=... -DNM=... -DHAVE_CUPTI=ON|OFF -P CheckCaptureBinary.cmake
execute_process(COMMAND ${READELF} -d ${BINARY} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${BINARY} failed")
endif()
string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${dyn}")
string(REPLACE "Shared library: " "" needed "${needed}")
foreach(lib IN LISTS needed)
  if(lib MATCHES "libz\\.|libdeflate")
    message(FATAL_ERROR "a tprof::capture program needs ${lib} (NEEDED: ${needed}); only tprof::gzip may link it")
  endif()
  if(lib MATCHES "libcupti|libcuda|libtprof_cuda")
    message(FATAL_ERROR "a tprof::capture program needs ${lib} (NEEDED: ${needed}); only tprof::cuda may link it")
  endif()
endforeach()
execute_process(COMMAND ${NM} -C ${BINARY} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm ${BINARY} failed")
endif()
string(REGEX MATCHALL "[^\n]*(libdeflate_|deflateInit|inflateInit)[^\n]*" gz "${syms}")
if(gz)
  message(FATAL_ERROR "a tprof::capture program holds compression code: ${gz}")
endif()
string(REGEX MATCHALL "[^\n]*[Cc][Uu][Pp][Tt][Ii][^\n]*" cupti "${syms}")
list(LENGTH cupti n_cupti)
if(n_cupti GREATER 0)
  list(SUBLIST cupti 0 5 some)
  list(JOIN some "\n  " some)
  message(FATAL_ERROR "a tprof::capture program holds ${n_cupti} CUPTI symbols (CUPTI built: ${HAVE_CUPTI}); "
                      "CUDA capture is tprof::cuda's:\n  ${some}")
endif()
message(STATUS "capture program: NEEDED ${needed}; no CUPTI symbol (CUPTI built: ${HAVE_CUPTI})")
