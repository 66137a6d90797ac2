"""Report sections of the configuration search (`prfaas_plan.planning.configurations`): the chosen
configuration per role and site (``configurations``, the records `planning.export` reads), the runner-ups,
the Pareto fronts (requests/s per chip vs TTFT P90 and TPOT; requests/s per $1M of capex vs TTFT P90) and the
role candidates that do not fit, with why. Renders only: every figure comes from the search."""

from __future__ import annotations

from .report import Column, Section

CONFIG_COLUMNS = [Column("site", "site"), Column("role", "role"), Column("chips_per_instance", "chips/instance"),
                  Column("tp", "TP"), Column("ep", "EP"), Column("dp_attention", "DP attention", lambda v: "yes" if v else "no"),
                  Column("attention_dp", "attention ranks", lambda v: str(v) if v and v > 1 else "-"),
                  Column("batch", "batch cap", lambda v: str(v) if v else "-"), Column("weight_dtype", "weights"),
                  Column("kv_dtype", "KV")]


def _opt(fmt: str):
    return lambda v: "-" if v is None else format(v, fmt)


CANDIDATE_COLUMNS = [Column("rank", "#"), Column("remote_prefill", "remote prefill"),
                     Column("local_prefill", "local prefill"), Column("local_decode", "local decode"),
                     Column("rps", "req/s", ".3f"), Column("of_best", "of best", ".1%"),
                     Column("threshold_tokens", "t", ",.0f"), Column("split", "local P+D"),
                     Column("binds", "binds"), Column("ttft_p90_s", "TTFT P90 s", _opt(".2f")),
                     Column("tpot_ms", "TPOT ms", ".1f"), Column("rps_per_chip", "req/s per chip", ".4f"),
                     Column("rps_per_musd", "req/s per $1M", _opt(".2f"))]

PARETO_COLUMNS = CANDIDATE_COLUMNS[:4] + [Column("front", "front")] + CANDIDATE_COLUMNS[4:5] + CANDIDATE_COLUMNS[9:]

INFEASIBLE_COLUMNS = [Column("site", "site"), Column("role", "role"), Column("chips_per_instance", "chips/instance"),
                      Column("parallel", "parallelism"), Column("weight_dtype", "weights"), Column("reason", "why not")]


def _candidate_row(rank: int, c, best_rps: float) -> dict:
    roles = {(r.site, r.role): r for r in c.roles}
    return {"rank": rank, "remote_prefill": roles[("remote", "prefill")].label,
            "local_prefill": roles[("local", "prefill")].label, "local_decode": roles[("local", "decode")].label
            + f" batch {roles[('local', 'decode')].batch}", "weight_dtype": c.roles[0].weight_dtype,
            "kv_dtype": c.roles[0].kv_dtype, "rps": c.lambda_max, "of_best": c.lambda_max / best_rps if best_rps else 0.0,
            "threshold_tokens": c.threshold, "split": f"{c.n_prefill}+{c.n_decode}", "binds": c.binding,
            "ttft_p90_s": c.ttft_p90_s, "tpot_ms": c.tpot_s * 1e3, "rps_per_chip": c.rps_per_chip,
            "rps_per_musd": c.rps_per_musd}


BATCH_NOTE = ("batch cap: running requests per decode instance within the TPOT SLO and HBM; prefill packs prompts "
              "by the stack's token budget")


def configurations_section(records: list[dict], how: str) -> Section:
    """The ``configurations`` section: one record per role and site (`configurations.RoleConfig.record`),
    ``how`` saying where they come from (e.g. "searched: 12 joint configurations")."""
    return Section("configurations", f"Configuration per role and site ({how})", records, CONFIG_COLUMNS,
                   [BATCH_NOTE])


def config_sections(found, runner_ups: int = 5) -> list[Section]:
    """The search's sections for the size report."""
    best = found.best
    sections = [configurations_section([r.record() for r in best.roles],
                                       f"searched: {len(found.ranked)} joint configurations")]
    rows = [_candidate_row(i + 1, c, best.lambda_max) for i, c in enumerate(found.ranked[:runner_ups + 1])]
    sections.append(Section("runner_ups", "Best configurations (each with its own threshold and split)", rows,
                            CANDIDATE_COLUMNS))
    fronts = found.fronts()
    pareto = [dict(_candidate_row(i + 1, found.ranked[i], best.lambda_max), front=" + ".join(f)) for i, f in fronts]
    sections.append(Section("pareto", "Pareto fronts among the reported configurations", pareto, PARETO_COLUMNS,
                            [found.front_rule]))
    if found.infeasible:
        sections.append(Section("infeasible", "Role candidates that do not fit", _infeasible_rows(found.infeasible),
                                INFEASIBLE_COLUMNS))
    return sections


def _infeasible_rows(infeasible) -> list[dict]:
    """One row per site, role, shape, weights and reason, the parallelisms that share them joined (a 12-chip
    shape's six MoE splits all fail on the same attention heads)."""
    rows: dict[tuple, dict] = {}
    for i in infeasible:
        key = (i.site, i.role, i.chips_per_instance, i.weight_dtype, i.reason)
        if key in rows:
            rows[key]["parallel"] += f"; {i.parallel}"
        else:
            rows[key] = {"site": i.site, "role": i.role, "chips_per_instance": i.chips_per_instance,
                         "parallel": i.parallel, "weight_dtype": i.weight_dtype, "reason": i.reason}
    return list(rows.values())
