#!/usr/bin/env python3
"""Writes an importance matrix of ones for every weight matrix of a GGUF, in llama.cpp's legacy
imatrix layout, so that `llama-quantize --imatrix` makes the types it refuses without one (IQ1_S,
IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS): for random bench and test models there is no data to
weigh the columns by, and a uniform matrix weighs them all alike.

Layout: int32 entry count; per entry: int32 name length, the name, int32 call count (1), int32 value
count, float32 values (ne0 per matrix, times the expert count for 3-D expert tensors).

  python scripts/bench/uniform_imatrix.py MODEL.gguf OUT.imatrix
Needs: gguf (scripts/bench/requirements.txt).
"""
import struct
import sys
from pathlib import Path

from gguf import GGUFReader


def write_uniform_imatrix(model, path) -> None:
    entries = []
    for t in GGUFReader(str(model)).tensors:
        shape = [int(n) for n in t.shape]
        if len(shape) < 2 or not t.name.endswith(".weight"):
            continue
        n_values = shape[0] * (shape[2] if len(shape) == 3 else 1)
        entries.append((t.name.encode(), n_values))
    out = bytearray(struct.pack("<i", len(entries)))
    for name, n in entries:
        out += struct.pack("<i", len(name)) + name + struct.pack("<ii", 1, n)
        out += struct.pack(f"<{n}f", *([1.0] * n))
    Path(path).write_bytes(bytes(out))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    write_uniform_imatrix(sys.argv[1], sys.argv[2])
