"""``prfaas-plan workload``: inspect a workload (distribution or trace) the way the planner sees it.

Other commands take a workload the same way: the ``options.Workload`` option passed to
`prfaas_plan.workload.resolve_workload`.
"""

from __future__ import annotations

from typing import Optional

import typer

from ..errors import PlanError
from ..planning.question import DEFAULTS
from ..planning.workloads import DEFAULT_BLOCK_SIZE
from ..units import MAX_TOKENS, parse_lengths
from .app import app
from .envelope import emit
from .options import FormatOpt, Thresholds, Trace, Workload

workload_app = typer.Typer(help="Workload tools: length distributions, traces, prefix-cache replay.",
                           no_args_is_help=True, rich_markup_mode=None, suggest_commands=False)
app.add_typer(workload_app, name="workload")



@workload_app.command("describe")
def describe_cmd(
    workload: Workload = DEFAULTS.workload,
    trace: Trace = None,
    prefix_cache: Optional[bool] = typer.Option(
        None, "--prefix-cache/--no-prefix-cache",
        help="Replay the trace's hash ids through an LRU prefix cache so input lengths are uncached "
             "lengths (default: on when the trace has hash ids)."),
    block_size: int = typer.Option(DEFAULT_BLOCK_SIZE, "--block-size", min=1, max=MAX_TOKENS,
                                   help="Tokens per hash id of the trace."),
    cache_blocks: Optional[int] = typer.Option(None, "--cache-blocks", min=1,
                                               help="Prefix-cache capacity in blocks (default unlimited)."),
    threshold: Thresholds = ["8k", "16k", "32k", "64k"],
    fmt: FormatOpt = "table",
) -> None:
    """Lengths (mean, P50/P90/P99), prefix hit rate, arrival rate and P(L>t), E[L|L>t], E[L|L<=t]."""
    from ..output.workload_report import describe
    from ..planning.workloads import describe_workload

    if trace is not None:
        if workload != DEFAULTS.workload:
            raise PlanError("--trace and --workload both name a workload: give one of them")
        workload = trace
    thresholds = parse_lengths(threshold, "--threshold")
    w = describe_workload(workload, prefix_cache, block_size, cache_blocks)
    emit(describe(w, thresholds), fmt)
