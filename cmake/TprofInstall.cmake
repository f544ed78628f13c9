# Install rules (TPROF_INSTALL, on at top level): the libraries with an
# export set (find_package(tprof) gives tprof::capture, tprof::tprof and one
# target per layer), tprof.pc for pkg-config, the public headers, the CLI
# with libtprof_inject.so, and a .deb through CPack (docs/install.md).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_tprof_export_targets tprof_base tprof_trace tprof_capture tprof_analyze tprof_report tprof_profiler_tables
                          tprof_all)
if(TARGET tprof_cupti)
  list(APPEND _tprof_export_targets tprof_cupti)
endif()
install(TARGETS ${_tprof_export_targets}
  EXPORT tprofTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
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
# alone (C++17 is enough). Static libraries: their dependencies are public
# (Requires, Libs), so a plain `pkg-config --libs` links.
set(TPROF_PC_GZIP_REQUIRES "")
if(TPROF_HAVE_GZIP)
  set(TPROF_PC_GZIP_REQUIRES "libdeflate zlib")
endif()
set(TPROF_PC_CUPTI_LIB "")
if(TARGET tprof_cupti)
  set(TPROF_PC_CUPTI_LIB "-ltprof_cupti")
endif()
set(TPROF_PC_ENABLE_FLAG "")
if(NOT TPROF_ENABLE)
  set(TPROF_PC_ENABLE_FLAG "-DTPROF_ENABLE=0")
endif()
# Relocatable: the prefix is found from the .pc file's own directory
# (${pcfiledir}), so `cmake --install --prefix X` and the .deb both work.
file(RELATIVE_PATH TPROF_PC_PREFIX_FROM_PCDIR /_root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /_root)
string(REGEX REPLACE "/$" "" TPROF_PC_PREFIX_FROM_PCDIR "${TPROF_PC_PREFIX_FROM_PCDIR}")
foreach(_pc tprof tprof-capture tprof-tables)
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

# cpack -G DEB: one package with the CLI, the libraries, headers and CMake
# and pkg-config files.
set(CPACK_PACKAGE_NAME tprof)
set(CPACK_PACKAGE_VENDOR "tprof")
set(CPACK_PACKAGE_CONTACT "tprof developers <tprof@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "torch.profiler for C++ and an expert reader of torch/Kineto traces")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL OFF)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libdeflate0, zlib1g, libstdc++6 (>= 12), libc6 (>= 2.36)")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libdeflate-dev, zlib1g-dev, pkgconf")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_FILE_NAME "tprof_${PROJECT_VERSION}_amd64")
include(CPack)
