"""Bytes on the link: what a KV transfer moves for a request, by a stated policy.

A transfer engine (Mooncake, NIXL) writes each decode rank's share of the cache from the matching
prefill rank. Under tensor parallelism a rank holds whole KV heads, so when an instance has more ranks
than KV heads the heads are replicated and every copy crosses; an MLA latent sits whole on every rank
(`prfaas_plan.arithmetic.s_kv_parts` with ``tp``). Mooncake measured exactly this: 12.62 GB for a 32K
Qwen3-235B prompt on TP8, twice its one logical copy (``data/reference/mooncake_h20_qwen3_235b_pd.csv``).

Policies (``docs/methods.md``, "Bytes on the link"):

- ``replicated`` (the planner's default): the per-rank copies the receiving decode instance holds at
  its attention-TP degree, i.e. what engines send (the performance model runs attention TP over all of
  an instance's chips, so the degree is its chip count);
- ``dp-attention``: the receiving decode instance runs data-parallel attention over all its chips
  (SGLang ``--enable-dp-attention`` with ``--dp`` = ``--tp``, the usual deployment of MLA models such as
  DeepSeek and Kimi): each request's cache sits whole on one rank, so one copy crosses -- as many bytes
  as ``logical`` for every model, but named for the deployment that moves them;
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
from ..vocabulary import TransferPolicy, values

POLICIES = values(TransferPolicy)
DEFAULT_POLICY = TransferPolicy.replicated.value
ONE_COPY = ("logical", "dp-attention")  # policies that move one copy of the cache whatever the TP degree


@dataclass(frozen=True)
class TransferBytes:
    """Which bytes a KV transfer moves: ``policy`` (one of `POLICIES`) at ``tp`` tensor-parallel ranks of
    the receiving instance (ignored by the one-copy policies, `ONE_COPY`)."""

    policy: str = "logical"
    tp: int = 1

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise PlanError(f"`transfer_bytes` {self.policy!r}: expected {', '.join(POLICIES)}")
        if self.tp < 1:
            raise PlanError(f"transfer TP degree must be at least 1, got {self.tp}")

    @property
    def ranks(self) -> int:
        """The TP degree the byte count is taken at (1 for a one-copy policy)."""
        return 1 if self.policy in ONE_COPY else self.tp

    def at(self, model: ModelProfile, l) -> np.ndarray:
        """Bytes moved for uncached length(s) ``l`` (real-valued, rounded to whole tokens), float64."""
        return A.s_kv_at(model, l, self.ranks)

    def describe(self, model: ModelProfile) -> str:
        """One line for the report: the policy and its factor over one logical copy at 32K tokens."""
        ratio = float(self.at(model, 32768) / A.s_kv_at(model, 32768))
        if self.policy == "logical":
            return ("transfer bytes: logical (one copy of the cache, the paper's convention); "
                    "--transfer-bytes replicated counts the per-rank copies engines send")
        if self.policy == "dp-attention":
            tp_ratio = float(A.s_kv_at(model, 32768, self.tp) / A.s_kv_at(model, 32768))
            return (f"transfer bytes: dp-attention (the {self.tp}-chip decode instance runs data-parallel "
                    "attention, SGLang --enable-dp-attention: each request's cache on one rank, one copy crosses; "
                    f"TP attention would receive {tp_ratio:.2f}x that at 32K for {model.name}, "
                    "--transfer-bytes replicated)")
        return (f"transfer bytes: replicated (default; per-rank copies decode attention on TP{self.tp} receives, "
                f"as Mooncake measured: {ratio:.2f}x one logical copy at 32K for {model.name}); "
                "--transfer-bytes dp-attention when decode runs data-parallel attention (one copy), logical for "
                "the paper's convention")


LOGICAL = TransferBytes("logical", 1)


def decode_transfer(policy: str | None, chips: int, dp_attention: bool | int = False) -> TransferBytes:
    """What a ``chips``-chip decode instance with attention ``dp_attention`` (`performance.operators.
    attention_ranks`) receives per request under ``policy``; None: what its attention moves, one copy under
    one data-parallel rank per chip (``dp-attention``), else the per-rank copies at its attention-TP degree
    (``replicated``: the instance's chips under TP attention, a rank's chips under ranks of several)."""
    from ..performance.operators import attention_ranks

    ranks = attention_ranks(dp_attention, chips)
    if policy is None:
        policy = "dp-attention" if ranks == chips and chips > 1 else "replicated"
    return TransferBytes(policy, chips // ranks if policy == "replicated" else chips)
