"""Chip efficiencies from micro-benchmarks (``data/reference/kernel_efficiency.csv``): the seeds of the fit.

Per benchmarked chip: the GEMM fraction of peak per rate class (median over the serving frameworks of the
``m >= 4096`` rows; ``fp8`` pools the per-tensor and block-scaled rows) and the scale-up collective efficiency
(8-GPU all-reduce bus bandwidth at a 34 MB message, the size of a 2K-4K-token prefill's activations, best
of NCCL and SGLang's custom all-reduce, over the chip's per-direction scale-up bandwidth). Memory efficiency
has no micro-benchmark in the file. Chips the file does not cover use `default_seed`: the median over
the benchmarked chips, so an uncalibrated chip is judged by its peaks alone.
"""

from __future__ import annotations

import csv
import statistics
from functools import lru_cache

from .._data import REFERENCE_DIR

KERNEL_FILE = "kernel_efficiency.csv"
SYSTEM_CHIP = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200", "h20": "h20"}
DTYPE_CLASS = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8"}
COMM_MESSAGE = "message 34 MB"
MEMORY_SEED = 0.85  # assumed: decode attention kernels reach ~90% of HBM bandwidth, weight-streaming GEMV less
SCALEUP_GB_S = {"h100": 450.0, "h200": 450.0, "b200": 900.0}  # per direction, as in the hardware profiles


@lru_cache(maxsize=1)
def kernel_seeds() -> dict[str, dict[str, float]]:
    """``{chip: {"bf16": f, "fp8": f, "comm": f}}`` read off the micro-benchmark file (fractions)."""
    lines = [l for l in (REFERENCE_DIR / KERNEL_FILE).read_text(encoding="utf-8").splitlines()
             if l.strip() and not l.startswith("#")]
    gemm: dict[tuple[str, str], list[float]] = {}
    comm: dict[str, float] = {}
    for r in csv.DictReader(lines):
        chip = SYSTEM_CHIP.get(r["system"])
        if chip is None:
            continue
        value = float(r["value"])
        if "GEMM" in r["metric"] and r["dtype"] in DTYPE_CLASS and r["shapes"].startswith("m>=4096"):
            gemm.setdefault((chip, DTYPE_CLASS[r["dtype"]]), []).append(value)
        elif "bus bandwidth" in r["metric"] and r["shapes"] == COMM_MESSAGE and chip in SCALEUP_GB_S:
            comm[chip] = max(comm.get(chip, 0.0), value / SCALEUP_GB_S[chip])
    out: dict[str, dict[str, float]] = {}
    for (chip, cls), values in gemm.items():
        out.setdefault(chip, {})[cls] = statistics.median(values)
    for chip, value in comm.items():
        out.setdefault(chip, {})["comm"] = value
    return out


@lru_cache(maxsize=1)
def default_seed() -> dict[str, float]:
    """Median over the benchmarked chips of each seed (``bf16``, ``fp8``, ``comm``); ``fp4`` takes fp8's
    (no fp4 micro-benchmark in the file); ``memory`` is `MEMORY_SEED`."""
    seeds = kernel_seeds()
    out = {k: statistics.median(s[k] for s in seeds.values() if k in s) for k in ("bf16", "fp8", "comm")}
    return {**out, "fp4": out["fp8"], "memory": MEMORY_SEED}


def chip_seed(chip: str) -> dict[str, float]:
    """Seeds of one chip: its own micro-benchmarks where the file has them, the default elsewhere."""
    return {**default_seed(), **kernel_seeds().get(chip, {})}
