"""No input crashes the validators: random damage to valid profiles, layouts and HF configs gives either
a valid object or a one-line `PlanError`, never another exception (seeded hypothesis runs)."""

from __future__ import annotations

import copy
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from test_bad_inputs import CHIP, HF, LAYOUT, MODEL

from prfaas_plan.errors import PlanError
from prfaas_plan.profiles import hardware_from_dict, model_from_dict
from prfaas_plan.profiles.hf_import import import_hf_config

JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.lists(st.integers(min_value=-3, max_value=10), max_size=4),
    st.dictionaries(st.sampled_from(["start", "stop", "step", "kind", "x"]), st.integers(-5, 2**40), max_size=3),
)


def _paths(node, prefix=()):
    """Every key path into a nested mapping/list (the places damage can go)."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _damage(base, path, value, add_key: str | None):
    data = copy.deepcopy(base)
    if not path:
        return data
    node = data
    for key in path[:-1]:
        node = node[key]
    if add_key is not None and isinstance(node, dict):
        node[add_key] = value
    else:
        node[path[-1]] = value
    return data


def _check(fn, data):
    try:
        fn(data)
    except PlanError as exc:
        text = str(exc)
        assert "\n" not in text and text, text


def _strategy(base):
    return st.tuples(st.sampled_from(list(_paths(base))), JUNK, st.one_of(st.none(), st.text(min_size=1, max_size=6)))


@settings(derandomize=True, max_examples=150, deadline=None)
@given(_strategy(MODEL))
def test_damaged_model_profiles_never_crash(case):
    _check(lambda d: model_from_dict(d, "fuzz.yaml"), _damage(MODEL, *case))


@settings(derandomize=True, max_examples=200, deadline=None)
@given(_strategy(CHIP))
def test_damaged_hardware_profiles_never_crash(case):
    def build(d):
        hw = hardware_from_dict(d, "fuzz.yaml")
        assert all(math.isfinite(v) and v > 0 for v in hw.peak_tflops.values())
        assert hw.calibration is None or (0 < hw.calibration.memory <= 1
                                          and all(0 < v <= 1 for v in hw.calibration.gemm.values()))
    _check(build, _damage(CHIP, *case))


@settings(derandomize=True, max_examples=100, deadline=None)
@given(case=_strategy(LAYOUT))
def test_damaged_layouts_never_crash(case, tmp_path_factory):
    import yaml

    from prfaas_plan.layout import load_layout

    path = tmp_path_factory.mktemp("lay") / "l.yaml"
    try:
        path.write_text(yaml.safe_dump(_damage(LAYOUT, *case)))
    except (ValueError, OverflowError):
        return  # not representable in YAML: nothing to read
    _check(load_layout, path)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(_strategy(HF))
def test_damaged_hf_configs_never_crash(case):
    _check(lambda d: model_from_dict(import_hf_config(d, source="fuzz.config.json"), "fuzz"), _damage(HF, *case))
