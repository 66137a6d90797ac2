"""Measured points to calibrate against: one tagged CSV format, plus converters for the bundled files.

Every point is tagged with what produced it: chip and count (``instance``), serving ``stack``, ``model``,
parallelism (``moe``: tp or ep over the instance's chips), precision (``weight_dtype``/``expert_dtype``
overrides of the profile) and ``concurrency``; it measures mean ``ttft_s`` and/or ``tpot_s`` at that
concurrency for ``len_tokens`` input and ``output_tokens`` output tokens, or ``busy_s``: GPU seconds per
request of a saturated prefill instance (input tokens/s turned into seconds per prompt).

Measurement CSV (``prfaas-plan calibrate --measurements FILE.csv``)
-------------------------------------------------------------------
Lines starting with ``#`` are comments. A header row names the columns (any order; unknown columns are
errors): ``model``, ``instance`` (``8xH200``), ``len_tokens``, ``stack`` (a stack profile name, or
``NAME@VERSION``: the engine version measured, which needs no entry in the profile), then at
least one of ``ttft_s`` (``latency_s`` is the same at concurrency 1), ``kv_throughput_gbps`` (converted by
``T = S_kv * 8 / (Phi * 1e9)``), ``tpot_s``, ``busy_s``; optional ``output_tokens``, ``concurrency``
(default 1), ``moe``, ``weight_dtype``, ``expert_dtype``, ``state_dtype`` (the dtype the engine kept
recurrent state in, for ``S_kv``) and ``source``.

Bundled files are recognised by their header and converted on reading (their headers cite them):

- ``nvidia_silicon_sample_subset.csv``: NVIDIA aiconfigurator 0.12 TTFT/TPOT at concurrency 4-512, stacks
  ``sglang``, ``vllm``, ``trtllm`` by backend; fp8 rows run every GEMM in fp8; int4 rows (Kimi-K2.5) keep
  routed experts in int4 (W4A16) and the rest bf16, as that checkpoint ships;
- ``paper_kv_throughput_8xh200.csv`` (PrfaaS paper Table 3): 8xH200, stack ``paper-sglang``, concurrency
  1, recurrent state in fp32 as SGLang v0.5.9 keeps it;
- ``paper_internal_1t_8xh200.csv`` (paper Table 5): prfaas-1t on 8xH200, stack ``paper-vllm``, the lengths
  as the model profile's measured table reads them;
- ``mooncake_h20_qwen3_235b_pd.csv``: Qwen3-235B on 8xH20-3e, stack ``mooncake-sglang-pd``, TTFT minus the
  KV transfer, requests one at a time;
- ``lmsys_antgroup_h20_deepseek_r1.csv``: the saturated prefill row as ``busy_s`` on 8xH20, stack
  ``antgroup-sglang-h20``; its decode rows are excluded (attention-DP16 + EP16 over two nodes with MTP
  speculative decoding: not modelled), and `load_measurements` says so.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path

from .. import arithmetic as A
from .._data import REFERENCE_DIR
from ..errors import PlanError, closest_names
from ..profiles import get_model, get_stack
from ..profiles.stack import split_stack, stack_for_run
from ..textfile import read_utf8
from ..units import parse_finite, parse_length
from ..vocabulary import MoeSplit, values
from .base import parse_instance
from .kv_throughput import with_state_dtype

PAPER_HEADER = ("model", "attention", "seq_len_tokens", "kv_throughput_gbps")
TABLE5_HEADER = ("seq_len_label", "kv_cache_mib", "prefill_latency_s", "kv_throughput_gbps")
MOONCAKE_KEYS = ("prompt_len_tokens", "ttft_ms", "transfer_ms")
NVIDIA_KEYS = ("prfaas_model", "backend", "concurrency", "ttft_ms", "tpot_ms")     # how the layout is recognised
NVIDIA_COLUMNS = NVIDIA_KEYS + ("system", "chip", "gpus", "backend_version", "precision", "moe_ep", "isl", "osl")
LMSYS_KEYS = ("phase", "gpus", "parallel", "isl", "throughput_tok_s")
PAPER_SOURCE = "arXiv 2604.15039 Table 3 (8xH200, SGLang v0.5.9)"
MOONCAKE_SOURCE = "Mooncake SGLang PD benchmark, Qwen3-235B-A22B on 8xH20-3e (TP8, bf16, no chunked prefill)"
SGLANG_STATE_DTYPE = "fp32"
GENERIC_COLUMNS = ("model", "instance", "len_tokens", "stack", "ttft_s", "latency_s", "kv_throughput_gbps",
                   "tpot_s", "busy_s", "output_tokens", "concurrency", "moe", "weight_dtype", "expert_dtype",
                   "state_dtype", "source")

PAPER_FILE = "paper_kv_throughput_8xh200.csv"
BUNDLED_FILES = ("nvidia_silicon_sample_subset.csv", PAPER_FILE, "paper_internal_1t_8xh200.csv",
                 "mooncake_h20_qwen3_235b_pd.csv", "lmsys_antgroup_h20_deepseek_r1.csv")
MAX_MEASUREMENTS = 100_000


@dataclass(frozen=True)
class Measurement:
    """One measured point (seconds, tokens); see the module docstring for the tags. At least one of
    ``ttft_s``, ``tpot_s`` and ``busy_s`` is set; ``derived`` says how a value was obtained when it was not
    measured directly."""

    model: str
    instance: str
    stack: str
    len_tokens: int
    source: str
    output_tokens: int = 0
    concurrency: int = 1
    moe: str = "tp"
    weight_dtype: str = ""
    expert_dtype: str = ""
    ttft_s: float | None = None
    tpot_s: float | None = None
    busy_s: float | None = None
    derived: str = ""
    stack_version: str = ""   # the engine version the row was measured on, where its file records one

    @property
    def run_stack(self) -> str:
        """The stack profile that predicts this row: its version's entry when the stack has one, else the
        pooled profile (`profiles.stack.stack_for_run`)."""
        return stack_for_run(self.stack, self.stack_version).name

    @property
    def chip(self) -> str:
        """The chip profile's name."""
        return parse_instance(self.instance).chip.name

    def model_profile(self):
        """The model profile as measured: its weight and expert dtypes overridden by the row's precision."""
        model = get_model(self.model)
        if not (self.weight_dtype or self.expert_dtype):
            return model
        return dataclasses.replace(model, weight_dtype=self.weight_dtype or model.weight_dtype,
                                   expert_dtype=self.expert_dtype or self.weight_dtype or model.expert_dtype,
                                   measured_prefill=())


