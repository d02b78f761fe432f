"""`kiln bench`: its JSON, its profile tables and its Chrome trace files.

Run: KILN_BIN=build/bin/kiln /usr/bin/python3 -m pytest -q tests/perf/test_bench_cli.py
(ctest runs it as perf.bench_cli). No timing thresholds: only structure.
"""

import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE_NAMES = ["add0", "relu1", "mul2", "sigmoid3", "neg4"]


@pytest.fixture(scope="session")
def kiln():
    path = os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin", "kiln"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"no kiln binary at {path}; build it or set KILN_BIN")

    def run(*args):
        return subprocess.run([path, *map(str, args)], capture_output=True, text=True, timeout=120)

    return run


def chain_model():
    """x float32[1, 8] -> Add -> Relu -> Mul -> Sigmoid -> Neg: five named nodes, nothing foldable and,
    as Mul reads Add's output too, no element-wise chain for the optimizer to fuse into one node."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((1, 8)).astype(np.float32), "a")]
    nodes = [helper.make_node("Add", ["x", "a"], ["t0"], name="add0"),
             helper.make_node("Relu", ["t0"], ["t1"], name="relu1"),
             helper.make_node("Mul", ["t1", "t0"], ["t2"], name="mul2"),
             helper.make_node("Sigmoid", ["t2"], ["t3"], name="sigmoid3"),
             helper.make_node("Neg", ["t3"], ["y"], name="neg4")]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


@pytest.fixture()
def model_file(tmp_path):
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model(), str(path))
    return path


@pytest.fixture()
def model_dir(tmp_path):
    """The ONNX backend-test layout: model.onnx + test_data_set_0/input_0.pb."""
    folder = tmp_path / "chain"
    (folder / "test_data_set_0").mkdir(parents=True)
    onnx.save(chain_model(), str(folder / "model.onnx"))
    x = numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8), "x")
    (folder / "test_data_set_0" / "input_0.pb").write_bytes(x.SerializeToString())
    return folder


def one_error(result):
    assert result.returncode != 0, f"expected a failure; stdout:\n{result.stdout}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln: error: "), result.stderr
    return lines[0]


def load_trace(path):
    with open(path) as f:
        trace = json.load(f)  # valid JSON, or this raises
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    for e in events:
        for key in ("name", "ph", "pid", "tid"):
            assert key in e, f"event without '{key}': {e}"
        if e["ph"] == "X":
            for key in ("ts", "dur", "cat"):
                assert key in e, f"complete event without '{key}': {e}"
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
        else:
            assert e["ph"] == "M", f"unexpected phase {e['ph']}: {e}"
    return trace


def test_trace_has_one_slice_per_node_per_run(kiln, model_file, tmp_path):
    trace_path = tmp_path / "trace.json"
    r = kiln("bench", model_file, "--backends", "portable", "--runs", 3, "--warmup", 1, "--profile-runs", 4, "--trace", trace_path)
    assert r.returncode == 0, r.stderr
    assert str(trace_path) in r.stdout
    trace = load_trace(trace_path)
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    runs = [e for e in slices if e["cat"] == "run"]
    nodes = [e for e in slices if e["cat"] != "run"]
    assert [e["name"] for e in runs] == ["run 0", "run 1", "run 2", "run 3"]
    assert len(nodes) == 4 * len(NODE_NAMES)
    for i, run in enumerate(runs):
        mine = [e for e in nodes if e["args"]["run"] == i]
        # One slice per node, in execution order, with its op type as category.
        assert [e["name"] for e in mine] == NODE_NAMES
        assert [e["cat"] for e in mine] == ["Add", "Relu", "Mul", "Sigmoid", "Neg"]
        previous_end = run["ts"]
        for e in mine:
            # Inside the enclosing run slice (1 ns of rounding slack), on its thread, not overlapping.
            assert e["pid"] == run["pid"] and e["tid"] == run["tid"], (e, run)
            assert e["ts"] >= previous_end - 0.001, (e, previous_end)
            assert e["ts"] + e["dur"] <= run["ts"] + run["dur"] + 0.001, (e, run)
            previous_end = e["ts"] + e["dur"]
    # Runs follow one another.
    for a, b in zip(runs, runs[1:]):
        assert b["ts"] >= a["ts"] + a["dur"] - 0.001
    # Every thread that has slices is named by a metadata event.
    named = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in nodes} <= named
    assert trace["otherData"]["nodes"] == str(len(NODE_NAMES))


def test_json_reports_quantiles_memory_and_profile(kiln, model_file):
    r = kiln("bench", model_file, "--backends", "portable", "--runs", 7, "--warmup", 0, "--profile", "--top", 2, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["runtime"] == "kiln" and out["runs"] == 7 and len(out["samples_ms"]) == 7
    assert out["nodes"] == len(NODE_NAMES)
    assert out["inputs"] == "random"
    assert out["backends"][-1] == "portable"
    samples = sorted(out["samples_ms"])
    assert out["min_ms"] == pytest.approx(samples[0], rel=1e-6)
    assert out["p50_ms"] == pytest.approx(samples[3], rel=1e-6)  # nearest rank: ceil(0.5 * 7) = 4th
    assert out["p90_ms"] == pytest.approx(samples[6], rel=1e-6)  # ceil(0.9 * 7) = 7th
    assert out["peak_rss_mb"] >= out["baseline_rss_mb"] > 0
    assert out["load_ms"] > 0
    profile = out["profile"]
    assert profile["runs"] == 10 and profile["events_per_run"] == len(NODE_NAMES)
    assert len(profile["nodes"]) == 2  # --top 2
    assert sorted(o["op_type"] for o in profile["op_types"]) == ["Add", "Mul", "Neg", "Relu", "Sigmoid"]
    assert all(o["count"] == 1 for o in profile["op_types"])
    assert sum(o["share"] for o in profile["op_types"]) <= 1.0 + 1e-9


def test_profile_prints_node_and_op_type_tables(kiln, model_file):
    r = kiln("bench", model_file, "--backends", "portable", "--runs", 2, "--warmup", 0, "--profile", "--top", 3)
    assert r.returncode == 0, r.stderr
    assert "latency" in r.stdout and "p50" in r.stdout and "peak RSS" in r.stdout
    assert "top 3 of 5 nodes:" in r.stdout
    tables = r.stdout.split("op types:")
    assert len(tables) == 2
    node_rows = [l.split()[0] for l in tables[0].split("top 3 of 5 nodes:")[1].strip().splitlines()[1:]]
    assert len(node_rows) == 3 and set(node_rows) <= set(NODE_NAMES)
    op_rows = [l.split()[0] for l in tables[1].strip().splitlines()[1:]]
    assert sorted(op_rows) == ["Add", "Mul", "Neg", "Relu", "Sigmoid"]


def test_backend_test_folder_reads_its_inputs(kiln, model_dir):
    r = kiln("bench", model_dir, "--runs", 2, "--warmup", 0, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["inputs"] == str(model_dir / "test_data_set_0")


def test_backend_test_folder_without_data_uses_random_inputs(kiln, model_dir):
    for f in (model_dir / "test_data_set_0").iterdir():
        f.unlink()
    (model_dir / "test_data_set_0").rmdir()
    r = kiln("bench", model_dir, "--runs", 1, "--warmup", 0, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["inputs"] == "random"


def test_template_backend_runs_as_one_partition_slice(kiln, model_file, tmp_path):
    # Add, Relu and Mul go to the template plugin (one partition), Sigmoid and Neg to portable.
    trace_path = tmp_path / "template.json"
    r = kiln("bench", model_file, "--runs", 1, "--warmup", 0, "--profile-runs", 2, "--backends", "template",
             "--trace", trace_path)
    if r.returncode != 0 and "template" in r.stderr and ("not found" in r.stderr or "unknown" in r.stderr
                                                          or "no backend" in r.stderr):
        pytest.skip(f"template plugin not built: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    slices = [e for e in load_trace(trace_path)["traceEvents"] if e["ph"] == "X" and e["cat"] != "run"]
    assert [e["cat"] for e in slices] == ["Partition", "Sigmoid", "Neg"] * 2
    assert slices[0]["name"].startswith("template:")


@pytest.mark.parametrize("args, expected", [
    (["--runs", "0"], "--runs"),
    (["--threads", "x"], "--threads"),
    (["--max-seconds", "-1"], "--max-seconds"),
    (["--fallback", "sometimes"], "sometimes"),
    (["--backends", "portable,,x"], "empty name"),
    (["--frobnicate"], "--frobnicate"),
])
def test_bad_flags_name_the_flag(kiln, model_file, args, expected):
    r = kiln("bench", model_file, *args)
    assert r.returncode == 2
    assert expected in one_error(r)


def test_missing_model_and_unwritable_trace_are_errors(kiln, model_file, tmp_path):
    assert "does not exist" in one_error(kiln("bench", tmp_path / "nope.onnx"))
    assert "no model.onnx" in one_error(kiln("bench", tmp_path))
    line = one_error(kiln("bench", model_file, "--runs", 1, "--warmup", 0, "--trace", tmp_path / "no" / "t.json"))
    assert "t.json" in line
    line = one_error(kiln("bench", model_file, "--backends", "no_such_backend", "--runs", 1))
    assert "no_such_backend" in line
