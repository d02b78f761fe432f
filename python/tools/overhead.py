#!/usr/bin/env python3
"""Per-call overhead of kiln.Session.run from Python against the C++ call.

Alternates rounds of `kiln bench MODEL --json` (Session::run timed in C++)
and the same model through kiln.Session.run and kiln.InferenceSession.run
(timed around each Python call), and prints the medians and their
differences in microseconds. Also times a one-node Identity model, where the
run itself costs almost nothing, so the Python time is mostly the binding.

    PYTHONPATH=build/python /usr/bin/python3 python/tools/overhead.py \
        --kiln build/bin/kiln --model bench/models/out/op_chain_500 [--json-out FILE]
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import kiln


def inputs_for(session, model_dir):
    data = pathlib.Path(model_dir) / "test_data_set_0"
    feeds = {}
    for k, info in enumerate(session.inputs):
        pb = data / f"input_{k}.pb"
        if pb.exists():
            t = TensorProto()
            t.ParseFromString(pb.read_bytes())
            feeds[info.name] = numpy_helper.to_array(t)
        else:
            shape = [d if isinstance(d, int) else 1 for d in info.shape]
            feeds[info.name] = np.random.default_rng(0).uniform(-1, 1, shape).astype(info.dtype)
    return feeds


def time_calls(call, runs):
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - t0) / 1e3)
    return samples


def cpp_p50_us(kiln_bin, model, runs):
    out = subprocess.run([kiln_bin, "bench", str(model), "--json", "--runs", str(runs), "--backends", "portable"],
                         check=True, capture_output=True, text=True).stdout
    return statistics.median(json.loads(out)["samples_ms"]) * 1e3


def measure(kiln_bin, model, runs, rounds):
    model = pathlib.Path(model)
    onnx_file = model / "model.onnx" if model.is_dir() else model
    s = kiln.Session(onnx_file, backends=["portable"])
    ort_so = kiln.SessionOptions()
    ort_so.intra_op_num_threads = 1
    ort = kiln.InferenceSession(str(onnx_file), sess_options=ort_so, providers=["CPUExecutionProvider"])
    feeds = inputs_for(s, model if model.is_dir() else model.parent)
    for _ in range(20):
        s.run(feeds)
        ort.run(None, feeds)
    cpp, py, py_ort = [], [], []
    for _ in range(rounds):
        cpp.append(cpp_p50_us(kiln_bin, model, runs))
        py.append(statistics.median(time_calls(lambda: s.run(feeds), runs)))
        py_ort.append(statistics.median(time_calls(lambda: ort.run(None, feeds), runs)))
    c, p, o = statistics.median(cpp), statistics.median(py), statistics.median(py_ort)
    return {"model": str(model), "nodes": s.num_nodes, "cpp_us": round(c, 2), "python_run_us": round(p, 2),
            "python_ort_run_us": round(o, 2), "overhead_us": round(p - c, 2), "ort_overhead_us": round(o - c, 2)}


def identity_model(path):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True, help="the kiln CLI (build/bin/kiln)")
    ap.add_argument("--model", required=True, help="model folder or .onnx (op_chain_500)")
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [measure(args.kiln, args.model, args.runs, args.rounds),
                   measure(args.kiln, identity_model(pathlib.Path(tmp) / "identity.onnx"), args.runs, args.rounds)]
    for r in results:
        print(f"{r['model']} ({r['nodes']} nodes): C++ Session::run p50 {r['cpp_us']} us; "
              f"kiln.Session.run {r['python_run_us']} us (+{r['overhead_us']} us); "
              f"InferenceSession.run {r['python_ort_run_us']} us (+{r['ort_overhead_us']} us)")
    if args.json_out:
        pathlib.Path(args.json_out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
