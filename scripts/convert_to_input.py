#!/usr/bin/python3
"""Converts the arrays users have into an attnbatch input file (the layout `attnbatch run`
reads: /embeddings float32 or float64 [N, L, d] padded, /lengths int32 [N]), in bounded memory.

Sources:
  X.npy [N, L, d]                 padded sequences; --lengths LEN.npy (integer [N]) gives the
                                  valid tokens of each (without it every row counts)
  X.npy [T, d] --offsets OFF.npy  a token matrix: sequence n is rows OFF[n]:OFF[n+1] (int [N+1],
                                  rising from 0 to T); padded to L = the longest (or --seq-len)
  X.npz                           the same, naming the members: --array (default: the only 3-D
                                  or 2-D array, or "embeddings"), --lengths and --offsets
                                  (default: members "lengths", "offsets" when present)
  W.vec                           word2vec / fastText text vectors ("count dim" on the first
                                  line, then "word v_1 ... v_d"): with --sentences TEXT each
                                  line of TEXT is a sequence of whitespace-separated words looked
                                  up in W (unknown words are skipped and counted, or --unknown
                                  error); without it the vectors themselves, --seq-len at a time
                                  (the words are written to /words [N, L])
Output options: --layout padded (default) or packed (/tokens [T, d] + /offsets int64 [N+1], the
packed input layout of docs/formats.md), --dtype float32|float64 [float32], --seq-len L (longer
sequences are cut, and said so), --max-memory BYTES [256M] bounds the rows held at once.

Memory: .npy files are memory-mapped and .npz members streamed, --max-memory at a time; .vec
vectors are streamed, and with --sentences copied to a temporary memory-mapped file first (the
word index, one entry per word, is the only part in memory).

  /usr/bin/python3 scripts/convert_to_input.py emb.npy in.h5 --lengths len.npy
  /usr/bin/python3 scripts/convert_to_input.py corpus.npz in.h5 --array tokens --offsets offsets
  /usr/bin/python3 scripts/convert_to_input.py cc.en.300.vec in.h5 --sentences corpus.txt --seq-len 128
  build/attnbatch inspect in.h5 && build/attnbatch run --input in.h5 --output out.h5
"""
import argparse
import io
import os
import sys
import tempfile
import zipfile

import h5py
import numpy as np


class ConvertError(Exception):
    """One line: what is wrong and what was expected."""


