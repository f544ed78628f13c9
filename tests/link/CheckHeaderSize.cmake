# The public capture headers stay light (issue 26, item 4): each preprocesses
# (C++17) to at most its bound in lines. Measured before: record_function.h
# 63,350, profiler.h 103,734 (GCC 12), most of it <x86intrin.h>.
#   cmake -DCXX=... -DINCLUDE=<repo>/include -DOUT=<dir> -P CheckHeaderSize.cmake
set(bounds "record_function.h=20000" "profiler.h=65000")
set(failures "")
foreach(pair IN LISTS bounds)
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 header)
  list(GET pair 1 bound)
  file(WRITE ${OUT}/${header}.cc "#include \"tprof/${header}\"\n")
  execute_process(COMMAND ${CXX} -std=c++17 -I${INCLUDE} -E ${OUT}/${header}.cc
    OUTPUT_FILE ${OUT}/${header}.ii RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "preprocessing tprof/${header} failed")
  endif()
  file(STRINGS ${OUT}/${header}.ii lines)
  list(LENGTH lines n)
  message(STATUS "tprof/${header}: ${n} preprocessed lines (bound ${bound})")
  if(n GREATER bound)
    list(APPEND failures "tprof/${header} preprocesses to ${n} lines, above its bound ${bound}: a heavy include came in")
  endif()
endforeach()
if(failures)
  string(REPLACE ";" "\n  " text "${failures}")
  message(FATAL_ERROR "${text}")
endif()
