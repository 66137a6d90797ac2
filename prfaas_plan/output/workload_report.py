"""The report of ``prfaas-plan workload describe``: a workload's length, arrival and prefix-cache facts
and the routing quantities over thresholds (rows from `prfaas_plan.workload.summary`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..workload.summary import PERCENTILES, fact_rows, length_rows, threshold_rows
from .report import Column, Report, Section


def _value(v) -> str:
    if v is None:
        return "none"
    if isinstance(v, float):
        return f"{v:.4f}" if v < 1 else f"{v:,.2f}"
    return f"{v:,}"


def describe(workload, thresholds: Sequence[float]) -> Report:
    """The whole ``workload describe`` report."""
    tok = ",.0f"
    length_cols = [Column("quantity", "quantity"), Column("count", "count", ",d"),
                   Column("mean_tokens", "mean", tok)]
    length_cols += [Column(f"p{p}_tokens", f"P{p}", tok) for p in PERCENTILES]
    length_cols += [Column("min_tokens", "min", tok), Column("max_tokens", "max", tok)]
    fact_cols = [Column("fact", "fact"), Column("value", "value", _value), Column("unit", "unit")]
    threshold_cols = [Column("threshold_tokens", "t", tok), Column("p_above", "P(L>t)", ".1%"),
                      Column("mean_above_tokens", "E[L|L>t]", tok),
                      Column("mean_below_tokens", "E[L|L<=t]", tok),
                      Column("token_share_above", "tokens above t", ".1%")]
    facts = fact_rows(workload)
    sections = [
        Section("lengths", f"Workload {workload.name}: lengths (tokens)", length_rows(workload), length_cols),
        *([Section("facts", "Arrivals and prefix cache", facts, fact_cols)] if facts else []),
        Section("thresholds", "Routing by uncached input length L",
                threshold_rows(workload.input_length, thresholds), threshold_cols),
    ]
    notes = list(workload.notes)
    notes.append("percentiles of a trace are observed lengths (inverted CDF); of a distribution, its quantiles")
    notes.append("thresholds and lengths in tokens (K = 1024); 'tokens above t' = share of uncached prompt "
                 "tokens in requests longer than t")
    notes += [f"source: {s}" for s in workload.sources]
    return Report(sections, notes, meta={"workload": workload.name})
