"""The ``--stack`` option shared by every command that predicts performance (its notes:
`prfaas_plan.planning.rates.stack_notes`)."""

from __future__ import annotations

import typer

STACK_HELP = ("Serving stack profile (stack_profiles/: sglang, vllm, trtllm, mooncake-sglang-pd, paper-sglang, "
              "paper-vllm, ...): fixed latency, per-forward and per-step overheads, prefill batching. Default sglang.")
StackOption = typer.Option(None, "--stack", help=STACK_HELP)

