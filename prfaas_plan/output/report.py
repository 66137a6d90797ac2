"""Rendering of results as a rich table, JSON or CSV, in one envelope (``docs/output.md``).

A command builds a `Report`: named sections of rows (plain dicts whose keys carry units, e.g.
``s_kv_bytes``, ``egress_gbps``), warnings (each a stable code and a message), notes (assumptions,
sources) and meta (the tool, the command, every input in effect). The same report renders three ways:

- JSON: ``{"meta", "warnings", "sections", "notes"}``; a non-finite number is ``null`` with a sibling
  ``<key>_nonfinite`` of ``"inf"``, ``"-inf"`` or ``"nan"``;
- CSV: one table (a ``section`` column when there are several), preceded by ``#`` comment lines carrying
  the tool, the warnings and the notes;
- table: rounded for reading, no exponent and no ``nan``; as wide as the terminal (``COLUMNS`` when
  set), and at its natural width when written to a pipe or file, so no cell is broken across lines
  for a reader that greps or pastes it; each warning and note once.

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

from ..errors import OutputError, PlanError
from ..vocabulary import Format, values

FORMATS = values(Format)
TABLE_WIDTH = 100  # columns: the width `render` assumes when its caller names none


def table_width(stream) -> int | None:
    """The width (columns) a table written to ``stream`` should take: ``COLUMNS`` when it is set, the
    terminal's width when ``stream`` is one, else None (natural width: a pipe never splits a cell)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        return int(columns)
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        import shutil

        return shutil.get_terminal_size((TABLE_WIDTH, 24)).columns
    return None


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
    transpose: bool = True  # a few wide records may be shown one column each; False for long free-text cells


@dataclass
class Report:
    """A command's whole output. ``warnings`` holds objects with ``code`` and ``message`` (e.g.
    `prfaas_plan.planning.warnings.PlanWarning`)."""

    sections: list[Section]
    notes: list[str] = field(default_factory=list)   # assumptions and defaults in effect
    meta: dict = field(default_factory=dict)          # scalar facts (inputs, versions) for JSON
    warnings: list = field(default_factory=list)


def _unique(items) -> list:
    """``items`` in order without repeats."""
    return list(dict.fromkeys(items))


def check_format(fmt: str) -> str:
    """Validate a ``--format`` value."""
    if fmt not in FORMATS:
        raise PlanError(f"`format` {fmt!r}: expected one of {', '.join(FORMATS)}")
    return fmt


NONFINITE_SUFFIX = "_nonfinite"


def _nonfinite(v: Any) -> str | None:
    """``"inf"``, ``"-inf"`` or ``"nan"`` for a non-finite float, else None."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return None


def _jsonable(v: Any) -> Any:
    """Plain JSON values: numpy scalars unwrapped, non-finite floats as null (in a dict with a sibling
    ``<key>_nonfinite`` flag naming the value)."""
    if hasattr(v, "item") and callable(v.item):  # numpy scalar
        v = v.item()
    if _nonfinite(v):
        return None
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            x = x.item() if hasattr(x, "item") and callable(x.item) else x
            out[k] = _jsonable(x)
            if _nonfinite(x):
                out[f"{k}{NONFINITE_SUFFIX}"] = _nonfinite(x)
        return out
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def plain_number(v: float) -> str:
    """A number for a table cell without an exponent: thousands separated from 1000, 4 significant
    digits down to 1e-4, fixed point with up to 10 decimals below (``0`` when nothing is left)."""
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 1e-4:
        return f"{v:.4g}"
    text = f"{v:.10f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "0", "-0") else text


def _cell(v: Any, fmt: Any) -> str:
    if hasattr(v, "item") and callable(v.item):
        v = v.item()
    if v is None:
        return "-"
    if isinstance(v, float) and not math.isfinite(v):
        return "-" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if callable(fmt):
        return fmt(v)
    if fmt and isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            text = format(v, fmt)
        except (TypeError, ValueError):
            return str(v)
        return plain_number(float(v)) if "e" in text.lower() else text
    if isinstance(v, float):
        return plain_number(v)
    return str(v)


def warning_dicts(report: Report) -> list[dict]:
    """The report's warnings as ``{"code", "message"}`` dicts, each once."""
    seen = _unique((w.code, w.message) for w in report.warnings)
    return [{"code": c, "message": m} for c, m in seen]


def all_notes(report: Report) -> list[str]:
    """Report and section notes, each once, in order."""
    return _unique(list(report.notes) + [n for s in report.sections for n in s.notes])


def render(report: Report, fmt: str, quiet: bool = False, width: int | None = TABLE_WIDTH) -> str:
    """The report as text in the given format; ``quiet`` leaves the notes out of a table."""
    check_format(fmt)
    if fmt == "json":
        doc = {"meta": _jsonable(report.meta), "warnings": warning_dicts(report),
               "sections": {s.name: _jsonable(s.rows) for s in report.sections}, "notes": all_notes(report)}
        return json.dumps(doc, indent=2, sort_keys=False, allow_nan=False) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        tool = report.meta.get("tool"), report.meta.get("version"), report.meta.get("command")
        if any(tool):
            buf.write("# " + " ".join(str(x) for x in tool if x) + "\n")
        for w in warning_dicts(report):
            buf.write(f"# warning {w['code']}: {w['message']}\n")
        for n in all_notes(report):
            buf.write(f"# note: {n}\n")
        multi = len(report.sections) > 1
        keys: list[str] = ["section"] if multi else []
        for s in report.sections:
            for row in s.rows:
                for k in _jsonable(row):
                    if k not in keys:
                        keys.append(k)
        w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
        w.writeheader()
        for s in report.sections:
            for row in s.rows:
                out = _jsonable(row)
                if multi:
                    out["section"] = s.name
                w.writerow(out)
        return buf.getvalue()
    return _render_table(report, quiet, width)


