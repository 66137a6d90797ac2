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
from .stack_option import StackOption, stack_notes

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


def _prefill_section(chosen, roof, measured, lengths: list[int], serving: list | None) -> Section:
    from ..performance import source_kind
    from ..performance.base import busy_s

    l = np.asarray(lengths, dtype=float)
    t, t_roof, busy = chosen.latency_s(l), roof.latency_s(l), busy_s(chosen, l)
    rows = []
    for i, n in enumerate(lengths):
        row = {"len_tokens": n, "prefill_s": float(t[i]), "prefill_busy_s": float(busy[i]),
               "tokens_per_s": n / float(busy[i]), "source": source_kind(chosen), "roofline_s": float(t_roof[i])}
        if serving:
            row.update(ttft_s=serving[i].ttft_s, tpot_s=serving[i].tpot_s)
        if measured is not None:
            t_meas = float(measured.latency_s(n))
            row.update(measured_s=t_meas, roofline_gap=float(t_roof[i]) / t_meas - 1)
        rows.append(row)
    cols = [Column("len_tokens", "len", ",d"), Column("prefill_s", "prefill s", ".3f"),
            Column("prefill_busy_s", "busy s", ".3f"), Column("tokens_per_s", "tokens/s", ",.0f"),
            Column("source", "source"), Column("roofline_s", "roofline s", ".3f")]
    if serving:
        cols += [Column("ttft_s", f"TTFT s @{serving[0].concurrency}", ".3f"),
                 Column("tpot_s", f"TPOT ms @{serving[0].concurrency}", _ms)]
    if measured is not None:
        cols += [Column("measured_s", "measured s", ".3f"), Column("roofline_gap", "roofline vs measured", _pct)]
    return Section("prefill", f"Prefill of {roof.model.name} on {roof.instance}", rows, cols)


def _operator_section(roof, lengths: list[int]) -> Section:
    l = np.asarray(lengths, dtype=float)
    total = roof.latency_s(l)  # shares of the unloaded latency (one unchunked forward + the stack)
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


def _step_section(model, inst, moe, stack, batch: int, context: float) -> Section:
    from ..performance import decode_step_s

    step = float(decode_step_s(model, inst, batch, context, moe, stack=stack))
    rows = [{"batch": batch, "context_tokens": context, "decode_step_s": step, "tokens_per_s": batch / step}]
    cols = [Column("batch", "batch", ",d"), Column("context_tokens", "context", ",.0f"),
            Column("decode_step_s", "step (TPOT) ms", _ms), Column("tokens_per_s", "tokens/s", ",.0f")]
    return Section("decode_step", f"One decode step of {batch} requests at {context:,.0f} tokens of context",
                   rows, cols)


