"""Discrete-event simulation of a PrfaaS deployment with the dual-timescale scheduler.

`simulate(requests, layout, perf, SimConfig(...))` replays `Requests` (plain arrays: arrival seconds,
input and output tokens, optional prefix-block hashes) through a single-PD-site layout and returns a
`SimResult`; `multisite.simulate_sites` replays several PD sites sharing one remote prefill pool. `inputs`
holds the small adapters for the Mooncake trace and the paper's synthetic workload.
"""

from .engine import SCHEDULERS, SimConfig, simulate
from .link import LinkProfile, read_link_profile
from .requests import Requests
from .result import SIM_METHOD, SimResult
from .scheduler import LongTermRule, ShortTermRule

__all__ = ["SCHEDULERS", "SIM_METHOD", "LinkProfile", "LongTermRule", "Requests", "ShortTermRule",
           "SimConfig", "SimResult", "read_link_profile", "simulate"]
