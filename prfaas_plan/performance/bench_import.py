"""Benchmark outputs people already produce, read as calibration measurements (`measurements.Measurement`).

One run of a serving benchmark (a fixed prompt/output length at a fixed concurrency or request rate) becomes
one `Measurement` with its mean TTFT and TPOT; the percentiles the file records are kept beside it
(`Run.percentiles`, seconds) for `prfaas-plan check`, but not fitted: the serving model predicts means
(docs/methods.md, "Serving at a fixed concurrency"). What a file does not record is asked for (`Tags`: the
instance ``--chip 8xH20``, the stack ``--stack sglang@0.5.9``, ``--tp``, ``--model``, ``--concurrency``).

Formats (recognised by content, not by file name; the schemas are cited from the upstream sources, and
``tests/data/bench/README.md`` lists the sample files written from them):

- **vLLM** ``vllm bench serve --save-result`` JSON (``vllm/benchmarks/serve.py``, vLLM 0.16.0: keys
  ``model_id``, ``max_concurrency``, ``request_rate``, ``completed``, ``total_input_tokens``,
  ``total_output_tokens``, ``mean_ttft_ms``, ``mean_tpot_ms``, ``mean_itl_ms``, ``p99_ttft_ms`` ...); the
  engine and its version are not recorded;
- **SGLang** ``python -m sglang.bench_serving --output-file`` JSONL, one run per line
  (``python/sglang/bench_serving.py``, SGLang 0.5.9: ``backend``, ``max_concurrency``, ``request_rate``,
  ``random_input_len``, ``server_info`` (the server's arguments and ``version`` when it answered),
  ``mean_ttft_ms`` ...);
- **aiperf / genai-perf** ``profile_export_aiperf.json`` / ``profile_export_genai_perf.json`` (metrics keyed
  ``time_to_first_token``, ``inter_token_latency``, ``input_sequence_length``, ``output_sequence_length``,
  ``request_throughput``, ``request_latency``, each ``{unit, avg, p50, p99, ...}``, and ``input_config``) and
  their CSV exports (rows ``Time to First Token (ms),avg,...``); aiperf 0.13 docs
  ``docs/tutorials/working-with-profile-exports.md``. aiperf's inter-token latency is per request
  ``(latency - TTFT) / (output tokens - 1)``: vLLM's TPOT;
- **NVIDIA silicon sample** CSV: aiconfigurator-core 0.12.0 ``systems/silicon_sample.csv`` as shipped
  (``model_path``, ``system``, ``batch_size``, ``silicon_ttft_ms`` ...) and the bundled subset
  (`measurements.BUNDLED_FILES`); both go through `measurements`' one converter.

Open-loop runs (a request rate, no concurrency cap) have no fixed concurrency; their mean number of requests
in flight is taken from Little's law, ``C = request throughput x mean end-to-end latency``, and the point
says so (``derived``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import PlanError, closest_names
from ..profiles import all_models, get_model, get_stack
from ..profiles.stack import split_stack
from .base import parse_instance
from ..textfile import read_utf8
from ..units import plural
from .measurements import MAX_LATENCY_S, MAX_MEASUREMENTS, NVIDIA_KEYS, Measurement, load_measurements, resolve_path

FORMATS = ("vllm", "sglang", "aiperf", "aiperf-csv", "nvidia-silicon", "csv")
SILICON_KEYS = ("silicon_data_source", "model_path", "system", "batch_size", "silicon_ttft_ms", "silicon_tpot_ms")
SUBSET_FILE = "nvidia_silicon_sample_subset.csv"
MAX_BYTES = 256 * 1024 * 1024   # a benchmark summary is kilobytes; per-request details can be megabytes


@dataclass(frozen=True)
class Tags:
    """What the user says about runs whose file does not record it: ``instance`` (``8xH20``), ``stack``
    (``sglang`` or ``sglang@0.5.9``), ``tp`` (must equal the instance's chips: one instance is TP over all
    its chips), ``model``, ``concurrency``, ``moe`` (tp/ep) and ``weight_dtype``. Empty = not given."""

    instance: str = ""
    stack: str = ""
    tp: int = 0
    model: str = ""
    concurrency: int = 0
    moe: str = ""
    weight_dtype: str = ""

    def csv_defaults(self) -> dict:
        """The tags as defaults of the project's measurement CSV (`measurements.load_measurements`)."""
        stack = resolve_stack("", "", self, "`stack`")[1] if self.stack else ""   # NAME@VERSION kept
        return {"stack": stack, "moe": self.moe, "weight_dtype": self.weight_dtype}


