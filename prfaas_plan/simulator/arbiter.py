"""The remote prefill pool several PD sites share (`multisite.simulate_sites`), and who gets a freed instance.

Every site's remote requests wait in one queue per site. ``fcfs`` (the static and threshold schedulers) serves
them in the order they arrived at the pool, whatever the site: the plan's pool. ``link-aware`` (the adaptive
scheduler) serves the waiting request whose KV can start crossing first: the head of the site whose
``enqueued at + unsent KV seconds on its link`` is the smallest (the unsent KV at the link's current goodput,
`site_state.SiteState.unsent_s`). A site whose link backs up yields its turn to the sites whose links are
free by at most the time its own KV would wait at its link anyway, so the pool's seconds go where their
result reaches decode first, and no site starves (its key stays its arrival time plus a finite backlog). Each
out-of-order start is counted per site (``ahead``: served before an older request of another site;
``yielded``: its older request waited).

Times in seconds.
"""

from __future__ import annotations

import math
from collections import deque

INF = math.inf
ARBITRATIONS = ("fcfs", "link-aware")


class RemotePool:
    """``n`` remote prefill instances shared by ``sites`` PD sites under ``arbitration`` (`ARBITRATIONS`)."""

    def __init__(self, n: int, sites: int, arbitration: str = "fcfs"):
        if arbitration not in ARBITRATIONS:
            raise ValueError(f"arbitration must be one of {ARBITRATIONS}")
        self.n = n
        self.free = n
        self.arbitration = arbitration
        self.queues = [deque() for _ in range(sites)]   # per site: (sequence, enqueued at, request, work)
        self.waiting = [0] * sites
        self.work = 0.0                                 # prefill seconds waiting, every site
        self.seq = 0
        self.ahead = [0] * sites
        self.yielded = [0] * sites

    def work_per_instance(self) -> float:
        """Waiting prefill seconds per remote instance (inf without one)."""
        return self.work / self.n if self.n else INF

    def queue_per_instance(self) -> float:
        """Waiting requests per remote instance (0 without one)."""
        return sum(self.waiting) / self.n if self.n else 0.0

    def take(self) -> bool:
        """Occupy a free instance if there is one."""
        if self.free > 0:
            self.free -= 1
            return True
        return False

    def push(self, k: int, rid: int, t: float, work: float) -> None:
        """Site ``k``'s request ``rid`` waits from ``t`` with ``work`` prefill seconds."""
        self.queues[k].append((self.seq, t, rid, work))
        self.seq += 1
        self.waiting[k] += 1
        self.work += work

    def pop(self, t: float, sites) -> tuple[int, int] | None:
        """A freed instance at ``t``: (site, request) it starts, or None (the instance stays free). ``sites``:
        the `site_state.SiteState` of each site (their links' backlogs, for ``link-aware``)."""
        heads = [(q[0], k) for k, q in enumerate(self.queues) if q]
        if not heads:
            self.free += 1
            return None
        oldest = min(heads)[1]
        k = oldest
        if self.arbitration == "link-aware" and len(heads) > 1:
            k = min(heads, key=lambda h: (h[0][1] + sites[h[1]].unsent_s(t), h[0][0]))[1]
            if k != oldest:
                self.ahead[k] += 1
                self.yielded[oldest] += 1
        _, _, rid, work = self.queues[k].popleft()
        self.waiting[k] -= 1
        self.work -= work
        return k, rid
