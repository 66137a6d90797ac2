"""Numerical helpers of the reference implementation: a FLOP counter, storage dtypes, small functions.

Units
-----
- FLOPs: a multiply-add counts 2 FLOPs, a lone multiply (a decay applied to a state) 1 FLOP, the same
  convention as `prfaas_plan.arithmetic`. Only what that module models is counted: matrix products
  (projections, scores, weighted sums, state read-outs and updates, the short convolution) and the
  state decay. Element-wise work (softmax, norms, activations, gates, RoPE, the log-sum-exp merge,
  ``beta * (v - k S)``) is not counted, by the same convention.
- Bytes: a storage codec says how many bytes one element takes at a profile dtype (``bf16`` -> 2).

All arithmetic is float64. Caches may be *stored* at a profile dtype through a `Codec`: values are
rounded when written and read back as float64, so that what a serving engine holds (and ships) is
emulated bit for bit at the element size the planner accounts for.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import PlanError

# ----------------------------------------------------------------------------------------------------
# FLOP counting


class Flops:
    """FLOP counter by tag: ``proj`` (attention projections and gates), ``core`` (scores, weighted sums,
    state recurrence), ``conv`` (short convolution), ``ffn``, ``lm_head``, ``context_decompress`` (MLA
    latents of a cached prefix decompressed in prefill) and ``absorb`` (MLA decode absorption products).

    Values are FLOPs (2 per multiply-add). A counter is passed down explicitly; ``None`` counts nothing.
    """

    def __init__(self) -> None:
        self.by_tag: dict[str, int] = defaultdict(int)

    def add(self, tag: str, flops: int) -> None:
        self.by_tag[tag] += int(flops)

    def __getitem__(self, tag: str) -> int:
        return self.by_tag.get(tag, 0)

    def total(self, *tags: str) -> int:
        """Sum of the given tags (all tags if none given)."""
        return sum(v for k, v in self.by_tag.items() if not tags or k in tags)


def matmul(a: np.ndarray, b: np.ndarray, fl: Flops | None, tag: str) -> np.ndarray:
    """``a @ b`` counting its multiply-adds from the shapes: output elements x contracted length."""
    out = a @ b
    if fl is not None:
        fl.add(tag, 2 * np.size(out) * a.shape[-1])
    return out


def decay(state: np.ndarray, factor: np.ndarray, fl: Flops | None, tag: str) -> np.ndarray:
    """``state * factor`` (broadcast) counting one multiply per state element (the recurrent decay)."""
    out = state * factor
    if fl is not None:
        fl.add(tag, np.size(out))
    return out


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def rms_norm(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """RMS normalisation over the last axis (no learned scale: weights are random anyway)."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def l2_norm(x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Unit L2 norm over the last axis (delta-rule q and k)."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def rope(x: np.ndarray, positions: np.ndarray, theta: float = 10000.0) -> np.ndarray:
    """Rotary position embedding on the last axis (even length) of ``x`` shaped (tokens, ..., d).

    ``positions`` are 0-based absolute token positions, one per row of ``x``.
    """
    d = x.shape[-1]
    inv = theta ** (-np.arange(0, d, 2) / d)
    ang = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
    ang = ang.reshape(ang.shape[:1] + (1,) * (x.ndim - 2) + ang.shape[1:])
    cos, sin = np.cos(ang), np.sin(ang)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out


# ----------------------------------------------------------------------------------------------------
# Storage dtypes


@dataclass(frozen=True)
class Codec:
    """How a cache tensor is stored: ``encode`` float64 -> storage array, ``decode`` back to float64.

    ``nbytes`` is the size of one element in bytes, equal to `prfaas_plan.profiles.DTYPE_BYTES` of
    ``name``; ``storage`` the numpy dtype actually holding the bits.
    """

    name: str
    nbytes: int
    storage: np.dtype
    encode: Callable[[np.ndarray], np.ndarray]
    decode: Callable[[np.ndarray], np.ndarray]


def _bf16_encode(x: np.ndarray) -> np.ndarray:
    """Round to bfloat16 (nearest-even on the float32 bits) and keep the upper 16 bits as uint16."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def _bf16_decode(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, dtype=np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def _e4m3_table() -> np.ndarray:
    """The 127 non-negative finite values of fp8 e4m3 (bias 7, no infinities, max 448), by code."""
    vals = []
    for code in range(127):  # 0x7F is NaN
        e, m = code >> 3, code & 7
        vals.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(vals)


_E4M3 = _e4m3_table()
_E4M3_MID = (_E4M3[1:] + _E4M3[:-1]) / 2


def _fp8_encode(x: np.ndarray) -> np.ndarray:
    """Round to the nearest fp8 e4m3 value (saturating at 448); sign in the top bit of a uint8."""
    x = np.asarray(x, dtype=np.float64)
    code = np.searchsorted(_E4M3_MID, np.abs(x)).astype(np.uint8)
    return code | (np.signbit(x).astype(np.uint8) << np.uint8(7))


def _fp8_decode(b: np.ndarray) -> np.ndarray:
    b = np.asarray(b, dtype=np.uint8)
    mag = _E4M3[(b & np.uint8(0x7F)).astype(np.intp)]
    return np.where(b & np.uint8(0x80), -mag, mag)


CODECS: dict[str, Codec] = {
    "fp64": Codec("fp64", 8, np.dtype(np.float64), lambda x: np.asarray(x, np.float64).copy(),
                  lambda b: np.asarray(b, np.float64)),
    "fp32": Codec("fp32", 4, np.dtype(np.float32), lambda x: np.asarray(x, np.float32),
                  lambda b: np.asarray(b, np.float64)),
    "fp16": Codec("fp16", 2, np.dtype(np.float16), lambda x: np.asarray(x, np.float16),
                  lambda b: np.asarray(b, np.float64)),
    # bf16 is real bfloat16: the upper half of the float32 bits, held in uint16 (2 bytes per element).
    "bf16": Codec("bf16", 2, np.dtype(np.uint16), _bf16_encode, _bf16_decode),
    "fp8": Codec("fp8", 1, np.dtype(np.uint8), _fp8_encode, _fp8_decode),
}


def codec(name: str, where: str = "reference") -> Codec:
    """The storage codec of a profile dtype name; `PlanError` for dtypes the reference cannot store
    (sub-byte and integer formats need scales the planner does not model)."""
    try:
        return CODECS[name.lower()]
    except KeyError:
        raise PlanError(f"{where}: dtype {name!r} cannot be stored by the numpy reference; "
                        f"supported: {', '.join(CODECS)}") from None
