"""Workloads: what arrives at the system -- uncached input lengths, output lengths, and for traces the
requests themselves -- and the builders the CLI's ``--workload`` flag resolves to.

- `paper_workload`: the PrfaaS case study (``docs/methods.md`` section 6);
- `from_trace`: a Mooncake JSONL or CSV trace, optionally through prefix-cache replay;
- `resolve_workload`: ``paper``, ``trace`` (the bundled Mooncake conversation trace) or a file path.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import PlanError, closest_names
from .distributions import Empirical, Fixed, LengthDistribution, TruncatedLogNormal
from .prefix_cache import DEFAULT_BLOCK_SIZE, CacheReplay, replay_prefix_cache
from .traces import BUNDLED_TRACE, SUFFIXES, Trace, load_trace

PAPER_MU = 9.90
PAPER_SIGMA = 1.00
PAPER_LOW = 128
PAPER_HIGH = 128 * 1024
PAPER_OUTPUT = 1024
PAPER_SOURCE = ("Qin et al., 'Prefill-as-a-Service', arXiv 2604.15039, case study "
                "(docs/prfaas-brief.md section 7)")
MOONCAKE_SOURCE = "Mooncake conversation trace (kvcache-ai/Mooncake, Apache-2.0): 12,031 Kimi requests"

NAMES = ("paper", "trace")


@dataclass(frozen=True, eq=False)
class Workload:
    """A serving workload; lengths are tokens.

    ``input_length`` is the *uncached* prompt length (what prefill computes and what routing thresholds
    compare against); ``total_input_length`` the prompt before prefix caching (the same object when no
    cache applies). ``output_length`` may be given as an int (a fixed length). ``trace`` and ``cache``
    hold the per-request data of a trace workload; ``arrival_rate`` is its mean rate in requests/s.
    """

    name: str
    input_length: LengthDistribution
    output_length: LengthDistribution | int
    total_input_length: LengthDistribution | None = None
    notes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    trace: Trace | None = field(default=None, repr=False)
    cache: CacheReplay | None = field(default=None, repr=False)
    arrival_rate: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.output_length, LengthDistribution):
            object.__setattr__(self, "output_length", Fixed(self.output_length))
        if self.total_input_length is None:
            object.__setattr__(self, "total_input_length", self.input_length)

    @property
    def requests(self) -> int | None:
        """Number of requests of a trace workload (None for a distribution)."""
        return None if self.trace is None else len(self.trace)

    @property
    def uncached_lengths(self) -> np.ndarray | None:
        """Per-request uncached prompt tokens of a trace workload, in arrival order (None otherwise)."""
        if self.trace is None:
            return None
        return self.trace.input_length if self.cache is None else self.cache.uncached_length


def paper_workload() -> Workload:
    """The case study's workload: uncached input ~ truncated log-normal (mu 9.90, sigma 1.00) on
    [128, 128K] tokens with K = 1024 (the planner's convention), output fixed at 1,024 tokens."""
    dist = TruncatedLogNormal(PAPER_MU, PAPER_SIGMA, PAPER_LOW, PAPER_HIGH)
    alt = TruncatedLogNormal(PAPER_MU, PAPER_SIGMA, PAPER_LOW, 128_000).mean()
    notes = (
        f"uncached input ~ log-normal mu {PAPER_MU:.2f}, sigma {PAPER_SIGMA:.2f} truncated to "
        f"[{PAPER_LOW}, {PAPER_HIGH:,}] tokens ('128K' read with K = 1024): mean {dist.mean():,.0f} tokens "
        f"(a 128,000 bound gives {alt:,.0f}; the paper says 'about 27K')",
        f"output fixed at {PAPER_OUTPUT:,} tokens",
    )
    return Workload("paper", dist, PAPER_OUTPUT, notes=notes, sources=(PAPER_SOURCE,))


def from_trace(trace: str | Path | Trace, *, prefix_cache: bool | None = None,
               block_size: int = DEFAULT_BLOCK_SIZE, capacity_blocks: int | None = None,
               route: Callable[[int], Hashable] | None = None, name: str | None = None) -> Workload:
    """A workload from a trace file (or a loaded `Trace`), with empirical length distributions.

    ``prefix_cache``: replay the hash ids through a prefix cache (`replay_prefix_cache`, with
    ``block_size``, ``capacity_blocks`` and ``route``) so ``input_length`` is the uncached length;
    ``None`` replays whenever the trace has hash ids, ``True`` insists (a CSV trace is then an error).
    """
    if not isinstance(trace, Trace):
        trace = load_trace(trace)
    replay = prefix_cache if prefix_cache is not None else trace.block_ids is not None
    total = Empirical(trace.input_length)
    bundled = Path(trace.path) == BUNDLED_TRACE
    notes = [f"{len(trace):,} request{'' if len(trace) == 1 else 's'} from "
             f"{'the bundled Mooncake trace' if bundled else trace.path}"]
    cache = None
    if replay:
        cache = replay_prefix_cache(trace, block_size, capacity_blocks, route)
        scope = "one global cache" if route is None else f"{cache.caches} caches chosen by the route"
        size = "unlimited" if capacity_blocks is None else \
            f"{capacity_blocks:,} blocks{'' if route is None else ' each'}"
        notes.append(f"input = uncached length after replaying hash ids through an LRU prefix cache "
                     f"({scope}, {size}, {block_size}-token blocks, at least 1 token prefilled): "
                     f"token hit rate {cache.token_hit_rate:.1%}")
        uncached = Empirical(cache.uncached_length)
    else:
        notes.append("input = total prompt length (no prefix-cache replay)")
        uncached = total
    if trace.arrival_rate is None:
        notes.append("no arrival times in the trace")
    return Workload(
        name=name or Path(trace.path).stem,
        input_length=uncached,
        output_length=Empirical(trace.output_length),
        total_input_length=total,
        notes=tuple(notes),
        sources=(MOONCAKE_SOURCE,) if bundled else (trace.path,),
        trace=trace,
        cache=cache,
        arrival_rate=trace.arrival_rate,
    )


def resolve_workload(spec: str, *, prefix_cache: bool | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                     capacity_blocks: int | None = None, what: str = "`workload`") -> Workload:
    """The workload named by a ``--workload`` value: ``paper`` (`paper_workload`), ``trace`` (the bundled
    Mooncake conversation trace) or a path to a ``.jsonl`` / ``.csv`` trace (`from_trace`).

    ``prefix_cache`` and the cache settings apply to traces (None: replay when the trace has hash ids);
    asking for prefix caching on the paper workload is an error, its lengths are already uncached.
    """
    text = str(spec).strip()
    if text.lower() == "paper":
        if prefix_cache:
            raise PlanError(f"{what} paper: prefix-cache replay needs a trace with hash ids; the paper's "
                            f"lengths are already uncached (drop `prefix_cache`)")
        return paper_workload()
    kwargs = dict(prefix_cache=prefix_cache, block_size=block_size, capacity_blocks=capacity_blocks)
    if text.lower() == "trace":
        return from_trace(BUNDLED_TRACE, name="mooncake-conversation", **kwargs)
    path = Path(text)
    if text and (path.suffix.lower() in SUFFIXES or path.exists()):  # Path("") is ".", which exists
        return from_trace(path, **kwargs)
    hint = closest_names(text, NAMES)
    hint = f" ({hint})" if hint.startswith("did you mean") else ""
    raise PlanError(f"{what} {text!r}: expected paper, trace or a path to a {' or '.join(SUFFIXES)} "
                    f"trace{hint}")
