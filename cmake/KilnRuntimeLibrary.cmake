# libkiln_runtime.so (target kiln_runtime_shared): the runtime alone, for
# applications that only run .kiln programs. Core, IR, the kernel interface
# and registry, the executor, the .kiln loader, the plugin loader and the
# compile cache; no ONNX importer, no protobuf, no kernels
# (tests/runtime_lib checks that with nm and the ELF NEEDED entries).
# Kernels come from a kernel library linked beside it: kiln_portable_kernels
# (every portable kernel) or a selective build's registration file
# (KilnSelectKernels.cmake), registered with kiln::register_portable_kernels().
#
# Built for size from its own objects (kiln_runtime_lib_objs: the sources of
# the core, IR, kernel interface, runtime, program and session layers
# compiled again with -Os -ffunction-sections -fdata-sections; libkiln and
# the static layers keep the build type's flags), linked with --gc-sections.
# kiln_runtime.map exports only the public API and the kernel interface that
# kernel libraries call; everything those roots do not reach (the .kiln
# writer, the conformance kit, unused helpers) is dropped by the linker.
# scripts/runtime_lib_size.sh reports the stripped size and largest symbols.
#
# The static runtime layer keeps the target name kiln_runtime (libkiln_runtime.a);
# this one is kiln_runtime_shared with the file name libkiln_runtime.so.
if(KILN_SANITIZE OR KILN_FUZZ)
  return()
endif()

set(_srcs ${PROJECT_SOURCE_DIR}/src/api/session_runtime_only.cpp)
foreach(_layer kiln_core kiln_ir kiln_optimizer kiln_kernel_api kiln_runtime kiln_program kiln_session_objs)
  get_target_property(_layer_srcs ${_layer} SOURCES)
  list(APPEND _srcs ${_layer_srcs})
endforeach()
add_library(kiln_runtime_lib_objs OBJECT ${_srcs})
add_dependencies(kiln_runtime_lib_objs kiln_program_schema)
target_compile_options(kiln_runtime_lib_objs PRIVATE -Os -ffunction-sections -fdata-sections
  -fvisibility-inlines-hidden -fno-semantic-interposition)
target_include_directories(kiln_runtime_lib_objs PRIVATE ${PROJECT_BINARY_DIR}/src/program/gen)
# Headers only: the layers' include directories and FlatBuffers' (its
# imported target is local to src/program, so found again here).
find_package(FlatBuffers CONFIG REQUIRED)
target_link_libraries(kiln_runtime_lib_objs PRIVATE kiln_kernel_api flatbuffers::flatbuffers_shared)
# Per-source definitions set in src/runtime (the plugin search path) hold
# for that directory's targets only; copy them here.
set(_registry ${PROJECT_SOURCE_DIR}/src/runtime/backends/registry.cpp)
get_source_file_property(_defs ${_registry} DIRECTORY ${PROJECT_SOURCE_DIR}/src/runtime COMPILE_DEFINITIONS)
if(_defs)
  set_source_files_properties(${_registry} TARGET_DIRECTORY kiln_runtime_lib_objs PROPERTIES COMPILE_DEFINITIONS "${_defs}")
endif()

add_library(kiln_runtime_shared SHARED $<TARGET_OBJECTS:kiln_runtime_lib_objs>)
target_link_libraries(kiln_runtime_shared PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
set(_map ${PROJECT_SOURCE_DIR}/cmake/kiln_runtime.map)
target_link_options(kiln_runtime_shared PRIVATE
  "LINKER:--version-script=${_map}" "LINKER:--gc-sections" "LINKER:-O1"
  "LINKER:--no-undefined" "LINKER:--as-needed"
  # The link map, for scripts/runtime_lib_size.sh's parts (runtime_lib_parts.py).
  "LINKER:-Map=${CMAKE_BINARY_DIR}/lib/libkiln_runtime.so.map")
# gold's identical code folding merges the many identical template bodies
# (about 30 KB); kept where gold is there, the default linker otherwise.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_LINK_OPTIONS -fuse-ld=gold -Wl,--icf=safe)
check_cxx_source_compiles("int main() { return 0; }" KILN_HAVE_GOLD_ICF)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(KILN_HAVE_GOLD_ICF)
  target_link_options(kiln_runtime_shared PRIVATE -fuse-ld=gold "LINKER:--icf=safe")
endif()
target_include_directories(kiln_runtime_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>)
target_compile_features(kiln_runtime_shared INTERFACE cxx_std_20)
set_target_properties(kiln_runtime_shared PROPERTIES
  OUTPUT_NAME kiln_runtime
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  LINK_DEPENDS ${_map})

# kiln_portable_kernels: the portable kernels as an archive over
# libkiln_runtime.so (the objects of kiln_kernels, not compiled again). A
# program that calls kiln::register_portable_kernels() links all of them; a
# selective build's registration file pulls only the families it names.
add_library(kiln_portable_kernels STATIC $<TARGET_OBJECTS:kiln_portable_objs>)
target_link_libraries(kiln_portable_kernels PUBLIC kiln_runtime_shared PRIVATE ${KILN_PORTABLE_LIBS})
unset(_srcs)
unset(_layer_srcs)
unset(_registry)
unset(_defs)
unset(_map)
