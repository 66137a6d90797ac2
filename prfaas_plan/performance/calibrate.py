"""Joint calibration: shared chip efficiencies and per-stack overheads fitted together on measured points.

Method (docs/methods.md, "Calibration"): maximum a-posteriori least squares on log time (scipy
``least_squares``). Every measured TTFT, TPOT and saturated busy time contributes
``log(predicted / measured) / SIGMA_MEASUREMENT``; every constant contributes ``log(value / prior centre) /
prior width``. Chip constants (GEMM efficiency per rate class, HBM and scale-up efficiency) are shared by
every model, stack and concurrency measured on that chip, and their priors are the chip's micro-benchmarks
(`kernel_seeds`); stack constants (fixed latency, per-forward and per-step overhead) are shared by every
chip and model measured on that stack. Predictions come from the serving model the planner uses
(`prfaas_plan.performance.serving`: waves at the measured concurrency), so concurrency > 1 is modelled,
not excluded. Errors: in-sample, leave-one-out (each measured row predicted by a fit made without it:
refitted for small sets, one Gauss-Newton step from the full fit beyond `EXACT_LOO_POINTS` rows) and
leave-one-model-out (each model's rows predicted by a refit made without that model).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError
from ..profiles import Calibration, StackProfile, get_hardware, get_stack
from ..profiles.efficiency import KERNEL_DEFAULTS
from ..profiles.stack import HarnessEntry, split_stack
from ..units import plural
from .base import parse_instance
from .decode import decode_works
from .kernel_curves import kernel_class_seed
from .kernel_seeds import KERNEL_FILE, MEMORY_SEED, chip_seed
from .operators import Parallel, pass_work
from .roofline import OP_CLASSES, expert_parallel, unit_times
from .closed_queue import closed_queue, smooth_max
from .harness import campaign
from .serving import wave_shape
from .stack_versions import error_notes, fit_version_layer, with_entries

SIGMA_MEASUREMENT = 0.1   # assumed scatter of one measured time (10%)
EXACT_LOO_POINTS = 40     # up to this many rows, leave-one-out refits; beyond, the one-step approximation
LOSS = "soft_l1"          # robust: a point tens of sigmas off (an overloaded run) pulls like a few sigmas
RATE_CLASSES = ("bf16", "fp8", "fp4", "attention", "linear_attention", "w4a16")
KERNEL_PRIOR_WIDTH = 0.5  # assumed kernel-class defaults (KERNEL_DEFAULTS) are held loosely
CURVE_PRIOR_WIDTH = 0.3   # measured on the chip, but by other engine versions and shapes than the serving runs
QUANTITIES = ("ttft", "tpot", "busy")
MIN_ERROR_POINTS = 5      # fewer held-out points than this say nothing credible about a chip's error: the
                          # profile records no loo/lomo error then, and the error bars take the prior width
# name: (prior centre or None = the chip's seed, log-width, lower bound, upper bound)
CHIP_PRIORS = {"gemm": (None, 0.2, 0.05, 1.0), "memory": (MEMORY_SEED, 0.2, 0.05, 1.0), "comm": (None, 0.5, 0.02, 2.0)}
POOL = "engines"          # owner of the pooled stack terms every stack deviates from
CLASS_DEVIATION_WIDTH = 1.0  # log-width of a batching class's deviation from the pooled term (a factor e), assumed
STACK_DEVIATION_WIDTH = 1.0  # log-width of one engine's deviation from its batching class's term (a factor e), assumed
# name: (prior centre, log-width, lower bound, upper bound) of the pooled term every stack deviates from. The
# centres are what an engine itself costs, so that concurrency effects are left to the closed-queue model
# (`closed_queue`) rather than absorbed as constants (assumed, from how the engines work):
# - latency_s 30 ms: tokenization, scheduling, the first detokenization and the HTTP/SSE response of one
#   request, not GPU-busy (a single short request on a small-active model is tens of ms);
# - forward_overhead_s 5 ms: launching a prefill forward without CUDA graphs, ~60 layers x ~15 kernels x ~5 us;
# - step_overhead_s 5 ms: scheduling, sampling and launch gaps of one decode step that graph replay leaves;
# - request_overhead_s 2 ms and ep_forward_overhead_s 2 ms: admission of one request (tokenize, match,
#   batch) and the all-to-all set-up of one expert-parallel forward;
# - wave_fraction 0.5: no prior knowledge of how synchronised a benchmark's clients are.
STACK_PRIORS = {"latency_s": (0.03, 0.3, 1e-4, 5.0), "forward_overhead_s": (0.005, 0.5, 1e-5, 0.5),
                "step_overhead_s": (0.005, 1.5, 1e-5, 0.5), "wave_fraction": (0.5, 1.0, 1e-3, 1.0),
                "request_overhead_s": (0.002, 0.7, 1e-6, 0.1), "ep_forward_overhead_s": (0.002, 0.7, 1e-6, 1.0)}
# Benchmark-harness terms (`harness`): priors (centre, log-width, bounds), assumed: 20 ms for a client's first
# streamed chunk, 1 ms per other in-flight stream, both loose (a factor e^1.5).
HARNESS_PRIORS = {"harness_latency_s": (0.02, 1.5, 1e-5, 2.0), "harness_stream_s": (0.001, 1.5, 1e-7, 0.1)}
# Engine stacks (the benchmarked engines, not a recorded single-configuration harness such as `paper-sglang`)
# are held to what an engine itself can cost: upper bounds on their terms in effect (seconds), assumed from the
# engines' work (a fixed latency above 60 ms, a prefill forward's launch/scheduling overhead above 10 ms or an
# admission above 10 ms would be visible in any single-request profile).
ENGINE_STACKS = ("sglang", "vllm", "trtllm")
RECORDED_DEVIATION_WIDTH = 2.0  # a recorded harness's stack (not an engine) deviates freely: it must not set the pool
ENGINE_UPPER = {"latency_s": 0.06, "forward_overhead_s": 0.01, "request_overhead_s": 0.01,
                "ep_forward_overhead_s": 0.01}
# How the objective is made smooth (docs/methods.md section 2, "A smooth objective"); a dict so that a benchmark
# can switch a part off (`benchmarks/calibration_starts.py --set calibrate.SMOOTHING='{...}'`):
# - saturation: width (log units, 0.1 = a corner about 10% wide in value) of the softplus corners of the bounded
#   map that holds a stack's term inside its pooled term's bounds (`_saturate`); 0 = the hard clip. A
#   parameterisation, not a model: a term a factor e inside a bound is moved by under 5e-6 in log;
# - continuation: p-norm exponents (dimensionless) of the smoothed maxima (roofline max(compute, memory), the
#   closed queue's branches) solved first, in order, each from the last; then the exact model is solved from
#   there, and every prediction is the exact model's. () = exact model only;
# - ftol: least_squares' relative cost tolerance (dimensionless) of every stage (scipy's default 1e-8);
# - x_scale: least_squares' variable scale, 1.0 (every log-constant alike) or "jac" (by the Jacobian's columns).
SMOOTHING = {"saturation": 0.0, "continuation": (), "ftol": 1e-8, "x_scale": 1.0}


def _saturate(z: np.ndarray, lower: np.ndarray, upper: np.ndarray, width: float) -> np.ndarray:
    """``z`` held inside ``[lower, upper]`` (log values): ``np.clip`` when ``width`` is 0, else the smooth
    saturation ``lower + w softplus((z - lower) / w) - w softplus((z - upper) / w)``, strictly inside the
    bounds, equal to ``z`` to within ``w exp(-d / w)`` at a distance ``d`` from both bounds and with a
    derivative in (0, 1] everywhere (docs/methods.md, "A smooth objective")."""
    if width <= 0.0:
        return np.clip(z, lower, upper)
    smooth = lower + width * (np.logaddexp(0.0, (z - lower) / width) - np.logaddexp(0.0, (z - upper) / width))
    return np.clip(smooth, lower, upper)   # against rounding only: the map is inside the bounds analytically


def harness_of(m) -> str:
    """The fitted harness term's owner for row ``m``: ``HARNESS@chip/stack`` (one campaign: each engine's runs
    use that engine's benchmark client on the system's host, `harness`), or "" (none modelled)."""
    name = campaign(m.source, m.chip)
    return f"{name}/{split_stack(m.stack)[0]}" if name else ""


@dataclass(frozen=True)
class _Params:
    """Layout of the parameter vector: chip entries ``(chip, name)`` (name ``gemm:bf16``, ``memory``,
    ``comm``) then stack entries ``(stack, field)``; values are log-constants."""

    keys: tuple[tuple[str, str], ...]
    centre: np.ndarray
    width: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    pooled: int = 0   # index of the first deviation (entries before it are chip and pooled terms)
    cap: np.ndarray | None = None   # log upper bound in effect of each stack entry (`ENGINE_UPPER` for engines)
    tied: tuple[tuple[int, int], ...] = ()   # (entry, entry it takes its value from): one scale-up fabric
    stacks_from: int = 0   # index of the first stack deviation (entries from `pooled` are batching classes')
    parent: tuple[int, ...] = ()   # per stack entry: the entry it deviates from (an engine's batching class)

    def index(self, owner: str, name: str) -> int:
        return self.keys.index((owner, name))

    def parent_of(self, j: int) -> int:
        """The entry deviation ``j`` deviates from: the pooled term for a batching class's and a recorded stack's,
        the class's for an engine's."""
        if j < self.stacks_from:
            return self.keys.index((POOL, self.keys[j][1]))
        return self.parent[j - self.stacks_from]

    def effective(self, x: np.ndarray) -> np.ndarray:
        """Log-values in effect: a batching class's entry is the pooled term plus its deviation, a stack's is
        its parent's (`parent_of`) plus its own, held inside the pooled term's bounds (`_saturate`,
        ``SMOOTHING["saturation"]``); chip and pooled entries as they are."""
        if not hasattr(self, "_pool_of"):
            pool_of = np.array([self.keys.index((POOL, name)) for _, name in self.keys[self.pooled:]], dtype=int)
            object.__setattr__(self, "_pool_of", pool_of)
            object.__setattr__(self, "_parent", np.asarray(self.parent, dtype=int))
        out = x.copy()
        pool, parent = self._pool_of, self._parent
        classes = self.stacks_from - self.pooled
        # a batching class's term: the pooled term times its deviation, inside the pooled term's bounds
        out[self.pooled:self.stacks_from] = np.clip(x[self.pooled:self.stacks_from] + x[pool[:classes]],
                                                    self.lower[pool[:classes]], self.upper[pool[:classes]])
        upper = self.upper[pool[classes:]] if self.cap is None else self.cap
        out[self.stacks_from:] = _saturate(x[self.stacks_from:] + out[parent], self.lower[pool[classes:]], upper,
                                           SMOOTHING["saturation"])
        for follower, leader in self.tied:
            out[follower] = x[leader]
        return out


def _params(chips: list[str], stacks: list[str], harnesses: list[str] = ()) -> _Params:
    keys, centre, width, lo, hi = [], [], [], [], []
    for chip in chips:
        seed = chip_seed(chip)
        for name in [f"gemm:{c}" for c in RATE_CLASSES] + ["memory", "comm"]:
            kind = name.split(":")[0]
            c, w, l, h = CHIP_PRIORS[kind]
            cls = name.split(":")[1] if kind == "gemm" else ""
            measured = kernel_class_seed(chip, cls)   # kernel_curves.csv's plateau, where the chip has one
            if measured is not None:
                c, w = measured, CURVE_PRIOR_WIDTH
            elif cls in KERNEL_DEFAULTS:
                c, w = KERNEL_DEFAULTS[cls], KERNEL_PRIOR_WIDTH
            elif c is None:
                c = seed[cls or "comm"]
            keys.append((chip, name)), centre.append(c), width.append(w), lo.append(l), hi.append(h)
    # Chips on one scale-up fabric (the same link bandwidth: H200, H20 and H20-3e's 450 GB/s NVLink 4) share one
    # collective efficiency: NCCL's achieved share of the link belongs to the fabric, and fitted apart the
    # H20's single-configuration rows gave it a better link than the H200's (8xH200 slower than 8xH20 on
    # small all-reduce-bound forwards)
    fabric: dict[float, int] = {}
    tied = []
    for chip in chips:
        j = keys.index((chip, "comm"))
        leader = fabric.setdefault(get_hardware(chip).scaleup_gb_s, j)
        if leader != j:
            tied.append((j, leader))
    for harness in harnesses:
        for name, (c, w, l, h) in HARNESS_PRIORS.items():
            keys.append((harness, name)), centre.append(c), width.append(w), lo.append(l), hi.append(h)
    for name, (c, w, l, h) in STACK_PRIORS.items():
        keys.append((POOL, name)), centre.append(c), width.append(w), lo.append(l), hi.append(h)
    pooled = len(keys)
    classes = sorted({get_stack(s).batching for s in stacks if s in ENGINE_STACKS})
    for cls in classes:
        for name in STACK_PRIORS:
            keys.append((f"{POOL}:{cls}", name)), centre.append(1.0), width.append(CLASS_DEVIATION_WIDTH)
            lo.append(np.exp(-12.0)), hi.append(np.exp(12.0))
    stacks_from = len(keys)
    # Each engine's term is its batching class's term times exp(deviation); the deviation's prior is centred on
    # 0 (a factor 1), so a term a stack's data do not identify is shrunk to what the other stacks say. A
    # recorded stack deviates from the engines' pooled term itself: it must set neither the pool nor a class.
    cap, parent = [], []
    for stack in stacks:
        for name, (_, _, _, upper) in STACK_PRIORS.items():
            owner = f"{POOL}:{get_stack(stack).batching}" if stack in ENGINE_STACKS else POOL
            parent.append(keys.index((owner, name)))
            keys.append((stack, name)), centre.append(1.0)
            width.append(STACK_DEVIATION_WIDTH if stack in ENGINE_STACKS else RECORDED_DEVIATION_WIDTH)
            lo.append(np.exp(-12.0)), hi.append(np.exp(12.0))
            cap.append(min(upper, ENGINE_UPPER.get(name, upper)) if stack in ENGINE_STACKS else upper)
    arr = lambda v: np.log(np.asarray(v, dtype=float))  # noqa: E731 - log of a list of constants
    return _Params(tuple(keys), arr(centre), np.asarray(width, dtype=float), arr(lo), arr(hi), pooled, arr(cap),
                   tuple(tied), stacks_from, tuple(parent))


class _Problem:
    """Every measured point as forward 'terms' with unit-efficiency operator times, so one evaluation of
    all predictions is a handful of array operations. Per point: the forward(s) holding its own prompt alone
    and filled with its clump, a kept-full forward (busy time per prompt) and its decode step (see
    `prfaas_plan.performance.serving`)."""

    def __init__(self, points: list, params: _Params):
        rows = {k: [] for k in ("compute", "memory", "link", "nic", "latency")}
        term_chip, term_ovh, term_mult, cls = [], [], [], []
        class_index = {c: i for i, c in enumerate(RATE_CLASSES)}
        none = len(params.keys)   # index of a constant 0 appended to the parameters
        n = len(points)
        idx = {k: np.zeros(n, dtype=int) for k in ("alone", "full", "busy", "decode", "latency", "wave", "request",
                                                   "harness", "stream")}
        columns = ("concurrency", "osl", "per_forward", "forwards_per_prompt", "chunks")
        self.shape = {k: np.ones(n) for k in columns}

        def add(works, chip, overheads: tuple[int, int], multiplicity: float) -> int:
            u = unit_times(works, chip)
            for k in rows:
                rows[k].append(np.asarray(getattr(u, k), dtype=float).reshape(len(OP_CLASSES)))
            cls.append([class_index[c] for c in u.rate_class])
            term_chip.append(params.index(chip.name, "memory") - len(RATE_CLASSES))  # the chip's first entry
            term_ovh.append(overheads)
            term_mult.append(multiplicity)
            return len(term_chip) - 1

        for i, m in enumerate(points):
            inst = parse_instance(m.instance)
            model = m.model_profile()
            stack = get_stack(m.stack)
            par = Parallel(inst.chips, m.moe)
            fwd = (params.index(stack.name, "forward_overhead_s"),
                   params.index(stack.name, "ep_forward_overhead_s") if expert_parallel(model, par) else none)
            shape = wave_shape(m.len_tokens, m.concurrency, stack)
            for key in ("alone", "full", "busy"):
                req, q, ctx, chunks = getattr(shape, key)
                idx[key][i] = add(pass_work(model, par, req, q, ctx, "prefill"), inst.chip, fwd,
                                  chunks / req if key == "busy" else chunks)
            idx["decode"][i] = add(decode_works(model, inst, float(m.concurrency), m.len_tokens + m.output_tokens / 2,
                                                m.moe, stack),
                                   inst.chip, (params.index(stack.name, "step_overhead_s"), none), 1.0)
            harness = harness_of(m)
            idx["harness"][i] = params.index(harness, "harness_latency_s") if harness else none
            idx["stream"][i] = params.index(harness, "harness_stream_s") if harness else none
            for key in ("latency", "wave", "request"):
                idx[key][i] = params.index(stack.name, {"latency": "latency_s", "wave": "wave_fraction",
                                                        "request": "request_overhead_s"}[key])
            values = (m.concurrency, max(m.output_tokens, 2), shape.per_forward, shape.busy_per_prompt, shape.alone[3])
            for k, value in zip(columns, values):
                self.shape[k][i] = float(value)
        self.params = params
        self.idx = idx
        self.u = {k: np.stack(v) for k, v in rows.items()}
        self.cls = np.asarray(cls)
        self.term_chip = np.asarray(term_chip)
        self.term_ovh = np.asarray(term_ovh)
        self.term_mult = np.asarray(term_mult)
        self.measured = {q: np.array([np.nan if getattr(m, f"{q}_s") is None else getattr(m, f"{q}_s")
                                      for m in points]) for q in QUANTITIES}
        self.mask = {q: np.isfinite(self.measured[q]) for q in QUANTITIES}

    def predict(self, x: np.ndarray, sharpness: float | None = None,
                effective: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Predicted TTFT, TPOT and busy time of every point; ``sharpness`` None = the model exactly, a number
        p = its maxima as p-norms (the calibration's continuation stages only, `SMOOTHING`); ``effective``: the
        log-values in effect instead of ``params.effective(x)`` (a fold that sets some entries itself)."""
        v = np.append(np.exp(self.params.effective(x) if effective is None else effective), 0.0)
        gemm = v[self.term_chip[:, None] + self.cls]                   # terms x ops
        memory = v[self.term_chip + len(RATE_CLASSES)][:, None]
        comm = v[self.term_chip + len(RATE_CLASSES) + 1][:, None]
        compute, traffic = self.u["compute"] / gemm, self.u["memory"] / memory
        roof = np.maximum(compute, traffic) if sharpness is None else smooth_max(compute, traffic, sharpness)
        t = ((roof + np.maximum(self.u["link"] / comm, self.u["nic"])
              + self.u["latency"]).sum(axis=1) + v[self.term_ovh].sum(axis=1)) * self.term_mult
        s, i = self.shape, self.idx
        client = v[i["harness"]] + v[i["stream"]] * (s["concurrency"] - 1.0)
        ttft, tpot = closed_queue(v[i["latency"]] + client, t[i["alone"]], t[i["full"]], s["per_forward"], t[i["busy"]],
                                 s["forwards_per_prompt"], t[i["decode"]], s["chunks"], s["concurrency"], s["osl"],
                                 v[i["wave"]], v[i["request"]], sharpness=sharpness)
        return {"ttft": ttft, "tpot": tpot, "busy": t[i["busy"]]}