def _model_variant(model: str, weight_dtype: Optional[str]):
    m = get_model(model)
    if weight_dtype:
        dtype_bytes(weight_dtype, "--weight-dtype")
        m = dataclasses.replace(m, weight_dtype=weight_dtype.lower(), expert_dtype=weight_dtype.lower(),
                                measured_prefill=())
    return m


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
    stack: Optional[str] = StackOption,
    batch: Optional[int] = typer.Option(None, "--batch", min=1, help="Decode step: batch (default: the "
                                        "capacity batch at the SLO)."),
    context: Optional[str] = typer.Option(None, "--context", help="Decode step: context tokens per request "
                                          "(default input + output / 2)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", min=1, help="Also predict mean TTFT and "
                                              "TPOT of a closed-loop benchmark at this concurrency (input "
                                              "--len, output --output-len)."),
    fmt: str = FormatOption,
) -> None:
    """Prefill latency and busy time per length, the bound of each operator class, a decode step, and
    decode capacity at an SLO."""
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
    from ..performance.serving import serving_at_concurrency
    from ..profiles import get_stack

    check_format(fmt)
    m = _model_variant(model, weight_dtype)
    inst = parse_instance(instance)
    lengths = parse_lengths(length, "--len")
    tpot_s = _tpot(tpot, slo)
    l_in, l_out = parse_length(input_len, "--input-len"), parse_length(output_len, "--output-len")
    moe = _moe(moe)
    prof = get_stack(stack)
    chosen = prefill_model(m, inst, source, moe, prof)
    roof = RooflinePrefill.build(m, inst, moe, stack=prof)
    table = measured_table(m, inst)
    ctx = float(parse_length(context, "--context")) if context else l_in + l_out / 2
    cap = decode_capacity(m, inst, tpot_s, l_in + l_out / 2, moe, stack=prof)
    mem = decode_memory(m, inst, l_in + l_out / 2)
    serving = ([serving_at_concurrency(m, inst, n, l_out, concurrency, moe, stack=prof) for n in lengths]
               if concurrency else None)
    notes = stack_notes(stack) + [f"prefill source: {chosen.source}"]
    if source_kind(chosen) == "measured":
        notes.append(f"roofline: {roof.source}")
    notes += [f"decode: {cap.source}",
              f"decode context = input {l_in:,} + output {l_out:,} / 2 tokens; lengths K = 1024",
              "prefill s = one request alone (TTFT-equivalent: stack latency + forwards); busy s = GPU seconds per "
              "request with the instance kept full (short prompts batched to the stack's token budget): "
              "throughput divides by it",
              "operator times are the roofline's (max of compute and memory per class, link time for collectives); "
              "assumptions: bf16 activations and attention cores, GEMMs at the peak rate for their weights' dtype "
              "(4-bit weights dequantized to bf16 unless the chip has native fp4), uniform routing, 64-token "
              "chunks for linear attention, 8 us per collective"]
    if concurrency:
        notes.append(f"TTFT/TPOT @{concurrency}: closed-loop benchmark model (docs/methods.md, \"Serving at a "
                     f"fixed concurrency\"), wave fraction {prof.wave_fraction:g} of stack {prof.name}")
    if mem.weight_bytes > inst.chip.hbm_gb * 1e9:
        notes.insert(0, f"WARNING: {m.name} weights ({A.weight_bytes(m) / 1e9:,.0f} GB at {m.weights_summary}) do not "
                        f"fit {inst} ({inst.hbm_bytes / 1e9:,.0f} GB HBM): the instance cannot serve it")
    if weight_dtype:
        notes.append(f"weights, routed experts included, overridden to {m.weight_dtype} (--weight-dtype)")
    if m.reconstruction:
        notes.append(f"RECONSTRUCTION: {m.reconstruction}")
    sections = [_prefill_section(chosen, roof, tabulated(table) if table else None, lengths, serving),
                _operator_section(roof, lengths),
                _step_section(m, inst, moe, prof, batch or max(int(cap.batch), 1), ctx),
                _decode_section(cap, mem, inst, l_in + l_out / 2, tpot_s, l_out)]
    emit(Report(sections, notes, meta={"model": m.name, "instance": str(inst), "stack": prof.name}), fmt)


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
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Override every model's weight "
                                               "dtype, routed experts included."),
    stack: Optional[str] = StackOption,
    fmt: str = FormatOption,
) -> None:
    """KV throughput Phi_kv = S_kv / T_prefill per instance (Gbps), beside the paper's Table 3."""
    from ..performance import kv_throughput, parse_instance, source_kind
    from ..performance.measurements import SGLANG_STATE_DTYPE, paper_kv_throughput
    from ..profiles import get_stack

    check_format(fmt)
    inst = parse_instance(instance)
    lengths = parse_lengths(length, "--len")
    moe = _moe(moe)
    override = None if state_dtype == "profile" else state_dtype
    names = model or sorted(all_models())
    models = [_model_variant(n, weight_dtype) for n in names]
    paper = paper_kv_throughput() if inst.chip.name == "h200" and inst.chips == 8 else {}
    rows, differs = [], []
    for m in models:
        kv = kv_throughput(m, inst, lengths, source, override, moe, stack)
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
    notes = stack_notes(stack) + [
             "Phi_kv = S_kv(l) * 8 / T_prefill(l) / 1e9: logical bytes (one copy), bf16 KV, fixed state included; "
             "T_prefill = one request alone, the stack's fixed latency included (as Table 3 measured); lengths K = 1024",
             f"prefill per model: measured table where the model has one for {inst}, else the calibrated roofline "
             "(see `prfaas-plan rates` for constants and sources)"]
    if paper:
        notes.append("paper: arXiv 2604.15039 Table 3 (8K and 32K columns), measured with SGLang v0.5.9, which keeps "
                     "linear-attention state in fp32; its harness is stack paper-sglang (--stack paper-sglang)")
    if paper and get_stack(stack).name != "paper-sglang":
        notes.append(f"the paper column was measured on the paper's harness: pass --stack paper-sglang to compare "
                     f"like for like (now {get_stack(stack).name})")
    if differs:
        notes.append(f"{', '.join(differs)}: recurrent state counted in a narrower dtype than the paper's engine "
                     f"stored it (fp32): pass --state-dtype fp32 to compare like for like")
    emit(Report([Section("kv_throughput", f"KV throughput per {inst} instance", rows, cols)], notes,
                meta={"instance": str(inst), "state_dtype": state_dtype, "stack": get_stack(stack).name}), fmt)


