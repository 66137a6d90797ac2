"""Import a Hugging Face ``config.json`` as a model profile.

`import_hf_config` reads the architecture fields of a supported ``model_type`` and returns a mapping in
the model-profile YAML schema (validate it with `prfaas_plan.profiles.model_from_dict`). Fields of a
nested ``text_config`` (multimodal checkpoints) win over top-level ones. Every number in the result has
a ``sources`` entry naming the config field it came from, or ``assumed: why`` where the config is
silent (KV cache dtype, recurrent and conv state dtypes follow serving-engine defaults).

Sizes are element counts as in the profile schema; layer lists are 0-based.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from ..errors import PlanError
from ..textfile import read_json
from .kinds import KINDS
from .schema import MAX_CONTEXT, MAX_LAYERS

CONFIG = "config.json"
_REQUIRED = object()

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_KV_NOTE = "assumed: serving-engine default bf16 (SGLang and vLLM keep KV in the activation dtype; fp8 KV is opt-in)"


def read_hf_config(path: str | Path) -> dict:
    """Read a ``config.json``; unreadable or malformed files become a one-line `PlanError`."""
    config = read_json(path, "a Hugging Face config.json")
    if not isinstance(config, dict):
        raise PlanError(f"{path}: expected a JSON object at the top level")
    return config


class _Reader:
    """Field access on a config (``text_config`` first, then the top level) that records, per profile
    field filled, which config field the value came from (in ``sources``)."""

    def __init__(self, config: dict, label: str):
        text = config.get("text_config")
        self.scopes = [("text_config.", text), ("", config)] if isinstance(text, dict) else [("", config)]
        self.label = label
        self.sources: dict[str, str] = {}
        self.num_layers: int | None = None  # set by architectures whose layers are not num_hidden_layers

    def error(self, message: str) -> PlanError:
        return PlanError(f"{self.label}: {message}")

    def find(self, *fields: str) -> tuple[str, Any] | None:
        """(path as written in the config, value) of the first field set (not null or empty), or None.
        Fields may be dotted (``linear_attn_config.num_heads``)."""
        for field in fields:
            for prefix, scope in self.scopes:
                value = scope
                for key in field.split("."):
                    value = value.get(key) if isinstance(value, dict) else None
                if value is not None and value != "":
                    return prefix + field, value
        return None

    def has(self, field: str) -> bool:
        """Whether ``field`` is set to something other than null, 0, false or empty."""
        found = self.find(field)
        return found is not None and found[1] not in (0, False)

    def path(self, *fields: str) -> str:
        """Where the first of ``fields`` is (or would be) in the config, for messages."""
        found = self.find(*fields)
        return found[0] if found else self.scopes[0][0] + fields[0]

    def value(self, target: str, *fields: str, default: Any = _REQUIRED, note: str = "") -> Any:
        """The first of ``fields`` that is set, recorded as the source of profile field ``target``
        (unless ``target`` is empty); ``default`` if none is set, or else a missing-field error."""
        found = self.find(*fields)
        if found is None:
            if default is _REQUIRED:
                raise self.error(f"missing field '{self.path(*fields)}'")
            return default
        if target:
            self.sources[target] = f"{CONFIG} field {found[0]}{note}"
        return found[1]

    def count(self, target: str, *fields: str, minimum: int = 1, maximum: int = MAX_CONTEXT, **kw: Any) -> int:
        """An integer field in [``minimum``, ``maximum``] (the cap keeps layer lists and sizes built from
        it bounded), see `value`."""
        value = self.value(target, *fields, **kw)
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise self.error(f"field '{self.path(*fields)}' must be an integer from {minimum} to {maximum:,}, "
                             f"not {str(value)[:40]!r}")
        return value

    def int_list(self, target: str, field: str, length: int | None = None, note: str = "") -> list[int]:
        """A list of integers (``length`` of them if given), see `value`."""
        value = self.value(target, field, note=note)
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(f"field '{self.path(field)}' must be a list of integers")
        if length is not None and len(value) != length:
            raise self.error(f"field '{self.path(field)}' has {len(value)} entries for {length} layers")
        return value

    def flag(self, target: str, field: str) -> bool:
        """A boolean field; absent means False (the Hugging Face default for the flags read here)."""
        value = self.value(target, field, default=False)
        if not isinstance(value, bool):
            raise self.error(f"field '{self.path(field)}' must be true or false, not {value!r}")
        return value


# ----------------------------------------------------------------------------------------------------
# Building blocks shared by the architectures


def _group(r: _Reader, kind: str, layers: list[int], **fields: str) -> dict:
    """An attention group: ``profile_field="config_field"`` for each required positive integer."""
    group: dict[str, Any] = {"kind": kind, "layers": layers}
    for key, field in fields.items():
        group[key] = r.count(f"attention.{kind}.{key}", field)
    return group


def _every_layer(r: _Reader, kind: str, n: int) -> list[int]:
    """All ``n`` layers, for architectures with one attention kind throughout."""
    r.sources[f"attention.{kind}.layers"] = f"{CONFIG} field {r.path('num_hidden_layers')}: every layer"
    return list(range(n))


def _mla(r: _Reader, layers: list[int]) -> dict:
    """An MLA group (DeepSeek-V3 field names); ``q_lora_rank`` null means an uncompressed query."""
    group = _group(r, "mla", layers, num_heads="num_attention_heads", kv_lora_rank="kv_lora_rank",
                   qk_rope_head_dim="qk_rope_head_dim", qk_nope_head_dim="qk_nope_head_dim",
                   v_head_dim="v_head_dim")
    if r.has("q_lora_rank"):
        group["q_lora_rank"] = r.count("attention.mla.q_lora_rank", "q_lora_rank")
    return group


def _moe(r: _Reader, experts: str, top_k: str, width: str, shared: str | None = None) -> dict:
    """``ffn.moe`` from the config's names for expert count, top-k and expert width. ``shared`` names
    the shared-expert count; DeepSeek-style configs size shared experts like routed ones."""
    moe = {"num_experts": r.count("ffn.moe.num_experts", experts),
           "top_k": r.count("ffn.moe.top_k", top_k),
           "expert_intermediate": r.count("ffn.moe.expert_intermediate", width)}
    if shared and r.has(shared):
        moe["shared_experts"] = r.count("ffn.moe.shared_experts", shared)
        moe["shared_intermediate"] = r.count("ffn.moe.shared_intermediate", width,
                                             note=" (the config gives shared experts no width of their own)")
    return moe


def _ffn(r: _Reader, moe: dict, dense: list[int]) -> dict:
    """``ffn`` with its dense layers; their width (``intermediate_size``) only when there are any."""
    ffn: dict[str, Any] = {"moe": moe, "dense_layers": dense}
    if dense:
        ffn["dense_intermediate"] = r.count("ffn.dense_intermediate", "intermediate_size")
    return ffn


def _freq_dense_layers(r: _Reader, n: int) -> list[int]:
    """Dense-FFN layers, DeepSeek style: ``moe_layer_freq`` as a per-layer list (0 = dense), or as an
    int with MoE on every ``freq``-th layer from ``first_k_dense_replace`` on."""
    found = r.find("moe_layer_freq")
    if found and isinstance(found[1], list):
        flags = r.int_list("ffn.dense_layers", "moe_layer_freq", n, note=" (0 = dense)")
        return [i for i, moe in enumerate(flags) if moe == 0]
    first = r.count("", "first_k_dense_replace", minimum=0, default=0)
    freq = r.count("", "moe_layer_freq", default=1)
    r.sources["ffn.dense_layers"] = (f"{CONFIG} fields first_k_dense_replace ({first}) and moe_layer_freq "
                                     f"({freq}): MoE on every layer i >= {first} with i % {freq} == 0")
    return [i for i in range(n) if i < first or i % freq != 0]


def _qwen_dense_layers(r: _Reader, n: int) -> list[int]:
    """Dense-FFN layers, Qwen style: ``mlp_only_layers`` plus the layers i with (i + 1) not a multiple
    of ``decoder_sparse_step``."""
    only = set(r.int_list("", "mlp_only_layers")) if r.find("mlp_only_layers") else set()
    step = r.count("", "decoder_sparse_step", default=1)
    r.sources["ffn.dense_layers"] = f"{CONFIG} fields mlp_only_layers and decoder_sparse_step ({step})"
    return [i for i in range(n) if i in only or (i + 1) % step != 0]


def _one_based(r: _Reader, target: str, field: str, n: int) -> list[int]:
    """A list of 1-based layer numbers, converted to 0-based."""
    layers = r.int_list(target, field, note=" (1-based)")
    bad = [i for i in layers if not 1 <= i <= n]
    if bad:
        raise r.error(f"field '{r.path(field)}': layer {bad[0]} outside 1..{n}")
    return [i - 1 for i in layers]


# ----------------------------------------------------------------------------------------------------
# Architectures: each returns (attention groups, ffn) for a model of n layers


def _head_shape(r: _Reader, kind: str) -> dict:
    """``num_heads``, ``num_kv_heads`` and ``head_dim`` of a softmax attention group. Llama-family
    configs may omit the last two: KV heads then equal query heads (multi-head attention) and
    ``head_dim`` is ``hidden_size / num_attention_heads``, as the Hugging Face config classes default."""
    heads = r.count(f"attention.{kind}.num_heads", "num_attention_heads")
    if r.find("num_key_value_heads"):
        kv = r.count(f"attention.{kind}.num_kv_heads", "num_key_value_heads")
    else:
        kv = heads
        r.sources[f"attention.{kind}.num_kv_heads"] = (f"{CONFIG} field {r.path('num_attention_heads')}: "
                                                       "num_key_value_heads is absent (multi-head attention)")
    if r.find("head_dim", "attention_head_dim"):
        dim = r.count(f"attention.{kind}.head_dim", "head_dim", "attention_head_dim")
    else:
        hidden = r.count("", "hidden_size")
        if hidden % heads:
            raise r.error(f"no field 'head_dim', and hidden_size {hidden} is not a multiple of "
                          f"num_attention_heads {heads}")
        dim = hidden // heads
        r.sources[f"attention.{kind}.head_dim"] = (f"{CONFIG} fields hidden_size / num_attention_heads "
                                                   "(head_dim is absent)")
    return {"num_heads": heads, "num_kv_heads": kv, "head_dim": dim}


def _layer_types(r: _Reader, field: str, types, n: int, allowed: set[str], context: str = "") -> list:
    """A config's per-layer ``layer_types`` list, checked: ``n`` entries, each one of ``allowed``."""
    if not isinstance(types, list) or len(types) != n:
        raise r.error(f"field '{field}' must list {n} layer types")
    unknown = sorted(str(t) for t in set(types) - allowed)
    if unknown:
        raise r.error(f"field '{field}': unknown layer type {unknown[0]!r}{context}")
    return types


