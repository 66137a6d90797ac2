"""The planning API a user scripts against and the CLI calls: scenarios, sizing, comparison
(``plans``) and the paper's case study (``case_study``)."""

from .plans import (
           Plan,
           Scenario,
           compare,
           instance_decode,
           instance_prefill,
           optimize,
           perf_inputs,
           scenario_for,
           size,
           size_layout,
)

__all__ = ["Plan", "Scenario", "compare", "instance_decode", "instance_prefill", "optimize", "perf_inputs",
           "scenario_for", "size", "size_layout"]
