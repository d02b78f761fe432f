# libkiln.so: the public C++ API of include/kiln/ as one shared, versioned
# library for applications (find_package(Kiln), pkg-config kiln) and the
# Python module. It is the static layers the rest of the tree links (kiln,
# kiln_backend_check, kiln_runtime, kiln_kernels, kiln_kernel_api, kiln_ir, kiln_core,
# kiln_onnx, kiln_program) linked whole,
# so nothing is compiled twice; kiln.map exports the public API only (the
# runtime internals, ONNX and protobuf stay hidden).
#
# Included from src/api/CMakeLists.txt after the `kiln` target exists. Not
# built in sanitizer or fuzzing builds (an instrumented shared library needs
# the sanitizer runtime preloaded into every host program).
if(KILN_SANITIZE OR KILN_FUZZ)
  return()
endif()

set(_kiln_anchor ${CMAKE_CURRENT_BINARY_DIR}/kiln_shared_anchor.cpp)
file(CONFIGURE OUTPUT ${_kiln_anchor} CONTENT
     "// libkiln.so is the static Kiln layers linked whole (cmake/KilnSharedLibrary.cmake).\nnamespace kiln {}\n")
add_library(kiln_shared SHARED ${_kiln_anchor})
set(_kiln_layers kiln kiln_backend_check kiln_runtime kiln_kernels kiln_kernel_api kiln_ir kiln_core
                 kiln_onnx kiln_program)
set(_kiln_whole "")
foreach(_layer IN LISTS _kiln_layers)
  list(APPEND _kiln_whole "$<TARGET_FILE:${_layer}>")
endforeach()
set(_kiln_map ${PROJECT_SOURCE_DIR}/cmake/kiln.map)
target_link_options(kiln_shared PRIVATE
  "LINKER:--whole-archive" ${_kiln_whole} "LINKER:--no-whole-archive"
  "LINKER:--version-script=${_kiln_map}" "LINKER:--no-undefined")
# The layers again as ordinary items: their own dependencies (libonnx,
# protobuf, threads, dl) and the build order.
target_link_libraries(kiln_shared PRIVATE ${_kiln_layers})
target_include_directories(kiln_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>)
target_compile_features(kiln_shared INTERFACE cxx_std_20)
set_target_properties(kiln_shared PROPERTIES
  OUTPUT_NAME kiln
  EXPORT_NAME kiln
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  LINK_DEPENDS ${_kiln_map})
add_library(Kiln::kiln ALIAS kiln_shared)
unset(_kiln_anchor)
unset(_kiln_layers)
unset(_kiln_whole)
unset(_kiln_map)
