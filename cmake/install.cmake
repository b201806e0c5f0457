# The install (`cmake --install build --prefix P`):
#   P/bin/embshard (and embshard-torch where built)
#   P/lib/libembshard*.a, P/include/embshard/**
#   P/lib/cmake/embshard/: find_package(embshard) -> the one target embshard::embshard
#   P/share/embshard/{models,data/published}: the data root of the install
# The binaries find P/share/embshard from their own folder at run time
# (util/data_dir.h: <binary's folder>/../share/embshard), so the prefix can
# move. That rule fixes bin/ and share/embshard/ relative to each other:
# they are not taken from GNUInstallDirs.
include(CMakePackageConfigHelpers)

set(EMBSHARD_INSTALL_BINDIR bin)
set(EMBSHARD_INSTALL_DATADIR share/embshard)  # python/ points its installed module here
set(EMBSHARD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/embshard)

# The one target a consumer links: every library the build is made of (the
# public headers include the MPI pieces' too), so the layers can be split or
# merged without consumers noticing. libtorch stays out: it belongs to
# embshard-torch, and a consumer would pay its load time for nothing.
add_library(embshard_package INTERFACE)
target_link_libraries(embshard_package INTERFACE embshard embshard_mpi)
set_target_properties(embshard_package PROPERTIES EXPORT_NAME embshard)
set_target_properties(embshard PROPERTIES EXPORT_NAME core)
set_target_properties(embshard_mpi PROPERTIES EXPORT_NAME mpi)
add_library(embshard::embshard ALIAS embshard_package)  # the same name under add_subdirectory

install(TARGETS embshard ${EMBSHARD_LAYER_TARGETS} embshard_mpi embshard_package EXPORT embshardTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/embshard DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(TARGETS embshard_cli RUNTIME DESTINATION ${EMBSHARD_INSTALL_BINDIR})
if(TARGET embshard_torch_cli)
  # libtorch often lives outside the linker's default paths (a pip wheel's
  # torch/lib): keep the path it was linked from.
  set_target_properties(embshard_torch_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS embshard_torch_cli RUNTIME DESTINATION ${EMBSHARD_INSTALL_BINDIR})
endif()

# What planning loads, nothing measured: measurement files and plots live
# under data/ (data/README.md); the patterns keep any stray one out.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/models/ DESTINATION ${EMBSHARD_INSTALL_DATADIR}/models
        PATTERN "*.jsonl.gz" EXCLUDE
        PATTERN "data" EXCLUDE
        PATTERN "*.svg" EXCLUDE
        PATTERN "report.md" EXCLUDE
        PATTERN "report.json" EXCLUDE
        PATTERN "__pycache__" EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/published/
        DESTINATION ${EMBSHARD_INSTALL_DATADIR}/data/published)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/embshardConfig.cmake.in
  ${PROJECT_BINARY_DIR}/embshardConfig.cmake
  INSTALL_DESTINATION ${EMBSHARD_INSTALL_CMAKEDIR}
  PATH_VARS EMBSHARD_INSTALL_DATADIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/embshardConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(EXPORT embshardTargets NAMESPACE embshard:: DESTINATION ${EMBSHARD_INSTALL_CMAKEDIR})
install(FILES ${PROJECT_BINARY_DIR}/embshardConfig.cmake
              ${PROJECT_BINARY_DIR}/embshardConfigVersion.cmake
        DESTINATION ${EMBSHARD_INSTALL_CMAKEDIR})

# The install test: install this build to a temporary prefix, build a C++
# consumer against it, move the prefix and plan from outside the source tree.
# It installs what is built: run it after a full build.
# Not under the sanitizers: a consumer would need their link flags too.
find_program(EMBSHARD_BASH bash)
if(EMBSHARD_BASH AND NOT EMBSHARD_SANITIZE)
  add_test(NAME install_consumer
           COMMAND ${EMBSHARD_BASH} ${PROJECT_SOURCE_DIR}/tests/install/test_install.sh
                   ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}
                   "${CMAKE_GENERATOR}" "${CMAKE_MAKE_PROGRAM}" ${CMAKE_CXX_COMPILER}
                   "${CMAKE_BUILD_TYPE}")
  set_tests_properties(install_consumer PROPERTIES TIMEOUT 600 LABELS cli)
endif()