# How each architecture places sliding-window layers when the config has no ``layer_types`` list
# (the list Hugging Face transformers writes since 4.53, which wins when present): as its config class
# derives them. ``None`` means no sliding window.
def _sliding_layers(r: _Reader, model_type: str, n: int) -> tuple[list[int], str] | None:
    """Sliding-window layers (0-based) and how they were found, or None for full attention throughout."""
    found = r.find("layer_types")
    if found:
        types = _layer_types(r, found[0], found[1], n, {"full_attention", "sliding_attention"},
                             f" for model_type {model_type}")
        sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
        return (sliding, f"{CONFIG} field {found[0]} (sliding_attention)") if sliding else None
    if model_type in ("gemma2", "gemma3", "gemma3_text"):
        if model_type == "gemma2":
            every = 2
            how = "model_type gemma2: every other layer from the first is sliding"
        else:
            every = r.count("", "sliding_window_pattern", default=6)
            how = f"field sliding_window_pattern ({every}): every {every}th layer is global, the rest sliding"
        return [i for i in range(n) if (i + 1) % every], f"{CONFIG} {how}"
    if model_type in ("mistral", "mixtral"):
        return (list(range(n)), f"{CONFIG} field sliding_window is set: every layer") if r.has("sliding_window") \
            else None
    if model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        if not r.flag("", "use_sliding_window") or not r.has("sliding_window"):
            return None
        first = r.count("", "max_window_layers", minimum=0, maximum=n, default=n)
        return list(range(first, n)), f"{CONFIG} fields use_sliding_window and max_window_layers ({first})"
    return None


