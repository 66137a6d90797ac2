"""Attention kinds as types: the registry, and that adding a kind is adding one class."""

from __future__ import annotations

import pytest

from prfaas_plan import arithmetic as A
from prfaas_plan.errors import PlanError
from prfaas_plan.profiles import all_models, kinds, model_from_dict


def test_every_bundled_group_has_a_registered_rule():
    for model in all_models().values():
        for g in model.attention:
            assert g.rule is kinds.KINDS[g.kind] and g.rule.cache in ("growing", "window", "recurrent")


def test_each_kind_declares_the_fields_a_profile_may_give():
    assert set(kinds.KINDS) == {"gqa", "mla", "swa", "kda", "gated_deltanet", "lightning", "mamba2"}
    assert kinds.KINDS["swa"].fields() == ("num_heads", "num_kv_heads", "head_dim", "window", "v_head_dim",
                                           "output_gate")
    assert "output_gate" not in kinds.KINDS["kda"].fields()


class _MQA(kinds.AttentionKind):
    """A made-up kind for the test: one shared K/V head of ``head_dim`` (multi-query attention)."""

    name = "test_mqa"
    cache = "growing"
    required = ("num_heads", "head_dim")

    def kv_elements_per_token(self, g):
        return 2 * g.head_dim

    def params(self, g, hidden):
        return hidden * g.head_dim * (2 * g.num_heads + 2)

    def core_flops(self, g, l, cached=0):
        return 4 * g.num_heads * g.head_dim * kinds.causal_pairs(l, cached)


@pytest.fixture
def mqa_registered():
    kinds.register(_MQA)
    yield
    del kinds.KINDS[_MQA.name]


def _profile(kind_fields: dict) -> dict:
    return {"name": "t", "num_layers": 2, "hidden_size": 64, "vocab_size": 100, "max_context": 4096,
            "attention": [dict(kind_fields, layers="rest")], "ffn": {"dense_intermediate": 128},
            "sources": {"all": "assumed"}}


def test_adding_a_kind_is_adding_one_class(mqa_registered):
    m = model_from_dict(_profile({"kind": "test_mqa", "num_heads": 4, "head_dim": 16}))
    assert A.kv_bytes_per_token(m) == 2 * 2 * 16 * 2       # layers x (K+V) x head_dim x bf16
    assert A.s_kv(m, 100) == 100 * A.kv_bytes_per_token(m)
    assert A.fixed_state_bytes(m) == 0
    assert A.prefill_flops(m, 10).attention_core == 2 * 4 * 4 * 16 * 55
    with pytest.raises(PlanError, match="unknown key 'window' under attention\\[0\\]"):
        model_from_dict(_profile({"kind": "test_mqa", "num_heads": 4, "head_dim": 16, "window": 8}))


def test_an_unregistered_kind_is_refused_with_a_suggestion():
    with pytest.raises(PlanError, match="unknown attention kind 'gqa2'; did you mean gqa"):
        model_from_dict(_profile({"kind": "gqa2", "num_heads": 4, "head_dim": 16}))
