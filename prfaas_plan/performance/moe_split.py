"""Expert-parallel decode from the engines' measured MoE kernels: how long a routed-expert kernel takes with
whole experts per chip (EP) against sliced experts (TP) at the same degree, per chip, engine and dtype class.

``data/reference/moe_split.csv`` holds ``ratio(tokens) = latency(EP n) / latency(TP n)`` of the fused MoE
kernel, medians over NVIDIA's micro-benchmarked MoE shapes, derived by ``benchmarks/derive_moe_split.py``
(its docstring says which rows; source and Apache-2.0 licence in the file's header and beside it). With
`decode.EP_KERNEL_RATIO` on (off by default until the bundled profiles are refitted with it; its comment
gives the measured errors), a decode step under EP (`decode.decode_step_s`, and the calibration) takes the routed experts' time as the roofline's TP time times this
ratio at the step's token count; everything else (attention, the all-to-all that replaces the MoE
all-reduce) stays the roofline's. Without a row for the chip (H20, H800, MI300X, ...), the engine or the
dtype class, the roofline's own EP model holds (busiest chip under uniform routing, `operators._moe_ops`),
and `split_note` says which applies. Prefill keeps the roofline's EP model: the stacks' fitted EP prefill
overheads (``ep_forward_overhead_s``) were fitted with it.

Expert-TP x EP hybrids (``moe="ep<k>"``, aiconfigurator's ``tp8 etp4 ep2``: ``ep2`` on 8 chips): the routed
experts are spread whole over ``k`` groups of ``tp/k`` chips and sliced by TP within a group
(`ep_degree`, `hybrid_splits`). The kernel database has no hybrid rows, so a hybrid is priced by the
roofline alone (`operators._moe_ops`: the busiest of ``k`` groups under uniform routing, its experts sliced
``tp/k`` ways; the all-to-all between groups) in prefill and decode, and `split_note` says so. Weights per
chip are those of TP and EP at the same degree (``E/k`` experts, each ``1/(tp/k)``), so HBM fit does not
change with the split.
"""

from __future__ import annotations

import csv
from functools import lru_cache

import numpy as np

from .._data import REFERENCE_DIR

SPLIT_FILE = "moe_split.csv"
ENGINE_OF = {"sglang": "sglang", "tensorrt-llm": "trtllm", "trt-llm": "trtllm", "vllm": "vllm"}
CLASS_OF = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "int4": "w4a16", "mxfp4": "w4a16"}


@lru_cache(maxsize=1)
def _table() -> dict[tuple[str, str, str, int], tuple[np.ndarray, np.ndarray]]:
    """``{(chip, engine, class, degree): (log2 tokens, ratio)}`` read off `SPLIT_FILE`."""
    lines = [l for l in (REFERENCE_DIR / SPLIT_FILE).read_text(encoding="utf-8").splitlines()
             if l.strip() and not l.startswith("#")]
    rows: dict[tuple, list[tuple[float, float]]] = {}
    for r in csv.DictReader(lines):
        rows.setdefault((r["chip"], r["engine"], r["dtype"], int(r["degree"])), []).append(
            (float(r["tokens"]), float(r["ratio"])))
    return {k: (np.log2([p[0] for p in sorted(v)]), np.array([p[1] for p in sorted(v)])) for k, v in rows.items()}


def engine_family(engine: str) -> str | None:
    """``SGLang`` -> ``sglang``, ``TensorRT-LLM`` -> ``trtllm``: the kernel database's engine name, or None."""
    return ENGINE_OF.get(str(engine).strip().lower())


def split_ratio(chip: str, engine: str, expert_dtype: str, degree: int, tokens):
    """``latency(EP degree) / latency(TP degree)`` of the routed-expert kernel at ``tokens`` (array) in the
    forward, interpolated in log2 tokens and flat outside the benchmarked range; None without data."""
    key = (chip, engine_family(engine) or "", CLASS_OF.get(str(expert_dtype).lower(), ""), int(degree))
    curve = _table().get(key)
    if curve is None:
        return None
    lx, r = curve
    return np.interp(np.log2(np.maximum(np.asarray(tokens, dtype=float), 1.0)), lx, r)


def split_note(chip: str, engine: str, expert_dtype: str, degree: int, moe: str = "ep") -> str:
    """One phrase: where an EP (or expert-TP x EP hybrid, ``moe`` ``ep<k>``) decode's routed-expert time
    comes from."""
    if moe not in ("ep", "tp"):
        return (f"{split_label(moe, degree)} routed experts: roofline busiest-group model (no {SPLIT_FILE} rows "
                "for hybrids)")
    if split_ratio(chip, engine, expert_dtype, degree, 1.0) is not None:
        return (f"EP routed experts: the roofline's TP time x {engine_family(engine)}'s measured EP{degree}/TP{degree} "
                f"kernel ratio on {chip} ({SPLIT_FILE})")
    return (f"EP routed experts: roofline busiest-chip model (no {SPLIT_FILE} row for {chip}, {engine}, "
            f"{expert_dtype}, degree {degree})")


def ep_degree(moe: str, tp: int) -> int:
    """Expert-parallel groups of a ``moe`` split on ``tp`` chips: 1 for ``tp`` (sliced), ``tp`` for ``ep``
    (whole experts per chip), ``k`` for the hybrid ``ep<k>`` (``k`` groups of ``tp/k`` chips slicing each
    expert). ValueError for anything else, or a ``k`` that does not divide ``tp`` into groups of 2 or more
    chips with 2 or more groups."""
    if moe == "tp":
        return 1
    if moe == "ep":
        return tp
    k = int(moe[2:]) if moe.startswith("ep") and moe[2:].isdigit() else 0
    if not (1 < k < tp and tp % k == 0):
        raise ValueError(f"moe {moe!r}: expected tp, ep or ep<k> with k a divisor of {tp} between 2 and {tp // 2}")
    return k


def hybrid_splits(tp: int) -> list[str]:
    """The expert-TP x EP hybrids of ``tp`` chips (``ep2`` = ETP ``tp/2`` x EP 2, ...), fewest groups first."""
    return [f"ep{k}" for k in range(2, tp) if tp % k == 0]


def split_label(moe: str, tp: int) -> str:
    """``MoE TP8`` / ``MoE EP8`` / ``MoE ETP4xEP2``: how the routed experts of ``tp`` chips are split."""
    k = ep_degree(moe, tp)
    return f"MoE TP{tp}" if k == 1 else f"MoE EP{tp}" if k == tp else f"MoE ETP{tp // k}xEP{k}"