def _softmax_groups(r: _Reader, model_type: str, n: int) -> list[dict]:
    """GQA on the full-attention layers, SWA (same head shape, ``sliding_window``) on the sliding ones."""
    sliding = _sliding_layers(r, model_type, n)
    if sliding is None:
        return [{"kind": "gqa", "layers": _every_layer(r, "gqa", n), **_head_shape(r, "gqa")}]
    layers, how = sliding
    groups = []
    full = [i for i in range(n) if i not in set(layers)]
    if full:
        r.sources["attention.gqa.layers"] = f"{how}: the other layers are full attention"
        groups.append({"kind": "gqa", "layers": full, **_head_shape(r, "gqa")})
    r.sources["attention.swa.layers"] = how
    swa = {"kind": "swa", "layers": layers, **_head_shape(r, "swa")}
    swa["window"] = r.count("attention.swa.window", "sliding_window", "sliding_window_size")
    return groups + [swa]


def _dense_ffn(r: _Reader) -> dict:
    """A gated dense FFN (SwiGLU or GeGLU: gate, up, down) on every layer (no ``moe``: all dense)."""
    return {"dense_intermediate": r.count("ffn.dense_intermediate", "intermediate_size")}


def _dense(model_type: str):
    """Dense decoders (Llama, Mistral, Qwen2/3, Gemma 1-3): softmax attention (sliding where the
    architecture puts it) and a gated dense FFN in every layer."""
    def build(r: _Reader, n: int) -> tuple[list[dict], dict]:
        return _softmax_groups(r, model_type, n), _dense_ffn(r)
    build.__doc__ = f"{model_type}: {_dense.__doc__.split(':', 1)[1].strip()}"
    return build


