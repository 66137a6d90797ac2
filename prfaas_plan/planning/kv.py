"""What a request's cache weighs, by part, per length (``prfaas-plan kv``), against a dense model of
the same depth. Bytes are logical (one copy) unless ``tp`` > 1 asks for what a tensor-parallel transfer
moves (``docs/methods.md`` section 1)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KvBreakdown:
    """``S_kv`` of one model at one uncached length (tokens), in bytes, by part."""

    model: str
    len_tokens: int
    growing_kv_bytes: float
    window_kv_bytes: float
    recurrent_state_bytes: float
    conv_state_bytes: float
    s_kv_bytes: float
    dense_equivalent_bytes: float

    @property
    def s_kv_bytes_per_token(self) -> float:
        return self.s_kv_bytes / self.len_tokens

    @property
    def kv_reduction_x(self) -> float | None:
        """Dense-equivalent bytes over ``S_kv`` (None for an empty cache)."""
        return self.dense_equivalent_bytes / self.s_kv_bytes if self.s_kv_bytes else None


def kv_breakdown(models: list[str], lengths: list[int], tp: int = 1) -> list[KvBreakdown]:
    """One `KvBreakdown` per model and length, in that order."""
    from .. import arithmetic as A
    from ..profiles import get_model

    out = []
    for name in models:
        m = get_model(name)
        for l in lengths:
            parts = A.s_kv_parts(m, l, tp=tp)
            out.append(KvBreakdown(m.name, l, parts.growing, parts.window, parts.recurrent, parts.conv, parts.total,
                                   A.dense_equivalent_kv(m, l)))
    return out
