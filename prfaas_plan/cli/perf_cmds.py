"""Per-instance performance commands: ``rates``, ``kv-throughput`` and ``calibrate``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import numpy as np
import typer

from .. import arithmetic as A
from ..errors import PlanError
from ..output.report import Column, Report, Section, check_format, write_atomic
from ..profiles import all_models, dtype_bytes, get_hardware, get_model
from ..units import parse_length, parse_lengths, parse_tpot_s
from .app import FormatOption, app
from .envelope import emit

MOE_HELP = "How routed experts are split: tp (every chip holds a slice of every expert) or ep (whole experts)."
SOURCE_HELP = "Prefill source: auto (measured table if the model has one for this instance, else roofline), " \
              "roofline or measured."


def _moe(text: str) -> str:
    if text not in ("tp", "ep"):
        raise PlanError(f"--moe {text!r}: expected tp or ep")
    return text


def _tpot(tpot: Optional[str], slo: Optional[str]) -> float:
    if tpot and slo:
        raise PlanError("--tpot and --slo both given: use one (25ms or 40tok/s)")
    if slo:
        return parse_tpot_s(slo, "--slo")
    return parse_tpot_s(tpot or "25ms", "--tpot")


def _ms(v) -> str:
    return f"{v * 1e3:,.1f}"


def _pct(v) -> str:
    return f"{v:+.1%}"


def _prefill_section(chosen, roof, measured, lengths: list[int]) -> Section:
    from ..performance import source_kind

    l = np.asarray(lengths, dtype=float)
    t, t_roof = chosen.latency_s(l), roof.latency_s(l)
    rows = []
    for i, n in enumerate(lengths):
        row = {"len_tokens": n, "prefill_s": float(t[i]), "tokens_per_s": n / float(t[i]),
               "source": source_kind(chosen), "roofline_s": float(t_roof[i])}
        if measured is not None:
            t_meas = float(measured.latency_s(n))
            row.update(measured_s=t_meas, roofline_gap=float(t_roof[i]) / t_meas - 1)
        rows.append(row)
    cols = [Column("len_tokens", "len", ",d"), Column("prefill_s", "prefill s", ".3f"),
            Column("tokens_per_s", "tokens/s", ",.0f"), Column("source", "source"),
            Column("roofline_s", "roofline s", ".3f")]
    if measured is not None:
        cols += [Column("measured_s", "measured s", ".3f"), Column("roofline_gap", "roofline vs measured", _pct)]
    return Section("prefill", f"Prefill of {roof.model.name} on {roof.instance}", rows, cols)


def _operator_section(roof, lengths: list[int]) -> Section:
    l = np.asarray(lengths, dtype=float)
    total = roof.latency_s(l)
    rows = [{"op": name, "len_tokens": n, "seconds": float(secs[i]), "share": float(secs[i] / total[i]),
             "bound": str(bounds[i])}
            for name, (secs, bounds) in roof.breakdown(l).items() for i, n in enumerate(lengths)]
    cols = [Column("op", "operator class"), Column("len_tokens", "len", ",d"), Column("seconds", "ms", _ms),
            Column("share", "share", ".0%"), Column("bound", "bound")]
    return Section("operators", "Roofline by operator class (what bounds each)", rows, cols)


def _decode_section(cap, mem, inst, context: float, tpot_s: float, l_out: int) -> Section:
    rows = [{"instance": str(inst), "context_tokens": context, "tpot_s": tpot_s, "batch": cap.batch,
             "step_s": cap.step_s, "tokens_per_s": cap.tokens_per_s, "requests_per_s": cap.requests_per_s(l_out),
             "output_tokens": l_out, "binding": cap.binding, "weights_gb_per_chip": mem.weight_bytes / 1e9,
             "request_mb_per_chip": mem.request_bytes / 1e6, "memory_max_batch": mem.max_batch}]
    cols = [Column("context_tokens", "context", ",.0f"), Column("tpot_s", "TPOT ms", _ms),
            Column("batch", "batch", ",.0f"), Column("step_s", "step ms", _ms),
            Column("tokens_per_s", "tokens/s", ",.0f"), Column("requests_per_s", "req/s", ".2f"),
            Column("binding", "binding"), Column("weights_gb_per_chip", "weights GB/chip", ".1f"),
            Column("request_mb_per_chip", "MB/request/chip", ",.1f"), Column("memory_max_batch", "HBM max batch", ",d")]
    return Section("decode", f"Decode capacity at TPOT {tpot_s * 1e3:g} ms", rows, cols)


@app.command("rates")
def rates_cmd(
    model: str = typer.Option(..., "--model", "-m", help="Model name or alias."),
    instance: str = typer.Option("8xH200", "--instance", "-i", help="Instance shape COUNTxCHIP, e.g. 8xH20."),
    length: list[str] = typer.Option(["1k", "8k", "32k", "128k"], "--len", "-l",
                                     help="Prompt length(s) for prefill, e.g. 8k,32k (K = 1024)."),
    tpot: Optional[str] = typer.Option(None, "--tpot", help="Decode per-token latency SLO, e.g. 25ms (default)."),
    slo: Optional[str] = typer.Option(None, "--slo", help="Decode speed SLO instead of --tpot, e.g. 40tok/s."),
    input_len: str = typer.Option("27k", "--input-len", help="Mean input length of decoding requests."),
    output_len: str = typer.Option("1024", "--output-len", help="Output length of decoding requests."),
    source: str = typer.Option("auto", "--source", help=SOURCE_HELP),
    moe: str = typer.Option("tp", "--moe", help=MOE_HELP),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Override the profile's weight "
                                               "dtype, routed experts included (e.g. int4); measured tables "
                                               "then no longer apply."),
    fmt: str = FormatOption,
) -> None:
    """Prefill latency per length, the bound of each operator class, and decode capacity at an SLO."""
    from ..performance import (
        RooflinePrefill,
        decode_capacity,
        decode_memory,
        measured_table,
        parse_instance,
        prefill_model,
        source_kind,
        tabulated,
    )

    check_format(fmt)
    m = get_model(model)
    if weight_dtype:
        dtype_bytes(weight_dtype, "--weight-dtype")
        m = dataclasses.replace(m, weight_dtype=weight_dtype.lower(), expert_dtype=weight_dtype.lower(),
                                measured_prefill=())
    inst = parse_instance(instance)
    lengths = parse_lengths(length, "--len")
    tpot_s = _tpot(tpot, slo)
    l_in, l_out = parse_length(input_len, "--input-len"), parse_length(output_len, "--output-len")
    moe = _moe(moe)
    chosen = prefill_model(m, inst, source, moe)
    roof = RooflinePrefill.build(m, inst, moe)
    table = measured_table(m, inst)
    context = l_in + l_out / 2
    cap = decode_capacity(m, inst, tpot_s, context, moe)
    mem = decode_memory(m, inst, context)
    notes = [f"prefill source: {chosen.source}"]
    if source_kind(chosen) == "measured":
        notes.append(f"roofline: {roof.source}")
    notes += [f"decode: {cap.source}",
              f"decode context = input {l_in:,} + output {l_out:,} / 2 tokens; lengths K = 1024",
              "operator times are the roofline's (max of compute and memory per class, link time for collectives); "
              "assumptions: bf16 activations and attention cores, GEMMs at the peak rate for their weights' dtype "
              "(4-bit weights dequantized to bf16 unless the chip has native fp4), uniform routing, 64-token "
              "chunks for linear attention, 8 us per collective"]
    if mem.weight_bytes > inst.chip.hbm_gb * 1e9:
        notes.insert(0, f"WARNING: {m.name} weights ({A.weight_bytes(m) / 1e9:,.0f} GB at {m.weights_summary}) do not "
                        f"fit {inst} ({inst.hbm_bytes / 1e9:,.0f} GB HBM): the instance cannot serve it")
    if weight_dtype:
        notes.append(f"weights, routed experts included, overridden to {m.weight_dtype} (--weight-dtype)")
    if m.reconstruction:
        notes.append(f"RECONSTRUCTION: {m.reconstruction}")
    sections = [_prefill_section(chosen, roof, tabulated(table) if table else None, lengths),
                _operator_section(roof, lengths), _decode_section(cap, mem, inst, context, tpot_s, l_out)]
    emit(Report(sections, notes, meta={"model": m.name, "instance": str(inst)}), fmt)


@app.command("kv-throughput")
def kv_throughput_cmd(
    model: Optional[list[str]] = typer.Option(None, "--model", "-m", help="Model(s) (default: all bundled)."),
    instance: str = typer.Option("8xH200", "--instance", "-i", help="Instance shape COUNTxCHIP."),
    length: list[str] = typer.Option(["1k", "8k", "32k", "128k"], "--len", "-l", help="Lengths (K = 1024)."),
    source: str = typer.Option("auto", "--source", help=SOURCE_HELP),
    state_dtype: str = typer.Option("profile", "--state-dtype",
                                    help="Count recurrent state as the profile says, or as an engine stores "
                                         "it (fp32: SGLang's default, the paper's Table 3)."),
    moe: str = typer.Option("tp", "--moe", help=MOE_HELP),
    fmt: str = FormatOption,
) -> None:
    """KV throughput Phi_kv = S_kv / T_prefill per instance (Gbps), beside the paper's Table 3."""
    from ..performance import kv_throughput, parse_instance, source_kind
    from ..performance.measurements import SGLANG_STATE_DTYPE, paper_kv_throughput

    check_format(fmt)
    inst = parse_instance(instance)
    lengths = parse_lengths(length, "--len")
    moe = _moe(moe)
    override = None if state_dtype == "profile" else state_dtype
    models = [get_model(n) for n in model] if model else sorted(all_models().values(), key=lambda x: x.name)
    paper = paper_kv_throughput() if inst.chip.name == "h200" and inst.chips == 8 else {}
    rows, differs = [], []
    for m in models:
        kv = kv_throughput(m, inst, lengths, source, override, moe)
        for i, n in enumerate(lengths):
            row = {"model": m.name, "len_tokens": n, "s_kv_bytes": int(kv.s_kv_bytes[i]),
                   "prefill_s": float(kv.prefill_s[i]), "kv_throughput_gbps": float(kv.gbps[i]),
                   "prefill_source": source_kind(kv.prefill)}
            if paper:
                ref = paper.get((m.name, n))
                row.update(paper_gbps=ref, error=float(kv.gbps[i]) / ref - 1 if ref else None)
            rows.append(row)
        counted_dtype = (override or m.state_dtype).lower()
        if any((m.name, n) in paper for n in lengths) and A.recurrent_state_bytes(m) \
                and counted_dtype != SGLANG_STATE_DTYPE:
            differs.append(m.name)
    cols = [Column("model", "model"), Column("len_tokens", "len", ",d"),
            Column("s_kv_bytes", "S_kv MiB", lambda v: f"{v / 2**20:,.1f}"), Column("prefill_s", "prefill s", ".3f"),
            Column("kv_throughput_gbps", "Phi_kv Gbps", ".2f"), Column("prefill_source", "prefill")]
    if paper:
        cols += [Column("paper_gbps", "paper Gbps", ".2f"), Column("error", "vs paper", _pct)]
    notes = ["Phi_kv = S_kv(l) * 8 / T_prefill(l) / 1e9: logical bytes (one copy), bf16 KV, fixed state included; "
             "lengths K = 1024",
             f"prefill per model: measured table where the model has one for {inst}, else the calibrated roofline "
             "(see `prfaas-plan rates` for constants and sources)"]
    if paper:
        notes.append("paper: arXiv 2604.15039 Table 3 (8K and 32K columns), measured with SGLang v0.5.9, which keeps "
                     "linear-attention state in fp32")
    if differs:
        notes.append(f"{', '.join(differs)}: recurrent state counted in a narrower dtype than the paper's engine "
                     f"stored it (fp32): pass --state-dtype fp32 to compare like for like")
    emit(Report([Section("kv_throughput", f"KV throughput per {inst} instance", rows, cols)], notes,
                meta={"instance": str(inst), "state_dtype": state_dtype}), fmt)


