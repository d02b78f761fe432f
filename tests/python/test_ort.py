"""The ONNX Runtime subset: the ORT-style script, providers, errors."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import kiln
import ort_style_script


def test_ort_style_script(add_mul_model, capsys):
    ort_style_script.main(kiln, str(add_mul_model))
    assert capsys.readouterr().out.strip().endswith("OK")


def test_ort_style_script_as_a_program(add_mul_model):
    r = subprocess.run([sys.executable, ort_style_script.__file__, str(add_mul_model), "kiln"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("OK")


def test_provider_mapping():
    assert kiln.PROVIDER_TO_BACKEND == {"XnnpackExecutionProvider": "xnnpack",
                                        "DnnlExecutionProvider": "onednn",
                                        "CPUExecutionProvider": "portable"}


def test_unknown_provider_names_the_available_ones(add_mul_model):
    with pytest.raises(kiln.InvalidArgument,
                       match="unknown provider 'CUDAExecutionProvider'; available providers: .*CPUExecutionProvider"):
        kiln.InferenceSession(str(add_mul_model), providers=["CUDAExecutionProvider"])


def test_known_provider_without_its_plugin_is_skipped_with_a_warning(add_mul_model):
    missing = [p for p in ("XnnpackExecutionProvider", "DnnlExecutionProvider")
               if p not in kiln.get_available_providers()]
    if not missing:
        pytest.skip("both plugins are installed")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = kiln.InferenceSession(str(add_mul_model), providers=[missing[0], "CPUExecutionProvider"])
    assert s.get_providers() == ["CPUExecutionProvider"]
    assert any(missing[0] in str(w.message) for w in caught)


def test_available_provider_is_used(add_mul_model):
    available = [p for p in kiln.get_available_providers() if p != "CPUExecutionProvider"]
    if not available:
        pytest.skip("no backend plugin is available")
    s = kiln.InferenceSession(str(add_mul_model), providers=[available[0], "CPUExecutionProvider"])
    assert s.get_providers() == [available[0], "CPUExecutionProvider"]


def test_session_options_threads(add_mul_model):
    so = kiln.SessionOptions()
    assert so.intra_op_num_threads == 0
    so.intra_op_num_threads = 2
    s = kiln.InferenceSession(str(add_mul_model), sess_options=so)
    assert s.get_session_options() is so
    a = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(s.run(None, {"a": a, "b": a})[0], a * 4)


def test_ort_errors_are_kiln_errors(add_mul_model):
    s = kiln.InferenceSession(str(add_mul_model))
    with pytest.raises(kiln.InvalidArgument, match="unknown output 'nope'"):
        s.run(["nope"], {"a": np.ones((1, 4), np.float32), "b": np.ones((1, 4), np.float32)})
    with pytest.raises(kiln.InvalidArgument, match="unknown input 'c'"):
        s.run(None, {"c": np.ones((1, 4), np.float32)})