def _residual_fn(problem: _Problem, params: _Params, keep: np.ndarray):
    """Residuals (data rows in quantity order, then the priors) and the point each data row belongs to."""
    masks = {q: problem.mask[q] & keep for q in QUANTITIES}
    logs = {q: np.log(np.where(problem.mask[q], problem.measured[q], 1.0)) for q in QUANTITIES}
    owner = np.concatenate([np.flatnonzero(masks[q]) for q in QUANTITIES] + [np.full(len(params.keys), -1)])

    def residuals(x, sharpness=None):
        pred = problem.predict(x, sharpness)
        data = [(np.log(pred[q][masks[q]]) - logs[q][masks[q]]) / SIGMA_MEASUREMENT for q in QUANTITIES]
        return np.concatenate(data + [(x - params.centre) / params.width])

    return residuals, owner


def _solve(problem: _Problem, params: _Params, keep: np.ndarray, x0: np.ndarray, full: bool = False):
    """MAP fit of the rows ``keep`` from ``x0``: the continuation stages of ``SMOOTHING`` (smoothed maxima), each
    from the last, then the exact model from there (docs/methods.md, "A smooth objective"). ``full``: also the
    exact stage's least_squares result (with ``stages``: cost, optimality, status, evaluations per stage) and
    the owner of each residual."""
    from scipy.optimize import least_squares

    residuals, owner = _residual_fn(problem, params, keep)
    x = np.clip(x0, params.lower + 1e-9, params.upper - 1e-9)
    stages = []
    for sharpness in (*SMOOTHING["continuation"], None):
        options = dict(bounds=(params.lower, params.upper), x_scale=SMOOTHING["x_scale"], method="trf", loss=LOSS,
                       f_scale=1.0, ftol=SMOOTHING["ftol"], kwargs={"sharpness": sharpness})
        try:
            res, solver = least_squares(residuals, x, **options), "exact"
        except np.linalg.LinAlgError:
            # LAPACK's SVD of the trust-region step failed to converge on an ill-conditioned Jacobian (seen on a
            # fold from one perturbed start): the same stage by the iterative trust-region solver instead
            res, solver = least_squares(residuals, x, tr_solver="lsmr", **options), "lsmr"
        stages.append({"sharpness": sharpness, "cost": float(res.cost), "optimality": float(res.optimality),
                       "status": int(res.status), "nfev": int(res.nfev), "tr_solver": solver})
        x = res.x
    res.stages = stages
    return (res, owner) if full else res.x


