"""The xnnpack plugin through the kiln CLI: a model it covers runs with
--fallback require, kiln inspect groups what is left on portable kernels by
reason, and with libXNNPACK hidden the plugin reports why in one line while
models still run on the other backends.

Environment (set by ctest xnnpack.cli): KILN_BIN, KILN_XNNPACK (the plugin).
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

KILN = os.environ.get("KILN_BIN", "kiln")
PLUGIN = os.environ.get("KILN_XNNPACK", "")


# The toy models here are claimed whatever their size (the claim policy,
# which would leave them to portable kernels, has tests of its own).
CLAIM_ALL = ("--backend-option", "xnnpack.min_macs_per_byte=0")


def kiln(*args, env=None):
    e = dict(os.environ)
    e["KILN_BACKEND_PATH"] = PLUGIN
    e.pop("KILN_XNNPACK_LIB", None)
    e.update(env or {})
    return subprocess.run([KILN, *args], capture_output=True, text=True, env=e, timeout=300)


def const(name, shape, rng, positive=False):
    a = rng.standard_normal(shape).astype(np.float32)
    if positive:
        a = np.abs(a) + 0.5
    return numpy_helper.from_array(a, name)


def conv_net(path, with_transpose=False):
    """Conv-BN-Relu, a residual Add, a fire-style Concat, MaxPool, GAP,
    Flatten, Gemm: every node one the plugin claims (with_transpose adds a
    Transpose + Softmax over axis 1 it must decline)."""
    rng = np.random.default_rng(0)
    init = [const("w1", (8, 3, 3, 3), rng), const("s", (8,), rng), const("b", (8,), rng), const("m", (8,), rng),
            const("v", (8,), rng, True), const("w2", (4, 8, 1, 1), rng), const("w3", (4, 8, 3, 3), rng),
            const("fc", (10, 8), rng), const("fcb", (10,), rng)]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s", "b", "m", "v"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["e1"]),
        helper.make_node("Conv", ["r1", "w3"], ["e3"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["e1", "e3"], ["cat"], axis=1),
        helper.make_node("Add", ["cat", "r1"], ["res"]),
        helper.make_node("MaxPool", ["res"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1),
    ]
    out = "y"
    if with_transpose:
        nodes.append(helper.make_node("Transpose", ["p"], ["t"], perm=[0, 2, 3, 1]))
        nodes.append(helper.make_node("Softmax", ["p"], ["sm"], axis=1))
    outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 10])]
    if with_transpose:
        outputs.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 8, 8, 8]))
        outputs.append(helper.make_tensor_value_info("sm", TensorProto.FLOAT, [1, 8, 8, 8]))
    g = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])], outputs, init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, str(path))
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("xnn")
    return {"net": conv_net(d / "net.onnx"), "mixed": conv_net(d / "mixed.onnx", with_transpose=True), "dir": d}


def test_backends_shows_the_plugin_and_its_options():
    r = kiln("backends")
    assert r.returncode == 0, r.stderr
    assert "xnnpack 1.0.0" in r.stdout
    assert "available:   yes" in r.stdout
    for opt in ("xnnpack.threads", "xnnpack.concat", "xnnpack.skip_light_groups"):
        assert opt in r.stdout


def test_run_fallback_require_on_a_model_it_covers(models):
    r = kiln("run", models["net"], "--backends", "xnnpack", "--fallback", "require", *CLAIM_ALL)
    assert r.returncode == 0, r.stderr
    ins = kiln("inspect", models["net"], "--backends", "xnnpack", *CLAIM_ALL)
    assert ins.returncode == 0, ins.stderr
    # The BatchNormalization is folded into the Conv at load (src/optimizer).
    assert "nodes: 10 (10 in 1 partitions, 0 on portable" in ins.stdout
    assert "rewrites applied: conv+batchnorm 1" in ins.stdout


def test_outputs_match_portable_kernels(models):
    d = models["dir"]
    a = kiln("run", models["net"], "--backends", "xnnpack", "--output-dir", str(d / "a"), "--threads", "2", *CLAIM_ALL)
    b = kiln("run", models["net"], "--backends", "portable", "--output-dir", str(d / "b"))
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    ya = numpy_helper.to_array(onnx.load_tensor(str(d / "a" / "output_0.pb")))
    yb = numpy_helper.to_array(onnx.load_tensor(str(d / "b" / "output_0.pb")))
    np.testing.assert_allclose(ya, yb, rtol=1e-4, atol=1e-5)


def test_fallback_require_names_the_declined_nodes(models):
    r = kiln("run", models["mixed"], "--backends", "xnnpack", "--fallback", "require")
    assert r.returncode != 0
    assert "Transpose" in r.stderr and "no transpose" in r.stderr
    assert "Softmax over axis 1" in r.stderr


def test_inspect_groups_portable_nodes_by_reason(models):
    r = kiln("inspect", models["mixed"], "--backends", "xnnpack,portable", *CLAIM_ALL)
    assert r.returncode == 0, r.stderr
    assert "on portable kernels (2 nodes, by reason" in r.stdout
    assert "  1 node (1 x Transpose): xnnpack: Transpose: this XNNPACK" in r.stdout
    assert "  1 node (1 x Softmax): xnnpack: Softmax over axis 1" in r.stdout
    assert "node by node" not in r.stdout  # nodes are listed only with --verbose
    # The plugin's compile diagnostics are in the summary, under the
    # partition: it reads x (4-D) and writes y (2-D) and p (4-D, read by the
    # Transpose and Softmax left outside): p crosses the boundary transposed,
    # x (3 channels) is read in NCHW by the first Conv, run by the plugin's
    # stem kernel; the two Convs feeding the Concat write into its buffer.
    assert "    plugin:   compiled xnnpack:" in r.stdout, r.stdout
    assert "(2 convolutions write into their Concat, 0 depthwise run by the plugin's kernel, 0 inverted-residual blocks fused, 1 stem convolutions from NCHW, 0 classifier heads run with their fully connected), 1 boundary transpose (NCHW<->NHWC)" in r.stdout, r.stdout
    v = kiln("inspect", models["mixed"], "--backends", "xnnpack,portable", "--verbose", *CLAIM_ALL)
    assert v.returncode == 0, v.stderr
    assert "node by node:\n  Transpose\n    xnnpack: Transpose: this XNNPACK" in v.stdout, v.stdout
    # --verbose also logs them to stderr as they happen.
    assert "boundary transpose" in v.stderr, v.stderr


def test_missing_library_is_one_line_and_models_still_run(models):
    env = {"KILN_XNNPACK_LIB": "/nonexistent/libXNNPACK.so.0"}
    r = kiln("backends", env=env)
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stdout.splitlines() if "available:" in l and "xnnpack" in l.lower() or "libXNNPACK" in l]
    assert line, r.stdout
    assert "available:   no: cannot load /nonexistent/libXNNPACK.so.0" in r.stdout
    assert "install libxnnpack0" in r.stdout
    run = kiln("run", models["net"], env=env)
    assert run.returncode == 0, run.stderr
    req = kiln("run", models["net"], "--backends", "xnnpack", "--fallback", "require", env=env)
    assert req.returncode != 0
    assert "libXNNPACK" in req.stderr


def block_net(path):
    """Two mobilenet_v2-style inverted-residual blocks (1x1 expand + Relu6,
    3x3 depthwise + Relu6, 1x1 project; the first with its residual Add, the
    second with stride 2), which the plugin fuses on AVX-512 and AVX2+FMA CPUs."""
    rng = np.random.default_rng(1)
    init = [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")]
    nodes = []
    x, c = "x", 24
    for k, (ce, cout, stride) in enumerate([(144, 24, 1), (96, 40, 2)]):
        init += [const(f"we{k}", (ce, c, 1, 1), rng), const(f"be{k}", (ce,), rng), const(f"wd{k}", (ce, 1, 3, 3), rng),
                 const(f"bd{k}", (ce,), rng), const(f"wp{k}", (cout, ce, 1, 1), rng), const(f"bp{k}", (cout,), rng)]
        nodes += [
            helper.make_node("Conv", [x, f"we{k}", f"be{k}"], [f"e{k}"]),
            helper.make_node("Clip", [f"e{k}", "lo", "hi"], [f"re{k}"]),
            helper.make_node("Conv", [f"re{k}", f"wd{k}", f"bd{k}"], [f"d{k}"], group=ce, kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1], strides=[stride, stride]),
            helper.make_node("Clip", [f"d{k}", "lo", "hi"], [f"rd{k}"]),
            helper.make_node("Conv", [f"rd{k}", f"wp{k}", f"bp{k}"], [f"p{k}"]),
        ]
        y = f"p{k}"
        if stride == 1 and cout == c:
            nodes.append(helper.make_node("Add", [y, x], [f"a{k}"]))
            y = f"a{k}"
        x, c = y, cout
    g = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 24, 21, 19])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 40, 11, 10])], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


def test_fused_blocks_survive_export_and_import(tmp_path):
    """The compiled blob holds the Program only: importing it (a second run
    from the compile cache, at another thread count) rebuilds the fused
    blocks, and both runs match portable kernels."""
    net = block_net(tmp_path / "blocks.onnx")
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    fused = 2 if " avx512f" in flags or (" avx2" in flags and " fma" in flags) else 0
    ins = kiln("inspect", net, "--backends", "xnnpack", "--fallback", "require")
    assert ins.returncode == 0, ins.stderr
    assert f"{fused} inverted-residual blocks fused" in ins.stdout, ins.stdout
    cache = str(tmp_path / "cache")
    outs = []
    for k, threads in enumerate(["1", "2"]):
        r = kiln("run", net, "--backends", "xnnpack", "--fallback", "require", "--cache-dir", cache, "--threads", threads,
                 "--output-dir", str(tmp_path / f"o{k}"))
        assert r.returncode == 0, r.stderr
        outs.append(numpy_helper.to_array(onnx.load_tensor(str(tmp_path / f"o{k}" / "output_0.pb"))))
    assert any(p.endswith(".kcc") for _, _, files in os.walk(cache) for p in files)
    p = kiln("run", net, "--backends", "portable", "--output-dir", str(tmp_path / "p"))
    assert p.returncode == 0, p.stderr
    ref = numpy_helper.to_array(onnx.load_tensor(str(tmp_path / "p" / "output_0.pb")))
    for y in outs:
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
