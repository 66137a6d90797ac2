"""A layout file as a sweep's base (issue 22 item 3): points planned as ``size --layout`` plans them, the
inputs the file replaces refused beside it, and the keys of specs without a layout unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from prfaas_plan.planning import sweep as S

ROOT = Path(__file__).parent.parent
THREE = str(ROOT / "examples" / "three-sites.yaml")


def _rows(spec: dict) -> list[dict]:
    return [S.evaluate(p) for p in S.points(S.parse_spec(spec))]


def test_a_layout_point_is_size_layouts_plan():
    from prfaas_plan.planning import Question, answer_layout

    row, = _rows({"base": {"layout": THREE}})
    a = answer_layout(Question.from_layout(THREE), samples=0)
    assert row["error"] is None
    assert row["throughput_rps"] == pytest.approx(a.result.lambda_rps, rel=1e-9)
    assert row["gain_vs_homogeneous"] == pytest.approx(a.figures.baselines[2].gain, rel=1e-9)
    assert row["basis"] == "capex" and row["remote_chips"] == 32 and row["local_chips"] == 192
    assert row["binding_stage"] == ", ".join(f"{s.name}: {s.binding}" for s in a.figures.sites)
    assert row["threshold_tokens"] is None and row["link_gbps"] is None


def test_link_scale_and_remote_instances_vary_the_file():
    rows = _rows({"base": {"layout": THREE}, "grid": {"remote_instances": [0, 2, 4], "link_scale": [0.25, 1.0]}})
    by = {(r["remote_instances"], r["link_scale"]): r for r in rows}
    assert all(r["error"] is None for r in rows)
    # no remote instance: nothing offloaded, the link does not matter
    assert by[(0, 0.25)]["offloaded_share"] == 0 and by[(0, 0.25)]["throughput_rps"] == by[(0, 1.0)]["throughput_rps"]
    for scale in (0.25, 1.0):   # more remote instances never serve less
        assert by[(0, scale)]["throughput_rps"] <= by[(2, scale)]["throughput_rps"] <= by[(4, scale)]["throughput_rps"]
    assert by[(4, 0.25)]["throughput_rps"] < by[(4, 1.0)]["throughput_rps"]   # a quarter of the links binds
    assert by[(4, 0.25)]["remote_chips"] == 32 and by[(2, 1.0)]["remote_chips"] == 16


@pytest.mark.parametrize("base, needle", [
    ({"layout": THREE, "remote": "16xH200"}, "leave remote out"),
    ({"layout": THREE, "link": "10G"}, "leave link out"),
    ({"link_scale": 2.0}, "set layout too"),
    ({"remote_instances": 2}, "set layout too"),
    ({"layout": THREE, "link_scale": 0.0}, "positive factor"),
    ({"layout": THREE, "remote_instances": -5}, "expected a count"),
    ({"layout": "no-such.yaml"}, "no such file"),
])
def test_bad_layout_points_are_refused_before_any_is_planned(base, needle):
    from prfaas_plan.errors import PlanError

    with pytest.raises(PlanError, match=needle):
        S.points(S.parse_spec({"base": base}))


def test_points_without_a_layout_keep_their_keys():
    """The three layout inputs and ``link_headroom`` at their defaults are not hashed: a point's key is what
    it was before they existed, so earlier result files still resume."""
    p, = S.points(S.parse_spec({"base": {"link": "40G"}}))
    assert set(S.LAYOUT_INPUTS) | {"link_headroom"} == set(S.KEYED_WHEN_SET)
    old = {k: v for k, v in p.values.items() if k not in S.KEYED_WHEN_SET}
    text = json.dumps(old, sort_keys=True, separators=(",", ":"))
    assert p.key == hashlib.sha256(text.encode()).hexdigest()[:16]
    q, = S.points(S.parse_spec({"base": {"layout": THREE}}))
    assert q.key != p.key


def test_the_example_spec_runs(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "r.csv"
    code, _, err = cli("sweep", "examples/sweep-three-sites.yaml", "-o", str(out), "--no-progress")
    assert code == 0, err
    from prfaas_plan.output.rowfile import read_table

    rows = read_table(out, S.ROW_COLUMNS)
    assert len(rows) == 9 and all(r["error"] is None for r in rows)
    code, _, err = cli("report", str(out), "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert "three-sites.yaml" in page and ">32xH200<" not in page   # the replaced defaults are not shown as fixed
