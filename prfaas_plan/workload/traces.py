"""Request traces: Mooncake JSONL (with prefix-block hashes) and CSV, streamed or loaded into arrays.

Formats
-------
- **Mooncake JSONL** (``.jsonl``): one JSON object per line with ``timestamp`` (arrival, milliseconds),
  ``input_length`` and ``output_length`` (tokens) and ``hash_ids`` (one integer per prompt block of the
  trace's block size -- 512 tokens in the Mooncake traces; equal ids mean equal prefix blocks). Any
  other key is an error. Blank lines are skipped.
- **CSV** (``.csv``): a header naming ``input_length`` and ``output_length`` (tokens) and optionally
  ``timestamp`` (milliseconds, as in the JSONL); any other column is an error.

Lengths are whole tokens, ``input_length >= 1`` and ``output_length >= 0``; timestamps are >= 0 and
non-decreasing (a trace is in arrival order, which prefix-cache replay relies on). Anything else raises
`PlanError` with one line ``FILE:LINE: what is wrong: what was expected``.

`iter_trace` streams `TraceRecord` objects one line at a time; `load_trace` returns a `Trace` of numpy
arrays (block ids flattened with per-request offsets) for the planner and the simulator.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from pathlib import Path

import numpy as np

from .._data import TRACES_DIR
from ..errors import PlanError, closest_names
from ..textfile import cannot_read, is_directory, not_utf8
from ..units import MAX_TOKENS
from .jsonl_block import BlockReader

BUNDLED_TRACE = TRACES_DIR / "mooncake_conversation_trace.jsonl"
"""The Mooncake conversation trace shipped with the package (12,031 Kimi requests, Apache-2.0)."""

JSONL_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
CSV_REQUIRED = ("input_length", "output_length")
CSV_OPTIONAL = ("timestamp",)
SUFFIXES = (".jsonl", ".csv")
TRACE_KIND = "a .jsonl or .csv trace"   # what a failed read says the file should have been
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class TraceRecord:
    """One request of a trace. ``line`` is its 1-based line in the file; ``timestamp_s`` is the arrival
    in seconds (None when the file has no timestamps); ``hash_ids`` is empty when the file has none."""

    line: int
    timestamp_s: float | None
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True, eq=False)
class Trace:
    """A whole trace as arrays (one entry per request, in arrival order).

    ``arrival_s`` are the recorded arrival times in seconds (None without timestamps); ``block_ids``
    holds every request's prefix-block ids back to back, request ``i`` owning
    ``block_ids[block_offsets[i]:block_offsets[i + 1]]`` (both None when the file has no hash ids).
    """

    path: str
    line: np.ndarray = field(repr=False)
    input_length: np.ndarray = field(repr=False)
    output_length: np.ndarray = field(repr=False)
    arrival_s: np.ndarray | None = field(default=None, repr=False)
    block_ids: np.ndarray | None = field(default=None, repr=False)
    block_offsets: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.input_length.size)

    def blocks(self, i: int) -> np.ndarray:
        """Prefix-block ids of request ``i``."""
        if self.block_ids is None:
            raise PlanError(f"{self.path}: the trace has no hash_ids")
        return self.block_ids[self.block_offsets[i]:self.block_offsets[i + 1]]

    @property
    def duration_s(self) -> float | None:
        """Seconds from the first to the last arrival (None without timestamps)."""
        if self.arrival_s is None:
            return None
        return float(self.arrival_s[-1] - self.arrival_s[0])

    @property
    def arrival_rate(self) -> float | None:
        """Mean arrival rate, requests/s: (n - 1) arrivals over the span between first and last
        (None without timestamps, or when every request arrives at the same instant)."""
        span = self.duration_s
        if span is None or span <= 0:
            return None
        return (len(self) - 1) / span


def _where(path: Path, line: int) -> str:
    return f"{path}:{line}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# A token count beyond the planner's length cap or a timestamp beyond 2^53 ms (exact in float64; 285,000
# years) is a corrupt line, not a request.
MAX_TIMESTAMP_MS = 2**53


def _whole(value, path: Path, line: int, key: str, minimum: int) -> int:
    """A JSON number that must be a whole number of tokens in [minimum, MAX_TOKENS]."""
    ok = (isinstance(value, int) and not isinstance(value, bool)) or \
        (isinstance(value, float) and value.is_integer())
    if not ok or not minimum <= value <= MAX_TOKENS:
        raise PlanError(f"{_where(path, line)}: {key} = {_short(value)}: expected a whole number of tokens "
                        f"from {minimum} to {MAX_TOKENS:,}")
    return int(value)


def _timestamp(value, path: Path, line: int, previous: float | None) -> float:
    """A timestamp in ms (int or float >= 0, not earlier than the previous one) -> seconds."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_TIMESTAMP_MS
    if not ok:
        raise PlanError(f"{_where(path, line)}: timestamp = {_short(value)}: expected a time in "
                        f"milliseconds from 0 to 2^53")
    seconds = value / 1000.0
    if previous is not None and seconds < previous:
        raise PlanError(f"{_where(path, line)}: timestamp {value} is earlier than the line before: expected "
                        f"requests in arrival order")
    return seconds


