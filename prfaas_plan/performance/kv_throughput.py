"""KV throughput of one prefill instance: ``Phi_kv(l) = S_kv(l) / T_prefill(l)`` (brief equation 1)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import arithmetic as A
from ..profiles import ModelProfile, dtype_bytes, get_model
from .base import Instance, PrefillModel, parse_instance
from .factory import prefill_model


def with_state_dtype(model: ModelProfile, state_dtype: str | None, where: str) -> ModelProfile:
    """``model`` with its recurrent state counted in ``state_dtype`` (as a serving engine stores it);
    unchanged when ``state_dtype`` is empty. ``where`` names the input in the error for an unknown dtype."""
    if not state_dtype or state_dtype.lower() == model.state_dtype:
        return model
    dtype_bytes(state_dtype, where)
    return dataclasses.replace(model, state_dtype=state_dtype.lower())


@dataclass(frozen=True)
class KVThroughput:
    """Per length in ``lengths`` (tokens): ``s_kv_bytes`` (logical bytes, one copy), ``prefill_s`` (seconds) and
    ``gbps`` (1e9 bit/s), with the prefill model used."""

    lengths: np.ndarray
    s_kv_bytes: np.ndarray
    prefill_s: np.ndarray
    gbps: np.ndarray
    prefill: PrefillModel


def kv_throughput(model: ModelProfile | str, instance: Instance | str, lengths, source: str = "auto",
                  state_dtype: str | None = None, moe: str = "tp", stack=None) -> KVThroughput:
    """``Phi_kv`` of ``model`` on ``instance`` at ``lengths`` (tokens). ``state_dtype`` counts recurrent state
    as an engine stores it instead of the profile's dtype (SGLang keeps it in fp32); prefill comes from
    `prefill_model` with ``source``, ``moe`` and ``stack`` (latency: one request alone, as Table 3 measured)."""
    model = get_model(model)
    counted = with_state_dtype(model, state_dtype, "`state_dtype`")
    l = np.asarray(lengths, dtype=np.int64)
    pm = prefill_model(model, parse_instance(instance), source, moe, stack)
    s = np.asarray(A.s_kv(counted, l), dtype=float)
    t = np.asarray(pm.latency_s(l.astype(float)), dtype=float)
    return KVThroughput(l, s, t, s * 8 / t / 1e9, pm)
