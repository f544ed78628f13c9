# Install rules (TPROF_INSTALL, on at top level): the libraries with an
# export set (find_package(tprof) gives tprof::capture, tprof::tprof and one
# target per layer), tprof.pc for pkg-config, the public headers, the CLI
# with libtprof_inject.so (docs/install.md). The .deb packages are set up
# in cmake/TprofPackage.cmake, once every component is declared.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# TPROF_SHARED_CAPTURE: tprof::capture is libtprof_capture.so (which holds
# base, trace and capture); the static capture archive is not installed
# (a program would get two recorders from it), the other layers stay static.
set(_tprof_capture_installed tprof_capture)
if(TPROF_SHARED_CAPTURE)
  set(_tprof_capture_installed tprof_capture_shared)
endif()
set(_tprof_export_targets tprof_base tprof_trace ${_tprof_capture_installed} tprof_causal tprof_analyze tprof_report
                          tprof_profiler_tables tprof_all)
# tprof::cuda (CUDA capture, a component: find_package(tprof COMPONENTS
# cuda)) with what it links: the static CUPTI source, or with
# TPROF_SHARED_CAPTURE libtprof_cuda.so in its place.
set(_tprof_cuda_installed tprof_cupti)
if(TPROF_SHARED_CAPTURE)
  set(_tprof_cuda_installed tprof_cuda_shared)
endif()
foreach(_t ${_tprof_cuda_installed} tprof_cuda tprof_gzip)
  if(TARGET ${_t})
    list(APPEND _tprof_export_targets ${_t})
  endif()
endforeach()
install(TARGETS ${_tprof_export_targets}
  EXPORT tprofTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev NAMELINK_COMPONENT dev
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tprof DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)

set(_tprof_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tprof)
install(EXPORT tprofTargets NAMESPACE tprof:: DESTINATION ${_tprof_cmake_dir} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tprofConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tprofConfig.cmake
  INSTALL_DESTINATION ${_tprof_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tprofConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tprofConfig.cmake ${PROJECT_BINARY_DIR}/tprofConfigVersion.cmake
  DESTINATION ${_tprof_cmake_dir} COMPONENT dev)

# pkg-config: `tprof` is everything (C++20), `tprof-capture` the recorder
# alone (C++17 is enough), `tprof-cuda` the recorder with CUDA capture
# (when CUPTI is built). Static libraries: their dependencies are public
# (Requires, Libs), so a plain `pkg-config --libs` links.
# tprof-capture links no compression library (src/base/gzip_codec.h);
# tprof and tprof-tables carry tprof::gzip, pulled out of its archive by
# --undefined as the CMake target does.
set(TPROF_PC_GZIP_REQUIRES "")
set(TPROF_PC_GZIP_LIBS "")
if(TPROF_HAVE_GZIP)
  set(TPROF_PC_GZIP_REQUIRES "libdeflate zlib")
  set(TPROF_PC_GZIP_LIBS "-Wl,--undefined=tprof_gzip_linked_codec -ltprof_gzip")
endif()
# The static recorder stays private to the module that links it (as
# tprof::capture's usage requirement says: src/CMakeLists.txt); the shared
# one is a single -ltprof_capture (base and trace are inside it).
set(TPROF_PC_EXCLUDE_LIBS "-Wl,--exclude-libs=${TPROF_RECORDER_ARCHIVES}")
set(TPROF_PC_CAPTURE_LIBS "-ltprof_capture -ltprof_trace -ltprof_base ${TPROF_PC_EXCLUDE_LIBS} -pthread -ldl")
if(TPROF_SHARED_CAPTURE)
  set(TPROF_PC_EXCLUDE_LIBS "")
  set(TPROF_PC_CAPTURE_LIBS "-ltprof_capture")
endif()
# tprof-cuda: CUDA capture (tprof::cuda; src/CMakeLists.txt says why these
# flags). Its Libs come before tprof-capture's, which it requires.
set(TPROF_PC_CUDA_LIBS "-Wl,--undefined=tprof_make_cuda_source -ltprof_cupti")
if(TPROF_SHARED_CAPTURE)
  set(TPROF_PC_CUDA_LIBS "-Wl,--push-state,--no-as-needed -ltprof_cuda -Wl,--pop-state")
endif()
set(TPROF_PC_ENABLE_FLAG "")
if(NOT TPROF_ENABLE)
  set(TPROF_PC_ENABLE_FLAG "-DTPROF_ENABLE=0")
endif()
# Relocatable: the prefix is found from the .pc file's own directory
# (${pcfiledir}), so `cmake --install --prefix X` and the .deb both work.
file(RELATIVE_PATH TPROF_PC_PREFIX_FROM_PCDIR /_root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /_root)
string(REGEX REPLACE "/$" "" TPROF_PC_PREFIX_FROM_PCDIR "${TPROF_PC_PREFIX_FROM_PCDIR}")
set(_tprof_pcs tprof tprof-capture tprof-tables)
if(TARGET tprof_cuda)
  list(APPEND _tprof_pcs tprof-cuda)
endif()
foreach(_pc ${_tprof_pcs})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${_pc}.pc.in ${PROJECT_BINARY_DIR}/${_pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${_pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
endforeach()

if(TARGET tprof_cli)
  install(TARGETS tprof_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
endif()
# `tprof record` looks for its injection library in ../lib/tprof next to
# the binary (tools/tprof/record_cmd.cc): a fixed path, not the multiarch LIBDIR.
if(TARGET tprof_inject)
  install(TARGETS tprof_inject LIBRARY DESTINATION lib/tprof COMPONENT cli)
endif()