def _mixtral(r: _Reader, n: int) -> tuple[list[dict], dict]:
    """Mixtral: GQA (sliding where ``sliding_window`` is set) and an MoE FFN in every layer; the experts'
    width is ``intermediate_size``."""
    moe = _moe(r, "num_local_experts", "num_experts_per_tok", "intermediate_size")
    r.sources["ffn.dense_layers"] = f"{CONFIG} model_type mixtral: no dense FFN layers"
    return _softmax_groups(r, "mixtral", n), {"moe": moe, "dense_layers": []}


def _qwen2_moe(r: _Reader, n: int) -> tuple[list[dict], dict]:
    """Qwen1.5/Qwen2 MoE: GQA, routed experts plus one shared expert of its own width."""
    moe = _moe(r, "num_experts", "num_experts_per_tok", "moe_intermediate_size")
    if r.has("shared_expert_intermediate_size"):
        moe["shared_experts"] = 1
        r.sources["ffn.moe.shared_experts"] = (f"{CONFIG} field {r.path('shared_expert_intermediate_size')} "
                                               "is set: qwen2_moe then has one shared expert")
        moe["shared_intermediate"] = r.count("ffn.moe.shared_intermediate", "shared_expert_intermediate_size")
    return _softmax_groups(r, "qwen2_moe", n), _ffn(r, moe, _qwen_dense_layers(r, n))


def _qwen3_moe(r: _Reader, n: int) -> tuple[list[dict], dict]:
    """Qwen3 MoE: GQA in every layer, MoE FFN except ``mlp_only_layers``."""
    return _softmax_groups(r, "qwen3_moe", n), _ffn(r, _moe(r, "num_experts", "num_experts_per_tok",
                                                             "moe_intermediate_size"), _qwen_dense_layers(r, n))


