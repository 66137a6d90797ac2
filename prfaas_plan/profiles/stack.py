"""Serving-stack profiles: what the engine adds to the chip's roofline, as data (``stack_profiles/*.yaml``).

A stack profile (``kind: stack``) holds, each number with its source (or ``assumed: why``) under ``sources:``:

- ``engine`` and ``versions``: the serving engine and the version range the numbers describe;
- ``latency_s``: fixed per-request latency (HTTP, tokenization, scheduling, first-token detokenization) that
  adds to TTFT but does not occupy the GPU, so it does not lower throughput;
- ``forward_overhead_s``: GPU-busy overhead of one prefill forward (launches, scheduling between forwards);
- ``step_overhead_s``: GPU-busy overhead of one decode step (what the roofline of the step lacks);
- ``request_overhead_s`` (optional, default 0): scheduler time per admitted request (tokenization, radix/
  prefix matching, batch building) done one request after another on the CPU, so requests that arrive
  together wait for those admitted before them; it adds to TTFT under load, not to GPU busy time;
- ``ep_forward_overhead_s`` (optional, default 0): extra GPU-busy overhead of one prefill forward when the
  routed experts are expert-parallel (all-to-all dispatch and combine set-up the roofline's link time
  lacks);
- ``prefill_token_budget``: tokens one prefill forward carries: short prompts are batched up to it, and with
  ``chunked_prefill: true`` longer prompts are split into chunks of it;
- ``batching`` (optional): how the scheduler forms a forward, ``mixed`` (prefill chunks ride in the decode
  step's batch: vLLM's V1 scheduler, TensorRT-LLM's in-flight batching) or ``prefill_first`` (prefill batches
  run apart from decode, first: SGLang without ``--enable-mixed-chunk``). When absent it follows ``engine``
  (SGLang -> ``prefill_first``, any other -> ``mixed``); calibration pools the stack terms of one batching
  class before the engines' common term (docs/methods.md, "Calibration");
- ``wave_fraction``: in a closed-loop benchmark at fixed concurrency, the share of the other in-flight
  requests whose prompts arrive together with one (1 = lockstep waves, 0 = evenly staggered); it describes
  the measuring harness and is used only to predict such benchmarks (`prfaas_plan.performance.serving`);
- ``by_version`` (optional): per engine version (a quoted string key, ``'0.5.6'``), only the numbers that
  version's data identify, each with its ``sources:`` entry and, optionally, its ``spread:`` (the log-width
  of its uncertainty, 0.3 = about a factor 1.35). ``calibrate`` writes them as the engine's value shrunk
  toward by that version's rows (version <- engine <- prior, docs/methods.md "Calibration"); the numbers a
  version leaves out are the engine's. ``--stack sglang@0.5.6`` selects an entry (`get_stack`); the plain
  name is the pooled profile.

Bundled profiles live in ``stack_profiles/`` at the top of the repository (installed as
``prfaas_plan/stack_profiles``); user folders (``--profiles``, ``PRFAAS_PLAN_PROFILES``) may add more.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .._data import PACKAGE_DIR
from ..errors import PlanError, closest_names
from ..units import plural

DEFAULT_STACK = "sglang"
NUMBERS = ("latency_s", "forward_overhead_s", "step_overhead_s", "prefill_token_budget", "wave_fraction")
OPTIONAL_NUMBERS = ("request_overhead_s", "ep_forward_overhead_s")   # 0 when a profile leaves them out
# Upper bounds with their reason: a value beyond one is a unit slip or a typo, and would make busy time
# infinite or a batch impossible (issue 23). Seconds for times, tokens for the budget.
LIMITS = {
    "latency_s": (60.0, "a fixed per-request latency above a minute is not an engine's (check the unit: seconds)"),
    "forward_overhead_s": (10.0, "an overhead above 10 s per prefill forward is not an engine's (seconds)"),
    "step_overhead_s": (10.0, "an overhead above 10 s per decode step is not an engine's (seconds)"),
    "request_overhead_s": (10.0, "an admission time above 10 s per request is not an engine's (seconds)"),
    "ep_forward_overhead_s": (10.0, "an overhead above 10 s per prefill forward is not an engine's (seconds)"),
    "wave_fraction": (1.0, "it is a share of the in-flight requests"),
}
MAX_PREFILL_TOKEN_BUDGET = 2**30   # the planner's token cap (`prfaas_plan.units.MAX_TOKENS`)
KEYS = ("kind", "name", "engine", "versions", "description", "chunked_prefill", "batching", "sources", "by_version",
        "harness") \
    + NUMBERS + OPTIONAL_NUMBERS
FITTED_NUMBERS = ("latency_s", "forward_overhead_s", "step_overhead_s", "wave_fraction", "request_overhead_s",
                  "ep_forward_overhead_s")   # the terms calibrate fits (the budget is the engine's setting)
VERSION_KEYS = ("sources", "spread", "chunked_prefill") + NUMBERS + OPTIONAL_NUMBERS
HARNESS_KEYS = ("latency_s", "stream_s", "source")   # one benchmark harness's client time (`harness:` section)
BATCHING = ("mixed", "prefill_first")   # `StackProfile.batching`
MAX_SPREAD = 5.0   # log-width; e^5 = a factor 150: beyond that the entry says nothing


@dataclass(frozen=True)
class VersionEntry:
    """One engine version's own numbers (``values``: seconds, tokens for ``prefill_token_budget``, a share for
    ``wave_fraction``; ``chunked_prefill`` when it differs), with their ``sources`` and ``spread`` (log-width
    per number; absent = not recorded). Numbers it leaves out are the engine's."""

    values: dict
    sources: dict
    spread: dict
    chunked_prefill: bool | None = None


