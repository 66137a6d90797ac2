"""Kernel-shape efficiency: how a kernel's achieved FLOP rate moves with its shape, per chip.

``data/reference/kernel_curves.csv`` holds, per chip (H100, H200, B200), operator and dtype class, the relative
compute efficiency ``r(x) = eta(x) / eta(large shapes)`` derived from NVIDIA's per-operator micro-benchmarks
by ``benchmarks/derive_kernel_curves.py`` (its docstring says which rows and why; source and Apache-2.0
licence in the file's header and beside it). The shape variable ``x`` is

- ``gemm``: m, the tokens in the forward (attention projections, dense FFN, shared experts, LM head);
- ``moe``: tokens per routed expert on the busiest chip;
- ``attention``: keys each query attends (context + new tokens, window-capped);
- ``linear_attention``: tokens in the forward.

The roofline divides an operator's compute time by ``r(x)`` (linear in ``log2 x`` between the tabulated
bins, flat outside them) and keeps the chip's calibrated efficiency (`prfaas_plan.profiles.Calibration`) as
the large-shape value, so the fit still sets the level and the curve only the shape. The curves cover the
compute-bound side of each kernel; memory-bound shapes stay the HBM efficiency's. A chip without kernel data
(H20, H800, MI300X, ...) has ``r = 1``: one efficiency per class, as before (`curve_note` says so).
"""

from __future__ import annotations

import csv
from functools import lru_cache

import numpy as np

from .._data import REFERENCE_DIR

CURVE_FILE = "kernel_curves.csv"
# operator class of the roofline (`operators.OpWork.name`) -> curve operator; GEMM classes use their rate class
CURVE_OP = {"attn_proj": "gemm", "dense_ffn": "gemm", "moe_shared": "gemm", "lm_head": "gemm", "moe_routed": "moe",
            "attn_full": "attention", "attn_swa": "attention", "attn_linear": "linear_attention"}


@lru_cache(maxsize=1)
def _curves() -> dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]:
    """``{(chip, op, class): (log2 x, r)}`` read off `CURVE_FILE`."""
    lines = [l for l in (REFERENCE_DIR / CURVE_FILE).read_text(encoding="utf-8").splitlines()
             if l.strip() and not l.startswith("#")]
    rows: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for r in csv.DictReader(lines):
        rows.setdefault((r["chip"], r["op"], r["dtype"]), []).append((float(r["x"]), float(r["relative"])))
    out = {}
    for key, pts in rows.items():
        pts.sort()
        out[key] = (np.log2([p[0] for p in pts]), np.array([p[1] for p in pts]))
    return out


@lru_cache(maxsize=1)
def _plateaus() -> dict[tuple[str, str, str], float]:
    """``{(chip, op, class): eta}``: median achieved fraction of peak over the bins at the plateau (r >= 0.95)."""
    lines = [l for l in (REFERENCE_DIR / CURVE_FILE).read_text(encoding="utf-8").splitlines()
             if l.strip() and not l.startswith("#")]
    rows: dict[tuple[str, str, str], list[float]] = {}
    for r in csv.DictReader(lines):
        if r["eta"] and float(r["relative"]) >= 0.95:
            rows.setdefault((r["chip"], r["op"], r["dtype"]), []).append(float(r["eta"]))
    return {k: float(np.median(v)) for k, v in rows.items()}


def plateau_efficiency(chip: str, op: str, cls: str) -> float | None:
    """Large-shape achieved fraction of the dtype's peak of curve operator ``op`` (``gemm``, ``moe``,
    ``attention``) and class ``cls`` on ``chip``, or None without kernel data: the calibration's prior."""
    return _plateaus().get((chip, op, cls))


# kernel efficiency classes (`profiles.Calibration`) whose large-shape value a chip's kernel data measure: flash
# attention by the context-attention benchmarks, W4A16 by the fused-MoE int4/mxfp4 weight-only ones
KERNEL_CLASS_OP = {"attention": ("attention", "bf16"), "w4a16": ("moe", "w4a16")}


def kernel_class_seed(chip: str, efficiency_class: str) -> float | None:
    """``chip``'s measured large-shape efficiency of kernel class ``efficiency_class`` (`KERNEL_CLASS_OP`), or None
    (no kernel data, or a class the curves do not measure): the calibration's prior centre, and the value an
    uncalibrated chip runs at (`performance.constants.default_calibration`)."""
    op = KERNEL_CLASS_OP.get(efficiency_class)
    return None if op is None else plateau_efficiency(chip, *op)


@lru_cache(maxsize=1)
def curve_chips() -> frozenset[str]:
    """Chips the curve file covers (read once: every operator of every pass asks)."""
    return frozenset(k[0] for k in _curves())


@lru_cache(maxsize=None)
def _curve(chip: str, op: str, cls: str):
    curves = _curves()
    for key in ((chip, op, cls), (chip, "gemm", cls), (chip, op, "bf16"), (chip, "gemm", "bf16")):
        if key in curves and (key[1] == op or op in ("moe", "gemm")):
            return curves[key]
    return None


def relative_efficiency(chip: str, op_name: str, efficiency_class: str, x):
    """``r(x)`` of operator class ``op_name`` (`operators.OpWork.name`) running at ``efficiency_class`` on
    ``chip`` (a profile name), ``x`` its shape variable (array, see the module docstring): 1.0 (a float) when
    the chip, the operator or ``x`` has no curve."""
    op = CURVE_OP.get(op_name)
    if op is None or x is None or chip not in curve_chips():
        return 1.0
    curve = _curve(chip, op, "bf16" if efficiency_class in ("attention", "linear_attention") else efficiency_class)
    if curve is None:
        return 1.0
    lx, r = curve
    return np.interp(np.log2(np.maximum(np.asarray(x, dtype=float), 1.0)), lx, r)


def curve_note(chip: str) -> str:
    """One phrase: whether ``chip``'s efficiencies follow kernel shapes."""
    if chip in curve_chips():
        return f"shape-dependent efficiency from its kernel micro-benchmarks ({CURVE_FILE})"
    return f"no kernel micro-benchmarks: one efficiency per class, shape-independent (assumed; {CURVE_FILE})"
