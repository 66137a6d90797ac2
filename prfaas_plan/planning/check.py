"""``prfaas-plan check FILE...``: the planner's predictions beside a user's own measured points, so a user
sees whether to trust a plan on their cluster before trusting it.

Each measured run (any format `performance.bench_import` reads) is predicted with the profiles in use (the
bundled ones, or ``--profiles`` folders such as ``calibrate -o`` writes) by the serving model the planner
uses (`performance.serving.serving_at_concurrency`: mean TTFT and TPOT of a closed-loop benchmark;
`RooflinePrefill.busy_s` for saturated prefill). Nothing is fitted. After ``calibrate --measurements FILE -o
DIR``, ``check FILE --profiles DIR`` reproduces calibrate's in-sample errors (up to the 4 significant
digits the written profiles keep): the two share the model, not the code (calibrate vectorizes it).
"""

from __future__ import annotations

from dataclasses import dataclass

QUANTITIES = ("ttft", "tpot", "busy")


@dataclass(frozen=True)
class CheckAnswer:
    """Per point: tags, measured and predicted seconds and relative error per quantity (``rows``); the
    median and worst |error| per quantity (``summary``); the files read and notes."""

    data_name: str
    rows: list[dict]
    summary: list[dict]
    notes: list[str]


def bench_tags(chip=None, stack=None, tp=None, model=None, concurrency=None, moe=None, weight_dtype=None):
    """The command-line options about runs a benchmark file does not describe, checked, as
    `performance.bench_import.Tags`."""
    from ..performance.bench_import import check_tags

    return check_tags(chip, stack, tp, model, concurrency, moe, weight_dtype)


def predict_point(m) -> dict[str, float]:
    """Predicted seconds of the quantities ``m`` (a `Measurement`) measured, with the current profiles."""
    from ..performance.roofline import RooflinePrefill
    from ..performance.serving import serving_at_concurrency
    from ..performance.base import parse_instance
    from ..performance.harness import recorded_client_s

    out = {}
    model = m.model_profile()
    if m.ttft_s is not None or m.tpot_s is not None:
        s = serving_at_concurrency(model, m.instance, m.len_tokens, max(m.output_tokens, 2), m.concurrency, m.moe,
                                   stack=m.run_stack, client_s=recorded_client_s(m))
        if m.ttft_s is not None:
            out["ttft"] = s.ttft_s
        if m.tpot_s is not None:
            out["tpot"] = s.tpot_s
    if m.busy_s is not None:
        roof = RooflinePrefill.build(model, parse_instance(m.instance), m.moe, stack=m.run_stack)
        out["busy"] = float(roof.busy_s(float(m.len_tokens)))
    return out


def answer_check(files: list[str], tags=None, defaults: dict | None = None) -> CheckAnswer:
    """Predicted vs measured for every run in ``files``; ``tags`` (`bench_import.Tags`) supply what a file
    does not record, ``defaults`` the blank columns of the project's CSV layout."""
    import numpy as np

    from ..errors import PlanError
    from ..performance.bench_import import Tags, load_any
    from ..performance.measurements import merge_repeats, resolve_path
    from ..profiles import get_stack

    if not files:
        raise PlanError("check: give at least one measurement file")
    paths = [resolve_path(f) for f in files]
    tags = tags or Tags()
    if defaults is None:
        defaults = tags.csv_defaults()
    runs, excluded = load_any(paths, tags, defaults)
    kept, repeats = merge_repeats([r.measurement for r in runs])
    by_measurement = {}
    for r in runs:
        by_measurement.setdefault(r.measurement, r)
    if not kept:
        raise PlanError("check: no measured point left to compare (" + "; ".join(excluded[:3]) + ")")
    rows = []
    for m in kept:
        run = by_measurement[m]
        predicted = predict_point(m)
        row = {"model": m.model, "instance": m.instance, "stack": m.run_stack, "engine": run.engine, "moe": m.moe,
               "precision": m.expert_dtype or m.weight_dtype or "profile", "concurrency": m.concurrency,
               "len_tokens": m.len_tokens, "output_tokens": m.output_tokens, "format": run.format,
               "derived": m.derived, "source": m.source}
        for q in QUANTITIES:
            measured = getattr(m, f"{q}_s")
            if measured is not None:
                row.update({f"{q}_measured_s": measured, f"{q}_predicted_s": predicted[q],
                            f"{q}_error": predicted[q] / measured - 1.0})
        for k, v in run.percentiles.items():
            row[f"{k}_measured_s"] = v
        rows.append(row)
    summary = []
    for q in QUANTITIES:
        errs = [abs(r[f"{q}_error"]) for r in rows if f"{q}_error" in r]
        if errs:
            summary.append({"quantity": q, "points": len(errs), "median_abs_error": float(np.median(errs)),
                            "worst_abs_error": float(max(errs)),
                            "within_25pct": sum(e <= 0.25 for e in errs) / len(errs)})
    stacks = sorted({m.run_stack for m in kept})
    notes = ["predicted with the profiles in use (bundled, or `profiles` folders: calibrate `output` writes them); "
             "nothing is fitted to these points",
             "TTFT and TPOT are means of a closed-loop benchmark at the run's concurrency (docs/methods.md, "
             "\"Serving at a fixed concurrency\"); percentiles are shown, not predicted",
             *[get_stack(s).describe() for s in stacks]]
    for label in sorted({(r["engine"], r["stack"]) for r in rows if "@" in r["engine"]}):
        if label[0] != label[1]:
            notes.append(f"engine {label[0]}: measured with this version, predicted with stack profile {label[1]} "
                         f"({get_stack(label[1]).versions})")
    notes += _harness_notes(kept)
    if repeats:
        notes.append(f"counted once: {repeats} rows repeat an earlier row exactly")
    if any(r["derived"] for r in rows):
        notes.append("some values derived (column 'derived' in JSON/CSV): e.g. an open-loop run's concurrency "
                     "from Little's law")
    notes += [f"excluded: {e}" for e in excluded]
    return CheckAnswer(", ".join(p.name for p in paths), rows, summary, notes)


def _harness_notes(points) -> list[str]:
    """One note per benchmark-harness campaign whose client time the predicted TTFTs include
    (`performance.harness`), saying whether it was fitted on that system or borrowed from the others."""
    from ..performance.harness import campaign
    from ..profiles import get_stack

    notes = []
    campaigns = {(m.run_stack, campaign(m.source, m.chip)) for m in points}
    for stack, name in sorted(c for c in campaigns if c[1]):
        entry = get_stack(stack).harness_entry(name)
        if entry is None:
            notes.append(f"harness {name} under {stack}: no fitted client time, none added to the predicted TTFT")
        else:
            notes.append(f"harness {name} under {stack}: {entry.latency_s * 1e3:.1f} ms + "
                         f"{entry.stream_s * 1e3:.2f} ms per other in-flight request added to the predicted TTFT "
                         f"(the client's time, not the server's; {entry.source})")
    return notes
