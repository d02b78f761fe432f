"""kiln conformance on small hand-made backend-test folders."""

import re

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import X, Y, save_model, write_pb

SUMMARY = re.compile(r"^\d+ passed, \d+ failed, \d+ skipped$")


def make_test(root, name, nodes, inputs, outputs, data_sets, opset=13):
    """data_sets: list of (input arrays, expected output arrays)."""
    d = root / name
    d.mkdir(parents=True)
    save_model(d / "model.onnx", nodes, inputs, outputs, opset=opset)
    for k, (ins, outs) in enumerate(data_sets):
        s = d / f"test_data_set_{k}"
        s.mkdir()
        for i, a in enumerate(ins):
            write_pb(s / f"input_{i}.pb", a)
        for i, a in enumerate(outs):
            write_pb(s / f"output_{i}.pb", a)
    return d


def add_test(root, name, expected, x=X, y=Y, dtype=TensorProto.FLOAT):
    shape = list(np.shape(x))
    return make_test(root, name, [helper.make_node("Add", ["x", "y"], ["z"])],
                     [helper.make_tensor_value_info("x", dtype, shape),
                      helper.make_tensor_value_info("y", dtype, shape)],
                     [helper.make_tensor_value_info("z", dtype, shape)],
                     [([x, y], expected)])


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    add_test(root, "test_add_ok", [X + Y])
    add_test(root, "test_add_within_rtol", [(X + Y) * np.float32(1 + 5e-4)])
    wrong = X + Y
    wrong[1, 2] = 7.0
    add_test(root, "test_add_wrong_value", [wrong])
    add_test(root, "test_add_wrong_shape", [(X + Y).reshape(3, 2)])
    add_test(root, "test_add_wrong_dtype", [(X + Y).astype(np.float64)])
    add_test(root, "test_add_extra_output", [X + Y, X])
    nan = np.array([np.nan, 1, np.inf], dtype=np.float32)
    add_test(root, "test_add_nan_inf", [nan + 1], x=nan, y=np.ones(3, np.float32))
    xi = np.array([1, 2, 3], dtype=np.int64)
    add_test(root, "test_add_int_exact", [xi * 2], x=xi, y=xi, dtype=TensorProto.INT64)
    add_test(root, "test_add_int_off_by_one", [xi * 2 + np.array([0, 0, 1])], x=xi, y=xi, dtype=TensorProto.INT64)
    make_test(root, "test_bernoulli_like", [helper.make_node("Bernoulli", ["x"], ["y"])],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
              # p = 0 draws only zeros, so the expected ones can never be
              # reproduced: the test is skipped, never passed by chance.
              [([np.zeros(3, np.float32)], [np.ones(3, np.float32)])], opset=15)
    dropout_io = ([helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                   helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
                   helper.make_tensor_value_info("t", TensorProto.BOOL, [])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    ones = np.ones(3, np.float32)
    make_test(root, "test_dropout_training", [helper.make_node("Dropout", ["x", "r", "t"], ["y"])], *dropout_io,
              [([ones, np.array(0.5, np.float32), np.array(True)], [ones])])
    make_test(root, "test_dropout_training_zero_ratio", [helper.make_node("Dropout", ["x", "r", "t"], ["y"])],
              *dropout_io, [([ones, np.array(0.0, np.float32), np.array(True)], [ones])])
    bad = root / "test_bad_model"
    bad.mkdir()
    (bad / "model.onnx").write_bytes(b"\xff\xff\xff garbage")
    (bad / "test_data_set_0").mkdir()
    return root


def run_suite(kiln, *args):
    r = kiln("conformance", *args)
    lines = r.stdout.splitlines()
    assert lines and SUMMARY.match(lines[-1]), r.stdout + r.stderr
    return r, lines


def line_of(lines, name):
    found = [l for l in lines if re.match(rf"^(PASS|FAIL|SKIP) {name}(:|$)", l)]
    assert len(found) == 1, f"{name}: {found}\n" + "\n".join(lines)
    return found[0]


def test_verdicts_and_summary(kiln, suite):
    r, lines = run_suite(kiln, suite)
    assert r.returncode != 0  # some tests fail and there is no expected list
    assert line_of(lines, "test_add_ok") == "PASS test_add_ok"
    assert line_of(lines, "test_add_within_rtol") == "PASS test_add_within_rtol"
    assert line_of(lines, "test_add_nan_inf") == "PASS test_add_nan_inf"
    assert line_of(lines, "test_add_int_exact") == "PASS test_add_int_exact"
    wrong = line_of(lines, "test_add_wrong_value")
    assert wrong.startswith("FAIL test_add_wrong_value: test_data_set_0: output 0 'z': at [1, 2] got 1.75, expected 7")
    assert "1 of 6 elements differ" in wrong
    assert "shape [2, 3], expected [3, 2]" in line_of(lines, "test_add_wrong_shape")
    assert "dtype float32, expected float64" in line_of(lines, "test_add_wrong_dtype")
    assert "gave 1 outputs, the test expects 2" in line_of(lines, "test_add_extra_output")
    assert "at [2] got 6, expected 7" in line_of(lines, "test_add_int_off_by_one")
    # Nondeterministic tests run; one that does not reproduce the reference is skipped, not failed.
    assert line_of(lines, "test_bernoulli_like").startswith("SKIP test_bernoulli_like: nondeterministic op Bernoulli (")
    assert line_of(lines, "test_dropout_training").startswith("SKIP test_dropout_training: Dropout in training mode")
    assert not line_of(lines, "test_dropout_training_zero_ratio").startswith("SKIP")
    assert line_of(lines, "test_bad_model").startswith("FAIL test_bad_model: load:")
    passed, failed, skipped = map(int, re.findall(r"\d+", lines[-1]))
    assert (passed, skipped) == (4 + ("PASS test_dropout_training_zero_ratio" in lines), 2)
    assert passed + failed + skipped == 13


def test_single_test_dir_and_filter(kiln, suite):
    r, lines = run_suite(kiln, suite / "test_add_ok")
    assert r.returncode == 0
    assert lines == ["PASS test_add_ok", "1 passed, 0 failed, 0 skipped"]
    r, lines = run_suite(kiln, suite, "--filter", "int_")
    assert lines[-1] == "1 passed, 1 failed, 0 skipped"


def test_expected_pass_regression_and_new(kiln, suite, tmp_path):
    listed = tmp_path / "expected.txt"
    listed.write_text("# comment\ntest_add_ok\ntest_add_wrong_value  # should pass\n\ntest_gone\n")
    r, lines = run_suite(kiln, suite, "--expected-pass", listed, "--quiet")
    assert r.returncode != 0
    assert [l for l in lines if l.startswith("REGRESSION")] == [
        "REGRESSION test_add_wrong_value: " + line_of(lines, "test_add_wrong_value").split(": ", 1)[1],
        "REGRESSION test_gone: not found under the given directories",
    ]
    assert "NEW test_add_nan_inf" in lines and "NEW test_add_ok" not in lines
    assert not any(l.startswith("PASS ") or l.startswith("SKIP ") for l in lines)  # --quiet


def test_expected_pass_all_passing_exits_zero(kiln, suite, tmp_path):
    listed = tmp_path / "expected.txt"
    listed.write_text("test_add_ok\ntest_add_int_exact\n")
    r, lines = run_suite(kiln, suite, "--expected-pass", listed)
    assert r.returncode == 0, r.stdout
    assert not any(l.startswith("REGRESSION") for l in lines)


def test_tolerance_flags(kiln, suite):
    r, lines = run_suite(kiln, suite / "test_add_within_rtol", "--rtol", "1e-5")
    assert r.returncode != 0 and "rtol 1e-05" in lines[0]


def test_bad_arguments(kiln, suite, tmp_path):
    assert "is not a directory" in kiln.error("conformance", tmp_path / "nowhere")
    assert "no tests under" in kiln.error("conformance", tmp_path)
    assert "cannot read --expected-pass file" in kiln.error("conformance", suite, "--expected-pass",
                                                            tmp_path / "none.txt")
    assert "unknown flag '--fast'" in kiln.error("conformance", suite, "--fast")
    assert "--rtol expects a non-negative number" in kiln.error("conformance", suite, "--rtol", "x")


def test_timeout_fails_only_that_test(kiln, tmp_path):
    # A Loop that would run for days: the child is killed, the run goes on.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Constant", [], ["one"], value=helper.make_tensor("c", TensorProto.FLOAT, [1], [1.0])),
         helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1])])
    make_test(tmp_path, "test_endless_loop",
              [helper.make_node("Loop", ["m", "cond", "v0"], ["v"], body=body)],
              [helper.make_tensor_value_info("m", TensorProto.INT64, []),
               helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
               helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1])],
              [helper.make_tensor_value_info("v", TensorProto.FLOAT, [1])],
              [([np.array(10**15, np.int64), np.array(True), np.zeros(1, np.float32)], [np.zeros(1, np.float32)])])
    add_test(tmp_path, "test_z_add_ok", [X + Y])
    r, lines = run_suite(kiln, tmp_path, "--timeout", "1")
    assert lines == ["FAIL test_endless_loop: timed out after 1 s", "PASS test_z_add_ok",
                     "1 passed, 1 failed, 0 skipped"]
