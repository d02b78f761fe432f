"""Every exported model (bench/models/out, skipped when absent) compiled to a
.kiln program, then run, gives the ONNX path's outputs: with portable kernels
only and with each available plugin that exports compiled partitions.

Run: KILN_BIN=build/bin/kiln /usr/bin/python3 -m pytest -q tests/program
(ctest: program.roundtrip, label models).
"""

import json
import os
import subprocess

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.environ.get("KILN_MODELS_OUT", os.path.join(REPO, "bench", "models", "out"))
KILN = os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin", "kiln"))


def kiln(*args):
    r = subprocess.run([KILN, *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"kiln {' '.join(map(str, args))}:\n{r.stderr}"
    return r


def models():
    if not os.path.isdir(MODELS):
        return []
    return sorted(m for m in os.listdir(MODELS) if os.path.isfile(os.path.join(MODELS, m, "model.onnx")))


def plugins():
    if not os.access(KILN, os.X_OK):
        return []
    info = json.loads(kiln("backends", "--json").stdout)
    return [b["name"] for b in info["backends"] if b["available"] and b["supports_export"]]


def outputs(d):
    out = []
    i = 0
    while os.path.exists(os.path.join(d, f"output_{i}.pb")):
        t = TensorProto()
        with open(os.path.join(d, f"output_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        out.append(numpy_helper.to_array(t))
        i += 1
    return out


@pytest.mark.skipif(not models(), reason=f"no exported models under {MODELS}")
@pytest.mark.parametrize("backend", ["portable"] + plugins())
@pytest.mark.parametrize("model", models())
def test_round_trip(model, backend, tmp_path):
    src = os.path.join(MODELS, model, "model.onnx")
    inputs = os.path.join(MODELS, model, "test_data_set_0")
    backends = backend if backend == "portable" else f"{backend},portable"
    prog = tmp_path / f"{model}.kiln"
    kiln("compile", src, "-o", prog, "--backends", backends)
    kiln("run", src, "--input-dir", inputs, "--output-dir", tmp_path / "onnx", "--backends", backends)
    kiln("run", prog, "--input-dir", inputs, "--output-dir", tmp_path / "kiln")
    want, got = outputs(tmp_path / "onnx"), outputs(tmp_path / "kiln")
    assert len(want) == len(got) > 0
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