def _approximate_loo(problem: _Problem, res, owner: np.ndarray, n: int) -> list[np.ndarray]:
    """Parameters of the fit without each point by one Gauss-Newton step from the full fit (the standard
    approximation of leave-one-out for least squares; exact for a linear model), with the robust loss's
    row weights at the optimum."""
    weight = (1.0 + res.fun ** 2) ** -0.25          # sqrt of soft_l1's rho'(f^2)
    J = res.jac * weight[:, None]
    r = res.fun * weight
    H = J.T @ J
    out = []
    for i in range(n):
        rows = owner == i
        Ji, ri = J[rows], r[rows]
        step = np.linalg.lstsq(H - Ji.T @ Ji, Ji.T @ ri, rcond=None)[0]
        out.append(res.x + step)
    return out


@dataclass(frozen=True)
class TermReport:
    """One stack term after the fit: ``owner`` (a stack, or `POOL` for the term the stacks share), its
    ``value`` in effect (seconds, or a fraction for ``wave_fraction``), the ``prior`` centre it was shrunk
    toward (the pooled value for a stack's term), how many distinct model x configuration groups
    (model, instance, parallelism, stack) move it (``configurations``), and ``shift``: how far the data moved
    it, in prior widths (``(log value - log prior) / width``)."""

    owner: str
    name: str
    value: float
    prior: float
    configurations: int
    shift: float


