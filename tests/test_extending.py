"""The recipes of docs/extending.md, walked as a newcomer would: each test does what one recipe says, with the
files, classes and functions it names, and checks what the recipe promises.

If a recipe's file, class, function or field changes, the matching test fails; change the recipe with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from prfaas_plan import arithmetic as A
from prfaas_plan.profiles import get_model, get_stack, kinds
from prfaas_plan.simulator import Requests, SimConfig, simulate
from prfaas_plan.simulator import schedulers as S

# --- add an attention kind ------------------------------------------------------------------------------


class DocLinear(kinds._Recurrent):
    """Step 1 of the recipe: a made-up recurrent kind sharing `_Recurrent`'s rules (a heads x d x d state
    per layer, two state-sized multiply-adds per token and head), with no short convolution."""

    name = "doc_linear"
    required = ("num_heads", "head_dim")
    state_madds = 2

    def linear_dims(self, g):
        return g.num_heads, g.head_dim, g.head_dim

    def params(self, g, hidden):
        return 4 * hidden * g.num_heads * g.head_dim      # q, k, v and o


def _model_yaml(kind: str) -> dict:
    """A model profile as the 'add a model' recipe writes it (kind: model, groups, FFN, sources)."""
    return {"kind": "model", "name": "doc-tiny", "num_layers": 4, "hidden_size": 256, "vocab_size": 1000,
            "max_context": 32768,
            "attention": [{"kind": kind, "layers": "rest", "num_heads": 8, "head_dim": 32}],
            "ffn": {"dense_intermediate": 512}, "sources": {"all": "assumed: a test model"}}


@pytest.fixture
def linear_kind():
    kinds.register(DocLinear)
    yield DocLinear
    del kinds.KINDS[DocLinear.name]


def test_attention_kind_recipe(linear_kind, tmp_path, cli):
    folder = tmp_path / "my_profiles"
    folder.mkdir()
    (folder / "doc-tiny.yaml").write_text(yaml.safe_dump(_model_yaml("doc_linear")))

    code, out, err = cli("--profiles", str(folder), "kv", "--model", "doc-tiny", "--len", "1k", "-f", "json")
    assert code == 0, err
    m = get_model("doc-tiny")
    assert m.attention[0].rule is kinds.KINDS["doc_linear"]
    state = 4 * 8 * 32 * 32 * 4                     # layers x heads x d x d x fp32 state bytes
    assert A.kv_bytes_per_token(m) == 0
    assert A.fixed_state_bytes(m) == state
    assert A.s_kv(m, 1024) == A.s_kv(m, 32768) == state          # a fixed state, whatever the length
    assert A.prefill_flops(m, 10).attention_core == 4 * 10 * 5 * 8 * 32 * 32   # layers x l x (2*2+1) x state
    assert str(state) in json.dumps(json.loads(out)["sections"])  # the CLI prints the rule's bytes


def test_an_unregistered_kind_names_the_registry(tmp_path, cli):
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "doc-tiny.yaml").write_text(yaml.safe_dump(_model_yaml("doc_linear")))
    code, _, err = cli("--profiles", str(folder), "kv", "--model", "doc-tiny")
    assert code == 2 and "doc_linear" in err and len(err.strip().splitlines()) == 1


# --- add a scheduler ------------------------------------------------------------------------------------


class EventLoopStatic:
    """The scheduler recipe's trivial scheduler: the static rule, always on the general event loop."""

    name = "doc-event-static"
    engines = ("events",)

    def run(self, requests, sysm, cfg, router, progress, engine):
        from prfaas_plan.simulator.events import run_events
        from prfaas_plan.simulator.policies import StaticConfig, StaticPolicy

        return run_events(requests, sysm, cfg, router, progress, StaticPolicy(StaticConfig(), sysm.threshold))


@pytest.fixture
def event_static():
    S.register(EventLoopStatic)
    yield EventLoopStatic
    del S.SCHEDULERS[EventLoopStatic.name]


def test_scheduler_recipe(event_static):
    from prfaas_plan.layout import Link, prfaas_pd
    from prfaas_plan.planning import case_study

    perf = case_study.case_study_perf("paper")
    layout = prfaas_pd("32xH200", "64xH20", Link(100e9))
    rng = np.random.default_rng(7)
    n = 300
    req = Requests.from_arrays(np.cumsum(rng.exponential(0.5, n)), rng.integers(1000, 60_000, n).astype(float),
                               np.full(n, 256.0))
    ours = simulate(req, layout, perf, SimConfig(16384.0, "doc-event-static"))
    static = simulate(req, layout, perf, SimConfig(16384.0, "static"))   # on the pipeline engine
    assert ours.summary()["completed"] == n                      # it conserves requests
    assert ours.summary() == static.summary()                     # the pipeline is exact for the static rule
    with pytest.raises(ValueError, match="cannot run the doc-event-static scheduler"):
        simulate(req, layout, perf, SimConfig(16384.0, "doc-event-static"), engine="pipeline")


