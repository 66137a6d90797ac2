"""One self-contained HTML page from a result: the question, the answer, the tables, the plots, every
assumption, data source and warning (docs/report.md).

Results come as the JSON of ``size``, ``compare`` or ``reproduce`` (``--format json``) or as a sweep's
Parquet/CSV rows. JSON is read generically: named sections of rows, notes and warnings, either at the
top level or inside an envelope ``{"meta": ..., "warnings": [...], "result": {...}}``; a note starting
``WARNING:`` counts as a warning. The page needs no network to view: styles are inline, plots are
inline SVG (glyphs drawn as paths, no fonts), there is no script. Every text taken from the result is
escaped with `html.escape`.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PlanError
from ..textfile import read_json

STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1d2330; margin: 0;
       background: #f4f5f7; line-height: 1.45; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { font-size: 1.6em; margin: 0.2em 0 0.1em; }
h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 2px solid #dde1e7; padding-bottom: 4px; }
h3 { font-size: 1.0em; margin: 1.2em 0 0.4em; }
.sub { color: #5b6475; margin: 0 0 1em; }
.question { font-size: 1.15em; background: #eef3fb; border-left: 4px solid #3566b8; padding: 10px 14px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 10px 0; }
.card { border: 1px solid #dde1e7; border-radius: 6px; padding: 8px 12px; min-width: 150px; }
.card .v { font-size: 1.35em; font-weight: 600; }
.card .k { color: #5b6475; font-size: 0.85em; }
.card .e { color: #5b6475; font-size: 0.8em; }
.verdict { font-size: 1.05em; font-weight: 600; margin: 8px 0; }
.warn { background: #fff6dd; border-left: 4px solid #d89b00; padding: 8px 14px; }
.warn li { margin: 4px 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85em; margin: 6px 0 12px; }
th, td { border: 1px solid #dde1e7; padding: 3px 7px; text-align: right; white-space: nowrap; }
th { background: #f0f2f5; text-align: center; white-space: normal; min-width: 3.5em; max-width: 9em; }
th.row { text-align: left; max-width: 16em; }
td.t { text-align: left; white-space: normal; min-width: 5em; }
table.kv td { white-space: normal; overflow-wrap: anywhere; max-width: 60em; }
tr.hl td, td.hl, th.hl { background: #fdecec; font-weight: 600; }
ul.notes li { margin: 3px 0; }
figure { margin: 12px 0; }
figure svg { max-width: 100%; height: auto; }
figure.wide svg { width: 100%; max-width: 900px; }
figcaption { color: #5b6475; font-size: 0.85em; }
footer { color: #5b6475; font-size: 0.8em; margin-top: 2em; }
"""

UNITS = (("_rps", "req/s"), ("_gbps", "Gbps"), ("_usd_per_hour", "USD/h"), ("_usd", "USD"), ("_tokens", "tokens"),
         ("_s", "s"), ("_x", "x"), ("_bytes", "bytes"), ("_per_s", "/s"))
# keys whose suffix does not say their unit: the CLI tables' headers
HEADERS = {"rps": "req/s", "of_best": "of best", "rps_per_chip": "req/s per chip",
           "rps_per_musd": "req/s per $1M capex", "output_tokens_per_usd_cloud": "output tokens per cloud $",
           "tpot_ms": "TPOT (ms)"}


def _is_fraction(key: str) -> bool:
    """Keys whose values are fractions, shown as percentages."""
    return key.endswith(("_share", "utilization", "_fraction")) or key in ("load", "offloaded", "of_best")


@dataclass
class Result:
    """What a page shows, whatever the result's shape."""

    kind: str                              # size | layout | compare | reproduce | simulate | fit | sweep | result
    sections: dict[str, list[dict]]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    source: str = ""


FIT_COMMANDS = ("calibrate", "check")  # predicted vs measured per point


def _kind(sections: dict, meta: dict) -> str:
    """The page to build: from ``meta.command`` when present, else from the sections' names."""
    command = meta.get("command") if isinstance(meta, dict) else None
    if "sites" in sections and "plan" not in sections:  # size (or compare, simulate) --layout FILE
        return "layout"
    if command in ("size", "compare", "reproduce", "sweep", "simulate"):
        return command
    if command in FIT_COMMANDS:
        return "fit"
    if "summary" in sections and "timeline" in sections:
        return "simulate"
    if any(measured_pairs(rows) for rows in sections.values()):
        return "fit"
    if "figures" in sections:
        return "reproduce"
    if "compare" in sections:
        return "compare"
    if "plan" in sections:
        return "size"
    return "result"


MEASURED, PREDICTED = "_measured", "_predicted"


def measured_pairs(rows: list[dict]) -> list[tuple[str, str, str]]:
    """``(quantity, measured key, predicted key)`` for every ``<q>_measured<unit>`` column with a
    ``<q>_predicted<unit>`` beside it (``ttft_measured_s``/``ttft_predicted_s``: calibrate's, check's)."""
    keys = list(dict.fromkeys(k for r in rows[:50] for k in r))
    out = []
    for k in keys:
        if MEASURED in k:
            q, unit = k.split(MEASURED, 1)
            other = f"{q}{PREDICTED}{unit}"
            if other in keys:
                out.append((q, k, other))
    return out


