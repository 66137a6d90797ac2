"""One PD site's pools in the multi-site event loop (`multisite.simulate_sites`): its local prefill pool
(planned FCFS queue, the adaptive scheduler's spilled requests at low priority, preempted at their next yield
point: `events`, step 2), its decode pool (continuous batching over slots), the role conversions between the
two, its link, its timeline and its long-term periods. The rules are those of the one-site reference loop
(`events`, steps 2-4 of its docstring), applied to one site's state; the site's policy (`policies`) decides,
the site applies.

Times in seconds, sizes in bytes, rates in bytes/s (links) or bit/s (line rates), lengths in tokens.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import replace
from heapq import heappush

from .event_parts import (DECODE_DONE, LOCAL_DONE, READY, REMOTE_DONE, first_boundary, long_term_change,
                          recent_samples, service_tables, spill_tables)
from .link import SharedLink
from .policies import ArrivalObs
from .tables import TablePrefill

INF = math.inf


class Book:
    """The run's per-request records (lists indexed by request id, NaN where a stage was not reached), output
    lengths and the event heap, shared by every site of the loop."""

    def __init__(self, n: int, outlen: list):
        nan = math.nan
        self.route = [-1] * n
        self.uncached = [0] * n
        self.p_start, self.p_end, self.ready, self.d_start, self.finish = ([nan] * n for _ in range(5))
        self.flow_bytes = [0.0] * n
        self.spilled = bytearray(n)      # 1: a low-priority local prefill (`policies.ArrivalDecision`)
        self.outlen = outlen
        self.heap: list = []


MIN_SHARE = 1e-3
"""The least share of the remote pool a site's rules assume (a site planned to send nothing remote)."""


