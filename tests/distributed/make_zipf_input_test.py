#!/usr/bin/python3
"""Checks make_zipf_input.py on a small file: /embeddings chunked one sequence per chunk with
no chunk allocated, /lengths int32 in 1..L, Zipf-shaped, the same for the same seed.

    make_zipf_input_test.py WORK_DIR
"""
import os
import subprocess
import sys

try:
    import h5py
    import numpy as np
except ImportError as error:  # ctest reads 77 as skipped
    print(f"skipped: {error}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "make_zipf_input.py")


def make(path, *args):
    subprocess.run([sys.executable, SCRIPT, path, *args], check=True, stdout=subprocess.DEVNULL)


def main(work):
    os.makedirs(work, exist_ok=True)
    n, seq_len, dim, exponent = 200_000, 128, 8, 1.2
    a, b, c = (os.path.join(work, name) for name in ("a.h5", "b.h5", "c.h5"))
    args = ["--num-seqs", str(n), "--seq-len", str(seq_len), "--dim", str(dim), "--exponent", str(exponent)]
    make(a, *args, "--seed", "5")
    make(b, *args, "--seed", "5")
    make(c, *args, "--seed", "6")
    with h5py.File(a, "r") as f, h5py.File(b, "r") as g, h5py.File(c, "r") as h:
        e = f["embeddings"]
        assert e.shape == (n, seq_len, dim) and e.dtype == np.float32, (e.shape, e.dtype)
        assert e.chunks == (1, seq_len, dim), e.chunks
        assert e.id.get_storage_size() == 0, "a chunk of /embeddings was allocated"
        assert e.id.get_create_plist().get_alloc_time() == h5py.h5d.ALLOC_TIME_LATE
        assert np.all(e[n - 1, :4, :] == 0)
        lengths = f["lengths"][:]
        assert lengths.dtype == np.int32 and lengths.shape == (n,)
        assert lengths.min() >= 1 and lengths.max() <= seq_len, (lengths.min(), lengths.max())
        assert np.array_equal(lengths, g["lengths"][:]), "same seed, different lengths"
        assert not np.array_equal(lengths, h["lengths"][:]), "different seeds, same lengths"
        # Zipf: P(1) = 1 / sum k^-s and P(k) / P(1) = k^-s.
        weights = np.arange(1, seq_len + 1, dtype=np.float64) ** -exponent
        p = weights / weights.sum()
        counts = np.bincount(lengths, minlength=seq_len + 1)[1:]
        for k in (1, 2, 4, 16):
            expected = n * p[k - 1]
            assert abs(counts[k - 1] - expected) < 5 * np.sqrt(expected), (k, counts[k - 1], expected)
    # The file is the lengths plus metadata: no embedding data.
    assert os.path.getsize(a) < 4 * n + (1 << 20), os.path.getsize(a)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
