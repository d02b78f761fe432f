#!/usr/bin/python3
"""Kiln side by side with ONNX Runtime: the driver of `make bench`.

    /usr/bin/python3 bench/run_bench.py --kiln build/bin/kiln [options]

For each model x thread count x backend configuration it runs `kiln bench`
and the ONNX Runtime peer (bench/peers/ort_bench.js) alternately, A B A B,
for several rounds, each a fresh process (so load time and peak RSS are
measured every round), pools the timed samples of all rounds and prints one
table. Results go to bench/results/latest.json and docs/performance.md.

Before measuring it exports missing models with bench/models/export.py
(installing python3-torch through scripts/install-deps.sh --with-torch when
a torch model is missing) and installs the npm peer when node_modules lacks
it. A model Kiln cannot load or run is reported with Kiln's error and the
rest go on.

Ratios are Kiln / ONNX Runtime: below 1 means Kiln is faster or smaller.
  latency ratio   Kiln p50 / ORT p50 (pooled samples of every round)
  load ratio      median Kiln load time / median ORT load time
  RSS ratio       median (peak RSS - RSS before load) of Kiln / that of ORT;
                  each side's baseline includes its own runtime library, so
                  the ratio compares what loading and running the model cost
"""

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(REPO, "bench", "peers")
MODELS_OUT = os.path.join(REPO, "bench", "models", "out")
DEFAULT_JSON = os.path.join(REPO, "bench", "results", "latest.json")
DEFAULT_DOC = os.path.join(REPO, "docs", "performance.md")

# name -> warmup runs (cheap models warm up more: caches, branch predictors).
MODELS = {
    "resnet18": 3,
    "mobilenet_v2": 5,
    "squeezenet1_1": 5,
    "bert_encoder": 5,
    "op_chain_500": 200,
    "efficientnet_b0": 3,
    "mobilenet_v3_small": 5,
    "lstm_bidir": 20,
    "gru_bidir": 20,
    "seg_unet": 5,
    "gpt_decoder": 5,
}
# The extra models (export.py EXTRA_MODELS, bench/models/extra): measured with
# --extra, not by default. name -> warmup runs.
EXTRA_MODELS = {
    # convolutional families (famconv)
    "densenet121": 2, "googlenet": 3, "shufflenet_v2_x1_0": 5, "regnet_y_400mf": 5, "mnasnet1_0": 5,
    "resnet50": 2, "mobilenet_v3_large": 5, "lraspp_mobilenet_v3_large": 3, "deeplabv3_mobilenet_v3_large": 3,
    # transformer and recurrent families (famseq)
    "vit_tiny": 3, "convnext_tiny": 2, "bert_small_128": 3, "bert_mini_384": 3, "gpt2_small": 3,
    "mha_encoder": 3, "transformer_decoder": 5, "lstm_uni": 3, "gru_long": 3,
    # families the sets above miss (pcover; export.py cover_models.py)
    "yolo_small": 3, "wav2vec_fe": 3, "tcn": 5, "resnext50_32x4d": 2, "swin_t": 2, "conv_autoencoder": 5,
    "mobilenet_v2_b4_160": 3, "resnet18_320": 2, "crnn": 5, "efficientnet_b1": 3, "squeezenet1_0": 3,
    "shufflenet_v2_x0_5": 5,
}
EXTRA_OUT = os.path.join(REPO, "bench", "models", "extra")
EXTRA_JSON = os.path.join(REPO, "bench", "results", "extra.json")
EXTRA_DOC = os.path.join(REPO, "docs", "performance-extra.md")
TORCH_MODELS = set(EXTRA_MODELS) | {"resnet18", "mobilenet_v2", "squeezenet1_1", "bert_encoder", "efficientnet_b0",
                                   "mobilenet_v3_small", "lstm_bidir", "gru_bidir", "seg_unet", "gpt_decoder"}
# A process that runs longer than this is killed and its model reported failed.
PROCESS_TIMEOUT_S = 300


