"""Rendering of results as a rich table, JSON or CSV.

A command builds a `Report`: named sections of rows (plain dicts whose keys carry units, e.g.
``s_kv_bytes``, ``egress_gbps``) plus notes (defaults in effect, assumptions, sources). The same
report renders three ways; JSON and CSV keep full precision, the table rounds for reading.
Nothing is written until the whole report exists, so an error never leaves half an output.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PlanError

FORMATS = ("table", "json", "csv")


@dataclass
class Column:
    """How one row key shows in the table: header text and a format spec (or a callable)."""

    key: str
    header: str
    fmt: Any = None  # format spec like ",.0f", or callable value -> str


@dataclass
class Section:
    """One table of the report."""

    name: str
    title: str
    rows: list[dict]
    columns: list[Column] | None = None  # None: every key, headers = keys
    notes: list[str] = field(default_factory=list)


@dataclass
class Report:
    """A command's whole output."""

    sections: list[Section]
    notes: list[str] = field(default_factory=list)   # assumptions and defaults in effect
    meta: dict = field(default_factory=dict)          # scalar facts (inputs, versions) for JSON


def check_format(fmt: str) -> str:
    """Validate a ``--format`` value."""
    if fmt not in FORMATS:
        raise PlanError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return fmt


def _jsonable(v: Any) -> Any:
    if hasattr(v, "item") and callable(v.item):  # numpy scalar
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _cell(v: Any, fmt: Any) -> str:
    if v is None:
        return "-"
    if callable(fmt):
        return fmt(v)
    if fmt and isinstance(v, (int, float)) or (fmt and hasattr(v, "item")):
        try:
            return format(v, fmt)
        except (TypeError, ValueError):
            return str(v)
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def render(report: Report, fmt: str) -> str:
    """The report as text in the given format."""
    check_format(fmt)
    if fmt == "json":
        doc = {"meta": _jsonable(report.meta)} if report.meta else {}
        doc["sections"] = {s.name: _jsonable(s.rows) for s in report.sections}
        doc["notes"] = report.notes + [n for s in report.sections for n in s.notes]
        return json.dumps(doc, indent=2, sort_keys=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        multi = len(report.sections) > 1
        keys: list[str] = ["section"] if multi else []
        for s in report.sections:
            for row in s.rows:
                for k in row:
                    if k not in keys:
                        keys.append(k)
        w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
        w.writeheader()
        for s in report.sections:
            for row in s.rows:
                out = {k: _jsonable(v) for k, v in row.items()}
                if multi:
                    out["section"] = s.name
                w.writerow(out)
        return buf.getvalue()
    return _render_table(report)


def _render_table(report: Report) -> str:
    from rich.console import Console
    from rich.table import Table

    width = int(os.environ.get("COLUMNS", "160"))
    console = Console(file=io.StringIO(), width=max(width, 100), force_terminal=False, color_system=None)
    for s in report.sections:
        cols = s.columns or [Column(k, k) for k in (s.rows[0] if s.rows else {})]
        t = Table(title=s.title, title_justify="left", show_lines=False)
        if len(s.rows) == 1 and len(cols) > 6:  # one wide record reads better as quantity | value
            t.add_column("quantity")
            t.add_column("value", overflow="fold")
            for c in cols:
                t.add_row(c.header, _cell(s.rows[0].get(c.key), c.fmt))
        else:
            for c in cols:
                t.add_column(c.header, overflow="fold")
            for row in s.rows:
                t.add_row(*[_cell(row.get(c.key), c.fmt) for c in cols])
        console.print(t)
        for n in s.notes:
            console.print(f"  note: {n}", highlight=False, soft_wrap=True)
    for n in report.notes:
        console.print(f"note: {n}", highlight=False, soft_wrap=True)
    return console.file.getvalue()


def emit(report: Report, fmt: str, out=None) -> None:
    """Render and write the report to stdout (or ``out``) in one piece."""
    text = render(report, fmt)
    (out or sys.stdout).write(text)


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Write a file via a temporary sibling and rename, so no half-written file is ever left.

    Any failure (missing or unwritable folder, full disk, the target being a folder) is a `PlanError`
    naming ``path``; the temporary sibling is removed.
    """
    path = Path(path)
    if not path.parent.exists():
        raise PlanError(f"{path}: folder {str(path.parent)!r} does not exist")
    mode = "wb" if isinstance(data, bytes) else "w"
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, mode) as fh:
            fh.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file ordinary permissions
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise PlanError(f"{path}: cannot write ({exc.strerror or exc})") from None
        raise
