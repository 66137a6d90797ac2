"""Reports of the per-instance performance answers (`prfaas_plan.planning.rates`): the table columns
that show each figure, and the section titles. Nothing here computes a figure."""

from __future__ import annotations

from .report import Column, Report, Section


def _ms(v) -> str:
    return f"{v * 1e3:,.1f}"


def _pct(v) -> str:
    return f"{v:+.1%}"


def rates_report(a) -> Report:
    """`planning.RatesAnswer` as the prefill, operator, decode-step and decode-capacity tables."""
    prefill_cols = [Column("len_tokens", "len", ",d"), Column("prefill_s", "prefill s", ".3f"),
                    Column("prefill_busy_s", "busy s", ".3f"), Column("tokens_per_s", "tokens/s", ",.0f"),
                    Column("source", "source"), Column("roofline_s", "roofline s", ".3f")]
    if a.serving_concurrency is not None:
        prefill_cols += [Column("ttft_s", f"TTFT s @{a.serving_concurrency}", ".3f"),
                         Column("tpot_s", f"TPOT ms @{a.serving_concurrency}", _ms)]
    if a.has_measured:
        prefill_cols += [Column("measured_s", "measured s", ".3f"),
                         Column("roofline_gap", "roofline vs measured", _pct)]
    operator_cols = [Column("op", "operator class"), Column("len_tokens", "len", ",d"),
                     Column("seconds", "ms", _ms), Column("share", "share", ".0%"), Column("bound", "bound")]
    step_cols = [Column("batch", "batch", ",d"), Column("context_tokens", "context", ",.0f"),
                 Column("decode_step_s", "step (TPOT) ms", _ms), Column("tokens_per_s", "tokens/s", ",.0f")]
    decode_cols = [Column("context_tokens", "context", ",.0f"), Column("tpot_s", "TPOT ms", _ms),
                   Column("batch", "batch", ",.0f"), Column("step_s", "step ms", _ms),
                   Column("tokens_per_s", "tokens/s", ",.0f"), Column("requests_per_s", "req/s", ".2f"),
                   Column("binding", "binding"), Column("weights_gb_per_chip", "weights GB/chip", ".1f"),
                   Column("request_mb_per_chip", "MB/request/chip", ",.1f"),
                   Column("memory_max_batch", "HBM max batch", ",d")]
    sections = [
        Section("prefill", f"Prefill of {a.model} on {a.instance}", a.prefill, prefill_cols),
        Section("operators", "Roofline by operator class (what bounds each)", a.operators, operator_cols),
        Section("decode_step", f"One decode step of {a.batch} requests at {a.context_tokens:,.0f} tokens of context",
                a.decode_step, step_cols),
        Section("decode", f"Decode capacity at TPOT {a.tpot_s * 1e3:g} ms", a.decode, decode_cols),
    ]
    return Report(sections, list(a.notes), meta={"model": a.model, "instance": a.instance, "stack": a.stack},
                  warnings=list(a.warnings))


def kv_throughput_report(a) -> Report:
    """`planning.KvThroughputAnswer` as the Phi_kv table (with the paper's column on 8xH200)."""
    cols = [Column("model", "model"), Column("len_tokens", "len", ",d"),
            Column("s_kv_bytes", "S_kv MiB", lambda v: f"{v / 2**20:,.1f}"), Column("prefill_s", "prefill s", ".3f"),
            Column("kv_throughput_gbps", "Phi_kv Gbps", ".2f"), Column("prefill_source", "prefill")]
    if a.has_paper:
        cols += [Column("paper_gbps", "paper Gbps", ".2f"), Column("error", "vs paper", _pct)]
    return Report([Section("kv_throughput", f"KV throughput per {a.instance} instance", a.rows, cols)],
                  list(a.notes), meta={"instance": a.instance, "state_dtype": a.state_dtype, "stack": a.stack})


def _err_cols(prefix: str) -> list[Column]:
    return [Column(f"{prefix}_median", f"{prefix} median", ".1%"), Column(f"{prefix}_worst", f"{prefix} worst", ".1%")]


def calibrate_report(a) -> Report:
    """`planning.CalibrateAnswer` as the points, per-chip and per-stack error, and fitted-constant tables."""
    cols = [Column("model", "model"), Column("instance", "instance"), Column("stack", "stack"),
            Column("concurrency", "C"), Column("len_tokens", "isl", ",d"), Column("output_tokens", "osl", ",d"),
            Column("ttft_measured_s", "TTFT s", ".3f"), Column("ttft_error", "TTFT err", _pct),
            Column("tpot_measured_s", "TPOT ms", _ms), Column("tpot_error", "TPOT err", _pct),
            Column("busy_measured_s", "busy s", ".3f"), Column("busy_error", "busy err", _pct)]
    err_cols = (_err_cols("in") + (_err_cols("loo") if a.loo else []) + _err_cols("lomo")
                + [Column("points", "points")])
    # leave-one-chip-out: the rows of a chip (or of a stack on a chip) predicted by a fit without that chip
    # (`loco server`: the benchmark client's time at its own fit, the server's part, what the error bars use)
    loco_cols = [Column("loco_median", "loco median", ".1%"), Column("loco_server_median", "loco server", ".1%"),
                 Column("loco_points", "loco points")]
    sections = [
        Section("points", f"Joint calibration on {a.data_name}", a.points, cols),
        Section("by_chip", "|error| per chip (in-sample, leave-one-out, leave-one-model-out, leave-one-chip-out)",
                a.by_chip, [Column("chip", "chip"), Column("quantity", "quantity")] + err_cols + loco_cols),
        Section("by_stack", "|error| per stack", a.by_stack,
                [Column("stack", "stack"), Column("quantity", "quantity")] + err_cols + loco_cols),
        Section("by_version", "|error| per stack and engine version: pooled profile, then with the version's "
                "own entry (ver)", a.by_version,
                [Column("version", "stack@version"), Column("quantity", "quantity")] + err_cols
                + [Column("ver_in_median", "ver in median", ".1%")]
                + ([Column("ver_loo_median", "ver loo median", ".1%")] if a.loo else [])
                + [Column("ver_lomo_median", "ver lomo median", ".1%")]),
        Section("chips", "Fitted chip constants (fractions of the chip's peaks)", a.chips,
                [Column("chip", "chip")] + [Column(k, k.replace("gemm_", "GEMM "), ".3f") for k in a.gemm_classes]
                + [Column("memory", "HBM", ".3f"), Column("comm", "scale-up", ".3f")]),
        Section("stacks", "Fitted stack constants", a.stacks,
                [Column("stack", "stack"), Column("latency_s", "latency ms", _ms),
                 Column("forward_overhead_s", "forward ms", _ms), Column("ep_forward_overhead_s", "EP fwd ms", _ms),
                 Column("step_overhead_s", "step ms", _ms), Column("request_overhead_s", "request ms", _ms),
                 Column("wave_fraction", "wave", ".2f"), Column("prefill_token_budget", "budget", ",d")]),
    ]
    return Report(sections, list(a.notes), meta={"measurements": a.data_name})
