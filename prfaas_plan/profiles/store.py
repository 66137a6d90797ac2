"""The profile store: bundled and user profile folders, read once, looked up by name or alias.

The bundled profiles live in ``model_profiles/`` and ``hardware_profiles/`` at the top of the
repository and are installed inside the package; extra folders come from ``--profiles DIR`` or the
``PRFAAS_PLAN_PROFILES`` environment variable (``os.pathsep``-separated; a folder may hold model and
hardware YAMLs side by side, told apart by their ``kind:`` field or by a ``models/`` / ``hardware/``
subfolder). A later folder overrides an earlier profile of the same name.

Looking one bundled profile up (no user folders in effect) validates only its file, which is most of a
cold start's profile cost; the tests validate every bundled file, and a user folder, `all_models` or an
unknown name loads and validates everything, as before.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from .._data import PACKAGE_DIR
from ..errors import PlanError, closest_names
from ..textfile import not_utf8, read_utf8
from .parse import hardware_from_dict, model_from_dict
from .schema import HardwareProfile, ModelProfile


def _bundled_dir(kind: str) -> list[Path]:
    """The bundled profile folder: inside the installed package, or at the top of a checkout."""
    here = PACKAGE_DIR
    for candidate in (here / f"{kind}_profiles", here.parent / f"{kind}_profiles"):
        if candidate.is_dir():
            return [candidate]
    return []


_extra_dirs: list[Path] = []


def add_profile_dir(path: str | Path) -> None:
    """Add a user folder of profiles (the CLI's ``--profiles``); later folders win on name clashes."""
    p = Path(path)
    if not p.is_dir():
        raise PlanError(f"`profiles` {str(path)!r}: not a folder")
    _extra_dirs.append(p)
    _forget()


def reset_profile_dirs() -> None:
    """Forget every user folder added by `add_profile_dir` and every cached profile."""
    _extra_dirs.clear()
    _forget()


_other_caches: list = []   # caches of other profile kinds (stacks) that depend on the user folders


def forget_with_folders(cached) -> None:
    """Clear ``cached`` (an ``lru_cache``) whenever the user folders change (`profiles.stack` registers its
    loader here: this module must not import it, it imports this one)."""
    _other_caches.append(cached)


def _forget() -> None:
    _FOUND.clear()
    for cached in (_load_all, _bundled_index, _read_bundled, _validated_bundled, *_other_caches):
        cached.cache_clear()


_FOUND: dict = {}   # (kind, name as looked up, PRFAAS_PLAN_PROFILES) -> profile: `_found`


def _found(kind: str, key: str, lookup):
    """``lookup()``, the profile ``key`` names, remembered until the user folders change (`_forget`) or
    the environment names others: a sweep resolves the same few chips tens of thousands of times. A
    name that finds nothing raises each time (nothing is kept)."""
    memo = (kind, key, os.environ.get("PRFAAS_PLAN_PROFILES", ""))
    hit = _FOUND.get(memo)
    if hit is None:
        hit = _FOUND[memo] = lookup()
    return hit


def _user_dirs() -> list[Path]:
    env = os.environ.get("PRFAAS_PLAN_PROFILES", "")
    dirs = [Path(p) for p in env.split(os.pathsep) if p]
    for d in dirs:
        if not d.is_dir():
            raise PlanError(f"PRFAAS_PLAN_PROFILES entry {str(d)!r}: not a folder")
    return dirs + _extra_dirs


@lru_cache(maxsize=None)
def _loader():
    """PyYAML's safe loader (its C parser when built with libyaml: ten times faster, which matters at
    start-up), reading ``1e9`` and ``48.0e9`` as floats (YAML 1.2) rather than strings."""
    import re

    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        pass

    def construct_mapping(loader, node, deep=False):
        # YAML keeps the last of two equal keys without a word; a file that says a thing twice is refused
        lines: dict = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                if key in lines:
                    raise DuplicateKey(key, key_node.start_mark.line + 1, lines[key])
                lines[key] = key_node.start_mark.line + 1
            except TypeError:   # an unhashable key: the constructor below reports it
                continue
        return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep)

    Loader.construct_mapping = construct_mapping
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"))
    return Loader


class DuplicateKey(Exception):
    """A YAML mapping that gives one key twice (raised by `_loader`'s constructor, reported by `read_yaml`)."""

    def __init__(self, key, line: int, first_line: int):
        super().__init__(key, line, first_line)
        self.key, self.line, self.first_line = key, line, first_line


MAX_PROFILE_BYTES = 4 * 2**20  # a profile is a few kB; anything beyond 4 MiB is not one


