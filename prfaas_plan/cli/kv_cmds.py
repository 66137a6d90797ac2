"""``prfaas-plan kv``: what a request's cache weighs, by part, per length."""

from __future__ import annotations

import typer

from ..output.report import Column, Report, Section
from ..units import MAX_CHIPS, parse_lengths
from .app import app
from .envelope import emit
from .options import FormatOpt


@app.command("kv")
def kv_cmd(
    model: list[str] = typer.Option(..., "--model", "-m", help="Model name or alias (repeatable)."),
    length: list[str] = typer.Option(["1k", "8k", "32k", "128k"], "--len", "-l",
                                     help="Uncached prompt length(s), e.g. 32k or 1k,8k (K = 1024)."),
    tp: int = typer.Option(1, "--tp", min=1, max=MAX_CHIPS, help="Tensor-parallel ranks: >1 gives the bytes a "
                           "TP transfer moves when KV heads are replicated across ranks."),
    fmt: FormatOpt = "table",
) -> None:
    """S_kv(l) and its parts per length, against a dense model of the same depth."""
    from dataclasses import asdict

    from ..planning.kv import kv_breakdown

    rows = [dict(asdict(b), s_kv_bytes_per_token=b.s_kv_bytes_per_token, kv_reduction_x=b.kv_reduction_x)
            for b in kv_breakdown(model, parse_lengths(length, "--len"), tp)]
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
    emit(Report([Section("kv", "KV cache per request", rows, cols)], notes), fmt)