class SiteState:
    """The mutable state of PD site ``k`` (its `multisite.SiteRun` ``run``) under ``policy``, writing into
    ``book``; ``pool`` is the shared remote prefill pool (`arbiter.RemotePool`). ``share`` is the site's
    planned share of the pool's prefill seconds (1: the pool is its own, as on one site): its rules see the
    pool as that share of it, so that one site's rules do not take the capacity the plan gave the others. The
    short-term rule's remote backlog is the pool's queued work per instance divided by ``share`` (the wait if
    the site had its share only), and the long-term rule's throughput model prefills remotely at ``share`` of
    the pool's rate (the remote table's seconds divided by it)."""

    def __init__(self, k: int, run, requests, cfg, policy, router, book: Book, pool, share: float = 1.0):
        sysm = run.system
        self.k, self.sysm, self.policy, self.router, self.book, self.pool = k, sysm, policy, router, book, pool
        self.share = max(float(share), MIN_SHARE)
        svc, self.reopt_perf = service_tables(requests, sysm)
        if self.share < 1.0:
            self.reopt_perf = replace(self.reopt_perf, remote_prefill=TablePrefill(
                svc["remote_s"] / self.share, f"simulator table at {self.share:.1%} of the remote pool"))
        self.t_local = svc["local_s"].tolist()
        self.spill_chunk, self.spill_points, self.t_spill = spill_tables(sysm, policy, self.t_local)
        self.t_remote = svc["remote_s"].tolist()
        self.skv = svc["skv_bytes"].tolist()
        self.tail = svc["tail_s"].tolist()
        self.exposed = svc["remote_exposed_s"].tolist()
        self.link = SharedLink(sysm.goodput_Bps, cfg.sample_s, cfg.short_term.tau_s)
        self.reacts = policy.reacts and sysm.remote_ok
        self.periodic = policy.periodic
        self.spare = policy.spare_instances
        self.lp_servers = self.lp_free = sysm.n_prefill
        self.lp_convert = 0                  # busy prefill instances to hand to decode when done
        self.lp_queue: deque = deque()
        self.lp_work = 0.0                   # prefill seconds waiting in the planned queue
        self.spill_queue: deque = deque()
        self.spill_work = 0.0                # prefill seconds waiting in the spill queue
        self.spill_gen: dict = {}            # spilled request -> its current LOCAL_DONE's aux (older: stale)
        self.spill_left: dict = {}           # preempted spilled request -> prefill seconds still to run
        self.spill_running: dict = {}        # spilled request on an instance -> (this run's start, seconds left)
        self.spill_counts = [0, 0]           # spilled requests, preemptions
        self.dec_active = [0] * sysm.n_decode
        self.dec_open = list(range(sysm.n_decode))
        self.free_slots = [d for d in self.dec_open for _ in range(sysm.slots)]
        self.draining: set = set()           # decode instances finishing their batch before prefill
        self.dec_queue: deque = deque()
        self.area = {"local_prefill": 0.0, "remote_prefill": 0.0, "local_decode": 0.0}
        self.area_t = 0.0
        self.thr = sysm.threshold
        self.rows: list[tuple] = []
        self.roles: list[dict] = []
        self.periods: list[dict] = []
        self.period_u: list[int] = []        # uncached lengths of the period's arrivals (PD cluster's view)
        self.period_out: list[int] = []      # their output lengths
        self.moves = [0, 0.0]
        self.arrived = 0
        self.completed = 0
        self.obs = ArrivalObs(self.backlogs)

    # ------------------------------------------------------------------------------------------ observing
    def backlogs(self) -> tuple[float, float]:
        """(remote, local) backlog in seconds (`scheduler.ShortTermRule`): the shared remote queue's work per
        remote instance of the site's share of the pool plus this site's unsent KV at its link's current
        goodput; the local queues' work per local prefill instance."""
        link = self.link
        unsent_s = link.unsent_bytes() / link.capacity if link.capacity > 0 else INF
        n = self.lp_servers
        return self.pool.work_per_instance() / self.share + unsent_s, (self.lp_work + self.spill_work) / n if n else INF

    def unsent_s(self, t: float) -> float:
        """Seconds this site's link needs at its current goodput for the KV not yet sent at ``t``."""
        link = self.link
        if t > link.t:
            link.advance(t)
        return link.unsent_bytes() / link.capacity if link.capacity > 0 else INF

    def row(self, t: float) -> tuple:
        """One timeline sample (`event_parts.SAMPLE_KEYS`) at ``t``."""
        sy = self.sysm
        return (t, self.link.capacity * 8e-9 / sy.efficiency if sy.remote_ok else 0.0, self.pool.waiting[self.k],
                len(self.lp_queue) + len(self.spill_queue), self.lp_servers - self.lp_free, len(self.dec_queue),
                sum(self.dec_active), self.thr, self.lp_servers - self.lp_convert, len(self.dec_open),
                self.arrived - self.completed)

    def account(self, t: float) -> None:
        """Server-seconds provisioned per stage up to ``t`` (the split changes with conversions)."""
        dt = t - self.area_t
        self.area["local_prefill"] += self.lp_servers * dt
        self.area["remote_prefill"] += self.pool.n * dt
        self.area["local_decode"] += (len(self.dec_open) + len(self.draining)) * self.sysm.slots * dt
        self.area_t = t

    # ------------------------------------------------------------------------------------ local prefill
    def _start_local(self, rid: int, t: float) -> None:
        self.book.p_start[rid] = t
        heappush(self.book.heap, (t + self.t_local[self.book.uncached[rid]], LOCAL_DONE, rid, 0))

    def _start_spilled(self, rid: int, t: float, left: float) -> None:
        p_start = self.book.p_start
        if p_start[rid] != p_start[rid]:  # NaN: its first start
            p_start[rid] = t
        gen = self.spill_gen[rid] = self.spill_gen.get(rid, 0) + 1
        self.spill_running[rid] = (t, left)
        heappush(self.book.heap, (t + left, LOCAL_DONE, rid, gen))

    def _next_spilled(self, t: float) -> None:
        rid = self.spill_queue.popleft()
        left = self.spill_left.pop(rid, None)
        if left is None:
            left = self.t_spill[self.book.uncached[rid]]
        self.spill_work -= left
        self._start_spilled(rid, t, left)

    def _enqueue_spilled(self, rid: int, t: float) -> None:
        self.spill_counts[0] += 1
        if self.lp_free > self.spare:
            self.lp_free -= 1
            self._start_spilled(rid, t, self.t_spill[self.book.uncached[rid]])
        else:
            self.spill_queue.append(rid)
            self.spill_work += self.t_spill[self.book.uncached[rid]]

    def _preempt(self, t: float) -> float:
        """A planned arrival at ``t`` takes an instance from a spilled run at that run's next yield point;
        returns when it can start, or -1 when every spilled run is in its last step (`events`, step 2)."""
        best, best_rid, best_left = first_boundary(self.spill_running, self.t_spill, self.book.uncached,
                                                   self.spill_chunk, t, self.spill_points)
        if best_rid < 0:
            return -1.0
        del self.spill_running[best_rid]
        self.spill_gen[best_rid] += 1  # its pending LOCAL_DONE is stale now
        self.spill_left[best_rid] = best_left
        self.spill_queue.appendleft(best_rid)
        self.spill_work += best_left
        self.spill_counts[1] += 1
        return t + max(best, 0.0)

    def enqueue_local(self, rid: int, t: float) -> None:
        """A request routed local reaches the pool: a spilled one at low priority, else the planned FCFS
        queue (taking an instance from a spilled run at its next yield point when none is free)."""
        if self.book.spilled[rid]:
            self._enqueue_spilled(rid, t)
        elif self.lp_free > 0:
            self.lp_free -= 1
            self._start_local(rid, t)
        elif self.spill_running and (at := self._preempt(t)) >= 0:
            self._start_local(rid, at)
        else:
            self.lp_queue.append(rid)
            self.lp_work += self.t_local[self.book.uncached[rid]]

    def local_done(self, rid: int, t: float, gen: int) -> None:
        """A local prefill ends (``gen``: a spilled run's generation, stale when it was preempted since)."""
        if gen:
            if gen != self.spill_gen[rid]:
                return
            del self.spill_running[rid]
        book = self.book
        book.p_end[rid] = t
        heappush(book.heap, (t + self.tail[book.uncached[rid]], READY, rid, 0))
        if self.lp_convert:
            self.account(t)
            self.lp_convert -= 1
            self.lp_servers -= 1
            self._add_decode_instance(t)
        else:
            self._instance_freed(t)

    def _instance_freed(self, t: float) -> None:
        """A local prefill instance has nothing to finish: the planned queue first, then a spilled run."""
        if self.lp_queue:
            rid = self.lp_queue.popleft()
            self.lp_work -= self.t_local[self.book.uncached[rid]]
            self._start_local(rid, t)
        elif self.spill_queue and self.lp_free >= self.spare:
            self._next_spilled(t)
        else:
            self.lp_free += 1

    # ------------------------------------------------------------------------------------------- remote
    def start_remote(self, rid: int, t: float) -> None:
        """A remote instance starts this site's request: its KV flow starts on this site's link at once."""
        book = self.book
        book.p_start[rid] = t
        d = self.t_remote[book.uncached[rid]]
        heappush(book.heap, (t + d, REMOTE_DONE, rid, 0))
        size = book.flow_bytes[rid]
        self.link.add(t, rid, size, size * self.sysm.keep / d if d > 0 else INF)

    def enqueue_remote(self, rid: int, t: float) -> None:
        """This site's request joins the shared remote pool (at once on a free instance)."""
        if self.pool.take():
            self.start_remote(rid, t)
        else:
            self.pool.push(self.k, rid, t, self.t_remote[self.book.uncached[rid]])

    # ------------------------------------------------------------------------------------------- decode
    def _admit(self, rid: int, t: float, inst: int) -> None:
        self.dec_active[inst] += 1
        self.book.d_start[rid] = t
        heappush(self.book.heap, (t + self.book.outlen[rid] * self.sysm.step_s, DECODE_DONE, rid, inst))

    def to_decode(self, rid: int, t: float) -> None:
        """A request's cache is complete at decode: a free slot, else the FCFS decode queue."""
        self.book.ready[rid] = t
        if self.free_slots:
            self._admit(rid, t, self.free_slots.pop())
        else:
            self.dec_queue.append(rid)

    def decode_done(self, rid: int, t: float, inst: int) -> None:
        """A request finishes on decode instance ``inst`` (a draining one becomes prefill once empty)."""
        self.book.finish[rid] = t
        self.completed += 1
        self.dec_active[inst] -= 1
        if inst in self.draining:
            if self.dec_active[inst] == 0:
                self.account(t)
                self.draining.discard(inst)
                self.lp_servers += 1
                self._instance_freed(t)
        elif self.dec_queue:
            self._admit(self.dec_queue.popleft(), t, inst)
        else:
            self.free_slots.append(inst)

    def _add_decode_instance(self, t: float) -> None:
        self.dec_active.append(0)
        inst = len(self.dec_active) - 1
        self.dec_open.append(inst)
        for _ in range(self.sysm.slots):
            if self.dec_queue:
                self._admit(self.dec_queue.popleft(), t, inst)
            else:
                self.free_slots.append(inst)

    # ---------------------------------------------------------------------------------------- long term
    def rebalance(self, t: float, cfg) -> None:
        """The policy's long-term decision at ``t`` on this site's period, applied: one conversion at most
        (a decode instance drains its batch first; a busy prefill instance finishes its request first)."""
        split = self.lp_servers - self.lp_convert + len(self.draining)
        step, role, period = long_term_change(self.policy, cfg, self.sysm, self.reopt_perf, t, split,
                                              self.link.capacity,
                                              self.rows[-recent_samples(cfg, self.policy.period_s):],
                                              self.period_u, self.period_out, self.thr)
        self.account(t)
        if step.change > 0:  # the least busy decode instance drains, then prefills
            inst = min(self.dec_open, key=self.dec_active.__getitem__)
            self.dec_open.remove(inst)
            self.free_slots[:] = [d for d in self.free_slots if d != inst]
            if self.dec_active[inst] == 0:
                self.lp_servers += 1
                self._instance_freed(t)
            else:
                self.draining.add(inst)
        elif step.change < 0:  # an idle prefill instance decodes now, else the next one to finish
            if self.lp_free > 0:
                self.lp_free -= 1
                self.lp_servers -= 1
                self._add_decode_instance(t)
            else:
                self.lp_convert += 1
        if step.threshold is not None and not self.policy.reacts:  # a reacting policy moves there by its steps
            self.thr = step.threshold
        if role is not None:
            self.roles.append(role)
        self.periods.append(period)
        self.period_u.clear()
        self.period_out.clear()

    def preempted_s(self) -> float:
        """Seconds the finished spilled runs spent preempted (holding no instance)."""
        b = self.book
        return math.fsum(b.p_end[r] - b.p_start[r] - self.t_spill[b.uncached[r]] for r in self.spill_gen
                         if b.p_end[r] == b.p_end[r])