def _check_file(path: Path) -> None:
    if not path.exists():
        raise PlanError(f"{path}: no such trace file")
    if path.is_dir():
        raise is_directory(path, TRACE_KIND)
    if not path.is_file():
        raise PlanError(f"{path}: not a file: expected {TRACE_KIND}")


def _open_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 text file, with one-line errors for missing or binary files."""
    _check_file(path)
    try:
        with path.open("rb") as fh:  # decoded line by line, so a decoding error knows its line
            for number, raw in enumerate(fh, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise not_utf8(_where(path, number), TRACE_KIND) from None
                yield number, text
    except OSError as exc:
        raise cannot_read(path, exc, TRACE_KIND) from None


def _mooncake_record(text: str, path: Path, number: int, previous: float | None) -> TraceRecord | None:
    """Parse and check one JSONL line (None for a blank line); ``previous`` is the last arrival, s."""
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{_where(path, number)}: not valid JSON ({exc.msg} at column {exc.colno}): "
                        f"expected one JSON object per line") from None
    if not isinstance(obj, dict):
        raise PlanError(f"{_where(path, number)}: a JSON {type(obj).__name__}: expected one object per line "
                        f"with {', '.join(JSONL_FIELDS)}")
    missing = [k for k in JSONL_FIELDS if k not in obj]
    if missing:
        raise PlanError(f"{_where(path, number)}: missing {', '.join(missing)}: expected an object with "
                        f"{', '.join(JSONL_FIELDS)}")
    unknown = [k for k in obj if k not in JSONL_FIELDS]
    if unknown:
        raise PlanError(f"{_where(path, number)}: unknown key {unknown[0]!r}; "
                        f"{closest_names(unknown[0], JSONL_FIELDS)}")
    stamp = _timestamp(obj["timestamp"], path, number, previous)
    hash_ids = obj["hash_ids"]
    if not isinstance(hash_ids, list) or (hash_ids and (set(map(type, hash_ids)) != {int}
                                                        or min(hash_ids) < 0 or max(hash_ids) > INT64_MAX)):
        raise PlanError(f"{_where(path, number)}: hash_ids = {_short(hash_ids)}: expected a list of "
                        f"integer block ids in [0, 2^63)")
    return TraceRecord(number, stamp, _whole(obj["input_length"], path, number, "input_length", 1),
                       _whole(obj["output_length"], path, number, "output_length", 0), tuple(hash_ids))


def iter_mooncake(path: str | Path) -> Iterator[TraceRecord]:
    """Stream the requests of a Mooncake JSONL trace, one line at a time (see the module docstring)."""
    path = Path(path)
    previous = None
    seen = False
    for number, text in _open_lines(path):
        rec = _mooncake_record(text, path, number, previous)
        if rec is not None:
            previous = rec.timestamp_s
            seen = True
            yield rec
    if not seen:
        raise PlanError(f"{path}: no requests: expected one JSON object per line")


def _json_loads():
    """orjson's parser when installed (4-5x faster than the standard library's on trace lines), else json's."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a declared dependency
        return json.loads
    return orjson.loads