def _as_sections(body) -> dict[str, list[dict]]:
    if isinstance(body, dict):
        secs = body["sections"] if "sections" in body else {k: v for k, v in body.items()
                                                             if k not in ("meta", "notes", "warnings")}
    else:
        secs = body
    if isinstance(secs, list):  # [{"name": ..., "rows": [...]}, ...]
        secs = {s.get("name", f"section {i + 1}"): s.get("rows", []) for i, s in enumerate(secs) if isinstance(s, dict)}
    if not isinstance(secs, dict):
        raise PlanError("result: expected named sections of rows")
    out = {}
    for name, rows in secs.items():
        if isinstance(rows, dict):
            rows = [rows]
        if isinstance(rows, list) and all(isinstance(r, dict) for r in rows):
            out[str(name)] = rows
    return out


def _text_list(v) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    out = []
    for x in v:
        out.append(x if isinstance(x, str) else (x.get("message") or json.dumps(x)) if isinstance(x, dict) else str(x))
    return out


def result_from_json(doc, source: str = "") -> Result:
    """A `Result` from a command's JSON document (current shape or the meta/warnings/result envelope)."""
    if not isinstance(doc, dict):
        raise PlanError(f"{source}: expected a JSON object from size, compare or reproduce `format` json")
    body = doc.get("result", doc)
    meta = dict(doc.get("meta") or {})
    if isinstance(body, dict) and isinstance(body.get("meta"), dict):
        meta = {**body["meta"], **meta}
    sections = _as_sections(body)
    if not sections:
        raise PlanError(f"{source}: no sections of rows found (is it the JSON of size, compare or reproduce?)")
    notes = _text_list(body.get("notes") if isinstance(body, dict) else None)
    if body is not doc:
        notes += _text_list(doc.get("notes"))
    warnings = _text_list(doc.get("warnings")) + (_text_list(body.get("warnings")) if body is not doc else [])
    warnings += [n for n in notes if n.upper().startswith("WARNING")]
    notes = [n for n in notes if not n.upper().startswith("WARNING")]
    return Result(_kind(sections, meta), sections, notes, list(dict.fromkeys(warnings)), meta, source)


def result_from_rows(rows: list[dict], source: str = "", meta: dict | None = None) -> Result:
    """A `Result` from a sweep's rows; ``meta`` may carry the spec's ``description`` and ``axes``."""
    if not rows or "point_key" not in rows[0]:
        raise PlanError(f"{source}: not a sweep output (no point_key column)")
    return Result("sweep", {"points": rows}, meta=dict(meta or {}), source=source)


def load_result(path: str, sweep_schema=None) -> Result:
    """Read a result file: ``.json`` (size/compare/reproduce) or ``.parquet``/``.csv`` (sweep;
    ``sweep_schema``, a `rowfile.TableSchema`, types its CSV cells)."""
    from .rowfile import read_metadata, read_table

    p = Path(path)
    from .result_checks import check_json, check_sweep_rows

    if p.suffix.lower() in (".parquet", ".csv"):
        rows = read_table(p, sweep_schema.typed if sweep_schema else None, strict=True)
        res = result_from_rows(rows, p.name, read_metadata(p) if rows else None)
        checked = [n for n, _ in (sweep_schema.typed if sweep_schema else [])
                   if n not in ("point_index", "row_check", "pareto", "pareto_metrics")]
        res.warnings += check_sweep_rows(rows, res.meta, p.name, checked)
        return res
    doc = read_json(path, "the `format` json output of size, compare or reproduce, or a sweep's .parquet/.csv")
    res = result_from_json(doc, p.name)
    check_json(doc, res.sections, res.meta, p.name)
    return res


# ---------------------------------------------------------------------------------------------------
# Formatting


def e(text) -> str:
    return html.escape(str(text), quote=True)


def header(key: str) -> str:
    """``throughput_rps`` -> ``throughput (req/s)``."""
    if key in HEADERS:
        return HEADERS[key]
    for suffix, unit in UNITS:
        if key.endswith(suffix) and len(key) > len(suffix):
            return f"{key[: -len(suffix)].replace('_', ' ')} ({unit})"
    return key.replace("_", " ")


def fmt(v, key: str = "") -> str:
    """A cell for reading: percentages for shares, thousands separators, four significant digits."""
    if v is None or v == "":
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        x = float(v)
        if math.isnan(x):
            return "–"
        if math.isinf(x):
            return "∞" if x > 0 else "−∞"
        if _is_fraction(key) and abs(x) <= 1.5:
            return f"{x:.1%}"
        if key.endswith("_usd") and abs(x) >= 1000:
            return f"${x / 1e6:,.2f}M" if abs(x) >= 1e6 else f"${x:,.0f}"
        if isinstance(v, int) or (x.is_integer() and abs(x) >= 1000):
            return f"{x:,.0f}"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        return f"{x:.4g}"
    return json.dumps(v)