@dataclass(frozen=True)
class HarnessEntry:
    """One benchmark harness's client time in a recorded TTFT: ``latency_s`` + ``stream_s`` per other in-flight
    request (seconds), and where the numbers come from."""

    latency_s: float
    stream_s: float
    source: str


@dataclass(frozen=True)
class StackProfile:
    """One serving stack (seconds, tokens); see the module docstring for every field."""

    name: str
    engine: str
    versions: str
    description: str
    latency_s: float
    forward_overhead_s: float
    step_overhead_s: float
    prefill_token_budget: int
    chunked_prefill: bool
    wave_fraction: float
    batching: str   # one of `BATCHING` (module docstring); the loader derives it from the engine if a profile has none
    sources: dict[str, str] = field(hash=False, compare=False)
    path: str = ""
    request_overhead_s: float = 0.0
    ep_forward_overhead_s: float = 0.0
    by_version: dict = field(default_factory=dict, hash=False, compare=False)   # version -> `VersionEntry`
    engine_stack: str = ""   # for a profile selected as NAME@VERSION: NAME (the pooled profile); else ""
    # benchmark harness campaign (HARNESS@chip) -> `HarnessEntry`: client time a campaign's recorded TTFT holds that
    # the server does not spend (docs/methods.md, "Benchmark harness"); only `check` and calibration reports
    # use it, never a plan
    harness: dict = field(default_factory=dict, hash=False, compare=False)

    def client_s(self, harness: str, concurrency) -> float:
        """Seconds harness campaign ``harness`` (``HARNESS@chip``, `prfaas_plan.performance.harness`) adds to a
        recorded TTFT at ``concurrency`` clients: ``latency_s + stream_s * (C - 1)`` of `harness_entry`'s entry (0
        when there is none)."""
        h = self.harness_entry(harness)
        return 0.0 if h is None else h.latency_s + h.stream_s * (float(concurrency) - 1.0)

    def harness_entry(self, harness: str) -> HarnessEntry | None:
        """The client time of campaign ``harness`` (``HARNESS@chip``): its own entry; for a campaign this profile
        has none for (a system the calibration has not seen), the median of each term over the same harness's
        fitted campaigns, since the client and its benchmark settings are the harness's and only the host
        differs; None when the harness has no fitted campaign here (or ``harness`` is "", none modelled).
        Leaving an unseen system's client time out under-predicts its recorded TTFT by about half at NVIDIA's
        concurrencies (docs/methods.md, "Leave-one-chip-out")."""
        if not harness or harness in self.harness:
            return self.harness.get(harness)
        name = harness.partition("@")[0]
        seen = sorted(k for k in self.harness if k.partition("@")[0] == name)
        if not seen:
            return None
        median = lambda values: float(statistics.median(values))  # noqa: E731
        return HarnessEntry(median([self.harness[k].latency_s for k in seen]),
                            median([self.harness[k].stream_s for k in seen]),
                            f"not fitted on this system: the median of {self.name}'s {', '.join(seen)}")

    @property
    def version(self) -> str:
        """The engine version of a profile selected as NAME@VERSION, else ""."""
        return self.name.partition("@")[2] if self.engine_stack else ""

    def at_version(self, version: str) -> StackProfile:
        """This (pooled) profile with version ``version``'s entry applied, named ``NAME@VERSION``; `PlanError`
        naming the known versions when there is no such entry."""
        entry = self.by_version.get(version)
        if entry is None:
            known = (f"known versions: {', '.join(self.by_version)}" if self.by_version
                     else "it has no per-version entries")
            raise PlanError(f"`stack` {self.name}@{version}: {self.name} has no entry for version {version!r}; "
                            f"{known} (or `{self.name}` alone: the values pooled over {self.versions})")
        values = dict(entry.values)
        if "prefill_token_budget" in values:
            values["prefill_token_budget"] = int(values["prefill_token_budget"])
        sources = {**self.sources, **{k: f"version {version}: {v}" for k, v in entry.sources.items()}}
        return dataclasses.replace(self, name=f"{self.name}@{version}", versions=version, by_version={},
                                   engine_stack=self.name, sources=sources,
                                   chunked_prefill=self.chunked_prefill if entry.chunked_prefill is None
                                   else entry.chunked_prefill, **values)

    def prefill_forward_overhead_s(self, expert_parallel: bool) -> float:
        """GPU-busy seconds one prefill forward adds to its operators' roofline (``expert_parallel``: routed
        experts distributed over the chips by all-to-all)."""
        return self.forward_overhead_s + (self.ep_forward_overhead_s if expert_parallel else 0.0)

    def describe(self) -> str:
        """One line: the values and where they come from."""
        src = self.sources
        return (f"stack {self.name} ({self.engine} {self.versions}): fixed latency {self.latency_s * 1e3:.0f} ms, "
                f"{self.forward_overhead_s * 1e3:.1f} ms per prefill forward, {self.step_overhead_s * 1e3:.1f} ms "
                f"per decode step ({src['latency_s']})"
                + (f", {self.ep_forward_overhead_s * 1e3:.1f} ms more per prefill forward with expert parallelism"
                   if self.ep_forward_overhead_s else "")
                + (f", {self.request_overhead_s * 1e3:.1f} ms admission per request under load"
                   if self.request_overhead_s else "")
                + f"; prefill budget {self.prefill_token_budget:,} tokens"
                f"{', chunked' if self.chunked_prefill else ', not chunked'} ({src['prefill_token_budget']})"
                f"; batching {self.batching.replace('_', '-')} ({src.get('batching', 'no source')})"
                + (f"; version entry: {self._version_note()}" if self.engine_stack else ""))

    def _version_note(self) -> str:
        own = [k for k in NUMBERS + OPTIONAL_NUMBERS if self.sources.get(k, "").startswith(f"version {self.version}:")]
        rest = [k for k in NUMBERS + OPTIONAL_NUMBERS if k not in own]
        return (f"{', '.join(own) or 'no numbers'} of {self.version} itself"
                + (f", the rest ({', '.join(rest)}) pooled over {self.engine_stack}'s versions" if rest else ""))