def _term_reports(res, owner: np.ndarray, params: _Params, points: list) -> tuple[TermReport, ...]:
    data = owner >= 0
    groups = np.array([f"{m.model}|{m.instance}|{m.moe}|{m.stack}" for m in points])
    x_eff = params.effective(res.x)
    out = []
    for j, (who, name) in enumerate(params.keys):
        if who != POOL and j < params.pooled and name not in HARNESS_PRIORS:
            continue
        rows = data & (np.abs(res.jac[:, j]) > 1e-6)
        n = len(set(groups[owner[rows]])) if rows.any() else 0
        if who == POOL or name in HARNESS_PRIORS:
            prior, shift = float(np.exp(params.centre[j])), float((res.x[j] - params.centre[j]) / params.width[j])
        else:
            prior, shift = float(np.exp(x_eff[params.parent_of(j)])), float(res.x[j] / params.width[j])
        out.append(TermReport(who, name, float(np.exp(x_eff[j])), prior, n, shift))
    return tuple(out)


@dataclass(frozen=True)
class FitPoint:
    """A measured point with its in-sample, leave-one-out and leave-one-model-out predictions
    (``{quantity: seconds}``, only for the quantities measured)."""

    measurement: object
    predicted: dict = field(hash=False)
    loo: dict = field(hash=False)
    lomo: dict = field(hash=False)
    loco: dict = field(default_factory=dict, hash=False)   # only the rows a leave-one-chip-out fold predicts
    loco_server: dict = field(default_factory=dict, hash=False)   # the same, harness time at the full fit's

    def error(self, quantity: str, kind: str = "predicted") -> float | None:
        """Relative error (fraction; positive = predicted too slow) of ``quantity`` under ``kind``
        (``predicted``, ``loo``, ``lomo``, ``loco`` or ``loco_server``), or None when not measured or not
        predicted that way."""
        measured = getattr(self.measurement, f"{quantity}_s")
        predicted = getattr(self, kind).get(quantity)
        return None if measured is None or predicted is None else predicted / measured - 1.0


