"""Commands that list and show profiles: ``models``, ``hardware``, ``show``."""

from __future__ import annotations

import typer

from .. import arithmetic as A
from ..output.report import Column, Report, Section, check_format
from ..profiles import all_hardware, all_models, dtype_bytes, get_model
from .app import FormatOption, app
from .envelope import emit


@app.command("models")
def models_cmd(fmt: str = FormatOption) -> None:
    """List the model profiles: attention mix, KV bytes per token, fixed state, parameters."""
    check_format(fmt)
    rows = []
    for name, m in sorted(all_models().items()):
        p = A.param_counts(m)
        rows.append({
            "model": name,
            "aliases": ",".join(m.aliases),
            "attention": m.attention_summary,
            "layers": m.num_layers,
            "kv_bytes_per_token": A.kv_bytes_per_token(m),
            "swa_bytes_per_token": A.swa_bytes_per_token(m),
            "fixed_state_bytes": A.fixed_state_bytes(m),
            "params_total": p.total,
            "params_active": p.active,
            "weights_dtype": m.weights_summary,
            "reconstruction": bool(m.reconstruction),
        })
    cols = [Column("model", "model"), Column("attention", "attention"),
            Column("kv_bytes_per_token", "KV B/token", ",d"),
            Column("fixed_state_bytes", "fixed state B", ",d"),
            Column("params_total", "params", lambda v: f"{v / 1e9:,.1f}B"),
            Column("params_active", "active", lambda v: f"{v / 1e9:,.1f}B"),
            Column("weights_dtype", "weights"), Column("aliases", "aliases")]
    notes = ["KV bytes per token: growing (full-attention) layers, logical bytes in the profile's KV dtype",
             "params are counted from the architecture (projections, experts, embeddings; norms omitted)"]
    recon = [n for n, m in all_models().items() if m.reconstruction]
    if recon:
        notes.append(f"reconstructed architectures (not official configs): {', '.join(sorted(recon))}")
    emit(Report([Section("models", "Model profiles", rows, cols)], notes), fmt)


@app.command("hardware")
def hardware_cmd(fmt: str = FormatOption) -> None:
    """List the chip profiles: peak FLOPS, HBM, scale-up, NIC, power, price indication."""
    check_format(fmt)
    rows = []
    for name, h in sorted(all_hardware().items()):
        rows.append({
            "chip": name,
            "display_name": h.display_name,
            "bf16_tflops": h.peak_tflops.get("bf16"),
            "fp8_tflops": h.peak_tflops.get("fp8"),
            "hbm_gb": h.hbm_gb,
            "hbm_tb_s": h.hbm_tb_s,
            "scaleup_gb_s": h.scaleup_gb_s,
            "nic_gbps": h.nic_gbps,
            "power_w": h.power_w,
            "price_usd": h.price.purchase_usd if h.price else None,
            "cloud_usd_per_hour": h.price.cloud_usd_per_hour if h.price else None,
            "calibrated": h.calibration is not None,
        })
    cols = [Column("chip", "chip"), Column("bf16_tflops", "BF16 TFLOPS", ",.0f"),
            Column("fp8_tflops", "FP8 TFLOPS", ",.0f"), Column("hbm_gb", "HBM GB", ".0f"),
            Column("hbm_tb_s", "HBM TB/s", ".2f"), Column("scaleup_gb_s", "scale-up GB/s", ".0f"),
            Column("nic_gbps", "NIC Gbps", ".0f"), Column("power_w", "power W", ".0f"),
            Column("price_usd", "price $ (indication)", ",.0f"),
            Column("cloud_usd_per_hour", "$/GPU-h (indication)", ".2f"),
            Column("calibrated", "calibrated")]
    notes = ["peak FLOPS are dense (no sparsity), per chip; instance shapes are COUNTxCHIP, e.g. 8xH200",
             "prices are labelled indications (community listings or assumed), not quotes"]
    emit(Report([Section("hardware", "Hardware profiles", rows, cols)], notes), fmt)


@app.command("show")
def show_cmd(model: str = typer.Argument(..., help="Model name or alias."),
             fmt: str = FormatOption) -> None:
    """Per-layer-kind breakdown of one model: layers, cache per token, state, parameters."""
    check_format(fmt)
    m = get_model(model)
    kvb = dtype_bytes(m.kv_dtype, m.name)
    rows = []
    for g in m.attention:
        rows.append({
            "kind": g.kind,
            "layers": g.count,
            "layer_indices": " ".join(str(i) for i in g.layers),
            "kv_bytes_per_token": int(g.count * A.kv_elements_per_token(g) * kvb) if g.rule.cache == "growing" else 0,
            "window_tokens": g.window or None,
            "window_bytes_per_token": int(g.count * A.kv_elements_per_token(g) * kvb) if g.rule.cache == "window" else 0,
            "state_bytes": int(g.count * A.recurrent_state_elements(g) * dtype_bytes(m.state_dtype, m.name)),
            "conv_state_bytes": int(g.count * A.conv_state_elements(g) * dtype_bytes(m.conv_dtype, m.name)),
            "attention_params": g.count * A.attention_params(m, g),
        })
    p = A.param_counts(m)
    parts = [{"part": k, "params": v} for k, v in (
        ("embedding", p.embedding), ("lm_head", p.lm_head), ("attention", p.attention),
        ("dense_ffn", p.dense_ffn), ("moe_routed", p.moe_routed), ("moe_shared", p.moe_shared),
        ("router", p.router), ("total", p.total), ("active_per_token", p.active))]
    if m.published_params:
        parts.append({"part": "published total / active", "params": f"{m.published_params[0] / 1e9:,.0f}B / "
                      f"{m.published_params[1] / 1e9:,.0f}B"})
    fmt_params = lambda v: f"{v / 1e9:,.2f}B" if isinstance(v, int) else str(v)  # noqa: E731
    layer_cols = [Column("kind", "kind"), Column("layers", "layers"),
                  Column("kv_bytes_per_token", "KV B/token", ",d"), Column("window_tokens", "window"),
                  Column("window_bytes_per_token", "window B/token", ",d"),
                  Column("state_bytes", "state B", ",d"), Column("conv_state_bytes", "conv state B", ",d"),
                  Column("attention_params", "attn params", lambda v: f"{v / 1e9:,.2f}B"),
                  Column("layer_indices", "layer indices (0-based)")]
    notes = [f"dtypes: weights {m.weights_summary}, KV {m.kv_dtype}, state {m.state_dtype}, conv {m.conv_dtype}"]
    notes += [f"source {k}: {v}" for k, v in m.sources.items()]
    if m.reconstruction:
        notes.insert(0, f"RECONSTRUCTION: {m.reconstruction}")
    report = Report([Section("layers", f"{m.display_name}: layers by attention kind", rows, layer_cols),
                     Section("params", "Parameters", parts, [Column("part", "part"),
                                                              Column("params", "params", fmt_params)])],
                    notes, meta={"model": m.name, "profile": m.path})
    emit(report, fmt)
