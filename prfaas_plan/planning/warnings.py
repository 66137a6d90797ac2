"""Warnings about a plan an architect should not take at face value, each with a stable code.

A `PlanWarning` is data: ``code`` is stable across releases (machine output keys on it), ``message``
is the sentence a reader sees. Renderers print each once, before the notes.
"""

from __future__ import annotations

from dataclasses import dataclass

REMOTE_UNDERUSED_BELOW = 0.10   # remote prefill utilization (fraction) below which the site adds little
DECODE_BATCH_MIN = 4            # concurrent requests per decode instance below which the model barely fits
ROLE_BUSY_MIN = 0.60            # utilization at the optimum below which a role's chips mostly wait (issue 21)
LINK_LINE_MAX = 0.90            # mean egress as a fraction of line rate above which bursts find no headroom
ROLES = {"remote_prefill": "remote prefill", "local_prefill": "local prefill", "local_decode": "local decode"}


@dataclass(frozen=True)
class PlanWarning:
    """One warning: a stable kebab-case ``code`` and a one-sentence ``message``."""

    code: str
    message: str


def plan_warnings(plan, sc) -> list[PlanWarning]:
    """Warnings about a PrfaaS-PD `Plan` of the `Scenario` ``sc``: an idle remote site, a decode batch
    too small to trust, and a remote chip predicted slower than a local chip it out-computes."""
    ev, perf = plan.best, plan.perf
    out = []
    util = ev.stage_utilization
    if ev.layout.remote is not None and ev.p_remote < 1e-3 and ev.bounds["link"] <= ev.bounds["remote_prefill"]:
        # Any positive link is a valid input (units.MIN_LINK_BPS is the floor: 1 bit/s); one too slow to
        # carry offloaded KV gives a plan that offloads (almost) nothing, said here rather than refused.
        out.append(PlanWarning("link-prevents-offload",
                               f"the {sc.link.bandwidth_bps / 1e9:g} Gbps link limits offload to {ev.p_remote:.2%} "
                               "of requests: this plan is in effect homogeneous PD on the local cluster; a larger "
                               "--link is needed for PrfaaS to help"))
    if ev.layout.remote is not None and util["remote_prefill"] < REMOTE_UNDERUSED_BELOW:
        out.append(PlanWarning("remote-underused",
                               f"the remote prefill cluster is only {util['remote_prefill']:.0%} utilized at the "
                               f"optimum ({ev.p_remote:.1%} of requests offloaded): it adds little here"))
    out += _busy_warnings(ev, util, skip={"remote_prefill"} if any(w.code == "remote-underused" for w in out)
                          else set())
    decode = perf.sites[ev.layout.pd_sites[0].name].decode
    if decode.batch < DECODE_BATCH_MIN:
        out.append(PlanWarning("decode-barely-fits",
                               f"decode fits only {decode.batch:.0f} concurrent requests per instance "
                               f"({decode.binding} binds): the model barely fits; consider chips with more HBM "
                               "or more chips per instance"))
    if perf.remote_prefill is not None and ev.layout.remote is not None:
        l = sc.grid.mean
        remote_s = float(perf.remote_prefill.latency_s(l))
        local_s = float(perf.sites[ev.layout.pd_sites[0].name].prefill.latency_s(l))
        r_chip, l_chip = ev.layout.remote.instance.chip, ev.layout.pd_sites[0].instance.chip
        # the instances' FLOPS, not the chips': a searched 8xH20 instance has more than a 1xH200 one
        r_flops = ev.layout.remote.instance.chips * r_chip.flops("bf16")
        l_flops = ev.layout.pd_sites[0].instance.chips * l_chip.flops("bf16")
        if remote_s > local_s and r_flops >= 2 * l_flops:
            out.append(PlanWarning(
                "remote-slower-than-local",
                f"{ev.layout.remote.instance} is predicted to prefill {l:,.0f} tokens slower ({remote_s:.2f} s) "
                f"than {ev.layout.pd_sites[0].instance} ({local_s:.2f} s) despite "
                f"{r_flops / l_flops:.1f}x the FLOPS: the two chips' calibrations come "
                "from different measurement setups (fixed overheads differ); treat the remote/local comparison "
                "with caution (see `prfaas-plan rates`)"))
        elif remote_s > local_s and not _weaker(r_chip, l_chip):
            why = _efficiency_mismatch(sc.model, r_chip, l_chip)
            if why:
                out.append(PlanWarning(
                    "kernel-efficiency-mismatch",
                    f"{ev.layout.remote.instance} is predicted to prefill {l:,.0f} tokens slower ({remote_s:.2f} s) "
                    f"than {ev.layout.pd_sites[0].instance} ({local_s:.2f} s) although no peak of it is lower: "
                    f"{why}; the ranking of the two chips follows from that difference, not from the chips"))
    return out


