"""The paper's given performance inputs for its case-study model: one more performance source.

- ``measured_h200``: ``prfaas-1t``'s measured 8xH200 prefill profile (the paper's Table 5),
  interpolated through its points.
- ``backsolved_h20``: the H20 prefill table and decode capacity in
  ``data/reference/paper_backsolved_h20_inputs.csv``, back-solved from the paper's published stage
  throughputs. They are *not* measurements and are never used to fit anything; they let
  ``reproduce --inputs paper`` check our arithmetic (``docs/methods.md``, the case study).
"""

from __future__ import annotations

import csv
from functools import lru_cache

from .._data import REFERENCE_DIR
from ..profiles import get_model
from .base import DecodeCapacity
from .tabulated import TabulatedPrefill

BACKSOLVED = REFERENCE_DIR / "paper_backsolved_h20_inputs.csv"
MODEL = "prfaas-1t"
TPOT_S = 0.025          # the decode SLO the back-solved capacity holds at: 40 tokens/s


@lru_cache(maxsize=1)
def backsolved_h20() -> tuple[TabulatedPrefill, DecodeCapacity]:
    """The back-solved H20 inputs of the paper mode: prefill table (lengths K = 1000) and decode
    capacity (tokens/s per instance at 40 tok/s)."""
    rows = [r for r in csv.reader(l for l in BACKSOLVED.read_text().splitlines() if not l.startswith("#"))]
    header, body = rows[0], rows[1:]
    q, ln, val = header.index("quantity"), header.index("seq_len_tokens"), header.index("value")
    pts = [(float(r[ln]), float(r[val])) for r in body if r[q] == "prefill_latency"]
    decode_tps = next(float(r[val]) for r in body if r[q].startswith("decode_capacity"))
    source = "paper inputs: back-solved H20 table (paper_backsolved_h20_inputs.csv), quadratic fit"
    prefill = TabulatedPrefill(tuple(p[0] for p in pts), tuple(p[1] for p in pts), source)
    batch = decode_tps * TPOT_S
    decode = DecodeCapacity(batch, TPOT_S, "given", "paper inputs: back-solved decode capacity "
                            f"{decode_tps:.0f} tokens/s per instance (batch {batch:.0f} at {TPOT_S * 1e3:.0f} ms)")
    return prefill, decode


def measured_h200() -> TabulatedPrefill:
    """prfaas-1t's measured 8xH200 prefill profile (paper Table 5), interpolated through its points."""
    from ..performance.factory import tabulated

    return tabulated(get_model(MODEL).measured_prefill[0])
