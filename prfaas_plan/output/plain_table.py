"""Tables drawn as rich draws them, without rich, for the common case: every cell fits on one line.

A cold ``size`` spent about a tenth of its time importing rich and laying out its tables (benchmarks/
bench_cli.py). When each table fits the width at its natural size and no text holds what rich would read
as markup, an emoji code, a control character or a double-width character, the layout is simple: each
column as wide as its widest cell plus one space each side, widened by rich's own rule (`ratio_distribute`)
up to the table's minimum width, rich's heavy-head box, the title left-justified over the table's width.
`draw` returns None otherwise and the caller lets rich do it; tests/test_plain_table.py checks the two
give the same text, character for character.

Widths are in terminal columns.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# the start of rich's markup tag (rich/markup.py RE_TAGS; "E[L|L>t]" is not one) and of an emoji code
_MARKUP = re.compile(r"\[[a-z#/@]")
_EMOJI = re.compile(r":\S*?:")


@dataclass
class Table:
    """One table: a title (may be empty), column headers, rows of cell strings, the minimum width of the
    whole table, borders included (rich's ``Table(min_width=...)``), and the first column that folds a cell
    too wide for it (those before it end in an ellipsis; only rich draws either)."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    min_width: int | None = None
    fold_from: int = 0


def _no_emoji(text: str) -> bool:
    """No ``:name:`` in ``text`` that rich replaces by an emoji (":h20:" is none: rich keeps it)."""
    if not _EMOJI.search(text):
        return True
    try:
        from rich._emoji_replace import _emoji_replace  # the emoji table, not rich's console
    except ImportError:   # a private module of rich: another release may move it, and rich then draws
        return False
    return _emoji_replace(text) == text


def _plain(text: str, markup: bool = True) -> bool:
    """Whether rich would print ``text`` as it is, one column per character (``markup``: rich reads markup
    in it, as in table cells; the report's lines are printed with markup off)."""
    if (markup and _MARKUP.search(text)) or not _no_emoji(text):
        return False
    if text.isascii():
        return text.isprintable()
    return all(c.isprintable() and unicodedata.category(c)[0] not in "MC"
               and unicodedata.east_asian_width(c) not in "WF" for c in text)


def _widths(t: Table) -> list[int] | None:
    """Column widths with their padding, not the borders, as rich's ``_calculate_column_widths`` finds them
    for a table that fits (not expanded, no column width or ratio of its own); None when rich's own rule
    for widening a table to its minimum width cannot be imported (rich then draws it)."""
    widths = [max(len(c) for c in col) + 2 for col in zip(t.headers, *t.rows)]
    extra = len(widths) + 1  # the vertical borders
    if t.min_width is not None and sum(widths) < t.min_width - extra:
        try:
            from rich._ratio import ratio_distribute   # a small module: not rich's console
        except ImportError:   # private to rich: another release may move it
            return None
        pads = ratio_distribute(t.min_width - extra - sum(widths), widths)
        widths = [w + p for w, p in zip(widths, pads)]
    return widths


def _draw_table(t: Table, width: int) -> str | None:
    texts = [t.title, *t.headers, *(c for row in t.rows for c in row)]
    if not t.headers or not t.rows or any(len(row) != len(t.headers) for row in t.rows) \
            or not all(_plain(x) for x in texts):
        return None
    widths = _widths(t)
    if widths is None:
        return None
    total = sum(widths) + len(widths) + 1
    if total > width or len(t.title) > total:
        return None

    def line(left: str, fill: str, mid: str, right: str) -> str:
        return left + mid.join(fill * w for w in widths) + right + "\n"

    def cells(edge: str, values: list[str]) -> str:
        return edge + edge.join(f" {v.ljust(w - 2)} " for v, w in zip(values, widths)) + edge + "\n"

    out = [t.title.ljust(total) + "\n"] if t.title else []
    out += [line("┏", "━", "┳", "┓"), cells("┃", t.headers), line("┡", "━", "╇", "┩")]
    out += [cells("│", row) for row in t.rows]
    out.append(line("└", "─", "┴", "┘"))
    return "".join(out)


def draw(blocks: list[Table | str], width: int) -> str | None:
    """The blocks (tables, and lines printed as they are, markup off) as rich prints them on a console ``width``
    columns wide, or None when any of them is not the simple case of the module docstring."""
    out = []
    for block in blocks:
        if isinstance(block, Table):
            text = _draw_table(block, width)
            if text is None:
                return None
            out.append(text)
        elif _plain(block, markup=False):
            out.append(block + "\n")
        else:
            return None
    return "".join(out)
