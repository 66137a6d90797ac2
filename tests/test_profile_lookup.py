"""Looking one bundled profile up validates only its file, and finds what loading every profile finds."""

from __future__ import annotations

import pytest

from prfaas_plan import profiles
from prfaas_plan.errors import PlanError
from prfaas_plan.profiles import store


def _keys(table) -> list[str]:
    return sorted(set(table) | {a for p in table.values() for a in p.aliases})


def _fresh_lookup(get, key):
    profiles.reset_profile_dirs()
    try:
        return get(key)
    except PlanError as exc:
        return str(exc)


@pytest.mark.parametrize("get, table, what", [(profiles.get_model, profiles.all_models, "model"),
                                              (profiles.get_hardware, profiles.all_hardware, "chip")])
def test_lazy_lookup_finds_what_the_full_load_finds(get, table, what):
    everything = table()
    keys = _keys(everything) + [" " + k.upper() + " " for k in _keys(everything)] + ["no-such-profile", "h2"]
    for key in keys:
        try:
            want = store._lookup(key, everything, what)   # the lookup over every loaded profile
        except PlanError as exc:
            want = str(exc)
        got = _fresh_lookup(get, key)
        assert got == want and getattr(got, "path", None) == getattr(want, "path", None), key
        if not isinstance(want, str):
            assert store._load_all.cache_info().currsize == 0, f"{key!r} loaded every profile"


@pytest.mark.parametrize("from_snapshot", [True, False])
def test_a_lookup_validates_one_file(monkeypatch, from_snapshot):
    from prfaas_plan.profiles import snapshot

    profiles.reset_profile_dirs()
    if not from_snapshot:
        monkeypatch.setattr(snapshot, "validated", lambda path, kind: None)
    seen = []
    real = store.model_from_dict
    monkeypatch.setattr(store, "model_from_dict", lambda data, path: seen.append(path) or real(data, path))
    profiles.get_model("kimi-linear")
    assert len(seen) == (0 if from_snapshot else 1) and store._load_all.cache_info().currsize == 0
