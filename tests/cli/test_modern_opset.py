"""A model with opset-18-or-later ops (written with onnx.helper, which in
ONNX 1.12 still writes any op name and opset) runs end to end in `kiln run`:
RMSNormalization-23 -> Gelu-20 (tanh) -> ReduceMean-18 (axes as an input)
-> BitwiseAnd-18 on a side branch, at IR version 11."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_model(path):
    nodes = [
        helper.make_node("RMSNormalization", ["x", "scale"], ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("Gelu", ["n"], ["g"], approximate="tanh"),
        helper.make_node("ReduceMean", ["g", "axes"], ["y"], keepdims=0),
        helper.make_node("BitwiseAnd", ["a", "b"], ["c"]),
    ]
    graph = helper.make_graph(
        nodes, "modern",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("a", TensorProto.INT32, [3]),
         helper.make_tensor_value_info("b", TensorProto.INT32, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("c", TensorProto.INT32, [3])],
        [numpy_helper.from_array(np.linspace(0.5, 2.0, 4).astype(np.float32), "scale"),
         numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 11
    onnx.save(model, str(path))


def reference(x, a, b):
    scale = np.linspace(0.5, 2.0, 4).astype(np.float32)
    n = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-5) * scale
    g = 0.5 * n * (1 + np.tanh(np.sqrt(2 / np.pi) * (n + 0.044715 * n ** 3)))
    return g.mean(axis=-1), a & b


def test_opset23_model_runs_end_to_end(kiln, tmp_path):
    model = tmp_path / "modern.onnx"
    make_model(model)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    a = np.array([12, -1, 7], dtype=np.int32)
    b = np.array([10, 5, 3], dtype=np.int32)
    for name, v in (("x", x), ("a", a), ("b", b)):
        np.save(tmp_path / f"{name}.npy", v)
    out = tmp_path / "out"
    r = kiln("run", model, "--input", f"x={tmp_path / 'x.npy'}", "--input", f"a={tmp_path / 'a.npy'}",
             "--input", f"b={tmp_path / 'b.npy'}", "--output-dir", out)
    assert r.returncode == 0, r.stderr
    want_y, want_c = reference(x, a, b)
    y = numpy_helper.to_array(onnx.load_tensor(str(out / "output_0.pb")))
    c = numpy_helper.to_array(onnx.load_tensor(str(out / "output_1.pb")))
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(c, want_c)
