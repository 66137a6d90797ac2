"""Sliding-window attention (SWA) with a window-capped cache.

Same projections as GQA (`prfaas_plan.reference.gqa.GQA`); the query at position p attends to keys
``max(0, p - window + 1) .. p`` (``window`` keys including itself, as `window_pairs` in
`prfaas_plan.profiles.kinds` counts). The cache keeps the K and V of the last ``min(length, window)``
tokens: the new token's K/V are appended, then the oldest dropped. (Decoding the next token needs only
``window - 1`` of them; engines keep ``window`` slots, and so does the planner.) FLOPs as GQA.
"""

from __future__ import annotations

from .cache import RequestCache
from .gqa import GQA
from .softmax_attention import windowed_rows


class SWA(GQA):
    """One sliding-window layer."""

    def prefill(self, x, start, cache: RequestCache, layer, fl, **_):
        q, k, v = self.project(x, start, fl)
        kv, first = cache.window_extend(layer, start, {"k": k, "v": v})
        return self.output(x, windowed_rows(q, kv["k"], kv["v"], start, first, self.g.window, self.scale, fl), fl)

    def decode(self, x, pos, cache: RequestCache, layer, fl):
        return self.prefill(x[None], pos, cache, layer, fl)[0]
