"""A vectorized reader for blocks of Mooncake JSONL written the way ``json.dumps`` writes it.

Nearly every Mooncake trace is one ``json.dumps`` object per line, keys in the order
``timestamp, input_length, output_length, hash_ids``, every value a non-negative integer::

    {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}

Such a block of lines is read here without building a Python object per value (a JSON parser makes ~25
Python ints per line and numpy copies them again). The block is proved to have exactly that shape, byte
for byte, before any number is trusted:

1. the digit runs are found with numpy; deleting every digit must leave exactly the template's text for a
   line with ``runs - 3`` block ids (`JsonlStyle.skeleton`);
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

from dataclasses import dataclass, field

import numpy as np

DIGITS = b"0123456789"
MAX_DIGITS = 16  # two 8-digit words; 2^53 ms (the timestamp cap) has 16 digits


@dataclass
class JsonlStyle:
    """A line template: the text around the numbers, and the bytes that may border a number."""

    item: bytes  # between two list items (and after a key's value)
    colon: bytes  # between a key and its value
    left: bytes  # a number's left neighbour: last byte of a separator, or "["
    right: bytes = b",]"  # a number's right neighbour
    _skeletons: list[bytes] = field(default_factory=list, repr=False)

    def skeletons(self, most: int) -> list[bytes]:
        """Lines holding 0, 1, ..., ``most`` block ids with every digit deleted (item ``k``: ``k`` ids)."""
        while len(self._skeletons) <= most:
            k = len(self._skeletons)
            head = self.item.join(b'"%s"%s' % (key, self.colon)
                                  for key in (b"timestamp", b"input_length", b"output_length", b"hash_ids"))
            self._skeletons.append(b"{" + head + b"[" + self.item * max(k - 1, 0) + b"]}\n")
        return self._skeletons


STYLES = (JsonlStyle(b", ", b": ", b" ["), JsonlStyle(b",", b":", b":,["))

_SHIFTS = np.array([64] + [8 * (8 - n) for n in range(1, 9)], dtype=np.uint64)  # by run length; 0 unused
_STEPS = [(np.uint64(mask), np.uint64(10**n * 2**bits + 1), np.uint64(bits))  # digit pairs, quads, octets
          for mask, n, bits in ((0x0F0F0F0F0F0F0F0F, 1, 8), (0x00FF00FF00FF00FF, 2, 16), (0x0000FFFF0000FFFF, 4, 32))]


def _eight_digits(words: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Values of the last ``lengths`` (1..8) bytes of each little-endian word, read as decimal digits
    (first digit the most significant): the bytes before them become leading zeros, then pairs, quads and
    octets of digits are combined by multiply-and-shift in every word at once."""
    shift = _SHIFTS[lengths]
    w = words >> shift
    w <<= shift  # the bytes before the run are now 0, read as leading zeros below
    for mask, factor, bits in _STEPS:
        w &= mask
        w *= factor
        w >>= bits
    return w


def _run_values(data: np.ndarray, buffer: bytes, ends: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Decimal values (uint64) of the digit runs ending (exclusive) at ``ends``, each 1..16 digits long and
    starting at least 8 bytes into ``buffer``."""
    words = np.ndarray((data.size - 7,), dtype="<u8", buffer=buffer, strides=(1,))  # a word at every byte
    values = _eight_digits(words[ends - 8], np.minimum(lengths, 8))
    long = np.flatnonzero(lengths > 8)
    if long.size:
        values[long] += _eight_digits(words[ends[long] - 16], lengths[long] - 8) * np.uint64(10**8)
    return values


def _among(values: np.ndarray, allowed: bytes) -> bool:
    """Whether every byte in ``values`` is one of ``allowed``."""
    ok = values == allowed[0]
    for byte in allowed[1:]:
        ok |= values == byte
    return bool(ok.all())


def read_block(block: bytes):
    """``(timestamp_ms, input_length, output_length, block_ids, block_counts)`` of a block of whole lines
    (uint64 timestamps and lengths, int64 ids and counts), or None when the block is not entirely in one
    of `STYLES` (see the module docstring). Values are not range-checked here."""
    style = next((s for s in STYLES if block.startswith(b'{"timestamp"' + s.colon)), None)
    if style is None:
        return None
    if not block.endswith(b"\n"):
        block += b"\n"
    data = np.frombuffer(block, dtype=np.uint8)
    digit = (data - np.uint8(48)) < np.uint8(10)
    edges = np.flatnonzero(digit[1:] != digit[:-1]) + 1  # the block starts with "{" and ends with "\n"
    starts, ends = edges[0::2], edges[1::2]
    per_line = np.diff(np.searchsorted(starts, np.flatnonzero(data == 10)), prepend=0)
    counts = per_line - 3
    if not starts.size or counts.min() < 0:
        return None
    if block.translate(None, DIGITS) != b"".join(map(style.skeletons(counts.max()).__getitem__, counts.tolist())):
        return None
    first = np.cumsum(per_line) - per_line  # each line's first run: its timestamp
    lengths = ends - starts
    if not (_among(data[starts - 1], style.left) and _among(data[ends], style.right)
            and (data[ends[first + 2]] == ord(",")).all()
            and lengths.max() <= MAX_DIGITS and not ((lengths > 1) & (data[starts] == ord("0"))).any()):
        return None
    values = _run_values(data, block, ends, lengths)
    ids = np.ones(values.size, dtype=bool)
    for j in range(3):
        ids[first + j] = False
    return values[first], values[first + 1], values[first + 2], values[ids].astype(np.int64), counts
