# find_package(KilnBackend CONFIG): the Kiln backend SDK of an installed
# Kiln, as the interface target Kiln::backend_sdk (include/kiln/c/backend.h
# and backend_sdk.hpp). Plugins link nothing from Kiln.
get_filename_component(_kiln_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET Kiln::backend_sdk)
  add_library(Kiln::backend_sdk INTERFACE IMPORTED)
  set_target_properties(Kiln::backend_sdk PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_kiln_prefix}/include")
endif()
set(KilnBackend_FOUND TRUE)
unset(_kiln_prefix)