def merge_repeats(points: list[Measurement]) -> tuple[list[Measurement], int]:
    """The points with exact repeats dropped, and how many were: a row whose tags and measured values all
    equal an earlier row's is the same run recorded twice (NVIDIA's sample lists many DeepSeek-R1 runs a
    second time as DeepSeek-V3 rows, with identical numbers), and counting it twice would weigh that
    configuration double in the fit and in the error medians. Rows that differ in any value are kept."""
    seen: set = set()
    unique = []
    for m in points:
        key = dataclasses.replace(m, source="")
        if key not in seen:
            seen.add(key)
            unique.append(m)
    return unique, len(points) - len(unique)


def latency_from_kv_throughput(model_name: str, len_tokens: int, gbps: float, state_dtype: str = "",
                               where: str = "measurement") -> tuple[float, str]:
    """``T = S_kv * 8 / (Phi * 1e9)`` seconds, and a note of the bytes used (``state_dtype`` overrides the
    profile's recurrent-state dtype, as the measuring engine stored it)."""
    model = with_state_dtype(get_model(model_name), state_dtype, f"{where}: state_dtype")
    s_kv = A.s_kv(model, len_tokens)
    note = f"from Phi {gbps:g} Gbps with S_kv {s_kv:,} B (state {model.state_dtype})"
    return s_kv * 8 / (gbps * 1e9), note


MAX_LATENCY_S = 1e5  # a prefill measured in more than a day is not a prefill measurement


def _number(row: dict, key: str, where: str, cast=float):
    """A positive finite number from a CSV cell; ``cast=int`` also requires a whole number of at most
    `units.MAX_TOKENS` (lengths, GPU counts)."""
    if cast is int:
        text = str(row.get(key, "")).strip()
        if not text.isdigit():
            raise PlanError(f"{where}: column '{key}' must be a whole number, not {row.get(key)!r}")
        return parse_length(text, f"{where}: column '{key}'")
    return parse_finite(row.get(key), f"{where}: column '{key}'", positive=True)


def _optional(row: dict, key: str, where: str, cast=float):
    return _number(row, key, where, cast) if row.get(key) else None


