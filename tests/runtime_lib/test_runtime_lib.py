"""libkiln_runtime and kiln-run-program (issue 12's split and selective build).

Environment (set by ctest runtime_lib.*): KILN_BIN (the kiln CLI),
KILN_RUNTIME_LIB (libkiln_runtime.so), KILN_KERNELS_LIB (libkiln_kernels.a,
the portable kernels), KILN_RUN_PROGRAM (kiln-run-program, all kernels),
KILN_RUN_PROGRAM_DEMO (kiln-run-program selected for the demo model),
KILN_OP_LIST (scripts/kiln_op_list.py), KILN_SELECT_KERNELS (the
registration file generator), KILN_TEMPLATE_PLUGIN (the template backend),
KILN_MODELS_OUT (optional: exported
models; resnet18 is used when present).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

KILN = os.environ.get("KILN_BIN", "kiln")
RUNTIME_LIB = os.environ.get("KILN_RUNTIME_LIB", "")
KERNELS_LIB = os.environ.get("KILN_KERNELS_LIB", "")
RUNNER = os.environ.get("KILN_RUN_PROGRAM", "")
RUNNER_DEMO = os.environ.get("KILN_RUN_PROGRAM_DEMO", "")
OP_LIST = os.environ.get("KILN_OP_LIST", "")
SELECT_KERNELS = os.environ.get("KILN_SELECT_KERNELS", "")
TEMPLATE = os.environ.get("KILN_TEMPLATE_PLUGIN", "")
MODELS_OUT = os.environ.get("KILN_MODELS_OUT", "")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "backends", "onednn"))
from test_onednn_cli import needed_libraries  # noqa: E402  (the one ELF DT_NEEDED reader)


def run(*cmd):
    env = dict(os.environ)
    env.pop("KILN_BACKEND_PATH", None)
    env.pop("KILN_CACHE_DIR", None)
    return subprocess.run(list(cmd), capture_output=True, text=True, env=env, timeout=600)


def defined_symbols(path, *flags):
    """Demangled names of the symbols `path` defines (nm), as (type, name) pairs."""
    r = run("nm", "-C", "--defined-only", *flags, path)
    assert r.returncode == 0, r.stderr
    out = []
    for line in r.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and len(parts[1]) == 1:
            out.append((parts[1], parts[2]))
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    d = tmp_path_factory.mktemp("demo")
    onnx_path, kiln_path = str(d / "demo.onnx"), str(d / "demo.kiln")
    assert run(KILN, "demo-model", onnx_path).returncode == 0
    r = run(KILN, "compile", onnx_path, "-o", kiln_path, "--backends", "portable")
    assert r.returncode == 0, r.stderr
    image = np.random.default_rng(7).uniform(-1, 1, (2, 1, 28, 28)).astype(np.float32)
    np.save(d / "image.npy", image)
    return d


# --- the library -------------------------------------------------------------

def test_runtime_lib_needs_no_protobuf_or_onnx():
    needed = needed_libraries(RUNTIME_LIB)
    assert "libc.so.6" in needed  # the reader sees real entries
    assert not [n for n in needed if "protobuf" in n or "onnx" in n], needed


def test_runtime_lib_holds_no_importer_protobuf_or_kernel_code():
    names = [n for _, n in defined_symbols(RUNTIME_LIB)]
    assert any(n.startswith("kiln::Session::load(") for n in names)  # nm reads the real table
    assert any(n.startswith("kiln::kernels::KernelRegistry::add(") for n in names)
    for marker in ("google::protobuf", "onnx::", "kiln::importer::", "kiln::program::write_program"):
        assert not [n for n in names if marker in n], marker
    # No strong symbol of the portable kernel archive (every family, util/,
    # the SIMD micro-kernels) is defined in the library.
    kernel_syms = {n for t, n in defined_symbols(KERNELS_LIB) if t in "TDBR"}
    assert len(kernel_syms) > 100  # the archive was read
    leaked = sorted(kernel_syms.intersection(names))
    assert not leaked, leaked[:20]


def test_runtime_lib_exports_the_api_and_kernel_interface_only():
    exported = [n for _, n in defined_symbols(RUNTIME_LIB, "-D")]
    assert any(n.startswith("kiln::Session::run(") for n in exported)
    assert not any(n.startswith("kiln::register_portable_kernels") for n in exported)  # the kernel library's
    outside = [n for n in exported if not (n.startswith("kiln::") or " for kiln::" in n or n.startswith("KILN_"))]
    assert not outside, outside[:20]
    # The narrow map (cmake/kiln_runtime.map): no executor, loader, session or
    # registry internals, no template instantiations.
    internal = [n for n in exported if any(m in n for m in (
        "kiln::runtime::", "kiln::program::", "kiln::api::", "kiln::fb::", "::Impl::", "make_status<", "Result<"))]
    assert not internal, internal[:20]
    assert any(n.startswith("kiln::kernels::add_kernel_library(") for n in exported)


# --- kiln-run-program --------------------------------------------------------

def outputs_of_kiln_run(model, inputs, out_dir):
    import onnx
    from onnx import numpy_helper
    args = [KILN, "run", model, "--output-dir", str(out_dir)]
    for name, path in inputs.items():
        args += ["--input", f"{name}={path}"]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    files = sorted(p for p in os.listdir(out_dir) if p.endswith(".pb"))
    out = []
    for f in sorted(files, key=lambda p: int(p[len("output_"):-3])):
        t = onnx.TensorProto()
        with open(os.path.join(out_dir, f), "rb") as fh:
            t.ParseFromString(fh.read())
        out.append(numpy_helper.to_array(t))
    return out


def outputs_of_runner(runner, model, inputs, out_dir):
    args = [runner, model, "--output-dir", str(out_dir)]
    for name, path in inputs.items():
        args += ["--input", f"{name}={path}"]
    r = run(*args)
    assert r.returncode == 0, r.stderr
    files = sorted((p for p in os.listdir(out_dir) if p.endswith(".npy")), key=lambda p: int(p[len("output_"):-4]))
    return [np.load(os.path.join(out_dir, f)) for f in files]


@pytest.mark.parametrize("runner_var", ["KILN_RUN_PROGRAM", "KILN_RUN_PROGRAM_DEMO"])
def test_runner_matches_kiln_run_on_the_demo_program(demo, runner_var):
    runner = os.environ[runner_var]
    inputs = {"image": demo / "image.npy"}
    expected = outputs_of_kiln_run(str(demo / "demo.kiln"), inputs, demo / ("kiln_run_" + runner_var))
    got = outputs_of_runner(runner, str(demo / "demo.kiln"), inputs, demo / ("runner_" + runner_var))
    assert len(got) == len(expected) == 2
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert np.array_equal(g, e)


def test_runner_matches_kiln_run_on_resnet18(tmp_path):
    onnx_path = os.path.join(MODELS_OUT, "resnet18", "model.onnx")
    if not MODELS_OUT or not os.path.exists(onnx_path):
        pytest.skip("resnet18/model.onnx is not exported (make models)")
    kiln_path = str(tmp_path / "resnet18.kiln")
    r = run(KILN, "compile", onnx_path, "-o", kiln_path, "--backends", "portable")
    assert r.returncode == 0, r.stderr
    x = np.random.default_rng(3).standard_normal((1, 3, 224, 224)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    import onnx
    graph = onnx.load(onnx_path, load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    inputs = {[i.name for i in graph.input if i.name not in initializers][0]: tmp_path / "x.npy"}
    expected = outputs_of_kiln_run(kiln_path, inputs, tmp_path / "a")
    got = outputs_of_runner(RUNNER, kiln_path, inputs, tmp_path / "b")
    assert len(got) == len(expected) and all(np.array_equal(g, e) for g, e in zip(got, expected))


def test_runner_runs_partitions_compiled_for_a_plugin(demo):
    # The program's partitions run in the template plugin, which the runner
    # loads through libkiln_runtime's plugin loader (a program compiled for a
    # backend fails to load without it, having no --keep-fallback).
    program = str(demo / "demo_template.kiln")
    r = run(KILN, "compile", str(demo / "demo.onnx"), "-o", program, "--backends", "template,portable",
            "--backend-path", TEMPLATE)
    assert r.returncode == 0, r.stderr
    assert "partition template:" in r.stdout
    inputs = {"image": demo / "image.npy"}
    expected = outputs_of_kiln_run(str(demo / "demo.kiln"), inputs, demo / "portable_out")
    got = outputs_of_runner(RUNNER, program, inputs, demo / "template_out")
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and np.allclose(g, e, rtol=1e-5, atol=1e-6)


def test_runner_with_random_inputs_prints_each_output(demo):
    r = run(RUNNER, str(demo / "demo.kiln"), "--seed", "5", "--threads", "2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["probabilities: float32[1, 10]", "label: int64[1]"]


@pytest.mark.parametrize("cut", [0, 15, 200, -100])
def test_truncated_program_is_a_one_line_error(demo, tmp_path, cut):
    data = (demo / "demo.kiln").read_bytes()
    bad = tmp_path / "bad.kiln"
    bad.write_bytes(data[:cut] if cut >= 0 else data[:len(data) + cut])
    r = run(RUNNER, str(bad))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln-run-program: cannot load"), r.stderr


def test_onnx_model_is_refused_by_name(demo):
    r = run(RUNNER, str(demo / "demo.onnx"))
    assert r.returncode == 1
    assert "no ONNX importer" in r.stderr and "kiln compile" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,message", [
    ([], "no program given"),
    (["x.kiln", "--threads", "many"], "--threads expects"),
    (["x.kiln", "--input", "image"], "--input expects NAME=FILE.npy"),
    (["x.kiln", "--frobnicate", "1"], "unknown option"),
])
def test_usage_errors(args, message):
    r = run(RUNNER, *args)
    assert r.returncode == 2 and message in r.stderr


def test_unknown_input_and_bad_npy_are_errors(demo, tmp_path):
    r = run(RUNNER, str(demo / "demo.kiln"), "--input", f"nope={demo / 'image.npy'}")
    assert r.returncode == 1 and "unknown input 'nope'" in r.stderr
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    r = run(RUNNER, str(demo / "demo.kiln"), "--input", f"image={tmp_path / 'bad.npy'}")
    assert r.returncode == 1 and "bad.npy" in r.stderr


# --- selective build ----------------------------------------------------------

def op_list(*files):
    r = run(sys.executable, OP_LIST, *map(str, files))
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_op_list_of_program_and_model_agree(demo):
    expected = sorted(["ArgMax", "Conv", "Flatten", "Gemm", "GlobalAveragePool", "MaxPool", "Relu", "Softmax"])
    assert op_list(demo / "demo.kiln") == expected
    assert op_list(demo / "demo.onnx") == expected


def test_op_list_refuses_a_corrupt_program(demo, tmp_path):
    bad = tmp_path / "bad.kiln"
    bad.write_bytes((demo / "demo.kiln").read_bytes()[:40])
    r = run(sys.executable, OP_LIST, str(bad))
    assert r.returncode == 1 and "bad.kiln" in r.stderr


def test_generator_calls_only_the_families_of_the_listed_ops(tmp_path):
    table = run(SELECT_KERNELS, "--table")
    assert table.returncode == 0
    rows = {tuple(line.split()) for line in table.stdout.splitlines()}
    assert ("conv", "ai.onnx", "Conv") in rows and ("rnn", "ai.onnx", "LSTM") in rows
    (tmp_path / "ops.txt").write_text("# demo\nConv\nai.onnx Relu\nNoSuchOp\n")
    out = tmp_path / "selected.cpp"
    r = run(SELECT_KERNELS, str(out), str(tmp_path / "ops.txt"))
    assert r.returncode == 0, r.stderr
    assert "no portable kernel for NoSuchOp" in r.stderr
    text = out.read_text()
    assert "register_conv_ops(families);" in text and "register_rnn_ops" not in text
    assert '{"", "Conv"}' in text and '{"", "Relu"}' in text and "NoSuchOp" not in text
    (tmp_path / "bad.txt").write_text("a b c\n")
    r = run(SELECT_KERNELS, str(out), str(tmp_path / "bad.txt"))
    assert r.returncode == 1 and "bad.txt:1" in r.stderr


def test_selective_runner_has_only_the_demo_families():
    def families(path):
        return {n.split("register_", 1)[1].split("_ops(")[0] for _, n in defined_symbols(path)
                if n.startswith("kiln::kernels::register_") and "_ops(" in n}
    everything = families(RUNNER)
    selected = families(RUNNER_DEMO)
    assert {"conv", "pool", "matmul", "softmax"} <= selected
    assert "rnn" in everything and "rnn" not in selected and "string" not in selected
    assert len(selected) < len(everything) / 3, (sorted(selected), len(everything))


def test_selective_runner_refuses_an_op_it_lacks(tmp_path):
    # A program whose one op (Sin) is outside the demo's selection.
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Sin", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "sin.onnx")
    assert run(KILN, "compile", str(tmp_path / "sin.onnx"), "-o", str(tmp_path / "sin.kiln"),
               "--backends", "portable").returncode == 0
    assert run(RUNNER, str(tmp_path / "sin.kiln")).returncode == 0
    r = run(RUNNER_DEMO, str(tmp_path / "sin.kiln"))
    assert r.returncode == 1 and "Sin" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# --- compile-selected builds (the kernel table) -----------------------------

def test_kernel_table_matches_the_kernels():
    r = run(sys.executable, os.environ["KILN_KERNEL_TABLE_SCRIPT"], "check", os.environ["KILN_KERNEL_TABLE"],
            "--select-kernels", SELECT_KERNELS, "--objects", os.environ["KILN_PORTABLE_OBJECTS"])
    assert r.returncode == 0, r.stderr


def test_kernel_table_selects_families_and_the_files_they_call(tmp_path):
    (tmp_path / "ops.txt").write_text("Conv\nEinsum\nNoSuchOp\n")
    r = run(sys.executable, os.environ["KILN_KERNEL_TABLE_SCRIPT"], "select", os.environ["KILN_KERNEL_TABLE"],
            "--root", "P", str(tmp_path / "ops.txt"))
    assert r.returncode == 0, r.stderr
    families, files = r.stdout.strip().split("|")
    assert families.split(";") == ["conv", "einsum"]
    # conv calls its depthwise (and those its packed and row kernels), direct
    # small-channel, padded-row, pre-activation, sparse-tap and Winograd
    # kernels; einsum calls matmul's GEMM
    assert files.split(";") == ["P/conv.cpp", "P/conv_depthwise.cpp", "P/conv_depthwise_packed.cpp",
                                "P/conv_depthwise_rows.cpp", "P/conv_direct_small.cpp", "P/conv_padded_rows.cpp",
                                "P/conv_preact.cpp", "P/conv_sparse_taps.cpp", "P/conv_winograd.cpp", "P/einsum.cpp",
                                "P/matmul.cpp"]
    (tmp_path / "bad.txt").write_text("family x\n")
    r = run(sys.executable, os.environ["KILN_KERNEL_TABLE_SCRIPT"], "select", str(tmp_path / "bad.txt"),
            str(tmp_path / "ops.txt"))
    assert r.returncode == 1 and "bad.txt:1" in r.stderr


def test_selective_tree_compiles_only_the_selected_families(demo, tmp_path):
    build = tmp_path / "build"
    r = run(os.environ["KILN_CMAKE"], "-S", os.environ["KILN_SOURCE_DIR"], "-B", str(build), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release", "-DKILN_BUILD_TESTS=OFF", f"-DKILN_SELECT_OPS_FROM={demo / 'demo.kiln'}")
    assert r.returncode == 0, r.stderr[-2000:]
    r = run("ninja", "-C", str(build), "-t", "commands", "kiln_run_program")
    assert r.returncode == 0, r.stderr
    compiled = {line.split(" -c ")[-1].split()[0].rsplit("/", 1)[-1] for line in r.stdout.splitlines()
                if "/src/kernels/portable/" in line and " -c " in line}
    assert {"conv.cpp", "pool.cpp", "matmul.cpp", "softmax.cpp", "gemm.cpp"} <= compiled, sorted(compiled)
    for other in ("rnn.cpp", "string_ops.cpp", "resize.cpp", "all.cpp"):
        assert other not in compiled, sorted(compiled)
    if os.environ.get("KILN_SELECTIVE_BUILD") != "1":
        return
    r = run("ninja", "-C", str(build), "-j2", "kiln_run_program")
    assert r.returncode == 0, r.stdout[-3000:]
    inputs = {"image": demo / "image.npy"}
    expected = outputs_of_kiln_run(str(demo / "demo.kiln"), inputs, tmp_path / "a")
    got = outputs_of_runner(str(build / "bin" / "kiln-run-program"), str(demo / "demo.kiln"), inputs, tmp_path / "b")
    assert len(got) == len(expected) and all(np.array_equal(g, e) for g, e in zip(got, expected))
