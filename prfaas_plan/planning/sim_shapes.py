"""The instance shapes a one-site simulation plays (issues 21 and 22: one basis between ``size`` and
``simulate``): by default the configuration search of ``size`` (`configurations.search_configurations`) run on
the simulation's own lengths, so the simulated instances take the searched chips per instance, MoE split,
decode attention mode, batch cap and transfer bytes per role; the inputs the user pinned
(``instance_chips``, ``remote_instance_chips``, ``local_instance_chips``, ``transfer_bytes``) pin as in
``size``. ``inputs`` paper is never searched: the paper's tables are 8-chip H200 and H20 instances (the case
study, `planning.case_study`, reproduces the paper's published shapes for the same reason).

Units: chips, tokens, seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..analytic.throughput import LengthGrid
    from ..layout import Layout
    from .configurations import ConfigSearch, SearchSpec
    from .question import Question


@dataclass(frozen=True)
class SimShapes:
    """How every role of the simulated layout is deployed: chips per local and remote instance, each role's
    MoE split (``tp`` sliced, ``ep`` whole experts per chip), DP attention in decode, the transfer policy
    (None: `simulate.simulation_perf`'s default) and the search that chose them (None: pinned or paper)."""

    local_chips: int
    remote_chips: int
    remote_moe: str = "tp"
    local_moe: str = "tp"
    decode_moe: str = "tp"
    dp_attention: bool = False
    transfer: str | None = None
    search: ConfigSearch | None = None
    note: str | None = None      # what was searched and chosen (None: not searched)
    model: object = None         # the model profile at the chosen dtypes (None: the question's)


def simulation_shapes(q: Question, spec: SearchSpec | None, grid: LengthGrid, input_mean: float,
                      output_mean: float, transfer_bytes: str | None) -> SimShapes:
    """The shapes to simulate for question ``q``: searched on ``grid`` (the lengths the simulation plans on;
    the decode context from the workload's mean full input and output, tokens, as `simulate.simulation_perf`)
    with the distribution-exact model the simulation plans with; else the question's own shapes."""
    local, remote = q.instance_chips
    if spec is None:
        return SimShapes(local, remote, transfer=transfer_bytes)
    from .configurations import chosen_scenario, search_configurations

    sc = replace(q.scenario, grid=grid, output_tokens=output_mean, context_tokens=input_mean + output_mean / 2,
                 mode="exact")
    found = search_configurations(sc, spec, report=1)
    best = found.best.scenario
    note = chosen_scenario(sc, found).notes[-1]
    return SimShapes(best.local_chips_per_instance, best.remote_chips_per_instance, best.remote_moe, best.local_moe,
                     best.decode_moe, best.dp_attention, best.transfer, found, note, best.model)


def role_records(layout: Layout, perf, shapes: SimShapes | None = None) -> list[dict]:
    """The configuration per role and site of the simulated ``layout`` (the ``configurations`` section keys
    of ``size``, `configurations.RoleConfig`): the remote prefill pool, then each PD site's prefill and decode
    (a one-site layout's site is ``local``, as in ``size``; several sites go by their names). ``shapes``
    None: a layout file's sites, each role tensor-parallel over its instance."""
    from .configurations import RoleConfig
    from .configurations import expert_parallel_degree as ep

    shapes = shapes or SimShapes(0, 0)
    model = perf.model
    wd, kd = model.weight_dtype, model.kv_dtype

    out = []
    if layout.remote is not None and layout.remote.instances > 0:
        n = layout.remote.instance.chips
        out.append(RoleConfig("prefill", "remote", n, n, ep(shapes.remote_moe, n), False, 0, wd, kd))
    for s in layout.pd_sites:
        n, name = s.instance.chips, ("local" if len(layout.pd_sites) == 1 else s.name)
        out.append(RoleConfig("prefill", name, n, n, ep(shapes.local_moe, n), False, 0, wd, kd))
        out.append(RoleConfig("decode", name, n, n, ep(shapes.decode_moe, n), shapes.dp_attention,
                              int(perf.sites[s.name].decode.batch), wd, kd))
    return [r.record() for r in out]

