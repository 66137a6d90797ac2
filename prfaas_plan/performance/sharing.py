"""Per-instance performance models shared by the questions of one batch (a sweep's task), opt in.

A sweep plans many questions whose configuration searches build the same per-instance models again and again
(the prefill model of an 8xH200 instance, the decode capacity of a 4xH20 instance at 25 ms), whatever the
pool sizes, links and prices that differ between its points. Functions marked `shared` remember their
answers in the memo of the innermost `sharing` block, keyed by their arguments; outside one they compute
as always. The answers are the functions' own for the same arguments (they are pure, and their arguments
and results immutable), so a sweep's rows are the same with or without the memo
(tests/test_sweep_speed.py); the same model object also lets `analytic.throughput.LengthGrid` reuse its
tables of that model. A memo holds at most `MAX_ENTRIES` answers.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager

MAX_ENTRIES = 4096
_ACTIVE: list[dict | None] = [None]
_MISSING = object()


@contextmanager
def sharing(memo: dict):
    """Within the block, `shared` functions answer from ``memo`` (a dict the caller keeps between blocks)."""
    previous = _ACTIVE[0]
    _ACTIVE[0] = memo
    try:
        yield memo
    finally:
        _ACTIVE[0] = previous


def one_memo_per_call(fn):
    """Run each call of ``fn`` (a question's whole answer) inside a `sharing` block, so the searches it runs
    more than once (the plan, its link-headroom alternatives, its error bars' re-searches) build each
    per-instance model once; inside an enclosing block (a sweep's) that block's memo is used."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _ACTIVE[0] is not None:
            return fn(*args, **kwargs)
        with sharing({}):
            return fn(*args, **kwargs)

    return wrapper


def shared(fn):
    """Mark a pure function of hashable arguments as answerable from the active `sharing` memo (an
    argument that cannot be hashed, or an exception, computes without it)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        memo = _ACTIVE[0]
        if memo is None:
            return fn(*args, **kwargs)
        key = (fn.__qualname__, args, tuple(sorted(kwargs.items())))
        try:
            hit = memo.get(key, _MISSING)
        except TypeError:
            return fn(*args, **kwargs)
        if hit is _MISSING:
            if len(memo) >= MAX_ENTRIES:
                memo.clear()
            hit = memo[key] = fn(*args, **kwargs)
        return hit

    return wrapper


def remembered(cache: dict, key, compute, limit: int):
    """``cache[key]``, from ``compute()`` on a miss; a cache already holding ``limit`` answers is emptied first
    (a long-lived process must not keep every answer it gave). Key an object by identity with `Same`."""
    hit = cache.get(key, _MISSING)
    if hit is _MISSING:
        if len(cache) >= limit:
            cache.clear()
        hit = cache[key] = compute()
    return hit


class Same:
    """A memo key that matches only the very object it wraps (by identity, not value): for an argument
    that cannot be hashed, such as a length grid of arrays. The memo keeps the key, and with it the object,
    so its identity cannot be recycled while the answer is remembered."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return isinstance(other, Same) and other.obj is self.obj