@dataclass(frozen=True)
class JointFit:
    """Fitted constants: ``chips`` (name -> `Calibration`) and ``stacks`` (name -> `StackProfile` with the
    fitted numbers), every point's predictions, the rows excluded and which constants the data did not
    identify (left at their prior)."""

    chips: dict = field(hash=False)
    stacks: dict = field(hash=False)
    points: tuple[FitPoint, ...]
    excluded: tuple[str, ...]
    unidentified: tuple[str, ...]
    loo_done: bool
    loo_exact: bool = False
    terms: tuple = ()   # `TermReport` per pooled, per-stack and per-version term
    versions: object = None   # `stack_versions.VersionLayer`: the per-version layer on this fit


    def summary(self, by: str, chip: str | None = None) -> list[dict]:
        """Median and worst |error| of TTFT, TPOT and busy per ``by`` (``chip``, ``stack``, ``version`` =
        stack@engine version, or ``model``), over the points on ``chip`` only when given: in-sample,
        leave-one-out, leave-one-model-out and (``loco_median``, over the rows a fold predicts, where there are
        any) leave-one-chip-out, as fractions; ``loco_server_median`` is leave-one-chip-out with the
        benchmark client's time at the full fit's (`_loco_predictions`)."""
        groups: dict[str, list[FitPoint]] = {}
        for p in self.points:
            m = p.measurement
            if chip is not None and m.chip != chip:
                continue
            key = (m.chip if by == "chip" else f"{m.stack}@{m.stack_version or 'unrecorded'}" if by == "version"
                   else getattr(m, by))
            groups.setdefault(key, []).append(p)
        out = []
        for key, pts in sorted(groups.items()):
            for q in QUANTITIES:
                row = {by: key, "quantity": q}
                for kind in ("predicted", "loo", "lomo"):
                    errs = [abs(e) for e in (p.error(q, kind) for p in pts) if e is not None]
                    if not errs:
                        break
                    label = {"predicted": "in", "loo": "loo", "lomo": "lomo"}[kind]
                    row.update({f"{label}_median": float(np.median(errs)), f"{label}_worst": float(max(errs))})
                    row["points"] = len(errs)
                loco = [abs(e) for e in (p.error(q, "loco") for p in pts) if e is not None]
                if loco and "points" in row:
                    row.update({"loco_median": float(np.median(loco)), "loco_worst": float(max(loco)),
                                "loco_points": len(loco)})
                    server = [abs(e) for e in (p.error(q, "loco_server") for p in pts) if e is not None]
                    row["loco_server_median"] = float(np.median(server))
                if "points" in row:
                    out.append(row)
        return out


