"""The click that typer runs on: typer >= 0.20 vendors it as ``typer._click``."""

try:
    from typer import _click as click
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - older typer
    import click
    from click import get_current_context

__all__ = ["click", "get_current_context"]