def stack_from_dict(data, path: str = "<dict>") -> StackProfile:
    """Validate a stack profile mapping (unknown keys are errors; every number needs a source)."""
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a mapping")
    unknown = _unknown(data, KEYS)
    if unknown:
        raise PlanError(f"{path}: {unknown}")
    for key in ("name", "engine", "versions", "sources") + NUMBERS:
        if key not in data or data[key] is None:
            raise PlanError(f"{path}: missing field '{key}'")
    sources = data["sources"]
    if not isinstance(sources, dict):
        raise PlanError(f"{path}: sources must map each number to where it comes from")
    values = _numbers(data, sources, NUMBERS + tuple(k for k in OPTIONAL_NUMBERS if k in data), path)
    values = {**dict.fromkeys(OPTIONAL_NUMBERS, 0.0), **values}
    chunked = data.get("chunked_prefill", True)
    if not isinstance(chunked, bool):
        raise PlanError(f"{path}: chunked_prefill must be true or false")
    batching = data.get("batching", "prefill_first" if str(data["engine"]).lower().startswith("sglang") else "mixed")
    if batching not in BATCHING:
        raise PlanError(f"{path}: batching must be one of {', '.join(BATCHING)}, not {batching!r}")
    if "batching" in data and not str(sources.get("batching", "")).strip():
        raise PlanError(f"{path}: sources.batching missing (say where the engine's batching policy is documented)")
    if "batching" not in data:
        sources = {**sources, "batching": f"assumed from engine {data['engine']}: SGLang runs prefill batches apart "
                   "(prefill_first), other engines mix prefill chunks into the decode batch"}
    by_version = _by_version(data.get("by_version"), path)
    harness = _harness(data.get("harness"), path)
    return StackProfile(name=str(data["name"]).lower(), engine=str(data["engine"]), versions=str(data["versions"]),
                        description=str(data.get("description", "")), latency_s=values["latency_s"],
                        forward_overhead_s=values["forward_overhead_s"], step_overhead_s=values["step_overhead_s"],
                        prefill_token_budget=int(values["prefill_token_budget"]), chunked_prefill=chunked,
                        wave_fraction=values["wave_fraction"], request_overhead_s=values["request_overhead_s"],
                        ep_forward_overhead_s=values["ep_forward_overhead_s"],
                        sources={str(k): str(v) for k, v in sources.items()}, path=path, by_version=by_version,
                        harness=harness, batching=batching)


