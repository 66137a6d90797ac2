"""The tables drawn without rich (prfaas_plan/output/plain_table.py) are rich's, character for character,
whenever they are drawn at all; and the reports of the common commands do take that path (a cold ``size``
then never imports rich's console)."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.cli import run
from prfaas_plan.output import plain_table
from prfaas_plan.output import report as report_module
from prfaas_plan.output.plain_table import Table, draw

# letters and digits, and what rich might treat apart: markup brackets, emoji colons, wide, combining and
# control characters, tabs
ALPHABET = st.sampled_from(list("aZ09 .-%$/|>_") + ["[", "]", "[b", ":", ":smile:", ":h20:", "é", "≤", "中",
                                                    "e\u0301", "\t", "\x1b", "\u200b"])
TEXT = st.lists(ALPHABET, max_size=8).map("".join)


@st.composite
def tables(draw_):
    n_cols = draw_(st.integers(1, 4))
    headers = draw_(st.lists(TEXT, min_size=n_cols, max_size=n_cols))
    rows = draw_(st.lists(st.lists(TEXT, min_size=n_cols, max_size=n_cols), max_size=4))
    title = draw_(TEXT | st.lists(st.sampled_from("Title of a table, long"), max_size=60).map("".join))
    return Table(title, headers, rows, min(len(title), 60), draw_(st.integers(0, 1)))


@settings(max_examples=400, derandomize=True, deadline=None)
@given(st.lists(tables() | TEXT, min_size=1, max_size=3), st.sampled_from([60, 80, 10_000]))
def test_a_plain_table_is_richs(blocks, width):
    text = draw(blocks, width)
    if text is not None:
        assert text == report_module._rich_table(blocks, width)


def test_the_simple_case_is_drawn_plainly():
    t = Table("Title", ["a", "long header"], [["1", "x"], ["22", "E[L|L>t]"]], 5)
    assert draw([t, "note: prefill:h20: kept"], 10_000) == report_module._rich_table([t, "note: prefill:h20: kept"],
                                                                                     10_000)
    assert draw([Table("T", ["a"], [["[bold]x"]], 1)], 10_000) is None      # rich markup: left to rich
    assert draw(["see :smile:"], 10_000) is None                            # an emoji code
    assert draw([Table("T", ["a"], [["x" * 100]], 1)], 60) is None           # does not fit: rich folds it


@pytest.mark.parametrize("args", [["size"], ["compare", "--model", "kimi-linear"], ["reproduce", "--inputs", "paper"],
                                  ["hardware"], ["size", "--layout", "examples/three-sites.yaml"]])
def test_common_reports_take_the_plain_path_and_read_as_rich_draws_them(monkeypatch, args):
    seen = []
    real_draw = plain_table.draw

    def checked(blocks, width):
        text = real_draw(blocks, width)
        seen.append(text is not None)
        assert text is None or text == report_module._rich_table(blocks, width)
        return text

    monkeypatch.setattr(plain_table, "draw", checked)
    with contextlib.redirect_stdout(io.StringIO()):
        assert run(args) == 0
    assert seen == [True]


@pytest.mark.parametrize("private, block", [
    ("rich._emoji_replace", "note: prefill:h20: kept"),   # ":h20:" reads as an emoji code, which rich keeps
    ("rich._ratio", Table("A title wider than its columns", ["a"], [["1"]], 30)),
])
def test_a_rich_release_without_its_private_helpers_leaves_the_table_to_rich(monkeypatch, private, block):
    """The two helpers borrowed from rich are private modules another release may move: without the one a
    block needs the plain path declines (None) and rich draws it; the plain case needs neither."""
    import sys

    assert draw([block], 10_000) is not None
    monkeypatch.setitem(sys.modules, private, None)   # `import` of it now raises ImportError
    assert draw([block], 10_000) is None
    assert report_module._rich_table([block], 10_000)
    assert draw([Table("T", ["a"], [["1"]])], 10_000) is not None