_NEMOTRON_BLOCKS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _nemotron_h(r: _Reader, n: int) -> tuple[list[dict], dict]:
    """Nemotron-H: a stack of single-purpose blocks, ``M`` (Mamba2 mixer), ``*`` (GQA) and ``-``
    (ungated squared-ReLU MLP), in ``hybrid_override_pattern`` (or ``layers_block_type``). A profile
    layer is one mixer block and, when the next block is an MLP, that MLP as its FFN; mixers followed
    by another mixer have no FFN. MoE blocks (``E``, Nemotron 3) are refused: their ungated experts are
    not modelled."""
    found = r.find("hybrid_override_pattern", "layers_block_type")
    if found is None:
        raise r.error("missing field 'hybrid_override_pattern'")
    path, pattern = found
    if isinstance(pattern, list):
        bad = [b for b in pattern if b not in _NEMOTRON_BLOCKS]
        if bad:
            raise r.error(f"field '{path}': unknown block type {str(bad[0])[:40]!r} "
                          f"(expected {', '.join(_NEMOTRON_BLOCKS)})")
        pattern = "".join(_NEMOTRON_BLOCKS[b] for b in pattern)
    if not isinstance(pattern, str) or len(pattern) != n:
        raise r.error(f"field '{path}' must give {n} blocks (num_hidden_layers), one character each")
    bad = sorted(set(pattern) - set("M*-E"))
    if bad:
        raise r.error(f"field '{path}': unknown block {bad[0]!r} (expected M, *, - or E)")
    if "E" in pattern:
        raise r.error(f"field '{path}': MoE blocks ('E', Nemotron 3) are not supported: their ungated "
                      "squared-ReLU experts are not modelled")
    mamba, attention, with_ffn, layer = [], [], set(), -1
    for i, block in enumerate(pattern):
        if block == "-":
            if layer < 0 or layer in with_ffn:
                raise r.error(f"field '{path}': MLP block {i} does not follow a mixer block (M or *)")
            with_ffn.add(layer)
            continue
        layer += 1
        (mamba if block == "M" else attention).append(layer)
    m = layer + 1
    r.num_layers = m
    how = f"{CONFIG} field {path}: one layer per mixer block (M or *)"
    r.sources["num_layers"] = f"{how}; num_hidden_layers ({n}) also counts the MLP blocks"
    groups = []
    if mamba:
        r.sources["attention.mamba2.layers"] = f"{how}: the M blocks"
        groups.append(_group(r, "mamba2", mamba, num_heads="mamba_num_heads", head_dim="mamba_head_dim",
                             state_size="ssm_state_size", num_groups="n_groups", conv_kernel="conv_kernel"))
    if attention:
        r.sources["attention.gqa.layers"] = f"{how}: the * blocks"
        groups.append({"kind": "gqa", "layers": attention, **_head_shape(r, "gqa")})
    ffn: dict[str, Any] = {"no_ffn_layers": [i for i in range(m) if i not in with_ffn], "gated": False}
    r.sources["ffn.no_ffn_layers"] = (f"{how}: mixer blocks followed by another mixer have no FFN; the others "
                                      "have the MLP block (-) that follows them")
    r.sources["ffn.gated"] = (f"{CONFIG} model_type nemotron_h: the MLP is up and down projections around "
                              f"{r.value('', 'mlp_hidden_act', default='relu2')} (no gate)")
    if with_ffn:
        ffn["dense_intermediate"] = r.count("ffn.dense_intermediate", "intermediate_size")
    return groups, ffn


def _minimax_m2(r: _Reader, n: int) -> tuple[list[dict], dict]:
    """MiniMax-M2: GQA and an MoE FFN in every layer."""
    attn = _group(r, "gqa", _every_layer(r, "gqa", n), num_heads="num_attention_heads",
                  num_kv_heads="num_key_value_heads", head_dim="head_dim")
    if r.has("shared_intermediate_size"):
        raise r.error("shared experts (shared_intermediate_size > 0) are not supported for minimax_m2")
    # MiniMax-M2 calls the routed experts' width intermediate_size and has an MoE FFN in every layer.
    moe = _moe(r, "num_local_experts", "num_experts_per_tok", "intermediate_size")
    r.sources["ffn.dense_layers"] = f"{CONFIG} model_type minimax_m2: no dense FFN layers"
    return [attn], {"moe": moe, "dense_layers": []}


def _deepseek_v3(r: _Reader, n: int) -> tuple[list[dict], dict]:
    """DeepSeek-V2/V3 and Kimi-K2: MLA in every layer, the first ``first_k_dense_replace`` FFNs dense."""
    moe = _moe(r, "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", shared="n_shared_experts")
    return [_mla(r, _every_layer(r, "mla", n))], _ffn(r, moe, _freq_dense_layers(r, n))


