#include "placement.h"

#include <pybind11/stl.h>

namespace kiln::python {

namespace pyb = pybind11;

pyb::dict placement_dict(const std::string& model, const PlacementReport& r) {
  pyb::list partitions;
  for (const PartitionInfo& p : r.partitions) {
    pyb::dict hist;
    for (const auto& [op, n] : p.op_histogram) hist[pyb::str(op)] = n;
    pyb::dict d;
    d["id"] = p.id;
    d["backend"] = p.backend;
    d["node_count"] = p.nodes.size();
    d["op_histogram"] = hist;
    d["nodes"] = p.nodes;
    d["inputs"] = p.inputs;
    d["outputs"] = p.outputs;
    d["boundary_bytes"] = p.boundary_bytes;
    d["serial"] = p.serial;
    d["custom_op"] = p.custom_op;
    partitions.append(d);
  }
  pyb::list nodes;
  for (const NodePlacement& n : r.nodes) {
    pyb::list reasons;
    for (const auto& [backend, reason] : n.reasons) {
      pyb::dict x;
      x["backend"] = backend;
      x["reason"] = reason;
      reasons.append(x);
    }
    pyb::dict d;
    d["node"] = n.node;
    d["op_type"] = n.op_type;
    d["placement"] = n.placement;
    d["partition"] = n.partition;
    d["reasons"] = reasons;
    nodes.append(d);
  }
  pyb::dict out;
  out["model"] = model;
  out["backends"] = r.backends;
  out["fallback"] = fallback_policy_name(r.fallback);
  out["partitions"] = partitions;
  out["nodes"] = nodes;
  out["notes"] = r.notes;
  out["warnings"] = r.warnings;
  pyb::dict rewrites;
  for (const auto& [name, count] : r.rewrites) rewrites[pyb::str(name)] = count;
  out["rewrites"] = rewrites;
  out["fallback_nodes"] = r.num_fallback();
  return out;
}

void register_placement_types(pyb::module_& m) {
  pyb::class_<BackendInfo>(m, "BackendInfo", "A backend plugin Kiln found: what it says about itself.")
      .def_readonly("name", &BackendInfo::name)
      .def_readonly("version", &BackendInfo::version)
      .def_readonly("vendor", &BackendInfo::vendor)
      .def_readonly("vendor_sdk_version", &BackendInfo::vendor_sdk_version)
      .def_readonly("description", &BackendInfo::description)
      .def_readonly("path", &BackendInfo::path, "The plugin's library file.")
      .def_readonly("abi_version", &BackendInfo::abi_version, "The plugin ABI it was built for, 'major.minor'.")
      .def_readonly("priority", &BackendInfo::priority, "Default order, higher first; 0: only when named.")
      .def_readonly("available", &BackendInfo::available, "False when it loaded but cannot run here (see reason).")
      .def_readonly("reason", &BackendInfo::unavailable_reason, "Why it is unavailable ('' when available).")
      .def_property_readonly(
          "options",
          [](const BackendInfo& b) {
            pyb::list out;
            for (const BackendOptionInfo& o : b.options) {
              pyb::dict d;
              d["name"] = o.name;
              d["type"] = o.type;
              d["default"] = o.default_value;
              d["doc"] = o.doc;
              out.append(d);
            }
            return out;
          },
          "Its options: dicts with name, type, default, doc.")
      .def_property_readonly(
          "devices",
          [](const BackendInfo& b) {
            pyb::list out;
            for (const BackendDeviceInfo& d : b.devices) out.append(pyb::make_tuple(d.name, d.kind, d.description));
            return out;
          },
          "Its devices: (name, kind, description) tuples.")
      .def("__repr__", [](const BackendInfo& b) {
        return "<kiln.BackendInfo " + b.name + " " + b.version + (b.available ? "" : " (unavailable: " + b.unavailable_reason + ")") + ">";
      });
}

}  // namespace kiln::python
