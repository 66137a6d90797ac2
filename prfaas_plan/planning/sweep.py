"""Design-space sweeps: a spec of inputs expands to points, each planned by `plans.compare`.

A spec (``docs/sweep.md``) has a ``base:`` block (any `INPUTS`, the rest take their defaults), a
``grid:`` block (input -> list of values, Cartesian product) and a ``zip:`` block (inputs whose lists
move together). Every point is validated before any is evaluated (`expand` raises `PlanError`).
A point is evaluated by the same planning API as ``size`` and ``compare`` (`scenario_for`, `compare`);
what the sweep adds is caching of the inputs many points share (workloads, scenarios without their
link, per-instance performance) and one flat row per point (`ROW_COLUMNS`). A point the planner cannot
plan gets its one-line `PlanError` text in the ``error`` column instead of stopping the sweep.

Units follow the column names: ``_s`` seconds, ``_rps`` requests/s, ``_gbps`` Gbit/s, ``_usd`` US dollars,
``_tokens`` tokens; shares and utilizations are fractions.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

import numpy as np

from ..errors import INPUT_NAME, PlanError, closest_names
from ..performance.sharing import remembered
from ..profiles.stack import DEFAULT_STACK
from .plans import check_servable
from .question import AUTO as AUTO_BASIS
from .question import Question, sweep_fields

# ---------------------------------------------------------------------------------------------------
# Inputs a spec may set: the planning question's (`prfaas_plan.planning.question.FIELDS`).


@dataclass(frozen=True)
class Input:
    """One sweepable input: its default and the column type of its value (``str``, ``int``, ``float``)."""

    default: object
    kind: str
    help: str


INPUTS: dict[str, Input] = {name: Input(f.point_default, f.kind, f.column_help) for name, f in sweep_fields().items()}
"""The planning inputs a spec may set (`prfaas_plan.planning.question.FIELDS` with ``sweep``), their
defaults as a row holds them (``rtt`` 0ms, ``stack`` sglang, ``basis`` auto where the CLI leaves them unset),
then the sweep's own `LAYOUT_INPUTS`."""
INPUTS.update({
    "layout": Input(None, "str", "a layout file (docs/layouts.md) as the point's hardware: its sites, instance shapes "
                               "and links replace remote, local, link, link_efficiency, link_price, rtt and "
                               "instance_chips; empty: none"),
    "link_scale": Input(1.0, "float", "with a layout: every site's link bandwidth times this factor"),
    "remote_instances": Input(-1, "int", "with a layout: remote prefill instances instead of the file's (-1: the "
                                         "file's)"),
})
SEARCHED_CHIPS = 0
"""``instance_chips`` of a point whose instance shapes are searched per role (`size` without
``--instance-chips``); any other value pins both sites' shape, as ``--instance-chips`` does."""
AUTO_TRANSFER = "auto"
"""``transfer_bytes`` of a point whose link bytes follow its searched decode configuration (`size` without
``--transfer-bytes``); a policy name pins them, as ``--transfer-bytes`` does."""
INPUTS["instance_chips"] = Input(SEARCHED_CHIPS, "int", "chips per instance of both sites (0: searched per role and "
                                                        "site, as size without --instance-chips)")
INPUTS["transfer_bytes"] = Input(AUTO_TRANSFER, "str", "bytes on the link: replicated, dp-attention or logical "
                                                       "(docs/methods.md); auto: what the searched decode "
                                                       "configuration moves, as size without --transfer-bytes")
SEARCH_DEFAULTS = {"instance_chips": SEARCHED_CHIPS, "transfer_bytes": AUTO_TRANSFER}
LAYOUT_INPUTS = ("layout", "link_scale", "remote_instances")
"""Inputs of a layout-based point (`prfaas_plan.planning.sweep_layout`), the sweep's own: not planning inputs
of the question (`size`/`compare` take ``--layout`` as their own option), so they are not `FIELDS` and a
point's `question` leaves them out. At their defaults they are left out of the point key, so the keys (and
resumed rows) of specs without a layout are what they were."""
KEYED_WHEN_SET = LAYOUT_INPUTS + ("link_headroom",)
"""Inputs a point key leaves out at their defaults: those added after sweeps were first written, so the keys
(and resumed rows) of specs that do not set them are what they were."""
SPEC_KEYS = ("base", "grid", "zip", "description")


@dataclass(frozen=True)
class Point:
    """One sweep point: its position in the spec's order and every input (defaults filled)."""

    index: int
    inputs: tuple[tuple[str, object], ...]  # (name, value) in `INPUTS` order

    @property
    def values(self) -> dict:
        return dict(self.inputs)

    @cached_property
    def key(self) -> str:
        """Hash of the inputs: the resume key (the same inputs give the same key in any spec)."""
        return point_key(self.values)


