"""The output envelope every command shares (``docs/output.md``): the tool and version, the command,
every input in effect (each marked when it is the default), the stack if any and the data sources,
filled in from the running command's parsed options."""

from __future__ import annotations

import sys
from enum import Enum

from .. import __version__
from ..output.report import Report, render, table_width

STATE = {"quiet": False}   # set by the global --quiet option


def _plain(v):
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _params():
    """(command name, [(parameter, value, is_default)]) of the running command, in declaration order."""
    from click import get_current_context

    ctx = get_current_context(silent=True)
    if ctx is None:
        return "", []
    out = []
    for param in ctx.command.params:
        if param.name is None or param.name not in ctx.params:
            continue
        source = ctx.get_parameter_source(param.name)
        out.append((param, _plain(ctx.params[param.name]),
                    source is not None and source.name in ("DEFAULT", "DEFAULT_MAP")))
    return " ".join(ctx.command_path.split()[1:]), out


def inputs_in_effect() -> tuple[str, dict]:
    """The running command's name (``size``, ``workload describe``) and its inputs:
    ``{name: {"value": v, "default": bool}}`` in declaration order."""
    command, params = _params()
    return command, {p.name: {"value": v, "default": d} for p, v, d in params}


def defaults_note(replaced: tuple[str, ...] = ()) -> str | None:
    """``defaults in effect: --model kimi-linear, --link 100G, ...`` for the options left at a default
    that means something (not unset, not off, not the output format, not ``replaced`` by an input file)."""
    _, params = _params()
    shown = [f"{max(p.opts, key=len)} {v}" for p, v, d in params
             if d and v is not None and v is not False and v not in ([], "") and p.name != "fmt"
             and p.name not in replaced and getattr(p, "opts", None)]
    return f"defaults in effect: {', '.join(shown)}" if shown else None


def envelope_meta(report: Report, replaced: tuple[str, ...] = (), replaced_by: str | None = None) -> dict:
    """``meta`` of the envelope: tool, version, command, inputs, stack, data sources, then the report's own.
    An input of ``replaced`` left at its default carries ``"replaced_by": replaced_by`` (what decided it
    instead: the configuration search, a layout file)."""
    from ..profiles import profile_dirs

    command, inputs = inputs_in_effect()
    if replaced_by:
        for name in replaced:
            if inputs.get(name, {}).get("default"):
                inputs[name]["replaced_by"] = replaced_by
    stack = inputs.get("stack", {}).get("value")
    meta = {"tool": "prfaas-plan", "version": __version__, "command": command, "inputs": inputs,
            "stack": stack, "data_sources": {"profiles": [str(p) for p in profile_dirs()],
                                             "packaged_data": "prfaas_plan/data (see each file's header)"}}
    meta.update(report.meta)
    return meta


def emit(report: Report, fmt: str, out=None, replaced: tuple[str, ...] = (), replaced_by: str | None = None) -> None:
    """Render ``report`` in the envelope and write it in one piece (stdout unless ``out``); ``replaced``
    names options whose defaults ``replaced_by`` stands in for (an input file, the configuration search): left
    out of the defaults note, marked in ``meta.inputs``."""
    report.meta = envelope_meta(report, replaced, replaced_by)
    note = defaults_note(replaced) if str(fmt) == "table" else None  # machine formats carry it in meta.inputs
    if note:
        report.notes = [note] + list(report.notes)
    stream = out or sys.stdout
    text = render(report, str(fmt), quiet=STATE["quiet"], width=table_width(stream))
    stream.write(text)


def emit_or_text(report: Report, fmt: str, text: str, out=None) -> None:
    """For a command whose human answer is a document or a sentence (``schema``'s JSON Schema, ``model
    import``'s YAML, ``sweep``'s and ``report``'s "wrote ..."): ``text`` as it is in the table format,
    ``report`` in the envelope otherwise, so ``--format json|csv`` reads like every other command."""
    if str(fmt) == "table":
        (out or sys.stdout).write(text)
    else:
        emit(report, fmt, out)
