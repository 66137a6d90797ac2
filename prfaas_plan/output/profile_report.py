"""Reports of the profile and cache answers (`prfaas_plan.planning.profiles`, ``kv``, ``validate``):
the table columns that show each figure and the notes. Nothing here computes a figure."""

from __future__ import annotations

from dataclasses import asdict

from .report import Column, Report, Section


def _gparams(digits: int):
    return lambda v: f"{v / 1e9:,.{digits}f}B"


def models_report(answer) -> Report:
    """`planning.ModelsAnswer` as the ``models`` table."""
    cols = [Column("model", "model"), Column("attention", "attention"),
            Column("kv_bytes_per_token", "KV B/token", ",d"),
            Column("fixed_state_bytes", "fixed state B", ",d"),
            Column("params_total", "params", _gparams(1)),
            Column("params_active", "active", _gparams(1)),
            Column("weights_dtype", "weights"), Column("aliases", "aliases")]
    notes = ["KV bytes per token: growing (full-attention) layers, logical bytes in the profile's KV dtype",
             "params are counted from the architecture (projections, experts, embeddings; norms omitted)"]
    if answer.reconstructions:
        notes.append(f"reconstructed architectures (not official configs): {', '.join(answer.reconstructions)}")
    return Report([Section("models", "Model profiles", answer.rows, cols)], notes)


def hardware_report(rows: list[dict]) -> Report:
    """`planning.answer_hardware` rows as the ``hardware`` table."""
    cols = [Column("chip", "chip"), Column("bf16_tflops", "BF16 TFLOPS", ",.0f"),
            Column("fp8_tflops", "FP8 TFLOPS", ",.0f"), Column("hbm_gb", "HBM GB", ".0f"),
            Column("hbm_tb_s", "HBM TB/s", ".2f"), Column("scaleup_gb_s", "scale-up GB/s", ".0f"),
            Column("scaleup_domain", "scale-up chips", "d"), Column("nic_gbps", "NIC Gbps", ".0f"),
            Column("power_w", "power W", ".0f"),
            Column("price_usd", "price $ (indication)", ",.0f"),
            Column("cloud_usd_per_hour", "$/GPU-h (indication)", ".2f"),
            Column("calibrated", "calibrated"),
            Column("ttft_error", "TTFT error", lambda v: "-" if v is None else f"{v:.0%}"),
            Column("ttft_error_basis", "TTFT error from")]
    notes = ["peak FLOPS are dense (no sparsity), per chip; instance shapes are COUNTxCHIP, e.g. 8xH200",
             "prices are labelled indications (community listings or assumed), not quotes",
             "TTFT error: the held-out median |error| a plan's error bars take for the chip, over every stack "
             "(leave-one-model-out where its calibration records one; leave-one-chip-out of the calibrated chips, "
             "the server's part, for a chip calibrated on fewer than 5 rows or none); TPOT's is in JSON/CSV"]
    return Report([Section("hardware", "Hardware profiles", rows, cols)], notes)


def show_report(answer) -> Report:
    """`planning.ShowAnswer` as the ``show`` tables."""
    m = answer.model
    fmt_params = lambda v: f"{v / 1e9:,.2f}B" if isinstance(v, int) else str(v)  # noqa: E731
    layer_cols = [Column("kind", "kind"), Column("layers", "layers"),
                  Column("kv_bytes_per_token", "KV B/token", ",d"), Column("window_tokens", "window"),
                  Column("window_bytes_per_token", "window B/token", ",d"),
                  Column("state_bytes", "state B", ",d"), Column("conv_state_bytes", "conv state B", ",d"),
                  Column("attention_params", "attn params", _gparams(2)),
                  Column("layer_indices", "layer indices (0-based)")]
    notes = [f"dtypes: weights {m.weights_summary}, KV {m.kv_dtype}, state {m.state_dtype}, conv {m.conv_dtype}"]
    notes += [f"source {k}: {v}" for k, v in m.sources.items()]
    if m.reconstruction:
        notes.insert(0, f"RECONSTRUCTION: {m.reconstruction}")
    return Report([Section("layers", f"{m.display_name}: layers by attention kind", answer.layers, layer_cols),
                   Section("params", "Parameters", answer.params, [Column("part", "part"),
                                                                   Column("params", "params", fmt_params)])],
                  notes, meta={"model": m.name, "profile": m.path})


