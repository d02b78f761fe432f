"""kiln compile / .kiln programs / the compile cache, through the CLI.

Run: KILN_BIN=build/bin/kiln /usr/bin/python3 -m pytest -q tests/cli/test_program.py
"""

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import read_pb, save_model, write_pb

X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """z = Relu(x @ W + b) * x2 + tail; the template plugin claims MatMul/Add/Relu/Mul."""
    d = tmp_path_factory.mktemp("mlp")
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4) / 10 - 0.7, "W")
    b = numpy_helper.from_array(np.full(4, 0.1, dtype=np.float32), "b")
    model = save_model(d / "mlp.onnx",
                       [helper.make_node("MatMul", ["x", "W"], ["h"]),
                        helper.make_node("Add", ["h", "b"], ["h2"]),
                        helper.make_node("Relu", ["h2"], ["r"]),
                        helper.make_node("Sigmoid", ["r"], ["s"]),
                        helper.make_node("Mul", ["s", "x"], ["z"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                       [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4])], [w, b])
    inputs = d / "inputs"
    inputs.mkdir()
    write_pb(inputs / "input_0.pb", X, "x")
    return model, str(inputs)


def run_outputs(kiln, model, inputs, out_dir, *flags):
    r = kiln("run", model, "--input-dir", inputs, "--output-dir", out_dir, *flags)
    assert r.returncode == 0, r.stderr
    return read_pb(os.path.join(out_dir, "output_0.pb")), r.stderr


@pytest.mark.parametrize("backends", ["portable", "template,portable"])
def test_compiled_program_matches_onnx(kiln, mlp, tmp_path, backends):
    model, inputs = mlp
    prog = tmp_path / "mlp.kiln"
    r = kiln("compile", model, "-o", prog, "--backends", backends)
    assert r.returncode == 0, r.stderr
    assert "program format 1" in r.stdout
    assert ("partition template:" in r.stdout) == backends.startswith("template")
    assert "memory plan: arena of" in r.stdout
    # Portable MatMul packs its constant W once, at compile time.
    assert ("packed weights: 1 (" in r.stdout) == (backends == "portable"), r.stdout
    want, _ = run_outputs(kiln, model, inputs, tmp_path / "onnx", "--backends", backends)
    got, _ = run_outputs(kiln, prog, inputs, tmp_path / "kiln")
    np.testing.assert_array_equal(got, want)
    if backends == "portable":
        # Packings for another layout (another CPU) are ignored: the kernel packs again.
        other = tmp_path / "other.kiln"
        patched(prog, other, b"/sgemm-b/", b"/sgemm-q/")
        got, _ = run_outputs(kiln, other, inputs, tmp_path / "other")
        np.testing.assert_array_equal(got, want)
    r = kiln("inspect", prog)
    assert r.returncode == 0 and "program format 1" in r.stdout, r.stderr


def patched(src, dst, old, new):
    data = open(src, "rb").read()
    assert old in data
    open(dst, "wb").write(data.replace(old, new))


@pytest.mark.parametrize("keep", [False, True])
def test_missing_or_incompatible_backend(kiln, mlp, tmp_path, keep):
    model, inputs = mlp
    prog = tmp_path / "mlp.kiln"
    flags = ["--keep-fallback"] if keep else []
    assert kiln("compile", model, "-o", prog, "--backends", "template,portable", *flags).returncode == 0
    want, _ = run_outputs(kiln, model, inputs, tmp_path / "onnx", "--backends", "portable")
    missing, newer = tmp_path / "missing.kiln", tmp_path / "newer.kiln"
    patched(prog, missing, b"template", b"templatf")  # a backend this process lacks
    patched(prog, newer, b"1.0.0", b"9.9.9")          # blobs from another plugin version
    for p, word in ((missing, "templatf"), (newer, "9.9.9")):
        if keep:
            got, err = run_outputs(kiln, p, inputs, tmp_path / ("out" + p.stem))
            np.testing.assert_allclose(got, want, rtol=1e-6)
            assert "portable kernels" in err and word in err
        else:
            line = kiln.error("run", p)
            assert word in line and "--keep-fallback" in line


def test_truncated_and_bit_flipped_programs_fail_cleanly(kiln, mlp, tmp_path):
    model, _ = mlp
    prog = tmp_path / "mlp.kiln"
    assert kiln("compile", model, "-o", prog, "--backends", "template,portable").returncode == 0
    data = open(prog, "rb").read()
    bad = tmp_path / "bad.kiln"
    for n in (9, 16, 100, len(data) // 2, len(data) - 1):
        open(bad, "wb").write(data[:n])
        line = kiln.error("run", bad)
        assert "corrupt program" in line or "truncated" in line or "not a" in line or "cannot" in line, line
    for i in range(0, min(len(data), 1200), 7):
        flipped = bytearray(data)
        flipped[i] ^= 0xFF
        open(bad, "wb").write(bytes(flipped))
        r = kiln("run", bad)
        assert r.returncode in (0, 1), f"flip at {i}: exit {r.returncode}\n{r.stderr}"


def cache_files(cache, suffix):
    return sorted(os.path.join(dp, f) for dp, _, fs in os.walk(cache) for f in fs if f.endswith(suffix))


def test_compile_cache(kiln, mlp, tmp_path):
    model, inputs = mlp
    cache = tmp_path / "cache"
    flags = ("--backends", "template,portable", "--cache-dir", cache)
    want, _ = run_outputs(kiln, model, inputs, tmp_path / "a", *flags)
    r = kiln("cache", "ls", cache)
    assert r.returncode == 0 and " ok " in r.stdout, r.stdout
    parts, programs = cache_files(cache, ".kcc"), cache_files(cache, ".kiln")
    assert parts and len(programs) == 1, os.listdir(cache)
    # The second load takes the whole program from the cache.
    got, err = run_outputs(kiln, model, inputs, tmp_path / "b", *flags)
    np.testing.assert_array_equal(got, want)
    assert "warning" not in err
    # Without the program entry the partitions come from their entries; a
    # corrupt one is ignored with a warning, recompiled and replaced.
    os.remove(programs[0])
    with open(parts[0], "r+b") as f:
        f.seek(70)
        f.write(b"\xff\xfe")
    assert "corrupt" in kiln("cache", "ls", cache).stdout
    env_run = kiln("run", model, "--input-dir", inputs, *flags)
    assert env_run.returncode == 0 and "ignoring entry" in env_run.stderr, env_run.stderr
    assert "corrupt" not in kiln("cache", "ls", cache).stdout
    r = kiln("cache", "clear", cache)
    assert r.returncode == 0 and f"removed {len(parts) + 1} entries" in r.stdout, r.stdout
    assert "0 entries" in kiln("cache", "ls", cache).stdout


@pytest.mark.parametrize("damage", ["flip", "truncate", "no-sum"])
def test_program_cache_entry_damage(kiln, mlp, tmp_path, damage):
    """A damaged whole-program entry is ignored with a warning and rebuilt."""
    model, inputs = mlp
    cache = tmp_path / "cache"
    flags = ("--backends", "template,portable", "--cache-dir", cache)
    want, _ = run_outputs(kiln, model, inputs, tmp_path / "a", *flags)
    [program] = cache_files(cache, ".kiln")
    size = os.path.getsize(program)
    if damage == "flip":  # a byte of a constant: only the checksum can tell
        with open(program, "r+b") as f:
            f.seek(size - 8)
            b = f.read(1)
            f.seek(size - 8)
            f.write(bytes([b[0] ^ 0x40]))
    elif damage == "truncate":
        os.truncate(program, size // 2)
    else:
        os.remove(program + ".sum")
    assert "corrupt" in kiln("cache", "ls", cache).stdout
    got, err = run_outputs(kiln, model, inputs, tmp_path / "b", *flags)
    np.testing.assert_array_equal(got, want)
    assert "program cache" in err and "ignoring" in err, err
    assert "corrupt" not in kiln("cache", "ls", cache).stdout
    got, err = run_outputs(kiln, model, inputs, tmp_path / "c", *flags)
    np.testing.assert_array_equal(got, want)
    assert "warning" not in err
