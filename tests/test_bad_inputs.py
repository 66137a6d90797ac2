"""Bad input of every kind, across the commands: exit 2, one stderr line naming the input, no traceback,
no file written. Plus the valid neighbours of the same inputs, which must keep working.

Each case builds its input files in a fresh folder (the working directory of the run) from a valid base
(a small model profile, a chip profile, a layout, a link profile, traces, a measurement CSV, a Hugging
Face config) with one thing broken, runs one command in-process and checks the contract. The families
follow the reliability issue: non-finite or zero hardware numbers, wrong types in model profiles,
binary files, extra fields, integers beyond int64, non-finite calibration points, list-valued HF fields,
absurd option magnitudes, misspelt keys.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from prfaas_plan.cli import run

# ----------------------------------------------------------------------------------------------------
# Valid bases

MODEL = {
    "kind": "model", "name": "tiny", "aliases": ["tiny-1"], "num_layers": 4, "hidden_size": 256,
    "vocab_size": 1000, "max_context": 65536,
    "attention": [
        {"kind": "gqa", "layers": [1, 3], "num_heads": 4, "num_kv_heads": 2, "head_dim": 64},
        {"kind": "kda", "layers": "rest", "num_heads": 4, "head_dim": 64, "conv_kernel": 4},
    ],
    "ffn": {"moe": {"num_experts": 8, "top_k": 2, "expert_intermediate": 128}, "dense_layers": [0],
            "dense_intermediate": 512},
    "dtypes": {"weights": "bf16", "kv_cache": "bf16", "state": "fp32", "conv_state": "bf16"},
    "sources": {"all": "assumed: test"},
}
CHIP = {
    "kind": "hardware", "name": "x1", "peak_tflops": {"bf16": 100, "fp8": 200}, "hbm_gb": 80, "hbm_tb_s": 2,
    "scaleup_gb_s": 300, "nic_gbps": 100, "power_w": 500,
    "price": {"purchase_usd": 10000, "cloud_usd_per_hour": 2.0, "note": "test"},
    "calibration": {"gemm_efficiency": {"bf16": 0.8}, "memory_efficiency": 0.8, "comm_efficiency": 0.5,
                    "source": "test"},
    "sources": {"all": "assumed: test"},
}
LAYOUT = {
    "name": "lay", "remote": {"instance": "8xH200", "instances": 2}, "threshold": "auto",
    "sites": [{"name": "a", "instance": "8xH20", "prefill": 2, "decode": 3,
               "link": {"bandwidth": "100G", "efficiency": 0.95, "rtt": "2ms"}}],
}
LINK_CSV = "time_s,gbps\n0,100\n60,10\n120,100\n"
JSONL = [{"timestamp": 0, "input_length": 2000, "output_length": 50, "hash_ids": [1, 2, 3]},
         {"timestamp": 500, "input_length": 3000, "output_length": 40, "hash_ids": [1, 2, 4, 5]}]
TRACE_CSV = "timestamp,input_length,output_length\n0,2000,50\n500,3000,40\n"
MEASUREMENTS = ("model,instance,len_tokens,latency_s\nqwen3-235b,8xH20,4096,0.5\nqwen3-235b,8xH20,16384,1.9\n"
                "qwen3-235b,8xH20,32768,4.1\n")
HF = {"model_type": "qwen3_moe", "_name_or_path": "Org/Tiny-MoE", "num_hidden_layers": 4, "hidden_size": 256,
      "vocab_size": 1000, "max_position_embeddings": 32768, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 64, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
      "intermediate_size": 512, "decoder_sparse_step": 1, "mlp_only_layers": [], "torch_dtype": "bfloat16",
      "tie_word_embeddings": False}

STACK = {"kind": "stack", "name": "mystack", "engine": "test", "versions": "1", "chunked_prefill": True,
         "latency_s": 0.01, "forward_overhead_s": 0.05, "step_overhead_s": 0.008, "prefill_token_budget": 8192,
         "wave_fraction": 0.1, "sources": {"all": "assumed: test"}}
STACK["sources"] = {k: "assumed: test" for k in ("latency_s", "forward_overhead_s", "step_overhead_s",
                                                 "prefill_token_budget", "wave_fraction")}
SPEC = "base: {model: kimi-linear, local: 64xH20}\ngrid:\n  link: [10G, 40G]\n"

BINARY = bytes(range(256)) * 4
DROP = object()  # a mutation value: remove the key


def _mutate(base: dict, path: str, value):
    """A deep copy of ``base`` with the dotted ``path`` set to ``value`` (or removed for DROP)."""
    data = copy.deepcopy(base)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if isinstance(node, list):
        node[int(last)] = value
    elif value is DROP:
        del node[last]
    else:
        node[last] = value
    return data


def _yaml(data) -> str:
    return yaml.safe_dump(data, sort_keys=False)


# ----------------------------------------------------------------------------------------------------
# Case builders: each returns (files {name: text or bytes}, argv, needle in the error line)

PROFILES = ("--profiles", "profiles")
KV_TINY = ("kv", "--model", "tiny", "--len", "1k")
RATES_X1 = ("rates", "--model", "kimi-linear", "--instance", "8xX1", "--len", "1k")


def model_case(path, value, needle):
    return {"profiles/tiny.yaml": _yaml(_mutate(MODEL, path, value))}, PROFILES + KV_TINY, needle


def model_text_case(text, needle):
    return {"profiles/tiny.yaml": text}, PROFILES + KV_TINY, needle


def chip_case(path, value, needle):
    return {"profiles/x1.yaml": _yaml(_mutate(CHIP, path, value))}, PROFILES + RATES_X1, needle


def stack_case(path, value, needle):
    return ({"profiles/mystack.yaml": _yaml(_mutate(STACK, path, value))},
            PROFILES + ("size", "--model", "kimi-linear", "--stack", "mystack"), needle)


def spec_case(text, needle):
    return {"spec.yaml": text}, ("sweep", "spec.yaml", "--output", "r.csv", "--no-progress"), needle


def layout_case(path, value, needle):
    return ({"lay.yaml": _yaml(_mutate(LAYOUT, path, value))},
            ("size", "--model", "kimi-linear", "--layout", "lay.yaml"), needle)


SIM = ("simulate", "--model", "kimi-linear", "--duration", "20s", "--plot", "out.png")


def link_case(text, needle):
    return {"link.csv": text}, SIM + ("--link-profile", "link.csv"), needle


def jsonl_case(records, needle, raw: str | None = None):
    text = raw if raw is not None else "".join(json.dumps(r) + "\n" for r in records)
    return {"t.jsonl": text}, ("simulate", "--model", "kimi-linear", "--trace", "t.jsonl", "--plot", "out.png"), needle


def trace_csv_case(text, needle):
    return {"t.csv": text}, ("workload", "describe", "--trace", "t.csv"), needle


def measurement_case(text, needle):
    return {"m.csv": text}, ("calibrate", "--measurements", "m.csv", "--row-stack", "sglang", "--no-loo"), needle


def hf_case(path, value, needle):
    return ({"config.json": json.dumps(_mutate(HF, path, value))},
            ("model", "import", "config.json", "--output", "tiny.yaml"), needle)


def cli_case(argv, needle):
    return {}, tuple(argv), needle


def _jsonl(i, **changes):
    records = copy.deepcopy(JSONL)
    records[i].update(changes)
    return records


CASES: dict[str, tuple] = {}

# --- model profiles: types, ranges, unknown keys, structure ------------------------------------------
for key in ("num_layers", "hidden_size", "vocab_size", "max_context"):
    for value, needle in ((0, ">= 1"), (-3, ">= 1"), ("many", "whole number"), (2.5, "whole number"),
                          ([4], "whole number"), (True, "whole number"), (float("inf"), "whole number"),
                          (3_000_000_000_000, "<=")):
        CASES[f"model-{key}-{value!r}"] = model_case(key, value, f"{key} ")
for key in ("num_heads", "num_kv_heads", "head_dim"):
    for value in (0, -1, "64", 1e9, None):
        CASES[f"model-gqa-{key}-{value!r}"] = model_case(f"attention.0.{key}", value, f"attention[0].{key}")
for key in ("num_experts", "top_k", "expert_intermediate"):
    for value in (0, "8", 1e20):
        CASES[f"model-moe-{key}-{value!r}"] = model_case(f"ffn.moe.{key}", value, f"ffn.moe.{key}")
CASES.update({
    "model-aliases-int": model_case("aliases", 5, "aliases must be a list"),
    "model-aliases-list-of-int": model_case("aliases", [5], "aliases[0] must be a string"),
    "model-layers-scalar": model_case("attention.0.layers", 3, "attention[0].layers"),
    "model-layers-range-3e9": model_case("attention.0.layers", {"start": 0, "stop": 3e9}, "attention[0].layers"),
    "model-layers-range-big-int": model_case("attention.0.layers", {"start": 0, "stop": 3_000_000_000},
                                             "attention[0].layers"),
    "model-layers-range-step-0": model_case("attention.0.layers", {"start": 0, "stop": 4, "step": 0},
                                            "attention[0].layers"),
    "model-layers-out-of-range": model_case("attention.0.layers", [1, 9], "layer 9 outside 0..3"),
    "model-layers-negative": model_case("attention.0.layers", [-1, 3], "attention[0].layers"),
    "model-layers-overlap": model_case("attention.1.layers", [0, 1, 2], "layer 1 is already gqa"),
    "model-typo-kv-cache": model_case("dtypes", {"weights": "bf16", "kv_cahce": "fp8"},
                                      "unknown key 'kv_cahce' under dtypes; did you mean kv_cache"),
    "model-typo-top-level": model_case("hidden_sise", 256, "unknown key 'hidden_sise'; did you mean hidden_size?"),
    "model-typo-moe": model_case("ffn.moe.topk", 2, "unknown key 'topk' under ffn.moe; did you mean top_k?"),
    "model-typo-attention": model_case("attention.0.num_kv_head", 2, "unknown key 'num_kv_head' under attention[0]"),
    "model-field-of-other-kind": model_case("attention.1.window", 128, "unknown key 'window' under attention[1]"),
    "model-unknown-kind": model_case("attention.0.kind", "mamba", "unknown attention kind 'mamba'"),
    "model-kind-int": model_case("attention.0.kind", 7, "missing field 'kind'"),
    "model-unknown-dtype": model_case("dtypes.kv_cache", "fp7", "dtypes.kv_cache: unknown dtype 'fp7'"),
    "model-dtype-int": model_case("dtypes.kv_cache", 8, "dtypes.kv_cache must be a string"),
    "model-heads-not-multiple": model_case("attention.0.num_kv_heads", 3, "not a multiple of num_kv_heads"),
    "model-top-k-exceeds": model_case("ffn.moe.top_k", 9, "top_k 9 exceeds num_experts 8"),
    "model-attention-empty": model_case("attention", [], "attention must have at least 1"),
    "model-attention-mapping": model_case("attention", {"kind": "gqa"}, "attention must be a list"),
    "model-group-not-mapping": model_case("attention.0", "gqa", "attention[0] must be a mapping"),
    "model-sources-missing": model_case("sources", DROP, "missing field 'sources'"),
    "model-sources-empty": model_case("sources", {}, "sources must have at least 1"),
    "model-name-list": model_case("name", ["tiny"], "name must be a string"),
    "model-tie-string": model_case("tie_word_embeddings", "yes", "tie_word_embeddings must be true or false"),
    "model-published-nan": model_case("published_params", {"total": float("nan"), "active": 1.0},
                                      "published_params.total"),
    "model-published-negative": model_case("published_params", {"total": -1.0, "active": 1.0},
                                           "published_params.total must be >= 0"),
    "model-dense-missing": model_case("ffn.dense_intermediate", DROP, "missing field 'dense_intermediate'"),
    "model-measured-one-point": model_case("measured_prefill", [{"instance": "8xH200", "source": "s", "points": [
        {"len_tokens": 1024, "latency_s": 0.1}]}], "measured_prefill[0].points must have at least 2"),
    "model-measured-inf": model_case("measured_prefill", [{"instance": "8xH200", "source": "s", "points": [
        {"len_tokens": 1024, "latency_s": 0.1}, {"len_tokens": 2048, "latency_s": float("inf")}]}],
        "measured_prefill[0].points[1].latency_s"),
    "model-measured-1e30-tokens": model_case("measured_prefill", [{"instance": "8xH200", "source": "s", "points": [
        {"len_tokens": 1024, "latency_s": 0.1}, {"len_tokens": 10**30, "latency_s": 0.2}]}],
        "measured_prefill[0].points[1].len_tokens"),
    "model-huge-kv": model_case("attention.0", {"kind": "gqa", "layers": [1, 3], "num_heads": 65536,
                                                "num_kv_heads": 65536, "head_dim": 1048576}, "would cache"),
    "model-binary": ({"profiles/tiny.yaml": BINARY}, PROFILES + KV_TINY, "not a UTF-8 text file"),
    "model-malformed-yaml": model_text_case("kind: model\nname: tiny\nnum_layers: [1,\n", "malformed YAML"),
    "model-top-level-list": model_text_case("- kind: model\n", "expected a YAML mapping"),
    "model-empty-file": model_text_case("", "expected a YAML mapping"),
    "model-yaml-inf": model_text_case(_yaml(MODEL).replace("hidden_size: 256", "hidden_size: .inf"), "hidden_size"),
    "model-kind-wrong": model_text_case(_yaml(MODEL).replace("kind: model", "kind: modle", 1), "field 'kind'"),
})

# --- hardware profiles: non-finite, zero, negative, wrong types, unknown keys --------------------------
for key in ("hbm_gb", "hbm_tb_s", "scaleup_gb_s"):
    for value, needle in ((float("nan"), "finite"), (float("inf"), "finite"), (0, "> 0"), (-1, "> 0"),
                          ("fast", "must be a number")):
        CASES[f"chip-{key}-{value!r}"] = chip_case(key, value, key)
for value in (float("nan"), float("inf"), 0, -5, "lots"):
    CASES[f"chip-peak-bf16-{value!r}"] = chip_case("peak_tflops.bf16", value, "peak_tflops.bf16")
for key, high in (("gemm_efficiency.bf16", 1.5), ("memory_efficiency", 1.5), ("comm_efficiency", 2.5)):
    for value in (0, high, float("nan"), -0.2):
        CASES[f"chip-{key}-{value!r}"] = chip_case(f"calibration.{key}", value, f"calibration.{key}")
CASES.update({
    "chip-gemm-unknown-class": chip_case("calibration.gemm_efficiency", {"bf16": 0.8, "bf61": 0.5}, "bf61"),
    "chip-gemm-missing-bf16": chip_case("calibration.gemm_efficiency", {"fp8": 0.5}, "bf16"),
    "chip-price-nan": chip_case("price.purchase_usd", float("nan"), "price.purchase_usd"),
    "chip-price-inf": chip_case("price.cloud_usd_per_hour", float("inf"), "price.cloud_usd_per_hour"),
    "chip-nic-nan": chip_case("nic_gbps", float("nan"), "nic_gbps"),
    "chip-power-negative": chip_case("power_w", -1, "power_w"),
    "chip-peak-missing-bf16": chip_case("peak_tflops", {"fp8": 200}, "bf16"),
    "chip-peak-unknown-dtype": chip_case("peak_tflops", {"bf16": 100, "bf61": 3}, "bf61"),
    "chip-peak-scalar": chip_case("peak_tflops", 100, "peak_tflops must be a mapping"),
    "chip-typo": chip_case("hbm_gbs", 80, "unknown key 'hbm_gbs'; did you mean hbm_gb"),
    "chip-typo-calibration": chip_case("calibration.overhead", 0.1, "unknown key 'overhead' under calibration"),
    "chip-aliases-int": chip_case("aliases", 5, "aliases must be a list"),
    "chip-binary": ({"profiles/x1.yaml": BINARY}, PROFILES + RATES_X1, "not a UTF-8 text file"),
})

# --- layout files -------------------------------------------------------------------------------------
CASES.update({
    "layout-efficiency-7.5": layout_case("sites.0.link.efficiency", 7.5, "sites[0].link.efficiency must be <= 1"),
    "layout-efficiency-0": layout_case("sites.0.link.efficiency", 0, "sites[0].link.efficiency must be > 0"),
    "layout-efficiency-nan": layout_case("sites.0.link.efficiency", float("nan"), "sites[0].link.efficiency"),
    "layout-typo": layout_case("sites.0.link.eficiency", 0.9, "unknown key 'eficiency' under sites[0].link"),
    "layout-typo-top": layout_case("treshold", "auto", "unknown key 'treshold'; did you mean threshold"),
    "layout-decode-1e15": layout_case("sites.0.decode", 10**15, "sites[0].decode must be <= 1000000"),
    "layout-decode-negative": layout_case("sites.0.decode", -1, "sites[0].decode must be >= 0"),
    "layout-decode-float": layout_case("sites.0.decode", 2.5, "sites[0].decode must be a whole number"),
    "layout-chips-over-cap": layout_case("sites.0.decode", 900_000, "cap of 1,000,000 chips"),
    "layout-bandwidth-fast": layout_case("sites.0.link.bandwidth", "fast", "bandwidth 'fast'"),
    "layout-bandwidth-zero": layout_case("sites.0.link.bandwidth", "0G", "bandwidth '0G'"),
    "layout-rtt-negative": layout_case("sites.0.link.rtt", "-1ms", "rtt '-1ms'"),
    "layout-sites-mapping": layout_case("sites", {"name": "a"}, "sites must be a list"),
    "layout-instance-unknown": layout_case("sites.0.instance", "8xH900", "unknown chip 'h900'"),
    "layout-remote-instances-str": layout_case("remote.instances", "two", "remote.instances must be a whole"),
    "layout-threshold-bad": layout_case("threshold", "soon", "threshold 'soon'"),
    "layout-binary": ({"lay.yaml": BINARY}, ("size", "--model", "kimi-linear", "--layout", "lay.yaml"),
                      "not a UTF-8 text file"),
})

# --- files follow the command line's rules (issue 23): units, duplicates, ranges with the reason ----
LAYOUT_TEXT = _yaml(LAYOUT)
CASES.update({
    "layout-rtt-bare-number": layout_case("sites.0.link.rtt", 20, "sites[0].link.rtt '20': give a unit (ms, s, "
                                          "min); did you mean 20ms?"),
    "layout-rtt-bare-text": layout_case("sites.0.link.rtt", "20", "did you mean 20ms?"),
    "layout-rtt-bare-float": layout_case("sites.0.link.rtt", 2.5, "did you mean 2.5ms?"),
    "layout-bandwidth-bare-number": layout_case("sites.0.link.bandwidth", 100, "sites[0].link.bandwidth '100': "
                                                "give a unit, e.g. 100G"),
    "layout-bandwidth-bool": layout_case("sites.0.link.bandwidth", True, "sites[0].link.bandwidth must be a string"),
    "layout-duplicate-site": layout_case("sites", LAYOUT["sites"] * 2, "sites[1].name 'a' is already the name of "
                                         "sites[0]"),
    "layout-duplicate-key": ({"lay.yaml": LAYOUT_TEXT + "name: again\n"},
                             ("size", "--model", "kimi-linear", "--layout", "lay.yaml"),
                             "lay.yaml:15: key 'name' is given twice (first on line 1)"),
    "layout-duplicate-key-in-flow": ({"lay.yaml": "sites:\n  - {name: a, instance: 8xH20, prefill: 2, decode: 3, "
                                                  "link: {bandwidth: 10G, rtt: 2ms, rtt: 9ms}}\n"},
                                     ("size", "--model", "kimi-linear", "--layout", "lay.yaml"),
                                     "key 'rtt' is given twice"),
    "spec-duplicate-key": spec_case(SPEC + "grid:\n  link: [100G]\n", "spec.yaml:4: key 'grid' is given twice"),
    "spec-duplicate-input": spec_case("base: {model: kimi-linear, model: qwen3-235b}\n", "key 'model' is given twice"),
    "spec-binary": ({"spec.yaml": BINARY}, ("sweep", "spec.yaml", "--output", "r.csv"), "spec.yaml: not a UTF-8 text file"),
    "spec-unknown-key-names-file": spec_case(SPEC + "extra: 1\n", "spec.yaml: sweep spec: unknown key 'extra'"),
    "stack-budget-fraction": stack_case("prefill_token_budget", 1.5, "prefill_token_budget must be a whole number "
                                        "of tokens from 1 to 1,073,741,824, not 1.5"),
    "stack-budget-1e300": stack_case("prefill_token_budget", 1e300, "prefill_token_budget must be a whole number"),
    "stack-budget-zero": stack_case("prefill_token_budget", 0, "prefill_token_budget"),
    "stack-forward-overhead-huge": stack_case("forward_overhead_s", 1e6, "forward_overhead_s must be at most 10, "
                                              "not 1000000.0: an overhead above 10 s"),
    "stack-latency-inf": stack_case("latency_s", float("inf"), "latency_s must be a finite number"),
    "stack-wave-2": stack_case("wave_fraction", 2.0, "wave_fraction must be at most 1"),
    "stack-duplicate-key": ({"profiles/mystack.yaml": _yaml(STACK) + "latency_s: 0.5\n"},
                            PROFILES + ("size", "--model", "kimi-linear", "--stack", "mystack"),
                            "key 'latency_s' is given twice"),
    "model-duplicate-key": model_text_case(_yaml(MODEL) + "hidden_size: 512\n", "key 'hidden_size' is given twice"),
    "chip-duplicate-key": ({"profiles/x1.yaml": _yaml(CHIP) + "hbm_gb: 96\n"}, PROFILES + RATES_X1,
                           "key 'hbm_gb' is given twice"),
    "stack-broken-is-used": ({"profiles/mystack.yaml": _yaml(STACK).replace("engine: test", "engine: [")},
                             PROFILES + ("size", "--model", "kimi-linear", "--stack", "mystack"), "mystack.yaml"),
    "stack-broken-shadows-bundled": ({"profiles/vllm.yaml": _yaml(_mutate(STACK, "name", "vllm")).replace(
        "latency_s: 0.01", "latency_s: -1")}, PROFILES + ("size", "--model", "kimi-linear", "--stack", "vllm"),
        "vllm.yaml: latency_s must be a finite number >= 0"),
})

# --- link profiles ------------------------------------------------------------------------------------
CASES.update({
    "link-extra-field": link_case("time_s,gbps\n0,100\n60,10,5\n", "link.csv:3: expected 2 fields"),
    "link-binary": link_case(BINARY, "not a UTF-8 text file"),
    "link-inf": link_case("time_s,gbps\n0,inf\n", "link.csv:2: gbps: expected a finite number"),
    "link-nan-time": link_case("time_s,gbps\nnan,1\n", "link.csv:2: time_s: expected a finite number"),
    "link-negative": link_case("time_s,gbps\n0,-1\n", "link.csv:2: gbps: must be >= 0"),
    "link-backwards": link_case("time_s,gbps\n5,1\n3,1\n", "goes backwards"),
    "link-unknown-column": link_case("time,gbps\n0,1\n", "unknown column 'time'; did you mean time_s"),
    "link-extra-column": link_case("time_s,gbps,loss\n0,1,0\n", "unknown column 'loss'"),
    "link-no-rows": link_case("time_s,gbps\n", "no rows"),
    "link-text": link_case("time_s,gbps\n0,fast\n", "link.csv:2: gbps: expected a number"),
    "link-huge": link_case("time_s,gbps\n0,1e20\n", "link.csv:2: gbps: must be at most"),
})

# --- traces -------------------------------------------------------------------------------------------
CASES.update({
    "jsonl-input-beyond-int64": jsonl_case(_jsonl(1, input_length=2**70), "t.jsonl:2: input_length"),
    "jsonl-timestamp-beyond-int64": jsonl_case(_jsonl(1, timestamp=2**70), "t.jsonl:2: timestamp"),
    "jsonl-hash-beyond-int64": jsonl_case(_jsonl(0, hash_ids=[1, 2**64]), "t.jsonl:1: hash_ids"),
    "jsonl-input-1e30": jsonl_case(_jsonl(0, input_length=1e30), "t.jsonl:1: input_length"),
    "jsonl-input-fraction": jsonl_case(_jsonl(0, input_length=10.5), "t.jsonl:1: input_length"),
    "jsonl-input-string": jsonl_case(_jsonl(0, input_length="2000"), "t.jsonl:1: input_length"),
    "jsonl-output-negative": jsonl_case(_jsonl(0, output_length=-1), "t.jsonl:1: output_length"),
    "jsonl-timestamp-nan": jsonl_case(None, "t.jsonl:1: timestamp", raw='{"timestamp": NaN, "input_length": 5, '
                                      '"output_length": 1, "hash_ids": []}\n'),
    "jsonl-timestamp-backwards": jsonl_case(_jsonl(1, timestamp=-1), "t.jsonl:2: timestamp"),
    "jsonl-missing": jsonl_case([{"timestamp": 0}], "t.jsonl:1: missing"),
    "jsonl-unknown-key": jsonl_case(_jsonl(1, prompt_length=5), "t.jsonl:2: unknown key 'prompt_length'"),
    "jsonl-hash-strings": jsonl_case(_jsonl(0, hash_ids=["a"]), "t.jsonl:1: hash_ids"),
    "jsonl-not-json": jsonl_case(None, "t.jsonl:1: not valid JSON", raw="{oops\n"),
    "jsonl-array": jsonl_case(None, "t.jsonl:1: a JSON list", raw="[1, 2]\n"),
    "jsonl-binary": ({"t.jsonl": BINARY}, ("simulate", "--model", "kimi-linear", "--trace", "t.jsonl"), "t.jsonl:1"),
    "csv-input-beyond-int64": trace_csv_case(TRACE_CSV + f"900,{2**70},5\n", "t.csv:4: input_length"),
    "csv-timestamp-beyond-int64": trace_csv_case(TRACE_CSV + f"{2**70},10,5\n", "t.csv:4: timestamp"),
    "csv-timestamp-1e400": trace_csv_case(TRACE_CSV + "1e400,10,5\n", "t.csv:4: timestamp"),
    "csv-input-nan": trace_csv_case(TRACE_CSV + "900,nan,5\n", "t.csv:4: input_length"),
    "csv-extra-field": trace_csv_case(TRACE_CSV + "900,10,5,7\n", "t.csv:4: 4 fields"),
    "csv-unknown-column": trace_csv_case("timestamp,input_len,output_length\n0,1,1\n", "unknown column(s) 'input_len'"),
    "csv-binary": trace_csv_case(BINARY, "t.csv:1"),
    "trace-suffix": ({"t.txt": "x"}, ("simulate", "--model", "kimi-linear", "--trace", "t.txt"), "unknown trace format"),
})

# --- measurement CSVs (calibrate) ---------------------------------------------------------------------
CASES.update({
    "meas-inf": measurement_case(MEASUREMENTS + "qwen3-235b,8xH20,8192,inf\n", "m.csv:5: column 'latency_s'"),
    "meas-nan": measurement_case(MEASUREMENTS + "qwen3-235b,8xH20,8192,nan\n", "m.csv:5: column 'latency_s'"),
    "meas-1e30-tokens": measurement_case(MEASUREMENTS + "qwen3-235b,8xH20," + "1" + "0" * 30 + ",1.0\n",
                                         "m.csv:5: column 'len_tokens'"),
    "meas-fraction-tokens": measurement_case(MEASUREMENTS + "qwen3-235b,8xH20,10.5,1.0\n", "m.csv:5: column 'len_tokens'"),
    "meas-negative": measurement_case(MEASUREMENTS + "qwen3-235b,8xH20,8192,-1\n", "m.csv:5: column 'latency_s'"),
    "meas-huge-latency": measurement_case(MEASUREMENTS + "qwen3-235b,8xH20,8192,1e9\n", "m.csv:5: column 'latency_s'"),
    "meas-unknown-column": measurement_case("model,instance,len_tokens,latency\nqwen3-235b,8xH20,1,1\n",
                                            "unknown column 'latency'; did you mean latency_s"),
    "meas-unknown-model": measurement_case("model,instance,len_tokens,latency_s\nqwen9,8xH20,4096,1\n",
                                           "m.csv:2: unknown model 'qwen9'"),
    "meas-bad-instance": measurement_case("model,instance,len_tokens,latency_s\nqwen3-235b,H20x8,4096,1\n",
                                          "m.csv:2: instance"),
    "meas-short-row": measurement_case("model,instance,len_tokens,latency_s\nqwen3-235b,8xH20,4096\n", "m.csv:2"),
    "meas-throughput-inf": measurement_case("model,instance,len_tokens,kv_throughput_gbps\nqwen3-235b,8xH20,4096,inf\n",
                                            "m.csv:2: column 'kv_throughput_gbps'"),
    "meas-binary": ({"m.csv": BINARY}, ("calibrate", "--measurements", "m.csv", "--row-stack", "sglang", "--no-loo"), "UTF-8"),
})

# --- Hugging Face configs (model import) --------------------------------------------------------------
CASES.update({
    "hf-model-type-list": hf_case("model_type", ["qwen3_moe"], "field 'model_type' must be a string"),
    "hf-model-type-unknown": hf_case("model_type", "mamba9", "unsupported model_type 'mamba9'"),
    "hf-layers-huge": hf_case("num_hidden_layers", 10**12, "num_hidden_layers' must be an integer from 1"),
    "hf-layers-string": hf_case("num_hidden_layers", "4", "num_hidden_layers' must be an integer"),
    "hf-hidden-negative": hf_case("hidden_size", -1, "hidden_size' must be an integer"),
    "hf-hidden-float": hf_case("hidden_size", 256.5, "hidden_size' must be an integer"),
    "hf-heads-list": hf_case("num_attention_heads", [4], "num_attention_heads' must be an integer"),
    "hf-experts-zero": hf_case("num_experts", 0, "num_experts' must be an integer"),
    "hf-missing-hidden": hf_case("hidden_size", DROP, "missing field 'hidden_size'"),
    "hf-tie-string": hf_case("tie_word_embeddings", "no", "tie_word_embeddings' must be true or false"),
    "hf-binary": ({"config.json": BINARY}, ("model", "import", "config.json", "--output", "tiny.yaml"), "UTF-8"),
    "hf-not-object": ({"config.json": "[1, 2]"}, ("model", "import", "config.json", "--output", "tiny.yaml"),
                      "expected a JSON object"),
    "hf-malformed": ({"config.json": "{"}, ("model", "import", "config.json", "--output", "tiny.yaml"),
                     "config.json: not JSON ("),
    "hf-deep": ({"config.json": "[" * 100_000 + "]" * 100_000},
                ("model", "import", "config.json", "--output", "tiny.yaml"), "config.json"),
})

# --- options ------------------------------------------------------------------------------------------
CASES.update({
    "opt-tpot-1e400-speed": cli_case(["size", "--tpot", "1e400tok/s"], "--tpot '1e400tok/s'"),
    "opt-tpot-zero-speed": cli_case(["size", "--tpot", "0tok/s"], "--tpot '0tok/s'"),
    "opt-tpot-1e400-s": cli_case(["size", "--tpot", "1e400s"], "--tpot '1e400s'"),
    "opt-tpot-zero": cli_case(["size", "--tpot", "0ms"], "--tpot '0ms'"),
    "opt-rate-1e9": cli_case(["simulate", "--rate", "1e9", "--plot", "out.png"], "PRFAAS_PLAN_MAX_REQUESTS"),
    "opt-duration-1e9": cli_case(["simulate", "--duration", "1e9s", "--plot", "out.png"], "PRFAAS_PLAN_MAX_REQUESTS"),
    "opt-rate-inf": cli_case(["simulate", "--rate", "inf"], "--rate inf"),
    "opt-rate-nan": cli_case(["simulate", "--rate", "nan"], "--rate nan"),
    "opt-duration-inf": cli_case(["simulate", "--duration", "1e400"], "--duration '1e400'"),
    "opt-link-zero": cli_case(["size", "--link", "0G"], "--link '0G'"),
    "opt-link-huge": cli_case(["size", "--link", "1e9T"], "--link '1e9T'"),
    "opt-link-inf": cli_case(["size", "--link", "infG"], "--link 'infG'"),
    "opt-len-1e30": cli_case(["kv", "--model", "kimi-linear", "--len", "1e30"], "--len '1e30'"),
    "opt-len-zero": cli_case(["kv", "--model", "kimi-linear", "--len", "0"], "--len '0'"),
    "opt-remote-huge": cli_case(["size", "--remote", "100000000xH200"], "cap of 1,000,000 chips"),
    "opt-model-unknown": cli_case(["kv", "--model", "kimi-linaer", "--len", "1k"], "did you mean"),
    "opt-chip-unknown": cli_case(["rates", "--model", "kimi-linear", "--instance", "8xH2000", "--len", "1k"],
                                 "unknown chip 'h2000'"),
    "opt-profiles-missing": cli_case(["--profiles", "nowhere", "models"], "--profiles 'nowhere'"),
    "opt-trace-missing": cli_case(["simulate", "--trace", "missing.jsonl"], "missing.jsonl"),
    "opt-link-profile-missing": cli_case(["simulate", "--link-profile", "missing.csv"], "missing.csv"),
    "opt-measurements-missing": cli_case(["calibrate", "--measurements", "nope.csv"], "nope.csv"),
    "opt-layout-missing": cli_case(["size", "--layout", "nope.yaml"], "nope.yaml"),
    "opt-tp-huge": cli_case(["kv", "--model", "kimi-linear", "--len", "1k", "--tp", str(10**20)], "--tp"),
    "opt-load-1e9": cli_case(["simulate", "--load", "1e9", "--duration", "10s"], "PRFAAS_PLAN_MAX_REQUESTS"),
    "opt-threshold-1e30": cli_case(["simulate", "--threshold", "1e30", "--duration", "10s"], "--threshold '1e30'"),
    "opt-prefill-instances-huge": cli_case(["simulate", "--prefill-instances", str(10**15), "--duration", "10s"],
                                           "--prefill-instances"),
    "opt-link-efficiency-7.5": cli_case(["size", "--link-efficiency", "7.5"], "--link-efficiency 7.5"),
    "opt-rtt-1e400": cli_case(["size", "--rtt", "1e400s"], "--rtt '1e400s'"),
    "opt-seed-negative": cli_case(["size", "--seed", "-1"], "seed -1: must be a whole number >= 0"),
    "opt-samples-beyond-memory": cli_case(["size", "--samples", str(10**9)], "the error-bar sampler would need "
                                          "about"),
    "opt-samples-compare": cli_case(["compare", "--samples", str(10**9)], "GiB available"),
    "opt-block-size-huge": cli_case(["workload", "describe", "--block-size", str(10**20)], "--block-size"),
    "opt-command-typo": cli_case(["siz"], "No such command 'siz'. Did you mean 'size'?"),
    "opt-subcommand-typo": cli_case(["model", "improt", "x"], "No such command 'improt'. Did you mean 'import'?"),
    "opt-workload-typo": cli_case(["size", "--workload", "trac"], "(did you mean trace?)"),
    "opt-stack-typo": cli_case(["size", "--stack", "sglan"], "unknown serving stack; did you mean sglang"),
})

# --- a folder where a file goes: said as such, not "no such file" --------------------------------------
FOLDER = {"docs/readme.txt": "a folder with a file in it"}
CASES.update({
    f"folder-{name}": (FOLDER, tuple(argv), needle) for name, argv, needle in (
        ("layout", ["size", "--layout", "docs/"], "--layout 'docs/': is a directory, expected a layout file"),
        ("trace", ["simulate", "--trace", "docs/"], "--trace 'docs/': is a directory, expected a .jsonl or .csv"),
        ("workload", ["size", "--workload", "docs/"], "docs: is a directory, expected a .jsonl or .csv trace"),
        ("link-profile", ["simulate", "--link-profile", "docs/"], "--link-profile 'docs/': is a directory, "
         "expected a link profile CSV"),
        ("measurements", ["calibrate", "--measurements", "docs/"], "docs: is a directory, expected a benchmark"),
        ("model-import", ["model", "import", "docs/", "--output", "m.yaml"], "docs/: is a directory, expected a "
         "Hugging Face config.json"),
        ("sweep-spec", ["sweep", "docs/", "--output", "r.csv"], "docs/: is a directory, expected a sweep spec"),
        ("report", ["report", "docs/", "--output", "r.html"], "docs/: is a directory, expected the --format json"),
        ("export", ["export", "docs/", "--to", "vllm", "--output", "out"], "docs/: is a directory, expected a plan"))
})


def _write(root: Path, files: dict) -> None:
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body)


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_the_matrix_is_large():
    assert len(CASES) >= 150


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, tmp_path, monkeypatch, capsys):
    files, argv, needle = CASES[case]
    _write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    code = run(list(argv))
    out, err = capsys.readouterr()
    assert code == 2, (code, err[-500:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert lines[0].lower().count("did you mean") <= 1, lines[0]   # one suggestion, said once
    assert "Traceback" not in err and out == ""
    assert _tree(tmp_path) == before  # no output file, not even a partial one


# ----------------------------------------------------------------------------------------------------
# The valid neighbours: the bases themselves and inputs near the edges keep working

VALID = {
    "model-base": ({"profiles/tiny.yaml": _yaml(MODEL)}, PROFILES + KV_TINY),
    "model-yaml-1e3-float": ({"profiles/tiny.yaml": _yaml(MODEL).replace("vocab_size: 1000", "vocab_size: 1000")
                              + "published_params: {total: 1.0e9, active: 2e8}\n"}, PROFILES + KV_TINY),
    "model-layer-range": ({"profiles/tiny.yaml": _yaml(_mutate(MODEL, "attention.0.layers",
                                                              {"start": 1, "stop": 4, "step": 2}))}, PROFILES + KV_TINY),
    "chip-base": ({"profiles/x1.yaml": _yaml(CHIP)}, PROFILES + RATES_X1),
    "chip-efficiency-1": ({"profiles/x1.yaml": _yaml(_mutate(CHIP, "calibration.gemm_efficiency.bf16", 1))},
                          PROFILES + RATES_X1),
    "layout-base": ({"lay.yaml": _yaml(LAYOUT)}, ("size", "--model", "kimi-linear", "--layout", "lay.yaml")),
    "layout-efficiency-1": ({"lay.yaml": _yaml(_mutate(LAYOUT, "sites.0.link.efficiency", 1))},
                            ("size", "--model", "kimi-linear", "--layout", "lay.yaml")),
    "link-profile": ({"link.csv": LINK_CSV}, ("simulate", "--model", "kimi-linear", "--duration", "20s",
                                              "--link-profile", "link.csv")),
    "jsonl": ({"t.jsonl": "".join(json.dumps(r) + "\n" for r in JSONL)},
              ("simulate", "--model", "kimi-linear", "--trace", "t.jsonl")),
    "trace-csv": ({"t.csv": TRACE_CSV}, ("workload", "describe", "--trace", "t.csv")),
    "measurements": ({"m.csv": MEASUREMENTS}, ("calibrate", "--measurements", "m.csv", "--row-stack", "sglang", "--no-loo")),
    "hf-config": ({"config.json": json.dumps(HF)}, ("model", "import", "config.json")),
    "link-100M": ({}, ("size", "--link", "100M")),
    "link-1k": ({}, ("size", "--link", "1k")),
    "tpot-speed": ({}, ("size", "--tpot", "40tok/s")),
    "broken-profile-unused": ({"profiles/broken.yaml": BINARY}, PROFILES + ("models",)),
    "broken-stack-unused": ({"profiles/mystack.yaml": _yaml(_mutate(STACK, "latency_s", -1))},
                            PROFILES + ("size", "--model", "kimi-linear", "--stack", "vllm")),
    "layout-rtt-with-unit": ({"lay.yaml": _yaml(_mutate(LAYOUT, "sites.0.link.rtt", "20ms"))},
                             ("size", "--model", "kimi-linear", "--layout", "lay.yaml")),
    "stack-user": ({"profiles/mystack.yaml": _yaml(STACK)},
                   PROFILES + ("size", "--model", "kimi-linear", "--stack", "mystack")),
    "spec": ({"spec.yaml": SPEC}, ("sweep", "spec.yaml", "--output", "r.csv", "--no-progress")),
}


@pytest.mark.parametrize("case", sorted(VALID))
def test_valid_input_still_works(case, tmp_path, monkeypatch, capsys):
    files, argv = VALID[case]
    _write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    code = run(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err[-500:]
    assert out and "Traceback" not in err


def test_a_broken_profile_warns_once_naming_it(tmp_path, monkeypatch, capsys):
    _write(tmp_path, {"profiles/broken.yaml": BINARY, "profiles/tiny.yaml": _yaml(MODEL)})
    monkeypatch.chdir(tmp_path)
    assert run(list(PROFILES + KV_TINY)) == 0
    err = capsys.readouterr().err
    assert err.count("broken.yaml") == 1 and err.startswith("warning: skipped profile")
    assert run(list(PROFILES + ("kv", "--model", "broken", "--len", "1k"))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "broken.yaml: not a UTF-8 text file" in err[0]


def test_a_broken_stack_file_warns_once_and_breaks_only_its_users(tmp_path, monkeypatch, capsys):
    _write(tmp_path, {"profiles/mystack.yaml": _yaml(_mutate(STACK, "prefill_token_budget", 1.5))})
    monkeypatch.chdir(tmp_path)
    assert run(list(PROFILES + ("size", "--model", "kimi-linear", "--stack", "vllm"))) == 0
    err = capsys.readouterr().err
    assert err.count("mystack.yaml") == 1 and "warning: skipped profile" in err and "prefill_token_budget" in err
    assert run(list(PROFILES + ("size", "--model", "kimi-linear", "--stack", "mystack"))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mystack.yaml: prefill_token_budget must be a whole number" in err[0]


@pytest.mark.parametrize("kind, name, body, argv", [
    ("stack", "vllm", _yaml(_mutate(STACK, "name", "vllm")), ("size", "--model", "kimi-linear", "--stack", "vllm")),
    ("chip", "h200", _yaml(_mutate(CHIP, "name", "h200")), ("size", "--model", "kimi-linear")),
    ("model", "kimi-linear", _yaml(_mutate(_mutate(MODEL, "name", "kimi-linear"), "aliases", [])),
     ("kv", "--model", "kimi-linear", "--len", "1k")),
])
def test_a_user_file_shadowing_a_bundled_name_is_noted(kind, name, body, argv, tmp_path, monkeypatch, capsys):
    _write(tmp_path, {f"profiles/{name}.yaml": body})
    monkeypatch.chdir(tmp_path)
    assert run(list(PROFILES + argv)) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1, err
    assert f"{kind} {name!r} from " in notes[0] and f"profiles/{name}.yaml is used instead of the bundled" in notes[0]


# ----------------------------------------------------------------------------------------------------
# Ctrl-C: exit 130 with one line, at start-up (during imports) and inside a command

_INTERRUPT_AT_IMPORT = """
import builtins, sys
real = builtins.__import__
def interrupting(name, *args, **kwargs):
    if name == {module!r}:
        raise KeyboardInterrupt
    return real(name, *args, **kwargs)
