"""The direct option conversion of `prfaas_plan.cli._coerce` gives what typer's pydantic adapters give.

For every parameter of every command (help options included), each value below goes through both:
the results must be equal and of the same type, or both must fail with the same message.
"""

from __future__ import annotations

import pytest
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st

from prfaas_plan.cli import _coerce, app
from prfaas_plan.cli._click import click

typer_coercion = pytest.importorskip("typer._coercion")

WORDS = ["", " ", "0", "1", "5", "-3", "007", "-0", "+5", " 5", "5 ", "1_000", "1.5", "-0.0", ".5", "5.", "1e3",
         "inf", "nan", "9" * 30, "abc", "table", "TABLE", "Json", "exact", "paper", "prfaas", "static", "capex",
         "true", "no", "100G", "25ms"]
VALUES = WORDS + [None, 0, 7, -1, 2**40, 0.5, 1.0, float("inf"), True, False, ("a", "b"), ["x"], (), ("a", 1)]


def _commands(command, ctx):
    yield command, ctx
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, click.Context(sub, info_name=name, parent=ctx))


def _parameters():
    _coerce.install()
    root = typer.main.get_command(app)
    out = []
    for command, ctx in _commands(root, click.Context(root, info_name="prfaas-plan")):
        for param in [*command.params, command.get_help_option(ctx)]:
            if param is not None and hasattr(param, "type_descriptor"):
                out.append(pytest.param(param, ctx, id=f"{ctx.command_path}:{param.name}"))
    return out


PARAMETERS = _parameters()


def _outcome(runtime, value, param, ctx):
    try:
        out = runtime.coerce(value, param=param, ctx=ctx)
    except click.exceptions.BadParameter as exc:
        return ("error", exc.format_message())
    return ("value", type(out), repr(out))  # repr: nan equals nan


def _both(param, ctx, value):
    param._runtime_param = None
    direct = param.get_runtime_param()
    typers = typer_coercion.build_runtime_param(param.type_descriptor)
    return _outcome(direct, value, param, ctx), _outcome(typers, value, param, ctx)


def test_the_options_take_the_direct_path():
    kinds = {type(p.values[0].get_runtime_param()).__name__ for p in PARAMETERS}
    assert "Direct" in kinds and len(PARAMETERS) > 100


@pytest.mark.parametrize("param, ctx", PARAMETERS)
def test_direct_conversion_matches_typers(param, ctx):
    for value in VALUES + [param.default]:
        if (param.multiple or param.nargs == -1) and isinstance(value, str):
            continue  # click never hands a multi-value option a bare string
        direct, typers = _both(param, ctx, value)
        assert direct == typers, f"{param.name} <- {value!r}"


NUMERIC = [p for p in PARAMETERS if p.values[0].type_descriptor.annotation in (int, float)]


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.sampled_from(range(len(NUMERIC))),
       st.one_of(st.integers(-10**20, 10**20).map(str), st.floats(allow_nan=False).map(repr),
                 st.decimals(allow_nan=False, allow_infinity=False, places=6).map(str),
                 st.from_regex(r"-?[0-9]{1,20}(\.[0-9]{0,20})?", fullmatch=True)))
def test_numbers_convert_alike(which, text):
    param, ctx = NUMERIC[which].values
    direct, typers = _both(param, ctx, text)
    assert direct == typers
