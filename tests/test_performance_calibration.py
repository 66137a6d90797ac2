"""Calibration against measured data: the shipped constants' accuracy per chip and per stack (printed with
``pytest -s``), the joint fit itself on a small set, the converters of the bundled files and the writers."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from prfaas_plan import arithmetic as A
from prfaas_plan.errors import PlanError
from prfaas_plan.performance import RooflinePrefill, kv_throughput, parse_instance
from prfaas_plan.performance.calibrate import fit_joint
from prfaas_plan.performance.harness import recorded_client_s
from prfaas_plan.performance.measurements import (
    BUNDLED_FILES,
    REFERENCE_DIR,
    load_measurements,
    merge_repeats,
    paper_kv_throughput,
    resolve_path,
)
from prfaas_plan.performance.profile_text import (
    calibrated_profile_text,
    stack_profile_text,
)
from prfaas_plan.performance.serving import serving_at_concurrency
from prfaas_plan.profiles import get_hardware, get_model, get_stack, hardware_from_dict
from prfaas_plan.profiles.stack import stack_from_dict

PAPER = "paper_kv_throughput_8xh200.csv"
MOONCAKE = "mooncake_h20_qwen3_235b_pd.csv"
NVIDIA = "nvidia_silicon_sample_subset.csv"


@pytest.fixture(scope="module")
def shipped():
    """Every bundled measured point with the shipped profiles' prediction: ``[(measurement, {q: rel. error})]``;
    exact repeats count once, as `calibrate` counts them."""
    out = []
    points, _ = merge_repeats([m for name in BUNDLED_FILES for m in load_measurements(name)[0]])
    for m in points:
        model, inst = m.model_profile(), parse_instance(m.instance)
        errors = {}
        if m.ttft_s is not None or m.tpot_s is not None:
            s = serving_at_concurrency(model, inst, m.len_tokens, max(m.output_tokens, 2), m.concurrency, m.moe,
                                       stack=m.stack, client_s=recorded_client_s(m))
            if m.ttft_s is not None:
                errors["ttft"] = s.ttft_s / m.ttft_s - 1
            if m.tpot_s is not None:
                errors["tpot"] = s.tpot_s / m.tpot_s - 1
        if m.busy_s is not None:
            busy = RooflinePrefill.build(model, inst, m.moe, stack=m.stack).busy_s(float(m.len_tokens))
            errors["busy"] = float(busy) / m.busy_s - 1
        out.append((m, errors))
    return out


def _median(shipped, q, **tags) -> tuple[float, float, int]:
    errs = [abs(e[q]) for m, e in shipped if q in e and all(
        (m.chip if k == "chip" else getattr(m, k)) == v for k, v in tags.items())]
    print(f"\n{q} {tags}: median |err| {np.median(errs):.1%}, worst {max(errs):.1%} over {len(errs)} points")
    return float(np.median(errs)), float(max(errs)), len(errs)


def _nvidia(shipped):
    return [(m, e) for m, e in shipped if m.source.startswith("NVIDIA")]


@pytest.mark.parametrize("chip", ["h200", "b200"])
def test_nvidia_rows_tpot_per_chip_meets_target(shipped, chip):
    median, _, n = _median(_nvidia(shipped), "tpot", chip=chip)
    assert n >= 75 and median <= 0.15


@pytest.mark.parametrize("chip, n_rows, guard", [("b200", 143, 0.135), ("h200", 75, 0.135)])
def test_nvidia_rows_ttft_achieved(shipped, chip, n_rows, guard):
    # Regression guards a little above what the shipped fit achieves in-sample on the distinct NVIDIA rows (B200
    # 12.2%, H200 12.3%: harness campaigns per system and batching classes, docs/methods.md)
    median, _, n = _median(_nvidia(shipped), "ttft", chip=chip)
    assert n == n_rows and median <= guard


@pytest.mark.parametrize("chip", ["b200", "h200"])
def test_nvidia_rows_ttft_meets_target(shipped, chip):
    # issue 10's 15% in-sample target per chip, met again since the harness's client time is fitted per campaign
    # (missed from issue 20 round 4, which bounded the engines' terms, until then: B200 15.5%, H200 20.8%)
    assert _median(_nvidia(shipped), "ttft", chip=chip)[0] <= 0.15


# regression guards a little above the shipped fit (sglang 14.5%, trtllm 12.3%, vllm 4.3%, mooncake 4.5%, paper
# 3.5%); paper-sglang: no worse than the former H200-only fit of Table 3 (median 11.6%)
@pytest.mark.parametrize("stack,bound", [("sglang", 0.16), ("trtllm", 0.145), ("vllm", 0.10),
                                         ("mooncake-sglang-pd", 0.06), ("paper-sglang", 0.116)])
def test_ttft_per_stack(shipped, stack, bound):
    assert _median(shipped, "ttft", stack=stack)[0] <= bound


def test_paper_table3_worst_point_under_paper_sglang(shipped):
    # The former H200-only fit's worst point was 30.2%, the previous joint fit's 38%; now MiMo-V2-Flash 32K, 26%.
    _, worst, n = _median(shipped, "ttft", stack="paper-sglang")
    assert n == 12 and worst <= 0.30


def test_lmsys_h20_saturated_prefill(shipped):
    busy = [e["busy"] for m, e in shipped if "busy" in e]
    assert len(busy) == 1 and abs(busy[0]) <= 0.10


def test_kv_throughput_against_paper_table_3_on_its_stack():
    paper = paper_kv_throughput()
    errors = {}
    for name in sorted({n for n, _ in paper}):
        lengths = sorted(l for n, l in paper if n == name)
        kv = kv_throughput(name, "8xH200", lengths, state_dtype="fp32", stack="paper-sglang")
        errors.update({(name, l): g / paper[(name, l)] - 1 for l, g in zip(lengths, kv.gbps)})
    print("\nPhi_kv vs paper Table 3 on paper-sglang:", {k: f"{e:+.1%}" for k, e in errors.items()})
    # The former H200-only fit: median |err| 11%, worst 62% (MiMo-V2-Flash 32K), 8 of 12 within 15%. The joint
    # fit: median 3.3%, worst 32% (the same point), 7 within 15%; the other five are the two shallow models
    # (Kimi-Linear, MiMo) at both lengths and Ring-2.5-1T at 32K, 16-32% off.
    assert np.median(np.abs(list(errors.values()))) <= 0.06
    assert sum(abs(e) <= 0.155 for e in errors.values()) >= 7
    assert all(abs(e) <= 0.35 for e in errors.values())


def test_prfaas_1t_roofline_against_its_measured_table_on_paper_vllm():
    m, inst = get_model("prfaas-1t"), parse_instance("8xH200")
    table = m.measured_prefill[0]
    roof = RooflinePrefill.build(m, inst, stack="paper-vllm").latency_s(np.asarray(table.lengths, dtype=float))
    gaps = roof / np.asarray(table.latency_s) - 1
    print("\nprfaas-1t on paper-vllm vs Table 5:", ", ".join(f"{l}: {g:+.1%}" for l, g in zip(table.lengths, gaps)))
    assert np.all(np.abs(gaps) < 0.40)


def test_joint_fit_on_a_small_set_has_exact_leave_one_out():
    points, excluded = load_measurements(MOONCAKE)
    fit = fit_joint(points, excluded, MOONCAKE)
    assert fit.loo_exact and set(fit.chips) == {"h20-3e"} and set(fit.stacks) == {"mooncake-sglang-pd"}
    (row,) = fit.summary("chip")
    print(f"\nmooncake fit: {row}")
    assert row["in_median"] <= 0.10 and row["loo_median"] <= 0.15
    assert row["loo_median"] >= row["in_median"]
    # one model only: leaving it out leaves the priors, which the report shows rather than hides
    assert row["lomo_median"] > row["in_median"]
    assert "mooncake-sglang-pd step_overhead_s" in fit.unidentified
    assert "do not identify it" in fit.stacks["mooncake-sglang-pd"].sources["step_overhead_s"]


def test_bundled_rows_are_tagged():
    nvidia, _ = load_measurements(NVIDIA)
    assert len(nvidia) == 269 and {m.stack for m in nvidia} == {"sglang", "vllm", "trtllm"}
    assert {m.concurrency for m in nvidia} >= {4, 64, 512}
    kimi = next(m for m in nvidia if m.model == "kimi-k2")
    assert (kimi.weight_dtype, kimi.expert_dtype) == ("bf16", "int4")
    assert any(m.moe == "ep" and m.model == "qwen3.5-397b" for m in nvidia)
    lmsys, excluded = load_measurements("lmsys_antgroup_h20_deepseek_r1.csv")
    assert len(lmsys) == 1 and lmsys[0].busy_s == pytest.approx(4096 / 16500)
    assert len(excluded) == 3 and all("not modelled" in e for e in excluded)
    table5, _ = load_measurements("paper_internal_1t_8xh200.csv")
    assert [m.len_tokens for m in table5] == [1024, 8192, 32000, 131072] and table5[0].stack == "paper-vllm"


def test_exact_repeats_count_once():
    nvidia, _ = load_measurements(NVIDIA)
    unique, repeats = merge_repeats(nvidia)
    # NVIDIA's sample lists many DeepSeek-R1 runs a second time as DeepSeek-V3 rows with identical numbers
    assert repeats == 51 and len(unique) == 218
    pairs = {}
    for m in nvidia:
        pairs.setdefault((m.model, m.instance, m.stack, m.moe, m.len_tokens, m.output_tokens, m.concurrency),
                         []).append(m)
    # rows of one configuration whose numbers differ (B200 SGLang: separate runs) are all kept
    b200 = pairs[("deepseek-v3", "8xB200", "sglang", "tp", 1024, 1024, 4)]
    kept = {id(m) for m in unique}
    assert len(b200) == 2 and len({m.ttft_s for m in b200}) == 2 and all(id(m) in kept for m in b200)
    h200 = pairs[("deepseek-v3", "8xH200", "sglang", "tp", 1024, 1024, 4)]
    assert len(h200) == 2 and h200[0] == h200[1] and sum(id(m) in kept for m in h200) == 1
    changed = dataclasses.replace(h200[0], tpot_s=h200[0].tpot_s * 1.01)   # one value apart: a different run
    assert merge_repeats([h200[0], changed]) == ([h200[0], changed], 0)


def test_calibrate_says_how_many_rows_counted_once(cli):
    code, out, _ = cli("calibrate", "--measurements", NVIDIA, "--no-loo", "--format", "json")
    assert code == 0
    assert any(n.startswith("counted once: 51 rows repeat") for n in json.loads(out)["notes"])


def test_paper_rows_convert_with_the_measuring_engines_state_dtype():
    rows = {(m.model, m.len_tokens): m for m in load_measurements(resolve_path(PAPER))[0]}
    assert len(rows) == 12 and {m.stack for m in rows.values()} == {"paper-sglang"}
    q = rows[("qwen3-235b", 8192)]
    assert q.ttft_s == pytest.approx(A.s_kv(get_model("qwen3-235b"), 8192) * 8 / 22.42e9)
    ring = rows[("ring-2.5-1t", 8192)]   # SGLang keeps Lightning state in fp32: 293.6 MB, not the profile's bf16
    assert "state fp32" in ring.derived
    assert ring.ttft_s == pytest.approx((11_520 * 8192 + 70 * 64 * 128 * 128 * 4) * 8 / 4.47e9)


def test_mooncake_rows_subtract_the_transfer():
    rows = load_measurements(REFERENCE_DIR / MOONCAKE)[0]
    assert [m.len_tokens for m in rows][:3] == [128, 256, 512]
    assert rows[-1].ttft_s == pytest.approx((3260.14 - 76.78) / 1e3)
    assert all(m.instance == "8xH20-3e" and m.stack == "mooncake-sglang-pd" for m in rows)


def test_generic_format_and_bad_rows(tmp_path):
    good = tmp_path / "m.csv"
    good.write_text("# my runs\nmodel,instance,len_tokens,stack,latency_s,kv_throughput_gbps,tpot_s,output_tokens,"
                    "concurrency\nqwen3,8xH200,8192,vllm,0.56,,0.02,512,8\nminimax,8xH200,8192,,,32.87,,,\n")
    rows, _ = load_measurements(good, {"stack": "trtllm"})
    assert rows[0].model == "qwen3-235b" and rows[0].ttft_s == 0.56 and rows[0].stack == "vllm"
    assert rows[0].tpot_s == 0.02 and rows[0].concurrency == 8
    assert rows[1].stack == "trtllm"
    assert rows[1].ttft_s == pytest.approx(A.s_kv(get_model("minimax-m2.5"), 8192) * 8 / 32.87e9)
    head = "model,instance,len_tokens,stack,latency_s\n"
    for body, needle in [(head + "qwen3,8xH200,8k,sglang,0.5\n", "m.csv:2: column 'len_tokens'"),
                         (head + "qwen9,8xH200,8192,sglang,0.5\n", "unknown model 'qwen9'"),
                         (head + "qwen3,8xH200,8192,sglangx,0.5\n", "unknown serving stack"),
                         (head + "qwen3,8xH200,8192,,0.5\n", "missing column 'stack'"),
                         ("model,instance,len_tokens,stack\nqwen3,8xH200,8192,sglang\n", "needs ttft_s"),
                         (head + "qwen3,8xH200,8192,sglang,-1\n", "must be positive"),
                         ("model,instance,len_tokens,stack,ttft_ms\nqwen3,8xH200,8192,sglang,5\n", "unknown column"),
                         ("model,instance,len_tokens,stack,tpot_s\nqwen3,8xH200,8192,sglang,0.02\n", "output_tokens"),
                         (head, "at least one measurement")]:
        good.write_text(body)
        with pytest.raises(PlanError, match=needle):
            load_measurements(good)
    with pytest.raises(PlanError, match="cannot read"):
        load_measurements(tmp_path / "missing.csv")


def test_profile_writers_round_trip():
    chip = get_hardware("h20")
    text = calibrated_profile_text(chip, chip.calibration)
    assert text.count("calibration:") == 1 and "peak_tflops: {bf16: 148, fp8: 296}" in text
    import yaml

    assert hardware_from_dict(yaml.safe_load(text), chip.path).calibration == chip.calibration
    stack = get_stack("sglang")
    assert stack_from_dict(yaml.safe_load(stack_profile_text(stack)), stack.path) == stack


def test_optional_stack_numbers_default_to_zero_and_are_checked():
    import yaml

    data = yaml.safe_load(stack_profile_text(get_stack("trtllm")))
    assert stack_from_dict(data).ep_forward_overhead_s > 0
    bare = {k: v for k, v in data.items() if k not in ("request_overhead_s", "ep_forward_overhead_s")}
    stack = stack_from_dict(bare)
    assert stack.request_overhead_s == stack.ep_forward_overhead_s == 0.0
    assert stack.prefill_forward_overhead_s(True) == stack.prefill_forward_overhead_s(False)
    for value, needle in ((-0.1, "finite number >= 0"), (float("nan"), "finite number >= 0")):
        with pytest.raises(PlanError, match=needle):
            stack_from_dict({**data, "request_overhead_s": value})
    sources = {k: v for k, v in data["sources"].items() if k != "ep_forward_overhead_s"}
    with pytest.raises(PlanError, match="sources.ep_forward_overhead_s missing"):
        stack_from_dict({**data, "sources": sources})


def test_serving_ttft_grows_smoothly_with_concurrency():
    # the old model batched min(k, C) prompts with a request: TTFT jumped from C = 4 to 8, then stayed flat
    ttft = [serving_at_concurrency("deepseek-v3", "8xB200", 1024, 1024, c, stack="sglang").ttft_s
            for c in (4, 8, 12, 16, 32)]
    assert all(b > a for a, b in zip(ttft, ttft[1:])), ttft


def test_a_held_out_models_prediction_never_sees_its_own_rows():
    """Leave-one-model-out predicts a model from a fit that never saw it: scaling the held-out model's measured
    times changes the full fit (its rows are in it) but not one of its own leave-one-model-out predictions. A
    fold that started from the full fit's optimum would carry them in (docs/methods.md, "LOMO and the
    optimizer's starting point")."""
    mooncake, _ = load_measurements(MOONCAKE)
    internal, _ = load_measurements("paper_internal_1t_8xh200.csv")

    def slower(m):
        return dataclasses.replace(m, **{f"{q}_s": getattr(m, f"{q}_s") * 1.5 for q in ("ttft", "tpot", "busy")
                                         if getattr(m, f"{q}_s") is not None})

    base = fit_joint(mooncake + internal, loo=False)
    moved = fit_joint([slower(m) for m in mooncake] + internal, loo=False)
    held = [(a, b) for a, b in zip(base.points, moved.points) if a.measurement.model == mooncake[0].model]
    assert held and all(a.lomo == b.lomo for a, b in held)
    assert any(a.predicted != b.predicted for a, b in held)   # the full fit did see them


