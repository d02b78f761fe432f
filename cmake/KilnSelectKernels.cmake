# Selective builds: kiln_select_kernels(TARGET FILE...) gives TARGET (an
# executable linked with kiln_portable_kernels) only the portable kernels of
# the ops FILE... use (.kiln programs, .onnx models, or op lists).
#
# At build time scripts/kiln_op_list.py writes the op list of the files, and
# kiln_select_kernels (src/kernels/portable/tools) writes a registration file
# that defines kiln::register_portable_kernels() calling only the families
# implementing those ops and registering only those ops. The file is compiled
# into TARGET, so the linker takes only those families' objects from the
# kiln_portable_kernels archive (portable/all.cpp, which names every family,
# is never pulled in). Op granularity inside a family is registration only:
# a family's other kernels stay in the binary but are not registered.
include_guard(GLOBAL)

function(kiln_select_kernels target)
  set(files ${ARGN})
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${target}_selected)
  set(ops ${dir}/ops.txt)
  set(cpp ${dir}/selected_kernels.cpp)
  add_custom_command(
    OUTPUT ${ops}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/kiln_op_list.py -o ${ops} ${files}
    DEPENDS ${files} ${PROJECT_SOURCE_DIR}/scripts/kiln_op_list.py
    COMMENT "op list of ${target}'s selective build")
  add_custom_command(
    OUTPUT ${cpp}
    COMMAND $<TARGET_FILE:kiln_select_kernels> ${cpp} ${ops}
    DEPENDS ${ops} kiln_select_kernels
    COMMENT "registration file of ${target}'s selective build")
  target_sources(${target} PRIVATE ${cpp})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
endfunction()
