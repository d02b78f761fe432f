"""The CLI over backend plugins: kiln backends, kiln inspect, the backend
flags of kiln run, and kiln check-backend on the template and on every
broken fake plugin (each must be reported with its real failure).

Environment (set by ctest abi.cli): KILN_BIN, KILN_TEMPLATE (the template
plugin), KILN_FAKES (the fake plugins' folder), KILN_ABI_SOURCE.
"""
import json
import os
import subprocess
import sys

import pytest

KILN = os.environ.get("KILN_BIN", "kiln")
TEMPLATE = os.environ.get("KILN_TEMPLATE", "")
FAKES = os.environ.get("KILN_FAKES", "")
SOURCE = os.environ.get("KILN_ABI_SOURCE", os.path.dirname(os.path.dirname(__file__)))


def kiln(*args, env=None):
    e = dict(os.environ)
    e.pop("KILN_BACKEND_PATH", None)
    e.update(env or {})
    return subprocess.run([KILN, *args], capture_output=True, text=True, env=e, timeout=600)


def fake(name):
    return os.path.join(FAKES, "libkiln_fake_%s.so" % name)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    subprocess.run([sys.executable, os.path.join(SOURCE, "models", "make_models.py"), str(out)], check=True)
    return out


def test_backends_lists_the_template_with_its_options():
    r = kiln("backends", "--backend-path", TEMPLATE)
    assert r.returncode == 0, r.stderr
    assert "template 1.0.0 (Kiln project)" in r.stdout
    assert "available:   yes" in r.stdout
    assert "template.max_group_size  int" in r.stdout
    assert "kiln.template.MulAdd (since opset 1)" in r.stdout