def _section(section, path: str, what: str) -> dict:
    """The entries of an optional mapping section of a stack file (``harness``, ``by_version``): {} when
    absent, a `PlanError` ``PATH: WHAT`` when it is not a mapping."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise PlanError(f"{path}: {what}")
    return section


def _entry(entry, where: str, keys, what: str) -> str:
    """Check that one entry of a section is a mapping (else `PlanError` ``WHERE: expected a mapping of
    WHAT``); the words for the keys it has beyond ``keys`` ("" when none)."""
    if not isinstance(entry, dict):
        raise PlanError(f"{where}: expected a mapping of {what}")
    return _unknown(entry, keys)


def _unknown(data: dict, keys) -> str:
    """``unknown fields A, B`` (``unknown field A``) for the keys of ``data`` not in ``keys``; "" when none."""
    unknown = sorted(set(map(str, data)) - set(keys))
    return f"unknown {plural(len(unknown), 'field')} {', '.join(unknown)}" if unknown else ""


def _harness(section, path: str) -> dict:
    """The ``harness`` section: {harness: {latency_s, stream_s, source}}, every key and number checked."""
    out = {}
    for name, entry in _section(section, path, "harness must map each benchmark harness to its latency_s, "
                                                "stream_s and source").items():
        where = f"{path}: harness.{name}"
        unknown = _entry(entry, where, HARNESS_KEYS, "latency_s, stream_s and source")
        missing = [k for k in HARNESS_KEYS if k not in entry]
        if unknown or missing:
            raise PlanError(f"{where}: " + (unknown or f"missing {plural(len(missing), 'field')} "
                                                      f"{', '.join(missing)}"))
        sources = {k: entry["source"] for k in ("latency_s", "stream_s")}
        out[str(name)] = HarnessEntry(**_numbers(entry, sources, ("latency_s", "stream_s"), where),
                                      source=str(entry["source"]))
    return out


def _numbers(data: dict, sources: dict, keys, where: str) -> dict[str, float]:
    """The numbers ``keys`` of ``data``, each finite, >= 0, within `LIMITS` and with a source in ``sources``."""
    values = {}
    for key in keys:
        v = data[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise PlanError(f"{where}: {key} must be a finite number >= 0, not {v!r}")
        if not str(sources.get(key, "")).strip():
            raise PlanError(f"{where}: sources.{key} missing (say where the number comes from, or 'assumed: why')")
        if key in LIMITS and v > LIMITS[key][0]:
            raise PlanError(f"{where}: {key} must be at most {LIMITS[key][0]:g}, not {v!r}: {LIMITS[key][1]}")
        values[key] = float(v)
    if "prefill_token_budget" in values:
        budget = data["prefill_token_budget"]
        if budget != int(budget) or not 1 <= budget <= MAX_PREFILL_TOKEN_BUDGET:
            raise PlanError(f"{where}: prefill_token_budget must be a whole number of tokens from 1 to "
                            f"{MAX_PREFILL_TOKEN_BUDGET:,}, not {budget!r}: one forward carries whole tokens, and a "
                            "budget beyond any context is a typo")
    return values


def _by_version(section, path: str) -> dict[str, VersionEntry]:
    """The ``by_version`` section: {version: `VersionEntry`}, every key and number checked."""
    out = {}
    for version, entry in _section(section, path, "by_version must map each engine version to its numbers").items():
        if not isinstance(version, str):
            raise PlanError(f"{path}: by_version key {version!r} must be a quoted string ('{version}'): YAML reads "
                            "an unquoted 0.10 as the number 0.1")
        where = f"{path}: by_version '{version}'"
        if not version.strip() or version != version.strip() or "@" in version or " " in version:
            raise PlanError(f"{where}: a version is one word without '@' or spaces")
        unknown = _entry(entry, where, VERSION_KEYS, "numbers with their sources")
        if unknown:
            raise PlanError(f"{where}: {unknown} (a version may hold "
                            f"{', '.join(NUMBERS + OPTIONAL_NUMBERS)}, chunked_prefill, sources, spread)")
        sources, spread = entry.get("sources") or {}, entry.get("spread") or {}
        if not isinstance(sources, dict) or not isinstance(spread, dict):
            raise PlanError(f"{where}: sources and spread must map numbers to text and log-widths")
        # the file's own key strings, not the interned constants: the snapshot's pickle must round-trip
        # byte for byte (tests/test_profile_snapshot.py), and unpickling re-interns only attribute names
        keys = tuple(k for k in entry if k in NUMBERS + OPTIONAL_NUMBERS)
        values = _numbers(entry, sources, keys, where)
        for key, width in spread.items():
            if key not in values:
                raise PlanError(f"{where}: spread.{key} without a {key} in this version")
            if isinstance(width, bool) or not isinstance(width, (int, float)) or not 0 <= width <= MAX_SPREAD:
                raise PlanError(f"{where}: spread.{key} must be a log-width from 0 to {MAX_SPREAD:g}, not {width!r}")
        extra = sorted(set(map(str, sources)) - set(values))
        if extra:
            raise PlanError(f"{where}: sources for {plural(len(extra), 'number')} it does not hold: {', '.join(extra)}")
        chunked = entry.get("chunked_prefill")
        if chunked is not None and not isinstance(chunked, bool):
            raise PlanError(f"{where}: chunked_prefill must be true or false")
        if not values and chunked is None:
            raise PlanError(f"{where}: holds no numbers (leave the version out: it is the engine's profile)")
        out[version] = VersionEntry(values, {str(k): str(v) for k, v in sources.items()},
                                    {str(k): float(v) for k, v in spread.items()}, chunked)
    return out


def bundled_stack_dirs() -> list[Path]:
    """The bundled stack folder (installed or in the checkout), as a list of at most one."""
    return [d for d in (PACKAGE_DIR / "stack_profiles", PACKAGE_DIR.parent / "stack_profiles") if d.is_dir()][:1]


def _stack_dirs() -> list[Path]:
    from .store import _user_dirs

    return bundled_stack_dirs() + _user_dirs()


def stack_files(folder: Path) -> list[Path]:
    """The YAML files of a folder, in load order."""
    return sorted(folder.rglob("*.yaml")) + sorted(folder.rglob("*.yml"))


def is_stack_file(fields: dict, path: Path) -> bool:
    """Whether a profile file holds a stack: ``kind: stack``, or no kind in a folder named stack_profiles."""
    return fields.get("kind") == "stack" or (fields.get("kind") is None and path.parent.name == "stack_profiles")


def _stack_file(path: Path) -> StackProfile | None:
    """The stack profile in ``path`` (None: the file holds another kind), from the snapshot of validated
    bundled profiles when it holds the file's exact bytes."""
    from . import snapshot
    from .store import read_yaml

    facts = snapshot.facts(path)
    data = read_yaml(path) if facts is None else facts
    if not is_stack_file(data, path):
        return None
    if facts is not None:
        prof = snapshot.validated(path, "stack")
        if prof is not None:
            return prof
        data = read_yaml(path)
    return stack_from_dict(data, str(path))


