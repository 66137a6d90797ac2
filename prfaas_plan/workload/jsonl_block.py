"""A vectorized reader for blocks of Mooncake JSONL written the way ``json.dumps`` writes it.

Nearly every Mooncake trace is one ``json.dumps`` object per line, keys in the order
``timestamp, input_length, output_length, hash_ids``, every value a non-negative integer::

    {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}

Such a block of lines is read here without building a Python object per value (a JSON parser makes ~25
Python ints per line and numpy copies them again). The block is proved to have exactly that shape, byte
for byte, before any number is trusted:

1. the digit runs are found with numpy; deleting every digit must leave exactly the template's text for a
   line with ``runs - 3`` block ids (`JsonlStyle.skeleton`), line by line;
2. each run must sit in one of the template's number slots (its neighbours are the slot's), the third run
   of a line in the ``output_length`` slot, no run with a leading zero (invalid JSON) or longer than 16
   digits (beyond the 8-digit word arithmetic twice over).

So every line is valid JSON with those four keys and whole-number values, and the numbers are the runs'
decimal values -- what a JSON parser returns. A block that is anything else (another key order or
spacing, blank lines, floats, negative numbers, unknown keys, damage) gives None, and the caller reads it
with the general parser, which also names any problem. Both ``json.dumps`` spacings are recognised: the
default (``", "`` and ``": "``) and the compact one (``","`` and ``":"``, as ``orjson.dumps`` writes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DIGITS = b"0123456789"
MAX_DIGITS = 16  # two 8-digit words; 2^53 ms (the timestamp cap) has 16 digits


@dataclass(frozen=True)
class JsonlStyle:
    """A line template: the text around the numbers, and the bytes that may border a number."""

    item: bytes  # between two list items (and after a key's value)
    colon: bytes  # between a key and its value
    left: bytes  # a number's left neighbour: last byte of a separator, or "["
    right: bytes = b",]"  # a number's right neighbour

    def skeleton(self, k: int) -> bytes:
        """A line holding ``k`` block ids with every digit deleted."""
        head = self.item.join(b'"%s"%s' % (key, self.colon)
                              for key in (b"timestamp", b"input_length", b"output_length", b"hash_ids"))
        return b"{" + head + b"[" + self.item * max(k - 1, 0) + b"]}\n"


STYLES = (JsonlStyle(b", ", b": ", b" ["), JsonlStyle(b",", b":", b":,["))

_SHIFTS = np.array([64] + [8 * (8 - n) for n in range(1, 9)], dtype=np.uint64)  # by run length; 0 unused
_STEPS = [(np.uint64(mask), np.uint64(10**n * 2**bits + 1), np.uint64(bits))  # digit pairs, quads, octets
          for mask, n, bits in ((0x0F0F0F0F0F0F0F0F, 1, 8), (0x00FF00FF00FF00FF, 2, 16), (0x0000FFFF0000FFFF, 4, 32))]


def _eight_digits(w: np.ndarray, lengths: np.ndarray, shift: np.ndarray) -> None:
    """In place: each little-endian word ``w`` -> the value of its last ``lengths`` (1..8) bytes read as
    decimal digits (first digit the most significant). The bytes before them become leading zeros, then
    pairs, quads and octets of digits are combined by multiply-and-shift in every word at once. ``shift``
    is scratch of ``w``'s size."""
    _take(_SHIFTS, lengths, shift)
    w >>= shift
    w <<= shift
    for mask, factor, bits in _STEPS:
        w &= mask
        w *= factor
        w >>= bits


