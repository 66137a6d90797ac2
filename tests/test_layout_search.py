"""The configuration search of a layout file (issue 22 item 2, issue 21 item 1 per site;
`planning.layout_search`): every role searched per site unless the file pins it, the searched answer at
least every pinned shape's on the same layout, a one-site layout equal to one-site `size`, and the
``configurations`` section in table, JSON and the report page."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from prfaas_plan.performance.base import Instance
from prfaas_plan.planning import Question, SearchSpec
from prfaas_plan.planning import layout_configurations, search_layout

EXAMPLES = Path(__file__).parent.parent / "examples"
THREE = EXAMPLES / "three-sites.yaml"
KEYS = {"role", "site", "chips_per_instance", "tp", "ep", "dp_attention", "attention_dp", "batch", "weight_dtype",
        "kv_dtype"}
# The searched plan may lose to a pinned one only by the solver's tolerance: the linear programs are solved
# to HiGHS's relative MIP gap 1e-4 (analytic/lp.py MIP_REL_GAP), so 0.1% (the issue's) is well above it.
TOL = 1e-3


@pytest.fixture(scope="module")
def three():
    q = Question.from_layout(THREE)
    return q.layout, q.scenario, search_layout(q.layout, q.scenario)


def _pinned(lay, remote_chips: int, site_chips: tuple[int, ...]):
    """``lay`` with every role's chips per instance pinned (the file's chips regrouped, split halved)."""
    r = lay.remote
    remote = replace(r, instance=Instance(r.instance.chip, remote_chips),
                     instances=r.instance.chips * r.instances // remote_chips, pin_chips=True)
    sites = []
    for s, n in zip(lay.pd_sites, site_chips):
        total = s.instance.chips * s.instances // n
        sites.append(replace(s, instance=Instance(s.instance.chip, n), prefill=total // 2,
                             decode=total - total // 2, pin_chips=True))
    return replace(lay, remote=remote, pd_sites=tuple(sites))


@pytest.mark.parametrize("remote_chips, site_chips", [
    (8, (8, 8, 8)),          # the file's own shapes (the search's parallelism still applies)
    (4, (4, 4, 4)), (16, (16, 16, 16)), (1, (2, 2, 2)),
    (2, (4, 8, 16)), (8, (16, 4, 2)),
])
def test_the_searched_layout_serves_at_least_every_pinned_shape(three, remote_chips, site_chips):
    """Pinning a role's chips per instance takes candidates away: the search over all of them never serves
    less (within `TOL`); the same holds for all 320 combinations of remote 1/2/4/8/16 x sites 2/4/8/16
    (checked while writing the search; a sample here keeps the test fast)."""
    lay, sc, found = three
    pinned = search_layout(_pinned(lay, remote_chips, site_chips), sc)
    assert found.lambda_rps >= pinned.lambda_rps * (1 - TOL)
    assert all(r.chips_per_instance == n for r, n in zip(pinned.roles[1::2], site_chips))   # the pins held


def test_the_search_is_at_least_the_files_fixed_configuration(three):
    """The file's shapes in the fixed TP configuration (the answer before the search) are a finalist: solved,
    or left out because its relaxation cannot beat the chosen plan."""
    from prfaas_plan.planning.layouts import plan_layout

    lay, sc, found = three
    fixed = plan_layout(lay, sc)[0].lambda_rps
    assert found.fixed_bound_rps >= fixed * (1 - 1e-9)          # its relaxation bounds it
    assert found.fixed_rps is None or found.fixed_rps == pytest.approx(fixed, rel=1e-9)
    assert found.lambda_rps >= fixed * (1 - TOL)
    assert found.lambda_rps > 1.5 * fixed     # DP attention and smaller shapes: far more for kimi-linear here


def test_the_chosen_layout_runs_the_recorded_configuration(three):
    """Each site's performance model is the chosen configuration's: the decode batch the records give is the
    site's decode capacity, the bytes follow the attention mode, and the chips per site are the file's."""
    lay, sc, found = three
    by = {(r.site, r.role): r for r in found.roles}
    assert len(found.roles) == 1 + 2 * len(lay.pd_sites)
    for before, s in zip(lay.pd_sites, found.layout.pd_sites):
        d = by[(s.name, "decode")]
        assert s.instance.chips == d.chips_per_instance == by[(s.name, "prefill")].chips_per_instance
        assert s.instance.chips * s.instances == before.instance.chips * before.instances
        assert found.perf.sites[s.name].decode.batch == pytest.approx(d.batch, abs=1)
        assert s.transfer == ("dp-attention" if d.dp_attention else "replicated")
    r = found.layout.remote
    assert r.instance.chips * r.instances == lay.remote.instance.chips * lay.remote.instances
    assert found.result.lambda_rps == pytest.approx(found.lambda_rps, rel=1e-12)


def test_a_pinned_transfer_policy_pins_the_decode_attention_mode(three):
    lay, sc, _ = three
    found = search_layout(lay, sc, SearchSpec(transfer="replicated"))
    assert not any(r.dp_attention for r in found.roles)
    assert {s.transfer for s in found.layout.pd_sites} == {"replicated"}


def test_search_false_keeps_the_files_shapes(cli, tmp_path):
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(THREE.read_text().replace("threshold: auto", "threshold: auto\nsearch: false"))
    code, out, err = cli("size", "--layout", str(fixed), "--samples", "0", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert "configurations" not in doc["sections"]
    assert {r["instance"] for r in doc["sections"]["sites"] if r["site"] not in ("total",)} <= {"8xH20", "8xH200"}


def test_pin_chips_keeps_one_sites_shape(cli, tmp_path):
    p = tmp_path / "pin.yaml"
    p.write_text(THREE.read_text().replace("{name: far, instance: 8xH20,",
                                           "{name: far, instance: 8xH20, pin_chips: true,"))
    code, out, err = cli("size", "--layout", str(p), "--samples", "0", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rows = {r["site"]: r for r in doc["sections"]["sites"]}
    configs = {(r["site"], r["role"]): r for r in doc["sections"]["configurations"]}
    assert rows["far"]["instance"] == "8xH20" and configs[("far", "decode")]["chips_per_instance"] == 8
    assert any("pinned: far 8 chips per instance" in n for n in doc["notes"])


def test_three_sites_configurations_in_table_json_and_report(cli, tmp_path):
    """Issue 22 / 21: one record per role and site, keys as `size`'s; the table names them and the report page
    shows them without a 'None'."""
    code, out, err = cli("size", "--layout", str(THREE), "--samples", "50", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    rows = doc["sections"]["configurations"]
    assert all(set(r) == KEYS for r in rows)
    assert [(r["site"], r["role"]) for r in rows] == [("remote", "prefill")] + [
        (s, role) for s in ("near", "metro", "far") for role in ("prefill", "decode")]
    sites = {r["site"]: r for r in doc["sections"]["sites"]}
    for r in rows:
        if r["site"] != "remote":
            assert sites[r["site"]]["instance"] == f"{r['chips_per_instance']}xH20"
    assert any(n.startswith("configuration search per role and site") for n in doc["notes"])
    src = tmp_path / "three.json"
    src.write_text(out)
    code, _, err = cli("report", str(src), "-o", str(tmp_path / "three.html"))
    assert code == 0, err
    page = (tmp_path / "three.html").read_text()
    assert "Configuration per role and site" in page and "None" not in page
    code, table, err = cli("size", "--layout", str(THREE), "--samples", "0")
    assert code == 0 and "Configuration per role and site" in table


def test_compare_layout_searches_too(cli):
    code, out, err = cli("compare", "--layout", str(THREE), "--samples", "0", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["sections"]["configurations"]) == 7 and "compare" in doc["sections"]


def test_a_one_site_layout_is_one_site_size(cli):
    """`size --layout` of one PD site is `size` of the same chips, link and rtt: the same plan and the same
    configuration per role, figure for figure."""
    def run(*args):
        code, out, err = cli("size", *args, "--samples", "0", "--format", "json")
        assert code == 0, err
        return json.loads(out)["sections"]

    a = run("--layout", str(EXAMPLES / "one-site.yaml"))
    b = run("--remote", "16xH200", "--local", "64xH20", "--link", "40G", "--rtt", "2ms")
    assert a["plan"] == b["plan"] and a["configurations"] == b["configurations"]
    assert a["configurations"][2]["dp_attention"] is True          # searched, not the fixed TP8


def test_layout_configurations_is_what_simulate_can_replay(three):
    from prfaas_plan.planning import answer_layout

    q = Question.from_layout(THREE)
    a = answer_layout(q, samples=0, search=SearchSpec())
    assert layout_configurations(a) == three[2].roles
    assert layout_configurations(answer_layout(q, samples=0)) is None     # not searched: the file's shapes
    one = answer_layout(Question.from_layout(EXAMPLES / "one-site.yaml"), samples=0, search=SearchSpec())
    assert [r.site for r in layout_configurations(one)] == ["remote", "local", "local"]


@pytest.mark.parametrize("line, needle", [
    ("  - {name: x, instance: 8xH20, prefill: 3, decode: 5, pin_chips: 'on', link: {bandwidth: 10G}}",
     "pin_chips"),
    ("  - {name: x, instance: 8xH20, prefill: 3, decode: 5, pin_chip: true, link: {bandwidth: 10G}}",
     "did you mean pin_chips"),
])
def test_bad_pins_are_one_line(cli, tmp_path, line, needle):
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\nremote: {instance: 8xH200, instances: 2}\nsites:\n" + line + "\n")
    code, out, err = cli("size", "--layout", str(p))
    assert code == 2 and out == "" and needle in err and len(err.strip().splitlines()) == 1
