"""What the per-instance performance commands print: ``rates`` (prefill latency and busy time per
length, the roofline by operator class, a decode step and decode capacity at a TPOT SLO),
``kv-throughput`` (Phi_kv = S_kv / T_prefill beside the paper's Table 3) and ``calibrate`` (the joint
fit of chip efficiencies and stack overheads on measured points, with its errors). Every figure comes
from `prfaas_plan.performance` and `prfaas_plan.arithmetic`; ``docs/methods.md`` states the models.
Rows are named with their units (``_s`` seconds, ``_bytes``, ``_gbps`` 1e9 bit/s, ``_tokens``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OutputError, PlanError
from ..units import plural
from ..vocabulary import MoeSplit, values
from .warnings import PlanWarning

MOE_SPLITS = values(MoeSplit)


def check_moe(text: str) -> str:
    """``text`` when it names an expert split (tp: every chip holds a slice of every expert; ep: whole experts)."""
    if text not in MOE_SPLITS:
        raise PlanError(f"`moe` {text!r}: expected tp or ep")
    return text


def stack_notes(stack: str | None, inputs: str = "predicted") -> list[str]:
    """Notes naming the stack in effect and where its numbers come from (a default is announced)."""
    from ..profiles import DEFAULT_STACK, get_stack

    prof = get_stack(stack)
    notes = [f"default stack: {DEFAULT_STACK} (pass --stack to choose another serving stack)"] if stack is None else []
    if inputs == "paper":
        return notes + [f"stack {prof.name} not used for --inputs paper: the paper's tables already hold its engine"]
    return notes + [prof.describe()]


def model_variant(model: str, weight_dtype: str | None = None):
    """The model profile, with every weight (routed experts included) in ``weight_dtype`` when given;
    measured prefill tables then no longer apply."""
    from ..profiles import dtype_bytes, get_model

    m = get_model(model)
    if weight_dtype:
        dtype_bytes(weight_dtype, "`weight_dtype`")
        m = dataclasses.replace(m, weight_dtype=weight_dtype.lower(), expert_dtype=weight_dtype.lower(),
                                measured_prefill=())
    return m


@dataclass(frozen=True)
class RatesAnswer:
    """One model on one instance: ``prefill`` (per length), ``operators`` (per class and length),
    ``decode_step`` (one batch) and ``decode`` (capacity at ``tpot_s``) rows, and the notes."""

    model: str
    instance: str
    stack: str
    tpot_s: float
    serving_concurrency: int | None   # closed-loop concurrency of the TTFT/TPOT columns, if asked
    has_measured: bool                # a measured prefill table sits beside the roofline
    batch: int
    context_tokens: float
    prefill: list[dict]
    operators: list[dict]
    decode_step: list[dict]
    decode: list[dict]
    notes: list[str]
    warnings: list = field(default_factory=list)   # `PlanWarning`s: the instance cannot serve the model


def _prefill_rows(chosen, roof, measured, lengths: list[int], serving: list | None) -> list[dict]:
    import numpy as np

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
    return rows


def _operator_rows(roof, lengths: list[int]) -> list[dict]:
    import numpy as np

    l = np.asarray(lengths, dtype=float)
    total = roof.latency_s(l)  # shares of the unloaded latency (one unchunked forward + the stack)
    return [{"op": name, "len_tokens": n, "seconds": float(secs[i]), "share": float(secs[i] / total[i]),
             "bound": str(bounds[i])}
            for name, (secs, bounds) in roof.breakdown(l).items() for i, n in enumerate(lengths)]


def answer_rates(model: str, instance: str, lengths: list[int], tpot_s: float = 0.025, input_len: int = 27 * 1024,
                 output_len: int = 1024, source: str = "auto", moe: str = "tp", weight_dtype: str | None = None,
                 stack: str | None = None, batch: int | None = None, context_tokens: float | None = None,
                 concurrency: int | None = None) -> RatesAnswer:
    """Prefill and decode rates of ``model`` on ``instance`` (COUNTxCHIP) at prompt ``lengths`` (tokens)
    and a decode SLO of ``tpot_s`` seconds per token for requests of ``input_len`` + ``output_len`` tokens.
    ``batch`` and ``context_tokens`` set the decode step (default: the capacity batch, input + output / 2);
    ``concurrency`` adds a closed-loop benchmark's mean TTFT and TPOT."""
    import numpy as np

    from .. import arithmetic as A
    from ..performance import (
        RooflinePrefill,
        decode_capacity,
        decode_memory,
        decode_step_s,
        measured_table,
        parse_instance,
        prefill_model,
        source_kind,
        tabulated,
    )
    from ..performance.serving import Serving, serving_over_lengths
    from ..profiles import get_stack

    m = model_variant(model, weight_dtype)
    inst = parse_instance(instance)
    l_in, l_out = input_len, output_len
    moe = check_moe(moe)
    prof = get_stack(stack)
    chosen = prefill_model(m, inst, source, moe, prof)
    roof = RooflinePrefill.build(m, inst, moe, stack=prof)
    table = measured_table(m, inst)
    ctx = float(context_tokens) if context_tokens is not None else l_in + l_out / 2
    cap = decode_capacity(m, inst, tpot_s, l_in + l_out / 2, moe, stack=prof)
    mem = decode_memory(m, inst, l_in + l_out / 2)
    serving = None
    if concurrency:
        ttft, tpot, step = serving_over_lengths(m, inst, np.asarray(lengths, dtype=float), l_out, concurrency, moe,
                                                stack=prof)
        serving = [Serving(concurrency, float(a), float(b), float(c)) for a, b, c in zip(ttft, tpot, step)]
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
    warnings = []
    if mem.weight_bytes > inst.chip.hbm_gb * 1e9:
        warnings.append(PlanWarning("weights-do-not-fit", f"{m.name} weights ({A.weight_bytes(m) / 1e9:,.0f} GB at "
                                    f"{m.weights_summary}) do not fit {inst} ({inst.hbm_bytes / 1e9:,.0f} GB HBM): "
                                    "the instance cannot serve it"))
    from ..performance.sharding import split_reason

    uneven = split_reason(m, inst.chips, moe)
    if uneven:
        warnings.append(PlanWarning("uneven-split", f"{uneven}: SGLang and vLLM cannot start {m.name} on {inst} "
                                    f"(MoE {moe}); the figures are the roofline's for a split no engine runs"))
    if weight_dtype:
        notes.append(f"weights, routed experts included, overridden to {m.weight_dtype} (--weight-dtype)")
    if m.reconstruction:
        notes.append(f"RECONSTRUCTION: {m.reconstruction}")
    step_batch = batch or max(int(cap.batch), 1)
    step = float(decode_step_s(m, inst, step_batch, ctx, moe, stack=prof))
    decode = [{"instance": str(inst), "context_tokens": l_in + l_out / 2, "tpot_s": tpot_s, "batch": cap.batch,
               "step_s": cap.step_s, "tokens_per_s": cap.tokens_per_s, "requests_per_s": cap.requests_per_s(l_out),
               "output_tokens": l_out, "binding": cap.binding, "weights_gb_per_chip": mem.weight_bytes / 1e9,
               "request_mb_per_chip": mem.request_bytes / 1e6, "memory_max_batch": mem.max_batch}]
    return RatesAnswer(
        m.name, str(inst), prof.name, tpot_s, serving[0].concurrency if serving else None, table is not None,
        step_batch, ctx,
        _prefill_rows(chosen, roof, tabulated(table) if table else None, lengths, serving),
        _operator_rows(roof, lengths),
        [{"batch": step_batch, "context_tokens": ctx, "decode_step_s": step, "tokens_per_s": step_batch / step}],
        decode, notes, warnings)


