"""Option values converted without pydantic, exactly as typer converts them.

Typer (0.2x) turns every option value into its annotated type through a pydantic ``TypeAdapter``
built on first use: about 1.5 ms per option of the running command (~50 ms for ``size``'s 33), and
an import of pydantic's validation machinery (~0.1 s) for commands that validate no input file. Our options are plain ``str``, ``int``, ``float``, ``bool``, ``StrEnum`` and
``list[str]`` values; `install` gives each such typer parameter a direct conversion that returns what
typer's adapter returns for the ordinary values a command line carries (a word, a decimal number
in range, a choice), and hands every other value to typer's own adapter, so a bad or unusual value
gets typer's conversion and typer's error message. ``tests/test_cli_coercion.py`` checks the two
agree on every parameter of every command. With a typer that has no such adapter layer (older
releases) `install` changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

_INT = re.compile(r"-?[0-9]{1,18}")
_DECIMAL = re.compile(r"-?[0-9]{1,18}(?:\.[0-9]{1,18})?")
_OTHER = object()   # "not an ordinary value": typer's adapter decides


def _plain_int(value: Any, ctx) -> Any:
    if type(value) is int:
        return value
    if type(value) is str and _INT.fullmatch(value):
        return int(value)
    return _OTHER


def _plain_float(value: Any, ctx) -> Any:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    if type(value) is str and _DECIMAL.fullmatch(value):
        return float(value)
    return _OTHER


def _plain_str(value: Any, ctx) -> Any:
    return value if type(value) is str else _OTHER


def _plain_bool(value: Any, ctx) -> Any:
    return value if type(value) is bool else _OTHER


def _str_list(value: Any, ctx) -> Any:
    ok = isinstance(value, (list, tuple)) and all(type(v) is str for v in value)
    return list(value) if ok else _OTHER


def _in_range(convert, low, high):
    def checked(value: Any, ctx) -> Any:
        out = convert(value, ctx)
        if out is _OTHER or (low is not None and out < low) or (high is not None and out > high):
            return _OTHER
        return out

    return checked


def _choice(choices: list, case_sensitive: bool):
    from typer._param_types import coerce_cli_choice

    def choose(value: Any, ctx) -> Any:
        try:
            return coerce_cli_choice(value, choices=choices, case_sensitive=case_sensitive, ctx=ctx)
        except ValueError:
            return _OTHER

    return choose


def _converter(descriptor):
    """``convert(value, ctx)`` of a parameter's ordinary values (`_OTHER` for the rest), or None when
    typer's adapter must convert them all."""
    info, annotation = descriptor.parameter_info, descriptor.annotation
    if descriptor.file_annotation is not None or info.parser is not None or info.clamp:
        return None
    if getattr(annotation, "__origin__", None) is list and annotation.__args__ == (str,):
        return _str_list
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return _choice(list(annotation), info.case_sensitive)
    simple = {bool: _plain_bool, str: _plain_str}
    if annotation in simple:
        return simple[annotation]
    if annotation is int:
        return _in_range(_plain_int, info.min, info.max)
    if annotation is float:
        return _in_range(_plain_float, info.min, info.max)
    return None


def install() -> None:
    """From now on, a typer parameter whose ordinary values need no adapter converts them directly
    (typer builds a parameter's conversion on its first value; this takes that place). Idempotent."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer.core import _TyperParameter
    except ImportError:  # pragma: no cover - a typer without pydantic adapters
        return
    if getattr(_TyperParameter.get_runtime_param, "direct", False):
        return

    @dataclass(frozen=True)
    class Direct(RuntimeParam):
        """Typer's runtime parameter, with the ordinary values converted by ``convert``."""

        convert: Callable[[Any, Any], Any]
        descriptor: Any

        def _coerce_value(self, value, param, ctx):
            out = self.convert(value, ctx)
            if out is not _OTHER:
                return out
            adapter = build_runtime_param(self.descriptor)
            param._runtime_param = adapter
            return adapter._coerce_value(value, param=param, ctx=ctx)

    typers_own = _TyperParameter.get_runtime_param

    def get_runtime_param(self):
        if self._runtime_param is None:
            convert = _converter(self.type_descriptor)
            if convert is not None:
                self._runtime_param = Direct(self.type_descriptor.parameter_info, self.type_descriptor.annotation,
                                             convert, self.type_descriptor)
        return typers_own(self)

    get_runtime_param.direct = True
    _TyperParameter.get_runtime_param = get_runtime_param
