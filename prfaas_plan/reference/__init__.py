"""A small, readable numpy reference implementation of the hybrid attention core.

It is the ground truth the planner's byte and FLOP formulas (`prfaas_plan.arithmetic`) are checked
against, not a fast engine: float64 arithmetic, clear code, tiny dimensions.

Modules
-------
- `numerics`: FLOP counter (2 FLOPs per multiply-add), storage codecs of the profile dtypes (fp32, real
  bf16 bit patterns, fp16, fp8 e4m3; fp64 for exact checks), small functions.
- `softmax_attention`: causal tiles with a log-sum-exp merge (prefill) and one-query attention (decode).
- `gqa`, `swa`, `mla`: full attention over paged KV blocks, sliding window with a window-capped cache,
  latent attention caching c_kv and the rope key (naive prefill, absorbed decode).
- `linear_core`, `conv`, `kda`, `gdn`, `lightning`, `mamba2`: the recurrent core in recurrent and
  chunked form, the short convolution with its state, the three linear-attention kinds and the Mamba2
  state-space mixer.
- `cache`: block pool, request cache, byte accounting measured on the stored arrays.
- `transfer`: serialize / deserialize a request's cache (full or incremental after a cached prefix).
- `prefix`: block-level prefix sharing plus request-level state checkpoints.
- `model`: scaling a `ModelProfile` down (pattern and kinds kept) and the tiny stack that runs it.
- `checks`: the checks run by ``prfaas-plan validate`` and the tests.
"""

from .checks import ModelValidation, validate_model
from .model import TinyModel, scale_profile

__all__ = ["ModelValidation", "TinyModel", "scale_profile", "validate_model"]
