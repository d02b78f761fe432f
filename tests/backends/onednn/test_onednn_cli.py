"""The oneDNN plugin from the CLI: lazy loading of libdnnl.so.2.

Environment (set by ctest onednn.cli): KILN_BIN, KILN_ONEDNN (the plugin),
KILN_FAKE_DNNL (a fake libdnnl lacking dnnl_primitive_execute).
"""
import os
import struct
import subprocess

import pytest

KILN = os.environ.get("KILN_BIN", "kiln")
PLUGIN = os.environ.get("KILN_ONEDNN", "")
FAKE = os.environ.get("KILN_FAKE_DNNL", "")


def kiln(*args, env=None):
    e = dict(os.environ)
    e.pop("KILN_BACKEND_PATH", None)
    e.pop("KILN_ONEDNN_LIBRARY", None)
    e.update(env or {})
    return subprocess.run([KILN, *args], capture_output=True, text=True, env=e, timeout=300)


def needed_libraries(path):
    """DT_NEEDED entries of an ELF64 little-endian shared object, read from its dynamic section."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not an ELF64 LE file"
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    dynamic = [s for s in sections if s[1] == 6]  # SHT_DYNAMIC
    assert len(dynamic) == 1, "no dynamic section"
    _, _, _, _, off, size, link, _, _, entsize = dynamic[0]
    strtab_off = sections[link][4]
    names = []
    for i in range(size // entsize):
        tag, val = struct.unpack_from("<qQ", data, off + i * entsize)
        if tag == 0:
            break
        if tag == 1:  # DT_NEEDED
            end = data.index(b"\0", strtab_off + val)
            names.append(data[strtab_off + val:end].decode())
    return names


def test_plugin_has_no_needed_entry_for_libdnnl():
    needed = needed_libraries(PLUGIN)
    assert "libc.so.6" in needed  # the parser reads real entries
    assert not [n for n in needed if "dnnl" in n or "gomp" in n], needed


def test_backends_shows_onednn_available_with_its_version():
    r = kiln("backends", "--backend-path", PLUGIN)
    assert r.returncode == 0, r.stderr
    assert "onednn 1.0.0" in r.stdout
    assert "available:   yes" in r.stdout
    assert "oneDNN 2." in r.stdout


def test_missing_library_makes_onednn_unavailable_with_the_reason():
    r = kiln("backends", "--backend-path", PLUGIN, env={"KILN_ONEDNN_LIBRARY": "/nonexistent"})
    assert r.returncode == 0, r.stderr
    assert "onednn 1.0.0" in r.stdout  # still registers
    assert ("available:   no: oneDNN runtime not found (/nonexistent: cannot open shared object file: "
            "No such file or directory): apt-get install libdnnl2, or set KILN_ONEDNN_LIBRARY") in r.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A small static-shape CNN (the oneDNN plugin needs static shapes)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.uniform(-0.3, 0.3, (8, 3, 3, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(rng.uniform(-0.3, 0.3, (8, 4)).astype(np.float32), "fc")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    graph = helper.make_graph(nodes, "static_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [w, fc])
    path = tmp_path_factory.mktemp("m") / "cnn.onnx"
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


def test_run_falls_back_to_portable_when_the_library_is_missing(demo):
    env = {"KILN_ONEDNN_LIBRARY": "/nonexistent"}
    r = kiln("run", demo, "--backends", "onednn,portable", "--backend-path", PLUGIN, env=env)
    assert r.returncode == 0, r.stderr
    ok = kiln("run", demo, "--backends", "portable")
    assert ok.returncode == 0, ok.stderr
    strip = lambda s: [l for l in s.splitlines() if not l.startswith("ran in ")]  # timings differ
    assert strip(r.stdout) == strip(ok.stdout)
    i = kiln("inspect", demo, "--backends", "onednn,portable", "--backend-path", PLUGIN, env=env)
    assert i.returncode == 0, i.stderr
    assert "oneDNN runtime not found" in i.stdout + i.stderr


def test_run_uses_onednn_when_present(demo):
    i = kiln("inspect", demo, "--backends", "onednn,portable", "--backend-path", PLUGIN)
    assert i.returncode == 0, i.stderr
    assert "onednn" in i.stdout and " 0 on portable" in i.stdout, i.stdout
    r = kiln("run", demo, "--backends", "onednn,portable", "--backend-path", PLUGIN)
    assert r.returncode == 0, r.stderr


def test_library_lacking_a_symbol_is_refused_naming_it():
    r = kiln("backends", "--backend-path", PLUGIN, env={"KILN_ONEDNN_LIBRARY": FAKE})
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if "available:" in l)
    assert line.strip().startswith("available:   no: oneDNN runtime " + FAKE + " lacks the symbol dnnl_primitive_execute"), line


def test_bad_winograd_option_is_rejected(demo):
    r = kiln("run", demo, "--backends", "onednn,portable", "--backend-path", PLUGIN,
             "--backend-option", "onednn.winograd=maybe")
    assert r.returncode != 0
    assert "option 'winograd' must be auto, on or off, got 'maybe'" in r.stderr
