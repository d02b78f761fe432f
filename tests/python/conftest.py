"""Shared helpers of the kiln Python tests (run by ctest as python.pytest,
with PYTHONPATH=build/python and KILN_BIN=build/bin/kiln)."""

import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln


def make_model(nodes, inputs, outputs, initializers=(), opset=13):
    """Serialized ONNX model bytes. inputs/outputs: (name, elem_type, shape)."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="kiln-tests")
    model.ir_version = 8
    return model.SerializeToString()


def identity_model(elem_type, shape=("N", 3)):
    return make_model([helper.make_node("Identity", ["x"], ["y"])],
                      [("x", elem_type, list(shape))], [("y", elem_type, list(shape))])


@pytest.fixture
def add_mul_model(tmp_path):
    """y = (a + b) * 2, z = a - b; float32 [N, 4]; written to a file."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    data = make_model(
        [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "two"], ["y"]),
         helper.make_node("Sub", ["a", "b"], ["z"])],
        [("a", TensorProto.FLOAT, ["N", 4]), ("b", TensorProto.FLOAT, ["N", 4])],
        [("y", TensorProto.FLOAT, ["N", 4]), ("z", TensorProto.FLOAT, ["N", 4])], [two])
    path = tmp_path / "add_mul.onnx"
    path.write_bytes(data)
    return path


@pytest.fixture(scope="session")
def demo_model(tmp_path_factory):
    """The CLI's demo model (kiln demo-model), when KILN_BIN is set."""
    kiln_bin = os.environ.get("KILN_BIN")
    if not kiln_bin:
        pytest.skip("KILN_BIN is not set")
    path = tmp_path_factory.mktemp("demo") / "tiny_cnn.onnx"
    subprocess.run([kiln_bin, "demo-model", str(path)], check=True, capture_output=True)
    return path
