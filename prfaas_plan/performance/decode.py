"""Decode capacity of one instance at a per-token latency SLO, from the same operator roofline as prefill.

A decode step of ``B`` requests with mean context ``c`` (tokens cached per request) reads the attention and
dense weights, the routed experts the batch touches (``E * (1 - (1 - k/E)^B)`` distinct experts per layer
under uniform routing), every request's KV cache and recurrent state, and computes one token per request.
The batch is capped by two limits:

- the SLO: the step must take at most the TPOT target (25 ms = 40 tokens/s);
- HBM: weights + (KV + state) per request must fit in the engine's share of HBM (`MEM_FRACTION`, the rest
  being activations, CUDA graphs and communication buffers, as SGLang's ``mem_fraction_static``).

Each step adds the serving stack's per-step overhead (``step_overhead_s``: scheduling, sampling and launch
gaps that CUDA-graph replay does not hide), fitted on measured TPOT (docs/methods.md). ``decode_step_s`` is
the TPOT of a batch at a context; ``decode_capacity`` the largest batch within a TPOT SLO.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import arithmetic as A
from ..profiles import ModelProfile, StackProfile, get_model, get_stack
from .base import DecodeCapacity, Instance, parse_instance
from .constants import ChipConstants, chip_constants
from .operators import (
    Parallel,
    attention_ranks,
    kv_bytes_per_token_per_chip,
    pass_work,
    state_bytes_per_chip,
)
from .roofline import nodes_note, pass_seconds
from .sharing import shared

# EP decode from the engines' measured MoE kernels (`moe_split`): off until the bundled profiles are refitted
# with it. Measured (issue 21): on NVIDIA's 46 EP TPOT rows with today's constants it cuts TensorRT-LLM H200
# EP8's median error from +50% to +27%; a joint refit with it moves TensorRT-LLM TPOT |err| in-sample / LOO
# / LOMO from 28 / 28 / 26% to 21.5 / 22 / 23%, but SGLang's from 7 / 8 / 9% to 8.5 / 8.8 / 13% and H200's
# TPOT LOMO from 15 to 16%, and it moves every bundled chip and stack constant (docs/methods.md).
EP_KERNEL_RATIO = False
VECTOR_BATCHES = 4096  # up to this many batches fit, `decode_capacity` evaluates all at once (else bisects)
MEM_FRACTION = 0.9  # share of HBM for weights + KV pool (SGLang mem_fraction_static ~0.88-0.9), assumed


@dataclass(frozen=True)
class DecodeMemory:
    """HBM budget of one chip for decode, bytes: what the engine may use, the weights it holds and what one
    request at the mean context adds (KV of growing and window layers + fixed state)."""

    usable_bytes: float
    weight_bytes: float
    request_bytes: float
    ranks: int = 1  # attention ranks holding requests of their own (DP attention: the chips; else 1)

    @property
    def max_batch(self) -> int:
        """Largest number of concurrent requests of the instance that fits (0 when the weights alone do not):
        ``ranks`` times what one rank's free HBM holds."""
        free = self.usable_bytes - self.weight_bytes
        if free <= 0:
            return 0
        if self.request_bytes <= 0:
            return 1 << 30  # nothing held per request: memory sets no limit
        return int(free // self.request_bytes) * self.ranks


def attention_weight_bytes(model: ModelProfile) -> float:
    """Bytes of every layer's attention projections (one copy), at the weight dtype."""
    from ..profiles import dtype_bytes

    return A.param_counts(model).attention * dtype_bytes(model.weight_dtype, model.name)


def decode_memory(model: ModelProfile | str, instance: Instance | str, context_tokens: float,
                  dp_attention: bool | int = False) -> DecodeMemory:
    """Per-chip HBM budget for decoding ``model`` at a mean context of ``context_tokens`` per request.

    Under TP attention a request's cache is split (or, for MLA latents and KV heads fewer than the chips,
    replicated) over every chip; under DP attention (``dp_attention``) a request sits whole on one chip,
    which also holds a whole copy of the attention weights (the rest stays split over the chips); with
    ``k`` ranks of several chips (`operators.attention_ranks`) a request is split over its rank's chips,
    each holding ``1/(chips/k)`` of the attention weights."""
    model, instance = get_model(model), parse_instance(instance)
    tp = instance.chips
    ranks = attention_ranks(dp_attention, tp)
    atp = tp // ranks
    per_request = state_bytes_per_chip(model, atp)
    for g in model.cached_as("growing"):
        per_request += g.count * context_tokens * kv_bytes_per_token_per_chip(model, g, atp)
    for g in model.cached_as("window"):
        per_request += g.count * min(context_tokens, g.window) * kv_bytes_per_token_per_chip(model, g, atp)
    weights = A.weight_bytes(model) / tp
    if ranks > 1:
        weights += attention_weight_bytes(model) * (1 / atp - 1 / tp)
    return DecodeMemory(instance.chip.hbm_gb * 1e9 * MEM_FRACTION, weights, per_request, ranks)


def decode_step_s(model: ModelProfile | str, instance: Instance | str, batch, context_tokens,
                  moe: str = "tp", constants: ChipConstants | None = None,
                  stack: StackProfile | str | None = None, dp_attention: bool = False) -> np.ndarray:
    """Seconds of one decode step (the TPOT) of ``batch`` requests at mean context ``context_tokens``
    (both vectorized), the stack's per-step overhead included; ``dp_attention`` runs attention
    data-parallel (`Parallel`)."""
    model, instance = get_model(model), parse_instance(instance)
    constants = constants or chip_constants(instance.chip)
    stack = get_stack(stack)
    works = decode_works(model, instance, batch, context_tokens, moe, stack, dp_attention)
    return pass_seconds(works, instance.chip, constants.calibration) + stack.step_overhead_s


def decode_works(model: ModelProfile, instance: Instance, batch, context_tokens, moe: str, stack: StackProfile,
                 dp_attention: bool = False) -> list:
    """The operator work of one decode step (`operators.pass_work`), with an EP step's routed experts taken
    from the engine's measured kernels where the chip has them: the TP routed-expert work scaled by the EP/TP
    kernel ratio (`moe_split`; time is linear in the work at a fixed shape, so this is the TP time times the
    ratio). `decode_step_s` and the calibration (`calibrate`) both time these works."""
    b, c = np.asarray(batch, dtype=float), np.asarray(context_tokens, dtype=float)
    works = pass_work(model, Parallel(instance.chips, moe, dp_attention), b, 1.0, c, "decode")
    ratio = _ep_ratio(model, instance, moe, stack, b)
    if ratio is None:
        return works
    tp = next(w for w in pass_work(model, Parallel(instance.chips, "tp", dp_attention), b, 1.0, c, "decode")
              if w.name == "moe_routed")
    scaled = replace(tp, flops=tp.flops * ratio, hbm_bytes=tp.hbm_bytes * ratio)
    return [scaled if w.name == "moe_routed" else w for w in works]


def _ep_ratio(model: ModelProfile, instance: Instance, moe: str, stack: StackProfile, tokens):
    """The measured EP/TP routed-expert kernel ratio (`moe_split.split_ratio`) for an EP decode step, or None
    (TP, no experts, one chip, or no kernel data: the roofline's own EP model then)."""
    if not EP_KERNEL_RATIO or moe != "ep" or model.moe is None or instance.chips < 2:
        return None
    from .moe_split import split_ratio

    return split_ratio(instance.chip.name, stack.engine, model.expert_dtype, instance.chips, tokens)


@shared
def decode_steps(model: ModelProfile, instance: Instance, cap: int, context_tokens: float, moe: str,
                 constants: ChipConstants, stack: StackProfile, dp_attention: bool) -> np.ndarray:
    """`decode_step_s` (seconds) of every batch ``1..cap`` in one vectorized pass, read-only. `shared`: they do
    not depend on the TPOT SLO, so a sweep over SLOs computes them once per instance, context and split."""
    steps = np.asarray(decode_step_s(model, instance, np.arange(1, cap + 1), context_tokens, moe, constants, stack,
                                     dp_attention), dtype=float)
    steps.setflags(write=False)
    return steps


BISECT_LEVELS = 6  # bisection levels `bisect_last_within` evaluates per vectorized call (63 batches)


def _probes(lo: int, hi: int, levels: int) -> list[int]:
    """Every midpoint the bisection of ``(lo, hi)`` may probe in its next ``levels`` steps, sorted."""
    out, frontier = [], [(lo, hi)]
    for _ in range(levels):
        frontier = [half for a, b in frontier if b - a > 1
                    for half in ((a, (a + b) // 2), ((a + b) // 2, b))]
        out += [a for a, b in frontier[1::2]]
    return sorted(set(out))


def bisect_last_within(steps_at, lo: int, hi: int, tpot_s: float, levels: int = BISECT_LEVELS) -> int:
    """The bisection ``while hi - lo > 1: mid = (lo + hi) // 2; keep (mid, hi) if step(mid) <= tpot_s else
    (lo, mid)``, returning ``lo``, with the steps of the next ``levels`` levels' possible midpoints from one
    call of ``steps_at`` (batches array -> step seconds array): the same probes and decisions, a few
    vectorized passes instead of one scalar pass per level."""
    while hi - lo > 1:
        batches = _probes(lo, hi, levels)
        table = dict(zip(batches, np.asarray(steps_at(np.array(batches, dtype=float)), dtype=float).tolist()))
        for _ in range(levels):
            if hi - lo <= 1:
                break
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if table[mid] <= tpot_s else (lo, mid)
    return lo


@shared
def decode_capacity(model: ModelProfile | str, instance: Instance | str, tpot_s: float, context_tokens: float,
                    moe: str = "tp", constants: ChipConstants | None = None,
                    stack: StackProfile | str | None = None, dp_attention: bool = False) -> DecodeCapacity:
    """What one decode instance sustains at a TPOT SLO of ``tpot_s`` seconds per token.

    ``context_tokens`` is the mean context a request holds while decoding (input + output/2). The batch is
    the largest that meets both the SLO and HBM; ``binding`` says which limit set it (``"slo"`` or
    ``"memory"``); a batch of 0 means not even one request fits (its step time is still reported). Under
    ``dp_attention`` the batch is a whole number of requests per attention rank, and "one request" is one
    on each rank.
    """
    if tpot_s <= 0 or context_tokens < 0:
        raise ValueError("tpot_s must be > 0 and context_tokens >= 0")
    model, instance = get_model(model), parse_instance(instance)
    constants = constants or chip_constants(instance.chip)
    stack = get_stack(stack)
    mem = decode_memory(model, instance, context_tokens, dp_attention)

    def step(b: int) -> float:
        return float(decode_step_s(model, instance, b, context_tokens, moe, constants, stack, dp_attention))

    cap = mem.max_batch
    # DP attention: every rank holds the same whole number of requests. The ranks step together (the FFN's
    # tokens are gathered across them), so the fullest rank sets the step; the operator model spreads a batch
    # evenly, which is exact at whole multiples of the ranks only. The engines cap the batch per rank too
    # (`export.Role.rank_batch`).
    unit = mem.ranks
    if 1 <= cap <= VECTOR_BATCHES:  # every batch's step in one vectorized pass, read by the same bisection
        steps = decode_steps(model, instance, cap, context_tokens, moe, constants, stack, dp_attention)
        step = lambda b: float(steps[b - 1])  # noqa: E731 - the same figures, looked up
    if cap >= unit and step(unit) <= tpot_s:
        lo, hi = 1, cap                   # step is increasing in the batch: bisect for the last b within SLO
        if step(hi) <= tpot_s:
            lo = hi
        if cap > VECTOR_BATCHES:  # too many batches to tabulate: the bisection's probes a few levels at once
            def steps_at(b: np.ndarray) -> np.ndarray:
                return decode_step_s(model, instance, b, context_tokens, moe, constants, stack, dp_attention)

            lo = bisect_last_within(steps_at, lo, hi, tpot_s)
        else:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if step(mid) <= tpot_s else (lo, mid)
        batch = lo // unit * unit   # within the SLO, as every smaller batch is (the step grows with it)
        binding = "memory" if batch == cap else "slo"
    else:
        batch, binding = 0, ("memory" if cap < unit else "slo")
    gb = 1e9
    source = (f"roofline decode on {instance} ({Parallel(instance.chips, moe, dp_attention)}){nodes_note(instance)} "
              f"at {context_tokens:,.0f} "
              f"tokens of context, TPOT <= {tpot_s * 1e3:g} ms: batch {batch} set by {binding}"
              f"{f' ({batch // unit} on each of {unit} attention ranks)' if unit > 1 and batch else ''}; HBM per chip "
              f"{mem.usable_bytes / gb:.1f} GB usable ({MEM_FRACTION:.0%} of {instance.chip.hbm_gb:g} GB, "
              f"assumed), weights {mem.weight_bytes / gb:.1f} GB, {mem.request_bytes / 1e6:,.1f} MB per request"
              f"{f' on each of its {mem.ranks} attention ranks' if mem.ranks > 1 else ''} (fits {cap:,}); "
              f"{constants.describe(instance.chip)}; stack {stack.name} (its note gives its numbers)")
    return DecodeCapacity(batch=float(batch), step_s=step(max(batch, unit)), binding=binding, source=source)
