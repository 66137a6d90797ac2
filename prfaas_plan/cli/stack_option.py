"""The ``--stack`` option shared by every command that predicts performance, and its notes."""

from __future__ import annotations

import typer

STACK_HELP = ("Serving stack profile (stack_profiles/: sglang, vllm, trtllm, mooncake-sglang-pd, paper-sglang, "
              "paper-vllm, ...): fixed latency, per-forward and per-step overheads, prefill batching. Default sglang.")
StackOption = typer.Option(None, "--stack", help=STACK_HELP)


def stack_notes(stack: str | None, inputs: str = "predicted") -> list[str]:
    """Notes naming the stack in effect and where its numbers come from (a default is announced)."""
    from ..profiles import DEFAULT_STACK, get_stack

    prof = get_stack(stack)
    notes = [f"default stack: {DEFAULT_STACK} (pass --stack to choose another serving stack)"] if stack is None else []
    if inputs == "paper":
        return notes + [f"stack {prof.name} not used for --inputs paper: the paper's tables already hold its engine"]
    return notes + [prof.describe()]
