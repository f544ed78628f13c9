include(GNUInstallDirs)

# tprof_add_library(NAME [NO_ALIAS] SRCS a.cc b.cc DEPS tprof::x ...)
# Declares the static library tprof_<NAME> with the alias tprof::<NAME>
# (NO_ALIAS: the caller names it). Sources are listed explicitly (no GLOB);
# warnings stay private to tprof.
set(TPROF_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wconversion
    -Wno-sign-conversion)

function(tprof_add_library NAME)
  cmake_parse_arguments(ARG "NO_ALIAS" "" "SRCS;DEPS;PUBLIC_DEPS" ${ARGN})
  # STATIC whatever BUILD_SHARED_LIBS says: the shared build is one library,
  # libtprof_capture.so, made of base's, trace's and capture's objects
  # (src/CMakeLists.txt, TPROF_SHARED_CAPTURE).
  add_library(tprof_${NAME} STATIC ${ARG_SRCS})
  if(NOT ARG_NO_ALIAS)
    add_library(tprof::${NAME} ALIAS tprof_${NAME})
  endif()
  # As a subproject (FetchContent, add_subdirectory) a library builds only
  # when the consumer links it: `cmake --build` of a tprof::capture program
  # compiles base, trace and capture, not the analyzer (consumer_test.sh).
  if(NOT TPROF_TOP_LEVEL AND NOT TPROF_INSTALL)
    set_target_properties(tprof_${NAME} PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
  # Installed as tprof::<NAME> (cmake/TprofInstall.cmake).
  set_target_properties(tprof_${NAME} PROPERTIES EXPORT_NAME ${NAME})
  target_include_directories(tprof_${NAME}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_compile_options(tprof_${NAME} PRIVATE ${TPROF_WARNINGS})
  # A sanitized Debug build (make test's ASan+UBSan build): the libraries the
  # tests spend their time in compile at -O1, as ASan's documentation
  # advises; at -O0 the unit label ran about 8x longer (23 of the CI's 65
  # minutes). Tests, tools and the other libraries stay at -O0: -O1 nearly
  # triples a file's compile time, and they run little.
  if(TPROF_SANITIZE AND NAME IN_LIST TPROF_SANITIZE_O1_LIBS)
    target_compile_options(tprof_${NAME} PRIVATE $<$<CONFIG:Debug>:-O1>)
  endif()
  target_link_libraries(tprof_${NAME} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
endfunction()

# tprof_add_executable(NAME SRCS ... DEPS ...)
function(tprof_add_executable NAME)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${NAME} ${ARG_SRCS})
  target_include_directories(${NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${NAME} PRIVATE ${TPROF_WARNINGS})
  target_link_libraries(${NAME} PRIVATE ${ARG_DEPS})
endfunction()
