"""Collective efficiency by message size: how fast a scale-up collective moves its bytes, per fabric.

``data/reference/collective_curves.csv`` holds, per benchmarked chip (H100, H200, B200), collective and GPU count,
the achieved bus bandwidth over the chip's nominal scale-up bandwidth, ``eta(S)``, as a function of the message
``S`` (bytes per rank), derived from NVIDIA's NCCL and engine custom all-reduce micro-benchmarks by
``benchmarks/derive_collective_curves.py`` (its docstring says which kernel at which size and why; source and
Apache-2.0 licence in the file's header and beside it; docs/methods.md, "Issue 20 round 6").

The roofline charges a collective ``link bytes / (scale-up bandwidth x comm x r(S))`` seconds, where ``comm`` is
the chip's calibrated level (`prfaas_plan.profiles.Calibration`: the efficiency of the large 8-GPU all-reduce) and
``r(S) = eta(S) / eta_ref`` is the curve relative to that level, ``eta_ref`` = the 8-GPU all-reduce at the largest
measured message. ``r`` carries the measured per-call latency (small messages are latency-bound: ``r`` falls in
proportion to ``S``), so no separate per-call latency is added. Collectives: ``comm_tp`` runs the all-reduce curve
(under DP attention its all-gather + reduce-scatter move the bytes of one all-reduce; the all-reduce curve is
used), ``comm_ep`` the all-to-all curve. GPU count: the largest tabulated count not above the group (2, 4, 8).

One curve per scale-up fabric, not per chip (as `calibrate` ties one collective level per fabric): a chip takes the
median ``log r`` of the benchmarked chips on its fabric (`FABRIC`: H100, H200, H20 and H20-3e are HGX boards of 18
NVLink 4 links through third-generation NVSwitch, 450 GB/s per direction; B200 has NVLink 5's). A chip `FABRIC`
does not name (H800 with its 8 links, MI300X, a user's chip, a chip with edited peaks) takes the pointwise best of
the benchmarked fabrics' curves (assumed: optimistic, so that a chip without micro-benchmarks is never predicted
slower than a benchmarked one of equal bandwidth and level; `curve_note` says so) and the median level of the
benchmarked chips; its calibration, where serving data fit it, sets its level.

``r`` is interpolated linearly in ``log r`` against ``log2 S`` and held flat above the largest message; below the
smallest it falls in proportion to ``S`` (time constant: the latency floor). The derived ``eta`` never rises faster
than ``S`` from one bin to the next, so collective time is non-decreasing in ``S``; ``r`` is capped at 1.
"""

from __future__ import annotations

import csv
from functools import lru_cache

import numpy as np

from .._data import REFERENCE_DIR

CURVE_FILE = "collective_curves.csv"
COLLECTIVE = {"comm_tp": "all_reduce", "comm_ep": "alltoall"}   # operator class -> collective of its curve
REFERENCE = ("all_reduce", 8)   # the level's collective and GPU count (the largest message of it is eta_ref)
NVLINK4 = ("h100", "h200")   # benchmarked chips of one fabric
FABRIC = {"h100": NVLINK4, "h200": NVLINK4, "h20": NVLINK4, "h20-3e": NVLINK4, "b200": ("b200",)}


@lru_cache(maxsize=1)
def _measured() -> dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray]]:
    """``{(chip, collective, gpus): (log2 S, log eta)}`` read off `CURVE_FILE`."""
    lines = [l for l in (REFERENCE_DIR / CURVE_FILE).read_text(encoding="utf-8").splitlines()
             if l.strip() and not l.startswith("#")]
    rows: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    for r in csv.DictReader(lines):
        rows.setdefault((r["chip"], r["collective"], int(r["gpus"])), []).append((float(r["bytes"]), float(r["eta"])))
    return {k: (np.log2([p[0] for p in sorted(v)]), np.log([p[1] for p in sorted(v)])) for k, v in rows.items()}


