"""The planning question, asked once: every input of ``size``, ``compare`` and a sweep point, parsed and
checked in one place (`Question.parse`), resolved into a frozen `Question`.

Each input is one `Field` of `FIELDS`: its name (the Python keyword, the sweep spec key, and in the CLI
``--name-with-dashes``), its help, its parser, its default and where that default comes from. The CLI
generates its options from `FIELDS` (`prfaas_plan.cli.question_options`) and a sweep takes its inputs
from them (`prfaas_plan.planning.sweep.INPUTS`), so a new planning input is one `Field` here plus the
code that uses its value (``docs/extending.md``, "Add a planning input").

Constructors: `Question.parse` (what a user types, e.g. ``link="100G"``), `Question.from_layout` (a
layout file's sites, shapes and links, the rest as typed), `Question.from_point` (a sweep point's
values); the paper's case study builds its own with `Question.parse` and its notes
(`prfaas_plan.planning.case_study.question`: this module imports no module of a command). `Question.scenario` is the resolved record the
analytic layer consumes (`prfaas_plan.planning.scenario.Scenario`).

Units: times in seconds, rates in bit/s, prices in USD (per Gbps-month for the link); a value's unit is
in its field's help. Errors name the input in backticks (`prfaas_plan.errors.INPUT_NAME`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..errors import PlanError, closest_names
from ..vocabulary import Basis, BasisWord, InputLevel, Mode, TransferPolicy, values

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Instance, Layout, Link
    from ..profiles import ModelProfile, StackProfile
    from ..workload import Workload
    from .scenario import Scenario

REQUIRED = object()   # `Field.sweep_default` when it is the field's own default


@dataclass(frozen=True)
class Field:
    """One planning input.

    ``kind`` is the type of the value as typed (``str``, ``int``, ``float``: the CLI option's type and the
    sweep column's); ``choices`` an enum of `prfaas_plan.vocabulary` when the value is one of a list;
    ``default`` what every command uses when the input is not given (None: unset, the parser says what
    that means) and ``default_source`` why; ``sweep_default`` what a sweep row holds when a spec does not
    set it (a column needs a value; `REQUIRED`: ``default``). ``parse`` turns the typed value into the
    resolved one (raising `PlanError` that names the input); ``minimum`` bounds a whole number (the CLI
    enforces it too); ``sweep`` False keeps the input out of sweep specs; ``column`` is the meaning of its column in a
    sweep's results (default: ``help``).
    """

    name: str
    kind: str
    default: object
    default_source: str
    help: str
    parse: Callable[[object], object]
    choices: type[StrEnum] | None = None
    minimum: int | None = None
    sweep_default: object = REQUIRED
    sweep: bool = True
    column: str = ""

    @property
    def column_help(self) -> str:
        """What the input's column of a sweep's results holds (``column``, else the help)."""
        return self.column or self.help

    @property
    def point_default(self) -> object:
        """The value a sweep point holds when its spec does not set this input."""
        return self.default if self.sweep_default is REQUIRED else self.sweep_default


# ---------------------------------------------------------------------------------------------------
# Parsers: typed value -> resolved value. Each names its input in backticks.


def choice(name: str, choices: tuple[str, ...]) -> Callable[[object], str]:
    def parse(value) -> str:
        text = str(value.value if isinstance(value, StrEnum) else value)
        if text not in choices:
            raise PlanError(f"`{name}` {text!r}: expected {' or '.join(choices)}")
        return text
    return parse


def _model(text) -> ModelProfile:
    from ..profiles import get_model

    return get_model(text)


def _chips(name: str) -> Callable[[object], object]:
    def parse(text):
        from ..units import parse_chip_count

        parse_chip_count(text, f"`{name}`")
        return str(text)
    return parse


def _rate(name: str) -> Callable[[object], float]:
    def parse(text) -> float:
        from ..units import parse_rate_bps

        return parse_rate_bps(text, f"`{name}`")
    return parse


def _fraction(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise PlanError(f"`link_efficiency` {value!r}: expected a fraction in (0, 1]")
    return float(value)


def _headroom(value) -> float:
    from ..units import parse_headroom

    return parse_headroom(value, "`link_headroom`")


def _price(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value >= 0):
        raise PlanError(f"`link_price` {value:g}: expected a non-negative price" if isinstance(value, (int, float))
                        else f"`link_price` {value!r}: expected a non-negative price")
    return float(value)


ZERO_TIMES = ("0", "0s", "0ms", "0.0", "none")


def _rtt(text) -> float | None:
    """Seconds; None when not given (no propagation delay, and a note says so)."""
    from ..units import parse_time_s

    if text is None:
        return None
    if str(text).strip().lower() in ZERO_TIMES:   # zero needs no unit
        return 0.0
    return parse_time_s(text, "`rtt`", "ms")


def _tpot(text) -> float:
    from ..units import parse_tpot_s

    return parse_tpot_s(text, "`tpot`")


def _workload(text) -> Workload:
    from ..workload import resolve_workload

    return resolve_workload(text)


def _whole(name: str) -> Callable[[object], int | None]:
    def parse(value):
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PlanError(f"`{name}` {value!r}: expected a whole number of chips, at least 1")
        return value
    return parse


def _dtype(name: str) -> Callable[[object], str | None]:
    """A dtype, or a comma-separated list the configuration search chooses from (`scenario.dtype_choices`)."""
    def parse(value):
        from .scenario import dtype_choices

        if value is None:
            return None
        dtype_choices(str(value), f"`{name}`")
        return str(value)
    return parse


def _stack(text) -> StackProfile:
    from ..profiles import get_stack

    return get_stack(text)


def _basis(value) -> str | None:
    """The basis name (None: each plan's default, `plans.default_basis`)."""
    from .plans import check_basis

    if value is None or str(value) == AUTO:
        return None
    return check_basis(str(value.value if isinstance(value, StrEnum) else value))


AUTO = "auto"
"""A sweep point's basis when its spec sets none: the default of size and compare (`plans.default_basis`)."""

_POLICY_HELP = ("Bytes on the link: replicated (the per-rank KV copies a TP transfer engine moves into TP "
                "attention, as Mooncake measured), dp-attention (decode runs data-parallel attention, SGLang "
                "--enable-dp-attention: one copy) or logical (one copy, the paper's convention).")

# ---------------------------------------------------------------------------------------------------
# The inputs, in the sweep's column order (a results file's columns); a new input goes at the end.

FIELDS: dict[str, Field] = {f.name: f for f in (
    Field("model", "str", "kimi-linear", "the issue's example model", "Model profile name or alias (repeatable "
          "where a command takes several; kv-throughput and validate default to every bundled model).", _model, column="model profile name or alias"),
    Field("remote", "str", "32xH200", "the paper's case study", "Remote prefill chips, e.g. 32xH200.",
          _chips("remote"), column="remote prefill chips, e.g. 32xH200"),
    Field("local", "str", "64xH20", "the paper's case study", "Local PD chips, e.g. 64xH20.", _chips("local"), column="local PD chips, e.g. 64xH20"),
    Field("link", "str", "100G", "the paper's case study", "Inter-site link line rate with a unit, e.g. 100G.",
          _rate("link"), column="inter-site line rate, e.g. 10G, 400G"),
    Field("link_efficiency", "float", 0.95, "TCP goodput on a long link (docs/methods.md)",
          "Goodput fraction of the line rate.", _fraction,
          column="goodput fraction of the line rate, (0, 1]"),
    Field("link_price", "float", 0.0, "no link cost unless priced",
          "Link price, USD per Gbps-month (added to the hourly cost).", _price,
          column="link price, USD per Gbps-month (added to the hourly cost)"),
    Field("rtt", "str", None, "no propagation delay (noted)", "Link round trip with a unit, e.g. 2ms (default 0).",
          _rtt, sweep_default="0ms",
          column="link round trip, e.g. 2ms (fiber: about 1 ms per 100 km)"),
    Field("tpot", "str", "25ms", "the paper's decode SLO",
          "Decode SLO per output token: 25ms or 40tok/s (default 25ms).", _tpot,
          column="decode SLO, e.g. 25ms or 40tok/s"),
    Field("workload", "str", "paper", "the paper's case study",
          "paper (the case study's truncated log-normal), trace (the bundled Mooncake conversation trace) or a "
          ".jsonl/.csv trace file.", _workload,
          column="paper, trace or a .jsonl/.csv trace path"),
    Field("instance_chips", "int", 8, "an 8-GPU node", "Chips per instance (both roles).",
          _whole("instance_chips"), minimum=1, column="chips per instance"),
    Field("mode", "str", "exact", "planning's (reproduce keeps the paper's representative)",
          "exact (planning's default: expectations over the length distribution) or representative (the paper's: "
          "stages at E[L|L>t] and E[L|L<=t]; reproduce's default).", choice("mode", values(Mode)), Mode,
          column="exact (planning's default, as size and compare) or representative"),
    Field("inputs", "str", "predicted", "our performance model",
          "predicted (our performance model) or paper (prfaas-1t only: the paper's H200 profile and back-solved "
          "H20 inputs).", choice("inputs", values(InputLevel)), InputLevel,
          column="predicted or paper (prfaas-1t only)"),
    Field("stack", "str", None, "sglang (stack_profiles/; noted)",
          "Serving stack profile (stack_profiles/: sglang, vllm, trtllm, mooncake-sglang-pd, paper-sglang, "
          "paper-vllm, ...): fixed latency, per-forward and per-step overheads, prefill batching. Default sglang.",
          _stack, sweep_default="sglang",
          column="serving stack profile of both sites (stack_profiles/), e.g. vllm"),
    Field("transfer_bytes", "str", "replicated", "what Mooncake's TP transfer engine measured",
          _POLICY_HELP + " Default: replicated (simulate: logical with `inputs` paper).",
          choice("transfer_bytes", values(TransferPolicy)), TransferPolicy,
          column="bytes on the link: replicated, dp-attention or logical (docs/methods.md)"),
    Field("basis", "str", None, "capex where every chip has a price, else chips (plans.default_basis)",
          "What the homogeneous baseline of the verdict holds equal to PrfaaS-PD: capex (what its purchase price "
          "buys; the default when every chip has a price), rental (what its cloud $/hour rents), chips (its chip "
          "count; the default otherwise) or instances (its instance count); cost = capex. The same in size, "
          "compare and sweep.", _basis, BasisWord, sweep_default=AUTO,
          column="what the homogeneous baseline holds equal: capex, rental, chips or instances (cost = capex); "
                 "auto = capex where every chip has a price, else chips, as size and compare (plans.default_basis)"),
    Field("remote_instance_chips", "int", None, "`instance_chips`",
          "Chips per remote prefill instance (default: `instance_chips`).", _whole("remote_instance_chips"),
          minimum=1, sweep=False),
    Field("local_instance_chips", "int", None, "`instance_chips`",
          "Chips per local PD instance (default: `instance_chips`).", _whole("local_instance_chips"),
          minimum=1, sweep=False),
    Field("weight_dtype", "str", None, "the model profile's",
          "Store every weight in this dtype for the run (e.g. fp8, int4), routed experts included, overriding the "
          "model profile (its measured tables then no longer apply).", _dtype("weight_dtype"), sweep=False),
    Field("kv_dtype", "str", None, "the model profile's",
          "Store the KV cache in this dtype for the run (e.g. fp8), overriding the model profile.",
          _dtype("kv_dtype"), sweep=False),
    Field("link_headroom", "str", "0%", "none: a plan may fill the link's goodput (figures as without it)",
          "Share of the link's goodput a plan leaves free for bursts, e.g. 20% or 0.2: throughput, threshold and "
          "split are optimized with the link capped at (1 - headroom) x goodput. Default 0%.", _headroom,
          column="share of the link's goodput the plan leaves free for bursts, e.g. 20% (as --link-headroom)"),
)}

LAYOUT_FIELDS = ("remote", "local", "link", "instance_chips", "remote_instance_chips", "local_instance_chips", "rtt",
                 "link_efficiency", "link_price", "link_headroom")
"""The inputs a layout file stands in for (its sites, instance shapes and links)."""


def defaults() -> dict[str, object]:
    """Every input's default, as typed."""
    return {name: f.default for name, f in FIELDS.items()}


@dataclass(frozen=True)
class Pool:
    """One role's hardware: ``instances`` instances of ``instance`` (``instances`` None: left open, for the
    configuration search to choose)."""

    instance: Instance
    instances: int | None

    @property
    def chips(self) -> int | None:
        return None if self.instances is None else self.instance.chips * self.instances


@dataclass(frozen=True)
class Question:
    """One planning question, every input resolved and checked.

    ``given`` holds each input as typed (`FIELDS` order; what rows, keys and notes show), ``resolved``
    its parsed value (`Field.parse`); the properties below read them with their types. ``layout`` is a
    layout file's layout when the question came from one (then its sites carry shapes and links).
    """

    given: Mapping[str, object]
    resolved: Mapping[str, object]
    layout: Layout | None = None
    layout_path: str | None = None
    input_notes: tuple[str, ...] | None = None   # None: the rtt and stack notes of `scenario`
    explicit: frozenset[str] = frozenset()   # the inputs the caller gave (`parse`), the rest at their defaults

    # --- constructors

    @classmethod
    def parse(cls, *, memo: dict | None = None, **text) -> Question:
        """A question from what a user types (``link="100G"``, ``tpot="40tok/s"``); inputs not given take
        their `Field.default`. An unknown keyword or a bad value is a `PlanError` naming the input.
        ``memo`` (a dict the caller keeps) remembers parsed values across calls (a sweep's points share
        most of theirs)."""
        for name in text:
            if name not in FIELDS:
                raise PlanError(f"unknown planning input {name!r} ({closest_names(name, FIELDS)})")
        given = {name: text.get(name, f.default) for name, f in FIELDS.items()}
        given = {k: (v.value if isinstance(v, StrEnum) else v) for k, v in given.items()}
        resolved = {}
        for name, f in FIELDS.items():
            key = (name, given[name])
            if memo is not None and key in memo:
                resolved[name] = memo[key]
                continue
            resolved[name] = f.parse(given[name])
            if memo is not None:
                memo[key] = resolved[name]
        q = cls(MappingProxyType(given), MappingProxyType(resolved),
                explicit=frozenset(k for k, v in text.items() if v is not None))
        q.pools  # the chip totals make whole instances of their shapes
        return q

    @classmethod
    def from_point(cls, point: Mapping[str, object], memo: dict | None = None) -> Question:
        """A sweep point's question (its values are the spec's, every sweepable input present; the sweep's
        own inputs, not planning inputs -- a layout base's, `planning.sweep.LAYOUT_INPUTS` -- are left out:
        `planning.sweep_layout` reads them)."""
        return cls.parse(memo=memo, **{k: v for k, v in point.items() if k in FIELDS})

    @classmethod
    def from_layout(cls, path, layout: Layout | None = None, **text) -> Question:
        """A layout file's question: the file's sites, instance shapes and first site's link (its rtt too);
        the other inputs as typed. Giving an input the file stands in for (`LAYOUT_FIELDS`) is an error.
        ``layout``: the file's layout as already loaded and changed (a sweep point's links scaled, its remote
        count replaced: `planning.sweep_layout`); default: the file read from ``path``."""
        from ..layout import load_layout

        extra = [f"`{n}`" for n in LAYOUT_FIELDS if n in text]
        if extra:
            raise PlanError(f"`layout` describes the sites, instance shapes and links: drop {', '.join(extra)}")
        lay = load_layout(path) if layout is None else layout
        r, site = lay.remote, lay.pd_sites[0]
        shapes = {"remote": f"{r.instance.chips * r.instances}x{r.instance.chip.name.upper()}" if r else "",
                  "local": f"{site.instance.chips * site.instances}x{site.instance.chip.name.upper()}",
                  "instance_chips": site.instance.chips}
        q = cls.parse(**text)
        given = {**q.given, **shapes, "remote_instance_chips": r.instance.chips if r is not None else None}
        resolved = {**q.resolved, **shapes, "remote_instance_chips": given["remote_instance_chips"],
                    "link": None}
        return cls(MappingProxyType(given), MappingProxyType(resolved), lay, str(path))

    # --- typed reads

    @property
    def model(self) -> ModelProfile:
        """The model profile, its dtypes as `weight_dtype` / `kv_dtype` say (`scenario.with_dtypes`)."""
        return self._profile[0]

    @property
    def dtype_notes(self) -> tuple[str, ...]:
        """Notes saying which dtypes this run overrides (none when the profile's hold)."""
        return self._profile[1]

    @cached_property
    def _profile(self) -> tuple[ModelProfile, tuple[str, ...]]:
        from .scenario import with_dtypes

        return with_dtypes(self.resolved["model"], *(c[0] if c else None for c in self.dtype_choices))

    @property
    def dtype_choices(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(weight dtypes, KV dtypes) the user allows, the first of each the one a plan without the search
        uses; () where the model profile's holds."""
        from .scenario import dtype_choices

        return (dtype_choices(self.resolved["weight_dtype"], "`weight_dtype`"),
                dtype_choices(self.resolved["kv_dtype"], "`kv_dtype`"))

    @property
    def instance_chips(self) -> tuple[int, int]:
        """(chips per local instance, chips per remote instance): the shapes given, or the default's
        (`nominal_shape` where the default does not divide the pool)."""
        r = self.resolved
        local = r["instance_chips"] if r["local_instance_chips"] is None else r["local_instance_chips"]
        remote = r["instance_chips"] if r["remote_instance_chips"] is None else r["remote_instance_chips"]
        return self.nominal_shape("local", local), self.nominal_shape("remote", remote)

    def nominal_shape(self, site: str, chips: int) -> int:
        """Chips per instance of ``site``'s pool before the configuration search: ``chips``, unless the shape
        was left to the search (neither `instance_chips` nor the site's own shape given, predicted inputs, no
        layout file) and ``chips`` does not make whole instances of the pool; then the first shape of the
        search's order (`configurations.SHAPE_ORDER`) that does, e.g. 4 for ``12xH200``. The search replaces
        it; the question only needs whole instances to stand on (`pools`). ``inputs`` paper is not searched:
        its 8-chip tables keep 8, and a pool they do not divide stays an error."""
        pinned = {"instance_chips", f"{site}_instance_chips"} & self.explicit
        if pinned or self.layout is not None or self.inputs == "paper" or not self.given[site]:
            return chips
        from ..units import parse_chip_count
        from .configurations import SHAPE_ORDER

        total = parse_chip_count(self.given[site], f"`{site}`").count
        if total % chips == 0:
            return chips
        return next((n for n in SHAPE_ORDER if total % n == 0), chips)

    @cached_property
    def pools(self) -> dict[str, Pool | None]:
        """``{"remote": Pool | None, "local": Pool}``: each role's instance shape and count."""
        from ..layout import instances_from_chips

        local_chips, remote_chips = self.instance_chips
        out: dict[str, Pool | None] = {"remote": None}
        if self.given["remote"]:
            out["remote"] = Pool(*instances_from_chips(self.given["remote"], remote_chips, "`remote`"))
        out["local"] = Pool(*instances_from_chips(self.given["local"], local_chips, "`local`"))
        return out

    @property
    def link(self) -> Link | None:
        """The link (None for a layout file without a remote site: its sites carry the links)."""
        if self.layout is not None:
            return self.layout.pd_sites[0].link
        from ..layout import Link

        r = self.resolved
        return Link(r["link"], r["link_efficiency"], r["rtt"] or 0.0, r["link_price"], r["link_headroom"])

    @property
    def tpot_s(self) -> float:
        return self.resolved["tpot"]

    @property
    def workload(self) -> Workload:
        return self.resolved["workload"]

    @property
    def stack(self) -> StackProfile:
        """The serving stack of every site (a layout file's sites may name their own)."""
        return self.resolved["stack"]

    @property
    def mode(self) -> str:
        return self.resolved["mode"]

    @property
    def inputs(self) -> str:
        return self.resolved["inputs"]

    @property
    def transfer(self) -> str:
        return self.resolved["transfer_bytes"]

    @property
    def basis(self) -> str | None:
        """The verdict's basis (None: `plans.default_basis`)."""
        return self.resolved["basis"]

    # --- the analytic layer's record

    @cached_property
    def scenario(self) -> Scenario:
        """The resolved `Scenario` the planner and the analytic layer consume, with the notes a plan prints
        about its inputs (dtypes, rtt, stack, workload, bytes on the link)."""
        from .scenario import RTT_NOTE, scenario_for, stack_notes

        local_chips, remote_chips = self.instance_chips
        notes = self._profile[1]
        if self.input_notes is not None:
            notes += self.input_notes
            remote = None if remote_chips == local_chips else remote_chips
        elif self.layout is not None:
            notes += stack_notes(self.given["stack"], self.inputs, self.layout)
            remote = None if self.layout.remote is None else remote_chips
        else:
            notes += (() if self.given["rtt"] is not None else (RTT_NOTE,))
            notes += stack_notes(self.given["stack"], self.inputs)
            remote = None if remote_chips == local_chips else remote_chips
        sc = scenario_for(self.model, self.given["remote"], self.given["local"], self.link, local_chips,
                          self.tpot_s, self.mode, self.inputs, self.workload, notes, self.transfer,
                          self.stack.name, remote)
        weights, kvs = self.dtype_choices
        if len(weights) > 1 or len(kvs) > 1:
            sc = replace(sc, weight_dtypes=weights, kv_dtypes=kvs)
        return sc


def follow_ups(*, threshold=None, target_rate=None, load=None, ttft=None, verify=False, size_link=None,
               link_degraded=None) -> dict:
    """The follow-up questions of ``size`` as `answer_size` takes them, their units parsed: ``threshold``
    text such as ``16k`` (tokens), ``ttft`` such as ``p90<4s`` (percentile, seconds), ``link_degraded`` a
    rate such as ``10G`` (bit/s); the others as given (checked by the answers)."""
    from ..units import parse_length, parse_rate_bps, parse_ttft_slo

    return {"threshold": float(parse_length(threshold, "`threshold`")) if threshold is not None else None,
            "target_rate": target_rate, "load": load,
            "ttft_slo": parse_ttft_slo(ttft, "`ttft`") if ttft is not None else None, "verify_lp": verify,
            "size_link": size_link,
            "link_degraded_bps": parse_rate_bps(link_degraded, "`link_degraded`") if link_degraded is not None
            else None}


class _Defaults:
    """The default of every planning input as attributes (``DEFAULTS.link``), read from `FIELDS`."""

    def __getattr__(self, name: str):
        try:
            return FIELDS[name].default
        except KeyError:
            raise AttributeError(name) from None


DEFAULTS = _Defaults()


def scenario(**text) -> Scenario:
    """Short for ``Question.parse(**text).scenario``: the resolved `Scenario` of what a user types."""
    return Question.parse(**text).scenario


def sweep_fields() -> dict[str, Field]:
    """The inputs a sweep spec may set, in column order."""
    return {name: f for name, f in FIELDS.items() if f.sweep}


def as_values(enum_or_text) -> object:
    """A typed value as the plain value a question holds (an enum member's string)."""
    return enum_or_text.value if isinstance(enum_or_text, StrEnum) else enum_or_text


__all__ = ["AUTO", "DEFAULTS", "FIELDS", "LAYOUT_FIELDS", "Basis", "Field", "Pool", "Question", "defaults",
           "follow_ups", "scenario", "sweep_fields"]
