"""Layouts: sites holding pools of instances with roles, joined by links.

One structure describes every deployment the planner compares:

- **homogeneous PD**: one local PD site, no remote prefill site, threshold ``t = inf``;
- **naive heterogeneous**: every prefill on the remote site, every decode local, ``t = 0`` and no
  local prefill instances;
- **PrfaaS-PD**: a remote prefill-only site and a local PD site, requests longer than ``t`` prefilled
  remotely;
- **multi-site**: several local PD sites sharing one remote prefill site, each over its own link.

Instance counts are per role. Local PD instances can change role (prefill <-> decode); the remote
site is prefill-only. A YAML layout file (see `load_layout`) describes anything else.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import PlanError
from .performance.base import Instance, parse_instance
from .units import parse_rate_bps, parse_time_s

TCP_EFFICIENCY = 0.95  # TCP goodput on Ethernet is 95-99% of line rate (``docs/methods.md`` section 3)


@dataclass(frozen=True)
class Link:
    """An inter-site link. ``bandwidth_bps`` is the line rate in bit/s; ``efficiency`` the achieved
    goodput fraction; ``rtt_s`` the round trip in seconds; ``usd_per_gbps_month`` an optional price;
    ``headroom`` the fraction of goodput a plan leaves free for bursts (0: a plan may fill it)."""

    bandwidth_bps: float
    efficiency: float = TCP_EFFICIENCY
    rtt_s: float = 0.0
    usd_per_gbps_month: float = 0.0
    headroom: float = 0.0

    @property
    def goodput_bps(self) -> float:
        """Payload rate the link moves, bit/s: what a transfer's time and the simulator see."""
        return self.bandwidth_bps * self.efficiency

    @property
    def planned_bps(self) -> float:
        """Payload rate a plan may fill, bit/s: ``(1 - headroom) * goodput``. Every capacity bound (stage
        bounds, linear programs, the configuration search) uses it; transfer times keep `goodput_bps`."""
        return self.goodput_bps * (1.0 - self.headroom)

    def scaled(self, factor: float) -> "Link":
        """The same link with ``factor`` times the bandwidth (for sweeps and link-drop scenarios)."""
        return replace(self, bandwidth_bps=self.bandwidth_bps * factor)


@dataclass(frozen=True)
class PrefillSite:
    """A remote, prefill-only site: ``instances`` instances of one shape."""

    name: str
    instance: Instance
    instances: int
    stack: str = ""           # serving stack profile of this site ("" = the scenario's)
    pin_chips: bool = False   # keep ``instance``'s chips per instance (the configuration search leaves it)
    moe: str = "tp"           # routed experts sliced (tp), whole per chip (ep) or ep<k> hybrids; the search sets it


@dataclass(frozen=True)
class PDSite:
    """A local PD site: ``prefill`` + ``decode`` instances of one shape, and the link from the remote
    prefill site to it (None when there is no remote site)."""

    name: str
    instance: Instance
    prefill: int
    decode: int
    link: Link | None = None
    stack: str = ""           # serving stack profile of this site ("" = the scenario's)
    pin_chips: bool = False   # keep ``instance``'s chips per instance (the configuration search leaves it)
    # how each role splits the model (`performance.Parallel`); the configuration search sets them
    prefill_moe: str = "tp"
    decode_moe: str = "tp"
    dp_attention: bool = False
    transfer: str = ""        # bytes on the link (analytic/transfer.py); "" = the scenario's

    @property
    def instances(self) -> int:
        return self.prefill + self.decode

    def with_split(self, prefill: int) -> "PDSite":
        """The same site with ``prefill`` of its instances prefilling and the rest decoding."""
        return replace(self, prefill=prefill, decode=self.instances - prefill)