def _qwen3_5(r: _Reader, n: int) -> tuple[list[dict], dict]:
    """Qwen3.5: gated GQA on the ``full_attention`` layers (``layer_types``, which wins over
    ``full_attention_interval``), Gated DeltaNet on the rest; MoE plus one shared expert."""
    if r.find("layer_types"):
        types = _layer_types(r, r.path("layer_types"),
                             r.value("attention.gqa.layers", "layer_types", note=" (full_attention)"), n,
                             {"full_attention", "linear_attention"})
        full = [i for i, t in enumerate(types) if t == "full_attention"]
    else:
        every = r.count("attention.gqa.layers", "full_attention_interval", note=" (every Nth layer is full)")
        full = [i for i in range(n) if (i + 1) % every == 0]
    gqa = _group(r, "gqa", full, num_heads="num_attention_heads", num_kv_heads="num_key_value_heads",
                 head_dim="head_dim")
    gqa["output_gate"] = r.flag("attention.gqa.output_gate", "attn_output_gate")
    pattern = r.path("layer_types", "full_attention_interval")
    r.sources["attention.gated_deltanet.layers"] = f"{CONFIG} field {pattern}: the layers that are not full attention"
    gdn = _group(r, "gated_deltanet", [i for i in range(n) if i not in set(full)],
                 num_key_heads="linear_num_key_heads", num_value_heads="linear_num_value_heads",
                 key_head_dim="linear_key_head_dim", value_head_dim="linear_value_head_dim",
                 conv_kernel="linear_conv_kernel_dim")
    moe = _moe(r, "num_experts", "num_experts_per_tok", "moe_intermediate_size")
    if r.has("shared_expert_intermediate_size"):
        moe["shared_experts"] = 1
        r.sources["ffn.moe.shared_experts"] = (f"{CONFIG} field {r.path('shared_expert_intermediate_size')} "
                                               "is set: Qwen3.5 then has one shared expert")
        moe["shared_intermediate"] = r.count("ffn.moe.shared_intermediate", "shared_expert_intermediate_size")
    return [gqa, gdn], _ffn(r, moe, _qwen_dense_layers(r, n))


def _mimo_v2_flash(r: _Reader, n: int) -> tuple[list[dict], dict]:
    """MiMo-V2-Flash: ``hybrid_layer_pattern`` 0 = full GQA, 1 = sliding-window GQA with its own
    ``swa_*`` shapes; ``moe_layer_freq`` 0 = dense FFN."""
    pattern = r.int_list("attention.gqa.layers", "hybrid_layer_pattern", n, " (0 = full attention)")
    r.sources["attention.swa.layers"] = f"{CONFIG} field hybrid_layer_pattern (1 = sliding window)"
    if set(pattern) - {0, 1}:
        raise r.error("field 'hybrid_layer_pattern' must hold only 0 (full) and 1 (sliding window)")
    gqa = _group(r, "gqa", [i for i, p in enumerate(pattern) if p == 0], num_heads="num_attention_heads",
                 num_kv_heads="num_key_value_heads", head_dim="head_dim", v_head_dim="v_head_dim")
    swa = _group(r, "swa", [i for i, p in enumerate(pattern) if p == 1], num_heads="swa_num_attention_heads",
                 num_kv_heads="swa_num_key_value_heads", head_dim="swa_head_dim", v_head_dim="swa_v_head_dim")
    swa["window"] = r.count("attention.swa.window", "sliding_window", "sliding_window_size")
    moe = _moe(r, "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", shared="n_shared_experts")
    return [gqa, swa], _ffn(r, moe, _freq_dense_layers(r, n))


def _kimi_linear(r: _Reader, n: int) -> tuple[list[dict], dict]:
    """Kimi Linear and Kimi-K3: MLA and KDA layers listed 1-based in ``linear_attn_config``; DeepSeek-style
    MoE, with a latent routed-expert width (``routed_expert_hidden_size``) in Kimi-K3."""
    mla = _mla(r, _one_based(r, "attention.mla.layers", "linear_attn_config.full_attn_layers", n))
    mla["output_gate"] = r.flag("attention.mla.output_gate", "mla_use_output_gate")
    kda = _group(r, "kda", _one_based(r, "attention.kda.layers", "linear_attn_config.kda_layers", n),
                 num_heads="linear_attn_config.num_heads", head_dim="linear_attn_config.head_dim",
                 conv_kernel="linear_attn_config.short_conv_kernel_size")
    moe = _moe(r, "num_experts", "num_experts_per_token", "moe_intermediate_size", shared="num_shared_experts")
    if r.find("routed_expert_hidden_size"):
        moe["latent_dim"] = r.count("ffn.moe.latent_dim", "routed_expert_hidden_size",
                                    note=" (routed experts work in a latent of this width)")
    return [mla, kda], _ffn(r, moe, _freq_dense_layers(r, n))