@lru_cache(maxsize=None)
def _load_stacks(dirs: tuple[Path, ...]) -> tuple[dict[str, StackProfile], dict[str, str], dict[str, str]]:
    """(stacks by name, {name: why its user file is broken}, {name: note that a user file shadows a
    bundled stack}). A broken bundled file is an error (the tests validate them); a broken user file
    breaks only the commands that look its name up (its stem or declared name), as for models and chips."""
    out: dict[str, StackProfile] = {}
    broken: dict[str, str] = {}
    shadowed: dict[str, str] = {}
    bundled = set(bundled_stack_dirs())
    for folder in dirs:
        for path in stack_files(folder):
            if folder in bundled:
                prof = _stack_file(path)
            else:
                from .store import read_yaml

                try:
                    data = read_yaml(path)
                except PlanError as exc:   # unreadable, of unknown kind: looking its stem up as a stack says why
                    broken.setdefault(path.stem.lower(), str(exc))
                    continue
                if not is_stack_file(data, path):
                    continue
                try:
                    prof = stack_from_dict(data, str(path))
                except PlanError as exc:
                    declared = data.get("name")
                    for key in {path.stem.lower(), declared.strip().lower() if isinstance(declared, str) else ""}:
                        if key:   # even a bundled name: the user meant to replace it, not to get the bundled one
                            broken[key] = str(exc)
                    continue
                if prof.name in out and Path(out[prof.name].path).parent in bundled:
                    shadowed[prof.name] = (f"stack {prof.name!r} from {path} is used instead of the bundled "
                                           f"{out[prof.name].path}")
            if prof is not None:
                out[prof.name] = prof
                broken.pop(prof.name, None)
    return out, broken, shadowed


