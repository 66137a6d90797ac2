"""Whether a serving engine can shard a model over an instance: SGLang and vLLM split attention heads, experts
and FFN widths evenly over the ranks (`split_reason`). The configuration search
(`prfaas_plan.planning.configurations`) drops the role candidates that fail it, and ``rates`` warns."""

from __future__ import annotations

from .moe_split import ep_degree
from .operators import attention_ranks

# (AttentionGroup field, what it counts, whether ranks beyond the count may hold copies instead of a slice)
SHARDED_COUNTS = (("num_heads", "heads", False), ("num_value_heads", "value heads", False),
                  ("num_kv_heads", "KV heads", True), ("num_key_heads", "key heads", True),
                  ("num_groups", "groups", True))
SPLIT_PHRASE = "split evenly over"   # in every sentence of `split_reason`: how the search's error tells them apart


def split_reason(model, chips: int, moe: str, dp_attention: bool | int = False) -> str | None:
    """Why a serving engine cannot split ``model`` over a ``chips``-chip instance with the routed-expert split
    ``moe`` (`planning.configurations.moe_splits`) and, with ``dp_attention``, data-parallel attention (heads
    split over a rank's chips only: every head on each chip for one rank per chip),
    or None. SGLang and vLLM shard evenly: every attention group's heads (a linear-attention group's value
    heads, a Mamba2 group's heads) over the attention tensor-parallel ranks, whose KV heads (key heads,
    Mamba2 groups) divide among them or are copied to them (Qwen3-235B's 4 KV heads on TP8: two copies
    each); the routed experts over the expert-parallel groups and each expert's width over the expert-TP
    ranks; the dense FFN's width over the instance's ranks. A power-of-two instance of a published
    architecture always splits; a 6- or 12-chip one (a 24- or 12-chip pool's divisors) often does not. A
    reconstructed architecture (`ModelProfile.reconstruction`) is not checked: its counts are fitted, not
    the checkpoint's."""
    if chips == 1 or model.reconstruction:
        return None
    ranks = chips // attention_ranks(dp_attention, chips)   # attention tensor-parallel ranks
    for g in model.attention:
        for name, what, copies in SHARDED_COUNTS:
            n = getattr(g, name)
            if n and n % ranks and not (copies and ranks % n == 0):
                return f"the {g.kind} layers' {n} {what} do not split evenly over {ranks} attention ranks"
    if model.moe is not None:
        ep = ep_degree(moe, chips)
        if model.moe.num_experts % ep:
            return f"{model.moe.num_experts} routed experts do not split evenly over {ep} expert-parallel groups"
        if model.moe.expert_intermediate % (chips // ep):
            return (f"the experts' width {model.moe.expert_intermediate} does not split evenly over "
                    f"{chips // ep} expert tensor-parallel ranks")
    if model.dense_layers and model.dense_intermediate % chips:
        return f"the dense FFN's width {model.dense_intermediate} does not split evenly over {chips} ranks"
    return None