def log(message):
    print(f"bench: {message}", file=sys.stderr, flush=True)


def die(message):
    print(f"bench: error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


# ---------------------------------------------------------------------------
# Setup: models and the npm peer


def ensure_models(names, out_dir):
    missing = [n for n in names if not os.path.isfile(os.path.join(out_dir, n, "model.onnx"))]
    if not missing:
        return
    if any(n in TORCH_MODELS for n in missing):
        log("installing python3-torch for the model export (scripts/install-deps.sh --with-torch)")
        subprocess.run([os.path.join(REPO, "scripts", "install-deps.sh"), "--with-torch"], check=True)
    log(f"exporting {', '.join(missing)} into {out_dir}")
    cmd = [sys.executable, os.path.join(REPO, "bench", "models", "export.py"), "--out", out_dir]
    for n in missing:
        cmd += ["--only", n]
    subprocess.run(cmd, check=True)


def ensure_peer(node):
    if os.path.isfile(os.path.join(PEERS, "node_modules", "onnxruntime-node", "package.json")):
        return
    npm = shutil.which("npm")
    if not npm:
        die("npm is missing: install Node.js 20 and npm to run the ONNX Runtime peer")
    log("installing onnxruntime-node (npm ci --ignore-scripts in bench/peers)")
    # --ignore-scripts: the package's postinstall tries a download; the tarball
    # already ships libonnxruntime for linux x64.
    subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=PEERS, check=True)
    subprocess.run([node, "-e", "require('onnxruntime-node')"], cwd=PEERS, check=True)


# ---------------------------------------------------------------------------
# Measuring


