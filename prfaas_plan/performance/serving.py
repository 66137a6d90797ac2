"""Serving at a fixed concurrency: mean TTFT and TPOT of a closed-loop benchmark (docs/methods.md).

A benchmark at concurrency ``C`` with fixed input ``isl`` and output ``osl`` keeps ``C`` requests in flight.
This module builds the times of its parts from the roofline and the stack -- the forward(s) holding one
request's prompt alone and shared with ``k = min(budget // isl, C)`` prompts (`wave_shape`), the busy time of a
prompt in a kept-full forward, the decode step of batch ``C`` at context ``isl + osl / 2`` -- and
`closed_queue.closed_queue` turns them into TTFT and TPOT: the benchmark's clumps (``wave_fraction``), the
steady queue of spread arrivals (a fixed point on the closed loop's throughput) and the decode step in
progress. Concurrency 1 reduces to the unloaded latency (`RooflinePrefill.latency_s`) and the bare step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..profiles import ModelProfile, StackProfile, get_model, get_stack
from .base import Instance, parse_instance
from .constants import ChipConstants, chip_constants
from .closed_queue import closed_queue
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


@dataclass(frozen=True)
class Serving:
    """Mean ``ttft_s`` and ``tpot_s`` (seconds) at ``concurrency``, and the bare decode step ``step_s``."""

    concurrency: int
    ttft_s: float
    tpot_s: float
    step_s: float


def serving_over_lengths(model: ModelProfile | str, instance: Instance | str, isl, osl: int, concurrency: int,
                         moe: str = "tp", constants: ChipConstants | None = None,
                         stack: StackProfile | str | None = None,
                         client_s: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean TTFT, TPOT and the bare decode step (seconds, arrays shaped like ``isl``) of ``concurrency``
    closed-loop clients sending prompts of each length in ``isl`` for ``osl`` output tokens: the same model
    as `serving_at_concurrency`, evaluated over every length in a few array operations. ``client_s``: time a
    benchmark harness adds to each recorded TTFT (`StackProfile.client_s`; 0 for the server's own TTFT)."""
    model, instance, stack = get_model(model), parse_instance(instance), get_stack(stack)
    constants = constants or chip_constants(instance.chip)
    par = Parallel(instance.chips, moe)
    overhead = forward_overhead_s(stack, model, par)
    l = np.asarray(isl, dtype=float)
    busy_req, busy_q, busy_ctx, busy_chunks = prefill_shape(l, stack, batched=True)
    _, q, context, chunks = prefill_shape(l, stack, batched=False)
    budget_fit = np.maximum(1.0, np.floor(float(stack.prefill_token_budget) / np.maximum(l, 1.0)))
    per_forward = np.where(chunks == 1, np.minimum(budget_fit, float(concurrency)), 1.0)

    def forwards_s(requests, tokens, ctx, n) -> np.ndarray:
        works = pass_work(model, par, requests, tokens, ctx, "prefill")
        return (pass_seconds(works, instance.chip, constants.calibration) + overhead) * n

    step = np.asarray(decode_step_s(model, instance, float(concurrency), l + osl / 2, moe, constants, stack),
                      dtype=float) * np.ones_like(l)
    ttft, tpot = closed_queue(stack.latency_s + client_s, forwards_s(1.0, q, context, chunks),
                              forwards_s(per_forward, q, context, chunks), per_forward,
                              forwards_s(busy_req, busy_q, busy_ctx, busy_chunks) / busy_req, busy_chunks / busy_req,
                              step, chunks, float(concurrency), float(osl), stack.wave_fraction,
                              stack.request_overhead_s)
    return np.asarray(ttft, dtype=float), np.asarray(tpot, dtype=float), step


def serving_at_concurrency(model: ModelProfile | str, instance: Instance | str, isl: int, osl: int,
                           concurrency: int, moe: str = "tp", constants: ChipConstants | None = None,
                           stack: StackProfile | str | None = None, client_s: float = 0.0) -> Serving:
    """Mean TTFT and TPOT of ``concurrency`` closed-loop clients sending ``isl``-token prompts for ``osl``
    output tokens (see the module docstring; ``client_s`` as in `serving_over_lengths`)."""
    ttft, tpot, step = serving_over_lengths(model, instance, float(isl), osl, concurrency, moe, constants, stack,
                                            client_s)
    return Serving(concurrency, float(ttft), float(tpot), float(step))
