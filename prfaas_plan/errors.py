"""The exception types that reach the user as a single line.

Anything that is the user's fault (bad flag, unknown profile, malformed file, infeasible target) raises
`PlanError`; the CLI prints ``error: <message>`` to stderr and exits with code 2 (1 for an `OutputError`:
the answer could not be written). A result that fails
prfaas-plan's own cross-checks (an optimizer disagreeing with its bound, a solver failing inside)
raises `InternalError`: ``internal error: <message>`` and exit code 3, so a wrong number is never
printed as an answer. Any other exception is a bug in prfaas-plan.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

INPUT_NAME = re.compile(r"`([a-z][a-z0-9_]*)`")
"""How a message names an input: its Python keyword in backticks (`link_efficiency`). Only the CLI turns
these into its flags (`prfaas_plan.cli.flags`); no layer below it knows a flag's spelling."""


class PlanError(Exception):
    """A user-facing error: the message is one line naming the input (as `INPUT_NAME`) and what was
    expected, e.g. ``load 1.5: expected a fraction ...`` with ``load`` in backticks."""

    exit_code = 2

    @property
    def inputs(self) -> tuple[str, ...]:
        """The inputs the message names, in order."""
        return tuple(INPUT_NAME.findall(str(self)))


class OutputError(PlanError):
    """The answer could not be written (full disk, closed pipe, read-only folder, name too long): one
    line naming where, exit code 1, and nothing half-written left behind (``docs/invariants.md``)."""

    exit_code = 1


class InternalError(Exception):
    """prfaas-plan's own check failed: the message names the check, the figures and (for a solver
    failure) the solver's status. Not the user's fault; exit code 3."""

    exit_code = 3


def closest_names(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """Return a ``did you mean ...`` suffix for an unknown name, or a list of what is known."""
    candidates = sorted(set(candidates))
    close = difflib.get_close_matches(name.lower(), [c.lower() for c in candidates], n=n, cutoff=0.4)
    if close:
        return "did you mean " + ", ".join(close) + "?"
    return "known: " + ", ".join(candidates)
