"""What the profile commands print (``models``, ``hardware``, ``show``, ``model import``): each profile's
cache bytes, fixed state and parameter counts from `prfaas_plan.arithmetic`, as rows named with their
units (bytes, parameters, TFLOPS, GB, GB/s, Gbps, W, USD). ``docs/methods.md`` section 1 defines the sums.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelsAnswer:
    """One row per bundled or added model profile, sorted by name; ``reconstructions`` names the profiles
    whose architecture is reconstructed rather than an official config."""

    rows: list[dict]
    reconstructions: list[str]


@dataclass(frozen=True)
class ShowAnswer:
    """One model by attention kind (``layers``: bytes per token, state bytes, parameters) and its
    parameter count by part (``params``)."""

    model: object   # the ModelProfile shown
    layers: list[dict]
    params: list[dict]


def answer_models() -> ModelsAnswer:
    """Every model profile: attention mix, KV bytes per token, fixed state bytes, parameters."""
    from .. import arithmetic as A
    from ..profiles import all_models

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
    return ModelsAnswer(rows, sorted(n for n, m in all_models().items() if m.reconstruction))


def answer_hardware() -> list[dict]:
    """Every chip profile: peak TFLOPS per dtype, HBM GB and TB/s, scale-up GB/s, NIC Gbps, power W, prices, and
    the held-out TTFT and TPOT error its plans' error bars take (`analytic.uncertainty.expected_error`: fractions,
    with their basis)."""
    from ..analytic.uncertainty import expected_error
    from ..performance.constants import chip_constants
    from ..profiles import all_hardware

    def errors(h) -> dict:
        constants = chip_constants(h)
        ttft, ttft_basis = expected_error(constants, ("ttft", "busy"))
        tpot, tpot_basis = expected_error(constants, ("tpot",))
        return {"ttft_error": ttft, "ttft_error_basis": ttft_basis, "tpot_error": tpot, "tpot_error_basis": tpot_basis}

    return [{
        "chip": name,
        "display_name": h.display_name,
        "bf16_tflops": h.peak_tflops.get("bf16"),
        "fp8_tflops": h.peak_tflops.get("fp8"),
        "hbm_gb": h.hbm_gb,
        "hbm_tb_s": h.hbm_tb_s,
        "scaleup_gb_s": h.scaleup_gb_s,
        "scaleup_domain": h.scaleup_domain,
        "nic_gbps": h.nic_gbps,
        "power_w": h.power_w,
        "price_usd": h.price.purchase_usd if h.price else None,
        "cloud_usd_per_hour": h.price.cloud_usd_per_hour if h.price else None,
        "calibrated": h.calibration is not None,
        **errors(h),
    } for name, h in sorted(all_hardware().items())]


def answer_show(model: str) -> ShowAnswer:
    """Per-layer-kind bytes (logical, one copy) and parameters of one model, and its parameters by part."""
    from .. import arithmetic as A
    from ..profiles import dtype_bytes, get_model

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
    return ShowAnswer(m, rows, parts)


def import_summary(m) -> list[str]:
    """A few lines on what an imported profile implies for the cache that crosses the link (bytes)."""
    from .. import arithmetic as A

    lines = [f"{m.name} ({m.display_name}): {m.attention_summary}",
             f"KV cache {A.kv_bytes_per_token(m):,} B/token ({m.kv_dtype})",
             f"fixed state {A.fixed_state_bytes(m):,} B/request"
             + (f" ({m.state_dtype} state, {m.conv_dtype} conv)" if A.fixed_state_bytes(m) else "")]
    for g in m.cached_as("window"):
        lines.append(f"sliding window {A.swa_bytes_per_token(m):,} B/token, capped at {g.window} tokens")
    return lines
