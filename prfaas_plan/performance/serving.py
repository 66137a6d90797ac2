"""Serving at a fixed concurrency: mean TTFT and TPOT of a closed-loop benchmark (docs/methods.md).

A benchmark at concurrency ``C`` with fixed input ``isl`` and output ``osl`` keeps ``C`` requests in flight.
Requests that finish together come back together, so prompts arrive in clumps: a request arrives with
``W - 1 = s (C - 1)`` others, ``s`` being the stack profile's ``wave_fraction`` (1 = lockstep waves,
0 = evenly staggered), fitted on such measurements. Waiting prompts are prefilled before decode steps
run, packed as the stack says (``floor(budget / isl)`` prompts per forward, or chunks of the budget). So

- TTFT = the stack's fixed latency + the forward(s) holding the request's own prompt, shared with
  ``min(W, k)`` prompts of its clump (``k = min(budget // isl, C)`` fit one forward; the forward's time is
  interpolated linearly between 1 and ``k`` prompts, so TTFT grows smoothly with ``C``) + half of the rest
  of its clump ``max(0, W - k) / 2`` at the busy time of a prompt (`RooflinePrefill.busy_s`) + one decode
  step of the running batch between consecutive prefill forwards (SGLang alternates prefill and decode
  batches; vLLM and TensorRT-LLM mix prefill chunks into decode steps, which costs about the same) +
  ``(W - 1) / 2`` admissions ahead of it at the stack's ``request_overhead_s``;
- TPOT = one decode step of batch ``C`` at context ``isl + osl / 2`` (stack per-step overhead included)
  + the other requests' prefills that fall inside this request's decode phase, ``C - 1 - (W - 1) / 2`` of
  them per cycle, spread over its ``osl - 1`` steps.

Concurrency 1 reduces to the unloaded latency (`RooflinePrefill.latency_s`) and the bare step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..profiles import ModelProfile, StackProfile, get_model, get_stack
from .base import Instance, parse_instance
from .constants import ChipConstants, chip_constants
from .decode import decode_step_s
from .operators import Parallel, pass_work
from .roofline import forward_overhead_s, pass_seconds, prefill_shape


@dataclass(frozen=True)
class WaveShape:
    """Forward shapes of one request's wait at concurrency ``C``, each (prompts per forward, tokens,
    context, forwards): ``alone`` = its prompt in forward(s) of its own; ``full`` = its forward filled
    with ``per_forward`` prompts (at most ``C``); ``busy`` = a kept-full forward, with ``busy_per_prompt``
    forwards per prompt (see `prefill_shape`)."""

    alone: tuple[float, float, float, float]
    full: tuple[float, float, float, float]
    busy: tuple[float, float, float, float]
    per_forward: float

    @property
    def busy_per_prompt(self) -> float:
        requests, _, _, chunks = self.busy
        return chunks / requests


def wave_shape(isl: int, concurrency: int, stack: StackProfile) -> WaveShape:
    """The forward shapes of `serving_at_concurrency` for prompts of ``isl`` tokens at ``concurrency``."""
    busy = tuple(float(v) for v in prefill_shape(float(isl), stack, batched=True))
    _, q, context, chunks = (float(v) for v in prefill_shape(float(isl), stack, batched=False))
    per_forward = min(max(1.0, float(stack.prefill_token_budget // isl)), float(concurrency)) if chunks == 1 else 1.0
    return WaveShape((1.0, q, context, chunks), (per_forward, q, context, chunks), busy, per_forward)


def closed_loop(latency, alone, full, per_forward, busy, forwards_per_prompt, step, chunks, concurrency, osl,
                wave_fraction, request_overhead) -> tuple:
    """Mean TTFT and TPOT (seconds) of the closed-loop benchmark (see the module docstring) from the times
    of its parts: ``alone``/``full`` = the forward(s) holding the request's prompt with 1 or ``per_forward``
    prompts, ``busy`` = busy seconds per prompt of a kept-full forward, ``step`` = the decode step of the
    running batch. Vectorized over every argument (the calibration evaluates all points at once)."""
    C = np.asarray(concurrency, dtype=float)
    clump = 1.0 + np.asarray(wave_fraction, dtype=float) * (C - 1.0)
    together = np.minimum(clump, per_forward)
    span = np.maximum(np.asarray(per_forward, dtype=float) - 1.0, 1.0)
    own = alone + (full - alone) * (together - 1.0) / span
    ahead = np.maximum(0.0, clump - per_forward) / 2.0
    gaps = ahead * forwards_per_prompt + np.where(C > 1, np.asarray(chunks, dtype=float) - 1.0, 0.0)
    ttft = latency + own + ahead * busy + gaps * step + request_overhead * (clump - 1.0) / 2.0
    inside = (C - 1.0 - (clump - 1.0) / 2.0) / np.maximum(np.asarray(osl, dtype=float) - 1.0, 1.0)
    return ttft, step + inside * busy


@dataclass(frozen=True)
class Serving:
    """Mean ``ttft_s`` and ``tpot_s`` (seconds) at ``concurrency``, and the bare decode step ``step_s``."""

    concurrency: int
    ttft_s: float
    tpot_s: float
    step_s: float


def serving_at_concurrency(model: ModelProfile | str, instance: Instance | str, isl: int, osl: int,
                           concurrency: int, moe: str = "tp", constants: ChipConstants | None = None,
                           stack: StackProfile | str | None = None) -> Serving:
    """Mean TTFT and TPOT of ``concurrency`` closed-loop clients sending ``isl``-token prompts for ``osl``
    output tokens (see the module docstring)."""
    model, instance, stack = get_model(model), parse_instance(instance), get_stack(stack)
    constants = constants or chip_constants(instance.chip)
    par = Parallel(instance.chips, moe)
    shape = wave_shape(isl, concurrency, stack)
    overhead = forward_overhead_s(stack, model, par)

    def forwards_s(requests, tokens, context, chunks) -> float:
        works = pass_work(model, par, requests, tokens, context, "prefill")
        return (float(pass_seconds(works, instance.chip, constants.calibration)) + overhead) * chunks

    step = float(decode_step_s(model, instance, concurrency, isl + osl / 2, moe, constants, stack))
    ttft, tpot = closed_loop(stack.latency_s, forwards_s(*shape.alone), forwards_s(*shape.full), shape.per_forward,
                             forwards_s(*shape.busy) / shape.busy[0], shape.busy_per_prompt, step, shape.alone[3],
                             concurrency, osl, stack.wave_fraction, stack.request_overhead_s)
    return Serving(concurrency, float(ttft), float(tpot), step)
