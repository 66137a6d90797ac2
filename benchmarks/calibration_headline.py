"""The headline figures issue 20's rounds compare (docs/methods.md section 2): the joint fit on every bundled set
(exact repeats merged, as ``prfaas-plan calibrate`` counts them), then median |error| on NVIDIA's distinct rows per
chip (TTFT and TPOT: in-sample / leave-one-out / leave-one-model-out; leave-one-chip-out, each chip predicted as an
uncalibrated one by a fit without it, with its signed median per stack and its server part, the harness's client
time at the full fit's), per stack, Table 3 (``paper-sglang`` TTFT
in-sample), the signed leave-one-model-out TTFT median per held-out model x chip x stack, and the TTFT length slope
(per 1K input tokens, 1K -> 8K prompts of one configuration, concurrency and output length) predicted over measured,
in-sample and held out. Prints JSON.

Run from the repository root after ``pip install -e .``: ``OPENBLAS_NUM_THREADS=1 python3
benchmarks/calibration_headline.py`` (about 18 s with the leave-one-chip-out folds). ``--set MODULE.NAME=JSON``
updates a dict constant of a ``prfaas_plan.performance`` module before the fit (a round's switches, e.g. on round
7's experiment commit ``--set operators.TOKEN_PASSES='{"moe_permute": false}'``).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from calibration_inputs import apply_settings, bundled_points  # benchmarks/, beside this script


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=JSON")
    args = ap.parse_args()
    apply_settings(args.set)
    from prfaas_plan.performance.calibrate import fit_joint

    points, excluded = bundled_points()
    start = time.perf_counter()
    fit = fit_joint(points, excluded, data_name="the bundled sets")
    out = {"fit_s": round(time.perf_counter() - start, 1)}
    kinds = ("predicted", "loo", "lomo")

    def median(select, q):
        return [round(100 * float(np.median(errs)), 1) if (errs := [abs(e) for p in fit.points
                if select(p.measurement) and (e := p.error(q, k)) is not None]) else None for k in kinds]

    nvidia = lambda m: m.source.startswith("NVIDIA")  # noqa: E731
    for chip in ("b200", "h200"):
        for q in ("ttft", "tpot"):
            out[f"nvidia {chip} {q} in/loo/lomo %"] = median(lambda m: nvidia(m) and m.chip == chip, q)
    loco: dict = {}
    for p in fit.points:
        m = p.measurement
        for q in ("ttft", "tpot"):
            if nvidia(m) and (e := p.error(q, "loco")) is not None:
                loco.setdefault(f"{m.chip} {q}", []).append(e)
                loco.setdefault(f"{m.chip} {q} {m.stack} (signed)", []).append(e)
                loco.setdefault(f"{m.chip} {q} server", []).append(p.error(q, "loco_server"))
    out["nvidia leave-one-chip-out median % (|error|, or signed per stack)"] = {
        k: round(100 * float(np.median(v if "signed" in k else np.abs(v))), 1) for k, v in sorted(loco.items())}
    for stack in sorted({p.measurement.stack for p in fit.points}):
        for q in ("ttft", "tpot"):
            values = median(lambda m: m.stack == stack, q)
            if values[0] is not None:
                out[f"stack {stack} {q} in/loo/lomo %"] = values
    signed, configs = {}, {}
    for p in fit.points:
        m = p.measurement
        if nvidia(m) and m.ttft_s is not None:
            signed.setdefault(f"{m.model}|{m.chip}|{m.stack}", []).append(p.error("ttft", "lomo"))
            key = (m.model, m.instance, m.moe, m.stack, m.stack_version, m.concurrency, m.output_tokens)
            configs.setdefault(key, {}).setdefault(int(m.len_tokens), []).append(p)
    out["signed lomo ttft median %"] = {k: round(100 * float(np.median(v)), 1) for k, v in sorted(signed.items())}
    for kind in ("predicted", "lomo"):
        ratios = []
        for by in configs.values():
            if 1024 in by and 8192 in by:
                measured = np.mean([p.measurement.ttft_s for p in by[8192]]) - np.mean([p.measurement.ttft_s
                                                                                       for p in by[1024]])
                predicted = np.mean([getattr(p, kind)["ttft"] for p in by[8192]]) - np.mean(
                    [getattr(p, kind)["ttft"] for p in by[1024]])
                if measured > 0:
                    ratios.append(predicted / measured)
        out[f"length slope predicted/measured ({kind}): median, configurations"] = [
            round(float(np.median(ratios)), 3), len(ratios)]
    out["chips"] = {c: {"gemm": cal.gemm, "memory": cal.memory, "comm": cal.comm} for c, cal in fit.chips.items()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
