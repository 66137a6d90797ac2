"""`link.SharedLink` with its state in numpy arrays and its steps compiled (`kernels.link_add` etc.): the same
operations in the same order, so the same floats, at a fraction of the cost per call (tests compare it with
`SharedLink`). The compiled event loop (`compiled_events`) keeps the link's arrays in one and runs the same
kernels on them itself, asking it only for room (`reserve`); importing it imports numba.

Rates in bytes/s, times in seconds, sizes in bytes; flow ids are ints (stored as floats: exact below 2**53).
"""

from __future__ import annotations

import math

import numpy as np

from . import kernels as k

INF = math.inf


class CompiledLink:
    """The interface of `SharedLink` the event loop uses: `advance`, `add`, `uncap`, `set_capacity`,
    `complete`, `unsent_bytes`, and ``t``, ``next_t``, ``capacity``, ``util``, ``bins``, ``peak_flows``."""

    def __init__(self, capacity_Bps: float, bin_s: float, tau_s: float):
        self._state = np.zeros(10)
        self._state[[k._CAPACITY, k._NEXT_T, k._BIN_S, k._TAU_S]] = capacity_Bps, INF, bin_s, tau_s
        self._flows = np.empty((4, 16))
        self._bins = np.zeros(1024)
        self._grow_at = (len(self._bins) - 2) * float(bin_s)  # the bins have room for any time before this
        self.bin_s = float(bin_s)
        self.capacity = float(capacity_Bps)
        self.t = 0.0
        self.next_t = INF
        self.n = 0
        self.peak_flows = 0

    @classmethod
    def from_state(cls, *, capacity_Bps: float, bin_s: float, tau_s: float, t: float, util: float,
                   bins: list[float], fids: list[int], caps: list[float], remaining: list[float],
                   rates: list[float], total_rate: float, next_t: float, next_slot: int,
                   peak_flows: int) -> "CompiledLink":
        """A link that goes on where a `link.SharedLink` stands: its clock (s), smoothed utilization, delivered
        bytes per bin, and its flows in start order (ids, caps B/s, remaining B, rates B/s) with the total rate,
        the next completion (s) and its slot (-1 if none)."""
        link = cls(capacity_Bps, bin_s, tau_s)
        n = len(fids)
        link._flows = np.empty((4, max(16, 2 * n)))
        link._flows[:, :n] = fids, caps, remaining, rates
        link._room(t)
        link._bins[:len(bins)] = bins
        s = link._state
        s[k._CLOCK], s[k._TOTAL], s[k._NEXT_T], s[k._UTIL] = t, total_rate, next_t, util
        s[k._N], s[k._NEXT_K], s[k._NB] = n, next_slot, len(bins)
        link.t, link.next_t, link.n, link.peak_flows = t, next_t, n, peak_flows
        return link

    @property
    def util(self) -> float:
        return float(self._state[k._UTIL])

    @property
    def bins(self) -> np.ndarray:
        return self._bins[:int(self._state[k._NB])]

    def _room(self, t: float) -> None:
        """Grow the bins to cover time ``t`` (s)."""
        if t >= self._grow_at:
            grown = np.zeros(max(2 * len(self._bins), int(t / self.bin_s) + 3))
            grown[:len(self._bins)] = self._bins
            self._bins = grown
            self._grow_at = (len(grown) - 2) * self.bin_s

    def reserve(self, t: float) -> None:
        """Room in the arrays for time ``t`` (s) and one more flow (what `event_kernels` asks for)."""
        self._room(t)
        if int(self._state[k._N]) == self._flows.shape[1]:
            self._flows = np.concatenate([self._flows, np.empty_like(self._flows)], axis=1)

    def advance(self, t: float) -> None:
        if t > self.t:
            if t >= self._grow_at:
                self._room(t)
            k.link_advance(self._state, self._flows, self._bins, t)
            self.t = t

    def add(self, t: float, fid: int, size: float, cap: float = INF) -> None:
        if t > self.t:
            if t >= self._grow_at:
                self._room(t)
            self.t = t
        if self.n == self._flows.shape[1]:
            self._flows = np.concatenate([self._flows, np.empty_like(self._flows)], axis=1)
        self.n += 1
        if self.n > self.peak_flows:
            self.peak_flows = self.n
        self.next_t = k.link_add(self._state, self._flows, self._bins, t, fid, float(size), cap)

    def uncap(self, t: float, fid: int) -> None:
        if t > self.t:
            if t >= self._grow_at:
                self._room(t)
            self.t = t
        self.next_t = k.link_uncap(self._state, self._flows, self._bins, t, fid)

    def set_capacity(self, t: float, capacity_Bps: float) -> None:
        self.advance(t)
        self.capacity = float(capacity_Bps)
        self._state[k._CAPACITY] = self.capacity
        self.next_t = k.link_reallocate(self._state, self._flows)

    def complete(self) -> tuple[float, int]:
        t = self.next_t
        if t > self.t:
            if t >= self._grow_at:
                self._room(t)
            self.t = t
        fid = int(k.link_complete(self._state, self._flows, self._bins))
        self.n -= 1
        self.next_t = float(self._state[k._NEXT_T])
        return t, fid

    def unsent_bytes(self) -> float:
        return k.link_unsent(self._state, self._flows)
