"""The validation layer of every input file: strict pydantic models, and their errors as one line.

Each input schema (model, hardware and layout profiles, HF configs) is a `Strict` pydantic model:
unknown keys are errors (with the closest known key suggested), types are strict (no ``"5"`` for 5, no
``5`` for a list), floats must be finite and physical ranges are declared on the field. `check` runs
a model on a mapping and turns the first `pydantic.ValidationError` into a `PlanError` naming the
file, the key path and the offending value, in one line — pydantic's own multi-line text never
reaches the user.

Import cost: this module (and with it ``pydantic.main``) is imported only when a file is validated, and
the schema classes are built the first time a file of their kind is read (`functools.cache` on their
factories); the start-up cost is measured by ``benchmarks/bench_cli.py``.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError

from ..errors import PlanError, closest_names
from ..units import plural

Name = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
Text = Annotated[str, StringConstraints(min_length=1, max_length=10_000)]   # sources, notes
LowerName = Annotated[str, StringConstraints(to_lower=True)]                # dtype names
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Efficiency = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


def with_unit(parse, pattern: str, description: str):
    """A text field holding a quantity with its unit, parsed by ``parse(text, what)`` (a
    `prfaas_plan.units` parser) into its value in SI units. A bare number is refused as on the command line
    (``rtt: 20`` -> "did you mean 20ms?"), not read as seconds or bit/s; JSON Schema gets ``pattern``."""

    def parsed(text: str):
        try:
            return parse(text, "")
        except PlanError as exc:
            raise ValueError(str(exc).strip()) from None

    def refuse_numbers(value):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            parsed(f"{value:g}" if isinstance(value, float) else str(value))  # the parser's "give a unit" hint
        return value

    return Annotated[str, BeforeValidator(refuse_numbers), AfterValidator(parsed),
                     Field(pattern=None, description=description, json_schema_extra={"pattern": pattern})]


class Strict(BaseModel):
    """Base of every input schema: unknown keys rejected, strict types, no NaN or infinity."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def _value_text(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _loc_text(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            text = text if text.isprintable() else repr(text)   # a key with a newline stays on one line
            out += ("." if out else "") + text
    return out


def _strip(annotation: Any) -> Any:
    """``Annotated[X, ...]`` -> X and ``X | None`` -> X; other annotations unchanged."""
    while True:
        if typing.get_origin(annotation) is Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        args = typing.get_args(annotation)
        if _is_union(annotation) and type(None) in args:
            rest = [a for a in args if a is not type(None)]
            if len(rest) == 1:
                annotation = rest[0]
                continue
        return annotation


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _walk(schema: type[BaseModel], loc: tuple) -> tuple[tuple, Any]:
    """The user's key path for pydantic's ``loc`` (without the tags pydantic inserts for the members of
    a union, such as ``'list[int]'`` or ``'LayerRange'``), and the annotation found at its end."""
    clean: list = []
    current: Any = schema
    for part in loc:
        current = _strip(current)
        if _is_union(current):  # this part names the union member that failed: not a key of the file
            members = [a for a in typing.get_args(current) if a is not type(None)]
            current = next((m for m in members if getattr(_strip(m), "__name__", None) == part), None)
            continue
        clean.append(part)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part) if isinstance(part, str) else None
            current = field.annotation if field is not None else None
        elif typing.get_origin(current) is list:
            current = typing.get_args(current)[0]
        elif typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        else:
            current = None
    return tuple(clean), _strip(current)


def error_line(exc: ValidationError, schema: type[BaseModel], where: str, prefix: tuple = ()) -> str:
    """One line for the first problem pydantic found: ``FILE: KEY: PROBLEM, not VALUE``."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc_in_schema, _ = _walk(schema, tuple(first["loc"]))
    loc = prefix + loc_in_schema
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    if first["type"] == "extra_forbidden":
        _, parent_schema = _walk(schema, loc_in_schema[:-1])
        known = (list(parent_schema.model_fields) if isinstance(parent_schema, type)
                 and issubclass(parent_schema, BaseModel) else [])
        key = str(loc[-1])
        parent = _loc_text(loc[:-1])
        under = f" under {parent}" if parent else ""
        hint = f"; {closest_names(key, known)}" if known else ""
        return f"{where}: unknown key {key!r}{under}{hint}{more}"
    if first["type"] == "missing":
        missing = [e for e in errors if e["type"] == "missing"]
        names = ", ".join(repr(_loc_text(prefix + _walk(schema, tuple(e["loc"]))[0])) for e in missing)
        rest = len(errors) - len(missing)
        more = f" (and {rest} more problem{'s' if rest > 1 else ''})" if rest else ""
        return f"{where}: missing field{'s' if len(missing) > 1 else ''} {names}{more}"
    if first["type"] == "value_error":   # a parser's own message (`with_unit`): it names the value already
        return f"{where}: {_loc_text(loc) or 'file'} {_phrase(first)}{more}"
    return f"{where}: {_loc_text(loc) or 'file'} {_phrase(first)}, not {_value_text(first.get('input'))}{more}"


_PHRASES = {
    "greater_than": "must be > {gt}", "greater_than_equal": "must be >= {ge}",
    "less_than": "must be < {lt}", "less_than_equal": "must be <= {le}",
    "too_short": "must have at least {min_length} {min_length_items}",
    "too_long": "must have at most {max_length} {max_length_items}",
    "string_too_short": "must not be empty", "string_too_long": "must be at most {max_length} characters",
    "int_type": "must be a whole number", "int_from_float": "must be a whole number",
    "float_type": "must be a number", "string_type": "must be a string", "bool_type": "must be true or false",
    "list_type": "must be a list", "dict_type": "must be a mapping", "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping", "finite_number": "must be a finite number",
    "literal_error": "must be {expected}",
}


def _phrase(error: dict) -> str:
    template = _PHRASES.get(error["type"])
    if template is None:
        msg = error["msg"]
        return (msg[0].lower() + msg[1:]).replace("input should be", "must be").replace("value error, ", "")
    ctx = dict(error.get("ctx") or {})
    ctx.update({f"{k}_items": plural(ctx[k], "item") for k in ("min_length", "max_length") if k in ctx})
    return template.format(**ctx)


def check(schema: type[BaseModel], data: Any, where: str, prefix: tuple = ()):
    """Validate ``data`` against ``schema``; a `PlanError` of one line on the first problem."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise PlanError(error_line(exc, schema, where, prefix)) from None
    except RecursionError:
        raise PlanError(f"{where}: nested too deeply") from None
