"""kiln.Session: metadata, run, conversions, placement, backends, errors."""

import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, helper

import kiln
from conftest import identity_model, make_model

A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.ones((2, 4), dtype=np.float32)


def test_inputs_and_outputs(add_mul_model):
    s = kiln.Session(add_mul_model)
    assert [i.name for i in s.inputs] == ["a", "b"]
    assert [o.name for o in s.outputs] == ["y", "z"]
    a = s.inputs[0]
    assert a.dtype == np.float32 and a.shape == ["N", 4] and a.type == "tensor(float)"
    assert a.kind == "tensor" and a.type_string == "float32[N, 4]"
    unknown = kiln.Session(make_model([helper.make_node("Identity", ["x"], ["y"])],
                                      [("x", TensorProto.INT64, [None, 2])], [("y", TensorProto.INT64, None)]))
    assert unknown.inputs[0].shape == [None, 2]
    assert unknown.outputs[0].type == "tensor(int64)"


def test_run_from_path_pathlike_and_bytes(add_mul_model):
    expect = {"y": (A + B) * 2, "z": A - B}
    for model in (str(add_mul_model), pathlib.Path(add_mul_model), add_mul_model.read_bytes(),
                  bytearray(add_mul_model.read_bytes())):
        out = kiln.Session(model).run({"a": A, "b": B})
        assert list(out) == ["y", "z"]
        for k in expect:
            np.testing.assert_array_equal(out[k], expect[k])


def test_selected_outputs(add_mul_model):
    s = kiln.Session(add_mul_model)
    out = s.run({"a": A, "b": B}, outputs=["z"])
    assert list(out) == ["z"]
    with pytest.raises(kiln.InvalidArgument, match="unknown output 'w'; the model's outputs are: y, z"):
        s.run({"a": A, "b": B}, outputs=["w"])


def test_inputs_are_converted_when_needed(add_mul_model):
    s = kiln.Session(add_mul_model)
    expect = (A + B) * 2
    # float64, a list, a non-contiguous view, a Fortran-order array, big-endian.
    np.testing.assert_array_equal(s.run({"a": A.astype(np.float64), "b": B})["y"], expect)
    np.testing.assert_array_equal(s.run({"a": A.tolist(), "b": B})["y"], expect)
    wide = np.zeros((2, 8), dtype=np.float32)
    wide[:, ::2] = A
    np.testing.assert_array_equal(s.run({"a": wide[:, ::2], "b": B})["y"], expect)
    np.testing.assert_array_equal(s.run({"a": np.asfortranarray(A), "b": B})["y"], expect)
    np.testing.assert_array_equal(s.run({"a": A.astype(">f4"), "b": B})["y"], expect)


def test_inputs_are_not_modified_and_outputs_are_owned(add_mul_model):
    s = kiln.Session(add_mul_model)
    a = A.copy()
    out1 = s.run({"a": a, "b": B})
    np.testing.assert_array_equal(a, A)
    out1["y"][:] = -1  # writable, and not shared with the next run
    out2 = s.run({"a": a, "b": B})
    np.testing.assert_array_equal(out2["y"], (A + B) * 2)


