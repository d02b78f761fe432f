#!/usr/bin/env python3
"""Load an ONNX model with Kiln, list the backends, run it on random inputs,
print the outputs and where each node ran.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/run_model.py MODEL.onnx [BACKEND ...]
    build/bin/kiln demo-model /tmp/tiny_cnn.onnx   # a model to try
"""

import sys

import numpy as np

import kiln


def random_input(info, rng):
    """An array for one input: symbolic or unknown dims become 1."""
    shape = [d if isinstance(d, int) else 1 for d in (info.shape or [])]
    if info.dtype is None or info.dtype == object:
        return np.full(shape, "text", dtype=object)
    if info.dtype.kind == "f":
        return rng.standard_normal(shape).astype(info.dtype)
    if info.dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(0, 10, shape).astype(info.dtype)


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    print("backends:")
    for b in kiln.backends():
        state = "available" if b.available else f"unavailable: {b.reason}"
        print(f"  {b.name} {b.version} ({state}) {b.path}")

    session = kiln.Session(argv[1], backends=argv[2:] or None)
    rng = np.random.default_rng(0)
    feeds = {i.name: random_input(i, rng) for i in session.inputs}
    for name, value in session.run(feeds).items():
        print(f"output {name}: {value.dtype}{list(value.shape)} {np.ravel(value)[:5]}")

    placement = session.placement()
    print(f"placement: backends tried {placement['backends']}, "
          f"{placement['fallback_nodes']} of {len(placement['nodes'])} nodes on portable kernels")
    for p in placement["partitions"]:
        print(f"  {p['id']}: {p['node_count']} nodes {p['op_histogram']}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except kiln.KilnError as e:
        print(f"error ({type(e).__name__}): {e}", file=sys.stderr)
        sys.exit(1)
