"""Per-instance performance: prefill latency ``T_prefill(l)`` and decode capacity.

Two kinds of source share one interface (`PrefillModel.latency_s`, `DecodeCapacity`):

- measured tables, interpolated (`tabulated`), the way the paper used its H200 profile;
- the calibrated per-operator roofline (`roofline`), the planner's own prediction.
"""

from .base import DecodeCapacity, Instance, PrefillModel, parse_instance
from .tabulated import TabulatedPrefill

__all__ = ["DecodeCapacity", "Instance", "PrefillModel", "TabulatedPrefill", "parse_instance"]
