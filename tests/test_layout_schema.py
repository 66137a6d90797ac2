"""The layout file format as data (issue 22 item 2): the JSON Schema `prfaas-plan schema layout` prints
is generated from the parser's own definition, and an independent JSON Schema validator (jsonschema)
and the parser agree on every bundled example and on a list of bad files."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from prfaas_plan.errors import PlanError
from prfaas_plan.layout import layout_json_schema, load_layout

ROOT = Path(__file__).parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if "sites" in yaml.safe_load(p.read_text()))
BASE = {"name": "lay", "remote": {"instance": "8xH200", "instances": 2}, "threshold": "auto",
        "sites": [{"name": "a", "instance": "8xH20", "prefill": 2, "decode": 3,
                   "link": {"bandwidth": "100G", "efficiency": 0.95, "rtt": "2ms"}}]}


def _validator():
    schema = layout_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _with(path: str, value):
    doc = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return doc


def test_there_are_bundled_layout_examples():
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_bundled_example_validates_on_both(example):
    doc = yaml.safe_load(example.read_text())
    _validator().validate(doc)
    assert load_layout(example).pd_sites


GOOD = [("sites.0.link.rtt", "0.5s"), ("sites.0.link.rtt", "25 ms"), ("sites.0.link.bandwidth", "12.5GB/s"),
        ("sites.0.link.bandwidth", "400Gb/s"), ("sites.0.link.bandwidth", "100Gbps"), ("threshold", "16k"),
        ("threshold", "inf"), ("threshold", 0), ("sites.0.instance", "8xH20"), ("remote.instances", 0)]
BAD = [("sites.0.link.rtt", 20), ("sites.0.link.rtt", "20"), ("sites.0.link.rtt", "2 parsecs"),
       ("sites.0.link.bandwidth", 100), ("sites.0.link.bandwidth", "100"), ("sites.0.link.bandwidth", "fast"),
       ("sites.0.link.efficiency", 1.5), ("sites.0.link.efficiency", 0), ("sites.0.link.eficiency", 0.9),
       ("sites.0.decode", -1), ("sites.0.decode", 2.5), ("sites.0.decode", 10**7), ("remote.instances", "two"),
       ("sites.0.instance", "H20 times 8"), ("sites", []), ("sites", {"name": "a"}), ("treshold", "auto"),
       ("threshold", -5), ("kind", "model"), ("sites.0.link.usd_per_gbps_month", -1)]


@pytest.mark.parametrize("path, value", GOOD)
def test_good_values_pass_both(path, value, tmp_path):
    doc = _with(path, value)
    _validator().validate(doc)
    f = tmp_path / "lay.yaml"
    f.write_text(yaml.safe_dump(doc))
    load_layout(f)


@pytest.mark.parametrize("path, value", BAD)
def test_bad_values_fail_on_both(path, value, tmp_path):
    doc = _with(path, value)
    assert list(_validator().iter_errors(doc)), "the JSON Schema accepted it"
    f = tmp_path / "lay.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(PlanError) as exc:
        load_layout(f)
    assert str(f) in str(exc.value) and "\n" not in str(exc.value)


def test_duplicate_site_names_are_the_parsers_rule_and_the_schema_says_so(tmp_path):
    doc = _with("sites", BASE["sites"] * 2)
    assert not list(_validator().iter_errors(doc))       # JSON Schema cannot say "unique by name"
    assert "Site names must differ" in layout_json_schema()["description"]
    f = tmp_path / "lay.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(PlanError, match=r"sites\[1\]\.name 'a' is already the name of sites\[0\]"):
        load_layout(f)


def test_the_docs_describe_every_key_of_the_schema():
    text = (ROOT / "docs" / "layouts.md").read_text()
    schema = layout_json_schema()
    keys = set(schema["properties"]) | {k for d in schema["$defs"].values() for k in d["properties"]}
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert not missing, missing


def test_the_cli_prints_the_schema(cli):
    code, out, err = cli("schema", "layout")
    assert code == 0 and json.loads(out) == layout_json_schema()
    code, out, err = cli("schema", "layot")
    assert code == 2 and "did you mean layout" in err and out == ""