def test_a_held_out_chips_prediction_never_sees_its_own_rows():
    """Leave-one-chip-out predicts a chip's rows from a fit without them, at the constants an uncalibrated chip
    gets: scaling the held-out chip's measured times moves the full fit but none of its leave-one-chip-out
    predictions. Only rows whose stack has rows on another chip are predicted (a stack seen on one chip alone
    would be an unseen engine): the Mooncake H20-3e rows get none."""
    nvidia, _ = load_measurements(NVIDIA)
    mooncake, _ = load_measurements(MOONCAKE)
    rows = [m for chip in ("b200", "h200") for m in [m for m in nvidia if m.chip == chip
                                                      and m.stack.startswith("sglang")][:8]] + mooncake

    def slower(m):
        return dataclasses.replace(m, **{f"{q}_s": getattr(m, f"{q}_s") * 1.5 for q in ("ttft", "tpot")
                                         if getattr(m, f"{q}_s") is not None}) if m.chip == "b200" else m

    base = fit_joint(rows, loo=False, lomo=False)
    moved = fit_joint([slower(m) for m in rows], loo=False, lomo=False)
    held = [(a, b) for a, b in zip(base.points, moved.points) if a.measurement.chip == "b200"]
    assert len(held) == 8 and all(a.loco and a.loco == b.loco for a, b in held)
    assert all(a.loco_server.keys() == a.loco.keys() for a, _ in held)
    assert any(a.predicted != b.predicted for a, b in held)   # the full fit did see them
    assert all(not p.loco for p in base.points if p.measurement.chip == "h20-3e")
    by_chip = {(r["chip"], r["quantity"]): r for r in base.summary("chip")}
    assert by_chip[("b200", "ttft")]["loco_points"] == 8 and "loco_median" not in by_chip[("h20-3e", "ttft")]


