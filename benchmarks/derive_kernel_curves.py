"""Derive the kernel-shape efficiency curves (``prfaas_plan/data/reference/kernel_curves.csv``) from NVIDIA's
per-operator micro-benchmarks (aiconfigurator-core 0.12.0 ``systems/data``, Apache-2.0; copied under
``/work/shared/data/reference/kernel_db``, see its README). Runs only where that folder exists:

    python3 benchmarks/derive_kernel_curves.py [KERNEL_DB] [OUT.csv]

What a curve is (docs/methods.md, "Kernel-shape efficiency"): per chip, operator and dtype class, the
*relative* compute efficiency ``r(x) = eta(x) / eta_plateau`` as a function of the shape variable ``x`` that
moves it, where ``eta`` is achieved FLOP/s over the chip's peak for that dtype:

- ``gemm`` (classes ``bf16``, ``fp8`` = per-tensor and block-scaled, ``fp4`` = nvfp4): ``x`` = m (tokens);
  rows with n, k >= 1024 (model-sized) and compute-bound on the roofline (FLOPs / peak >= bytes / HBM), so
  the memory-bound side stays the HBM efficiency's job and is not counted twice;
- ``moe`` (``bf16``, ``fp8``, ``w4a16`` = int4 weight-only / mxfp4 W4A16): fused MoE, balanced routing,
  one GPU (moe TP = EP = 1); ``x`` = tokens per expert ``tokens * top_k / experts``; compute-bound rows;
- ``attention`` (``bf16``): context (prefill) flash attention without a window, causal FLOPs
  ``2 * 2 * b * heads * head_dim * isl^2 / 2``; ``x`` = sequence length;
- ``linear_attention`` (``bf16``): the chunked gated-delta-rule prefill kernel (``chunk_gated_delta_rule``)
  and Kimi Delta Attention's; ``eta`` is tokens per second (FLOPs are proportional to tokens), ``x`` =
  tokens in the forward.

Each row is the median over every engine, version and kernel source of the rows in one log2 bin of ``x``;
the plateau is the median over the rows at ``x >= PLATEAU[op]``, and ``r`` is capped at 1 (a shape never
beats the large-shape efficiency the calibration fits). The roofline holds ``r`` flat outside the tabulated
range.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

DB = Path("/work/shared/data/reference/kernel_db")
OUT = Path(__file__).resolve().parents[1] / "prfaas_plan" / "data" / "reference" / "kernel_curves.csv"
CHIPS = {"h100_sxm": ("h100", 989e12, 1979e12, 0.0, 3.35e12), "h200_sxm": ("h200", 989e12, 1979e12, 0.0, 4.8e12),
         "b200_sxm": ("b200", 2250e12, 4500e12, 9000e12, 7.7e12)}   # bf16, fp8, fp4 peaks, HBM (hardware_profiles)
GEMM_CLASS = {"bfloat16": ("bf16", 2.0), "fp8": ("fp8", 1.0), "fp8_block": ("fp8", 1.0), "nvfp4": ("fp4", 0.5)}
MOE_CLASS = {"bfloat16": ("bf16", 2.0), "fp8": ("fp8", 1.0), "fp8_block": ("fp8", 1.0),
             "int4_wo": ("w4a16", 0.5), "w4a16_mxfp4": ("w4a16", 0.5)}
PLATEAU = {"gemm": 4096, "moe": 256, "attention": 8192, "linear_attention": 16384}
MIN_ROWS = 5


def _read(paths):
    import pyarrow.parquet as pq

    for p in paths:
        yield p, pq.read_table(p).to_pydict()


def _peak(chip, cls):
    _, bf16, fp8, fp4, _ = CHIPS[chip]
    return {"bf16": bf16, "fp8": fp8, "fp4": fp4, "w4a16": bf16}[cls]


def gemm_rows(db: Path):
    for p, t in _read(sorted(db.glob("*/gemm/*/*/gemm_perf.parquet"))):
        chip = p.parts[-5]
        hbm = CHIPS[chip][4]
        for dt, m, n, k, lat in zip(t["gemm_dtype"], t["m"], t["n"], t["k"], t["latency"]):
            if dt not in GEMM_CLASS or n < 1024 or k < 1024 or not lat or lat <= 0:
                continue
            cls, wb = GEMM_CLASS[dt]
            peak = _peak(chip, cls)
            flops = 2.0 * m * n * k
            nbytes = n * k * wb + m * k * min(wb, 2.0) + 2.0 * m * n
            if peak and flops / peak >= nbytes / hbm:
                yield chip, "gemm", cls, m, flops / (lat * 1e-3) / peak


def moe_rows(db: Path):
    for p, t in _read(sorted(db.glob("*/moe/*/*/moe_perf.parquet"))):
        chip = p.parts[-5]
        hbm = CHIPS[chip][4]
        cols = zip(t["moe_dtype"], t["num_tokens"], t["hidden_size"], t["inter_size"], t["topk"], t["num_experts"],
                   t["moe_tp_size"], t["moe_ep_size"], t["distribution"], t["latency"])
        for dt, tok, h, inter, topk, e, mtp, mep, dist, lat in cols:
            if dt not in MOE_CLASS or mtp != 1 or mep != 1 or dist != "balanced" or not lat or lat <= 0:
                continue
            cls, wb = MOE_CLASS[dt]
            flops = 2.0 * 3.0 * h * inter * tok * topk
            nbytes = min(e, tok * topk) * 3.0 * h * inter * wb
            peak = _peak(chip, cls)
            if flops / peak >= nbytes / hbm:
                yield chip, "moe", cls, tok * topk / e, flops / (lat * 1e-3) / peak


def attention_rows(db: Path):
    for p, t in _read(sorted(db.glob("*/attention/*/*/context_attention_perf.parquet"))):
        chip = p.parts[-5]
        cols = zip(t["attn_dtype"], t["kv_cache_dtype"], t["batch_size"], t["isl"], t["num_heads"], t["head_dim"],
                   t["window_size"], t["step"], t["latency"])
        for dt, kv, b, isl, heads, d, window, step, lat in cols:
            if dt != "bfloat16" or kv != "bfloat16" or window or step or not lat or lat <= 0 or isl < 16:
                continue
            flops = 4.0 * b * heads * d * isl * isl / 2.0
            yield chip, "attention", "bf16", isl, flops / (lat * 1e-3) / _peak(chip, "bf16")


def linear_rows(db: Path):
    paths = sorted(db.glob("*/linear_attention/*/*/gdn_perf.parquet")) + sorted(db.glob("*/kda/*/*/kda_perf.parquet"))
    for p, t in _read(paths):
        chip = p.parts[-5]
        phase = t.get("phase") or ["context"] * len(t["latency"])
        for ph, src, tok, lat in zip(phase, t["kernel_source"], t["num_tokens"], t["latency"]):
            if ph != "context" or "conv" in src or not lat or lat <= 0 or tok < 16:
                continue
            yield chip, "linear_attention", "bf16", tok, tok / (lat * 1e-3)


def curves(rows):
    """``[(chip, op, class, x, r, eta, n)]``: log2-binned medians relative to the plateau."""
    groups: dict = {}
    for chip, op, cls, x, eta in rows:
        groups.setdefault((CHIPS[chip][0], op, cls), []).append((x, eta))
    out = []
    for (chip, op, cls), values in sorted(groups.items()):
        x = np.array([v[0] for v in values], dtype=float)
        eta = np.array([v[1] for v in values], dtype=float)
        top = eta[x >= PLATEAU[op]]
        if len(top) < MIN_ROWS:
            continue
        plateau = float(np.median(top))
        bins = np.round(np.log2(np.maximum(x, 1.0 / 64)))
        for b in np.unique(bins):
            sel = bins == b
            if sel.sum() < MIN_ROWS:
                continue
            med = float(np.median(eta[sel]))
            out.append((chip, op, cls, float(2.0 ** b), min(1.0, med / plateau),
                        med if op != "linear_attention" else float("nan"), int(sel.sum())))
    return out


def main(argv: list[str]) -> int:
    db = Path(argv[1]) if len(argv) > 1 else DB
    out = Path(argv[2]) if len(argv) > 2 else OUT
    if not db.is_dir():
        print(f"kernel database not found at {db} (needs /work/shared/data/reference/kernel_db)", file=sys.stderr)
        return 1
    rows = [r for gen in (gemm_rows, moe_rows, attention_rows, linear_rows) for r in gen(db)]
    table = curves(rows)
    with out.open("w", newline="", encoding="utf-8") as f:
        f.write("# Kernel-shape efficiency curves derived by benchmarks/derive_kernel_curves.py (read its docstring)\n"
                "# from NVIDIA aiconfigurator-core 0.12.0 systems/data kernel micro-benchmarks (gemm, moe,\n"
                "# context attention, gdn/kda), every engine and version pooled. Licence of the source: Apache-2.0,\n"
                "# Copyright NVIDIA CORPORATION & AFFILIATES (LICENSE-aiconfigurator-APACHE-2.0.txt beside this file);\n"
                "# this file is a derived summary (medians per log2 bin), not the tables.\n"
                "# columns: chip, op, dtype class, x (gemm: m tokens; moe: tokens per expert; attention: sequence\n"
                "# length; linear_attention: tokens), relative efficiency r = eta(x) / eta(plateau) capped at 1,\n"
                "# eta = achieved fraction of the dtype's peak (blank for linear attention), rows in the bin\n")
        w = csv.writer(f)
        w.writerow(["chip", "op", "dtype", "x", "relative", "eta", "rows"])
        for chip, op, cls, x, r, eta, n in table:
            w.writerow([chip, op, cls, f"{x:g}", f"{r:.4f}", "" if np.isnan(eta) else f"{eta:.4f}", n])
    print(f"wrote {len(table)} rows to {out} from {len(rows):,} kernel rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
