"""Shared fixtures of the kiln CLI tests.

Run: KILN_BIN=build/bin/kiln /usr/bin/python3 -m pytest -q tests/cli
(ctest runs them as cli.errors with KILN_BIN set).
"""

import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def kiln_bin():
    path = os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin", "kiln"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"no kiln binary at {path}; build it or set KILN_BIN")
    return path


class Kiln:
    def __init__(self, path):
        self.path = path

    def __call__(self, *args, cwd=None):
        return subprocess.run([self.path, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                              timeout=120)

    def error(self, *args):
        """Runs a command that must fail; returns its single stderr line."""
        r = self(*args)
        assert r.returncode != 0, f"expected failure, got exit 0; stdout:\n{r.stdout}"
        lines = r.stderr.splitlines()
        assert len(lines) == 1, f"expected one stderr line, got {len(lines)}:\n{r.stderr}"
        assert lines[0].startswith("kiln: error: "), lines[0]
        return lines[0]


@pytest.fixture(scope="session")
def kiln(kiln_bin):
    return Kiln(kiln_bin)


def save_model(path, nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def write_pb(path, array, name=""):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(array), name).SerializeToString())


def read_pb(path):
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


@pytest.fixture(scope="session")
def add_model(tmp_path_factory):
    """z = x + y, x and y float32[2, 3]."""
    d = tmp_path_factory.mktemp("add")
    return save_model(d / "add.onnx", [helper.make_node("Add", ["x", "y"], ["z"])],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                       helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                      [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])


@pytest.fixture(scope="session")
def mixed_model(tmp_path_factory):
    """Inputs of several dtypes and a symbolic dim, for random inputs:
    a float32[N, 4] -> a2 = a + a; i int64[3] -> i2 = i + i; b bool[2] -> nb = Not(b)."""
    d = tmp_path_factory.mktemp("mixed")
    return save_model(d / "mixed.onnx",
                      [helper.make_node("Add", ["a", "a"], ["a2"]),
                       helper.make_node("Add", ["i", "i"], ["i2"]),
                       helper.make_node("Not", ["b"], ["nb"])],
                      [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
                       helper.make_tensor_value_info("i", TensorProto.INT64, [3]),
                       helper.make_tensor_value_info("b", TensorProto.BOOL, [2])],
                      [helper.make_tensor_value_info("a2", TensorProto.FLOAT, ["N", 4]),
                       helper.make_tensor_value_info("i2", TensorProto.INT64, [3]),
                       helper.make_tensor_value_info("nb", TensorProto.BOOL, [2])])


X = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
Y = np.full((2, 3), 0.5, dtype=np.float32)
