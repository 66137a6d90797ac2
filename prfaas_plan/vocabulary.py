"""Every choice list the planner offers, declared once (the ground floor: domain and CLI import these).

Each is a `StrEnum`, so its members are the plain strings the rest of the code compares and prints
(``Mode.exact == "exact"``). `values` gives a choice list as a tuple of plain strings, for messages and
``in`` checks. The scheduler names come from the simulator's registry, not from here.
"""

from __future__ import annotations

from enum import StrEnum


class Format(StrEnum):
    """Output format of every command (docs/output.md)."""

    table = "table"
    json = "json"
    csv = "csv"


class FigureFormat(StrEnum):
    """File formats a plot is written in (by the file name's suffix)."""

    png = "png"
    svg = "svg"


class Mode(StrEnum):
    """Throughput mode (docs/methods.md): the paper's representative lengths, or expectations over the
    length distribution."""

    representative = "representative"
    exact = "exact"


class InputLevel(StrEnum):
    """Where per-instance performance comes from: our model, or the paper's measured/back-solved inputs."""

    predicted = "predicted"
    paper = "paper"


class TransferPolicy(StrEnum):
    """Which bytes a KV transfer puts on the link (analytic/transfer.py)."""

    replicated = "replicated"
    logical = "logical"
    dp_attention = "dp-attention"


class Basis(StrEnum):
    """What the homogeneous baseline holds equal to PrfaaS-PD (planning/plans.py): its purchase price
    (capex), its cloud cost per hour (rental), its chip count (chips) or its instance count (instances)."""

    capex = "capex"
    rental = "rental"
    chips = "chips"
    instances = "instances"


BASIS_ALIASES = {"cost": Basis.capex}
"""Earlier names still accepted: ``cost`` is read as ``capex``."""

BasisWord = StrEnum("BasisWord", {**{b.name: b.value for b in Basis}, **{a: a for a in BASIS_ALIASES}})
"""What a user may type for a basis: every `Basis` and its accepted aliases (the CLI's choice list)."""


class Baseline(StrEnum):
    """Layout kind the simulator builds from the chips: PrfaaS-PD, homogeneous PD or naive heterogeneous."""

    prfaas = "prfaas"
    homogeneous = "homogeneous"
    naive = "naive"


class MoeSplit(StrEnum):
    """How routed experts are split over an instance's chips: tensor- or expert-parallel."""

    tp = "tp"
    ep = "ep"


class PrefillSource(StrEnum):
    """Where a prefill model comes from: a measured table when the model has one, else the roofline."""

    auto = "auto"
    roofline = "roofline"
    measured = "measured"


def values(choices: type[StrEnum]) -> tuple[str, ...]:
    """The choice list as plain strings, in declaration order."""
    return tuple(m.value for m in choices)
