"""The simulated system: a single-PD-site layout with its performance inputs, checked and reduced to the
numbers both engines use (counts, rates in bytes/s, times in seconds), plus vectorized service times."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import arithmetic as A
from ..analytic.latency import rdma_tail_s
from ..analytic.throughput import PerfInputs, busy_s, offloads
from ..errors import PlanError
from ..layout import Layout
from ..workload.prefix_cache import PrefixCache

INF = math.inf
DEFAULT_CHUNK_TOKENS = 8192
"""Chunked-prefill budget, tokens a forward, of a local prefill model without a stack (the paper's tables):
SGLang's default ``chunked_prefill_size`` on 80-160 GB GPUs, as the bundled stack profiles assume."""
NODE_CHIPS = 8
"""Chips of the node whose host DRAM `SimConfig.cache_bytes_per_instance` describes (a DGX H200's 8 GPUs)."""
CACHE_LOW_WATERMARK = 0.9
"""A full pool evicts down to this share of its capacity (in batches, as engines free memory)."""


def _exposed_s(prefill, u: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """Seconds of a request's prefill latency that occupy no instance (``latency_s - busy``, >= 0): the
    stack's fixed latency, and the share of forwards a full instance would batch with other prompts."""
    return np.maximum(np.asarray(prefill.latency_s(u), dtype=float) - busy, 0.0)


@dataclass(frozen=True)
class System:
    """What the engines need of ``layout`` + ``perf``. ``threshold`` is the effective routing threshold:
    ``inf`` when nothing can go remote, ``-1`` when nothing can stay local."""

    layout: Layout
    perf: PerfInputs
    remote_ok: bool
    n_remote: int
    n_prefill: int
    n_decode: int
    slots: int                 # decode slots per decode instance (floor of the batch limit)
    step_s: float              # decode step, seconds per output token
    link_bps: float            # nominal line rate, bit/s (0 without a link)
    efficiency: float          # goodput / line rate
    rtt_half_s: float          # half the link's round-trip time, seconds (0 without a link)
    keep: float                # share of a remote flow producible before its prefill ends
    threshold: float           # uncached tokens
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS  # tokens a local prefill forward takes (chunked prefill)

    @classmethod
    def build(cls, layout: Layout, perf: PerfInputs, threshold: float) -> "System":
        """Check the layout (one PD site, a decode instance, some prefill) and reduce it."""
        if len(layout.pd_sites) != 1:
            raise PlanError(f"layout {layout.name!r}: the simulator handles one local PD site, got "
                            f"{len(layout.pd_sites)}")
        site = layout.pd_sites[0]
        if site.name not in perf.sites:
            raise PlanError(f"layout {layout.name!r}: no performance inputs for site {site.name!r}")
        sp = perf.sites[site.name]
        if site.decode < 1:
            raise PlanError(f"layout {layout.name!r}: site {site.name!r} has no decode instance")
        if int(sp.decode.batch) < 1:
            raise PlanError(f"layout {layout.name!r}: decode batch limit {sp.decode.batch:g} is below one request")
        remote_ok = offloads(layout, perf, site)
        if site.prefill == 0 and not remote_ok:
            raise PlanError(f"layout {layout.name!r}: no prefill instance anywhere")
        thr = float(threshold) if remote_ok else INF
        if site.prefill == 0:
            thr = -1.0
        layers = perf.model.num_layers
        stack = getattr(sp.prefill, "stack", None)
        chunk = int(getattr(stack, "prefill_token_budget", 0) or DEFAULT_CHUNK_TOKENS)
        return cls(layout, perf, remote_ok, layout.remote.instances if remote_ok else 0, site.prefill,
                   site.decode, int(sp.decode.batch), sp.decode.step_s,
                   site.link.bandwidth_bps if remote_ok else 0.0, site.link.efficiency if remote_ok else 1.0,
                   site.link.rtt_s / 2 if remote_ok else 0.0, (layers - 1) / layers, thr, chunk)

    @property
    def goodput_Bps(self) -> float:
        """Nominal link goodput, bytes/s."""
        return self.link_bps * self.efficiency / 8.0

    def kv_bytes(self, tokens) -> np.ndarray:
        """Bytes a KV transfer moves for ``tokens`` (whole tokens, at least 1 counted; the site's transfer
        policy, `PerfInputs.transfer_bytes`), as a float array."""
        u = np.maximum(np.asarray(tokens, dtype=float), 1.0)
        return self.perf.transfer_bytes(np.floor(u), self.layout.pd_sites[0].name)

    def service(self, uncached) -> dict[str, np.ndarray]:
        """Per uncached length (tokens, >= 1), as float arrays: ``local_s`` / ``remote_s``, the seconds a
        request occupies a prefill instance (its busy time, `busy_s`: what throughput divides by);
        ``skv_bytes``; ``tail_s``, the seconds after a local prefill frees its instance until the cache is
        at decode (the exposed intra-cluster transfer plus the latency that occupies no instance, the
        stack's fixed latency: `latency_s` - `busy_s`); ``remote_exposed_s``, that latency of a remote
        prefill, added once its KV has crossed. TTFT = wait + latency_s (+ transfer), docs/methods.md."""
        u = np.maximum(np.asarray(uncached, dtype=float), 1.0)
        site = self.layout.pd_sites[0]
        skv = self.kv_bytes(u)
        local = self.perf.sites[site.name].prefill
        local_busy = busy_s(local, u)
        remote_busy = remote_exposed = np.full(u.shape, INF)
        if self.remote_ok:
            remote_busy = busy_s(self.perf.remote_prefill, u)
            remote_exposed = _exposed_s(self.perf.remote_prefill, u, remote_busy)
        return {
            "local_s": local_busy,
            "remote_s": remote_busy,
            "skv_bytes": skv,
            "tail_s": rdma_tail_s(skv, site.instance, self.perf.model.num_layers) + _exposed_s(local, u, local_busy),
            "remote_exposed_s": remote_exposed,
        }

    def spill_chunk(self, tokens: int) -> int:
        """The forward size (tokens) a spilled run prefills in when the policy asks for ``tokens`` (0: the
        engine's ``chunk_tokens``): at most the engine's budget, and the engine's budget itself when the local
        prefill model has no chunked stack profile whose budget can be changed (nothing prices the extra
        forwards of smaller chunks then)."""
        stack = getattr(self.perf.sites[self.layout.pd_sites[0].name].prefill, "stack", None)
        if tokens <= 0 or not getattr(stack, "chunked_prefill", False) or tokens >= self.chunk_tokens:
            return self.chunk_tokens
        return int(tokens)

    def spill_busy_s(self, uncached, chunk_tokens: int) -> np.ndarray:
        """Seconds a request of ``uncached`` tokens (array) occupies a local prefill instance when prefilled in
        forwards of ``chunk_tokens`` (`spill_chunk`): the local model with that token budget, so each extra
        forward pays its operators at the smaller size and the stack's per-forward overhead; the engine's own
        busy time at its own budget."""
        u = np.maximum(np.asarray(uncached, dtype=float), 1.0)
        local = self.perf.sites[self.layout.pd_sites[0].name].prefill
        if chunk_tokens != self.chunk_tokens:
            stack = dataclasses.replace(local.stack, prefill_token_budget=chunk_tokens)
            local = dataclasses.replace(local, stack=stack)
        return busy_s(local, u)

    def caches(self, bytes_per_instance: float, block_tokens: int,
               compiled: bool = True) -> tuple[PrefixCache, PrefixCache]:
        """Empty prefix caches of the PD cluster and the remote cluster, each ``bytes_per_instance`` x its
        instances x their chips / `NODE_CHIPS` (host DRAM is per node: an instance shape of fewer chips per
        instance has more instances, not more DRAM); ``compiled``: numba pools, else their plain-Python twin
        (`PrefixCache`)."""
        model = self.perf.model
        local = self.layout.pd_sites[0].instance.chips / NODE_CHIPS
        remote = (self.layout.remote.instance.chips if self.n_remote else NODE_CHIPS) / NODE_CHIPS
        block = block_tokens * A.kv_bytes_per_token(model)
        ckpt = 0
        if model.cached_as("recurrent") or model.cached_as("window"):
            ckpt = max(A.fixed_state_bytes(model) + int(A.swa_bytes(model, block_tokens)), 1)
        pd = PrefixCache(bytes_per_instance * (self.n_prefill + self.n_decode) * local, block, ckpt, block_tokens,
                         CACHE_LOW_WATERMARK, compiled)
        rf = PrefixCache(bytes_per_instance * max(self.n_remote, 1) * remote, block, ckpt, block_tokens,
                         CACHE_LOW_WATERMARK, compiled)
        return pd, rf
