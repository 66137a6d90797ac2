"""``size``, ``compare`` and ``reproduce``: the planner's main answers."""

from __future__ import annotations

import math
from typing import Optional

import typer

from ..errors import PlanError
from ..output.report import Column, Report, Section, check_format, emit
from ..units import format_tokens, parse_rate_bps, parse_tpot_s
from .app import FormatOption, app

DEFAULTS = {
    "model": "kimi-linear",
    "remote": "32xH200",
    "local": "64xH20",
    "link": "100G",
    "tpot": "25ms",
    "workload": "paper",
    "instance_chips": 8,
}

MODE_HELP = "representative (the paper's: stages at E[L|L>t] and E[L|L<=t]) or exact (expectations)."


def _scenario(model, remote, local, link, tpot, workload, instance_chips, mode, inputs, efficiency, rtt,
              defaulted: list[str], link_price: float = 0.0):
    from ..layout import Link
    from ..planning.plans import scenario_for
    from ..profiles import get_model
    from ..units import parse_time_s
    from ..workload import resolve_workload

    if mode not in ("representative", "exact"):
        raise PlanError(f"--mode {mode!r}: expected representative or exact")
    if inputs not in ("predicted", "paper"):
        raise PlanError(f"--inputs {inputs!r}: expected predicted or paper")
    if not 0 < efficiency <= 1:
        raise PlanError(f"--link-efficiency {efficiency!r}: expected a fraction in (0, 1]")
    if not (math.isfinite(link_price) and link_price >= 0):
        raise PlanError(f"--link-price {link_price:g}: expected a non-negative price")
    lk = Link(parse_rate_bps(link, "--link"), efficiency, parse_time_s(rtt, "--rtt") if rtt else 0.0, link_price)
    m = get_model(model)
    notes = [f"default {k}: {v}" for k, v in defaulted]
    if not rtt:
        notes.append("default rtt: 0 ms (no propagation delay; fiber adds about 1 ms of round trip per 100 km, "
                     "pass --rtt)")
    return scenario_for(m, remote, local, lk, instance_chips, parse_tpot_s(tpot), mode, inputs,
                        resolve_workload(workload), tuple(notes))


def _defaults(**given) -> tuple[dict, list]:
    """Fill unset options from DEFAULTS and list which defaults were used."""
    used = []
    out = {}
    for k, v in given.items():
        if v is None:
            out[k] = DEFAULTS[k]
            used.append((k.replace("_", "-"), DEFAULTS[k]))
        else:
            out[k] = v
    return out, used


def _counts(ev) -> str:
    """Instances per role in the ``4R + 8 (=3P+5D)`` style (R remote prefill, P/D local)."""
    site = ev.layout.pd_sites[0]
    local = f"{site.instances} (={ev.n_prefill}P+{ev.n_decode}D)"
    if ev.layout.remote is not None:
        return f"{ev.layout.remote.instances}R + {local}"
    return local


def _plan_row(name: str, plan, sc) -> dict:
    ev = plan.best
    tput_tok = ev.lambda_max * sc.output_tokens
    return {
        "layout": name,
        "threshold_tokens": ev.threshold,
        "offloaded_share": ev.p_remote,
        "mean_offloaded_tokens": ev.l_long if ev.p_remote > 0 else None,
        "mean_local_tokens": ev.l_short if ev.p_remote < 1 else None,
        "instances": _counts(ev),
        "remote_instance": str(ev.layout.remote.instance) if ev.layout.remote else None,
        "local_instance": str(ev.layout.pd_sites[0].instance),
        "remote_prefill_instances": ev.layout.remote.instances if ev.layout.remote else 0,
        "local_prefill_instances": ev.n_prefill,
        "local_decode_instances": ev.n_decode,
        "throughput_rps": ev.lambda_max,
        "output_tokens_per_s": tput_tok,
        "binding_stage": ev.binding,
        "egress_gbps": ev.egress_bps / 1e9,
        "link_utilization": ev.link_utilization if ev.link_bps else None,   # of line rate
        "link_headroom_gbps": ev.link_headroom_bps / 1e9 if ev.link_bps else None,  # of goodput
        "link_binds_below_tokens": plan.link_bind_threshold,
        "ttft_unloaded_mean_s": plan.ttft.mean_s,
        "ttft_unloaded_p50_s": plan.ttft.p50_s,
        "ttft_unloaded_p90_s": plan.ttft.p90_s,
        "ttft_unloaded_p99_s": plan.ttft.p99_s,
        "capex_usd": plan.capex_usd,
        "cloud_usd_per_hour": plan.cloud_usd_per_hour,
        "rps_per_musd": ev.lambda_max / plan.capex_usd * 1e6 if plan.capex_usd else None,
        "output_tokens_per_usd_cloud": tput_tok * 3600 / plan.cloud_usd_per_hour if plan.cloud_usd_per_hour else None,
    }


