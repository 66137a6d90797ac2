"""A planning question's inputs, resolved: model, chips, link, workload, SLO, and the per-instance
performance of every site.

`scenario` turns what a user types (``"32xH200"``, ``"100G"``, ``"25ms"``, ``"paper"``) into a
`Scenario`; `DEFAULTS` holds the one default of each input, shared by every command and the Python API.
Units: lengths in tokens, times in seconds, rates in bit/s, prices in USD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..analytic.throughput import LengthGrid, PerfInputs, SitePerf
from ..analytic.transfer import DEFAULT_POLICY, POLICIES, TransferBytes
from ..errors import PlanError
from ..layout import Layout, Link, instances_from_chips
from ..performance import given
from ..performance.base import DecodeCapacity, Instance, PrefillModel
from ..profiles import ModelProfile

GRID_POINTS = 8192
MODES = ("representative", "exact")
INPUT_LEVELS = ("predicted", "paper")


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
    transfer: str = DEFAULT_POLICY  # bytes on the link: replicated | logical (analytic/transfer.py)


def scenario_for(model: ModelProfile, remote: str, local: str, link: Link, instance_chips: int, tpot_s: float,
                 mode: str, inputs: str, workload, notes: tuple[str, ...] = (),
                 transfer: str = DEFAULT_POLICY) -> Scenario:
    """A `Scenario` for a `prfaas_plan.workload.Workload`: its uncached lengths on a grid, its output,
    and the decode context from the whole prompt (prefix-cache hits still sit in decode's KV)."""
    grid = LengthGrid.from_distribution(workload.input_length, GRID_POINTS)
    output = float(workload.output_length.mean())
    context = float(workload.total_input_length.mean()) + output / 2
    wl_note = f"workload {workload.name}: " + "; ".join(workload.notes)
    notes = tuple(notes) + (wl_note, TransferBytes(transfer, instance_chips).describe(model))
    return Scenario(model, remote, local, link, instance_chips, tpot_s, mode, inputs, grid, output, context,
                    workload.name, notes, transfer)


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
             transfer_bytes: str = DEFAULTS.transfer_bytes) -> Scenario:
    """A `Scenario` from the values a user types: ``link`` a rate such as ``"100G"``, ``tpot`` such as
    ``"25ms"`` or ``"40tok/s"``, ``rtt`` such as ``"2ms"`` (None: no propagation delay, noted),
    ``link_price`` in USD per Gbps-month, ``workload`` as `prfaas_plan.workload.resolve_workload` takes it."""
    from ..profiles import get_model
    from ..units import parse_rate_bps, parse_time_s, parse_tpot_s
    from ..workload import resolve_workload

    check_choice(mode, MODES, "--mode")
    check_choice(inputs, INPUT_LEVELS, "--inputs")
    check_choice(transfer_bytes, POLICIES, "--transfer-bytes")
    if not 0 < link_efficiency <= 1:
        raise PlanError(f"--link-efficiency {link_efficiency!r}: expected a fraction in (0, 1]")
    if not (math.isfinite(link_price) and link_price >= 0):
        raise PlanError(f"--link-price {link_price:g}: expected a non-negative price")
    lk = Link(parse_rate_bps(link, "--link"), link_efficiency, parse_time_s(rtt, "--rtt", "ms") if rtt else 0.0,
              link_price)
    notes = () if rtt else (RTT_NOTE,)
    return scenario_for(get_model(model), remote, local, lk, instance_chips, parse_tpot_s(tpot), mode, inputs,
                        resolve_workload(workload), notes, transfer_bytes)


def _paper_only(model: ModelProfile, instance: Instance) -> None:
    if model.name != given.MODEL:
        raise PlanError(f"--inputs paper exists only for {given.MODEL} (the paper's case-study model)")
    if instance.chip.name not in ("h200", "h20"):
        raise PlanError(f"--inputs paper covers 8xH200 and 8xH20 only, not {instance}")


def instance_prefill(model: ModelProfile, instance: Instance, inputs: str) -> PrefillModel:
    """Prefill model of one instance: ``paper`` inputs (measured H200, back-solved H20) or ``predicted``
    (measured table where the model has one, else the calibrated roofline)."""
    if inputs == "paper":
        _paper_only(model, instance)
        return given.measured_h200() if instance.chip.name == "h200" else given.backsolved_h20()[0]
    from ..performance import prefill_model

    return prefill_model(model, instance)


def instance_decode(model: ModelProfile, instance: Instance, tpot_s: float, context_tokens: float,
                    inputs: str) -> DecodeCapacity:
    """Decode capacity of one instance at a TPOT SLO (seconds) and mean context (tokens); a model that
    cannot decode there at all is a `PlanError`."""
    if inputs == "paper":
        _paper_only(model, instance)
        if instance.chip.name != "h20":
            raise PlanError(f"--inputs paper gives decode capacity for 8xH20 only, not {instance}")
        return given.backsolved_h20()[1]
    from ..performance import decode_capacity

    decode = decode_capacity(model, instance, tpot_s, context_tokens)
    if decode.batch <= 0:
        if decode.binding == "slo":
            raise PlanError(f"{model.name} cannot decode on {instance} within a {tpot_s * 1e3:g} ms TPOT: even one "
                            f"request's step takes longer ({decode.source}); loosen --tpot")
        raise PlanError(f"{model.name} cannot decode on {instance}: its weights leave no HBM for a single "
                        f"request ({decode.source}); use chips with more HBM or more chips per instance "
                        "(--instance-chips)")
    return decode


def perf_inputs(sc: Scenario) -> PerfInputs:
    """Per-instance performance of the scenario's remote and local instances."""
    context = sc.context_tokens
    l_inst, _ = instances_from_chips(sc.local, sc.instance_chips, "--local")
    r_inst, _ = instances_from_chips(sc.remote, sc.instance_chips, "--remote")
    site = SitePerf(instance_prefill(sc.model, l_inst, sc.inputs),
                    instance_decode(sc.model, l_inst, sc.tpot_s, context, sc.inputs),
                    TransferBytes(sc.transfer, l_inst.chips))
    return PerfInputs(sc.model, instance_prefill(sc.model, r_inst, sc.inputs), {"local": site}, sc.output_tokens)


def layout_perf(layout: Layout, sc: Scenario) -> PerfInputs:
    """Per-instance performance of every site of a (possibly multi-site) layout."""
    context = sc.context_tokens
    by_instance: dict[str, SitePerf] = {}   # sites of one instance shape share its performance
    sites = {}
    for site in layout.pd_sites:
        key = str(site.instance)
        if key not in by_instance:
            by_instance[key] = SitePerf(instance_prefill(sc.model, site.instance, sc.inputs),
                                        instance_decode(sc.model, site.instance, sc.tpot_s, context, sc.inputs),
                                        TransferBytes(sc.transfer, site.instance.chips))
        sites[site.name] = by_instance[key]
    remote = None
    if layout.remote is not None:
        remote = instance_prefill(sc.model, layout.remote.instance, sc.inputs)
    return PerfInputs(sc.model, remote, sites, sc.output_tokens)