def _generic(row: dict, where: str, default_source: str) -> Measurement:
    for key in ("model", "instance", "len_tokens", "stack"):
        if not row.get(key):
            raise PlanError(f"{where}: missing column '{key}'")
    try:
        model = get_model(row["model"]).name
    except PlanError as exc:
        raise PlanError(f"{where}: {exc}") from None
    parse_instance(row["instance"], f"{where}: instance")
    stack_name, version = split_stack(row["stack"])   # a measured version needs no entry of its own
    stack = get_stack(stack_name).name
    length = _number(row, "len_tokens", where, int)
    moe = row.get("moe") or "tp"
    if moe not in values(MoeSplit):
        raise PlanError(f"{where}: moe must be tp or ep, not {moe!r}")
    ttft, derived = _optional(row, "ttft_s", where) or _optional(row, "latency_s", where), ""
    if ttft is None and row.get("kv_throughput_gbps"):
        ttft, derived = latency_from_kv_throughput(model, length, _number(row, "kv_throughput_gbps", where),
                                                   (row.get("state_dtype") or "").lower(), where)
    tpot, busy = _optional(row, "tpot_s", where), _optional(row, "busy_s", where)
    ttft_column = "ttft_s" if row.get("ttft_s") else "latency_s"
    for column, value in ((ttft_column, ttft), ("tpot_s", tpot), ("busy_s", busy)):
        if value is not None and value > MAX_LATENCY_S:
            raise PlanError(f"{where}: column '{column}' {value:g} s is more than {MAX_LATENCY_S:g} s")
    if ttft is None and tpot is None and busy is None:
        raise PlanError(f"{where}: each row needs ttft_s (or latency_s / kv_throughput_gbps), tpot_s or busy_s")
    output = _optional(row, "output_tokens", where, int) or 0
    if tpot is not None and output < 2:
        raise PlanError(f"{where}: tpot_s needs output_tokens >= 2")
    return Measurement(model, row["instance"], stack, length, row.get("source") or default_source, output,
                       _optional(row, "concurrency", where, int) or 1, moe, (row.get("weight_dtype") or "").lower(),
                       (row.get("expert_dtype") or "").lower(), ttft, tpot, busy, derived, version)


def _nvidia(row: dict, where: str) -> Measurement:
    missing = [k for k in NVIDIA_COLUMNS if row.get(k) in (None, "")]
    if missing:
        raise PlanError(f"{where}: NVIDIA silicon-sample row without column '{missing[0]}' "
                        f"(the layout needs {', '.join(NVIDIA_COLUMNS)})")
    int4 = row["precision"] == "int4"
    version = "" if row["backend_version"] == "unrecorded" else row["backend_version"]
    return dataclasses.replace(_nvidia_row(row, int4, where), stack_version=version)


def _nvidia_row(row: dict, int4: bool, where: str) -> Measurement:
    return _generic({"model": row["prfaas_model"], "instance": f"{row['gpus']}x{row['chip']}",
                     "stack": row["backend"], "len_tokens": row["isl"], "output_tokens": row["osl"],
                     "concurrency": row["concurrency"], "moe": "ep" if _number(row, "moe_ep", where, int) > 1 else "tp",
                     "weight_dtype": "bf16" if int4 else row["precision"],
                     "expert_dtype": "int4" if int4 else row["precision"],
                     "ttft_s": repr(_number(row, "ttft_ms", where) / 1e3),
                     "tpot_s": repr(_number(row, "tpot_ms", where) / 1e3),
                     "source": f"NVIDIA aiconfigurator 0.12 silicon sample ({row['backend']} "
                               f"{row['backend_version']}, {row['system']})"}, where, "")