def _register() -> None:
    from .store import forget_with_folders

    forget_with_folders(_load_stacks)


_register()


def stack_notes_of_loading() -> tuple[list[str], list[str]]:
    """(broken user stack files, user stacks shadowing bundled ones), one line each, for the CLI to say
    once; empty when no stack was loaded."""
    if _load_stacks.cache_info().currsize == 0:
        return [], []
    _, broken, shadowed = _load_stacks(tuple(_stack_dirs()))
    return sorted(set(broken.values())), sorted(shadowed.values())


def all_stacks() -> dict[str, StackProfile]:
    """Every known serving-stack profile by name (bundled, then user folders; later folders win)."""
    return _load_stacks(tuple(_stack_dirs()))[0]


def split_stack(text: str) -> tuple[str, str]:
    """(stack name, engine version) of ``NAME`` or ``NAME@VERSION`` (version "" when none)."""
    name, _, version = str(text).strip().partition("@")
    return name.strip().lower(), version.strip()


def get_stack(name: str | StackProfile | None) -> StackProfile:
    """A stack profile by name (case-insensitive); ``None`` is the default stack `DEFAULT_STACK`.
    ``NAME@VERSION`` selects that version's entry (`StackProfile.at_version`: one clear line naming the
    known versions when it has none); the plain name is the profile pooled over the engine's versions."""
    if isinstance(name, StackProfile):
        return name
    from .store import _found

    # remembered as chips and models are (until the folders change): a sweep's decode searches ask it by name
    # thousands of times, and finding the folders stats them
    return _found("stack", str(name or DEFAULT_STACK), lambda: _lookup_stack(name))


def _lookup_stack(name: str | None) -> StackProfile:
    """`get_stack` of a name, from the loaded folders."""
    key, version = split_stack(name or DEFAULT_STACK)
    stacks, broken, _ = _load_stacks(tuple(_stack_dirs()))
    if key in broken:
        raise PlanError(broken[key])
    if key not in stacks:
        raise PlanError(f"`stack` {name!r}: unknown serving stack; {closest_names(key, list(stacks))}")
    if "@" in str(name) and not version:
        raise PlanError(f"`stack` {name!r}: expected NAME or NAME@VERSION")
    return stacks[key].at_version(version) if version else stacks[key]


def stack_for_run(name: str, version: str) -> StackProfile:
    """The profile that predicts a run measured on stack ``name`` at engine ``version``: that version's entry
    when the profile has one, else the pooled profile (a measured version needs no entry to be predicted or
    fitted; only choosing ``--stack NAME@VERSION`` for a plan does)."""
    prof = get_stack(name)
    return prof.at_version(version) if version and version in prof.by_version else prof