@dataclass(frozen=True)
class Layout:
    """A deployment: an optional remote prefill site and one or more local PD sites.

    ``threshold`` is the routing threshold in uncached tokens (``inf``: never remote; ``0``: always
    remote); ``None`` means the optimizer chooses it.
    """

    name: str
    pd_sites: tuple[PDSite, ...]
    remote: PrefillSite | None = None
    threshold: float | None = None
    search: bool = True       # False: every role keeps the file's shape and the fixed TP configuration

    def __post_init__(self) -> None:
        if not self.pd_sites:
            raise PlanError(f"layout {self.name!r}: needs at least one local PD site")
        for s in self.pd_sites:
            if s.prefill < 0 or s.decode < 0:
                raise PlanError(f"layout {self.name!r}: site {s.name!r} has a negative instance count")
            if s.instances == 0:
                raise PlanError(f"layout {self.name!r}: site {s.name!r} has no instances (it needs at least "
                                "one decode instance)")
            if self.remote is not None and s.link is None:
                raise PlanError(f"layout {self.name!r}: site {s.name!r} has no link to the remote site")
        if self.remote is not None and self.remote.instances < 0:
            raise PlanError(f"layout {self.name!r}: negative remote instance count")

    def can_offload(self, site: PDSite | None = None) -> bool:
        """True when requests arriving at ``site`` (default: the first PD site) can be prefilled remotely:
        a remote site with instances and a link to it. The one structural offload test; with performance
        inputs, `prfaas_plan.analytic.throughput.offloads` adds that the remote prefill is modelled."""
        site = self.pd_sites[0] if site is None else site
        return (self.remote is not None and self.remote.instances > 0 and site.link is not None
                and site.link.goodput_bps > 0)

    @property
    def uses_remote(self) -> bool:
        """True when some site can offload and the threshold does not keep everything local."""
        return any(self.can_offload(s) for s in self.pd_sites) and self.threshold != float("inf")

    def chips(self) -> dict[str, int]:
        """Chips per chip profile name."""
        out: dict[str, int] = {}
        if self.remote is not None:
            out[self.remote.instance.chip.name] = self.remote.instance.chips * self.remote.instances
        for s in self.pd_sites:
            out[s.instance.chip.name] = out.get(s.instance.chip.name, 0) + s.instance.chips * s.instances
        return out


def instances_from_chips(total: str, instance_chips: int, what: str) -> tuple[Instance, int]:
    """``32xH200`` with 8-chip instances -> (8xH200 instance, 4). The total must divide evenly."""
    inst = parse_instance(total, what)
    if inst.chips % instance_chips:
        raise PlanError(f"{what} {total!r}: {inst.chips} chips do not make whole {instance_chips}-chip instances")
    return Instance(inst.chip, instance_chips), inst.chips // instance_chips


def prfaas_pd(remote: str, local: str, link: Link, instance_chips: int = 8, local_prefill: int | None = None,
              threshold: float | None = None, remote_instance_chips: int | None = None) -> Layout:
    """PrfaaS-PD: remote prefill site + one local PD site. ``local_prefill=None`` splits evenly (the
    optimizer chooses the split). ``instance_chips`` shapes both roles' instances unless
    ``remote_instance_chips`` gives the remote's."""
    r_inst, r_n = instances_from_chips(remote, remote_instance_chips or instance_chips, "`remote`")
    l_inst, l_n = instances_from_chips(local, instance_chips, "`local`")
    n_p = l_n // 2 if local_prefill is None else local_prefill
    return Layout("prfaas-pd", (PDSite("local", l_inst, n_p, l_n - n_p, link),),
                  PrefillSite("remote", r_inst, r_n), threshold)


def homogeneous_pd(local: str, instance_chips: int = 8, local_prefill: int | None = None) -> Layout:
    """Homogeneous PD: one local site, no remote prefill, ``t = inf``."""
    l_inst, l_n = instances_from_chips(local, instance_chips, "`local`")
    n_p = l_n // 2 if local_prefill is None else local_prefill
    return Layout("homogeneous-pd", (PDSite("local", l_inst, n_p, l_n - n_p),), None, float("inf"))


def naive_heterogeneous(remote: str, local: str, link: Link, instance_chips: int = 8,
                        remote_instance_chips: int | None = None) -> Layout:
    """Naive heterogeneous: all prefill remote, all decode local, no length-based routing (``t = 0``);
    instance shapes as in `prfaas_pd`."""
    r_inst, r_n = instances_from_chips(remote, remote_instance_chips or instance_chips, "`remote`")
    l_inst, l_n = instances_from_chips(local, instance_chips, "`local`")
    return Layout("naive-heterogeneous", (PDSite("local", l_inst, 0, l_n, link),),
                  PrefillSite("remote", r_inst, r_n), 0.0)


