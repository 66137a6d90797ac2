"""Sweep points on a layout file (issue 22 item 3): a spec's ``layout:`` input names the hardware -- sites,
instance shapes, links -- and the other inputs vary on top of it: model, tpot, workload, stack, inputs,
transfer bytes, basis, and two of the layout's own: ``link_scale`` (every site's link bandwidth times a
factor) and ``remote_instances`` (the remote prefill site's instance count). Each point is planned as
``size --layout`` plans it (`prfaas_plan.planning.layouts`, without error bars, as every sweep point) and
becomes one row of `sweep.ROW_COLUMNS`: whole-layout figures, the per-site binding stages in one text cell.
Units as the row columns say (``docs/sweep.md``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from ..errors import PlanError

REPLACED = ("remote", "local", "link", "link_efficiency", "link_price", "rtt", "link_headroom", "instance_chips")
"""Inputs a layout file gives itself; a spec setting one beside ``layout`` is refused."""


@lru_cache(maxsize=32)
def _load(path: str):
    from ..layout import load_layout

    return load_layout(path)


def check_layout_inputs(v: dict, defaults: dict) -> bool:
    """Check the layout inputs of a point; True when the point is planned on a layout file. Without a
    layout, ``link_scale`` and ``remote_instances`` must stay at their ``defaults`` (input -> default, from
    `sweep.INPUTS`); with one, the inputs the file replaces (`REPLACED`) must."""
    if not v["layout"]:
        for k in ("link_scale", "remote_instances"):
            if v[k] != defaults[k]:
                raise PlanError(f"{k} {v[k]!r}: it changes a layout file's sites; set layout too")
        return False
    lay = _load(str(v["layout"]))
    for k in REPLACED:
        if v[k] != defaults[k]:
            raise PlanError(f"{k} {v[k]!r}: layout {v['layout']} gives the sites, instance shapes and links; "
                            f"leave {k} out (vary link_scale or remote_instances instead)")
    if not (math.isfinite(v["link_scale"]) and v["link_scale"] > 0):
        raise PlanError(f"link_scale {v['link_scale']:g}: expected a positive factor")
    if v["remote_instances"] < -1:
        raise PlanError(f"remote_instances {v['remote_instances']}: expected a count >= 0 (or -1: the file's)")
    if v["remote_instances"] >= 0 and lay.remote is None:
        raise PlanError(f"remote_instances {v['remote_instances']}: layout {v['layout']} has no remote site")
    return True


def point_layout(v: dict):
    """The layout of a point: the file's, its links scaled by ``link_scale``, its remote count replaced
    when ``remote_instances`` >= 0."""
    lay = _load(str(v["layout"]))
    if v["link_scale"] != 1.0:
        lay = replace(lay, pd_sites=tuple(replace(s, link=s.link.scaled(v["link_scale"])) if s.link else s
                                          for s in lay.pd_sites))
    if v["remote_instances"] >= 0:
        lay = replace(lay, remote=replace(lay.remote, instances=int(v["remote_instances"])))
    return lay


def evaluate_layout(point, auto_basis: str, auto_transfer: str) -> dict:
    """The row of a layout-based point: inputs, whole-layout figures, the homogeneous baseline's gain at the
    point's basis (``auto_basis``: resolved as `layouts.layout_default_basis`), or the reason it cannot be
    planned; ``auto_transfer`` (`sweep.AUTO_TRANSFER`) is the transfer bytes of a point that pins none."""
    from ..units import parse_tpot_s
    from .layouts import layout_default_basis, layout_figures, layout_warnings, plan_layout
    from .plans import check_basis
    from .question import Question

    v = point.values
    row = {"point_key": point.key, "point_index": point.index, **v, "tpot_s": parse_tpot_s(v["tpot"], "tpot")}
    try:
        lay = point_layout(v)
        row["remote_chips"] = lay.remote.instances * lay.remote.instance.chips if lay.remote else 0
        row["local_chips"] = sum(s.instances * s.instance.chips for s in lay.pd_sites)
        # planned on the file's own shapes (not searched, unlike `size --layout`): auto bytes are the default
        pinned = {} if v["transfer_bytes"] == auto_transfer else {"transfer_bytes": v["transfer_bytes"]}
        sc = Question.from_layout(str(v["layout"]), layout=lay, model=v["model"], tpot=v["tpot"],
                                  workload=v["workload"], inputs=v["inputs"], mode=v["mode"],
                                  stack=v["stack"], **pinned).scenario
        res, perf, lay = plan_layout(lay, sc)
        basis = layout_default_basis(lay) if v["basis"] == auto_basis else check_basis(v["basis"])
        row["basis"] = basis
        f = layout_figures(v["layout"], lay, sc, res, perf, basis, 0, 0)
        whole, _, hom = f.baselines
        lam = whole.lambda_rps
        n_r = lay.remote.instances if lay.remote else 0
        n_p, n_d = sum(s.n_prefill for s in f.sites), sum(s.n_decode for s in f.sites)
        out_tps = lam * perf.output_tokens
        row.update({
            "offloaded_share": sum(s.remote_share * s.lambda_rps for s in f.sites) / lam if lam > 0 else 0.0,
            "instances": (f"{n_r}R + " if n_r else "") + f"{n_p + n_d} (={n_p}P+{n_d}D)",
            "remote_prefill_instances": n_r, "local_prefill_instances": n_p, "local_decode_instances": n_d,
            "throughput_rps": lam, "output_tokens_per_s": out_tps,
            "binding_stage": ", ".join(f"{s.name}: {s.binding}" for s in f.sites),
            "egress_gbps": sum(s.egress_bps for s in f.sites) / 1e9,
            "link_utilization": max((s.egress_bps / s.link_bps for s in f.sites if s.link_bps), default=None),
            "ttft_unloaded_mean_s": whole.ttft.mean_s, "ttft_unloaded_p50_s": whole.ttft.p50_s,
            "ttft_unloaded_p90_s": whole.ttft.p90_s, "ttft_unloaded_p99_s": whole.ttft.p99_s,
            "capex_usd": _finite(whole.capex_usd), "cloud_usd_per_hour": _finite(whole.usd_per_hour),
            "cost_per_mtok_usd": (_finite(whole.usd_per_hour / (out_tps * 3600) * 1e6) if out_tps > 0 else None),
            "homogeneous_throughput_rps": hom.lambda_rps, "gain_vs_homogeneous": _finite(hom.gain),
            "warnings": ",".join(w.code for w in layout_warnings(f)) or None,
        })
    except PlanError as exc:
        row["error"] = str(exc)
    return row


def _finite(x):
    return x if x is not None and math.isfinite(x) else None
