"""Bytes on the link: what a KV transfer moves for a request, by a stated policy.

A transfer engine (Mooncake, NIXL) writes each decode rank's share of the cache from the matching
prefill rank. Under tensor parallelism a rank holds whole KV heads, so when an instance has more ranks
than KV heads the heads are replicated and every copy crosses; an MLA latent sits whole on every rank
(`prfaas_plan.arithmetic.s_kv_parts` with ``tp``). Mooncake measured exactly this: 12.62 GB for a 32K
Qwen3-235B prompt on TP8, twice its one logical copy (``data/reference/mooncake_h20_qwen3_235b_pd.csv``).

Policies (``docs/methods.md``, "Bytes on the link"):

- ``replicated`` (the planner's default): the per-rank copies the receiving decode instance holds at
  its attention-TP degree, i.e. what engines send (the performance model runs attention TP over all of
  an instance's chips, so the degree is its chip count; data-parallel attention would hold one copy);
- ``logical``: one copy of the cache, the convention of the PrfaaS paper's KV-throughput figures, used
  for its reproduction.

Every consumer of transfer bytes (egress, link bounds, unloaded and loaded TTFT, the linear programs,
the simulator) takes them from the site's `TransferBytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import arithmetic as A
from ..errors import PlanError
from ..profiles import ModelProfile

POLICIES = ("replicated", "logical")
DEFAULT_POLICY = "replicated"


@dataclass(frozen=True)
class TransferBytes:
    """Which bytes a KV transfer moves: ``policy`` (one of `POLICIES`) at ``tp`` tensor-parallel ranks of
    the receiving instance (ignored by ``logical``)."""

    policy: str = "logical"
    tp: int = 1

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise PlanError(f"--transfer-bytes {self.policy!r}: expected {' or '.join(POLICIES)}")
        if self.tp < 1:
            raise PlanError(f"transfer TP degree must be at least 1, got {self.tp}")

    @property
    def ranks(self) -> int:
        """The TP degree the byte count is taken at (1 for logical bytes)."""
        return self.tp if self.policy == "replicated" else 1

    def at(self, model: ModelProfile, l) -> np.ndarray:
        """Bytes moved for uncached length(s) ``l`` (real-valued, rounded to whole tokens), float64."""
        return A.s_kv_at(model, l, self.ranks)

    def describe(self, model: ModelProfile) -> str:
        """One line for the report: the policy and its factor over one logical copy at 32K tokens."""
        ratio = float(self.at(model, 32768) / A.s_kv_at(model, 32768))
        if self.policy == "logical":
            return ("transfer bytes: logical (one copy of the cache, the paper's convention); "
                    "--transfer-bytes replicated counts the per-rank copies engines send")
        return (f"transfer bytes: replicated (default; per-rank copies a TP{self.tp} decode instance receives, "
                f"as Mooncake measured: {ratio:.2f}x one logical copy at 32K for {model.name}); "
                "--transfer-bytes logical for one copy (the paper's convention)")


LOGICAL = TransferBytes("logical", 1)