# ----------------------------------------------------------------------------------------------------
# YAML layout files


def _site_stack(name, where: str) -> str:
    """The canonical name of a site's ``stack:`` ("" when it names none), a bad one refused with ``where``."""
    from .profiles import get_stack

    if not name:
        return ""
    try:
        return get_stack(name).name
    except PlanError as exc:
        raise PlanError(f"{where}: {str(exc).removeprefix('`stack` ')}") from None


def load_layout(path: str | Path) -> Layout:
    """Read a layout YAML file (the schema: ``docs/layouts.md``, `layout_json_schema`)::

        name: two-sites
        remote: {instance: 8xH200, instances: 4}
        threshold: auto            # or a token count such as 16k, or inf
        sites:
          - {name: beijing, instance: 8xH20, prefill: 3, decode: 5,
             link: {bandwidth: 100G, efficiency: 0.95, rtt: 2ms}}
          - {name: shanghai, instance: 8xH20, prefill: 3, decode: 5, link: {bandwidth: 50G, rtt: 8ms}}

    Rates and times need their unit, as on the command line (``rtt: 20`` is refused: "did you mean
    20ms?"); site names must differ. A site (or ``remote``) may name its serving stack profile,
    ``stack: vllm``; otherwise ``--stack`` holds.
    """
    from .profiles import read_yaml
    from .profiles.validation import check
    from .units import MAX_CHIPS, parse_length

    from .textfile import require_file

    p = require_file(path, "a layout file (YAML)", f"`layout` {str(path)!r}")
    doc = check(_layout_schema(), read_yaml(p), str(p))
    remote = None
    if doc.remote is not None:
        remote = PrefillSite("remote", parse_instance(doc.remote.instance, f"{p}: remote.instance"),
                             doc.remote.instances, _site_stack(doc.remote.stack, f"{p}: remote.stack"),
                             doc.remote.pin_chips)
    sites = []
    seen: dict[str, int] = {}
    for i, s in enumerate(doc.sites):
        name = s.name or f"site{i}"
        if name in seen:   # two sites of one name would be merged into one by every per-site table
            raise PlanError(f"{p}: sites[{i}].name {name!r} is already the name of sites[{seen[name]}]; "
                            "site names must differ")
        seen[name] = i
        link = None
        if s.link is not None:
            lk = s.link
            from .units import parse_headroom

            link = Link(lk.bandwidth, lk.efficiency, lk.rtt, lk.usd_per_gbps_month,
                        parse_headroom(lk.headroom, f"{p}: sites[{i}].link.headroom"))
        sites.append(PDSite(name, parse_instance(s.instance, f"{p}: sites[{i}].instance"),
                            s.prefill, s.decode, link, _site_stack(s.stack, f"{p}: sites[{i}].stack"), s.pin_chips))
    chips = sum((s.prefill + s.decode) * s.instance.chips for s in sites)
    chips += remote.instances * remote.instance.chips if remote else 0
    if chips > MAX_CHIPS:
        raise PlanError(f"{p}: {chips:,} chips in all, more than the planner's cap of {MAX_CHIPS:,} chips")
    t_raw = doc.threshold
    if t_raw in ("auto", None):
        threshold = None
    elif str(t_raw).lower() == "inf":
        threshold = float("inf")
    else:
        threshold = float(parse_length(t_raw, f"{p}: threshold")) if t_raw != 0 else 0.0
    return Layout(doc.name or p.stem, tuple(sites), remote, threshold, doc.search)


# Text forms of a layout file's units, as JSON Schema patterns (no flags in JSON Schema regexes, hence
# the character classes); `prfaas_plan.units` parses them, these only describe them.
_NUM = r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?"
RATE_PATTERN = rf"^\s*{_NUM}\s*(?:[kKmMgGtT](?:bps|bit/s|b/s|B/s|Bps)?|bps|bit/s|b/s|B/s|Bps)\s*$"
TIME_PATTERN = rf"^\s*{_NUM}\s*(?:[mM][sS]|[uU][sS]|[sS]|[mM][iI][nN]|[hH])\s*$"
HEADROOM_PATTERN = rf"^\s*{_NUM}\s*%?\s*$"
INSTANCE_PATTERN = r"^\s*(?:[0-9]+\s*[x*]\s*)?[A-Za-z][A-Za-z0-9._-]*\s*$"


