# libkiln_runtime.so (target kiln_runtime_shared): the runtime alone, for
# applications that only run .kiln programs. Core, IR, the kernel interface
# and registry, the executor, the .kiln loader, the plugin loader and the
# compile cache; no ONNX importer, no protobuf, no kernels
# (tests/runtime_lib checks that with nm and the ELF NEEDED entries).
# Kernels come from a kernel library linked beside it: kiln_portable_kernels
# (every portable kernel) or a selective build's registration file
# (KilnSelectKernels.cmake), registered with kiln::register_portable_kernels().
#
# The session objects and the core, IR and kernel interface layers are linked whole
# (a kernel library needs all of the latter); the runtime and program layers
# contribute only what those reach (so no .kiln writer, no conformance kit).
# kiln_runtime.map exports namespace kiln (the public API plus the kernel
# interface that kernel libraries call); libstdc++ and FlatBuffers template
# code stays local.
#
# The static runtime layer keeps the target name kiln_runtime (libkiln_runtime.a);
# this one is kiln_runtime_shared with the file name libkiln_runtime.so.
if(KILN_SANITIZE OR KILN_FUZZ)
  return()
endif()

add_library(kiln_runtime_shared SHARED ${PROJECT_SOURCE_DIR}/src/api/session_runtime_only.cpp
                                       $<TARGET_OBJECTS:kiln_session_objs>)
target_link_libraries(kiln_runtime_shared PRIVATE kiln_runtime kiln_program)
set(_whole kiln_kernel_api kiln_ir kiln_core)
set(_whole_files "")
foreach(_layer IN LISTS _whole)
  list(APPEND _whole_files "$<TARGET_FILE:${_layer}>")
endforeach()
set(_map ${PROJECT_SOURCE_DIR}/cmake/kiln_runtime.map)
target_link_options(kiln_runtime_shared PRIVATE
  "LINKER:--whole-archive" ${_whole_files} "LINKER:--no-whole-archive"
  "LINKER:--version-script=${_map}" "LINKER:--no-undefined" "LINKER:--as-needed")
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
unset(_whole)
unset(_whole_files)
unset(_map)
