"""The report of a simulation (`prfaas_plan.planning.simulate.SimulationAnswer`): summary, latency beside
the analytic model, routes, stages, caches, roles, the scheduler comparison and a short timeline."""

from __future__ import annotations

from .config_report import configurations_section
from .report import Column, Report, Section

TIMELINE_ROWS = 24
BACKLOG_KEYS = ("remote_waiting", "link_waiting", "local_waiting", "decode_waiting")
TIMELINE_KEYS = ("t_s", "link_gbps", "link_capacity_gbps", "remote_waiting", "local_waiting", "decode_waiting",
                 "decode_busy", "threshold_tokens", "n_prefill", "n_decode")


def _3g(v) -> str:
    """Three significant figures without an exponent (queue depths, instance counts, seconds)."""
    if v != v or v in (float("inf"), float("-inf")):
        return "-" if v != v else "inf"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.5f}"


def _downsample(timeline: dict, rows: int, keys=TIMELINE_KEYS) -> list[dict]:
    """At most ``rows`` rows of ``keys``, each the mean of consecutive samples (for reading, not analysis)."""
    import numpy as np

    n = len(timeline["t_s"])
    if n == 0:
        return []
    edges = np.linspace(0, n, min(rows, n) + 1).astype(int)
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        row = {k: float(np.mean(timeline[k][a:b])) for k in keys}
        row["t_s"] = float(timeline["t_s"][a])
        out.append(row)
    return out


def _latency_rows(result, analytic, unloaded) -> list[dict]:
    s = result.summary()
    rows = [{"source": "simulated", "ttft_mean_s": s["ttft_mean_s"], "ttft_p50_s": s["ttft_p50_s"],
             "ttft_p90_s": s["ttft_p90_s"], "ttft_p99_s": s["ttft_p99_s"], "tpot_mean_s": s["tpot_mean_s"],
             "tpot_p99_s": s["tpot_p99_s"]}]
    if analytic is not None:
        rows.append({"source": "analytic at the offered rate", "ttft_mean_s": analytic.mean_s,
                     "ttft_p50_s": analytic.p50_s, "ttft_p90_s": analytic.p90_s, "ttft_p99_s": analytic.p99_s,
                     "tpot_mean_s": analytic.tpot_s, "tpot_p99_s": None})
    rows.append({"source": "analytic unloaded", "ttft_mean_s": unloaded.mean_s, "ttft_p50_s": unloaded.p50_s,
                 "ttft_p90_s": unloaded.p90_s, "ttft_p99_s": unloaded.p99_s, "tpot_mean_s": None,
                 "tpot_p99_s": None})
    return rows


def _configurations_how(shapes) -> str:
    """Where a simulation's per-role configurations come from (`planning.sim_shapes.SimShapes`)."""
    if shapes is None:
        return "the layout file's instance shapes"
    if shapes.search is None:
        return "pinned, not searched"
    return f"searched as size: {len(shapes.search.ranked)} joint configurations"