_FIELDS = itemgetter(*JSONL_FIELDS)


def _fast_chunk(lines: list[bytes], loads, previous: float | None):
    """Arrays of a chunk of JSONL lines ``(arrival_s, input, output, block_ids, block_counts)`` when every
    line is a valid, non-blank request; None when anything is unusual (the line-by-line reader then finds
    and names the problem). Checks are vectorized over the chunk."""
    try:
        objs = list(map(loads, lines))
        stamps, inputs, outputs, ids = zip(*map(_FIELDS, objs))
    except (ValueError, KeyError, TypeError):
        return None
    if set(map(len, objs)) != {len(JSONL_FIELDS)}:  # every object has the four keys: no other key
        return None
    if not (set(map(type, stamps)) <= {int, float} and set(map(type, inputs)) == set(map(type, outputs)) == {int}
            and set(map(type, ids)) == {list}):
        return None
    flat = list(chain.from_iterable(ids))
    if flat and set(map(type, flat)) != {int}:
        return None
    try:
        t = np.array(stamps, dtype=float) / 1000.0
        li = np.array(inputs, dtype=np.int64)
        lo = np.array(outputs, dtype=np.int64)
        block_ids = np.fromiter(flat, dtype=np.int64, count=len(flat))
    except OverflowError:
        return None
    if not (np.all(np.isfinite(t)) and t[-1] <= MAX_TIMESTAMP_MS / 1000.0
            and _in_range(t, li, lo, block_ids, previous)):
        return None
    return t, li, lo, block_ids, np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))


def _in_range(t: np.ndarray, li: np.ndarray, lo: np.ndarray, block_ids: np.ndarray,
              previous: float | None) -> bool:
    """The line reader's checks on a chunk's arrays, but for the timestamp cap: arrivals (s) non-negative and
    in order after ``previous``, token counts in range, block ids non-negative."""
    return bool(t[0] >= (0.0 if previous is None else previous) and np.all(t[1:] >= t[:-1])
                and li.min() >= 1 and lo.min() >= 0 and max(li.max(), lo.max()) <= MAX_TOKENS
                and (not block_ids.size or block_ids.min() >= 0))


def _canonical_chunk(block: bytes, reader: BlockReader, previous: float | None):
    """`_fast_chunk`'s result for a block in ``json.dumps``'s own layout (`jsonl_block.BlockReader`), read
    without a Python object per value; None for any other block."""
    part = reader.read(block)
    if part is None:
        return None
    stamps, inputs, outputs, block_ids, counts = part
    if stamps.max() > MAX_TIMESTAMP_MS:
        return None
    t, li, lo = stamps / 1000.0, inputs.astype(np.int64), outputs.astype(np.int64)
    return (t, li, lo, block_ids, counts) if _in_range(t, li, lo, block_ids, previous) else None


def compact_ids(ids: np.ndarray) -> np.ndarray:
    """Hash ids as int32 when every one fits (half the memory of int64; a million-request trace holds tens of
    millions of ids), else unchanged. Narrowed chunk by chunk, so the whole trace never exists in both widths;
    consumers read ids as Python ints (`prefix_cache.iter_blocks`), so the width changes no result."""
    fits = ids.size and np.iinfo(np.int32).min <= ids.min() and ids.max() <= np.iinfo(np.int32).max
    if ids.dtype != np.int32 and fits:
        return ids.astype(np.int32)
    return ids