def _num(v: float) -> str:
    """A figure without scientific notation: thousands separated, small values to 4 significant digits."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}" if abs(v) >= 10 else f"{v:.4g}"


def _tok(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:,.0f} ({format_tokens(v)})" if v >= 1024 else f"{v:,.0f}"


PLAN_COLUMNS = [
    Column("layout", "layout"),
    Column("threshold_tokens", "threshold t", _tok),
    Column("offloaded_share", "offloaded", lambda v: f"{v:.1%}"),
    Column("mean_offloaded_tokens", "E[L|L>t]", _tok),
    Column("instances", "instances"),
    Column("throughput_rps", "req/s", ".3f"),
    Column("binding_stage", "binds"),
    Column("egress_gbps", "egress Gbps", ".2f"),
    Column("link_utilization", "link util (of line rate)", lambda v: f"{v:.1%}"),
    Column("ttft_unloaded_p50_s", "unloaded TTFT P50 s", ".2f"),
    Column("ttft_unloaded_p90_s", "unloaded TTFT P90 s", ".2f"),
    Column("ttft_unloaded_p99_s", "unloaded TTFT P99 s", ".2f"),
    Column("capex_usd", "capex $", lambda v: f"{v / 1e6:,.2f}M"),
    Column("cloud_usd_per_hour", "cloud $/h", ",.0f"),
]
SIZE_COLUMNS = PLAN_COLUMNS[:6] + [
    Column("output_tokens_per_s", "output tokens/s", ",.0f"),
] + PLAN_COLUMNS[6:9] + [
    Column("link_headroom_gbps", "link headroom Gbps (of goodput)", ".2f"),
    Column("link_binds_below_tokens", "link binds below t", lambda v: "never" if v is None else _tok(v)),
] + PLAN_COLUMNS[9:] + [
    Column("rps_per_musd", "req/s per $1M capex", ".3f"),
    Column("output_tokens_per_usd_cloud", "output tokens per cloud $", ",.0f"),
]
COMPACT_COLUMNS = [c for c in PLAN_COLUMNS if c.key not in ("ttft_unloaded_p50_s", "ttft_unloaded_p99_s",
                                                              "cloud_usd_per_hour",
                                                              "mean_offloaded_tokens")]
INSTANCE_NOTE = "instances: R remote prefill, P local prefill, D local decode (instance shapes in JSON/CSV)"


LOAD_HELP = "Also give TTFT/TPOT under load at this fraction of each layout's Lambda_max (e.g. 0.8)."


def _loaded_row(plan, sc, load: float) -> dict:
    """TTFT percentiles and TPOT with queueing at ``load`` x the plan's Lambda_max (analytic M/G/c)."""
    from ..analytic.latency import ttft_under_load

    if not 0 < load < 1:
        raise PlanError(f"--load {load:g}: expected a fraction of Lambda_max in (0, 1)")
    ev = plan.best
    lat = ttft_under_load(ev.layout, sc.grid, plan.perf, ev.threshold, ev.n_prefill, load=load, mode=sc.mode)
    return {"load": load, "rate_rps": lat.rate_rps, "loaded_ttft_mean_s": lat.mean_s,
            "loaded_ttft_p50_s": lat.p50_s, "loaded_ttft_p90_s": lat.p90_s, "loaded_ttft_p99_s": lat.p99_s,
            "loaded_tpot_s": lat.tpot_s, "method": lat.method}


LOADED_COLUMNS = [Column("load", "load", ".0%"), Column("rate_rps", "req/s", ".3f"),
                  Column("loaded_ttft_mean_s", "TTFT mean s", ".2f"), Column("loaded_ttft_p50_s", "TTFT P50 s", ".2f"),
                  Column("loaded_ttft_p90_s", "TTFT P90 s", ".2f"), Column("loaded_ttft_p99_s", "TTFT P99 s", ".2f"),
                  Column("loaded_tpot_s", "TPOT s", ".4f")]


def _stage_rows(plan) -> list[dict]:
    ev = plan.best
    util = ev.stage_utilization
    return [{"stage": s, "bound_rps": ev.bounds[s] if math.isfinite(ev.bounds[s]) else None,
             "utilization": util[s], "binding": s == ev.binding} for s in ev.bounds]


