#include "errors.h"

#include <pybind11/pybind11.h>

namespace kiln::python {

namespace pyb = pybind11;

void register_error_translator() {
  pyb::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      // kiln._errors maps each StatusCode to its class (KilnError subclasses).
      pyb::object cls = pyb::module_::import("kiln._errors").attr("error_class")(static_cast<int>(e.code()));
      PyErr_SetObject(cls.ptr(), pyb::str(e.what()).ptr());
    }
  });
}

}  // namespace kiln::python
