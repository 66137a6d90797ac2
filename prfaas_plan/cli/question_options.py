"""Command-line options generated from the planning question's fields (`prfaas_plan.planning.question.FIELDS`).

Each `Field` becomes one option: ``--name-with-dashes`` (plus a short alias from `SHORT`), the field's
help with the inputs it names shown as flags, its type (the field's choice enum where it has one; Optional
when its default is unset), its default and its minimum. `field_option` gives one such ``Annotated`` type
(commands that take a single planning input use it, e.g. ``simulate``'s ``--model``), `question_command`
a whole command's: the command declares its own options and a ``question`` parameter, and receives
there the planning inputs the user gave (`QuestionText`). The signature is built when typer asks for it,
so a field added to `FIELDS` is an option of every such command at once (``docs/extending.md``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Annotated, Any, Optional

import typer

from ..planning.question import FIELDS, Field

SHORT = {"model": "-m", "workload": "-w"}
"""Short aliases of planning inputs' flags."""

_TYPES = {"str": str, "int": int, "float": float}


def flag(name: str) -> str:
    """``link_efficiency`` -> ``--link-efficiency``: how the CLI spells a planning input."""
    return "--" + name.replace("_", "-")


def field_help(f: Field) -> str:
    """The field's help with every input it names (in backticks) shown as that input's flag."""
    from ..errors import INPUT_NAME

    return INPUT_NAME.sub(lambda m: flag(m[1]) if m[1] in FIELDS else m[0], f.help)


def field_option(name: str, *, default: Any = ..., listed: bool = False):
    """The ``Annotated`` option type of planning input ``name`` (``listed``: a repeatable option, a list of
    values); ``default`` only decides whether the type is Optional (None: it is)."""
    f = FIELDS[name]
    kind = f.choices if f.choices is not None else _TYPES[f.kind]
    default = f.default if default is ... else default
    opts = (flag(name),) + ((SHORT[name],) if name in SHORT else ())
    extra = {"min": f.minimum} if f.minimum is not None else {}
    if listed:
        kind = list[kind]
    if default is None:
        kind = Optional[kind]
    return Annotated[kind, typer.Option(*opts, help=field_help(f), **extra)]


@dataclass(frozen=True)
class QuestionText:
    """The planning inputs of one command line: ``given`` those the user typed (what
    `prfaas_plan.planning.question.Question.parse` takes; the rest keep their field defaults)."""

    given: dict[str, Any]

    def parse(self):
        """The `Question` of these inputs."""
        from ..planning.question import Question

        return Question.parse(**self.given)


class question_command:
    """Decorator: ``fn(question: QuestionText, <its own options>)`` becomes a command taking every field of
    `FIELDS` as an option, in ``order`` (option names, the command's own included; a field not named
    there follows the last field named, so a new field needs no edit here)."""

    def __init__(self, order: tuple[str, ...], omit: tuple[str, ...] = ()):
        self.order, self.omit = order, omit

    def __call__(self, fn):
        return _QuestionCommand(fn, self.order, self.omit)


class _QuestionCommand:
    def __init__(self, fn, order, omit):
        self.fn, self.order, self.omit = fn, order, omit
        self.__name__, self.__doc__, self.__module__ = fn.__name__, fn.__doc__, fn.__module__
        self.__qualname__ = fn.__qualname__

    def _fields(self) -> list[str]:
        return [n for n in FIELDS if n not in self.omit]

    def _parameters(self) -> list[inspect.Parameter]:
        own = [p for p in inspect.signature(self.fn, eval_str=True).parameters.values() if p.name != "question"]
        fields = {n: inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=field_option(n),
                                       default=FIELDS[n].default) for n in self._fields()}
        params = {p.name: p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own}
        named = [n for n in self.order if n in fields or n in params]
        last_field = max((i for i, n in enumerate(named) if n in fields), default=len(named) - 1)
        unnamed = [n for n in fields if n not in named] + [n for n in params if n not in named]
        names = named[:last_field + 1] + unnamed + named[last_field + 1:]
        return [fields[n] if n in fields else params[n] for n in names]

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.Signature(self._parameters())

    @property
    def __annotations__(self) -> dict[str, Any]:
        return {p.name: p.annotation for p in self._parameters()}

    def __call__(self, **kwargs):
        from click import get_current_context

        ctx = get_current_context()
        given = {}
        for n in self._fields():
            value = kwargs.pop(n)
            source = ctx.get_parameter_source(n)
            if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
                given[n] = value.value if hasattr(value, "value") else value
        return self.fn(question=QuestionText(given), **kwargs)