def _slow_chunk(lines: list[bytes], first: int, path: Path, previous: float | None):
    """`_fast_chunk`'s result by the line-by-line reader (raises its one-line `PlanError`), with the line
    numbers of the non-blank lines."""
    recs = []
    for number, raw in enumerate(lines, start=first):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise not_utf8(_where(path, number), TRACE_KIND) from None
        rec = _mooncake_record(text, path, number, previous)
        if rec is not None:
            previous = rec.timestamp_s
            recs.append(rec)
    return (np.array([r.timestamp_s for r in recs], dtype=float),
            np.array([r.input_length for r in recs], dtype=np.int64),
            np.array([r.output_length for r in recs], dtype=np.int64),
            np.fromiter(chain.from_iterable(r.hash_ids for r in recs), dtype=np.int64),
            np.array([len(r.hash_ids) for r in recs], dtype=np.int64),
            np.array([r.line for r in recs], dtype=np.int64))


def _block_arrays(block: bytes, first: int, path: Path, reader: BlockReader, loads,
                  previous: float | None) -> tuple[tuple, int]:
    """``(arrival_s, input, output, block_ids, block_counts, line)`` of a block of whole lines, the first
    being line ``first``, by the first reader that accepts it (see `_load_mooncake`); and its number of
    lines."""
    part = _canonical_chunk(block, reader, previous)
    if part is None:
        lines = io.BytesIO(block).readlines()  # split exactly as the file's own readlines
        part = _fast_chunk(lines, loads, previous)
        if part is None:
            return _slow_chunk(lines, first, path, previous), len(lines)
    return (*part, np.arange(first, first + len(part[0]), dtype=np.int64)), len(part[0])


BLOCK_BYTES = 1 << 18
"""Bytes of JSONL read at a time (then up to the end of a line): ~850 Mooncake lines, small enough for the
block's numpy temporaries to stay in the CPU cache."""


def _load_mooncake(path: Path, until_s: float | None, max_requests: int | None) -> Trace:
    """`load_trace` for JSONL: blocks of lines read by the first reader that accepts them -- digits straight
    from the bytes for ``json.dumps`` output (`_canonical_chunk`), else a JSON parser with checks on the
    chunk's arrays (`_fast_chunk`), else the line-by-line reader, which names the problem. Python objects
    live one block at a time, so memory is the arrays'."""
    _check_file(path)
    loads, reader = _json_loads(), BlockReader()
    parts: list[tuple] = []
    previous = start = None
    number = kept = 0
    try:
        with path.open("rb") as fh:
            while True:
                block = fh.read(BLOCK_BYTES)
                if not block:
                    break
                if not block.endswith(b"\n"):
                    block += fh.readline()  # whole lines only
                part, lines = _block_arrays(block, number + 1, path, reader, loads, previous)
                number += lines
                if not len(part[0]):
                    continue
                part = (*part[:3], compact_ids(part[3]), *part[4:])
                previous = float(part[0][-1])
                start = float(part[0][0]) if start is None else start
                done = until_s is not None and previous - start > until_s
                if done:
                    part = _head(part, int(np.searchsorted(part[0] - start, until_s, side="right")))
                kept += len(part[0])
                _check_count(path, kept, max_requests)
                parts.append(part)
                if done:
                    break
    except OSError as exc:
        raise cannot_read(path, exc, TRACE_KIND) from None
    if not parts:
        raise PlanError(f"{path}: no requests: expected one JSON object per line")
    t, li, lo, ids, counts, line = (np.concatenate(c) for c in zip(*parts))
    return Trace(str(path), line, li, lo, t, ids, np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))


def _head(part: tuple, k: int) -> tuple:
    """The first ``k`` requests of a chunk's arrays."""
    t, li, lo, ids, counts, line = part
    return t[:k], li[:k], lo[:k], ids[:int(counts[:k].sum())], counts[:k], line[:k]


def _csv_int(text: str, path: Path, line: int, key: str, minimum: int) -> int:
    try:
        value = int(text) if text.strip().isdigit() else float(text)
    except ValueError:
        raise PlanError(f"{_where(path, line)}: {key} = {_short(text)}: expected a whole number of tokens "
                        f">= {minimum}") from None
    return _whole(value, path, line, key, minimum)


