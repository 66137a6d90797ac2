"""Report of `planning.check.CheckAnswer`: predicted vs measured per point and the error summary. Nothing
here computes a figure."""

from __future__ import annotations

from .report import Column, Report, Section


def _ms(v) -> str:
    return f"{v * 1e3:,.1f}"


def _pct(v) -> str:
    return f"{v:+.1%}"


def check_report(a) -> Report:
    """The points table (measured, predicted, error per quantity) and the |error| summary."""
    cols = [Column("model", "model"), Column("instance", "instance"), Column("engine", "engine"),
            Column("concurrency", "C"), Column("len_tokens", "isl", ",d"), Column("output_tokens", "osl", ",d"),
            Column("ttft_measured_s", "TTFT ms", _ms), Column("ttft_predicted_s", "pred ms", _ms),
            Column("ttft_error", "TTFT err", _pct),
            Column("tpot_measured_s", "TPOT ms", _ms), Column("tpot_predicted_s", "pred ms", _ms),
            Column("tpot_error", "TPOT err", _pct)]
    if any("busy_error" in r for r in a.rows):
        cols += [Column("busy_measured_s", "busy s", ".3f"), Column("busy_predicted_s", "pred s", ".3f"),
                 Column("busy_error", "busy err", _pct)]
    summary_cols = [Column("quantity", "quantity"), Column("points", "points"),
                    Column("median_abs_error", "median |err|", ".1%"), Column("worst_abs_error", "worst |err|", ".1%"),
                    Column("within_25pct", "within 25%", ".0%")]
    sections = [Section("points", f"Predicted vs measured on {a.data_name}", a.rows, cols),
                Section("summary", "|error| per quantity", a.summary, summary_cols)]
    return Report(sections, list(a.notes), meta={"measurements": a.data_name})
