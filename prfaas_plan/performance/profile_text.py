"""Profile files with fitted constants written in: a chip's ``calibration:`` block, a stack's numbers."""

from __future__ import annotations

import dataclasses

from ..profiles import Calibration, HardwareProfile, StackProfile, hardware_from_dict
from ..profiles.stack import KEYS, OPTIONAL_NUMBERS, stack_from_dict
from ..textfile import read_utf8


def calibrated_profile_text(chip: HardwareProfile, cal: Calibration) -> str:
    """The chip's profile file with its ``calibration:`` block replaced by ``cal`` (other lines untouched),
    validated by loading it back."""
    import yaml

    kept, skipping = [], False
    for line in read_utf8(chip.path, "a chip profile (YAML)").splitlines():
        if line.startswith("calibration:"):
            skipping = True
            continue
        if skipping and (line.startswith((" ", "\t")) or not line.strip()):
            continue
        skipping = False
        kept.append(line)
    block = {"calibration": {"gemm_efficiency": dict(sorted(cal.gemm.items())), "memory_efficiency": cal.memory,
                             "comm_efficiency": cal.comm,
                             **({"loo_error": dict(sorted(cal.loo_error.items()))} if cal.loo_error else {}),
                             **({"lomo_error": dict(sorted(cal.lomo_error.items()))} if cal.lomo_error else {}),
                             **({"lomo_error_by_stack": {k: dict(sorted(v.items())) for k, v in
                                                         sorted(cal.lomo_error_by_stack.items())}}
                                if cal.lomo_error_by_stack else {}),
                             **({"loco_error": dict(sorted(cal.loco_error.items()))} if cal.loco_error else {}),
                             "source": cal.source}}
    text = "\n".join(kept).rstrip("\n") + "\n" + yaml.safe_dump(block, sort_keys=False, width=110, allow_unicode=True)
    hardware_from_dict(yaml.safe_load(text), chip.path)
    return text


def stack_profile_text(stack: StackProfile) -> str:
    """A stack profile file holding ``stack``'s numbers and sources, validated by loading it back."""
    import yaml

    data = {k: getattr(stack, k) for k in KEYS if k not in ("kind", "sources", "by_version", "harness")
            and (k not in OPTIONAL_NUMBERS or k in stack.sources)}
    versions = {version: {**e.values, **({"chunked_prefill": e.chunked_prefill} if e.chunked_prefill is not None
                                         else {}), "spread": e.spread, "sources": e.sources}
                for version, e in stack.by_version.items()}
    for entry in versions.values():
        if not entry["spread"]:
            del entry["spread"]
    text = yaml.safe_dump({"kind": "stack", **data, "sources": stack.sources,
                           **({"by_version": versions} if versions else {}),
                           **({"harness": {k: dataclasses.asdict(h) for k, h in stack.harness.items()}} if stack.harness
                              else {})}, sort_keys=False, width=110,
                          allow_unicode=True)
    stack_from_dict(yaml.safe_load(text), stack.path)
    return text