def test_backends_json_reports_broken_plugins_one_line_each():
    r = kiln("backends", "--backend-path", FAKES, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    names = sorted(b["name"] for b in data["backends"])
    assert "minimal" in names and "throwing" in names
    errors = {os.path.basename(e["path"]): e["message"] for e in data["errors"]}
    assert errors["libkiln_fake_wrong_major.so"].startswith("ABI major version mismatch: the plugin speaks 2.3")
    assert errors["libkiln_fake_no_entry.so"] == "not a Kiln plugin: it does not export 'kiln_backend_entry'"
    assert "libkiln_fake_dep.so" in errors["libkiln_fake_missing_dep.so"]
    assert "libfakevendor.so.3" in errors["libkiln_fake_init_error.so"]
    assert all("\n" not in m for m in errors.values())
    vendor = next(b for b in data["backends"] if b["name"] == "vendor")
    assert vendor["available"] is False and "libkiln_fake_vendor.so.1 not found" in vendor["unavailable_reason"]
    # ABI 1.1: device metadata (zero: unknown, as the fakes say nothing) and the no-unload flag.
    minimal = next(b for b in data["backends"] if b["name"] == "minimal")
    assert minimal["devices"][0]["vendor_id"] == 0 and minimal["devices"][0]["uuid"] == ""
    assert minimal["no_unload"] is False
    assert next(b for b in data["backends"] if b["name"] == "no_unload")["no_unload"] is True


def test_backends_rejects_arguments():
    r = kiln("backends", "extra")
    assert r.returncode == 2 and "takes no arguments" in r.stderr


def test_inspect_prints_partitions_and_reasons(models):
    r = kiln("inspect", str(models / "mlp.onnx"), "--backends", "template", "--backend-path", TEMPLATE)
    assert r.returncode == 0, r.stderr
    assert "backends tried: template, portable (fallback: allow)" in r.stdout
    assert "MatMul x2" not in r.stdout  # two partitions, one MatMul each
    assert "on portable kernels (1 nodes, by reason" in r.stdout
    assert "template: op Sigmoid is not one of Add, Mul, Relu, MatMul" in r.stdout
    assert "was not convex" in r.stdout


def test_inspect_json(models):
    r = kiln("inspect", str(models / "mlp.onnx"), "--backends", "template,portable", "--backend-path", TEMPLATE,
             "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["backends"] == ["template", "portable"]
    assert len(data["partitions"]) == 2
    p0 = data["partitions"][0]
    assert p0["id"].startswith("template:") and p0["node_count"] == 3
    assert p0["op_histogram"] == {"Add": 1, "MatMul": 1, "Relu": 1}
    assert p0["inputs"] == ["x"] and p0["boundary_bytes"] > 0
    gate = next(n for n in data["nodes"] if n["node"] == "Sigmoid 'gate'")
    assert gate["placement"] == "portable"
    assert gate["reasons"] == [{"backend": "template", "reason": "op Sigmoid is not one of Add, Mul, Relu, MatMul"}]
    # Stable ids: a second load gives the same ones.
    again = json.loads(kiln("inspect", str(models / "mlp.onnx"), "--backends", "template", "--backend-path",
                            TEMPLATE, "--json").stdout)
    assert [p["id"] for p in again["partitions"]] == [p["id"] for p in data["partitions"]]


def test_inspect_unknown_backend_lists_the_loaded_ones(models):
    r = kiln("inspect", str(models / "mlp.onnx"), "--backends", "nosuchbackend", "--backend-path", TEMPLATE)
    assert r.returncode == 1
    assert "unknown backend 'nosuchbackend'; loaded: template (" in r.stderr


def test_run_with_backends_reports_the_placement(models):
    r = kiln("run", str(models / "mlp.onnx"), "--backends", "template", "--backend-path", TEMPLATE)
    assert r.returncode == 0, r.stderr
    assert "backends: template: 2 partitions, 5 nodes; portable: 1 nodes (kiln inspect shows why)" in r.stdout
    ref = kiln("run", str(models / "mlp.onnx"), "--backends", "portable")
    assert ref.returncode == 0
    assert r.stdout.splitlines()[-1] == ref.stdout.splitlines()[-1]  # the same output preview


def test_run_warns_about_claims_the_host_ignored(models):
    # bad_claim claims a node index out of range besides its Relu nodes:
    # `kiln run` says so on stderr (not only `kiln inspect`) and still runs.
    plugin = os.path.join(FAKES, "host_checks", "libkiln_fake_bad_claim.so")
    r = kiln("run", str(models / "mlp.onnx"), "--backends", "bad_claim", "--backend-path", plugin)
    assert r.returncode == 0, r.stderr
    warnings = [l for l in r.stderr.splitlines() if l.startswith("warning: ")]
    assert len(warnings) == 1, r.stderr
    assert warnings[0].startswith("warning: backend 'bad_claim': node index "), r.stderr
    assert warnings[0].endswith(" nodes); ignored"), r.stderr


def test_run_reports_a_plugin_crash_naming_backend_and_partition(models):
    plugin = os.path.join(FAKES, "host_checks", "libkiln_fake_exec_crash.so")
    r = kiln("run", str(models / "mlp.onnx"), "--backends", "exec_crash", "--backend-path", plugin)
    assert r.returncode != 0
    lines = [l for l in r.stderr.splitlines() if l.startswith("kiln: backend 'exec_crash' in partition 'exec_crash:")]
    assert len(lines) == 1 and lines[0].endswith("' crashed (SIGSEGV)"), r.stderr


def test_run_fallback_require_names_the_nodes(models):
    r = kiln("run", str(models / "mlp.onnx"), "--backends", "template", "--backend-path", TEMPLATE,
             "--fallback", "require")
    assert r.returncode == 1
    assert "fallback policy 'require': 1 of 6 nodes would fall back to portable kernels" in r.stderr
    assert "Sigmoid 'gate' (template: op Sigmoid is not one of Add, Mul, Relu, MatMul)" in r.stderr


def test_run_custom_op_needs_its_plugin(models):
    ok = kiln("run", str(models / "custom_op.onnx"), "--backends", "template", "--backend-path", TEMPLATE)
    assert ok.returncode == 0, ok.stderr
    bad = kiln("run", str(models / "custom_op.onnx"), "--backend-path", TEMPLATE)
    assert bad.returncode == 1
    assert "custom op of backend 'template', which is not selected" in bad.stderr


@pytest.mark.parametrize("args,code,message", [
    (["--backend-option", "template"], 2, "must look like NAME.KEY=VALUE"),
    (["--fallback", "maybe"], 2, "fallback policy must be 'allow' or 'require', got 'maybe'"),
    (["--backends", "template,,portable"], 2, "has an empty name"),
    (["--backends", "template", "--backend-option", "template.colour=red"], 1,
     "unknown option 'colour' for backend 'template'; known options: max_group_size (int), fuse (bool)"),
    (["--backends", "template", "--backend-option", "template.fuse=maybe"], 1,
     "option 'template.fuse' must be bool, got 'maybe'"),
    (["--backend-option", "template.fuse=true"], 1, "backend 'template' is not selected"),
])
def test_run_backend_flag_errors(models, args, code, message):
    r = kiln("run", str(models / "mlp.onnx"), "--backend-path", TEMPLATE, *args)
    assert r.returncode == code, r.stderr
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_check_backend_passes_on_the_template():
    r = kiln("check-backend", TEMPLATE, "--no-suite")
    assert r.returncode == 0, r.stdout
    assert " 0 failed" in r.stdout
    for check in ("create/release", "unknown option rejected", "export/import", "concurrent execute",
                  "execute rejects wrong inputs", "compile of an unclaimed group fails", "reload"):
        assert any(line.split()[:len(check.split())] == check.split() and " pass " in line
                   for line in r.stdout.splitlines()), check


@pytest.mark.parametrize("name,failures", [
    ("wrong_major", ["ABI major version mismatch: the plugin speaks 2.3, this host speaks 1.1"]),
    ("no_entry", ["no 'kiln_backend_entry' symbol"]),
    ("init_error", ["init failed: libfakevendor.so.3 is not installed"]),
    ("missing_dep", ["libkiln_fake_dep.so: cannot open shared object file"]),
    ("failing", ["is_available failed with internal error", "fake failure in devices",
                 "load through the runtime"]),
    ("bad_answers", ["3 host blocks leaked by 3 create/release pairs", "device 1 was accepted",
                     "node index 16 is out of range", "1 arrays or strings not from kiln_host_api_t.alloc",
                     "compiled kiln.check.Unknown", "returned OK without producing output 0",
                     "leak: 1 blocks (128 bytes) of host memory were never freed; freed at unload"]),
    ("throwing", ["uncaught exception in instance_get_property: boom in get_property",
                  "backend 'throwing': out of memory",
                  "uncaught exception in compiled_export: an exception that is not a std::exception"]),
    ("non_convex", ["general broadcasting"]),
    # Plain builds see the signal; under AddressSanitizer its SEGV handler
    # reports and exits with status 1 instead, which is reported too.
    ("crashing", ["capability crashed", ("Segmentation fault", "exited with status 1")]),
])
def test_check_backend_reports_each_broken_plugin(name, failures):
    r = kiln("check-backend", fake(name), "--no-suite")
    assert r.returncode == 1, r.stdout
    fails = [line for line in r.stdout.splitlines() if " FAIL " in line]
    for f in failures:
        alternatives = f if isinstance(f, tuple) else (f,)
        assert any(a in line for a in alternatives for line in fails), "%s not in:\n%s" % (f, "\n".join(fails))
    assert r.stdout.strip().splitlines()[-1].split(",")[1].strip().endswith("failed")


@pytest.mark.parametrize("name", ["minimal", "newer", "vendor_missing", "no_unload"])
def test_check_backend_passes_plugins_that_keep_the_contract(name):
    r = kiln("check-backend", fake(name), "--no-suite")
    assert r.returncode == 0, r.stdout
    assert " 0 failed" in r.stdout


def test_check_backend_missing_file():
    r = kiln("check-backend", "/nonexistent/libx.so")
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_check_backend_reports_claimed_groups_that_do_not_compile():
    r = kiln("check-backend", fake("throwing"), "--no-suite", env={"KILN_FAKE_THROW": "compile"})
    assert r.returncode == 1, r.stdout
    assert any("claimed groups compile" in line and " FAIL " in line and "not a std::exception" in line
               for line in r.stdout.splitlines()), r.stdout


@pytest.mark.parametrize("name,check,detail", [
    ("no_signal", "fences signalled", "never signalled its fence (value 1) within 300 ms"),
    ("bad_kinds", "device declarations", "declares non-host memory but the plugin has no instance_alloc"),
    ("bad_inplace", "device declarations", "in-place pair 0 (input 0, output 3) is out of range"),
    ("host_pointer", "device memory is not host memory", "instance_alloc(device) returned memory the host can read"),
    ("big_workspace", "device declarations", "bytes of device workspace; the device has 1048576"),
])
def test_check_backend_reports_each_broken_device_plugin(name, check, detail):
    lib = os.path.join(FAKES, "device_faulty", "libkiln_fake_dev_%s.so" % name)
    r = kiln("check-backend", lib, "--no-suite", "--verbose", env={"KILN_CHECK_FENCE_TIMEOUT_MS": "300"})
    assert r.returncode == 1, r.stdout
    assert any(line.split()[:len(check.split())] == check.split() and " FAIL " in line and detail in line
               for line in r.stdout.splitlines()), r.stdout
    if name == "no_signal":  # the groups that would wait on its fence are skipped, not hung
        assert any(line.startswith("  execute ") and "does not signal its fences" in line
                   for line in r.stdout.splitlines()), r.stdout
