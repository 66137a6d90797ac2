"""Every command-line option, declared once: one ``typer.Option`` call per flag, one meaning per flag.

Commands use these ``Annotated`` aliases as parameter types (``model: Model = DEFAULTS.model``); the
defaults live in `prfaas_plan.planning.scenario.DEFAULTS` so the CLI and the Python API agree. Where a
command takes several values of an input (``kv --model A --model B``) it uses the same declaration with
a list type (``Models``): one flag, one help, one meaning (``tests/test_cli_flags.py`` counts them).
Choices are the `prfaas_plan.vocabulary` enums (their members are plain strings downstream). Times,
rates and sizes are text with a unit, parsed by `prfaas_plan.units` (a bare number is refused with a hint).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Optional

import typer

from ..planning.scenario import DEFAULTS
from ..units import MAX_CHIPS
from ..vocabulary import Baseline, Format, InputLevel, Mode, MoeSplit, PrefillSource, TransferPolicy
from ..vocabulary import BasisWord as Basis


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
_MODEL = typer.Option("--model", "-m", help="Model profile name or alias (repeatable where a command takes "
                                            "several; kv-throughput and validate default to every bundled model).")
Model = Annotated[str, _MODEL]
Models = Annotated[list[str], _MODEL]
OptModels = Annotated[Optional[list[str]], _MODEL]
Instance = Annotated[str, typer.Option("--instance", "-i", help="Instance shape COUNTxCHIP, e.g. 8xH20.")]
Lengths = Annotated[list[str], typer.Option("--len", "-l", help="Prompt length(s), e.g. 32k or 1k,8k (K = 1024).")]
Remote = Annotated[str, typer.Option("--remote", help="Remote prefill chips, e.g. 32xH200.")]
Local = Annotated[str, typer.Option("--local", help="Local PD chips, e.g. 64xH20.")]
InstanceChips = Annotated[int, typer.Option("--instance-chips", min=1, help="Chips per instance (both roles).")]
RemoteInstanceChips = Annotated[Optional[int], typer.Option(
    "--remote-instance-chips", min=1, help="Chips per remote prefill instance (default: --instance-chips).")]
LocalInstanceChips = Annotated[Optional[int], typer.Option(
    "--local-instance-chips", min=1, help="Chips per local PD instance (default: --instance-chips).")]
WeightDtype = Annotated[Optional[str], typer.Option(
    "--weight-dtype", help="Store every weight in this dtype for the run (e.g. fp8, int4), routed experts "
                           "included, overriding the model profile (its measured tables then no longer apply).")]
KvDtype = Annotated[Optional[str], typer.Option(
    "--kv-dtype", help="Store the KV cache in this dtype for the run (e.g. fp8), overriding the model profile.")]
LayoutFile = Annotated[Optional[str], typer.Option(
    "--layout", help="A layout YAML file (sites, pools, links; see README); replaces --remote/--local/--link.")]
Workload = Annotated[str, typer.Option(
    "--workload", "-w", help="paper (the case study's truncated log-normal), trace (the bundled Mooncake "
                             "conversation trace) or a .jsonl/.csv trace file.")]
_TPOT = typer.Option("--tpot", help="Decode SLO per output token: 25ms or 40tok/s (default 25ms).")
Tpot = Annotated[str, _TPOT]
OptTpot = Annotated[Optional[str], _TPOT]
STACK_HELP = ("Serving stack profile (stack_profiles/: sglang, vllm, trtllm, mooncake-sglang-pd, paper-sglang, "
              "paper-vllm, ...): fixed latency, per-forward and per-step overheads, prefill batching. Default sglang.")
Stack = Annotated[Optional[str], typer.Option("--stack", help=STACK_HELP)]
MOE_HELP = ("How routed experts are split: tp (every chip holds a slice of every expert) or ep (whole experts); "
            "calibrate: of the user rows without a 'moe' column.")
Moe = Annotated[MoeSplit, typer.Option("--moe", help=MOE_HELP)]
Source = Annotated[PrefillSource, typer.Option(
    "--source", help="Prefill source: auto (measured table if the model has one for this instance, else "
                     "roofline), roofline or measured.")]

# --- the link
LinkRate = Annotated[str, typer.Option("--link", help="Inter-site link line rate with a unit, e.g. 100G.")]
LinkEfficiency = Annotated[float, typer.Option("--link-efficiency", help="Goodput fraction of the line rate.")]
Rtt = Annotated[Optional[str], typer.Option("--rtt", help="Link round trip with a unit, e.g. 2ms (default 0).")]
LinkPrice = Annotated[float, typer.Option("--link-price", help="Link price, USD per Gbps-month (added to the "
                                                               "hourly cost).")]

# --- how it is modelled
ModeOpt = Annotated[Mode, typer.Option("--mode", help="exact (planning's default: expectations over the length "
                                                      "distribution) or representative (the paper's: stages at "
                                                      "E[L|L>t] and E[L|L<=t]; reproduce's default).")]
TRANSFER_HELP = ("Bytes on the link: replicated (the per-rank KV copies a TP transfer engine moves into TP "
                 "attention, as Mooncake measured), dp-attention (decode runs data-parallel attention, SGLang "
                 "--enable-dp-attention: one copy) or logical (one copy, the paper's convention).")
TransferBytesOpt = Annotated[Optional[TransferPolicy], typer.Option(
    "--transfer-bytes", help=TRANSFER_HELP + " Default: replicated (simulate: logical with --inputs paper).")]
Inputs = Annotated[InputLevel, typer.Option(
    "--inputs", help="predicted (our performance model) or paper (prfaas-1t only: the paper's H200 profile "
                     "and back-solved H20 inputs).")]
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
BasisOpt = Annotated[Optional[Basis], typer.Option(
    "--basis", help="What the homogeneous baseline of the verdict holds equal to PrfaaS-PD: capex (what its "
                    "purchase price buys; the default when every chip has a price), rental (what its cloud $/hour "
                    "rents), chips (its chip count; the default otherwise) or instances (its instance count); "
                    "cost = capex. The same in size, compare and sweep.")]
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
OptModel = Annotated[Optional[str], _MODEL]
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

DEFAULT_MODEL = DEFAULTS.model