def _convert(header: list[str], row: dict, where: str, default_source: str, defaults: dict) -> Measurement | str:
    """A `Measurement`, or a string saying why the row is excluded."""
    if tuple(header) == PAPER_HEADER:
        row = {"model": row["model"], "instance": "8xH200", "stack": "paper-sglang",
               "len_tokens": row["seq_len_tokens"], "kv_throughput_gbps": row["kv_throughput_gbps"],
               "state_dtype": SGLANG_STATE_DTYPE, "source": PAPER_SOURCE}
    elif tuple(header) == TABLE5_HEADER:
        table = get_model("prfaas-1t").measured_prefill[0]
        label = row["seq_len_label"].upper()
        lengths = dict(zip(("1K", "8K", "32K", "128K"), table.lengths))
        if label not in lengths:
            raise PlanError(f"{where}: unknown length label {label!r}")
        row = {"model": "prfaas-1t", "instance": table.instance, "stack": "paper-vllm",
               "len_tokens": str(int(lengths[label])), "latency_s": row["prefill_latency_s"],
               "source": "arXiv 2604.15039 Table 5 (8xH200, in-house vLLM); lengths as the prfaas-1t profile reads them"}
    elif all(k in header for k in MOONCAKE_KEYS):
        ttft, transfer = _number(row, "ttft_ms", where), _number(row, "transfer_ms", where)
        if transfer >= ttft:
            raise PlanError(f"{where}: transfer_ms {transfer:g} is not below ttft_ms {ttft:g}")
        row = {"model": "qwen3-235b", "instance": "8xH20-3e", "stack": "mooncake-sglang-pd",
               "len_tokens": row["prompt_len_tokens"], "latency_s": repr((ttft - transfer) / 1e3),
               "source": MOONCAKE_SOURCE}
    elif all(k in header for k in NVIDIA_KEYS):
        return _nvidia(row, where)
    elif all(k in header for k in LMSYS_KEYS):
        if row["phase"] != "prefill":
            return (f"{where}: lmsys H20 {row['phase']} row excluded: {row['parallel']} over "
                    f"{row['gpus']} GPUs with MTP speculative decoding is not modelled")
        per_s = _number(row, "throughput_tok_s", where)
        isl = _number(row, "isl", where, int)
        row = {"model": "deepseek-v3", "instance": f"{row['gpus']}xH20", "stack": "antgroup-sglang-h20",
               "len_tokens": str(isl), "busy_s": repr(isl / per_s),
               "source": "lmsys blog 2025-09-26 (SGLang + Ant Group, DeepSeek-R1 on 8xH20-96G): "
                         f"{per_s:g} input tokens/s saturated"}
        m = _generic(row, where, "")
        return Measurement(**{**m.__dict__, "derived": f"busy = {isl} tokens / {per_s:g} tokens/s"})
    else:
        unknown = sorted(set(header) - set(GENERIC_COLUMNS))
        if unknown:
            raise PlanError(f"{where}: unknown column {unknown[0]!r}; {closest_names(unknown[0], GENERIC_COLUMNS)}")
        row = {**{k: v for k, v in defaults.items() if v}, **{k: v for k, v in row.items() if v}}
    return _generic(row, where, default_source)


def resolve_path(text: str | Path) -> Path:
    """A measurement file path; a bare name of a bundled reference file (``mooncake_h20_qwen3_235b_pd.csv``)
    resolves inside the installed package when no such file exists here."""
    path = Path(text)
    if not path.exists() and (REFERENCE_DIR / path.name).is_file() and path.name == str(text):
        return REFERENCE_DIR / path.name
    return path


def paper_kv_throughput() -> dict[tuple[str, int], float]:
    """The paper's Table 3 as ``{(model, len_tokens): Phi_kv Gbps}`` (one 8xH200 instance, SGLang)."""
    rows = [line for line in (REFERENCE_DIR / PAPER_FILE).read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]
    return {(r["model"], int(r["seq_len_tokens"])): float(r["kv_throughput_gbps"]) for r in csv.DictReader(rows)}


def load_measurements(path: str | Path, defaults: dict | None = None) -> tuple[list[Measurement], list[str]]:
    """Read a measurement CSV (or one of the bundled reference files): the points, and one line per row
    excluded with the reason. ``defaults`` fills columns a user file leaves out or blank (``stack``, ``moe``,
    ``weight_dtype``: the CLI's options); bundled files carry their own tags."""
    path = resolve_path(path)
    text = read_utf8(path, "a measurement CSV")
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip() and not line.startswith("#")]
    if len(lines) < 2:
        raise PlanError(f"{path}: expected a header row and at least one measurement")
    header = [h.strip() for h in next(csv.reader([lines[0][1]]))]
    if len(lines) - 1 > MAX_MEASUREMENTS:
        raise PlanError(f"{path}: {len(lines) - 1:,} measurements, more than the cap of {MAX_MEASUREMENTS:,} "
                        "(calibration fits a handful of constants; thin the file)")
    points, excluded = [], []
    for lineno, line in lines[1:]:
        values = next(csv.reader(io.StringIO(line)))
        where = f"{path.name}:{lineno}"
        if len(values) != len(header):
            raise PlanError(f"{where}: expected {len(header)} columns ({','.join(header)}), got {len(values)}")
        row = {k: v.strip() for k, v in zip(header, values)}
        got = _convert(header, row, where, path.name, defaults or {})
        (excluded if isinstance(got, str) else points).append(got)
    return points, excluded
