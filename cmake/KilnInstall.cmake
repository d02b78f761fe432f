# What `cmake --install` puts where, by component (the .deb packages of
# cmake/KilnPackaging.cmake follow the components):
#   runtime  lib/libkiln.so.X.Y, bin/kiln, lib/libkiln_runtime.so.X.Y and
#            bin/kiln-run-program (.kiln programs without the importer;
#            docs/program-format.md)
#   dev      include/kiln/ (public headers only: libkiln_runtime's too),
#            lib/libkiln.so, lib/libkiln_runtime.so,
#            lib/cmake/Kiln (find_package(Kiln) -> Kiln::kiln),
#            lib/cmake/KilnBackend (find_package(KilnBackend 1.0), plugin SDK),
#            lib/pkgconfig/kiln.pc, share/kiln/backend-template/ (plugin sources)
#   python   lib/python3/dist-packages/kiln/ (python/CMakeLists.txt)
#   <name>   a backend plugin in lib/kiln/backends (install(... COMPONENT <name>)
#            in backends/<name>/CMakeLists.txt)
include(CMakePackageConfigHelpers)

set(KILN_INSTALL_INCLUDEDIR include)
set(KILN_INSTALL_BACKENDDIR lib/kiln/backends)
set(KILN_INSTALL_CMAKEDIR lib/cmake)

install(DIRECTORY include/kiln DESTINATION ${KILN_INSTALL_INCLUDEDIR} COMPONENT dev
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

if(TARGET kiln_cli)
  install(TARGETS kiln_cli RUNTIME DESTINATION bin COMPONENT runtime)
endif()

# The plugin SDK package (header-only): the config and a version file of the
# plugin ABI, so plugins can ask for find_package(KilnBackend 1.0).
file(STRINGS include/kiln/c/backend.h _kiln_abi REGEX "^#define KILN_BACKEND_ABI_(MAJOR|MINOR) ")
string(REGEX REPLACE ".*ABI_MAJOR ([0-9]+).*" "\\1" _kiln_abi_major "${_kiln_abi}")
string(REGEX REPLACE ".*ABI_MINOR ([0-9]+).*" "\\1" _kiln_abi_minor "${_kiln_abi}")
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/KilnBackendConfigVersion.cmake
  VERSION ${_kiln_abi_major}.${_kiln_abi_minor} COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES cmake/KilnBackendConfig.cmake ${CMAKE_BINARY_DIR}/cmake/KilnBackendConfigVersion.cmake
        DESTINATION ${KILN_INSTALL_CMAKEDIR}/KilnBackend COMPONENT dev)
# The template plugin's sources, to start a plugin from the install alone.
install(DIRECTORY backends/template/ DESTINATION share/kiln/backend-template COMPONENT dev)

if(TARGET kiln_shared)
  install(TARGETS kiln_shared EXPORT KilnTargets
          LIBRARY DESTINATION lib COMPONENT runtime NAMELINK_COMPONENT dev)
  install(EXPORT KilnTargets NAMESPACE Kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR}/Kiln COMPONENT dev)
  configure_package_config_file(cmake/KilnConfig.cmake.in ${CMAKE_BINARY_DIR}/cmake/KilnConfig.cmake
    INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR}/Kiln
    PATH_VARS KILN_INSTALL_INCLUDEDIR KILN_INSTALL_BACKENDDIR)
  # 0.x: a minor release may change the API, so only the same minor matches.
  write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/KilnConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${CMAKE_BINARY_DIR}/cmake/KilnConfig.cmake ${CMAKE_BINARY_DIR}/cmake/KilnConfigVersion.cmake
          DESTINATION ${KILN_INSTALL_CMAKEDIR}/Kiln COMPONENT dev)
  configure_file(cmake/kiln.pc.in ${CMAKE_BINARY_DIR}/cmake/kiln.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/cmake/kiln.pc DESTINATION lib/pkgconfig COMPONENT dev)
endif()
# libkiln_runtime.so and its runner. The runner finds the library beside
# bin/ in any prefix ($ORIGIN/../lib); public headers are include/kiln above.
if(TARGET kiln_runtime_shared)
  install(TARGETS kiln_runtime_shared LIBRARY DESTINATION lib COMPONENT runtime NAMELINK_COMPONENT dev)
endif()
if(TARGET kiln_run_program)
  set_target_properties(kiln_run_program PROPERTIES INSTALL_RPATH "$ORIGIN/../lib")
  install(TARGETS kiln_run_program RUNTIME DESTINATION bin COMPONENT runtime)
endif()
unset(_kiln_abi)
unset(_kiln_abi_major)
unset(_kiln_abi_minor)
