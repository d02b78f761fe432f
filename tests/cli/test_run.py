"""kiln run: every bad input exits non-zero with one line naming the problem;
the happy paths write outputs readable with onnx.numpy_helper."""

import os

import numpy as np

from conftest import X, Y, read_pb, write_pb


def input_dir(tmp_path, arrays, ext=".pb"):
    d = tmp_path / "inputs"
    d.mkdir()
    for i, a in enumerate(arrays):
        if ext == ".pb":
            write_pb(d / f"input_{i}.pb", a)
        else:
            np.save(d / f"input_{i}.npy", a)
    return d


# --- bad input: one test per case -------------------------------------------


def test_missing_model_file(kiln, tmp_path):
    line = kiln.error("run", tmp_path / "nope.onnx")
    assert "model file" in line and "nope.onnx' does not exist" in line


def test_model_is_a_directory(kiln, tmp_path):
    line = kiln.error("run", tmp_path)
    assert "is a directory" in line


def test_malformed_model(kiln, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07this is not protobuf \xff\xff\xff\xff")
    line = kiln.error("run", bad)
    assert f"cannot load model '{bad}'" in line


def test_truncated_model(kiln, tmp_path, add_model):
    cut = tmp_path / "cut.onnx"
    data = open(add_model, "rb").read()
    cut.write_bytes(data[: len(data) // 2])
    line = kiln.error("run", cut)
    assert f"cannot load model '{cut}'" in line


def test_missing_input_with_input_flag(kiln, tmp_path, add_model):
    np.save(tmp_path / "x.npy", X)
    line = kiln.error("run", add_model, "--input", f"x={tmp_path / 'x.npy'}")
    assert "missing input 'y'" in line and "--input y=FILE" in line


def test_missing_input_in_input_dir(kiln, tmp_path, add_model):
    d = input_dir(tmp_path, [X])
    line = kiln.error("run", add_model, "--input-dir", d)
    assert "missing input 'y'" in line and "input_1.pb" in line


def test_unknown_input_name(kiln, tmp_path, add_model):
    np.save(tmp_path / "x.npy", X)
    line = kiln.error("run", add_model, "--input", f"q={tmp_path / 'x.npy'}")
    assert "unknown input 'q'" in line and "'x', 'y'" in line


def test_input_given_twice(kiln, tmp_path, add_model):
    np.save(tmp_path / "x.npy", X)
    x = tmp_path / "x.npy"
    line = kiln.error("run", add_model, "--input", f"x={x}", "--input", f"x={x}")
    assert "input 'x' is given more than once" in line


def test_wrong_dtype_npy(kiln, tmp_path, add_model):
    np.save(tmp_path / "x.npy", X.astype(np.int64))
    np.save(tmp_path / "y.npy", Y)
    line = kiln.error("run", add_model, "--input", f"x={tmp_path / 'x.npy'}", "--input", f"y={tmp_path / 'y.npy'}")
    assert "input 'x'" in line and "has dtype int64" in line and "float32[2, 3]" in line


def test_wrong_dtype_pb(kiln, tmp_path, add_model):
    d = input_dir(tmp_path, [X, Y.astype(np.float64)])
    line = kiln.error("run", add_model, "--input-dir", d)
    assert "input 'y'" in line and "has dtype float64" in line


def test_wrong_shape(kiln, tmp_path, add_model):
    d = input_dir(tmp_path, [X.reshape(3, 2), Y], ext=".npy")
    line = kiln.error("run", add_model, "--input-dir", d)
    assert "input 'x'" in line and "has shape [3, 2]" in line and "float32[2, 3]" in line


def test_input_file_does_not_exist(kiln, tmp_path, add_model):
    np.save(tmp_path / "y.npy", Y)
    missing = tmp_path / "missing.npy"
    line = kiln.error("run", add_model, "--input", f"x={missing}", "--input", f"y={tmp_path / 'y.npy'}")
    assert "cannot read input 'x'" in line and f"'{missing}' does not exist" in line


def test_input_file_is_garbage(kiln, tmp_path, add_model):
    d = input_dir(tmp_path, [X, Y])
    (d / "input_0.pb").write_bytes(b"\xff\xff\xff\xff garbage")
    line = kiln.error("run", add_model, "--input-dir", d)
    assert "cannot read input 'x'" in line and "input_0.pb" in line


def test_input_file_truncated_npy(kiln, tmp_path, add_model):
    d = input_dir(tmp_path, [X, Y], ext=".npy")
    data = (d / "input_0.npy").read_bytes()
    (d / "input_0.npy").write_bytes(data[:-8])
    line = kiln.error("run", add_model, "--input-dir", d)
    assert "cannot read input 'x'" in line and "truncated data" in line


def test_input_file_fortran_order(kiln, tmp_path, add_model):
    np.save(tmp_path / "x.npy", np.asfortranarray(X))
    np.save(tmp_path / "y.npy", Y)
    line = kiln.error("run", add_model, "--input", f"x={tmp_path / 'x.npy'}", "--input", f"y={tmp_path / 'y.npy'}")
    assert "Fortran-order" in line


def test_input_file_unreadable(kiln, tmp_path, add_model):
    if os.geteuid() == 0:
        unreadable = tmp_path  # root reads any file; a directory is unreadable as a value file
        expected = "is a directory"
    else:
        unreadable = tmp_path / "x.npy"
        np.save(unreadable, X)
        os.chmod(unreadable, 0)
        expected = "cannot open"
    np.save(tmp_path / "y.npy", Y)
    line = kiln.error("run", add_model, "--input", f"x={unreadable}", "--input", f"y={tmp_path / 'y.npy'}")
    assert "cannot read input 'x'" in line and expected in line


def test_input_dir_does_not_exist(kiln, tmp_path, add_model):
    line = kiln.error("run", add_model, "--input-dir", tmp_path / "nowhere")
    assert "input directory" in line and "does not exist" in line


def test_input_dir_has_extra_inputs(kiln, tmp_path, add_model):
    d = input_dir(tmp_path, [X, Y, Y])
    line = kiln.error("run", add_model, "--input-dir", d)
    assert "input_2.pb' has no model input" in line and "the model has 2 inputs" in line


def test_input_dir_and_input_together(kiln, tmp_path, add_model):
    d = input_dir(tmp_path, [X, Y])
    line = kiln.error("run", add_model, "--input-dir", d, "--input", f"x={d / 'input_0.pb'}")
    assert "--input-dir and --input cannot be used together" in line


def test_input_flag_without_equals(kiln, add_model):
    line = kiln.error("run", add_model, "--input", "x")
    assert "--input expects NAME=FILE, got 'x'" in line


def test_unknown_flag(kiln, add_model):
    line = kiln.error("run", add_model, "--bogus")
    assert "unknown flag '--bogus'" in line


def test_flag_without_value(kiln, add_model):
    line = kiln.error("run", add_model, "--threads")
    assert "flag --threads needs a value" in line


def test_bad_thread_count(kiln, add_model):
    line = kiln.error("run", add_model, "--threads", "many")
    assert "--threads expects an integer" in line and "'many'" in line


def test_no_model_given(kiln):
    line = kiln.error("run")
    assert "needs a MODEL" in line


def test_two_models_given(kiln, add_model):
    line = kiln.error("run", add_model, add_model)
    assert "takes one MODEL" in line


def test_unknown_command(kiln):
    line = kiln.error("frobnicate")
    assert "unknown command 'frobnicate'" in line


def test_output_dir_is_a_file(kiln, tmp_path, add_model):
    f = tmp_path / "file"
    f.write_text("x")
    line = kiln.error("run", add_model, "--output-dir", f)
    assert "cannot create output directory" in line


# --- happy paths -----------------------------------------------------------


def test_pb_input_dir_writes_outputs(kiln, tmp_path, add_model):
    d = input_dir(tmp_path, [X, Y])
    out = tmp_path / "out" / "nested"
    r = kiln("run", add_model, "--input-dir", d, "--output-dir", out)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    np.testing.assert_array_equal(read_pb(out / "output_0.pb"), X + Y)
    assert "z" in r.stdout and "float32[2, 3]" in r.stdout and "0.5, 0.75, 1" in r.stdout
    assert "wrote 1 file to" in r.stdout


def test_npy_inputs_by_name(kiln, tmp_path, add_model):
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    out = tmp_path / "out"
    r = kiln("run", add_model, "--input", f"x={tmp_path / 'x.npy'}", f"--input=y={tmp_path / 'y.npy'}",
             "--output-dir", out, "--threads", "2")
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(read_pb(out / "output_0.pb"), X + Y)


def test_npy_input_dir(kiln, tmp_path, add_model):
    d = input_dir(tmp_path, [X, Y], ext=".npy")
    out = tmp_path / "out"
    r = kiln("run", add_model, "--input-dir", d, "--output-dir", out)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(read_pb(out / "output_0.pb"), X + Y)


def test_random_inputs_are_deterministic_and_typed(kiln, tmp_path, mixed_model):
    outs = []
    for run in range(2):
        out = tmp_path / f"out{run}"
        r = kiln("run", mixed_model, "--output-dir", out)
        assert r.returncode == 0, r.stderr
        assert "random" in r.stdout
        outs.append([read_pb(out / f"output_{i}.pb") for i in range(3)])
    a2, i2, nb = outs[0]
    assert a2.dtype == np.float32 and a2.shape == (1, 4)  # symbolic N became 1
    assert np.all(np.abs(a2) < 2)  # a in [-1, 1)
    assert i2.dtype == np.int64 and i2.shape == (3,) and np.all((i2 >= 0) & (i2 < 8) & (i2 % 2 == 0))
    assert nb.dtype == np.bool_ and nb.shape == (2,)
    for x, y in zip(outs[0], outs[1]):
        np.testing.assert_array_equal(x, y)
    r = kiln("run", mixed_model, "--output-dir", tmp_path / "seeded", "--seed", "7")
    assert r.returncode == 0, r.stderr
    assert not np.array_equal(read_pb(tmp_path / "seeded" / "output_0.pb"), a2)