def test_uncalibrated_chip_constants_are_the_calibrations_prior():
    """What the planner runs an uncalibrated chip at (`default_calibration`) is what the fit would give a chip
    it has no rows for (its prior centres): micro-benchmark seeds, and the kernel curves' plateau for flash
    attention and W4A16 where the chip has curves (H100) -- not the generic kernel-class defaults."""
    from prfaas_plan.performance import calibrate as cal
    from prfaas_plan.performance.constants import default_calibration
    from prfaas_plan.profiles.efficiency import KERNEL_DEFAULTS

    chips = ["h100", "h800", "mi300x"]
    params = cal._params(chips, [])
    for chip in chips:
        hw = get_hardware(chip)
        default = default_calibration(hw)
        prior = {name: float(np.exp(params.centre[params.index(chip, name)])) for o, name in params.keys if o == chip}
        for cls in [c for c in cal.RATE_CLASSES if c in hw.peak_tflops or c in KERNEL_DEFAULTS]:
            assert default.gemm_efficiency(cls) == pytest.approx(prior[f"gemm:{cls}"]), (chip, cls)
        assert (default.memory, default.comm) == pytest.approx((prior["memory"], prior["comm"]))
    h100 = default_calibration(get_hardware("h100"))
    assert h100.gemm_efficiency("attention") != KERNEL_DEFAULTS["attention"]
    assert "kernel_curves.csv" in h100.source


