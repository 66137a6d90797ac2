"""The per-version layer of the stack terms: each engine version's deviation from its engine's pooled value.

Hierarchy (docs/methods.md, "Calibration", per-version layer): prior (`calibrate.STACK_PRIORS`) <- engine
(the joint fit's stack term, pooled over every version of the engine) <- version. The joint fit
(`calibrate.fit_joint`) is unchanged by this layer, so a plan that names no version gets exactly the pooled
profile. On top of it, for each ``(stack, engine version)`` of the rows, the version's log-deviations
``delta`` of the stack terms its rows are sensitive to minimise

    sum over configurations g of (r_g + J_g delta)' S_g^-1 (r_g + J_g delta)  +  |delta|^2 / VERSION_WIDTH^2

where ``r_g`` are the log errors of the version's rows of configuration ``g`` (model, instance,
parallelism) under the pooled fit, ``J_g`` their sensitivity to each term (finite differences of the joint
model's predictions) and ``S_g`` their variances: rows of one configuration
share that configuration's misfit, so however many rows it has, one configuration (and quantity) is worth at
most one observation of scatter `CONFIGURATION_SIGMA` (`_normal`: each of its ``m`` rows has variance
``SIGMA_MEASUREMENT^2 + m CONFIGURATION_SIGMA^2``). A term seen in one configuration is therefore shrunk toward the
engine's value, not made a constant. Solved by a few Gauss-Newton steps on the joint model's predictions.
``wave_fraction`` describes the benchmark harness, not the engine version, and stays pooled.

Errors with the layer: in-sample; leave-one-out (the version's deviation refitted without the row, linearised
at the fit, applied to the pooled leave-one-out prediction); leave-one-model-out (refitted without the
model's rows of that version, applied to the pooled leave-one-model-out prediction: a version seen only on
the left-out model gets no deviation).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..profiles.stack import FITTED_NUMBERS, VersionEntry, split_stack
from ..units import plural

VERSION_WIDTH = 0.3          # log-width of a version's deviation (a factor 1.35), assumed: issue 20 item 4 finds
                             # SGLang 0.5.6 and vLLM 0.12 runs 21-51% slower than the 0.5.9 / 0.15-0.16 profiles
CONFIGURATION_SIGMA = 0.3    # log scatter of one configuration's misfit, shared by its rows; assumed from the
                             # leave-one-model-out TTFT medians of the pooled fit (36-45%, docs/methods.md)
VERSION_TERMS = tuple(t for t in FITTED_NUMBERS if t != "wave_fraction")   # the harness's share stays pooled
NO_VERSION = ("", "unrecorded")
MIN_SENSITIVITY = 1e-3       # d log(time) / d log(term) below this on every row: the rows do not identify it
STEPS = 4                    # Gauss-Newton steps (the model is close to log-linear in the terms)
EPS = 1e-4


@dataclass(frozen=True)
class VersionFit:
    """One engine version's fitted deviations: ``terms`` {name: (value, engine value, log spread, shift in
    prior widths, configurations identifying it)} and its ``rows`` (points, data rows)."""

    stack: str
    version: str
    terms: dict = field(hash=False)
    points: int = 0

    @property
    def label(self) -> str:
        return f"{self.stack}@{self.version}"


@dataclass(frozen=True)
class VersionLayer:
    """Every version's fit and each point's predictions with the layer (``{quantity: seconds}``)."""

    fits: tuple[VersionFit, ...]
    predicted: tuple = ()
    loo: tuple = ()
    lomo: tuple = ()

    def entries(self, stack: str, sources: dict[str, str]) -> dict[str, VersionEntry]:
        """``by_version`` entries of ``stack`` (``sources``: {version: text appended to each term's source})."""
        out = {}
        for f in self.fits:
            if f.stack != stack or not f.terms:
                continue
            values = {t: float(f"{v[0]:.4g}") for t, v in f.terms.items()}
            src = {t: (f"fitted by prfaas-plan calibrate as a deviation from the engine's {v[1]:.4g} (prior "
                       f"log-width {VERSION_WIDTH:g}), moved {v[3]:+.1f} widths by {v[4]} model x configuration "
                       f"{plural(v[4], 'group')}, {f.points} {plural(f.points, 'point')}"
                       f"{sources.get(f.version, '')}")
                   for t, v in f.terms.items()}
            out[f.version] = VersionEntry(values, src, {t: float(f"{v[2]:.3g}") for t, v in f.terms.items()})
        return out


def _versions(points) -> np.ndarray:
    """Each point's ``stack@version`` label ("" for no recorded version)."""
    return np.array([f"{split_stack(m.stack)[0]}@{m.stack_version}" if m.stack_version not in NO_VERSION else ""
                     for m in points])


def fit_version_layer(problem, params, x: np.ndarray, points, loo_pred: dict, lomo_pred: dict,
                      sigma: float, quantities: tuple[str, ...]) -> VersionLayer:
    """The per-version layer on the joint fit ``x`` of ``problem`` (`calibrate._Problem`); ``loo_pred`` and
    ``lomo_pred`` are the pooled fit's held-out predictions ({quantity: array}); ``sigma`` the measurement
    scatter (log)."""
    labels = _versions(points)
    configs = np.array([f"{m.model}|{m.instance}|{m.moe}" for m in points])
    models = np.array([m.model for m in points])
    n = len(points)
    base = problem.predict(x)
    out = {k: {q: np.array(v[q], dtype=float) for q in quantities} for k, v in
           (("predicted", base), ("loo", loo_pred), ("lomo", lomo_pred))}
    fits = []
    for label in sorted(set(labels) - {""}):
        stack, version = label.split("@", 1)
        own = labels == label
        cols = [params.index(stack, t) for t in VERSION_TERMS]
        delta = np.zeros(len(cols))
        for _ in range(STEPS):
            r, J, pt, qrow = _linearise(problem, x, cols, delta, own, quantities)
            keep = np.abs(J).max(axis=0) > MIN_SENSITIVITY if len(r) else np.zeros(len(cols), bool)
            if not keep.any():
                break
            H, b = _normal(r, J[:, keep], _groups(configs, pt, qrow), sigma)
            step = np.zeros(len(cols))
            step[keep] = -np.linalg.solve(H + np.eye(keep.sum()) / VERSION_WIDTH**2,
                                          b + delta[keep] / VERSION_WIDTH**2)
            delta = delta + step
        if not len(r) or not keep.any():
            fits.append(VersionFit(stack, version, {}, int(own.sum())))
            continue
        # a term the final pass does not hold (pushed onto an engine bound, where no row moves it) is not written,
        # so the layer's predictions must not move it either: they are what the written profile predicts
        delta = np.where(keep, delta, 0.0)
        r, J, pt, qrow = _linearise(problem, x, cols, delta, own, quantities)
        Jk = J[:, keep]
        H, _ = _normal(r, Jk, _groups(configs, pt, qrow), sigma)
        cov = np.linalg.inv(H + np.eye(keep.sum()) / VERSION_WIDTH**2)
        shifted = x.copy()
        shifted[cols] += delta
        effective, moved = np.exp(params.effective(x)), np.exp(params.effective(shifted))
        terms = {}
        for k, j in enumerate(np.flatnonzero(keep)):
            engine = float(effective[cols[j]])
            seen = len(set(configs[pt][np.abs(Jk[:, k]) > MIN_SENSITIVITY]))
            # the value in effect: held inside the engine's bounds, as the predictions below are
            terms[VERSION_TERMS[j]] = (float(moved[cols[j]]), engine, float(np.sqrt(cov[k, k])),
                                       float(delta[j] / VERSION_WIDTH), seen)
        fits.append(VersionFit(stack, version, terms, int(own.sum())))
        # predictions with the layer: in-sample exactly; held out by the linearised refit without the row/model
        pred = problem.predict(shifted)
        for q in quantities:
            out["predicted"][q][own] = pred[q][own]
        for kind, groups in (("loo", np.arange(n)), ("lomo", models)):
            for g in sorted(set(groups[own]), key=str):
                drop = groups[pt] == g
                d = _refit(r[~drop], Jk[~drop], _groups(configs, pt, qrow)[~drop], sigma, delta[keep])
                for row in np.flatnonzero(drop):
                    q = quantities[qrow[row]]
                    out[kind][q][pt[row]] *= float(np.exp(Jk[row] @ d))
    as_points = lambda k: tuple({q: float(out[k][q][i]) for q in quantities if problem.mask[q][i]}  # noqa: E731
                                for i in range(n))
    return VersionLayer(tuple(fits), as_points("predicted"), as_points("loo"), as_points("lomo"))


def _groups(configs, pt, qrow):
    """The misfit group of each data row: its configuration and quantity (a configuration's TTFT and TPOT
    misfits are different errors of the model)."""
    return np.char.add(configs[pt], qrow.astype(str))


def _linearise(problem, x, cols, delta, own, quantities):
    """(log errors r, sensitivities J (rows x terms), point of each row, index of its quantity) of the
    version's measured rows at deviation ``delta``."""
    shifted = x.copy()
    shifted[cols] += delta
    pred = problem.predict(shifted)
    rows = [np.flatnonzero(problem.mask[q] & own) for q in quantities]
    r = np.concatenate([np.log(pred[q][i] / problem.measured[q][i]) for q, i in zip(quantities, rows)])
    J = np.zeros((len(r), len(cols)))
    for k, c in enumerate(cols):
        moved = shifted.copy()
        moved[c] += EPS
        p = problem.predict(moved)
        J[:, k] = np.concatenate([np.log(p[q][i] / pred[q][i]) for q, i in zip(quantities, rows)]) / EPS
    return r, J, np.concatenate(rows), np.concatenate([np.full(len(i), k) for k, i in enumerate(rows)])


def _normal(r, J, groups, sigma):
    """Gauss-Newton normal matrix and gradient of the least squares in which a group's ``m`` rows each have
    variance ``sigma^2 + m CONFIGURATION_SIGMA^2``: however many rows a configuration has, together they weigh
    at most as one observation of scatter `CONFIGURATION_SIGMA` (a composite likelihood: the rows share the
    configuration's misfit, and counting them as independent made one configuration's terms constants)."""
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    w = 1.0 / (sigma**2 + counts[inverse] * CONFIGURATION_SIGMA**2)
    return (J * w[:, None]).T @ J, (J * w[:, None]).T @ r


def _refit(r, J, groups, sigma, delta):
    """The deviation fitted without some rows, from the full fit's ``delta`` and the remaining rows' log
    errors ``r`` at it (one Gauss-Newton step: exact for a log-linear model)."""
    k = len(delta)
    if not len(r):
        return np.zeros(k)
    H, b = _normal(r, J, groups, sigma)
    step = -np.linalg.solve(H + np.eye(k) / VERSION_WIDTH**2, b + delta / VERSION_WIDTH**2)
    return delta + step


def with_entries(stacks: dict, layer: VersionLayer, notes: dict[str, dict[str, str]]) -> dict:
    """The fitted stack profiles with their ``by_version`` entries replaced by ``layer``'s (``notes``:
    {stack: {version: error note}})."""
    return {name: dataclasses.replace(st, by_version=layer.entries(name, notes.get(name, {})))
            for name, st in stacks.items()}


def layer_summary(points, layer: VersionLayer, quantities: tuple[str, ...]) -> list[dict]:
    """Median |error| (fractions) per ``stack@version`` and quantity with the version layer: ``ver_in_median``,
    ``ver_loo_median``, ``ver_lomo_median`` (the pooled fit's are `calibrate.JointFit.summary`)."""
    labels = _versions(points)
    out = []
    for label in sorted(set(labels) - {""}):
        idx = np.flatnonzero(labels == label)
        for q in quantities:
            row = {"version": label, "quantity": q}
            for kind, preds in (("in", layer.predicted), ("loo", layer.loo), ("lomo", layer.lomo)):
                errs = [abs(preds[i][q] / getattr(points[i], f"{q}_s") - 1.0) for i in idx
                        if q in preds[i] and np.isfinite(preds[i][q])]
                if errs:
                    row[f"ver_{kind}_median"] = float(np.median(errs))
            if len(row) > 2:
                out.append(row)
    return out


def error_notes(points, layer: VersionLayer, quantities: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """{stack: {version: "; TTFT median |err| 9% (LOO 12%, leave-one-model-out 30%)..."}} with the layer."""
    notes: dict[str, dict[str, str]] = {}
    for row in layer_summary(points, layer, quantities):
        stack, version = row["version"].split("@", 1)
        parts = [f"{k} {row[f'ver_{c}_median']:.0%}" for c, k in (("loo", "LOO"), ("lomo", "leave-one-model-out"))
                 if f"ver_{c}_median" in row]
        text = f"{row['quantity'].upper()} median |err| {row['ver_in_median']:.0%}" + (
            f" ({', '.join(parts)})" if parts else "")
        prev = notes.setdefault(stack, {}).get(version, "")
        notes[stack][version] = (prev + "; " if prev else "; with this entry: ") + text
    return notes
