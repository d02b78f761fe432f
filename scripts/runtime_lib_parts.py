#!/usr/bin/env python3
"""Where libkiln_runtime.so's bytes come from: sums the input sections the
linker kept (its map file, written beside the library by
cmake/KilnRuntimeLibrary.cmake) by layer and by source file, with the
libstdc++ template code instantiated in them counted apart. Used by
scripts/runtime_lib_size.sh. Sizes are before gold's identical code folding
and exclude the linker-made sections (.eh_frame_hdr, .dynsym, PLT, ...).

usage: runtime_lib_parts.py LINKER_MAP
"""
import collections
import re
import sys

STD = re.compile(r"_ZN?K?(St|Sa|Ss|9__gnu_cxx)")


def main(path):
    parts, files = collections.Counter(), collections.Counter()

    def add(section, size, obj):
        m = re.search(r"kiln_runtime_lib_objs\.dir/(?:__/)?(.*)\.o$", obj)
        if not m or size == 0:
            return
        src = m.group(1)
        layer = src.rsplit("/", 1)[0] if "/" in src else "api"
        symbol = section.split(".", 2)[2] if section.count(".") >= 2 else ""
        if STD.match(symbol):
            parts["libstdc++ templates"] += size
        else:
            parts[layer] += size
            files[src] += size

    in_map, pending = False, None
    with open(path) as f:
        for line in f:
            if line.startswith("Memory map") or line.startswith("Linker script and memory map"):
                in_map = True
            if not in_map or line.startswith((" .group", " .note", " .comment")):
                continue
            m = re.match(r"^ (\.\S+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)$", line)
            if m:
                add(m.group(1), int(m.group(2), 16), m.group(3))
                pending = None
                continue
            m = re.match(r"^ (\.\S+)\s*$", line)
            if m:
                pending = m.group(1)
                continue
            m = re.match(r"^\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+\.o)$", line)
            if m and pending:
                add(pending, int(m.group(1), 16), m.group(2))
            pending = None
    if not parts:
        sys.exit(f"runtime_lib_parts: no kiln_runtime_lib_objs sections in '{path}'")
    print("kept code and data by layer (bytes):")
    for k, v in parts.most_common():
        print("%8d  %s" % (v, k))
    print("largest source files (their own code, without libstdc++ templates):")
    for k, v in files.most_common(12):
        print("%8d  %s" % (v, k))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: runtime_lib_parts.py LINKER_MAP")
    main(sys.argv[1])