def profile_dirs() -> list[Path]:
    """Every profile folder in effect: the bundled model and hardware folders, then user folders."""
    return _bundled_dir("model") + _bundled_dir("hardware") + _user_dirs()


def read_yaml(path: Path) -> dict:
    """Read one YAML mapping; malformed YAML, binary data or an oversized file becomes a `PlanError`
    naming file and line."""
    import yaml

    text = read_utf8(path, "a YAML file", MAX_PROFILE_BYTES)
    if "\x00" in text:
        raise not_utf8(path, "a YAML file")
    try:
        data = yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader subclass
    except DuplicateKey as exc:
        raise PlanError(f"{path}:{exc.line}: key {exc.key!r} is given twice (first on line {exc.first_line}); "
                        "give it once") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlanError(f"{where}: malformed YAML ({problem})") from None
    except RecursionError:
        raise PlanError(f"{path}: malformed YAML (nested too deeply)") from None
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a YAML mapping at the top level")
    return data


def _profile_kind(data: dict, path: Path, default: str) -> str:
    kind = data.get("kind")
    if kind is None:
        parent = path.parent.name
        kind = "model" if parent in ("models", "model_profiles") else (
            "hardware" if parent in ("hardware", "hardware_profiles") else default)
    if kind not in ("model", "hardware", "stack"):
        raise PlanError(f"{path}: field 'kind' must be 'model', 'hardware' or 'stack', not {kind!r}")
    return kind


@lru_cache(maxsize=None)
def _read_bundled(path: Path) -> dict:
    return read_yaml(path)


@lru_cache(maxsize=None)
def _validated_bundled(path: Path, kind: str) -> ModelProfile | HardwareProfile:
    """A bundled profile file validated (once; `_load_all` and the lazy lookup share the result): from
    the snapshot of validated bundled profiles when it holds this file's exact bytes (`snapshot`)."""
    from . import snapshot

    return snapshot.validated(path, kind) or _validate_file(path, kind)


def _validate_file(path: Path, kind: str) -> ModelProfile | HardwareProfile:
    """A profile file through the validation layer."""
    data = _read_bundled(path)
    return model_from_dict(data, str(path)) if kind == "model" else hardware_from_dict(data, str(path))


def _index_fields(path: Path, from_snapshot: bool = True) -> dict:
    """What indexing reads of a bundled file (its ``kind``, ``name`` and ``aliases`` fields): from the
    snapshot for its exact bytes, else from the parsed file."""
    from . import snapshot

    facts = snapshot.facts(path) if from_snapshot else None
    return _read_bundled(path) if facts is None else facts


def _bundled_files(from_snapshot: bool = True) -> list[tuple[Path, str]]:
    """Every bundled model and hardware profile file with its kind, in load order (stacks left out)."""
    out = []
    for folder, default in [(d, "model") for d in _bundled_dir("model")] + [
            (d, "hardware") for d in _bundled_dir("hardware")]:
        for path in sorted(folder.rglob("*.yaml")) + sorted(folder.rglob("*.yml")):
            kind = _profile_kind(_index_fields(path, from_snapshot), path, default)
            if kind != "stack":
                out.append((path, kind))
    return out


@lru_cache(maxsize=None)
def _load_all() -> tuple[dict[str, ModelProfile], dict[str, HardwareProfile], dict[str, str], dict[str, str]]:
    """(models, chips, {name: why its user file is broken}, {name: note that a user file shadows a
    bundled profile of that name})."""
    models: dict[str, ModelProfile] = {}
    hardware: dict[str, HardwareProfile] = {}
    for path, kind in _bundled_files():  # a broken bundled profile is an error: the tests validate them all
        prof = _validated_bundled(path, kind)
        (models if kind == "model" else hardware)[prof.name] = prof
    broken: dict[str, str] = {}
    shadowed: dict[str, str] = {}
    # every name and alias a bundled profile answers to: a user profile taking one of them shadows it
    bundled = {kind: {key: p for p in table.values() for key in (p.name, *p.aliases)}
               for kind, table in (("model", models), ("hardware", hardware))}
    for folder in _user_dirs():
        for path in sorted(folder.rglob("*.yaml")) + sorted(folder.rglob("*.yml")):
            data = None
            try:
                data = read_yaml(path)
                kind = _profile_kind(data, path, "model")
                if kind == "stack":
                    continue  # serving stacks are loaded by profiles/stack.py
                prof = model_from_dict(data, str(path)) if kind == "model" else hardware_from_dict(data, str(path))
                (models if kind == "model" else hardware)[prof.name] = prof
                hit = next((bundled[kind][k] for k in (prof.name, *prof.aliases) if k in bundled[kind]), None)
                if hit is not None:
                    shadowed[prof.name] = (f"{'model' if kind == 'model' else 'chip'} {prof.name!r} from {path} "
                                           f"is used instead of the bundled {hit.path}")
            except PlanError as exc:
                # A broken user file must not break commands that do not use it: remember why, warn
                # once, and make a lookup of its name (the file's stem) fail with the reason.
                declared = data.get("name") if isinstance(data, dict) else None
                for key in {path.stem.lower(), str(declared).strip().lower() if isinstance(declared, str) else ""}:
                    if key and key not in models and key not in hardware:
                        broken[key] = str(exc)
    return models, hardware, broken, shadowed


