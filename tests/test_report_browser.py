"""Every command's report page rendered in headless Chromium (tests/browser.py): no JavaScript error,
no request outside the page, no "None"/"NaN"/"undefined" or a lone "?" standing for a missing value in
the visible text, no table wider than its box, every figure drawn. Each page is also written as PNG.

Chromium comes from Debian's ``chromium`` package (``.ci/run`` installs it); the test is skipped only
where no Chromium-family browser is on PATH.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from browser import Browser, find_chromium  # noqa: E402

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium; "
                                                          ".ci/run installs it)")
EXAMPLES = Path(__file__).parent.parent / "examples"

# (page name, command line, file name); small runs, so the whole test stays well under 30 s
COMMANDS = [
    ("size", ["size", "--model", "kimi-linear", "--link", "40G", "--samples", "50", "--format", "json"], "json"),
    ("layout", ["size", "--layout", str(EXAMPLES / "two-sites.yaml"), "--format", "json"], "json"),
    # issue 22: size and compare of a three-site layout, each with per-site TTFT, cost and the verdict
    ("layout-three", ["size", "--layout", str(EXAMPLES / "three-sites.yaml"), "--samples", "50", "--format", "json"],
     "json"),
    ("compare-layout", ["compare", "--layout", str(EXAMPLES / "three-sites.yaml"), "--samples", "50", "--format",
                        "json"], "json"),
    ("compare", ["compare", "--model", "kimi-linear", "--samples", "50", "--format", "json"], "json"),
    ("reproduce", ["reproduce", "--format", "json"], "json"),
    ("simulate", ["simulate", "--duration", "120s", "--format", "json"], "json"),
    ("simulate-layout", ["simulate", "--layout", str(EXAMPLES / "three-sites.yaml"), "--duration", "120s",
                         "--scheduler", "adaptive", "--rebalance", "40s", "--compare", "static,threshold",
                         "--format", "json"], "json"),
    ("calibrate", ["calibrate", "--measurements", "nvidia_silicon_sample_subset.csv", "--no-loo",
                   "--format", "json"], "json"),
    ("check", ["check", "nvidia_silicon_sample_subset.csv", "--format", "json"], "json"),
]
MISSING = re.compile(r"\b(None|NaN|nan|undefined|null)\b|(^|[\s(:=])\?(?=[\s),.;]|$)", re.M)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Every page, rendered and checked once: {name: (findings, png path)}."""
    from prfaas_plan.cli import run

    out = tmp_path_factory.mktemp("pages")
    sources = {}
    for name, args, _ in COMMANDS:
        path = out / f"{name}.json"
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            code = run(args)
        assert code in (0, 1), (name, code)
        path.write_text(buf.getvalue())
        sources[name] = path
    sweep = out / "sweep.parquet"
    with contextlib.redirect_stdout(io.StringIO()):
        assert run(["sweep", str(EXAMPLES / "sweep-links.yaml"), "-o", str(sweep), "--no-progress",
                    "--pareto", "cost_per_mtok_usd,ttft_unloaded_p90_s"]) == 0
    sources["sweep"] = sweep
    found = {}
    with Browser(CHROMIUM) as browser:
        for name, source in sources.items():
            html = out / f"{name}.html"
            with contextlib.redirect_stdout(io.StringIO()):
                assert run(["report", str(source), "-o", str(html)]) == 0
            png = out / f"{name}.png"
            found[name] = (browser.check_page(html, png), png)
    return found


NAMES = [c[0] for c in COMMANDS] + ["sweep"]


@pytest.mark.parametrize("name", NAMES)
def test_page_renders_cleanly_in_chromium(pages, name):
    found, png = pages[name]
    assert found["errors"] == [], found["errors"]
    assert found["requests"] == [], f"the page asked for {found['requests']}"
    bad = [m.group(0) for m in MISSING.finditer(found["text"])]
    context = [found["text"][max(0, m.start() - 60): m.end() + 20] for m in MISSING.finditer(found["text"])]
    assert not bad, context[:5]
    assert found["overflow"] == [], found["overflow"]
    assert found["svgs"] >= 1 and found["empty_svgs"] == 0
    for heading in ("The question", "The answer"):
        assert heading in found["text"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_the_checks_catch_what_they_look_for(tmp_path):
    """The checks fail where they should: a script error, a None, a lone ?, an overflowing table."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><main style='width:300px'><div class='scroll' style='overflow-x:auto'>"
                   "<table><tr><td>" + "x" * 400 + "</td></tr></table></div><p>t is None; the ? stage binds</p>"
                   "</main><script>undefinedFunction()</script></body></html>")
    with Browser(CHROMIUM) as browser:
        found = browser.check_page(bad)
    assert found["errors"] and "undefinedFunction" in found["errors"][0]
    assert found["overflow"]
    assert [m.group(0).strip() for m in MISSING.finditer(found["text"])] == ["None", "?"]


@pytest.mark.parametrize("name", ["layout-three", "compare-layout"])
def test_three_site_layout_pages_answer_per_site(pages, name):
    """Issue 22 Done-when: a three-site layout's page gives each site's binding stage, TTFT and cost, and
    the verdict against the baselines."""
    text = pages[name][0]["text"]
    for site in ("near", "metro", "far"):
        assert re.search(rf"{site} [0-9.]+ req/s, .*? binds, TTFT P90 [0-9.]+ s", text), site
    assert "cost" in text.lower() and "capex" in text.lower()
    assert re.search(r"verdict vs homogeneous-equal-\w+", text)
    assert "sites-alone" in text
