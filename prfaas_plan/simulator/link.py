"""The inter-datacenter link as a shared pipe: processor sharing among concurrent transfers, with a
time-varying line rate and transfers limited by how fast prefill produces their cache.

Each transfer (flow) has a size in bytes and an optional production cap (bytes/s): a remote prefill of
``T`` seconds produces all but its last layer's KV at a steady rate while it runs, so its flow may send at
most ``S (1 - 1/layers) / T`` until prefill ends, and then the rest as fast as its share allows. Rates
are max-min fair (water-filling): capped flows get their cap when it is below the equal share, the rest
split what remains. Rates only change at events, so between events every flow drains linearly.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path

from ..errors import PlanError
from ..textfile import cannot_read, not_utf8

INF = math.inf


@dataclass(frozen=True)
class LinkProfile:
    """Piecewise-constant line rate: from ``times_s[i]`` on the link runs at ``bps[i]`` bit/s (before the
    first point, at the layout's nominal rate)."""

    times_s: tuple[float, ...]
    bps: tuple[float, ...]

    @classmethod
    def drop(cls, start_s: float, duration_s: float, nominal_bps: float, factor: float) -> "LinkProfile":
        """The nominal rate scaled by ``factor`` from ``start_s`` for ``duration_s`` seconds."""
        return cls((start_s, start_s + duration_s), (nominal_bps * factor, nominal_bps))


MAX_LINK_PROFILE_ROWS = 1_000_000  # one row a second for 11 days; raise here for longer recordings


def read_link_profile(path: str | Path) -> LinkProfile:
    """Read a CSV with exactly the columns ``time_s,gbps`` (times in seconds, non-decreasing; rates in
    1e9 bit/s, >= 0), at most `MAX_LINK_PROFILE_ROWS` rows. Raises `PlanError` naming the file and line
    on anything else."""
    from ..errors import closest_names
    from ..units import parse_finite

    p = Path(path)
    if not p.is_file():
        raise PlanError(f"`link_profile` {str(path)!r}: no such file")
    times: list[float] = []
    rates: list[float] = []
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = [h.strip() for h in next(reader, [])]
            for name in header:
                if name not in ("time_s", "gbps"):
                    raise PlanError(f"{p}:1: unknown column {name!r}; {closest_names(name, ('time_s', 'gbps'))}")
            if sorted(header) != ["gbps", "time_s"]:
                raise PlanError(f"{p}: expected a CSV header with columns time_s,gbps")
            it, ig = header.index("time_s"), header.index("gbps")
            for values in reader:
                line = reader.line_num
                if not values or not "".join(values).strip():
                    continue
                if len(values) != 2:
                    raise PlanError(f"{p}:{line}: expected 2 fields time_s,gbps, got {len(values)}")
                if len(times) >= MAX_LINK_PROFILE_ROWS:
                    raise PlanError(f"{p}: more than {MAX_LINK_PROFILE_ROWS:,} rows (the cap is "
                                    "MAX_LINK_PROFILE_ROWS in prfaas_plan/simulator/link.py)")
                t = parse_finite(values[it].strip(), f"{p}:{line}: time_s", minimum=0)
                g = parse_finite(values[ig].strip(), f"{p}:{line}: gbps", minimum=0, maximum=1e9)
                if times and t < times[-1]:
                    raise PlanError(f"{p}:{line}: time_s {t!r} goes backwards (previous {times[-1]!r})")
                times.append(t)
                rates.append(g * 1e9)
    except UnicodeDecodeError:
        raise not_utf8(p, "a link profile CSV time_s,gbps") from None
    except csv.Error as exc:
        raise PlanError(f"{p}: malformed CSV ({exc})") from None
    except OSError as exc:
        raise cannot_read(p, exc) from None
    if not times:
        raise PlanError(f"{p}: no rows (expected time_s,gbps lines after the header)")
    return LinkProfile(tuple(times), tuple(rates))


PROMOTE_AT = 256
"""Flows at once from which `SharedLink` hands its state to `compiled_link.CompiledLink` for the rest of the run.
Each event costs time linear in the flows sending (and the Python rate allocation sorts them), so a link backlog
of thousands of flows (a drop to a tenth of line rate on a busy link) made the pure-Python link 99% of a run; the
compiled twin repeats the same operations on the same floats, so a run's results do not depend on this constant,
only its time (and whether it imports numba: below it, none)."""


class SharedLink:
    """Processor-sharing pipe. Rates in bytes/s, times in seconds, sizes in bytes. Flow ids are ints.

    ``next_t`` is the time the next flow completes (inf when none can); `complete` pops it. Delivered
    bytes are accumulated in ``bins`` of ``bin_s`` seconds, and ``util`` is the link utilization
    (delivered / capacity) smoothed exponentially with time constant ``tau_s``. From `PROMOTE_AT` flows at once
    on (``promote_at``, for tests), every step runs on the compiled twin (`compiled_link.CompiledLink`); ``t``, ``next_t``, ``capacity``
    and ``peak_flows`` are mirrored after each step.
    """

    def __init__(self, capacity_Bps: float, bin_s: float, tau_s: float, promote_at: int | None = None):
        self.capacity = float(capacity_Bps)
        self.bin_s = float(bin_s)
        self.tau_s = float(tau_s)
        self.t = 0.0
        self.remaining: dict[int, float] = {}
        self.cap: dict[int, float] = {}
        self.rate: dict[int, float] = {}
        self.total_rate = 0.0
        self.next_t = INF
        self.next_fid = 0
        self._util = 0.0
        self._bins: list[float] = []
        self.peak_flows = 0
        self._promote_at = PROMOTE_AT if promote_at is None else promote_at
        self._compiled = None  # the compiled twin, once the flows have reached it

    @property
    def util(self) -> float:
        return self._util if self._compiled is None else self._compiled.util

    @property
    def n_flows(self) -> int:
        """Flows sending or waiting to send."""
        return len(self.remaining) if self._compiled is None else self._compiled.n

    @property
    def bins(self):
        """Delivered bytes per bin of ``bin_s`` seconds (a list, or an array once compiled)."""
        return self._bins if self._compiled is None else self._compiled.bins

    def advance(self, t: float) -> None:
        """Drain every flow at its current rate up to time ``t``."""
        if self._compiled is not None:
            self._compiled.advance(t)
            self.t = self._compiled.t
            return
        t0 = self.t
        dt = t - t0
        if dt <= 0.0:
            return
        r = self.total_rate
        if r > 0.0:
            rem = self.remaining
            for fid, x in self.rate.items():
                rem[fid] -= x * dt
            bins, bs = self._bins, self.bin_s
            b = int(t0 / bs)
            if b == int(t / bs) and b < len(bins):  # the common case: within one bin already counted
                bins[b] += r * dt
            else:
                self._account(t0, t, r)
        if self.tau_s > 0.0:
            now = r / self.capacity if self.capacity > 0 else (1.0 if self.remaining else 0.0)
            self._util = now + (self._util - now) * math.exp(-dt / self.tau_s)
        self.t = t

    def add(self, t: float, fid: int, size: float, cap: float = INF) -> None:
        """Start a flow of ``size`` bytes at ``t``, sending at most ``cap`` bytes/s until `uncap`."""
        if self._compiled is not None:
            self._compiled.add(t, fid, size, cap)
            self._mirror()
            return
        if t > self.t:
            self.advance(t)
        self.remaining[fid] = float(size)
        self.cap[fid] = cap
        if len(self.remaining) > self.peak_flows:
            self.peak_flows = len(self.remaining)
        self._reallocate()
        if len(self.remaining) >= self._promote_at:
            self._promote()

    def uncap(self, t: float, fid: int) -> None:
        """Lift a flow's production cap (its prefill has ended)."""
        if self._compiled is not None:
            self._compiled.uncap(t, fid)
            self._mirror()
            return
        if t > self.t:
            self.advance(t)
        self.cap[fid] = INF
        self._reallocate()

    def set_capacity(self, t: float, capacity_Bps: float) -> None:
        """Change the goodput from time ``t`` on."""
        if self._compiled is not None:
            self._compiled.set_capacity(t, capacity_Bps)
            self._mirror()
            return
        self.advance(t)
        self.capacity = float(capacity_Bps)
        self._reallocate()

    def complete(self) -> tuple[float, int]:
        """Advance to the next completion and remove that flow: ``(time, flow id)``."""
        if self._compiled is not None:
            done = self._compiled.complete()
            self._mirror()
            return done
        t, fid = self.next_t, self.next_fid
        if t > self.t:
            self.advance(t)
        del self.remaining[fid], self.cap[fid], self.rate[fid]
        self._reallocate()
        return t, fid

    def unsent_bytes(self) -> float:
        """Bytes not yet sent, over every flow."""
        if self._compiled is not None:
            return self._compiled.unsent_bytes()
        return sum(self.remaining.values())

    def _mirror(self) -> None:
        c = self._compiled
        self.t, self.next_t, self.capacity, self.peak_flows = c.t, c.next_t, c.capacity, c.peak_flows

    def _promote(self) -> None:
        """Hand the state to the compiled twin (imports numba); the dicts are dropped."""
        from .compiled_link import CompiledLink

        fids = list(self.remaining)
        self._compiled = CompiledLink.from_state(
            capacity_Bps=self.capacity, bin_s=self.bin_s, tau_s=self.tau_s, t=self.t, util=self._util,
            bins=self._bins, fids=fids, caps=[self.cap[f] for f in fids], remaining=list(self.remaining.values()),
            rates=[self.rate[f] for f in fids], total_rate=self.total_rate, next_t=self.next_t,
            next_slot=fids.index(self.next_fid) if self.next_t < INF else -1, peak_flows=self.peak_flows)
        self.remaining, self.cap, self.rate = {}, {}, {}

    def _reallocate(self) -> None:
        """Max-min fair rates, then the next completion."""
        caps = self.cap
        demand = sum(caps.values())
        if demand <= self.capacity:  # every flow is producer-limited: no contention
            self.rate = caps.copy()
            self.total_rate = demand
            self.next_t, self.next_fid = INF, 0
            return
        self.rate = rate = {}
        n = len(caps)
        left = self.capacity
        rem = self.remaining
        best, best_fid = INF, 0
        for fid, c in sorted(caps.items(), key=itemgetter(1)):
            share = left / n
            x = c if c < share else share
            rate[fid] = x
            left -= x
            n -= 1
            if c == INF:  # uncapped: may be the next to complete
                r = rem[fid]
                d = r / x if x > 0.0 else (0.0 if r <= 0.0 else INF)
                if d < best:
                    best, best_fid = d, fid
        self.total_rate = self.capacity - left
        self.next_t = self.t + max(best, 0.0) if best < INF else INF
        self.next_fid = best_fid

    def _account(self, t0: float, t1: float, r: float) -> None:
        bs = self.bin_s
        b0, b1 = int(t0 / bs), int(t1 / bs)
        bins = self._bins
        if len(bins) <= b1:
            bins.extend([0.0] * (b1 + 1 - len(bins)))
        if b0 == b1:
            bins[b0] += r * (t1 - t0)
            return
        bins[b0] += r * ((b0 + 1) * bs - t0)
        for k in range(b0 + 1, b1):
            bins[k] += r * bs
        bins[b1] += r * (t1 - b1 * bs)
