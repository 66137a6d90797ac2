"""Data-parallel attention in ranks of several chips (``dp_attention`` = k, 1 < k < tp: SGLang ``--dp-size k``
below ``--tp-size``): attention tensor-parallel within a rank, k copies of the attention weights, and the
bytes on the link at a rank's TP degree (docs/methods.md, "Decode parallelism")."""

from __future__ import annotations

import json

import pytest

from prfaas_plan.analytic.transfer import TransferBytes, decode_transfer
from prfaas_plan.errors import PlanError
from prfaas_plan.performance import decode_capacity, parse_instance
from prfaas_plan.performance.decode import attention_weight_bytes, decode_memory
from prfaas_plan.performance.operators import Parallel, attention_label, attention_ranks, pass_work
from prfaas_plan.planning.configurations import attention_modes, decode_split_label
from prfaas_plan.planning.export import answer_export, read_plan
from prfaas_plan.profiles import get_model

from test_export import _commands, plan_file  # noqa: F401 - its plan fixture (tests/ is on the path)


def test_ranks_labels_and_refusals():
    assert [attention_ranks(v, 8) for v in (False, 0, 1, 2, 4, True)] == [1, 1, 1, 2, 4, 8]
    p = Parallel(8, "tp", 2)
    assert (p.attention_dp, p.attention_tp) == (2, 4)
    assert str(p) == "DP2 x TP4 attention, MoE TP8" and str(Parallel(8, "tp", True)).startswith("DP8 attention")
    assert attention_label(False, 8) == "TP8" and decode_split_label(2, "ep", 8) == "DP2 x TP4 attention, MoE EP8"
    assert decode_split_label(False, "tp", 8) == "TP8 attention, MoE TP8"
    with pytest.raises(ValueError, match="do not divide"):
        Parallel(8, "tp", 3)
    # every divisor between TP and a rank per chip, in search order; a pinned policy names one mode
    assert attention_modes(8, None) == [False, 2, 4, True] and attention_modes(16, "logical")[1:4] == [2, 4, 8]
    assert attention_modes(8, "replicated") == [False] and attention_modes(8, "dp-attention") == [True]


def test_memory_and_bytes_of_ranks_of_several_chips():
    """Qwen3-235B (4 KV heads) on 8 chips in 2 ranks of 4: each request's heads split over its rank's 4 chips
    once (TP8 copies each head twice, so its per-chip bytes per request are the same, but every chip holds
    every request), and 2 copies of the attention weights instead of 8 (DP8) or 1 (TP8)."""
    model, inst = get_model("qwen3-235b"), parse_instance("8xh200")
    tp, dp2, dp8 = (decode_memory(model, inst, 28_000.0, d) for d in (False, 2, True))
    attn = attention_weight_bytes(model)
    assert dp2.weight_bytes == pytest.approx(tp.weight_bytes + attn * (1 / 4 - 1 / 8))
    assert dp8.weight_bytes == pytest.approx(tp.weight_bytes + attn * (1 - 1 / 8))
    assert dp2.request_bytes == pytest.approx(tp.request_bytes) and dp2.ranks == 2
    assert dp8.request_bytes == pytest.approx(4 * tp.request_bytes)
    assert dp2.max_batch > dp8.max_batch > tp.max_batch
    # what crosses the link: a rank's per-rank copies (TP4: no head copied), one copy with a rank per chip
    assert decode_transfer(None, 8, 2) == TransferBytes("replicated", 4)
    assert decode_transfer(None, 8, True) == TransferBytes("dp-attention", 8)
    assert decode_transfer(None, 8, False) == TransferBytes("replicated", 8)
    two_ranks, tp8 = (float(decode_transfer(None, 8, d).at(model, 32_768)) for d in (2, False))
    assert two_ranks == pytest.approx(tp8 / 2)   # TP8 copies each of the 4 KV heads twice


def test_a_rank_of_several_chips_all_reduces_its_mixer_outputs():
    """Besides the gather and scatter of every FFN's tokens over the instance, each rank's attention outputs are
    all-reduced within its chips: one call per layer on the rank's share of the tokens."""
    model = get_model("qwen3-235b")
    T, h, layers = 64.0, model.hidden_size, model.num_layers

    def comm(dp):
        (w,) = [w for w in pass_work(model, Parallel(8, "tp", dp), T, 1.0, 8_000.0, "decode") if w.name == "comm_tp"]
        return float(w.link_bytes), float(w.link_calls)

    (full_bytes, full_calls), (part_bytes, part_calls) = comm(True), comm(2)
    assert part_calls == full_calls + layers
    assert part_bytes == pytest.approx(full_bytes + T / 2 * layers * 2 * 3 / 4 * h * 2)


