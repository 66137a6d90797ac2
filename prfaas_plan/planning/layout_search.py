"""The configuration search of a layout file (issue 22 item 2, issue 21 item 1 per site): chips per instance,
MoE TP or EP and decode attention TP or DP, per role (remote prefill; each PD site's local prefill and decode)
and per site, chosen jointly with every site's routing and split.

Each role's candidates are those of the one-site search (`planning.configurations`: shapes that divide the
role's chips into whole instances, 1-16 chips; the HBM fit; the decode batch cap within the TPOT SLO; the
bytes on the link following from the decode attention mode unless ``--transfer-bytes`` pins them), and
candidates no better at any length than another of the same role are dropped. A site's ``pin_chips: true``
keeps the file's chips per instance (the remote's likewise); the file's ``search: false`` keeps every shape
and the fixed TP configuration. One PD site with a remote site and one stack is `size`'s own search
(`configurations.search_configurations`), so a one-site layout is the one-site answer.

Several sites share the remote site, so their choices interact. The search, in two steps (units:
requests/s):

1. **Screen** (for each remote candidate): each site's options are its configurations times their
   threshold cuts (`analytic.multisite.cut_table`: capacity with the best integer split, remote seconds per
   request); the coordinate search of `analytic.multisite.coordinate_search` moves one site's option at a
   time, the remote site re-divided exactly (`share_remote`), from the former fixed shape, from each site's
   best on its own and from prices on the remote site. This is the pure-threshold plan over configurations:
   a lower bound on the linear program of the same choice.
2. **Solve**: the linear program (`analytic.lp.max_throughput`, per-bin routing, integer splits) of the
   `FINALISTS` best distinct choices of the screen and of the file's own shapes in the fixed configuration
   (the answer before the search); the best program wins, ties to the earlier (the fixed shape first). It is
   found exactly and cheaply: each candidate's continuous relaxation (one program, an upper bound) first,
   then the integer programs in decreasing bound until the best integer answer reaches the next bound.

The screen is a local optimum of a search, not a proof: the chosen plan is the best program among the
finalists, at least the file's fixed shapes' (``tests/test_layout_search.py`` checks it against every pinned
shape of the bundled example).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import PlanError
from ..layout import Layout, PDSite
from ..performance.sharding import split_reason
from .configurations import (REL_TIE, RoleConfig, SearchSpec, attention_modes, decode_split_label, dominated,
                             dtype_models, expert_parallel_degree, instance_shapes, moe_split_label, moe_splits,
                             prefill_fits)
from .scenario import Scenario

FINALISTS = 3          # distinct choices of the screen whose linear program is solved


@dataclass(frozen=True)
class _Prefill:
    chips: int
    moe: str
    model: object       # PrefillModel
    busy: np.ndarray    # seconds per request at every grid length


@dataclass(frozen=True)
class _Decode:
    dp: bool
    moe: str
    cap: object         # DecodeCapacity
    transfer: object    # TransferBytes


@dataclass(frozen=True)
class SiteOption:
    """One PD site's configuration: chips per instance, its local prefill and its decode."""

    chips: int
    prefill: _Prefill
    decode: _Decode