def interval(row: dict, key: str):
    """An error bar of ``key`` if the row has one: ``key_low``/``key_high``, ``_lo``/``_hi``, or
    ``key_interval`` as a pair or mapping {low, high}. None when the planner gave none."""
    for lo, hi in (("_low", "_high"), ("_lo", "_hi"), ("_min", "_max")):
        if row.get(key + lo) is not None and row.get(key + hi) is not None:
            return row[key + lo], row[key + hi]
    iv = row.get(key + "_interval")
    if isinstance(iv, (list, tuple)) and len(iv) == 2:
        return tuple(iv)
    if isinstance(iv, dict) and "low" in iv and "high" in iv:
        return iv["low"], iv["high"]
    return None


NONFINITE = "_nonfinite"  # the envelope writes inf as null plus "<key>_nonfinite": "inf" (docs/output.md)


def cell_value(row: dict, key: str):
    """``row[key]``, with a non-finite number restored from its ``<key>_nonfinite`` companion."""
    v = row.get(key)
    if v is None and row.get(key + NONFINITE) is not None:
        return float(row[key + NONFINITE])
    return v


def _cell_html(r: dict, c: str, extra: str = "") -> str:
    v = cell_value(r, c)
    cls = " ".join(x for x in ("t" if isinstance(v, str) else "", extra) if x)
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{e(fmt(v, c))}</td>"


def table(rows: list[dict], columns: list[str] | None = None, highlight=None, transpose: bool = False) -> str:
    """Rows as an HTML table (every key when ``columns`` is None); ``highlight(row)`` marks rows.
    ``transpose`` shows one column per row (the first column's values as headers), for a few records
    with many fields, such as layouts side by side."""
    if not rows:
        return "<p>(no rows)</p>"
    cols = columns or [k for k in dict.fromkeys(k for r in rows for k in r) if not k.endswith(NONFINITE)]
    marked = [bool(highlight and highlight(r)) for r in rows]
    if transpose:
        head = f'<th class="row">{e(header(cols[0]))}</th>' + "".join(
            f'<th{" class=hl" if m else ""}>{e(fmt(cell_value(r, cols[0]), cols[0]))}</th>'
            for r, m in zip(rows, marked))
        body = [f'<tr><th class="row">{e(header(c))}</th>'
                + "".join(_cell_html(r, c, "hl" if m else "") for r, m in zip(rows, marked)) + "</tr>"
                for c in cols[1:]]
    else:
        head = "".join(f"<th>{e(header(c))}</th>" for c in cols)
        body = [f'<tr{" class=hl" if m else ""}>' + "".join(_cell_html(r, c) for c in cols) + "</tr>"
                for r, m in zip(rows, marked)]
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def configuration_table(configs: list[dict]) -> str:
    """The ``configurations`` section as a table, a prefill role's batch (0 in the JSON: prefill packs
    prompts by the stack's token budget, it has no running-request cap) shown as a dash, as the CLI does."""
    return table([{**c, "batch": c.get("batch") or None} if c.get("role") == "prefill" else c for c in configs])


def key_value_table(pairs) -> str:
    body = "".join(f'<tr><td class="t">{e(k)}</td><td class="t">{e(v)}</td></tr>' for k, v in pairs)
    return f'<div class="scroll"><table class="kv"><tbody>{body}</tbody></table></div>'


def card(label: str, value: str, bar=None) -> str:
    extra = f'<div class="e">error bar {e(bar)}</div>' if bar else ""
    return f'<div class="card"><div class="v">{e(value)}</div><div class="k">{e(label)}</div>{extra}</div>'


def card_for(row: dict, key: str, label: str) -> str:
    iv = interval(row, key)
    bar = f"{fmt(iv[0], key)} – {fmt(iv[1], key)}" if iv else None
    return card(label, fmt(cell_value(row, key), key), bar)


def figure(svg: str, caption: str, wide: bool = False) -> str:
    """An inline SVG plot with its caption (the SVG is our own matplotlib output, not user text);
    ``wide`` stretches it to the page width."""
    cls = ' class="wide"' if wide else ""
    return f"<figure{cls}>{svg}<figcaption>{e(caption)}</figcaption></figure>"


def notes_list(notes: list[str], cls: str = "notes") -> str:
    return f'<ul class="{cls}">' + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>"


def page(title: str, subtitle: str, body: list[str]) -> str:
    """The whole document."""
    from .. import __version__

    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{e(title)}</title>"
            f"<style>{STYLE}</style></head><body><main><h1>{e(title)}</h1><p class=\"sub\">{e(subtitle)}</p>"
            + "\n".join(body)
            + f"<footer>Generated by prfaas-plan {e(__version__)} report. Self-contained: no scripts, fonts "
              "or network needed to view.</footer></main></body></html>\n")
