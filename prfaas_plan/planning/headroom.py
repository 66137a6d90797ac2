"""Link headroom: what a plan leaves free of its link for bursts, and what leaving more would cost.

``--link-headroom H`` caps the rate a plan may fill at ``(1 - H) x goodput`` (`layout.Link.planned_bps`),
so the configuration search, threshold and split are optimized under that cap like any other bound.
When the chosen plan still runs its link above `warnings.LINK_LINE_MAX` of line rate (``link-no-headroom``),
`link_headroom` re-plans at each of `LEVELS` above the requested headroom with the same optimizer (the
configuration search too, when the plan was searched), so the answer says what headroom costs. Those
plans are computed only when the warning fires (each is one search, ~0.07 s on the defaults).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from .warnings import LINK_LINE_MAX

LEVELS = (0.15, 0.20, 0.30)
"""Headroom fractions (of goodput) the answer prices when the link runs above `LINK_LINE_MAX` of line rate."""


@dataclass(frozen=True)
class HeadroomPlan:
    """The optimum with ``headroom`` (fraction of goodput) left free: its throughput (requests/s),
    threshold (uncached tokens), local split (instances of ``local_chips`` chips each), binding stage and
    mean link load (fraction of line rate)."""

    headroom: float
    throughput_rps: float
    threshold_tokens: float
    n_prefill: int
    n_decode: int
    local_chips: int
    binding: str
    link_load: float

    @classmethod
    def of(cls, headroom: float, ev) -> "HeadroomPlan":
        """From an `analytic.throughput.Evaluation`."""
        return cls(headroom, ev.lambda_max, ev.threshold, ev.n_prefill, ev.n_decode,
                   ev.layout.pd_sites[0].instance.chips, ev.binding, ev.link_utilization)

    def record(self) -> dict:
        return {"headroom_fraction": self.headroom, "throughput_rps": self.throughput_rps,
                "threshold_tokens": self.threshold_tokens, "n_prefill": self.n_prefill, "n_decode": self.n_decode,
                "local_instance_chips": self.local_chips, "binding": self.binding, "link_load_of_line_rate": self.link_load}


@dataclass(frozen=True)
class LinkHeadroom:
    """The plan's headroom: ``requested`` (fraction of goodput kept free) and where it came from
    (``source``), the plan's mean link load (fractions of line rate and of goodput), the load above which
    the answer prices more headroom (``warn_above``, of line rate) and those priced plans (``alternatives``,
    empty when the load is below it)."""

    requested: float
    source: str
    plan: HeadroomPlan
    link_load_of_goodput: float
    warn_above: float
    alternatives: tuple[HeadroomPlan, ...] = ()

    def record(self) -> dict:
        """JSON ``meta.link_headroom`` (docs/output.md)."""
        return {"requested_fraction": self.requested, "source": self.source,
                "link_load_of_line_rate": self.plan.link_load, "link_load_of_goodput": self.link_load_of_goodput,
                "priced_above_line_rate": self.warn_above, "plan": self.plan.record(),
                "alternatives": [a.record() for a in self.alternatives]}

    def line(self) -> str | None:
        """One sentence: what the plan would carry with each alternative headroom (None without any)."""
        if not self.alternatives:
            return None
        p, alts = self.plan, self.alternatives
        join = " / ".join
        return (f"re-planned with {join(f'{a.headroom:.0%}' for a in alts)} link headroom (--link-headroom): "
                f"{join(f'{a.throughput_rps:.2f}' for a in alts)} req/s "
                f"({join(f'{a.throughput_rps / p.throughput_rps - 1:+.1%}' for a in alts)} vs "
                f"{p.throughput_rps:.2f}), t {p.threshold_tokens:,.0f} -> "
                f"{join(f'{a.threshold_tokens:,.0f}' for a in alts)}, link "
                f"{join(f'{a.link_load:.0%}' for a in alts)} of line rate")


def headroom_source(given: bool, from_file: bool) -> str:
    """Where the requested headroom came from: the flag, the layout file or the default (0)."""
    return "--link-headroom" if given else "layout file" if from_file else "default"


def headroom_note(link, source: str) -> str | None:
    """The assumption a plan with headroom prints (None at 0: the defaults note lists it)."""
    if link is None or link.headroom <= 0:
        return None
    return (f"link headroom {link.headroom:.0%} ({source}): plans fill at most {1 - link.headroom:.0%} of the link's "
            f"goodput ({link.planned_bps / 1e9:.3g} of {link.goodput_bps / 1e9:.3g} Gbps, "
            f"{link.planned_bps / link.bandwidth_bps:.1%} of line rate); transfer times use the full goodput")


def with_headroom(link, headroom: float):
    """``link`` with ``headroom`` (None stays None)."""
    return None if link is None else replace(link, headroom=headroom)


def link_headroom(plan, source: str, replan: Callable[[float], object]) -> LinkHeadroom | None:
    """The `LinkHeadroom` of ``plan`` (a `plans.Plan`; None when it offloads nothing over a link), with
    ``replan(headroom)`` (the optimum's `Evaluation` at that headroom) called for each of `LEVELS` above the
    plan's headroom when its link load exceeds `LINK_LINE_MAX` of line rate."""
    ev = plan.best
    link = ev.layout.pd_sites[0].link
    if link is None or not ev.link_bps:
        return None
    alternatives = ()
    if ev.link_utilization > LINK_LINE_MAX:
        alternatives = tuple(HeadroomPlan.of(h, replan(h)) for h in LEVELS if h > link.headroom)
    load_goodput = ev.egress_bps / ev.link_goodput_bps if ev.link_goodput_bps else 0.0
    return LinkHeadroom(link.headroom, source, HeadroomPlan.of(link.headroom, ev), load_goodput, LINK_LINE_MAX,
                        alternatives)