@dataclass(frozen=True)
class LayoutSearch:
    """The search's answer: the layout in the chosen configuration (shapes, counts and splits of the screen;
    the program re-chooses the splits), its roles (one `RoleConfig` per role and site: ``site`` is the PD
    site's name, or ``remote``), the linear program's total of the chosen and of the file's fixed shapes
    (requests/s), how many role candidates each role had before and after dropping dominated ones, how many
    choices were screened and solved, and the infeasible role candidates (role, site, chips, why)."""

    layout: Layout
    roles: tuple[RoleConfig, ...]
    lambda_rps: float
    fixed_rps: float | None          # the fixed shapes' integer optimum, when it was solved
    fixed_bound_rps: float | None    # their relaxation (an upper bound), None when they do not fit
    counts: dict[str, tuple[int, int]]
    screened: int
    relaxed: int
    solved: int
    infeasible: tuple[tuple[str, str, int, str], ...]
    pinned: tuple[str, ...]
    result: object = None     # the chosen layout's `LPResult` (None: one site, planned by `answer_size`)
    perf: object = None

    def note(self) -> str:
        kept = ", ".join(f"{k} {v[1]} of {v[0]}" for k, v in self.counts.items())
        chosen = "; ".join(f"{r.site} {r.role} {r.label}" for r in self.roles)
        fixed = (f"; the file's shapes in the fixed TP configuration give {self.fixed_rps:.3f} req/s"
                 if self.fixed_rps is not None else
                 f"; the file's shapes in the fixed TP configuration give at most {self.fixed_bound_rps:.3f} req/s "
                 "(their relaxation)" if self.fixed_bound_rps is not None else
                 "; the file's shapes in the fixed TP configuration do not fit")
        return (f"configuration search per role and site: {kept} role candidates kept after dropping those no "
                f"better at any length; {self.screened} choices screened by the pure-threshold search; {self.relaxed} "
                f"finalists (the screen's best and the file's fixed shapes) bounded by their relaxations, "
                f"{self.solved} of them solved as integer programs (the others' bounds cannot beat it); "
                f"{len(self.infeasible)} role candidates infeasible; "
                f"chosen: {chosen} ({self.lambda_rps:.3f} req/s){fixed}"
                + (f"; pinned: {', '.join(self.pinned)}" if self.pinned else "")
                + "; a site's prefill and decode share one instance shape (local instances change role)")


def layout_configurations(answer) -> tuple[RoleConfig, ...] | None:
    """The chosen configuration per role and site of a ``size --layout`` / ``compare --layout`` answer (a
    `LayoutAnswer` or a one-site `SizeAnswer`), None when the roles were not searched: what `simulate
    --layout` replays. The configured layout itself is ``answer.layout`` (several sites) or
    ``answer.plan.layout`` (one)."""
    found = getattr(answer, "configurations", None)
    if found is None:
        return getattr(answer, "layout_roles", None)
    return tuple(found.roles) if isinstance(found, LayoutSearch) else tuple(found.best.roles)


def searchable(lay: Layout, sc: Scenario) -> bool:
    """True when the layout's roles are searched: the file allows it and the inputs are predicted (the
    paper's tables are 8-chip instances)."""
    return lay.search and sc.inputs != "paper"


def _fixed(lay: Layout, sc: Scenario) -> Layout:
    """The layout in the fixed configuration (TP throughout, the scenario's transfer bytes): the answer
    before the search."""
    sites = tuple(replace(s, prefill_moe="tp", decode_moe="tp", dp_attention=False, transfer="")
                  for s in lay.pd_sites)
    remote = None if lay.remote is None else replace(lay.remote, moe="tp")
    return replace(lay, pd_sites=sites, remote=remote)


def search_layout(lay: Layout, sc: Scenario, spec: SearchSpec = SearchSpec()) -> LayoutSearch:
    """Search every role's configuration of ``lay`` (see the module docstring); ``spec.transfer`` pins the
    bytes on the links (and the decode attention mode they name). The answer for the best model dtype the
    user allows (``--weight-dtype fp8,bf16``) wins."""
    found = [_search_one(lay, sc, spec, model) for model in dtype_models(sc)]
    return max(found, key=lambda f: f.lambda_rps)  # max keeps the first of equals: the profile's own dtype


def _remote_candidates(lay: Layout, sc: Scenario, model, counts, infeasible) -> list[_Prefill]:
    """The remote site's non-dominated prefill candidates ([] without remote instances)."""
    r = lay.remote
    if r is None or r.instances == 0:
        return []
    pool = r.instance.chips * r.instances
    shapes = [r.instance.chips] if r.pin_chips else instance_shapes(pool, None, "`remote`")
    return _prefill_candidates(model, sc, r.instance.chip, pool, shapes, r.stack or sc.stack, "remote", counts,
                               infeasible, "remote prefill")


