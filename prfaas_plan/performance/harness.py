"""Benchmark harnesses: the client time a benchmark adds to the TTFT it records (docs/methods.md, "Benchmark
harness").

A benchmark client adds time the server never sees: the HTTP round trip, its own tokenization, and parsing the
streamed chunks of its other in-flight requests in one event loop. Recorded TTFT = server TTFT + ``latency_s`` +
``stream_s`` x (C - 1). A harness is named by the prefix of its rows' ``source``; `calibrate` fits its two
terms per campaign -- the harness's runs of one stack on one system, ``HARNESS@chip`` (each engine's runs use
that engine's own benchmark client, on that system's host) -- and writes them into the stack profile's
``harness:`` section. Per system because the client's cost is the host's: on NVIDIA's silicon sample the
8xH200 SGLang runs with 8K output tokens keep a flat TTFT from 4 to 64 clients (DeepSeek-V3 259 -> 420 ms,
Qwen3.5 309 -> 320 ms) while the 8xB200 SGLang runs of the same models and lengths climb (185 -> 637 ms).
Plans (Phi_kv, throughput, TTFT) use the server's time only; `check` and the calibration reports add the
harness's time to predict what the harness recorded.
"""

from __future__ import annotations

HARNESSES = {"aiconfigurator": "NVIDIA aiconfigurator"}   # harness -> prefix of its rows' `source`


def harness_name(source: str) -> str:
    """The benchmark harness (a `HARNESSES` key) that recorded a row of ``source``, or "" (none modelled)."""
    return next((h for h, prefix in HARNESSES.items() if source.startswith(prefix)), "")


def campaign(source: str, chip: str) -> str:
    """The harness campaign (``HARNESS@chip``) that recorded a row of ``source`` on ``chip``, or "" (no harness
    modelled)."""
    name = harness_name(source)
    return f"{name}@{chip}" if name else ""


def recorded_client_s(measurement) -> float:
    """Seconds the harness that recorded ``measurement`` adds to its TTFT, from its run stack's profile (0
    when no harness is modelled or the profile has no entry for its campaign)."""
    from ..profiles import get_stack

    return get_stack(measurement.run_stack).client_s(campaign(measurement.source, measurement.chip),
                                                     measurement.concurrency)
