"""A planning question's inputs, resolved: model, chips, link, workload, SLO, and the per-instance
performance of every site.

`scenario` turns what a user types (``"32xH200"``, ``"100G"``, ``"25ms"``, ``"paper"``) into a
`Scenario`; `DEFAULTS` holds the one default of each input, shared by every command and the Python API.
Units: lengths in tokens, times in seconds, rates in bit/s, prices in USD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..analytic.throughput import MODES, LengthGrid, PerfInputs, SitePerf
from ..analytic.transfer import DEFAULT_POLICY, POLICIES, TransferBytes
from ..errors import PlanError
from ..layout import Layout, Link, instances_from_chips
from ..performance import given
from ..performance.base import DecodeCapacity, Instance, PrefillModel
from ..profiles import DEFAULT_STACK, ModelProfile
from ..vocabulary import InputLevel, values

GRID_POINTS = 8192
INPUT_LEVELS = values(InputLevel)


@dataclass(frozen=True)
class Defaults:
    """The default of every planning input (what a command uses when an option is not given)."""

    model: str = "kimi-linear"
    remote: str = "32xH200"
    local: str = "64xH20"
    link: str = "100G"
    tpot: str = "25ms"
    workload: str = "paper"
    instance_chips: int = 8
    mode: str = "exact"                 # planning's; reproduce keeps the paper's representative mode
    inputs: str = "predicted"
    transfer_bytes: str = DEFAULT_POLICY  # bytes on the link (analytic/transfer.py)
    link_efficiency: float = 0.95
    link_price_usd_per_gbps_month: float = 0.0


DEFAULTS = Defaults()

RTT_NOTE = ("default rtt: 0 ms (no propagation delay; fiber adds about 1 ms of round trip per 100 km, "
            "pass --rtt)")


@dataclass(frozen=True)
class Scenario:
    """The inputs of one planning question (everything resolved, nothing defaulted later)."""

    model: ModelProfile
    remote: str               # chips, e.g. 32xH200
    local: str                # chips, e.g. 64xH20
    link: Link | None         # None only for a layout file without a remote site (its sites carry the links)
    instance_chips: int
    tpot_s: float
    mode: str                 # representative | exact
    inputs: str               # predicted | paper
    grid: LengthGrid          # uncached input lengths (what prefill computes and routing compares)
    output_tokens: float      # mean output length
    context_tokens: float     # mean context a decode step reads: whole prompt (cached part too) + output / 2
    workload_name: str
    notes: tuple[str, ...] = field(default=())
    transfer: str = DEFAULT_POLICY  # bytes on the link: replicated | logical | dp-attention (analytic/transfer.py)
    stack: str = DEFAULT_STACK  # serving stack of every site unless a layout file names one per site
    remote_instance_chips: int | None = None  # chips per remote instance; None: ``instance_chips``
    # how each role splits the model (`performance.Parallel`); the configuration search sets them
    remote_moe: str = "tp"        # remote prefill's routed experts: tp (sliced) | ep (whole experts per chip)
    local_moe: str = "tp"         # local prefill's
    decode_moe: str = "tp"        # local decode's
    dp_attention: bool = False    # local decode runs data-parallel attention (one cache copy per request)
    weight_dtypes: tuple[str, ...] = ()  # dtypes the configuration search may choose from (empty: the model's)
    kv_dtypes: tuple[str, ...] = ()

    @property
    def local_chips_per_instance(self) -> int:
        return self.instance_chips

    @property
    def remote_chips_per_instance(self) -> int:
        return self.instance_chips if self.remote_instance_chips is None else self.remote_instance_chips


def scenario_for(model: ModelProfile, remote: str, local: str, link: Link, instance_chips: int, tpot_s: float,
                 mode: str, inputs: str, workload, notes: tuple[str, ...] = (),
                 transfer: str = DEFAULT_POLICY, stack: str = DEFAULT_STACK,
                 remote_instance_chips: int | None = None) -> Scenario:
    """A `Scenario` for a `prfaas_plan.workload.Workload`: its uncached lengths on a grid, its output,
    and the decode context from the whole prompt (prefix-cache hits still sit in decode's KV).
    ``instance_chips`` is the local instance's shape, and the remote's unless ``remote_instance_chips``."""
    grid = LengthGrid.from_distribution(workload.input_length, GRID_POINTS)
    output = float(workload.output_length.mean())
    context = float(workload.total_input_length.mean()) + output / 2
    wl_note = f"workload {workload.name}: " + "; ".join(workload.notes)
    notes = tuple(notes) + (wl_note, TransferBytes(transfer, instance_chips).describe(model))
    return Scenario(model, remote, local, link, instance_chips, tpot_s, mode, inputs, grid, output, context,
                    workload.name, notes, transfer, stack, remote_instance_chips)


def with_dtypes(model: ModelProfile, weight_dtype: str | None = None,
                kv_dtype: str | None = None) -> tuple[ModelProfile, tuple[str, ...]]:
    """The model profile with its weight dtype (every weight, routed experts included) and/or KV-cache
    dtype replaced for this run, and a note saying so; unchanged (no note) when both are None."""
    from ..profiles.schema import dtype_bytes

    changes, notes = {}, []
    if weight_dtype is not None:
        dtype_bytes(weight_dtype, "`weight_dtype`")
        changes.update(weight_dtype=weight_dtype, expert_dtype=weight_dtype)
        notes.append(f"weights as {weight_dtype} for this run (--weight-dtype; the {model.name} profile says "
                     f"{model.weights_summary})")
    if kv_dtype is not None:
        dtype_bytes(kv_dtype, "`kv_dtype`")
        changes["kv_dtype"] = kv_dtype
        notes.append(f"KV cache as {kv_dtype} for this run (--kv-dtype; the profile says {model.kv_dtype})")
    return (replace(model, **changes) if changes else model), tuple(notes)


def resolve_instance_chips(instance_chips: int, remote_instance_chips: int | None,
                           local_instance_chips: int | None) -> tuple[int, int | None]:
    """(local chips per instance, remote chips per instance or None for the same) from ``--instance-chips``
    (both roles) and the per-role ``--remote-instance-chips`` / ``--local-instance-chips``."""
    for name, v in (("`instance_chips`", instance_chips), ("`remote_instance_chips`", remote_instance_chips),
                    ("`local_instance_chips`", local_instance_chips)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise PlanError(f"{name} {v!r}: expected a whole number of chips, at least 1")
    local = instance_chips if local_instance_chips is None else local_instance_chips
    remote = instance_chips if remote_instance_chips is None else remote_instance_chips
    return local, (None if remote == local else remote)


def check_choice(value: str, choices: tuple[str, ...], option: str) -> str:
    """``value`` if it is one of ``choices``, else a `PlanError` naming ``option``."""
    if value not in choices:
        raise PlanError(f"{option} {value!r}: expected {' or '.join(choices)}")
    return value


def scenario(model: str = DEFAULTS.model, remote: str = DEFAULTS.remote, local: str = DEFAULTS.local,
             link: str = DEFAULTS.link, tpot: str = DEFAULTS.tpot, workload: str = DEFAULTS.workload,
             instance_chips: int = DEFAULTS.instance_chips, mode: str = DEFAULTS.mode,
             inputs: str = DEFAULTS.inputs, link_efficiency: float = DEFAULTS.link_efficiency,
             rtt: str | None = None,
             link_price: float = DEFAULTS.link_price_usd_per_gbps_month,
             transfer_bytes: str = DEFAULTS.transfer_bytes, stack: str | None = None, *,
             remote_instance_chips: int | None = None, local_instance_chips: int | None = None,
             weight_dtype: str | None = None, kv_dtype: str | None = None) -> Scenario:
    """A `Scenario` from the values a user types: ``link`` a rate such as ``"100G"``, ``tpot`` such as
    ``"25ms"`` or ``"40tok/s"``, ``rtt`` such as ``"2ms"`` (None: no propagation delay, noted),
    ``link_price`` in USD per Gbps-month, ``workload`` as `prfaas_plan.workload.resolve_workload` takes it.
    ``instance_chips`` shapes both roles' instances unless ``remote_instance_chips`` /
    ``local_instance_chips`` override one; ``weight_dtype`` / ``kv_dtype`` (e.g. ``"fp8"``) replace the
    model profile's for this run (`with_dtypes`)."""
    from ..profiles import get_model
    from ..units import parse_rate_bps, parse_time_s, parse_tpot_s
    from ..workload import resolve_workload

    check_choice(mode, MODES, "`mode`")
    check_choice(inputs, INPUT_LEVELS, "`inputs`")
    check_choice(transfer_bytes, POLICIES, "`transfer_bytes`")
    if not 0 < link_efficiency <= 1:
        raise PlanError(f"`link_efficiency` {link_efficiency!r}: expected a fraction in (0, 1]")
    if not (math.isfinite(link_price) and link_price >= 0):
        raise PlanError(f"`link_price` {link_price:g}: expected a non-negative price")
    lk = Link(parse_rate_bps(link, "`link`"), link_efficiency, parse_time_s(rtt, "`rtt`", "ms") if rtt else 0.0,
              link_price)
    from ..profiles import get_stack

    local_chips, remote_chips = resolve_instance_chips(instance_chips, remote_instance_chips, local_instance_chips)
    weight_dtypes, kv_dtypes = dtype_choices(weight_dtype, "`weight_dtype`"), dtype_choices(kv_dtype, "`kv_dtype`")
    profile, dtype_notes = with_dtypes(get_model(model), weight_dtypes[0] if weight_dtypes else None,
                                       kv_dtypes[0] if kv_dtypes else None)
    notes = dtype_notes + (() if rtt else (RTT_NOTE,))
    notes += stack_notes(stack, inputs)
    sc = scenario_for(profile, remote, local, lk, local_chips, parse_tpot_s(tpot), mode, inputs,
                      resolve_workload(workload), notes, transfer_bytes, get_stack(stack).name, remote_chips)
    many = len(weight_dtypes) > 1 or len(kv_dtypes) > 1
    return replace(sc, weight_dtypes=weight_dtypes if many else (), kv_dtypes=kv_dtypes if many else ())


def dtype_choices(text: str | None, what: str) -> tuple[str, ...]:
    """``"fp8,bf16"`` -> ("fp8", "bf16"): the dtypes the configuration search may choose from (the first is
    the one a plan without the search uses); () for None. Each is checked; a repeat is an error."""
    if text is None:
        return ()
    from ..profiles.schema import dtype_bytes

    out = tuple(p.strip() for p in str(text).split(","))
    for p in out:
        if not p:
            raise PlanError(f"{what} {text!r}: an empty dtype in the list")
        dtype_bytes(p, what)
    if len(set(out)) != len(out):
        raise PlanError(f"{what} {text!r}: a dtype is listed twice")
    return out


def stack_notes(stack: str | None, inputs: str = "predicted", layout: Layout | None = None) -> tuple[str, ...]:
    """Notes naming the serving stack in effect and where its numbers come from: ``stack`` (None: the
    default `DEFAULT_STACK`, announced) for every site, or with a ``layout`` for its sites that name no
    ``stack:`` of their own (a site's own stack wins, and the note says which sites do)."""
    from ..profiles import get_stack
    from .rates import stack_notes as one_stack_notes

    if layout is None:
        return tuple(one_stack_notes(stack, inputs))
    sites = ([layout.remote] if layout.remote is not None else []) + list(layout.pd_sites)
    own = [s for s in sites if s.stack]
    if not own:
        return tuple(one_stack_notes(stack, inputs))
    if inputs == "paper":
        return (f"stacks not used for --inputs paper (the file names {', '.join(sorted({s.stack for s in own}))}): "
                "the paper's tables already hold its engine",)
    given = "--stack" if stack is not None else "the default"
    rest = [s.name for s in sites if not s.stack]
    notes = [f"a site's own stack: wins over {given}: " + ", ".join(f"{s.name} runs {s.stack}" for s in own)
             + (f"; {', '.join(rest)} run{'s' if len(rest) == 1 else ''} {get_stack(stack).name} ({given})"
                if rest else f" (every site names its own; {given} {get_stack(stack).name} is not used)")]
    if rest and stack is None:
        notes.insert(0, f"default stack: {DEFAULT_STACK} for sites naming none (pass --stack to choose another)")
    names = dict.fromkeys([s.stack for s in own] + ([get_stack(stack).name] if rest else []))
    return tuple(notes) + tuple(get_stack(n).describe() for n in names)


def _paper_only(model: ModelProfile, instance: Instance) -> None:
    if model.name != given.MODEL:
        raise PlanError(f"`inputs` paper exists only for {given.MODEL} (the paper's case-study model)")
    if instance.chip.name not in ("h200", "h20"):
        raise PlanError(f"`inputs` paper covers 8xH200 and 8xH20 only, not {instance}")


def instance_prefill(model: ModelProfile, instance: Instance, inputs: str,
                     stack: str = DEFAULT_STACK, moe: str = "tp") -> PrefillModel:
    """Prefill model of one instance: ``paper`` inputs (measured H200, back-solved H20: the paper's Eq. 4
    form, latency = busy time) or ``predicted`` (measured table where the model has one, else the calibrated
    roofline on serving ``stack``)."""
    if inputs == "paper":
        _paper_only(model, instance)
        return given.measured_h200() if instance.chip.name == "h200" else given.backsolved_h20()[0]
    from ..performance import prefill_model

    return prefill_model(model, instance, moe=moe, stack=stack)


def instance_decode(model: ModelProfile, instance: Instance, tpot_s: float, context_tokens: float,
                    inputs: str, stack: str = DEFAULT_STACK, moe: str = "tp",
                    dp_attention: bool = False) -> DecodeCapacity:
    """Decode capacity of one instance at a TPOT SLO (seconds) and mean context (tokens), its experts split
    as ``moe`` and attention data-parallel with ``dp_attention``; a model that cannot decode there at all
    is a `PlanError`."""
    if inputs == "paper":
        _paper_only(model, instance)
        if instance.chip.name != "h20":
            raise PlanError(f"`inputs` paper gives decode capacity for 8xH20 only, not {instance}")
        return given.backsolved_h20()[1]
    from ..performance import decode_capacity

    decode = decode_capacity(model, instance, tpot_s, context_tokens, moe, stack=stack, dp_attention=dp_attention)
    if decode.batch <= 0:
        if decode.binding == "slo":
            raise PlanError(f"{model.name} cannot decode on {instance} within a {tpot_s * 1e3:g} ms TPOT: even one "
                            f"request's step takes longer ({decode.source}); loosen `tpot`")
        raise PlanError(f"{model.name} cannot decode on {instance}: its weights leave no HBM for a single "
                        f"request ({decode.source}); use chips with more HBM or more chips per instance "
                        "(`local_instance_chips`), or lighter weights (`weight_dtype` fp8)")
    return decode


def perf_inputs(sc: Scenario) -> PerfInputs:
    """Per-instance performance of the scenario's remote and local instances."""
    context = sc.context_tokens
    l_inst, _ = instances_from_chips(sc.local, sc.instance_chips, "`local`")
    r_inst, _ = instances_from_chips(sc.remote, sc.remote_chips_per_instance, "`remote`")
    site = SitePerf(instance_prefill(sc.model, l_inst, sc.inputs, sc.stack, sc.local_moe),
                    instance_decode(sc.model, l_inst, sc.tpot_s, context, sc.inputs, sc.stack, sc.decode_moe,
                                    sc.dp_attention),
                    TransferBytes(sc.transfer, l_inst.chips))
    return PerfInputs(sc.model, instance_prefill(sc.model, r_inst, sc.inputs, sc.stack, sc.remote_moe),
                      {"local": site}, sc.output_tokens)


def prfaas_layout(sc: Scenario) -> Layout:
    """The scenario's PrfaaS-PD layout (threshold and split free), each role in its own instance shape."""
    from ..layout import prfaas_pd

    return prfaas_pd(sc.remote, sc.local, sc.link, sc.instance_chips,
                     remote_instance_chips=sc.remote_instance_chips)


def naive_layout(sc: Scenario) -> Layout:
    """The scenario's naive heterogeneous layout (every prefill remote)."""
    from ..layout import naive_heterogeneous

    return naive_heterogeneous(sc.remote, sc.local, sc.link, sc.instance_chips,
                               remote_instance_chips=sc.remote_instance_chips)


def layout_perf(layout: Layout, sc: Scenario) -> PerfInputs:
    """Per-instance performance of every site of a (possibly multi-site) layout."""
    context = sc.context_tokens
    by_instance: dict[tuple, SitePerf] = {}   # sites of one instance shape and stack share it
    sites = {}
    for site in layout.pd_sites:
        stack = site.stack or sc.stack
        key = (str(site.instance), stack)
        if key not in by_instance:
            by_instance[key] = SitePerf(instance_prefill(sc.model, site.instance, sc.inputs, stack),
                                        instance_decode(sc.model, site.instance, sc.tpot_s, context, sc.inputs,
                                                        stack),
                                        TransferBytes(sc.transfer, site.instance.chips))
        sites[site.name] = by_instance[key]
    remote = None
    if layout.remote is not None:
        remote = instance_prefill(sc.model, layout.remote.instance, sc.inputs, layout.remote.stack or sc.stack)
    return PerfInputs(sc.model, remote, sites, sc.output_tokens)
