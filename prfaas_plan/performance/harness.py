"""Benchmark harnesses: the client time a benchmark adds to the TTFT it records (docs/methods.md, "Benchmark
harness").

A benchmark client adds time the server never sees: the HTTP round trip, its own tokenization, and parsing the
streamed chunks of its other in-flight requests in one event loop. Recorded TTFT = server TTFT + ``latency_s`` +
``stream_s`` x (C - 1). A harness is named by the prefix of its rows' ``source``; `calibrate` fits its two
terms per stack it drove (each engine's runs use that engine's own benchmark client) and writes them into the
stack profile's ``harness:`` section. Plans (Phi_kv, throughput, TTFT) use the server's time only; `check` and
the calibration reports add the harness's time to predict what the harness recorded.
"""

from __future__ import annotations

HARNESSES = {"aiconfigurator": "NVIDIA aiconfigurator"}   # harness -> prefix of its rows' `source`


def harness_name(source: str) -> str:
    """The benchmark harness (a `HARNESSES` key) that recorded a row of ``source``, or "" (none modelled)."""
    return next((h for h, prefix in HARNESSES.items() if source.startswith(prefix)), "")


def recorded_client_s(measurement) -> float:
    """Seconds the harness that recorded ``measurement`` adds to its TTFT, from its run stack's profile (0
    when no harness is modelled or the profile has no entry for it)."""
    from ..profiles import get_stack

    return get_stack(measurement.run_stack).client_s(harness_name(measurement.source), measurement.concurrency)
