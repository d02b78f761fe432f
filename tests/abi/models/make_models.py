#!/usr/bin/python3
"""Writes the ONNX models of the ABI tests into OUT_DIR.

  make_models.py OUT_DIR [--resnet18]

Always: mlp.onnx (MatMul, Add, Relu, Sigmoid), dynamic.onnx (a symbolic batch
dim), custom_op.onnx (kiln.template.MulAdd). With --resnet18: resnet18.onnx
from torchvision (random weights, seed 0, opset 13); needs torch, exits 77
when it is missing. Uses Debian's /usr/bin/python3 (onnx, numpy, torch).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)


def mlp(path):
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal((32,)).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu1"),
        helper.make_node("Sigmoid", ["r"], ["s"], name="gate"),
        helper.make_node("Mul", ["r", "s"], ["g"], name="gated"),
        helper.make_node("MatMul", ["g", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w1, b1, w2])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def dynamic(path):
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"], name="double"),
        helper.make_node("Relu", ["a"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def custom_op(path):
    nodes = [
        helper.make_node("MulAdd", ["a", "b", "c"], ["m"], name="fma", domain="kiln.template"),
        helper.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("a", "b")]
    inputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [3]))
    graph = helper.make_graph(nodes, "custom_op", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("kiln.template", 1)])
    onnx.save(model, path)  # the checker does not know kiln.template


def resnet18(path):
    try:
        import torch
        import torchvision
    except ImportError:
        print("make_models.py: torch/torchvision missing; skipping resnet18", file=sys.stderr)
        sys.exit(77)
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, x, path, opset_version=13, input_names=["input"], output_names=["logits"])


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    mlp(os.path.join(out, "mlp.onnx"))
    dynamic(os.path.join(out, "dynamic.onnx"))
    custom_op(os.path.join(out, "custom_op.onnx"))
    if "--resnet18" in sys.argv[2:]:
        resnet18(os.path.join(out, "resnet18.onnx"))


if __name__ == "__main__":
    main()