@app.command("calibrate")
def calibrate_cmd(
    hardware: str = typer.Option(..., "--hardware", help="Chip profile to calibrate, e.g. h20."),
    measurements: str = typer.Option(..., "--measurements", help="Measurement CSV (model,instance,len_tokens,"
                                     "latency_s or kv_throughput_gbps), or a bundled reference file name."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the calibrated hardware profile here."),
    moe: str = typer.Option("tp", "--moe", help=MOE_HELP),
    fmt: str = FormatOption,
) -> None:
    """Fit the chip's four roofline constants to measured prefill latencies; print every point with its
    prediction, error and leave-one-out error; optionally write the calibrated profile."""
    from ..performance import parse_instance
    from ..performance.calibrate import calibrated_profile_text, fit_calibration
    from ..performance.measurements import load_measurements, resolve_path

    check_format(fmt)
    if output is not None and Path(output).is_dir():
        raise PlanError(f"--output {output!r}: is a folder; give the profile's file name")
    chip = get_hardware(hardware)
    path = resolve_path(measurements)
    data = load_measurements(path)
    fit = fit_calibration(chip, data, path.name, _moe(moe))
    text = calibrated_profile_text(chip, fit.calibration) if output else None
    rows = [{"model": p.measurement.model, "instance": p.measurement.instance,
             "len_tokens": p.measurement.len_tokens, "measured_s": p.measurement.latency_s,
             "predicted_s": p.predicted_s, "error": p.error, "loo_predicted_s": p.loo_predicted_s,
             "loo_error": p.loo_error, "derived": p.measurement.derived} for p in fit.points]
    c = fit.calibration
    summary = [{"chip": chip.name, "compute_efficiency": c.compute_efficiency,
                "memory_efficiency": c.memory_efficiency, "overhead_s": c.overhead_s,
                "comm_efficiency": c.comm_efficiency, "points": len(fit.points),
                "median_abs_error": fit.median_error, "max_abs_error": fit.max_error,
                "loo_median_abs_error": fit.loo_median_error, "loo_max_abs_error": fit.loo_max_error}]
    cols = [Column("model", "model"), Column("instance", "instance"), Column("len_tokens", "len", ",d"),
            Column("measured_s", "measured s", ".3f"), Column("predicted_s", "predicted s", ".3f"),
            Column("error", "error", _pct), Column("loo_predicted_s", "LOO predicted s", ".3f"),
            Column("loo_error", "LOO error", _pct)]
    sum_cols = [Column("chip", "chip"), Column("compute_efficiency", "compute eff", ".3f"),
                Column("memory_efficiency", "memory eff", ".3f"), Column("overhead_s", "overhead ms", _ms),
                Column("comm_efficiency", "comm eff", ".3f"), Column("points", "points"),
                Column("median_abs_error", "median |err|", ".1%"), Column("max_abs_error", "worst |err|", ".1%"),
                Column("loo_median_abs_error", "LOO median", ".1%"), Column("loo_max_abs_error", "LOO worst", ".1%")]
    notes = [f"source: {c.source}"]
    if any(p.measurement.derived for p in fit.points):
        notes.append("latencies derived from KV throughput as S_kv * 8 / (Phi * 1e9), with S_kv counted as the "
                     "measuring engine stored it (column 'derived' in JSON/CSV)")
    measured_on = sorted({parse_instance(p.measurement.instance).chip.name for p in fit.points})
    if measured_on != [chip.name]:
        notes.append(f"measured on {', '.join(measured_on)}; constants are fractions of each chip's own peaks, "
                     f"applied to {chip.name}")
    if output:
        try:
            write_atomic(output, text)
        except OSError as exc:
            raise PlanError(f"--output {output!r}: cannot write ({exc.strerror})") from None
        notes.append(f"wrote the calibrated profile to {output}")
    emit(Report([Section("points", f"Calibration of {chip.name} on {path.name}", rows, cols),
                 Section("constants", "Fitted constants", summary, sum_cols)], notes,
                meta={"chip": chip.name, "measurements": str(path)}), fmt)
