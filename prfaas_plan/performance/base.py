"""Shared types of the performance layer: an instance shape, the prefill-model protocol and decode
capacity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import PlanError
from ..profiles import HardwareProfile, get_hardware
from ..units import parse_chip_count


@dataclass(frozen=True)
class Instance:
    """One serving instance: ``chips`` accelerators of one profile, sharded together (TP/EP)."""

    chip: HardwareProfile
    chips: int

    def __str__(self) -> str:
        return f"{self.chips}x{self.chip.name.upper()}"

    @property
    def hbm_bytes(self) -> float:
        """Total HBM capacity of the instance, bytes."""
        return self.chips * self.chip.hbm_gb * 1e9


def parse_instance(text: str | Instance, what: str = "`instance`") -> Instance:
    """``8xH200`` -> Instance(h200 profile, 8)."""
    if isinstance(text, Instance):
        return text
    cc = parse_chip_count(text, what)
    try:
        chip = get_hardware(cc.chip)
    except PlanError as exc:
        raise PlanError(f"{what} {str(text)!r}: {exc}") from None
    return Instance(chip, cc.count)


@runtime_checkable
class PrefillModel(Protocol):
    """Prefill latency of one request on one instance."""

    source: str  # where the numbers come from, shown to the user

    def latency_s(self, l) -> np.ndarray:
        """Seconds to prefill ``l`` uncached tokens (vectorized over any array of lengths)."""
        ...


@dataclass(frozen=True)
class DecodeCapacity:
    """What one decode instance sustains at a per-token latency SLO.

    ``batch`` concurrent requests, each producing one token per ``step_s`` seconds; ``binding`` is
    ``"slo"`` when the step-time budget caps the batch, ``"memory"`` when HBM does.
    """

    batch: float
    step_s: float
    binding: str
    source: str

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second of the instance."""
        return self.batch / self.step_s

    def requests_per_s(self, output_tokens: float) -> float:
        """Requests per second for a mean output length (tokens)."""
        return self.tokens_per_s / output_tokens


def busy_s(prefill: PrefillModel, l) -> np.ndarray:
    """GPU seconds per request a prefill instance spends at lengths ``l`` (what throughput divides by):
    the model's ``busy_s`` where it separates busy time from latency (a serving stack's fixed latency does
    not occupy the instance), else its latency (the paper's Eq. 4 form for measured tables)."""
    return np.asarray(getattr(prefill, "busy_s", prefill.latency_s)(l), dtype=float)
