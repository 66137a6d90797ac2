"""``report``: one self-contained HTML page per result kind, read back with html.parser."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from prfaas_plan.output.html import load_result, result_from_json
from prfaas_plan.output.html_pages import build_html

PAPER = ("--model", "prfaas-1t", "--inputs", "paper")
EXAMPLE = Path(__file__).parent.parent / "examples" / "sweep-links.yaml"


class Page(HTMLParser):
    """Headings, tables (as lists of rows of cell texts), list items, tags and attributes seen."""

    def __init__(self, text: str):
        super().__init__()
        self.h2, self.tables, self.items, self.tags, self.attrs = [], [], [], [], []
        self._text, self._cell, self._row = None, None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs
        if tag in ("h2", "li"):
            self._text = []
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self._row = []
            self.tables[-1].append(self._row)
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "h2":
            self.h2.append("".join(self._text).strip())
            self._text = None
        elif tag == "li":
            self.items.append("".join(self._text).strip())
            self._text = None
        elif tag in ("td", "th"):
            self._row.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _json(cli, tmp_path, *args) -> Path:
    code, out, err = cli(*args, "--format", "json")
    assert code in (0, 1), err
    path = tmp_path / f"{args[0]}.json"
    path.write_text(out)
    return path


def _report(cli, tmp_path, source: Path) -> Page:
    out = tmp_path / "report.html"
    code, stdout, err = cli("report", str(source), "--output", str(out))
    assert code == 0, err
    return Page(out.read_text())


def _self_contained(page: Page) -> None:
    assert not {"script", "link", "img", "iframe", "object"} & set(page.tags)
    for name, value in page.attrs:
        assert name not in ("src", "href"), (name, value)
    assert "style" in page.tags  # inline: the page's own and the SVGs' (matplotlib writes one per figure)


COMMON = ["The question", "The answer", "Assumptions and data sources"]


def test_size_report_has_question_answer_stages_plot_and_every_note(cli, tmp_path):
    source = _json(cli, tmp_path, "size", *PAPER)
    page = _report(cli, tmp_path, source)
    _self_contained(page)
    assert all(h in page.h2 for h in COMMON + ["Stage table"])
    assert any(h.startswith("Warnings") for h in page.h2)
    stage_table = next(t for t in page.tables if t[0][:2] == ["stage", "bound (req/s)"])
    assert [r[0] for r in stage_table[1:]] == ["remote_prefill", "link", "local_prefill", "local_decode"]
    assert page.tags.count("svg") >= 1
    doc = json.loads(source.read_text())
    shown = " ".join(page.items) + " ".join(c for t in page.tables for r in t for c in r)
    for note in doc["notes"]:  # verbatim, or as an input's value marked default
        value = note.split(": ", 1)[-1]
        assert note in shown or (note.startswith("default ") and f"{value} (default)" in shown), note


def test_compare_and_reproduce_reports(cli, tmp_path):
    page = _report(cli, tmp_path, _json(cli, tmp_path, "compare", *PAPER))
    _self_contained(page)
    assert all(h in page.h2 for h in COMMON + ["Layouts"])
    layouts = next(t for t in page.tables if t[0][0] == "layout")
    assert layouts[0][1:] == ["prfaas-pd", "local-alone", "homogeneous-equal-capex",
                              "naive-heterogeneous"]  # one column per layout, one basis
    page = _report(cli, tmp_path, _json(cli, tmp_path, "reproduce"))
    assert all(h in page.h2 for h in COMMON + ["Published vs ours"])
    figures = next(t for t in page.tables if t[0][0] == "figure")
    assert len(figures) > 5 and page.tags.count("svg") >= 1


def test_sweep_report_shows_front_plots_and_reasons(cli, tmp_path):
    rows = tmp_path / "r.parquet"
    code, out, err = cli("sweep", str(EXAMPLE), "--output", str(rows), "--no-progress",
                         "--pareto", "cost_per_mtok_usd,ttft_unloaded_p90_s")
    assert code == 0, err
    page = _report(cli, tmp_path, rows)
    _self_contained(page)
    assert all(h in page.h2 for h in COMMON + ["Plots"])
    front = next(h for h in page.h2 if h.startswith("Pareto front"))
    n_front = int(front.split("(")[1].split()[0])
    all_points = next(t for t in page.tables if t[0][:2] == ["link", "remote"] and len(t) == 7)
    assert sum(r[-1] == "yes" for r in all_points[1:]) == n_front
    assert page.tags.count("svg") == 1
    assert "Which link and how many rented H200" in (tmp_path / "report.html").read_text()  # the spec's question


def test_envelope_with_meta_and_warnings_is_read_like_the_plain_shape(cli, tmp_path):
    plain = json.loads(_json(cli, tmp_path, "size", *PAPER).read_text())
    envelope = {"meta": {"command": "size", "version": "9.9"}, "warnings": [{"message": "an enveloped warning"}],
                "result": {"sections": plain["sections"], "notes": plain["notes"]}}
    a, b = result_from_json(plain, "x"), result_from_json(envelope, "x")
    assert a.kind == b.kind == "size" and a.sections == b.sections
    assert b.warnings[0] == "an enveloped warning" and set(a.warnings) <= set(b.warnings)
    assert b.meta["version"] == "9.9"


def test_the_documented_envelope_renders_inputs_codes_and_nonfinite_values():
    """The shape of docs/output.md (meta.inputs, coded warnings, null + <key>_nonfinite)."""
    doc = {"meta": {"tool": "prfaas-plan", "command": "compare", "model": "kimi-linear-48b",
                    "inputs": {"link": {"value": "40G", "default": False}, "tpot": {"value": "25ms", "default": True},
                               "instance_chips": {"value": 8, "default": True,
                                                  "replaced_by": "the configuration search"},
                               "fmt": {"value": "json", "default": False}},
                    "data_sources": {"profiles": ["model_profiles", "hardware_profiles"]}},
           "warnings": [{"code": "prfaas-not-better", "message": "PrfaaS-PD does not beat homogeneous-pd"}],
           "sections": {"compare": [
               {"layout": "prfaas-pd", "threshold_tokens": 45000.0, "throughput_rps": 27.3, "prfaas_speedup_x": 1.0},
               {"layout": "homogeneous-pd", "threshold_tokens": None, "threshold_tokens_nonfinite": "inf",
                "throughput_rps": 28.8, "prfaas_speedup_x": 0.95}]},
           "notes": ["workload paper: log-normal"]}
    page = Page(build_html(result_from_json(doc, "c.json")))
    cells = [c for t in page.tables for r in t for c in r]
    assert "40G" in cells and "25ms (default)" in cells and "json" not in cells
    assert "chosen by the configuration search (the answer gives it)" in cells and "8 (default)" not in cells
    assert "∞" in cells and not any("nonfinite" in c for c in cells)
    assert "PrfaaS-PD does not beat homogeneous-pd" in page.items
    assert "data source (profiles): model_profiles, hardware_profiles" in page.items


def test_everything_from_the_result_is_escaped():
    doc = {"sections": {"plan": [{"layout": "<b>x</b>", "throughput_rps": 1.0}]},
           "notes": ["<script>alert(1)</script>", "WARNING: <img src=x>"]}
    page = Page(build_html(result_from_json(doc, "<evil>.json")))
    _self_contained(page)
    assert "<script>alert(1)</script>" in page.items and "WARNING: <img src=x>" in page.items


@pytest.mark.parametrize("content, suffix, message", [
    ("not json", ".json", "not JSON"),
    ("[1, 2]", ".json", "expected a JSON object"),
    ('{"notes": []}', ".json", "no sections of rows"),
    ("a,b\n1,2\n", ".csv", "not a sweep output"),
])
def test_unreadable_results_are_one_line(cli, tmp_path, content, suffix, message):
    path = tmp_path / f"r{suffix}"
    path.write_text(content)
    code, out, err = cli("report", str(path), "--output", str(tmp_path / "r.html"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_output_must_be_html(cli, tmp_path):
    code, out, err = cli("report", str(EXAMPLE), "--output", str(tmp_path / "r.pdf"))
    assert code == 2 and ".html" in err


def test_load_result_reads_csv_sweeps(cli, tmp_path):
    rows = tmp_path / "r.csv"
    assert cli("sweep", str(EXAMPLE), "--output", str(rows), "--no-progress")[0] == 0
    from prfaas_plan.planning.sweep import SCHEMA

    res = load_result(str(rows), SCHEMA)
    assert res.kind == "sweep" and len(res.sections["points"]) == 6


def test_any_predicted_vs_measured_section_gets_the_fit_page():
    """``check`` (being written) reports per-point predicted and measured columns like calibrate's: the
    page recognizes them without knowing the command, plots them and gives the median |error| of the rows."""
    rows = [{"model": "m", "instance": "8xH20", "len_tokens": n, "ttft_measured_s": 1.0 * n,
             "ttft_predicted_s": 1.0 * n * (1 + err), "ttft_error": err}
            for n, err in ((1, 0.1), (2, -0.3), (4, 0.2))]
    page = Page(build_html(result_from_json({"sections": {"points": rows}, "notes": []}, "check.json")))
    _self_contained(page)
    assert "Predicted vs measured" in page.h2 and page.tags.count("svg") == 1
    text = "".join(c for t in page.tables for r in t for c in r)
    assert "ttft measured (s)" in text
    html = build_html(result_from_json({"meta": {"command": "check"}, "sections": {"points": rows}}, "c.json"))
    assert "TTFT median |error| 20% in-sample (3 points)" in html
