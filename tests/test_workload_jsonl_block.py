"""The byte-level JSONL block reader: it returns exactly what a JSON parser reads, or None.

Its contract (`prfaas_plan.workload.jsonl_block`) is that a block it accepts is valid JSON whose values
it returns; anything else goes to the general reader. So the tests compare it with ``json.loads`` on
written, damaged and re-spaced blocks, and check that the whole-file reader gives the same arrays with the
byte-level reader switched off.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.workload import BUNDLED_TRACE, load_trace
from prfaas_plan.workload import traces as traces_module
from prfaas_plan.workload.jsonl_block import BlockReader

read_block = BlockReader().read
KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
COMPACT = {"separators": (",", ":")}


def _parsed(block: bytes):
    """What a JSON parser reads from a block: the four columns as the byte reader returns them."""
    rows = [json.loads(line) for line in block.splitlines()]
    return ([r["timestamp"] for r in rows], [r["input_length"] for r in rows], [r["output_length"] for r in rows],
            [h for r in rows for h in r["hash_ids"]], [len(r["hash_ids"]) for r in rows])


def _agrees(block: bytes) -> bool:
    """The byte reader's answer for ``block`` is None or exactly the JSON parser's (which must then accept
    the block as four-key objects)."""
    got = read_block(block)
    if got is None:
        return True
    rows = [json.loads(line) for line in block.splitlines()]
    assert all(list(r) == list(KEYS) for r in rows)
    return all(list(map(int, a)) == b for a, b in zip(got, _parsed(block)))


def _block(records, **dumps) -> bytes:
    return "".join(json.dumps(dict(zip(KEYS, r)), **dumps) + "\n" for r in records).encode()


def test_bundled_trace_reads_as_a_json_parser_reads_it():
    block = BUNDLED_TRACE.read_bytes()
    got = read_block(block)
    assert got is not None
    for a, b in zip(got, _parsed(block)):
        assert np.array_equal(a, b)


def test_load_trace_is_the_same_with_the_byte_reader_off(monkeypatch, tmp_path):
    """Every array of the bundled trace (and of a copy written compactly, and of one with a float
    timestamp every so often, which mixes readers block by block) equals the general reader's."""
    rows = [json.loads(line) for line in BUNDLED_TRACE.read_text().splitlines()]
    compact = tmp_path / "compact.jsonl"
    compact.write_text("".join(json.dumps(r, **COMPACT) + "\n" for r in rows))
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps({**r, "timestamp": r["timestamp"] + (0.0 if i % 5000 == 7 else 0)}) + "\n"
                             for i, r in enumerate(rows)))
    for path in (BUNDLED_TRACE, compact, mixed):
        fast = load_trace(path)
        with monkeypatch.context() as m:
            m.setattr(traces_module.BlockReader, "read", lambda self, block: None)
            slow = load_trace(path)
        for name in ("line", "input_length", "output_length", "arrival_s", "block_ids", "block_offsets"):
            a, b = getattr(fast, name), getattr(slow, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (path, name)


@pytest.mark.parametrize("style", [{}, COMPACT])
def test_written_blocks_are_read(style):
    records = [(0, 1, 0, []), (5, 512, 7, [0]), (2**53, 2**30, 10, [10**16 - 1, 12345678, 123456789])]
    block = _block(records, **style)
    got = read_block(block)
    assert got is not None and _agrees(block)
    assert read_block(block.rstrip(b"\n")) is not None  # a last line without its newline


@pytest.mark.parametrize("text", [
    '{"timestamp": 0, "input_length": 1, "output_length": 2, "hash_ids": [3], "extra": 1}',  # unknown key
    '{"input_length": 1, "timestamp": 0, "output_length": 2, "hash_ids": [3]}',  # another order
    '{"timestamp": 0,  "input_length": 1, "output_length": 2, "hash_ids": [3]}',  # other spacing
    '{"timestamp": 0.5, "input_length": 1, "output_length": 2, "hash_ids": [3]}',
    '{"timestamp": -1, "input_length": 1, "output_length": 2, "hash_ids": [3]}',
    '{"timestamp": 01, "input_length": 1, "output_length": 2, "hash_ids": [3]}',  # not JSON
    '{"timestamp": , "input_length": 1, "output_length": 2, "hash_ids": [3]}',  # not JSON
    '{"timestamp": 1, "input_length": 1, "output_length": 2, "hash_ids": [3 4]}',
    '{"timestamp": 1, "input_length": 1, "output_length": 2, "hash_ids": [12345678901234567]}',  # 17 digits
    '{"timestamp": 1, "input_length": 1, "output_length": 2, "hash_ids": [true]}',
    '{"timestamp": 1, "input_length": 1, "output_length": 2, "hash_ids": [3]}\r',
    '{"timestamp": 1, "input_length": 1, "output_length": 2, "hash_ids": [3]}\n',  # then a blank line
    '{"timestamp": 1, "input_length": 1, "output_length": 2, "hash_ids": [3]',
    '{"times1amp": 1, "input_length": 1, "output_length": 2, "hash_ids": [3]}',
])
def test_anything_else_is_left_to_the_general_reader(text):
    assert read_block(text.encode() + b"\n") is None


def test_a_missing_scalar_is_not_taken_for_an_id():
    """Deleting a scalar and adding an id keeps the digit-free text of a line with no ids: rejected."""
    line = b'{"timestamp": , "input_length": 1, "output_length": 2, "hash_ids": [3]}\n'
    assert read_block(line) is None


ids = st.integers(0, 10**16 - 1) | st.integers(0, 2**63 - 1)  # the second mostly beyond the byte reader
records = st.lists(st.tuples(st.integers(0, 2**53), st.integers(1, 2**30), st.integers(0, 2**30),
                             st.lists(ids, max_size=6)), min_size=1, max_size=12)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(records, st.booleans(), st.data())
def test_damaged_blocks_are_read_right_or_refused(rows, compact, data):
    """Any block -- as written, or with one byte replaced, inserted or deleted -- is either refused or
    read exactly as the JSON parser reads it."""
    block = _block(rows, **(COMPACT if compact else {}))
    assert _agrees(block)
    i = data.draw(st.integers(0, len(block) - 1))
    byte = bytes([data.draw(st.sampled_from(b'0123456789 ,:[]{}"\n-.e'))])
    for damaged in (block[:i] + byte + block[i + 1:], block[:i] + byte + block[i:], block[:i] + block[i + 1:]):
        try:
            _parsed(damaged)
        except (ValueError, KeyError, TypeError):
            assert read_block(damaged) is None
        else:
            assert _agrees(damaged)
