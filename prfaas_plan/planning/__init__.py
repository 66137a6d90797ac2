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

from .answers import (
    AtCommonRate,
    CompareAnswer,
    LayoutAnswer,
    ReproduceAnswer,
    SizeAnswer,
    answer_compare,
    answer_compare_layout,
    answer_layout,
    answer_reproduce,
    answer_size,
    perf_notes,
)
from .kv import KvBreakdown, kv_breakdown
from .plans import Plan, compare, homogeneous_baseline, optimize, size, size_layout
from .profiles import (
    ModelsAnswer,
    ShowAnswer,
    answer_hardware,
    answer_models,
    answer_show,
)
from .questions import (
    AtRate,
    LinkSizing,
    LoadedLatency,
    SloRate,
    TargetSizing,
    Verification,
    routing_screen,
)
from .configurations import ConfigSearch, SearchSpec, search_configurations
from .layout_search import LayoutSearch, layout_configurations, search_layout
from .rates import (
    CalibrateAnswer,
    KvThroughputAnswer,
    RatesAnswer,
    answer_calibrate,
    answer_kv_throughput,
    answer_rates,
)
from .question import DEFAULTS, FIELDS, Field, Question, follow_ups, scenario
from .scenario import (
    Scenario,
    instance_decode,
    instance_prefill,
    layout_perf,
    perf_inputs,
    scenario_for,
)
from .simulate import SimulationAnswer, answer_simulate
from .validate import ValidateAnswer, answer_validate
from .warnings import PlanWarning

__all__ = [
    "DEFAULTS", "FIELDS", "Field", "Question", "follow_ups", "ConfigSearch", "SearchSpec", "search_configurations", "LayoutSearch",
    "layout_configurations", "search_layout", "AtCommonRate", "AtRate", "CalibrateAnswer", "CompareAnswer", "KvBreakdown", "KvThroughputAnswer",
    "LayoutAnswer", "LinkSizing", "LoadedLatency", "ModelsAnswer", "Plan", "PlanWarning", "RatesAnswer",
    "ShowAnswer", "ValidateAnswer", "answer_calibrate", "answer_hardware", "answer_kv_throughput",
    "answer_models", "answer_rates", "answer_show", "answer_validate",
    "ReproduceAnswer", "Scenario", "SimulationAnswer", "SizeAnswer", "SloRate", "TargetSizing", "Verification",
    "answer_compare", "answer_compare_layout", "answer_layout", "answer_reproduce", "answer_simulate", "answer_size", "compare",
    "homogeneous_baseline", "instance_decode", "kv_breakdown", "instance_prefill", "layout_perf", "optimize", "perf_inputs",
    "perf_notes", "routing_screen", "scenario", "scenario_for", "size", "size_layout",
]
