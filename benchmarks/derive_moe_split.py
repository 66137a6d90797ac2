"""Derive how much faster or slower an engine's routed-expert kernel runs expert-parallel than tensor-parallel
(``prfaas_plan/data/reference/moe_split.csv``) from NVIDIA's MoE micro-benchmarks (aiconfigurator-core 0.12.0
``systems/data/<chip>/moe/<engine>/<version>/moe_perf.parquet``, Apache-2.0; copied under
``/work/shared/data/reference/kernel_db``, see its README). Runs only where that folder exists:

    python3 benchmarks/derive_moe_split.py [KERNEL_DB] [OUT.csv]

For each chip, engine, dtype class and degree ``n`` (2, 4, 8, 16), and each token count of the benchmark:
the ratio ``latency(moe_tp=1, moe_ep=n) / latency(moe_tp=n, moe_ep=1)`` of the same MoE shape (hidden,
intermediate, top-k, experts), same dtype and version, balanced routing; the row is the median over every
shape and version of the engine (``shapes`` says how many pairs). The kernel benchmark times one rank's
grouped GEMMs only: the all-to-all of EP and the all-reduce of TP are the roofline's (`operators.py`).

Why (issue 21): the roofline gives EP and TP the same HBM bytes at a decode batch, but engines' kernels differ:
TensorRT-LLM's EP kernels run 0.35-0.7x its TP kernels' time at decode token counts (its TP-sliced experts are
slow), SGLang's 1.5-2.5x, vLLM's about 1x; NVIDIA's measured TPOT rows (``nvidia_silicon_sample_subset.csv``)
show the same order (TensorRT-LLM DeepSeek-V3 EP8 0.6x its TP8 TPOT). `performance/moe_split.py` reads it.
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

DB = Path("/work/shared/data/reference/kernel_db")
OUT = Path(__file__).resolve().parents[1] / "prfaas_plan" / "data" / "reference" / "moe_split.csv"
CHIPS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200"}
CLASS = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "int4_wo": "w4a16", "w4a16_mxfp4": "w4a16"}
DEGREES = (2, 4, 8, 16)
ENGINES = {"sglang": "sglang", "trtllm": "trtllm", "vllm": "vllm"}


def ratios(db: Path):
    """``{(chip, engine, class, degree, tokens): [ratio, ...]}`` over every shape and version."""
    import pyarrow.parquet as pq

    out = defaultdict(list)
    for p in sorted(db.glob("*/moe/*/*/moe_perf.parquet")):
        chip, engine, version = CHIPS[p.parts[-5]], ENGINES[p.parts[-3]], p.parts[-2]
        t = pq.read_table(p).to_pydict()
        lat = {}
        for dt, tok, h, i, k, e, mtp, mep, dist, ms in zip(
                t["moe_dtype"], t["num_tokens"], t["hidden_size"], t["inter_size"], t["topk"], t["num_experts"],
                t["moe_tp_size"], t["moe_ep_size"], t["distribution"], t["latency"]):
            if dist not in ("balanced", "uniform") or dt not in CLASS or not ms or ms <= 0:
                continue
            lat[(CLASS[dt], dt, tok, h, i, k, e, mtp, mep)] = float(ms)
        for (cls, dt, tok, h, i, k, e, mtp, mep), ms in lat.items():
            if mtp == 1 and mep in DEGREES:
                tp = lat.get((cls, dt, tok, h, i, k, e, mep, 1))
                if tp:
                    out[(chip, engine, cls, mep, tok)].append(ms / tp)
        del version
    return out


def main(argv: list[str]) -> int:
    db = Path(argv[0]) if argv else DB
    out = Path(argv[1]) if len(argv) > 1 else OUT
    if not db.exists():
        print(f"{db}: no kernel database here; nothing derived")
        return 1
    rows = ratios(db)
    with out.open("w", newline="", encoding="utf-8") as f:
        f.write("# Expert-parallel over tensor-parallel latency of the routed-expert (fused MoE) kernel, derived by\n"
                "# benchmarks/derive_moe_split.py (read its docstring) from NVIDIA aiconfigurator-core 0.12.0\n"
                "# systems/data/<chip>/moe/<engine>/<version>/moe_perf.parquet, balanced routing. Licence of the source:\n"
                "# Apache-2.0, Copyright NVIDIA CORPORATION & AFFILIATES (LICENSE-aiconfigurator-APACHE-2.0.txt beside\n"
                "# this file); this file is a derived summary (medians), not the tables.\n"
                "# columns: chip, engine, dtype class, degree n, tokens in the forward, ratio = median over shapes and\n"
                "# versions of latency(moe_tp=1, moe_ep=n) / latency(moe_tp=n, moe_ep=1), shapes = pairs behind it\n")
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["chip", "engine", "dtype", "degree", "tokens", "ratio", "shapes"])
        for key in sorted(rows):
            v = rows[key]
            w.writerow([*key, f"{float(np.median(v)):.4f}", len(v)])
    print(f"wrote {out} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