TRANSPOSE_ROWS = 6   # at most this many records, with more columns than that, are shown one column each


NATURAL_WIDTH = 10_000  # columns: wide enough that no table of ours wraps a cell


def _table_blocks(report: Report, quiet: bool, width: int) -> list:
    """The report as the tables (`plain_table.Table`) and lines a table rendering prints, in order."""
    from .plain_table import Table

    blocks: list = []
    for s in report.sections:
        cols = s.columns or [Column(k, k) for k in (s.rows[0] if s.rows else {})]
        # at least as wide as its title (up to the console), so a short table does not wrap its title
        t = Table(s.title, [], [], min(len(s.title), width))
        if len(s.rows) == 1 and len(cols) > 6:  # one wide record reads better as quantity | value
            t.headers, t.fold_from = ["quantity", "value"], 1
            t.rows = [[c.header, _cell(s.rows[0].get(c.key), c.fmt)] for c in cols]
        elif s.transpose and 1 < len(s.rows) <= TRANSPOSE_ROWS and len(cols) > TRANSPOSE_ROWS:
            # a few wide records (layouts side by side) read better with one column per record
            t.headers, t.fold_from = [cols[0].header] + [_cell(row.get(cols[0].key), cols[0].fmt) for row in s.rows], 1
            t.rows = [[c.header, *[_cell(row.get(c.key), c.fmt) for row in s.rows]] for c in cols[1:]]
        else:
            t.headers = [c.header for c in cols]
            t.rows = [[_cell(row.get(c.key), c.fmt) for c in cols] for row in s.rows]
        blocks.append(t)
        blocks += [f"  note: {n}" for n in ([] if quiet else _unique(s.notes))]
    blocks += [f"WARNING [{w['code']}]: {w['message']}" for w in warning_dicts(report)]
    if not quiet:
        section_notes = {n for s in report.sections for n in s.notes}
        blocks += [f"note: {n}" for n in _unique(report.notes) if n not in section_notes]
    return blocks


def _render_table(report: Report, quiet: bool = False, width: int | None = TABLE_WIDTH) -> str:
    from .plain_table import draw

    width = NATURAL_WIDTH if width is None else max(width, 60)
    blocks = _table_blocks(report, quiet, width)
    text = draw(blocks, width)
    return text if text is not None else _rich_table(blocks, width)


def _rich_table(blocks: list, width: int) -> str:
    """``blocks`` printed by rich: tables folding cells that do not fit, lines soft-wrapped."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    for b in blocks:
        if isinstance(b, str):
            console.print(b, highlight=False, soft_wrap=True, markup=False)
            continue
        t = Table(title=b.title, title_justify="left", show_lines=False, min_width=b.min_width)
        for k, header in enumerate(b.headers):
            t.add_column(header, **({"overflow": "fold"} if k >= b.fold_from else {}))
        for row in b.rows:
            t.add_row(*row)
        console.print(t)
    return console.file.getvalue()


def emit(report: Report, fmt: str, out=None, quiet: bool = False) -> None:
    """Render and write the report to stdout (or ``out``) in one piece."""
    text = render(report, fmt, quiet)
    (out or sys.stdout).write(text)


def write_atomic(path: str | Path, data: bytes | str) -> None:
    """Write a file via a temporary sibling and rename, so no half-written file is ever left.

    Any failure (missing or unwritable folder, full disk, a name too long, the target being a folder) is
    an `OutputError` naming ``path``; the temporary sibling is removed.
    """
    path = Path(path)
    if not path.parent.exists():
        raise OutputError(f"{path}: folder {str(path.parent)!r} does not exist")
    mode = "wb" if isinstance(data, bytes) else "w"
    tmp = None
    try:
        # the temporary name is the target's, shortened so that it is never the one too long for the folder
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:100]}.", suffix=".tmp")
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
            raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from None
        raise


def write_files(folder: str | Path, texts: dict[str, str | bytes]) -> None:
    """Write several files into ``folder`` as one step: all of them or none. A new folder is filled under
    a temporary name and renamed into place; in an existing folder each file is written atomically and,
    should one fail, the files this call created are removed again. Failures are `OutputError`s."""
    import shutil

    folder = Path(folder)
    try:
        exists = folder.exists()
    except OSError as exc:   # e.g. a name too long for the file system
        raise OutputError(f"{folder}: cannot write ({exc.strerror or exc})") from None
    if not folder.parent.exists():
        raise OutputError(f"{folder}: folder {str(folder.parent)!r} does not exist")
    if exists and not folder.is_dir():
        raise OutputError(f"{folder}: exists and is not a folder")
    if not exists:
        tmp = None
        try:
            tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name[:100]}.", suffix=".tmp"))
            for name, data in texts.items():
                write_atomic(tmp / name, data)
            os.chmod(tmp, 0o777 & ~_umask())
            os.rename(tmp, folder)
        except BaseException as exc:
            if tmp is not None and tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(exc, OSError):
                raise OutputError(f"{folder}: cannot write ({exc.strerror or exc})") from None
            if isinstance(exc, OutputError):
                raise OutputError(f"{folder}: cannot write ({str(exc).rsplit('(', 1)[-1]}") from None
            raise
        return
    created = []
    try:
        for name, data in texts.items():
            target = folder / name
            if not target.exists():
                created.append(target)
            write_atomic(target, data)
    except BaseException:
        for target in created:
            if target.exists():
                target.unlink()
        raise


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask
