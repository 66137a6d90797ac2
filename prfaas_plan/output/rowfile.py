"""Flat tables of typed rows as Parquet or CSV files, written atomically, plus an append-only journal.

A table is a list of dict rows and its columns as ``(name, type)`` with type ``str``, ``int``, ``float`` or
``bool``; ``None`` is an empty cell. The final file is written in one piece through `write_atomic`, so a
reader never sees half a table. While a long job runs, its rows go to a `Journal` (JSON lines, flushed
per batch) next to the output, from which a re-run resumes after an interruption; a torn last line
(the process was killed mid-write) is ignored.

pyarrow is imported only when a Parquet file is read or written.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OutputError, PlanError
from ..textfile import cannot_read, not_utf8, require_file
from .report import write_atomic

SUFFIXES = (".parquet", ".csv")


@dataclass(frozen=True)
class TableSchema:
    """What a results table holds, for readers that must not depend on who wrote it (plots, reports):
    its typed columns with their meanings, which columns are inputs, and which way each metric is
    better (``min`` or ``max``)."""

    columns: tuple[tuple[str, str, str], ...]  # (name, type, meaning)
    inputs: tuple[str, ...]
    directions: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def typed(self) -> list[tuple[str, str]]:
        """``(name, type)`` pairs, as `read_table` and `write_table` take them."""
        return [(n, t) for n, t, _ in self.columns]


def table_format(path: str | Path) -> str:
    """``parquet`` or ``csv`` from a file name; anything else is a `PlanError`."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise PlanError(f"{path}: expected a .parquet or .csv file name")
    return suffix[1:]


def _arrow_schema(columns):
    import pyarrow as pa

    types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
    return pa.schema([(name, types[kind]) for name, kind in columns])


def _csv_cell(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("inf" if v > 0 else "-inf" if v < 0 else "nan")
    return v


def table_bytes(rows: list[dict], columns, fmt: str, metadata: dict[str, str] | None = None) -> bytes:
    """The table as the bytes of a Parquet or CSV file; ``metadata`` (text) is kept in Parquet's schema
    metadata (CSV has no place for it)."""
    names = [n for n, _ in columns]
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = _arrow_schema(columns).with_metadata(metadata or {})
        table = pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows], schema=schema)
        buf = io.BytesIO()
        pq.write_table(table, buf)
        return buf.getvalue()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(names)
    for r in rows:
        w.writerow([_csv_cell(r.get(n)) for n in names])
    return buf.getvalue().encode()


def write_table(path: str | Path, rows: list[dict], columns, metadata: dict[str, str] | None = None) -> None:
    """Write the table atomically in the format its suffix names."""
    write_atomic(path, table_bytes(rows, columns, table_format(path), metadata))


def read_metadata(path: str | Path) -> dict[str, str]:
    """The text metadata of a Parquet table (empty for CSV)."""
    if table_format(path) != "parquet":
        return {}
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items() if not k.startswith(b"ARROW")}


def _from_text(text: str, kind: str):
    if text == "":
        return None
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "bool":
            return {"true": True, "false": False}[text.lower()]
    except (ValueError, KeyError):
        raise PlanError(f"cell {text!r}: expected a {kind}") from None
    return text


def read_table(path: str | Path, columns=None, strict: bool = False) -> list[dict]:
    """Rows of a Parquet or CSV table. With ``columns`` CSV cells are converted to their types (unknown
    columns stay text); without, numbers are recognized where they parse. A CSV row with too few or too
    many cells (a file cut short mid-row) and a cell that is not of its column's type are `PlanError`s
    naming the file and line; with ``strict`` a Parquet column of the wrong type is one too."""
    path = Path(path)
    fmt = table_format(path)
    require_file(path, f"a sweep's .{fmt}")
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            raise PlanError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
        if strict and columns:
            want = _arrow_schema([c for c in columns if c[0] in table.schema.names])
            for f in want:
                got = table.schema.field(f.name).type
                if got != f.type and not (pa.types.is_null(got)):
                    raise PlanError(f"{path}: column {f.name!r} holds {got}, expected {f.type}")
        return table.to_pylist()
    kinds = dict(columns or [])
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, [])
            body = list(reader)
    except OSError as exc:
        raise cannot_read(path, exc, "a sweep's .csv") from None
    except UnicodeDecodeError:
        raise not_utf8(path, "a sweep's .csv") from None
    except csv.Error as exc:
        raise PlanError(f"{path}: malformed CSV ({exc})") from None
    out = []
    for i, cells in enumerate(body):
        line = i + 2
        if len(cells) != len(header):
            raise PlanError(f"{path}:{line}: {len(cells)} cells where the header has {len(header)} (a row cut "
                            "short or run together)")
        row = {}
        for k, v in zip(header, cells):
            try:
                row[k] = _from_text(v, kinds[k]) if k in kinds else _guess(v)
            except PlanError as exc:
                raise PlanError(f"{path}:{line}: column {k!r}: {exc}") from None
        out.append(row)
    return out


def _guess(text: str):
    if text == "":
        return None
    if text in ("True", "False", "true", "false"):
        return text.lower() == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


class Journal:
    """Append-only JSON-lines record of finished rows, flushed after each batch."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fh = None

    def read(self) -> list[dict]:
        """Rows recorded so far (an unfinished last line is skipped)."""
        if not self.path.is_file():
            return []
        rows = []
        with open(self.path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.endswith("\n"):
                    break
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break
        return rows

    def append(self, rows: list[dict]) -> None:
        if self._fh is None:
            try:
                self._fh = open(self.path, "a", encoding="utf-8")
            except OSError as exc:
                raise OutputError(f"{self.path}: cannot write ({exc.strerror or exc})") from None
        try:
            self._fh.write("".join(json.dumps(r) + "\n" for r in rows))
            self._fh.flush()
        except OSError as exc:   # a full disk: the journal goes (its caller removes it), the error is one line
            raise OutputError(f"{self.path}: cannot write ({exc.strerror or exc})") from None

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError:   # a full disk at the last flush: the journal is removed next anyway
                pass
            self._fh = None

    def remove(self) -> None:
        self.close()
        if self.path.exists():
            os.unlink(self.path)
