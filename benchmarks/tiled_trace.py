"""Write the bundled Mooncake conversation trace tiled to a given number of requests.

Tile ``j`` is the bundled trace (12,031 requests over 59 min) shifted by ``j`` times its span plus one mean
gap, with every hash id offset by ``j`` times (largest id + 1): each tile is a new population of
conversations (its prompts share no prefix with earlier tiles, except what the trace itself shares), so
the prefix caches keep filling and must evict, as in a long production trace. The arrival rate stays the
trace's own (3.4 requests/s).

Run: ``python3 benchmarks/tiled_trace.py N OUT.jsonl [--no-hashes]`` (``--no-hashes``: every ``hash_ids`` empty,
so a replay runs without prefix caches).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prfaas_plan.workload import BUNDLED_TRACE


def write_tiled(n: int, out: Path, hashes: bool = True) -> Path:
    """Write the first ``n`` requests of the tiled bundled trace to ``out`` (JSONL) and return it; without
    ``hashes``, with every ``hash_ids`` list empty."""
    rows = [json.loads(line) for line in BUNDLED_TRACE.read_text().splitlines() if line.strip()]
    span_ms = rows[-1]["timestamp"] - rows[0]["timestamp"]
    shift_ms = span_ms + round(span_ms / (len(rows) - 1))
    id_step = 1 + max(max(r["hash_ids"], default=0) for r in rows)
    written = 0
    with out.open("w") as fh:
        tile = 0
        while written < n:
            for r in rows[: n - written]:
                fh.write(json.dumps({"timestamp": r["timestamp"] + tile * shift_ms,
                                     "input_length": r["input_length"], "output_length": r["output_length"],
                                     "hash_ids": [h + tile * id_step for h in r["hash_ids"]] if hashes else []})
                         + "\n")
            written += min(len(rows), n - written)
            tile += 1
    return out


if __name__ == "__main__":
    write_tiled(int(sys.argv[1]), Path(sys.argv[2]), "--no-hashes" not in sys.argv[3:])
