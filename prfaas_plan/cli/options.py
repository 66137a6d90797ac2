"""Every command-line option, declared once: the same name, meaning, type and default in every command.

Commands use these ``Annotated`` aliases as parameter types (``model: Model = DEFAULTS.model``); the
defaults live in `prfaas_plan.planning.scenario.DEFAULTS` so the CLI and the Python API agree. Choices
are `StrEnum`s (their members are plain strings downstream). Times, rates and sizes are text with a
unit, parsed by `prfaas_plan.units` (a bare number is refused with a hint).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Optional

import typer

from ..planning.scenario import DEFAULTS


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


class Mode(StrEnum):
    representative = "representative"
    exact = "exact"


class InputLevel(StrEnum):
    predicted = "predicted"
    paper = "paper"


class TransferPolicy(StrEnum):
    replicated = "replicated"
    logical = "logical"
    dp_attention = "dp-attention"


class Basis(StrEnum):
    capex = "capex"
    rental = "rental"
    instances = "instances"
    cost = "cost"   # the earlier name of capex


class Baseline(StrEnum):
    prfaas = "prfaas"
    homogeneous = "homogeneous"
    naive = "naive"


class SchedulerName(StrEnum):
    static = "static"
    threshold = "threshold"
    adaptive = "adaptive"


# --- output
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format: table, json or csv.")]
Plot = Annotated[Optional[str], typer.Option("--plot", help="Also write a plot to FILE.png or FILE.svg.")]

# --- what is planned
Model = Annotated[str, typer.Option("--model", "-m", help="Model profile name or alias.")]
Remote = Annotated[str, typer.Option("--remote", help="Remote prefill chips, e.g. 32xH200.")]
Local = Annotated[str, typer.Option("--local", help="Local PD chips, e.g. 64xH20.")]
InstanceChips = Annotated[int, typer.Option("--instance-chips", min=1, help="Chips per instance (both roles).")]
RemoteInstanceChips = Annotated[Optional[int], typer.Option(
    "--remote-instance-chips", min=1, help="Chips per remote prefill instance (default: --instance-chips).")]
LocalInstanceChips = Annotated[Optional[int], typer.Option(
    "--local-instance-chips", min=1, help="Chips per local PD instance (default: --instance-chips).")]
WeightDtype = Annotated[Optional[str], typer.Option(
    "--weight-dtype", help="Store every weight in this dtype for the run (e.g. fp8), overriding the model profile.")]
KvDtype = Annotated[Optional[str], typer.Option(
    "--kv-dtype", help="Store the KV cache in this dtype for the run (e.g. fp8), overriding the model profile.")]
LayoutFile = Annotated[Optional[str], typer.Option(
    "--layout", help="A layout YAML file (sites, pools, links; see README); replaces --remote/--local/--link.")]
Workload = Annotated[str, typer.Option(
    "--workload", "-w", help="paper (the case study's truncated log-normal), trace (the bundled Mooncake "
                             "conversation trace) or a .jsonl/.csv trace file.")]
Tpot = Annotated[str, typer.Option("--tpot", help="Decode SLO per output token: 25ms or 40tok/s.")]

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
TransferBytesOpt = Annotated[TransferPolicy, typer.Option("--transfer-bytes", help=TRANSFER_HELP)]
SimTransferBytes = Annotated[Optional[TransferPolicy], typer.Option(
    "--transfer-bytes", help=TRANSFER_HELP + " Default: replicated, logical with --inputs paper.")]
Inputs = Annotated[InputLevel, typer.Option(
    "--inputs", help="predicted (our performance model) or paper (prfaas-1t only: the paper's H200 profile "
                     "and back-solved H20 inputs).")]
Threshold = Annotated[Optional[str], typer.Option(
    "--threshold", help="Evaluate this routing threshold t in uncached tokens (e.g. 16k) instead of "
                        "optimizing it.")]

# --- follow-up questions
Samples = Annotated[int, typer.Option("--samples", min=0, help="Error-bar samples of the calibration errors "
                                                             "(P10/P50/P90 of Lambda, gain, t, egress); 0: off.")]
LinkDegraded = Annotated[Optional[str], typer.Option(
    "--link-degraded", help="Also show the plan at a lower link rate (e.g. 10G): the threshold to switch to, "
                            "the throughput kept and the TTFT, instance counts unchanged.")]
Load = Annotated[Optional[float], typer.Option(
    "--load", help="Offered load as a fraction of Lambda_max (e.g. 0.8): latency with queueing.")]
TtftSlo = Annotated[Optional[str], typer.Option(
    "--ttft", help="TTFT SLO such as p90<4s, p95<3s or mean<2s: the highest request rate within it.")]
TargetRate = Annotated[Optional[float], typer.Option(
    "--target-rate", help="Requests/s to serve at least cost: sizes the cheapest cluster.")]
SizeLink = Annotated[Optional[float], typer.Option(
    "--size-link", help="Also find the smallest link keeping this fraction (e.g. 0.95) of the throughput.")]
Verify = Annotated[bool, typer.Option("--verify", help="Cross-check the grid optimum with the linear program "
                                                       "and report whether threshold routing is optimal.")]
BasisOpt = Annotated[Optional[Basis], typer.Option(
    "--basis", help="Budget of the equal-budget homogeneous baseline: capex (what PrfaaS-PD's purchase price "
                    "buys; the default when the chips have prices), rental (what its cloud $/hour rents) or "
                    "instances (no budget row); cost = capex.")]
CompareRate = Annotated[Optional[float], typer.Option(
    "--rate", help="Run every layout at this offered rate, requests/s (instead of --load).")]
CompareLoad = Annotated[Optional[float], typer.Option(
    "--load", help="Run every layout at this fraction of PrfaaS-PD's Lambda_max (one common req/s).")]
Strict = Annotated[bool, typer.Option("--strict", help="Exit 1 on any figure out of its band, known gap or not.")]

# --- simulation
BaselineOpt = Annotated[Baseline, typer.Option(
    "--baseline", help="Layout kind built from --remote/--local: prfaas, homogeneous (as many local-chip "
                       "instances in total) or naive (all prefill remote). Ignored with --layout.")]
Trace = Annotated[Optional[str], typer.Option("--trace", help="Mooncake JSONL trace (timestamp ms, input_length, "
                                                              "output_length, hash_ids).")]
Synthetic = Annotated[Optional[str], typer.Option(
    "--synthetic", help="Synthetic workload: 'paper' (truncated log-normal mu 9.90 sigma 1.00 on [128, 128000], "
                        "output 1024). Default when no --trace.")]
Rate = Annotated[Optional[float], typer.Option("--rate", help="Offered load, requests/s (a trace is time-scaled).")]
Duration = Annotated[Optional[str], typer.Option(
    "--duration", help="Arrival window with a unit, e.g. 1800s or 30min (default: 30 min synthetic, the "
                       "whole trace).")]
SchedulerOpt = Annotated[SchedulerName, typer.Option("--scheduler", help="static, threshold (short-term rule only) or adaptive (dual-timescale).")]
Rebalance = Annotated[str, typer.Option("--rebalance", help="Long-term rule period (adaptive), e.g. 5min.")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the random draws.")]
PrefillInstances = Annotated[Optional[int], typer.Option(
    "--prefill-instances", help="Local instances that prefill; the rest decode (default: grid search).")]

DEFAULT_MODEL = DEFAULTS.model
