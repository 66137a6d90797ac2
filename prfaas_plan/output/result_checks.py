"""What ``report`` checks in a result file before drawing a page from it (issue 23): a page must not
answer from a damaged, duplicated or mislabelled file.

- JSON: nested at most `MAX_DEPTH` levels; when ``meta.command`` names a command, the section that
  command always writes is there (``size`` -> ``plan``, or ``sites`` for ``size --layout``;
  ``compare`` -> ``compare``, ``reproduce`` -> ``figures``).
- sweep tables: typed columns (text in a numeric column is refused by `rowfile.read_table`, as is a CSV
  row cut short), one row per ``point_key``, and each row matching its ``row_check`` when it has one; a
  table a sweep left incomplete (interrupted) is drawn with a warning saying how many points it holds.
"""

from __future__ import annotations

import hashlib
import json

from ..errors import PlanError

MAX_DEPTH = 64
SECTION_OF = {"size": ("plan", "sites"), "compare": ("compare",), "reproduce": ("figures",)}


def depth(doc) -> int:
    """Nesting depth of a JSON value, counted without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, d)
            if d > MAX_DEPTH:
                return d
            stack.extend((v, d + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def check_json(doc, sections: dict, meta: dict, source: str) -> None:
    """Refuse a JSON result nested too deeply or whose ``meta.command`` does not match its sections."""
    if depth(doc) > MAX_DEPTH:
        raise PlanError(f"{source}: nested more than {MAX_DEPTH} levels deep; not the output of a prfaas-plan command")
    command = meta.get("command") if isinstance(meta, dict) else None
    if command is not None and not isinstance(command, str):
        raise PlanError(f"{source}: meta.command must be text, not {command!r}")
    if "configurations" in sections:
        check_configurations(sections["configurations"], source)
    need = SECTION_OF.get(command)
    if need is not None and not any(n in sections for n in need):
        raise PlanError(f"{source}: meta.command is {command!r} but there is no {' or '.join(map(repr, need))} "
                        f"section (sections: "
                        f"{', '.join(map(str, sections)) or 'none'}); the file was edited or is of another command")


CONFIG_KEYS = ("role", "site", "chips_per_instance", "tp", "ep", "dp_attention", "batch", "weight_dtype", "kv_dtype")
OPTIONAL_CONFIG_KEYS = ("attention_dp",)   # data-parallel attention ranks: absent in files of earlier versions
CONFIG_ROLES = ("prefill", "decode")


def check_configurations(rows, source: str) -> None:
    """Refuse a ``configurations`` section (the configuration search of `size` or of a layout file) that is
    not one record per role and site with exactly `CONFIG_KEYS`, whole positive chip counts and TP/EP
    degrees within them. Sites are ``remote`` (prefill only) and ``local`` or a layout file's site names."""
    if not isinstance(rows, list) or not rows:
        raise PlanError(f"{source}: section 'configurations' must be a non-empty list of records")
    seen = set()
    for i, r in enumerate(rows):
        where = f"{source}: configurations[{i}]"
        if not isinstance(r, dict) or not set(CONFIG_KEYS) <= set(r) <= set(CONFIG_KEYS + OPTIONAL_CONFIG_KEYS):
            extra = sorted(set(r) - set(CONFIG_KEYS + OPTIONAL_CONFIG_KEYS)) if isinstance(r, dict) else []
            missing = [k for k in CONFIG_KEYS if not isinstance(r, dict) or k not in r]
            raise PlanError(f"{where}: " + (f"unknown key {extra[0]!r}" if extra else
                                            f"missing key {missing[0]!r}" if missing else "not a record"))
        key = (r["site"], r["role"])
        ok_role = isinstance(r["site"], str) and r["site"] and r["role"] in CONFIG_ROLES \
            and key != ("remote", "decode")
        if not ok_role or key in seen:
            raise PlanError(f"{where}: {r['site']!r} {r['role']!r} is " + ("listed twice" if key in seen else
                            "not a role of a PrfaaS-PD plan (remote prefill; a site's prefill or decode)"))
        seen.add(key)
        n = r["chips_per_instance"]
        ok = all(isinstance(r[k], int) and not isinstance(r[k], bool) and r[k] >= 1 for k in ("chips_per_instance", "tp", "ep"))
        if not ok or r["tp"] > n or r["ep"] > n:
            raise PlanError(f"{where}: chips_per_instance, tp and ep must be whole numbers >= 1 with tp and ep at "
                            f"most chips_per_instance (got {n!r}, {r['tp']!r}, {r['ep']!r})")
        config_attention_ranks(r, where)


def config_attention_ranks(r: dict, where: str) -> int:
    """The data-parallel attention ranks of one ``configurations`` record: its ``attention_dp``, or where a
    file of an earlier version records none, ``tp`` under ``dp_attention`` (a rank per chip) and else 1; a
    `PlanError` unless they are a whole number dividing ``tp``, above 1 exactly when ``dp_attention``."""
    dp = bool(r.get("dp_attention"))
    ranks = r.get("attention_dp", r["tp"] if dp else 1)
    if not (isinstance(ranks, int) and not isinstance(ranks, bool) and ranks >= 1 and r["tp"] % ranks == 0
            and (ranks > 1) == dp):
        raise PlanError(f"{where}: attention_dp {ranks!r} must divide tp {r['tp']!r} and be above 1 exactly when "
                        f"dp_attention (dp_attention {r.get('dp_attention')!r})")
    return ranks


def row_check(row: dict, checked: list[str]) -> str:
    """The sweep's row check (`prfaas_plan.planning.sweep_run`) over ``checked`` columns."""
    text = json.dumps([row.get(k) for k in checked], separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_sweep_rows(rows: list[dict], meta: dict, source: str, checked: list[str]) -> list[str]:
    """Refuse duplicated or altered sweep rows; return warnings for the page (an incomplete sweep)."""
    seen: dict = {}
    for i, r in enumerate(rows):
        key = r.get("point_key")
        if key in seen:
            raise PlanError(f"{source}: point_key {key} is in rows {seen[key] + 1} and {i + 1}; a sweep writes "
                            "each point once (two files joined, or a row copied)")
        seen[key] = i
        if "row_check" in r and r["row_check"] is not None and r["row_check"] != row_check(r, checked):
            raise PlanError(f"{source}: row {i + 1} does not match its row_check (edited or damaged)")
    warnings = []
    if meta.get("complete") == "false":
        total = meta.get("points", "?")
        warnings.append(f"WARNING: this sweep was interrupted: {len(rows)} of {total} points are in the file "
                        "(run the same sweep again to finish it)")
    return warnings
