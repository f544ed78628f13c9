# cpack -G DEB (CPACK_DEB_COMPONENT_INSTALL), included last by the
# top-level CMakeLists.txt (after python/, whose component it packages):
# packages as Debian splits a library from its tools and its Python module
# (docs/install.md):
#   libtprof-dev   headers, static libraries (lib/<multiarch>), CMake and
#                  pkg-config files; Depends on what tprof::tprof links.
#   tprof          the CLI, libtprof_inject.so, man page, completion;
#                  Depends from dpkg-shlibdeps when it is installed
#                  (dpkg-dev), else the list below.
#   python3-tprof  the Python module (when built) in
#                  /usr/lib/python3/dist-packages/tprof: the extension for
#                  the interpreter it was built with, and the package's .py
#                  files; Depends on that python3, python3-numpy,
#                  python3-pandas (and the extension's libraries, as tprof's).
# Each carries /usr/share/doc/<package>/copyright.
set(CPACK_PACKAGE_NAME tprof)
set(CPACK_PACKAGE_VENDOR "tprof")
set(CPACK_PACKAGE_CONTACT "tprof developers <tprof@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "torch.profiler for C++ and an expert reader of torch/Kineto traces")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_COMPONENT_CLI_DISPLAY_NAME "tprof command-line tool")
set(CPACK_COMPONENT_CLI_DESCRIPTION "Reads torch/Kineto traces: tables, steps, diagnose, kernels, compare, reports; tprof record.")
set(CPACK_DEBIAN_CLI_PACKAGE_NAME tprof)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION devel)
set(CPACK_COMPONENT_DEV_DISPLAY_NAME "tprof C++ library (development)")
set(CPACK_COMPONENT_DEV_DESCRIPTION "tprof::capture (torch.profiler's model for C++ programs) and the trace analyzer: headers, static libraries, CMake and pkg-config files.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libtprof-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# The static tprof::gzip (in tprof::tprof) links -ldeflate -lz; a
# tprof::capture program needs neither.
set(_tprof_dev_depends "libstdc++-12-dev | libstdc++-dev")
if(TPROF_HAVE_GZIP)
  string(PREPEND _tprof_dev_depends "libdeflate-dev, zlib1g-dev, ")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${_tprof_dev_depends}")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "pkgconf, cmake, tprof")
set(CPACK_COMPONENTS_ALL cli dev)
if(TARGET tprof_python)
  set(CPACK_COMPONENT_PYTHON3_DISPLAY_NAME "tprof Python module")
  set(CPACK_COMPONENT_PYTHON3_DESCRIPTION "import tprof: torch/Kineto traces read in C++ into NumPy and pandas; tprof's reports and HolisticTraceAnalysis' TraceAnalysis API.")
  set(CPACK_DEBIAN_PYTHON3_PACKAGE_NAME python3-tprof)
  set(CPACK_DEBIAN_PYTHON3_PACKAGE_SECTION python)
  # The extension is built for one CPython (_tprof.cpython-3XY-...so).
  string(REPLACE "." ";" _tprof_py_version "${TPROF_PYTHON_VERSION}")
  list(GET _tprof_py_version 0 _tprof_py_major)
  list(GET _tprof_py_version 1 _tprof_py_minor)
  math(EXPR _tprof_py_next "${_tprof_py_minor} + 1")
  set(_tprof_py_depends "python3 (>= ${_tprof_py_major}.${_tprof_py_minor}), python3 (<< ${_tprof_py_major}.${_tprof_py_next}), python3-numpy, python3-pandas")
  list(APPEND CPACK_COMPONENTS_ALL python3)
endif()
find_program(TPROF_DPKG_SHLIBDEPS dpkg-shlibdeps)
mark_as_advanced(TPROF_DPKG_SHLIBDEPS)
if(TPROF_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  # What the CLI's ELF files need on Debian 12 (readelf -d: libdeflate.so.0,
  # libz.so.1, libstdc++.so.6, libgcc_s.so.1, libm.so.6, libc.so.6).
  set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "libdeflate0 (>= 1.14), zlib1g (>= 1:1.2.0), libstdc++6 (>= 12), libgcc-s1 (>= 3.0), libc6 (>= 2.34)")
  # The extension's are the same (it links tprof::gzip too).
  if(TARGET tprof_python)
    string(APPEND _tprof_py_depends ", ${CPACK_DEBIAN_CLI_PACKAGE_DEPENDS}")
  endif()
endif()
if(TARGET tprof_python)
  # With dpkg-shlibdeps, CPack adds the extension's libraries to these.
  set(CPACK_DEBIAN_PYTHON3_PACKAGE_DEPENDS "${_tprof_py_depends}")
  # tprof.distributed (python3 -m tprof job) runs on Dask.
  set(CPACK_DEBIAN_PYTHON3_PACKAGE_SUGGESTS "python3-distributed")
endif()

# /usr/share/doc/<package>/copyright in each package.
configure_file(${PROJECT_SOURCE_DIR}/cmake/debian-copyright.in ${PROJECT_BINARY_DIR}/debian/copyright @ONLY)
foreach(_c IN LISTS CPACK_COMPONENTS_ALL)
  string(TOUPPER ${_c} _C)
  # python3's files are the .deb's alone (python/CMakeLists.txt), so is its copyright.
  set(_only_deb)
  if(_c STREQUAL "python3")
    set(_only_deb EXCLUDE_FROM_ALL)
  endif()
  install(FILES ${PROJECT_BINARY_DIR}/debian/copyright
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${CPACK_DEBIAN_${_C}_PACKAGE_NAME} COMPONENT ${_c} ${_only_deb})
endforeach()
include(CPack)
