"""Request traces: Mooncake JSONL (with prefix-block hashes) and CSV, streamed or loaded into arrays.

Formats
-------
- **Mooncake JSONL** (``.jsonl``): one JSON object per line with ``timestamp`` (arrival, milliseconds),
  ``input_length`` and ``output_length`` (tokens) and ``hash_ids`` (one integer per prompt block of the
  trace's block size -- 512 tokens in the Mooncake traces; equal ids mean equal prefix blocks). Other
  keys are ignored. Blank lines are skipped.
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
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._data import TRACES_DIR
from ..errors import PlanError
from ..units import MAX_TOKENS

BUNDLED_TRACE = TRACES_DIR / "mooncake_conversation_trace.jsonl"
"""The Mooncake conversation trace shipped with the package (12,031 Kimi requests, Apache-2.0)."""

JSONL_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
CSV_REQUIRED = ("input_length", "output_length")
CSV_OPTIONAL = ("timestamp",)
SUFFIXES = (".jsonl", ".csv")


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


# A token count beyond the planner's length cap, a timestamp beyond 2^53 ms (exact in float64; 285,000
# years) or a block id outside int64 is a corrupt line, not a request.
MAX_TIMESTAMP_MS = 2**53
INT64 = (-(2**63), 2**63 - 1)


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


def _open_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a UTF-8 text file, with one-line errors for missing or binary files."""
    if not path.exists():
        raise PlanError(f"{path}: no such trace file")
    if not path.is_file():
        raise PlanError(f"{path}: not a file: expected a .jsonl or .csv trace")
    try:
        with path.open("rb") as fh:  # decoded line by line, so a decoding error knows its line
            for number, raw in enumerate(fh, start=1):
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise PlanError(f"{_where(path, number)}: not UTF-8 text: expected a .jsonl or .csv "
                                    f"trace") from None
                yield number, text
    except OSError as exc:
        raise PlanError(f"{path}: cannot read ({exc.strerror})") from None


def iter_mooncake(path: str | Path) -> Iterator[TraceRecord]:
    """Stream the requests of a Mooncake JSONL trace, one line at a time (see the module docstring)."""
    path = Path(path)
    previous = None
    seen = False
    for number, text in _open_lines(path):
        if not text.strip():
            continue
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
        previous = _timestamp(obj["timestamp"], path, number, previous)
        hash_ids = obj["hash_ids"]
        if not isinstance(hash_ids, list) or (hash_ids and (set(map(type, hash_ids)) != {int}
                                                             or min(hash_ids) < INT64[0] or max(hash_ids) > INT64[1])):
            raise PlanError(f"{_where(path, number)}: hash_ids = {_short(hash_ids)}: expected a list of "
                            f"integer block ids (64-bit)")
        seen = True
        yield TraceRecord(number, previous, _whole(obj["input_length"], path, number, "input_length", 1),
                          _whole(obj["output_length"], path, number, "output_length", 0), tuple(hash_ids))
    if not seen:
        raise PlanError(f"{path}: no requests: expected one JSON object per line")


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
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return iter_mooncake(path)
    if suffix == ".csv":
        return iter_csv(path)
    raise PlanError(f"{path}: unknown trace format {suffix or '(no suffix)'!r}: expected "
                    f"{' or '.join(SUFFIXES)}")


def load_trace(path: str | Path) -> Trace:
    """Read a whole trace into arrays (int64 lengths, float64 seconds, int64 block ids)."""
    lines: list[int] = []
    times: list[float | None] = []
    inputs: list[int] = []
    outputs: list[int] = []
    ids: list[int] = []
    counts: list[int] = []
    for rec in iter_trace(path):
        lines.append(rec.line)
        times.append(rec.timestamp_s)
        inputs.append(rec.input_length)
        outputs.append(rec.output_length)
        ids.extend(rec.hash_ids)
        counts.append(len(rec.hash_ids))
    has_blocks = Path(path).suffix.lower() == ".jsonl"
    return Trace(
        path=str(path),
        line=np.asarray(lines, dtype=np.int64),
        input_length=np.asarray(inputs, dtype=np.int64),
        output_length=np.asarray(outputs, dtype=np.int64),
        arrival_s=None if times[0] is None else np.asarray(times, dtype=float),
        block_ids=np.asarray(ids, dtype=np.int64) if has_blocks else None,
        block_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64) if has_blocks else None,
    )
