"""A script written for ONNX Runtime, from its documented Python API
(https://onnxruntime.ai/docs/api/python/api_summary.html): only the import
differs between the two runtimes.

    python3 ort_style_script.py MODEL.onnx [onnxruntime|kiln]

The model: inputs a, b float32 [N, 4]; outputs y = (a + b) * 2, z = a - b
(tests/python/conftest.py add_mul_model). Prints OK and exits 0 when every
call gives what ONNX Runtime documents.
"""

import importlib
import sys

import numpy as np


def main(ort, model_path):
    print("available providers:", ort.get_available_providers())
    assert "CPUExecutionProvider" in ort.get_available_providers()
    assert ort.get_device() == "CPU"

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"], sess.get_providers()

    inputs = sess.get_inputs()
    outputs = sess.get_outputs()
    assert [i.name for i in inputs] == ["a", "b"]
    assert [o.name for o in outputs] == ["y", "z"]
    assert inputs[0].type == "tensor(float)"
    assert inputs[0].shape == ["N", 4], inputs[0].shape

    a = np.random.rand(3, 4).astype(np.float32)
    b = np.random.rand(3, 4).astype(np.float32)
    feed = {inputs[0].name: a, inputs[1].name: b}
    # run(None, feed): every output, in get_outputs() order, as a list.
    y, z = sess.run(None, feed)
    np.testing.assert_allclose(y, (a + b) * 2, rtol=1e-6)
    np.testing.assert_allclose(z, a - b, rtol=1e-6)
    # run([names], feed): those outputs, in that order.
    (z_only,) = sess.run(["z"], feed)
    np.testing.assert_allclose(z_only, a - b, rtol=1e-6)
    z2, y2 = sess.run([outputs[1].name, outputs[0].name], feed, ort.RunOptions())
    np.testing.assert_allclose(y2, y)
    np.testing.assert_allclose(z2, z)

    # The model as bytes, providers as (name, options) tuples.
    with open(model_path, "rb") as f:
        sess2 = ort.InferenceSession(f.read(), providers=[("CPUExecutionProvider", {})])
    np.testing.assert_allclose(sess2.run(None, feed)[0], y)
    # No providers: the default ones.
    np.testing.assert_allclose(ort.InferenceSession(model_path).run(["y"], feed)[0], y)
    print("OK")


if __name__ == "__main__":
    runtime = sys.argv[2] if len(sys.argv) > 2 else "onnxruntime"
    main(importlib.import_module(runtime), sys.argv[1])