def _busy_warnings(ev, util: dict[str, float], skip: set[str]) -> list[PlanWarning]:
    """A role (with instances) below `ROLE_BUSY_MIN` busy at the optimum, and a link whose mean egress is
    above `LINK_LINE_MAX` of its line rate (issue 21 item 6)."""
    out = []
    count = {"remote_prefill": ev.layout.remote.instances if ev.layout.remote is not None else 0,
             "local_prefill": ev.n_prefill, "local_decode": ev.n_decode}
    idle = [f"{ROLES[r]} {util[r]:.0%}" for r in ROLES if r not in skip and count[r] > 0 and util[r] < ROLE_BUSY_MIN]
    if idle:
        out.append(PlanWarning("role-underused",
                               f"{', '.join(idle)} busy at the optimum (below {ROLE_BUSY_MIN:.0%}): those chips "
                               f"wait on the {ev.binding} stage; fewer or smaller instances there would cost less"))
    if ev.link_bps and ev.link_utilization > LINK_LINE_MAX:
        out.append(PlanWarning("link-no-headroom",
                               f"the link carries {ev.egress_bps / 1e9:.1f} Gbps on average, "
                               f"{ev.link_utilization:.1%} of its {ev.link_bps / 1e9:g} Gbps line rate (above "
                               f"{LINK_LINE_MAX:.0%}): no headroom for bursts, so offloaded TTFT will queue; "
                               "size the link with --size-link or keep headroom with --link-headroom"))
    return out


def _weaker(a, b) -> bool:
    """True when chip ``a`` has a lower bf16 peak, HBM bandwidth, scale-up bandwidth, scale-up domain or NIC
    rate than ``b``."""
    return (a.flops("bf16") < b.flops("bf16") or a.hbm_tb_s < b.hbm_tb_s or a.scaleup_gb_s < b.scaleup_gb_s
            or a.scaleup_domain < b.scaleup_domain or a.nic_gbps < b.nic_gbps)


def _efficiency_mismatch(model, a, b) -> str | None:
    """Why chips ``a`` and ``b`` run ``model``'s 4-bit-weight GEMMs (the w4a16 kernel class) at different
    efficiencies when one was fitted and the other assumed (issue 23: kimi-k3 and prfaas-1t on 8xH200 vs
    8xH100, H200's fitted 0.17 against H100's assumed 0.27), or None."""
    from ..performance.constants import default_calibration
    from ..performance.roofline import FOUR_BIT

    if getattr(model, "expert_dtype", None) not in FOUR_BIT and getattr(model, "weight_dtype", None) not in FOUR_BIT:
        return None
    if a.rate_class(model.expert_dtype) != "bf16" or b.rate_class(model.expert_dtype) != "bf16":
        return None   # a chip with a native 4-bit rate runs no dequantizing kernel
    cal = {c.name: c.calibration or default_calibration(c) for c in (a, b)}
    eff = {n: c.gemm_efficiency("w4a16") for n, c in cal.items()}
    fitted = {c.name: c.calibration is not None and "w4a16" in c.calibration.gemm for c in (a, b)}
    if fitted[a.name] == fitted[b.name] or abs(eff[a.name] - eff[b.name]) < 0.05:
        return None
    said = {n: f"{n} {eff[n]:.2f} ({'fitted' if fitted[n] else 'assumed, never calibrated'})" for n in eff}
    return (f"{model.name}'s {model.expert_dtype} experts run as dequantizing w4a16 GEMMs at {said[a.name]} vs "
            f"{said[b.name]} of the bf16 peak")


def beaten_warning(gains: dict[str, float | None]) -> list[PlanWarning]:
    """A warning when PrfaaS-PD's throughput gain over some layout (name -> gain, x) is below 1."""
    beaten_by = [name for name, g in gains.items() if g is not None and g < 1]
    if not beaten_by:
        return []
    return [PlanWarning("prfaas-not-better", f"PrfaaS-PD does not beat {', '.join(beaten_by)} here "
                                             "(PrfaaS gain < 1)")]


def basis_warning(basis: str, plan, baseline) -> list[PlanWarning]:
    """At ``basis`` instances, a warning when ``baseline`` (the homogeneous PD `Layout` the verdict compares
    the `Plan` with, `plans.basis_baseline`) holds another number of chips than the plan: its equal instance
    count then counts instances of different sizes alike (the paper's comparison counts 8-chip instances
    on both sides)."""
    lay = plan.best.layout
    remote, site = lay.remote, lay.pd_sites[0]
    plan_chips, base_chips = sum(lay.chips().values()), sum(baseline.chips().values())
    if basis != "instances" or remote is None or not remote.instances or base_chips == plan_chips:
        return []
    base = baseline.pd_sites[0]
    return [PlanWarning("basis-unequal-instances",
                        f"equal instance count compares {base.instances} x {base.instance} of homogeneous PD "
                        f"({base_chips} chips) with the plan's {remote.instances} x {remote.instance} remote and "
                        f"{site.instances} x {site.instance} local instances ({plan_chips} chips): its baseline "
                        "moves with the remote instance size; --basis chips, capex or rental compare like with like")]


def band_warnings(bars) -> list[PlanWarning]:
    """A warning when the point estimate's gain (``bars.point_gain``, x) lies outside its own sampled
    P10-P90 band (`analytic.uncertainty.ErrorBars`): the band then does not describe the plan shown."""
    p, g = bars.point_gain, bars.gain
    tie = 1e-9 * abs(p)   # a band collapsed onto the point differs from it only by percentile rounding
    if (bars.given and not getattr(bars, "variants", ())) or not p == p or g.p10 - tie <= p <= g.p90 + tie:
        return []
    return [PlanWarning("point-outside-band",
                        f"the point estimate's gain {p:.2f} lies outside its own P10-P90 band ({g.p10:.2f} to "
                        f"{g.p90:.2f}) vs {bars.baseline}: the samples' bottlenecks skew the band away from the point "
                        "(several uncertain inputs, spread deployment choices, or an integer split that peaks at "
                        "the point); read the band, not the point")]