def iter_csv(path: str | Path) -> Iterator[TraceRecord]:
    """Stream the requests of a CSV trace, one row at a time (see the module docstring)."""
    path = Path(path)
    expected = f"{', '.join(CSV_REQUIRED)} and optionally {', '.join(CSV_OPTIONAL)} (ms)"
    rows = ((n, row) for n, text in _open_lines(path) if text.strip()
            for row in csv.reader([text]))
    header = next(rows, None)
    if header is None:
        raise PlanError(f"{path}: empty file: expected a CSV header with {expected}")
    hnum, names = header[0], [name.strip() for name in header[1]]
    unknown = [n for n in names if n not in CSV_REQUIRED + CSV_OPTIONAL]
    missing = [n for n in CSV_REQUIRED if n not in names]
    if unknown or missing or len(set(names)) != len(names):
        problem = (f"unknown column(s) {', '.join(map(repr, unknown))}" if unknown else
                   f"missing column(s) {', '.join(missing)}" if missing else "repeated column")
        raise PlanError(f"{_where(path, hnum)}: {problem}: expected columns {expected}")
    col = {n: i for i, n in enumerate(names)}
    previous = None
    seen = False
    for number, row in rows:
        if len(row) != len(names):
            raise PlanError(f"{_where(path, number)}: {len(row)} fields: expected {len(names)} "
                            f"({', '.join(names)})")
        if "timestamp" in col:
            try:
                stamp = float(row[col["timestamp"]])
            except ValueError:
                stamp = row[col["timestamp"]]
            previous = _timestamp(stamp, path, number, previous)
        seen = True
        yield TraceRecord(number, previous,
                          _csv_int(row[col["input_length"]], path, number, "input_length", 1),
                          _csv_int(row[col["output_length"]], path, number, "output_length", 0))
    if not seen:
        raise PlanError(f"{path}: no requests: expected at least one row after the header")


def iter_trace(path: str | Path) -> Iterator[TraceRecord]:
    """Stream a trace file, choosing the reader by suffix (``.jsonl`` or ``.csv``)."""
    path = Path(path)
    if path.is_dir():   # before its suffix: a folder has none, and "unknown trace format" would mislead
        raise is_directory(path, TRACE_KIND)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return iter_mooncake(path)
    if suffix == ".csv":
        return iter_csv(path)
    raise PlanError(f"{path}: unknown trace format {suffix or '(no suffix)'!r}: expected "
                    f"{' or '.join(SUFFIXES)}")


def load_trace(path: str | Path, until_s: float | None = None, max_requests: int | None = None) -> Trace:
    """Read a trace into arrays (int64 lengths, float64 seconds, block ids int32 when they fit, else int64);
    with ``until_s``, only the requests arriving within that many seconds of the first (the rest of the file
    is not read). With ``max_requests``, raise `TooManyRequests` as soon as more requests than that have
    been read (a trace far beyond what the caller can hold is refused without being held)."""
    path = Path(path)
    if path.suffix.lower() == ".jsonl":
        return _load_mooncake(path, until_s, max_requests)
    recs = []  # CSV: no hash ids
    for rec in iter_trace(path):
        if until_s is not None and recs and rec.timestamp_s is not None \
                and rec.timestamp_s - recs[0].timestamp_s > until_s:
            break
        recs.append(rec)
        _check_count(path, len(recs), max_requests)
    times = None if recs[0].timestamp_s is None else np.array([r.timestamp_s for r in recs], dtype=float)
    return Trace(str(path), np.array([r.line for r in recs], dtype=np.int64),
                 np.array([r.input_length for r in recs], dtype=np.int64),
                 np.array([r.output_length for r in recs], dtype=np.int64), times)


class TooManyRequests(PlanError):
    """A trace holds more requests than the reader was allowed (`load_trace`'s ``max_requests``)."""


def _check_count(path: Path, n: int, max_requests: int | None) -> None:
    if max_requests is not None and n > max_requests:
        raise TooManyRequests(f"{path}: more than {max_requests:,} requests: expected at most {max_requests:,}")