def kv_report(breakdowns: list, tp: int) -> Report:
    """`planning.KvBreakdown` records (one per model and length) as the ``kv`` table."""
    rows = [dict(asdict(b), s_kv_bytes_per_token=b.s_kv_bytes_per_token, kv_reduction_x=b.kv_reduction_x)
            for b in breakdowns]
    mib = lambda v: f"{v / 2**20:,.1f}"  # noqa: E731
    cols = [Column("model", "model"), Column("len_tokens", "len", ",d"),
            Column("growing_kv_bytes", "growing KV MiB", mib), Column("window_kv_bytes", "SWA MiB", mib),
            Column("recurrent_state_bytes", "state MiB", mib), Column("conv_state_bytes", "conv MiB", mib),
            Column("s_kv_bytes", "S_kv MiB", mib), Column("s_kv_bytes_per_token", "B/token", ",.0f"),
            Column("dense_equivalent_bytes", "dense-equiv MiB", mib),
            Column("kv_reduction_x", "reduction", ".1f")]
    notes = ["S_kv: what must reach decode for an uncached prompt: growing KV x l + SWA capped at its window "
             "+ recurrent and conv states",
             "dense-equivalent: every layer as the model's full-attention kind; reduction = dense / S_kv",
             "lengths: K = 1024 tokens"]
    notes.append("logical bytes (one copy)" if tp == 1 else
                 f"bytes a TP{tp} transfer moves (KV heads replicated when TP > KV heads; MLA latent on every rank)")
    return Report([Section("kv", "KV cache per request", rows, cols)], notes)


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "0" if v == 0 else f"{v:.2e}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def validate_report(answer) -> Report:
    """`planning.ValidateAnswer` as the per-model check tables and a summary."""
    cols = [Column("check", "check"), Column("case", "case"), Column("reference", "reference", _num),
            Column("analytical", "analytical", _num), Column("unit", "unit"),
            Column("tolerance", "tolerance", lambda t: t if isinstance(t, str) else _num(t)),
            Column("result", "result"), Column("detail", "detail")]
    sections = [Section(v.model, f"{v.model}: reference vs analytical (scaled: {v.scaled.num_layers} layers, "
                                 f"{v.scaled.attention_summary}, hidden {v.scaled.hidden_size})", v.rows, cols)
                for v in answer.results]
    sections.append(Section("summary", "Validation summary", answer.summary, [
        Column("model", "model"), Column("scaled_attention", "scaled attention"),
        Column("scaled_layers", "layers"), Column("scaled_hidden", "hidden"), Column("checks", "checks"),
        Column("failed", "failed"), Column("status", "status")]))
    notes = [
        "scaled models keep each profile's attention kinds, layer pattern, window, conv kernel and dtypes; "
        "dimensions are divided down (prfaas_plan.reference.model); the analytical functions are evaluated "
        "on the scaled profile",
        f"lengths in tokens; KV blocks of 16 tokens; float64 arithmetic; equivalence tolerance "
        f"{answer.tolerance:g} relative (max |difference| / max |value|)",
        "bytes are measured on the stored arrays and the serialized payload (tensor data; framing excluded): "
        "bf16 is stored as real bfloat16 bit patterns (2 B), fp32 as 4 B, fp8 as e4m3 (1 B)",
        "FLOPs: 2 per multiply-add, 1 per decay multiply; element-wise work (softmax, norms, gates) is not "
        "counted, as in prfaas_plan.arithmetic; linear-attention cores match exactly in recurrent form, the "
        "chunked form within the stated bound",
        "SWA: the cache keeps the last min(l, window) tokens as engines do (decode needs window - 1)",
        "MLA prefill after a cached prefix decompresses the cached latents (naive form): reported, not in "
        "the analytical count",
    ]
    return Report(sections, notes, meta={"seed": answer.seed, "layers": answer.layers,
                                         "all_passed": answer.all_passed})