def parse_bytes(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    suffix = text[-1] if text and text[-1] in units else ""
    try:
        return int(float(text[: len(text) - len(suffix)]) * units[suffix])
    except ValueError:
        raise ConvertError("--max-memory %r is not a size such as 256M" % text)


class NpySource:
    """An array of a .npy file (memory-mapped) or of an .npz member (streamed in row order)."""

    def __init__(self, path, member=None):
        self.label = path if member is None else "%s:%s" % (path, member)
        if member is None:
            self._array = np.load(path, mmap_mode="r", allow_pickle=False)
            self.shape, self.dtype = self._array.shape, self._array.dtype
            self._stream = None
            return
        archive = zipfile.ZipFile(path)
        name = member if member.endswith(".npy") else member + ".npy"
        if name not in archive.namelist():
            raise ConvertError("%s has no member %s; members: %s" % (path, member, ", ".join(
                n[:-4] for n in archive.namelist())))
        self._stream = archive.open(name)
        version = np.lib.format.read_magic(self._stream)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        self.shape, fortran, self.dtype = reader(self._stream)
        if fortran and len(self.shape) > 1:
            raise ConvertError("%s is stored in Fortran order; save it C-ordered (np.ascontiguousarray)" % self.label)
        self._array, self._next = None, 0

    def rows(self, first, count):
        """Rows [first, first + count) of the leading axis; a streamed member only in order."""
        if self._array is not None:
            return np.asarray(self._array[first:first + count])
        if first != self._next:
            raise ConvertError("internal: %s read out of order" % self.label)
        per_row = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        data = self._stream.read(per_row * count)
        if len(data) != per_row * count:
            raise ConvertError("%s is truncated: rows %d:%d are missing" % (self.label, first, first + count))
        self._next = first + count
        return np.frombuffer(data, dtype=self.dtype).reshape((count,) + tuple(self.shape[1:]))

    def whole(self):
        return self.rows(0, self.shape[0]) if self.shape else np.asarray(self._array)


def npz_members(path):
    with zipfile.ZipFile(path) as archive:
        return [n[:-4] for n in archive.namelist() if n.endswith(".npy")]


def check_float(source):
    if source.dtype.kind != "f":
        raise ConvertError("%s has dtype %s, expected float32 or float64 vectors" % (source.label, source.dtype))


class Writer:
    """The output file, written as OUTPUT.partial and renamed once whole."""

    def __init__(self, path, layout, n, length, d, dtype, total_tokens, source, force):
        if os.path.exists(path) and not force:
            raise ConvertError("%s exists; hint: --force replaces it" % path)
        self.path, self.partial, self.layout, self.dtype = path, path + ".partial", layout, np.dtype(dtype)
        self.f = h5py.File(self.partial, "w")
        rows = max(1, min(n, (1 << 20) // max(1, length * d * self.dtype.itemsize)))
        if layout == "padded":
            self.data = self.f.create_dataset("embeddings", (n, length, d), dtype=self.dtype, chunks=(rows, length, d))
            for axis, label in enumerate(("N", "L", "d")):
                self.data.dims[axis].label = label
            self.lengths = self.f.create_dataset("lengths", (n,), dtype=np.int32)
            self.lengths.dims[0].label = "N"
        else:
            token_rows = max(1, min(total_tokens, (1 << 20) // max(1, d * self.dtype.itemsize)))
            self.data = self.f.create_dataset("tokens", (total_tokens, d), dtype=self.dtype, chunks=(token_rows, d))
            self.offsets = self.f.create_dataset("offsets", (n + 1,), dtype=np.int64)
            self.next_token = 0
            self.offsets[0] = 0
        self.f.attrs.update({"format": "attnbatch-input", "layout": "embeddings" if layout == "padded" else "packed",
                             "dtype": str(self.dtype), "heads": np.int64(1),
                             "generator": "scripts/convert_to_input.py", "source": os.path.abspath(source)})
        self.length = length

    def sequences(self, first, block, lengths):
        """Sequences [first, first + len(lengths)): `block` [count, L, d] padded (rows past each
        length are zeros)."""
        count = len(lengths)
        if self.layout == "padded":
            self.data[first:first + count] = block.astype(self.dtype, copy=False)
            self.lengths[first:first + count] = lengths
            return
        for i, m in enumerate(lengths):
            self.data[self.next_token:self.next_token + m] = block[i, :m].astype(self.dtype, copy=False)
            self.next_token += int(m)
            self.offsets[first + i + 1] = self.next_token

    def finish(self, extra=None):
        for name, value in (extra or {}).items():
            self.f.attrs[name] = value
        self.f.close()
        os.replace(self.partial, self.path)

    def abandon(self):
        self.f.close()
        os.remove(self.partial)


def convert_padded(data, lengths, args):
    check_float(data)
    if len(data.shape) != 3:
        raise ConvertError("%s has shape %s, expected padded sequences [N, L, d] (or give --offsets for a token "
                           "matrix [T, d])" % (data.label, data.shape))
    n, length, d = data.shape
    if lengths is None:
        lengths = np.full(n, length, dtype=np.int64)
    lengths = np.asarray(lengths).astype(np.int64).reshape(-1)
    if lengths.shape[0] != n or lengths.min(initial=0) < 0 or lengths.max(initial=0) > length:
        raise ConvertError("lengths have shape %s and range [%s, %s], expected %d values within [0, L = %d]"
                           % (lengths.shape, lengths.min(initial=0), lengths.max(initial=0), n, length))
    out_len = min(length, args.seq_len) if args.seq_len else length
    cut = int(np.count_nonzero(lengths > out_len))
    lengths = np.minimum(lengths, out_len)
    writer = Writer(args.output, args.layout, n, out_len, d, args.dtype, int(lengths.sum()), args.source, args.force)
    per_sequence = length * d * data.dtype.itemsize
    step = max(1, args.max_memory // max(1, 2 * per_sequence))
    try:
        for first in range(0, n, step):
            count = min(step, n - first)
            block = np.array(data.rows(first, count)[:, :out_len], dtype=np.float64 if args.dtype == "float64" else np.float32)
            block[np.arange(out_len)[None, :] >= lengths[first:first + count, None]] = 0  # padding is zeros
            if not np.isfinite(block).all():
                bad = np.argwhere(~np.isfinite(block))[0]
                raise ConvertError("%s has a non-finite value at %s" % (data.label, [first + int(bad[0])] + bad[1:].tolist()))
            writer.sequences(first, block, lengths[first:first + count])
    except BaseException:
        writer.abandon()
        raise
    writer.finish()
    return n, out_len, d, cut


def convert_tokens(tokens, offsets, args):
    check_float(tokens)
    if len(tokens.shape) != 2:
        raise ConvertError("%s has shape %s, expected a token matrix [T, d] with --offsets" % (tokens.label, tokens.shape))
    offsets = np.asarray(offsets).astype(np.int64).reshape(-1)
    t, d = tokens.shape
    if offsets.size < 2 or offsets[0] != 0 or offsets[-1] != t or np.any(np.diff(offsets) < 0):
        raise ConvertError("offsets must rise from 0 to T = %d (one more than the sequences), found %d values from %s to %s"
                           % (t, offsets.size, offsets[0] if offsets.size else "-", offsets[-1] if offsets.size else "-"))
    n = offsets.size - 1
    sizes = np.diff(offsets)
    length = int(min(sizes.max(), args.seq_len) if args.seq_len else sizes.max())
    length = max(length, 1)
    lengths = np.minimum(sizes, length)
    cut = int(np.count_nonzero(sizes > length))
    writer = Writer(args.output, args.layout, n, length, d, args.dtype, int(lengths.sum()), args.source, args.force)
    dtype = np.float64 if args.dtype == "float64" else np.float32
    per_sequence = length * d * np.dtype(dtype).itemsize
    step = max(1, args.max_memory // max(1, 2 * per_sequence))
    try:
        for first in range(0, n, step):
            count = min(step, n - first)
            rows = tokens.rows(int(offsets[first]), int(offsets[first + count] - offsets[first]))
            block = np.zeros((count, length, d), dtype=dtype)
            for i in range(count):
                start = int(offsets[first + i] - offsets[first])
                block[i, :lengths[first + i]] = rows[start:start + lengths[first + i]]
            if not np.isfinite(block).all():
                raise ConvertError("%s has a non-finite value in sequences %d:%d" % (tokens.label, first, first + count))
            writer.sequences(first, block, lengths[first:first + count])
    except BaseException:
        writer.abandon()
        raise
    writer.finish()
    return n, length, d, cut


def vec_header(stream, path):
    first = stream.readline().split()
    if len(first) != 2 or not all(x.isdigit() for x in first):
        raise ConvertError("%s: the first line is %r, expected 'count dim' (word2vec / fastText text format)"
                           % (path, " ".join(first)[:60]))
    return int(first[0]), int(first[1])


def vec_rows(stream, path, count, dim):
    """(word, vector) of each line after the header."""
    for number, line in enumerate(stream, start=2):
        parts = line.rstrip("\n").rstrip(" ").split(" ")
        if len(parts) != dim + 1:
            raise ConvertError("%s:%d has %d values, expected %d" % (path, number, len(parts) - 1, dim))
        try:
            yield parts[0], np.asarray(parts[1:], dtype=np.float64)
        except ValueError:
            raise ConvertError("%s:%d: a value is not a number" % (path, number))


def convert_vec(args):
    with io.open(args.source, encoding="utf-8", errors="replace") as stream:
        count, dim = vec_header(stream, args.source)
        if not args.sentences:
            length = args.seq_len or 128
            n = (count + length - 1) // length
            lengths = np.array([min(length, count - s * length) for s in range(n)], dtype=np.int64)
            writer = Writer(args.output, args.layout, n, length, dim, args.dtype, count, args.source, args.force)
            words = writer.f.create_dataset("words", (n, length), dtype=h5py.string_dtype())
            try:
                rows = vec_rows(stream, args.source, count, dim)
                for s in range(n):
                    block = np.zeros((1, length, dim))
                    names = [""] * length
                    for i in range(lengths[s]):
                        names[i], block[0, i] = next(rows)
                    writer.sequences(s, block, lengths[s:s + 1])
                    words[s] = names
            except StopIteration:
                writer.abandon()
                raise ConvertError("%s: the header says %d vectors but the file ends earlier" % (args.source, count))
            except BaseException:
                writer.abandon()
                raise
            writer.finish()
            return n, length, dim, 0
        # The vectors on disk, the index of words in memory.
        index = {}
        with tempfile.TemporaryDirectory() as scratch:
            table = np.lib.format.open_memmap(os.path.join(scratch, "vectors.npy"), mode="w+", dtype=np.float32,
                                              shape=(max(count, 1), dim))
            for row, (word, vector) in enumerate(vec_rows(stream, args.source, count, dim)):
                if row >= count:
                    raise ConvertError("%s has more vectors than its header's %d" % (args.source, count))
                index.setdefault(word, row)
                table[row] = vector
            return convert_sentences(args, index, table, dim)


def convert_sentences(args, index, table, dim):
    unknown, sizes = set(), []
    with io.open(args.sentences, encoding="utf-8") as text:
        for line in text:
            words = line.split()
            known = [w for w in words if w in index]
            unknown.update(w for w in words if w not in index)
            sizes.append(len(known))
    if unknown and args.unknown == "error":
        raise ConvertError("%s: %d words have no vector, e.g. %s; hint: --unknown skip drops them"
                           % (args.sentences, len(unknown), ", ".join(sorted(unknown)[:5])))
    if not sizes:
        raise ConvertError("%s has no lines: expected one sequence per line" % args.sentences)
    n = len(sizes)
    length = max(1, min(max(sizes), args.seq_len) if args.seq_len else max(sizes))
    lengths = np.minimum(np.asarray(sizes, dtype=np.int64), length)
    writer = Writer(args.output, args.layout, n, length, dim, args.dtype, int(lengths.sum()), args.source, args.force)
    step = max(1, args.max_memory // max(1, 2 * length * dim * 8))
    try:
        with io.open(args.sentences, encoding="utf-8") as text:
            block, first = [], 0
            for s, line in enumerate(text):
                rows = [index[w] for w in line.split() if w in index][:length]
                sequence = np.zeros((length, dim))
                if rows:
                    sequence[:len(rows)] = table[np.asarray(rows)]
                block.append(sequence)
                if len(block) == step or s == n - 1:
                    writer.sequences(first, np.stack(block), lengths[first:first + len(block)])
                    first += len(block)
                    block = []
    except BaseException:
        writer.abandon()
        raise
    writer.finish({"sentences": os.path.abspath(args.sentences), "unknown_words": np.int64(len(unknown))})
    return n, length, dim, int(np.count_nonzero(np.asarray(sizes) > length)), len(unknown)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help=".npy, .npz or .vec")
    parser.add_argument("output", help="the attnbatch input file to write (HDF5)")
    parser.add_argument("--array", help=".npz: the member holding the vectors")
    parser.add_argument("--lengths", help="padded input: valid tokens per sequence (.npy path, or .npz member)")
    parser.add_argument("--offsets", help="token matrix: sequence starts, int [N+1] (.npy path, or .npz member)")
    parser.add_argument("--sentences", help=".vec: a text file, one sequence of words per line")
    parser.add_argument("--unknown", choices=("skip", "error"), default="skip", help=".vec: words without a vector")
    parser.add_argument("--seq-len", type=int, help="L: cut longer sequences (and, for .vec without --sentences, group by it) [longest; 128]")
    parser.add_argument("--layout", choices=("padded", "packed"), default="padded")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--max-memory", default="256M", help="bound on the rows held at once [256M]")
    parser.add_argument("--force", action="store_true", help="replace an existing output")
    args = parser.parse_args(argv)
    try:
        args.max_memory = parse_bytes(args.max_memory)
        if args.seq_len is not None and args.seq_len < 1:
            raise ConvertError("--seq-len %d: expected at least 1" % args.seq_len)
        if not os.path.isfile(args.source):
            raise ConvertError("%s: no such file" % args.source)
        ext = os.path.splitext(args.source)[1].lower()
        unknown_words = None
        if ext == ".vec" or ext == ".txt":
            result = convert_vec(args)
            if len(result) == 5:
                unknown_words = result[4]
            n, length, d, cut = result[:4]
        elif ext == ".npz":
            members = npz_members(args.source)
            name = args.array or ("embeddings" if "embeddings" in members else None)
            if name is None:
                candidates = [m for m in members if m not in ("lengths", "offsets")]
                if len(candidates) != 1:
                    raise ConvertError("%s holds %s; hint: --array names the vectors" % (args.source, ", ".join(members)))
                name = candidates[0]
            data = NpySource(args.source, name)
            offsets_name = args.offsets or ("offsets" if "offsets" in members and len(data.shape) == 2 else None)
            if offsets_name:
                n, length, d, cut = convert_tokens(data, NpySource(args.source, offsets_name).whole(), args)
            else:
                lengths_name = args.lengths or ("lengths" if "lengths" in members else None)
                lengths = NpySource(args.source, lengths_name).whole() if lengths_name else None
                n, length, d, cut = convert_padded(data, lengths, args)
        elif ext == ".npy":
            data = NpySource(args.source)
            if args.offsets:
                n, length, d, cut = convert_tokens(data, np.load(args.offsets), args)
            else:
                n, length, d, cut = convert_padded(data, np.load(args.lengths) if args.lengths else None, args)
        else:
            raise ConvertError("%s: unknown kind %r, expected .npy, .npz or .vec" % (args.source, ext))
    except (ConvertError, OSError, ValueError, zipfile.BadZipFile) as error:
        print("convert_to_input: error: %s" % error, file=sys.stderr)
        return 2 if isinstance(error, ConvertError) else 3
    print("convert_to_input: %s -> %s: N=%d L=%d d=%d (%s)%s%s" % (
        args.source, args.output, n, length, d, args.layout,
        "; %d sequences cut to L" % cut if cut else "",
        "; %d distinct words without a vector skipped" % unknown_words if unknown_words else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