# --- add a serving stack --------------------------------------------------------------------------------


def _stack_yaml(name: str, forward_overhead_s: float) -> dict:
    numbers = {"latency_s": 0.1, "forward_overhead_s": forward_overhead_s, "step_overhead_s": 0.004,
               "prefill_token_budget": 8192, "wave_fraction": 0.0}
    return {"kind": "stack", "name": name, "engine": "DocEngine", "versions": "1.0", "chunked_prefill": True,
            **numbers, "sources": {k: "assumed: a test stack" for k in numbers}}


def _prefill_s(cli, *args: str, folder: str | None = None) -> tuple[dict, float]:
    where = ("--profiles", folder) if folder else ()
    code, out, err = cli(*where, "rates", "--model", "kimi-linear", "--instance", "8xH200", "--len", "8k",
                         "-f", "json", *args)
    assert code == 0, err
    doc = json.loads(out)
    return doc, doc["sections"]["prefill"][0]["prefill_s"]


def test_stack_recipe(tmp_path, cli):
    folder = tmp_path / "my_profiles"
    folder.mkdir()
    (folder / "docstack.yaml").write_text(yaml.safe_dump(_stack_yaml("docstack", 0.5)))
    ours, ours_s = _prefill_s(cli, "--stack", "docstack", folder=str(folder))
    default, default_s = _prefill_s(cli)
    assert ours["meta"]["stack"] == "docstack" and default["meta"]["stack"] == "sglang"
    assert any(n.startswith("stack docstack (DocEngine 1.0)") for n in ours["notes"])
    assert any(n.startswith("default stack: sglang") for n in default["notes"])
    # one 8k prompt is one forward: the prediction moves by the two stacks' fixed latency and forward overhead
    sglang = get_stack("sglang")
    moved = (0.1 - sglang.latency_s) + (0.5 - sglang.forward_overhead_s)
    assert ours_s - default_s == pytest.approx(moved, rel=1e-9)


def test_a_stack_number_without_a_source_is_refused(tmp_path, cli):
    folder = tmp_path / "p"
    folder.mkdir()
    doc = _stack_yaml("docstack", 0.5)
    del doc["sources"]["step_overhead_s"]
    (folder / "docstack.yaml").write_text(yaml.safe_dump(doc))
    code, _, err = cli("--profiles", str(folder), "rates", "--model", "kimi-linear", "--instance", "8xH200",
                       "--stack", "docstack")
    assert code == 2 and "sources.step_overhead_s" in err


# --- add a chip -----------------------------------------------------------------------------------------


def _chip_yaml(calibrated: bool) -> dict:
    """The chip recipe: h20.yaml copied under a new name, with or without its calibration block."""
    doc = yaml.safe_load((Path(__file__).parents[1] / "hardware_profiles" / "h20.yaml").read_text())
    doc.update(name="docchip", display_name="Doc chip", aliases=[])
    if calibrated:
        doc["calibration"] = {"gemm_efficiency": {"bf16": 0.7, "fp8": 0.8, "attention": 0.5},
                              "memory_efficiency": 0.8, "comm_efficiency": 0.9, "source": "assumed: a test chip"}
    else:
        doc.pop("calibration")
    return doc


@pytest.mark.parametrize("calibrated", [True, False])
def test_chip_recipe(tmp_path, cli, calibrated):
    folder = tmp_path / "my_profiles"
    folder.mkdir()
    (folder / "docchip.yaml").write_text(yaml.safe_dump(_chip_yaml(calibrated)))
    code, out, err = cli("--profiles", str(folder), "rates", "--model", "kimi-linear", "--instance", "8xdocchip",
                         "--len", "8k", "-f", "json")
    assert code == 0, err
    notes = " ".join(json.loads(out)["notes"])
    if calibrated:
        assert "docchip constants (GEMM attention 0.5, bf16 0.7, fp8 0.8; memory 0.8; scale-up 0.9): assumed: a test" \
            in notes
    else:
        assert "docchip constants ASSUMED" in notes
    code, out, err = cli("--profiles", str(folder), "hardware", "-f", "json")
    assert code == 0 and "docchip" in out


def test_a_chip_calibration_with_an_engine_overhead_is_refused(tmp_path, cli):
    doc = _chip_yaml(True)
    doc["calibration"]["overhead_s"] = 0.01          # engine overheads belong to the stack, not the chip
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "docchip.yaml").write_text(yaml.safe_dump(doc))
    code, _, err = cli("--profiles", str(folder), "rates", "--model", "kimi-linear", "--instance", "8xdocchip")
    assert code == 2 and "overhead_s" in err


