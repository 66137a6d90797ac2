"""The planning API a user scripts against and the CLI calls.

- `Question` (module ``question``): a planning question from what a user types (`Question.parse`), a
  layout file, a sweep point or the case study, every input a `Field` of `FIELDS` (its default, help and
  parser); `Question.scenario` is the resolved `Scenario` the planner consumes (`scenario(**text)` for short);
- `size`, `compare`, `size_layout` (``plans``): optimized layouts as `Plan` records (``compare``: the
  local cluster alone, homogeneous PD at equal instances and at equal capex or rental budget, naive);
- `answer_size`, `answer_compare`, `answer_layout`, `answer_reproduce` (``answers``): everything a
  command prints — figures, follow-up questions (``questions``), warnings (``warnings``), notes;
- `answer_simulate` (``simulate``): plan, workload, discrete-event run and the analytic model beside it;
- `kv_breakdown` (``kv``): a request's cache by part per length;
- `answer_rates`, `answer_kv_throughput`, `answer_calibrate` (``rates``): per-instance prefill and decode
  rates, KV throughput beside the paper's Table 3, the joint calibration and its errors;
- `answer_models`, `answer_hardware`, `answer_show` (``profiles``): the profile tables;
  `answer_validate` (``validate``): the numpy reference against the analytical arithmetic;
- ``case_study``: the paper's case study and its published figures.

Example::

    from prfaas_plan import planning
    q = planning.Question.parse(model="kimi-linear", remote="32xH200", local="64xH20", link="100G")
    a = planning.answer_size(q, load=0.8, ttft_slo=(90, 4.0))
    a.plan.best.threshold, a.plan.best.lambda_max, a.loaded.ttft_p90_s, a.slo.rate_rps
    [w.code for w in a.warnings]
"""

from __future__ import annotations

import importlib

# Every public name and the submodule that defines it. Names are imported on first use (PEP 562), so a
# command loads only the planning modules it runs: a cold `size` does not import the simulator, the
# validation, the KV tables or the profile listings (benchmarks/bench_cli.py).
_SUBMODULE_NAMES = {
    "answers": ("AtCommonRate", "CompareAnswer", "LayoutAnswer", "ReproduceAnswer", "SizeAnswer", "answer_compare",
                "answer_compare_layout", "answer_layout", "answer_reproduce", "answer_size", "perf_notes"),
    "configurations": ("ConfigSearch", "SearchSpec", "search_configurations"),
    "kv": ("KvBreakdown", "kv_breakdown"),
    "layout_search": ("LayoutSearch", "layout_configurations", "search_layout"),
    "plans": ("Plan", "compare", "homogeneous_baseline", "optimize", "size", "size_layout"),
    "profiles": ("ModelsAnswer", "ShowAnswer", "answer_hardware", "answer_models", "answer_show"),
    "question": ("DEFAULTS", "FIELDS", "Field", "Question", "follow_ups", "scenario"),
    "questions": ("AtRate", "LinkSizing", "LoadedLatency", "SloRate", "TargetSizing", "Verification",
                  "routing_screen"),
    "rates": ("CalibrateAnswer", "KvThroughputAnswer", "RatesAnswer", "answer_calibrate", "answer_kv_throughput",
              "answer_rates"),
    "scenario": ("Scenario", "instance_decode", "instance_prefill", "layout_perf", "perf_inputs", "scenario_for"),
    "simulate": ("SimulationAnswer", "answer_simulate"),
    "validate": ("ValidateAnswer", "answer_validate"),
    "warnings": ("PlanWarning",),
}
_SOURCE = {name: module for module, names in _SUBMODULE_NAMES.items() for name in names}
__all__ = sorted(_SOURCE)

# `scenario` names both a submodule and the function `question.scenario`; importing the submodule would bind
# the package attribute to the module, so it is imported here, before the function's name is bound for good.
from . import scenario as _scenario_module  # noqa: E402,F401
from .question import scenario  # noqa: E402


def __getattr__(name: str):
    module = _SOURCE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SOURCE))