def _identified(res, owner: np.ndarray, params: _Params) -> set[tuple[str, str]]:
    """Constants the measured points actually move at the fit: a nonzero column of the data rows' Jacobian
    (a constant only in memory-bound operators, or on a bound, is not). The others stay at their prior and
    the report and the written profiles say so."""
    moved = np.abs(res.jac[owner >= 0]).sum(axis=0) > 1e-6 * len(owner)
    return {key for key, m in zip(params.keys, moved) if m}


def _loco_predictions(problem: _Problem, params: _Params, points: list,
                      full: np.ndarray) -> tuple[dict[str, dict[int, float]], dict[str, dict[int, float]]]:
    """Leave-one-chip-out: per chip, its rows predicted by a fit without them, as the planner and `check` would
    predict a chip nobody calibrated -- its constants `constants.default_calibration` (the fit's prior centres,
    not a fabric partner's fitted collectives) and its harness campaigns the median of the same stack's other
    campaigns (`StackProfile.harness_entry`). Only rows whose stack has rows on another chip are predicted: a
    stack seen on one chip alone would measure an unseen engine, not an unseen chip. Returns those predictions
    and the server's part of them: the same fold with the chip's harness campaigns at the full fit's values
    ``full`` (log-values in effect), which saw the chip's rows. A plan never includes the client's time, so
    the second is what its error bars use (`Calibration.loco_error`); the client time of an unseen host is
    most of the first's miss, and a harness offset fitted on the rows can also absorb some of the server's, so
    the truth for a plan lies between the two. Each ``{quantity: {row: seconds}}``."""
    from .constants import default_calibration

    out: dict[str, dict[int, float]] = {q: {} for q in QUANTITIES}
    server: dict[str, dict[int, float]] = {q: {} for q in QUANTITIES}
    chips = np.array([m.chip for m in points])
    stacks = np.array([m.stack for m in points])
    for chip in sorted(set(chips)):
        held = chips == chip
        seen = set(stacks[~held])
        rows = np.flatnonzero(held & np.isin(stacks, sorted(seen)))
        if not len(rows):
            continue
        x = _solve(problem, params, ~held, params.centre.copy())
        eff = params.effective(x)
        default = default_calibration(get_hardware(chip))
        for j, (owner, name) in enumerate(params.keys):
            if owner == chip:
                kind, _, cls = name.partition(":")
                eff[j] = np.log(getattr(default, kind) if kind in ("memory", "comm") else default.gemm_efficiency(cls))
            elif owner.partition("/")[0].endswith(f"@{chip}"):
                harness, stack = owner.split("@")[0], owner.partition("/")[2]
                others = [params.index(o, name) for o, n in params.keys
                          if n == name and o.startswith(f"{harness}@") and o.endswith(f"/{stack}") and o != owner]
                eff[j] = np.log(np.median(np.exp(eff[others]))) if others else -np.inf
        own_harness = [j for j, (owner, _) in enumerate(params.keys) if owner.partition("/")[0].endswith(f"@{chip}")]
        with_own = eff.copy()
        with_own[own_harness] = full[own_harness]
        for target, values in ((out, eff), (server, with_own)):
            predicted = problem.predict(x, effective=values)
            for q in QUANTITIES:
                for i in rows:
                    if problem.mask[q][i]:
                        target[q][int(i)] = float(predicted[q][i])
    return out, server


