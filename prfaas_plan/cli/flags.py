"""Input names to flags: the one place that knows how the CLI spells each planning input.

Messages from the layers below name an input by its keyword in backticks (`prfaas_plan.errors.INPUT_NAME`:
```link_efficiency```); `as_flags` shows each as the flag that sets it (``--link-efficiency``). A name no
command declares is left as it is.
"""

from __future__ import annotations

from functools import cache

from ..errors import INPUT_NAME


@cache
def _flags() -> dict[str, str]:
    """``{input name: --flag}`` over every option of every command (a flag's name with ``_`` for ``-``),
    whichever command modules the run has imported (`full_app`: an error path, paid once)."""
    import typer.main

    from .commands import full_app

    out: dict[str, str] = {}
    stack = [typer.main.get_command(full_app())]
    while stack:
        command = stack.pop()
        stack += list(getattr(command, "commands", {}).values())
        for param in command.params:
            for opt in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())):
                if opt.startswith("--"):
                    out.setdefault(opt[2:].replace("-", "_"), opt)
    return out


def as_flags(message: str) -> str:
    """``message`` with every input it names (`INPUT_NAME`) written as its flag."""
    flags = _flags()
    return INPUT_NAME.sub(lambda m: flags.get(m[1], m[0]), message)
