"""The checks of `prfaas-plan validate`: the reference implementation against `prfaas_plan.arithmetic`.

For a model profile, `validate_model` builds the scaled profile (`scale_profile`) and a random-weight
`TinyModel` of it, runs requests through it and compares what it measures with the analytical functions
evaluated on the scaled profile:

- params: weight elements of each attention kind's layer and of the FFN, counted on the arrays;
- bytes: at several lengths (tokens; below and above the SWA window, not multiples of the block size),
  the live cache measured on the stored arrays and the serialized transfer payload (tensor data bytes,
  framing excluded) equal ``kv_bytes_per_token``, ``swa_bytes``, ``fixed_state_bytes`` and ``s_kv``,
  to the byte;
- flops: counted FLOPs of a prefill equal ``prefill_flops(...)`` exactly in the recurrent form of the
  linear-attention cores; the chunked form is checked against the bound of
  `prfaas_plan.reference.linear_core.chunk_bound`; a prefill after a cached prefix is checked against
  ``prefill_flops(model, l_new, cached)``;
- equivalence (float64 storage, relative tolerance ``TOL``): chunked prefill = recurrent prefill =
  token-by-token decode; prefill on site A, serialize, transfer, deserialize, decode on site B = one
  uninterrupted run; continuing from a shared block-aligned prefix and its state checkpoint = recomputing
  from scratch;
- transfer at the profile dtypes: the payload is ``s_kv(l)`` (or ``s_kv(l_new, cached)`` for an
  incremental one) bytes, and decoding from the received cache is bit-identical to decoding on site A.

Every row carries its numbers, unit and result (``ok``, ``FAIL`` or ``info``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import arithmetic as A
from ..profiles import ModelProfile
from .cache import RequestCache
from .linear_core import chunk_bound
from .model import TinyModel, scale_profile
from .numerics import Flops
from .prefix import PrefixCache
from .transfer import data_bytes, deserialize, serialize

TOL = 1e-9                                   # relative tolerance of float64 equivalence checks
BYTE_LENGTHS = (1, 17, 100, 127, 128, 129, 200, 300)   # tokens
FLOP_LENGTHS = (77, 200)
EQUIV_LEN, DECODE_STEPS, DECODE_CHECK_LEN = 150, 8, 100
PREFIX_LEN, PREFIX_TOTAL = 112, 190          # shared block-aligned prefix, prompt length (tokens)


@dataclass
class ModelValidation:
    """All check rows of one model, and the scaled profile they ran on."""

    model: str
    scaled: ModelProfile
    rows: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r["result"] != "FAIL" for r in self.rows)

    def add(self, check, case, reference, analytical, unit, ok=None, tolerance=None, detail=""):
        result = "info" if ok is None else ("ok" if ok else "FAIL")
        self.rows.append({"model": self.model, "check": check, "case": case, "reference": _plain(reference),
                          "analytical": _plain(analytical), "unit": unit, "tolerance": _plain(tolerance),
                          "result": result, "detail": detail})


def _plain(x):
    """numpy scalars as Python numbers (the analytical functions may return np.int64 for scalars)."""
    return x.item() if isinstance(x, np.generic) else x


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """Max absolute difference over the max magnitude (0 when both are zero)."""
    a, b = np.asarray(a), np.asarray(b)
    scale = max(np.abs(a).max(), np.abs(b).max())
    return float(np.abs(a - b).max() / scale) if scale else 0.0


def _states(cache: RequestCache) -> list[np.ndarray]:
    return [cache.codecs.for_state(n).decode(a) for l in sorted(cache.states) for n, a in sorted(cache.states[l].items())]


def _max_rel(xs, ys) -> float:
    return max([_rel(x, y) for x, y in zip(xs, ys)] or [0.0])


def check_params(v: ModelValidation, tm: TinyModel) -> None:
    s = v.scaled
    for g in s.attention:
        v.add("params", f"{g.kind} layer attention weights", tm.attention_params(g), A.attention_params(s, g),
              "elements", tm.attention_params(g) == A.attention_params(s, g), 0)
    ffn = A.param_counts(s).dense_ffn
    v.add("params", "dense FFN weights (all layers)", tm.ffn_params, ffn, "elements", tm.ffn_params == ffn, 0)


def check_bytes(v: ModelValidation, tm: TinyModel, tokens: np.ndarray) -> None:
    s = v.scaled
    cache = tm.new_cache(tm.new_pool())
    per_token, fixed = A.kv_bytes_per_token(s), A.fixed_state_bytes(s)
    for l in BYTE_LENGTHS:
        tm.prefill(tokens[cache.length:l], cache)          # one request, prefilled in segments
        live = cache.live_bytes()
        sent = data_bytes(serialize(cache))
        s_kv = A.s_kv(s, l)
        parts = {"growing": (live["growing"], per_token * l), "window": (live["window"], A.swa_bytes(s, l)),
                 "state": (live["recurrent"], A.recurrent_state_bytes(s)),
                 "conv": (live["conv"], A.conv_state_bytes(s))}
        wrong = [f"{k} {m:,} vs analytical {a:,}" for k, (m, a) in parts.items() if m != a]
        parts_ok = not wrong and live["recurrent"] + live["conv"] == fixed
        detail = ("live " + " + ".join(f"{k} {m:,}" for k, (m, _) in parts.items() if m or k == "growing")
                  + f"; allocated {live['allocated']:,} ({len(cache.block_table)} blocks); framing {sent['framing']:,}"
                  + ("; MISMATCH " + ", ".join(wrong) if wrong else ""))
        v.add("bytes", f"S_kv({l}) payload = live", sent["total"], s_kv, "B",
              sent["total"] == s_kv and live["total"] == s_kv and parts_ok, 0, detail)


def check_flops(v: ModelValidation, tm: TinyModel, tokens: np.ndarray) -> None:
    s = v.scaled
    for l in FLOP_LENGTHS:
        fl = Flops()
        tm.prefill(tokens[:l], tm.new_cache(tm.new_pool()), fl, form="recurrent")
        f = A.prefill_flops(s, l)
        v.add("flops", f"prefill {l}: attention core (recurrent form)", fl["core"], f.attention_core, "FLOP",
              fl["core"] == f.attention_core, 0)
        dense = fl.total("proj", "conv", "ffn")
        v.add("flops", f"prefill {l}: projections, conv, FFN", dense, f.dense_matmul, "FLOP",
              dense == f.dense_matmul, 0, f"conv {fl['conv']:,} of it")
        v.add("flops", f"prefill {l}: lm_head (last token)", fl["lm_head"], f.lm_head, "FLOP",
              fl["lm_head"] == f.lm_head, 0)
    l = FLOP_LENGTHS[-1]
    fl = Flops()
    tm.prefill(tokens[:l], tm.new_cache(tm.new_pool()), fl, form="chunked")
    core = A.prefill_flops(s, l).attention_core
    lo = hi = 0
    for g in s.cached_as("recurrent"):
        heads, dk, dv = g.rule.linear_dims(g)
        b = chunk_bound(l, heads, dk, dv, tm.chunk)
        lo, hi = lo + g.count * b[0], hi + g.count * b[1]
    v.add("flops", f"prefill {l}: attention core (chunked form, chunk {tm.chunk})", fl["core"], core, "FLOP",
          core + lo <= fl["core"] <= core + hi, f"[{lo:+,}, {hi:+,}]",
          f"chunked / recurrent = {fl['core'] / core:.3f}" if core else "")
    # prefill after a cached prefix
    cache = tm.new_cache(tm.new_pool())
    tm.prefill(tokens[:PREFIX_LEN], cache)
    fl = Flops()
    l_new = PREFIX_TOTAL - PREFIX_LEN
    tm.prefill(tokens[PREFIX_LEN:PREFIX_TOTAL], cache, fl, form="recurrent")
    f = A.prefill_flops(s, l_new, cached=PREFIX_LEN)
    v.add("flops", f"prefill {l_new} after {PREFIX_LEN} cached: attention core", fl["core"], f.attention_core,
          "FLOP", fl["core"] == f.attention_core, 0)
    dense = fl.total("proj", "conv", "ffn")
    extra = fl["context_decompress"]
    v.add("flops", f"prefill {l_new} after {PREFIX_LEN} cached: projections, conv, FFN", dense, f.dense_matmul,
          "FLOP", dense == f.dense_matmul, 0,
          f"plus {extra:,} decompressing the cached MLA latents (naive-form prefill; not in the analytical "
          f"count)" if extra else "")


def check_equivalence(v: ModelValidation, tm: TinyModel, tokens: np.ndarray) -> None:
    pool = tm.new_pool(exact=True)
    l, n = EQUIV_LEN, DECODE_STEPS
    # chunked prefill = recurrent prefill
    a, b = tm.new_cache(pool), tm.new_cache(pool)
    ra, rb = tm.prefill(tokens[:l], a, form="chunked"), tm.prefill(tokens[:l], b, form="recurrent")
    d = _max_rel([ra.hidden, ra.logits] + _states(a), [rb.hidden, rb.logits] + _states(b))
    v.add("equivalence", f"chunked = recurrent prefill ({l} tokens; outputs, states)", d, None, "rel", d <= TOL, TOL)
    # prefill = token-by-token decode from an empty cache
    m = DECODE_CHECK_LEN
    c = tm.new_cache(pool)
    rc = tm.decode(tokens[:m], c)
    rp = tm.prefill(tokens[:m], tm.new_cache(pool))
    d = _max_rel([rp.hidden, rp.logits], [rc.hidden, rc.logits])
    v.add("equivalence", f"prefill = token-by-token decode ({m} tokens)", d, None, "rel", d <= TOL, TOL)
    # site A prefill -> serialize -> site B decode = one uninterrupted run
    blob = serialize(a)
    pool_b = tm.new_pool(exact=True)
    at_b = deserialize(blob, tm.layout, pool_b, a.codecs)
    rb = tm.decode(tokens[l:l + n], at_b)
    whole = tm.prefill(tokens[:l + n], tm.new_cache(pool))
    d = _max_rel([whole.hidden[l:], whole.logits], [rb.hidden, rb.logits])
    v.add("equivalence", f"prefill {l} on A, transfer, decode {n} on B = one run", d, None, "rel", d <= TOL, TOL,
          "float64 storage")


def check_transfer(v: ModelValidation, tm: TinyModel, tokens: np.ndarray) -> None:
    s = v.scaled
    l, n = EQUIV_LEN, DECODE_STEPS
    pool_a, pool_b = tm.new_pool(), tm.new_pool()
    a = tm.new_cache(pool_a)
    tm.prefill(tokens[:l], a)
    blob = serialize(a)
    sent = data_bytes(blob)
    b = deserialize(blob, tm.layout, pool_b, a.codecs)
    ra, rb = tm.decode(tokens[l:l + n], a), tm.decode(tokens[l:l + n], b)
    diff = float(max(np.abs(ra.hidden - rb.hidden).max(), np.abs(ra.logits - rb.logits).max()))
    v.add("transfer", f"prefill {l} on A, ship, decode {n} on B: bytes moved", sent["total"], A.s_kv(s, l), "B",
          sent["total"] == A.s_kv(s, l), 0, f"framing {sent['framing']:,} B on top")
    v.add("transfer", f"decode on B = decode on A (profile dtypes {s.kv_dtype}/{s.state_dtype}/{s.conv_dtype})",
          diff, None, "abs", diff == 0.0, 0)
    exact = tm.new_cache(tm.new_pool(exact=True))
    tm.prefill(tokens[:l], exact)
    re = tm.decode(tokens[l:l + n], exact)
    v.add("transfer", "effect of storing the cache at the profile dtypes on decode outputs",
          _rel(re.hidden, rb.hidden), None, "rel", None, None, "information: rounding of the stored cache")


def check_prefix(v: ModelValidation, tm: TinyModel, tokens: np.ndarray, other: np.ndarray) -> None:
    """An earlier request shared the first PREFIX_LEN tokens (then diverged); a new request reuses them."""
    s = v.scaled
    p, total, n = PREFIX_LEN, PREFIX_TOTAL, DECODE_STEPS
    earlier = np.concatenate([tokens[:p], other[:8]])
    for exact in (True, False):
        pool = tm.new_pool(exact)
        pc = PrefixCache(tm.layout, pool, tm.new_cache(pool).codecs)
        c = tm.new_cache(pool)
        tm.prefill(earlier[:p], c)
        pc.insert(earlier[:p], c)                          # blocks + checkpoint at exactly p
        tm.prefill(earlier[p:], c)
        pc.insert(earlier, c, checkpoint=False)            # 7 full blocks; 120 is not block-aligned
        match = pc.match(tokens[:total])
        if match.length != p:
            v.add("prefix", "block-aligned match with checkpoint", match.length, p, "tokens", False)
            return
        cont = tm.prefill(tokens[p:total], match.cache)
        if exact:
            scratch_cache = tm.new_cache(pool)
            scratch = tm.prefill(tokens[:total], scratch_cache)
            d = _max_rel([scratch.hidden[p:], scratch.logits] + _states(scratch_cache),
                         [cont.hidden, cont.logits] + _states(match.cache))
            v.add("prefix", f"continue after {p} shared tokens = recompute {total} from scratch", d, None, "rel",
                  d <= TOL, TOL, "float64 storage; outputs and final states")
        else:
            blob = serialize(match.cache, since=p)
            sent = data_bytes(blob)
            want = A.s_kv(s, total - p, cached=p)
            # the decode site holds the same prefix in its own prefix cache
            pool_b = tm.new_pool()
            pc_b = PrefixCache(tm.layout, pool_b, match.cache.codecs)
            cb = tm.new_cache(pool_b)
            tm.prefill(tokens[:p], cb)
            pc_b.insert(tokens[:p], cb)
            held = pc_b.match(tokens[:total])
            b = deserialize(blob, tm.layout, pool_b, match.cache.codecs, prefix=held.cache)
            ra, rb = tm.decode(tokens[total:total + n], match.cache), tm.decode(tokens[total:total + n], b)
            diff = float(np.abs(ra.hidden - rb.hidden).max())
            v.add("prefix", f"incremental payload: {total - p} new tokens after {p} cached", sent["total"], want, "B",
                  sent["total"] == want and want < A.s_kv(s, total), 0,
                  f"full transfer would be {A.s_kv(s, total):,} B")
            v.add("prefix", "decode on B from its prefix + incremental payload = decode on A", diff, None, "abs",
                  diff == 0.0, 0)
    # a checkpoint only at 96 tokens: request-level state limits reuse to 96, KV blocks alone reach 112
    pool = tm.new_pool()
    pc = PrefixCache(tm.layout, pool, tm.new_cache(pool).codecs)
    c = tm.new_cache(pool)
    tm.prefill(earlier[:96], c)
    pc.insert(earlier[:96], c)
    tm.prefill(earlier[96:], c)
    pc.insert(earlier, c, checkpoint=False)
    match = pc.match(tokens[:total])
    want = 96 if tm.layout.has_request_level else p
    v.add("prefix", "match with KV blocks to 112 but a state checkpoint only at 96", match.length, want, "tokens",
          match.length == want and match.kv_blocks == p // tm.block_size, 0,
          "request-level state is reusable only at exactly the checkpointed length")


def validate_model(model: ModelProfile, seed: int = 0, layers: str = "pattern") -> ModelValidation:
    """Run every check on the scaled version of ``model``."""
    scaled = scale_profile(model, layers)
    tm = TinyModel(scaled, seed=seed)
    rng = np.random.default_rng(seed + 1)
    tokens = rng.integers(0, scaled.vocab_size, 320)
    other = rng.integers(0, scaled.vocab_size, 16)
    v = ModelValidation(model.name, scaled)
    check_params(v, tm)
    check_bytes(v, tm, tokens)
    check_flops(v, tm, tokens)
    check_equivalence(v, tm, tokens)
    check_transfer(v, tm, tokens)
    check_prefix(v, tm, tokens, other)
    return v
