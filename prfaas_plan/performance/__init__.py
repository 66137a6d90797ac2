"""Per-instance performance: prefill latency ``T_prefill(l)`` and decode capacity.

Two kinds of source share one interface (`PrefillModel.latency_s`, `DecodeCapacity`):

- measured tables, interpolated (`tabulated`), the way the paper used its H200 profile;
- the calibrated per-operator roofline (`operators` -> `roofline`, `decode`), the planner's own prediction:
  chip-only constants (`constants`, seeded by `kernel_seeds`) plus a serving-stack profile
  (`prfaas_plan.profiles.stack`), fitted jointly on measurements (`measurements`, `calibrate`,
  `serving` = mean TTFT/TPOT at a fixed concurrency, `profile_text` writes the fitted profiles).

`prefill_model` picks between them; `decode_capacity` sizes a decode instance at a TPOT SLO;
`kv_throughput` gives ``Phi_kv = S_kv / T_prefill``.
"""

from .base import DecodeCapacity, Instance, PrefillModel, parse_instance
from .constants import ChipConstants, chip_constants
from .decode import DecodeMemory, decode_capacity, decode_memory, decode_step_s
from .factory import measured_table, prefill_model, source_kind, tabulated
from .kv_throughput import KVThroughput, kv_throughput
from .operators import Parallel
from .roofline import RooflinePrefill
from .tabulated import TabulatedPrefill

__all__ = ["ChipConstants", "DecodeCapacity", "DecodeMemory", "Instance", "KVThroughput", "Parallel", "PrefillModel",
           "RooflinePrefill", "TabulatedPrefill", "chip_constants", "decode_capacity", "decode_memory",
           "decode_step_s", "kv_throughput", "measured_table", "parse_instance", "prefill_model", "source_kind",
           "tabulated"]
