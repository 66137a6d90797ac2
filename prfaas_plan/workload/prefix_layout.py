"""Slots of a prefix-cache pool's ``meta`` (int64) and ``sizes`` (float64) arrays, shared by the compiled
kernels (`prefix_kernels`) and their plain-Python twin (`prefix_python`) without importing numba."""

# meta slots: entries, checkpoints, list ends, log2 table size, counters, recency flag, tokens per block
N, CK, HEAD, TAIL, BITS, EVICTED, PROMPT, HIT, RECENCY, BLOCK_TOKENS = range(10)
META_SIZE = 10
# sizes slots: bytes per block, bytes per checkpoint, capacity (bytes, may be inf), low watermark (fraction)
BB, CB, CAP, LOW = range(4)
