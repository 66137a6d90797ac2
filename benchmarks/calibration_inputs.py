"""What the calibration benchmarks (`calibration_headline.py`, `calibration_starts.py`) share: the ``--set`` switches
applied to `prfaas_plan.performance` modules, and the bundled measured points as ``prfaas-plan calibrate`` counts
them (exact repeats merged)."""

from __future__ import annotations

import importlib
import json


def apply_settings(items: list[str]) -> None:
    """Update a dict constant of a `prfaas_plan.performance` module per ``MODULE.NAME=JSON`` item (a round's
    switches, e.g. ``calibrate.SMOOTHING='{"saturation": 0.1}'``), before any fit reads it."""
    for item in items:
        target, value = item.split("=", 1)
        module, name = target.rsplit(".", 1)
        getattr(importlib.import_module(f"prfaas_plan.performance.{module}"), name).update(json.loads(value))


def bundled_points() -> tuple[list, list[str]]:
    """(every bundled set's measured points with exact repeats merged, the rows the loaders excluded)."""
    from prfaas_plan.performance.measurements import BUNDLED_FILES, load_measurements, merge_repeats

    points, excluded = [], []
    for name in BUNDLED_FILES:
        got, dropped = load_measurements(name)
        points += got
        excluded += dropped
    return merge_repeats(points)[0], excluded