def run_json(cmd):
    """Runs a benchmark process; returns (parsed JSON, None) or (None, error line)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {PROCESS_TIMEOUT_S} s: {' '.join(cmd)}"
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        line = lines[-1] if lines else f"exit code {p.returncode}"
        for prefix in ("kiln: error: ", "ort_bench: error: "):
            line = line[len(prefix):] if line.startswith(prefix) else line
        return None, line
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, f"no JSON on stdout of {' '.join(cmd)}"


def nearest_rank(sorted_samples, q):
    """The same quantile rule as kiln bench and ort_bench.js."""
    if not sorted_samples:
        return None
    # 1e-9: 0.9 * 100 is 90.00000000000001 in binary floating point.
    rank = max(1, min(len(sorted_samples), math.ceil(q * len(sorted_samples) - 1e-9)))
    return sorted_samples[rank - 1]


def summarize(results):
    """Pools the rounds of one runtime: quantiles of all samples, medians of the rest."""
    samples = sorted(s for r in results for s in r["samples_ms"])
    return {
        "rounds": len(results),
        "runs": len(samples),
        "p50_ms": nearest_rank(samples, 0.5),
        "p90_ms": nearest_rank(samples, 0.9),
        "min_ms": samples[0] if samples else None,
        "round_p50_ms": [r["p50_ms"] for r in results],
        "load_ms": statistics.median(r["load_ms"] for r in results),
        "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in results),
        "model_rss_mb": statistics.median(r["peak_rss_mb"] - r["baseline_rss_mb"] for r in results),
    }


def ratio(a, b):
    return a / b if a is not None and b else None


def measure(args, model, threads, config):
    model_dir = os.path.join(args.models_dir, model)
    warmup = str(MODELS.get(model, EXTRA_MODELS.get(model, 5)))
    common = ["--threads", str(threads), "--warmup", warmup, "--runs", "1000000", "--max-seconds", str(args.seconds)]
    kiln_cmd = [args.kiln, "bench", model_dir, "--backends", config, "--json"] + common
    ort_cmd = [args.node, os.path.join(PEERS, "ort_bench.js"), model_dir] + common
    kiln, ort, errors = [], [], {}
    for r in range(args.rounds):
        for name, cmd, into in (("kiln", kiln_cmd, kiln), ("onnxruntime", ort_cmd, ort)):
            if name in errors:
                continue
            result, error = run_json(cmd)
            if error:
                errors[name] = error
                log(f"{model} threads={threads} {config}: {name} failed: {error}")
            else:
                into.append(result)
        log(f"{model} threads={threads} {config}: round {r + 1}/{args.rounds}"
            + (f" kiln p50 {kiln[-1]['p50_ms']:.3f} ms" if kiln and "kiln" not in errors else "")
            + (f" ort p50 {ort[-1]['p50_ms']:.3f} ms" if ort and "onnxruntime" not in errors else ""))
    row = {"model": model, "threads": threads, "config": config,
           "kiln": summarize(kiln) if kiln and "kiln" not in errors else None,
           "onnxruntime": summarize(ort) if ort and "onnxruntime" not in errors else None,
           "errors": errors}
    k, o = row["kiln"], row["onnxruntime"]
    if k and o:
        row["latency_ratio"] = ratio(k["p50_ms"], o["p50_ms"])
        row["p90_ratio"] = ratio(k["p90_ms"], o["p90_ms"])
        row["load_ratio"] = ratio(k["load_ms"], o["load_ms"])
        row["rss_ratio"] = ratio(k["model_rss_mb"], o["model_rss_mb"])
    if k and kiln:
        row["kiln_nodes"] = kiln[0].get("nodes")
    return row


def default_configs(kiln):
    """portable, then '<plugin>,portable' for each available plugin of priority > 0."""
    configs = ["portable"]
    p = subprocess.run([kiln, "backends", "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        log(f"kiln backends failed ({p.stderr.strip()}); measuring portable only")
        return configs
    for b in json.loads(p.stdout).get("backends", []):
        if b.get("available") and b.get("priority", 0) > 0:
            configs.append(f"{b['name']},portable")
        elif not b.get("available"):
            log(f"backend {b['name']} is not available: {b.get('unavailable_reason', '')}")
    return configs


def run_microbench(path):
    """Runs kiln_microbench (Google Benchmark) and returns {name: {ns, counters}}."""
    if not path or not os.path.isfile(path):
        return None
    try:
        p = subprocess.run([path, "--benchmark_format=json", "--benchmark_min_time=0.2"], capture_output=True,
                           text=True, timeout=PROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": "kiln_microbench timed out"}
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["exit code %d" % p.returncode])[-1]}
    out = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        if b.get("error_occurred"):
            out[b["name"]] = {"error": b.get("error_message", "failed")}
            continue
        entry = {"real_time": b["real_time"], "cpu_time": b["cpu_time"], "time_unit": b["time_unit"],
                 "iterations": b["iterations"]}
        for key, value in b.items():
            if key not in entry and isinstance(value, (int, float)) and key not in (
                    "repetitions", "repetition_index", "threads", "family_index", "per_family_instance_index"):
                entry[key] = value
        out[b["name"]] = entry
    return out


# ---------------------------------------------------------------------------
# The machine


def machine():
    info = {"python": platform.python_version(), "kernel": platform.release(), "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            cpuinfo = f.read()
        for line in cpuinfo.splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        flags = next((l.split(":", 1)[1].split() for l in cpuinfo.splitlines() if l.startswith("flags")), [])
        info["simd"] = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "amx_tile") if f in flags]
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        info["memory_gib"] = round(kib / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    info["os"] = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return info


# ---------------------------------------------------------------------------
# Reporting


def fmt_ms(x):
    if x is None:
        return "-"
    return f"{x:.1f}" if x >= 100 else f"{x:.2f}" if x >= 10 else f"{x:.3f}"


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}"


def table_rows(rows):
    header = ["model", "config", "threads", "Kiln p50/p90 ms", "ORT p50/p90 ms", "latency", "load", "RSS"]
    out = [header]
    for r in rows:
        k, o = r["kiln"], r["onnxruntime"]
        out.append([
            r["model"], r["config"], str(r["threads"]),
            f"{fmt_ms(k['p50_ms'])} / {fmt_ms(k['p90_ms'])}" if k else "failed",
            f"{fmt_ms(o['p50_ms'])} / {fmt_ms(o['p90_ms'])}" if o else "failed",
            fmt_ratio(r.get("latency_ratio")), fmt_ratio(r.get("load_ratio")), fmt_ratio(r.get("rss_ratio")),
        ])
    return out


def print_table(rows):
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def markdown_table(rows):
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "|".join("---" for _ in rows[0]) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


# Issue 9: the XNNPACK plugin's p50 ratio to ONNX Runtime, at every thread count.
PLUGIN_GOALS = {"xnnpack": {"mobilenet_v2": 0.8, "squeezenet1_1": 0.9, "resnet18": 1.0}}
# Issue 15: portable kernels' p50 ratio to ONNX Runtime by thread count; op_chain_500's own goal.
PORTABLE_GOAL_1T, PORTABLE_GOAL_MT, OP_CHAIN_GOAL = 1.3, 1.5, 0.3


def _plural(t):
    return f"{t} thread{'s' if t > 1 else ''}"


def portable_goal_lines(rows):
    """Issue 15: every model <= 1.3x ORT at one thread, <= 1.5x at more; op_chain_500 <= 0.3x."""
    lines = []
    portable = [r for r in rows if r["config"] == "portable" and r.get("latency_ratio") is not None]
    for t in sorted({r["threads"] for r in portable}):
        goal = PORTABLE_GOAL_1T if t == 1 else PORTABLE_GOAL_MT
        at_t = [r for r in portable if r["threads"] == t and r["model"] != "op_chain_500"]
        if not at_t:
            continue
        over = [f"{r['model']} {r['latency_ratio']:.2f}" for r in at_t if r["latency_ratio"] > goal]
        worst = max(at_t, key=lambda r: r["latency_ratio"])
        lines.append(f"- Portable kernels at {_plural(t)}: worst ratio {worst['latency_ratio']:.2f} "
                     f"({worst['model']}); goal ≤ {goal} on every model: "
                     + ("met" if not over else "not met (" + ", ".join(over) + ")") + " in this run.")
    for r in portable:
        if r["model"] == "op_chain_500":
            verdict = "met" if r["latency_ratio"] <= OP_CHAIN_GOAL else "not met"
            lines.append(f"- op_chain_500 at {_plural(r['threads'])}: ratio {r['latency_ratio']:.2f}; "
                         f"goal ≤ {OP_CHAIN_GOAL}: {verdict} in this run.")
    return lines


def plugin_goal_lines(rows):
    """Issue 9: per plugin and model, the ratio goal; the BERT encoder no slower than portable alone."""
    lines = []
    for plugin, goals_of in PLUGIN_GOALS.items():
        with_plugin = [r for r in rows if r["config"].split(",")[0] == plugin and r.get("latency_ratio")]
        for r in with_plugin:
            goal = goals_of.get(r["model"])
            if goal is not None:
                verdict = "met" if r["latency_ratio"] <= goal else "not met"
                lines.append(f"- {plugin} on {r['model']} at {_plural(r['threads'])}: ratio "
                             f"{r['latency_ratio']:.2f}; goal ≤ {goal}: {verdict} in this run.")
            elif r["model"] == "bert_encoder":
                base = next((p for p in rows if p["config"] == "portable" and p["model"] == r["model"]
                             and p["threads"] == r["threads"] and p["kiln"]), None)
                if base and r["kiln"]:
                    k, b = r["kiln"]["p50_ms"], base["kiln"]["p50_ms"]
                    lines.append(f"- {plugin} on bert_encoder at {_plural(r['threads'])}: {k:.3f} ms vs "
                                 f"portable alone {b:.3f} ms; goal: no slower (within 3% noise): "
                                 f"{'met' if k <= 1.03 * b else 'not met'} in this run.")
    return lines


def goals(report):
    """The open issues' goals (15: portable speed; 9: the XNNPACK plugin) with what this run measured."""
    lines = []
    chain = [r for r in report["rows"] if r["model"] == "op_chain_500" and r["threads"] == 1 and r["kiln"]]
    if chain:
        r = chain[0]
        # Per node of the model's 500; Kiln may run them as fewer (element-wise chains).
        nodes, ran = 500, r.get("kiln_nodes") or 500
        k_us = r["kiln"]["p50_ms"] * 1e3 / nodes
        o_us = r["onnxruntime"]["p50_ms"] * 1e3 / nodes if r["onnxruntime"] else None
        lines.append(f"- Per-node cost on op_chain_500 (p50 / {nodes} nodes, 1 thread, the [1,64] Add/Mul "
                     f"kernels included; Kiln ran them as {ran} node{'s' if ran != 1 else ''}): Kiln {k_us:.3f} µs"
                     + (f", ONNX Runtime {o_us:.3f} µs" if o_us is not None else "") + ".")
    lines += portable_goal_lines(report["rows"])
    lines += plugin_goal_lines(report["rows"])
    failed = [r for r in report["rows"] if r["config"] == "portable" and not r["kiln"]]
    for r in failed:
        plural = "s" if r["threads"] > 1 else ""
        lines.append(f"- {r['model']} ({r['threads']} thread{plural}): Kiln failed: {r['errors'].get('kiln', '?')}")
    micro = report.get("microbench") or {}
    plugin = [(n, b) for n, b in micro.items() if "PluginExecute" in n and "real_time" in b]
    if plugin:
        parts = [f"{n.replace('BM_PluginExecute', '')} {b['cpu_time']:.0f} {b['time_unit']} CPU "
                 f"({b['real_time']:.0f} wall)" for n, b in plugin]
        raw = micro.get("BM_PluginExecuteRaw/width:1")
        verdict = ""
        if raw and raw.get("time_unit") == "ns":
            verdict = f": {'met' if raw['cpu_time'] < 100 else 'not met'} in this run (Raw/width:1, CPU time)"
        lines.append("- One plugin execute call through the ABI (template plugin, one Add node, the Add "
                     "included; Raw = the C call, Host = through the host's wrapper): " + "; ".join(parts)
                     + f". Goal: < 100 ns{verdict}.")
    else:
        lines.append("- One plugin execute call through the ABI: not measured in this run "
                     "(kiln_microbench was not built or has no PluginExecute benchmark).")
    chain = [(n, b) for n, b in micro.items() if n.startswith("BM_OpChainRun") and "per_node" in b]
    if chain:
        lines.append("- kiln_microbench per-node cost (CPU time per run / nodes): "
                     + "; ".join(f"{n.replace('BM_OpChainRun/', '')} {b['per_node'] * 1e9:.0f} ns" for n, b in chain)
                     + ".")
    return "\n".join(lines)