def _prefill_candidates(model, sc, chip, pool: int, shapes, stack: str, site: str, counts, infeasible,
                        role: str) -> list[_Prefill]:
    """Non-dominated prefill candidates of one role (requests/s per length of the whole pool)."""
    from ..performance.base import Instance
    from .scenario import instance_prefill

    cands = []
    for n in shapes:
        inst = Instance(chip, n)
        for moe in moe_splits(model, n):
            counts[role][0] += 1
            why = split_reason(model, n, moe) or prefill_fits(model, inst, sc.context_tokens)
            if why:
                infeasible.append(("prefill", site, n, f"{moe_split_label(moe, n)}: {why}"))
                continue
            pm = instance_prefill(model, inst, sc.inputs, stack, moe)
            cands.append(_Prefill(n, moe, pm, sc.grid.busy_at_lengths(pm)))
    rates = [(pool // c.chips) / np.maximum(c.busy, 1e-300) for c in cands]
    keep = [c for c, d in zip(cands, dominated(rates)) if not d]
    counts[role][1] += len(keep)
    return keep


def _site_options(site: PDSite, sc: Scenario, spec: SearchSpec, model, counts, infeasible) -> list[SiteOption]:
    """A PD site's configurations: per shape its non-dominated local prefill and decode candidates."""
    from ..analytic.transfer import decode_transfer
    from ..performance import decode_capacity
    from ..performance.base import Instance

    pool = site.instance.chips * site.instances
    stack = site.stack or sc.stack
    shapes = [site.instance.chips] if site.pin_chips else instance_shapes(pool, None, f"site {site.name}")
    out = []
    for n in shapes:
        inst = Instance(site.instance.chip, n)
        prefills = _prefill_candidates(model, sc, site.instance.chip, pool, [n], stack, site.name, counts,
                                       infeasible, "local prefill")
        decodes, rows = [], []
        for dp in attention_modes(n, spec.transfer):
            for moe in moe_splits(model, n):
                counts["local decode"][0] += 1
                why = split_reason(model, n, moe, dp)
                if why:
                    infeasible.append(("decode", site.name, n, f"{decode_split_label(dp, moe, n)}: {why}"))
                    continue
                cap = decode_capacity(model, inst, sc.tpot_s, sc.context_tokens, moe, stack=stack, dp_attention=dp)
                if cap.batch <= 0:
                    infeasible.append(("decode", site.name, n, f"{decode_split_label(dp, moe, n)}: "
                                       + ("over the TPOT SLO at batch 1" if cap.binding == "slo"
                                          else "no HBM for one request")))
                    continue
                tb = decode_transfer(spec.transfer, n, dp)
                decodes.append(_Decode(dp, moe, cap, tb))
                rows.append(np.concatenate([[cap.requests_per_s(sc.output_tokens)],
                                            -tb.at(model, sc.grid.lengths)]))
        keep = [d for d, dom in zip(decodes, dominated(rows)) if not dom]
        counts["local decode"][1] += len(keep)
        out += [SiteOption(n, p, d) for p in prefills for d in keep]
    return out


def _configured(lay: Layout, remote: _Prefill | None, picks: list[SiteOption], splits: list[int]) -> Layout:
    """``lay`` with the remote candidate and each site's option (its split ``splits[i]`` prefill instances)."""
    from ..performance.base import Instance

    sites = []
    for s, o, n_p in zip(lay.pd_sites, picks, splits):
        n_all = s.instance.chips * s.instances // o.chips
        sites.append(replace(s, instance=Instance(s.instance.chip, o.chips), prefill=int(n_p),
                             decode=n_all - int(n_p), prefill_moe=o.prefill.moe, decode_moe=o.decode.moe,
                             dp_attention=o.decode.dp, transfer=o.decode.transfer.policy))
    r = lay.remote
    if remote is not None:
        r = replace(r, instance=Instance(r.instance.chip, remote.chips),
                    instances=r.instance.chips * r.instances // remote.chips, moe=remote.moe)
    return replace(lay, pd_sites=tuple(sites), remote=r)


def roles_of(lay: Layout, perf) -> tuple[RoleConfig, ...]:
    """One `RoleConfig` per role and site of a configured layout (``site``: ``remote`` or the PD site's
    name; each role as its site records it, `layout.PDSite`), dtypes and the decode batch cap from its
    performance inputs ``perf`` (`scenario.layout_perf`)."""
    wd, kd = perf.model.weight_dtype, perf.model.kv_dtype
    out = []
    if lay.remote is not None and lay.remote.instances > 0:
        n = lay.remote.instance.chips
        out.append(RoleConfig("prefill", "remote", n, n, expert_parallel_degree(lay.remote.moe, n), False, 0, wd, kd))
    for s in lay.pd_sites:
        n = s.instance.chips
        out.append(RoleConfig("prefill", s.name, n, n, expert_parallel_degree(s.prefill_moe, n), False, 0, wd, kd))
        out.append(RoleConfig("decode", s.name, n, n, expert_parallel_degree(s.decode_moe, n), s.dp_attention,
                              int(perf.sites[s.name].decode.batch), wd, kd))
    return tuple(out)


def _search_one(lay: Layout, sc: Scenario, spec: SearchSpec, model) -> LayoutSearch:
    """`search_layout` for one model dtype: the role candidates, the screen, the finalists solved."""
    sc = replace(sc, model=model)
    counts = {"remote prefill": [0, 0], "local prefill": [0, 0], "local decode": [0, 0]}
    infeasible: list[tuple] = []
    remotes = _remote_candidates(lay, sc, model, counts, infeasible)
    if lay.remote is not None and lay.remote.instances > 0 and not remotes:
        raise PlanError(f"no configuration of {model.name} fits the remote site: "
                        + (infeasible[0][3] if infeasible else "no candidate"))
    by_key: dict[tuple, list[SiteOption]] = {}
    options = []
    for s in lay.pd_sites:
        key = (s.instance.chip.name, s.instance.chips * s.instances, s.stack or sc.stack,
               s.instance.chips if s.pin_chips else None)
        if key not in by_key:
            by_key[key] = _site_options(s, sc, spec, model, counts, infeasible)
        if not by_key[key]:
            why = next((i[3] for i in infeasible if i[1] == s.name), "no candidate")
            raise PlanError(f"no configuration of {model.name} fits site {s.name} ({s.instance.chips * s.instances} "
                            f"{s.instance.chip.name} chips): {why}; use chips with more HBM or lighter weights "
                            "(`weight_dtype` fp8)")
        options.append(by_key[key])
    finalists, screened = _screen(lay, sc, model, remotes, options)
    # distinct choices, best screen first (the search order breaks ties)
    seen, ranked = set(), []
    for f in sorted(finalists, key=lambda f: -f[0]):
        key = (f[1], tuple(id(o) for o in f[3]))
        if key not in seen:
            seen.add(key)
            ranked.append(f)
    return _solve(lay, sc, ranked[:FINALISTS], counts, screened, infeasible)


def _screen(lay: Layout, sc: Scenario, model, remotes: list[_Prefill], options: list[list[SiteOption]]):
    """Step 1 of the module docstring: per remote candidate, the coordinate search over every site's
    configurations x cuts from each start. Returns ([(total requests/s, remote index, remote candidate,
    each site's option, each site's split)], how many configuration choices were spanned)."""
    from ..analytic.lp import bins_of
    from ..analytic.multisite import SiteModel, coordinate_search, cut_table, site_capacity

    grid = sc.grid
    kv_of: dict[tuple, np.ndarray] = {}
    finalists: list[tuple[float, int, object, list[SiteOption], list[int]]] = []
    screened = 0
    no_remote = np.full_like(grid.lengths, np.inf)
    for ri, rem in enumerate(remotes or [None]):
        n_remote = 0 if rem is None else lay.remote.instance.chips * lay.remote.instances // rem.chips
        tables, models = [], []
        for s, opts in zip(lay.pd_sites, options):
            cap, rho, local, bits, site_models = [], [], [], [], []
            offload = rem is not None and lay.can_offload(s) and lay.threshold != float("inf")
            for o in opts:
                tb = o.decode.transfer
                if (tb.policy, tb.tp) not in kv_of:
                    kv_of[(tb.policy, tb.tp)] = tb.at(model, grid.lengths)
                kv = kv_of[(tb.policy, tb.tp)]
                bins = bins_of(grid, rem.busy if rem is not None else no_remote, o.prefill.busy, kv)
                m = SiteModel(s.name, bins, s.instance.chips * s.instances // o.chips,
                              o.decode.cap.requests_per_s(sc.output_tokens),
                              s.link.planned_bps if offload else 0.0, offload)
                t = cut_table(m)
                c = t[0]
                if lay.threshold is not None and offload:   # a pinned threshold: that cut only
                    k = int(np.searchsorted(bins.length, lay.threshold, side="right"))
                    c = np.where(np.arange(len(c)) == k, c, -np.inf)
                cap.append(c)
                rho.append(t[1])
                bits.append(t[2])
                local.append(t[3])
                site_models.append(m)
            tables.append((np.concatenate(cap), np.concatenate(rho)))
            models.append((site_models, [len(c) for c in cap], local, bits))
        starts = _starts(tables, models, lay, options)
        screened += int(np.prod([float(len(o)) for o in options]))
        for start in starts:
            total, picks = coordinate_search(tables, n_remote, list(start))
            chosen, splits = [], []
            for (site_models, sizes, local, bits), opts, p in zip(models, options, picks):
                j, cut = _unflatten(sizes, p)
                chosen.append(opts[j])
                splits.append(int(site_capacity(site_models[j], local[j][cut], bits[j][cut])[1]))
            finalists.append((total, ri, rem, chosen, splits))
    return finalists, screened


def _unflatten(sizes: list[int], pick: int) -> tuple[int, int]:
    """(option index, cut) of a flat index into a site's concatenated options."""
    for j, size in enumerate(sizes):
        if pick < size:
            return j, pick
        pick -= size
    raise IndexError(pick)


def _starts(tables, models, lay: Layout, options) -> list[list[int]]:
    """Starts of the screen: the file's shape (fixed TP when present, else its first option) all local,
    every site's best option on its own (remote not shared), and prices on the remote site."""
    from ..analytic.multisite import price_starts

    def flat(i, j, cut):
        return sum(models[i][1][:j]) + cut

    file_shape = []
    for i, (s, opts) in enumerate(zip(lay.pd_sites, options)):
        j = next((j for j, o in enumerate(opts) if o.chips == s.instance.chips and o.prefill.moe == "tp"
                  and o.decode.moe == "tp" and not o.decode.dp), 0)
        file_shape.append(flat(i, j, models[i][1][j] - 1))
    alone = [int(np.argmax(np.where(np.isfinite(t[0]), t[0], -np.inf))) for t in tables]
    starts = [file_shape, alone] + price_starts(tables, len(tables))
    return [list(c) for c in dict.fromkeys(tuple(c) for c in starts)]


def _solve(lay: Layout, sc: Scenario, ranked, counts, screened: int, infeasible) -> LayoutSearch:
    """The best integer program among the finalists and the file's fixed shapes, exactly: every candidate's
    relaxation (one linear program, an upper bound) first, then the integer programs in decreasing bound
    until the best integer answer reaches the next bound (no candidate left can beat it)."""
    from .layouts import relaxed_layout, solve_layout

    cands = [_fixed(lay, sc)] + [_configured(lay, rem, picks, splits) for _, _, rem, picks, splits in ranked]
    bounds = []
    for i, cand in enumerate(cands):
        try:
            bound, perf, bins = relaxed_layout(cand, sc)
        except PlanError:
            if i:           # a finalist is built from candidates that fit
                raise
            continue        # the fixed shape does not fit (its decode, its HBM): the search may still
        bounds.append((bound, i, cand, perf, bins))
    solved: list[tuple] = []
    for bound, i, cand, perf, bins in sorted(bounds, key=lambda b: (-b[0], b[1])):
        if solved and max(s[0] for s in solved) >= bound:
            break
        res = solve_layout(cand, perf, bins)
        solved.append((res.lambda_rps, i, res, perf))
    fixed_rps = next((s[0] for s in solved if s[1] == 0), None)
    top = max(s[0] for s in solved)
    lam, i, res, perf = min((s for s in solved if s[0] >= top * (1 - REL_TIE)), key=lambda s: s[1])
    planned = cands[i]
    pinned = tuple([f"remote {lay.remote.instance.chips} chips per instance"] if lay.remote is not None
                   and lay.remote.pin_chips else []) + tuple(f"{s.name} {s.instance.chips} chips per instance"
                                                             for s in lay.pd_sites if s.pin_chips)
    fixed_bound = next((b[0] for b in bounds if b[1] == 0), None)
    return LayoutSearch(planned, roles_of(planned, perf), lam, fixed_rps, fixed_bound,
                        {k: (v[0], v[1]) for k, v in counts.items()}, screened, len(bounds), len(solved),
                        tuple(infeasible), pinned, res, perf)