builtins.__import__ = interrupting
sys.argv = ["prfaas-plan", "models"]
from prfaas_plan.entry import main
main()
"""


@pytest.mark.parametrize("module", ["typer", "numpy", "pickle"])
def test_ctrl_c_during_start_up_imports_exits_130_with_one_line(module):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _INTERRUPT_AT_IMPORT.format(module=module)],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 130 and proc.stderr == "error: interrupted\n" and proc.stdout == ""


def test_ctrl_c_inside_a_command_exits_130_with_one_line(monkeypatch, capsys):
    from prfaas_plan.profiles import store

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "all_models", interrupted)
    monkeypatch.setattr("prfaas_plan.profiles.all_models", interrupted)
    code = run(["models"])
    out, err = capsys.readouterr()
    assert code == 130 and err == "error: interrupted\n"


NVIDIA_SUBSET = Path(__file__).parents[1] / "prfaas_plan" / "data" / "reference" / "nvidia_silicon_sample_subset.csv"


def _nvidia_rows(tmp_path, edit) -> Path:
    """The first rows of the bundled NVIDIA subset, header and all, with ``edit(header, rows)`` applied."""
    lines = [l for l in NVIDIA_SUBSET.read_text().splitlines() if not l.startswith("#")][:6]
    header, rows = lines[0].split(","), [l.split(",") for l in lines[1:]]
    header, rows = edit(header, rows)
    path = tmp_path / "nvidia.csv"
    path.write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    return path


def _drop_precision(header, rows):
    i = header.index("precision")
    return header[:i] + header[i + 1:], [r[:i] + r[i + 1:] for r in rows]


def _text_in_ttft(header, rows):
    i = header.index("ttft_ms")
    return header, [r[:i] + ["fast"] + r[i + 1:] for r in rows]


@pytest.mark.parametrize("command", ["calibrate", "check"])
@pytest.mark.parametrize("edit,needle", [(_drop_precision, "without column 'precision'"),
                                         (_text_in_ttft, "column 'ttft_ms': expected a number")])
def test_a_broken_nvidia_layout_is_one_line_not_a_traceback(cli, tmp_path, command, edit, needle):
    """Issue 23: a silicon-sample CSV missing a column gave KeyError: 'precision', text in ttft_ms a
    ValueError; both now name the file's row and the column."""
    path = _nvidia_rows(tmp_path, edit)
    args = [command, "--measurements", str(path), "--no-loo"] if command == "calibrate" else [command, str(path)]
    code, _, err = cli(*args)
    assert code == 2 and needle in err and "nvidia.csv:2" in err and len(err.strip().splitlines()) == 1
