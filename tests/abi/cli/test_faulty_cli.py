"""Faulty plugins through the CLI (fakes/fake_faulty.c, fakes/fake_wrong_op.cpp
in $KILN_FAKES/faulty): kiln run with a plugin whose execute fails, kiln
inspect with one whose compile fails, check-backend on one that hangs in
is_available and on one that writes past its output buffer, the collapsed
and --verbose reports, the fusion probes, and kiln verify naming the one
wrong node inside a fused group.

Environment (set by ctest abi.cli): KILN_BIN, KILN_TEMPLATE, KILN_FAKES.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

KILN = os.environ.get("KILN_BIN", "kiln")
TEMPLATE = os.environ.get("KILN_TEMPLATE", "")
FAULTY = os.path.join(os.environ.get("KILN_FAKES", ""), "faulty")


def kiln(*args, env=None):
    e = dict(os.environ)
    e.pop("KILN_BACKEND_PATH", None)
    e.update(env or {})
    return subprocess.run([KILN, *args], capture_output=True, text=True, env=e, timeout=600)


def faulty(name):
    return os.path.join(FAULTY, "libkiln_fake_%s.so" % name)


def save(tmp_path, name, nodes, inits, out="y", extra_outputs=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2, 16]) for o in (out, *extra_outputs)]
    g = helper.make_graph(nodes, name, [x], outs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = str(tmp_path / (name + ".onnx"))
    onnx.save(m, path)
    return path


def elementwise_chain(tmp_path, with_tanh=True):
    """Ten elementwise nodes, all claimed by wrong_op as one group; the
    sixth is Tanh (the plugin's wrong op) unless with_tanh is False."""
    rng = np.random.default_rng(0)
    inits = {"c%d" % i: rng.uniform(-1, 1, 16).astype(np.float32) for i in range(4)}
    ops = [("Add", "a1", ["x", "c0"]), ("Mul", "m2", ["a1", "c1"]), ("Relu", "r3", ["m2"]),
           ("Sigmoid", "s4", ["r3"]), ("Add", "a5", ["s4", "a1"]),
           ("Tanh" if with_tanh else "Relu", "t6", ["a5"]),
           ("Mul", "m7", ["t6", "c2"]), ("Relu", "r8", ["m7"]), ("Add", "a9", ["r8", "c3"]),
           ("Sigmoid", "y", ["a9"])]
    nodes = [helper.make_node(op, ins, [name], name=name) for op, name, ins in ops]
    return save(tmp_path, "chain" if with_tanh else "chain_ok", nodes, inits)


def relu_model(tmp_path):
    nodes = [helper.make_node("Neg", ["x"], ["n"], name="neg"), helper.make_node("Relu", ["n"], ["y"], name="relu")]
    return save(tmp_path, "neg_relu", nodes, {})


def test_verify_names_the_wrong_node_inside_a_fused_group(tmp_path):
    model = elementwise_chain(tmp_path)
    r = kiln("verify", model, "--backends", "wrong_op", "--backend-path", faulty("wrong_op"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "10 of 10 nodes in 1 partitions" in r.stdout, r.stdout
    assert "first node that differs: Tanh 't6', node 6 of 10" in r.stdout, r.stdout
    assert "compiled alone it differs too: max abs" in r.stdout, r.stdout
    assert "0 of 1 partitions match, 1 differ" in r.stdout
    # Only the bisection names a node.
    quick = kiln("verify", model, "--backends", "wrong_op", "--backend-path", faulty("wrong_op"), "--no-bisect")
    assert quick.returncode == 1 and "first node that differs" not in quick.stdout


def test_verify_passes_when_the_plugin_is_right(tmp_path):
    model = elementwise_chain(tmp_path, with_tanh=False)
    r = kiln("verify", model, "--backends", "wrong_op", "--backend-path", faulty("wrong_op"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 of 1 partitions match, 0 differ" in r.stdout


def test_verify_on_the_template(tmp_path):
    model = elementwise_chain(tmp_path, with_tanh=False)
    r = kiln("verify", model, "--backends", "template", "--backend-path", TEMPLATE, "--rtol", "1e-5", "--atol", "1e-6")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "partitions match, 0 differ" in r.stdout


@pytest.mark.parametrize("args,message", [
    ([], "kiln verify needs --backends NAME"),
    (["--backends", "a,b"], "kiln verify needs --backends NAME"),
    (["--backends", "wrong_op", "--rtol", "x"], "--rtol must be a number >= 0, got 'x'"),
])
def test_verify_flag_errors(tmp_path, args, message):
    r = kiln("verify", relu_model(tmp_path), "--backend-path", faulty("wrong_op"), *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_verify_unknown_backend(tmp_path):
    r = kiln("verify", relu_model(tmp_path), "--backends", "nosuch", "--backend-path", faulty("wrong_op"))
    assert r.returncode == 1 and "unknown backend 'nosuch'" in r.stderr, r.stderr


def test_verify_refuses_an_unavailable_backend(tmp_path):
    r = kiln("verify", relu_model(tmp_path), "--backends", "faulty_hang", "--backend-path", faulty("faulty_hang"),
             env={"KILN_PLUGIN_PROBE_TIMEOUT_MS": "100"})
    assert r.returncode == 1, r.stdout
    assert "backend 'faulty_hang' cannot be verified here" in r.stderr and "did not answer within 100 ms" in r.stderr


def test_run_with_a_plugin_whose_execute_fails(tmp_path):
    model = relu_model(tmp_path)
    x = np.full((2, 16), -1.0, np.float32)
    x[1, 3] = -1234.0  # Neg makes it 1234: the plugin's trigger
    np.save(tmp_path / "x.npy", x)
    r = kiln("run", model, "--backends", "faulty_execute", "--backend-path", faulty("faulty_execute"),
             "--input", "x=%s" % (tmp_path / "x.npy"))
    assert r.returncode == 1
    assert "backend 'faulty_execute'" in r.stderr and "fake device lost while running the group" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_inspect_shows_why_a_group_that_did_not_compile_fell_back(tmp_path):
    r = kiln("inspect", relu_model(tmp_path), "--backends", "faulty_compile", "--backend-path", faulty("faulty_compile"))
    assert r.returncode == 0, r.stderr
    assert "compile failed: " in r.stdout and "fake compiler crashed on the group (code 7)" in r.stdout, r.stdout


def test_check_backend_catches_a_write_past_the_output():
    r = kiln("check-backend", faulty("faulty_overflow"), "--no-suite")
    assert r.returncode == 1
    rows = [line for line in r.stdout.splitlines() if " FAIL " in line]
    assert any("outputs stay in bounds" in line and "wrote 16 bytes past the end" in line and "Relu" in line
               for line in rows), r.stdout


def test_check_backend_bounds_a_hanging_plugin_and_collapses_repeats():
    env = {"KILN_PLUGIN_PROBE_TIMEOUT_MS": "300"}
    r = kiln("check-backend", faulty("faulty_hang"), "--no-suite", env=env)
    assert r.returncode == 1
    assert any("availability" in line and " FAIL " in line and "did not answer within 300 ms" in line
               for line in r.stdout.splitlines()), r.stdout
    assert "more like it)" in r.stdout, r.stdout  # the skips of every later group, one line
    v = kiln("check-backend", faulty("faulty_hang"), "--no-suite", "--verbose", env=env)
    assert "more like it)" not in v.stdout
    assert len(v.stdout.splitlines()) > len(r.stdout.splitlines())
    assert any(len(line) > 200 for line in v.stdout.splitlines())  # details in full


def test_check_backend_fusion_probes_on_the_template():
    r = kiln("check-backend", TEMPLATE, "--no-suite", "--verbose")
    assert r.returncode == 0, r.stdout
    fusion = [line for line in r.stdout.splitlines() if line.strip().startswith("fusion ")]
    assert len(fusion) == 8, r.stdout
    fused = [line for line in fusion if " pass " in line and "largest 1" not in line]
    assert any(line.strip().startswith("fusion matmul_add_relu") for line in fused), r.stdout
    assert any(line.strip().startswith("fusion elementwise_chain") for line in fused), r.stdout


def test_check_backend_fusion_finds_the_wrong_op(tmp_path):
    r = kiln("check-backend", faulty("wrong_op"), "--no-suite", "--model", elementwise_chain(tmp_path))
    assert r.returncode == 1
    fails = [line for line in r.stdout.splitlines() if " FAIL " in line]
    assert any(line.strip().startswith("fusion elementwise_chain") for line in fails), r.stdout
    assert any(line.strip().startswith("model chain.onnx") and "first node that differs: Tanh 't6'" in line
               for line in fails), r.stdout


def test_check_backend_passes_backend_options():
    ok = kiln("check-backend", TEMPLATE, "--no-suite", "--backend-option", "template.max_group_size=1")
    assert ok.returncode == 0, ok.stdout
    ran = [line for line in ok.stdout.splitlines() if line.strip().startswith("fusion") and " pass " in line]
    assert ran and all("largest 1;" in line for line in ran), ok.stdout
    bad = kiln("check-backend", TEMPLATE, "--no-suite", "--backend-option", "colour=red")
    assert bad.returncode == 1
    assert "unknown option 'colour'" in bad.stdout


def test_check_backend_catches_fused_groups_that_crash():
    """Single nodes work, fused groups crash: each fusion probe fails on its
    own (its process dies), and the report still comes out."""
    r = kiln("check-backend", faulty("wrong_op"), "--no-suite", "--verbose", env={"KILN_FAKE_CRASH_FUSED": "1"})
    assert r.returncode == 1
    crashed = [line.strip() for line in r.stdout.splitlines() if " FAIL " in line and "crashed" in line]
    assert any(line.startswith("fusion diamond crashed") for line in crashed), r.stdout
    assert any(line.startswith("fusion elementwise_chain crashed") for line in crashed), r.stdout
    assert any(("Segmentation fault" in line or "exited with status 1" in line) for line in crashed), r.stdout
    assert r.stdout.strip().splitlines()[-1].endswith("failed") or "failed" in r.stdout.strip().splitlines()[-1]
