"""One option, one meaning (docs/invariants.md #7): every flag is declared once under ``cli/``, and no
module below the CLI names a flag in its messages (errors name the *input*; only ``cli/`` maps inputs to
flags, `prfaas_plan.cli.flags`)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "prfaas_plan"


def _declared_flags(source: str) -> list[str]:
    """Every ``--flag`` string passed to a ``typer.Option``/``typer.Argument`` call in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("Option", "Argument"):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    out += arg.value.split("/")
    return out


def test_every_flag_is_declared_once_under_cli():
    counts = Counter(flag for path in sorted((PACKAGE / "cli").glob("*.py"))
                     for flag in _declared_flags(path.read_text()))
    assert counts, "no declarations found: the scan no longer sees the CLI's options"
    assert {f: n for f, n in counts.items() if n > 1} == {}


def test_the_scan_sees_a_duplicate():
    twice = 'import typer\na = typer.Option(1, "--x")\nb = typer.Option(\n    2, "--x", help="h")\n'
    assert _declared_flags(twice) == ["--x", "--x"]


FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?![\w-])")


def _flags_in_messages(source: str, declared: set[str]) -> list[str]:
    """Declared flags written in a ``PlanError(...)`` call, or passed (or defaulted) as a bare ``"--flag"``
    argument, the way the unit parsers and choice checks take the name they report."""
    tree, found = ast.parse(source), []
    for node in ast.walk(tree):
        bare = []
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
            if name == "PlanError":
                found += [f for f in FLAG.findall(ast.get_source_segment(source, node) or "") if f in declared]
                continue
            bare = list(node.args) + [k.value for k in node.keywords]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bare = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        found += [a.value for a in bare if isinstance(a, ast.Constant) and a.value in declared]
    return found


def _command_flags() -> set[str]:
    """Every ``--flag`` of every command, as the CLI builds them (the planning inputs' flags are generated
    from `prfaas_plan.planning.question.FIELDS`, so the source scan above does not see them)."""
    from prfaas_plan.cli.flags import _flags

    return set(_flags().values())


def test_no_flag_name_in_an_error_message_below_cli():
    declared = {f for path in (PACKAGE / "cli").glob("*.py") for f in _declared_flags(path.read_text())}
    declared |= _command_flags()
    assert {"--link", "--model", "--link-efficiency", "--weight-dtype"} <= declared
    offenders = {str(path.relative_to(PACKAGE)): flags for path in sorted(PACKAGE.rglob("*.py"))
                 if "cli" not in path.relative_to(PACKAGE).parts
                 and (flags := _flags_in_messages(path.read_text(), declared))}
    assert offenders == {}


def test_the_message_scan_sees_a_flag():
    src = 'def f(x, where="--len"):\n    parse(x, "--tpot")\n    raise PlanError(f"--load {x}: bad")\n'
    assert sorted(_flags_in_messages(src, {"--len", "--tpot", "--load"})) == ["--len", "--load", "--tpot"]


def test_the_cli_shows_inputs_as_flags():
    from prfaas_plan.cli.flags import as_flags

    assert as_flags("`link_efficiency` 1.5: expected a fraction; loosen `tpot` (`not_an_input` stays)") == \
        "--link-efficiency 1.5: expected a fraction; loosen --tpot (`not_an_input` stays)"


def test_a_planning_input_has_one_flag_and_one_help_in_every_command():
    """The planning inputs' options are generated from their fields: wherever a command takes one, it is
    that field's flag with that field's help (and no source file declares it by hand)."""
    import typer.main

    from prfaas_plan.cli import full_app
    from prfaas_plan.cli.question_options import field_help, flag
    from prfaas_plan.planning.question import FIELDS

    by_flag = {flag(n): field_help(f) for n, f in FIELDS.items()}
    hand = {f for path in (PACKAGE / "cli").glob("*.py") for f in _declared_flags(path.read_text())}
    assert hand.isdisjoint(by_flag), hand & set(by_flag)
    seen, stack = set(), [typer.main.get_command(full_app())]
    while stack:
        command = stack.pop()
        stack += list(getattr(command, "commands", {}).values())
        for param in command.params:
            for opt in getattr(param, "opts", ()):
                if opt in by_flag:
                    assert param.help == by_flag[opt], (command.name, opt)
                    seen.add(opt)
    assert seen == set(by_flag)   # size and compare take every planning input
