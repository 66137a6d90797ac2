"""How much of the joint fit's leave-one-model-out (LOMO) figures is the optimizer's starting point rather than the
data (docs/methods.md section 2, "LOMO and the optimizer's starting point"). Measurement only: the shipped
`calibrate` code (``_params``, ``_Problem``, ``_solve``), re-run from several deterministic starts.

Starts: ``centre`` (the priors' centres, what ``fit_joint`` starts the full fit from), ``optimum`` (the shipped full
fit's optimum, what ``fit_joint`` starts each LOMO fold from; for the full fit it is the ``centre`` run) and
``--perturbations`` seeded perturbations ``pN`` of the prior centre, each entry drawn uniformly within +-1 prior
width in log (numpy ``default_rng(--seed)``, clipped inside the bounds by ``_solve``). For each start: the full
fit's final objective (least_squares ``cost``, soft_l1), its in-sample NVIDIA TTFT median per chip and Table 3
(``paper-sglang`` TTFT in-sample); every LOMO fold re-run from the same start, each fold's ``cost`` and the LOMO
TTFT/TPOT medians per chip (NVIDIA's distinct rows, as ``calibration_headline.py``); then ``best``: each fold keeps
its lowest-cost start, and ``best without optimum`` the same among the starts that have not seen the held-out
model. Also per fold: the spread of the held-out TTFT predictions across starts. Prints JSON.

Run from the repository root after ``pip install -e .``: ``OPENBLAS_NUM_THREADS=1 python3
benchmarks/calibration_starts.py`` (about 1.5-2 minutes, 90-105 s measured on the 2-core box it was written on,
with the default 6 perturbations: 7 full fits and 8 starts x 9 folds, ~1 s per solve; ``--seed 1`` draws another
set of perturbations). ``--set MODULE.NAME=JSON`` updates a dict constant of a ``prfaas_plan.performance`` module
first, as in ``calibration_headline.py`` (e.g. ``--set calibrate.SMOOTHING='{"saturation": 0.1, "continuation":
[8]}'``, docs/methods.md, "A smooth objective"); the full fits then also report each solver stage's cost,
optimality and status, and the folds how many ended on each status.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from calibration_inputs import apply_settings, bundled_points  # benchmarks/, beside this script


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perturbations", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=JSON")
    args = ap.parse_args()
    apply_settings(args.set)
    from prfaas_plan.performance import calibrate as cal
    from prfaas_plan.profiles import get_stack

    t0 = time.perf_counter()
    points, _ = bundled_points()
    # as fit_joint sets the problem up
    points = [cal._engine_level(m) for m in points]
    chips = sorted({m.chip for m in points})
    stacks = sorted({get_stack(m.stack).name for m in points})
    params = cal._params(chips, stacks, sorted({cal.harness_of(m) for m in points} - {""}))
    problem = cal._Problem(points, params)
    n = len(points)
    rng = np.random.default_rng(args.seed)
    perturbed = {f"p{k + 1}": params.centre + params.width * rng.uniform(-1.0, 1.0, len(params.centre))
                 for k in range(args.perturbations)}
    measured = {q: np.array([getattr(m, f"{q}_s") or np.nan for m in points], dtype=float) for q in ("ttft", "tpot")}
    nvidia = {c: np.array([m.source.startswith("NVIDIA") and m.chip == c for m in points]) for c in ("b200", "h200")}
    table3 = np.array([m.stack == "paper-sglang" for m in points])
    models = np.array([m.model for m in points])
    folds = sorted(set(models))

    def median(pred, q, select):
        rows = select & np.isfinite(measured[q])
        return round(100 * float(np.median(np.abs(pred[q][rows] / measured[q][rows] - 1.0))), 1)

    def solve(keep, x0):
        res, _ = cal._solve(problem, params, keep, x0, full=True)
        return res

    # full fit from each start ("optimum" is the centre run for the full fit)
    full = {}
    for name, x0 in {"centre": params.centre.copy(), **perturbed}.items():
        res = solve(np.ones(n, bool), x0)
        pred = problem.predict(res.x)
        full[name] = {"x": res.x, "cost": float(res.cost), "status": int(res.status), "nfev": int(res.nfev),
                      "optimality": float(f"{res.optimality:.3g}"),
                      "stages (sharpness, cost, optimality, status, nfev)": [
                          [g["sharpness"], round(g["cost"], 4), float(f"{g['optimality']:.3g}"), g["status"], g["nfev"]]
                          for g in getattr(res, "stages", [])],
                      "in ttft b200/h200 %": [median(pred, "ttft", nvidia[c]) for c in ("b200", "h200")],
                      "table3 %": median(pred, "ttft", table3)}
    shipped = full["centre"]["x"]
    eff = {k: params.effective(v["x"]) for k, v in full.items()}
    for name, v in full.items():
        d = eff[name] - eff["centre"]
        top = np.argsort(-np.abs(d))[:5]
        v["cost - shipped"] = round(v["cost"] - full["centre"]["cost"], 4)
        v["max |log ratio| of constants in effect vs shipped"] = round(float(np.abs(d).max()), 4)
        v["largest moves (value shipped -> this)"] = {
            f"{params.keys[j][0]} {params.keys[j][1]}": [float(f"{np.exp(eff['centre'][j]):.4g}"),
                                                         float(f"{np.exp(eff[name][j]):.4g}")]
            for j in top if abs(d[j]) > 1e-3}

    # every LOMO fold from each start
    starts = {"optimum": shipped, "centre": params.centre.copy(), **perturbed}
    lomo = {s: {q: np.full(n, np.nan) for q in ("ttft", "tpot")} for s in starts}
    fold_cost = {f: {} for f in folds}
    fold_opt = {f: {} for f in folds}
    fold_status = {}
    for f in folds:
        out = models == f
        for s, x0 in starts.items():
            res = solve(~out, x0)
            fold_cost[f][s] = float(res.cost)
            fold_opt[f][s] = float(f"{res.optimality:.3g}")
            fold_status[int(res.status)] = fold_status.get(int(res.status), 0) + 1
            pred = problem.predict(res.x)
            for q in lomo[s]:
                lomo[s][q][out] = pred[q][out]
    best_start = {f: min(c, key=c.get) for f, c in fold_cost.items()}
    # "best without optimum": the same among the starts that have not seen the held-out model (the full fit's
    # optimum has: docs/methods.md, "LOMO and the optimizer's starting point"), the multi-start a fold could use
    clean_start = {f: min((s for s in c if s != "optimum"), key=c.get) for f, c in fold_cost.items()}
    for label, chosen in (("best", best_start), ("best without optimum", clean_start)):
        lomo[label] = {q: np.full(n, np.nan) for q in ("ttft", "tpot")}
        for f, s in chosen.items():
            out = models == f
            for q in ("ttft", "tpot"):
                lomo[label][q][out] = lomo[s][q][out]

    rows = []
    for s in list(starts) + ["best", "best without optimum"]:
        fit = full.get(s if s != "optimum" else "centre")
        chosen = {"best": best_start, "best without optimum": clean_start}.get(s, {f: s for f in folds})
        row = {"start": s,
               "full cost": None if fit is None else round(fit["cost"], 4),
               "sum of fold costs": round(sum(fold_cost[f][chosen[f]] for f in folds), 4),
               "lomo ttft b200/h200 %": [median(lomo[s], "ttft", nvidia[c]) for c in ("b200", "h200")],
               "lomo tpot b200/h200 %": [median(lomo[s], "tpot", nvidia[c]) for c in ("b200", "h200")],
               "table3 % (full fit)": None if fit is None else fit["table3 %"],
               "in ttft b200/h200 % (full fit)": None if fit is None else fit["in ttft b200/h200 %"]}
        rows.append(row)

    per_fold = {}
    for f in folds:
        out = models == f
        preds = np.array([lomo[s]["ttft"][out] for s in starts])          # starts x held-out rows
        ok = np.isfinite(preds).all(axis=0)
        spread = preds[:, ok].max(axis=0) / preds[:, ok].min(axis=0) - 1.0 if ok.any() else np.array([np.nan])
        costs = fold_cost[f]
        lo = min(costs.values())
        per_fold[f] = {"rows": int(out.sum()), "nvidia rows": int((out & (nvidia["b200"] | nvidia["h200"])).sum()),
                       "cost by start (minus the lowest)": {s: round(c - lo, 4) for s, c in costs.items()},
                       "lowest-cost start": best_start[f],
                       "first-order optimality by start (least_squares, inf-norm of the gradient)": fold_opt[f],
                       "signed lomo ttft median % by start": {s: round(100 * float(np.nanmedian(
                           lomo[s]["ttft"][out] / measured["ttft"][out] - 1.0)), 1) for s in starts},
                       "ttft prediction spread across starts (max/min - 1) median / max %":
                           [round(100 * float(np.median(spread)), 1), round(100 * float(spread.max()), 1)]}
    opts = [o for d in fold_opt.values() for o in d.values()]
    result = {"points": n, "folds": len(folds), "seed": args.seed, "set": args.set, "table": rows,
              "fold fits by least_squares status": fold_status,
              "fold optimality median / max": [float(f"{np.median(opts):.3g}"), float(f"{max(opts):.3g}")],
              "full fit by start": {
        k: {kk: vv for kk, vv in v.items() if kk != "x"} for k, v in full.items()}, "folds by model": per_fold,
        "run_s": round(time.perf_counter() - t0, 1)}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
