"""Every command-line option, declared once: one ``typer.Option`` call per flag, one meaning per flag.

Commands use these ``Annotated`` aliases as parameter types (``model: Model = DEFAULTS.model``). The
planning inputs' options (``--model``, ``--link``, ...) are generated from the question's fields
(`prfaas_plan.planning.question.FIELDS`, by `prfaas_plan.cli.question_options`): their help, type and
default are declared there, once, so the CLI and the Python API agree. Where a
command takes several values of an input (``kv --model A --model B``) it uses the same declaration with
a list type (``Models``): one flag, one help, one meaning (``tests/test_cli_flags.py`` counts them).
Choices are the `prfaas_plan.vocabulary` enums (their members are plain strings downstream). Times,
rates and sizes are text with a unit, parsed by `prfaas_plan.units` (a bare number is refused with a hint).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Optional

import typer

from ..units import MAX_CHIPS
from ..vocabulary import Baseline, Format, MoeSplit, PrefillSource
from .question_options import field_option


class SchedulerName(StrEnum):
    static = "static"
    threshold = "threshold"
    adaptive = "adaptive"


# --- output
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format: table, json or csv.")]
Plot = Annotated[Optional[str], typer.Option(
    "--plot", help="Also write a plot to FILE.png or FILE.svg (size, compare, reproduce: throughput vs threshold; "
                   "simulate: the run over time; sweep: the Pareto front and one-parameter sensitivities).")]
_OUTPUT = typer.Option("--output", "-o", help="Where the command writes: sweep its results file (.parquet or .csv, "
                                              "resumed if present), report the HTML page, calibrate a folder of "
                                              "calibrated chip and stack profiles (use it with --profiles), model "
                                              "import the profile YAML.")
Output = Annotated[str, _OUTPUT]
OptOutput = Annotated[Optional[str], _OUTPUT]
NoProgress = Annotated[bool, typer.Option("--no-progress", help="No progress bar (it goes to stderr when that "
                                                                "is a terminal).")]
MaxPoints = Annotated[Optional[int], typer.Option(
    "--max-points", help="Refuse a spec of more points than this (default 100,000; the refusal gives the size "
                         "estimate).")]
AllowOversubscribe = Annotated[bool, typer.Option(
    "--allow-oversubscribe", help="Allow more than 4 local workers per core.")]

# --- what is planned
Model = field_option("model")
Models = field_option("model", listed=True)
OptModels = field_option("model", default=None, listed=True)
OptModel = field_option("model", default=None)
Instance = Annotated[str, typer.Option("--instance", "-i", help="Instance shape COUNTxCHIP, e.g. 8xH20.")]
Lengths = Annotated[list[str], typer.Option("--len", "-l", help="Prompt length(s), e.g. 32k or 1k,8k (K = 1024).")]
Remote = field_option("remote")
Local = field_option("local")
InstanceChips = field_option("instance_chips")
RemoteInstanceChips = field_option("remote_instance_chips")
LocalInstanceChips = field_option("local_instance_chips")
WeightDtype = field_option("weight_dtype")
KvDtype = field_option("kv_dtype")
LayoutFile = Annotated[Optional[str], typer.Option(
    "--layout", help="A layout YAML file (sites, pools, links; see README); replaces --remote/--local/--link.")]
Workload = field_option("workload")
Tpot = field_option("tpot")
OptTpot = field_option("tpot", default=None)
Stack = field_option("stack")
MOE_HELP = ("How routed experts are split: tp (every chip holds a slice of every expert) or ep (whole experts); "
            "calibrate: of the user rows without a 'moe' column.")
Moe = Annotated[MoeSplit, typer.Option("--moe", help=MOE_HELP)]
Source = Annotated[PrefillSource, typer.Option(
    "--source", help="Prefill source: auto (measured table if the model has one for this instance, else "
                     "roofline), roofline or measured.")]

# --- the link

LinkRate = field_option("link")
LinkEfficiency = field_option("link_efficiency")
Rtt = field_option("rtt")
LinkPrice = field_option("link_price")

# --- how it is modelled
ModeOpt = field_option("mode")
TransferBytesOpt = field_option("transfer_bytes", default=None)
Inputs = field_option("inputs")
_THRESHOLD = typer.Option("--threshold", "-t", help="Routing threshold t in uncached tokens, e.g. 16k "
                                                    "(K = 1024): size and simulate evaluate it instead of "
                                                    "optimizing it; workload describe takes several (8k,16k).")
Threshold = Annotated[Optional[str], _THRESHOLD]
Thresholds = Annotated[list[str], _THRESHOLD]

# --- follow-up questions
Samples = Annotated[int, typer.Option("--samples", min=0, help="Error-bar samples of the calibration errors "
                                                             "(P10/P50/P90 of Lambda, gain, t, egress); 0: off.")]
LinkDegraded = Annotated[Optional[str], typer.Option(
    "--link-degraded", help="Also show the plan at a lower link rate (e.g. 10G): the threshold to switch to, "
                            "the throughput kept and the TTFT, instance counts unchanged.")]
Load = Annotated[Optional[float], typer.Option(
    "--load", help="Offered load as a fraction of Lambda_max (e.g. 0.8): latency with queueing (compare: of "
                   "PrfaaS-PD's Lambda_max, every layout at that one req/s).")]
TtftSlo = Annotated[Optional[str], typer.Option(
    "--ttft", help="TTFT SLO such as p90<4s, p95<3s or mean<2s: the highest request rate within it.")]
TargetRate = Annotated[Optional[float], typer.Option(
    "--target-rate", help="Requests/s to serve at least cost: sizes the cheapest cluster.")]
SizeLink = Annotated[Optional[float], typer.Option(
    "--size-link", help="Also find the smallest link keeping this fraction (e.g. 0.95) of the throughput.")]
SensitivityOpt = Annotated[bool, typer.Option(
    "--sensitivity", help="Rank what moves the gain most (each calibrated input at its own P10/P90, each deployment "
                          "choice left at its default -- --stack, --transfer-bytes, --mode -- at its alternatives) "
                          "and spread the error bars over those choices too.")]
Verify = Annotated[bool, typer.Option("--verify", help="Cross-check the grid optimum with the linear program "
                                                       "and report whether threshold routing is optimal.")]
BasisOpt = field_option("basis")
Strict = Annotated[bool, typer.Option("--strict", help="Any miss fails: exit 1 on any figure out of its band, "
                                                       "known gap or not (the same as --fail-on any).")]


class FailOnWord(StrEnum):
    unexplained = "unexplained"
    any = "any"


FailOn = Annotated[Optional[FailOnWord], typer.Option(
    "--fail-on", help="Which misses exit 1, for CI: unexplained (the default: a figure out of its band with no "
                      "quantified known gap) or any (every figure out of its band, as --strict).")]

# --- simulation
BaselineOpt = Annotated[Baseline, typer.Option(
    "--baseline", help="Layout kind built from --remote/--local: prfaas, homogeneous (as many local-chip "
                       "instances in total) or naive (all prefill remote). Ignored with --layout.")]
Trace = Annotated[Optional[str], typer.Option(
    "--trace", help="A trace file: Mooncake JSONL (timestamp ms, input_length, output_length, hash_ids) or CSV "
                    "(as --workload FILE).")]
Synthetic = Annotated[Optional[str], typer.Option(
    "--synthetic", help="Synthetic workload: 'paper' (truncated log-normal mu 9.90 sigma 1.00 on [128, 128000], "
                        "output 1024). Default when no --trace.")]
Rate = Annotated[Optional[float], typer.Option(
    "--rate", help="Offered rate, requests/s, instead of --load (simulate: a trace is time-scaled to it; "
                   "compare: every layout at it).")]
Duration = Annotated[Optional[str], typer.Option(
    "--duration", help="Arrival window with a unit, e.g. 1800s or 30min (default: 30 min synthetic, the "
                       "whole trace).")]
SchedulerOpt = Annotated[SchedulerName, typer.Option("--scheduler", help="static, threshold (short-term rule only) or adaptive (dual-timescale).")]
Rebalance = Annotated[str, typer.Option("--rebalance", help="Long-term rule period (adaptive), e.g. 5min.")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the random draws (error-bar samples, synthetic "
                                                   "arrivals, validate's random weights and tokens).")]
# calibrate: what the measured user rows ran, where a row has no column for it (not what to plan with)
RowStack = Annotated[Optional[str], typer.Option("--row-stack", help="Stack of user rows without a 'stack' column.")]
RowWeightDtype = Annotated[Optional[str], typer.Option(
    "--row-weight-dtype", help="Weight dtype of user rows without a 'weight_dtype' column.")]
# benchmark files (check, calibrate --measurements): what a file does not record about its runs
Chip = Annotated[Optional[str], typer.Option("--chip", help="Instance the benchmark runs measured, COUNTxCHIP "
                                             "(e.g. 8xH20), for files that do not record it.")]
_TP = typer.Option("--tp", min=1, max=MAX_CHIPS, help="Tensor-parallel ranks. kv: >1 gives the bytes a TP transfer "
                   "moves when KV heads are replicated across ranks; check/calibrate: the runs' TP (must equal "
                   "the instance's chips).")
Tp = Annotated[int, _TP]
OptTp = Annotated[Optional[int], _TP]
Concurrency = Annotated[Optional[int], typer.Option(
    "--concurrency", min=1, help="Closed-loop benchmark concurrency. rates: also predict mean TTFT and TPOT at it "
                                 "(input --len, output --output-len); check/calibrate: of benchmark files that do "
                                 "not record it.")]
Measurements = Annotated[Optional[list[str]], typer.Option(
    "--measurements", help="Measurement CSV(s) (tagged model,instance,stack,len_tokens,ttft_s/tpot_s/busy_s...), "
                           "benchmark outputs (vLLM bench serve JSON, SGLang bench_serving JSONL, aiperf/genai-perf "
                           "exports, NVIDIA silicon-sample CSV) or bundled reference file names; default: every "
                           "bundled set.")]
# export
ExportTarget = Annotated[str, typer.Option("--to", help="What to write: sglang, vllm, dynamo, llm-d or k8s.")]
ExportEngine = Annotated[Optional[str], typer.Option(
    "--engine", help="Engine the Kubernetes Deployments run: sglang (default) or vllm (export --to k8s only).")]
KvBackend = Annotated[Optional[str], typer.Option(
    "--kv-backend", help="KV transfer backend: mooncake or nixl (default: mooncake for sglang and k8s, nixl for "
                         "vllm, llm-d and dynamo).")]
ModelPath = Annotated[Optional[str], typer.Option(
    "--model-path", help="Checkpoint to serve (default: the Hugging Face repository the model profile names).")]
PrefillInstances = Annotated[Optional[int], typer.Option(
    "--prefill-instances", help="Local instances that prefill; the rest decode (default: grid search).")]

