#!/bin/sh
# Peak and steady RSS of a model whose weights a plugin owns (ABI 1.1
# owned_constants), against the same plugin without the promise and against
# portable kernels: `kiln bench` on y = MatMul(MatMul(Add(x, B), W1), W2)
# (80 MiB of float32 weights), saved with embedded and with external data.
# The plugin is tests/abi/fakes/fake_weights.c (KILN_FAKE_WEIGHTS_KEEP_HOST_COPY
# withholds the promise). Usage: bench/shared_weights_rss.sh BUILD_DIR [WORK_DIR]
set -eu
build=$(cd "$1" && pwd)
work=${2:-$(mktemp -d)}
mkdir -p "$work"
kiln=$build/bin/kiln
plugin=$build/tests/abi/fakes/weights/libkiln_fake_weights.so
/usr/bin/python3 - "$work" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
work = sys.argv[1]
rng = np.random.default_rng(0)
inits = [numpy_helper.from_array(rng.standard_normal((1, 4096), dtype=np.float32), "B"),
         numpy_helper.from_array(rng.standard_normal((4096, 4096), dtype=np.float32) * 0.01, "W1"),
         numpy_helper.from_array(rng.standard_normal((4096, 1024), dtype=np.float32) * 0.01, "W2")]
nodes = [helper.make_node("Add", ["x", "B"], ["a"], name="add"),
         helper.make_node("MatMul", ["a", "W1"], ["h"], name="mm1"),
         helper.make_node("MatMul", ["h", "W2"], ["y"], name="mm2")]
g = helper.make_graph(nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4096])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, work + "/embedded.onnx")
onnx.save(m, work + "/external.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
          location="external.bin", size_threshold=1024)
PY
for model in embedded external; do
  f=$work/$model.onnx
  echo "$model: portable";   "$kiln" bench "$f" --backends portable --runs 10 --warmup 2 | grep 'peak RSS'
  echo "$model: host keeps"; KILN_FAKE_WEIGHTS_KEEP_HOST_COPY=1 "$kiln" bench "$f" --backends weights \
                               --backend-path "$plugin" --runs 10 --warmup 2 | grep 'peak RSS'
  echo "$model: owned";      "$kiln" bench "$f" --backends weights --backend-path "$plugin" --runs 10 --warmup 2 |
                               grep 'peak RSS'
done