@dataclass(frozen=True)
class Run:
    """One imported benchmark run: the `Measurement`, the file's format, the engine and version when
    recorded, and its percentiles ``{"ttft_p50": seconds, ...}`` (not fitted; shown by `check`)."""

    measurement: Measurement
    format: str
    engine: str = ""
    percentiles: dict = field(default_factory=dict, hash=False)


# --- reading ---------------------------------------------------------------------------------------------



def _csv_header(text: str) -> list[str]:
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            return [h.strip() for h in next(csv.reader([line]))]
    return []


def detect_format(path: Path, text: str) -> str:
    """The format of a benchmark file (one of `FORMATS`), from its content; `PlanError` when none fits."""
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError:
            first = stripped.splitlines()[0]
            try:
                doc = json.loads(first)
            except json.JSONDecodeError:
                raise PlanError(f"{path}: not valid JSON or JSON Lines") from None
            return _json_kind(path, doc, lines=True)
        return _json_kind(path, doc, lines=False)
    header = _csv_header(text)
    lowered = [h.lower() for h in header]
    if lowered[:1] == ["metric"]:
        return "aiperf-csv"
    if all(k in header for k in SILICON_KEYS) or all(k in header for k in NVIDIA_KEYS):
        return "nvidia-silicon"
    return "csv"


def _json_kind(path: Path, doc, lines: bool) -> str:
    if not isinstance(doc, dict):
        raise PlanError(f"{path}: expected a JSON object per run, got {type(doc).__name__}")
    if "time_to_first_token" in doc and isinstance(doc["time_to_first_token"], dict):
        return "aiperf"
    if "mean_ttft_ms" in doc and ("random_input_len" in doc or "server_info" in doc or lines):
        return "sglang"
    if "mean_ttft_ms" in doc:
        return "vllm"
    raise PlanError(f"{path}: a JSON file with none of the keys of a vLLM, SGLang or aiperf/genai-perf result "
                    "(mean_ttft_ms, time_to_first_token)")


# --- shared field mapping ----------------------------------------------------------------------------------

