"""Rebuild the snapshot of validated bundled profiles (`snapshot`): ``python3 -m
prfaas_plan.profiles.snapshot_build``. A developer's tool, run after editing a bundled profile or the
profile schema."""

from __future__ import annotations

import dataclasses
import os
import pickle
from pathlib import Path

from . import snapshot, stack, store


def build() -> dict:
    """The snapshot of every bundled profile file, read and validated by the validation layer now."""
    entries = {}

    def add(path: Path, kind: str, data: dict, prof) -> None:
        facts = {k: data[k] for k in snapshot.FACT_KEYS if k in data}
        entries[snapshot.file_digest(path)] = (kind, dataclasses.replace(prof, path=""), facts)

    for path, kind in store._bundled_files(from_snapshot=False):
        add(path, kind, store.read_yaml(path), store._validate_file(path, kind))
    for folder in stack.bundled_stack_dirs():
        for path in stack.stack_files(folder):
            data = store.read_yaml(path)
            if stack.is_stack_file(data, path):
                add(path, "stack", data, stack.stack_from_dict(data, str(path)))
    return {"format": snapshot.FORMAT, "entries": entries}


def write() -> Path:
    """Rewrite the snapshot (through a temporary sibling and a rename, never half-written) and return
    its path. profiles/ sits below output/, whose atomic writer it cannot import."""
    data = pickle.dumps(build(), protocol=4)
    tmp = snapshot.SNAPSHOT.with_name(snapshot.SNAPSHOT.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, snapshot.SNAPSHOT)
    snapshot._entries.cache_clear()
    return snapshot.SNAPSHOT


if __name__ == "__main__":
    print(f"wrote {write()}")
