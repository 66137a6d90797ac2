"""Every command writes the same envelope (docs/output.md): meta with the tool version, the command and
every input in effect (defaults marked), warnings as {code, message}, sections of rows, notes; no
non-finite number in JSON; CSV with the same warnings and notes as leading comment lines."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prfaas_plan import __version__

PAPER = ("--model", "prfaas-1t", "--inputs", "paper")
COMMANDS = {
    "size": ("size", *PAPER),
    "size --layout": ("size", *PAPER, "--layout", "examples/two-sites.yaml"),
    "compare": ("compare", *PAPER),
    "reproduce": ("reproduce",),
    "simulate": ("simulate", *PAPER, "--duration", "60s"),
    "kv": ("kv", "--model", "kimi-linear", "--len", "1k"),
    "workload describe": ("workload", "describe"),
    "validate": ("validate", "--model", "qwen3-235b"),
    "models": ("models",),
    "hardware": ("hardware",),
    "show": ("show", "kimi-linear"),
    "rates": ("rates", "--model", "kimi-linear", "--instance", "8xH20", "--len", "8k"),
    "kv-throughput": ("kv-throughput", "--instance", "8xH200", "--len", "8k"),
}


def _check_finite(value, where="") -> None:
    if isinstance(value, float):
        assert math.isfinite(value), where
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_finite(v, f"{where}[{i}]")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_json_envelope(cli, name):
    code, out, err = cli(*COMMANDS[name], "--format", "json")
    assert code == 0, err
    _check_envelope(json.loads(out), name)


def _check_envelope(doc: dict, name: str) -> None:
    assert list(doc) == ["meta", "warnings", "sections", "notes"]
    meta = doc["meta"]
    assert meta["tool"] == "prfaas-plan" and meta["version"] == __version__
    assert meta["command"] == name.split(" --")[0]
    assert meta["inputs"]["fmt"] == {"value": "json", "default": False}
    for key, entry in meta["inputs"].items():
        assert set(entry) - {"replaced_by"} == {"value", "default"} and isinstance(entry["default"], bool), key
        assert "replaced_by" not in entry or entry["default"], key   # only a default can be decided by another
    assert "stack" in meta and meta["data_sources"]["profiles"]
    for w in doc["warnings"]:
        assert set(w) == {"code", "message"} and w["code"].replace("-", "").isalnum()
    assert doc["sections"] and all(isinstance(rows, list) for rows in doc["sections"].values())
    assert all(isinstance(row, dict) for rows in doc["sections"].values() for row in rows)
    assert all(isinstance(n, str) for n in doc["notes"]) and len(set(doc["notes"])) == len(doc["notes"])
    _check_finite(doc)
    for rows in doc["sections"].values():
        for row in rows:
            for k, v in row.items():
                if k.endswith("_nonfinite"):
                    assert v in ("inf", "-inf", "nan") and row[k.removesuffix("_nonfinite")] is None


@pytest.mark.parametrize("name", ["size", "compare", "kv", "workload describe"])
def test_csv_carries_warnings_and_notes_as_comments(cli, name):
    code, out, err = cli(*COMMANDS[name], "--format", "csv")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"# prfaas-plan {__version__} {name}"
    comments = [l for l in lines if l.startswith("#")]
    assert lines[:len(comments)] == comments  # comments lead, then one table
    assert all(l.startswith(("# warning ", "# note: ")) for l in comments[1:])
    code, js, _ = cli(*COMMANDS[name], "--format", "json")
    doc = json.loads(js)
    assert len(comments) - 1 == len(doc["warnings"]) + len(doc["notes"])


def test_infinite_threshold_is_null_with_a_flag(cli):
    code, out, err = cli("compare", *PAPER, "--basis", "instances", "--format", "json")
    assert code == 0, err
    hom = next(r for r in json.loads(out)["sections"]["compare"] if r["layout"] == "homogeneous-pd")
    assert hom["threshold_tokens"] is None and hom["threshold_tokens_nonfinite"] == "inf"
    code, out, _ = cli("compare", *PAPER, "--basis", "instances", "--format", "csv")
    import csv
    rows = {r["layout"]: r for r in csv.DictReader(l for l in out.splitlines() if not l.startswith("#"))}
    assert rows["homogeneous-pd"]["threshold_tokens"] == "" and rows["homogeneous-pd"]["threshold_tokens_nonfinite"] == "inf"


def test_warning_codes_are_listed_not_buried_in_notes(cli):
    # deepseek-v3 (fp8, 671 GB) barely fits 8xH20 for decode: a real warning (the README's kimi-linear
    # default prints none since 8xH200 is no longer predicted slower than 8xH20)
    code, out, err = cli("size", "--model", "deepseek-v3", "--format", "json", "--instance-chips", "8")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["warnings"] and not any(n.startswith("WARNING") for n in doc["notes"])
    code, table, _ = cli("size", "--model", "deepseek-v3", "--instance-chips", "8")
    for w in doc["warnings"]:
        assert table.count(f"WARNING [{w['code']}]") == 1


def test_tables_fit_100_columns_without_exponents_or_nan(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # a 100-column terminal
    for name in ("size", "compare", "simulate", "reproduce"):
        code, table, err = cli(*COMMANDS[name])
        assert code == 0, err
        rows = [l for l in table.splitlines() if l[:1] in "┃│┏┡└┗━"]
        assert rows and max(len(l) for l in rows) <= 100, name
        assert " nan" not in table and "nan " not in table
        assert not re.search(r"[0-9]e[+-][0-9]", " ".join(rows)), name


def test_piped_tables_take_their_natural_width(cli, monkeypatch):
    """Without a terminal (and no COLUMNS) a table is not folded: each model is one line of `models`, so
    a number such as a 9-digit state size stays whole for grep or a paste (issue 24)."""
    from prfaas_plan.planning import answer_models

    monkeypatch.delenv("COLUMNS", raising=False)
    code, table, err = cli("models")
    assert code == 0, err
    body = [l for l in table.splitlines() if l.startswith("│")]
    models = answer_models()
    assert len(body) == len(models.rows)
    for line in body:
        cells = [c.strip() for c in line.strip("│").split("│")]
        assert cells[0] and all(c for c in cells[:2]), line


def test_quiet_drops_notes_and_version_prints(cli):
    code, loud, _ = cli("size", *PAPER)
    code, quiet, _ = cli("--quiet", "size", *PAPER)
    assert "note:" in loud and "note:" not in quiet and "PrfaaS-PD plan" in quiet
    code, out, _ = cli("--version")
    assert code == 0 and out.strip() == f"prfaas-plan {__version__}"


@settings(derandomize=True, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15),
       st.sampled_from([None, ".3f", ".2f", ".4g", ",.0f", ".1%", "+.2%"]))
def test_a_table_cell_never_shows_an_exponent(v, fmt):
    from prfaas_plan.output.report import _cell

    text = _cell(v, fmt)
    assert "e" not in text.lower() and "nan" not in text.lower(), (v, fmt, text)


@settings(derandomize=True, max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.floats(), st.integers(), st.none()), max_size=6))
def test_json_rows_are_finite_and_flag_every_non_finite_value(values):
    from prfaas_plan.output.report import Report, Section, render

    row = {f"k{i}": v for i, v in enumerate(values)}
    out = json.loads(render(Report([Section("s", "t", [row])]), "json"))["sections"]["s"][0]
    for k, v in row.items():
        if isinstance(v, float) and not math.isfinite(v):
            assert out[k] is None and out[f"{k}_nonfinite"] in ("inf", "-inf", "nan")


def test_a_warning_message_carries_no_prefix_of_its_own():
    """The renderer writes ``WARNING [code]:``; a message that began with its own ``WARNING:`` read
    ``WARNING [modes-disagree]: WARNING: ...`` (issue 24)."""
    from prfaas_plan.planning.confidence import ModeVerdicts

    text = ModeVerdicts({"exact": 0.9, "representative": 1.2}, "homogeneous-pd").warning()
    assert text and not text.upper().startswith("WARNING")
    from prfaas_plan.output.report import Report, Section, render
    from prfaas_plan.planning.warnings import PlanWarning

    table = render(Report([Section("s", "t", [{"a": 1}])], warnings=[PlanWarning("modes-disagree", text)]), "table")
    assert table.count("WARNING") == 1 and "WARNING [modes-disagree]: the throughput modes" in table


def test_rates_weights_that_do_not_fit_are_a_warning_not_a_note(cli):
    code, out, err = cli("rates", "-m", "kimi-k2", "-i", "8xH20", "--len", "32k", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [w["code"] for w in doc["warnings"]] == ["weights-do-not-fit"]
    assert not any("WARNING" in n.upper()[:10] for n in doc["notes"])
    assert not any(w["message"].upper().startswith("WARNING") for w in doc["warnings"])


def _leaf_commands():
    """(path, click command) of every command a user can run, walking the typer app."""
    import typer.main

    from prfaas_plan.cli import full_app

    stack, out = [((), typer.main.get_command(full_app()))], []
    while stack:
        path, command = stack.pop()
        subs = getattr(command, "commands", None)
        if subs:
            stack += [((*path, name), c) for name, c in subs.items()]
        else:
            out.append((" ".join(path), command))
    return sorted(out, key=lambda pc: pc[0])


def test_every_command_takes_format():
    commands = _leaf_commands()
    assert len(commands) >= 15 and "model import" in dict(commands)   # the walk sees nested commands
    lacking = [path for path, c in commands
               if not any("--format" in getattr(p, "opts", ()) for p in c.params)]
    assert lacking == []


def _file_commands(tmp_path) -> dict[str, tuple]:
    """Commands that read or write files, with inputs made in ``tmp_path``."""
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    spec = tmp_path / "spec.yaml"
    spec.write_text("base: {model: kimi-linear}\ngrid: {link: [10G, 100G]}\n")
    plan = tmp_path / "plan.json"
    config = repo / "prfaas_plan" / "data" / "hf_configs" / "XiaomiMiMo--MiMo-V2-Flash.config.json"
    return {
        "schema": (("schema", "layout"), None),
        "sweep": (("sweep", str(spec), "-o", str(tmp_path / "r.csv"), "--no-progress"), None),
        "model import": (("model", "import", str(config), "--name", "mimo-test"), None),
        "model import -o": (("model", "import", str(config), "--name", "mimo-test", "-o",
                             str(tmp_path / "m.yaml")), None),
        "report": (("report", str(plan), "-o", str(tmp_path / "p.html")), plan),
    }


@pytest.mark.parametrize("name", ["schema", "sweep", "model import", "model import -o", "report"])
def test_file_commands_write_the_envelope_in_json_and_keep_their_table_text(cli, tmp_path, name):
    args, plan = _file_commands(tmp_path)[name]
    if plan is not None:
        code, out, err = cli("size", *PAPER, "--samples", "0", "--format", "json")
        plan.write_text(out)
    code, table, err = cli(*args)
    assert code == 0, err
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    _check_envelope(json.loads(out), name.removesuffix(" -o"))
    if name == "schema":   # the table form is the schema document itself; json carries it as a row
        assert json.loads(out)["sections"]["schema"] == [json.loads(table)]
    elif name == "model import":
        import yaml

        assert json.loads(out)["sections"]["profile"] == [yaml.safe_load(table)]
    else:
        assert "wrote " in table
    if name != "model import":
        code, csv_out, err = cli(*args, "--format", "csv")
        assert code == 0 and csv_out.startswith("# prfaas-plan "), err


def test_model_import_refuses_csv_without_a_file(cli, tmp_path):
    args, _ = _file_commands(tmp_path)["model import"]
    code, out, err = cli(*args, "--format", "csv")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--format csv" in err


BAD_INPUT = {   # one bad input per command: what it reads is wrong, not how it was called
    "calibrate": ("calibrate", "--measurements", "no-such.csv"),
    "check": ("check", "no-such.json"),
    "compare": ("compare", "--link", "10X"),
    "export": ("export", "no-such.json", "--to", "sglang", "-o", "never-written"),
    "hardware": ("hardware", "extra"),
    "kv": ("kv", "--model", "no-such-model"),
    "kv-throughput": ("kv-throughput", "--len", "x"),
    "model import": ("model", "import", "no-such.config.json"),
    "models": ("models", "--no-such-flag"),
    "rates": ("rates", "--model", "kimi-linear", "--instance", "8xNOPE"),
    "report": ("report", "no-such.json", "-o", "never-written.html"),
    "reproduce": ("reproduce", "--mode", "fast"),
    "schema": ("schema", "no-such-kind"),
    "show": ("show", "no-such-model"),
    "simulate": ("simulate", "--duration", "5q"),
    "size": ("size", "--tpot", "-3ms"),
    "sweep": ("sweep", "no-such.yaml", "-o", "never-written.csv"),
    "validate": ("validate", "--model", "no-such-model"),
    "workload describe": ("workload", "describe", "--workload", "no-such.jsonl"),
}


def test_every_command_has_a_bad_input_case():
    assert sorted(BAD_INPUT) == [path for path, _ in _leaf_commands()]


@pytest.mark.parametrize("fmt", ["json", "csv"])
@pytest.mark.parametrize("name", list(BAD_INPUT))
def test_an_error_is_one_line_on_stderr_whatever_the_format(cli, tmp_path, monkeypatch, name, fmt):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(*BAD_INPUT[name], "--format", fmt)
    assert code == 2 and out == "", (name, out)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []   # nothing half-written


@pytest.mark.parametrize("name", ["size", "compare"])
def test_meta_verdict_is_a_word_and_absent_error_bars_leave_it_null(cli, name):
    code, out, err = cli(*COMMANDS[name], "--samples", "50", "--format", "json")
    assert code == 0, err
    meta = json.loads(out)["meta"]
    assert meta["verdict"] in ("pays", "does not pay", "cannot tell")
    assert meta["verdict_vs"] and meta["verdict_line"] in json.loads(out)["notes"]
    code, out, err = cli(*COMMANDS[name], "--samples", "0", "--format", "json")
    meta = json.loads(out)["meta"]
    assert meta["verdict"] is None and meta["verdict_line"] is None


def test_reproduce_names_its_within_column_as_its_json_key(cli):
    code, table, _ = cli("reproduce", "--format", "table")
    code, out, _ = cli("reproduce", "--format", "json")
    header = next(l for l in table.splitlines() if l.startswith("┃") and "published" in l)
    assert "within" in [c.strip() for c in header.strip("┃").split("┃")] and " ok " not in header
    assert all("within" in r for r in json.loads(out)["sections"]["figures"])


def test_defaults_the_search_replaces_say_so(cli):
    code, out, err = cli("size", "--samples", "0", "--remote-instance-chips", "2", "--format", "json")
    assert code == 0, err
    inputs = json.loads(out)["meta"]["inputs"]
    assert inputs["instance_chips"]["replaced_by"] == "the configuration search"   # the local shape is searched
    assert inputs["transfer_bytes"]["replaced_by"] == "the configuration search"
    assert "replaced_by" not in inputs["remote_instance_chips"] and "replaced_by" not in inputs["tpot"]
