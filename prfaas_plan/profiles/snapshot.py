"""The bundled profiles (models, hardware, serving stacks) as already-validated objects, so that a cold start
neither imports pydantic to re-check files the test suite has checked (about 0.16 s of a 0.6 s `size`) nor
parses YAML at all (the YAML library and the parse of every bundled file to index it: about 30 ms more;
benchmarks/bench_cli.py).

Each entry is keyed by the SHA-256 of a profile file's bytes and holds the kind, the object the validation
layer (`parse.model_from_dict`, `parse.hardware_from_dict`, `stack.stack_from_dict`) makes of exactly
those bytes without its ``path``, and the file's own ``kind``, ``name`` and ``aliases`` fields as its YAML
states them (what the store reads to index a file before validating it). A profile comes from the
snapshot only when its file is byte for byte one that was snapshotted; an edited or new file, and every
user profile, is read and validated as usual. So the snapshot can make a start slower when it is stale,
never an answer different.

``python3 -m prfaas_plan.profiles.snapshot_build`` rewrites it (after editing a bundled profile or the schema;
``prfaas-plan calibrate -o`` into the bundled folders included); tests/test_profile_snapshot.py fails
while it is stale and checks every entry against a fresh validation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from functools import lru_cache
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("bundled_profiles.pickle")
FORMAT = 3  # bump when the entries' layout changes
FACT_KEYS = ("kind", "name", "aliases")  # the fields the store indexes a file by


def file_digest(path: Path) -> str:
    """SHA-256 of the file's bytes, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@lru_cache(maxsize=1)
def _entries() -> dict[str, tuple[str, object, dict]]:
    """digest -> (kind, profile without its path, facts); empty when the snapshot is missing or unreadable
    (any failure only means validating as usual)."""
    try:
        with SNAPSHOT.open("rb") as fh:
            data = pickle.load(fh)
    except Exception:  # a missing, damaged or outdated snapshot is never an error: validate instead
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    return data.get("entries", {})


def _entry(path: Path):
    """``(kind, profile without its path, facts)`` for ``path``'s exact bytes, or None."""
    try:
        return _entries().get(file_digest(path))
    except OSError:
        return None


def validated(path: Path, kind: str):
    """The profile validated from ``path``'s exact bytes, or None when the snapshot does not hold them."""
    entry = _entry(path)
    if entry is None or entry[0] != kind:
        return None
    return dataclasses.replace(entry[1], path=str(path))


def facts(path: Path) -> dict | None:
    """The top-level ``kind``, ``name`` and ``aliases`` fields of ``path``'s YAML (those it has), or None
    when the snapshot does not hold its bytes (then the file must be parsed)."""
    entry = _entry(path)
    return None if entry is None else dict(entry[2])