_ARCHITECTURES: dict[str, Callable[[_Reader, int], tuple[list[dict], dict]]] = {
    **{t: _dense(t) for t in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gemma3")},
    "mixtral": _mixtral,
    "qwen2_moe": _qwen2_moe,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v2": _deepseek_v3,
    "nemotron_h": _nemotron_h,
    "minimax_m2": _minimax_m2,
    "deepseek_v3": _deepseek_v3,
    "kimi_k2": _deepseek_v3,
    "qwen3_5_moe": _qwen3_5,
    "mimo_v2_flash": _mimo_v2_flash,
    "kimi_linear": _kimi_linear,
    "kimi_k3": _kimi_linear,
}
SUPPORTED_MODEL_TYPES = tuple(sorted(_ARCHITECTURES))


# ----------------------------------------------------------------------------------------------------
# Dtypes and names


def _torch_dtype(r: _Reader, path: str, value: Any) -> str:
    """Our dtype name for a torch dtype name found at ``path`` (``bfloat16`` -> ``bf16``)."""
    if str(value) not in _TORCH_DTYPES:
        raise r.error(f"field '{path}': unsupported dtype {value!r} (supported: {', '.join(_TORCH_DTYPES)})")
    return _TORCH_DTYPES[str(value)]


def _model_dtype(r: _Reader) -> str:
    """The checkpoint's torch dtype (bf16 when the config names none)."""
    found = r.find("torch_dtype", "dtype")
    if found is None:
        r.sources["dtypes.weights"] = "assumed: bf16 (the config names no dtype)"
        return "bf16"
    r.sources["dtypes.weights"] = f"{CONFIG} field {found[0]}"
    return _torch_dtype(r, *found)


def _weight_dtypes(r: _Reader) -> dict:
    """Weights and routed-expert weights: the quantization format where the checkpoint is quantized.

    A quantization that leaves attention and shared experts out (Kimi-K3's mxfp4 ``ignore`` list) is
    routed-expert-only: the rest keeps the model dtype.
    """
    quant = r.find("quantization_config")
    if not quant:
        return {"weights": _model_dtype(r)}
    path, q = quant
    method = f"{q.get('quant_method', '')} {q.get('format', '')}".lower() if isinstance(q, dict) else ""
    dtype = "mxfp4" if "mxfp4" in method else "fp8" if "fp8" in method else None
    if dtype is None:
        raise r.error(f"field '{path}': unsupported quantization {method.strip() or q!r} (supported: fp8, mxfp4)")
    ignore = q.get("ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(x, str) for x in ignore):
        raise r.error(f"field '{path}.ignore' must be a list of module names, not {ignore!r}")
    if any("self_attn" in x for x in ignore):
        weights = _model_dtype(r)
        r.sources["dtypes.experts"] = (f"{CONFIG} field {path} ({method.strip()}); its ignore list keeps "
                                       f"attention and shared experts at {weights}")
        return {"weights": weights, "experts": dtype}
    r.sources["dtypes.weights"] = (f"{CONFIG} field {path} ({method.strip()}); modules it leaves "
                                   f"unquantized (lm_head, ...) are counted at {dtype} too, so weight bytes "
                                   "are a lower bound")
    return {"weights": dtype}


def _dtypes(r: _Reader, recurrent: bool, mamba: bool = False) -> dict:
    """Weight, KV cache and (for linear-attention models) recurrent and conv state dtypes."""
    dtypes = {**_weight_dtypes(r), "kv_cache": "bf16"}
    r.sources["dtypes.kv_cache"] = _KV_NOTE
    if recurrent:
        found = r.find("mamba_ssm_dtype", "mamba_ssm_cache_dtype")
        if found:
            dtypes["state"] = _torch_dtype(r, *found)
            r.sources["dtypes.state"] = f"{CONFIG} field {found[0]}"
        elif mamba:
            dtypes["state"] = "fp32"
            r.sources["dtypes.state"] = ("assumed: fp32, SGLang's default Mamba2 SSM state dtype (--mamba-ssm-dtype "
                                         "float32); vLLM's 'auto' keeps it in the model dtype")
        else:
            dtypes["state"] = "fp32"
            r.sources["dtypes.state"] = "assumed: fp32, the SGLang and vLLM default for KDA and Gated DeltaNet state"
        dtypes["conv_state"] = "bf16"
        r.sources["dtypes.conv_state"] = ("assumed: serving engines keep the last conv_kernel - 1 conv inputs "
                                          "in the activation dtype (bf16)")
    return dtypes


def _repo_model_name(config: dict, source: str) -> str:
    """The model part of the repository id, as spelled: ``_name_or_path`` (``org/Model``), else the file
    name (``org--Model.config.json`` or ``Model.json``); empty for a bare ``config.json``."""
    for scope in (config.get("text_config"), config):
        if isinstance(scope, dict) and isinstance(scope.get("_name_or_path"), str) and scope["_name_or_path"]:
            return scope["_name_or_path"].rstrip("/").split("/")[-1]
    stem = re.sub(r"(^|\.)config$", "", re.sub(r"\.json$", "", Path(source).name)) if source else ""
    return stem.split("--")[-1]


def _profile_name(name: str, label: str) -> str:
    name = name.strip().lower()
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        raise PlanError(f"{label}: model name {name!r} must be letters, digits, '.', '_' or '-'")
    return name


# ----------------------------------------------------------------------------------------------------


def import_hf_config(config: dict, name: str | None = None, source: str = "") -> dict:
    """Turn a Hugging Face ``config.json`` (already parsed) into a model-profile mapping.

    ``name`` is the profile name; by default the repository's model name from ``_name_or_path`` or from
    ``source`` (a file name like ``moonshotai--Kimi-K3.config.json`` gives ``kimi-k3``). ``source`` also
    labels error messages. Unsupported architectures and missing fields raise a one-line `PlanError`.
    The result is plain data; `prfaas_plan.profiles.model_from_dict` validates it into a `ModelProfile`.
    """
    label = source or CONFIG
    if not isinstance(config, dict):
        raise PlanError(f"{label}: expected a JSON object at the top level")
    r = _Reader(config, label)
    types = [scope.get("model_type") for _, scope in reversed(r.scopes) if scope.get("model_type")]
    if not types:
        raise r.error("missing field 'model_type'")
    for t in types:
        if not isinstance(t, str):
            raise r.error(f"field 'model_type' must be a string, not {str(t)[:40]!r}")
    model_type = next((t for t in types if t in _ARCHITECTURES), None)
    if model_type is None:
        raise r.error(f"unsupported model_type {types[0]!r} (supported: {', '.join(SUPPORTED_MODEL_TYPES)})")

    repo_name = _repo_model_name(config, source)
    if not (name or repo_name):
        raise r.error("cannot derive a model name (no _name_or_path, file not named org--Model.config.json); "
                      "pass one with `name`")
    profile: dict[str, Any] = {"kind": "model", "name": _profile_name(name or repo_name, label),
                               "display_name": repo_name or name}
    n = r.count("num_layers", "num_hidden_layers", maximum=MAX_LAYERS)
    profile["num_layers"] = n
    profile["hidden_size"] = r.count("hidden_size", "hidden_size")
    profile["vocab_size"] = r.count("vocab_size", "vocab_size")
    profile["max_context"] = r.count("max_context", "max_position_embeddings")
    if model_type.startswith("gemma") and r.find("tie_word_embeddings") is None:
        profile["tie_word_embeddings"] = True
        r.sources["tie_word_embeddings"] = "assumed: true, the Gemma config default (the field is absent)"
    else:
        profile["tie_word_embeddings"] = r.flag("tie_word_embeddings", "tie_word_embeddings")
    attention, ffn = _ARCHITECTURES[model_type](r, n)
    if r.num_layers is not None:
        n = profile["num_layers"] = r.num_layers
    profile["attention"] = attention
    profile["ffn"] = ffn
    recurrent = any(KINDS[g["kind"]].cache == "recurrent" for g in attention)
    profile["dtypes"] = _dtypes(r, recurrent, mamba=any(g["kind"] == "mamba2" for g in attention))
    origin = f" ({Path(source).name})" if source else ""
    profile["sources"] = {"architecture": f"Hugging Face {CONFIG}{origin}, model_type {model_type}, "
                                          f"imported by prfaas-plan model import", **dict(sorted(r.sources.items()))}
    return profile