def write_doc(path, report, rows):
    m = report["machine"]
    load = report["load_average"]
    busy = max(load["before"][0], load["after"][0]) > 0.5 * (m.get("cores") or 1)
    micro = report.get("microbench") or {}
    micro_lines = "\n".join(
        f"| {name} | {b['real_time']:.4g} {b['time_unit']} | {b['cpu_time']:.4g} {b['time_unit']} | "
        + ", ".join((f"{k}={v * 1e9:.1f} ns" if k == "per_node" else f"{k}={v:.4g}") for k, v in b.items()
                    if k not in ("real_time", "cpu_time", "time_unit", "iterations"))
        + " |" if "real_time" in b else f"| {name} | failed: {b.get('error')} | | |"
        for name, b in micro.items())
    text = f"""# Kiln performance

Kiln's performance goals are ratios to ONNX Runtime measured in the same run
on the same machine. This page is written by `make bench`
(bench/run_bench.py); the raw numbers (per round, per runtime) are in
bench/results/latest.json. Numbers taken while other work shares the
machine are noisy (see the load average below): re-take them on a quiet
machine before drawing conclusions.

## How to reproduce

```
make bench                      # builds Kiln, exports models, installs the peer, measures
/usr/bin/python3 bench/run_bench.py --kiln build/bin/kiln --rounds 4 --seconds 2   # the same, by hand
build/bin/kiln bench bench/models/out/resnet18 --profile --trace resnet18.json
```

`make bench` exports missing models with bench/models/export.py (torch is
installed on demand), installs onnxruntime-node {report['onnxruntime_version'] or '1.30.0'}
from bench/peers/package-lock.json (`npm ci --ignore-scripts`), then for
each model × thread count × backend configuration runs `kiln bench` and
bench/peers/ort_bench.js alternately (Kiln, ORT, Kiln, ORT, ...;
{report['settings']['rounds']} rounds of fresh processes, {report['settings']['seconds']} s of timed runs each after a
warmup), pools the samples of all rounds and reports p50/p90. Both sides
get the same input (test_data_set_0/input_0.pb) and the same thread count
(ORT: intraOpNumThreads, interOpNumThreads 1, sequential, all graph
optimizations, its default spinning pool). ORT's times include the
Node.js binding's per-call cost: a one-node model (Neg on [1, 64]) takes
about 6 µs per call through it, which matters only for op_chain_500.

On op_chain_500 ONNX Runtime 1.30 takes about 0.14 ms per run in this
harness (≈ 0.28 µs per node, with or without graph optimizations), not the
0.57 ms (1.1 µs per node) quoted when the goals were set; the ratios here
are the side-by-side ones.

Columns: latency = Kiln p50 / ORT p50; load = median load time ratio;
RSS = median ratio of (peak RSS − RSS before load), so that neither
Node.js nor either runtime's own code counts. Below 1: Kiln is faster or
smaller.

## Machine

- CPU: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, SIMD: {', '.join(m.get('simd', [])) or '?'}
- Memory: {m.get('memory_gib', '?')} GiB; OS: {m.get('os', '?')}, Linux {m.get('kernel', '?')}
- Date: {report['date']}; {report['kiln_version']}; load average {load['before'][0]:.2f} before,
  {load['after'][0]:.2f} after{' — the machine was busy: treat these numbers as noisy' if busy else ''}

## Results

{markdown_table(rows)}

## Goals

{goals(report)}
"""
    if micro_lines:
        text += f"""
## Micro-benchmarks (kiln_microbench)

Wall and CPU time per iteration (Google Benchmark). On a busy machine wall
time includes waiting for a core; CPU time is the better estimate there.
Counters: per_node is CPU time per executed node.

| benchmark | wall | CPU | counters |
|---|---|---|---|
{micro_lines}
"""
    if report.get("notes"):
        text += "\n## Notes\n\n" + "\n".join(f"- {n}" for n in report["notes"]) + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", default=os.path.join(REPO, "build", "bin", "kiln"), help="the kiln binary")
    parser.add_argument("--node", default=shutil.which("node") or "node", help="node (v20)")
    parser.add_argument("--models", default=None, help="comma-separated (default: all)")
    parser.add_argument("--extra", action="store_true",
                        help="the extra models (export.py --extra) from bench/models/extra instead")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--configs", default=os.environ.get("KILN_BENCH_CONFIGS"),
                        help="semicolon-separated backend configurations, each a --backends list for "
                             "kiln bench, e.g. 'portable;xnnpack,portable' (default, or env "
                             "KILN_BENCH_CONFIGS: portable, then each available plugin of priority > 0 "
                             "that `kiln backends` lists, ahead of portable)")
    parser.add_argument("--rounds", type=int, default=4, help="A B rounds per row (default 4)")
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per process (default 2)")
    parser.add_argument("--models-dir", default=MODELS_OUT)
    parser.add_argument("--microbench", default=None, help="kiln_microbench binary to run (optional)")
    parser.add_argument("--json-out", default=DEFAULT_JSON)
    parser.add_argument("--doc", default=DEFAULT_DOC, help="markdown report ('' to skip)")
    parser.add_argument("--no-setup", action="store_true", help="do not export models or install the peer")
    args = parser.parse_args(argv)
    args.models_given = args.models is not None
    if args.models is None:
        args.models = ",".join(MODELS)

    if args.extra:
        args.models = args.models if args.models_given else ",".join(EXTRA_MODELS)
        args.models_dir = args.models_dir if args.models_dir != MODELS_OUT else EXTRA_OUT
        # Their own report, so the bench set's stays as make bench wrote it.
        args.json_out = args.json_out if args.json_out != DEFAULT_JSON else EXTRA_JSON
        args.doc = args.doc if args.doc != DEFAULT_DOC else EXTRA_DOC
    models = [m for m in args.models.split(",") if m]
    known = {**MODELS, **EXTRA_MODELS}
    unknown = [m for m in models if m not in known]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    threads = [int(t) for t in args.threads.split(",") if t]
    if not os.access(args.kiln, os.X_OK):
        die(f"kiln binary '{args.kiln}' is missing; build it first (make build) or pass --kiln")
    configs = ([c.strip() for c in args.configs.split(";") if c.strip()] if args.configs
               else default_configs(args.kiln))
    if args.rounds < 1 or args.seconds <= 0:
        parser.error("--rounds must be >= 1 and --seconds > 0")
    if not args.no_setup:
        ensure_models([m for m in models if m in MODELS], args.models_dir)
        ensure_peer(args.node)

    started = time.time()
    load_before = os.getloadavg()
    rows = []
    for model in models:
        for config in configs:
            for t in threads:
                rows.append(measure(args, model, t, config))
    micro = run_microbench(args.microbench)
    load_after = os.getloadavg()

    kiln_version = subprocess.run([args.kiln, "--version"], capture_output=True, text=True).stdout.strip()
    ort_version = next((r["onnxruntime"] for r in rows if r["onnxruntime"]), None)
    notes = []
    if max(load_before[0], load_after[0]) > 0.5 * (os.cpu_count() or 1):
        notes.append(f"Load average was {load_before[0]:.2f} before and {load_after[0]:.2f} after the run on "
                     f"{os.cpu_count()} cores: other work competed for the CPU and these numbers are noisy. "
                     "Re-take them on a quiet machine before drawing conclusions.")
        if any(t > 1 for t in threads):
            notes.append("On a saturated machine the multi-thread rows mostly measure contention: a second "
                         "thread rarely gets a core, and ONNX Runtime's spinning pool loses more to that "
                         "than Kiln's sleeping one, so those ratios flatter Kiln.")
    report = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average": {"before": list(load_before), "after": list(load_after)},
        "kiln_version": kiln_version,
        "onnxruntime_version": None,
        "settings": {"rounds": args.rounds, "seconds": args.seconds, "threads": threads, "configs": configs,
                     "models": models, "warmup": {m: known[m] for m in models}},
        "rows": rows,
        "microbench": micro,
        "notes": notes,
        "elapsed_s": round(time.time() - started, 1),
    }
    if ort_version:
        report["onnxruntime_version"] = json.load(open(os.path.join(
            PEERS, "node_modules", "onnxruntime-node", "package.json")))["version"]
    os.makedirs(os.path.dirname(args.json_out), exist_ok=True)
    with open(args.json_out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")

    table = table_rows(rows)
    print()
    print_table(table)
    print()
    print(goals(report))
    for n in notes:
        print("note: " + n)
    print(f"\nwrote {os.path.relpath(args.json_out, REPO)}" + (f" and {os.path.relpath(args.doc, REPO)}" if args.doc else "")
          + f" ({report['elapsed_s']} s)")
    if args.doc:
        write_doc(args.doc, report, table)


if __name__ == "__main__":
    main(sys.argv[1:])
