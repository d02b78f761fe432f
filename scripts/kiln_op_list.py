#!/usr/bin/env python3
"""Prints the ops that models and programs use, one per line ("Conv", or
"DOMAIN OP" outside ai.onnx), for a selective build (KILN_SELECT_OPS_FROM,
cmake/KilnSelectKernels.cmake; kiln_select_kernels reads the list).

Inputs: .kiln programs (read with a small FlatBuffers reader over
src/program/program.fbs, no dependency), .onnx models (needs the onnx Python
package), and op lists (.txt, passed through). Subgraphs (If/Loop bodies) and
an ONNX model's local functions count. A .kiln stores the whole graph,
delegated nodes included, so the list also covers a --keep-fallback
program's portable fallback.

A .kiln holds the graph as imported: the exact ops its session needs. An
.onnx lists the ops as written; an op with no portable kernel that the
importer expands into its ONNX function body needs that body's ops, so prefer
the compiled .kiln when a model uses such ops.

usage: kiln_op_list.py [-o OUT] FILE...
"""
import argparse
import struct
import sys


class FlatTable:
    """Read-only access to one FlatBuffers table inside `buf`."""

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        vt = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vt_size = struct.unpack_from("<H", buf, vt)[0]
        self.vt = vt

    def _field(self, index):
        slot = 4 + 2 * index
        if slot + 2 > self.vt_size:
            return 0
        return struct.unpack_from("<H", self.buf, self.vt + slot)[0]

    def _ref(self, index):
        off = self._field(index)
        if not off:
            return None
        at = self.pos + off
        return at + struct.unpack_from("<I", self.buf, at)[0]

    def string(self, index):
        at = self._ref(index)
        if at is None:
            return ""
        n = struct.unpack_from("<I", self.buf, at)[0]
        return self.buf[at + 4:at + 4 + n].decode("utf-8")

    def table(self, index):
        at = self._ref(index)
        return None if at is None else FlatTable(self.buf, at)

    def tables(self, index):
        at = self._ref(index)
        if at is None:
            return []
        n = struct.unpack_from("<I", self.buf, at)[0]
        out = []
        for i in range(n):
            e = at + 4 + 4 * i
            out.append(FlatTable(self.buf, e + struct.unpack_from("<I", self.buf, e)[0]))
        return out


# Field indices in program.fbs (fields are only ever appended).
PROGRAM_GRAPH = 2
GRAPH_NODES = 2
NODE_OP_TYPE, NODE_DOMAIN, NODE_ATTRIBUTES = 1, 2, 6
ATTR_G, ATTR_GRAPHS = 7, 13


def kiln_graph_ops(graph, ops):
    for node in graph.tables(GRAPH_NODES):
        ops.add((node.string(NODE_DOMAIN), node.string(NODE_OP_TYPE)))
        for attr in node.tables(NODE_ATTRIBUTES):
            sub = attr.table(ATTR_G)
            if sub is not None:
                kiln_graph_ops(sub, ops)
            for sub in attr.tables(ATTR_GRAPHS):
                kiln_graph_ops(sub, ops)


def kiln_ops(path, data, ops):
    if len(data) < 16 or data[:8] != b"KILNPRG\0":
        raise ValueError(f"{path}: not a .kiln program (bad magic)")
    size = struct.unpack_from("<I", data, 12)[0]
    buf = data[16:16 + size]
    if len(buf) != size or size < 8:
        raise ValueError(f"{path}: truncated .kiln program")
    try:
        root = FlatTable(buf, struct.unpack_from("<I", buf, 0)[0])
        graph = root.table(PROGRAM_GRAPH)
        if graph is None:
            raise ValueError(f"{path}: the program has no graph")
        kiln_graph_ops(graph, ops)
    except (struct.error, UnicodeDecodeError, IndexError) as e:
        raise ValueError(f"{path}: corrupt .kiln program ({e})") from None


def onnx_ops(path, ops):
    import onnx  # only needed for .onnx inputs

    def graph_ops(graph):
        for node in graph.node:
            ops.add((node.domain, node.op_type))
            for attr in node.attribute:
                if attr.HasField("g"):
                    graph_ops(attr.g)
                for sub in attr.graphs:
                    graph_ops(sub)

    model = onnx.load(path, load_external_data=False)
    graph_ops(model.graph)
    local = {(f.domain, f.name) for f in model.functions}
    for f in model.functions:
        for node in f.node:
            ops.add((node.domain, node.op_type))
    ops.difference_update(local)  # inlined at import: their bodies count instead


def list_ops(path, ops):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] == b"KILNPRG\0":
        kiln_ops(path, data, ops)
    elif path.endswith(".onnx"):
        onnx_ops(path, ops)
    else:
        for line in data.decode("utf-8").splitlines():
            words = line.split("#")[0].split()
            if len(words) == 1:
                ops.add(("", words[0]))
            elif len(words) == 2:
                ops.add((words[0], words[1]))
            elif words:
                raise ValueError(f"{path}: expected 'OP' or 'DOMAIN OP', got '{line}'")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", help="write the list here (default: stdout)")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv[1:])
    ops = set()
    try:
        for path in args.files:
            list_ops(path, ops)
    except (OSError, ValueError) as e:
        print(f"kiln_op_list: {e}", file=sys.stderr)
        return 1
    lines = sorted(op if domain in ("", "ai.onnx") else f"{domain} {op}" for domain, op in ops)
    text = "".join(line + "\n" for line in lines)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
