"""Prefill measurements to calibrate against: one CSV format, plus converters for the bundled files.

Measurement CSV (``prfaas-plan calibrate --measurements FILE.csv``)
-------------------------------------------------------------------
Lines starting with ``#`` are comments. A header row names the columns (any order):

- ``model``: model profile name or alias, e.g. ``qwen3-235b``;
- ``instance``: chips as ``COUNTxCHIP``, e.g. ``8xH200``;
- ``len_tokens``: uncached prompt length, tokens (whole number);
- ``latency_s``: measured prefill latency of one request, seconds; or instead
  ``kv_throughput_gbps``: measured ``Phi_kv = S_kv / T_prefill`` in Gbps (1e9 bit/s), converted with
  ``T = S_kv * 8 / (Phi * 1e9)`` where ``S_kv`` is `prfaas_plan.arithmetic.s_kv` of the profile;
- ``state_dtype`` (optional): the dtype the serving engine kept recurrent state in while measuring, when it
  differs from the profile (it changes ``S_kv`` and so the latency a throughput implies);
- ``source`` (optional): where the row comes from.

Bundled files are recognised by their header and converted on reading:

- ``paper_kv_throughput_8xh200.csv`` (PrfaaS paper Table 3: ``model,attention,seq_len_tokens,
  kv_throughput_gbps``): instance 8xH200; measured on SGLang v0.5.9, whose default keeps every
  linear-attention state (GDN, KDA and Lightning alike) in fp32 (``mamba2_state_dtype`` falls back to
  float32 unless the config or ``SGLANG_MAMBA_SSM_DTYPE`` says otherwise), so ``state_dtype = fp32``;
- ``mooncake_h20_qwen3_235b_pd.csv`` (``prompt_len_tokens,ttft_ms,...,transfer_ms,...``): Qwen3-235B-A22B on
  8xH20-3e, latency = (TTFT - KV transfer) / 1000.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from .._data import REFERENCE_DIR
from .. import arithmetic as A
from ..errors import PlanError, closest_names
from ..profiles import get_model
from ..units import parse_finite, parse_length
from .base import parse_instance
from .kv_throughput import with_state_dtype

PAPER_HEADER = ("model", "attention", "seq_len_tokens", "kv_throughput_gbps")
MOONCAKE_KEYS = ("prompt_len_tokens", "ttft_ms", "transfer_ms")
PAPER_SOURCE = "arXiv 2604.15039 Table 3 (8xH200, SGLang v0.5.9)"
MOONCAKE_SOURCE = "Mooncake SGLang PD benchmark, Qwen3-235B-A22B on 8xH20-3e (TP8, bf16, no chunked prefill)"
SGLANG_STATE_DTYPE = "fp32"

PAPER_FILE = "paper_kv_throughput_8xh200.csv"
MAX_MEASUREMENTS = 100_000


@dataclass(frozen=True)
class Measurement:
    """One measured prefill latency: ``model`` (profile name) on ``instance`` (``COUNTxCHIP``) at
    ``len_tokens`` tokens took ``latency_s`` seconds. ``derived`` says how the latency was obtained when
    it was not measured directly."""

    model: str
    instance: str
    len_tokens: int
    latency_s: float
    source: str
    derived: str = ""


def latency_from_kv_throughput(model_name: str, len_tokens: int, gbps: float, state_dtype: str = "",
                               where: str = "measurement") -> tuple[float, str]:
    """``T = S_kv * 8 / (Phi * 1e9)`` seconds, and a note of the bytes used (``state_dtype`` overrides the
    profile's recurrent-state dtype, as the measuring engine stored it)."""
    model = with_state_dtype(get_model(model_name), state_dtype, f"{where}: state_dtype")
    s_kv = A.s_kv(model, len_tokens)
    note = f"from Phi {gbps:g} Gbps with S_kv {s_kv:,} B (state {model.state_dtype})"
    return s_kv * 8 / (gbps * 1e9), note


GENERIC_COLUMNS = ("model", "instance", "len_tokens", "latency_s", "kv_throughput_gbps", "state_dtype", "source")
MAX_LATENCY_S = 1e5  # a prefill measured in more than a day is not a prefill measurement


def _number(row: dict, key: str, where: str) -> float:
    return parse_finite(row.get(key), f"{where}: column '{key}'", positive=True)


def _generic(row: dict, where: str, default_source: str) -> Measurement:
    for key in ("model", "instance", "len_tokens"):
        if not row.get(key):
            raise PlanError(f"{where}: missing column '{key}'")
    try:
        model = get_model(row["model"]).name
    except PlanError as exc:
        raise PlanError(f"{where}: {exc}") from None
    parse_instance(row["instance"], f"{where}: instance")
    if not row["len_tokens"].isdigit():
        raise PlanError(f"{where}: column 'len_tokens' must be a whole number of tokens, not {row['len_tokens']!r}")
    length = parse_length(row["len_tokens"], f"{where}: column 'len_tokens'")
    source = row.get("source") or default_source
    if row.get("latency_s"):
        latency = _number(row, "latency_s", where)
        if latency > MAX_LATENCY_S:
            raise PlanError(f"{where}: column 'latency_s' {row['latency_s']!r} is more than {MAX_LATENCY_S:g} s")
        return Measurement(model, row["instance"], length, latency, source)
    if row.get("kv_throughput_gbps"):
        latency, note = latency_from_kv_throughput(model, length, _number(row, "kv_throughput_gbps", where),
                                                   (row.get("state_dtype") or "").lower(), where)
        return Measurement(model, row["instance"], length, latency, source, note)
    raise PlanError(f"{where}: each row needs 'latency_s' or 'kv_throughput_gbps'")


def _convert(header: list[str], row: dict, where: str, default_source: str) -> Measurement:
    if tuple(header) == PAPER_HEADER:
        row = {"model": row["model"], "instance": "8xH200", "len_tokens": row["seq_len_tokens"],
               "kv_throughput_gbps": row["kv_throughput_gbps"], "state_dtype": SGLANG_STATE_DTYPE,
               "source": PAPER_SOURCE}
    elif all(k in header for k in MOONCAKE_KEYS):
        ttft = _number(row, "ttft_ms", where)
        transfer = _number(row, "transfer_ms", where)
        if transfer >= ttft:
            raise PlanError(f"{where}: transfer_ms {transfer:g} is not below ttft_ms {ttft:g}")
        row = {"model": "qwen3-235b", "instance": "8xH20-3e", "len_tokens": row["prompt_len_tokens"],
               "latency_s": repr((ttft - transfer) / 1e3), "source": MOONCAKE_SOURCE}
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


def load_measurements(path: str | Path) -> list[Measurement]:
    """Read a measurement CSV (or one of the bundled reference files) into `Measurement` rows."""
    path = resolve_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanError(f"--measurements {str(path)!r}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise PlanError(f"--measurements {str(path)!r}: not a UTF-8 text file") from None
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip() and not line.startswith("#")]
    if len(lines) < 2:
        raise PlanError(f"{path}: expected a header row and at least one measurement")
    header = [h.strip() for h in next(csv.reader([lines[0][1]]))]
    generic = tuple(header) != PAPER_HEADER and not all(k in header for k in MOONCAKE_KEYS)
    for column in header if generic else ():
        if column not in GENERIC_COLUMNS:
            raise PlanError(f"{path}:{lines[0][0]}: unknown column {column!r}; "
                            f"{closest_names(column, GENERIC_COLUMNS)}")
    if len(lines) - 1 > MAX_MEASUREMENTS:
        raise PlanError(f"{path}: {len(lines) - 1:,} measurements, more than the cap of {MAX_MEASUREMENTS:,} "
                        "(calibration fits a handful of constants; thin the file)")
    out = []
    for lineno, line in lines[1:]:
        values = next(csv.reader(io.StringIO(line)))
        where = f"{path}:{lineno}"
        if len(values) != len(header):
            raise PlanError(f"{where}: expected {len(header)} columns ({','.join(header)}), got {len(values)}")
        row = {k: v.strip() for k, v in zip(header, values)}
        out.append(_convert(header, row, where, default_source=path.name))
    return out