@dataclass(frozen=True)
class KvThroughputAnswer:
    """Phi_kv per model and length on one instance (``rows``); ``has_paper`` when the paper's Table 3
    column sits beside it (8xH200 only)."""

    instance: str
    state_dtype: str
    stack: str
    has_paper: bool
    rows: list[dict]
    notes: list[str]


def answer_kv_throughput(models: list[str] | None, instance: str, lengths: list[int], source: str = "auto",
                         state_dtype: str = "profile", moe: str = "tp", weight_dtype: str | None = None,
                         stack: str | None = None) -> KvThroughputAnswer:
    """KV throughput Phi_kv = S_kv(l) * 8 / T_prefill(l) / 1e9 (Gbps) of ``models`` (default every
    profile) on ``instance``; ``state_dtype`` 'profile' counts recurrent state as the profile says,
    another dtype (fp32: SGLang's) as an engine stores it."""
    from .. import arithmetic as A
    from ..performance import kv_throughput, parse_instance, source_kind
    from ..performance.measurements import SGLANG_STATE_DTYPE, paper_kv_throughput
    from ..profiles import all_models, get_stack

    inst = parse_instance(instance)
    moe = check_moe(moe)
    override = None if state_dtype == "profile" else state_dtype
    names = models or sorted(all_models())
    profiles = [model_variant(n, weight_dtype) for n in names]
    paper = paper_kv_throughput() if inst.chip.name == "h200" and inst.chips == 8 else {}
    rows, differs = [], []
    for m in profiles:
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
    return KvThroughputAnswer(str(inst), state_dtype, get_stack(stack).name, bool(paper), rows, notes)


