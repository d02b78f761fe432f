"""Seeds for fuzz_npy: reads TensorProto file names from stdin and saves each
tensor NumPy can hold as CORPUS/<sha1>.npy (np.save; C order, version 1.0),
plus Fortran-order, big-endian and byte-string variants of a few, which Kiln
refuses or reads specially. Files onnx cannot read are skipped."""
import hashlib
import io
import os
import sys

import numpy as np
from onnx import TensorProto, numpy_helper


def save(corpus, array):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    data = buf.getvalue()
    with open(os.path.join(corpus, hashlib.sha1(data).hexdigest() + ".npy"), "wb") as f:
        f.write(data)


def main():
    corpus = sys.argv[1]
    n = 0
    for line in sys.stdin:
        t = TensorProto()
        try:
            with open(line.strip(), "rb") as f:
                t.ParseFromString(f.read())
            a = numpy_helper.to_array(t)
        except Exception:  # newer dtypes, sequences, optionals
            continue
        if a.dtype == object:  # ONNX strings: bytes; saved as '|S' and as '<U'
            if not a.size or not isinstance(a.flat[0], bytes):
                continue
            save(corpus, a.astype(np.bytes_))
            try:
                a = np.vectorize(lambda b: b.decode("utf-8"), otypes=[np.str_])(a)
            except UnicodeDecodeError:
                continue
        save(corpus, a)
        n += 1
        if n % 50 == 0 and a.ndim >= 2:
            save(corpus, np.asfortranarray(a))
            save(corpus, a.astype(a.dtype.newbyteorder(">")))
        if n % 50 == 0 and a.dtype.kind == "U":
            save(corpus, a.astype(np.bytes_))


if __name__ == "__main__":
    main()
