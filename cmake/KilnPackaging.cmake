# `make package`: one .deb per install component (CPack DEB, prefix /usr):
#   kiln                 runtime: libkiln.so.X.Y, the kiln CLI, libkiln_runtime.so.X.Y, kiln-run-program
#   kiln-dev             dev: headers, libkiln.so, libkiln_runtime.so, find_package(Kiln/KilnBackend), kiln.pc, template sources
#   python3-kiln         python: the kiln module for Debian's python3
#   kiln-backend-<name>  every other component: a backend plugin in lib/kiln/backends
#                        (install(TARGETS ... COMPONENT <name>) in backends/<name>/)
# Library dependencies come from dpkg-shlibdeps; plugins also depend on the
# kiln package (their host) and recommend their vendor library where the
# plugin may load it at run time (KILN_BACKEND_VENDOR_PACKAGES).
# Included after every install() rule of the tree.
get_cmake_property(_kiln_components COMPONENTS)
if(NOT _kiln_components)
  return()
endif()
if("Unspecified" IN_LIST _kiln_components)
  message(WARNING "install() rules without a COMPONENT are left out of `make package`")
  list(REMOVE_ITEM _kiln_components "Unspecified")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kiln)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "Kiln")
set(CPACK_PACKAGE_CONTACT "Kiln maintainers <kiln-maintainers@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Kiln ONNX inference runtime")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_COMPONENTS_ALL ${_kiln_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

# Vendor library packages a plugin may dlopen (so dpkg-shlibdeps cannot see
# them): plugin name -> package, recommended by kiln-backend-<name>.
set(KILN_BACKEND_VENDOR_PACKAGES "xnnpack=libxnnpack0;onednn=libdnnl2;dnnl=libdnnl2"
    CACHE STRING "name=package pairs: the vendor library each backend plugin package recommends")

foreach(_comp IN LISTS _kiln_components)
  string(TOUPPER "${_comp}" _COMP)
  if(_comp STREQUAL "runtime")
    set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME kiln)
    set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "Kiln ONNX inference runtime: libkiln and the kiln command\n"
        " Runs ONNX models on portable kernels and on backend plugins (kiln-backend-*);\n"
        " libkiln_runtime and kiln-run-program run compiled .kiln programs alone.")
  elseif(_comp STREQUAL "dev")
    set(CPACK_DEBIAN_DEV_PACKAGE_NAME kiln-dev)
    set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
    set(CPACK_COMPONENT_DEV_DEPENDS runtime)
    set(CPACK_COMPONENT_DEV_DESCRIPTION "Kiln ONNX inference runtime: development files\n"
        " C++20 headers, find_package(Kiln) (Kiln::kiln), pkg-config kiln, and the\n"
        " backend plugin SDK (find_package(KilnBackend)) with the template plugin's sources.")
  elseif(_comp STREQUAL "python")
    set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-kiln)
    set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
    # libkiln comes from the kiln package, which dpkg-shlibdeps cannot see here.
    set(CPACK_DEBIAN_PYTHON_PACKAGE_SHLIBDEPS OFF)
    set(CPACK_COMPONENT_PYTHON_DEPENDS runtime)
    set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3 (>= 3.11), python3 (<< 3.12), python3-numpy, libstdc++6, libc6")
    set(CPACK_COMPONENT_PYTHON_DESCRIPTION "Kiln ONNX inference runtime: Python 3 module\n"
        " kiln.Session, and kiln.InferenceSession for scripts written for ONNX Runtime.")
  else()
    set(CPACK_DEBIAN_${_COMP}_PACKAGE_NAME "kiln-backend-${_comp}")
    set(CPACK_COMPONENT_${_COMP}_DEPENDS runtime)
    set(CPACK_COMPONENT_${_COMP}_DESCRIPTION "Kiln backend plugin: ${_comp}\n"
        " Installs into /usr/lib/kiln/backends, where kiln and libkiln find it.")
    foreach(_pair IN LISTS KILN_BACKEND_VENDOR_PACKAGES)
      string(REPLACE "=" ";" _pair "${_pair}")
      list(GET _pair 0 _name)
      list(GET _pair 1 _package)
      if(_comp STREQUAL _name)
        set(CPACK_DEBIAN_${_COMP}_PACKAGE_RECOMMENDS "${_package}")
      endif()
    endforeach()
  endif()
endforeach()

include(CPack)
unset(_kiln_components)