def test_qwen3_235b_decodes_more_in_two_ranks_of_four_than_in_eight_or_one():
    """docs/methods.md's figures: 21 requests within 25 ms with TP8 attention, 24 with DP8, 30 in two ranks of
    four (trtllm, 8xH200, the aiconfigurator comparison's context); each a whole number per rank."""
    got = {d: decode_capacity("qwen3-235b", "8xh200", 0.025, 27_648 + 512, "tp", stack="trtllm",
                              dp_attention=d).batch for d in (False, True, 2)}
    assert got == {False: 21.0, True: 24.0, 2: 30.0}


def _with_decode(plan_file, tmp_path, **config) -> str:  # noqa: F811
    doc = json.loads(plan_file.read_text())
    doc["sections"]["configurations"] = [
        {"role": "decode", "site": "local", "chips_per_instance": 8, "tp": 8, "ep": 1, "batch": 60,
         "weight_dtype": "bf16", "kv_dtype": "bf16", **config}]
    path = tmp_path / "ranks.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_export_writes_the_ranks_for_each_engine(plan_file, tmp_path):  # noqa: F811
    path = _with_decode(plan_file, tmp_path, dp_attention=True, attention_dp=2)
    answer_export(path, "sglang", str(tmp_path / "s"))
    cmd = _commands(tmp_path / "s")["local-decode.sh"]
    assert cmd[cmd.index("--tp-size") + 1] == "8" and cmd[cmd.index("--dp-size") + 1] == "2"
    assert cmd[cmd.index("--max-running-requests") + 1] == "60"
    answer_export(path, "vllm", str(tmp_path / "v"))
    cmd = _commands(tmp_path / "v")["local-decode.sh"]
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "4" and cmd[cmd.index("--data-parallel-size") + 1] == "2"
    assert cmd[cmd.index("--max-num-seqs") + 1] == "30"   # per data-parallel rank
    # the plan's experts are sliced (ep 1): vLLM's default over its DP x TP ranks, not expert parallelism
    assert "--enable-expert-parallel" not in cmd
    text = (tmp_path / "s" / "local-decode.sh").read_text()
    assert "DP attention in 2 ranks of 4 GPUs" in text and "30 running requests on each of 2 DP attention ranks" in text


@pytest.mark.parametrize("config, match", [({"dp_attention": True, "attention_dp": 3}, "must divide tp"),
                                           ({"dp_attention": False, "attention_dp": 2}, "exactly when dp_attention")])
def test_inconsistent_ranks_are_refused_in_one_line(plan_file, tmp_path, config, match):  # noqa: F811
    with pytest.raises(PlanError, match=match) as exc:
        read_plan(_with_decode(plan_file, tmp_path, **config))
    assert "\n" not in str(exc.value)


def test_the_search_reports_its_ranks(cli):
    """Qwen3-235B on the defaults: its decode runs in ranks of several chips, recorded in the configurations
    section and read back by export unchanged."""
    code, out, err = cli("size", "--model", "qwen3-235b", "--samples", "0", "-f", "json")
    assert code == 0, err
    decode = [c for c in json.loads(out)["sections"]["configurations"] if c["role"] == "decode"][0]
    assert decode["dp_attention"] is True and 1 < decode["attention_dp"] < decode["tp"]
    assert decode["batch"] % decode["attention_dp"] == 0


def test_a_file_of_an_earlier_version_without_ranks_still_reports_and_exports(cli, tmp_path):
    """Files written before ``attention_dp`` existed say only ``dp_attention``: a rank per chip when true. Both
    readers (the report's check and export) take them so, through the one rule `config_attention_ranks`."""
    code, out, err = cli("size", "--samples", "0", "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    for c in doc["sections"]["configurations"]:
        c.pop("attention_dp")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    code, _, err = cli("report", str(old), "--output", str(tmp_path / "old.html"))
    assert code == 0, err
    decode = [r for r in read_plan(str(old)).roles if r.role == "decode"][0]
    assert decode.dp_attention and decode.dp_ranks == decode.tp