def fit_joint(points: list, excluded: list[str] = (), data_name: str = "", loo: bool = True,
              lomo: bool = True, loco: bool = True) -> JointFit:
    """Fit chip and stack constants on ``points`` (`Measurement` rows); ``data_name`` names the files in
    the recorded sources; ``loo=False`` skips the leave-one-out refits (one per row), ``lomo=False`` the
    leave-one-model-out folds, ``loco=False`` the leave-one-chip-out ones (`_loco_predictions`)."""
    if len(points) < 2:
        raise PlanError("calibrate: need at least two measurements")
    points = [_engine_level(m) for m in points]
    chips = sorted({m.chip for m in points})
    stacks = sorted({get_stack(m.stack).name for m in points})
    params = _params(chips, stacks, sorted({harness_of(m) for m in points} - {""}))
    problem = _Problem(points, params)
    n = len(points)
    res, owner = _solve(problem, params, np.ones(n, bool), params.centre.copy(), full=True)
    x = res.x
    pred = problem.predict(x)
    loo_pred = {q: np.full(n, np.nan) for q in QUANTITIES}
    if loo:
        exact = n <= EXACT_LOO_POINTS
        fits = ([_solve(problem, params, np.arange(n) != i, x) for i in range(n)] if exact
                else _approximate_loo(problem, res, owner, n))
        for i, xi in enumerate(fits):
            p = problem.predict(np.clip(xi, params.lower, params.upper))
            for q in QUANTITIES:
                loo_pred[q][i] = p[q][i]
    lomo_pred = {q: np.full(n, np.nan) for q in QUANTITIES}
    models = np.array([m.model for m in points])
    for model in sorted(set(models)) if lomo else ():
        out = models == model
        # from the prior centre, as the full fit: started at the full fit's optimum, which has seen the held-out
        # model, a fold keeps that model's own values of the terms nothing else pins (docs/methods.md, "LOMO and
        # the optimizer's starting point": Kimi-K2 held out, +5% from there, +42-80% from anywhere else)
        p = problem.predict(_solve(problem, params, ~out, params.centre.copy()))
        for q in QUANTITIES:
            lomo_pred[q][out] = p[q][out]
    none = {q: {} for q in QUANTITIES}
    loco_pred, loco_server = _loco_predictions(problem, params, points, params.effective(x)) if loco else (none, none)
    fit_points = tuple(
        FitPoint(m, {q: float(pred[q][i]) for q in QUANTITIES if problem.mask[q][i]},
                 {q: float(loo_pred[q][i]) for q in QUANTITIES if problem.mask[q][i]},
                 {q: float(lomo_pred[q][i]) for q in QUANTITIES if problem.mask[q][i]},
                 {q: loco_pred[q][i] for q in QUANTITIES if i in loco_pred[q]},
                 {q: loco_server[q][i] for q in QUANTITIES if i in loco_server[q]})
        for i, m in enumerate(points))
    identified = _identified(res, owner, params)
    unidentified = tuple(f"{o} {k}" for o, k in params.keys if (o, k) not in identified)
    draft = JointFit({}, {}, fit_points, tuple(excluded), unidentified, loo, loo and n <= EXACT_LOO_POINTS)
    v = dict(zip(params.keys, np.exp(params.effective(x))))
    chip_fits = {c: _chip_calibration(c, v, identified, draft, data_name) for c in chips}
    stack_fits = {s: _stack_profile(get_stack(s), v, identified, draft, data_name) for s in stacks}
    stack_fits = {s: _with_harness(st, v, data_name) for s, st in stack_fits.items()}
    layer = fit_version_layer(problem, params, x, points, loo_pred, lomo_pred, SIGMA_MEASUREMENT, QUANTITIES)
    stack_fits = with_entries(stack_fits, layer, error_notes(points, layer, QUANTITIES))
    return JointFit(chip_fits, stack_fits, fit_points, tuple(excluded), unidentified, loo, draft.loo_exact,
                    _term_reports(res, owner, params, points) + version_terms(layer), layer)


def _engine_level(m):
    """The point with a ``NAME@VERSION`` stack tag split into the stack and its ``stack_version``: the joint
    fit's stack terms are the engine's, pooled over versions; versions are `stack_versions`' layer."""
    name, version = split_stack(m.stack)
    return dataclasses.replace(m, stack=name, stack_version=version) if version else m


def version_terms(layer) -> tuple[TermReport, ...]:
    """`TermReport` per fitted version term: prior = the engine's pooled value, shift in version widths."""
    return tuple(TermReport(f.label, t, v[0], v[1], v[4], v[3]) for f in layer.fits for t, v in f.terms.items())


