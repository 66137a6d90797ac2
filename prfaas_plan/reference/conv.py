"""Short causal depthwise convolution (KDA, Gated DeltaNet) with its conv state.

Each channel c of the input stream x (tokens, channels) is convolved with its own kernel w[c] of
``conv_kernel`` K taps over the current and the K - 1 previous inputs, then passed through SiLU. The
conv state is the last K - 1 *inputs* (positions, channels), zeros before the first token, so that
decode and chunked prefill can continue exactly where the last call stopped. FLOPs: K multiply-adds per
channel and token (zero-padded taps included, as a kernel computes them), tag ``conv``.
"""

from __future__ import annotations

import numpy as np

from .numerics import Flops, silu


def short_conv(x: np.ndarray, conv_state: np.ndarray, w: np.ndarray, fl: Flops | None):
    """x (n, channels), conv_state (K - 1, channels), w (channels, K) -> (silu(conv) (n, channels),
    new conv state (K - 1, channels))."""
    n, taps = len(x), w.shape[1]
    seq = np.concatenate([conv_state, x])                      # (K - 1 + n, channels)
    y = sum(w[:, j] * seq[j:j + n] for j in range(taps))
    if fl is not None:
        fl.add("conv", 2 * y.size * taps)
    return silu(y), seq[len(seq) - (taps - 1):].copy()