# What each number means and its unit, for the JSON Schema (`stack_json_schema`); the module docstring says more.
DESCRIPTIONS = {
    "latency_s": "fixed per-request latency, adds to TTFT, not to GPU time (seconds)",
    "forward_overhead_s": "GPU-busy overhead of one prefill forward (seconds)",
    "step_overhead_s": "GPU-busy overhead of one decode step (seconds)",
    "request_overhead_s": "scheduler time per admitted request, adds to TTFT under load (seconds; default 0)",
    "ep_forward_overhead_s": "extra GPU-busy overhead per prefill forward with expert parallelism (seconds; default 0)",
    "prefill_token_budget": "tokens one prefill forward carries (whole tokens)",
    "wave_fraction": "share of the other in-flight requests arriving together in a closed-loop benchmark (0-1)",
}


def stack_json_schema() -> dict:
    """The JSON Schema of a stack profile file (``prfaas-plan schema stack``), built from the constants the
    validator `stack_from_dict` checks with (`KEYS`, `NUMBERS`, `LIMITS`, `VERSION_KEYS`), so the two cannot
    drift (tests/test_stack_versions.py runs jsonschema and the validator on the same files). What a JSON
    Schema cannot say (every number present needs a source; ``spread`` only for numbers the version holds)
    is in the descriptions."""
    def number(key: str) -> dict:
        if key == "prefill_token_budget":
            return {"type": "integer", "minimum": 1, "maximum": MAX_PREFILL_TOKEN_BUDGET,
                    "description": DESCRIPTIONS[key]}
        out = {"type": "number", "minimum": 0, "description": DESCRIPTIONS[key]}
        if key in LIMITS:
            out["maximum"] = LIMITS[key][0]
        return out

    text_map = {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}}
    numbers = {k: number(k) for k in NUMBERS + OPTIONAL_NUMBERS}
    version = {"type": "object", "additionalProperties": False, "minProperties": 1,
               "description": "one engine version's own numbers; those it leaves out are the engine's",
               "properties": {**numbers, "chunked_prefill": {"type": "boolean"},
                              "sources": {**text_map, "description": "where each of this version's numbers "
                                          "comes from (required for every number it holds)"},
                              "spread": {"type": "object", "description": "log-width of each number's "
                                         "uncertainty (0.3 = about a factor 1.35)",
                                         "additionalProperties": {"type": "number", "minimum": 0,
                                                                  "maximum": MAX_SPREAD}}}}
    assert set(version["properties"]) == set(VERSION_KEYS)
    props = {"kind": {"const": "stack"}, "name": {"type": "string"}, "engine": {"type": "string"},
             "versions": {"type": "string", "description": "the engine version range the numbers describe"},
             "description": {"type": "string"}, "chunked_prefill": {"type": "boolean"},
             "batching": {"enum": list(BATCHING), "description": "mixed: prefill chunks ride in the decode batch; "
                          "prefill_first: prefill batches run apart, first (default: from engine)"},
             "sources": {**text_map, "description": "where each number comes from, or 'assumed: why' "
                         "(required for every number)"},
             "by_version": {"type": "object", "description": "per engine version (a quoted string key, "
                            "'0.5.6'): selected with --stack NAME@VERSION",
                            "propertyNames": {"pattern": "^[^@\\s]+$"}, "additionalProperties": version},
             "harness": {"type": "object", "description": "per benchmark harness campaign (HARNESS@chip): the "
                         "client time it adds to the TTFT it records (latency_s + stream_s per other in-flight "
                         "request, seconds); used by check and calibration reports, never by plans",
                         "additionalProperties": {
                             "type": "object", "additionalProperties": False, "required": list(HARNESS_KEYS),
                             "properties": {"latency_s": {"type": "number", "minimum": 0,
                                                          "maximum": LIMITS["latency_s"][0]},
                                            "stream_s": {"type": "number", "minimum": 0},
                                            "source": {"type": "string", "minLength": 1}}}},
             **numbers}
    assert set(props) == set(KEYS)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "prfaas-plan stack profile",
            "type": "object", "additionalProperties": False, "properties": props,
            "required": ["name", "engine", "versions", "sources", *NUMBERS]}