def _reference(chip: str) -> float:
    """``eta_ref`` of a benchmarked chip: its 8-GPU all-reduce at the largest measured message."""
    return float(np.exp(_measured()[(chip, *REFERENCE)][1][-1]))


def _log_r(chip: str, key: tuple[str, int], grid: np.ndarray) -> np.ndarray:
    return _shift(_measured()[(chip, *key)], grid) - np.log(_reference(chip))


def _benchmarked() -> tuple[str, ...]:
    return tuple(sorted({k[0] for k in _measured()}))


@lru_cache(maxsize=None)
def _fabric(chips: tuple[str, ...]) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """The curves of the fabric of benchmarked ``chips`` (empty: the pointwise best of the benchmarked fabrics),
    ``{(collective, gpus): (log2 S, log r)}`` on the union of the chips' message sizes."""
    out = {}
    for key in sorted({k[1:] for k in _measured()}):
        grid = np.unique(np.concatenate([_measured()[(c, *key)][0] for c in _benchmarked()
                                         if (c, *key) in _measured()]))
        if chips:
            curves = [_log_r(c, key, grid) for c in chips if (c, *key) in _measured()]
            combined = np.median(curves, axis=0) if curves else None
        else:   # the best benchmarked fabric at each size (each fabric's curve: the median over its chips)
            fabrics = sorted({f for f in FABRIC.values() if all(c in _benchmarked() for c in f)})
            combined = np.max([_shift(_fabric(f)[key], grid) for f in fabrics if key in _fabric(f)], axis=0)
        if combined is not None:
            out[key] = (grid, np.minimum(combined, 0.0))
    return out


def _shift(curve: tuple[np.ndarray, np.ndarray], u) -> np.ndarray:
    """``log r`` of ``curve`` at ``u = log2 S``: interpolated, flat above, falling with ``S`` below (latency floor)."""
    lx, ly = curve
    return np.interp(np.maximum(u, lx[0]), lx, ly) + (np.minimum(u, lx[0]) - lx[0]) * np.log(2.0)


def _chips(chip: str) -> tuple[str, ...]:
    fabric = FABRIC.get(chip, ())
    return fabric if all(c in _benchmarked() for c in fabric) else ()


def _gpus(collective: str, group: int) -> int:
    counts = sorted(n for c, n in {k[1:] for k in _measured()} if c == collective)
    below = [n for n in counts if n <= group]
    return below[-1] if below else counts[0]


def relative_efficiency(chip: str, op_name: str, group: int, message_bytes):
    """``r(S)`` of collective operator class ``op_name`` (`COLLECTIVE`) over ``group`` chips on ``chip`` (a profile
    name, selecting its fabric), ``message_bytes`` the message per rank of one collective (bytes, array): the
    fraction of the chip's calibrated level ``comm`` the collective reaches at that size. 1.0 (a float) for an
    operator without a curve."""
    collective = COLLECTIVE.get(op_name)
    if collective is None or message_bytes is None:
        return 1.0
    curve = _fabric(_chips(chip))[(collective, _gpus(collective, int(group)))]
    return np.exp(_shift(curve, np.log2(np.maximum(np.asarray(message_bytes, dtype=float), 1.0))))


def reference_efficiency(chip: str) -> float:
    """The level ``comm``'s prior (fraction of the nominal scale-up bandwidth per direction) for ``chip`` (a profile
    name): the median ``eta_ref`` of the benchmarked chips on its fabric, else of every benchmarked chip
    (assumed for a chip on no benchmarked fabric)."""
    return float(np.median([_reference(c) for c in (_chips(chip) or _benchmarked())]))


def curve_note(chip: str) -> str:
    """One phrase: where ``chip``'s collective curve comes from."""
    chips = _chips(chip)
    if chips:
        return f"collectives by message size from {', '.join(c.upper() for c in chips)} micro-benchmarks ({CURVE_FILE})"
    return (f"no collective micro-benchmarks for its fabric: the best benchmarked fabric's curve by message size "
            f"(assumed, optimistic; {CURVE_FILE})")
