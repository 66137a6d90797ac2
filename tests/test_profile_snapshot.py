"""The snapshot of validated bundled profiles (prfaas_plan/profiles/snapshot.py) is current, equals a fresh
validation entry by entry, and is only ever used for a file's exact bytes: a stale, damaged or missing
snapshot changes no answer."""

from __future__ import annotations

import pickle

import pytest

from prfaas_plan.profiles import get_hardware, get_model, get_stack, snapshot, snapshot_build, stack, store


@pytest.fixture
def fresh_store():
    store.reset_profile_dirs()
    snapshot._entries.cache_clear()
    stack._load_stacks.cache_clear()
    yield
    snapshot._entries.cache_clear()
    stack._load_stacks.cache_clear()
    store.reset_profile_dirs()


def test_the_shipped_snapshot_is_current():
    shipped = pickle.loads(snapshot.SNAPSHOT.read_bytes())
    built = snapshot_build.build()
    assert shipped["format"] == built["format"]
    stale = sorted(set(built["entries"]) ^ set(shipped["entries"]))
    assert not stale, "bundled profiles changed: run python3 -m prfaas_plan.profiles.snapshot_build"
    for digest, (kind, prof, facts) in built["entries"].items():
        assert shipped["entries"][digest][0] == kind
        assert pickle.dumps(shipped["entries"][digest][1]) == pickle.dumps(prof), prof.name
        assert shipped["entries"][digest][2] == facts
    assert {kind for kind, _, _ in built["entries"].values()} == {"model", "hardware", "stack"}


def test_no_entry_carries_the_machine_it_was_made_on():
    assert b"/work/" not in snapshot.SNAPSHOT.read_bytes()
    assert all(prof.path == "" for _, prof, _ in pickle.loads(snapshot.SNAPSHOT.read_bytes())["entries"].values())


def test_the_indexed_fields_are_the_files_own(fresh_store):
    for path, _ in store._bundled_files(from_snapshot=False):
        data = store.read_yaml(path)
        assert snapshot.facts(path) == {k: data[k] for k in ("kind", "name", "aliases") if k in data}, path


def test_stacks_come_from_the_snapshot_equal_to_a_fresh_validation(fresh_store):
    for folder in stack.bundled_stack_dirs():
        for path in stack.stack_files(folder):
            fresh = stack.stack_from_dict(store.read_yaml(path), str(path))
            assert pickle.dumps(snapshot.validated(path, "stack")) == pickle.dumps(fresh), path


def test_a_file_is_taken_from_the_snapshot_only_for_its_exact_bytes(tmp_path, fresh_store):
    path, kind = next((p, k) for p, k in store._bundled_files() if k == "model")
    same = tmp_path / path.name
    same.write_bytes(path.read_bytes())
    prof = snapshot.validated(same, kind)
    assert prof is not None and prof.path == str(same)
    assert pickle.dumps(prof) == pickle.dumps(store._validate_file(same, kind))
    edited = tmp_path / "edited.yaml"
    edited.write_bytes(path.read_bytes() + b"\n# one more comment\n")
    assert snapshot.validated(edited, kind) is None
    assert snapshot.validated(same, "hardware") is None  # the kind must match as well


@pytest.mark.parametrize("damage", [b"", b"not a pickle", pickle.dumps({"format": -1, "entries": {}})])
def test_a_damaged_or_outdated_snapshot_only_means_validating(tmp_path, monkeypatch, fresh_store, damage):
    want = pickle.dumps((get_model("kimi-linear"), get_hardware("h200"), get_stack("sglang")))
    store.reset_profile_dirs()
    stack._load_stacks.cache_clear()
    bad = tmp_path / "snapshot.pickle"
    bad.write_bytes(damage)
    monkeypatch.setattr(snapshot, "SNAPSHOT", bad)
    snapshot._entries.cache_clear()
    assert snapshot._entries() == {}
    assert pickle.dumps((get_model("kimi-linear"), get_hardware("h200"), get_stack("sglang"))) == want