def unseen_chip_sigma(quantity: str) -> float:
    """The log-width a plan on an uncalibrated chip should carry: the calibrated chips' median leave-one-model-out
    and leave-one-chip-out errors in quadrature (an unseen model on an unseen chip)."""
    import math

    cals = [get_hardware(c).calibration for c in ("b200", "h200")]
    widths = [math.log1p(np.median([getattr(c, f"{kind}_error")[quantity] for c in cals])) for kind in ("lomo", "loco")]
    return math.hypot(*widths) / 0.6745


def test_uncalibrated_chips_error_bars_combine_an_unseen_model_and_an_unseen_chip():
    """A chip nobody calibrated gets the calibrated chips' leave-one-model-out and leave-one-chip-out errors in
    quadrature as its error bar: wider than any calibrated chip's own, not the (narrower) width of the fit's
    prior."""
    from prfaas_plan.analytic.uncertainty import decode_error_bar, prefill_error_bar

    loco = {c: get_hardware(c).calibration.loco_error for c in ("b200", "h200")}
    assert all(v["ttft"] > 0 and v["tpot"] > 0 for v in loco.values())
    prefill = prefill_error_bar(RooflinePrefill.build(get_model("kimi-linear"), parse_instance("8xH100")), "h100")
    assert prefill.sigma == pytest.approx(unseen_chip_sigma("ttft"), rel=1e-9)
    assert "leave-one-chip-out" in prefill.source and "leave-one-model-out" in prefill.source
    calibrated = prefill_error_bar(RooflinePrefill.build(get_model("kimi-linear"), parse_instance("8xH200")), "h200")
    assert prefill.sigma > calibrated.sigma
    capacity = type("Capacity", (), {"binding": "slo"})()
    assert decode_error_bar(capacity, "h100").sigma == pytest.approx(unseen_chip_sigma("tpot"), rel=1e-9)