@dataclass(frozen=True)
class CalibrateAnswer:
    """The joint fit: every point with its errors (``points``), |error| summaries per chip and per
    stack, the fitted chip constants (fractions of peak; ``gemm_classes`` names the GEMM columns) and
    stack constants (seconds, tokens), and the notes. ``loo`` says whether leave-one-out ran."""

    data_name: str
    loo: bool
    points: list[dict]
    by_chip: list[dict]
    by_stack: list[dict]
    chips: list[dict]
    gemm_classes: list[str]
    stacks: list[dict]
    notes: list[str]
    by_version: list[dict] = dataclasses.field(default_factory=list)


def answer_calibrate(measurements: list[str] | None = None, output: str | None = None, stack: str | None = None,
                     moe: str = "tp", weight_dtype: str | None = None, loo: bool = True,
                     tags=None) -> CalibrateAnswer:
    """Fit chip efficiencies and stack overheads jointly on ``measurements`` (CSV paths, benchmark outputs
    `performance.bench_import` reads, or bundled file names; default every bundled set); ``stack``, ``moe``
    and ``weight_dtype`` fill user rows that lack those columns, ``tags`` (`bench_import.Tags`) what a
    benchmark file does not record. With ``output``, the calibrated chip and stack profiles are written into
    that folder."""
    from ..output.report import write_files
    from ..performance.calibrate import fit_joint
    from ..performance.stack_versions import CONFIGURATION_SIGMA, VERSION_WIDTH
    from ..performance.bench_import import Tags, load_any, resolve_stack
    from ..performance.measurements import BUNDLED_FILES, merge_repeats, resolve_path
    from ..performance.profile_text import calibrated_profile_text, stack_profile_text
    from ..profiles import dtype_bytes, get_hardware

    if output is not None and Path(output).exists() and not Path(output).is_dir():
        raise OutputError(f"`output` {output!r}: exists and is not a folder")
    if weight_dtype:
        dtype_bytes(weight_dtype, "`row_weight_dtype`")
    tags = tags or Tags(stack=stack or "", moe=moe if moe != "tp" else "", weight_dtype=weight_dtype or "")
    defaults = {"stack": resolve_stack("", "", Tags(stack=stack), "`stack`")[1] if stack else "", "moe": check_moe(moe),
                "weight_dtype": (weight_dtype or "").lower()}
    files = [resolve_path(f) for f in (measurements or BUNDLED_FILES)]
    runs, excluded = load_any(files, tags, defaults)
    points, repeats = merge_repeats([r.measurement for r in runs])
    data_name = ", ".join(p.name for p in files)
    fit = fit_joint(points, excluded, data_name, loo=loo)
    rows = []
    entries = {f.label for f in fit.versions.fits if f.terms}
    for p, layered in zip(fit.points, fit.versions.predicted):
        m = p.measurement
        version = f"{m.stack}@{m.stack_version}"
        row = {"model": m.model, "instance": m.instance, "stack": m.stack, "moe": m.moe,
               "run_stack": version if version in entries else m.stack,
               "precision": m.expert_dtype or m.weight_dtype or "profile", "concurrency": m.concurrency,
               "len_tokens": m.len_tokens, "output_tokens": m.output_tokens, "derived": m.derived}
        for q in ("ttft", "tpot", "busy"):
            if getattr(m, f"{q}_s") is not None:
                row.update({f"{q}_measured_s": getattr(m, f"{q}_s"), f"{q}_predicted_s": p.predicted[q],
                            f"{q}_error": p.error(q), f"{q}_loo_error": p.error(q, "loo") if loo else None,
                            f"{q}_lomo_error": p.error(q, "lomo"), f"{q}_loco_error": p.error(q, "loco"),
                            f"{q}_version_error": layered[q] / getattr(m, f"{q}_s") - 1.0})
        rows.append(row)
    chip_rows = [{"chip": c, **{f"gemm_{k}": v for k, v in cal.gemm.items()}, "memory": cal.memory,
                  "comm": cal.comm} for c, cal in fit.chips.items()]
    classes = sorted({k for r in chip_rows for k in r if k.startswith("gemm_")})
    stack_rows = [{"stack": name, "latency_s": st.latency_s, "forward_overhead_s": st.forward_overhead_s,
                   "step_overhead_s": st.step_overhead_s, "ep_forward_overhead_s": st.ep_forward_overhead_s,
                   "request_overhead_s": st.request_overhead_s, "wave_fraction": st.wave_fraction,
                   "prefill_token_budget": st.prefill_token_budget} for name, st in fit.stacks.items()]
    notes = ["concurrency > 1 is modelled, not excluded: closed-loop waves with prefill before decode "
             "(docs/methods.md, \"Serving at a fixed concurrency\")",
             "leave-one-out: " + (("each row predicted by a refit without it" if fit.loo_exact else
                                   "each row predicted by one Gauss-Newton step from the full fit without it "
                                   "(approximate; exact refits up to 40 rows)") if loo else "skipped (--no-loo)"),
             "leave-one-model-out: each model's rows predicted by a fit without that model",
             "leave-one-chip-out: each chip's rows predicted by a fit without that chip, the chip at the constants "
             "an uncalibrated chip gets and its harness campaigns at the median of the stack's others (only rows "
             "whose stack has rows on another chip); 'server' sets the chip's harness campaigns at the full fit's "
             "(a plan never includes the client's time): the error bars of uncalibrated chips take its median"]
    if repeats:
        notes.append(f"counted once: {repeats} {plural(repeats, 'row')} {plural(repeats, 'repeats', 'repeat')} "
                     "an earlier row exactly (same tags and measured values: "
                     "one run recorded twice)")
    notes += [f"term {t.owner} {t.name}: {t.value:.4g} (prior {t.prior:.4g}; moved {t.shift:+.1f} prior widths; "
              f"identified by {t.configurations} model x configuration {plural(t.configurations, 'group')})"
              for t in fit.terms]
    if fit.versions.fits:
        notes.append("per-version terms (stack@version): the engine's pooled value is their prior (log-width "
                     f"{VERSION_WIDTH:g}); a configuration's rows weigh as at most one observation of scatter "
                     f"{CONFIGURATION_SIGMA:g}, so a term seen in one configuration stays near the pooled value; "
                     "select one with --stack NAME@VERSION, the plain name stays pooled (docs/methods.md)")
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
        write_files(out, texts)   # all the profiles or none, never an empty or half-filled folder
        notes.append(f"wrote {len(fit.chips)} chip and {len(fit.stacks)} stack profiles to {output}")
    headline = "; ".join(f"{r['chip']} {r['quantity'].upper()} {r['lomo_median']:.0%}" for r in fit.summary("chip")
                         if "lomo_median" in r and r["quantity"] in ("ttft", "tpot"))
    unseen = "; ".join(f"{r['chip']} {r['quantity'].upper()} {r['loco_median']:.0%} "
                       f"(server {r['loco_server_median']:.0%})"
                       for r in fit.summary("chip") if "loco_median" in r and r["quantity"] in ("ttft", "tpot"))
    notes.insert(0, "headline, leave-one-model-out median |error| (what a model the fit has not seen should expect): "
                 + headline + (f"; leave-one-chip-out (what a chip it has not seen should expect): {unseen}"
                               if unseen else ""))
    return CalibrateAnswer(data_name, loo, rows, fit.summary("chip"), fit.summary("stack"), chip_rows, classes,
                           stack_rows, notes, _by_version(fit))


def _by_version(fit) -> list[dict]:
    """Errors per stack@version: the pooled fit's (``in_median`` ...) beside those with the version's own
    entry (``ver_in_median``, ``ver_loo_median``, ``ver_lomo_median``; `performance.stack_versions`)."""
    from ..performance.calibrate import QUANTITIES
    from ..performance.stack_versions import layer_summary

    layered = {(r["version"], r["quantity"]): r for r in
               layer_summary([p.measurement for p in fit.points], fit.versions, QUANTITIES)}
    return [{**row, **layered.get((row["version"], row["quantity"]), {})} for row in fit.summary("version")]