# --- add a planning input ------------------------------------------------------------------------------
# docs/extending.md "Add a planning input": one `Field` in `planning/question.py`'s FIELDS, and the code that
# uses its value. The toy input here, `link_derate`, is the share of the link's line rate left to the
# service; its user is `Question.link`. Both steps run before the CLI is imported, as an edit of
# question.py would be, in a fresh interpreter (this process has already built its options and sweep columns).

RECIPE = r'''
import contextlib, dataclasses, io, json, sys

from prfaas_plan.errors import PlanError
from prfaas_plan.planning import question as Q


def derate(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise PlanError(f"`link_derate` {value!r}: expected a fraction in (0, 1]")
    return float(value)


# step 1 (planning/question.py): the field, at the end of FIELDS
Q.FIELDS["link_derate"] = Q.Field("link_derate", "float", 1.0, "the whole line rate",
                                  "Share of the `link` line rate left to this service.", derate)

# step 2 (its user, here Question.link): the value changes a number
whole_link = Q.Question.link.fget


def derated(self):
    lk = whole_link(self)
    return None if lk is None else dataclasses.replace(lk, bandwidth_bps=lk.bandwidth_bps
                                                       * self.resolved["link_derate"])


Q.Question.link = property(derated)

from prfaas_plan.cli import run  # noqa: E402

results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
'''


def _with_toy_input(*argvs: list[str]) -> list[tuple[int, str, str]]:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", RECIPE, json.dumps(list(argvs))], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return [tuple(r) for r in json.loads(proc.stdout)]


def test_planning_input_recipe(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"base": {"link": "100G"}, "grid": {"link_derate": [0.5, 1.0]}}))
    bad_spec = tmp_path / "bad.yaml"
    bad_spec.write_text(yaml.safe_dump({"grid": {"link_derate": [0.5, 1.5]}}))
    # size and the sweep both search the configuration per role: the swept rows equal size's plans
    quick = ["--samples", "0", "--format", "json"]
    helps, half, fifty, whole, bad, cmp_half, swept, bad_sweep = _with_toy_input(
        ["size", "--help"], ["size", "--link", "100G", "--link-derate", "0.5", *quick],
        ["size", "--link", "50G", *quick], ["size", "--link", "100G", *quick], ["compare", "--link-derate", "2"],
        ["compare", "--link", "100G", "--link-derate", "0.5", *quick],
        ["sweep", str(spec), "-o", str(tmp_path / "rows.csv"), "--no-progress"],
        ["sweep", str(bad_spec), "-o", str(tmp_path / "bad.csv"), "--no-progress"])
    # a CLI option of size and compare, with its help and default
    assert helps[0] == 0 and "--link-derate" in helps[1] and "Share of the --link line rate" in helps[1]
    # parsed: 100G derated to half plans as 50G does, and the envelope records the input
    plans = {k: json.loads(r[1]) for k, r in (("half", half), ("fifty", fifty), ("whole", whole))}
    assert all(r[0] == 0 for r in (half, fifty, whole)), [half[2], fifty[2], whole[2]]
    rows = {k: d["sections"]["plan"][0] for k, d in plans.items()}
    assert rows["half"]["throughput_rps"] == rows["fifty"]["throughput_rps"] != rows["whole"]["throughput_rps"]
    assert plans["half"]["meta"]["inputs"]["link_derate"] == {"value": 0.5, "default": False}
    assert plans["whole"]["meta"]["inputs"]["link_derate"] == {"value": 1.0, "default": True}
    assert cmp_half[0] == 0 and json.loads(cmp_half[1])["meta"]["inputs"]["link_derate"]["value"] == 0.5
    # checked: a bad value is one line naming the flag, exit 2
    assert bad[0] == 2 and bad[2].strip() == "error: --link-derate 2.0: expected a fraction in (0, 1]"
    # a sweep input: a spec key, a results column, each point parsed
    assert swept[0] == 0, swept[2]
    import csv

    with open(tmp_path / "rows.csv") as fh:
        got = {float(r["link_derate"]): float(r["throughput_rps"]) for r in csv.DictReader(fh)}
    assert got == {0.5: rows["fifty"]["throughput_rps"], 1.0: rows["whole"]["throughput_rps"]}
    assert bad_sweep[0] == 2 and "link_derate 1.5: expected a fraction in (0, 1]" in bad_sweep[2]
    assert "`" not in bad_sweep[2] and "--link-derate" not in bad_sweep[2]   # a spec names inputs as its keys
