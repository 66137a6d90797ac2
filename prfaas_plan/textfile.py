"""Reading a user's text and JSON files: every reader says a failure in one `PlanError` line, in one wording,
naming the file and the kind of input expected.

- ``PATH: no such file`` (`require_file`, a reader that looks before it opens) or ``PATH: cannot read (REASON)``
  (missing, no permission: `cannot_read`);
- ``PATH: is a directory, expected KIND``: a folder where a file goes (`is_directory`, `refuse_folder`);
- ``PATH: larger than N MiB (expected KIND)``: over a reader's size cap;
- ``PATH[:LINE]: not a UTF-8 text file (expected KIND)`` (`not_utf8`; a streamed reader names the line);
- ``PATH: not JSON (WHY) (expected KIND)``: malformed or nested too deeply (`read_json`).

``KIND`` says what the file should have been ("a measurement CSV", "a Hugging Face config.json", ...).
"""

from __future__ import annotations

import errno
from pathlib import Path

from .errors import PlanError


def cannot_read(path: str | Path, exc: OSError, kind: str | None = None) -> PlanError:
    """The error for an ``OSError`` met opening or reading ``path`` (`is_directory` for a folder when the
    ``kind`` of file expected is given)."""
    if kind is not None and exc.errno == errno.EISDIR:
        return is_directory(path, kind)
    return PlanError(f"{path}: cannot read ({exc.strerror or exc})")


def is_directory(where: str | Path, kind: str) -> PlanError:
    """The error for a folder given where a file of ``kind`` goes (``where``: the path, or how the input
    that named it is shown, "`layout` 'docs/'")."""
    return PlanError(f"{where}: is a directory, expected {kind}")


def refuse_folder(path: str | Path, kind: str, where: str | None = None):
    """``path`` unchanged unless it names a folder: then `is_directory` (``where``: how the message names the
    path, the path itself by default), for a reader that says the rest in its own words."""
    if Path(path).is_dir():
        raise is_directory(str(path) if where is None else where, kind)
    return path


def require_file(path: str | Path, kind: str, where: str | None = None) -> Path:
    """``path`` as a `Path` when it names a file; else `PlanError` ``WHERE: no such file`` or, for a folder,
    `is_directory` (`refuse_folder`)."""
    p = Path(path)
    if not p.is_file():
        refuse_folder(p, kind, str(path) if where is None else where)
        raise PlanError(f"{str(path) if where is None else where}: no such file")
    return p


def not_utf8(where: str | Path, kind: str) -> PlanError:
    """The error for bytes that are not UTF-8 in ``where`` (a path, or ``path:line``)."""
    return PlanError(f"{where}: not a UTF-8 text file (expected {kind})")


def read_utf8(path: str | Path, kind: str = "a text file", max_bytes: int | None = None) -> str:
    """The text of ``path``; a missing or unreadable file, one over ``max_bytes`` or bytes that are not UTF-8
    raise `PlanError` (module docstring)."""
    p = Path(path)
    try:
        if max_bytes is not None and p.stat().st_size > max_bytes:
            raise PlanError(f"{path}: larger than {max_bytes / 2**20:g} MiB (expected {kind})")
        raw = p.read_bytes()
    except OSError as exc:
        raise cannot_read(path, exc, kind) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise not_utf8(path, kind) from None


def read_json(path: str | Path, kind: str, max_bytes: int | None = None):
    """The JSON document in ``path`` (any JSON value: callers check its shape); read as `read_utf8`, then
    malformed JSON or nesting too deep for the parser raise `PlanError`."""
    import json

    text = read_utf8(path, kind, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}) "
                        f"(expected {kind})") from None
    except RecursionError:
        raise PlanError(f"{path}: not JSON (nested too deeply) (expected {kind})") from None