def _err_cols(prefix: str) -> list[Column]:
    return [Column(f"{prefix}_median", f"{prefix} median", ".1%"), Column(f"{prefix}_worst", f"{prefix} worst", ".1%")]


@app.command("calibrate")
def calibrate_cmd(
    measurements: Optional[list[str]] = typer.Option(None, "--measurements", help="Measurement CSV(s) (tagged "
                                                     "model,instance,stack,len_tokens,ttft_s/tpot_s/busy_s...) or "
                                                     "bundled reference file names; default: every bundled set."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Write the calibrated chip and stack "
                                         "profiles into this folder (use it with --profiles)."),
    stack: Optional[str] = typer.Option(None, "--stack", help="Stack of user rows without a 'stack' column."),
    moe: str = typer.Option("tp", "--moe", help=MOE_HELP + " For user rows without a 'moe' column."),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Weight dtype of user rows without "
                                               "a 'weight_dtype' column."),
    loo: bool = typer.Option(True, "--loo/--no-loo", help="Leave-one-out refits (one per row; slow on big sets)."),
    fmt: str = FormatOption,
) -> None:
    """Fit chip efficiencies and serving-stack overheads jointly on measured points; report every point and
    in-sample, leave-one-out and leave-one-model-out errors per chip and per stack."""
    from ..performance.calibrate import fit_joint
    from ..performance.measurements import (
        BUNDLED_FILES,
        load_measurements,
        resolve_path,
    )
    from ..performance.profile_text import calibrated_profile_text, stack_profile_text
    from ..profiles import get_stack

    check_format(fmt)
    if output is not None and Path(output).exists() and not Path(output).is_dir():
        raise PlanError(f"--output {output!r}: exists and is not a folder")
    if weight_dtype:
        dtype_bytes(weight_dtype, "--weight-dtype")
    defaults = {"stack": get_stack(stack).name if stack else "", "moe": _moe(moe),
                "weight_dtype": (weight_dtype or "").lower()}
    files = [resolve_path(f) for f in (measurements or BUNDLED_FILES)]
    points, excluded = [], []
    for path in files:
        got, dropped = load_measurements(path, defaults)
        points += got
        excluded += dropped
    data_name = ", ".join(p.name for p in files)
    fit = fit_joint(points, excluded, data_name, loo=loo)
    rows = []
    for p in fit.points:
        m = p.measurement
        row = {"model": m.model, "instance": m.instance, "stack": m.stack, "moe": m.moe,
               "precision": m.expert_dtype or m.weight_dtype or "profile", "concurrency": m.concurrency,
               "len_tokens": m.len_tokens, "output_tokens": m.output_tokens, "derived": m.derived}
        for q in ("ttft", "tpot", "busy"):
            if getattr(m, f"{q}_s") is not None:
                row.update({f"{q}_measured_s": getattr(m, f"{q}_s"), f"{q}_predicted_s": p.predicted[q],
                            f"{q}_error": p.error(q), f"{q}_loo_error": p.error(q, "loo") if loo else None,
                            f"{q}_lomo_error": p.error(q, "lomo")})
        rows.append(row)
    cols = [Column("model", "model"), Column("instance", "instance"), Column("stack", "stack"),
            Column("concurrency", "C"), Column("len_tokens", "isl", ",d"), Column("output_tokens", "osl", ",d"),
            Column("ttft_measured_s", "TTFT s", ".3f"), Column("ttft_error", "TTFT err", _pct),
            Column("tpot_measured_s", "TPOT ms", _ms), Column("tpot_error", "TPOT err", _pct),
            Column("busy_measured_s", "busy s", ".3f"), Column("busy_error", "busy err", _pct)]
    err_cols = (_err_cols("in") + (_err_cols("loo") if loo else []) + _err_cols("lomo")
                + [Column("points", "points")])
    chip_rows = [{"chip": c, **{f"gemm_{k}": v for k, v in cal.gemm.items()}, "memory": cal.memory,
                  "comm": cal.comm} for c, cal in fit.chips.items()]
    classes = sorted({k for r in chip_rows for k in r if k.startswith("gemm_")})
    stack_rows = [{"stack": name, "latency_s": st.latency_s, "forward_overhead_s": st.forward_overhead_s,
                   "step_overhead_s": st.step_overhead_s, "wave_fraction": st.wave_fraction,
                   "prefill_token_budget": st.prefill_token_budget} for name, st in fit.stacks.items()]
    sections = [
        Section("points", f"Joint calibration on {data_name}", rows, cols),
        Section("by_chip", "|error| per chip (in-sample, leave-one-out, leave-one-model-out)",
                fit.summary("chip"), [Column("chip", "chip"), Column("quantity", "quantity")] + err_cols),
        Section("by_stack", "|error| per stack", fit.summary("stack"),
                [Column("stack", "stack"), Column("quantity", "quantity")] + err_cols),
        Section("chips", "Fitted chip constants (fractions of the chip's peaks)", chip_rows,
                [Column("chip", "chip")] + [Column(k, k.replace("gemm_", "GEMM "), ".3f") for k in classes]
                + [Column("memory", "HBM", ".3f"), Column("comm", "scale-up", ".3f")]),
        Section("stacks", "Fitted stack constants", stack_rows,
                [Column("stack", "stack"), Column("latency_s", "fixed latency ms", _ms),
                 Column("forward_overhead_s", "per forward ms", _ms), Column("step_overhead_s", "per step ms", _ms),
                 Column("wave_fraction", "wave fraction", ".2f"), Column("prefill_token_budget", "budget", ",d")]),
    ]
    notes = ["concurrency > 1 is modelled, not excluded: closed-loop waves with prefill before decode "
             "(docs/methods.md, \"Serving at a fixed concurrency\")",
             "leave-one-out: " + (("each row predicted by a refit without it" if fit.loo_exact else
                                   "each row predicted by one Gauss-Newton step from the full fit without it "
                                   "(approximate; exact refits up to 40 rows)") if loo else "skipped (--no-loo)"),
             "leave-one-model-out: each model's rows predicted by a fit without that model"]
    notes += [f"excluded: {e}" for e in fit.excluded]
    if fit.unidentified:
        notes.append("not identified by these data, left at their priors: " + ", ".join(fit.unidentified))
    if any(p.measurement.derived for p in fit.points):
        notes.append("some values derived (column 'derived' in JSON/CSV): TTFT from KV throughput as "
                     "S_kv * 8 / (Phi * 1e9) with S_kv as the measuring engine stored it; busy from tokens/s")
    if output:
        out = Path(output)
        texts = {Path(get_hardware(c).path).name: calibrated_profile_text(get_hardware(c), cal)
                 for c, cal in fit.chips.items()}
        texts.update({f"{name}.yaml": stack_profile_text(st) for name, st in fit.stacks.items()})
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in texts.items():
                write_atomic(out / name, text)
        except OSError as exc:
            raise PlanError(f"--output {output!r}: cannot write ({exc.strerror})") from None
        notes.append(f"wrote {len(fit.chips)} chip and {len(fit.stacks)} stack profiles to {output}")
    emit(Report(sections, notes, meta={"measurements": data_name}), fmt)
