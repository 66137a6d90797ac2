"""The workload a command inspects (``prfaas-plan workload describe``), resolved the way the planner
resolves it: a distribution name or a trace file, its hash ids optionally replayed through the prefix
cache (``docs/methods.md``). The CLI reaches `prfaas_plan.workload` only through here."""

from __future__ import annotations

from ..workload.prefix_cache import DEFAULT_BLOCK_SIZE  # noqa: F401  (tokens per hash id of a trace)


def describe_workload(workload: str, prefix_cache: bool | None = None, block_size: int = DEFAULT_BLOCK_SIZE,
                      cache_blocks: int | None = None):
    """The `prfaas_plan.workload.Workload` named by ``workload``; ``prefix_cache`` None replays a
    trace's hash ids when it has them, ``block_size`` tokens per hash id, ``cache_blocks`` the cache
    capacity in blocks (None: unlimited)."""
    from ..workload.workloads import resolve_workload

    return resolve_workload(workload, prefix_cache=prefix_cache, block_size=block_size,
                            capacity_blocks=cache_blocks)