def _hf_names() -> dict[str, str]:
    """Hugging Face repository names (lower case) -> bundled model profile: each profile's architecture
    source names its config.json repository, and the bundled NVIDIA subset maps the checkpoints it measured
    (``deepseek-ai/DeepSeek-R1`` -> deepseek-v3) in its own columns."""
    names = {}
    for model in all_models().values():
        source = str((model.sources or {}).get("architecture", ""))
        m = re.match(r"\s*(?:backbone from\s+)?([\w.-]+/[\w.-]+)\s+config\.json", source)
        if m and not model.reconstruction:
            names[m.group(1).lower()] = model.name
    from .._data import REFERENCE_DIR

    subset = REFERENCE_DIR / SUBSET_FILE
    if subset.is_file():
        rows = [ln for ln in subset.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
        for row in csv.DictReader(rows):
            names.setdefault(row["model_path"].lower(), row["prfaas_model"])
    return names


def resolve_model(recorded: str, tags: Tags, where: str) -> str:
    """The bundled model profile for a model the file names (``--model`` wins); `PlanError` asking for
    ``--model`` when the name matches no profile, alias or Hugging Face repository."""
    if tags.model:
        return get_model(tags.model).name
    if not recorded:
        raise PlanError(f"{where}: the model is not recorded; pass `model` NAME")
    text = str(recorded).strip()
    hf = _hf_names()
    candidates = [text, text.rstrip("/").split("/")[-1]]
    for name in candidates:
        if name.lower() in hf:
            return hf[name.lower()]
        try:
            return get_model(name).name
        except PlanError:
            pass
    for repo, name in hf.items():   # a local path ending in the repository name (/models/DeepSeek-V3)
        if text.lower().rstrip("/").endswith("/" + repo.split("/")[-1]):
            return name
    raise PlanError(f"{where}: model {text!r} is not a bundled profile; pass `model` NAME "
                    "(prfaas-plan models lists them; prfaas-plan model import adds one)")


def resolve_stack(recorded_engine: str, recorded_version: str, tags: Tags, where: str) -> tuple[str, str]:
    """(stack profile name, engine label ``NAME@VERSION``) for a run: ``--stack NAME[@VERSION]`` wins, else
    the engine and version the file records. The name is the engine's pooled profile; the measured version
    needs no entry of its own (`Measurement.run_stack` predicts with its entry when there is one)."""
    text = tags.stack or (f"{recorded_engine}@{recorded_version}" if recorded_engine and recorded_version
                          else recorded_engine)
    if not text:
        raise PlanError(f"{where}: the serving engine is not recorded; pass `stack` (e.g. vllm@0.16.0)")
    name, version = split_stack(text)
    stack = get_stack(name).name
    label = f"{name}@{version}" if version else name
    return stack, label


def _instance(tags: Tags, recorded_tp: int, where: str) -> str:
    if not tags.instance:
        raise PlanError(f"{where}: the GPUs are not recorded; pass `chip` COUNTxCHIP (e.g. 8xH20)")
    inst = parse_instance(tags.instance, "`chip`")
    tp = tags.tp or recorded_tp
    if tp and tp != inst.chips:
        raise PlanError(f"{where}: TP {tp} on {tags.instance}: one instance runs TP over all its chips; "
                        f"pass `chip` {tp}x{inst.chip.name.upper()} for TP{tp} instances")
    return f"{inst.chips}x{inst.chip.name.upper()}"


def _positive(value, what: str, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise PlanError(f"{where}: {what} must be a number, not {str(value)[:40]!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise PlanError(f"{where}: {what} must be a positive finite number, not {value!r}")
    return number


def _little(throughput_rps, latency_s, where: str) -> int:
    """Mean requests in flight of an open-loop run: Little's law L = lambda W."""
    return max(1, round(_positive(throughput_rps, "request throughput", where)
                        * _positive(latency_s, "mean end-to-end latency", where)))


def _build(where: str, fmt: str, model: str, instance: str, stack: str, engine: str, isl: float, osl: float,
           concurrency: int, ttft_ms, tpot_ms, percentiles: dict, tags: Tags, source: str, derived: str) -> Run:
    isl_i, osl_i = round(_positive(isl, "mean input tokens", where)), round(_positive(osl, "mean output tokens", where))
    ttft = _positive(ttft_ms, "mean TTFT (ms)", where) / 1e3 if ttft_ms is not None else None
    tpot = _positive(tpot_ms, "mean TPOT (ms)", where) / 1e3 if tpot_ms is not None and osl_i >= 2 else None
    if ttft is None and tpot is None:
        raise PlanError(f"{where}: neither a mean TTFT nor a mean TPOT is recorded")
    for what, value in (("TTFT", ttft), ("TPOT", tpot)):
        if value is not None and value > MAX_LATENCY_S:
            raise PlanError(f"{where}: mean {what} {value:g} s is more than {MAX_LATENCY_S:g} s")
    moe = tags.moe or "tp"
    if moe not in ("tp", "ep"):
        raise PlanError(f"`moe` must be tp or ep, not {moe!r}")
    m = Measurement(model, instance, stack, isl_i, source, osl_i, concurrency, moe, tags.weight_dtype.lower(),
                    "", ttft, tpot, None, derived, split_stack(engine)[1])
    pct = {k: v / 1e3 for k, v in percentiles.items() if v is not None and math.isfinite(v)}
    return Run(m, fmt, engine, pct)


def _pcts(doc: dict, keys: dict) -> dict:
    out = {}
    for label, key in keys.items():
        value = doc.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[label] = float(value)
    return out


# --- per format ----------------------------------------------------------------------------------------------

PCT_KEYS = {"ttft_p50": "median_ttft_ms", "ttft_p99": "p99_ttft_ms", "tpot_p50": "median_tpot_ms",
            "tpot_p99": "p99_tpot_ms", "itl_p50": "median_itl_ms", "itl_p99": "p99_itl_ms"}


def _serving_run(doc: dict, where: str, fmt: str, tags: Tags, name: str) -> Run:
    """A vLLM or SGLang result dict (they share the metric keys)."""
    completed = doc.get("completed")
    if not isinstance(completed, (int, float)) or completed <= 0:
        raise PlanError(f"{where}: 'completed' is {completed!r}: no request finished")
    info = doc.get("server_info") if isinstance(doc.get("server_info"), dict) else {}
    if info.get("enable_dp_attention") or (info.get("dp_size") or 1) > 1:
        raise PlanError(f"{where}: the server ran data-parallel attention (dp_size {info.get('dp_size')}): "
                        "not modelled by the per-instance serving model")
    model = resolve_model(doc.get("model_id") or info.get("model_path") or doc.get("tokenizer_id") or "", tags, where)
    instance = _instance(tags, int(info.get("tp_size") or 0), where)
    engine_version = str(info.get("version") or "")
    stack, engine = resolve_stack("sglang" if fmt == "sglang" and info else "", engine_version, tags, where)
    if info.get("ep_size") and int(info["ep_size"]) > 1 and not tags.moe:
        tags = replace(tags, moe="ep")
    isl = _positive(doc.get("total_input_tokens"), "total_input_tokens", where) / completed
    osl = _positive(doc.get("total_output_tokens"), "total_output_tokens", where) / completed
    derived = ""
    if tags.concurrency:
        concurrency = tags.concurrency
    elif doc.get("max_concurrency"):
        concurrency = int(_positive(doc["max_concurrency"], "max_concurrency", where))
    else:
        e2e = doc.get("mean_e2el_ms", doc.get("mean_e2e_latency_ms"))
        concurrency = _little(doc.get("request_throughput"), _positive(e2e, "mean end-to-end latency (ms)", where)
                              / 1e3, where)
        derived = (f"concurrency {concurrency} from Little's law (open loop at {doc.get('request_rate')} req/s: "
                   f"{float(doc['request_throughput']):.3g} req/s x {float(e2e) / 1e3:.3g} s)")
    tpot = doc.get("mean_tpot_ms", doc.get("mean_itl_ms"))
    source = f"{name} ({fmt} {'bench serve' if fmt == 'vllm' else 'bench_serving'}, {engine})"
    return _build(where, fmt, model, instance, stack, engine, isl, osl, concurrency, doc.get("mean_ttft_ms"), tpot,
                  _pcts(doc, PCT_KEYS), tags, source, derived)


def _vllm(path: Path, text: str, tags: Tags) -> list[Run]:
    doc = json.loads(text)
    return [_serving_run(doc, path.name, "vllm", tags, path.name)]


def _sglang(path: Path, text: str, tags: Tags) -> list[Run]:
    runs = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{lineno}"
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            raise PlanError(f"{where}: not a JSON object (SGLang bench_serving writes one per line)") from None
        if not isinstance(doc, dict) or "mean_ttft_ms" not in doc:
            raise PlanError(f"{where}: not an SGLang bench_serving result (no mean_ttft_ms)")
        runs.append(_serving_run(doc, where, "sglang", tags, path.name))
    return runs


AIPERF_METRICS = {"time_to_first_token": "ttft", "inter_token_latency": "tpot", "input_sequence_length": "isl",
                  "output_sequence_length": "osl", "request_throughput": "throughput", "request_latency": "latency"}
AIPERF_CSV_NAMES = {"time to first token": "time_to_first_token", "inter token latency": "inter_token_latency",
                    "input sequence length": "input_sequence_length",
                    "output sequence length": "output_sequence_length",
                    "request throughput": "request_throughput", "request latency": "request_latency"}
TIME_UNITS = {"ms": 1.0, "s": 1e3, "sec": 1e3, "us": 1e-3, "ns": 1e-6}


def _aiperf_value(metric: dict, key: str, where: str, stat: str = "avg") -> float | None:
    entry = metric.get(key)
    if entry is None:
        return None
    if not isinstance(entry, dict) or stat not in entry:
        return None
    value = _positive(entry[stat], f"{key}.{stat}", where)
    unit = str(entry.get("unit", "")).strip().lower()
    if AIPERF_METRICS.get(key) in ("ttft", "tpot", "latency"):
        if unit not in TIME_UNITS:
            raise PlanError(f"{where}: {key} in unit {unit!r}; expected one of {', '.join(TIME_UNITS)}")
        value *= TIME_UNITS[unit]       # milliseconds
    return value


def _aiperf_run(metrics: dict, config: dict, where: str, fmt: str, tags: Tags, name: str) -> Run:
    for key in ("time_to_first_token", "input_sequence_length", "output_sequence_length"):
        if key not in metrics:
            raise PlanError(f"{where}: no '{key}' metric (an aiperf/genai-perf profile export records it)")
    endpoint = config.get("endpoint") if isinstance(config.get("endpoint"), dict) else {}
    names = endpoint.get("model_names") or config.get("model") or config.get("model_names") or []
    recorded = names[0] if isinstance(names, list) and names else (names if isinstance(names, str) else "")
    model = resolve_model(recorded, tags, where)
    instance = _instance(tags, 0, where)
    stack, engine = resolve_stack("", "", tags, where)
    loadgen = config.get("loadgen") if isinstance(config.get("loadgen"), dict) else config
    derived = ""
    if tags.concurrency:
        concurrency = tags.concurrency
    elif isinstance(loadgen.get("concurrency"), int) and loadgen["concurrency"] > 0 and not loadgen.get("request_rate"):
        concurrency = int(loadgen["concurrency"])
    else:
        throughput = _aiperf_value(metrics, "request_throughput", where)
        latency = _aiperf_value(metrics, "request_latency", where)
        if throughput is None or latency is None:
            raise PlanError(f"{where}: no concurrency recorded; pass `concurrency` N")
        concurrency = _little(throughput, latency / 1e3, where)
        derived = f"concurrency {concurrency} from Little's law ({throughput:.3g} req/s x {latency / 1e3:.3g} s)"
    pct = {}
    for key, label in (("time_to_first_token", "ttft"), ("inter_token_latency", "tpot")):
        for stat in ("p50", "p99"):
            value = _aiperf_value(metrics, key, where, stat) if key in metrics else None
            if value is not None:
                pct[f"{label}_{stat}"] = value
    return _build(where, fmt, model, instance, stack, engine, _aiperf_value(metrics, "input_sequence_length", where),
                  _aiperf_value(metrics, "output_sequence_length", where), concurrency,
                  _aiperf_value(metrics, "time_to_first_token", where),
                  _aiperf_value(metrics, "inter_token_latency", where), pct, tags,
                  f"{name} (aiperf/genai-perf profile export, {engine})", derived)


def _aiperf(path: Path, text: str, tags: Tags) -> list[Run]:
    doc = json.loads(text)
    config = doc.get("input_config") if isinstance(doc.get("input_config"), dict) else {}
    return [_aiperf_run(doc, config, path.name, "aiperf", tags, path.name)]


def _aiperf_csv(path: Path, text: str, tags: Tags) -> list[Run]:
    """The CSV export: a 'Metric,avg,min,max,p1,...' section, then 'Metric,Value' summary rows."""
    metrics: dict[str, dict] = {}
    header: list[str] = []
    for row in csv.reader(io.StringIO(text)):
        if not row or not any(c.strip() for c in row):
            header = []
            continue
        if row[0].strip().lower() == "metric":
            header = [c.strip().lower() for c in row]
            continue
        m = re.fullmatch(r"\s*(.+?)\s*(?:\(([^)]*)\))?\s*", row[0])
        key = AIPERF_CSV_NAMES.get(m.group(1).lower()) if m else None
        if not key or not header:
            continue
        unit = (m.group(2) or "").split("/")[0].strip().lower()
        unit = {"per sec": "", "requests": ""}.get(unit, unit)
        stats = {h: c.strip() for h, c in zip(header[1:], row[1:])}
        if "value" in stats:
            stats["avg"] = stats.pop("value")
        metrics[key] = {"unit": unit, **stats}
    if not metrics:
        raise PlanError(f"{path}: a 'Metric,...' CSV with no TTFT, ITL or sequence-length rows "
                        "(an aiperf/genai-perf profile export CSV has them)")
    return [_aiperf_run(metrics, {}, path.name, "aiperf-csv", tags, path.name)]


def _system_chip(system: str) -> str:
    return re.sub(r"_(sxm|pcie|nvl)\w*$", "", system.strip().lower()).upper()


def _silicon(path: Path, text: str, tags: Tags) -> tuple[list[Run], list[str]]:
    """NVIDIA's silicon-sample layout. The bundled subset is read by `measurements.load_measurements`; the
    upstream file's rows are mapped to the subset's columns and converted by the same code, so both layouts
    produce identical points. Rows the model cannot represent are excluded with the reason, counted."""
    header = _csv_header(text)
    if all(k in header for k in NVIDIA_KEYS):
        points, excluded = load_measurements(path)
        return [Run(m, "nvidia-silicon", m.stack) for m in points], excluded
    from .measurements import _nvidia  # the one converter of the bundled subset's rows

    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    if len(lines) - 1 > MAX_MEASUREMENTS:
        raise PlanError(f"{path}: {len(lines) - 1:,} rows, more than the cap of {MAX_MEASUREMENTS:,}")
    runs, reasons = [], {}
    for lineno, row in enumerate(csv.DictReader(lines), 2):
        where = f"{path.name}:{lineno}"
        why = _silicon_reason(row)
        if why is None:
            try:
                model = resolve_model(row["model_path"], replace(tags, model=""), where)
                chip = _system_chip(row["system"])
                parse_instance(f"1x{chip}", "system")
            except PlanError as exc:
                why = str(exc).split(": ", 1)[-1].split(";")[0]
        if why is not None:
            reasons[why] = reasons.get(why, 0) + 1
            continue
        tp, dp = int(row["tp_size"]), int(row["attention_dp_size"] or 1)
        subset_row = {"prfaas_model": model, "gpus": str(tp * dp), "chip": chip, "backend": row["backend"],
                      "isl": row["isl"], "osl": row["osl"], "concurrency": row["batch_size"],
                      "moe_ep": row["moe_ep_size"] or "1", "precision": row["precision"],
                      "ttft_ms": row["silicon_ttft_ms"], "tpot_ms": row["silicon_tpot_ms"],
                      "backend_version": row["backend_version"] or "unrecorded", "system": row["system"]}
        m = _nvidia(subset_row, where)
        runs.append(Run(m, "nvidia-silicon", f"{row['backend']}@{row['backend_version'] or 'unrecorded'}"))
    excluded = [f"{path.name}: {n} {plural(n, 'row')} excluded: {why}" for why, n in sorted(reasons.items())]
    return runs, excluded


def _silicon_reason(row: dict) -> str | None:
    if row.get("mode") != "agg":
        return f"mode {row.get('mode')!r} (disaggregated runs are not single-instance measurements)"
    if (row.get("attention_dp_size") or "1") != "1":
        return "attention data parallelism is not modelled"
    if (row.get("pp_size") or "1") != "1":
        return "pipeline parallelism is not modelled"
    if row.get("precision") not in ("fp8", "int4", "bf16", "fp16"):
        return f"precision {row.get('precision')!r} is not a dtype of the performance model"
    try:
        tp, moe_tp, moe_ep = int(row["tp_size"]), int(row["moe_tp_size"] or 1), int(row["moe_ep_size"] or 1)
    except (KeyError, ValueError):
        return "parallel fields are not whole numbers"
    if tp != moe_tp * moe_ep:
        return "tp_size differs from moe_tp_size x moe_ep_size"
    if tp > 8:
        return "more than one node"
    return None


READERS = {"vllm": _vllm, "sglang": _sglang, "aiperf": _aiperf, "aiperf-csv": _aiperf_csv}


def import_runs(path: str | Path, tags: Tags = Tags(), defaults: dict | None = None) -> tuple[list[Run], list[str]]:
    """Every run in one benchmark file (any of `FORMATS`), and one line per row excluded with the reason.
    The project's own tagged CSV (`measurements`) is read as before, ``defaults`` filling its blank tags."""
    path = resolve_path(path)
    text = read_utf8(path, "a benchmark file (JSON, JSONL or CSV)", MAX_BYTES)
    fmt = detect_format(path, text)
    if fmt == "csv":
        points, excluded = load_measurements(path, defaults)
        return [Run(m, "csv", m.stack) for m in points], excluded
    if fmt == "nvidia-silicon":
        return _silicon(path, text, tags)
    runs = READERS[fmt](path, text, tags)
    if not runs:
        raise PlanError(f"{path}: no benchmark runs in the file")
    return runs, []


def load_any(paths: list[str | Path], tags: Tags = Tags(), defaults: dict | None = None) -> tuple[list[Run], list[str]]:
    """`import_runs` over several files, in order."""
    runs, excluded = [], []
    for p in paths:
        got, dropped = import_runs(p, tags, defaults)
        runs += got
        excluded += dropped
    return runs, excluded


def check_tags(instance: str | None, stack: str | None, tp: int | None, model: str | None,
               concurrency: int | None, moe: str | None, weight_dtype: str | None) -> Tags:
    """`Tags` from the command-line options, each checked (one clear line when wrong)."""
    if instance:
        parse_instance(instance, "`chip`")
    if stack:
        name = stack.partition("@")[0]
        if not name:
            raise PlanError(f"`stack` {stack!r}: expected NAME or NAME@VERSION")
        resolve_stack("", "", Tags(stack=stack), "`stack`")
    if model:
        get_model(model)
    if tp is not None and tp < 1:
        raise PlanError(f"`tp` {tp}: expected a positive whole number")
    if concurrency is not None and concurrency < 1:
        raise PlanError(f"`concurrency` {concurrency}: expected a positive whole number")
    if moe and moe not in ("tp", "ep"):
        raise PlanError(f"`moe` {moe!r}: expected tp or ep; {closest_names(moe, ('tp', 'ep'))}")
    return Tags(instance or "", stack or "", tp or 0, model or "", concurrency or 0, moe or "",
                (weight_dtype or "").lower())
