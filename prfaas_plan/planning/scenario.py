"""A planning question's inputs, resolved: model, chips, link, workload, SLO, and the per-instance
performance of every site.

`Scenario` is the resolved record the planner and the analytic layer consume; it is built by
`prfaas_plan.planning.question.Question.scenario` (the one place that parses and checks what a user
types), which this module does not import.
Units: lengths in tokens, times in seconds, rates in bit/s, prices in USD.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..analytic.throughput import LengthGrid, PerfInputs, SitePerf
from ..analytic.transfer import DEFAULT_POLICY, TransferBytes, decode_transfer
from ..errors import PlanError
from ..layout import Layout, Link, instances_from_chips
from ..performance import given
from ..performance.base import DecodeCapacity, Instance, PrefillModel
from ..performance.sharing import shared
from ..profiles import DEFAULT_STACK, ModelProfile


GRID_POINTS = 8192



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
    dp_attention: bool | int = False   # local decode's data-parallel attention (`operators.attention_ranks`)
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


@shared
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
                    dp_attention: bool | int = False) -> DecodeCapacity:
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
                    decode_transfer(sc.transfer, l_inst.chips, sc.dp_attention))
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


def site_key(site, sc: Scenario) -> tuple:
    """What one PD site's per-instance performance depends on: shape, stack and configuration (sites with
    one key share one performance model and one set of length bins)."""
    return (str(site.instance), site.stack or sc.stack, site.prefill_moe, site.decode_moe, site.dp_attention,
            site.transfer or sc.transfer)


def layout_perf(layout: Layout, sc: Scenario) -> PerfInputs:
    """Per-instance performance of every site of a (possibly multi-site) layout, each role in the
    configuration its site records (`layout.PDSite`; the fixed TP configuration unless searched)."""
    context = sc.context_tokens
    by_key: dict[tuple, SitePerf] = {}
    sites = {}
    for site in layout.pd_sites:
        key = site_key(site, sc)
        _, stack, p_moe, d_moe, dp, transfer = key
        if key not in by_key:
            by_key[key] = SitePerf(instance_prefill(sc.model, site.instance, sc.inputs, stack, p_moe),
                                   instance_decode(sc.model, site.instance, sc.tpot_s, context, sc.inputs, stack,
                                                   d_moe, dp),
                                   decode_transfer(transfer, site.instance.chips, dp))
        sites[site.name] = by_key[key]
    remote = None
    if layout.remote is not None:
        remote = instance_prefill(sc.model, layout.remote.instance, sc.inputs, layout.remote.stack or sc.stack,
                                  layout.remote.moe)
    return PerfInputs(sc.model, remote, sites, sc.output_tokens)