def _perf_notes(plan) -> list[str]:
    perf = plan.perf
    notes = []
    if perf.remote_prefill is not None:
        notes.append(f"remote prefill: {perf.remote_prefill.source}")
    for name, sp in perf.sites.items():
        notes.append(f"{name} prefill: {sp.prefill.source}")
        notes.append(f"{name} decode: {sp.decode.batch:.1f} requests x 1 token per {sp.decode.step_s * 1e3:.1f} ms "
                     f"({sp.decode.tokens_per_s:,.0f} tokens/s per instance, bound by {sp.decode.binding}); "
                     f"{sp.decode.source}")
    return notes


def _write_plot(path: str, plan, title: str) -> None:
    from ..output.plots import plot_threshold_sweep

    plot_threshold_sweep(plan, path, title)


@app.command("size")
def size_cmd(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model (default kimi-linear)."),
    link: Optional[str] = typer.Option(None, "--link", help="Inter-site link rate, e.g. 100G (default 100G)."),
    remote: Optional[str] = typer.Option(None, "--remote", help="Remote prefill chips, e.g. 32xH200."),
    local: Optional[str] = typer.Option(None, "--local", help="Local PD chips, e.g. 64xH20."),
    workload: Optional[str] = typer.Option(None, "--workload", "-w",
                                           help="paper, trace (bundled Mooncake trace) or a .jsonl/.csv file."),
    tpot: Optional[str] = typer.Option(None, "--tpot", help="Decode SLO: 25ms or 40tok/s (default 25ms)."),
    instance_chips: Optional[int] = typer.Option(None, "--instance-chips", min=1, help="Chips per instance (8)."),
    target_rate: Optional[float] = typer.Option(None, "--target-rate", help="Requests/s to serve at least "
                                                "cost: sizes the cheapest cluster (remote and local counts)."),
    mode: str = typer.Option("representative", "--mode", help=MODE_HELP),
    inputs: str = typer.Option("predicted", "--inputs", help="predicted (our performance model) or paper "
                               "(prfaas-1t only: the paper's H200 profile and back-solved H20 inputs)."),
    link_efficiency: float = typer.Option(0.95, "--link-efficiency", help="Goodput fraction of the line rate."),
    rtt: Optional[str] = typer.Option(None, "--rtt", help="Link round trip, e.g. 2ms."),
    link_price: float = typer.Option(0.0, "--link-price", help="Link price, USD per Gbps-month (added to the "
                                     "hourly cost)."),
    size_link: Optional[float] = typer.Option(None, "--size-link", help="Also find the smallest link keeping "
                                              "this fraction (e.g. 0.95) of the throughput (linear program)."),
    verify: bool = typer.Option(False, "--verify", help="Cross-check the grid optimum with the linear program "
                                "and report whether threshold routing is optimal."),
    load: Optional[float] = typer.Option(None, "--load", help=LOAD_HELP),
    ttft: Optional[str] = typer.Option(None, "--ttft", help="TTFT SLO such as p90<4s: also give the highest "
                                       "request rate the plan serves within it (queueing included)."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write throughput vs t to FILE.png or FILE.svg."),
    layout: Optional[str] = typer.Option(None, "--layout", help="A layout YAML file (e.g. several PD sites "
                                         "sharing one remote site); replaces --remote/--local/--link."),
    fmt: str = FormatOption,
) -> None:
    """Threshold, instances per role, throughput, binding stage, link load, TTFT and cost."""
    from ..planning.plans import size

    check_format(fmt)
    if target_rate is not None and not (math.isfinite(target_rate) and target_rate > 0):
        raise PlanError(f"--target-rate {target_rate:g}: expected a positive request rate")
    if layout is not None:
        given = {"--remote": remote, "--local": local, "--link": link, "--instance-chips": instance_chips,
                 "--rtt": rtt, "--target-rate": target_rate, "--size-link": size_link, "--load": load,
                 "--ttft": ttft, "--plot": plot, "--verify": verify or None}
        extra = [flag for flag, v in given.items() if v is not None]
        if extra:
            raise PlanError(f"--layout describes the sites and links and is sized by the linear program alone: "
                            f"drop {', '.join(extra)}")
        return _size_layout_file(layout, model, workload, tpot, inputs, fmt)
    opts, used = _defaults(model=model, remote=remote, local=local, link=link, tpot=tpot, workload=workload,
                           instance_chips=instance_chips)
    sc = _scenario(opts["model"], opts["remote"], opts["local"], opts["link"], opts["tpot"], opts["workload"],
                   opts["instance_chips"], mode, inputs, link_efficiency, rtt, used, link_price)
    plan = size(sc)
    if plan.best.lambda_max <= 0:
        raise PlanError(f"no request can be served: the {plan.best.binding} stage has zero capacity")
    sections = [Section("plan", f"PrfaaS-PD plan for {sc.model.name} ({sc.mode} mode, {sc.inputs} inputs)",
                        [_plan_row("prfaas-pd", plan, sc)], SIZE_COLUMNS),
                Section("stages", "Stage bounds at the optimum (system requests/s)", _stage_rows(plan),
                        [Column("stage", "stage"), Column("bound_rps", "bound req/s", ".3f"),
                         Column("utilization", "utilization", lambda v: f"{v:.1%}"),
                         Column("binding", "binds")],
                        ["the link's utilization here is of its goodput (the plan's 'link util' is of line rate)"])]
    if target_rate is not None:
        sections.append(_target_section(sc, plan, target_rate))
    if load is not None:
        row = _loaded_row(plan, sc, load)
        sections.append(Section("loaded", "TTFT and TPOT under load (queueing included)", [row], LOADED_COLUMNS,
                                [f"method: {row.pop('method')}"]))
    if ttft is not None:
        sections.append(_slo_section(sc, plan, ttft))
    if verify:
        sections.append(_verify_section(sc, plan))
    else:
        from ..analytic.verify import screen

        routing_note = screen(plan.layout, sc.grid, plan.perf, plan.best)
    if size_link is not None:
        sections.append(_link_section(sc, plan, size_link))
    notes = _warnings(plan, sc) + ([routing_note] if not verify and routing_note else []) + list(sc.notes) + \
        _perf_notes(plan) + [INSTANCE_NOTE,
        f"link {sc.link.bandwidth_bps / 1e9:g} Gbps at {sc.link.efficiency:.0%} goodput; " + (
            "it would not bind at this throughput even with every request offloaded"
            if plan.link_bind_threshold is None else
            f"it binds for thresholds below {_tok(plan.link_bind_threshold)} tokens at this throughput"),
        f"TTFT method: {plan.ttft.method}",
        "costs from the hardware profiles' price indications (labelled there), not quotes",
    ]
    if plot:
        _write_plot(plot, plan, f"{sc.model.name}: throughput vs threshold")
    emit(Report(sections, notes, meta={"model": sc.model.name, "mode": sc.mode, "inputs": sc.inputs}), fmt)


def _warnings(plan, sc) -> list[str]:
    """Plain warnings about a plan an architect should not take at face value."""
    ev, perf = plan.best, plan.perf
    out = []
    util = ev.stage_utilization
    if ev.layout.remote is not None and ev.p_remote < 1e-3 and ev.bounds["link"] <= ev.bounds["remote_prefill"]:
        # Any positive link is a valid input (units.MIN_LINK_BPS is the floor: 1 bit/s); one too slow to carry
        # offloaded KV gives a plan that offloads (almost) nothing, said here rather than refused.
        out.append(f"WARNING: the {sc.link.bandwidth_bps / 1e9:g} Gbps link limits offload to {ev.p_remote:.2%} of "
                   f"requests: this plan is in effect homogeneous PD on the local cluster; a larger --link "
                   f"is needed for PrfaaS to help")
    if ev.layout.remote is not None and util["remote_prefill"] < 0.10:
        out.append(f"WARNING: the remote prefill cluster is only {util['remote_prefill']:.0%} utilized at the "
                   f"optimum ({ev.p_remote:.1%} of requests offloaded): it adds little here")
    decode = perf.sites[ev.layout.pd_sites[0].name].decode
    if decode.batch < 4:
        out.append(f"WARNING: decode fits only {decode.batch:.0f} concurrent requests per instance "
                   f"({decode.binding} binds): the model barely fits; consider chips with more HBM or more "
                   f"chips per instance")
    if perf.remote_prefill is not None:
        l = sc.grid.mean
        remote_s = float(perf.remote_prefill.latency_s(l))
        local_s = float(perf.sites[ev.layout.pd_sites[0].name].prefill.latency_s(l))
        r_chip, l_chip = ev.layout.remote.instance.chip, ev.layout.pd_sites[0].instance.chip
        if remote_s > local_s and r_chip.flops("bf16") >= 2 * l_chip.flops("bf16"):
            out.append(f"WARNING: {ev.layout.remote.instance} is predicted to prefill {l:,.0f} tokens slower "
                       f"({remote_s:.2f} s) than {ev.layout.pd_sites[0].instance} ({local_s:.2f} s) despite "
                       f"{r_chip.flops('bf16') / l_chip.flops('bf16'):.1f}x the FLOPS: the two chips' "
                       "calibrations come from different measurement setups (fixed overheads differ); "
                       "treat the remote/local comparison with caution (see `prfaas-plan rates`)")
    return out


def _size_layout_file(path: str, model, workload, tpot, inputs: str, fmt: str) -> None:
    """``size --layout FILE``: optimize every site's routing and split with the linear program."""
    from ..layout import load_layout
    from ..planning.plans import size_layout

    lay = load_layout(path)
    opts, used = _defaults(model=model, tpot=tpot, workload=workload)
    sc = _scenario(opts["model"], "8xH200", "8xH20", "1G", opts["tpot"], opts["workload"], 8, "exact", inputs,
                   0.95, None, used)
    res, perf = size_layout(lay, sc)
    rows = []
    for site, r in zip(lay.pd_sites, res.sites):
        link = site.link
        rows.append({"site": site.name, "instance": str(site.instance),
                     "instances": f"{site.instances} (={r.n_prefill:.0f}P+{r.n_decode:.0f}D)",
                     "throughput_rps": r.lambda_rps, "threshold_tokens": r.threshold_tokens,
                     "pure_threshold": r.is_threshold, "egress_gbps": r.egress_bps / 1e9,
                     "link_gbps": link.bandwidth_bps / 1e9 if link else None,
                     "link_utilization": r.egress_bps / link.bandwidth_bps if link else None})
    rows.append({"site": "total", "throughput_rps": res.lambda_rps,
                 "egress_gbps": sum(r.egress_bps for r in res.sites) / 1e9,
                 "instances": f"{lay.remote.instances}R shared" if lay.remote else ""})
    cols = [Column("site", "site"), Column("instance", "instance"), Column("instances", "instances"),
            Column("throughput_rps", "req/s", ".3f"), Column("threshold_tokens", "threshold t", _tok),
            Column("pure_threshold", "threshold routing"), Column("egress_gbps", "egress Gbps", ".2f"),
            Column("link_gbps", "link Gbps", ".0f"),
            Column("link_utilization", "link util", lambda v: f"{v:.1%}")]
    resplit = [f"{site.name} {site.prefill}P+{site.decode}D -> {r.n_prefill:.0f}P+{r.n_decode:.0f}D"
               for site, r in zip(lay.pd_sites, res.sites) if round(r.n_prefill) != site.prefill]
    notes = list(sc.notes) + [f"layout {lay.name} from {path}; linear program over {len(res.bin_length)} "
                              "length bins per site (exact mode), integer local splits",
                              f"{res.method}: total {res.lambda_rps:.3f} req/s, proven optimality gap "
                              f"{res.gap:.2%} (upper bound {res.bound_rps:.3f} req/s)",
                              "threshold routing False: the optimal routing is not a pure threshold, or not "
                              "unique because a stage other than prefill binds",
                              f"remote prefill: {perf.remote_prefill.source}" if perf.remote_prefill else
                              "no remote site"]
    if resplit:
        notes.insert(0, "the file's prefill/decode splits are re-optimized (its counts are totals): "
                     + "; ".join(resplit))
    notes += [f"site {n} prefill: {sp.prefill.source}; decode {sp.decode.tokens_per_s:,.0f} tokens/s per "
              f"instance ({sp.decode.source})" for n, sp in perf.sites.items()]
    emit(Report([Section("sites", f"Layout {lay.name} for {sc.model.name}", rows, cols)], notes), fmt)


def _slo_section(sc, plan, slo: str) -> Section:
    """Highest request rate whose TTFT percentile meets the SLO (analytic queueing model)."""
    from ..analytic.latency import METHOD, max_rate_at_ttft_slo
    from ..analytic.ttft import summary_value
    from ..units import parse_ttft_slo

    q, target = parse_ttft_slo(slo)
    ev = plan.best
    lat = max_rate_at_ttft_slo(ev.layout, sc.grid, plan.perf, q, target, mode=sc.mode)
    label = "mean" if q == 0 else f"p{q:g}"
    if lat is None:
        row = {"slo": f"{label} TTFT < {target:g} s", "rate_rps": 0.0, "load": 0.0, "lambda_max_rps": ev.lambda_max,
               "met": False}
        idle = summary_value(plan.ttft, q)
        notes = [f"even an idle system misses it: unloaded {label} TTFT is {idle:.2f} s > {target:g} s "
                 "(prefill itself is too slow; a lower threshold t, faster chips or a shorter workload help)"]
    else:
        row = {"slo": f"{label} TTFT < {target:g} s", "rate_rps": lat.rate_rps, "load": lat.load,
               "lambda_max_rps": ev.lambda_max, "met": True, "ttft_mean_s": lat.mean_s, "ttft_p50_s": lat.p50_s,
               "ttft_p90_s": lat.p90_s, "ttft_p99_s": lat.p99_s}
        notes = []
    cols = [Column("slo", "SLO"), Column("rate_rps", "req/s within SLO", ".3f"), Column("load", "of Lambda_max", ".1%"),
            Column("lambda_max_rps", "Lambda_max req/s", ".3f"), Column("ttft_p50_s", "TTFT P50 s", ".2f"),
            Column("ttft_p90_s", "TTFT P90 s", ".2f"), Column("ttft_p99_s", "TTFT P99 s", ".2f")]
    return Section("slo", "Throughput within the TTFT SLO (at the plan's threshold and split)", [row], cols,
                   notes + [f"method: {METHOD}"])


def _verify_section(sc, plan) -> Section:
    """The grid optimum against the linear program over per-bin routing (exact mode), explained."""
    from ..analytic.verify import verify

    v = verify(plan.layout, sc.grid, plan.perf, plan.best)
    res, g = v.lp, v.grid_plan
    row = {"grid_rps": v.grid_rps, "threshold_rps": v.threshold_rps, "lp_rps": v.lp_rps, "bound_rps": v.bound_rps,
           "optimality_gap": v.gap, "difference": v.lp_vs_grid, "non_threshold_gain": v.non_threshold_gain,
           "grid_split": f"{g.n_prefill}P+{g.n_decode}D", "lp_split": f"{res.n_prefill:.0f}P+{res.n_decode:.0f}D",
           "pure_threshold": v.threshold_optimal, "lp_routing_is_threshold": v.lp_is_threshold,
           "lp_threshold_tokens": res.threshold_tokens, "grid_threshold_tokens": g.threshold,
           "lp_binding_stages": "+".join(v.binding), "lp_remote_tokens": v.remote_ranges}
    cols = [Column("grid_rps", "grid req/s", ".4f"), Column("threshold_rps", "best threshold on bins req/s", ".4f"),
            Column("lp_rps", "LP req/s", ".4f"), Column("bound_rps", "LP bound req/s", ".4f"),
            Column("difference", "LP vs grid", "+.2%"), Column("grid_split", "grid split"),
            Column("lp_split", "LP split"), Column("pure_threshold", "threshold routing optimal"),
            Column("lp_binding_stages", "LP binds"), Column("lp_remote_tokens", "LP offloads (tokens)")]
    notes = [("" if v.threshold_optimal else "WARNING: ") + v.explanation,
             f"LP: {res.method}; proven optimality gap {v.gap:.2%} (bound {v.bound_rps:.4f} req/s)"]
    return Section("verify", "Grid search vs linear program (exact mode, 128 length bins)", [row], cols, notes)


def _link_section(sc, plan, keep: float) -> Section:
    """Smallest link goodput keeping ``keep`` of the throughput (continuous relaxation)."""
    from ..analytic.lp import make_bins, min_link

    if not 0 < keep <= 1:
        raise PlanError(f"--size-link {keep:g}: expected a fraction in (0, 1]")
    res = min_link(plan.layout, make_bins(sc.grid, plan.perf), plan.perf, keep)
    line_rate = res.link_goodput_bps / sc.link.efficiency
    row = {"keep_fraction": keep, "reference_rps": res.reference_rps, "throughput_rps": res.lambda_rps,
           "link_goodput_gbps": res.link_goodput_bps / 1e9, "link_line_rate_gbps": line_rate / 1e9}
    cols = [Column("keep_fraction", "keep", ".0%"),
            Column("reference_rps", "of req/s (unconstrained link)", ".3f"), Column("throughput_rps", "req/s", ".3f"),
            Column("link_goodput_gbps", "goodput Gbps", ".2f"),
            Column("link_line_rate_gbps", "line rate Gbps", ".2f")]
    return Section("link_sizing", "Smallest link keeping the throughput (linear program, exact mode)", [row], cols,
                   ["exact mode with the local split as a continuous variable, so both throughputs are the "
                    "linear program's own (they differ slightly from the plan above) and the link is a lower bound"])


def _target_section(sc, plan, target_rate: float) -> Section:
    from dataclasses import replace

    from ..analytic.lp import make_bins, max_throughput, min_cost
    from ..profiles import get_hardware

    lay = plan.layout
    r_price = get_hardware(lay.remote.instance.chip.name).price
    l_price = get_hardware(lay.pd_sites[0].instance.chip.name).price
    if r_price is None or l_price is None:
        raise PlanError("--target-rate needs purchase prices in both chips' hardware profiles")
    bins = make_bins(sc.grid, plan.perf)
    res = min_cost(lay, bins, plan.perf, target_rate, r_price.purchase_usd * lay.remote.instance.chips,
                   l_price.purchase_usd * lay.pd_sites[0].instance.chips)
    counts = (round(res.n_remote), round(res.n_prefill), round(res.n_decode))
    # The cheapest counts leave slack, so their routing is not unique: route as the fixed-hardware
    # optimum of those counts does, which also gives the capacity they reach.
    sized = replace(lay, remote=replace(lay.remote, instances=counts[0]),
                    pd_sites=(replace(lay.pd_sites[0], prefill=counts[1], decode=counts[2]),))
    cap = max_throughput(sized, bins, plan.perf, free_split=False)
    row = {"target_rps": target_rate, "remote_instances": counts[0], "local_prefill_instances": counts[1],
           "local_decode_instances": counts[2], "capex_usd": res.cost_usd, "capacity_rps": cap.lambda_rps,
           "pure_threshold": cap.is_threshold, "threshold_tokens": cap.threshold_tokens}
    notes = ["instance counts are free here; the chips per instance and the link are as given"]
    if counts[0] == 0:
        notes.insert(0, "no remote prefill instance: homogeneous PD on the local chips is cheapest for this target")
    cols = [Column("target_rps", "target req/s", ".3f"), Column("remote_instances", "remote P"),
            Column("local_prefill_instances", "local P"), Column("local_decode_instances", "local D"),
            Column("capex_usd", "capex $", lambda v: f"{v / 1e6:,.2f}M"),
            Column("capacity_rps", "capacity req/s", ".3f"),
            Column("pure_threshold", "threshold routing"), Column("threshold_tokens", "t", _tok)]
    return Section("target", "Cheapest cluster for the target rate (mixed-integer program, exact mode); "
                   "the plan above is the given hardware's", [row], cols, notes)


@app.command("compare")
def compare_cmd(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model (default kimi-linear)."),
    link: Optional[str] = typer.Option(None, "--link", help="Inter-site link rate (default 100G)."),
    remote: Optional[str] = typer.Option(None, "--remote", help="Remote prefill chips, e.g. 32xH200."),
    local: Optional[str] = typer.Option(None, "--local", help="Local PD chips, e.g. 64xH20."),
    workload: Optional[str] = typer.Option(None, "--workload", "-w", help="paper, trace or a file."),
    tpot: Optional[str] = typer.Option(None, "--tpot", help="Decode SLO (default 25ms)."),
    instance_chips: Optional[int] = typer.Option(None, "--instance-chips", min=1),
    basis: str = typer.Option("instances", "--basis", help="instances (same instance count, the paper's) or "
                              "cost (homogeneous gets what the PrfaaS-PD purchase price buys)."),
    mode: str = typer.Option("representative", "--mode", help=MODE_HELP),
    inputs: str = typer.Option("predicted", "--inputs", help="predicted or paper (prfaas-1t only)."),
    link_efficiency: float = typer.Option(0.95, "--link-efficiency"),
    rtt: Optional[str] = typer.Option(None, "--rtt"),
    load: Optional[float] = typer.Option(None, "--load", help=LOAD_HELP),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write the PrfaaS-PD throughput vs t plot."),
    fmt: str = FormatOption,
) -> None:
    """PrfaaS-PD, homogeneous PD and naive heterogeneous side by side."""
    from ..planning.plans import compare

    check_format(fmt)
    opts, used = _defaults(model=model, remote=remote, local=local, link=link, tpot=tpot, workload=workload,
                           instance_chips=instance_chips)
    sc = _scenario(opts["model"], opts["remote"], opts["local"], opts["link"], opts["tpot"], opts["workload"],
                   opts["instance_chips"], mode, inputs, link_efficiency, rtt, used)
    plans = compare(sc, basis)
    rows = [_plan_row(name, p, sc) for name, p in plans.items()]
    base = plans["prfaas-pd"].best.lambda_max
    for row in rows:
        row["prfaas_speedup_x"] = base / row["throughput_rps"] if row["throughput_rps"] else None
    beaten_by = [r["layout"] for r in rows[1:] if r["prfaas_speedup_x"] is not None and r["prfaas_speedup_x"] < 1]
    cols = COMPACT_COLUMNS + [Column("prfaas_speedup_x", "PrfaaS gain", ".2f")]
    sections = [Section("compare", f"Layouts for {sc.model.name} ({sc.mode} mode, {sc.inputs} inputs)", rows, cols)]
    if load is not None:
        loaded = [dict(layout=name, **_loaded_row(p, sc, load)) for name, p in plans.items()]
        method = loaded[0]["method"]
        for row in loaded:
            row.pop("method")
        sections.append(Section("loaded", "TTFT and TPOT under load (each layout at the same fraction of its "
                                "own Lambda_max)", loaded, [Column("layout", "layout")] + LOADED_COLUMNS,
                                [f"method: {method}"]))
    notes = _warnings(plans["prfaas-pd"], sc) + list(sc.notes) + _perf_notes(plans["prfaas-pd"]) + [
        f"comparison basis: {basis}", INSTANCE_NOTE, f"TTFT method: {plans['prfaas-pd'].ttft.method}"]
    if beaten_by:
        notes.insert(0, f"WARNING: PrfaaS-PD does not beat {', '.join(beaten_by)} here (PrfaaS gain < 1)")
    if plot:
        _write_plot(plot, plans["prfaas-pd"], f"{sc.model.name}: PrfaaS-PD throughput vs threshold")
    emit(Report(sections, notes), fmt)


@app.command("reproduce")
def reproduce_cmd(
    inputs: str = typer.Option("paper", "--inputs", help="paper (checks the arithmetic) or predicted "
                               "(H20 from our performance model)."),
    mode: str = typer.Option("representative", "--mode", help=MODE_HELP),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write the PrfaaS-PD throughput vs t plot."),
    fmt: str = FormatOption,
) -> None:
    """The paper's case study from models: each published figure, ours, difference and tolerance.

    Exit code 1 when a figure is out of tolerance and not a listed known gap.
    """
    from ..planning import case_study as paper

    check_format(fmt)
    if inputs not in ("paper", "predicted"):
        raise PlanError(f"--inputs {inputs!r}: expected paper or predicted")
    if mode not in ("representative", "exact"):
        raise PlanError(f"--mode {mode!r}: expected representative or exact")
    study = paper.run_case_study(inputs, mode)
    rows = paper.compare_to_targets(study)
    failed = [r for r in rows if not r["within"] and not r["known_gap"]]
    cols = [Column("label", "figure"), Column("published", "published", _num), Column("ours", "ours", _num),
            Column("difference", "difference", lambda v: ("+" if v >= 0 else "") + _num(v)),
            Column("tolerance", "tolerance", lambda v: "±" + _num(v)),
            Column("unit", "unit"), Column("within", "ok"), Column("known_gap", "known gap")]
    layouts = [_plan_row(n, p, study.scenario) for n, p in study.plans.items()]
    notes = [f"inputs: {inputs}; mode: {mode}"] + list(study.scenario.notes) + _perf_notes(study.plans["prfaas-pd"])
    notes += [f"known gap {r['figure']}: {r['known_gap']}" for r in rows if r["known_gap"]]
    notes.append(f"TTFT method: {study.plans['prfaas-pd'].ttft.method}")
    notes.append(INSTANCE_NOTE)
    gaps = [r["figure"] for r in rows if r["known_gap"]]
    within = sum(r["within"] for r in rows)
    result = f"{within} of {len(rows)} figures within tolerance"
    if gaps:
        result += f"; known gaps: {', '.join(gaps)}"
    if failed:
        result += "; OUT OF TOLERANCE: " + ", ".join(r["figure"] for r in failed)
    notes.append("RESULT: " + result)
    sections = [Section("figures", "PrfaaS paper case study: published vs reproduced", rows, cols),
                Section("layouts", "Optimized layouts", layouts, COMPACT_COLUMNS)]
    if inputs == "predicted":
        sc = study.scenario
        h20 = paper.h20_prediction_error(sc.grid.mean + sc.output_tokens / 2)
        sections.append(Section(
            "h20_prediction", "Our 8xH20 prediction for prfaas-1t vs the paper's back-solved H20 inputs", h20,
            [Column("quantity", "quantity"), Column("len_tokens", "length / context", ",d"),
             Column("backsolved", "back-solved", ",.3f"), Column("predicted", "predicted", ",.3f"),
             Column("ratio", "predicted / back-solved", ".2f")],
            ["back-solved values are the paper-inputs level (never used to fit); their ratio to ours is the "
             "H20 prediction error separating the two levels"]))
    if plot:
        _write_plot(plot, study.plans["prfaas-pd"], "prfaas-1t case study: throughput vs threshold")
    emit(Report(sections, notes), fmt)
    if failed:
        raise typer.Exit(1)