def _error_note(fit: JointFit, by: str, key: str) -> str:
    parts = []
    for row in fit.summary(by):
        if row[by] == key:
            held = row["points"] >= MIN_ERROR_POINTS   # fewer: the profile records no held-out error either
            lomo = f", leave-one-model-out {row['lomo_median']:.0%}" if held and "lomo_median" in row else ""
            loo = f", LOO {row['loo_median']:.0%}" if held and "loo_median" in row and fit.loo_done else ""
            few = "" if held else ", too few for a held-out error"
            parts.append(f"{row['quantity'].upper()} median |err| {row['in_median']:.0%}{loo}{lomo} "
                         f"({row['points']} {plural(row['points'], 'point')}{few})")
    return "; ".join(parts)


def _chip_calibration(chip: str, v: dict, identified: set, fit: JointFit, data_name: str) -> Calibration:
    hw = get_hardware(chip)
    gemm = {c: float(f"{v[(chip, f'gemm:{c}')]:.4g}") for c in RATE_CLASSES
            if (c in hw.peak_tflops or c in KERNEL_DEFAULTS) and (chip, f"gemm:{c}") in identified}
    gemm.setdefault("bf16", float(f"{v[(chip, 'gemm:bf16')]:.4g}"))
    held = [k for k in (f"gemm:{c}" for c in RATE_CLASSES if c in hw.peak_tflops or c in KERNEL_DEFAULTS)
            if (chip, k) not in identified]
    held += [k for k in ("memory", "comm") if (chip, k) not in identified]
    source = (f"fitted by prfaas-plan calibrate jointly with the stacks on {data_name}, priors from {KERNEL_FILE}: "
              f"{_error_note(fit, 'chip', chip)}"
              + (f"; not identified by the data, left at the prior: {', '.join(held)}" if held else ""))
    rows = [row for row in fit.summary("chip", chip) if row["points"] >= MIN_ERROR_POINTS]
    loo = {row["quantity"]: float(f"{row['loo_median']:.3g}") for row in rows
           if fit.loo_done and "loo_median" in row}
    lomo = {row["quantity"]: float(f"{row['lomo_median']:.3g}") for row in rows if _has_lomo(row)}
    loco = {row["quantity"]: float(f"{row['loco_server_median']:.3g}") for row in rows
            if row.get("loco_points", 0) >= MIN_ERROR_POINTS}
    return Calibration(gemm=gemm, memory=float(f"{v[(chip, 'memory')]:.4g}"),
                       comm=float(f"{v[(chip, 'comm')]:.4g}"), source=source, loo_error=loo, lomo_error=lomo,
                       lomo_error_by_stack=_lomo_by_stack(fit, chip), loco_error=loco)


def _has_lomo(row: dict) -> bool:
    """Whether a `JointFit.summary` row holds a leave-one-model-out median (not skipped, not NaN)."""
    return "lomo_median" in row and bool(np.isfinite(row["lomo_median"]))


def _lomo_by_stack(fit: JointFit, chip: str) -> dict[str, dict[str, float]]:
    """Leave-one-model-out median |error| per stack and quantity on ``chip`` ({stack: {quantity: fraction}}),
    for the stacks with at least `MIN_ERROR_POINTS` held-out points of the quantity there."""
    out: dict[str, dict[str, float]] = {}
    for row in fit.summary("stack", chip):
        if row["points"] >= MIN_ERROR_POINTS and _has_lomo(row):
            out.setdefault(row["stack"], {})[row["quantity"]] = float(f"{row['lomo_median']:.3g}")
    return out


def _with_harness(stack: StackProfile, v: dict, data_name: str) -> StackProfile:
    """``stack`` with the fitted client time of each harness campaign that drove it (`harness.campaign`):
    written into the profile's ``harness:`` section for `check` and the reports, never used by a plan."""
    harness = {}
    for owner, term in sorted(v):
        name, _, of_stack = owner.rpartition("/")
        if term == "harness_latency_s" and of_stack == stack.name:
            harness[name] = HarnessEntry(latency_s=float(f"{v[(owner, 'harness_latency_s')]:.4g}"),
                             stream_s=float(f"{v[(owner, 'harness_stream_s')]:.4g}"),
                             source=f"fitted by prfaas-plan calibrate on {data_name}: client time the "
                                       f"{name.partition('@')[0]} harness adds to the TTFT it records on "
                                       f"{name.partition('@')[2]} (latency_s + stream_s per other in-flight "
                                       "request), apart from the engine's terms; not used by plans")
    return dataclasses.replace(stack, harness=harness)


def _stack_profile(stack: StackProfile, v: dict, identified: set, fit: JointFit, data_name: str) -> StackProfile:
    values, sources = {}, dict(stack.sources)
    note = _error_note(fit, "stack", stack.name)
    for name in STACK_PRIORS:
        values[name] = float(f"{v[(stack.name, name)]:.4g}")
        cap = ENGINE_UPPER.get(name) if stack.name in ENGINE_STACKS else None
        sources[name] = (f"at the engine bound {cap:g} (calibrate.ENGINE_UPPER: what an engine itself can cost; "
                         f"the data on {data_name} ask for more, which the harness's client time and the queue "
                         "carry)" if cap is not None and values[name] >= cap * (1 - 1e-3) else
                         f"fitted by prfaas-plan calibrate on {data_name} ({note})"
                         if (stack.name, name) in identified else
                         f"pooled: the term shared by the stacks fitted on {data_name} (this stack's data do not "
                         "identify it; its deviation stays at its prior, a factor 1)")
    return dataclasses.replace(stack, sources=sources, **values)
