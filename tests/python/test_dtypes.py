"""Every numpy dtype ONNX has goes in and comes out of kiln unchanged."""

import numpy as np
import pytest
from onnx import TensorProto

import kiln
from conftest import identity_model

NUMERIC = [
    (TensorProto.FLOAT, np.float32), (TensorProto.DOUBLE, np.float64), (TensorProto.FLOAT16, np.float16),
    (TensorProto.INT8, np.int8), (TensorProto.INT16, np.int16), (TensorProto.INT32, np.int32),
    (TensorProto.INT64, np.int64), (TensorProto.UINT8, np.uint8), (TensorProto.UINT16, np.uint16),
    (TensorProto.UINT32, np.uint32), (TensorProto.UINT64, np.uint64), (TensorProto.BOOL, np.bool_),
    (TensorProto.COMPLEX64, np.complex64), (TensorProto.COMPLEX128, np.complex128),
]


def sample(dtype, shape=(2, 3)):
    rng = np.random.default_rng(7)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if np.issubdtype(dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("elem_type,dtype", NUMERIC, ids=[np.dtype(d).name for _, d in NUMERIC])
def test_round_trip(elem_type, dtype):
    s = kiln.Session(identity_model(elem_type))
    assert s.inputs[0].dtype == np.dtype(dtype)
    x = sample(dtype)
    y = s.run({"x": x})["y"]
    assert y.dtype == np.dtype(dtype)
    assert y.shape == x.shape
    np.testing.assert_array_equal(y, x)


def test_extreme_values_survive():
    s = kiln.Session(identity_model(TensorProto.FLOAT16, [4]))
    x = np.array([np.inf, -np.inf, 65504, 6e-8], dtype=np.float16)
    np.testing.assert_array_equal(s.run({"x": x})["y"], x)
    s = kiln.Session(identity_model(TensorProto.DOUBLE, [3]))
    x = np.array([np.nan, 1e300, -0.0])
    y = s.run({"x": x})["y"]
    assert np.isnan(y[0]) and y[1] == 1e300 and np.signbit(y[2])


def test_bfloat16_round_trip():
    s = kiln.Session(identity_model(TensorProto.BFLOAT16, [5]))
    assert s.inputs[0].type == "tensor(bfloat16)"
    # Values bfloat16 holds exactly come back exactly (as float32 without
    # ml_dtypes, as ml_dtypes.bfloat16 with it).
    x = np.array([1.0, -2.5, 0.0078125, 2.0**120, -0.0], dtype=np.float32)
    y = s.run({"x": x})["y"]
    np.testing.assert_array_equal(np.asarray(y, dtype=np.float32), x)
    # Rounding to nearest even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
    y = s.run({"x": np.array([1.00390625, 1.01171875, 0, 0, 0], dtype=np.float32)})["y"]
    np.testing.assert_array_equal(np.asarray(y, dtype=np.float32)[:2], [1.0, 1.015625])
    if y.dtype == np.float32:
        # uint16 arrays are the raw bits: 0x3f80 is 1.0, 0xc020 is -2.5.
        bits = np.array([0x3F80, 0xC020, 0, 0x7F80, 0x8000], dtype=np.uint16)
        np.testing.assert_array_equal(s.run({"x": bits})["y"], [1.0, -2.5, 0.0, np.inf, -0.0])


def test_strings_round_trip():
    s = kiln.Session(identity_model(TensorProto.STRING, [2, 2]))
    assert s.inputs[0].type == "tensor(string)"
    x = np.array([["a", "héllo"], ["", "x" * 1000]], dtype=object)
    y = s.run({"x": x})["y"]
    assert y.dtype == object and y.shape == (2, 2)
    assert y.tolist() == x.tolist()
    # numpy str arrays and bytes are accepted too.
    assert s.run({"x": np.array([["p", "q"], ["r", "s"]])})["y"].tolist() == [["p", "q"], ["r", "s"]]
    assert s.run({"x": np.array([[b"p", b"q"], [b"r", b"\xc3\xa9"]], dtype=object)})["y"].tolist() == [
        ["p", "q"], ["r", "é"]]


def test_string_tensor_rejects_other_objects():
    s = kiln.Session(identity_model(TensorProto.STRING, [2]))
    with pytest.raises(kiln.InvalidArgument, match="element 1 is int"):
        s.run({"x": np.array(["a", 3], dtype=object)})


def test_scalar_and_empty_tensors():
    s = kiln.Session(identity_model(TensorProto.FLOAT, []))
    y = s.run({"x": np.float32(4.5)})["y"]
    assert y.shape == () and y == 4.5
    s = kiln.Session(identity_model(TensorProto.INT64, ["N", 3]))
    y = s.run({"x": np.zeros((0, 3), dtype=np.int64)})["y"]
    assert y.shape == (0, 3) and y.dtype == np.int64


def test_integer_input_rejects_floats():
    s = kiln.Session(identity_model(TensorProto.INT64, [2]))
    with pytest.raises(kiln.InvalidArgument, match="input 'x' expects int64, got float32"):
        s.run({"x": np.array([1.5, 2.5], dtype=np.float32)})
    # Python ints convert (int64 from a list).
    np.testing.assert_array_equal(s.run({"x": [1, 2]})["y"], [1, 2])
