"""The closed-loop benchmark as a closed queue: mean TTFT and TPOT of ``C`` clients that each send their next
request when the last one finishes (docs/methods.md, "Serving at a fixed concurrency").

One instance serves the ``C`` requests; its GPU alternates between prefill forwards (prompts waiting are
prefilled first, ``k`` prompts of ``isl`` tokens per forward up to the stack's token budget, longer prompts in
chunks of it) and decode steps of the running batch. Three effects make TTFT at ``C`` exceed the unloaded
latency, each from the scheduling, not from a per-request constant:

1. **Clumps (the benchmark's waves).** Requests that finish together come back together: a request arrives
   with ``W - 1 = s (C - 1)`` others (``s`` = the stack's ``wave_fraction``, fitted). Its own forward holds
   ``min(W, k)`` prompts (the forward's time interpolated linearly between 1 and ``k`` prompts);
   ``max(0, W - k) / 2`` prompts of its clump are prefilled before it, at the busy time of a prompt, with one
   decode step between consecutive prefill forwards; and ``(W - 1) / 2`` admissions go before it at the
   stack's ``request_overhead_s``.
2. **The steady queue.** Between clumps, arrivals are spread: the prefill station is a single server with
   deterministic service ``b`` (the busy time of a prompt) offered ``rho = X b`` of the GPU's time, where ``X
   = C / (TTFT + (osl - 1) TPOT)`` is the closed loop's throughput. A spread arrival waits the
   Pollaczek-Khinchine mean ``rho b / (2 (1 - rho))``. ``X`` depends on TTFT, so this is a fixed point, solved by
   `ITERATIONS` substitutions (the clump terms already hold the waiting behind co-arriving prompts, so
   only the spread arrivals' wait is added).
3. **The operation in progress.** A request that arrives during a decode step (probability ``1 - rho``,
   ``rho = X b`` the prefill share of GPU time) waits half a step before its prefill can start.

TPOT is the decode step of batch ``C`` plus the other requests' prefills that fall inside this request's
decode phase (``C - 1 - (W - 1) / 2`` per cycle, spread over its ``osl - 1`` steps): flow balance, the same
GPU seconds the throughput pays.

At ``C = 1`` every waiting term is zero: TTFT is the unloaded latency (`RooflinePrefill.latency_s`) and TPOT
the bare step, which is what Phi_kv and the planner use. Every argument may be an array (the calibration
evaluates all measured points at once); ``iterations`` numpy passes, no Python loop over points.

``sharpness`` (the calibration's continuation only, docs/methods.md, "A smooth objective"): None (the default,
the planner's and every prediction's path) is the model above exactly; a number ``p`` replaces its three
parameter-dependent branches (``min(W, k)``, ``max(0, W - k)``, ``min(rho, MAX_PREFILL_SHARE)``) by the p-norm
`smooth_max`, so the calibration's objective has no kink while it solves its first stages.
"""

from __future__ import annotations

import numpy as np

ITERATIONS = 8        # substitutions of the steady-queue fixed point (converged to < 0.1% on the bundled rows)
MAX_PREFILL_SHARE = 0.95  # rho is held below 1: a closed loop never offers more work than the GPU serves


def smooth_max(a, b, p: float):
    """p-norm ``(a^p + b^p)^(1/p)`` of non-negative ``a``, ``b``: a smooth upper bound of ``max(a, b)``, at most
    ``2^(1/p)`` times it (where ``a = b``), exact as ``p`` grows (docs/methods.md, "A smooth objective")."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    top, low = np.maximum(a, b), np.minimum(a, b)
    ratio = np.divide(low, top, out=np.zeros_like(top), where=top > 0.0)
    return top * (1.0 + ratio ** p) ** (1.0 / p)


def closed_queue(latency, alone, full, per_forward, busy, forwards_per_prompt, step, chunks, concurrency, osl,
                 wave_fraction, request_overhead, iterations: int = ITERATIONS,
                 sharpness: float | None = None) -> tuple:
    """Mean TTFT and TPOT (seconds) of the closed-loop benchmark (see the module docstring) from the times of
    its parts: ``latency`` = the stack's fixed latency (not GPU-busy); ``alone`` / ``full`` = the forward(s)
    holding the request's prompt with 1 or ``per_forward`` prompts; ``busy`` = busy seconds per prompt of a
    kept-full forward, ``forwards_per_prompt`` of them per prompt; ``step`` = the decode step of the running
    batch; ``chunks`` = forwards of one prompt alone; ``wave_fraction`` = ``s``; ``request_overhead`` =
    admission seconds per co-arriving request."""
    C = np.asarray(concurrency, dtype=float)
    multi = C > 1.0
    clump = 1.0 + np.asarray(wave_fraction, dtype=float) * (C - 1.0)
    if sharpness is None:
        together = np.minimum(clump, per_forward)
        ahead = np.maximum(0.0, clump - per_forward) / 2.0
    else:   # min(W, k) = W + k - max(W, k), max(0, W - k) = max(W, k) - k, both through one smooth max
        top = smooth_max(clump, per_forward, sharpness)
        together = clump + per_forward - top
        ahead = (top - per_forward) / 2.0
    span = np.maximum(np.asarray(per_forward, dtype=float) - 1.0, 1.0)
    own = alone + (full - alone) * (together - 1.0) / span
    gaps = ahead * forwards_per_prompt + np.where(multi, np.asarray(chunks, dtype=float) - 1.0, 0.0)
    waves = latency + own + ahead * busy + gaps * step + request_overhead * (clump - 1.0) / 2.0
    inside = (C - 1.0 - (clump - 1.0) / 2.0) / np.maximum(np.asarray(osl, dtype=float) - 1.0, 1.0)
    tpot = step + inside * busy
    cycle_decode = np.maximum(np.asarray(osl, dtype=float) - 1.0, 1.0) * tpot
    ttft = waves
    for _ in range(iterations):
        throughput = C / (ttft + cycle_decode)
        offered = throughput * busy
        rho = (np.minimum(offered, MAX_PREFILL_SHARE) if sharpness is None else   # smooth min(a, b) = ab / max(a, b)
               offered * MAX_PREFILL_SHARE / smooth_max(offered, MAX_PREFILL_SHARE, sharpness))
        queued = np.where(multi, rho * busy / (2.0 * (1.0 - rho)) + (1.0 - rho) * step / 2.0, 0.0)
        ttft = waves + queued
    return ttft, tpot
