"""The configuration search per role and site (issue 21 item 1): how many chips each instance has and how
each role splits the model, chosen jointly with the threshold and the local split.

Roles and what is searched (each candidate checked for HBM fit, the reason kept when it does not fit):

- remote prefill: chips per instance (the whole numbers 1..16 that divide the remote pool into whole
  instances), routed experts sliced (MoE TP), whole per chip (MoE EP) or both (expert TP x EP,
  aiconfigurator's ``etp4 ep2``: `performance.moe_split`, priced by the roofline);
- local prefill: chips per instance (shared with local decode: local instances change role, so one site has
  one shape), MoE TP, EP or a hybrid;
- local decode: attention tensor-parallel (TP, per-rank replicated latents/heads where the model's kind
  replicates them) or data-parallel (DP attention, one whole cache per request on one rank), MoE TP, EP or
  a hybrid,
  and the batch cap: the largest batch within the TPOT SLO and HBM (`performance.decode_capacity`);
- weight and KV dtypes: only those the user allows (``--weight-dtype fp8,bf16``), else the profile's.

The bytes on the link follow from the decode configuration (DP attention moves one copy per request,
``dp-attention``; TP attention the per-rank copies, ``replicated``) unless the user pins a transfer policy;
pinning ``replicated`` or ``dp-attention`` also pins the decode attention mode it names (``logical``, the
paper's counting convention, pins only the bytes).

Candidates are evaluated in two steps, both exact: (1) per role, a candidate that is no better at every
prompt length than another is dropped (a remote prefill pool whose requests/s per length is at most another's
everywhere cannot raise the remote bound at any threshold; a decode configuration with fewer requests/s and
at least as many bytes per request cannot raise the decode or the link bound); (2) every combination of the
survivors is grid-searched (`analytic.search.grid_search`, threshold and split) and the best ``Lambda_max``
wins; among equal ``Lambda_max`` (on the same pools, so at the same cost) the lower unloaded TTFT P90, then
the earlier candidate in the order below (8-chip, TP, TP attention first: the planner's former fixed
shape). Pinned inputs (``instance_chips`` and friends) reduce a role to one shape.
A TTFT SLO needs more: a prefill pool that carries less may prefill each prompt sooner, so with
``latency`` (`planning.slo.slo_configurations`) a prefill candidate is dropped only for another of its
shape that is no slower per request as well.

Units: chips, requests/s, seconds, tokens.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import PlanError
from ..performance.sharding import SPLIT_PHRASE, split_reason
from ..performance.sharing import Same, shared
from .scenario import Scenario, prfaas_layout, with_dtypes

MAX_INSTANCE_CHIPS = 16
SHAPE_ORDER = (8, 4, 16, 2, 1)  # full ties go to the earlier shape (8 first: the former fixed shape)
REL_TIE = 1e-9
BOUND_SLACK = 1e-6  # relative margin on `lambda_upper_bound` for rounding (it divides in another order)


@dataclass(frozen=True)
class SearchSpec:
    """What the user pinned: chips per remote / local instance (None: searched) and a transfer policy
    (None: follows the decode configuration)."""

    remote_chips: int | None = None
    local_chips: int | None = None
    transfer: str | None = None
    remote_shapes: tuple[int, ...] | None = None  # the chips per instance to try (None: every divisor in 1..16)
    local_shapes: tuple[int, ...] | None = None


def pinned_spec(inputs: str, instance_chips: int | None = None, remote_instance_chips: int | None = None,
                local_instance_chips: int | None = None, transfer_bytes: str | None = None) -> SearchSpec | None:
    """What a command pins of the search, from the inputs the user gave (None: not given, searched): the
    shapes (a role's own flag over ``instance_chips``) and the transfer policy; None, no search, for
    ``inputs`` paper (the paper's tables are 8-chip instances). ``size``, ``compare`` and ``simulate``."""
    if str(inputs) == "paper":
        return None
    return SearchSpec(remote_instance_chips or instance_chips, local_instance_chips or instance_chips,
                      None if transfer_bytes is None else str(transfer_bytes))


@dataclass(frozen=True)
class RoleConfig:
    """One role's configuration at one site, as the JSON section ``configurations`` records it."""

    role: str                 # prefill | decode
    site: str                 # remote | local
    chips_per_instance: int
    tp: int                   # tensor-parallel degree of attention and dense layers (DP attention: its ranks)
    ep: int                   # expert-parallel degree of the routed experts (1: sliced by TP)
    dp_attention: bool | int  # data-parallel attention (`operators.attention_ranks`: True one rank per chip)
    batch: int                # decode: running requests per instance (0 for prefill: packed by token budget)
    weight_dtype: str
    kv_dtype: str

    @property
    def attention_dp(self) -> int:
        """Data-parallel attention ranks (1: TP attention), each of ``tp / attention_dp`` chips."""
        from ..performance.operators import attention_ranks

        return attention_ranks(self.dp_attention, self.tp)

    def record(self) -> dict:
        return {"role": self.role, "site": self.site, "chips_per_instance": self.chips_per_instance, "tp": self.tp,
                "ep": self.ep, "dp_attention": self.attention_dp > 1, "attention_dp": self.attention_dp,
                "batch": self.batch, "weight_dtype": self.weight_dtype, "kv_dtype": self.kv_dtype}

    @property
    def label(self) -> str:
        dp = self.attention_dp
        attn = f"TP{self.tp}" if dp == 1 else f"DP{self.tp}-attn" if dp == self.tp else f"DP{dp}xTP{self.tp // dp}-attn"
        moe = f" ETP{self.tp // self.ep} EP{self.ep}" if 1 < self.ep < self.tp else f" EP{self.ep}" if self.ep > 1 else ""
        return f"{self.chips_per_instance}-chip {attn}{moe}"


@dataclass(frozen=True)
class Infeasible:
    """A role candidate that cannot run, and why (one sentence)."""

    role: str
    site: str
    chips_per_instance: int
    parallel: str
    weight_dtype: str
    reason: str


@dataclass(frozen=True)
class Candidate:
    """One joint configuration, grid-searched: its scenario, roles, ``Lambda_max`` (requests/s), threshold
    (tokens), local split, the decode step (seconds, the TPOT it runs at) and the plan's unloaded TTFT P90
    (seconds, filled for the candidates reported)."""

    scenario: Scenario
    roles: tuple[RoleConfig, ...]
    lambda_max: float
    threshold: float
    n_prefill: int
    n_decode: int
    binding: str
    tpot_s: float
    chips: int
    ttft_p90_s: float | None = None
    capex_usd: float | None = None
    cloud_usd_per_hour: float | None = None
    perf: object = field(default=None, compare=False, repr=False)  # its `PerfInputs` (what was grid-searched)

    @property
    def rps_per_chip(self) -> float:
        return self.lambda_max / self.chips if self.chips else 0.0

    @property
    def rps_per_musd(self) -> float | None:
        return self.lambda_max / self.capex_usd * 1e6 if self.capex_usd else None

    def label(self) -> str:
        return "; ".join(f"{r.site} {r.role} {r.label}" for r in self.roles)


@dataclass(frozen=True)
class ConfigSearch:
    """The search's answer: ``best``, the evaluated candidates best first, the infeasible role candidates,
    how many role candidates each role had before and after dropping dominated ones, and the Pareto set
    (indices into ``ranked``) of requests/s per chip (max) vs TTFT P90 (min) and TPOT (min)."""

    best: Candidate
    ranked: list[Candidate]
    infeasible: list[Infeasible]
    counts: dict[str, tuple[int, int]]
    reported: int = 8
    pinned: SearchSpec = SearchSpec()

    @property
    def front_rule(self) -> str:
        """What `fronts` keeps, in the words the Pareto table's note prints."""
        return (f"per chip: no other has more req/s per chip and a lower TTFT P90 and TPOT (TPOTs within "
                f"{TPOT_TIE:.0%} count as equal: each decodes the largest batch within the SLO); per dollar: none "
                "has more req/s per $1M capex and a lower TTFT P90")

    def fronts(self) -> list[tuple[int, list[str]]]:
        """``(index into ranked, fronts it is on)`` over the reported candidates (those with a TTFT):
        ``per chip`` = no other has more requests/s per chip and a lower TTFT P90 and TPOT (TPOTs within
        `TPOT_TIE` equal); ``per dollar`` = none has more requests/s per $1M of capex and a lower TTFT P90."""
        cands = [c for c in self.ranked[:self.reported] if c.ttft_p90_s is not None]
        chip = set(pareto_front([(c.rps_per_chip, -c.ttft_p90_s, -c.tpot_s) for c in cands], (0.0, 0.0, TPOT_TIE)))
        dollar = set(pareto_front([(c.rps_per_musd or 0.0, -c.ttft_p90_s) for c in cands])
                     if all(c.rps_per_musd is not None for c in cands) else [])
        return [(i, [n for n, f in (("per chip", chip), ("per dollar", dollar)) if i in f])
                for i in range(len(cands)) if i in chip or i in dollar]


def instance_shapes(pool: int, pinned: int | None, what: str, allowed: tuple[int, ...] | None = None) -> list[int]:
    """Chips per instance to try: ``pinned``, or the divisors of the pool in 1..16 (whole instances), only
    those in ``allowed`` when given."""
    if allowed is not None:
        return [n for n in instance_shapes(pool, pinned, what) if n in allowed]
    if pinned is not None:
        if pool % pinned:
            raise PlanError(f"{what}: {pool} chips do not make whole {pinned}-chip instances")
        return [pinned]
    out = [n for n in SHAPE_ORDER if n <= MAX_INSTANCE_CHIPS and pool % n == 0]
    out += [n for n in range(1, MAX_INSTANCE_CHIPS + 1) if pool % n == 0 and n not in out]
    return out


def attention_modes(chips: int, transfer: str | None) -> list[bool | int]:
    """Decode attention modes to try (`operators.attention_ranks`): TP attention (False), data-parallel
    attention in ranks of several chips (each whole number of ranks dividing the chips, TP attention within
    a rank) and one rank per chip (True), in that order, unless the user pinned a transfer policy that names
    one (``replicated``: what TP attention receives; ``dp-attention``: a rank per chip); ``logical`` is a
    counting convention and pins the bytes only."""
    if chips == 1:
        return [False]
    ranks = [k for k in range(2, chips) if chips % k == 0]
    return {"replicated": [False], "dp-attention": [True]}.get(transfer or "", [False, *ranks, True])


def moe_splits(model, chips: int) -> list[str]:
    """Routed-expert splits to try on ``chips``: TP, EP and the expert-TP x EP hybrids (`moe_split`)."""
    from ..performance.moe_split import hybrid_splits

    return ["tp", "ep"] + hybrid_splits(chips) if model.moe is not None and chips > 1 else ["tp"]


def expert_parallel_degree(moe: str, chips: int) -> int:
    """The expert-parallel degree of the routed-expert split ``moe`` (`moe_splits`) on a ``chips``-chip
    instance (1: experts sliced by TP, and always on one chip): the ``ep`` of a `RoleConfig`."""
    from ..performance.moe_split import ep_degree

    return ep_degree(moe, chips) if chips > 1 else 1


def moe_split_label(moe: str, chips: int) -> str:
    """How the routed-expert split ``moe`` on ``chips`` chips is named in infeasibility reasons and tables
    (`moe_split.split_label`; "MoE TP1" on one chip)."""
    from ..performance.moe_split import split_label

    return split_label(moe, chips) if chips > 1 else "MoE TP1"


def decode_split_label(dp_attention: bool | int, moe: str, chips: int) -> str:
    """How a decode candidate's parallelism is named in infeasibility reasons: ``DP8 attention, MoE EP8``
    (``DP2 x TP4 attention`` for ranks of several chips, ``TP8 attention`` without data parallelism)."""
    from ..performance.operators import attention_label

    return f"{attention_label(dp_attention, chips)} attention, {moe_split_label(moe, chips)}"


def dominated(rows: list[np.ndarray], higher_better: bool = True) -> list[bool]:
    """For each of ``rows`` (one role candidate's figures, e.g. requests/s at every prompt length, all of one
    length), whether another row is at least as good everywhere (``higher_better``: larger is better) and
    better somewhere, or equal and earlier: exact ties keep the first. A dominated candidate cannot raise
    the optimum, so the search drops it."""
    rows = [np.asarray(r) for r in rows]  # the array methods spare np.all's dispatch on every pair
    out = []
    for i, a in enumerate(rows):
        out.append(any(((b >= a) if higher_better else (b <= a)).all() and ((b != a).any() or j < i)
                       for j, b in enumerate(rows) if j != i))
    return out


@shared
def prefill_fits(model, inst, context: float) -> str | None:
    """Why a prefill instance cannot hold ``model`` and one request's cache at ``context`` tokens (the mean
    context decode is sized at: the planner's one memory basis; prompts far above it need the HBM a long
    prompt's cache takes, which the routing may send remote), or None."""
    from ..performance.decode import decode_memory

    mem = decode_memory(model, inst, context)
    if mem.max_batch < 1:
        return (f"weights {mem.weight_bytes / 1e9:.1f} GB + one {context:,.0f}-token request's cache "
                f"{mem.request_bytes / 1e9:.2f} GB per chip exceed the {mem.usable_bytes / 1e9:.1f} GB usable "
                "(HBM less the activation reserve)")
    return None


def dtype_models(sc: Scenario) -> list:
    """The model profile at each allowed (weight, KV) dtype pair (``sc.weight_dtypes`` x ``sc.kv_dtypes``,
    the search's outermost loop); ``[sc.model]`` when none were listed."""
    if not sc.weight_dtypes and not sc.kv_dtypes:
        return [sc.model]
    from ..profiles import get_model

    base = get_model(sc.model.name)
    out = []
    for w in sc.weight_dtypes or (None,):
        for k in sc.kv_dtypes or (None,):
            out.append(with_dtypes(base, w, k)[0] if (w or k) else sc.model)
    return out


@shared
def prefill_candidates(model, pool, shapes: tuple[int, ...], grid: Same, context: float, inputs: str, stack: str,
                       latency: bool) -> tuple:
    """One site's prefill role candidates on ``pool`` (chips per instance in ``shapes``, every MoE split):
    ``(candidates, dominated, infeasible, tried)``, the candidates as ``(chips, moe, prefill model)``, whether
    each is dominated (throughput alone, or with ``latency`` throughput and latency per shape), the
    infeasible ones as ``(chips, split label, reason)`` with HBM fit checked at ``context`` tokens, and
    how many were tried. ``grid`` (`sharing.Same`) is the scenario's length grid; `shared`: a sweep's
    points on one pool build them once."""
    from ..performance.base import Instance
    from .scenario import instance_prefill

    g = grid.obj
    cands, rates, ns, bad, tried = [], [], [], [], 0
    for n in shapes:
        inst = Instance(pool.chip, n)
        for moe in moe_splits(model, n):
            tried += 1
            why = split_reason(model, n, moe) or prefill_fits(model, inst, context)
            if why:
                bad.append((n, moe_split_label(moe, n), why))
                continue
            pm = instance_prefill(model, inst, inputs, stack, moe)
            cands.append((n, moe, pm))
            rate = (pool.chips // n) / np.maximum(g.busy_at_lengths(pm), 1e-300)
            rates.append(np.concatenate([rate, -g.latency_at_lengths(pm)]) if latency else rate)
            ns.append(n)
    drops = _dominated_per_shape(ns, rates) if latency else dominated(rates)
    return tuple(cands), tuple(drops), tuple(bad), tried


@shared
def decode_candidates(model, inst, tpot_s: float, context: float, stack: str, transfer: str | None,
                      output_tokens: float, grid: Same) -> tuple:
    """The decode role candidates of one local instance shape ``inst`` (TP or DP attention, every MoE split)
    at the TPOT SLO ``tpot_s`` (s per token) and ``context`` tokens: ``(kept, infeasible, tried)``, the kept
    ones (not dominated on requests/s and bytes on the link at every length) as ``(dp attention, moe,
    decode capacity, transfer bytes)``, the infeasible ones as ``(parallelism label, reason)``, and how many
    were tried. ``transfer`` pins the bytes on the link (None: what each attention mode moves); ``grid``
    (`sharing.Same`) is the scenario's length grid. `shared`: a sweep's points on one local shape and SLO
    build them once whatever the remote pool."""
    from ..analytic.transfer import decode_transfer
    from ..performance import decode_capacity, decode_memory

    n_l = inst.chips
    decodes, rows, bad, tried = [], [], [], 0
    for dp in attention_modes(n_l, transfer):
        for moe in moe_splits(model, n_l):
            tried += 1
            why = split_reason(model, n_l, moe, dp)
            if why:
                bad.append((decode_split_label(dp, moe, n_l), why))
                continue
            cap = decode_capacity(model, inst, tpot_s, context, moe, stack=stack, dp_attention=dp)
            if cap.batch <= 0:
                mem = decode_memory(model, inst, context, dp)
                bad.append((decode_split_label(dp, moe, n_l),
                            f"even one request's step"
                            f"{f' (one on each of its {mem.ranks} attention ranks)' if dp else ''} "
                            f"takes {cap.step_s * 1e3:.1f} ms, over the "
                            f"{tpot_s * 1e3:g} ms TPOT SLO" if cap.binding == "slo" else
                            f"weights {mem.weight_bytes / 1e9:.1f} GB + one request's cache "
                            f"{mem.request_bytes / 1e9:.2f} GB per chip exceed the {mem.usable_bytes / 1e9:.1f} GB "
                            "usable"))
                continue
            tb = decode_transfer(transfer, n_l, dp)
            decodes.append((dp, moe, cap, tb))
            rows.append(np.concatenate([[cap.requests_per_s(output_tokens)], -grid.obj.transfer_at_lengths(model, tb)]))
    kept = tuple(c for c, d in zip(decodes, dominated(rows)) if not d)
    return kept, tuple(bad), tried


def _dominated_per_shape(shapes: list[int], rows: list[np.ndarray]) -> list[bool]:
    """`dominated` among the rows of one instance shape each (rows of different shapes never drop each
    other: their pools have different server counts, so they queue differently at one capacity)."""
    out = [False] * len(rows)
    for n in set(shapes):
        idx = [i for i, m in enumerate(shapes) if m == n]
        for i, d in zip(idx, dominated([rows[i] for i in idx])):
            out[i] = d
    return out


def search_configurations(sc: Scenario, spec: SearchSpec = SearchSpec(), report: int = 32,
                          latency: bool = False, prune: bool = False) -> ConfigSearch:
    """Search the configurations of every role of ``sc``'s PrfaaS-PD plan (see the module docstring);
    ``report`` candidates (best first) get their TTFT P90 for the runner-up and Pareto tables.

    ``latency`` keeps every prefill candidate a TTFT SLO may need (`planning.slo.slo_configurations`): a
    smaller pool rate can come with a shorter prefill per request (more chips per instance), so a prefill
    candidate is dropped only for another of the same shape that is at least as fast per request *and*
    carries at least as many requests/s at every length.

    ``prune`` (branch and bound, for callers that read ``best`` only) grid-searches a joint configuration
    only while its `lambda_upper_bound` can still reach the best found: ``best`` is the exhaustive search's
    (tests/test_configurations.py), ``ranked`` holds only the candidates evaluated."""
    from ..analytic.search import link_binds_before_remote, search_best
    from ..analytic.throughput import PerfInputs, SitePerf
    from ..analytic.throughput import evaluate as evaluate_at
    from ..analytic.ttft import ttft_summary
    from ..performance import parse_instance
    from ..performance.base import Instance
    from .plans import _costs

    if sc.inputs == "paper":
        raise PlanError("`inputs` paper gives the paper's 8-chip H200 and H20 instances only: the configuration "
                        "search needs `inputs` predicted (or pin `instance_chips` 8)")
    r_pool, l_pool = parse_instance(sc.remote, "`remote`"), parse_instance(sc.local, "`local`")
    r_shapes = instance_shapes(r_pool.chips, spec.remote_chips, "`remote_instance_chips`", spec.remote_shapes)
    l_shapes = instance_shapes(l_pool.chips, spec.local_chips, "`local_instance_chips`", spec.local_shapes)
    infeasible: list[Infeasible] = []
    counts: dict[str, list[int]] = {"remote prefill": [0, 0], "local prefill": [0, 0], "local decode": [0, 0]}
    ranked: list[Candidate] = []
    evaluated: list[tuple] = []  # (perf, best evaluation, local prefill, decode) of each ranked candidate

    numbers = itertools.count()
    order: list[int] = []    # search-order number of each ranked candidate (ties go to the lowest)
    pending: list[tuple] = []  # (search-order number, model, r, n_l, lp, d) of one model, not yet evaluated

    def joint(model, r, n_l, lp, d) -> tuple:
        """The scenario, performance inputs and layout of one joint configuration."""
        (n_r, r_moe, r_pm), (_, l_moe, l_pm), (dp, d_moe, cap, tb) = r, lp, d
        cand_sc = replace(sc, model=model, instance_chips=n_l, remote_instance_chips=None if n_r == n_l else n_r,
                          remote_moe=r_moe, local_moe=l_moe, decode_moe=d_moe, dp_attention=dp, transfer=tb.policy)
        perf = PerfInputs(model, r_pm, {"local": SitePerf(l_pm, cap, tb)}, sc.output_tokens)
        return cand_sc, perf, prfaas_layout(cand_sc)

    def queue(model, r, n_l, lp, d) -> None:
        pending.append((next(numbers), model, r, n_l, lp, d))

    def run(candidates: list[tuple], floor: float) -> None:
        """Evaluate ``candidates`` (`queue`'s tuples); with ``prune``, highest `lambda_upper_bound` first,
        none whose bound is below ``floor`` or the best found so far (less `REL_TIE`), and none whose bound
        an evaluated candidate earlier in the search order reaches: neither can be chosen, nor be this
        model's first best (the dropped remote candidates are planned with that one's local roles)."""
        if not prune:
            for seq, *args in candidates:
                evaluate(seq, *args)
            return
        bounds = [bound(*args) for _, *args in candidates]
        best, done = floor, []   # done: (search-order number, Lambda_max) of those evaluated here
        for k in sorted(range(len(candidates)), key=lambda k: (-bounds[k], candidates[k][0])):
            cap = bounds[k] * (1 + BOUND_SLACK)
            if cap < best * (1 - REL_TIE):
                break
            seq, *args = candidates[k]
            if any(s < seq and lam >= cap for s, lam in done):
                continue   # an earlier candidate at least as good: it wins the tie (and this model's argmax)
            lam = evaluate(seq, *args)
            done.append((seq, lam))
            best = max(best, lam)

    by_shape: dict[tuple[int, int], object] = {}   # (remote, local chips per instance) -> layout
    # (local prefill, decode candidate) -> (threshold, split) of a grid-searched joint configuration whose link
    # binds before its remote pool everywhere: every other remote candidate for which that holds has the same
    link_optima: dict[tuple[int, int], tuple[float, int]] = {}

    def bound(model, r, n_l, lp, d) -> float:
        """`lambda_upper_bound` of one joint configuration, without building it (exact mode:
        `crossing_bound`)."""
        if sc.mode != "exact":
            cand_sc, perf, lay = joint(model, r, n_l, lp, d)
            return lambda_upper_bound(lay, sc.grid, perf, sc.mode)
        (n_r, _, r_pm), (_, _, l_pm), (_, _, cap, tb) = r, lp, d
        lay = by_shape.get((n_r, n_l))
        if lay is None:
            lay = by_shape[n_r, n_l] = prfaas_layout(replace(sc, instance_chips=n_l,
                                                           remote_instance_chips=None if n_r == n_l else n_r))
        site = lay.pd_sites[0]
        if lay.remote is None or site.link is None:
            return float("inf")
        return crossing_bound(sc.grid, lay.remote.instances, site.link.planned_bps, site.instances, r_pm, l_pm,
                              model, tb, float(cap.requests_per_s(sc.output_tokens)))

    def evaluate(seq, model, r, n_l, lp, d) -> float:
        """Grid-search one joint configuration (remote candidate ``r``, local prefill ``lp``, decode ``d``);
        its ``Lambda_max``."""
        (n_r, r_moe, _), (_, l_moe, _), (dp, d_moe, cap, _) = r, lp, d
        wd, kd = model.weight_dtype, model.kv_dtype
        cand_sc, perf, lay = joint(model, r, n_l, lp, d)
        link_bound = sc.mode == "exact" and link_binds_before_remote(lay, sc.grid, perf)
        known = link_optima.get((id(lp), id(d))) if link_bound else None
        if known is None:
            best = search_best(lay, sc.grid, perf, sc.mode)
            if link_bound:
                link_optima[id(lp), id(d)] = (best.threshold, best.n_prefill)
        else:   # the same search would find the same threshold and split (`link_binds_before_remote`)
            best = evaluate_at(lay, sc.grid, perf, *known, sc.mode)
        ep = expert_parallel_degree
        roles = (RoleConfig("prefill", "remote", n_r, n_r, ep(r_moe, n_r), False, 0, wd, kd),
                 RoleConfig("prefill", "local", n_l, n_l, ep(l_moe, n_l), False, 0, wd, kd),
                 RoleConfig("decode", "local", n_l, n_l, ep(d_moe, n_l), dp, int(cap.batch), wd, kd))
        capex, hourly = _costs(lay)
        ranked.append(Candidate(cand_sc, roles, best.lambda_max, best.threshold, best.n_prefill, best.n_decode,
                                best.binding, cap.step_s, r_pool.chips + l_pool.chips,
                                capex_usd=capex if np.isfinite(capex) else None,
                                cloud_usd_per_hour=hourly if np.isfinite(hourly) else None, perf=perf))
        evaluated.append((perf, best, lp, d))
        order.append(seq)
        return best.lambda_max

    for model in dtype_models(sc):
        wd = model.weight_dtype

        def prefill_pool(site: str, pool: Instance, shapes: list[int]):
            """`prefill_candidates` of one site, its infeasible candidates and counts recorded."""
            cands, drops, bad, tried = prefill_candidates(model, pool, tuple(shapes), Same(sc.grid),
                                                          sc.context_tokens, sc.inputs, sc.stack, latency)
            counts[f"{site} prefill"][0] += tried
            infeasible.extend(Infeasible("prefill", site, n, label, wd, why) for n, label, why in bad)
            return list(cands), list(drops)

        r_cands, r_drop = prefill_pool("remote", r_pool, r_shapes)
        r_keep = [c for c, d in zip(r_cands, r_drop) if not d]
        counts["remote prefill"][1] += len(r_keep)
        for n_l in l_shapes:
            lp_cands, lp_drop = prefill_pool("local", l_pool, [n_l])
            lp_keep = [c for c, d in zip(lp_cands, lp_drop) if not d]
            counts["local prefill"][1] += len(lp_keep)
            d_keep, bad, tried = decode_candidates(model, Instance(l_pool.chip, n_l), sc.tpot_s, sc.context_tokens,
                                                   sc.stack, spec.transfer, sc.output_tokens, Same(sc.grid))
            counts["local decode"][0] += tried
            infeasible.extend(Infeasible("decode", "local", n_l, par, wd, why) for par, why in bad)
            counts["local decode"][1] += len(d_keep)
            for r in r_keep:
                for lp in lp_keep:
                    for d in d_keep:
                        queue(model, r, n_l, lp, d)
        first = len(ranked)
        run(pending, 0.0)
        pending.clear()
        # the remote candidates dropped as dominated, each with its site's best local configuration once:
        # never the optimum, but they can trade throughput for TTFT (the Pareto tables); not the expert-TP x
        # EP hybrids, which sit between TP and EP of their shape at both (`moe_split`)
        # (with ``latency`` every one dropped is beaten at both by one of its shape already planned)
        dropped = [] if latency else [c for c in r_cands if c[1] in ("tp", "ep") and not any(c is k for k in r_keep)]
        # (with ``prune`` this model's best is still the exhaustive one: nothing evaluated before it can beat
        # it and it was bounded against this model's candidates only)
        if dropped and ranked:
            mine = sorted(range(first, len(ranked)), key=lambda i: order[i])
            if mine:
                b = max(mine, key=lambda i: ranked[i].lambda_max)
                n_l = ranked[b].scenario.instance_chips
                lp, d = evaluated[b][2], evaluated[b][3]
                for r in dropped:
                    queue(model, r, n_l, lp, d)
                run(pending, max(c.lambda_max for c in ranked))
                pending.clear()
    if not ranked:
        _no_configuration(sc, infeasible, counts, l_pool, l_shapes)
    p90: dict[int, float] = {}

    def ttft_p90(i: int) -> float:
        if i not in p90:
            perf, best = evaluated[i][:2]
            p90[i] = ttft_summary(best.layout, sc.grid, perf, best.threshold).p90_s
        return p90[i]

    # best first; among those within REL_TIE of the best (the same throughput on the same pools, so the same
    # cost) the lower unloaded TTFT P90, then the search order (8 chips, TP, TP attention first)
    top = max(c.lambda_max for c in ranked)
    level = [_tie_level(c.lambda_max, top) for c in ranked]
    tied = {i for i, lam in enumerate(level) if lam == top}
    by_rank = sorted(range(len(ranked)), key=lambda i: (-level[i], ttft_p90(i) if len(tied) > 1 and i in tied else 0.0,
                                                        order[i]))
    out = [replace(ranked[i], ttft_p90_s=ttft_p90(i)) if k < report else ranked[i] for k, i in enumerate(by_rank)]
    return ConfigSearch(out[0], out, infeasible, {k: (v[0], v[1]) for k, v in counts.items()}, report, spec)


def lambda_upper_bound(lay, grid, perf, mode: str) -> float:
    """An upper bound on the ``Lambda_max`` (requests/s) `analytic.search.grid_search` finds for the single
    PD-site layout ``lay``, at any threshold and split, from one routing evaluation per step of the
    routing statistics (they change only where the threshold crosses a support point, so the steps cover
    every threshold): at a step with remote seconds ``R``, link bytes ``B`` and local prefill seconds ``P``
    per request, ``Lambda <= min(N_r / R, goodput / B, max over N_p of min(N_p / P, (N - N_p) d))`` for
    ``N`` local instances of ``d`` requests/s of decode each, the split ``N_p`` being a whole number on
    either side of where the two local bounds meet. It is the grid search's surface at every step, so it
    is tight but for the threshold the search balances. Infinite (no bound) for a layout that cannot
    offload."""
    from ..analytic.throughput import _bound, offloads, routing_stats

    site = lay.pd_sites[0]
    sp = perf.sites[site.name]
    if not offloads(lay, perf, site) or site.link is None:
        return float("inf")
    if mode == "exact":   # `routing_stats` at every step: the suffix sums themselves (cached per grid)
        remote_s = grid.busy_suffix(perf.remote_prefill)
        link_b = grid.transfer_suffix(perf.model, sp.transfer)
        local_suffix = grid.busy_suffix(sp.prefill)
        local_s = local_suffix[0] - local_suffix
    else:
        lengths = grid.lengths
        ts = np.concatenate([[lengths[0] - 1.0], lengths])   # split_index 0, 1, ..., n: every step
        r = routing_stats(grid, perf, ts, mode, site.name)
        remote_s, link_b, local_s = r.remote_s_per_req, r.link_bytes_per_req, r.local_s_per_req
    rps = float(sp.decode.requests_per_s(perf.output_tokens))
    n = site.instances
    local_s = np.asarray(local_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        # min(N_p / P, (N - N_p) d) peaks where the two meet, so the best whole split is either side of it
        meet = np.nan_to_num(n * rps * local_s / (1.0 + rps * local_s), nan=0.0, posinf=n)
        low = np.clip(np.floor(meet), 0, n)
        local = np.maximum(*(np.minimum(_bound(k, local_s), (n - k) * rps) for k in (low, np.minimum(low + 1, n))))
        ub = np.minimum(np.minimum(_bound(lay.remote.instances, remote_s),
                                   _bound(site.link.planned_bps / 8.0, np.asarray(link_b, dtype=float))), local)
    return float(np.nanmax(ub)) if np.any(~np.isnan(ub)) else float("inf")


def crossing_bound(grid, n_remote: int, link_bps: float, n_local: int, remote_prefill, local_prefill, model,
                   transfer, decode_rps: float) -> float:
    """`lambda_upper_bound` in exact mode (requests/s) by bisection instead of over every step: the remote
    and link bounds only rise with the step (less is sent remote) and the local one only falls, so the
    maximum of their minimum sits where they cross. Arguments: the remote and local instance counts, the
    link's planned rate (`Link.planned_bps`, bit/s), the prefill models, the transfer policy and one local
    instance's decode requests/s. The suffix sums are the grid's cached ones (`LengthGrid.busy_suffix`,
    `transfer_suffix`)."""
    remote_s = grid.busy_suffix(remote_prefill)
    link_b = grid.transfer_suffix(model, transfer)
    local_suffix = grid.busy_suffix(local_prefill)
    total, byte_rate, inf = float(local_suffix[0]), link_bps / 8.0, float("inf")

    def rising(k: int) -> float:
        r, b = float(remote_s[k]), float(link_b[k])
        return min(n_remote / r if r > 0 else inf, byte_rate / b if b > 0 else inf)

    def falling(k: int) -> float:
        p = total - float(local_suffix[k])
        if p <= 0:
            return n_local * decode_rps
        meet = n_local * decode_rps * p / (1.0 + decode_rps * p)
        low = min(max(math.floor(meet), 0), n_local)
        return max(min(n / p, (n_local - n) * decode_rps) for n in (low, min(low + 1, n_local)))

    lo, hi = 0, len(remote_s) - 1   # the first step where rising >= falling lies in [lo, hi + 1]
    if rising(hi) < falling(hi):
        return rising(hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if rising(mid) >= falling(mid):
            hi = mid
        else:
            lo = mid + 1
    return falling(lo) if lo == 0 else max(falling(lo), rising(lo - 1))


def _no_configuration(sc: Scenario, infeasible: list[Infeasible], counts: dict, l_pool, l_shapes: list[int]) -> None:
    """Raise the one-line error of a search where no joint configuration fits: decode's own error (at the
    largest local shape tried, TP attention) when no decode candidate fits, else the first role with none."""
    from ..performance.base import Instance
    from .scenario import instance_decode

    bad: dict[str, list[Infeasible]] = {}
    for i in infeasible:
        bad.setdefault(f"{i.site} {i.role}", []).append(i)
    if len(bad.get("local decode", [])) >= counts["local decode"][0]:
        instance_decode(sc.model, Instance(l_pool.chip, max(l_shapes)), sc.tpot_s, sc.context_tokens, sc.inputs,
                        sc.stack)  # its own error: cannot decode at the SLO, or no HBM for one request
    role = next((r for r in counts if len(bad.get(r, [])) >= counts[r][0]), None)
    if role is None:
        raise PlanError(f"no configuration of {sc.model.name} fits: no local instance shape both prefills and "
                        "decodes (each fits alone on another shape); pin `local_instance_chips`")
    first = max(bad[role], key=lambda i: i.chips_per_instance)
    hint = ("choose chips per instance that divide them (a power of two does for every bundled model)"
            if SPLIT_PHRASE in first.reason else "use chips with more HBM, more chips per instance or lighter "
            "weights (`weight_dtype` fp8)")
    raise PlanError(f"no configuration of {sc.model.name} fits: {role} on {first.chips_per_instance}-chip instances "
                    f"({first.parallel}): {first.reason}; {hint}")


def _tie_level(lam: float, top: float) -> float:
    """``lam`` for sorting, with everything within `REL_TIE` of the best counted as the best."""
    return top if lam >= top * (1 - REL_TIE) else lam


def pareto_front(pts: list[tuple[float, ...]], rel_tol: tuple[float, ...] | None = None) -> list[int]:
    """Indices of the points (every coordinate: higher is better) that no other point beats on every
    coordinate at once (at least as good on all, better on one). ``rel_tol`` (per coordinate, default 0)
    counts values within that fraction of each other as equal."""
    tol = rel_tol or (0.0,) * (len(pts[0]) if pts else 0)

    def beats(b, a) -> bool:
        slack = [t * max(abs(x), abs(y)) for t, x, y in zip(tol, b, a)]
        return all(x >= y - d for x, y, d in zip(b, a, slack)) and any(x > y + d for x, y, d in zip(b, a, slack))

    return [i for i, a in enumerate(pts) if not any(beats(b, a) for j, b in enumerate(pts) if j != i)]


TPOT_TIE = 0.01
"""TPOTs within this fraction of each other count as equal on the Pareto fronts: each candidate decodes the
largest batch within the SLO, so its TPOT sits below the SLO by less than one request's share of the step (at
the default 25 ms: 8-chip DP attention at batch 551 gives 24.99 ms, 4-chip at batch 217 24.95 ms), which says
nothing about the configuration. A batch that HBM caps well below the SLO still counts."""


def chosen_scenario(sc: Scenario, found: ConfigSearch) -> Scenario:
    """``found``'s best scenario, its notes saying what was searched and which bytes now cross the link
    (the transfer note of ``sc`` replaced by the chosen decode configuration's)."""
    from ..analytic.transfer import decode_transfer

    best = found.best.scenario
    transfer = decode_transfer(best.transfer, best.instance_chips, best.dp_attention).describe(best.model)
    notes = [transfer if n.startswith("transfer bytes:") else n for n in sc.notes]
    n_all = sum(v[0] for v in found.counts.values())
    kept = ", ".join(f"{k} {v[1]} of {v[0]}" for k, v in found.counts.items())
    pins = [f"{what} {v}" for what, v in (("remote chips per instance", found.pinned.remote_chips),
                                           ("local chips per instance", found.pinned.local_chips),
                                           ("transfer bytes", found.pinned.transfer)) if v is not None]
    notes.append(f"configuration search: {n_all} role candidates ({kept} kept after dropping those no better at "
                 f"any length), {len(found.ranked)} joint configurations grid-searched, {len(found.infeasible)} "
                 f"infeasible; chosen: {found.best.label()}"
                 + (f"; pinned: {', '.join(pins)}" if pins else "")
                 + "; local prefill and decode share one instance shape (local instances change role)")
    return replace(best, notes=tuple(notes))