def test_constant_output_is_copied():
    # An output that is a model constant: writing into it must not change the model.
    c = helper.make_tensor("c", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    s = kiln.Session(make_model([helper.make_node("Identity", ["c"], ["y"])], [], [("y", TensorProto.FLOAT, [3])], [c]))
    y = s.run({})["y"]
    y[:] = 0
    np.testing.assert_array_equal(s.run({})["y"], [1, 2, 3])


@pytest.mark.parametrize("feeds,error,message", [
    ({"a": A}, kiln.InvalidArgument, "b"),
    ({"a": A, "b": B, "c": B}, kiln.InvalidArgument, "unknown input 'c'; the model's inputs are: a, b"),
    ({"a": A.astype(np.complex64), "b": B}, kiln.InvalidArgument, "input 'a' expects float32, got complex64"),
    ({"a": np.array([["x"] * 4] * 2), "b": B}, kiln.InvalidArgument, "input 'a' expects float32, got strings"),
    ({"a": np.ones((2, 5), np.float32), "b": B}, kiln.InvalidArgument, "'a'"),
    ({"a": None, "b": B}, kiln.InvalidArgument, "input 'a' is None"),
])
def test_wrong_inputs(add_mul_model, feeds, error, message):
    s = kiln.Session(add_mul_model)
    with pytest.raises(error, match=message) as info:
        s.run(feeds)
    assert isinstance(info.value, ValueError) and isinstance(info.value, kiln.KilnError)
    assert "\n" not in str(info.value)


def test_wrong_call_shapes(add_mul_model):
    s = kiln.Session(add_mul_model)
    with pytest.raises(kiln.InvalidArgument, match="feeds must be a dict of input name -> numpy array, got list"):
        s.run([A, B])
    with pytest.raises(kiln.InvalidArgument, match="feed names must be str"):
        s.run({0: A})
    with pytest.raises(kiln.InvalidArgument, match="threads must be >= 0"):
        kiln.Session(add_mul_model, threads=-1)
    with pytest.raises(kiln.InvalidArgument, match="allow"):
        kiln.Session(add_mul_model, fallback="sometimes")
    with pytest.raises(kiln.InvalidArgument, match="NAME.KEY=VALUE"):
        kiln.Session(add_mul_model, backend_options=["nodot"])
    with pytest.raises(kiln.InvalidArgument, match="model must be a path"):
        kiln.Session(42)


def test_bad_models():
    with pytest.raises(kiln.NotFound, match="does-not-exist.onnx"):
        kiln.Session("/does-not-exist.onnx")
    with pytest.raises(kiln.KilnError) as info:
        kiln.Session(b"this is not an onnx model")
    assert str(info.value)
    bad = make_model([helper.make_node("NoSuchOp", ["x"], ["y"])], [("x", TensorProto.FLOAT, [1])],
                     [("y", TensorProto.FLOAT, [1])])
    with pytest.raises(kiln.KilnError, match="NoSuchOp"):
        kiln.Session(bad)


def test_unknown_backend_is_an_error(add_mul_model):
    with pytest.raises(kiln.NotFound, match="unknown backend 'no_such_backend'"):
        kiln.Session(add_mul_model, backends=["no_such_backend"])


def test_placement_matches_kiln_inspect_json(demo_model):
    s = kiln.Session(demo_model, backends=["portable"])
    p = s.placement()
    assert p["backends"] == ["portable"] and p["fallback"] == "allow"
    assert p["fallback_nodes"] == len(p["nodes"]) > 0
    cli = json.loads(subprocess.run([os.environ["KILN_BIN"], "inspect", str(demo_model), "--json",
                                     "--backends", "portable"], check=True, capture_output=True, text=True).stdout)
    assert set(cli) == set(p)
    assert [n["node"] for n in cli["nodes"]] == [n["node"] for n in p["nodes"]]
    assert cli["backends"] == p["backends"]


def test_backends_records():
    records = kiln.backends()
    for b in records:
        assert isinstance(b.name, str) and b.name
        assert isinstance(b.available, bool)
        assert b.available or b.reason
        for o in b.options:
            assert set(o) == {"name", "type", "default", "doc"}
    # The build tree's template plugin is found beside libkiln.so.
    if os.environ.get("KILN_EXPECT_TEMPLATE"):
        t = [b for b in records if b.name == "template"]
        assert t and t[0].abi_version.startswith("1.")


def test_template_backend_runs_part_of_the_model(demo_model):
    if "template" not in [b.name for b in kiln.backends()]:
        pytest.skip("the template plugin is not built")
    s = kiln.Session(demo_model, backends=["template", "portable"])
    assert s.placement()["backends"] == ["template", "portable"]
    x = np.random.default_rng(0).random((1, 1, 28, 28), dtype=np.float32)
    ref = kiln.Session(demo_model, backends=["portable"]).run({"image": x})
    out = s.run({"image": x})
    np.testing.assert_allclose(out["probabilities"], ref["probabilities"], rtol=1e-5, atol=1e-6)


def test_threads_option_gives_the_same_result(demo_model):
    x = np.random.default_rng(1).random((4, 1, 28, 28), dtype=np.float32)
    one = kiln.Session(demo_model, threads=1).run({"image": x})
    two = kiln.Session(demo_model, threads=2).run({"image": x})
    np.testing.assert_allclose(one["probabilities"], two["probabilities"], rtol=1e-5, atol=1e-6)


def test_docstrings():
    assert "fallback" in kiln.Session.__doc__
    assert "GIL" in kiln.Session.run.__doc__
    assert kiln.InferenceSession.__doc__ and kiln.backends.__doc__
    stub = pathlib.Path(kiln.__file__).with_name("__init__.pyi")
    assert stub.exists() and "class Session" in stub.read_text()


def test_inputs_in_place_when_contiguous_and_of_the_declared_dtype(add_mul_model):
    from kiln import _kiln
    s = kiln.Session(add_mul_model)
    borrowed, converted = _kiln._input_stats()
    s.run({"a": A, "b": B})
    assert _kiln._input_stats() == (borrowed + 2, converted)
    s.run({"a": A.astype(np.float64), "b": B[:, ::-1]})  # wrong dtype, not C-contiguous
    assert _kiln._input_stats() == (borrowed + 2, converted + 2)
