"""One model exported from torch (bench/models/export.py), run through
kiln.Session, against torch's outputs saved beside it. Skips when the
models have not been exported (make models); KILN_MODELS_DIR overrides where
to look (default bench/models/out, then /work/models-out)."""

import os
import pathlib

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]
CANDIDATES = [os.environ.get("KILN_MODELS_DIR"), ROOT / "bench/models/out", "/work/models-out"]


def find_model(name):
    for c in CANDIDATES:
        if c and (pathlib.Path(c) / name / "test_data_set_0" / "output_0.pb").exists():
            return pathlib.Path(c) / name
    pytest.skip(f"no exported {name} (make models)")


def read_pb(path):
    t = TensorProto()
    t.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(t)


@pytest.mark.parametrize("backends", [None, ["portable"]], ids=["default", "portable"])
def test_squeezenet_matches_torch(backends):
    d = find_model("squeezenet1_1")
    s = kiln.Session(d / "model.onnx", backends=backends)
    x = read_pb(d / "test_data_set_0" / "input_0.pb")
    expect = read_pb(d / "test_data_set_0" / "output_0.pb")
    (name,) = [i.name for i in s.inputs]
    out = s.run({name: x})
    got = out[s.outputs[0].name]
    assert got.shape == expect.shape and got.dtype == expect.dtype
    # The tolerance of models.torch (tests/models/torch_models.sh).
    np.testing.assert_allclose(got, expect, atol=1e-5, rtol=1e-3)
