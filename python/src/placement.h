// Placement reports and backend records as Python objects.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include <kiln/backends.h>

namespace kiln::python {

/// The dict `kiln inspect --json` prints for `report` (same keys).
pybind11::dict placement_dict(const std::string& model, const PlacementReport& report);
/// Binds kiln.BackendInfo (the records kiln.backends() returns).
void register_placement_types(pybind11::module_& m);

}  // namespace kiln::python
