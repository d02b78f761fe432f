"""kiln demo-model writes a valid ONNX model that kiln runs and that torch agrees with."""

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from conftest import read_pb


@pytest.fixture(scope="module")
def demo(kiln, tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "sub" / "tiny_cnn.onnx"
    r = kiln("demo-model", path)
    assert r.returncode == 0, r.stderr
    return path


def test_demo_model_is_valid_and_small(demo):
    model = onnx.load(str(demo))
    onnx.checker.check_model(model, full_check=True)
    assert demo.stat().st_size < 64 * 1024
    assert [i.name for i in model.graph.input] == ["image"]
    assert [o.name for o in model.graph.output] == ["probabilities", "label"]


def test_demo_model_is_deterministic(kiln, demo, tmp_path):
    again = tmp_path / "again.onnx"
    assert kiln("demo-model", again).returncode == 0
    assert again.read_bytes() == demo.read_bytes()


def test_make_demo_command_runs(kiln, demo, tmp_path):
    # What `make demo` runs: random inputs, outputs written.
    out = tmp_path / "outputs"
    r = kiln("run", demo, "--output-dir", out)
    assert r.returncode == 0, r.stderr
    assert "probabilities" in r.stdout and "float32[1, 10]" in r.stdout and "int64[1]" in r.stdout
    probs = read_pb(out / "output_0.pb")
    assert probs.shape == (1, 10) and abs(probs.sum() - 1) < 1e-5
    assert read_pb(out / "output_1.pb")[0] == probs.argmax()


def test_demo_model_matches_torch(kiln, demo, tmp_path):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    w = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in onnx.load(str(demo)).graph.initializer}
    rng = np.random.default_rng(1)
    image = rng.uniform(0, 1, size=(2, 1, 28, 28)).astype(np.float32)  # batch 2: N is symbolic
    np.save(tmp_path / "image.npy", image)
    out = tmp_path / "out"
    r = kiln("run", demo, "--input", f"image={tmp_path / 'image.npy'}", "--output-dir", out)
    assert r.returncode == 0, r.stderr

    x = torch.from_numpy(image)
    x = F.max_pool2d(F.relu(F.conv2d(x, w["conv1.weight"], w["conv1.bias"], padding=1)), 2)
    x = F.max_pool2d(F.relu(F.conv2d(x, w["conv2.weight"], w["conv2.bias"], padding=1)), 2)
    logits = F.linear(x.mean(dim=(2, 3)), w["fc.weight"], w["fc.bias"])
    np.testing.assert_allclose(read_pb(out / "output_0.pb"), torch.softmax(logits, 1).numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(read_pb(out / "output_1.pb"), logits.argmax(1).numpy())
