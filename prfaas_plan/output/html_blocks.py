"""Building blocks shared by the report pages (`html_pages`, `html_runs`): the inputs in effect, the
warnings, the assumptions, generic sections and bar plots (docs/report.md)."""

from __future__ import annotations

import re

from .html import NONFINITE, Result, cell_value, e, figure, fmt, header, key_value_table, notes_list, table
from .plots import figure_svg

TRANSPOSE_ROWS = 6
WIDE = 6  # a one-row section with more columns than this reads better as quantity | value


def mpl():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def section_html(name: str, rows: list[dict], highlight=None) -> str:
    title = f"<h3>{e(name.replace('_', ' ').capitalize())}</h3>"
    if len(rows) == 1 and len(rows[0]) > WIDE:
        row = rows[0]
        return title + key_value_table((header(k), fmt(cell_value(row, k), k))
                                       for k in row if not k.endswith(NONFINITE))
    keys = {k for r in rows for k in r if not k.endswith(NONFINITE)}
    # a few records with many fields (layouts side by side) read, and fit, better one column each
    return title + table(rows, highlight=highlight, transpose=len(rows) <= TRANSPOSE_ROWS and len(keys) > WIDE + 2)


def defaults_and_rest(notes: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    defaults, rest = [], []
    for n in notes:
        m = re.match(r"default ([\w-]+): (.*)", n)
        (defaults.append((m.group(1), m.group(2))) if m else rest.append(n))
    return defaults, rest


OUTPUT_OPTIONS = ("fmt", "format", "plot", "output", "quiet")  # how to print, not what was asked


def inputs_block(res: Result) -> str:
    """The inputs in effect (the envelope's ``meta.inputs`` {name: {value, default, replaced_by}}, else the
    ``default X: Y`` notes), then the result's other scalar facts."""
    inputs = res.meta.get("inputs") if isinstance(res.meta.get("inputs"), dict) else {}  # today: the input level
    pairs = [(k, f"chosen by {v['replaced_by']} (the answer gives it)" if v.get("replaced_by") else
              fmt(v["value"], k) + (" (default)" if v.get("default") else ""))
             for k, v in inputs.items() if isinstance(v, dict) and "value" in v and k not in OUTPUT_OPTIONS
             and not (v["value"] in (None, False) and v.get("default"))]  # options not asked for
    if not pairs:
        pairs = [(k, f"{v} (default)") for k, v in defaults_and_rest(res.notes)[0]]
    facts = [(k + (" (profile)" if k == "model" else ""), fmt(v, k)) for k, v in res.meta.items()
             if not isinstance(v, (dict, list)) and v is not None]
    out = ("<h3>Inputs in effect</h3>" + key_value_table(pairs)) if pairs else ""
    return out + (("<h3>About this result</h3>" + key_value_table(facts)) if facts else "")


def warnings_block(warnings: list[str]) -> str:
    if not warnings:
        return "<h2>Warnings</h2><p>No warnings.</p>"
    return f'<h2>Warnings ({len(warnings)})</h2><div class="warn">{notes_list(warnings, "w")}</div>'


def assumptions_block(res: Result) -> str:
    """Every note, less the ``default X: Y`` ones when the inputs table already shows them."""
    rest = list(res.notes) if isinstance(res.meta.get("inputs"), dict) else defaults_and_rest(res.notes)[1]
    sources = res.meta.get("data_sources") or {}
    rest += [f"data source ({k}): {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in sources.items()]
    return "<h2>Assumptions and data sources</h2>" + (notes_list(rest) if rest else "<p>Nothing recorded.</p>")


def other_sections(res: Result, shown: set[str]) -> list[str]:
    return [section_html(n, rows) for n, rows in res.sections.items() if n not in shown]


# ---------------------------------------------------------------------------------------------------


def bars(labels, values, xlabel: str, ref=None, caption: str = "", first_red: bool = True) -> str:
    """Horizontal bars, the first in red (PrfaaS-PD) unless ``first_red`` is False; ``ref`` a dashed line."""
    plt = mpl()
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.5 * len(labels)), dpi=100)
    ax.barh(labels, values, color=["crimson" if i == 0 and first_red else "tab:blue" for i in range(len(labels))])
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.3g}", va="center", fontsize=8)
    if ref is not None:
        ax.axvline(ref, color="0.3", ls="--", lw=0.8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_xlim(0, max(values) * 1.18 if values else 1)
    ax.grid(axis="x", alpha=0.3)
    return figure(figure_svg(fig), caption)