def point_key(values: dict) -> str:
    """16 hex digits of the SHA-256 of the inputs as canonical JSON."""
    text = json.dumps({k: values[k] for k in INPUTS
                       if k not in KEYED_WHEN_SET or values[k] != INPUTS[k].default}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SweepSpec:
    """A parsed spec: the fixed inputs, the grid axes and the zip groups, in the spec's order."""

    base: dict
    grid: tuple[tuple[str, tuple], ...]
    zips: tuple[tuple[tuple[str, tuple], ...], ...]
    description: str = ""

    @property
    def axes(self) -> list[str]:
        """The inputs that vary, in the order they appear."""
        return [k for k, _ in self.grid] + [k for group in self.zips for k, _ in group]

    @property
    def size(self) -> int:
        n = 1
        for _, values in self.grid:
            n *= len(values)
        for group in self.zips:
            n *= len(group[0][1])
        return n


def _check_name(name, where: str) -> str:
    if not isinstance(name, str) or name.replace("-", "_") not in INPUTS:
        raise PlanError(f"sweep spec {where}: unknown input {name!r} ({closest_names(str(name), INPUTS)})")
    return name.replace("-", "_")


def _check_scalar(name: str, value, where: str):
    if isinstance(value, (dict, list, tuple)) or value is None:
        raise PlanError(f"sweep spec {where}.{name}: expected one value, got {value!r}")
    kind = INPUTS[name].kind
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise PlanError(f"sweep spec {where}.{name}: expected a whole number, got {value!r}")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlanError(f"sweep spec {where}.{name}: expected a number, got {value!r}")
        value = float(value)
    else:
        if isinstance(value, bool):
            raise PlanError(f"sweep spec {where}.{name}: expected text, got {value!r}")
        value = str(value)
    return value


def _axis(name: str, values, where: str) -> tuple:
    if not isinstance(values, list) or not values:
        raise PlanError(f"sweep spec {where}.{name}: expected a non-empty list of values")
    out = tuple(_check_scalar(name, v, where) for v in values)
    if len(set(out)) != len(out):
        raise PlanError(f"sweep spec {where}.{name}: a value is listed twice ({list(out)})")
    return out


def parse_spec(doc) -> SweepSpec:
    """Validate a spec document (a mapping from YAML) into a `SweepSpec`; every error is a `PlanError`."""
    if not isinstance(doc, dict):
        raise PlanError("sweep spec: expected a mapping with base:, grid: and/or zip:")
    for key in doc:
        if key not in SPEC_KEYS:
            raise PlanError(f"sweep spec: unknown key {key!r} (expected {', '.join(SPEC_KEYS)})")
    base_doc = doc.get("base") or {}
    if not isinstance(base_doc, dict):
        raise PlanError("sweep spec base: expected a mapping of input: value")
    base = {_check_name(k, "base"): _check_scalar(_check_name(k, "base"), v, "base") for k, v in base_doc.items()}
    seen = set(base)

    def claim(name: str, where: str) -> None:
        if name in seen:
            raise PlanError(f"sweep spec {where}: {name} is set twice (base, grid and zip are exclusive)")
        seen.add(name)

    grid_doc = doc.get("grid") or {}
    if not isinstance(grid_doc, dict):
        raise PlanError("sweep spec grid: expected a mapping of input: [values]")
    grid = []
    for k, values in grid_doc.items():
        name = _check_name(k, "grid")
        claim(name, "grid")
        grid.append((name, _axis(name, values, "grid")))
    zip_doc = doc.get("zip") or []
    groups_doc = [zip_doc] if isinstance(zip_doc, dict) else zip_doc
    if not isinstance(groups_doc, list) or not all(isinstance(g, dict) and g for g in groups_doc):
        raise PlanError("sweep spec zip: expected a mapping of input: [values] (or a list of such mappings)")
    zips = []
    for gi, group_doc in enumerate(groups_doc):
        where = "zip" if isinstance(zip_doc, dict) else f"zip[{gi}]"
        group = []
        for k, values in group_doc.items():
            name = _check_name(k, where)
            claim(name, where)
            group.append((name, _axis(name, values, where)))
        lengths = {len(v) for _, v in group}
        if len(lengths) > 1:
            raise PlanError(f"sweep spec {where}: its lists must have one length (they move together), got "
                            + ", ".join(f"{n}: {len(v)}" for n, v in group))
        zips.append(tuple(group))
    description = doc.get("description") or ""
    if not isinstance(description, str):
        raise PlanError("sweep spec description: expected text")
    return SweepSpec(base, tuple(grid), tuple(zips), description)


def with_basis(spec: SweepSpec, basis: str | None) -> SweepSpec:
    """``spec`` with ``basis`` (``--basis``) as its fixed ``basis`` input; None leaves it as it is. A spec
    that sets ``basis`` itself and a ``--basis`` are refused together (one would silently lose)."""
    from .plans import check_basis

    if basis is None:
        return spec
    basis = check_basis(basis)
    if "basis" in spec.base or "basis" in spec.axes:
        raise PlanError(f"`basis` {basis}: the spec sets basis itself; give one or the other")
    return replace(spec, base={**spec.base, "basis": basis})


def with_stack(spec: SweepSpec, stack: str | None) -> SweepSpec:
    """``spec`` with ``stack`` (``--stack``) as its fixed ``stack`` input; None leaves it as it is. A spec
    that sets ``stack`` itself and a ``--stack`` are refused together (one would silently lose)."""
    from ..profiles import get_stack

    if stack is None:
        return spec
    get_stack(stack)
    if "stack" in spec.base or "stack" in spec.axes:
        raise PlanError(f"`stack` {stack}: the spec sets stack itself; give one or the other")
    return replace(spec, base={**spec.base, "stack": stack})


def stack_notes(spec: SweepSpec) -> list[str]:
    """Which serving stacks the points run and where their numbers come from (the default announced)."""
    from ..profiles import get_stack

    values = [spec.base["stack"]] if "stack" in spec.base else \
        [v for k, vs in spec.grid + tuple(kv for g in spec.zips for kv in g) if k == "stack" for v in vs]
    notes = [] if values else [f"default stack: {DEFAULT_STACK} (pass --stack or set stack in the spec to choose "
                               "another serving stack)"]
    return notes + [get_stack(v).describe() for v in dict.fromkeys(values or [DEFAULT_STACK])]


def load_spec(path: str) -> SweepSpec:
    """Read and validate a YAML spec file, through the reader every YAML input shares
    (`prfaas_plan.profiles.read_yaml`: a key given twice, binary data or an oversized file is refused)."""
    from ..profiles import read_yaml
    from ..textfile import require_file

    p = require_file(path, "a sweep spec (YAML)")
    try:
        return parse_spec(read_yaml(p))
    except PlanError as exc:
        text = str(exc)
        raise PlanError(text if text.startswith(str(p)) else f"{p}: {text}") from None


def points(spec: SweepSpec) -> list[Point]:
    """Every point of the spec in its deterministic order (the last grid axis, then the zip groups,
    vary fastest), each with its inputs validated (`check_inputs`); nothing is evaluated."""
    axes = [[((name, v),) for v in values] for name, values in spec.grid]
    axes += [list(zip(*[[(name, v) for v in values] for name, values in group])) for group in spec.zips]
    out = []
    for i, combo in enumerate(itertools.product(*axes)):
        values = {k: spec.base.get(k, inp.default) for k, inp in INPUTS.items()}
        for part in combo:
            values.update(dict(part))
        try:
            check_inputs(values)
        except PlanError as exc:
            varied = ", ".join(f"{k}={v}" for part in combo for k, v in part)
            raise PlanError(f"sweep point {i + 1} ({varied or 'base'}): {exc}") from None
        out.append(Point(i, tuple((k, values[k]) for k in INPUTS)))
    return out


# ---------------------------------------------------------------------------------------------------
# Resolution of inputs, cached: a sweep's points share most of them.


_MEMO: dict = {}
"""Parsed values of the inputs this process has seen (`Question.parse`'s ``memo``): points share most."""


def _spec_names(exc: PlanError) -> PlanError:
    """``exc`` naming inputs as a spec does (``link_efficiency``), not in backticks (the CLI would show
    them as flags)."""
    return PlanError(INPUT_NAME.sub(r"\1", str(exc)))


_QUESTIONS: dict = {}
"""The `Question` of each point's inputs this process has parsed (`question`): `points` checks every point
before any is planned, and `evaluate` asks again."""
MAX_QUESTIONS = 4096


def question(v: dict) -> Question:
    """The `Question` of a point's inputs (every unit, name, enum and chip count parsed); a bad one is a
    `PlanError` naming the input as the spec does (and is not remembered)."""
    return remembered(_QUESTIONS, tuple(v.items()), lambda: _parsed_question(v), MAX_QUESTIONS)


def _parsed_question(v: dict) -> Question:
    if len(_MEMO) > 4096:
        _MEMO.clear()
    try:
        return Question.from_point(planning_values(v), _MEMO)
    except PlanError as exc:
        raise _spec_names(exc) from None


def planning_values(v: dict) -> dict:
    """A point's values as `size` would be given them: the search's sentinels (`SEARCH_DEFAULTS`) left out,
    so the question takes the command's defaults (8 chips, ``replicated``) and `search_spec` the search."""
    return {k: x for k, x in v.items() if k not in SEARCH_DEFAULTS or x != SEARCH_DEFAULTS[k]}


def search_spec(v: dict):
    """What a point pins of the configuration search, as `size` reads its flags (``--instance-chips`` pins both
    sites' shape, ``--transfer-bytes`` the bytes): a `configurations.SearchSpec`; None with ``inputs: paper``
    (the paper's tables are 8-chip instances: no search, as `size`)."""
    from .configurations import pinned_spec

    chips = None if v["instance_chips"] == SEARCHED_CHIPS else int(v["instance_chips"])
    return pinned_spec(v["inputs"], chips, transfer_bytes=None if v["transfer_bytes"] == AUTO_TRANSFER
                       else v["transfer_bytes"])


def search_space(v: dict) -> tuple | None:
    """The role candidates a point's configuration search enumerates (`configurations.search_configurations`
    over its pools and pins: chips per instance, MoE split, decode attention mode, dtypes), before HBM and
    SLO checks; None when the point is not searched. The fingerprint of a searched row includes it
    (`sweep_run.fingerprints`), so a row is recomputed when its search space changes; its length is the
    search's own count of candidates (a test checks it)."""
    from ..profiles import get_model
    from ..units import parse_chip_count
    from .configurations import attention_modes, moe_splits, instance_shapes

    spec = search_spec(v)
    if spec is None:
        return None
    model = get_model(v["model"])
    r_pool, l_pool = (parse_chip_count(v[k], k).count for k in ("remote", "local"))
    out: list[tuple] = [("dtypes", model.weight_dtype, model.kv_dtype)]
    out += [("prefill", "remote", n, moe) for n in instance_shapes(r_pool, spec.remote_chips, "remote")
            for moe in moe_splits(model, n)]
    for n in instance_shapes(l_pool, spec.local_chips, "local"):
        out += [("prefill", "local", n, moe) for moe in moe_splits(model, n)]
        out += [("decode", "local", n, "dp" if dp else "tp", moe) for dp in attention_modes(n, spec.transfer)
                for moe in moe_splits(model, n)]
    return tuple(out)


def check_inputs(v: dict) -> None:
    """Parse every input of a point (`question`; a layout point's own inputs by
    `sweep_layout.check_layout_inputs`); a bad one is a `PlanError`."""
    from .sweep_layout import check_layout_inputs

    check_layout_inputs(v, {k: i.default for k, i in INPUTS.items()})
    question(v)


@lru_cache(maxsize=256)
def _scenario_without_link(*shared):
    """The scenario of a point's inputs but its link (the link is a plain field, set per point); ``shared``
    as `_shared` gives them."""
    return question(dict(zip(SHARED, shared)) | _NO_LINK).scenario


LINK_INPUTS = ("link", "link_efficiency", "rtt", "link_price", "link_headroom")
"""The inputs of a point's `layout.Link` (set per point on the scenario without its link)."""

_NO_LINK = {k: INPUTS[k].default for k in LINK_INPUTS + ("basis",)}


def scenario(v: dict):
    """The `plans.Scenario` of a point's inputs as given (unsearched: `searched_scenario` is what a point
    plans)."""
    q = question(v)
    return replace(_scenario_without_link(*_shared(v)), link=q.link)


def _forget_with_profiles() -> None:
    """Parsed inputs hold profiles: forget them when the user profile folders change."""
    from types import SimpleNamespace

    from ..profiles.store import forget_with_folders

    for cached in (_scenario_without_link, *(SimpleNamespace(cache_clear=c.clear) for c in _memo_dicts())):
        forget_with_folders(cached)


class MemoPrefill:
    """A prefill model that remembers the latencies of each array of lengths it was asked for.

    The optimizer asks the same questions at every point sharing a model, instance and workload (the
    candidate thresholds' representative lengths, often the same bisection steps); the answer for an
    array is the wrapped model's own for that exact array, so results are bit-identical with or
    without the memo. At most `MAX_ENTRIES` arrays are kept.
    """

    MAX_ENTRIES = 4096

    def __init__(self, inner):
        self.inner = inner
        self._memo: dict = {}

    @property
    def source(self) -> str:
        return self.inner.source

    def __getattr__(self, name):  # anything else a caller reads comes from the wrapped model
        return getattr(self.inner, name)

    def latency_s(self, l) -> np.ndarray:
        return self._remember("latency", self.inner.latency_s, l)

    def busy_s(self, l) -> np.ndarray:
        """The wrapped model's busy time (`performance.base.busy_s`: its latency where it has none),
        remembered as the latency is (the representative mode asks it at each threshold's mean length)."""
        if not hasattr(self.inner, "busy_s"):
            return self.latency_s(l)
        return self._remember("busy", self.inner.busy_s, l)

    def _remember(self, what: str, fn, l) -> np.ndarray:
        arr = np.asarray(l, dtype=float)
        key = (what, arr.shape, arr.tobytes())
        hit = self._memo.get(key)
        if hit is None:
            if len(self._memo) >= self.MAX_ENTRIES:
                self._memo.clear()
            hit = np.asarray(fn(arr), dtype=float)
            hit.setflags(write=False)
            self._memo[key] = hit
        return hit


SHARED = tuple(k for k in INPUTS if k not in LINK_INPUTS + ("basis",) + LAYOUT_INPUTS)
"""The inputs a point's scenario (without its link) and per-instance performance depend on: every
planning input but the link's, the basis and a layout base's (`LAYOUT_INPUTS`: a point on a layout file is
planned by `sweep_layout`, outside these caches); an input added to `question.FIELDS` is shared unless named
here."""


def shared_inputs(v: dict) -> tuple:
    """The values of `SHARED` of a point's inputs."""
    return tuple(v[k] for k in SHARED)


_shared = shared_inputs

NOT_PREFILL = ("tpot", "mode", "workload", "transfer_bytes")
"""Shared inputs no prefill model reads (decode SLO, throughput mode, workload, transfer policy)."""


def _prefill_key(shared: tuple, site: str, instance) -> tuple:
    """What one site's prefill model depends on: the shared inputs but the other site and `NOT_PREFILL`,
    the site's chips as its instance shape (``8xH200``, whatever the pool's size). Every other input is
    kept, so an input added later is in the key until someone shows no prefill model reads it."""
    other = "local" if site == "remote" else "remote"
    return (site,) + tuple(str(instance) if k == site else v for k, v in zip(SHARED, shared)
                           if k != other and k not in NOT_PREFILL)


def _perf(*shared):
    """`_perf_of` the scenario of ``shared`` (`_shared`) as given, unsearched."""
    return _perf_of(shared, _scenario_without_link(*shared))


def configuration(sc) -> tuple:
    """What a (searched) scenario chose beyond its inputs: chips per local and remote instance, the routed
    experts' split per role, the decode attention mode, the bytes on the link and the dtypes. With the
    shared inputs it is everything the scenario's performance inputs depend on."""
    return (sc.instance_chips, sc.remote_instance_chips, sc.remote_moe, sc.local_moe, sc.decode_moe,
            sc.dp_attention, sc.transfer, sc.model.weight_dtype, sc.model.kv_dtype)


_PERFS: dict = {}
_INSTANCE_MODELS: dict = {}
"""Per-instance prefill models and decode capacities the points' searches share (`performance.sharing`)."""


def _perf_of(shared: tuple, sc):
    """`plans.perf_inputs` of ``sc`` (a point's scenario; independent of its link), with memoized prefill
    models, once per shared inputs and `configuration`; a `PlanError` (e.g. the model cannot decode there)
    is returned, not raised, so it is cached too."""
    from ..analytic.throughput import PerfInputs, SitePerf
    from ..layout import instances_from_chips
    from .plans import perf_inputs

    key = (shared, configuration(sc))
    if key in _PERFS:
        return _PERFS[key]
    if len(_PERFS) >= MAX_PLANS:
        _PERFS.clear()
    try:
        perf = perf_inputs(sc)
    except PlanError as exc:
        _PERFS[key] = exc
        return exc
    # Points that differ only in the other site, the TPOT or the transfer policy share one memoized
    # prefill model per site (`_prefill_key`), and with it the grid's figures of that model
    # (`LengthGrid._once` keys them by the model object).
    local_key = _prefill_key(shared, "local", instances_from_chips(sc.local, sc.instance_chips, "local")[0]) + (
        sc.local_moe,)
    remote_key = _prefill_key(shared, "remote",
                              instances_from_chips(sc.remote, sc.remote_chips_per_instance, "remote")[0]) + (
        sc.remote_moe,)
    sites = {name: SitePerf(_memo_prefill(local_key, sp.prefill), sp.decode, sp.transfer)
             for name, sp in perf.sites.items()}
    _PERFS[key] = PerfInputs(perf.model, _memo_prefill(remote_key, perf.remote_prefill), sites, perf.output_tokens)
    return _PERFS[key]


_SEARCHES: dict = {}


def searched_scenario(v: dict, q: Question):
    """The scenario ``size`` plans for a point: its configuration searched per role
    (`configurations.search_configurations` within `search_spec`, then `configurations.chosen_scenario`) on
    the point's link, or as given with ``inputs: paper``. The search reads the link's rate, efficiency and
    headroom only (`plans.search_free_link`: not the round trip or price, which go into TTFT and costs), so
    it runs once per `search_group`; a `PlanError` (no configuration fits) is raised, and remembered."""
    from .configurations import chosen_scenario, search_configurations
    from .plans import search_free_link

    spec = search_spec(v)
    base = _scenario_without_link(*_shared(v))
    if spec is None:
        return replace(base, link=q.link)
    def search():
        sc = replace(base, link=search_free_link(q.link))
        try:
            # report=0: no runner-up TTFT (the ranking does not read it; only size's tables print it)
            return chosen_scenario(sc, search_configurations(sc, spec, report=0, prune=True))
        except PlanError as exc:
            return exc

    hit = remembered(_SEARCHES, search_group(v), search, MAX_PLANS)
    if isinstance(hit, PlanError):
        raise PlanError(str(hit))  # a fresh error: the cached one must not collect tracebacks
    return replace(hit, link=q.link)


_PREFILLS: dict = {}
MAX_PREFILLS = 256


def _memo_prefill(key: tuple, prefill) -> MemoPrefill:
    """The `MemoPrefill` of the first prefill model built for ``key`` (the same inputs build the same
    model: ``prefill`` answers exactly as the one kept)."""
    return remembered(_PREFILLS, key, lambda: MemoPrefill(prefill), MAX_PREFILLS)


def link_free(layout) -> bool:
    """True when a layout's plan cannot depend on the point's link: no remote site and no site with a
    link (local alone, the homogeneous baselines). `plans.optimize` then reads only the layout, the
    scenario's grid and mode, and the performance inputs."""
    return layout.remote is None and all(s.link is None for s in layout.pd_sites)


_PLANS: dict = {}
MAX_PLANS = 1024


def _remembered(key, compute):
    return remembered(_PLANS, key, compute, MAX_PLANS)


def plan_of(v: dict, sc, perf):
    """``layout -> plans.optimize(layout, sc, perf)`` for one point (its optimum only: ``surface=False``, a
    row reads no surface), reusing what earlier points with the
    same shared inputs (`_shared`) computed. A link-free layout (`link_free`: local alone, the
    homogeneous baselines) is planned once: the reused plan is the very object the first point computed.
    A layout with a link is searched once per `plans.search_free` form (points differing only in round
    trip or link price share the search) and `plans.relink`-ed to the point's link, which recomputes
    its costs, and its TTFT once per round trip. Either way the plan is `optimize`'s, so the rows are
    the same with or without the memo (tests/test_sweep_speed.py). The layouts are `layouts_of`'s: one
    with a link carries the point's, and its name with the shared inputs and configuration gives the rest."""
    from .plans import optimize, relink, search_free_link

    shared = (_shared(v), configuration(sc))  # a searched point's plans depend on what its search chose
    # the layouts with a link carry the point's (`layouts_of`): their `search_free` forms differ from point
    # to point in the link only, so the layout's name and its search-free link stand for them
    search_link, timed_link = search_free_link(sc.link), search_free_link(sc.link, rtt=False)

    def plan(layout):
        if link_free(layout):
            return _remembered((shared, layout), lambda: optimize(layout, sc, perf, surface=False))
        if any(s.link != sc.link for s in layout.pd_sites):
            raise ValueError(f"plan_of: layout {layout.name!r} does not carry the point's link")
        searched = _remembered((shared, layout.name, search_link), lambda: optimize(layout, sc, perf, surface=False))
        if searched.layout == layout:
            return searched
        # one TTFT per round trip: points differing only in link price share it
        timed = _remembered((shared, layout.name, timed_link), lambda: relink(searched, layout, sc))
        return timed if timed.layout == layout else relink(timed, layout, sc)

    return plan


_BASES: dict = {}


def resolved_basis(v: dict, sc, basis: str | None) -> str:
    """`plans.resolve_basis` of a point's searched scenario, once per shared inputs and `configuration`
    (the default basis reads which chips the pools hold); a `PlanError` for a bad name, as it raises."""
    from .plans import resolve_basis

    return remembered(_BASES, (_shared(v), configuration(sc), basis), lambda: resolve_basis(sc, basis), MAX_PLANS)


_LAYOUTS: dict = {}


def layouts_of(v: dict, sc):
    """``basis -> plans.compare_layouts(sc, basis, equal_instances=False)`` for one point, from those of the
    first point with the same shared inputs (`_shared`), `configuration` and basis: the layouts with a link
    (PrfaaS-PD, naive heterogeneous) get this point's (`with_link`), the link-free ones are the very objects
    built first. The rental basis's baseline reads the link's price: there the link is in the key too."""
    from .plans import compare_layouts

    def build(basis: str):
        try:
            return compare_layouts(sc, basis, equal_instances=False)
        except PlanError as exc:
            return exc   # remembered too: every point of the key would fail the same way

    def layouts(basis: str) -> dict:
        key = (_shared(v), configuration(sc), basis, sc.link if basis == "rental" else None)
        hit = remembered(_LAYOUTS, key, lambda: build(basis), MAX_PLANS)
        if isinstance(hit, PlanError):
            raise PlanError(str(hit))  # a fresh error: the cached one must not collect tracebacks
        return {name: with_link(lay, sc.link) for name, lay in hit.items()}

    return layouts


def with_link(layout, link):
    """``layout`` with ``link`` on each of its sites that has one (the layout itself when none has)."""
    if all(s.link is None or s.link == link for s in layout.pd_sites):
        return layout
    return replace(layout, pd_sites=tuple(s if s.link is None else replace(s, link=link) for s in layout.pd_sites))


def prefill_group(v: dict) -> tuple:
    """Points with the same prefill group share their length grid and usually their prefill models and
    the grid's tables of them (`_prefill_key`: the shared inputs but the sites' pools and `NOT_PREFILL`;
    the pools' chips in instances of the same shape share too). A hint for warming caches
    (`sweep_run.warm_points`), never a cache key."""
    return tuple(x for k, x in zip(SHARED, shared_inputs(v)) if k not in ("remote", "local") + NOT_PREFILL) + (
        v["workload"],)


def search_group(v: dict) -> tuple:
    """Points with the same search group share all `plan_of` caches but the TTFT and costs of their
    round trip and price: batches cut between groups compute each search once (`sweep_run.balanced`)."""
    return shared_inputs(v) + searched_link(v)


def searched_link(v: dict) -> tuple:
    """The link inputs a point's configuration search reads (`plans.search_free_link`): rate, efficiency,
    headroom; not the round trip or price."""
    return v["link"], v["link_efficiency"], v["link_headroom"]


def sharing_order(pts: list[Point]) -> list[Point]:
    """``pts`` reordered for a parallel backend, whose workers each build the caches of their own tasks:
    grouped by every shared input but the remote pool (what the local site's prefill and decode candidates
    depend on, `configurations.decode_candidates`: a local shape at one TPOT, the costliest caches a
    search shares), within that by link (rate, efficiency, headroom), within that by remote pool, so that
    each `search_group` stays contiguous; groups in the order they first appear, points within a group in
    theirs. A sweep of 5 remote pools x 4 local pools x 10 TPOTs in spec order (remote outermost) had every
    worker build every local shape's decode candidates (benchmarks/bench_sweep.py, ``shapes``). Rows do not
    depend on the order."""
    rank: dict[tuple, int] = {}

    def key(p: Point) -> tuple:
        v = p.values
        local = tuple(x for k, x in zip(SHARED, shared_inputs(v)) if k != "remote")
        link = local + searched_link(v)
        levels = (("local",) + local, ("link",) + link, ("remote",) + link + (v["remote"],))
        return tuple(rank.setdefault(level, len(rank)) for level in levels) + (p.index,)

    return sorted(pts, key=key)


def _memo_dicts() -> tuple[dict, ...]:
    """Every dict the sweep memoizes in: `clear_caches` empties them, a change of the profile folders too
    (`_forget_with_profiles`)."""
    return (_MEMO, _QUESTIONS, _PERFS, _INSTANCE_MODELS, _SEARCHES, _PLANS, _LAYOUTS, _BASES, _PREFILLS)


def clear_caches() -> None:
    """Empty every cache of the sweep (a benchmark's cold start; tests that edit profiles)."""
    for cache in _memo_dicts():
        cache.clear()
    _scenario_without_link.cache_clear()


# ---------------------------------------------------------------------------------------------------
# Rows.

# (column, type, meaning). Types: str, int, float, bool. Input columns come first (`INPUTS`).
OUTPUT_COLUMNS: list[tuple[str, str, str]] = [
    ("link_gbps", "float", "line rate, Gbit/s (parsed from link)"),
    ("rtt_s", "float", "round trip, s (parsed from rtt)"),
    ("tpot_s", "float", "decode SLO, s per token (parsed from tpot)"),
    ("remote_chips", "int", "remote chips in total"),
    ("local_chips", "int", "local chips in total"),
    ("threshold_tokens", "float", "routing threshold t: longer uncached prompts prefill remotely"),
    ("offloaded_share", "float", "fraction of requests prefilled remotely"),
    ("instances", "str", "instances per role, e.g. 2R + 8 (=5P+3D)"),
    ("remote_chips_per_instance", "int", "chips per remote prefill instance (searched unless instance_chips pins it)"),
    ("local_chips_per_instance", "int", "chips per local instance, prefill and decode (searched unless pinned)"),
    ("remote_prefill_ep", "int", "remote prefill's expert-parallel degree (1: routed experts sliced by TP)"),
    ("local_prefill_ep", "int", "local prefill's expert-parallel degree (1: sliced by TP)"),
    ("decode_ep", "int", "local decode's expert-parallel degree (1: sliced by TP)"),
    ("decode_dp_attention", "bool", "local decode runs data-parallel attention (one cache copy per request)"),
    ("decode_attention_dp", "int", "local decode's data-parallel attention ranks (1: TP attention; below the "
     "chips per instance: ranks of several chips, TP attention within each)"),
    ("decode_batch", "int", "local decode's batch cap: running requests per instance within the TPOT SLO and HBM"),
    ("transfer_policy", "str", "bytes on the link the plan moves: replicated, dp-attention or logical"),
    ("remote_prefill_instances", "int", "R: remote prefill instances"),
    ("local_prefill_instances", "int", "P: local prefill instances"),
    ("local_decode_instances", "int", "D: local decode instances"),
    ("throughput_rps", "float", "Lambda_max of PrfaaS-PD, requests/s"),
    ("output_tokens_per_s", "float", "output tokens/s at Lambda_max"),
    ("binding_stage", "str", "stage that limits Lambda_max"),
    ("egress_gbps", "float", "mean remote egress at Lambda_max, Gbit/s"),
    ("link_utilization", "float", "egress / line rate"),
    ("link_binds_below_tokens", "float", "the link binds for thresholds below this (empty: never)"),
    ("ttft_unloaded_mean_s", "float", "unloaded TTFT mean, s (no queueing)"),
    ("ttft_unloaded_p50_s", "float", "unloaded TTFT P50, s"),
    ("ttft_unloaded_p90_s", "float", "unloaded TTFT P90, s"),
    ("ttft_unloaded_p99_s", "float", "unloaded TTFT P99, s"),
    ("capex_usd", "float", "purchase price of the chips, USD (profile price indications)"),
    ("cloud_usd_per_hour", "float", "cloud cost of chips plus link, USD/hour"),
    ("cost_per_mtok_usd", "float", "cloud USD per million output tokens at Lambda_max (full load)"),
    ("homogeneous_throughput_rps", "float", "Lambda_max of homogeneous PD on the local chip (per basis)"),
    ("naive_throughput_rps", "float", "Lambda_max of naive heterogeneous on the same chips"),
    ("gain_vs_homogeneous", "float", "PrfaaS-PD / homogeneous Lambda_max"),
    ("gain_vs_naive", "float", "PrfaaS-PD / naive heterogeneous Lambda_max"),
    ("warnings", "str", "codes of the plan's warnings, comma-separated (docs/output.md lists them)"),
    ("baseline_error", "str", "why the baselines could not be planned (the PrfaaS-PD figures stand)"),
    ("error", "str", "why this point could not be planned at all (other outputs empty)"),
]
ROW_COLUMNS: list[tuple[str, str]] = ([("point_key", "str"), ("point_index", "int")]
                                      + [(k, i.kind) for k, i in INPUTS.items()]
                                      + [(k, t) for k, t, _ in OUTPUT_COLUMNS]
                                      + [("fingerprint", "str"), ("row_check", "str")])


def _finite_or_none(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def configuration_columns(sc, perf) -> dict:
    """The configuration columns of a point's row: what its scenario runs (searched or pinned), as `size`'s
    ``configurations`` section records it (`configurations.RoleConfig`)."""
    from ..performance.operators import attention_ranks

    def degree(moe: str, chips: int) -> int:
        return chips if moe == "ep" else 1

    n_l, n_r = sc.instance_chips, sc.remote_chips_per_instance
    return {"remote_chips_per_instance": n_r, "local_chips_per_instance": n_l,
            "remote_prefill_ep": degree(sc.remote_moe, n_r), "local_prefill_ep": degree(sc.local_moe, n_l),
            "decode_ep": degree(sc.decode_moe, n_l), "decode_dp_attention": bool(sc.dp_attention),
            "decode_attention_dp": attention_ranks(sc.dp_attention, n_l),
            "decode_batch": int(perf.sites["local"].decode.batch), "transfer_policy": sc.transfer}


def _parsed_inputs(q: Question) -> dict:
    return {"link_gbps": q.resolved["link"] / 1e9, "rtt_s": q.resolved["rtt"], "tpot_s": q.tpot_s,
            "remote_chips": q.pools["remote"].chips, "local_chips": q.pools["local"].chips}


HEADLINE = ("threshold_tokens", "offloaded_share", "instances", "remote_prefill_instances", "local_prefill_instances",
            "local_decode_instances", "throughput_rps", "output_tokens_per_s", "binding_stage", "egress_gbps",
            "link_utilization", "link_binds_below_tokens", "ttft_unloaded_mean_s", "ttft_unloaded_p50_s",
            "ttft_unloaded_p90_s", "ttft_unloaded_p99_s", "capex_usd", "cloud_usd_per_hour")


def headline(plan) -> dict:
    """The headline figures of one PrfaaS-PD `plans.Plan`: ``size``'s plan row (`plan_report.plan_row`)
    restricted to `HEADLINE`, with the cloud cost per million output tokens at Lambda_max."""
    from ..output.plan_report import plan_row

    row = plan_row("prfaas-pd", plan)
    out = {k: _finite_or_none(row[k]) for k in HEADLINE}
    per_usd = plan.output_tokens_per_usd_cloud
    out["cost_per_mtok_usd"] = 1e6 / per_usd if per_usd and math.isfinite(per_usd) else None
    return out


def evaluate(point: Point) -> dict:
    """The row of one point: inputs, headline figures and gains, or the reason it cannot be planned."""
    from .plans import basis_baseline_name, compare, size
    from .warnings import basis_warning, beaten_warning, plan_warnings

    v = point.values
    if v["layout"]:
        from .sweep_layout import evaluate_layout

        row = evaluate_layout(point, AUTO_BASIS, AUTO_TRANSFER)
        return {k: row.get(k) for k, _ in ROW_COLUMNS}
    q = question(v)
    row = {"point_key": point.key, "point_index": point.index, **v, **_parsed_inputs(q)}
    try:
        sc = searched_scenario(v, q)
        perf = _perf_of(_shared(v), sc)
        if isinstance(perf, PlanError):
            raise PlanError(str(perf))  # a fresh error: the cached one must not collect tracebacks
        basis = resolved_basis(v, sc, q.basis)
        row["basis"] = basis  # the basis the verdict used, never "auto"
        try:
            plans = compare(sc, basis, perf=perf, equal_instances=False, plan_of=plan_of(v, sc, perf),
                            layouts_of=layouts_of(v, sc))
        except PlanError as exc:  # a baseline cannot be built; PrfaaS-PD itself may still plan
            row["baseline_error"] = str(exc)
            plans = {"prfaas-pd": size(sc, perf=perf)}
        prf = plans["prfaas-pd"]
        check_servable(prf)
        row.update(headline(prf))
        row.update(configuration_columns(sc, perf))
        hom = basis_baseline_name(basis)
        gains = {}
        for name, col in ((hom, "homogeneous"), ("naive-heterogeneous", "naive")):
            if name in plans:
                base = plans[name].best.lambda_max
                gains[name] = prf.best.lambda_max / base if base > 0 else None
                row[f"{col}_throughput_rps"] = base
                row[f"gain_vs_{col}"] = gains[name]
        # None, not "", when no warning fires: a CSV cell cannot tell the two apart, Parquet can
        row["warnings"] = ",".join(w.code for w in beaten_warning(gains) + plan_warnings(prf, sc)
                                   + (basis_warning(basis, prf, plans[hom].layout) if hom in plans else [])) or None
    except PlanError as exc:
        row["error"] = str(exc)
    return {k: row.get(k) for k, _ in ROW_COLUMNS}


_TOKEN: list = [None]   # the `evaluate_chunk` token the caches were filled under


def evaluate_chunk(chunk: list[Point], token: str | None = None) -> list[dict]:
    """Rows of a batch of points (one task of a parallel backend). ``token`` names what the cached inputs
    were resolved from (`sweep_run.cache_token`: the profile files' bytes and the tool version): a
    process that last filled its caches under another token empties them first, so a long-lived worker
    (Dask) or a second sweep in one process never plans with profiles edited since. None keeps them."""
    from ..performance.sharing import sharing

    if token is not None and token != _TOKEN[0]:
        clear_caches()
        _TOKEN[0] = token
    with sharing(_INSTANCE_MODELS):   # every point's search builds the same per-instance models
        return [evaluate(p) for p in chunk]


# ---------------------------------------------------------------------------------------------------
# Pareto fronts.

MINIMIZE = "min"
MAXIMIZE = "max"
# Direction in which each metric is better. docs/sweep.md prints this table.
DIRECTIONS: dict[str, str] = {
    **{k: MINIMIZE for k in (
        "cost_per_mtok_usd", "capex_usd", "cloud_usd_per_hour", "ttft_unloaded_mean_s", "ttft_unloaded_p50_s",
        "ttft_unloaded_p90_s", "ttft_unloaded_p99_s", "link_gbps", "link_price", "egress_gbps",
        "link_utilization", "remote_chips", "local_chips", "rtt_s", "tpot_s", "threshold_tokens")},
    **{k: MAXIMIZE for k in (
        "throughput_rps", "output_tokens_per_s", "gain_vs_homogeneous", "gain_vs_naive", "offloaded_share",
        "homogeneous_throughput_rps", "naive_throughput_rps")},
}


def _schema():
    from ..output.rowfile import TableSchema

    inputs = [(k, i.kind, i.help) for k, i in INPUTS.items()]
    keys = [("point_key", "str", "hash of the point's inputs (the resume key)"),
            ("point_index", "int", "position in the spec's order")]
    keys_out = [("fingerprint", "str", "hash of the inputs, the resolved profile files' bytes and the tool version"),
                ("row_check", "str", "hash of the row's values: an edited or cut-short row does not match it")]
    pareto = [("pareto", "bool", "on the Pareto front of pareto_metrics"),
              ("pareto_metrics", "str", "the metrics of the front")]
    return TableSchema(tuple(keys + inputs + OUTPUT_COLUMNS + keys_out + pareto), tuple(INPUTS), dict(DIRECTIONS))


def parse_metrics(text: str) -> list[str]:
    """``cost_per_mtok_usd,ttft_unloaded_p90_s`` -> the metric names, each in `DIRECTIONS`."""
    names = [n.strip() for n in str(text).split(",") if n.strip()]
    if len(names) < 2:
        raise PlanError(f"`pareto` {text!r}: expected at least two metrics separated by commas")
    for n in names:
        if n not in DIRECTIONS:
            raise PlanError(f"`pareto`: {n!r} has no known direction ({closest_names(n, DIRECTIONS)})")
    if len(set(names)) != len(names):
        raise PlanError(f"`pareto` {text!r}: a metric is named twice")
    return names


def pareto_mask(rows: list[dict], metrics: list[str]) -> list[bool]:
    """True for each row no other row dominates on ``metrics`` (each in its `DIRECTIONS` sense; at least
    as good on all, better on one). Rows with an error or a missing value are never on the front."""
    signs = np.array([1.0 if DIRECTIONS[m] == MINIMIZE else -1.0 for m in metrics])
    vals = np.full((len(rows), len(metrics)), np.nan)
    for i, r in enumerate(rows):
        if not r.get("error"):
            vals[i] = [np.nan if r.get(m) is None else float(r[m]) for m in metrics]
    ok = np.all(np.isfinite(vals), axis=1)
    cost = vals * signs  # every metric now minimized
    mask = np.zeros(len(rows), dtype=bool)
    idx = np.flatnonzero(ok)
    c = cost[idx]
    for j, i in enumerate(idx):
        dominated = np.any(np.all(c <= c[j], axis=1) & np.any(c < c[j], axis=1))
        mask[i] = not dominated
    return mask.tolist()


SCHEMA = _schema()  # the rows' columns, inputs and directions, for plots and reports (output/)
_forget_with_profiles()