def _declared(value) -> str | None:
    return value.strip().lower() if isinstance(value, str) else None


@lru_cache(maxsize=None)
def _bundled_index() -> dict[str, tuple[dict[str, Path], list[tuple[str, Path]]]] | None:
    """The bundled files by kind: ``{kind: ({declared name: path}, [(declared alias, path), ...])}``, read
    but not validated; None when a name or alias is not a plain string or a name repeats (then every
    lookup goes through `_load_all`)."""
    index: dict[str, tuple[dict[str, Path], list[tuple[str, Path]]]] = {"model": ({}, []), "hardware": ({}, [])}
    for path, kind in _bundled_files():
        data = _index_fields(path)
        names, aliases = index[kind]
        name, raw_aliases = _declared(data.get("name")), data.get("aliases", [])
        if name is None or name in names or not isinstance(raw_aliases, list):
            return None
        names[name] = path
        for alias in raw_aliases:
            if _declared(alias) is None:
                return None
            aliases.append((_declared(alias), path))
    return index


def _lazy_lookup(key: str, kind: str):
    """The bundled profile ``key`` names, validating only that file; None when the answer needs every
    profile (user folders in effect, profiles already loaded, an unknown name): `_lookup` then decides,
    with the same result. Exact: a hit is kept only if the validated profile's name or aliases match
    ``key`` as `_lookup` would match them, and names are looked at before aliases, as there."""
    if _load_all.cache_info().currsize or _user_dirs():
        return None
    index = _bundled_index()
    if index is None:
        return None
    names, aliases = index[kind]
    if key in names:
        prof = _validated_bundled(names[key], kind)
        return prof if prof.name == key else None
    for alias, path in aliases:
        if alias == key:
            prof = _validated_bundled(path, kind)
            return prof if key in prof.aliases else None
    return None


def broken_profiles() -> list[str]:
    """One line per user model or chip profile file that failed validation and was skipped (looking
    such a profile up raises its error); `prfaas_plan.profiles.notes` adds the stacks."""
    return [] if _load_all.cache_info().currsize == 0 else sorted(set(_load_all()[2].values()))


def shadowing_profiles() -> list[str]:
    """One line per user model or chip profile used instead of a bundled one it shares a name or alias
    with (empty when nothing was loaded from user folders)."""
    return [] if _load_all.cache_info().currsize == 0 else sorted(_load_all()[3].values())


def all_models() -> dict[str, ModelProfile]:
    """Every known model profile by canonical name."""
    return _load_all()[0]


def all_hardware() -> dict[str, HardwareProfile]:
    """Every known hardware profile by canonical name."""
    return _load_all()[1]


def _lookup(name: str, table: dict, what: str):
    key = str(name).strip().lower()
    if key in table:
        return table[key]
    for prof in table.values():
        if key in prof.aliases:
            return prof
    broken = _load_all()[2]
    if key in broken:
        raise PlanError(broken[key])
    names = list(table) + [a for p in table.values() for a in p.aliases]
    raise PlanError(f"unknown {what} {name!r}; {closest_names(key, names)}")


def get_model(name: str | ModelProfile) -> ModelProfile:
    """Look a model profile up by name or alias (case-insensitive)."""
    if isinstance(name, ModelProfile):
        return name
    key = str(name).strip().lower()
    return _found("model", key, lambda: _lazy_lookup(key, "model") or _lookup(name, all_models(), "model"))


def get_hardware(name: str | HardwareProfile) -> HardwareProfile:
    """Look a hardware profile up by name or alias (case-insensitive)."""
    if isinstance(name, HardwareProfile):
        return name
    key = str(name).strip().lower()
    return _found("hardware", key, lambda: _lazy_lookup(key, "hardware") or _lookup(name, all_hardware(), "chip"))


