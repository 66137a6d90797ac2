"""Derive the collective efficiency curves (``prfaas_plan/data/reference/collective_curves.csv``) from NVIDIA's
communication micro-benchmarks (aiconfigurator-core 0.12.0 ``systems/data/<chip>/comm``, Apache-2.0; copied under
``/work/shared/data/reference/kernel_db``, see its README). Runs only where that folder exists:

    python3 benchmarks/derive_collective_curves.py [KERNEL_DB] [OUT.csv]

What a curve is (docs/methods.md, "Issue 20 round 6"): per chip, collective (``all_reduce``, ``all_gather``,
``alltoall``) and GPU count (2, 4, 8), the achieved *bus bandwidth* over the chip's nominal scale-up bandwidth per
direction (``SCALEUP_GB_S``, as in ``hardware_profiles/``), ``eta(S)``, as a function of the message ``S`` in bytes
(the buffer one rank passes to the collective, nccl-tests' ``size``). Bus bandwidth follows nccl-tests:
``2 (n-1)/n * S / t`` for all-reduce, ``(n-1)/n * S / t`` for all-gather and all-to-all, so ``eta`` times the
nominal bandwidth is the rate at which the roofline's per-chip link bytes (`performance.operators`) move.

Which kernel, per message size:

- ``all_reduce`` up to `CUSTOM_AR_MAX_BYTES` (8 MiB): the engines' own one-/two-shot custom all-reduce, which
  SGLang and vLLM dispatch below that size (their ``CustomAllreduce`` default ``max_size``) and TensorRT-LLM's
  ``AUTO`` strategy picks for small messages: the median over every engine and version of the CUDA-graph
  variants (``sglang_graph``, ``vllm_graph``, TensorRT-LLM's own). Messages that small are mostly decode steps,
  which the engines replay in CUDA graphs; a short prompt's eager launch cost is the stack's per-forward
  overhead, not the chip's. Above 8 MiB the engines call NCCL: the median over the chip's NCCL versions;
- ``all_gather`` and ``alltoall``: NCCL at every size (the tables have no engine kernels for them; DeepEP's
  expert-parallel dispatch, in ``wideep_*`` tables, is not used here).

``message_size`` in the tables counts elements (aiconfigurator's collectors and its ``query_allreduce`` say
"count, not size in bytes"); ``half`` / ``bfloat16`` rows only, so bytes = 2 x elements. Bins are the tables'
own powers of two. Time must not fall as the message grows (a larger message is never done sooner), so
``eta`` is capped from one bin to the next at the ratio of their sizes: ``eta(S2) <= eta(S1) * S2 / S1``
(the roofline interpolates ``log eta`` linearly in ``log S``, so time is then non-decreasing everywhere).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

DB = Path("/work/shared/data/reference/kernel_db")
OUT = Path(__file__).resolve().parents[1] / "prfaas_plan" / "data" / "reference" / "collective_curves.csv"
CHIPS = {"h100_sxm": "h100", "h200_sxm": "h200", "b200_sxm": "b200"}
SCALEUP_GB_S = {"h100": 450.0, "h200": 450.0, "b200": 900.0}   # per direction, as in hardware_profiles/
CUSTOM_AR_MAX_BYTES = 8 * 2 ** 20   # SGLang / vLLM CustomAllreduce default max_size (assumed from their defaults)
HALF = ("half", "bfloat16", "float16")
BUS_FACTOR = {"all_reduce": lambda n: 2.0 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "alltoall": lambda n: (n - 1) / n}
GRAPH_KERNELS = ("graph", "trtllm")   # CUDA-graph custom all-reduce variants (backend / implementation column)
MIN_BYTES = 4096


def _tables(db: Path):
    import pyarrow.parquet as pq

    for p in sorted(db.glob("*/comm/*/*/*.parquet")):
        if p.stem in ("nccl_perf", "custom_allreduce_perf"):
            yield p, pq.read_table(p).to_pylist()


def rows(db: Path):
    """``(chip, collective, gpus, bytes, kernel, eta)`` per measured row: kernel ``nccl`` or ``custom``."""
    for p, table in _tables(db):
        chip = CHIPS.get(p.parts[-5])
        if chip is None:
            continue
        nccl = p.stem == "nccl_perf"
        for r in table:
            op, n = r["op_name"], int(r["num_gpus"])
            dtype = r.get("nccl_dtype") or r.get("allreduce_dtype")
            if op not in BUS_FACTOR or dtype not in HALF or not r["latency"] or r["latency"] <= 0 or n < 2:
                continue
            variant = (r.get("backend") or r.get("implementation") or "").lower()
            if not nccl and not any(k in variant for k in GRAPH_KERNELS):
                continue   # eager custom all-reduce: see the module docstring
            nbytes = 2 * int(r["message_size"])
            bus = BUS_FACTOR[op](n) * nbytes / (r["latency"] * 1e-3)
            yield chip, op, n, nbytes, "nccl" if nccl else "custom", bus / (SCALEUP_GB_S[chip] * 1e9)


def curves(measured) -> list[dict]:
    """Median per (chip, collective, gpus, bytes) of the kernel the engines use at that size, made monotone in
    time (see the module docstring)."""
    cells: dict[tuple, dict[str, list[float]]] = {}
    for chip, op, n, nbytes, kernel, eta in measured:
        if nbytes >= MIN_BYTES:
            cells.setdefault((chip, op, n, nbytes), {}).setdefault(kernel, []).append(eta)
    out = []
    for chip, op, n in sorted({k[:3] for k in cells}):
        sizes = sorted(k[3] for k in cells if k[:3] == (chip, op, n))
        prev = None
        for s in sizes:
            by = cells[(chip, op, n, s)]
            kernel = "custom" if op == "all_reduce" and s <= CUSTOM_AR_MAX_BYTES and "custom" in by else "nccl"
            if kernel not in by:
                continue
            eta = float(f"{float(np.median(by[kernel])):.5g}")   # as written: the cap holds on the file's values
            if prev is not None and eta > prev[1] * s / prev[0]:
                eta = float(f"{prev[1] * s / prev[0] * (1 - 1e-7):.8g}")
            prev = (s, eta)
            out.append({"chip": chip, "collective": op, "gpus": n, "bytes": s, "eta": f"{eta:.8g}",
                        "kernel": "engine custom all-reduce (CUDA graph)" if kernel == "custom" else "NCCL",
                        "rows": len(by[kernel])})
    return out


HEADER = """# Collective efficiency curves derived by benchmarks/derive_collective_curves.py (read its docstring) from NVIDIA
# aiconfigurator-core 0.12.0 systems/data/<chip>/comm micro-benchmarks (NCCL nccl_perf and the engines'
# custom_allreduce_perf tables, every version pooled by median). Licence of the source: Apache-2.0, Copyright
# NVIDIA CORPORATION & AFFILIATES (LICENSE-aiconfigurator-APACHE-2.0.txt beside this file); this file is a derived
# summary (one median per chip, collective, GPU count and message size), not the tables.
# columns: chip, collective, gpus, bytes (message per rank, 2 x the tables' element count), eta = achieved bus
# bandwidth / nominal scale-up bandwidth per direction (h100/h200 450 GB/s, b200 900 GB/s), kernel (the engine's
# custom all-reduce up to 8 MiB, NCCL above and for all-gather / all-to-all), rows (measured rows in the median)
"""


def main(argv: list[str]) -> int:
    db = Path(argv[1]) if len(argv) > 1 else DB
    out = Path(argv[2]) if len(argv) > 2 else OUT
    if not db.is_dir():
        print(f"no kernel database at {db}: nothing derived", file=sys.stderr)
        return 1
    table = curves(rows(db))
    with out.open("w", encoding="utf-8", newline="") as f:
        f.write(HEADER)
        w = csv.DictWriter(f, fieldnames=["chip", "collective", "gpus", "bytes", "eta", "kernel", "rows"],
                           lineterminator="\n")
        w.writeheader()
        w.writerows(table)
    print(f"wrote {len(table)} rows to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
