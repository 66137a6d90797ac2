"""Reading a user's text file: an unreadable or non-UTF-8 file is one `PlanError` line naming it."""

from __future__ import annotations

from pathlib import Path

from .errors import PlanError


def read_utf8(path: str | Path) -> str:
    """The text of ``path``; a missing or unreadable file, or bytes that are not UTF-8, raise `PlanError`."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise PlanError(f"{path}: not a UTF-8 text file") from None
