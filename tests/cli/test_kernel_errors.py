"""A kernel error as a user sees it from `kiln run`: one line, the node named
once (by the executor), then the kernel's own words."""

import numpy as np
from onnx import TensorProto, helper

from conftest import save_model, write_pb


def run_error(kiln, tmp_path, model, inputs):
    d = tmp_path / "inputs"
    d.mkdir()
    for i, a in enumerate(inputs):
        write_pb(d / f"input_{i}.pb", a)
    return kiln.error("run", model, "--input-dir", d)


def test_compute_error_names_the_node_once(kiln, tmp_path):
    model = save_model(tmp_path / "gather.onnx", [helper.make_node("Gather", ["x", "i"], ["y"], name="pick")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                        helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    line = run_error(kiln, tmp_path, model, [np.zeros(3, np.float32), np.array([7], np.int64)])
    assert line == (f"kiln: error: running '{model}' failed: "
                    "node Gather 'pick': input 1 (indices) has index 7, outside [-3, 2]")