def simulation_report(a) -> Report:
    """The report of a `SimulationAnswer` (a layout of several PD sites: `sim_sites_report`)."""
    result, ev, layout = a.result, a.evaluation, a.layout
    head = {"layout": layout.name, "model": a.perf.model.name, "scheduler": a.scheduler,
            "threshold_tokens": ev.threshold, "n_prefill": ev.n_prefill, "n_decode": ev.n_decode,
            "lambda_max_rps": ev.lambda_max}
    head.update(result.summary())
    sections = [
        Section("summary", "Simulation", [head], [
            Column("layout", "layout"), Column("scheduler", "scheduler"),
            Column("threshold_tokens", "t (tokens)", ",.0f"), Column("n_prefill", "N_p"), Column("n_decode", "N_d"),
            Column("arrived", "arrived"), Column("completed", "completed"), Column("in_flight", "in flight"),
            Column("offered_rps", "offered req/s", ".3f"), Column("steady_throughput_rps", "throughput req/s", ".3f"),
            Column("lambda_max_rps", "Lambda_max req/s", ".3f"), Column("remote_share", "remote", ".1%"),
            Column("egress_gbps", "egress Gbps", ".2f"), Column("role_changes", "role changes"),
            Column("threshold_changes", "t changes")]),
        configurations_section(a.configurations, _configurations_how(a.shapes)),
        Section("latency", "TTFT and TPOT (seconds)", _latency_rows(result, a.analytic, a.unloaded),
                [Column("source", "source")] + [Column(k, k.replace("_s", "").replace("_", " "), _3g)
                                                for k in ("ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
                                                          "tpot_mean_s", "tpot_p99_s")]),
        Section("routes", "TTFT by route (seconds)",
                [{"route": k, **v} for k, v in result.ttft_by_route().items()]),
        Section("stages", "Stage utilization and queues", result.stage_rows(), [
            Column("stage", "stage"), Column("utilization", "utilization", ".1%"),
            Column("mean_waiting", "mean waiting", ".2f"),
            Column("peak_waiting", "peak waiting (link: flows)", ".0f")]),
    ]
    clusters = [{"cluster": k, **v} for k, v in result.cache.items() if k != "prefix_moves"]
    if clusters:
        moves = result.cache["prefix_moves"]
        sections.append(Section("cache", "Prefix caches", clusters, [
            Column("cluster", "cluster"), Column("prompt_tokens", "prompt tokens prefilled here", ",d"),
            Column("hit_tokens", "from cache", ",d"), Column("hit_rate", "hit rate", ".1%"),
            Column("used_bytes", "used GB", lambda v: f"{v / 1e9:,.0f}"), Column("evicted", "evicted", ",d")],
            notes=[f"cross-cluster prefix moves: {moves['count']} ({moves['link_bytes'] / 1e9:,.1f} GB over the "
                   "link)"]))
    periodic = [r for r in a.runs() if r.periods]
    if periodic:
        roles = [{"scheduler": r.scheduler, **c} for r in periodic for c in r.role_changes]
        sections.append(Section("roles", "Role changes", roles or [{"change": "none"}]))
        sections.append(Section("decisions", "What the long-term rule saw and decided, each period", [
            {"scheduler": r.scheduler, **p} for r in periodic for p in r.periods], [
            Column("scheduler", "scheduler"), Column("time_s", "t (s)", ",.0f"), Column("change", "role change"),
            Column("n_prefill", "N_p"), Column("n_decode", "N_d"), Column("threshold_tokens", "t (tokens)", ",.0f"),
            Column("local_waiting_mean", "local waiting mean", _3g), Column("local_waiting_min", "min", _3g),
            Column("decode_waiting_mean", "decode waiting", _3g), Column("decode_busy_mean", "decode busy", _3g),
            Column("reason", "reason")], transpose=False))
    if a.others:
        ref = a.reference().scheduler
        names = [r.scheduler for r in a.runs()]
        sections.append(Section("comparison", f"Schedulers on the same workload ({', '.join(names)})",
                                a.comparison(), [Column("figure", "figure")]
                                + [Column(n, n, _3g) for n in names]
                                + [Column(f"{n}_vs_{ref}", f"{n} vs {ref}", "+.1%") for n in names if n != ref]))
        sections.append(Section("backlogs", "Peak backlog per queue and scheduler (waiting requests; link: "
                                "remote requests prefilled, KV not yet at decode)", [
            {"scheduler": r.scheduler, **{k: float(r.timeline[k].max()) if len(r.timeline[k]) else 0.0
                                          for k in BACKLOG_KEYS},
             "threshold_min_tokens": float(r.timeline["threshold_tokens"].min()) if len(r.timeline["t_s"]) else 0.0,
             "threshold_max_tokens": float(r.timeline["threshold_tokens"].max()) if len(r.timeline["t_s"]) else 0.0}
            for r in a.runs()], [Column("scheduler", "scheduler")] + [Column(k, k.replace("_", " "), _3g)
                                                                     for k in BACKLOG_KEYS]
            + [Column("threshold_min_tokens", "t min", ",.0f"), Column("threshold_max_tokens", "t max", ",.0f")]))
    sections.append(Section(
        "timeline", f"Timeline (means over {max(1, len(result.timeline['t_s']) // TIMELINE_ROWS)} samples of "
        f"{a.config.sample_s:g} s)", _downsample(result.timeline, TIMELINE_ROWS),
        [Column("t_s", "t (s)", ",.0f"), Column("link_gbps", "egress Gbps", ".2f"),
         Column("link_capacity_gbps", "line Gbps", ".0f"), Column("remote_waiting", "remote waiting", _3g),
         Column("local_waiting", "local waiting", _3g), Column("decode_waiting", "decode waiting", _3g),
         Column("decode_busy", "decode busy slots", _3g), Column("threshold_tokens", "t (tokens)", ",.0f"),
         Column("n_prefill", "N_p", _3g), Column("n_decode", "N_d", _3g)]))
    return Report(sections, a.notes, warnings=a.warnings,
                  meta={"model": a.perf.model.name, "layout": layout.name, "scheduler": a.scheduler,
                        "seed": a.seed, "requests": a.requests, "stack": a.stack})