def _take(values: np.ndarray, index: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``values[index]`` into ``out``; every index is in range (mode "clip" only spares numpy a buffer)."""
    return np.take(values, index, out=out, mode="clip")


def _among(values: np.ndarray, allowed: bytes) -> bool:
    """Whether every byte in ``values`` is one of ``allowed``."""
    ok = values == allowed[0]
    for byte in allowed[1:]:
        ok |= values == byte
    return bool(ok.all())


class BlockReader:
    """`read` for block after block, its working arrays kept from one block to the next: a block's dozen
    temporaries of its own size would otherwise be fresh memory every time (the allocator hands blocks of
    this size back to the system when freed), and their page faults cost as much as the parsing."""

    def __init__(self) -> None:
        self._bytes = 0

    def _reserve(self, size: int) -> None:
        if size <= self._bytes:
            return
        self._bytes = size
        self._positions = np.arange(1, size + 1, dtype=np.int64)
        self._u8, self._mask = np.empty(size, np.uint8), np.empty(size, bool)
        runs = size // 2 + 1  # a run and the byte after it take two bytes at least
        self._edges = np.empty(2 * runs, np.int64)
        self._index, self._lengths, self._ends = (np.empty(runs, np.int64) for _ in range(3))
        self._neighbours = np.empty(runs, np.uint8)
        self._values, self._shift = np.empty(runs, np.uint64), np.empty(runs, np.uint64)

    def read(self, block: bytes):
        """``(timestamp_ms, input_length, output_length, block_ids, block_counts)`` of a block of whole
        lines (uint64 timestamps and lengths, int64 counts, ids int32 when all fit else int64), or None when
        the block is not entirely in one of `STYLES` (see the module docstring). Values are not range-checked
        here."""
        style = next((s for s in STYLES if block.startswith(b'{"timestamp"' + s.colon)), None)
        if style is None:
            return None
        if not block.endswith(b"\n"):
            block += b"\n"
        n = len(block)
        self._reserve(n)
        data = np.frombuffer(block, dtype=np.uint8)
        digit, edge = self._mask[:n], self._u8[:n - 1].view(bool)  # edge overwrites the digit values
        np.less(np.subtract(data, 48, out=self._u8[:n]), 10, out=digit)
        np.not_equal(digit[1:], digit[:-1], out=edge)  # the block starts with "{" and ends with "\n"
        edges = np.compress(edge, self._positions[:n - 1], out=self._edges[:np.count_nonzero(edge)])
        runs = edges.size // 2
        starts, ends = edges[0::2], self._ends[:runs]
        np.copyto(ends, edges[1::2])  # contiguous: numpy would copy a strided index at every use
        per_line = np.diff(np.searchsorted(starts, np.flatnonzero(np.equal(data, 10, out=digit))), prepend=0)
        counts = per_line - 3
        if not runs or counts.min() < 0:
            return None
        per_count = counts.tolist()
        skeletons = {k: style.skeleton(k) for k in set(per_count)}
        if block.translate(None, DIGITS) != b"".join(map(skeletons.__getitem__, per_count)):
            return None
        first = np.cumsum(per_line) - per_line  # each line's first run: its timestamp
        lengths, index, near = self._lengths[:runs], self._index[:runs], self._neighbours[:runs]
        np.subtract(ends, starts, out=lengths)
        if not (_among(_take(data, np.subtract(starts, 1, out=index), near), style.left)
                and _among(_take(data, ends, near), style.right)
                and (data[ends[first + 2]] == ord(",")).all() and lengths.max() <= MAX_DIGITS
                and not ((lengths > 1) & (_take(data[1:], index, near) == ord("0"))).any()):  # data[starts]
            return None
        values, shift = self._values[:runs], self._shift[:runs]
        words = np.ndarray((n - 7,), dtype="<u8", buffer=block, strides=(1,))  # a word at every byte
        _take(words, np.subtract(ends, 8, out=index), values)  # the first run starts 13 bytes in
        _eight_digits(values, np.minimum(lengths, 8, out=index), shift)
        long = np.flatnonzero(lengths > 8)
        if long.size:
            high = words[ends[long] - 16]
            _eight_digits(high, lengths[long] - 8, np.empty_like(high))
            values[long] += high * np.uint64(10**8)
        is_id = np.ones(runs, dtype=bool)
        for j in range(3):
            is_id[first + j] = False
        ids = np.compress(is_id, values, out=shift[:runs - 3 * first.size])
        ids = ids.astype(np.int32 if not ids.size or ids.max() <= np.iinfo(np.int32).max else np.int64)
        return values[first], values[first + 1], values[first + 2], ids, counts
