#!/usr/bin/env python3
"""Fails when a file includes a header of a layer above its own.

The layers (docs/architecture.md):  core < ir < kernels < runtime < api,
ir < optimizer < runtime, and onnx (the importer, over core and ir) < api. A file may include its own
layer and the layers below it, plus the public headers (include/kiln). The
public headers include only each other. tools/ and backends/ use the public
headers only; the one exception is tools/kiln's reading and writing of .pb
value files, which needs onnx/tensor_proto_io.h (it sees protobuf).

Inside the kernels layer, the runtime sees only the kernel interface and the
registry (kernels/kernel.h, kernels/registry.h): the portable kernels
(kernels/portable/, kernels/util/) are a kernel library that registers into
it, and only src/kernels includes their headers.

Only quoted includes ("layer/file.h") are checked; a quoted include of a file
beside the includer ("cli_util.h") is that folder's own. bench/ and tests/
are cross-layer by design and not checked.

usage: check_layering.py [ROOT]     check the tree at ROOT (default: the repo)
       check_layering.py --self-test  show that a planted upward include fails
"""
import os
import re
import sys
import tempfile

BELOW = {
    "core": {"core"},
    "ir": {"core", "ir"},
    "kernels": {"core", "ir", "kernels"},
    "onnx": {"core", "ir", "onnx"},
    "program": {"core", "ir", "program"},
    "optimizer": {"core", "ir", "optimizer"},
    "runtime": {"core", "ir", "kernels", "optimizer", "runtime"},
    "api": {"core", "ir", "kernels", "optimizer", "runtime", "onnx", "program", "api"},
}
LAYERS = set(BELOW) | {"kiln"}
# (folder prefix, header) pairs allowed beyond the rules, each with its reason above.
EXCEPTIONS = {("tools/kiln/", "onnx/tensor_proto_io.h")}
# Headers of the portable kernel library: included from src/kernels only.
KERNEL_LIBRARY = ("kernels/portable/", "kernels/util/")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp")


def allowed_layers(rel):
    """The layers `rel` (a path relative to the root) may include, or None if unchecked."""
    parts = rel.split("/")
    if parts[0] == "include" and len(parts) > 1 and parts[1] == "kiln":
        return {"kiln"}
    if parts[0] == "src" and len(parts) > 2 and parts[1] in BELOW:
        return BELOW[parts[1]] | {"kiln"}
    if parts[0] in ("tools", "backends"):
        return {"kiln"}
    return None


def check(root):
    problems = []
    for top in ("include", "src", "tools", "backends"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                allowed = allowed_layers(rel)
                if allowed is None:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        header = m.group(1)
                        if os.path.exists(os.path.join(dirpath, header)):
                            continue  # a file beside the includer: its own folder
                        layer = header.split("/")[0]
                        if header.startswith(KERNEL_LIBRARY) and not rel.startswith("src/kernels/"):
                            problems.append(f"{rel}:{lineno}: includes \"{header}\" (the portable kernel library), "
                                            "but outside src/kernels only kernels/kernel.h and kernels/registry.h")
                            continue
                        if layer in allowed:
                            continue
                        if any(rel.startswith(p) and header == h for p, h in EXCEPTIONS):
                            continue
                        what = f"layer '{layer}'" if layer in LAYERS else "a header outside the public API"
                        problems.append(f"{rel}:{lineno}: includes \"{header}\" ({what}), "
                                        f"but may include only: {', '.join(sorted(allowed))}")
    return problems


def self_test():
    """A clean fixture passes; the same fixture with one planted upward include fails."""
    with tempfile.TemporaryDirectory() as root:
        def write(rel, text):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        write("include/kiln/status.h", "#pragma once\n")
        write("src/core/status.cpp", '#include "kiln/status.h"\n')
        write("src/runtime/program.h", '#include "core/thread_pool.h"\n')
        write("tools/kiln/run.cpp", '#include "kiln/status.h"\n#include "cli_util.h"\n')
        write("tools/kiln/cli_util.h", "#pragma once\n")
        if check(root):
            print("self-test: the clean fixture was rejected:", check(root))
            return 1
        write("src/core/status.cpp", '#include "kiln/status.h"\n#include "runtime/program.h"\n')
        write("tools/kiln/run.cpp", '#include "runtime/program.h"\n')
        write("src/runtime/executor.cpp", '#include "kernels/registry.h"\n#include "kernels/portable/families.h"\n')
        found = check(root)
        if len(found) != 3:
            print("self-test: expected 3 violations for the planted includes, got:", found)
            return 1
        print("self-test: planted upward includes are reported:")
        for p in found:
            print("  " + p)
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) point up the layers (scripts/check_layering.py explains the rules)")
        return 1
    print("layering: every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
