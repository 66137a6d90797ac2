"""Choose a prefill model for a (model, instance): the measured table where one exists, else the roofline."""

from __future__ import annotations

from ..errors import PlanError
from ..profiles import MeasuredPrefill, ModelProfile, StackProfile, get_model
from ..vocabulary import PrefillSource, values
from .base import Instance, PrefillModel, parse_instance
from .roofline import RooflinePrefill
from .tabulated import TabulatedPrefill

SOURCES = values(PrefillSource)


def measured_table(model: ModelProfile, instance: Instance) -> MeasuredPrefill | None:
    """The model profile's measured prefill table for this instance shape (chip and count), if any."""
    for table in model.measured_prefill:
        shape = parse_instance(table.instance, f"{model.name}: measured_prefill instance")
        if shape.chip.name == instance.chip.name and shape.chips == instance.chips:
            return table
    return None


def tabulated(table: MeasuredPrefill) -> TabulatedPrefill:
    """A measured table as a `TabulatedPrefill`: exact through its points (monotone PCHIP), continued
    by the non-negative quadratic fit's slope outside the measured range."""
    return TabulatedPrefill(table.lengths, table.latency_s,
                            source=f"measured table on {table.instance}, interpolated through its points "
                                   f"(PCHIP): {table.source}", method="pchip")


def source_kind(pm: PrefillModel) -> str:
    """``"measured"`` for a table-based prefill model, ``"roofline"`` otherwise."""
    return "measured" if isinstance(pm, TabulatedPrefill) else "roofline"


def prefill_model(model: ModelProfile | str, instance: Instance | str, source: str = "auto",
                  moe: str = "tp", stack: StackProfile | str | None = None) -> PrefillModel:
    """``T_prefill(l)`` for one request on one instance.

    ``source``: ``"measured"`` uses the model profile's measured table for this instance shape (error if
    there is none), ``"roofline"`` the calibrated roofline, ``"auto"`` the table when one exists and the
    roofline otherwise. ``moe`` (``"tp"`` or ``"ep"``) sets how the roofline splits routed experts and
    ``stack`` the serving stack it runs on (default `DEFAULT_STACK`; a measured table already holds its
    engine). The returned object's ``.source`` says which was used and with which constants.
    """
    if source not in SOURCES:
        raise PlanError(f"`source` {source!r}: expected one of {', '.join(SOURCES)}")
    model = get_model(model)
    instance = parse_instance(instance)
    table = measured_table(model, instance) if source != "roofline" else None
    if table is not None:
        return tabulated(table)
    if source == "measured":
        have = ", ".join(t.instance for t in model.measured_prefill) or "none"
        raise PlanError(f"`source` measured: {model.name} has no measured prefill table for {instance} "
                        f"(tables: {have})")
    return RooflinePrefill.build(model, instance, moe, stack=stack)
