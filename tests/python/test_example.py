"""examples/python/run_model.py runs on the demo model."""

import os
import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples/python/run_model.py"


def test_example_runs(demo_model):
    r = subprocess.run([sys.executable, str(EXAMPLE), str(demo_model)], capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert "output probabilities: float32[1, 10]" in r.stdout
    assert "placement: backends tried" in r.stdout


def test_example_reports_errors(tmp_path):
    r = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path / "missing.onnx")], capture_output=True, text=True)
    assert r.returncode == 1
    assert "error (NotFound)" in r.stderr
