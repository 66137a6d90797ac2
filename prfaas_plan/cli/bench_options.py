"""Options shared by the commands that read benchmark outputs (``calibrate``, ``check``): what a file does
not record about the run (`prfaas_plan.performance.bench_import.Tags`)."""

from __future__ import annotations

import typer

ChipOption = typer.Option(None, "--chip", help="Instance the runs measured, COUNTxCHIP (e.g. 8xH20), for files "
                                               "that do not record it.")
TpOption = typer.Option(None, "--tp", help="Tensor parallel size of the runs (must equal the instance's chips).")
ModelOption = typer.Option(None, "--model", "-m", help="Model profile of the runs, when the file's model name "
                                                       "matches none.")
ConcurrencyOption = typer.Option(None, "--concurrency", help="Closed-loop concurrency of the runs, when the file "
                                                             "does not record it.")
BenchStackOption = typer.Option(None, "--stack", help="Serving stack of the runs, NAME or NAME@VERSION "
                                                      "(e.g. sglang@0.5.9), when the file does not record it.")
