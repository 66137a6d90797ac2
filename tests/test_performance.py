"""Roofline operator model, prefill and decode: invariants (hypothesis) and pinned behaviour."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan import arithmetic as A
from prfaas_plan.errors import PlanError
from prfaas_plan.performance import (
    ChipConstants,
    Instance,
    Parallel,
    PrefillModel,
    RooflinePrefill,
    TabulatedPrefill,
    chip_constants,
    decode_capacity,
    decode_memory,
    decode_step_s,
    parse_instance,
    prefill_model,
)
from prfaas_plan.performance.operators import pass_work
from prfaas_plan.performance.roofline import pass_seconds, unit_times
from prfaas_plan.performance.serving import serving_at_concurrency
from prfaas_plan.profiles import (
    Calibration,
    all_models,
    all_stacks,
    get_hardware,
    get_model,
    get_stack,
)
from prfaas_plan.profiles.stack import stack_from_dict

MODELS = sorted(all_models())
CHIPS = ["h200", "h20", "h20-3e", "h100", "b200"]
FIXED = ChipConstants(Calibration({"bf16": 0.8, "fp8": 0.6}, 0.85, 0.7, "test"), "calibrated")
STACKS = ["sglang", "vllm", "trtllm", "mooncake-sglang-pd", "paper-sglang", "paper-vllm"]
LENGTHS = np.unique(np.geomspace(1, 512 * 1024, 60).round())


def test_operator_classes_cover_the_architecture():
    names = {w.name for w in pass_work(get_model("qwen3.5-397b"), Parallel(8), 1, 8192.0, 0, "prefill")}
    assert {"attn_proj", "attn_full", "attn_linear", "moe_routed", "moe_shared", "lm_head", "comm_tp"} <= names
    names = {w.name for w in pass_work(get_model("mimo-v2-flash"), Parallel(8, "ep"), 1, 8192.0, 0, "prefill")}
    assert {"attn_swa", "dense_ffn", "comm_ep"} <= names and "attn_linear" not in names


def test_prefill_flops_match_arithmetic():
    # Per-chip GEMM + attention FLOPs x chips equal the model's prefill FLOPs (linear kinds add the chunked
    # intra-chunk term, so compare a model without them).
    m = get_model("qwen3-235b")
    l = 16384
    works = {w.name: w for w in pass_work(m, Parallel(8), 1, float(l), 0, "prefill")}
    total = sum(float(w.flops) for w in works.values()) * 8
    assert total == pytest.approx(float(A.prefill_flops(m, l).total), rel=1e-9)


def test_moe_weight_reads_follow_expert_coverage():
    m = get_model("kimi-k2")
    moe = m.moe
    per_expert = 3 * m.hidden_size * moe.expert_intermediate
    n = len(m.moe_layers)
    for batch in (1, 16, 256):
        routed = next(w for w in pass_work(m, Parallel(8), batch, 1.0, 1000, "decode") if w.name == "moe_routed")
        distinct = moe.num_experts * (1 - (1 - moe.top_k / moe.num_experts) ** batch)
        weights = n * distinct * per_expert / 8          # fp8: one byte per weight, sliced over 8 chips
        assert weights < float(routed.hbm_bytes) < weights * 1.2


def test_two_evaluation_paths_agree():
    m, chip = get_model("ring-2.5-1t"), get_hardware("h20")
    l = np.array([100.0, 5000.0, 70000.0])
    works = pass_work(m, Parallel(8), 1, l, 0, "prefill")
    cal = FIXED.calibration
    np.testing.assert_allclose(pass_seconds(works, chip, cal), unit_times(works, chip).seconds(cal), rtol=1e-12)


def test_vectorized_equals_scalar_and_accepts_floats():
    pm = RooflinePrefill.build(get_model("kimi-linear"), parse_instance("8xH200"))
    lengths = np.array([1, 512, 8192, 131072])
    vec = pm.latency_s(lengths)
    assert vec.shape == (4,)
    assert list(vec) == pytest.approx([float(pm.latency_s(int(x))) for x in lengths], rel=1e-12)
    assert float(pm.latency_s(8192.0)) == pytest.approx(float(vec[2]))


def test_breakdown_sums_to_latency_and_names_bounds():
    # mooncake-sglang-pd does not chunk, so one forward holds the whole prompt
    pm = RooflinePrefill.build(get_model("minimax-m2.5"), parse_instance("8xH200"), stack="mooncake-sglang-pd")
    l = np.array([1024.0, 131072.0])
    parts = pm.breakdown(l)
    np.testing.assert_allclose(sum(t for t, _ in parts.values()), pm.latency_s(l), rtol=1e-12)
    assert parts["attn_full"][1][1] == "compute"       # quadratic attention at 128K
    assert parts["comm_tp"][1][0] == "link" and parts["fixed latency"][1][0] == "stack"


@pytest.mark.parametrize("stack", STACKS)
def test_fixed_latency_adds_to_ttft_not_to_busy_time(stack):
    prof = get_stack(stack)
    pm = RooflinePrefill.build(get_model("qwen3-235b"), parse_instance("8xH200"), stack=prof)
    l = np.array([256.0, 4096.0, 65536.0])
    assert np.all(pm.latency_s(l) >= pm.busy_s(l) + prof.latency_s * (1 - 1e-12))
    # short prompts share a forward: per-prompt busy time below one forward's
    assert float(pm.busy_s(256.0)) < float(pm.latency_s(256.0)) - prof.latency_s
    no_latency = dataclasses.replace(pm, stack=dataclasses.replace(prof, latency_s=0.0))
    np.testing.assert_allclose(no_latency.busy_s(l), pm.busy_s(l))


def test_stack_profiles_named_and_sourced():
    assert set(STACKS) <= set(all_stacks())
    for prof in all_stacks().values():
        assert all(prof.sources[k].strip() for k in ("latency_s", "forward_overhead_s", "step_overhead_s",
                                                      "prefill_token_budget", "wave_fraction"))
    assert get_stack(None).name == "sglang"
    with pytest.raises(PlanError, match="unknown serving stack"):
        get_stack("sglangg")


def test_stack_profile_validation():
    base = {"kind": "stack", "name": "x", "engine": "e", "versions": "1", "latency_s": 0.1,
            "forward_overhead_s": 0.0, "step_overhead_s": 0.0, "prefill_token_budget": 8192, "wave_fraction": 0.5,
            "sources": {k: "assumed" for k in ("latency_s", "forward_overhead_s", "step_overhead_s",
                                              "prefill_token_budget", "wave_fraction")}}
    assert stack_from_dict(base).name == "x"
    for change, needle in [({"colour": 1}, "unknown field"), ({"latency_s": -1}, "latency_s must be"),
                           ({"sources": {}}, "sources.latency_s missing"), ({"wave_fraction": 2}, "wave_fraction"),
                           ({"chunked_prefill": "yes"}, "chunked_prefill")]:
        with pytest.raises(PlanError, match=needle):
            stack_from_dict({**base, **change})


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), chip=st.sampled_from(CHIPS), moe=st.sampled_from(["tp", "ep"]),
       l1=st.integers(1, 500_000), dl=st.integers(1, 500_000))
def test_prefill_latency_increases_with_length(model, chip, moe, l1, dl):
    pm = RooflinePrefill.build(get_model(model), parse_instance(f"8x{chip}"), moe)
    assert float(pm.latency_s(l1 + dl)) > float(pm.latency_s(l1))


def _faster(chip, flops, hbm, link, calibrated: bool):
    """``chip`` with every peak scaled up; its own calibration kept, or both dropped to the defaults."""
    from prfaas_plan.performance.constants import default_calibration

    if calibrated:   # its own fit, or its defaults written in as if calibrated
        slow = dataclasses.replace(chip, calibration=chip.calibration or default_calibration(chip))
    else:
        slow = dataclasses.replace(chip, name="uncal-slow", calibration=None)
    fast = dataclasses.replace(slow, name=f"{slow.name}-fast",
                               peak_tflops={k: v * flops for k, v in slow.peak_tflops.items()},
                               hbm_tb_s=slow.hbm_tb_s * hbm, scaleup_gb_s=slow.scaleup_gb_s * link)
    return slow, fast


@settings(max_examples=60, deadline=None, derandomize=True)
@given(model=st.sampled_from(MODELS), chip=st.sampled_from(CHIPS + ["h800", "mi300x"]),
       stack=st.sampled_from(STACKS), l=st.integers(1, 300_000), batch=st.integers(1, 256),
       flops=st.floats(1.0, 10.0), hbm=st.floats(1.0, 10.0), link=st.floats(1.0, 10.0), calibrated=st.booleans())
def test_faster_chip_never_predicts_slower(model, chip, stack, l, batch, flops, hbm, link, calibrated):
    slow, fast = _faster(get_hardware(chip), flops, hbm, link, calibrated)
    m = get_model(model)
    pa = RooflinePrefill.build(m, Instance(slow, 8), stack=stack)
    pb = RooflinePrefill.build(m, Instance(fast, 8), stack=stack)
    assert pb.constants.calibration == pa.constants.calibration
    assert float(pb.latency_s(l)) <= float(pa.latency_s(l)) * (1 + 1e-12)
    assert float(pb.busy_s(l)) <= float(pa.busy_s(l)) * (1 + 1e-12)
    step_a = decode_step_s(m, Instance(slow, 8), batch, l, stack=stack)
    step_b = decode_step_s(m, Instance(fast, 8), batch, l, stack=stack)
    assert float(step_b) <= float(step_a) * (1 + 1e-12)


def _fits(model, instance) -> bool:
    return decode_memory(model, parse_instance(instance), 1024).max_batch >= 1


@pytest.mark.parametrize("stack", STACKS)
def test_8xh200_never_slower_than_8xh20_on_one_stack(stack):
    checked = 0
    for name in MODELS:
        m = get_model(name)
        if not (_fits(m, "8xH200") and _fits(m, "8xH20")):
            continue
        checked += 1
        h200 = RooflinePrefill.build(m, parse_instance("8xH200"), stack=stack)
        h20 = RooflinePrefill.build(m, parse_instance("8xH20"), stack=stack)
        ratio = h200.latency_s(LENGTHS) / h20.latency_s(LENGTHS)
        assert np.all(ratio <= 1.0), (name, float(ratio.max()))
        assert np.all(h200.busy_s(LENGTHS) <= h20.busy_s(LENGTHS)), name
        for batch in (1, 16, 128):
            assert float(decode_step_s(m, "8xH200", batch, 8192, stack=stack)) <= float(
                decode_step_s(m, "8xH20", batch, 8192, stack=stack)), (name, batch)
    assert checked >= 6


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(["qwen3-235b", "kimi-linear-48b", "minimax-m2.5", "qwen3.5-397b", "deepseek-v3"]),
       chip=st.sampled_from(["h200", "h20-3e"]), tpot_ms=st.floats(5.0, 200.0), looser=st.floats(1.0, 4.0),
       context=st.integers(100, 60_000), dp=st.booleans())
def test_decode_throughput_rises_with_looser_slo(model, chip, tpot_ms, looser, context, dp):
    """A looser TPOT SLO never decodes fewer requests, with TP or DP attention (whose batch stays a whole
    number of requests per rank)."""
    m, inst = get_model(model), parse_instance(f"8x{chip}")
    tight = decode_capacity(m, inst, tpot_ms / 1e3, context, dp_attention=dp)
    loose = decode_capacity(m, inst, tpot_ms * looser / 1e3, context, dp_attention=dp)
    assert loose.batch >= tight.batch
    assert loose.tokens_per_s >= tight.tokens_per_s * (1 - 1e-12)
    if dp:
        assert tight.batch % 8 == 0 and loose.batch % 8 == 0


def test_decode_capacity_binding_and_source():
    m, inst = get_model("qwen3-235b"), parse_instance("8xH20-3e")
    cap = decode_capacity(m, inst, 0.025, 8192 + 512)
    assert cap.binding == "slo" and cap.step_s <= 0.025
    assert float(decode_step_s(m, inst, cap.batch + 1, 8192 + 512)) > 0.025
    assert "h20-3e constants" in cap.source and "TPOT <= 25 ms" in cap.source
    # A long context fills HBM first.
    long = decode_capacity(m, inst, 0.2, 131072)
    assert long.binding == "memory" and long.batch == decode_memory(m, inst, 131072).max_batch
    assert long.requests_per_s(1024) == pytest.approx(long.tokens_per_s / 1024)


def test_decode_when_weights_do_not_fit():
    # kimi-k2 at fp8 (1,026 GB) cannot be loaded on 8 x 96 GB H20: no batch at all; at int4 it fits.
    cap = decode_capacity(get_model("kimi-k2"), parse_instance("8xH20"), 0.025, 27_000 + 512)
    assert cap.batch == 0 and cap.binding == "memory" and cap.tokens_per_s == 0
    int4 = dataclasses.replace(get_model("kimi-k2"), weight_dtype="int4", expert_dtype="int4")
    assert decode_capacity(int4, parse_instance("8xH20"), 0.025, 27_000 + 512).batch > 0


def test_decode_memory_counts_mla_latent_on_every_chip():
    m = get_model("kimi-k2")
    per = decode_memory(m, parse_instance("8xH200"), 1000).request_bytes
    assert per == pytest.approx(1000 * A.kv_bytes_per_token(m))   # full latent on each of the 8 chips
    q = get_model("qwen3-235b")                                  # 4 KV heads on 8 chips: one head each
    assert decode_memory(q, parse_instance("8xH200"), 1000).request_bytes == pytest.approx(
        1000 * A.kv_bytes_per_token(q) / 4)


def test_expert_parallel_busiest_chip_carries_imbalance():
    m = get_model("deepseek-v3")
    tp = next(w for w in pass_work(m, Parallel(8, "tp"), 1, 4096.0, 0, "prefill") if w.name == "moe_routed")
    ep = next(w for w in pass_work(m, Parallel(8, "ep"), 1, 4096.0, 0, "prefill") if w.name == "moe_routed")
    assert 1.0 < float(ep.flops) / float(tp.flops) < 1.2


def test_prefill_model_sources():
    auto = prefill_model("prfaas-1t", "8xH200")
    assert isinstance(auto, TabulatedPrefill) and isinstance(auto, PrefillModel)
    assert auto.source.startswith("measured table on 8xH200")
    roof = prefill_model("prfaas-1t", "8xH200", source="roofline")
    assert isinstance(roof, RooflinePrefill) and "reconstruction" in roof.source and "h200 constants" in roof.source
    assert isinstance(prefill_model("prfaas-1t", "8xH20"), RooflinePrefill)
    with pytest.raises(PlanError, match="prfaas-1t has no measured prefill table for 8xH20"):
        prefill_model("prfaas-1t", "8xH20", source="measured")
    with pytest.raises(PlanError, match="`source` 'table'"):
        prefill_model("prfaas-1t", "8xH200", source="table")


@pytest.mark.parametrize("chip", ["h100", "h800", "mi300x"])
def test_uncalibrated_chips_get_defaults_and_say_so(chip):
    c = chip_constants(get_hardware(chip))
    assert c.assumed and c.origin == "default"
    assert "ASSUMED" in c.describe(get_hardware(chip)) and "kernel_efficiency.csv" in c.calibration.source
    assert "ASSUMED" in RooflinePrefill.build(get_model("qwen3-235b"), parse_instance(f"8x{chip}")).source
    # never another chip's fit: the two chips without micro-benchmarks share the same defaults
    if chip != "h100":
        assert c.calibration == dataclasses.replace(chip_constants(get_hardware("h800")).calibration,
                                                    gemm=c.calibration.gemm)


@pytest.mark.parametrize("chip", ["h200", "h20", "h20-3e", "b200"])
def test_calibrated_chips_use_their_own_constants(chip):
    c = chip_constants(get_hardware(chip))
    assert not c.assumed and "fitted by prfaas-plan calibrate" in c.calibration.source


def test_serving_at_concurrency_one_is_the_unloaded_latency():
    m, inst = get_model("deepseek-v3"), parse_instance("8xH200")
    s = serving_at_concurrency(m, inst, 8192, 1024, 1)
    assert s.ttft_s == pytest.approx(float(RooflinePrefill.build(m, inst).latency_s(8192.0)))
    assert s.tpot_s == pytest.approx(s.step_s)
    loaded = serving_at_concurrency(m, inst, 8192, 1024, 64)
    assert loaded.ttft_s > s.ttft_s and loaded.tpot_s > loaded.step_s > s.step_s


@settings(max_examples=25, deadline=None, derandomize=True)
@given(model=st.sampled_from(MODELS), chip=st.sampled_from(CHIPS), stack=st.sampled_from(STACKS),
       isl=st.integers(64, 65_536), more=st.integers(1, 65_536), concurrency=st.integers(2, 256))
def test_closed_loop_ttft_monotone_in_length_and_never_below_concurrency_one(model, chip, stack, isl, more,
                                                                             concurrency):
    # issue 20 item 6: a lone request's TTFT grows with its length (kernel-shape curves included), and company
    # can only delay a request (TTFT at concurrency C >= at concurrency 1)
    one = serving_at_concurrency(model, f"8x{chip}", isl, 256, 1, stack=stack)
    longer = serving_at_concurrency(model, f"8x{chip}", isl + more, 256, 1, stack=stack)
    loaded = serving_at_concurrency(model, f"8x{chip}", isl, 256, concurrency, stack=stack)
    assert longer.ttft_s > one.ttft_s
    assert loaded.ttft_s >= one.ttft_s * (1 - 1e-12)


def test_kernel_curves_cover_benchmarked_chips_and_only_those():
    from prfaas_plan.performance.kernel_curves import curve_chips, curve_note, relative_efficiency

    assert curve_chips() == {"h100", "h200", "b200"}
    assert "no kernel micro-benchmarks" in curve_note("h20")
    x = np.array([16.0, 256.0, 4096.0, 65_536.0])
    for chip in sorted(curve_chips()):
        r = relative_efficiency(chip, "attn_full", "attention", x)
        assert np.all(np.diff(r) >= 0) and np.all((r > 0) & (r <= 1))   # long sequences reach the plateau
        gemm = relative_efficiency(chip, "dense_ffn", "bf16", x)
        assert np.all((gemm > 0) & (gemm <= 1)) and gemm[-1] >= 0.95
    assert relative_efficiency("h20", "dense_ffn", "bf16", x) == 1.0
    assert relative_efficiency("h200", "elementwise", "bf16", x) == 1.0


def test_prefill_works_shared_across_chips_and_equal_to_fresh_work():
    """`prefill_works` hands the remote and local pools one computation of the hardware-free work; the
    seconds match those of work computed afresh."""
    from prfaas_plan.performance.operators import Parallel
    from prfaas_plan.performance.roofline import prefill_shape, prefill_works
    from prfaas_plan.profiles import get_model, get_stack

    model, stack, par = get_model("kimi-linear"), get_stack(None), Parallel(8, "ep")
    l = np.array([100.0, 3000.0, 40000.0])
    first = prefill_works(model, par, l, stack, True)
    assert prefill_works(model, par, l.copy(), stack, True)[0] is first[0]
    assert prefill_works(model, par, l, stack, False)[0] is not first[0]
    requests, q, context, chunks = prefill_shape(l, stack, True)
    fresh = pass_work(model, par, requests, q, context, "prefill")
    for chip in ("h200", "h20"):
        hw = get_hardware(chip)
        cal = chip_constants(hw).calibration
        np.testing.assert_array_equal(pass_seconds(first[0], hw, cal), pass_seconds(fresh, hw, cal))
    np.testing.assert_array_equal(first[1], chunks)
    np.testing.assert_array_equal(first[2], requests)


def test_prefill_works_keeps_no_long_length_arrays():
    """Length arrays beyond `MAX_WORKS_LENGTHS` (`rates` on 10^5 lengths) are computed, not kept: the same
    work as a kept call, and a second call computes it again."""
    from prfaas_plan.performance.operators import Parallel
    from prfaas_plan.performance.roofline import MAX_WORKS_LENGTHS, prefill_works
    from prfaas_plan.profiles import get_model, get_stack

    model, stack, par = get_model("kimi-linear"), get_stack(None), Parallel(8, "tp")
    long = np.linspace(128.0, 131072.0, MAX_WORKS_LENGTHS + 1)
    once, again = prefill_works(model, par, long, stack, True), prefill_works(model, par, long, stack, True)
    assert once[0] is not again[0]
    kept = prefill_works(model, par, long[:MAX_WORKS_LENGTHS], stack, True)
    hw = get_hardware("h200")
    cal = chip_constants(hw).calibration
    np.testing.assert_array_equal(pass_seconds(once[0], hw, cal)[:MAX_WORKS_LENGTHS], pass_seconds(kept[0], hw, cal))


def test_bisect_last_within_matches_the_scalar_bisection():
    """`bisect_last_within` probes the same batches and decides the same way as one probe per level, also for
    a step that is not monotone (the decisions, not monotonicity, make the answer)."""
    from prfaas_plan.performance.decode import bisect_last_within

    rng = np.random.default_rng(0)
    for _ in range(300):
        lo = int(rng.integers(1, 50))
        hi = lo + int(rng.integers(0, 20000))
        noise = rng.random(hi + 2)

        def step(b):
            return noise[np.asarray(b, dtype=int)]

        a, b = lo, hi
        while b - a > 1:
            mid = (a + b) // 2
            a, b = (mid, b) if step(mid) <= 0.5 else (a, mid)
        assert bisect_last_within(step, lo, hi, 0.5, levels=int(rng.integers(1, 8))) == a


def test_decode_capacity_beyond_the_tabulated_batches_matches_scalar_steps():
    """Above `VECTOR_BATCHES` the bisection's steps come in vectorized batches: the batch is still the
    largest whole number of requests per attention rank whose scalar step meets the SLO."""
    from prfaas_plan.performance.decode import VECTOR_BATCHES, decode_memory

    model = get_model("kimi-linear")
    cap = decode_memory(model, parse_instance("16xh20"), 3000.0, True).max_batch
    assert cap > VECTOR_BATCHES
    c = decode_capacity(model, "16xh20", 0.05, 3000.0, "ep", dp_attention=True)
    b = int(c.batch)
    step = lambda n: float(decode_step_s(model, "16xh20", n, 3000.0, "ep", dp_attention=True))  # noqa: E731
    assert b % 16 == 0 and step(b) <= 0.05 and (b == cap or step(b + 16) > 0.05)
    assert c.step_s == step(b)


@pytest.mark.parametrize("instance,tpot_s", [("4xh20", 0.025), ("8xh20", 0.025), ("8xh200", 0.015)])
def test_dp_attention_decode_batch_is_whole_requests_per_rank(instance, tpot_s):
    """Under DP attention the fullest rank sets the step, and the operator model is exact only where every
    rank holds as many requests as the others: the batch is the largest multiple of the ranks within the
    SLO and HBM, so a batch one rank more is over the SLO (or HBM), and `export` writes the same cap."""
    from prfaas_plan.performance.decode import decode_memory

    model, inst = get_model("kimi-linear"), parse_instance(instance)
    ranks = inst.chips
    c = decode_capacity(model, inst, tpot_s, 28_000.0, "tp", dp_attention=True)
    b = int(c.batch)
    step = lambda n: float(decode_step_s(model, inst, n, 28_000.0, "tp", dp_attention=True))  # noqa: E731
    cap = decode_memory(model, inst, 28_000.0, True).max_batch
    assert b > 0 and b % ranks == 0
    assert step(b) <= tpot_s and (b + ranks > cap or step(b + ranks) > tpot_s)
    assert f"({b // ranks} on each of {ranks} attention ranks)" in c.source
    tp = decode_capacity(model, inst, tpot_s, 28_000.0, "tp")   # TP attention: any whole batch
    tp_step = lambda n: float(decode_step_s(model, inst, n, 28_000.0, "tp"))  # noqa: E731
    assert tp_step(tp.batch) <= tpot_s and (tp.binding == "memory" or tp_step(tp.batch + 1) > tpot_s)