PIN_CHIPS = ("true keeps `instance`'s chips per instance (its parallelism is still searched, as "
             "--local-instance-chips does for size); default false: the search chooses it within the site's chips")


@functools.cache
def _layout_schema():
    """The pydantic schema of a layout file (built on first use; see `prfaas_plan.profiles.validation`):
    the one definition `load_layout` validates with and `layout_json_schema` publishes."""
    from typing import Annotated, Literal

    from pydantic import Field

    from .profiles.validation import Efficiency, NonNegative, Strict, with_unit
    from .units import MAX_CHIPS

    Instances = Annotated[int, Field(ge=0, le=MAX_CHIPS, description="instances, a whole number")]
    Text = Annotated[str, Field(min_length=1, max_length=200)]
    Shape = Annotated[str, Field(min_length=1, max_length=200, json_schema_extra={"pattern": INSTANCE_PATTERN},
                                 description="instance shape COUNTxCHIP, e.g. 8xH20 (chip: a hardware profile)")]
    Rate = with_unit(lambda text, what: parse_rate_bps(text, what), RATE_PATTERN,
                     "line rate with its unit, bits/s decimal: 100G, 400Gb/s, 12.5GB/s")
    Time = with_unit(lambda text, what: parse_time_s(text, what, "ms"), TIME_PATTERN,
                     "round trip with its unit: 2ms, 0.5s")

    class LinkDoc(Strict):
        """The link from the remote prefill site to this PD site."""

        bandwidth: Rate
        efficiency: Efficiency = Field(TCP_EFFICIENCY, description="goodput fraction of the line rate, (0, 1]")
        rtt: Time = Field("1us", validate_default=True)
        usd_per_gbps_month: NonNegative = Field(0.0, description="link price, USD per Gbit/s and month")
        headroom: Annotated[float, Field(ge=0, lt=1)] | Annotated[str, Field(pattern=HEADROOM_PATTERN)] = Field(
            0.0, description="share of the goodput a plan leaves free for bursts: a fraction in [0, 1) or a "
                             "percentage such as 20%; default 0 (--link-headroom on the command line)")

    class SiteDoc(Strict):
        """A local PD site: instances that prefill and decode, and its link."""

        name: Text | None = Field(None, description="unique among the sites (default site0, site1, ...)")
        instance: Shape
        prefill: Instances
        decode: Instances
        link: LinkDoc | None = None
        stack: Text | None = Field(None, description="serving stack profile of this site (stack_profiles/)")
        pin_chips: bool = Field(False, description=PIN_CHIPS)

    class RemoteDoc(Strict):
        """The remote prefill-only site."""

        instance: Shape
        instances: Instances
        stack: Text | None = Field(None, description="serving stack profile of the remote site")
        pin_chips: bool = Field(False, description=PIN_CHIPS)

    class LayoutDoc(Strict):
        """A prfaas-plan layout file (docs/layouts.md). Site names must differ (checked by the parser;
        JSON Schema cannot say it)."""

        kind: Literal["layout"] | None = None
        name: Text | None = None
        remote: RemoteDoc | None = None
        threshold: Text | Annotated[int, Field(ge=0)] | None = Field(
            "auto", description="auto (optimized), inf (never remote), or uncached tokens such as 16k")
        sites: Annotated[list[SiteDoc], Field(min_length=1, max_length=1000)]
        search: bool = Field(True, description="search each role's configuration per site (chips per instance, "
                                               "MoE TP/EP, decode attention TP/DP, batch cap); false keeps every "
                                               "instance shape of the file with TP throughout")

    return LayoutDoc


def layout_json_schema() -> dict:
    """The layout file's JSON Schema (draft 2020-12), generated from `_layout_schema`: ``prfaas-plan
    schema layout`` prints it; ``tests/test_layout_schema.py`` checks that it and the parser agree."""
    schema = _layout_schema().model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "prfaas-plan layout"
    return schema
